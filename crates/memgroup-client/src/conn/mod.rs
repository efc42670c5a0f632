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
//! gives up (its future is dropped) or whose deadline passes (the
//! connection's [`timer`](crate::conn::timer) tells it) leaves its waiter in
//! the queue; the reader still reads that reply and discards it, so the next
//! reply goes to the right caller. Only a broken stream (I/O error, EOF, a reply
//! that does not parse) closes the connection, and then every waiting caller
//! fails at once with a connection or protocol error.
//!
//! Requests sent with `noreply` get no waiter: pairing relies on the server
//! staying silent for them. memcached 1.6 answers a `noreply` command only
//! when its data block does not match its declared length (checked by hand:
//! an over-size value is swallowed silently), which the encoder never
//! produces.
//!
//! The requests in flight per connection are capped: the state counts the
//! callers holding a place (under the lock it takes anyway), and callers
//! beyond the cap wait (inside their timeout) for a reply to free one,
//! instead of growing queues without bound. The state also adds each change
//! of that count to its slot's atomic, which the pool reads without a lock
//! to prefer an idle connection at light load.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::{Buf, BytesMut};
use memgroup_proto::{Decoder, Request, Response};
use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::counters::ServerCounters;
use crate::error::{Error, ErrorKind};

mod idle;
mod login;
pub(crate) mod merge;
mod open;
pub(crate) mod probe;
mod read;
pub(crate) mod state;
mod timer;
#[cfg(feature = "tls")]
pub(crate) mod tls;
mod transport;

pub use login::Credentials;
pub(crate) use open::{ConnSettings, open};
use state::{Next, Queued, State};
pub(crate) use transport::Stream;
use transport::{Transport, write_failed, write_zero};

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
    tasks: [JoinHandle<()>; 3],
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
    /// Tells the timer task to look at the state's deadline again.
    wake_timer: Notify,
    /// Used only by the holder of the reader role (and, while nobody holds
    /// it, by [`Shared::idle_check`]).
    read_side: Mutex<ReadSide>,
    transport: Transport,
    /// Set when the state closes, readable without the lock: writers stop
    /// writing at once, so nothing is sent after callers were told it failed.
    failed: AtomicBool,
    /// Wakes a caller waiting for a place (the cap on callers in flight,
    /// counted by the state) when a reply frees one, and all of them when the
    /// connection fails.
    room: Notify,
    /// The server's counters: bytes in and out.
    counters: Arc<ServerCounters>,
    /// Whether the server speaks the meta protocol; if not, meta requests
    /// go as their classic forms ([`probe`]).
    meta: bool,
}

/// The reading end's buffer and decoder.
#[derive(Debug)]
struct ReadSide {
    buf: BytesMut,
    decoder: Decoder,
}

impl Shared {
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
        loop {
            // Encrypted records the socket did not take (TLS): the writer
            // task must flush them.
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
            // What other callers queued meanwhile may be this caller's to
            // write too.
            match self.state.lock().caller_wrote(chunk, owed) {
                Next::Write(more) => chunk = more,
                next => return self.follow(next),
            }
        }
    }

    /// Closes the connection: every waiter fails with `error`.
    fn fail(&self, error: &Error) {
        let (replies, reader) = {
            let mut state = self.state.lock();
            self.failed.store(true, Ordering::Release);
            #[cfg(feature = "tracing")]
            if state.closed().is_none() {
                log_close(error);
            }
            (state.fail(error), state.take_reader_waker())
        };
        for reply in replies {
            reply.deliver(Err(error.clone()));
        }
        if let Some(reader) = reader {
            reader.wake();
        }
        // Callers waiting for a place find the connection closed.
        self.room.notify_waiters();
        // The tasks, if they wait, see the state closed and end.
        self.wake_writer.notify_one();
        self.wake_reader.notify_one();
        self.wake_timer.notify_one();
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

impl Connection {
    /// Connects to `server` (`host:port`) within the connect timeout.
    /// `callers` is where its count of callers holding a place is added up
    /// ([`State::with_busy`]): its slot's, shared with the connections the
    /// slot held before.
    pub(crate) async fn connect(
        server: &str,
        settings: &ConnSettings,
        counters: Arc<ServerCounters>,
        callers: Arc<std::sync::atomic::AtomicUsize>,
    ) -> Result<Connection, Error> {
        let (stream, meta) = probe::open_asking(server, settings, &counters).await?;
        let transport = stream.into_transport();
        let mut state = State::new(settings.max_batches, settings.merge_gets)
            .with_max_callers(settings.max_in_flight)
            .with_busy(callers);
        if transport.is_tls() {
            state = state.with_max_unanswered_bytes(TLS_MAX_UNANSWERED_BYTES);
        }
        let shared = Arc::new(Shared {
            server: server.into(),
            state: Mutex::new(state),
            wake_writer: Notify::new(),
            wake_reader: Notify::new(),
            wake_timer: Notify::new(),
            read_side: Mutex::new(ReadSide {
                buf: BytesMut::with_capacity(READ_BUFFER),
                decoder: Decoder::new(settings.limits),
            }),
            transport,
            failed: AtomicBool::new(false),
            room: Notify::new(),
            counters,
            meta,
        });
        let reader = tokio::spawn(guarded(shared.clone(), read::read_loop(shared.clone())));
        let writer = tokio::spawn(guarded(shared.clone(), write_loop(shared.clone())));
        let timer = tokio::spawn(guarded(shared.clone(), timer::timer_loop(shared.clone())));
        Ok(Connection {
            inner: Arc::new(Inner {
                shared,
                tasks: [reader, writer, timer],
            }),
        })
    }

    /// Closes the connection now: every request on it fails with `error`
    /// (the server stopped answering: its callers move on at once).
    pub(crate) fn abort(&self, error: &Error) {
        self.inner.shared.fail(error);
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

    /// Sends `request` and waits for its reply until `deadline`, then fails
    /// with a timeout ([`ErrorKind::Timeout`]; the connection's timer says
    /// so, and the reply, when it comes, is read and dropped). Requests
    /// without a reply (`noreply`, `quit`) return `Ok(None)` once queued for
    /// writing.
    ///
    /// Cancel-safe: dropping the future at any point leaves the connection in
    /// sync (see the module docs).
    ///
    /// On a server without the meta protocol a meta request goes as its
    /// classic form, its reply read back as the meta reply, or fails with
    /// [`ErrorKind::Unsupported`] unsent ([`probe`]).
    pub(crate) async fn call(
        &self,
        request: &Request<'_>,
        deadline: std::time::Instant,
    ) -> Result<Option<Response>, Error> {
        if !self.inner.shared.meta && request.is_meta() {
            // Boxed: the rare path stays out of every call's future.
            return Box::pin(self.call_classic(request, deadline)).await;
        }
        self.send(request, deadline).await
    }

    /// Sends `request` as it is (see [`Connection::call`]).
    pub(super) async fn send(
        &self,
        request: &Request<'_>,
        deadline: std::time::Instant,
    ) -> Result<Option<Response>, Error> {
        let shared = &self.inner.shared;
        let Queued {
            receiver,
            next,
            reads,
            wake_reader,
            wake_timer,
            wake_caller,
            encoded,
        } = loop {
            let (queued, room) = {
                let mut state = shared.state.lock();
                let in_flight = state.callers() + 1;
                let queued = state.queue(request, in_flight, deadline)?;
                (queued, state.take_room_wakes())
            };
            for _ in 0..room {
                shared.room.notify_one();
            }
            match queued {
                Some(queued) => break queued,
                // Every place is taken (rare): wait, with a timer of its own,
                // for a reply to free one. (Boxed: its timer stays out of
                // every call's future.)
                None => Box::pin(shared.wait_for_room(deadline)).await?,
            }
        };
        shared.counters.bytes_out(encoded);
        // The write first (at most a few non-blocking writes, see
        // `CALLER_EXTRA_WRITES`): a reader woken before the request is out
        // would find nothing to read.
        shared.follow(next);
        if wake_reader {
            shared.wake_reader.notify_one();
        }
        if wake_timer {
            shared.wake_timer.notify_one();
        }
        if let Some(caller) = wake_caller {
            caller.wake();
        }
        match (reads, receiver) {
            (Some(epoch), _) => shared.read_own(epoch, deadline).await.map(Some),
            // The connection's timer tells this caller when its deadline
            // passes (no timer of its own).
            (None, Some(receiver)) => match timer::watched(shared, deadline, receiver).await {
                Ok(reply) => reply.map(Some),
                Err(_) => Err(closed().at(&shared.server)),
            },
            (None, None) => Ok(None),
        }
    }
}

impl Shared {
    /// Waits until a reply frees a place (the state counted this caller as
    /// waiting for one), the connection fails, or `deadline` passes.
    async fn wait_for_room(&self, deadline: std::time::Instant) -> Result<(), Error> {
        // However this ends (woken, timed out, or the caller giving up), the
        // caller no longer waits; it tries again to queue.
        let _waiting = RoomWait(self);
        let room = self.room.notified();
        tokio::pin!(room);
        // Registered before looking at `failed`: a failure after the look
        // wakes it (`notify_waiters` keeps no permit for later).
        room.as_mut().enable();
        if self.failed.load(Ordering::Acquire) {
            return Ok(());
        }
        match tokio::time::timeout_at(deadline.into(), room).await {
            Ok(()) => Ok(()),
            Err(_) => Err(timer::timed_out().at(&self.server)),
        }
    }
}

/// A caller waiting for a place on the connection; counted off when dropped.
struct RoomWait<'a>(&'a Shared);

impl Drop for RoomWait<'_> {
    fn drop(&mut self) {
        self.0.state.lock().leave_room_queue();
    }
}

/// The error of a request whose connection closed before its reply.
fn closed() -> Error {
    Error::new(ErrorKind::Connection, "connection closed")
}

/// Runs one of the connection's tasks. However it ends — its loop returns
/// (the connection failed) or its runtime drops it (shut down, with a
/// client that outlives it) — the connection fails: nobody would read it or
/// watch its deadlines any more, so the pool replaces it.
async fn guarded(shared: Arc<Shared>, task: impl std::future::Future<Output = ()>) {
    let _ended = TaskEnded(shared);
    task.await;
}

/// Fails its connection when dropped (see [`guarded`]).
struct TaskEnded(Arc<Shared>);

impl Drop for TaskEnded {
    fn drop(&mut self) {
        self.0.fail(&Error::new(
            ErrorKind::Connection,
            "the connection's tasks ended (their runtime shut down)",
        ));
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
