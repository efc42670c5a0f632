//! # memgroup-proxy: a memcached to any client, forwarding through memgroup
//!
//! A [`Proxy`] listens on TCP addresses and speaks memcached's text and meta
//! protocols to every client that connects, as memcached 1.6.18 does
//! (decoded by `memgroup-proto`'s server side). Each request goes through
//! one shared [`memgroup_client::Client`], so what the library promises
//! holds for a PHP, Python or Java service too: keys on the server the
//! fleet's hashing names, reads from the local zone with fallback, one
//! write per key in every group, conditional writes decided by the arbiter,
//! missed writes repaired.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use memgroup_proxy::{Proxy, ProxyConfig};
//! let client = memgroup_client::Client::builder()
//!     .evcache_groups("z1=127.0.0.1:11211;z2=127.0.0.1:11212")
//!     .build()?;
//! let proxy = Proxy::bind(client, ProxyConfig::listen(["127.0.0.1:22122".parse()?])).await?;
//! proxy.serve().await;
//! # Ok(()) }
//! ```
//!
//! What the replies mean:
//! - `STORED` (and `DELETED`, `TOUCHED`, a meta `HD`): the client's write
//!   policy was met (`WriteWait::Policy`: by default the local zone's groups
//!   and the arbiter answered); groups still outstanding finish in the
//!   background and are repaired if they miss. A write that missed its
//!   policy is `SERVER_ERROR` with the reason; a `noreply` write that
//!   missed it is counted (`stats`: `noreply_failures`).
//! - A conditional write (`add`, `replace`, `cas`, `append`, `prepend`,
//!   `incr`, `decr`, meta modes) is answered by the arbiter group's reply.
//! - A key whose servers all failed reads as a miss in a multi-get (counted:
//!   `get_errors`), never one error for the whole reply.
//! - The proxy answers `version` (`1.6.18-memgroup-<version>`: the protocol
//!   it speaks, and what it is), `verbosity` (`OK`), `stats` (its own
//!   counters under memcached's names; memcached's sections `items`,
//!   `slabs`, `sizes`, `cachedump`, `detail` and `extstore` as a memcached
//!   holding no items answers them), `flush_all` and `cache_memlimit` (every
//!   server of every group, unless [`ProxyConfig::allow_flush_all`] or
//!   [`ProxyConfig::allow_cache_memlimit`] is off) itself;
//!   `shutdown`, `slabs`, `lru_crawler`, `watch` and the other operator
//!   commands get memcached's `ERROR`.
//!
//! `stats latency` gives each command's latency over the last 30-60 s and
//! `stats servers` each server as the client sees it. With feature `tls`,
//! [`ProxyConfig::tls`] serves TLS in front ([`ServerTls`], mutual TLS
//! optional); [`ProxyConfig::logins`] asks each client for memcached's ASCII
//! login ([`Logins`]). [`Proxy::serve_until`] drains on shutdown.
//!
//! Requests of one connection run concurrently and are answered in order;
//! a request waits for the earlier ones when they share a key and one of
//! them writes, and for everything before it after a `noreply` write, a
//! quiet meta command, `mn`, `flush_all` or `quit`.

#![cfg_attr(docsrs, feature(doc_cfg))]

mod answer;
mod binary;
mod conn;
mod control;
mod latency;
mod login;
mod retrieve;
mod stats;
mod stream;
#[cfg(feature = "tls")]
mod tls;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use memgroup_client::Client;
use memgroup_proto::server::ServerLimits;
use tokio::net::TcpListener;

use crate::conn::Phase;

pub use control::ProxyControl;
pub use login::Logins;
pub use stats::ProxyStats;
#[cfg(feature = "tls")]
pub use tls::{HANDSHAKE, ServerTls};

/// How a [`Proxy`] listens and what it allows.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ProxyConfig {
    /// The addresses to listen on.
    pub listen: Vec<SocketAddr>,
    /// What a client's requests may be (line lengths, value size).
    pub limits: ServerLimits,
    /// The most requests of one connection in flight at once; a client
    /// pipelining more waits (its requests stay in the socket). A
    /// connection starts at 16 and doubles while its client takes every
    /// reply at once; a reply the client makes wait brings it back to 16.
    /// So a client that stops reading holds at most 16 replies (each up to
    /// the largest value) and the reply budget, whatever this is.
    pub max_in_flight: usize,
    /// Whether `flush_all` is forwarded to every server (default on).
    pub allow_flush_all: bool,
    /// Whether `cache_memlimit` is forwarded to every server of every group
    /// (default on).
    pub allow_cache_memlimit: bool,
    /// The most client connections open at once; one more is answered
    /// `ERROR Too many open connections` and closed, as memcached does
    /// (counted: `rejected_connections`). Default 16,384; the tool raises
    /// its soft descriptor limit to the hard one so this many fit.
    pub max_connections: usize,
    /// The most reply bytes one connection may hold finished behind an
    /// unfinished earlier reply (a slow key ahead of fast ones): past it
    /// the connection starts nothing new until those are written. One
    /// reply may exceed it (a large multi-get); the cap is on what piles
    /// up. Default 4 MiB.
    pub max_buffered_replies: usize,
    /// Closes a connection with nothing in flight and nothing sent for
    /// this long (counted: `idle_kicks`); `None` (the default, as
    /// memcached's `idle_timeout`) keeps idle connections open. An idle
    /// connection holds no buffer either way.
    pub idle_timeout: Option<std::time::Duration>,
    /// How long a reply may wait for the client to take it (its socket
    /// full: a client that stopped reading): past it the connection is
    /// closed, so such a client costs one socket buffer and its requests in
    /// flight, never a growing queue (default 30 s).
    pub write_timeout: std::time::Duration,
    /// memcached's ASCII authentication in front: each client logs in with
    /// its first `set` (value `user password`) before anything else is
    /// served (`CLIENT_ERROR unauthenticated`, counted as `auth_errors`,
    /// nothing reaching the servers). `None` (the default): no login.
    pub logins: Option<Logins>,
    /// TLS in front (feature `tls`): every client connection handshakes
    /// first (within [`HANDSHAKE`]; a failure closes it, counted as
    /// `ssl_handshake_errors`). `None` (the default): plaintext.
    #[cfg(feature = "tls")]
    pub tls: Option<ServerTls>,
}

impl ProxyConfig {
    /// Listening on `addrs`, the default limits.
    pub fn listen(addrs: impl IntoIterator<Item = SocketAddr>) -> ProxyConfig {
        ProxyConfig {
            listen: addrs.into_iter().collect(),
            limits: ServerLimits::default(),
            max_in_flight: 128,
            allow_flush_all: true,
            allow_cache_memlimit: true,
            max_connections: 16_384,
            max_buffered_replies: 4 << 20,
            idle_timeout: None,
            write_timeout: std::time::Duration::from_secs(30),
            logins: None,
            #[cfg(feature = "tls")]
            tls: None,
        }
    }
}

/// What every connection shares.
#[derive(Debug)]
pub(crate) struct Shared {
    client: Client,
    config: ProxyConfig,
    stats: ProxyStats,
    /// Each command's latency over a recent window (`stats latency`).
    latency: latency::Latencies,
    /// Serving, draining or cut: every connection watches it.
    phase: tokio::sync::watch::Sender<Phase>,
    /// The listeners ([`ProxyControl::listen`] changes them).
    listening: parking_lot::Mutex<control::Listening>,
    /// What new handshakes present ([`ProxyControl::set_tls`]).
    #[cfg(feature = "tls")]
    tls: parking_lot::RwLock<Option<ServerTls>>,
}

/// A bound proxy: its listeners open, serving once [`Proxy::serve`] runs.
#[derive(Debug)]
pub struct Proxy {
    shared: Arc<Shared>,
}

impl Proxy {
    /// Opens the listeners of `config` (an error names the address that
    /// could not be bound).
    pub async fn bind(client: Client, config: ProxyConfig) -> std::io::Result<Proxy> {
        let mut listeners = Vec::with_capacity(config.listen.len());
        for &addr in &config.listen {
            let (local, listener) = control::bind(addr).await?;
            listeners.push((addr, local, listener));
        }
        Ok(Proxy {
            shared: Arc::new(Shared {
                listening: parking_lot::Mutex::new(control::Listening::bound(listeners)),
                #[cfg(feature = "tls")]
                tls: parking_lot::RwLock::new(config.tls.clone()),
                // Keys as memcached's text protocol carries them (control
                // bytes too), hashed as the clients' other clients hash them.
                client: client.with_raw_keys(),
                config,
                stats: ProxyStats::default(),
                latency: latency::Latencies::default(),
                phase: tokio::sync::watch::Sender::new(Phase::Serving),
            }),
        })
    }

    /// The addresses listened on (with the ports chosen for port 0).
    pub fn local_addrs(&self) -> Vec<SocketAddr> {
        self.shared.listening.lock().local_addrs()
    }

    /// A handle that changes the proxy while it serves: its listeners, its
    /// certificate.
    pub fn control(&self) -> ProxyControl {
        ProxyControl {
            shared: self.shared.clone(),
        }
    }

    /// The proxy's counters (what `stats` answers).
    pub fn stats(&self) -> &ProxyStats {
        &self.shared.stats
    }

    /// Accepts and serves connections until the task is dropped.
    pub async fn serve(self) {
        self.serve_until(std::future::pending(), std::time::Duration::MAX)
            .await;
    }

    /// Accepts and serves connections until `shutdown` resolves, then
    /// drains: the listeners close (new connections are refused), every
    /// request already read is answered and its connection closed; what is
    /// still open after `grace` is cut. Returns what the drain did. The
    /// client's own background writes and repairs are the caller's to
    /// drain ([`Client::close`]).
    pub async fn serve_until(
        self,
        shutdown: impl Future<Output = ()>,
        grace: std::time::Duration,
    ) -> Drained {
        self.shared.listening.lock().serve(&self.shared);
        shutdown.await;
        // The listeners close with their tasks.
        let accepting = self.shared.listening.lock().close();
        for task in accepting {
            let _ = task.await;
        }
        let stats = &self.shared.stats;
        let open = stats.curr_connections.load(Relaxed);
        let answered = stats.requests.load(Relaxed);
        self.shared.phase.send_replace(Phase::Draining);
        let deadline = tokio::time::Instant::now().checked_add(grace);
        let closed = || stats.curr_connections.load(Relaxed) == 0;
        while !closed() && deadline.is_none_or(|d| tokio::time::Instant::now() < d) {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        let cut = stats.curr_connections.load(Relaxed);
        self.shared.phase.send_replace(Phase::Cut);
        while !closed() {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        Drained {
            connections: open,
            cut,
            answered: stats.requests.load(Relaxed) - answered,
        }
    }
}

/// What a drain did ([`Proxy::serve_until`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Drained {
    /// Client connections open when the shutdown began.
    pub connections: u64,
    /// Of those, the ones still open when the grace period ended, closed
    /// with requests unanswered.
    pub cut: u64,
    /// Requests answered from the shutdown on.
    pub answered: u64,
}

/// One listener's accept loop: a task per connection, up to the most
/// connections allowed. Told to `stop` (its address left out of a reload),
/// it takes the connections the kernel already completed — connected, as
/// far as their clients know — before it ends and the listener closes:
/// they are served, not reset.
pub(crate) async fn accept(
    listener: TcpListener,
    shared: Arc<Shared>,
    stop: Arc<tokio::sync::Notify>,
) {
    loop {
        let accepted = tokio::select! {
            biased;
            () = stop.notified() => None,
            accepted = listener.accept() => Some(accepted),
        };
        match accepted {
            Some(Ok((stream, _))) => admit(stream, &shared),
            // Out of descriptors and the like: wait a little, go on.
            Some(Err(_)) => tokio::time::sleep(std::time::Duration::from_millis(10)).await,
            None => break,
        }
    }
    // accept(2) itself until nothing waits: tokio's own accept would
    // answer from the readiness its driver last saw, which may predate
    // them.
    let Ok(listener) = listener.into_std() else {
        return;
    };
    while let Ok((stream, _)) = listener.accept() {
        let stream = stream
            .set_nonblocking(true)
            .and_then(|()| tokio::net::TcpStream::from_std(stream));
        if let Ok(stream) = stream {
            admit(stream, &shared);
        }
    }
}

/// A connection accepted: served by a task of its own, or refused when the
/// proxy holds the most connections allowed.
fn admit(stream: tokio::net::TcpStream, shared: &Arc<Shared>) {
    let stats = &shared.stats;
    stats.total_connections.fetch_add(1, Relaxed);
    if stats.curr_connections.load(Relaxed) >= shared.config.max_connections as u64 {
        stats.rejected_connections.fetch_add(1, Relaxed);
        tokio::spawn(refuse(stream));
        return;
    }
    stats.curr_connections.fetch_add(1, Relaxed);
    let _ = stream.set_nodelay(true);
    let phase = shared.phase.subscribe();
    let shared = shared.clone();
    tokio::spawn(async move {
        // Boxed: the handshake's state (rustls's session) is
        // no part of a plaintext connection's task.
        #[cfg(feature = "tls")]
        let stream = {
            let tls = shared.tls.read().clone();
            match &tls {
                Some(tls) => Box::pin(handshake(stream, tls, &shared)).await,
                None => Some(stream::Stream::Plain(stream)),
            }
        };
        #[cfg(not(feature = "tls"))]
        let stream = Some(stream::Stream::Plain(stream));
        if let Some(stream) = stream {
            conn::serve(stream, shared, phase).await;
        } else {
            shared.stats.curr_connections.fetch_sub(1, Relaxed);
        }
    });
}

/// The connection with TLS in front once its handshake is done; `None`
/// when that failed or took too long (counted).
#[cfg(feature = "tls")]
async fn handshake(
    stream: tokio::net::TcpStream,
    tls: &ServerTls,
    shared: &Shared,
) -> Option<stream::Stream> {
    match tokio::time::timeout(HANDSHAKE, tls.acceptor.accept(stream)).await {
        Ok(Ok(stream)) => Some(stream::Stream::Tls(Box::new(stream))),
        _ => {
            shared.stats.ssl_handshake_errors.fetch_add(1, Relaxed);
            None
        }
    }
}

/// memcached's answer to a connection over its `maxconns`.
async fn refuse(mut stream: tokio::net::TcpStream) {
    use tokio::io::AsyncWriteExt;
    let _ = stream.try_write(b"ERROR Too many open connections\r\n");
    let _ = stream.shutdown().await;
}
