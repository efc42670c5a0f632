//! The validated, immutable topology.

use std::borrow::Cow;
use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};

use memgroup_hash::{HashFunction, Locator};

use crate::{
    ClusterSpec, GroupSpec, MAX_KEY_PREFIX, MAX_POOL_SIZE, ServerAddr, Settings, TopologyError,
};

/// A group's position in [`Topology::groups`] (the order of [`ClusterSpec::groups`]).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, PartialOrd, Ord)]
pub struct GroupId(pub usize);

/// A server's position in [`Topology::servers`]: the distinct addresses of all groups, in
/// order of first appearance (a server is in one group: [`TopologyError::ServerInTwoGroups`]).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, PartialOrd, Ord)]
pub struct ServerId(pub usize);

/// Where one request goes: a group's copy, on one server, over one of its connection slots.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct Target {
    /// The group whose copy this is.
    pub group: GroupId,
    /// The server (the key's server, or its failover replacement).
    pub server: ServerId,
    /// The connection slot, in `0..pool_size` of the group.
    pub slot: usize,
}

/// A group passed over because its server for the key is dead (after failover, when on):
/// the typed "server dead" answer.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct Skipped {
    /// The group.
    pub group: GroupId,
    /// The key's server in that group (the primary, before any failover).
    pub server: ServerId,
}

/// One server group of a [`Topology`].
#[derive(Debug)]
pub struct Group {
    id: GroupId,
    spec: GroupSpec,
    /// Node index (the locator's) → server id.
    servers: Box<[ServerId]>,
    locator: Locator,
    /// Groups with the same key hash function share one key hash per selection.
    pub(crate) hash_function: HashFunction,
}

impl Group {
    /// The group's id.
    #[must_use]
    pub fn id(&self) -> GroupId {
        self.id
    }

    /// The group's name.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// The group's zone.
    #[must_use]
    pub fn zone(&self) -> Option<&str> {
        self.spec.zone.as_deref()
    }

    /// Whether the group only takes writes.
    #[must_use]
    pub fn is_write_only(&self) -> bool {
        self.spec.write_only
    }

    /// The group's servers, in configured order: `servers()[i]` is the locator's node `i`.
    #[must_use]
    pub fn servers(&self) -> &[ServerId] {
        &self.servers
    }

    /// Connection slots per server.
    #[must_use]
    pub fn pool_size(&self) -> usize {
        self.spec.pool_size
    }

    /// The group's locator.
    #[must_use]
    pub fn locator(&self) -> &Locator {
        &self.locator
    }

    /// The description the group was built from.
    #[must_use]
    pub fn spec(&self) -> &GroupSpec {
        &self.spec
    }

    /// The key's server in this group, ignoring dead hosts. `key` is the wire key (see
    /// [`Topology::wire_key`]).
    #[must_use]
    pub fn server_for(&self, key: &[u8]) -> ServerId {
        // Every strategy maps every key to a group's only server: skip the hash.
        if let [only] = self.servers[..] {
            return only;
        }
        self.servers[self.locator.locate(key)]
    }

    /// The server owning an already computed key hash (of this group's hash function).
    #[inline]
    pub(crate) fn server_for_hash(&self, hash: i64) -> ServerId {
        self.servers[self.locator.locate_hash(hash)]
    }
}

/// A validated cluster: groups with their locators, the distinct servers, the settings.
///
/// Immutable and `Send + Sync`: a topology change builds a new value ([`Topology::new`],
/// [`Topology::change`]) while readers keep using the one they hold (typically an
/// `Arc<Topology>` swapped as a whole), so no half-built state is ever visible. Dead-host
/// state lives outside, in [`DeadHosts`](crate::DeadHosts), and is carried over with
/// [`DeadHosts::carry_over`](crate::DeadHosts::carry_over).
///
/// ```
/// use memgroup_topology::{ClusterSpec, Topology};
/// let topology = Topology::new(ClusterSpec::parse_evcache("a=h1:11211,h2:11211;b=h3:11211")?)?;
/// assert_eq!(topology.groups().len(), 2);
/// assert_eq!(topology.servers().len(), 3);
/// let bigger = topology.change(|spec| {
///     spec.group_mut("b").unwrap().servers.push("h4:11211".parse().unwrap());
/// })?;
/// assert_eq!((topology.servers().len(), bigger.servers().len()), (3, 4));
/// # Ok::<(), memgroup_topology::TopologyError>(())
/// ```
#[derive(Debug)]
pub struct Topology {
    spec: ClusterSpec,
    groups: Box<[Group]>,
    servers: Box<[ServerAddr]>,
    server_index: HashMap<ServerAddr, ServerId>,
    /// Per server: the largest `pool_size` of the groups holding it.
    server_slots: Box<[usize]>,
    /// Readable groups: the local tier (`..local_len`), then the others.
    pub(crate) read_order: Box<[GroupId]>,
    pub(crate) local_len: usize,
    read_write: usize,
    pub(crate) failover: bool,
    sanitize_keys: bool,
    /// Put in front of every key (empty: none).
    key_prefix: Box<[u8]>,
    /// The read-write groups by name: the arbiter first, then the groups
    /// it fails over to.
    arbiters: Box<[GroupId]>,
}

// The client shares one topology between tasks.
const _: () = {
    const fn shared<T: Send + Sync>() {}
    shared::<Topology>();
};

impl Topology {
    /// Validates `spec` and builds every group's locator.
    ///
    /// # Errors
    ///
    /// [`TopologyError::NoGroups`], [`TopologyError::BadGroup`] (an empty name),
    /// [`TopologyError::DuplicateGroup`], [`TopologyError::EmptyGroup`],
    /// [`TopologyError::ZeroPoolSize`], [`TopologyError::PoolSizeTooLarge`],
    /// [`TopologyError::MixedSanitize`], [`TopologyError::BadKeyPrefix`],
    /// [`TopologyError::BadAddress`] (empty host), [`TopologyError::BadPort`] (port 0),
    /// [`TopologyError::ZeroWeight`], [`TopologyError::DuplicateServer`] (within a group),
    /// [`TopologyError::ServerInTwoGroups`],
    /// [`TopologyError::NoReadableGroup`], and [`TopologyError::Locator`] for anything the
    /// hash crate refuses.
    pub fn new(spec: ClusterSpec) -> Result<Topology, TopologyError> {
        let first = spec.groups.first().ok_or(TopologyError::NoGroups)?;
        let sanitize_keys = first.locator.sanitize_keys;
        let key_prefix = key_prefix(spec.settings.key_prefix.as_deref(), sanitize_keys)?;
        let mut servers = Vec::new();
        let mut server_index: HashMap<ServerAddr, ServerId> = HashMap::new();
        let mut server_slots = Vec::new();
        // Per server: the last group (index) that listed it, to find a server
        // listed twice in one group without comparing it with the others.
        let mut listed_by: Vec<usize> = Vec::new();
        let mut names: HashSet<&str> = HashSet::with_capacity(spec.groups.len());
        let mut groups = Vec::with_capacity(spec.groups.len());
        for (index, g) in spec.groups.iter().enumerate() {
            if g.name.is_empty() {
                return Err(TopologyError::BadGroup {
                    token: String::new(),
                });
            }
            if !names.insert(&g.name) {
                return Err(TopologyError::DuplicateGroup {
                    name: g.name.clone(),
                });
            }
            if g.servers.is_empty() {
                return Err(TopologyError::EmptyGroup {
                    name: g.name.clone(),
                });
            }
            if g.pool_size == 0 {
                return Err(TopologyError::ZeroPoolSize {
                    group: g.name.clone(),
                });
            }
            if g.pool_size > MAX_POOL_SIZE {
                return Err(TopologyError::PoolSizeTooLarge {
                    group: g.name.clone(),
                    pool_size: g.pool_size,
                });
            }
            if g.locator.sanitize_keys != sanitize_keys {
                return Err(TopologyError::MixedSanitize {
                    group: g.name.clone(),
                });
            }
            let mut ids = Vec::with_capacity(g.servers.len());
            for s in &g.servers {
                let token = || s.addr.to_string();
                if s.addr.host.is_empty() {
                    return Err(TopologyError::BadAddress { token: token() });
                }
                if s.addr.port == 0 {
                    return Err(TopologyError::BadPort { token: token() });
                }
                if s.weight == 0 {
                    return Err(TopologyError::ZeroWeight {
                        token: format!("{}:0", s.addr),
                    });
                }
                let id = match server_index.entry(s.addr.clone()) {
                    Entry::Occupied(e) => *e.get(),
                    Entry::Vacant(e) => {
                        let id = ServerId(servers.len());
                        servers.push(s.addr.clone());
                        server_slots.push(0);
                        listed_by.push(usize::MAX);
                        *e.insert(id)
                    }
                };
                // Listed earlier in this group, or in another (the topology
                // is dropped with the error).
                match std::mem::replace(&mut listed_by[id.0], index) {
                    usize::MAX => {}
                    earlier if earlier == index => {
                        return Err(TopologyError::DuplicateServer { token: token() });
                    }
                    earlier => {
                        return Err(TopologyError::ServerInTwoGroups {
                            token: token(),
                            first: spec.groups[earlier].name.clone(),
                            second: g.name.clone(),
                        });
                    }
                }
                server_slots[id.0] = server_slots[id.0].max(g.pool_size);
                ids.push(id);
            }
            // All weights 1 is an unweighted list (see `ServerSpec::weight`).
            let weighted = g.servers.iter().any(|s| s.weight != 1);
            let nodes: Vec<_> = g.servers.iter().map(|s| s.node(weighted)).collect();
            let locator = Locator::new(g.locator, &nodes)?;
            groups.push(Group {
                id: GroupId(index),
                spec: g.clone(),
                servers: ids.into(),
                hash_function: g.locator.strategy.hash_function(),
                locator,
            });
        }
        let readable = || groups.iter().filter(|g| !g.is_write_only());
        let is_local =
            |g: &Group| g.zone().is_some() && g.zone() == spec.settings.local_zone.as_deref();
        let mut read_order: Vec<GroupId> =
            readable().filter(|g| is_local(g)).map(Group::id).collect();
        let local_len = read_order.len();
        read_order.extend(readable().filter(|g| !is_local(g)).map(Group::id));
        if read_order.is_empty() {
            return Err(TopologyError::NoReadableGroup);
        }
        let mut arbiters: Vec<GroupId> = readable().map(Group::id).collect();
        arbiters.sort_by(|a, b| groups[a.0].name().cmp(groups[b.0].name()));
        if let Some(name) = spec.settings.arbiter.as_deref() {
            let Some(at) = arbiters.iter().position(|&g| groups[g.0].name() == name) else {
                return Err(TopologyError::BadArbiter {
                    name: name.to_string(),
                });
            };
            arbiters[..=at].rotate_right(1);
        }
        Ok(Topology {
            failover: spec.settings.failover.unwrap_or(groups.len() == 1),
            read_write: read_order.len(),
            read_order: read_order.into(),
            local_len,
            groups: groups.into(),
            servers: servers.into(),
            server_index,
            server_slots: server_slots.into(),
            sanitize_keys,
            key_prefix,
            arbiters: arbiters.into(),
            spec,
        })
    }

    /// A new topology from this one's description changed by `change` (add or remove
    /// servers or groups, change weights, hashing, settings). `self` is untouched, also when
    /// the change is refused.
    ///
    /// # Errors
    ///
    /// As for [`Topology::new`].
    pub fn change(&self, change: impl FnOnce(&mut ClusterSpec)) -> Result<Topology, TopologyError> {
        let mut spec = self.spec.clone();
        change(&mut spec);
        Topology::new(spec)
    }

    /// The description this topology was built from.
    #[must_use]
    pub fn spec(&self) -> &ClusterSpec {
        &self.spec
    }

    /// The groups, indexed by [`GroupId`].
    #[must_use]
    pub fn groups(&self) -> &[Group] {
        &self.groups
    }

    /// The group `id`.
    ///
    /// # Panics
    ///
    /// If `id` is not a group of this topology.
    #[must_use]
    pub fn group(&self, id: GroupId) -> &Group {
        &self.groups[id.0]
    }

    /// The group named `name`.
    #[must_use]
    pub fn group_by_name(&self, name: &str) -> Option<GroupId> {
        self.groups.iter().find(|g| g.name() == name).map(Group::id)
    }

    /// The distinct servers of all groups, indexed by [`ServerId`].
    #[must_use]
    pub fn servers(&self) -> &[ServerAddr] {
        &self.servers
    }

    /// The id of the server at `addr`.
    #[must_use]
    pub fn server_id(&self, addr: &ServerAddr) -> Option<ServerId> {
        self.server_index.get(addr).copied()
    }

    /// The connection slots a server needs: the largest `pool_size` of its groups. Every
    /// [`Target::slot`] for the server is below it.
    ///
    /// # Panics
    ///
    /// If `server` is not a server of this topology.
    #[must_use]
    pub fn server_slots(&self, server: ServerId) -> usize {
        self.server_slots[server.0]
    }

    /// The group that decides conditional writes ([`Settings::arbiter`]).
    #[must_use]
    pub fn arbiter(&self) -> GroupId {
        self.arbiters[0]
    }

    /// The groups conditional writes go to, in order: the arbiter, then (for
    /// [`Settings::arbiter_failover`]) the other read-write groups by name.
    #[must_use]
    pub fn arbiters(&self) -> &[GroupId] {
        &self.arbiters
    }

    /// The readable groups in the local zone ([`Settings::local_zone`]), in
    /// their order: where a write waits for its own zone's copy.
    pub fn local_groups(&self) -> &[GroupId] {
        &self.read_order[..self.local_len]
    }

    /// The cluster-wide settings.
    #[must_use]
    pub fn settings(&self) -> &Settings {
        &self.spec.settings
    }

    /// Whether Whalin failover is on ([`Settings::failover`], resolved).
    #[must_use]
    pub fn failover(&self) -> bool {
        self.failover
    }

    /// The number of read-write groups, over which [`Settings::write_policy`] counts.
    #[must_use]
    pub fn read_write_groups(&self) -> usize {
        self.read_write
    }

    /// The bytes to locate **and** send for `key` in `group`: the key behind the
    /// [key prefix](Settings::key_prefix), if any, sanitised when the group's locator says
    /// so. All groups agree on sanitising (mixed settings are refused) and the prefix is
    /// the cluster's, so the result is the wire key for every group; pass it to the
    /// selection methods.
    ///
    /// ```
    /// use memgroup_topology::{ClusterSpec, GroupId, Topology};
    /// let mut spec = ClusterSpec::parse_server_list("h1:1,h2:1")?;
    /// spec.settings.key_prefix = Some("app:".into());
    /// let topology = Topology::new(spec)?;
    /// assert_eq!(&*topology.wire_key(GroupId(0), b"user:42"), b"app:user:42");
    /// # Ok::<(), memgroup_topology::TopologyError>(())
    /// ```
    ///
    /// # Panics
    ///
    /// If `group` is not a group of this topology.
    #[must_use]
    pub fn wire_key<'k>(&self, group: GroupId, key: &'k [u8]) -> Cow<'k, [u8]> {
        let locator = &self.group(group).locator;
        if self.key_prefix.is_empty() {
            return locator.wire_key(key);
        }
        let mut prefixed = Vec::with_capacity(self.key_prefix.len() + key.len());
        prefixed.extend_from_slice(&self.key_prefix);
        prefixed.extend_from_slice(key);
        let sanitised = match locator.wire_key(&prefixed) {
            Cow::Owned(sanitised) => Some(sanitised),
            Cow::Borrowed(_) => None,
        };
        Cow::Owned(sanitised.unwrap_or(prefixed))
    }

    /// The prefix put in front of every key ([`Settings::key_prefix`]; empty: none).
    #[must_use]
    pub fn key_prefix(&self) -> &[u8] {
        &self.key_prefix
    }

    /// Whether keys are sanitised (the same for every group).
    #[must_use]
    pub fn sanitizes_keys(&self) -> bool {
        self.sanitize_keys
    }

    /// How many read-write groups a write needs under [`Settings::write_policy`].
    #[must_use]
    pub fn required_successes(&self) -> usize {
        self.settings().write_policy.required(self.read_write)
    }

    /// Whether a write that succeeded in the groups `succeeded` meets
    /// [`Settings::write_policy`]. Write-only groups, repeats and unknown ids do not count.
    ///
    /// ```
    /// use memgroup_topology::{ClusterSpec, GroupId, Topology, WritePolicy};
    /// let mut spec = ClusterSpec::parse_evcache("a=h1:1;b=h2:1;c=h3:1;d=h4:1")?;
    /// spec.settings.write_policy = WritePolicy::Quorum;
    /// spec.groups[3].write_only = true;
    /// let topology = Topology::new(spec)?; // 3 read-write groups: quorum is 2
    /// assert!(!topology.write_succeeded([GroupId(0), GroupId(3)]));
    /// assert!(topology.write_succeeded([GroupId(0), GroupId(2)]));
    /// # Ok::<(), memgroup_topology::TopologyError>(())
    /// ```
    pub fn write_succeeded(&self, succeeded: impl IntoIterator<Item = GroupId>) -> bool {
        let required = self.required_successes();
        if required == 0 {
            return true;
        }
        let mut seen = GroupSet::new(self.groups.len());
        let mut count = 0;
        for id in succeeded {
            let Some(group) = self.groups.get(id.0) else {
                continue;
            };
            if !group.is_write_only() && seen.insert(id.0) {
                count += 1;
                if count >= required {
                    return true;
                }
            }
        }
        false
    }
}

/// A set of group indices; inline for up to 128 groups.
enum GroupSet {
    Inline(u128),
    Heap(Vec<bool>),
}

impl GroupSet {
    fn new(groups: usize) -> GroupSet {
        if groups <= 128 {
            GroupSet::Inline(0)
        } else {
            GroupSet::Heap(vec![false; groups])
        }
    }

    /// Adds `i`; `false` if it was there already.
    fn insert(&mut self, i: usize) -> bool {
        match self {
            GroupSet::Inline(bits) => {
                let had = *bits & (1 << i) != 0;
                *bits |= 1 << i;
                !had
            }
            GroupSet::Heap(seen) => !std::mem::replace(&mut seen[i], true),
        }
    }
}

/// The key prefix of a cluster's settings, checked: it goes in front of every key,
/// so it holds no byte a key cannot (a space, a control character) and leaves room for
/// the key itself, as it goes on the wire (longer when keys are sanitised).
fn key_prefix(prefix: Option<&str>, sanitize: bool) -> Result<Box<[u8]>, TopologyError> {
    let prefix = prefix.unwrap_or_default();
    let bad = |b: &u8| *b <= b' ' || *b == 0x7f;
    let wire_len = if sanitize {
        memgroup_hash::sanitize_key(prefix.as_bytes()).len()
    } else {
        prefix.len()
    };
    if wire_len > MAX_KEY_PREFIX || prefix.as_bytes().iter().any(bad) {
        return Err(TopologyError::BadKeyPrefix {
            prefix: prefix.to_owned(),
        });
    }
    Ok(prefix.as_bytes().into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_prefix(prefix: &str) -> Result<Topology, TopologyError> {
        let mut spec = ClusterSpec::parse_server_list("h1:1,h2:1,h3:1").unwrap();
        spec.settings.key_prefix = Some(prefix.to_owned());
        Topology::new(spec)
    }

    /// The prefix goes in front of every key: the wire key is what a client
    /// given the prefixed key itself would send (where it is placed is the
    /// integration test's, against a client without the prefix).
    #[test]
    fn a_key_prefix_goes_in_front_of_every_key_as_if_given_with_it() {
        let prefixed = with_prefix("app:").unwrap();
        assert_eq!(prefixed.key_prefix(), b"app:");
        for key in ["user:42", "a", "k-1000"] {
            let wire = prefixed.wire_key(GroupId(0), key.as_bytes());
            assert_eq!(&*wire, format!("app:{key}").as_bytes());
        }
        // An empty prefix is none.
        let empty = with_prefix("").unwrap();
        assert!(matches!(empty.wire_key(GroupId(0), b"k"), Cow::Borrowed(_)));
        // Sanitised as a Whalin user's `client.set("app:" + key)` is: the
        // colon and the space both escaped.
        let mut spec = ClusterSpec::parse_server_list("h1:1")
            .unwrap()
            .with_sanitize_keys(true);
        spec.settings.key_prefix = Some("app:".to_owned());
        let sanitised = Topology::new(spec).unwrap();
        assert_eq!(&*sanitised.wire_key(GroupId(0), b"a b"), b"app%3Aa+b");
    }

    #[test]
    fn a_key_prefix_no_key_could_start_with_is_refused() {
        let long = "p".repeat(MAX_KEY_PREFIX + 1);
        for bad in ["app :", "app\r\n", "\u{7f}", &long] {
            let error = with_prefix(bad).unwrap_err();
            assert_eq!(
                error,
                TopologyError::BadKeyPrefix {
                    prefix: bad.to_owned()
                }
            );
            assert!(
                error.to_string().contains("cannot go in front of keys"),
                "{error}"
            );
        }
        assert!(with_prefix(&"p".repeat(MAX_KEY_PREFIX)).is_ok());
        // Counted as it goes on the wire: sanitised, 70 colons are 210 bytes.
        let colons = ":".repeat(70);
        let mut spec = ClusterSpec::parse_server_list("h1:1")
            .unwrap()
            .with_sanitize_keys(true);
        spec.settings.key_prefix = Some(colons.clone());
        assert!(matches!(
            Topology::new(spec),
            Err(TopologyError::BadKeyPrefix { .. })
        ));
        assert!(with_prefix(&colons).is_ok());
        // From a URL too.
        let spec = ClusterSpec::parse_url("memcache://h:1?key_prefix=app:").unwrap();
        assert_eq!(spec.settings.key_prefix.as_deref(), Some("app:"));
    }
}
