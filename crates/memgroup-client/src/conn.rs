//! One pipelined connection to one memcached server.
//!
//! Many callers share a connection. A caller encodes its request straight
//! into the connection's pending-output buffer and, in the same critical
//! section, queues a waiter holding what reply it expects. Whoever holds the
//! writer role writes everything queued so far with one `write` call, so
//! concurrent requests coalesce: when nobody is writing, the caller itself
//! takes the role and writes without blocking (`try_write`, no task switch);
//! otherwise, or when the socket buffer is full, a writer task does it. A
//! reader task decodes replies and hands each to the oldest waiter
//! (text-protocol replies come back in request order).
//!
//! **Cancellation and timeouts never desynchronise the stream**: a caller that
//! gives up (its future is dropped or times out) leaves its waiter in the
//! queue; the reader still reads that reply and discards it, so the next reply
//! goes to the right caller. Only a broken stream (I/O error, EOF, a reply
//! that does not parse) closes the connection, and then every waiting caller
//! fails at once with a connection or protocol error.
//!
//! A semaphore caps the requests in flight per connection: callers beyond the
//! cap wait (inside their timeout) instead of growing queues without bound.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use memgroup_proto::{Decoder, Expect, Limits, Request, Response};
use parking_lot::Mutex;
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, oneshot};
use tokio::task::JoinHandle;

use crate::error::{Error, ErrorKind};

/// Settings of one connection.
#[derive(Debug, Clone)]
pub(crate) struct ConnSettings {
    pub(crate) connect_timeout: Duration,
    pub(crate) nodelay: bool,
    pub(crate) max_in_flight: usize,
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
    permits: Arc<Semaphore>,
    socket: OwnedWriteHalf,
}

#[derive(Debug, Default)]
struct State {
    /// Bytes a caller could not write without blocking; they go before `out`.
    front: BytesMut,
    /// Encoded requests not yet handed to the socket.
    out: BytesMut,
    /// Someone (a caller or the writer task) is writing: others only queue.
    writing: bool,
    /// Requests written or about to be, oldest first, awaiting replies.
    waiters: VecDeque<Waiter>,
    /// Set once the connection failed; every later call fails with it.
    closed: Option<Error>,
}

#[derive(Debug)]
struct Waiter {
    expect: Expect,
    reply: oneshot::Sender<Result<Response, Error>>,
    /// Released when the reply arrives (or the connection fails).
    _permit: OwnedSemaphorePermit,
}

impl Shared {
    /// Writes `chunk` without blocking, as the holder of the writer role;
    /// what does not fit in the socket buffer is handed to the writer task.
    fn write_now(&self, mut chunk: BytesMut) {
        while !chunk.is_empty() {
            match self.socket.try_write(&chunk) {
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
        let mut state = self.state.lock();
        state.writing = false;
        let more = !chunk.is_empty() || !state.out.is_empty();
        if !chunk.is_empty() {
            state.front = chunk;
        }
        drop(state);
        if more {
            self.wake_writer.notify_one();
        }
    }

    /// Closes the connection: every waiter fails with `error`.
    fn fail(&self, error: &Error) {
        let waiters = {
            let mut state = self.state.lock();
            if state.closed.is_none() {
                state.closed = Some(error.clone());
            }
            std::mem::take(&mut state.waiters)
        };
        for w in waiters {
            let _ = w.reply.send(Err(error.clone()));
        }
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
        let shared = Arc::new(Shared {
            server: server.into(),
            state: Mutex::new(State::default()),
            wake_writer: Notify::new(),
            permits: Arc::new(Semaphore::new(settings.max_in_flight.max(1))),
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
        self.inner.shared.state.lock().closed.is_some()
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
        let (receiver, chunk) = {
            let mut state = shared.state.lock();
            if let Some(error) = &state.closed {
                return Err(error.clone());
            }
            request.encode(&mut state.out);
            let receiver = match request.expect() {
                Some(expect) => {
                    let (reply, receiver) = oneshot::channel();
                    state.waiters.push_back(Waiter {
                        expect,
                        reply,
                        _permit: permit,
                    });
                    Some(receiver)
                }
                None => None,
            };
            // Take the writer role if it is free: everything queued goes out
            // in this caller's write.
            let chunk = (!state.writing && state.front.is_empty()).then(|| {
                state.writing = true;
                state.out.split()
            });
            (receiver, chunk)
        };
        match chunk {
            Some(chunk) => shared.write_now(chunk),
            None => shared.wake_writer.notify_one(),
        }
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

async fn write_loop(shared: Arc<Shared>) {
    let mut chunk = BytesMut::with_capacity(16 * 1024);
    loop {
        let idle = {
            let state = shared.state.lock();
            if state.closed.is_some() {
                return;
            }
            // A caller is writing (it wakes us if it leaves anything), or
            // there is nothing to write.
            state.writing || (state.front.is_empty() && state.out.is_empty())
        };
        if idle {
            shared.wake_writer.notified().await;
            continue;
        }
        {
            let mut state = shared.state.lock();
            if state.writing {
                continue;
            }
            state.writing = true;
            // Swap buffers: callers keep encoding into a fresh one while this
            // one is written, and its allocation is reused next round.
            chunk.clear();
            let front = std::mem::take(&mut state.front);
            chunk.extend_from_slice(&front);
            chunk.extend_from_slice(&state.out);
            state.out.clear();
        }
        while !chunk.is_empty() {
            let written = match shared.socket.writable().await {
                Ok(()) => shared.socket.try_write(&chunk),
                Err(e) => Err(e),
            };
            match written {
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
        shared.state.lock().writing = false;
    }
}

async fn read_loop(shared: Arc<Shared>, mut socket: OwnedReadHalf, mut decoder: Decoder) {
    let mut buf = BytesMut::with_capacity(64 * 1024);
    loop {
        // Hand out every complete reply in the buffer.
        loop {
            let expect = shared.state.lock().waiters.front().map(|w| w.expect);
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
                    let waiter = shared.state.lock().waiters.pop_front();
                    if let Some(w) = waiter {
                        // The caller may have given up: then the reply is dropped here.
                        let _ = w.reply.send(Ok(reply));
                    }
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
        if buf.capacity() - buf.len() < 4096 {
            buf.reserve(64 * 1024);
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
