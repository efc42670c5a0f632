//! One pipelined connection to one memcached server: the driver of the
//! connection's [`State`](crate::state::State).
//!
//! Every decision — who writes, what goes in a batch, which caller a reply
//! belongs to — is a transition of the pure state machine in
//! [`state`](crate::state), which documents the writer role and the
//! invariants. This module only moves bytes and wakes tasks: a caller queues
//! its request and, when the state hands it the writer role, writes at once
//! without blocking (`try_write`, no task switch); the writer task writes the
//! batches the state hands it, after yielding once so the callers that are
//! ready to run (typically those the reader just answered) queue first; the
//! reader task decodes replies and delivers each to the waiter the state
//! names.
//!
//! One `write` of 30 requests costs the client and the server about what one
//! request costs, and the server's replies come back in fewer, fuller reads.
//! Queued single-key `get`s also merge into one multi-key command
//! ([`merge`](crate::merge)), which memcached answers with one `write`
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
use std::time::Duration;

use bytes::BytesMut;
use memgroup_proto::{Decoder, Limits, Request, Response};
use parking_lot::Mutex;
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::{Notify, Semaphore};
use tokio::task::JoinHandle;

use crate::error::{Error, ErrorKind};
use crate::state::{Next, State};

/// What the writer task's buffer starts at: a batch of ~300 small requests
/// fits without growing it.
const WRITE_BUFFER: usize = 16 * 1024;
/// What the reader reserves when its buffer runs low: room for many replies
/// (or a large value's first part) per `read` call.
const READ_BUFFER: usize = 64 * 1024;
/// Below this much free room the reader reserves more before reading, so a
/// `read` never returns a handful of bytes for want of space.
const READ_MIN_ROOM: usize = 4096;

/// Settings of one connection.
#[derive(Debug, Clone)]
pub(crate) struct ConnSettings {
    pub(crate) connect_timeout: Duration,
    pub(crate) nodelay: bool,
    pub(crate) max_in_flight: usize,
    /// Written batches allowed without their last reply before requests wait.
    pub(crate) max_batches: usize,
    /// Whether queued single-key retrievals join into one command.
    pub(crate) merge_gets: bool,
    pub(crate) limits: Limits,
}

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
    /// Set when the state closes, readable without the lock: writers stop
    /// writing at once, so nothing is sent after callers were told it failed.
    failed: AtomicBool,
    /// The size of `permits`.
    max_in_flight: usize,
    permits: Arc<Semaphore>,
    socket: OwnedWriteHalf,
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
        while !chunk.is_empty() {
            if self.failed.load(Ordering::Acquire) {
                break;
            }
            match self.socket.try_write(&chunk) {
                Ok(0) => return self.fail(&write_zero(&self.server)),
                Ok(n) => {
                    let _ = chunk.split_to(n);
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => {
                    let error = Error::new(ErrorKind::Connection, "write failed").at(&self.server);
                    return self.fail(&error.with_source(e));
                }
            }
        }
        let next = self.state.lock().caller_wrote(chunk);
        self.follow(next);
    }

    /// Closes the connection: every waiter fails with `error`.
    fn fail(&self, error: &Error) {
        let replies = {
            let mut state = self.state.lock();
            self.failed.store(true, Ordering::Release);
            state.fail(error)
        };
        for reply in replies {
            reply.deliver(Err(error.clone()));
        }
        // The writer task, if it waits, sees the state closed and ends.
        self.wake_writer.notify_one();
    }
}

impl Connection {
    /// Connects to `server` (`host:port`) within the connect timeout.
    pub(crate) async fn connect(
        server: &str,
        settings: &ConnSettings,
    ) -> Result<Connection, Error> {
        let stream = match tokio::time::timeout(
            settings.connect_timeout,
            TcpStream::connect(server),
        )
        .await
        {
            Ok(Ok(stream)) => stream,
            Ok(Err(e)) => {
                return Err(Error::new(ErrorKind::Connection, "connect failed")
                    .at(server)
                    .with_source(e));
            }
            Err(_) => {
                return Err(Error::new(
                    ErrorKind::Timeout,
                    format!("connect timed out after {:?}", settings.connect_timeout),
                )
                .at(server));
            }
        };
        stream.set_nodelay(settings.nodelay).map_err(|e| {
            Error::new(ErrorKind::Connection, "setsockopt")
                .at(server)
                .with_source(e)
        })?;
        let (read, write) = stream.into_split();
        let max_in_flight = settings.max_in_flight.max(1);
        let shared = Arc::new(Shared {
            server: server.into(),
            state: Mutex::new(State::new(settings.max_batches, settings.merge_gets)),
            wake_writer: Notify::new(),
            failed: AtomicBool::new(false),
            max_in_flight,
            permits: Arc::new(Semaphore::new(max_in_flight)),
            socket: write,
        });
        let reader = tokio::spawn(read_loop(
            shared.clone(),
            read,
            Decoder::new(settings.limits),
        ));
        let writer = tokio::spawn(write_loop(shared.clone()));
        Ok(Connection {
            inner: Arc::new(Inner {
                shared,
                tasks: [reader, writer],
            }),
        })
    }

    /// The peer's address as configured.
    pub(crate) fn server(&self) -> &str {
        &self.inner.shared.server
    }

    /// Whether the connection has failed (a new one must be made).
    pub(crate) fn is_closed(&self) -> bool {
        self.inner.shared.failed.load(Ordering::Acquire)
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
        let (receiver, next) = shared.state.lock().queue(request, permit, in_flight)?;
        shared.follow(next);
        match receiver {
            Some(receiver) => match receiver.await {
                Ok(reply) => reply.map(Some),
                Err(_) => {
                    Err(Error::new(ErrorKind::Connection, "connection closed").at(self.server()))
                }
            },
            None => Ok(None),
        }
    }
}

fn write_zero(server: &str) -> Error {
    Error::new(ErrorKind::Connection, "the socket accepted no bytes").at(server)
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
            while !chunk.is_empty() {
                let written = match shared.socket.writable().await {
                    Ok(()) if shared.failed.load(Ordering::Acquire) => return,
                    Ok(()) => shared.socket.try_write(&chunk),
                    Err(e) => Err(e),
                };
                match written {
                    Ok(0) => return shared.fail(&write_zero(&shared.server)),
                    Ok(n) => {
                        let _ = chunk.split_to(n);
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(e) => {
                        shared.fail(
                            &Error::new(ErrorKind::Connection, "write failed")
                                .at(&shared.server)
                                .with_source(e),
                        );
                        return;
                    }
                }
            }
        }
    }
}

/// The reader task: decodes replies and hands each to the oldest waiter.
async fn read_loop(shared: Arc<Shared>, mut socket: OwnedReadHalf, mut decoder: Decoder) {
    let mut buf = BytesMut::with_capacity(READ_BUFFER);
    loop {
        // Hand out every complete reply in the buffer.
        loop {
            let expect = shared.state.lock().expect();
            let Some(expect) = expect else {
                if !buf.is_empty() {
                    let error = Error::new(
                        ErrorKind::Protocol,
                        format!("{} unsolicited bytes from the server", buf.len()),
                    );
                    return shared.fail(&error.at(&shared.server));
                }
                break;
            };
            match decoder.decode(&mut buf, expect) {
                Ok(Some(reply)) => {
                    let (reply_to, next) = shared.state.lock().reply();
                    if let Some(reply_to) = reply_to {
                        reply_to.deliver(Ok(reply));
                    }
                    shared.follow(next);
                }
                Ok(None) => break,
                Err(e) => {
                    let error =
                        Error::new(ErrorKind::Protocol, "malformed reply; connection closed")
                            .at(&shared.server)
                            .with_source(e);
                    return shared.fail(&error);
                }
            }
        }
        if buf.capacity() - buf.len() < READ_MIN_ROOM {
            buf.reserve(READ_BUFFER);
        }
        match socket.read_buf(&mut buf).await {
            Ok(0) => {
                let error = Error::new(ErrorKind::Connection, "connection closed by the server");
                return shared.fail(&error.at(&shared.server));
            }
            Ok(_) => {}
            Err(e) => {
                let error = Error::new(ErrorKind::Connection, "read failed").at(&shared.server);
                return shared.fail(&error.with_source(e));
            }
        }
    }
}
