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
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::Shared;

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

/// The requests in flight, polled together, answered in order.
#[derive(Default)]
struct InOrder {
    running: VecDeque<Running>,
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

    /// Polls every unfinished answer; appends the replies now due (the
    /// finished ones at the front, in order) to `out`.
    fn poll_due(&mut self, cx: &mut Context<'_>, out: &mut BytesMut) -> Poll<()> {
        for running in &mut self.running {
            if let Some(future) = &mut running.future
                && let Poll::Ready(reply) = future.as_mut().poll(cx)
            {
                running.future = None;
                running.reply = Some(reply);
            }
        }
        let mut any = false;
        while self.running.front().is_some_and(|r| r.reply.is_some()) {
            let done = self.running.pop_front().expect("checked");
            out.extend_from_slice(&done.reply.expect("checked"));
            any = true;
        }
        if any { Poll::Ready(()) } else { Poll::Pending }
    }
}

fn key_hash(key: &[u8]) -> u64 {
    // FNV-1a: a few keys per request, compared for equality only.
    key.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// What the read side found next.
enum Next {
    /// A request to start (or hold until those before it are done).
    Request(ClientRequest),
    /// Nothing decodable yet: read more.
    More,
    /// Close once what came before is answered.
    Close,
}

pub(crate) async fn serve(stream: TcpStream, shared: Arc<Shared>) {
    shared.stats.curr_connections.fetch_add(1, Relaxed);
    shared.stats.total_connections.fetch_add(1, Relaxed);
    let (mut reader, mut writer) = stream.into_split();
    let limits = shared.config.limits;
    let cap = limits.max_get_line.max(limits.max_value + 4096);
    let max_in_flight = shared.config.max_in_flight.max(1);
    let mut decoder = RequestDecoder::new(limits);
    let mut buf = BytesMut::with_capacity(4096);
    let mut out = BytesMut::new();
    let mut inflight = InOrder::default();
    // A request decoded but not started: it waits for those before it.
    let mut held: Option<(ClientRequest, Vec<u64>)> = None;
    let mut closing = false;
    let mut eof = false;
    loop {
        // Start what may start: the held request once nothing blocks it,
        // then newly decoded ones, up to the cap in flight.
        while !closing && inflight.running.len() < max_in_flight {
            if let Some((request, keys)) = held.take() {
                if inflight.must_wait(&request, &keys) {
                    held = Some((request, keys));
                    break;
                }
                match start(&shared, request, keys) {
                    Some(running) => inflight.running.push_back(running),
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
        let reading = !closing && !eof && held.is_none() && inflight.running.len() < max_in_flight;
        if reading && buf.len() >= cap {
            // A request larger than any allowed: memcached would close.
            shared.stats.protocol_closes.fetch_add(1, Relaxed);
            closing = true;
            continue;
        }
        buf.reserve(4096);
        tokio::select! {
            biased;
            () = std::future::poll_fn(|cx| inflight.poll_due(cx, &mut out)) => {
                // Whatever else is already due goes in the same write.
                while std::future::poll_fn(|cx| Poll::Ready(inflight.poll_due(cx, &mut out)))
                    .await
                    .is_ready()
                {}
                if !write(&mut writer, &mut out, shared.config.write_timeout).await {
                    // Gone, or not reading its replies.
                    break;
                }
            }
            read = reader.read_buf(&mut buf), if reading => {
                if !matches!(read, Ok(n) if n > 0) {
                    eof = true;
                }
            }
        }
    }
    let _ = writer.shutdown().await;
    shared.stats.curr_connections.fetch_sub(1, Relaxed);
}

/// Writes `out` (then cleared): at once when the socket takes it all (the
/// usual case: no timer), else waiting up to `timeout` for the client to
/// take the rest. `false`: the client is gone or did not read in time.
async fn write(
    writer: &mut tokio::net::tcp::OwnedWriteHalf,
    out: &mut BytesMut,
    timeout: std::time::Duration,
) -> bool {
    let sent = match writer.try_write(out) {
        Ok(n) => n,
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => 0,
        Err(_) => return false,
    };
    let rest = &out[sent..];
    let done = rest.is_empty()
        || matches!(
            tokio::time::timeout(timeout, writer.write_all(rest)).await,
            Ok(Ok(()))
        );
    out.clear();
    done
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
            let future: Answer =
                Box::pin(async move { crate::answer::answer(&shared, request).await });
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
