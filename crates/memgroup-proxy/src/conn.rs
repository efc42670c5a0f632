//! One client connection: requests read and decoded, run concurrently,
//! answered in order.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use bytes::{Bytes, BytesMut};
use memgroup_proto::server::{ClientRequest, RequestDecoder};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use crate::Shared;

/// A reply in the connection's order: written at once, or when its request
/// finishes.
enum Slot {
    Ready(Bytes),
    Running(JoinHandle<Bytes>),
    /// Close after what came before (`quit`, a request memcached closes on).
    Close,
}

/// An earlier request still unanswered, as later ones check it.
struct InFlight {
    seq: u64,
    /// Its keys' hashes.
    keys: Vec<u64>,
    writes: bool,
    /// Everything after it waits for it (`noreply`, quiet, `mn`, …).
    barrier: bool,
}

fn key_hash(key: &[u8]) -> u64 {
    // FNV-1a: a few keys per request, compared for equality only.
    key.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

pub(crate) async fn serve(stream: TcpStream, shared: Arc<Shared>) {
    shared.stats.curr_connections.fetch_add(1, Relaxed);
    shared.stats.total_connections.fetch_add(1, Relaxed);
    let (mut reader, mut writer) = stream.into_split();
    let (slots, mut queue) = mpsc::channel::<Slot>(shared.config.max_in_flight.max(1));
    let (answered_tx, mut answered) = watch::channel(0u64);
    let writing = tokio::spawn(async move {
        let mut out = BytesMut::new();
        let mut count = 0u64;
        while let Some(slot) = queue.recv().await {
            let mut close = false;
            let mut next = Some(slot);
            // Everything already finished goes out in one write.
            while let Some(slot) = next.take() {
                match slot {
                    Slot::Ready(bytes) => out.extend_from_slice(&bytes),
                    Slot::Running(handle) => match handle.await {
                        Ok(bytes) => out.extend_from_slice(&bytes),
                        Err(_) => out.extend_from_slice(b"SERVER_ERROR proxy request failed\r\n"),
                    },
                    Slot::Close => close = true,
                }
                count += 1;
                if close || out.len() > 64 * 1024 {
                    break;
                }
                next = queue.try_recv().ok();
            }
            if writer.write_all(&out).await.is_err() {
                break;
            }
            out.clear();
            answered_tx.send_replace(count);
            if close {
                break;
            }
        }
        let _ = writer.shutdown().await;
    });
    let mut decoder = RequestDecoder::new(shared.config.limits);
    let cap = shared
        .config
        .limits
        .max_get_line
        .max(shared.config.limits.max_value + 4096);
    let mut buf = BytesMut::with_capacity(4096);
    let mut inflight: VecDeque<InFlight> = VecDeque::new();
    let mut seq = 0u64;
    'read: loop {
        loop {
            let request = match decoder.decode(&mut buf) {
                Ok(Some(request)) => request,
                Ok(None) => break,
                Err(_closed) => {
                    let _ = slots.send(Slot::Close).await;
                    break 'read;
                }
            };
            // Wait for the earlier requests this one must follow.
            let done = *answered.borrow();
            while inflight.front().is_some_and(|f| f.seq < done) {
                inflight.pop_front();
            }
            let keys: Vec<u64> = request.keys().iter().map(|k| key_hash(k)).collect();
            let writes = request.writes();
            let waits = request.is_barrier()
                || inflight.iter().any(|f| {
                    f.barrier || ((f.writes || writes) && f.keys.iter().any(|k| keys.contains(k)))
                });
            if waits && answered.wait_for(|&n| n >= seq).await.is_err() {
                break 'read;
            }
            let quit = matches!(request, ClientRequest::Quit);
            let barrier = request.is_barrier() || request.is_quiet();
            let slot = match crate::answer::immediate(&shared, &request) {
                Some(bytes) => Slot::Ready(bytes),
                None if quit => Slot::Close,
                None => {
                    let shared = shared.clone();
                    Slot::Running(tokio::spawn(async move {
                        crate::answer::answer(&shared, request).await
                    }))
                }
            };
            inflight.push_back(InFlight {
                seq,
                keys,
                writes,
                barrier,
            });
            seq += 1;
            if slots.send(slot).await.is_err() || quit {
                break 'read;
            }
        }
        if buf.len() >= cap {
            let _ = slots.send(Slot::Close).await;
            break;
        }
        buf.reserve(4096);
        match reader.read_buf(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
    }
    drop(slots);
    let _ = writing.await;
    shared.stats.curr_connections.fetch_sub(1, Relaxed);
}
