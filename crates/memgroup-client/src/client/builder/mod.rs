//! [`ClientBuilder`]: the cluster description, cluster-wide overrides and the
//! client's own settings, validated into a [`Client`].

use std::sync::Arc;
use std::time::Duration;

use memgroup_hash::{HashStrategy, NodeNaming};
use memgroup_topology::{
    ClusterSpec, ReadFallback, Settings, SpecOverrides, Topology, WritePolicy,
};

use crate::client::migrate::Migration;
use crate::client::{Client, Hedge, Parts};
use crate::conn::ConnSettings;
use crate::conn::Credentials;
use crate::error::{Error, ErrorKind};
use crate::events::{Event, Events, Observe};
use crate::longkey::KeySchemes;
use crate::options::WriteWait;
use crate::pool::GroupSecurity;
use crate::value::{Codec, ValueFormat};

mod connect;
mod connection;
mod keys;
mod replication;
mod servers;

/// Configures and builds a [`Client`].
///
/// ```no_run
/// # async fn demo() -> Result<(), memgroup_client::Error> {
/// use std::time::Duration;
/// use memgroup_client::{Client, HashStrategy};
///
/// let client = Client::builder()
///     .evcache_groups("us-east-1a=10.0.0.1:11211,10.0.0.2:11211;us-east-1b=10.0.1.1:11211,10.0.1.2:11211")
///     .zone("us-east-1a")
///     .hash(HashStrategy::Ketama)
///     .pool_size(4)
///     .timeout(Duration::from_millis(200))
///     .build()?;
/// client.set("user:42", "Ada", 300).await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct ClientBuilder {
    /// The first error of a call that parses (a server list, a URL).
    error: Option<Error>,
    spec: ClusterSpec,
    overrides: SpecOverrides,
    op_timeout: Duration,
    conn: ConnSettings,
    max_value_size: usize,
    values: Codec,
    #[cfg(feature = "tls")]
    tls: Option<crate::TlsConfig>,
    /// Per group: its own TLS and credentials.
    groups: Vec<GroupOverride>,
    observe: Observe,
    /// The old cluster, in migration mode.
    migrate_from: Option<ClusterSpec>,
    key_schemes: KeySchemes,
    write_wait: WriteWait,
    converge: bool,
    repair_journal: Option<std::path::PathBuf>,
    repair_queue: usize,
    repair_grace: Duration,
    read_repair: bool,
    near_cache: Option<crate::client::NearCache>,
    hedge: Hedge,
    max_read_queue: usize,
    pub(super) discovery: crate::client::discover::Discovery,
}

/// A group's own TLS and credentials, as given to the builder.
#[derive(Debug, Clone, Default)]
struct GroupOverride {
    group: String,
    #[cfg(feature = "tls")]
    tls: Option<crate::TlsConfig>,
    credentials: Option<Arc<Credentials>>,
    meta: Option<crate::MetaProtocol>,
}

impl Default for ClientBuilder {
    fn default() -> Self {
        ClientBuilder {
            error: None,
            spec: ClusterSpec::default(),
            overrides: SpecOverrides::default(),
            op_timeout: Duration::from_millis(500),
            conn: ConnSettings::default(),
            max_value_size: 1024 * 1024,
            values: Codec::default(),
            #[cfg(feature = "tls")]
            tls: None,
            groups: Vec::new(),
            observe: Observe::default(),
            migrate_from: None,
            key_schemes: KeySchemes::default(),
            write_wait: WriteWait::Policy,
            converge: true,
            repair_journal: None,
            repair_queue: 10_000,
            repair_grace: Duration::from_secs(1),
            read_repair: false,
            near_cache: None,
            hedge: Hedge::default(),
            max_read_queue: 256,
            discovery: Default::default(),
        }
    }
}

impl ClientBuilder {
    fn settings(mut self, change: impl FnOnce(Settings) -> Settings) -> Self {
        self.spec.settings = change(std::mem::take(&mut self.spec.settings));
        self
    }

    /// The caller's zone: reads prefer groups in it (default none: reads
    /// go round-robin over every readable group). A group from
    /// [`evcache_groups`](ClientBuilder::evcache_groups) has its name as its
    /// zone.
    pub fn zone(self, zone: impl Into<String>) -> Self {
        self.settings(|s| s.with_local_zone(zone))
    }

    /// Where reads go after a miss or an error in the first group (default
    /// [`ReadFallback::OneMore`], EVCache's: one more group). Past the local
    /// zone, the [arbiter](ClientBuilder::arbiter)'s group comes first: it
    /// holds what a conditional write left (and takes the fallback reads).
    pub fn read_fallback(self, fallback: ReadFallback) -> Self {
        self.settings(|s| s.with_read_fallback(fallback))
    }

    /// How many read-write groups a write must reach to succeed (default
    /// [`WritePolicy::AllMinusOne`]: all but one, at least one).
    pub fn write_policy(self, policy: WritePolicy) -> Self {
        self.settings(|s| s.with_write_policy(policy))
    }

    /// Whalin-style failover to the next live server of a group when the
    /// key's server is dead (default: on for one group, off for several).
    pub fn failover(self, on: bool) -> Self {
        self.settings(|s| s.with_failover(on))
    }

    /// The group that decides conditional writes (`add`, `replace`, `cas`,
    /// `append`, `prepend`, `incr`, `decr`) for every client of the cluster
    /// (default: the first read-write group by name). Only memgroup
    /// honours it: in a fleet mixed with other clients, theirs still send
    /// conditional writes to every group.
    pub fn arbiter(self, group: impl Into<String>) -> Self {
        self.settings(|s| s.with_arbiter(group))
    }

    /// Let conditional writes move to the next read-write group (by name)
    /// while the arbiter's server is unreachable (default off: while
    /// clients disagree about the outage, two arbiters could each grant the
    /// same `add`).
    pub fn arbiter_failover(self, on: bool) -> Self {
        self.settings(|mut s| {
            s.arbiter_failover = on;
            s
        })
    }

    /// First dead-host backoff, doubling per consecutive failure up to `max`
    /// (default 1 s up to 10 minutes, Whalin's).
    pub fn backoff(self, initial: Duration, max: Duration) -> Self {
        self.settings(|s| s.with_backoff(initial, max))
    }

    /// The hashing strategy of every group (see [`ClusterSpec::with_hash`];
    /// the groups' other locator settings are kept). Default: each group's
    /// own, which is [`HashStrategy::Ketama`] (spymemcached's ring, as
    /// EVCache uses) unless its description names another.
    pub fn hash(mut self, strategy: HashStrategy) -> Self {
        self.overrides.hash = Some(strategy);
        self
    }

    /// The ketama node-naming policy of every group (default: each group's
    /// own, [`NodeNaming::Spymemcached`] unless its description names another).
    pub fn node_naming(mut self, naming: NodeNaming) -> Self {
        self.overrides.node_naming = Some(naming);
        self
    }

    /// Whalin-style key sanitizing (URL-encoding), applied to routing and to
    /// the key sent on the wire, so keys match a default Java client's
    /// (default off).
    pub fn sanitize_keys(mut self, on: bool) -> Self {
        self.overrides.sanitize_keys = Some(on);
        self
    }

    /// Put `prefix` in front of every key, as if each were given with it:
    /// `key_prefix("app:")` stores `user:42` as `app:user:42`, hashed and
    /// checked against the 250-byte limit as that (default none). Services
    /// sharing a fleet keep their keys apart this way: Dalli's `namespace`,
    /// pymemcache's `key_prefix`, EVCache's cache prefix (EVCache adds a `:`
    /// after its prefix; give it here with the colon). Results and errors
    /// speak of the keys as given; what the server itself names shows the
    /// stored keys, prefix included: a meta reply's `k` flag, the crawler's
    /// listings ([`Client::metadump`]). A long key's digest key
    /// ([`long_keys`](Self::long_keys)) is not behind it: give long keys a
    /// prefix of their own (`LongKeys::prefix("app:lk:")`). A binary key
    /// (the meta `b` flag) is refused behind a prefix. The prefix holds in
    /// migration mode for the old layout too (the same keys, moving), and
    /// across [`Client::set_topology`]. Refused when built if over 200 bytes
    /// (as it goes on the wire) or holding a space or control character.
    pub fn key_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.overrides.key_prefix = Some(prefix.into());
        self
    }

    /// Connections per server in every group (EVCache's poolSize; default 1:
    /// one pipelined connection carries many requests at once). A write
    /// still goes to exactly one of them per group. Requests take the
    /// connections in turn, and at light load an idle one over a busy one,
    /// so each caller has a connection to itself.
    pub fn pool_size(mut self, size: usize) -> Self {
        self.overrides.pool_size = Some(size);
        self
    }

    /// Calls `callback` on every [`Event`]: a server marked dead or up
    /// again, a write that missed its policy, the topology replaced. It runs
    /// on the task that noticed, outside the client's locks: keep it short.
    ///
    /// ```no_run
    /// use memgroup_client::{Client, Event};
    /// # fn demo() -> Result<(), memgroup_client::Error> {
    /// let client = Client::builder()
    ///     .servers("10.0.0.1:11211,10.0.0.2:11211")
    ///     .on_event(|event| {
    ///         if let Event::ServerDown { server, .. } = event {
    ///             eprintln!("{server} is down");
    ///         }
    ///     })
    ///     .build()?;
    /// # Ok(()) }
    /// ```
    pub fn on_event(mut self, callback: impl Fn(&Event) + Send + Sync + 'static) -> Self {
        self.observe.events = Events::new(callback);
        self
    }

    /// Record each operation's key in its tracing span (feature `tracing`;
    /// default off: keys can be personal data).
    #[cfg(feature = "tracing")]
    pub fn trace_keys(mut self, on: bool) -> Self {
        self.observe.trace_keys = on;
        self
    }

    fn group_override(&mut self, group: &str) -> &mut GroupOverride {
        match self.groups.iter().position(|g| g.group == group) {
            Some(i) => &mut self.groups[i],
            None => {
                self.groups.push(GroupOverride {
                    group: group.to_string(),
                    ..GroupOverride::default()
                });
                self.groups.last_mut().expect("just pushed")
            }
        }
    }

    /// How typed reads and writes (`get_as`, `set_as`, `decode`)
    /// encode values: the convention of the clients the fleet is shared with
    /// (default [`ValueFormat::Raw`]; see [`crate::value`]). Per call:
    /// [`Client::with_value_format`].
    pub fn value_format(mut self, format: ValueFormat) -> Self {
        self.values.format = format;
        self
    }

    /// The largest a compressed value may grow when decompressed (default
    /// 20 MiB, EVCache's maximum data size); beyond it a read fails with an
    /// [`ErrorKind::Corrupt`] error instead of allocating.
    pub fn max_decompressed_size(mut self, bytes: usize) -> Self {
        self.values.max_decompressed = bytes;
        self
    }

    /// The cluster description with the cluster-wide overrides applied.
    fn spec(&self) -> ClusterSpec {
        self.spec.clone().with_overrides(&self.overrides)
    }

    /// Migration mode (see [`MigrationStatus`](crate::MigrationStatus)): this builder describes the
    /// new layout, `old` the layout the cache was filled under. Reads miss
    /// over to the old placement and backfill the new one (with the
    /// remaining TTL); writes go to the new placement; deletes to both. The
    /// old cluster keeps its own hashing and groups (the builder's `hash`,
    /// `node_naming` and `sanitize_keys` overrides apply to the new one
    /// only); timeouts, TLS, credentials (and a group's own, for groups of
    /// the same name) and the key prefix are shared.
    pub fn migrate_from(mut self, old: ClusterSpec) -> Self {
        self.migrate_from = Some(old);
        self
    }

    /// The client of the old cluster for a migration begun on a running
    /// client whose layout is now `current` ([`Client::set_migration`]).
    /// `current` already carries the overrides and the key prefix in use.
    pub(crate) fn old_client_of(
        &self,
        current: ClusterSpec,
        old: ClusterSpec,
        timeout: Duration,
    ) -> Result<Client, Error> {
        let mut builder = self.clone();
        builder.spec = current;
        builder.op_timeout = timeout;
        builder.overrides = SpecOverrides {
            pool_size: self.overrides.pool_size,
            ..SpecOverrides::default()
        };
        builder.old_client(old)
    }

    /// The client of the old cluster, in migration mode.
    fn old_client(&self, old: ClusterSpec) -> Result<Client, Error> {
        // The same keys move: behind the new layout's key prefix unless the
        // old description names its own; the builder's prefix wins in both.
        let mut old = old.old_layout_of(&self.spec());
        if let Some(prefix) = &self.overrides.key_prefix {
            old.settings.key_prefix = Some(prefix.clone());
        }
        let mut builder = self.clone();
        builder.spec = old;
        // The old layout keeps its own hashing; the pool size carries over.
        builder.overrides = SpecOverrides {
            pool_size: self.overrides.pool_size,
            ..SpecOverrides::default()
        };
        builder.migrate_from = None;
        let kept = |name: &str| builder.spec.groups.iter().any(|s| s.name == name);
        builder.groups.retain(|g| kept(&g.group));
        let schemes = std::mem::take(&mut builder.key_schemes.groups);
        builder.key_schemes.groups = schemes.into_iter().filter(|(g, _)| kept(g)).collect();
        builder.build()
    }

    /// Builds the client. Connections open lazily, on first use. A cluster
    /// found by discovery is built by [`ClientBuilder::connect`] instead.
    pub fn build(self) -> Result<Client, Error> {
        if let Some(error) = self.error {
            return Err(error);
        }
        if !self.discovery.groups.is_empty() {
            return Err(Error::new(
                ErrorKind::Config,
                "a discovered cluster is asked for its servers when it connects: use ClientBuilder::connect, not build",
            ));
        }
        self.build_now()
    }

    pub(super) fn build_now(mut self) -> Result<Client, Error> {
        if self.spec.groups.is_empty() {
            return Err(Error::new(ErrorKind::Config, "no server groups configured"));
        }
        let migration = match self.migrate_from.take() {
            Some(old) => Some(Migration::new(self.old_client(old.clone())?, old)),
            None => None,
        };
        // What a migration begun later builds its old placement's client from.
        let recipe = Box::new(self.clone());
        let topology = Topology::new(self.spec())?;
        check_zone(&topology)?;
        self.check_key_schemes(&topology)?;
        if self.op_timeout.is_zero() || self.conn.connect_timeout.is_zero() {
            return Err(Error::new(
                ErrorKind::Config,
                "a timeout of 0 would fail every request: give one above zero",
            ));
        }
        if self.conn.max_in_flight == 0 {
            return Err(Error::new(
                ErrorKind::Config,
                "max_in_flight 0 would let no request through: give at least 1",
            ));
        }
        #[allow(unused_mut)]
        let mut conn = self.conn;
        #[cfg(feature = "tls")]
        if let Some(tls) = &self.tls {
            conn.tls = Some(tls.connector()?);
        }
        let mut groups = Vec::with_capacity(self.groups.len());
        for own in self.groups {
            if topology.group_by_name(&own.group).is_none() {
                return Err(Error::new(
                    ErrorKind::Config,
                    format!(
                        "TLS, credentials or meta_protocol given for group {:?}, which the cluster does not have",
                        own.group
                    ),
                ));
            }
            groups.push(GroupSecurity {
                #[cfg(feature = "tls")]
                tls: own
                    .tls
                    .as_ref()
                    .map(crate::TlsConfig::connector)
                    .transpose()?,
                credentials: own.credentials,
                meta: own.meta,
                group: own.group,
            });
        }
        Ok(Client::new(Parts {
            topology,
            conn,
            groups,
            observe: self.observe,
            max_value_size: self.max_value_size,
            timeout: self.op_timeout,
            values: self.values,
            migration,
            recipe,
            key_schemes: self.key_schemes,
            write_wait: self.write_wait,
            converge: self.converge,
            repairs: (self.repair_queue, self.repair_grace),
            journal: self.repair_journal,
            read_repair: self.read_repair,
            near: self.near_cache,
            hedge: (self.hedge, self.max_read_queue),
        }))
    }
}

impl Client {
    /// A builder.
    pub fn builder() -> ClientBuilder {
        ClientBuilder::default()
    }
}

/// The local zone must be some group's zone: a typo would otherwise make
/// every read remote, silently. (The topology itself allows a zone without a
/// copy; building a client refuses it.)
fn check_zone(topology: &Topology) -> Result<(), Error> {
    let Some(zone) = topology.settings().local_zone.as_deref() else {
        return Ok(());
    };
    let zones: Vec<String> = topology
        .groups()
        .iter()
        .filter_map(|g| g.zone().map(str::to_string))
        .collect();
    if zones.iter().any(|z| z == zone) {
        return Ok(());
    }
    Err(memgroup_topology::TopologyError::UnknownZone {
        zone: zone.to_string(),
        zones,
    }
    .into())
}
