//! One pipelined connection to one memcached server: the driver of the
//! connection's [`State`](crate::conn::state::State).
//!
//! Every decision — who writes, what goes in a batch, which caller a reply
//! belongs to — is a transition of the pure state machine in
//! [`state`](crate::conn::state), which documents the writer role and the
//! invariants. This module only moves bytes and wakes tasks: a caller queues
//! its request and, when the state hands it the writer role, writes at once
//! without blocking (`try_write`, no task switch); the writer task writes the
//! batches the state hands it, after yielding once so the callers that are
//! ready to run (typically those the reader just answered) queue first.
//! Replies are read by whoever holds the reader role: a lone caller reads its
//! own (no task switch between the reply and its caller), the reader task
//! reads while several are due. Either decodes replies and delivers each to
//! the waiter the state names.
//!
//! One `write` of 30 requests costs the client and the server about what one
//! request costs, and the server's replies come back in fewer, fuller reads.
//! Queued single-key `get`s also merge into one multi-key command
//! ([`merge`](crate::conn::merge)), which memcached answers with one `write`
//! instead of one per key.
//!
//! **Cancellation and timeouts never desynchronise the stream**: a caller that
//! gives up (its future is dropped or times out) leaves its waiter in the
//! queue; the reader still reads that reply and discards it, so the next reply
//! goes to the right caller. Only a broken stream (I/O error, EOF, a reply
//! that does not parse) closes the connection, and then every waiting caller
//! fails at once with a connection or protocol error.
//!
//! Requests sent with `noreply` get no waiter: pairing relies on the server
//! staying silent for them. memcached 1.6 answers a `noreply` command only
//! when its data block does not match its declared length (checked by hand:
//! an over-size value is swallowed silently), which the encoder never
//! produces.
//!
//! A semaphore caps the requests in flight per connection: callers beyond the
//! cap wait (inside their timeout) instead of growing queues without bound.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::{Buf, BytesMut};
use memgroup_proto::{Decoder, Request, Response};
use parking_lot::Mutex;
use tokio::sync::oneshot::{self, error::TryRecvError};
use tokio::sync::{Notify, Semaphore};
use tokio::task::JoinHandle;

use crate::counters::ServerCounters;
use crate::error::{Error, ErrorKind};

mod idle;
mod login;
pub(crate) mod merge;
mod open;
pub(crate) mod state;
#[cfg(feature = "tls")]
pub(crate) mod tls;
mod transport;

pub use login::Credentials;
pub(crate) use open::{ConnSettings, open};
use state::{Next, Queued, State};
pub(crate) use transport::Stream;
use transport::{Filled, Transport, write_failed, write_zero};

/// What the writer task's buffer starts at: a batch of ~300 small requests
/// fits without growing it.
const WRITE_BUFFER: usize = 16 * 1024;
/// What the reader reserves when its buffer runs low: room for many replies
/// (or a large value's first part) per `read` call.
const READ_BUFFER: usize = 64 * 1024;
/// Below this much free room the reader reserves more before reading, so a
/// `read` never returns a handful of bytes for want of space.
const READ_MIN_ROOM: usize = 4096;

/// Over TLS, memcached 1.6.18 stops processing a connection with more than
/// about 16 KB of requests unanswered until more bytes arrive (reproduced with
/// Python's ssl and with rustls). Batches are cut so that written requests
/// still unanswered stay within this (a single larger request goes alone).
const TLS_MAX_UNANSWERED_BYTES: usize = 15 * 1024;

/// A cloneable handle; the connection closes when the last handle is dropped.
#[derive(Debug, Clone)]
pub(crate) struct Connection {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    shared: Arc<Shared>,
    tasks: [JoinHandle<()>; 2],
}

impl Drop for Inner {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
        self.shared.fail(&Error::new(
            ErrorKind::Connection,
            "connection closed by the client",
        ));
    }
}

#[derive(Debug)]
struct Shared {
    server: Arc<str>,
    state: Mutex<State>,
    wake_writer: Notify,
    /// Hands the reader role to the reader task.
    wake_reader: Notify,
    /// Used only by the holder of the reader role (and, while nobody holds
    /// it, by [`Shared::idle_check`]).
    read_side: Mutex<ReadSide>,
    transport: Transport,
    /// Set when the state closes, readable without the lock: writers stop
    /// writing at once, so nothing is sent after callers were told it failed.
    failed: AtomicBool,
    /// The size of `permits`.
    max_in_flight: usize,
    permits: Arc<Semaphore>,
    /// The server's counters: bytes in and out.
    counters: Arc<ServerCounters>,
}

/// The reading end's buffer and decoder.
#[derive(Debug)]
struct ReadSide {
    buf: BytesMut,
    decoder: Decoder,
}

impl Shared {
    /// Callers holding an in-flight permit (requests queued or awaiting a
    /// reply, merged ones counted per caller).
    fn callers_in_flight(&self) -> usize {
        self.max_in_flight - self.permits.available_permits()
    }

    /// Does what a transition asked for.
    fn follow(&self, next: Next) {
        match next {
            Next::Nothing => {}
            Next::WakeWriter => self.wake_writer.notify_one(),
            Next::Write(chunk) => self.write_now(chunk),
        }
    }

    /// Writes `chunk` without blocking, as the caller holding the writer role;
    /// the state decides who sends the rest.
    fn write_now(&self, mut chunk: BytesMut) {
        // Encrypted records the socket did not take (TLS): the writer task
        // must flush them.
        let mut owed = false;
        while !chunk.is_empty() {
            if self.failed.load(Ordering::Acquire) {
                break;
            }
            match self.transport.try_write(&chunk) {
                Ok((0, _)) => return self.fail(&write_zero().at(&self.server)),
                Ok((n, left)) => {
                    chunk.advance(n);
                    owed = left;
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => return self.fail(&write_failed(e).at(&self.server)),
            }
        }
        let next = self.state.lock().caller_wrote(chunk, owed);
        self.follow(next);
    }

    /// As the holder of the reader role: reads what the socket has (once; the
    /// caller waits for readiness again) and delivers every complete reply.
    fn read_some(&self) {
        let mut side = self.read_side.lock();
        let ReadSide { buf, decoder } = &mut *side;
        if buf.capacity() - buf.len() < READ_MIN_ROOM {
            buf.reserve(READ_BUFFER);
        }
        match self.transport.fill(buf) {
            Ok(Filled::Eof) => {
                let error = Error::new(ErrorKind::Connection, "connection closed by the server");
                return self.fail(&error.at(&self.server));
            }
            Ok(Filled::Bytes(n)) => self.counters.bytes_in(n),
            Ok(Filled::Blocked) => return,
            Err(error) => return self.fail(&error.at(&self.server)),
        }
        loop {
            // One lock per reply: what it expects, then (decoded, a few
            // hundred nanoseconds) whose it is.
            let mut state = self.state.lock();
            let Some(expect) = state.expect() else {
                drop(state);
                if !buf.is_empty() {
                    let error = Error::new(
                        ErrorKind::Protocol,
                        format!("{} unsolicited bytes from the server", buf.len()),
                    );
                    return self.fail(&error.at(&self.server));
                }
                return;
            };
            let decoded = decoder.decode(buf, expect);
            let (reply_to, next) = match &decoded {
                Ok(Some(_)) => state.reply(),
                _ => (None, state::Next::Nothing),
            };
            drop(state);
            match decoded {
                Ok(Some(reply)) => {
                    if let Some(reply_to) = reply_to {
                        reply_to.deliver(Ok(reply));
                    }
                    self.follow(next);
                }
                Ok(None) => return,
                Err(e) => {
                    let error =
                        Error::new(ErrorKind::Protocol, "malformed reply; connection closed")
                            .at(&self.server)
                            .with_source(e);
                    return self.fail(&error);
                }
            }
        }
    }

    /// As a caller holding the reader role: reads until its own reply is in.
    async fn read_own(
        &self,
        mut receiver: oneshot::Receiver<Result<Response, Error>>,
        epoch: u64,
    ) -> Result<Response, Error> {
        // Hands the role on however this ends (reply, failure, or the caller
        // giving up).
        let _role = ReaderRole(self, epoch);
        loop {
            match receiver.try_recv() {
                Ok(reply) => return reply,
                Err(TryRecvError::Closed) => {
                    return Err(
                        Error::new(ErrorKind::Connection, "connection closed").at(&self.server)
                    );
                }
                Err(TryRecvError::Empty) => {}
            }
            match self.transport.readable().await {
                Ok(()) => self.read_some(),
                Err(e) => {
                    let error = Error::new(ErrorKind::Connection, "read failed").at(&self.server);
                    self.fail(&error.with_source(e));
                }
            }
            // A peer that keeps the socket readable (an endless reply) must
            // not keep this loop from yielding: the caller's timeout and the
            // worker's other tasks get their turn.
            tokio::task::coop::consume_budget().await;
        }
    }

    /// Closes the connection: every waiter fails with `error`.
    fn fail(&self, error: &Error) {
        let replies = {
            let mut state = self.state.lock();
            self.failed.store(true, Ordering::Release);
            #[cfg(feature = "tracing")]
            if state.closed().is_none() {
                log_close(error);
            }
            state.fail(error)
        };
        for reply in replies {
            reply.deliver(Err(error.clone()));
        }
        // The writer and reader tasks, if they wait, see the state closed and end.
        self.wake_writer.notify_one();
        self.wake_reader.notify_one();
    }
}

/// A connection closing, as a tracing event: a bad reply from the server is
/// a warning, the rest (closed, reset, dropped by the client) debug.
#[cfg(feature = "tracing")]
fn log_close(error: &Error) {
    if error.is_protocol() {
        tracing::warn!(error = %error.chain(), "malformed reply from memcached; connection closed");
    } else {
        tracing::debug!(error = %error.chain(), "connection closed");
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

impl Connection {
    /// Connects to `server` (`host:port`) within the connect timeout.
    pub(crate) async fn connect(
        server: &str,
        settings: &ConnSettings,
        counters: Arc<ServerCounters>,
    ) -> Result<Connection, Error> {
        let transport = open(server, settings).await?.into_transport();
        let mut state = State::new(settings.max_batches, settings.merge_gets);
        if transport.is_tls() {
            state = state.with_max_unanswered_bytes(TLS_MAX_UNANSWERED_BYTES);
        }
        let max_in_flight = settings.max_in_flight.max(1);
        let shared = Arc::new(Shared {
            server: server.into(),
            state: Mutex::new(state),
            wake_writer: Notify::new(),
            wake_reader: Notify::new(),
            read_side: Mutex::new(ReadSide {
                buf: BytesMut::with_capacity(READ_BUFFER),
                decoder: Decoder::new(settings.limits),
            }),
            transport,
            failed: AtomicBool::new(false),
            max_in_flight,
            permits: Arc::new(Semaphore::new(max_in_flight)),
            counters,
        });
        let reader = tokio::spawn(read_loop(shared.clone()));
        let writer = tokio::spawn(write_loop(shared.clone()));
        Ok(Connection {
            inner: Arc::new(Inner {
                shared,
                tasks: [reader, writer],
            }),
        })
    }

    /// Closes the connection now: every request on it fails with `error`
    /// (the server stopped answering: its callers move on at once).
    pub(crate) fn abort(&self, error: &Error) {
        self.inner.shared.fail(error);
    }

    /// The peer's address as configured.
    pub(crate) fn server(&self) -> &str {
        &self.inner.shared.server
    }

    /// Whether the connection has failed (without checking an idle one).
    pub(crate) fn is_failed(&self) -> bool {
        self.inner.shared.failed.load(Ordering::Acquire)
    }

    /// Requests written and awaiting a reply, and requests queued.
    pub(crate) fn load(&self) -> (usize, usize) {
        self.inner.shared.state.lock().load()
    }

    /// Whether the connection has failed (a new one must be made), checking
    /// an idle connection for a close by the server.
    pub(crate) fn is_closed(&self) -> bool {
        let shared = &self.inner.shared;
        shared.failed.load(Ordering::Acquire) || shared.idle_check()
    }

    /// Sends `request` and waits for its reply. Requests without a reply
    /// (`noreply`, `quit`) return `Ok(None)` once queued for writing.
    ///
    /// Cancel-safe: dropping the future at any point leaves the connection in
    /// sync (see the module docs).
    pub(crate) async fn call(&self, request: &Request<'_>) -> Result<Option<Response>, Error> {
        let shared = &self.inner.shared;
        let permit = shared
            .permits
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| Error::new(ErrorKind::Connection, "connection closed"))?;
        let in_flight = shared.callers_in_flight();
        let Queued {
            receiver,
            next,
            reads,
            wake_reader,
            encoded,
        } = shared.state.lock().queue(request, permit, in_flight)?;
        shared.counters.bytes_out(encoded);
        shared.follow(next);
        if wake_reader {
            shared.wake_reader.notify_one();
        }
        match (receiver, reads) {
            (Some(receiver), Some(epoch)) => shared.read_own(receiver, epoch).await.map(Some),
            (Some(receiver), None) => match receiver.await {
                Ok(reply) => reply.map(Some),
                Err(_) => {
                    Err(Error::new(ErrorKind::Connection, "connection closed").at(self.server()))
                }
            },
            (None, _) => Ok(None),
        }
    }
}

/// The writer task: sends batches while it holds the writer role, handed to
/// it (with a notification) by a caller, by a caller's unfinished write, or
/// by the reader when a batch's last reply arrives.
async fn write_loop(shared: Arc<Shared>) {
    let mut chunk = BytesMut::with_capacity(WRITE_BUFFER);
    loop {
        shared.wake_writer.notified().await;
        // Let the tasks that are ready to run now (typically the callers the
        // reader just answered) queue their next requests first, so they all
        // go out in one `write`.
        tokio::task::yield_now().await;
        loop {
            {
                let mut state = shared.state.lock();
                if state.closed().is_some() {
                    return;
                }
                if !state.writer_take(&mut chunk) {
                    break;
                }
            }
            let stop = || shared.failed.load(Ordering::Acquire);
            if let Err(error) = shared.transport.send(&mut chunk, stop).await {
                return shared.fail(&error.at(&shared.server));
            }
            if stop() {
                return;
            }
        }
    }
}

/// The reader task: reads while it holds the reader role, handed to it by a
/// caller that got its own reply (or gave up) while others were still due;
/// lets the role go when no reply is due.
async fn read_loop(shared: Arc<Shared>) {
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
                Ok(()) => shared.read_some(),
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
