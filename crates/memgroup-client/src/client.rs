//! The client facade: builder, operations, replication across server groups.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use memgroup_hash::{HashStrategy, LocatorConfig, NodeNaming};
use memgroup_proto::{
    Key, Limits, MetaFlag, MetaResponse, MetaStatus, Request, Response, StoreCommand,
};
use memgroup_topology::{
    ClusterSpec, DeadHosts, GroupId, GroupSpec, ReadFallback, ServerId, Settings, Target, Topology,
    WritePolicy,
};
use parking_lot::{Mutex, RwLock};

use crate::conn::{ConnSettings, Connection};
use crate::error::{Error, ErrorKind};
use crate::join::{BoxFuture, join_all};
use crate::pool::Snapshot;
use crate::value::{FromValue, ToValue};

/// A value read from memcached: the bytes and the 32-bit client flags stored
/// with them (and the CAS unique, for `gets`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    /// The value.
    pub value: Bytes,
    /// The client flags (see [`crate::value`] for the conventions of typed values).
    pub flags: u32,
    /// The CAS unique, when it was asked for ([`Client::gets`]).
    pub cas: Option<u64>,
}

/// What happened in one server group during a replicated write.
#[derive(Debug, Clone)]
pub struct GroupOutcome {
    /// The group's name.
    pub group: String,
    /// The server written to (`host:port`), when one was selected.
    pub server: Option<String>,
    /// `Ok(true)` stored (or deleted/touched), `Ok(false)` the server refused
    /// by the command's condition (`NOT_STORED`, `NOT_FOUND`, `EXISTS`),
    /// `Err` the write did not happen.
    pub result: Result<bool, Error>,
}

/// The result of a write to several server groups.
#[derive(Debug, Clone, Default)]
pub struct WriteOutcome {
    /// One entry per group written to (read-write and write-only).
    pub groups: Vec<GroupOutcome>,
}

impl WriteOutcome {
    /// Whether every group that answered applied the write (e.g. `add` found
    /// no existing key anywhere).
    pub fn applied(&self) -> bool {
        self.groups.iter().any(|g| matches!(g.result, Ok(true)))
            && self.groups.iter().all(|g| !matches!(g.result, Ok(false)))
    }

    /// The names of the groups whose server answered.
    pub fn succeeded(&self) -> impl Iterator<Item = &str> {
        self.groups
            .iter()
            .filter(|g| g.result.is_ok())
            .map(|g| g.group.as_str())
    }

    /// The groups where the write failed, with the reason.
    pub fn failed(&self) -> impl Iterator<Item = (&str, &Error)> {
        self.groups
            .iter()
            .filter_map(|g| g.result.as_ref().err().map(|e| (g.group.as_str(), e)))
    }
}

/// Statistics of one server, from `stats`.
#[derive(Debug, Clone)]
pub struct ServerStats {
    /// The group the server belongs to (the first, if several).
    pub group: String,
    /// `host:port`.
    pub server: String,
    /// The `STAT` name/value pairs, or why they could not be read.
    pub stats: Result<HashMap<String, String>, Error>,
}

/// Configures and builds a [`Client`].
///
/// ```no_run
/// # async fn demo() -> Result<(), memgroup_client::Error> {
/// use std::time::Duration;
/// use memgroup_client::Client;
/// use memgroup_hash::HashStrategy;
///
/// let client = Client::builder()
///     .evcache_groups("us-east-1a=10.0.0.1:11211,10.0.0.2:11211;us-east-1b=10.0.1.1:11211,10.0.1.2:11211")?
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
    groups: Vec<GroupSpec>,
    settings: Settings,
    hash: Option<HashStrategy>,
    naming: Option<NodeNaming>,
    sanitize: Option<bool>,
    pool_size: Option<usize>,
    op_timeout: Duration,
    conn: ConnSettings,
    max_value_size: usize,
}

impl Default for ClientBuilder {
    fn default() -> Self {
        ClientBuilder {
            groups: Vec::new(),
            settings: Settings::default(),
            hash: None,
            naming: None,
            sanitize: None,
            pool_size: None,
            op_timeout: Duration::from_millis(500),
            conn: ConnSettings {
                connect_timeout: Duration::from_secs(1),
                nodelay: true,
                max_in_flight: 1024,
                max_batches: 4,
                merge_gets: true,
                limits: Limits::default(),
            },
            max_value_size: 1024 * 1024,
        }
    }
}

impl ClientBuilder {
    /// Adds a server group.
    pub fn group(mut self, group: GroupSpec) -> Self {
        self.groups.push(group);
        self
    }

    /// Adds the groups and settings of a parsed cluster description.
    pub fn cluster(mut self, spec: ClusterSpec) -> Self {
        self.groups.extend(spec.groups);
        self.settings = spec.settings;
        self
    }

    /// Adds one group from a libmemcached-style list, `host:port[:weight],…`.
    pub fn servers(self, list: &str) -> Result<Self, Error> {
        Ok(self.cluster_groups(ClusterSpec::parse_server_list(list)?))
    }

    /// Adds groups from EVCache's node list, `sg1=host:port,…;sg2=…`.
    pub fn evcache_groups(self, list: &str) -> Result<Self, Error> {
        Ok(self.cluster_groups(ClusterSpec::parse_evcache(list)?))
    }

    fn cluster_groups(mut self, spec: ClusterSpec) -> Self {
        self.groups.extend(spec.groups);
        self
    }

    /// The caller's zone: reads prefer groups in it.
    pub fn zone(mut self, zone: impl Into<String>) -> Self {
        self.settings.local_zone = Some(zone.into());
        self
    }

    /// Where reads go after a miss or an error in the first group.
    pub fn read_fallback(mut self, fallback: ReadFallback) -> Self {
        self.settings.read_fallback = fallback;
        self
    }

    /// How many read-write groups a write must reach to succeed.
    pub fn write_policy(mut self, policy: WritePolicy) -> Self {
        self.settings.write_policy = policy;
        self
    }

    /// Whalin-style failover to the next live server of a group when the
    /// key's server is dead (default: on for one group, off for several).
    pub fn failover(mut self, on: bool) -> Self {
        self.settings.failover = Some(on);
        self
    }

    /// First dead-host backoff (doubles per consecutive failure).
    pub fn backoff(mut self, initial: Duration, max: Duration) -> Self {
        self.settings.backoff_initial = initial;
        self.settings.backoff_max = max;
        self
    }

    /// The hashing strategy of every group.
    pub fn hash(mut self, strategy: HashStrategy) -> Self {
        self.hash = Some(strategy);
        self
    }

    /// The ketama node-naming policy of every group.
    pub fn node_naming(mut self, naming: NodeNaming) -> Self {
        self.naming = Some(naming);
        self
    }

    /// Whalin-style key sanitizing (URL-encoding), applied to routing and to
    /// the key sent on the wire, so keys match a default Java client's.
    pub fn sanitize_keys(mut self, on: bool) -> Self {
        self.sanitize = Some(on);
        self
    }

    /// Connections per server in every group (EVCache's poolSize).
    pub fn pool_size(mut self, size: usize) -> Self {
        self.pool_size = Some(size);
        self
    }

    /// Per-operation timeout (default 500 ms); see also [`Client::with_timeout`].
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.op_timeout = timeout;
        self
    }

    /// Connect timeout (default 1 s).
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
        self.conn.max_in_flight = n.max(1);
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

    /// The largest value accepted for writing and reading (default 1 MiB,
    /// memcached's default item size limit; at most 1 GiB, memcached's
    /// largest possible item).
    pub fn max_value_size(mut self, bytes: usize) -> Self {
        let bytes = bytes.min(memgroup_proto::MAX_ITEM_SIZE);
        self.max_value_size = bytes;
        self.conn.limits.max_value = bytes;
        self
    }

    /// Builds the client. Connections open lazily, on first use.
    pub fn build(self) -> Result<Client, Error> {
        let mut groups = self.groups;
        if groups.is_empty() {
            return Err(Error::new(ErrorKind::Config, "no server groups configured"));
        }
        for g in &mut groups {
            if let Some(strategy) = self.hash {
                let mut config = LocatorConfig::new(strategy);
                config = config.with_sanitize_keys(g.locator.sanitize_keys);
                config = config.with_node_naming(g.locator.node_naming);
                g.locator = config;
            }
            if let Some(naming) = self.naming {
                g.locator = g.locator.with_node_naming(naming);
            }
            if let Some(sanitize) = self.sanitize {
                g.locator = g.locator.with_sanitize_keys(sanitize);
            }
            if let Some(size) = self.pool_size {
                g.pool_size = size;
            }
        }
        let spec = ClusterSpec {
            groups,
            settings: self.settings,
        };
        let topology = Arc::new(Topology::new(spec)?);
        let dead = DeadHosts::new(&topology);
        Ok(Client {
            inner: Arc::new(Inner {
                snapshot: RwLock::new(Arc::new(Snapshot::new(topology, None))),
                dead: Mutex::new(dead),
                rotation: AtomicU64::new(0),
                conn: self.conn,
                max_value_size: self.max_value_size,
            }),
            timeout: self.op_timeout,
        })
    }

    /// Builds the client and opens every connection now, failing if no
    /// server at all can be reached.
    pub async fn connect(self) -> Result<Client, Error> {
        let client = self.build()?;
        client.connect_all().await?;
        Ok(client)
    }
}

#[derive(Debug)]
struct Inner {
    snapshot: RwLock<Arc<Snapshot>>,
    dead: Mutex<DeadHosts>,
    /// Rotates writes over the pool slots and reads over equal groups.
    rotation: AtomicU64,
    conn: ConnSettings,
    max_value_size: usize,
}

/// The memcached cluster client. Cheap to clone; clones share connections.
///
/// See the [crate docs](crate) for a tour.
#[derive(Debug, Clone)]
pub struct Client {
    inner: Arc<Inner>,
    timeout: Duration,
}

/// A key as it goes on the wire: transformed (sanitized) and validated.
struct WireKey<'k> {
    bytes: Cow<'k, [u8]>,
}

impl WireKey<'_> {
    fn key(&self) -> Key<'_> {
        Key::new(&self.bytes).expect("validated when made")
    }
}

impl Client {
    /// A builder.
    pub fn builder() -> ClientBuilder {
        ClientBuilder::default()
    }

    /// Connects to a cluster described by a `memcache://` URL or a plain
    /// `host:port[:weight],…` list (one group), opening connections eagerly.
    pub async fn connect(url_or_servers: &str) -> Result<Client, Error> {
        let spec = if url_or_servers.starts_with("memcache://") {
            ClusterSpec::parse_url(url_or_servers)?
        } else {
            ClusterSpec::parse_server_list(url_or_servers)?
        };
        Client::builder().cluster(spec).connect().await
    }

    /// A handle to the same client whose operations use `timeout`.
    pub fn with_timeout(&self, timeout: Duration) -> Client {
        Client {
            inner: self.inner.clone(),
            timeout,
        }
    }

    /// The current topology.
    pub fn topology(&self) -> Arc<Topology> {
        self.snapshot().topology.clone()
    }

    /// Replaces the topology (servers or groups added or removed, weights or
    /// hashing changed). Connections to servers that stay are kept, and so is
    /// their dead-host state; operations already running finish on the old one.
    pub fn set_topology(&self, spec: ClusterSpec) -> Result<(), Error> {
        let topology = Arc::new(Topology::new(spec)?);
        let mut current = self.inner.snapshot.write();
        let mut dead = self.inner.dead.lock();
        *dead = dead.carry_over(&current.topology, &topology);
        *current = Arc::new(Snapshot::new(topology, Some(&current)));
        Ok(())
    }

    fn snapshot(&self) -> Arc<Snapshot> {
        self.inner.snapshot.read().clone()
    }

    fn rotation(&self) -> u64 {
        self.inner.rotation.fetch_add(1, Ordering::Relaxed)
    }

    /// Applies the key transform and validates the result: invalid keys are
    /// refused here, before any byte is written.
    fn wire_key<'k>(snap: &Snapshot, key: &'k [u8]) -> Result<WireKey<'k>, Error> {
        let bytes = snap.topology.wire_key(GroupId(0), key);
        Key::new(&bytes)?;
        Ok(WireKey { bytes })
    }

    fn check_value(&self, value: &[u8]) -> Result<(), Error> {
        if value.len() > self.inner.max_value_size {
            return Err(Error::new(
                ErrorKind::ValueTooLarge,
                format!(
                    "value of {} bytes exceeds the {}-byte limit",
                    value.len(),
                    self.inner.max_value_size
                ),
            ));
        }
        Ok(())
    }

    /// Opens every connection slot of every server now. Fails only if no
    /// server could be reached.
    pub async fn connect_all(&self) -> Result<(), Error> {
        let snap = self.snapshot();
        let mut futures: Vec<BoxFuture<'_, Result<(), Error>>> = Vec::new();
        for (server, slots) in snap.slots.iter().enumerate() {
            for slot in 0..slots.len() {
                let snap = &snap;
                futures.push(Box::pin(async move {
                    self.connection(snap, ServerId(server), slot)
                        .await
                        .map(|_| ())
                }));
            }
        }
        let results = join_all(futures).await;
        if results.iter().any(Result::is_ok) {
            return Ok(());
        }
        Err(results
            .into_iter()
            .find_map(Result::err)
            .unwrap_or_else(|| Error::new(ErrorKind::Config, "no servers")))
    }

    /// The connection of a slot, opening it if needed (unless the server is
    /// in its dead-host backoff).
    async fn connection(
        &self,
        snap: &Snapshot,
        server: ServerId,
        slot: usize,
    ) -> Result<Connection, Error> {
        let entry = snap.slot(server, slot);
        if let Some(conn) = entry.live() {
            return Ok(conn);
        }
        let _connecting = entry.connecting.lock().await;
        if let Some(conn) = entry.live() {
            return Ok(conn);
        }
        let name = snap.name(server);
        if self.inner.dead.lock().is_dead(server, Instant::now()) {
            return Err(
                Error::new(ErrorKind::ServerDead, "server is marked dead (backoff)").at(name),
            );
        }
        match Connection::connect(name, &self.inner.conn).await {
            Ok(conn) => {
                self.inner.dead.lock().record_success(server);
                *entry.conn.lock() = Some(conn.clone());
                Ok(conn)
            }
            Err(e) => {
                self.inner
                    .dead
                    .lock()
                    .record_failure(server, Instant::now());
                Err(e)
            }
        }
    }

    /// Sends one request to one target within the timeout.
    async fn exec(
        &self,
        snap: &Snapshot,
        target: Target,
        request: &Request<'_>,
    ) -> Result<Option<Response>, Error> {
        let call = async {
            let conn = self.connection(snap, target.server, target.slot).await?;
            match conn.call(request).await {
                Err(e) if e.is_connection() || e.is_protocol() => {
                    self.inner
                        .dead
                        .lock()
                        .record_failure(target.server, Instant::now());
                    drop(conn);
                    snap.slot(target.server, target.slot).release_failed();
                    Err(e)
                }
                other => other,
            }
        };
        match tokio::time::timeout(self.timeout, call).await {
            Ok(result) => result.and_then(|r| {
                r.map(|r| check_reply(r, snap.name(target.server)))
                    .transpose()
            }),
            Err(_) => Err(Error::new(
                ErrorKind::Timeout,
                format!("operation timed out after {:?}", self.timeout),
            )
            .at(snap.name(target.server))),
        }
    }

    // ---- reads -------------------------------------------------------------

    /// Reads a key: `Ok(None)` on a miss. Tries the local group first and
    /// falls back to other groups on a miss or an error, per the read policy.
    ///
    /// ```no_run
    /// # async fn demo(client: memgroup_client::Client) -> Result<(), memgroup_client::Error> {
    /// if let Some(item) = client.get("user:42").await? {
    ///     println!("{} bytes, flags {}", item.value.len(), item.flags);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Item>, Error> {
        self.read_one(key.as_ref(), ReadKind::Get).await
    }

    /// Reads a key with its CAS unique, for a later [`Client::cas`].
    pub async fn gets(&self, key: impl AsRef<[u8]>) -> Result<Option<Item>, Error> {
        self.read_one(key.as_ref(), ReadKind::Gets).await
    }

    /// Reads a key and sets its expiration time (`gat`).
    pub async fn get_and_touch(
        &self,
        key: impl AsRef<[u8]>,
        exptime: u32,
    ) -> Result<Option<Item>, Error> {
        self.read_one(key.as_ref(), ReadKind::Gat(exptime)).await
    }

    async fn read_one(&self, key: &[u8], kind: ReadKind) -> Result<Option<Item>, Error> {
        let snap = self.snapshot();
        let wire = Self::wire_key(&snap, key)?;
        let keys = [wire.key()];
        let request = kind.request(&keys);
        self.read_walk(&snap, &wire.bytes, &request, |reply| match reply {
            Response::Values(mut values) => Ok(values.pop().map(|v| Item {
                value: v.data,
                flags: v.flags,
                cas: v.cas,
            })),
            other => Err(unexpected(Some(&other))),
        })
        .await
    }

    /// Sends a read to the key's targets in order — the local group first,
    /// the next live server of the same group after an I/O error when
    /// failover is on, then fallback groups per the read policy — until
    /// `accept` turns a reply into a hit. Misses and errors move on; the
    /// result is `Ok(None)` if any group answered "miss", else the last error.
    async fn read_walk<T>(
        &self,
        snap: &Snapshot,
        wire: &[u8],
        request: &Request<'_>,
        accept: impl Fn(Response) -> Result<Option<T>, Error>,
    ) -> Result<Option<T>, Error> {
        let mut cursor = snap.topology.read_cursor(wire, self.rotation());
        let mut answered = false;
        let mut last_error = None;
        loop {
            let target = {
                let dead = self.inner.dead.lock();
                cursor.next(&dead, Instant::now())
            };
            let Some(target) = target else { break };
            match self.exec(snap, target, request).await {
                Ok(Some(reply)) => match accept(reply) {
                    Ok(Some(hit)) => return Ok(Some(hit)),
                    Ok(None) => answered = true,
                    Err(e) => last_error = Some(e),
                },
                Ok(None) => last_error = Some(unexpected(None)),
                Err(e) => last_error = Some(e),
            }
        }
        if cursor.groups_tried() == 0 {
            let mut error = no_live_server();
            if let Some(skipped) = cursor.skipped() {
                error = error.at(snap.name(skipped.server));
            }
            return Err(error);
        }
        match last_error {
            Some(e) if !answered => Err(e),
            _ => Ok(None),
        }
    }

    /// Reads many keys at once. Keys are grouped by server: one `get k1 k2 …`
    /// per server, sent concurrently; keys missing from the first group are
    /// then asked from the fallback groups. The map holds the hits, keyed by
    /// the key as given; duplicates are fetched once.
    pub async fn get_multi<K: AsRef<[u8]>>(
        &self,
        keys: &[K],
    ) -> Result<HashMap<Vec<u8>, Item>, Error> {
        let snap = self.snapshot();
        // Validate everything before sending anything.
        let mut wires = Vec::with_capacity(keys.len());
        let mut seen = std::collections::HashSet::with_capacity(keys.len());
        for key in keys {
            let key = key.as_ref();
            if seen.insert(key) {
                wires.push((key, Self::wire_key(&snap, key)?));
            }
        }
        // Every key's read targets, in order, in one flat list: key `i`'s
        // are `targets[ends[i - 1]..ends[i]]`.
        let (targets, ends) = {
            let rotation = self.rotation();
            let dead = self.inner.dead.lock();
            let now = Instant::now();
            let mut targets: Vec<Target> = Vec::with_capacity(wires.len() * 2);
            let mut ends = Vec::with_capacity(wires.len());
            for (_, w) in &wires {
                targets.extend(snap.topology.read_targets(&w.bytes, &dead, now, rotation));
                ends.push(targets.len());
            }
            (targets, ends)
        };
        let plan = |i: usize| &targets[if i == 0 { 0 } else { ends[i - 1] }..ends[i]];
        let mut found: HashMap<Vec<u8>, Item> = HashMap::with_capacity(wires.len());
        let mut done = vec![false; wires.len()];
        let mut answered = vec![false; wires.len()];
        let mut last_error = None;
        let rounds = (0..wires.len()).map(|i| plan(i).len()).max().unwrap_or(0);
        for round in 0..rounds {
            // (server, slot) → indices of the keys to ask it for.
            let mut batches: HashMap<(ServerId, usize), Vec<usize>> = HashMap::new();
            for (i, &done) in done.iter().enumerate() {
                if let (false, Some(t)) = (done, plan(i).get(round)) {
                    batches.entry((t.server, t.slot)).or_default().push(i);
                }
            }
            let mut futures: Vec<BoxFuture<'_, (Vec<usize>, Reply)>> = Vec::new();
            for ((server, slot), indices) in batches {
                let snap = &snap;
                let wires = &wires;
                let group = plan(indices[0])[round].group;
                futures.push(Box::pin(async move {
                    let keys: Vec<Key<'_>> = indices.iter().map(|&i| wires[i].1.key()).collect();
                    let target = Target {
                        group,
                        server,
                        slot,
                    };
                    let reply = self.exec(snap, target, &Request::Get { keys: &keys }).await;
                    (indices, reply)
                }));
            }
            for (indices, reply) in join_all(futures).await {
                match reply {
                    Ok(Some(Response::Values(values))) => {
                        for &i in &indices {
                            answered[i] = true;
                        }
                        // Values come in request order: scan on from the
                        // last match.
                        let mut cursor = 0;
                        for v in values {
                            let found_at = crate::merge::circular(cursor, indices.len())
                                .find(|&j| *wires[indices[j]].1.bytes == v.key[..]);
                            if let Some(j) = found_at {
                                cursor = j + 1;
                                let i = indices[j];
                                done[i] = true;
                                found.insert(
                                    wires[i].0.to_vec(),
                                    Item {
                                        value: v.data,
                                        flags: v.flags,
                                        cas: v.cas,
                                    },
                                );
                            }
                        }
                    }
                    Ok(other) => last_error = Some(unexpected(other.as_ref())),
                    Err(e) => last_error = Some(e),
                }
            }
        }
        // Fail only if some key got no answer from any group at all (a hit
        // implies an answer, so `answered` covers `done`).
        match last_error {
            Some(e) if answered.contains(&false) => Err(e),
            _ => Ok(found),
        }
    }

    // ---- writes ------------------------------------------------------------

    /// Stores a value in every server group (`set`).
    pub async fn set(
        &self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        exptime: u32,
    ) -> Result<WriteOutcome, Error> {
        self.store(StoreCommand::Set, key.as_ref(), value.as_ref(), 0, exptime)
            .await
    }

    /// Stores a value with explicit client flags in every group.
    pub async fn set_with_flags(
        &self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        flags: u32,
        exptime: u32,
    ) -> Result<WriteOutcome, Error> {
        self.store(
            StoreCommand::Set,
            key.as_ref(),
            value.as_ref(),
            flags,
            exptime,
        )
        .await
    }

    /// Stores only where the key is absent (`add`); see [`WriteOutcome::applied`].
    pub async fn add(
        &self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        exptime: u32,
    ) -> Result<WriteOutcome, Error> {
        self.store(StoreCommand::Add, key.as_ref(), value.as_ref(), 0, exptime)
            .await
    }

    /// Stores only where the key is present (`replace`).
    pub async fn replace(
        &self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        exptime: u32,
    ) -> Result<WriteOutcome, Error> {
        self.store(
            StoreCommand::Replace,
            key.as_ref(),
            value.as_ref(),
            0,
            exptime,
        )
        .await
    }

    /// Appends to the existing value (`append`).
    pub async fn append(
        &self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
    ) -> Result<WriteOutcome, Error> {
        self.store(StoreCommand::Append, key.as_ref(), value.as_ref(), 0, 0)
            .await
    }

    /// Prepends to the existing value (`prepend`).
    pub async fn prepend(
        &self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
    ) -> Result<WriteOutcome, Error> {
        self.store(StoreCommand::Prepend, key.as_ref(), value.as_ref(), 0, 0)
            .await
    }

    /// Stores only if the item still has the CAS unique from [`Client::gets`].
    /// CAS values are per server: with several groups, only the group whose
    /// copy was read can match.
    pub async fn cas(
        &self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        flags: u32,
        exptime: u32,
        cas: u64,
    ) -> Result<WriteOutcome, Error> {
        self.store(
            StoreCommand::Cas(cas),
            key.as_ref(),
            value.as_ref(),
            flags,
            exptime,
        )
        .await
    }

    async fn store(
        &self,
        command: StoreCommand,
        key: &[u8],
        value: &[u8],
        flags: u32,
        exptime: u32,
    ) -> Result<WriteOutcome, Error> {
        self.check_value(value)?;
        let op = WriteOp::Store {
            command,
            data: value,
            flags,
            exptime,
            noreply: false,
        };
        self.replicate(key, None, op).await
    }

    /// Stores in every group without waiting for replies (`noreply`).
    /// Returns once the request is queued on each group's connection.
    pub async fn set_noreply(
        &self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        flags: u32,
        exptime: u32,
    ) -> Result<(), Error> {
        let value = value.as_ref();
        self.check_value(value)?;
        let outcome = self
            .replicate(
                key.as_ref(),
                None,
                WriteOp::Store {
                    command: StoreCommand::Set,
                    data: value,
                    flags,
                    exptime,
                    noreply: true,
                },
            )
            .await?;
        drop(outcome);
        Ok(())
    }

    /// Deletes a key from every group.
    pub async fn delete(&self, key: impl AsRef<[u8]>) -> Result<WriteOutcome, Error> {
        self.replicate(key.as_ref(), None, WriteOp::Delete { noreply: false })
            .await
    }

    /// Deletes without waiting for replies.
    pub async fn delete_noreply(&self, key: impl AsRef<[u8]>) -> Result<(), Error> {
        self.replicate(key.as_ref(), None, WriteOp::Delete { noreply: true })
            .await
            .map(drop)
    }

    /// Sets a new expiration time in every group.
    pub async fn touch(&self, key: impl AsRef<[u8]>, exptime: u32) -> Result<WriteOutcome, Error> {
        self.replicate(key.as_ref(), None, WriteOp::Touch { exptime })
            .await
    }

    /// Increments a counter in every group; returns the new value from the
    /// first group that had the key (`None` if none had it).
    pub async fn incr(&self, key: impl AsRef<[u8]>, delta: u64) -> Result<Option<u64>, Error> {
        self.arith(key.as_ref(), true, delta).await
    }

    /// Decrements a counter (stopping at 0) in every group.
    pub async fn decr(&self, key: impl AsRef<[u8]>, delta: u64) -> Result<Option<u64>, Error> {
        self.arith(key.as_ref(), false, delta).await
    }

    async fn arith(&self, key: &[u8], increment: bool, delta: u64) -> Result<Option<u64>, Error> {
        let numbers = Mutex::new(Vec::new());
        self.replicate_with(key, None, WriteOp::Arith { increment, delta }, |r| {
            if let Response::Number(n) = r {
                numbers.lock().push(*n);
            }
        })
        .await?;
        Ok(numbers.into_inner().into_iter().next())
    }

    /// The cache warmer's write (EVCache `addOrSet`): writes the key into the
    /// named groups only — `set` when `replace` is true, else `add` (which
    /// leaves a copy already there alone). Exactly one write per key per
    /// target group, whatever the pool size.
    pub async fn add_or_set(
        &self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        flags: u32,
        exptime: u32,
        target_groups: &[&str],
        replace: bool,
    ) -> Result<WriteOutcome, Error> {
        let value = value.as_ref();
        self.check_value(value)?;
        let snap = self.snapshot();
        let mut ids = Vec::with_capacity(target_groups.len());
        for name in target_groups {
            let id = snap.topology.group_by_name(name).ok_or_else(|| {
                Error::new(
                    ErrorKind::InvalidArgument,
                    format!("unknown server group {name:?}"),
                )
            })?;
            ids.push(id);
        }
        let command = if replace {
            StoreCommand::Set
        } else {
            StoreCommand::Add
        };
        let op = WriteOp::Store {
            command,
            data: value,
            flags,
            exptime,
            noreply: false,
        };
        self.replicate(key.as_ref(), Some(&ids), op).await
    }

    async fn replicate(
        &self,
        key: &[u8],
        only: Option<&[GroupId]>,
        op: WriteOp<'_>,
    ) -> Result<WriteOutcome, Error> {
        self.replicate_with(key, only, op, |_| {}).await
    }

    /// Writes one request to exactly one slot of every (or every targeted)
    /// group, concurrently, and applies the write policy.
    async fn replicate_with(
        &self,
        key: &[u8],
        only: Option<&[GroupId]>,
        op: WriteOp<'_>,
        observe: impl Fn(&Response) + Sync,
    ) -> Result<WriteOutcome, Error> {
        let snap = self.snapshot();
        let wire = Self::wire_key(&snap, key)?;
        let plan: Vec<(GroupId, Result<Target, Error>)> = {
            let rotation = self.rotation();
            let dead = self.inner.dead.lock();
            let now = Instant::now();
            let dead_error = |server: ServerId| {
                Error::new(ErrorKind::ServerDead, "server is marked dead").at(snap.name(server))
            };
            match only {
                None => snap
                    .topology
                    .write_targets(&wire.bytes, &dead, now, rotation)
                    .map(|t| match t {
                        Ok(t) => (t.group, Ok(t)),
                        Err(skip) => (skip.group, Err(dead_error(skip.server))),
                    })
                    .collect(),
                Some(groups) => snap
                    .topology
                    .targeted_write_targets(&wire.bytes, groups, &dead, now, rotation, None)
                    .map(|t| match t {
                        Ok(t) => (t.group, Ok(t)),
                        Err(skip) => (skip.group, Err(dead_error(skip.server))),
                    })
                    .collect(),
            }
        };
        let request = op.request(wire.key());
        let futures: Vec<BoxFuture<'_, GroupOutcome>> = plan
            .into_iter()
            .map(|(group, target)| {
                let snap = &snap;
                let request = &request;
                let observe = &observe;
                Box::pin(async move {
                    let name = snap.topology.group(group).name().to_string();
                    let target = match target {
                        Ok(t) => t,
                        Err(e) => {
                            return GroupOutcome {
                                group: name,
                                server: e.server().map(str::to_string),
                                result: Err(e),
                            };
                        }
                    };
                    let server = Some(snap.name(target.server).to_string());
                    let result = match self.exec(snap, target, request).await {
                        Ok(None) => Ok(true),
                        Ok(Some(reply)) => {
                            observe(&reply);
                            applied(&reply)
                        }
                        Err(e) => Err(e),
                    };
                    GroupOutcome {
                        group: name,
                        server,
                        result,
                    }
                }) as BoxFuture<'_, GroupOutcome>
            })
            .collect();
        let outcome = WriteOutcome {
            groups: join_all(futures).await,
        };
        let ok_groups = outcome
            .groups
            .iter()
            .filter(|g| g.result.is_ok())
            .filter_map(|g| snap.topology.group_by_name(&g.group));
        let succeeded = match only {
            // A targeted write succeeds when every targeted group took it.
            Some(_) => outcome.groups.iter().all(|g| g.result.is_ok()),
            None => snap.topology.write_succeeded(ok_groups),
        };
        if succeeded {
            Ok(outcome)
        } else {
            let reasons: Vec<String> = outcome.failed().map(|(g, e)| format!("{g}: {e}")).collect();
            let first = outcome.failed().next().map(|(_, e)| e.clone());
            let mut error = Error::new(
                ErrorKind::WritePolicy,
                format!("write missed its policy ({})", reasons.join("; ")),
            );
            if let Some(first) = first {
                error = error.with_source(first);
            }
            Err(error)
        }
    }

    // ---- typed values ------------------------------------------------------

    /// Reads a key as a typed value, following the Whalin Java client's flag
    /// conventions (see [`crate::value`]). `Ok(None)` on a miss.
    ///
    /// ```no_run
    /// # async fn demo(client: memgroup_client::Client) -> Result<(), memgroup_client::Error> {
    /// client.set_as("visits", &41i64, 0).await?;
    /// let visits: Option<i64> = client.get_as("visits").await?;
    /// assert_eq!(visits, Some(41));
    /// # Ok(()) }
    /// ```
    pub async fn get_as<T: FromValue>(&self, key: impl AsRef<[u8]>) -> Result<Option<T>, Error> {
        match self.get(key).await? {
            Some(item) => T::from_item(&item).map(Some),
            None => Ok(None),
        }
    }

    /// Stores a typed value with the flags a Java client would use.
    pub async fn set_as<T: ToValue + ?Sized>(
        &self,
        key: impl AsRef<[u8]>,
        value: &T,
        exptime: u32,
    ) -> Result<WriteOutcome, Error> {
        let (bytes, flags) = value.to_value();
        self.store(StoreCommand::Set, key.as_ref(), &bytes, flags, exptime)
            .await
    }

    // ---- meta commands -----------------------------------------------------

    /// A meta get (`mg`) with the given flags, read like [`Client::get`]
    /// (local group first, fallback on miss or error). `Ok(None)` on a miss.
    pub async fn meta_get(
        &self,
        key: impl AsRef<[u8]>,
        flags: &[MetaFlag],
    ) -> Result<Option<MetaResponse>, Error> {
        if flags.iter().any(|f| f.is_quiet()) {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                "quiet mode (q) is not supported by meta_get",
            ));
        }
        let snap = self.snapshot();
        let wire = Self::wire_key(&snap, key.as_ref())?;
        let request = Request::MetaGet {
            key: wire.key(),
            flags,
        };
        self.read_walk(&snap, &wire.bytes, &request, |reply| match reply {
            Response::Meta(m) if m.status == MetaStatus::En => Ok(None),
            Response::Meta(m) => Ok(Some(m)),
            other => Err(unexpected(Some(&other))),
        })
        .await
    }

    /// A meta set (`ms`) with the given flags, in every group.
    pub async fn meta_set(
        &self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        flags: &[MetaFlag],
    ) -> Result<WriteOutcome, Error> {
        let value = value.as_ref();
        self.check_value(value)?;
        if flags.iter().any(|f| f.is_quiet()) {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                "quiet mode (q) is not supported by meta_set",
            ));
        }
        self.replicate(key.as_ref(), None, WriteOp::MetaSet { data: value, flags })
            .await
    }

    // ---- per-server commands ------------------------------------------------

    /// `stats` (or `stats <group>`) of every server. `stats reset` (which
    /// zeroes the servers' counters) answers with no statistics.
    pub async fn stats(&self, arg: Option<&str>) -> Result<Vec<ServerStats>, Error> {
        let arg = arg.map(|a| Key::new(a.as_bytes())).transpose()?;
        let request = Request::Stats { arg };
        let results = self.each_server(&request).await;
        Ok(results
            .into_iter()
            .map(|(group, server, reply)| ServerStats {
                group,
                server,
                stats: reply.and_then(|r| match r {
                    Some(Response::Stats(stats)) => Ok(stats
                        .iter()
                        .map(|s| (s.name_str().to_string(), s.value_str().to_string()))
                        .collect()),
                    // `stats reset` answers `RESET`.
                    Some(Response::Ok) => Ok(Default::default()),
                    other => Err(unexpected(other.as_ref())),
                }),
            })
            .collect())
    }

    /// The version of every server, as `(group, server, version)`.
    pub async fn version(&self) -> Vec<(String, String, Result<String, Error>)> {
        self.each_server(&Request::Version)
            .await
            .into_iter()
            .map(|(g, s, r)| {
                let v = r.and_then(|r| match r {
                    Some(Response::Version(v)) => Ok(String::from_utf8_lossy(&v).into_owned()),
                    other => Err(unexpected(other.as_ref())),
                });
                (g, s, v)
            })
            .collect()
    }

    /// Invalidates every item on every server of `group` (all groups when
    /// `None`).
    pub async fn flush_all(&self, group: Option<&str>) -> Result<(), Error> {
        let only =
            match group {
                Some(name) => Some(self.snapshot().topology.group_by_name(name).ok_or_else(
                    || {
                        Error::new(
                            ErrorKind::InvalidArgument,
                            format!("unknown server group {name:?}"),
                        )
                    },
                )?),
                None => None,
            };
        let request = Request::FlushAll {
            delay: None,
            noreply: false,
        };
        for (_, _, reply) in self.servers_of(only, &request).await {
            reply?;
        }
        Ok(())
    }

    /// Sends `request` once to every distinct server (slot 0).
    async fn each_server(&self, request: &Request<'_>) -> Vec<(String, String, Reply)> {
        self.servers_of(None, request).await
    }

    /// Sends `request` once to every distinct server of `group` (of every
    /// group when `None`), on slot 0.
    async fn servers_of(
        &self,
        group: Option<GroupId>,
        request: &Request<'_>,
    ) -> Vec<(String, String, Reply)> {
        let snap = self.snapshot();
        let mut seen = vec![false; snap.names.len()];
        let mut futures: Vec<BoxFuture<'_, (String, String, Reply)>> = Vec::new();
        for (gi, g) in snap.topology.groups().iter().enumerate() {
            if group.is_some_and(|only| only != GroupId(gi)) {
                continue;
            }
            for &server in g.servers() {
                if std::mem::replace(&mut seen[server.0], true) {
                    continue;
                }
                let snap = &snap;
                let name = g.name().to_string();
                futures.push(Box::pin(async move {
                    let target = Target {
                        group: GroupId(gi),
                        server,
                        slot: 0,
                    };
                    let reply = self.exec(snap, target, request).await;
                    (name, snap.name(server).to_string(), reply)
                }));
            }
        }
        join_all(futures).await
    }
}

/// A write, minus its key: built into a request once the wire key is known.
#[derive(Debug, Clone, Copy)]
enum WriteOp<'a> {
    Store {
        command: StoreCommand,
        data: &'a [u8],
        flags: u32,
        exptime: u32,
        noreply: bool,
    },
    Delete {
        noreply: bool,
    },
    Touch {
        exptime: u32,
    },
    Arith {
        increment: bool,
        delta: u64,
    },
    MetaSet {
        data: &'a [u8],
        flags: &'a [MetaFlag],
    },
}

impl<'a> WriteOp<'a> {
    fn request<'k>(&self, key: Key<'k>) -> Request<'k>
    where
        'a: 'k,
    {
        match *self {
            WriteOp::Store {
                command,
                data,
                flags,
                exptime,
                noreply,
            } => Request::Store {
                command,
                key,
                flags,
                exptime,
                data,
                noreply,
            },
            WriteOp::Delete { noreply } => Request::Delete { key, noreply },
            WriteOp::Touch { exptime } => Request::Touch {
                key,
                exptime,
                noreply: false,
            },
            WriteOp::Arith { increment, delta } => Request::Arith {
                key,
                increment,
                delta,
                noreply: false,
            },
            WriteOp::MetaSet { data, flags } => Request::MetaSet { key, data, flags },
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum ReadKind {
    Get,
    Gets,
    Gat(u32),
}

impl ReadKind {
    fn request<'a>(self, keys: &'a [Key<'a>]) -> Request<'a> {
        match self {
            ReadKind::Get => Request::Get { keys },
            ReadKind::Gets => Request::Gets { keys },
            ReadKind::Gat(exptime) => Request::Gat { exptime, keys },
        }
    }
}

/// Turns error replies into errors.
fn check_reply(reply: Response, server: &str) -> Result<Response, Error> {
    match reply {
        Response::ServerError(m) => Err(Error::new(
            ErrorKind::Server,
            format!("SERVER_ERROR {}", String::from_utf8_lossy(&m)),
        )
        .at(server)),
        Response::ClientError(m) => Err(Error::new(
            ErrorKind::Client,
            format!("CLIENT_ERROR {}", String::from_utf8_lossy(&m)),
        )
        .at(server)),
        Response::Error => Err(Error::new(ErrorKind::Client, "ERROR (unknown command)").at(server)),
        other => Ok(other),
    }
}

/// A reply, or why there is none.
type Reply = Result<Option<Response>, Error>;

/// Whether a write reply means "applied" (`true`) or "refused by its
/// condition" (`false`).
fn applied(reply: &Response) -> Result<bool, Error> {
    match reply {
        Response::Stored
        | Response::Deleted
        | Response::Touched
        | Response::Ok
        | Response::Number(_) => Ok(true),
        Response::NotStored | Response::NotFound | Response::Exists => Ok(false),
        Response::Meta(m) => Ok(matches!(m.status, MetaStatus::Hd | MetaStatus::Va)),
        other => Err(unexpected(Some(other))),
    }
}

fn unexpected(reply: Option<&Response>) -> Error {
    Error::new(ErrorKind::Protocol, format!("unexpected reply {reply:?}"))
}

fn no_live_server() -> Error {
    Error::new(
        ErrorKind::ServerDead,
        "no live server holds this key (all candidates are marked dead)",
    )
}
