//! # memgroup-client: the async memcached cluster client
//!
//! A tokio client for memcached fleets shared with Java, Python and C
//! services, with EVCache-style replication across server groups.
//!
//! - **Routing** comes from [`memgroup_hash`]: pick the hashing strategy the
//!   rest of the fleet uses (Whalin native/old-compat/new-compat/consistent,
//!   ketama) and every key lands on the server the other clients pick.
//! - **Server groups** come from [`memgroup_topology`]: reads go to the group
//!   in the caller's zone and fall back to others on a miss or an error;
//!   writes go to exactly one connection in every group, and the write policy
//!   decides success; [`Client::add_or_set`] warms chosen groups with exactly
//!   one write per key per group, whatever the pool size.
//! - **Connections** are pipelined: many requests in flight on one TCP
//!   connection, replies paired in order, concurrent writes coalesced, with a
//!   cap on requests in flight. Dropping a call's future or timing it out
//!   never desynchronises a connection: its reply is read and discarded.
//!   `pool_size` connections per server, opened lazily.
//! - **Failures** are typed ([`Error`] with `is_timeout()`, `is_connection()`,
//!   …): a dead server is backed off (1 s, doubling to 10 min) and skipped;
//!   with failover on, its keys move to the server the Java client would pick.
//!   Invalid keys and oversized values are refused before a byte is sent;
//!   [`Client::check_key`] checks a key before it is used.
//!   A miss is `Ok(None)`, never an error.
//!
//! ```no_run
//! use memgroup_client::Client;
//!
//! # async fn demo() -> Result<(), memgroup_client::Error> {
//! // One group of servers, default (ketama) hashing, connections opened now.
//! let client = Client::connect("127.0.0.1:11211,127.0.0.1:11212").await?;
//! client.set("greeting", "hello", 60).await?;
//! let item = client.get("greeting").await?.expect("just stored");
//! assert_eq!(&item.value[..], b"hello");
//!
//! // Many keys: one `get k1 k2 …` per server, sent concurrently.
//! let items = client.get_multi(&["greeting", "missing"]).await?;
//! assert_eq!(items.hit_count(), 1); // and items.len() == 2: one outcome per key
//! # Ok(()) }
//! ```
//!
//! Two zones, each a full copy, reading locally:
//!
//! ```no_run
//! use memgroup_client::{Client, HashStrategy, WritePolicy};
//!
//! # async fn demo() -> Result<(), memgroup_client::Error> {
//! let client = Client::builder()
//!     .evcache_groups("us-east-1a=10.0.0.1:11211,10.0.0.2:11211;us-east-1b=10.0.1.1:11211,10.0.1.2:11211")
//!     .zone("us-east-1a")
//!     .hash(HashStrategy::Ketama)
//!     .pool_size(4)
//!     .write_policy(WritePolicy::Quorum)
//!     .build()?;
//! let outcome = client.set("user:42", "Ada", 300).await?;
//! for (group, error) in outcome.failed() {
//!     eprintln!("{group} missed the write: {error}");
//! }
//! # Ok(()) }
//! ```
//!
//! # Defaults
//!
//! What a client built with no further calls does; each [`ClientBuilder`]
//! method says the same beside its setting.
//!
//! | setting | builder method | default |
//! |---|---|---|
//! | hashing | [`hash`](ClientBuilder::hash) | each group's own: ketama (spymemcached's ring) unless its description names another |
//! | ketama node names | [`node_naming`](ClientBuilder::node_naming) | spymemcached's |
//! | connections per server | [`pool_size`](ClientBuilder::pool_size) | 1 (pipelined) |
//! | operation timeout | [`timeout`](ClientBuilder::timeout) | 500 ms |
//! | connect timeout | [`connect_timeout`](ClientBuilder::connect_timeout) | 1 s |
//! | timeouts in a row that mark a server down | [`timeouts_until_down`](ClientBuilder::timeouts_until_down) | 3 |
//! | dead-server backoff | [`backoff`](ClientBuilder::backoff) | 1 s, doubling up to 10 minutes |
//! | failover to another server of the group | [`failover`](ClientBuilder::failover) | on for one group, off for several |
//! | zone | [`zone`](ClientBuilder::zone) | none: reads go round-robin over the readable groups |
//! | read fallback | [`read_fallback`](ClientBuilder::read_fallback) | [`ReadFallback::OneMore`] |
//! | write policy | [`write_policy`](ClientBuilder::write_policy) | [`WritePolicy::AllMinusOne`] |
//! | a write returns | [`write_wait`](ClientBuilder::write_wait) | once its policy is decided |
//! | arbiter of conditional writes | [`arbiter`](ClientBuilder::arbiter) | the first read-write group by name |
//! | requests in flight per connection | [`max_in_flight`](ClientBuilder::max_in_flight) | 1024 |
//! | concurrent single-key `get`s merged | [`merge_gets`](ClientBuilder::merge_gets) | on |
//! | largest value | [`max_value_size`](ClientBuilder::max_value_size) | 1 MiB |
//! | largest reply | [`max_reply_size`](ClientBuilder::max_reply_size) | 256 MiB |
//! | value format | [`value_format`](ClientBuilder::value_format) | raw bytes |
//! | keys over 250 bytes | [`long_keys`](ClientBuilder::long_keys) | refused |
//! | a prefix in front of every key | [`key_prefix`](ClientBuilder::key_prefix) | none |
//! | repair queue | [`repair_queue`](ClientBuilder::repair_queue) | 10,000 deletes |
//! | read repair | [`read_repair`](ClientBuilder::read_repair) | off |
//! | hedged `get`s | [`hedge`](ClientBuilder::hedge) | after 5 ms, for at most 10 % of reads (with several groups) |
//! | read queue bound | [`max_read_queue`](ClientBuilder::max_read_queue) | 256 outstanding |
//! | near cache | [`near_cache`](ClientBuilder::near_cache) | off |
//! | discovery poll | [`discover_every`](ClientBuilder::discover_every) | 60 s |
//!
//! # One dependency
//!
//! Everything [`ClientBuilder`] takes is re-exported at this crate's root
//! from the crates that define it, so `memgroup-client` alone is a
//! service's dependency: [`HashStrategy`], [`NodeNaming`] and
//! [`LocatorConfig`] are `memgroup_hash`'s; [`ClusterSpec`], [`GroupSpec`],
//! [`ServerSpec`], [`ServerAddr`], [`Settings`], [`ReadFallback`],
//! [`WritePolicy`] and [`TopologyError`] (what the cluster parsers return,
//! which converts into [`Error`]) are `memgroup_topology`'s. They are the
//! same types under a second path, not copies: a value made through one
//! path is accepted wherever the other is named.
//!
//! ```no_run
//! use memgroup_client::{Client, GroupSpec, HashStrategy, ServerAddr, ServerSpec};
//!
//! # fn demo() -> Result<(), memgroup_client::Error> {
//! let servers = vec![ServerSpec::new(ServerAddr::new("10.0.0.1", 11211)).with_weight(2)];
//! let client = Client::builder()
//!     .group(GroupSpec::new("sg1", servers).with_zone("us-east-1a"))
//!     .hash(HashStrategy::NewCompat)
//!     .build()?;
//! # let _ = client;
//! # Ok(()) }
//! ```
//!
//! A `memcache://` URL carries a cluster and the client's own settings
//! ([`ClientUrl`]): [`ClientBuilder::url`] applies them all. The
//! `cluster.toml` file of the `memgroup` tool is read by the `memgroup`
//! crate's `config` module (feature `config`), whose
//! `ClusterFile::builder` gives a [`ClientBuilder`] with every setting of
//! the file applied.
//!
//! # Layout
//!
//! The modules are rooms stacked by layer; each uses only the rooms below it
//! (a tidy test in the workspace's suite fails on an upward `use`):
//!
//! - **Leaves** — `error` (the opaque [`Error`]), `item` (what operations
//!   return), `events` ([`Event`] and the user's callback), `clock` (the
//!   only reads of the time: tokio's clock, so tests run under paused time),
//!   `counters` (per-server atomics and latency histograms), `options`
//!   ([`Expiry`], [`WriteOptions`]: what every write takes), `longkey`,
//!   [`value`] (value formats), `join`, [`metrics`] (feature `metrics`:
//!   the `metrics` facade).
//! - **`conn/`** — one pipelined connection: `state` (the sans-IO state
//!   machine), the driver in `conn/mod.rs`, `read` (the reading side),
//!   `timer` (one timer per connection for its requests' deadlines), `idle`
//!   (a quiet connection checked for a close), `merge` (who gets which value of
//!   a merged `get`), `transport` (plain TCP or TLS under one readiness
//!   loop), `tls`, `login`, `open` (connect, handshake, log in), `probe`
//!   (whether a server speaks the meta protocol; classic forms where not).
//! - **`pool`** — `pool_size` connection slots per server, the current
//!   topology snapshot and the dead-host record.
//! - **`client/`** — the [`Client`] handle (`client/mod.rs`; `client/exec.rs`:
//!   `exec`, one request to one target) and every file that adds methods to it:
//!   `builder/`, `url`, `read/` (the read engine), `write/` (replication, and
//!   conditional writes through the arbiter), `repair` (the repair queue),
//!   `fill` (`get_or_fill`: leases and one flight per key),
//!   `hedge` (hedged reads, the read queue's fast-fail), `near` (the near
//!   cache), `discover` (the discovery poller), `serde`, `close`,
//!   `admin`, `typed`, `watch`, `crawler`, `health`, `trace`, `migrate`.
//!   Only files under `client/` name `Client`.

#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]

// The leaves: plain data, errors, the clock, counters, value formats.
mod clock;
mod counters;
mod error;
mod events;
mod item;
mod join;
mod longkey;
pub mod metrics;
mod options;
pub mod value;
// One connection: its state machine, merging, transport, TLS, login.
mod conn;
// Connection slots per server, the current topology, dead hosts.
mod pool;
// The handle and everything that adds methods to it.
mod client;

pub use client::Client;
pub use client::crawler;
pub use client::discover;
pub use client::{
    ClientBuilder, ClientUrl, Fill, Filled, Freshness, FromItem, GroupHealth, Health, Hedge,
    JournalEntry, MigrationStatus, MultiWrite, NearCache, NearStatus, OwedRepair, Probe,
    RepairStatus, ServerHealth, ServerState, ToItem, Watcher, WireKeys, forget_repairs,
    list_repair_journal,
};
#[cfg(feature = "serde")]
pub use client::{Json, Postcard, SERDE_JSON_FLAGS, SERDE_POSTCARD_FLAGS};
pub use conn::Credentials;
pub use conn::probe::MetaProtocol;
#[cfg(feature = "tls")]
pub use conn::tls::TlsConfig;
pub use counters::{Counters, Histogram};
pub use error::{Error, ErrorKind};
pub use events::Event;
pub use item::{GroupOutcome, GroupState, Item, MultiGet, ServerStats, WriteOutcome};
pub use longkey::{DigestFn, KeyDigest, LongKeys};
pub use memgroup_proto::{
    ArithMode, MetaFields, MetaFlag, MetaResponse, MetaStatus, MetaTtl, SetMode,
};
// What the builder takes, from the crates that define it (see "One
// dependency" above): the same types under a second path.
pub use memgroup_hash::evcache;
pub use memgroup_hash::{HashStrategy, LocatorConfig, NodeNaming};
pub use memgroup_topology::{
    ClusterSpec, GroupSpec, ReadFallback, ServerAddr, ServerSpec, Settings, Topology,
    TopologyError, WritePolicy,
};
pub use options::{Expiry, IfPresent, MAX_RELATIVE_EXPTIME, WriteOptions, WriteWait};

/// `Client` is shared across tasks: checked at compile time.
const _: () = {
    const fn shared<T: Clone + Send + Sync + 'static>() {}
    shared::<Client>();
};
