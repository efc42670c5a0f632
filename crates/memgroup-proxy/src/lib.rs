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
//!     .evcache_groups("z1=127.0.0.1:11211;z2=127.0.0.1:11212")?
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
//! Requests of one connection run concurrently and are answered in order;
//! a request waits for the earlier ones when they share a key and one of
//! them writes, and for everything before it after a `noreply` write, a
//! quiet meta command, `mn`, `flush_all` or `quit`.

mod answer;
mod binary;
mod conn;
mod retrieve;
mod stats;

use std::net::SocketAddr;
use std::sync::Arc;

use memgroup_client::Client;
use memgroup_proto::server::ServerLimits;
use tokio::net::TcpListener;

pub use stats::ProxyStats;

/// How a [`Proxy`] listens and what it allows.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ProxyConfig {
    /// The addresses to listen on.
    pub listen: Vec<SocketAddr>,
    /// What a client's requests may be (line lengths, value size).
    pub limits: ServerLimits,
    /// The most requests of one connection in flight at once; a client
    /// pipelining more waits (its requests stay in the socket).
    pub max_in_flight: usize,
    /// Whether `flush_all` is forwarded to every server (default on).
    pub allow_flush_all: bool,
    /// Whether `cache_memlimit` is forwarded to every server of every group
    /// (default on).
    pub allow_cache_memlimit: bool,
    /// How long a reply may wait for the client to take it (its socket
    /// full: a client that stopped reading): past it the connection is
    /// closed, so such a client costs one socket buffer and its requests in
    /// flight, never a growing queue (default 30 s).
    pub write_timeout: std::time::Duration,
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
            write_timeout: std::time::Duration::from_secs(30),
        }
    }
}

/// What every connection shares.
#[derive(Debug)]
struct Shared {
    client: Client,
    config: ProxyConfig,
    stats: ProxyStats,
}

/// A bound proxy: its listeners open, serving once [`Proxy::serve`] runs.
#[derive(Debug)]
pub struct Proxy {
    listeners: Vec<TcpListener>,
    shared: Arc<Shared>,
}

impl Proxy {
    /// Opens the listeners of `config` (an error names the address that
    /// could not be bound).
    pub async fn bind(client: Client, config: ProxyConfig) -> std::io::Result<Proxy> {
        let mut listeners = Vec::with_capacity(config.listen.len());
        for addr in &config.listen {
            let listener = TcpListener::bind(addr).await.map_err(|e| {
                std::io::Error::new(e.kind(), format!("cannot listen on {addr}: {e}"))
            })?;
            listeners.push(listener);
        }
        Ok(Proxy {
            listeners,
            shared: Arc::new(Shared {
                // Keys as memcached's text protocol carries them (control
                // bytes too), hashed as the clients' other clients hash them.
                client: client.with_raw_keys(),
                config,
                stats: ProxyStats::default(),
            }),
        })
    }

    /// The addresses listened on (with the ports chosen for port 0).
    pub fn local_addrs(&self) -> Vec<SocketAddr> {
        self.listeners
            .iter()
            .filter_map(|l| l.local_addr().ok())
            .collect()
    }

    /// The proxy's counters (what `stats` answers).
    pub fn stats(&self) -> &ProxyStats {
        &self.shared.stats
    }

    /// Accepts and serves connections until the task is dropped.
    pub async fn serve(self) {
        let mut accepting = tokio::task::JoinSet::new();
        for listener in self.listeners {
            let shared = self.shared.clone();
            accepting.spawn(accept(listener, shared));
        }
        while accepting.join_next().await.is_some() {}
    }
}

/// One listener's accept loop: a task per connection.
async fn accept(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                let _ = stream.set_nodelay(true);
                tokio::spawn(conn::serve(stream, shared.clone()));
            }
            // Out of descriptors and the like: wait a little, go on.
            Err(_) => tokio::time::sleep(std::time::Duration::from_millis(10)).await,
        }
    }
}
