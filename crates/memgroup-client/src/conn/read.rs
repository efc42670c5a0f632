//! The reading side of a connection: whoever holds the reader role — a
//! lone caller for its own reply, or the reader task while several are due —
//! reads the socket and delivers every complete reply where the state says.

use std::future::poll_fn;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::Poll;
use std::time::Instant;

use super::state::{Kept, Next, Reply, Watch};
use super::transport::Filled;
use super::{READ_BUFFER, READ_MIN_ROOM, ReadSide, Shared, timer};
use crate::error::{Error, ErrorKind};
use memgroup_proto::Response;

/// What a caller's read of the socket brought it.
pub(super) enum Read {
    /// Its own reply.
    Own(Result<Response, Error>),
    /// Not its reply yet (nothing, part of it, or others' replies).
    More,
    /// Nothing: it no longer holds the role (see [`Shared::read_some`]).
    NotMine,
}

impl Shared {
    /// As the holder of the reader role — the reader task (`caller`
    /// `None`), or the caller that took it in epoch `caller` — reads what the
    /// socket has (once; the reader waits for readiness again) and delivers
    /// every complete reply; the caller's own it returns.
    ///
    /// Returns [`Read::NotMine`], having read nothing, when the caller no
    /// longer holds the role: it waited for the read side meanwhile, and the
    /// reader task took the role, read this caller's reply and let it go
    /// (another lone caller may hold it since). The bytes now on the socket
    /// are not its to read: their owner would not be woken for a reply
    /// delivered behind its back. The caller's reply then comes on the
    /// channel the state keeps for it ([`State::watch_reader`]).
    ///
    /// [`State::watch_reader`]: super::state::State::watch_reader
    pub(super) fn read_some(&self, caller: Option<u64>) -> Read {
        let mut side = self.read_side.lock();
        if let Some(epoch) = caller
            && !self.state.lock().may_read(epoch)
        {
            return Read::NotMine;
        }
        match self.read_into(&mut side, caller) {
            Some(own) => Read::Own(own),
            None => Read::More,
        }
    }

    /// [`Shared::read_some`] with the read side held; returns the reply of
    /// the caller reading in epoch `caller`, when it came.
    fn read_into(
        &self,
        side: &mut ReadSide,
        caller: Option<u64>,
    ) -> Option<Result<Response, Error>> {
        let ReadSide { buf, decoder } = side;
        if buf.capacity() - buf.len() < READ_MIN_ROOM {
            buf.reserve(READ_BUFFER);
        }
        match self.transport.fill(buf) {
            Ok(Filled::Eof) => {
                let error = Error::new(ErrorKind::Connection, "connection closed by the server");
                self.fail(&error.at(&self.server));
                return None;
            }
            Ok(Filled::Bytes(n)) => self.counters.bytes_in(n),
            Ok(Filled::Blocked) => return None,
            Err(error) => {
                self.fail(&error.at(&self.server));
                return None;
            }
        }
        let mut own = None;
        loop {
            // Nothing left to decode (the usual end: every byte read was
            // replies): no lock to take. Room wakes are taken where they
            // are made, in the same lock (`queue`, `reply` below).
            if buf.is_empty() {
                return own;
            }
            // One lock per reply: what it expects, then (decoded, a few
            // hundred nanoseconds) whose it is.
            let mut state = self.state.lock();
            let Some(expect) = state.expect() else {
                drop(state);
                let error = Error::new(
                    ErrorKind::Protocol,
                    format!("{} unsolicited bytes from the server", buf.len()),
                );
                self.fail(&error.at(&self.server));
                return own;
            };
            let decoded = decoder.decode(buf, expect);
            let (reply_to, next) = match &decoded {
                Ok(Some(_)) => state.reply(),
                _ => (None, Next::Nothing),
            };
            let room = state.take_room_wakes();
            drop(state);
            // Callers waiting for a place: one woken per place freed.
            for _ in 0..room {
                self.room.notify_one();
            }
            match decoded {
                Ok(Some(reply)) => {
                    match reply_to {
                        // Read by its own caller; by anyone else, its caller
                        // gave up.
                        Some(Reply::Own(epoch)) if caller == Some(epoch) => own = Some(Ok(reply)),
                        Some(reply_to) => reply_to.deliver(Ok(reply)),
                        None => {}
                    }
                    self.follow(next);
                }
                Ok(None) => return own,
                Err(e) => {
                    let error =
                        Error::new(ErrorKind::Protocol, "malformed reply; connection closed")
                            .at(&self.server)
                            .with_source(e);
                    self.fail(&error);
                    return own;
                }
            }
        }
    }

    /// As a caller holding the reader role: reads until its own reply is in,
    /// handed over by its own read (no channel). It has no timer of its own:
    /// the connection's timer tells it that its deadline passed, as a
    /// failure does, through what the state keeps for it and the waker it
    /// leaves there ([`State::watch_reader`]). Once the reader task takes the
    /// role over (a second caller waits), it waits for its reply on the
    /// channel the state made for it, as the others do.
    ///
    /// [`State::watch_reader`]: super::state::State::watch_reader
    pub(super) async fn read_own(&self, epoch: u64, deadline: Instant) -> Result<Response, Error> {
        // Hands the role on however this ends (reply, failure, or the caller
        // giving up).
        let _role = ReaderRole(self, epoch);
        // Reads until its reply is in (`Ok`), or until it no longer holds
        // the role (`Err`: its reply comes on this channel).
        let reading = poll_fn(|cx| {
            loop {
                // The waker first: a timeout, a failure or the reader task
                // taking over, told after this look, wakes this caller.
                match self.state.lock().watch_reader(epoch, cx.waker()) {
                    Watch::Reading => {}
                    Watch::Kept(Kept::Failed(error)) => return Poll::Ready(Ok(Err(error))),
                    Watch::Kept(Kept::Handed(receiver)) => return Poll::Ready(Err(receiver)),
                    Watch::Gone => return Poll::Ready(Ok(Err(super::closed().at(&self.server)))),
                }
                // Ready or not, this counts against the task's budget: a peer
                // that keeps the socket readable (an endless reply) does not
                // keep the worker's other tasks from their turn.
                match self.transport.poll_readable(cx) {
                    Poll::Ready(Ok(())) => match self.read_some(Some(epoch)) {
                        Read::Own(reply) => return Poll::Ready(Ok(reply)),
                        // Look again (what the state kept for it, if anything).
                        Read::More | Read::NotMine => {}
                    },
                    Poll::Ready(Err(e)) => {
                        let error = Error::new(ErrorKind::Connection, "read failed");
                        self.fail(&error.at(&self.server).with_source(e));
                    }
                    Poll::Pending => return Poll::Pending,
                }
            }
        });
        // Polled again without its reply (its own `select!`, a manual poll)
        // past its deadline, it times out then, like any caller.
        let receiver = match timer::watched(self, deadline, reading).await {
            Ok(reply) => return reply,
            Err(receiver) => receiver,
        };
        match timer::watched(self, deadline, receiver).await {
            Ok(reply) => reply,
            Err(_) => Err(super::closed().at(&self.server)),
        }
    }
}

/// Held by a caller reading its own reply (with the epoch it took the reader
/// role in); passes the role on when dropped.
struct ReaderRole<'a>(&'a Shared, u64);

impl Drop for ReaderRole<'_> {
    fn drop(&mut self) {
        if self.0.state.lock().reader_release(self.1) {
            self.0.wake_reader.notify_one();
        }
    }
}

/// The reader task: reads while it holds the reader role, handed to it by a
/// caller that got its own reply (or gave up) while others were still due;
/// lets the role go when no reply is due.
pub(super) async fn read_loop(shared: Arc<Shared>) {
    loop {
        shared.wake_reader.notified().await;
        loop {
            if shared.failed.load(Ordering::Acquire) {
                return;
            }
            if shared.state.lock().reader_task_done() {
                break;
            }
            match shared.transport.readable().await {
                Ok(()) => {
                    shared.read_some(None);
                }
                Err(e) => {
                    let error = Error::new(ErrorKind::Connection, "read failed").at(&shared.server);
                    return shared.fail(&error.with_source(e));
                }
            }
            // Yield now and then under an endless stream (see `read_own`).
            tokio::task::coop::consume_budget().await;
        }
    }
}
