//! Plain descriptions of a cluster: servers, groups, policies. Nothing here is validated;
//! [`Topology::new`](crate::Topology::new) does that.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use memgroup_hash::{HashStrategy, LocatorConfig, Node, NodeNaming};

use crate::TopologyError;

/// A server's address as configured: a host (IP literal, name, or bracketed IPv6 literal)
/// and a port. Nothing here resolves names; the host is also what ketama hashes into its
/// ring point names, so it is kept verbatim.
///
/// ```
/// use memgroup_topology::ServerAddr;
/// let addr: ServerAddr = "10.0.0.1:11211".parse()?;
/// assert_eq!(addr, ServerAddr::new("10.0.0.1", 11211));
/// assert_eq!(addr.to_string(), "10.0.0.1:11211");
/// assert_eq!("[::1]:11211".parse::<ServerAddr>()?.host, "[::1]");
/// # Ok::<(), memgroup_topology::TopologyError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ServerAddr {
    /// Host, exactly as configured.
    pub host: String,
    /// TCP port.
    pub port: u16,
}

impl ServerAddr {
    /// An address.
    #[must_use]
    pub fn new(host: impl Into<String>, port: u16) -> ServerAddr {
        ServerAddr {
            host: host.into(),
            port,
        }
    }
}

impl ServerAddr {
    /// Splits a `host:port` name into its host (an IPv6 literal without its
    /// brackets) and port, without allocating: what telemetry reports as
    /// `server.address` and `server.port`. A name without a port (or with
    /// one that is not a number) has `None`.
    ///
    /// ```
    /// use memgroup_topology::ServerAddr;
    /// assert_eq!(ServerAddr::split("10.0.0.1:11211"), ("10.0.0.1", Some(11211)));
    /// assert_eq!(ServerAddr::split("[::1]:7000"), ("::1", Some(7000)));
    /// ```
    pub fn split(name: &str) -> (&str, Option<u16>) {
        match name.rsplit_once(':') {
            Some((host, port)) => (
                host.trim_start_matches('[').trim_end_matches(']'),
                port.parse().ok(),
            ),
            None => (name, None),
        }
    }
}

/// `host:port`: what a connector resolves, and what the error messages show.
impl fmt::Display for ServerAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.host, self.port)
    }
}

/// Parses `host:port` (a port is required; `[v6]:port` for IPv6 literals).
impl FromStr for ServerAddr {
    type Err = TopologyError;

    fn from_str(s: &str) -> Result<ServerAddr, TopologyError> {
        let entry = crate::parse::Entry::parse(s.trim(), None)?;
        // A weight or an alias makes a ServerSpec, not an address.
        if entry.weight.is_some() || entry.hostname.is_some() {
            return Err(TopologyError::BadAddress {
                token: s.trim().to_owned(),
            });
        }
        Ok(entry.addr)
    }
}

/// One server of a group.
///
/// ```
/// use memgroup_topology::{ServerAddr, ServerSpec};
/// let spec: ServerSpec = "10.0.0.1:11211:3".parse()?;
/// assert_eq!(spec, ServerSpec::new(ServerAddr::new("10.0.0.1", 11211)).with_weight(3));
/// let aliased: ServerSpec = "cache-1.example/10.0.0.1:11211".parse()?;
/// assert_eq!(aliased.hostname.as_deref(), Some("cache-1.example"));
/// # Ok::<(), memgroup_topology::TopologyError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ServerSpec {
    /// Where the server listens.
    pub addr: ServerAddr,
    /// Relative share of the keys (1 unless configured). Zero is refused.
    ///
    /// A group whose servers **all** have weight 1 is built as an *unweighted* server list,
    /// which is how EVCache and spymemcached configure their rings (spymemcached's weighted
    /// ketama rounds point counts differently from its unweighted one). For every other
    /// strategy weight 1 and "no weight" are the same.
    pub weight: u32,
    /// The host name a JVM would report for `addr.host` (EVCache's `hostname/ip` node-list
    /// form). Only [`NodeNaming::Evcache`](memgroup_hash::NodeNaming::Evcache) ring names use
    /// it.
    pub hostname: Option<String>,
}

impl ServerSpec {
    /// A server with weight 1 and no host name alias.
    #[must_use]
    pub fn new(addr: ServerAddr) -> ServerSpec {
        ServerSpec {
            addr,
            weight: 1,
            hostname: None,
        }
    }

    /// Sets the weight.
    #[must_use]
    pub fn with_weight(mut self, weight: u32) -> ServerSpec {
        self.weight = weight;
        self
    }

    /// Sets the host name alias.
    #[must_use]
    pub fn with_hostname(mut self, hostname: impl Into<String>) -> ServerSpec {
        self.hostname = Some(hostname.into());
        self
    }

    /// The hash crate's view of this server.
    pub(crate) fn node(&self, weighted: bool) -> Node {
        let mut node = Node::new(self.addr.host.clone(), self.addr.port);
        if weighted {
            node = node.with_weight(self.weight);
        }
        if let Some(hostname) = &self.hostname {
            node = node.with_hostname(hostname.clone());
        }
        node
    }
}

impl From<ServerAddr> for ServerSpec {
    fn from(addr: ServerAddr) -> ServerSpec {
        ServerSpec::new(addr)
    }
}

/// Parses one server entry, `[hostname/]host:port[:weight]` (port required).
impl FromStr for ServerSpec {
    type Err = TopologyError;

    fn from_str(s: &str) -> Result<ServerSpec, TopologyError> {
        Ok(crate::parse::Entry::parse(s.trim(), None)?.into_spec())
    }
}

/// One server group: a full copy of the data (EVCache: one per availability zone).
///
/// ```
/// use memgroup_hash::{HashStrategy, LocatorConfig, NodeNaming};
/// use memgroup_topology::{GroupSpec, ServerSpec};
/// let evcache = LocatorConfig::new(HashStrategy::Ketama).with_node_naming(NodeNaming::Evcache);
/// let group = GroupSpec::new("us-east-1c", ["10.0.0.1:11211".parse::<ServerSpec>()?])
///     .with_zone("us-east-1c")
///     .with_locator(evcache)
///     .with_pool_size(4);
/// assert!(!group.write_only);
/// # Ok::<(), memgroup_topology::TopologyError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupSpec {
    /// Unique name (EVCache: the server group / ASG name).
    pub name: String,
    /// Availability zone; reads prefer groups whose zone equals
    /// [`Settings::local_zone`]. `None` is never local.
    pub zone: Option<String>,
    /// Gets every write, serves no read, and never counts toward a write's success (EVCache
    /// uses this to warm a new copy before it takes reads).
    pub write_only: bool,
    /// The servers, in the order the reference clients were configured with (the order
    /// matters to every modulo strategy).
    pub servers: Vec<ServerSpec>,
    /// How keys map to this group's servers. All groups must agree on `sanitize_keys`.
    pub locator: LocatorConfig,
    /// Connection slots per server (EVCache's `poolSize`): more connections to the same
    /// servers, never more copies. At least 1, at most [`MAX_POOL_SIZE`].
    pub pool_size: usize,
}

/// Cluster-wide overrides of every group's hashing and pool, and of the key
/// prefix, each applied only when set ([`ClusterSpec::with_overrides`]): what
/// the client builder, a cluster file and a command line layer over a
/// cluster description.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SpecOverrides {
    /// Every group's hashing strategy ([`ClusterSpec::with_hash`]).
    pub hash: Option<HashStrategy>,
    /// Every group's ketama node naming ([`ClusterSpec::with_node_naming`]).
    pub node_naming: Option<NodeNaming>,
    /// Whalin key sanitising ([`ClusterSpec::with_sanitize_keys`]).
    pub sanitize_keys: Option<bool>,
    /// Every group's connections per server ([`ClusterSpec::with_pool_size`]).
    pub pool_size: Option<usize>,
    /// The prefix of every key ([`Settings::key_prefix`]).
    pub key_prefix: Option<String>,
}

/// The most connection slots per server a group may ask for: far above any
/// useful pool (EVCache's default is 1), low enough that a typo cannot make
/// the client allocate a table of billions of slots.
pub const MAX_POOL_SIZE: usize = 1024;

/// The longest [key prefix](Settings::key_prefix), in bytes: 50 of memcached's 250 are
/// left for the key itself.
pub const MAX_KEY_PREFIX: usize = 200;

impl GroupSpec {
    /// The default locator: ketama with spymemcached node names, the ring EVCache's
    /// spymemcached base uses. For EVCache's own `hostname/ip:11211` point names set
    /// [`NodeNaming::Evcache`](memgroup_hash::NodeNaming::Evcache) (note that it collapses
    /// servers sharing a host).
    #[must_use]
    pub fn default_locator() -> LocatorConfig {
        LocatorConfig::new(HashStrategy::Ketama)
    }

    /// A read-write group without a zone, with [`GroupSpec::default_locator`] and one
    /// connection slot per server.
    #[must_use]
    pub fn new(
        name: impl Into<String>,
        servers: impl IntoIterator<Item = ServerSpec>,
    ) -> GroupSpec {
        GroupSpec {
            name: name.into(),
            zone: None,
            write_only: false,
            servers: servers.into_iter().collect(),
            locator: GroupSpec::default_locator(),
            pool_size: 1,
        }
    }

    /// Sets the zone.
    #[must_use]
    pub fn with_zone(mut self, zone: impl Into<String>) -> GroupSpec {
        self.zone = Some(zone.into());
        self
    }

    /// Sets the write-only flag.
    #[must_use]
    pub fn with_write_only(mut self, write_only: bool) -> GroupSpec {
        self.write_only = write_only;
        self
    }

    /// Sets the locator configuration (strategy, node naming, key sanitising).
    #[must_use]
    pub fn with_locator(mut self, locator: LocatorConfig) -> GroupSpec {
        self.locator = locator;
        self
    }

    /// Sets the number of connection slots per server.
    #[must_use]
    pub fn with_pool_size(mut self, pool_size: usize) -> GroupSpec {
        self.pool_size = pool_size;
        self
    }

    /// Appends a server.
    #[must_use]
    pub fn with_server(mut self, server: ServerSpec) -> GroupSpec {
        self.servers.push(server);
        self
    }

    /// The server with address `addr`, if the group has it.
    #[must_use]
    pub fn server(&self, addr: &ServerAddr) -> Option<&ServerSpec> {
        self.servers.iter().find(|s| s.addr == *addr)
    }

    /// Removes the server with address `addr`, returning it.
    pub fn remove_server(&mut self, addr: &ServerAddr) -> Option<ServerSpec> {
        let index = self.servers.iter().position(|s| s.addr == *addr)?;
        Some(self.servers.remove(index))
    }

    /// Changes the weight of the server with address `addr`; `false` if there is none.
    pub fn set_weight(&mut self, addr: &ServerAddr, weight: u32) -> bool {
        match self.servers.iter_mut().find(|s| s.addr == *addr) {
            Some(server) => {
                server.weight = weight;
                true
            }
            None => false,
        }
    }
}

/// Which groups a read may try after a miss or an error in the first one.
///
/// Groups whose key server is dead are skipped and do not count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ReadFallback {
    /// `never`: only the first live group.
    Never,
    /// `one-more`: the first live group and one more (EVCache's default zone fallback).
    #[default]
    OneMore,
    /// `all-copies`: every readable group, until one answers.
    AllCopies,
}

impl ReadFallback {
    /// Every policy, in declaration order.
    pub const ALL: [ReadFallback; 3] = [
        ReadFallback::Never,
        ReadFallback::OneMore,
        ReadFallback::AllCopies,
    ];

    /// The policy's name, as accepted by `FromStr`.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            ReadFallback::Never => "never",
            ReadFallback::OneMore => "one-more",
            ReadFallback::AllCopies => "all-copies",
        }
    }

    /// How many groups a read may try in all (`usize::MAX` for every group).
    #[must_use]
    pub fn max_groups(self) -> usize {
        match self {
            ReadFallback::Never => 1,
            ReadFallback::OneMore => 2,
            ReadFallback::AllCopies => usize::MAX,
        }
    }
}

impl fmt::Display for ReadFallback {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Parses a name from [`ReadFallback::name`]; `_` may stand for `-`.
impl FromStr for ReadFallback {
    type Err = TopologyError;

    fn from_str(s: &str) -> Result<ReadFallback, TopologyError> {
        ReadFallback::ALL
            .into_iter()
            .find(|p| p.name() == s.replace('_', "-"))
            .ok_or_else(|| TopologyError::UnknownReadFallback {
                token: s.to_owned(),
            })
    }
}

/// How many **read-write** groups must take a write for it to succeed (EVCache's
/// `EVCacheLatch.Policy`). Write-only groups receive every write but never count.
///
/// `required(n)` for `n` read-write groups (`n = 0` always gives 0):
///
/// | policy | n = 1 | 2 | 3 | 4 | 5 | rule |
/// |---|---|---|---|---|---|---|
/// | `None` | 0 | 0 | 0 | 0 | 0 | fire and forget |
/// | `One` | 1 | 1 | 1 | 1 | 1 | |
/// | `Quorum` | 1 | 2 | 2 | 3 | 3 | strict majority, `n/2 + 1` |
/// | `AllMinusOne` | 1 | 1 | 2 | 3 | 4 | `n − 1`, at least 1 (EVCache's rule) |
/// | `All` | 1 | 2 | 3 | 4 | 5 | |
///
/// EVCache's latch computes `QUORUM` as 1 for more than two groups (it divides the size of
/// a still-empty future list) and as 1 for two; here it is a strict majority for every `n`.
///
/// The default is [`WritePolicy::AllMinusOne`], the policy EVCache itself picks where an
/// API call leaves it open (`appendOrAdd` without a policy) and the one its documentation
/// recommends: with one copy the write must land, with three copies one zone may be down.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum WritePolicy {
    /// `none`: a write always succeeds.
    None,
    /// `one`: one read-write group.
    One,
    /// `quorum`: a strict majority of the read-write groups.
    Quorum,
    /// `all-minus-one`: all read-write groups but one (at least one).
    #[default]
    AllMinusOne,
    /// `all`: every read-write group.
    All,
}

impl WritePolicy {
    /// Every policy, in declaration order.
    pub const ALL: [WritePolicy; 5] = [
        WritePolicy::None,
        WritePolicy::One,
        WritePolicy::Quorum,
        WritePolicy::AllMinusOne,
        WritePolicy::All,
    ];

    /// The policy's name, as accepted by `FromStr`.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            WritePolicy::None => "none",
            WritePolicy::One => "one",
            WritePolicy::Quorum => "quorum",
            WritePolicy::AllMinusOne => "all-minus-one",
            WritePolicy::All => "all",
        }
    }

    /// The number of successful read-write groups a write needs, out of
    /// `read_write_groups` (see the table above).
    ///
    /// ```
    /// use memgroup_topology::WritePolicy;
    /// assert_eq!(WritePolicy::Quorum.required(3), 2);
    /// assert_eq!(WritePolicy::Quorum.required(4), 3);
    /// assert_eq!(WritePolicy::AllMinusOne.required(2), 1);
    /// ```
    #[must_use]
    pub fn required(self, read_write_groups: usize) -> usize {
        let n = read_write_groups;
        if n == 0 {
            return 0;
        }
        match self {
            WritePolicy::None => 0,
            WritePolicy::One => 1,
            WritePolicy::Quorum => n / 2 + 1,
            WritePolicy::AllMinusOne => (n - 1).max(1),
            WritePolicy::All => n,
        }
    }
}

impl fmt::Display for WritePolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Parses a name from [`WritePolicy::name`]; `_` may stand for `-`.
impl FromStr for WritePolicy {
    type Err = TopologyError;

    fn from_str(s: &str) -> Result<WritePolicy, TopologyError> {
        WritePolicy::ALL
            .into_iter()
            .find(|p| p.name() == s.replace('_', "-"))
            .ok_or_else(|| TopologyError::UnknownPolicy {
                token: s.to_owned(),
            })
    }
}

/// The dead-host backoff after the first failure: Whalin's 1 s.
pub const DEFAULT_BACKOFF_INITIAL: Duration = Duration::from_secs(1);
/// The longest dead-host backoff: Whalin's `MAX_RETRY_DELAY`, 10 minutes.
pub const DEFAULT_BACKOFF_MAX: Duration = Duration::from_secs(600);

/// Cluster-wide policies.
///
/// ```
/// use memgroup_topology::{ReadFallback, Settings, WritePolicy};
/// let settings = Settings::default();
/// assert_eq!(settings.read_fallback, ReadFallback::OneMore);
/// assert_eq!(settings.write_policy, WritePolicy::AllMinusOne);
/// assert_eq!(settings.backoff_initial.as_secs(), 1);
/// assert_eq!(settings.backoff_max.as_secs(), 600);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// The caller's zone: reads try the groups of this zone first. `None`: no group is
    /// local, and reads round-robin over every readable group.
    pub local_zone: Option<String>,
    /// Where reads go after a miss or an error.
    pub read_fallback: ReadFallback,
    /// When a write counts as successful.
    pub write_policy: WritePolicy,
    /// Whalin failover inside a group: when the key's server is dead, use the next live
    /// server of the hash crate's failover sequence. `None` (the default) turns it on for a
    /// single-group cluster and off otherwise, where the other groups' copies serve instead.
    pub failover: Option<bool>,
    /// Dead-host backoff after the first consecutive failure; doubles with each further one.
    pub backoff_initial: Duration,
    /// Cap of the doubling backoff.
    pub backoff_max: Duration,
    /// The group that decides conditional writes (`add`, `replace`, `cas`,
    /// `append`, `prepend`, `incr`, `decr`) for every client of the cluster.
    /// `None`: the first read-write group by name — by name, not by the
    /// order a file lists them, so that clients that list their own zone
    /// first still agree.
    pub arbiter: Option<String>,
    /// Whether conditional writes move to the next read-write group (by
    /// name) while the arbiter's server is unreachable. Off by default:
    /// clients see an outage at different moments, so for that window two
    /// arbiters could each grant the same `add`.
    pub arbiter_failover: bool,
    /// Put in front of every key, as if each were given with it (`app:` makes
    /// `user:42` go as `app:user:42`): one fleet shared by services without
    /// their keys colliding, as Dalli's `namespace`, pymemcache's `key_prefix`
    /// and EVCache's cache prefix (EVCache joins its prefix with a `:`; give
    /// it here with the colon). The prefixed key is what is hashed, sanitised,
    /// checked against the 250-byte limit and stored. `None` (or empty): keys
    /// go as they are.
    pub key_prefix: Option<String>,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            local_zone: None,
            read_fallback: ReadFallback::default(),
            write_policy: WritePolicy::default(),
            failover: None,
            backoff_initial: DEFAULT_BACKOFF_INITIAL,
            backoff_max: DEFAULT_BACKOFF_MAX,
            arbiter: None,
            arbiter_failover: false,
            key_prefix: None,
        }
    }
}

impl Settings {
    /// Sets [`Settings::local_zone`].
    #[must_use]
    pub fn with_local_zone(mut self, zone: impl Into<String>) -> Settings {
        self.local_zone = Some(zone.into());
        self
    }

    /// Sets [`Settings::read_fallback`].
    #[must_use]
    pub fn with_read_fallback(mut self, fallback: ReadFallback) -> Settings {
        self.read_fallback = fallback;
        self
    }

    /// Sets [`Settings::write_policy`].
    #[must_use]
    pub fn with_write_policy(mut self, policy: WritePolicy) -> Settings {
        self.write_policy = policy;
        self
    }

    /// Sets [`Settings::failover`] explicitly.
    #[must_use]
    pub fn with_failover(mut self, failover: bool) -> Settings {
        self.failover = Some(failover);
        self
    }

    /// Sets [`Settings::arbiter`].
    #[must_use]
    pub fn with_arbiter(mut self, group: impl Into<String>) -> Settings {
        self.arbiter = Some(group.into());
        self
    }

    /// Sets the backoff bounds.
    #[must_use]
    pub fn with_backoff(mut self, initial: Duration, max: Duration) -> Settings {
        self.backoff_initial = initial;
        self.backoff_max = max;
        self
    }
}

/// A whole cluster: its groups (in a fixed order, which [`GroupId`](crate::GroupId)s
/// index) and settings. The `parse_*` functions build one from the usual text forms; see
/// the [crate documentation](crate#text-forms).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClusterSpec {
    /// The groups.
    pub groups: Vec<GroupSpec>,
    /// The policies.
    pub settings: Settings,
}

impl ClusterSpec {
    /// A cluster of `groups` with default settings.
    #[must_use]
    pub fn new(groups: impl IntoIterator<Item = GroupSpec>) -> ClusterSpec {
        ClusterSpec {
            groups: groups.into_iter().collect(),
            settings: Settings::default(),
        }
    }

    /// Sets the settings.
    #[must_use]
    pub fn with_settings(mut self, settings: Settings) -> ClusterSpec {
        self.settings = settings;
        self
    }

    /// Gives every group the locator configuration `locator`.
    #[must_use]
    pub fn with_locator(mut self, locator: LocatorConfig) -> ClusterSpec {
        for group in &mut self.groups {
            group.locator = locator;
        }
        self
    }

    /// Gives every group `pool_size` connection slots per server.
    #[must_use]
    pub fn with_pool_size(mut self, pool_size: usize) -> ClusterSpec {
        for group in &mut self.groups {
            group.pool_size = pool_size;
        }
        self
    }

    /// Gives every group the hashing strategy `strategy`, keeping each group's other
    /// locator settings (node naming, key sanitising, failover probe bound).
    ///
    /// This and the other `with_*` overrides are the one place cluster-wide settings are
    /// applied: the client builder, the `memcache://` URL parser and the tool all call them.
    ///
    /// ```
    /// use memgroup_hash::HashStrategy;
    /// use memgroup_topology::ClusterSpec;
    /// let spec = ClusterSpec::parse_server_list("h1:1,h2:1")?
    ///     .with_sanitize_keys(true)
    ///     .with_hash(HashStrategy::Native);
    /// assert_eq!(spec.groups[0].locator.strategy, HashStrategy::Native);
    /// assert!(spec.groups[0].locator.sanitize_keys); // kept
    /// # Ok::<(), memgroup_topology::TopologyError>(())
    /// ```
    #[must_use]
    pub fn with_hash(mut self, strategy: HashStrategy) -> ClusterSpec {
        for group in &mut self.groups {
            group.locator.strategy = strategy;
        }
        self
    }

    /// Gives every group the ketama node-naming policy `naming`.
    #[must_use]
    pub fn with_node_naming(mut self, naming: NodeNaming) -> ClusterSpec {
        for group in &mut self.groups {
            group.locator.node_naming = naming;
        }
        self
    }

    /// Turns Whalin-style key sanitising on or off in every group.
    #[must_use]
    pub fn with_sanitize_keys(mut self, sanitize: bool) -> ClusterSpec {
        for group in &mut self.groups {
            group.locator.sanitize_keys = sanitize;
        }
        self
    }

    /// This description as the old layout of `new` (a migration, a move
    /// being planned): the same keys, so behind `new`'s
    /// [key prefix](Settings::key_prefix) unless this one names its own.
    ///
    /// ```
    /// use memgroup_topology::ClusterSpec;
    /// let mut new = ClusterSpec::parse_server_list("h1:1,h2:1")?;
    /// new.settings.key_prefix = Some("app:".into());
    /// let old = ClusterSpec::parse_server_list("h1:1")?.old_layout_of(&new);
    /// assert_eq!(old.settings.key_prefix.as_deref(), Some("app:"));
    /// # Ok::<(), memgroup_topology::TopologyError>(())
    /// ```
    #[must_use]
    pub fn old_layout_of(mut self, new: &ClusterSpec) -> ClusterSpec {
        if self.settings.key_prefix.is_none() {
            self.settings
                .key_prefix
                .clone_from(&new.settings.key_prefix);
        }
        self
    }

    /// Applies each override that is set (see [`SpecOverrides`]).
    #[must_use]
    pub fn with_overrides(mut self, overrides: &SpecOverrides) -> ClusterSpec {
        if let Some(strategy) = overrides.hash {
            self = self.with_hash(strategy);
        }
        if let Some(naming) = overrides.node_naming {
            self = self.with_node_naming(naming);
        }
        if let Some(sanitize) = overrides.sanitize_keys {
            self = self.with_sanitize_keys(sanitize);
        }
        if let Some(size) = overrides.pool_size {
            self = self.with_pool_size(size);
        }
        if let Some(prefix) = &overrides.key_prefix {
            self.settings.key_prefix = Some(prefix.clone());
        }
        self
    }

    /// The group named `name`.
    #[must_use]
    pub fn group(&self, name: &str) -> Option<&GroupSpec> {
        self.groups.iter().find(|g| g.name == name)
    }

    /// The group named `name`, to change it.
    pub fn group_mut(&mut self, name: &str) -> Option<&mut GroupSpec> {
        self.groups.iter_mut().find(|g| g.name == name)
    }

    /// Removes the group named `name`, returning it.
    pub fn remove_group(&mut self, name: &str) -> Option<GroupSpec> {
        let index = self.groups.iter().position(|g| g.name == name)?;
        Some(self.groups.remove(index))
    }
}
