//! One client connection, served by one task: requests read and decoded,
//! run concurrently as futures this task polls (no task per request), and
//! answered in order, each batch of finished replies in one write.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use memgroup_proto::server::{ClientRequest, RequestDecoder};

use crate::Shared;
use crate::latency::Command;
use crate::stream::{Stream, Wrote};

type Answer = Pin<Box<dyn Future<Output = Bytes> + Send>>;

/// A request in flight, in the connection's order.
struct Running {
    /// Its answer while it runs; `None` once done.
    future: Option<Answer>,
    /// Its reply once done.
    reply: Option<Bytes>,
    /// Its keys' hashes, for the requests after it to check.
    keys: Vec<u64>,
    writes: bool,
    /// Everything after it waits for it (`noreply`, quiet, `mn`, …).
    barrier: bool,
}

impl Running {
    /// A request answered at once with `reply`.
    fn done(reply: Bytes) -> Running {
        Running {
            future: None,
            reply: Some(reply),
            keys: Vec::new(),
            writes: false,
            barrier: false,
        }
    }
}

/// The requests in flight, polled together, answered in order.
#[derive(Default)]
struct InOrder {
    running: VecDeque<Running>,
    /// Bytes of the finished replies waiting behind an unfinished one.
    waiting: usize,
}

impl InOrder {
    /// Whether `request` must wait for the ones in flight: it is a barrier,
    /// one of them is, or one shares a key with it and either writes.
    fn must_wait(&self, request: &ClientRequest, keys: &[u64]) -> bool {
        if self.running.is_empty() {
            return false;
        }
        let writes = request.writes();
        request.is_barrier()
            || self.running.iter().any(|r| {
                r.barrier || ((r.writes || writes) && r.keys.iter().any(|k| keys.contains(k)))
            })
    }

    /// Whether another request may start: fewer than `window` in flight
    /// and fewer than `budget` reply bytes waiting.
    fn has_room(&self, window: usize, budget: usize) -> bool {
        self.running.len() < window && self.waiting < budget
    }

    /// Adds a request started, last in order.
    fn push(&mut self, running: Running) {
        self.waiting += running.reply.as_ref().map_or(0, Bytes::len);
        self.running.push_back(running);
    }

    /// Polls every unfinished answer; appends the replies now due (the
    /// finished ones at the front, in order) to `out`.
    fn poll_due(&mut self, cx: &mut Context<'_>, out: &mut BytesMut) -> Poll<u64> {
        for running in &mut self.running {
            if let Some(future) = &mut running.future
                && let Poll::Ready(reply) = future.as_mut().poll(cx)
            {
                running.future = None;
                self.waiting += reply.len();
                running.reply = Some(reply);
            }
        }
        let mut due = 0;
        while self.running.front().is_some_and(|r| r.reply.is_some()) {
            let done = self.running.pop_front().expect("checked");
            let reply = done.reply.expect("checked");
            self.waiting -= reply.len();
            out.extend_from_slice(&reply);
            due += 1;
        }
        if due > 0 {
            Poll::Ready(due)
        } else {
            Poll::Pending
        }
    }
}

fn key_hash(key: &[u8]) -> u64 {
    // FNV-1a: a few keys per request, compared for equality only.
    key.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The requests a connection may have in flight at first, and again after
/// its client made a reply wait ([`ProxyConfig::max_in_flight`](crate::ProxyConfig::max_in_flight) is the most).
const FIRST_WINDOW: usize = 16;

/// What the read side found next.
enum Next {
    /// A request to start (or hold until those before it are done).
    Request(ClientRequest),
    /// Nothing decodable yet: read more.
    More,
    /// Close once what came before is answered.
    Close,
}

/// Where the proxy is in its life, as every connection sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Reading and answering.
    Serving,
    /// Shutting down: answer what was already read, then close.
    Draining,
    /// The grace period is over: close now, answered or not.
    Cut,
}

pub(crate) async fn serve(
    stream: Stream,
    shared: Arc<Shared>,
    mut phase: tokio::sync::watch::Receiver<Phase>,
) {
    let (mut reader, mut writer) = stream.split();
    let limits = shared.config.limits;
    let cap = limits.max_get_line.max(limits.max_value + 4096);
    let max_in_flight = shared.config.max_in_flight.max(1);
    // The requests this connection may have in flight now: it grows while
    // the client takes its replies as fast as they come and falls back at
    // once when it stops, so a client that never reads holds at most a
    // window's replies (each up to the largest value), not max_in_flight's.
    let mut window = FIRST_WINDOW.min(max_in_flight);
    let max_waiting = shared.config.max_buffered_replies;
    let mut decoder = RequestDecoder::new(limits);
    // Both allocated when there is something to hold and released when the
    // connection is idle: an idle connection holds no buffer.
    let mut buf = BytesMut::new();
    let mut out = BytesMut::new();
    let mut inflight = InOrder::default();
    // A request decoded but not started: it waits for those before it.
    let mut held: Option<(ClientRequest, Vec<u64>)> = None;
    let mut closing = false;
    let mut eof = false;
    // Logged in, or no login asked for.
    let mut admitted = shared.config.logins.is_none();
    let idle_timeout = shared.config.idle_timeout;
    let mut idle_since = idle_timeout.map(|_| tokio::time::Instant::now());
    loop {
        // Start what may start: the held request once nothing blocks it,
        // then newly decoded ones, up to the caps in flight and waiting.
        while !closing && inflight.has_room(window, max_waiting) {
            if let Some((request, keys)) = held.take() {
                if inflight.must_wait(&request, &keys) {
                    held = Some((request, keys));
                    break;
                }
                match start(&shared, request, keys) {
                    Some(running) => inflight.push(running),
                    None => closing = true,
                }
                continue;
            }
            let next = match decoder.decode(&mut buf) {
                Ok(Some(request)) => Next::Request(request),
                Ok(None) => Next::More,
                Err(_) => {
                    shared.stats.protocol_closes.fetch_add(1, Relaxed);
                    Next::Close
                }
            };
            match next {
                Next::Request(request) if !admitted => {
                    // Answered here: nothing reaches the servers.
                    let logins = shared.config.logins.as_ref().expect("logins on");
                    let (reply, logged_in) = crate::login::attempt(logins, &request);
                    if !logged_in {
                        shared.stats.auth_errors.fetch_add(1, Relaxed);
                    }
                    admitted = logged_in;
                    inflight.push(Running::done(reply));
                }
                Next::Request(request) => {
                    let keys = request.keys().iter().map(|k| key_hash(k)).collect();
                    held = Some((request, keys));
                }
                Next::More => break,
                Next::Close => closing = true,
            }
        }
        if (closing || eof) && inflight.running.is_empty() && held.is_none() {
            break;
        }
        let reading = !closing && !eof && held.is_none() && inflight.has_room(window, max_waiting);
        if reading && buf.len() >= cap {
            // A request larger than any allowed: memcached would close.
            shared.stats.protocol_closes.fetch_add(1, Relaxed);
            closing = true;
            continue;
        }
        let idle = inflight.running.is_empty() && held.is_none() && buf.is_empty();
        if idle {
            // Nothing held: give the memory back while the client thinks.
            buf = BytesMut::new();
            out = BytesMut::new();
        }
        // The idle clock runs from the last time the connection had work.
        let idle_deadline = match (idle_timeout, idle) {
            (Some(timeout), true) => {
                let since = *idle_since.get_or_insert_with(tokio::time::Instant::now);
                Some(since + timeout)
            }
            _ => {
                idle_since = None;
                None
            }
        };
        let current = *phase.borrow_and_update();
        match current {
            Phase::Serving => {}
            // Answer what was read; read no more.
            Phase::Draining if !eof => {
                eof = true;
                continue;
            }
            Phase::Draining => {}
            Phase::Cut => break,
        }
        tokio::select! {
            biased;
            mut due = std::future::poll_fn(|cx| inflight.poll_due(cx, &mut out)) => {
                // Whatever else is already due goes in the same write.
                while let Poll::Ready(more) =
                    std::future::poll_fn(|cx| Poll::Ready(inflight.poll_due(cx, &mut out))).await
                {
                    due += more;
                }
                shared.stats.requests.fetch_add(due, Relaxed);
                // The window grows only while a window of replies this size
                // fits the reply budget: a socket's buffer takes the first
                // large replies of a client that never reads at once too.
                let each = (out.len() / (due as usize).max(1)).max(1);
                let fits = (max_waiting / each).max(FIRST_WINDOW);
                match writer.write(&mut out, shared.config.write_timeout).await {
                    Wrote::AtOnce => window = (window * 2).min(max_in_flight).min(fits),
                    Wrote::AfterWaiting => window = FIRST_WINDOW.min(max_in_flight),
                    // Gone, or not reading its replies.
                    Wrote::Failed => break,
                }
            }
            read = reader.read(&mut buf), if reading => match read {
                Ok(0) | Err(_) => eof = true,
                Ok(_) => idle_since = None,
            },
            () = sleep_until(idle_deadline), if idle_deadline.is_some() => {
                shared.stats.idle_kicks.fetch_add(1, Relaxed);
                break;
            }
            _ = phase.changed() => {}
        }
    }
    writer.shutdown().await;
    // Requests still in flight go first (a write's parts move to a task of
    // the client's, counted in its background): a drain that sees no
    // connection left, and then closes the client, finds them there.
    drop(inflight);
    shared.stats.curr_connections.fetch_sub(1, Relaxed);
}

async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Starts a request: a reply made at once, or its answer as a future.
/// `None` for `quit`: close after what came before.
fn start(shared: &Arc<Shared>, request: ClientRequest, keys: Vec<u64>) -> Option<Running> {
    if matches!(request, ClientRequest::Quit) {
        return None;
    }
    let writes = request.writes();
    let barrier = request.is_barrier() || request.is_quiet();
    let (future, reply) = match crate::answer::immediate(shared, &request) {
        Some(bytes) => (None, Some(bytes)),
        None => {
            let shared = shared.clone();
            let future: Answer = Box::pin(async move {
                let (command, started) = (Command::of(&request), std::time::Instant::now());
                let reply = crate::answer::answer(&shared, request).await;
                shared.latency.record(command, started.elapsed());
                reply
            });
            (Some(future), None)
        }
    };
    Some(Running {
        future,
        reply,
        keys,
        writes,
        barrier,
    })
}
