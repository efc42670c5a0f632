//! The [`Client`] handle and the one step every operation shares: sending one
//! request to one target within the timeout ([`Client::exec`]).
//!
//! The operations live beside their engines: reads in [`read`](crate::client::read),
//! writes and replication in [`write`](crate::client::write), per-server commands in
//! [`admin`](crate::client::admin), typed values in [`typed`](crate::client::typed); building one in
//! [`builder`](crate::client::builder).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use memgroup_proto::Response;
use memgroup_topology::{ClusterSpec, Topology};

mod admin;
mod builder;
mod close;
pub mod crawler;
pub mod discover;
mod exec;
mod fill;
mod health;
pub(crate) mod hedge;
mod migrate;
pub(crate) mod near;
mod read;
pub(crate) mod repair;
#[cfg(feature = "serde")]
mod serde;
pub(crate) mod trace;
mod typed;
mod url;
mod watch;
mod wire;
pub(crate) use wire::WireKey;
mod write;

#[cfg(feature = "serde")]
pub use self::serde::{Json, Postcard, SERDE_JSON_FLAGS, SERDE_POSTCARD_FLAGS};
pub use admin::Probe;
pub use builder::ClientBuilder;
pub use fill::{Fill, Filled, Freshness};
pub use health::{GroupHealth, Health, ServerHealth, ServerState};
pub use hedge::Hedge;
pub use migrate::MigrationStatus;
pub use near::{NearCache, NearStatus};
pub use repair::RepairStatus;
pub use repair::journal::{JournalEntry, OwedRepair, forget_repairs, list_repair_journal};
pub use typed::{FromItem, ToItem};
pub use url::ClientUrl;
pub use watch::Watcher;
pub use write::MultiWrite;

use crate::conn::ConnSettings;
use crate::error::{Error, ErrorKind};
use crate::events::Observe;
use crate::longkey::KeySchemes;
use crate::options::WriteWait;
use crate::pool::{GroupSecurity, Pool, Snapshot};
use crate::value::Codec;
use migrate::Migration;
use parking_lot::RwLock;
use trace::Attempt;

/// A key as each group stores it ([`Client::wire_keys`]): the group's name
/// and the key's bytes there, in the topology's group order.
pub type WireKeys = Vec<(Arc<str>, Vec<u8>)>;

/// The memcached cluster client. Cheap to clone; clones share connections.
///
/// See the [crate docs](crate) for a tour.
#[derive(Debug, Clone)]
pub struct Client {
    pub(crate) inner: Arc<Inner>,
    /// This handle's own timeout ([`Client::with_timeout`]); `None`: the
    /// client's, which [`Client::set_timeout`] changes.
    timeout: Option<Duration>,
    /// How this handle's typed reads and writes encode values.
    pub(crate) values: Codec,
    /// Whether this handle takes keys as memcached's text protocol carries
    /// them ([`Client::with_raw_keys`]).
    raw_keys: bool,
}

#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) pool: Pool,
    /// Rotates writes over the pool slots and reads over equal groups.
    rotation: AtomicU64,
    max_value_size: usize,
    /// Whether operation spans record the key (feature `tracing`).
    #[cfg_attr(not(feature = "tracing"), allow(dead_code))]
    pub(crate) trace_keys: bool,
    /// The old placement, in migration mode.
    migration: RwLock<Option<Arc<Migration>>>,
    /// The builder as it built this client: a migration begun later builds
    /// its old placement's client from it.
    recipe: Box<crate::ClientBuilder>,
    /// The operation timeout, in nanoseconds, of handles without their own.
    timeout: AtomicU64,
    /// Long keys stored under digests, when on: cluster-wide or per group.
    pub(crate) key_schemes: KeySchemes,
    /// When replicated writes return.
    pub(crate) write_wait: WriteWait,
    /// Whether plain stores keep receipts for the convergence check.
    pub(crate) converge: bool,
    /// Copies the convergence checks deleted.
    pub(crate) converged: AtomicU64,
    /// Hedged reads and the read queue bound.
    pub(crate) hedging: hedge::Hedging,
    /// Deletes owed to servers that missed a write.
    pub(crate) repairs: Arc<repair::Repairs>,
    /// The near cache, when on.
    pub(crate) near: Option<near::Near>,
    /// Handles to the operation-duration histograms (feature `metrics`).
    pub(crate) durations: crate::metrics::Durations,
    /// Concurrent `get_or_fill` calls per key, sharing one flight.
    pub(crate) flights: Arc<fill::flight::Flights>,
    /// Whether fallback hits are copied into the groups that missed.
    pub(crate) read_repair: bool,
    /// Copies a read repair or a consistent read stored (or deleted).
    pub(crate) read_repairs: AtomicU64,
    /// Writes still finishing for groups their caller did not wait for.
    background: AtomicUsize,
    /// Woken when a background write ends or repairs are drained
    /// ([`Client::close`] waits on it).
    pub(crate) settled: tokio::sync::Notify,
    /// Set by a close past its deadline: the writes still finishing in the
    /// background queue repairs for their outstanding groups and end.
    pub(crate) closing: tokio::sync::watch::Sender<bool>,
}

/// Counts one background write while it lives.
pub(crate) struct Background(Arc<Inner>);

impl Drop for Background {
    fn drop(&mut self) {
        self.0.background.fetch_sub(1, Ordering::AcqRel);
        self.0.settled.notify_waiters();
    }
}

impl Inner {
    /// Background writes now.
    pub(crate) fn background_count(&self) -> usize {
        self.background.load(Ordering::Acquire)
    }

    /// Counts a background write until the guard drops.
    pub(crate) fn background(self: &Arc<Self>) -> Background {
        self.background.fetch_add(1, Ordering::AcqRel);
        Background(self.clone())
    }
}

/// What a client is made of, as the builder validated it.
pub(crate) struct Parts {
    pub(crate) topology: Topology,
    pub(crate) conn: ConnSettings,
    pub(crate) groups: Vec<GroupSecurity>,
    pub(crate) observe: Observe,
    pub(crate) max_value_size: usize,
    pub(crate) timeout: Duration,
    pub(crate) values: Codec,
    pub(crate) migration: Option<Migration>,
    pub(crate) recipe: Box<crate::ClientBuilder>,
    pub(crate) key_schemes: KeySchemes,
    pub(crate) write_wait: WriteWait,
    pub(crate) converge: bool,
    /// The repair queue's capacity (0: off) and grace period.
    pub(crate) repairs: (usize, Duration),
    /// The repair journal's directory, when on.
    pub(crate) journal: Option<std::path::PathBuf>,
    /// Hedged reads, and the read queue bound (0: off).
    pub(crate) hedge: (Hedge, usize),
    /// Read repair on.
    pub(crate) read_repair: bool,
    /// The near cache, when on.
    pub(crate) near: Option<NearCache>,
}

impl Client {
    /// A client of `parts.topology`; see [`ClientBuilder`](crate::ClientBuilder).
    pub(crate) fn new(parts: Parts) -> Client {
        // A journal that cannot be opened (no such place, a read-only
        // filesystem): the client runs without, which
        // [`Client::repair_journal`] tells.
        let journal = parts
            .journal
            .as_deref()
            .filter(|_| parts.repairs.0 > 0)
            .and_then(|dir| repair::journal::Journal::open(dir).ok());
        let client = Client::with_journal(parts, journal);
        client.adopt_journal();
        client
    }

    fn with_journal(parts: Parts, journal: Option<repair::journal::Journal>) -> Client {
        Client {
            inner: Arc::new(Inner {
                pool: Pool::new(
                    parts.topology,
                    parts.conn,
                    parts.groups,
                    parts.observe.events,
                ),
                rotation: AtomicU64::new(0),
                max_value_size: parts.max_value_size,
                trace_keys: parts.observe.trace_keys,
                migration: RwLock::new(parts.migration.map(Arc::new)),
                recipe: parts.recipe,
                timeout: AtomicU64::new(nanos_of(parts.timeout)),
                key_schemes: parts.key_schemes,
                write_wait: parts.write_wait,
                converge: parts.converge,
                converged: AtomicU64::new(0),
                repairs: Arc::new(repair::Repairs::new(
                    parts.repairs.0,
                    parts.repairs.1,
                    journal,
                )),
                read_repair: parts.read_repair,
                read_repairs: AtomicU64::new(0),
                flights: Arc::default(),
                near: parts.near.map(near::Near::new),
                hedging: hedge::Hedging::new(parts.hedge.0, parts.hedge.1),
                background: AtomicUsize::new(0),
                settled: tokio::sync::Notify::new(),
                closing: tokio::sync::watch::Sender::new(false),
                durations: crate::metrics::Durations::new(),
            }),
            timeout: None,
            values: parts.values,
            raw_keys: false,
        }
    }

    /// A handle for the client's own background work (the repair queue's
    /// deletes), with the raw value codec.
    pub(crate) fn background(inner: Arc<Inner>, timeout: Duration) -> Client {
        Client {
            inner,
            timeout: Some(timeout),
            values: Codec::default(),
            raw_keys: false,
        }
    }

    /// A handle to the same client that takes keys as memcached's text
    /// protocol carries them ([`Key::new_raw`](memgroup_proto::Key::new_raw):
    /// control bytes and DEL allowed; space, `\r`, `\n` and NUL still
    /// refused), sent and hashed as they are, as the classic clients that
    /// send such keys do. What `memgroup proxy` uses: a key its clients send
    /// reaches the server their other clients route it to.
    pub fn with_raw_keys(&self) -> Client {
        Client {
            raw_keys: true,
            ..self.clone()
        }
    }

    /// A handle to the same client whose operations use `timeout`.
    pub fn with_timeout(&self, timeout: Duration) -> Client {
        Client {
            timeout: Some(timeout),
            ..self.clone()
        }
    }

    /// Changes the operation timeout of this client and of every handle
    /// cloned from it, for operations that start from now on (a handle made
    /// by [`Client::with_timeout`] keeps its own). What a reloaded
    /// configuration's `timeout_ms` does. A timeout of zero is refused.
    pub fn set_timeout(&self, timeout: Duration) -> Result<(), Error> {
        if timeout.is_zero() {
            return Err(Error::new(
                ErrorKind::Config,
                "a timeout of 0 would fail every request: give one above zero",
            ));
        }
        self.inner
            .timeout
            .store(nanos_of(timeout), Ordering::Relaxed);
        if let Some(migration) = self.migration() {
            migration.old.set_timeout(timeout)?;
        }
        Ok(())
    }

    /// This handle's operation timeout.
    pub(crate) fn timeout(&self) -> Duration {
        self.timeout
            .unwrap_or_else(|| Duration::from_nanos(self.inner.timeout.load(Ordering::Relaxed)))
    }

    /// The old placement, while migrating.
    pub(crate) fn migration(&self) -> Option<Arc<Migration>> {
        self.inner.migration.read().clone()
    }

    /// The current topology.
    pub fn topology(&self) -> Arc<Topology> {
        self.snapshot().topology.clone()
    }

    /// Replaces the topology (servers or groups added or removed, weights or
    /// hashing changed). Connections to servers that stay are kept, and so is
    /// their dead-host state; operations already running finish on the old one.
    /// The [key prefix](ClientBuilder::key_prefix) carries over unless `spec`
    /// names one (an empty one removes it): a description read again from a
    /// server list does not move every key.
    pub fn set_topology(&self, mut spec: ClusterSpec) -> Result<(), Error> {
        if spec.settings.key_prefix.is_none() {
            spec.settings
                .key_prefix
                .clone_from(&self.snapshot().topology.spec().settings.key_prefix);
        }
        self.inner.pool.set_topology(Topology::new(spec)?);
        Ok(())
    }

    /// Opens every connection slot of every server now. Fails only if no
    /// server could be reached.
    pub async fn connect_all(&self) -> Result<(), Error> {
        self.inner.pool.connect_all().await
    }

    /// Checks `key` as every request checks it, sending nothing: after the
    /// key transform (and, with long keys on, as its digest key) it must be
    /// a valid memcached key. `Err` is [`ErrorKind::InvalidKey`](crate::ErrorKind::InvalidKey),
    /// naming the key and the offending byte. For validating a batch of
    /// keys before any of them is read or written.
    ///
    /// ```no_run
    /// # fn demo(client: memgroup_client::Client) {
    /// assert!(client.check_key("user:42").is_ok());
    /// assert!(client.check_key("user 42").is_err());
    /// # }
    /// ```
    pub fn check_key(&self, key: impl AsRef<[u8]>) -> Result<(), Error> {
        self.wire_key(&self.snapshot(), key.as_ref()).map(drop)
    }

    /// The key as each group stores it, in the topology's group order: the
    /// key prefix and sanitising applied, and a long or hashed key's digest
    /// (each group's own key scheme where it has one). What `memgroup
    /// route` shows beside the key. `Err` as [`Client::check_key`].
    ///
    /// ```no_run
    /// # fn demo(client: memgroup_client::Client) -> Result<(), memgroup_client::Error> {
    /// for (group, wire) in client.wire_keys("user:42")? {
    ///     println!("{group}: {}", String::from_utf8_lossy(&wire));
    /// }
    /// # Ok(()) }
    /// ```
    pub fn wire_keys(&self, key: impl AsRef<[u8]>) -> Result<WireKeys, Error> {
        let snap = self.snapshot();
        let wire = self.wire_key(&snap, key.as_ref())?;
        Ok(snap
            .topology
            .groups()
            .iter()
            .map(|g| {
                (
                    snap.group_name(g.id()).clone(),
                    wire.bytes_of(g.id()).to_vec(),
                )
            })
            .collect())
    }

    pub(crate) fn snapshot(&self) -> Arc<Snapshot> {
        self.inner.pool.snapshot()
    }

    pub(crate) fn rotation(&self) -> u64 {
        self.inner.rotation.fetch_add(1, Ordering::Relaxed)
    }
}

/// Refuses quiet mode (`q`) for `command`: its replies would not pair.
pub(crate) fn refuse_quiet(flags: &[memgroup_proto::MetaFlag], command: &str) -> Result<(), Error> {
    if flags.iter().any(|f| f.is_quiet()) {
        return Err(Error::new(
            ErrorKind::InvalidArgument,
            format!("quiet mode (q) is not supported by {command}"),
        ));
    }
    Ok(())
}

/// A reply of an unexpected kind (or none where one was due).
pub(crate) fn unexpected(reply: Option<&Response>) -> Error {
    Error::new(ErrorKind::Protocol, format!("unexpected reply {reply:?}"))
}

/// A timeout in nanoseconds, saturating (a timeout of centuries is no timeout).
fn nanos_of(timeout: Duration) -> u64 {
    u64::try_from(timeout.as_nanos()).unwrap_or(u64::MAX)
}
