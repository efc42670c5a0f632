//! `--proxy`'s clients: plain text-protocol connections to the proxy, built
//! on memgroup-proto's codec as any memcached client's would be (no routing,
//! no replication: one memcached to them). Each load task round-robins over
//! connections of its own ([`Conns`]); the open-loop readers
//! ([`open_loop`]) pipeline `get`s on a fixed schedule, whatever the
//! replies, and check every reply is for the key asked.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use memgroup::proto::{Decoder, Key, Request, Response, StoreCommand};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::load::{key, parse};
use crate::measure::{Latency, Rng};
use crate::{KEYS_PER_TASK, TASKS};

/// What a request through a text connection came to: the reply, or why
/// there was none (`timeout`, `io`, `closed`, `protocol`) or it was an
/// error line (`server_error`, `client_error`, `error`).
pub(crate) type Reply = Result<Response, &'static str>;

/// One connection, opened again after a failure.
struct Conn {
    stream: Option<TcpStream>,
    buf: BytesMut,
    decoder: Decoder,
}

/// A load task's connections to the proxy, used in turn.
pub(crate) struct Conns {
    addr: SocketAddr,
    timeout: Duration,
    conns: Vec<Conn>,
    next: usize,
}

impl Conns {
    /// `n` connections to `addr` (opened when first used).
    pub(crate) fn new(addr: SocketAddr, n: usize, timeout: Duration) -> Conns {
        let conns = (0..n)
            .map(|_| Conn {
                stream: None,
                buf: BytesMut::new(),
                decoder: Decoder::default(),
            })
            .collect();
        Conns {
            addr,
            timeout,
            conns,
            next: 0,
        }
    }

    /// Sends `request` on the next connection and reads its reply within
    /// the timeout; a connection that failed is closed (its late reply
    /// would answer the next request).
    pub(crate) async fn call(&mut self, request: &Request<'_>) -> Reply {
        let at = self.next;
        self.next = (self.next + 1) % self.conns.len();
        let (addr, conn) = (self.addr, &mut self.conns[at]);
        let reply = tokio::time::timeout(self.timeout, conn.call(addr, request)).await;
        let reply = reply.unwrap_or(Err("timeout"));
        if matches!(reply, Err("timeout" | "io" | "closed" | "protocol")) {
            conn.stream = None;
            conn.buf.clear();
            conn.decoder = Decoder::default();
        }
        match reply? {
            Response::ServerError(_) => Err("server_error"),
            Response::ClientError(_) => Err("client_error"),
            Response::Error => Err("error"),
            reply => Ok(reply),
        }
    }

    /// `get k`: the value, if any.
    pub(crate) async fn get(&mut self, k: &str) -> Result<Option<Vec<u8>>, &'static str> {
        let keys = [Key::new(k.as_bytes()).expect("a soak key")];
        match self.call(&Request::Get { keys: &keys }).await? {
            Response::Values(values) => Ok(values.into_iter().next().map(|v| v.data.to_vec())),
            _ => Err("unexpected"),
        }
    }

    /// `get k1 k2 …`: the hits, as (key, value).
    pub(crate) async fn get_multi(
        &mut self,
        ks: &[String],
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>, &'static str> {
        let keys: Vec<Key<'_>> = ks
            .iter()
            .map(|k| Key::new(k.as_bytes()).expect("a soak key"))
            .collect();
        match self.call(&Request::Get { keys: &keys }).await? {
            Response::Values(values) => Ok(values
                .into_iter()
                .map(|v| (v.key.to_vec(), v.data.to_vec()))
                .collect()),
            _ => Err("unexpected"),
        }
    }

    /// A storage command: whether it was stored.
    pub(crate) async fn store(
        &mut self,
        command: StoreCommand,
        k: &str,
        data: &[u8],
    ) -> Result<bool, &'static str> {
        let request = Request::Store {
            command,
            key: Key::new(k.as_bytes()).expect("a soak key"),
            flags: 0,
            exptime: 0,
            data,
            noreply: false,
        };
        match self.call(&request).await? {
            Response::Stored => Ok(true),
            Response::NotStored | Response::Exists | Response::NotFound => Ok(false),
            _ => Err("unexpected"),
        }
    }

    /// `delete k`: whether the key is now absent (deleted, or not found).
    pub(crate) async fn delete(&mut self, k: &str) -> Result<bool, &'static str> {
        let request = Request::Delete {
            key: Key::new(k.as_bytes()).expect("a soak key"),
            noreply: false,
        };
        match self.call(&request).await? {
            Response::Deleted | Response::NotFound => Ok(true),
            _ => Err("unexpected"),
        }
    }

    /// `incr k 1`: the new value, or `None` when absent.
    pub(crate) async fn incr(&mut self, k: &str) -> Result<Option<u64>, &'static str> {
        let request = Request::Arith {
            increment: true,
            key: Key::new(k.as_bytes()).expect("a soak key"),
            delta: 1,
            noreply: false,
        };
        match self.call(&request).await? {
            Response::Number(n) => Ok(Some(n)),
            Response::NotFound => Ok(None),
            _ => Err("unexpected"),
        }
    }
}

impl Conn {
    async fn call(&mut self, addr: SocketAddr, request: &Request<'_>) -> Reply {
        if self.stream.is_none() {
            let stream = TcpStream::connect(addr).await.map_err(|_| "io")?;
            let _ = stream.set_nodelay(true);
            self.stream = Some(stream);
        }
        let stream = self.stream.as_mut().expect("connected above");
        let mut out = BytesMut::new();
        request.encode(&mut out);
        stream.write_all(&out).await.map_err(|_| "io")?;
        let expect = request.expect().expect("a request with a reply");
        loop {
            if let Some(reply) = self
                .decoder
                .decode(&mut self.buf, expect)
                .map_err(|_| "protocol")?
            {
                return Ok(reply);
            }
            if stream.read_buf(&mut self.buf).await.map_err(|_| "io")? == 0 {
                return Err("closed");
            }
        }
    }
}

/// What the open-loop readers saw.
#[derive(Default)]
pub(crate) struct OpenLoop {
    pub(crate) connections: usize,
    pub(crate) rate: u64,
    pub(crate) sent: AtomicU64,
    pub(crate) answered: AtomicU64,
    pub(crate) hits: AtomicU64,
    /// A `VALUE` for another key than the one asked, or a value whose
    /// content names another key.
    pub(crate) wrong_key: AtomicU64,
    /// Replies that were no `VALUE`/`END` (error lines), and connections
    /// that broke with requests unanswered (each request counted).
    pub(crate) errors: AtomicU64,
    /// From each request's scheduled time to its reply (no coordinated
    /// omission: a slow reply delays no later send).
    pub(crate) latency: Latency,
}

/// `connections` connections to `addr`, each sending `get <key>` for a
/// random key at `rate` a second on a fixed schedule (pipelined: the
/// reader takes the replies in order), until `stop`.
pub(crate) fn open_loop(
    addr: SocketAddr,
    connections: usize,
    rate: u64,
    stop: &Arc<AtomicBool>,
) -> (Arc<OpenLoop>, Vec<tokio::task::JoinHandle<()>>) {
    let seen = Arc::new(OpenLoop {
        connections,
        rate,
        ..OpenLoop::default()
    });
    let tasks = (0..connections)
        .map(|c| {
            let (seen, stop) = (seen.clone(), stop.clone());
            tokio::spawn(async move {
                let mut rng = Rng(0xA076_1D64_78BD_642F ^ (c as u64 + 1));
                // A connection that breaks is opened again.
                while !stop.load(Relaxed) {
                    let Ok(stream) = TcpStream::connect(addr).await else {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    };
                    let _ = stream.set_nodelay(true);
                    pipeline(stream, rate, &mut rng, &seen, &stop).await;
                }
            })
        })
        .collect();
    (seen, tasks)
}

/// One connection's schedule of gets and their replies, until `stop` or
/// the connection breaks.
async fn pipeline(stream: TcpStream, rate: u64, rng: &mut Rng, seen: &OpenLoop, stop: &AtomicBool) {
    let (mut reader, mut writer) = stream.into_split();
    let asked: parking_lot::Mutex<VecDeque<(String, Instant)>> = Default::default();
    let broken = AtomicBool::new(false);
    let send = async {
        let period = Duration::from_secs(1) / rate.max(1) as u32;
        let mut every = tokio::time::interval(period);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
        while !stop.load(Relaxed) && !broken.load(Relaxed) {
            let scheduled = every.tick().await;
            let k = key(rng.below(TASKS as u64) as usize, rng.below(KEYS_PER_TASK));
            asked.lock().push_back((k.clone(), scheduled.into_std()));
            seen.sent.fetch_add(1, Relaxed);
            if writer
                .write_all(format!("get {k}\r\n").as_bytes())
                .await
                .is_err()
            {
                break;
            }
        }
    };
    let receive = async {
        let (mut buf, mut decoder) = (BytesMut::new(), Decoder::default());
        let one = [Key::new(b"k").expect("a key")];
        let expect = Request::Get { keys: &one }.expect().expect("get replies");
        loop {
            match decoder.decode(&mut buf, expect) {
                Ok(Some(reply)) => {
                    let Some((k, at)) = asked.lock().pop_front() else {
                        break;
                    };
                    seen.answered.fetch_add(1, Relaxed);
                    seen.latency.record(at.elapsed());
                    match reply {
                        Response::Values(values) => {
                            for v in values {
                                seen.hits.fetch_add(1, Relaxed);
                                let named = parse(&v.data).map(|(named, _)| named.to_owned());
                                if v.key != k.as_bytes() || named.is_some_and(|n| n != k) {
                                    seen.wrong_key.fetch_add(1, Relaxed);
                                }
                            }
                        }
                        _ => {
                            seen.errors.fetch_add(1, Relaxed);
                        }
                    }
                    continue;
                }
                Ok(None) => {}
                Err(_) => break,
            }
            let done = stop.load(Relaxed) && asked.lock().is_empty();
            if done {
                return;
            }
            match tokio::time::timeout(Duration::from_secs(5), reader.read_buf(&mut buf)).await {
                Ok(Ok(n)) if n > 0 => {}
                _ => break,
            }
        }
        broken.store(true, Relaxed);
    };
    tokio::join!(send, receive);
    // Requests the connection took with it.
    let lost = asked.lock().len() as u64;
    seen.errors.fetch_add(lost, Relaxed);
}
