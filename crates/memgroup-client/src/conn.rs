//! One pipelined connection to one memcached server.
//!
//! Many callers share a connection. A caller encodes its request straight
//! into the connection's pending-output buffer and, in the same critical
//! section, queues a waiter holding what reply it expects. A reader task
//! decodes replies and hands each to the oldest waiter (text-protocol replies
//! come back in request order).
//!
//! **Writes are batched.** Whoever holds the writer role writes everything
//! queued so far with one `write` call:
//! - When nothing is on the wire, or only a few callers
//!   (`DIRECT_WRITE_CALLERS`) have requests in flight, the caller takes the
//!   role and writes at once without blocking (`try_write`, no task switch):
//!   a lightly loaded connection adds no latency.
//! - Otherwise, while fewer than `max_batches` written batches await their
//!   last reply, the writer task takes the role. It first yields once, so the
//!   tasks that are ready to run (typically the callers the reader just
//!   answered) queue their next requests, and then writes them all together.
//! - With `max_batches` batches unanswered, requests queue, and the reader
//!   hands them to the writer task when a batch's last reply arrives.
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

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
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
use crate::merge::{self, Merged, ReplyTx};

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
    /// Set with `State::closed`, readable without the lock: writers stop
    /// writing at once, so nothing is sent after callers were told it failed.
    failed: AtomicBool,
    /// Written batches allowed without a reply before new requests wait.
    max_batches: usize,
    /// The size of `permits`.
    max_in_flight: usize,
    /// Whether queued single-key `get`s join into one command.
    merge_gets: bool,
    permits: Arc<Semaphore>,
    socket: OwnedWriteHalf,
}

#[derive(Debug, Default)]
struct State {
    /// Bytes a caller could not write without blocking; they go before `out`.
    front: BytesMut,
    /// Encoded requests not yet handed to the socket.
    out: BytesMut,
    /// The writer role is taken (by a caller writing now, or by the writer
    /// task, woken or about to be): others only queue.
    writing: bool,
    /// Written batches whose last reply has not arrived yet (the number of
    /// waiters with `ends_batch` set).
    batches: usize,
    /// Requests written or about to be, oldest first, awaiting replies.
    waiters: VecDeque<Waiter>,
    /// Set once the connection failed; every later call fails with it.
    closed: Option<Error>,
    /// See [`OpenGet`]; cleared whenever anything else is queued after it or
    /// `out` is taken for writing.
    open: Option<OpenGet>,
}

impl State {
    /// Encodes `request` into `out` (or joins it to the open `get`) and, if
    /// it expects a reply, queues its waiter. Returns where the reply will
    /// arrive.
    fn queue(
        &mut self,
        request: &Request<'_>,
        merge_gets: bool,
        permit: OwnedSemaphorePermit,
    ) -> Option<oneshot::Receiver<Result<Response, Error>>> {
        let Some(expect) = request.expect() else {
            request.encode(&mut self.out);
            self.open = None;
            return None;
        };
        let (tx, receiver) = oneshot::channel();
        let single = match request {
            Request::Get { keys: [key] } if merge_gets => Some((false, key)),
            Request::Gets { keys: [key] } if merge_gets => Some((true, key)),
            _ => None,
        };
        let joined = match single {
            Some((gets, key)) => self.join_open(gets, key.as_bytes(), tx, permit),
            None => Err((tx, permit)),
        };
        if let Err((tx, permit)) = joined {
            let start = self.out.len();
            request.encode(&mut self.out);
            self.open = single.map(|(gets, _)| OpenGet {
                start,
                gets,
                keys: 1,
            });
            self.waiters.push_back(Waiter {
                expect,
                ends_batch: false,
                reply: Some(Reply::One(tx, permit)),
            });
        }
        Some(receiver)
    }

    /// Who writes what was just queued (see the module docs).
    fn next_write(&mut self, shared: &Shared) -> Write {
        if self.writing || self.batches >= shared.max_batches {
            // The writer role's holder, or the reader when a batch's last
            // reply arrives, sends it.
            Write::Queued
        } else if self.front.is_empty()
            && (self.batches == 0 || shared.callers_in_flight() <= DIRECT_WRITE_CALLERS)
        {
            // Nothing (or little) on the wire: send at once, from this task.
            self.writing = true;
            let chunk = self.out.split();
            self.open = None;
            self.mark_batch();
            Write::Now(chunk)
        } else {
            self.writing = true;
            Write::Wake
        }
    }

    /// Joins a caller's single-key retrieval to the open `get`/`gets`, or
    /// hands the reply sender and permit back when it cannot.
    fn join_open(
        &mut self,
        gets: bool,
        key: &[u8],
        tx: ReplyTx,
        permit: OwnedSemaphorePermit,
    ) -> Result<(), (ReplyTx, OwnedSemaphorePermit)> {
        let Some(open) = self.open.as_mut() else {
            return Err((tx, permit));
        };
        let line = self.out.len() - open.start;
        if open.gets != gets
            || open.keys >= merge::MAX_KEYS
            || line + 1 + key.len() > merge::MAX_LINE
        {
            return Err((tx, permit));
        }
        let Some(waiter) = self.waiters.back_mut() else {
            return Err((tx, permit));
        };
        let mut merged = match waiter.reply.take() {
            Some(Reply::One(first, first_permit)) => {
                // The line is still `get <key>\r\n` / `gets <key>\r\n`.
                let verb = if gets { 4 } else { 3 };
                let first_key = &self.out[open.start + verb + 1..self.out.len() - 2];
                Box::new(Merged::new(first_key, first, first_permit))
            }
            Some(Reply::Merged(merged)) => merged,
            None => return Err((tx, permit)),
        };
        if merged.add(key, tx, permit) {
            let end = self.out.len() - 2;
            self.out.truncate(end);
            self.out.extend_from_slice(b" ");
            self.out.extend_from_slice(key);
            self.out.extend_from_slice(b"\r\n");
        }
        open.keys += 1;
        waiter.reply = Some(Reply::Merged(merged));
        Ok(())
    }

    /// Takes everything queued for the socket, as the holder of the writer
    /// role, and marks the newest waiter as the end of this batch.
    fn take_batch(&mut self, into: &mut BytesMut) {
        self.open = None;
        if self.front.is_empty() {
            std::mem::swap(into, &mut self.out);
        } else {
            std::mem::swap(into, &mut self.front);
            into.extend_from_slice(&self.out);
            self.out.clear();
        }
        self.mark_batch();
    }

    /// Marks the newest waiter as the last of the batch being written.
    fn mark_batch(&mut self) {
        if let Some(last) = self.waiters.back_mut() {
            if !last.ends_batch {
                last.ends_batch = true;
                self.batches += 1;
            }
        }
    }

    fn has_output(&self) -> bool {
        !self.front.is_empty() || !self.out.is_empty()
    }
}

#[derive(Debug)]
struct Waiter {
    expect: Expect,
    /// The last request of a batch written with one `write`.
    ends_batch: bool,
    /// `None` only for a moment while callers join a merged `get`.
    reply: Option<Reply>,
}

/// Who gets a reply.
#[derive(Debug)]
enum Reply {
    /// One caller, holding one in-flight permit (released with the reply).
    One(ReplyTx, OwnedSemaphorePermit),
    /// Several callers' `get`s merged into one command.
    Merged(Box<Merged>),
}

impl Reply {
    fn deliver(self, reply: Result<Response, Error>) {
        match self {
            // The caller may have given up: then the reply is dropped here.
            Reply::One(tx, _permit) => {
                let _ = tx.send(reply);
            }
            Reply::Merged(merged) => merged.deliver(reply),
        }
    }
}

/// The newest request in `out`, a `get`/`gets` that later single-key
/// retrievals may join.
#[derive(Debug, Clone, Copy)]
struct OpenGet {
    /// Where its line starts in `out`.
    start: usize,
    gets: bool,
    keys: usize,
}

/// Up to this many callers in flight on a connection (this one included), a
/// caller writes its request at once even behind unanswered writes: so few
/// requests would rarely share a batch, and handing the write to the writer
/// task costs a scheduler round trip (measured on loopback: 4 closed-loop
/// callers went from ~81k to ~61k gets/s when every such write was handed
/// over; 16 and more gain from batching).
const DIRECT_WRITE_CALLERS: usize = 4;

impl Shared {
    /// Callers holding an in-flight permit (requests queued or awaiting a
    /// reply, merged ones counted per caller).
    fn callers_in_flight(&self) -> usize {
        self.max_in_flight - self.permits.available_permits()
    }

    /// Writes `chunk` without blocking, as the holder of the writer role;
    /// what does not fit in the socket buffer, and whatever other callers
    /// queued meanwhile, is handed to the writer task.
    fn write_now(&self, mut chunk: BytesMut) {
        while !chunk.is_empty() {
            if self.failed.load(Ordering::Acquire) {
                return;
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
        let mut state = self.state.lock();
        let hand_over = if chunk.is_empty() {
            state.has_output() && state.batches < self.max_batches
        } else {
            state.front = chunk;
            true
        };
        // The role passes to the writer task, or is given up.
        state.writing = hand_over;
        drop(state);
        if hand_over {
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
            self.failed.store(true, Ordering::Release);
            state.batches = 0;
            std::mem::take(&mut state.waiters)
        };
        for reply in waiters.into_iter().filter_map(|w| w.reply) {
            reply.deliver(Err(error.clone()));
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
            failed: AtomicBool::new(false),
            merge_gets: settings.merge_gets,
            max_batches: settings.max_batches.max(1),
            max_in_flight: settings.max_in_flight.max(1),
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
        let (receiver, write) = {
            let mut state = shared.state.lock();
            if let Some(error) = &state.closed {
                return Err(error.clone());
            }
            let receiver = state.queue(request, shared.merge_gets, permit);
            let write = state.next_write(shared);
            (receiver, write)
        };
        match write {
            Write::Now(chunk) => shared.write_now(chunk),
            Write::Wake => shared.wake_writer.notify_one(),
            Write::Queued => {}
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

fn write_zero(server: &str) -> Error {
    Error::new(ErrorKind::Connection, "the socket accepted no bytes").at(server)
}

/// What a caller does after queueing its request.
enum Write {
    /// It took the writer role: write this chunk now.
    Now(BytesMut),
    /// It took the writer role for the writer task.
    Wake,
    /// Someone else sends it.
    Queued,
}

/// The writer task. It runs only while it holds the writer role, handed to
/// it (with a notification) by a caller, by a caller's unfinished write, or
/// by the reader when a batch's last reply arrives.
async fn write_loop(shared: Arc<Shared>) {
    let mut chunk = BytesMut::with_capacity(16 * 1024);
    loop {
        shared.wake_writer.notified().await;
        // Let the tasks that are ready to run now (typically the callers the
        // reader just answered) queue their next requests first, so they all
        // go out in one `write`.
        tokio::task::yield_now().await;
        loop {
            {
                let mut state = shared.state.lock();
                if state.closed.is_some() {
                    return;
                }
                chunk.clear();
                state.take_batch(&mut chunk);
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
            let mut state = shared.state.lock();
            if !(state.has_output() && state.batches < shared.max_batches) {
                state.writing = false;
                break;
            }
        }
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
                    let (waiter, flush) = {
                        let mut state = shared.state.lock();
                        let waiter = state.waiters.pop_front();
                        let mut flush = false;
                        if waiter.as_ref().is_some_and(|w| w.ends_batch) {
                            state.batches -= 1;
                            // A batch is answered: send what queued behind it.
                            flush = !state.writing
                                && state.has_output()
                                && state.batches < shared.max_batches;
                            state.writing |= flush;
                        }
                        (waiter, flush)
                    };
                    if let Some(reply_to) = waiter.and_then(|w| w.reply) {
                        reply_to.deliver(Ok(reply));
                    }
                    if flush {
                        shared.wake_writer.notify_one();
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
