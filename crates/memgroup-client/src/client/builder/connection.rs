//! The builder's connection settings: timeouts, how a stalled server is
//! marked down, batching and merging, the limits on what a server may send,
//! logins and TLS (cluster-wide or per group).

use std::sync::Arc;
use std::time::Duration;

use super::ClientBuilder;
use crate::conn::Credentials;
use crate::conn::probe::MetaProtocol;

impl ClientBuilder {
    /// Per-operation timeout (default 500 ms); see also [`Client::with_timeout`](crate::Client::with_timeout).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.op_timeout = timeout;
        self
    }

    /// How many timeouts in a row mark a server down (default 3; 0: never),
    /// as mcrouter's `timeouts-until-tko`: it is then backed off like a
    /// server that refused a connection, the requests waiting on it end at
    /// once (reads fail over to the next server or group, writes report the
    /// group), and after the backoff it takes requests again only once a
    /// probe (`version`) gets a reply. A stalled server (a long GC or VM
    /// pause, an overloaded host, a path dropping packets) then costs a few
    /// timeouts, not one per request for as long as it lasts.
    pub fn timeouts_until_down(mut self, n: u32) -> Self {
        self.conn.timeouts_until_down = n;
        self
    }

    /// How long to wait for a connection (TCP, TLS handshake, login), and
    /// for a server back from its backoff to answer a probe (default 1 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.conn.connect_timeout = timeout;
        self
    }

    /// `TCP_NODELAY` (default on).
    pub fn nodelay(mut self, on: bool) -> Self {
        self.conn.nodelay = on;
        self
    }

    /// Requests in flight per connection before callers wait (default 1024).
    pub fn max_in_flight(mut self, n: usize) -> Self {
        self.conn.max_in_flight = n;
        self
    }

    /// Writes per connection whose replies have not all arrived before new
    /// requests wait for one of them (default 4).
    ///
    /// A request sent while nothing else is on the wire goes out at once.
    /// Under load, requests queue while this many writes are answered and
    /// then go out together in one `write`: fewer, fuller writes cost the
    /// client and the server far fewer system calls and wake-ups per request
    /// (and let queued `get`s merge, see [`merge_gets`](Self::merge_gets)),
    /// at the price of waiting up to one of those replies. Higher values
    /// favour latency under load, lower ones throughput.
    pub fn max_unanswered_writes(mut self, n: usize) -> Self {
        self.conn.max_batches = n.max(1);
        self
    }

    /// Whether single-key `get`s (and `gets`) queued on one connection at the
    /// same time are sent as one multi-key command (default on), as
    /// spymemcached does. Each caller still gets exactly its own key's value
    /// or miss, and a key asked for by several callers is sent once. The
    /// server answers one command with one `write` instead of one per key,
    /// which is most of its cost for small values.
    pub fn merge_gets(mut self, on: bool) -> Self {
        self.conn.merge_gets = on;
        self
    }

    /// The most bytes one multi-item reply (a multi-key `get`'s values, a
    /// `stats` listing) may hold before the connection is closed with a
    /// protocol error (default 256 MiB): a server that keeps sending items
    /// without `END` cannot grow the client's memory without bound. Raise it
    /// for `get_multi` of many large values on one server.
    pub fn max_reply_size(mut self, bytes: usize) -> Self {
        self.conn.limits.max_reply = bytes;
        self
    }

    /// The largest value accepted for writing and reading (default 1 MiB,
    /// memcached's default item size limit; at most 1 GiB, memcached's
    /// largest possible item).
    pub fn max_value_size(mut self, bytes: usize) -> Self {
        let bytes = bytes.min(memgroup_proto::MAX_ITEM_SIZE);
        self.max_value_size = bytes;
        self.conn.limits.max_value = bytes;
        self
    }

    /// Log in with these on every new connection before it carries a
    /// request (memcached's ASCII authentication, `memcached -Y`). A refused
    /// login is an [`ErrorKind::Auth`](crate::ErrorKind::Auth) error naming the server; the server is
    /// backed off like a dead one, so it is not retried in a tight loop.
    pub fn credentials(mut self, credentials: Credentials) -> Self {
        self.conn.credentials = Some(Arc::new(credentials));
        self
    }

    /// Log in with these on the connections to `group`'s servers, instead of
    /// the cluster-wide [`ClientBuilder::credentials`].
    pub fn group_credentials(mut self, group: &str, credentials: Credentials) -> Self {
        self.group_override(group).credentials = Some(Arc::new(credentials));
        self
    }

    /// Whether the servers speak memcached 1.6's meta protocol (default
    /// [`MetaProtocol::Detect`]: each server is asked once, with `mn`,
    /// when the first connection to it opens). On a server without it the
    /// client sends the classic command that does the same (`get`, `gets`,
    /// `gat`, `touch`, the storage commands, `delete`, `incr`/`decr`), and
    /// what has none (leases, stale marks, conditional deletes, …) fails
    /// with [`ErrorKind::Unsupported`](crate::ErrorKind::Unsupported)
    /// naming the server, unsent and not counted against it. Replicas then
    /// keep no CAS receipts, so their convergence check does nothing.
    /// `Never` suits memcached 1.4/1.5 and proxies such as twemproxy that
    /// close the connection on a command they do not know.
    pub fn meta_protocol(mut self, meta: MetaProtocol) -> Self {
        self.conn.meta = meta;
        self
    }

    /// [`ClientBuilder::meta_protocol`] for `group`'s servers alone.
    pub fn group_meta_protocol(mut self, group: &str, meta: MetaProtocol) -> Self {
        self.group_override(group).meta = Some(meta);
        self
    }

    /// Connect over TLS (feature `tls`): every new connection runs a TLS
    /// handshake, verifying the server's certificate against `config`'s
    /// authorities, then logs in if credentials are set. Also used for the
    /// connections [`Client::metadump`](crate::Client::metadump) opens.
    #[cfg(feature = "tls")]
    pub fn tls(mut self, config: crate::TlsConfig) -> Self {
        self.tls = Some(config);
        self
    }

    /// Connect to `group`'s servers with this TLS configuration, instead of
    /// the cluster-wide [`ClientBuilder::tls`] (feature `tls`).
    #[cfg(feature = "tls")]
    pub fn group_tls(mut self, group: &str, config: crate::TlsConfig) -> Self {
        self.group_override(group).tls = Some(config);
        self
    }
}
