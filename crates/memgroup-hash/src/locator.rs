//! Locators: key → server index, and the failover sequences.

use std::borrow::Cow;
use std::fmt;
use std::iter::FusedIterator;
use std::sync::Arc;

use crate::hash::{DecimalCounter, PrefixHasher, decimal, md5_words};
use crate::{
    Error, HashFunction, HashStrategy, KeyHasher, LocatorConfig, Node, NodeNaming, sanitize_key,
};

/// Where a hash lands: the slot and its server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Placement {
    /// The key hash, in the reference client's own signedness.
    pub hash: i64,
    /// The bucket index for modulo strategies (an index into the weight-repeated bucket
    /// list of Whalin and python-memcached; `hash % servers` for libmemcached), or the chosen
    /// ring point for ring strategies. This is what Whalin's `getBucket` returns.
    pub slot: u64,
    /// Index of the server in the node slice the locator was built from.
    pub node: usize,
}

/// Maps keys to servers for one server list. Immutable: a topology change builds a new one.
///
/// Building costs O(points · log points) (up to 160 ring points per server); every lookup is
/// O(log points) or O(1) and allocates nothing. Cloning shares the tables.
///
/// The locator hashes the bytes it is given. If the configuration says keys are sanitised,
/// transform them first with [`Locator::wire_key`] and send those same bytes to the server.
///
/// ```
/// use memgroup_hash::{HashStrategy, Locator, LocatorConfig, Node};
/// let nodes = [Node::new("127.0.0.1", 11211), Node::new("127.0.0.1", 11212), Node::new("127.0.0.1", 11213)];
/// let locator = Locator::new(LocatorConfig::new(HashStrategy::Consistent), &nodes)?;
/// assert_eq!(locator.hash(b"a"), 3111502092);
/// assert_eq!(locator.locate(b"a"), 1); // ring point 3114363270, md5("127.0.0.1:11212-20") word 0
/// # Ok::<(), memgroup_hash::Error>(())
/// ```
#[derive(Clone)]
pub struct Locator {
    inner: Arc<Inner>,
}

struct Inner {
    config: LocatorConfig,
    hasher: Hasher,
    dist: Distribution,
    node_count: usize,
    /// Whether each node owns at least one slot. A node without one (an EVCache name
    /// collision, a tiny ketama weight) can never be reached by rehashing, so a failover
    /// stage whose candidates all lack slots skips straight to the fallback.
    owns_slot: Box<[bool]>,
    reachable_count: usize,
}

enum Hasher {
    Builtin(HashFunction),
    Custom(Arc<dyn KeyHasher>),
}

impl Hasher {
    #[inline]
    fn hash(&self, key: &[u8]) -> i64 {
        match self {
            Hasher::Builtin(f) => f.hash(key),
            Hasher::Custom(h) => h.hash(key),
        }
    }

    fn as_dyn(&self) -> &dyn KeyHasher {
        match self {
            Hasher::Builtin(f) => f,
            Hasher::Custom(h) => &**h,
        }
    }

    fn builtin(&self) -> Option<HashFunction> {
        match self {
            Hasher::Builtin(f) => Some(*f),
            Hasher::Custom(_) => None,
        }
    }
}

enum Distribution {
    /// Whalin `getBucket`: `|hash rem buckets|` (Java remainder, then negated if negative).
    JavaModulo(Buckets),
    /// python-memcached: `hash % len(buckets)` with Python's floored remainder.
    PythonModulo(Buckets),
    /// libmemcached MODULA: `(uint32_t)hash % server_count`, weights ignored.
    Modula(u32),
    Ring(Ring),
}

/// The weight-repeated bucket list, stored as cumulative ends instead of materialised so a
/// large weight costs no memory.
struct Buckets {
    count: u64,
    /// `ends[i]` is one past node i's last bucket; `None` when every node has one bucket.
    ends: Option<Box<[u64]>>,
}

impl Buckets {
    fn new(nodes: &[Node]) -> Buckets {
        if nodes.iter().all(|n| n.effective_weight() == 1) {
            return Buckets {
                count: nodes.len() as u64,
                ends: None,
            };
        }
        let ends: Box<[u64]> = nodes
            .iter()
            .scan(0u64, |end, n| {
                *end += u64::from(n.effective_weight());
                Some(*end)
            })
            .collect();
        Buckets {
            count: ends.last().copied().unwrap_or(0),
            ends: Some(ends),
        }
    }

    #[inline]
    fn node(&self, bucket: u64) -> usize {
        match &self.ends {
            None => bucket as usize,
            Some(ends) => ends.partition_point(|&end| end <= bucket),
        }
    }
}

/// A sorted hash ring. Points and owners live in separate arrays so the search touches only
/// the points, and a bucket index over the top bits of the hash narrows the search to a few
/// neighbouring points: one table read instead of ~14 dependent probes across the array.
struct Ring {
    points: Box<[u32]>,
    owners: Box<[u32]>,
    /// `index[j]` is the position of the first point ≥ `j << shift`, for `j` in
    /// `0..=buckets`; the points of bucket `j` are `points[index[j]..index[j + 1]]`.
    index: Box<[u32]>,
    shift: u32,
}

/// Which of several nodes that produced the same point keeps it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Collision {
    /// Java `TreeMap.put`: the node inserted later (higher index) replaces the earlier one.
    LaterWins,
    /// libmemcached's continuum sorted by (value, index) and searched with lower_bound.
    LowerIndexWins,
}

impl Ring {
    /// `entries` are `(point, node)` in insertion order.
    fn new(entries: &[(u32, u32)], collision: Collision) -> Ring {
        // Sorted by point, then insertion order, so the winner of equal points
        // is the last or first of its run: as a stable sort by point, but on
        // plain integers (each the point above its position), which sorts
        // the 6.4 million points of 40,000 servers in a fraction of the time.
        let mut order: Vec<u64> = entries
            .iter()
            .enumerate()
            .map(|(i, &(point, _))| u64::from(point) << 32 | i as u64)
            .collect();
        order.sort_unstable();
        let mut kept: Vec<(u32, u32)> = Vec::with_capacity(entries.len());
        for (point, node) in order
            .into_iter()
            .map(|o| entries[(o & 0xffff_ffff) as usize])
        {
            match kept.last_mut() {
                Some(last) if last.0 == point => {
                    if collision == Collision::LaterWins {
                        last.1 = node;
                    }
                }
                _ => kept.push((point, node)),
            }
        }
        let points: Box<[u32]> = kept.iter().map(|&(p, _)| p).collect();
        let owners = kept.iter().map(|&(_, n)| n).collect();
        // Positions are stored as u32: a ring of 2^32 points would need 4 billion digests
        // (and insertion positions above fit in the low 32 bits for the same reason).
        assert!(u32::try_from(points.len()).is_ok(), "ring too large");
        // About four points per bucket keeps the index at most half the size of the ring.
        let buckets = (points.len() / 4).max(1).next_power_of_two();
        let shift = 32 - buckets.trailing_zeros();
        let mut index = Vec::with_capacity(buckets + 1);
        let mut pos = 0;
        for bucket in 0..=buckets as u64 {
            let start = bucket << shift;
            while pos < points.len() && u64::from(points[pos]) < start {
                pos += 1;
            }
            index.push(pos as u32);
        }
        Ring {
            points,
            owners,
            index: index.into(),
            shift,
        }
    }

    /// Position of the first point ≥ `hash`, wrapping to the first point.
    #[inline]
    fn find(&self, hash: i64) -> usize {
        let pos = match u32::try_from(hash) {
            Ok(h) => {
                let bucket = (u64::from(h) >> self.shift) as usize;
                let (lo, hi) = (self.index[bucket] as usize, self.index[bucket + 1] as usize);
                // Every point before `lo` is < h and every point from `hi` on is ≥ h.
                lo + self.points[lo..hi].partition_point(|&p| p < h)
            }
            // Outside the ring's range: below every point the smallest is the
            // ceiling, above every point the search wraps to it; either way the
            // first point.
            Err(_) => 0,
        };
        if pos == self.points.len() { 0 } else { pos }
    }
}

/// Appends the four MD5-word points of `name` for `node`.
fn push_digest_points(entries: &mut Vec<(u32, u32)>, name: &str, node: u32) {
    entries.extend(md5_words(name.as_bytes()).map(|w| (w, node)));
}

/// Runs `f(node_index, digest_name)` for `count(node)` repetitions of each node, reusing
/// one name buffer.
fn for_each_point_name(
    nodes: &[Node],
    prefix: impl Fn(&Node) -> String,
    count: impl Fn(usize) -> u32,
    mut f: impl FnMut(u32, &str),
) {
    let mut buf = [0u8; 20];
    for (i, node) in nodes.iter().enumerate() {
        let mut name = prefix(node);
        let base = name.len();
        for rep in 0..count(i) {
            name.truncate(base);
            // Decimal digits are ASCII, so this cannot fail.
            name.push_str(std::str::from_utf8(decimal(i64::from(rep), &mut buf)).unwrap_or("0"));
            f(i as u32, &name);
        }
    }
}

/// Whalin `populateConsistentBuckets`: `floor(40·n·w / total)` digests per server in double
/// arithmetic, named `host:port-j`, four points each, later insert wins.
fn whalin_ring(nodes: &[Node], total: u64) -> Result<Ring, Error> {
    let n = nodes.len() as u64;
    let mut factors = Vec::with_capacity(nodes.len());
    for (index, node) in nodes.iter().enumerate() {
        // Java computes 40·n·w in `int`; refuse what would overflow rather than copy it.
        let numerator = 40 * n * u64::from(node.effective_weight());
        if numerator > i32::MAX as u64 {
            return Err(Error::WeightTooLarge { index });
        }
        factors.push((numerator as f64 / total as f64).floor() as u32);
    }
    let mut entries = Vec::with_capacity(4 * factors.iter().map(|&f| f as usize).sum::<usize>());
    for_each_point_name(
        nodes,
        |node| format!("{node}-"),
        |i| factors[i],
        |i, name| {
            push_digest_points(&mut entries, name, i);
        },
    );
    Ok(Ring::new(&entries, Collision::LaterWins))
}

/// spymemcached `KetamaNodeLocator` / libmemcached `KETAMA_WEIGHTED`: 40 digests per node,
/// or when weighted `floor(pct·160/4·n + 1e-10)` in **float** arithmetic (both clients
/// compute in `float`; Whalin's double rounding differs for some weights).
fn ketama_ring(nodes: &[Node], total: u64, naming: NodeNaming) -> Ring {
    let libmemcached = naming == NodeNaming::Libmemcached;
    // libmemcached always weighs (its servers carry weight 1 by default); spymemcached only
    // when it was given a weight map.
    let weighted = libmemcached || nodes.iter().any(|n| n.weight.is_some());
    let n = nodes.len() as f32;
    let digests = |i: usize| -> u32 {
        if !weighted {
            return 40;
        }
        let pct = nodes[i].effective_weight() as f32 / total as f32;
        // The Java/C expression adds a double 1e-10 and narrows back to float: the sum
        // rounds back to the same float (1e-10 is far below a float's step near these
        // values), so the floor is the float product's.
        (pct * 160.0 / 4.0 * n).floor() as u32
    };
    let mut entries =
        Vec::with_capacity(4 * (0..nodes.len()).map(|i| digests(i) as usize).sum::<usize>());
    for_each_point_name(
        nodes,
        |node| naming.node_key_prefix(node),
        digests,
        |i, name| {
            push_digest_points(&mut entries, name, i);
        },
    );
    let collision = if libmemcached {
        Collision::LowerIndexWins
    } else {
        Collision::LaterWins
    };
    Ring::new(&entries, collision)
}

/// libmemcached `MEMCACHED_DISTRIBUTION_CONSISTENT_KETAMA` without the weighted flag:
/// 100 points per server, point j = MD5 word 0 of the libmemcached name `host[:port]-j`.
fn libmemcached_unweighted_ring(nodes: &[Node]) -> Ring {
    let mut entries = Vec::with_capacity(100 * nodes.len());
    let naming = NodeNaming::Libmemcached;
    for_each_point_name(
        nodes,
        |node| naming.node_key_prefix(node),
        |_| 100,
        |i, name| {
            entries.push((md5_words(name.as_bytes())[0], i));
        },
    );
    Ring::new(&entries, Collision::LowerIndexWins)
}

impl Distribution {
    fn build(config: &LocatorConfig, nodes: &[Node], total: u64) -> Result<Distribution, Error> {
        Ok(match config.strategy {
            HashStrategy::Native | HashStrategy::OldCompat | HashStrategy::NewCompat => {
                Distribution::JavaModulo(Buckets::new(nodes))
            }
            HashStrategy::PythonMemcached | HashStrategy::PythonMemcached159 => {
                Distribution::PythonModulo(Buckets::new(nodes))
            }
            HashStrategy::LibmemcachedModulaOaat | HashStrategy::LibmemcachedModulaCrc => {
                // Node count ≤ total weight ≤ i32::MAX was checked by the caller.
                Distribution::Modula(nodes.len() as u32)
            }
            HashStrategy::Consistent => Distribution::Ring(whalin_ring(nodes, total)?),
            HashStrategy::Ketama => {
                Distribution::Ring(ketama_ring(nodes, total, config.node_naming))
            }
            HashStrategy::LibmemcachedKetamaUnweighted => {
                Distribution::Ring(libmemcached_unweighted_ring(nodes))
            }
        })
    }

    /// `(slot, node)` for a hash.
    #[inline]
    fn place(&self, hash: i64) -> (u64, usize) {
        match self {
            Distribution::JavaModulo(b) => {
                // Total weight ≤ i32::MAX, so the count fits an i64 and the remainder is exact.
                let bucket = hash.wrapping_rem(b.count as i64).unsigned_abs();
                (bucket, b.node(bucket))
            }
            Distribution::PythonModulo(b) => {
                let bucket = hash.rem_euclid(b.count as i64) as u64;
                (bucket, b.node(bucket))
            }
            Distribution::Modula(count) => {
                let index = (hash as u32) % count;
                (u64::from(index), index as usize)
            }
            Distribution::Ring(ring) => {
                let pos = ring.find(hash);
                (u64::from(ring.points[pos]), ring.owners[pos] as usize)
            }
        }
    }
}

impl Locator {
    /// Builds a locator for `nodes` (in the clients' configured order; the order matters to
    /// every strategy).
    ///
    /// # Errors
    ///
    /// [`Error::NoNodes`] for an empty list, [`Error::ZeroWeight`] for a zero weight, and
    /// [`Error::WeightTooLarge`] when the weights overflow the reference clients' 32-bit
    /// arithmetic.
    pub fn new(config: LocatorConfig, nodes: &[Node]) -> Result<Locator, Error> {
        Locator::build(
            config,
            nodes,
            Hasher::Builtin(config.strategy.hash_function()),
        )
    }

    /// Like [`Locator::new`], but keys are hashed by `hasher` instead of the strategy's own
    /// function; the strategy still decides how a hash picks a server (ring strategies keep
    /// their MD5 ring points, so `hasher` should produce values in `0..=u32::MAX`).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use memgroup_hash::{HashStrategy, KeyHasher, Locator, LocatorConfig, Node};
    ///
    /// #[derive(Debug)]
    /// struct Len;
    /// impl KeyHasher for Len {
    ///     fn hash(&self, key: &[u8]) -> i64 { key.len() as i64 }
    /// }
    ///
    /// let nodes = [Node::new("a", 1), Node::new("b", 1)];
    /// let locator = Locator::with_hasher(LocatorConfig::new(HashStrategy::NewCompat), &nodes, Arc::new(Len))?;
    /// assert_eq!(locator.locate(b"xyz"), 1);
    /// # Ok::<(), memgroup_hash::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As for [`Locator::new`].
    pub fn with_hasher(
        config: LocatorConfig,
        nodes: &[Node],
        hasher: Arc<dyn KeyHasher>,
    ) -> Result<Locator, Error> {
        Locator::build(config, nodes, Hasher::Custom(hasher))
    }

    fn build(config: LocatorConfig, nodes: &[Node], hasher: Hasher) -> Result<Locator, Error> {
        if nodes.is_empty() {
            return Err(Error::NoNodes);
        }
        let mut total = 0u64;
        for (index, node) in nodes.iter().enumerate() {
            if node.weight == Some(0) {
                return Err(Error::ZeroWeight { index });
            }
            total += u64::from(node.effective_weight());
            if total > i32::MAX as u64 {
                return Err(Error::WeightTooLarge { index });
            }
        }
        let dist = Distribution::build(&config, nodes, total)?;
        let mut owns_slot = vec![true; nodes.len()].into_boxed_slice();
        if let Distribution::Ring(ring) = &dist {
            owns_slot.fill(false);
            for &owner in &ring.owners {
                owns_slot[owner as usize] = true;
            }
        }
        let reachable_count = owns_slot.iter().filter(|&&owns| owns).count();
        Ok(Locator {
            inner: Arc::new(Inner {
                config,
                hasher,
                dist,
                node_count: nodes.len(),
                owns_slot,
                reachable_count,
            }),
        })
    }

    /// The configuration this locator was built with.
    #[must_use]
    pub fn config(&self) -> &LocatorConfig {
        &self.inner.config
    }

    /// Number of nodes; every index returned is below it.
    #[must_use]
    pub fn node_count(&self) -> usize {
        self.inner.node_count
    }

    /// The bytes to hash **and** send for `key`: [`sanitize_key`] when the configuration has
    /// `sanitize_keys`, else `key` itself. The locator's other methods never transform keys,
    /// so that the caller holds the exact wire bytes.
    #[must_use]
    pub fn wire_key<'k>(&self, key: &'k [u8]) -> Cow<'k, [u8]> {
        if self.inner.config.sanitize_keys {
            sanitize_key(key)
        } else {
            Cow::Borrowed(key)
        }
    }

    /// The raw key hash, in the reference client's own signedness: a Java `long` for the
    /// Whalin modulo hashes, a non-negative 32-bit value for CRC, MD5 and one-at-a-time.
    #[must_use]
    #[inline]
    pub fn hash(&self, key: &[u8]) -> i64 {
        self.inner.hasher.hash(key)
    }

    /// Index of the server for `key`.
    #[must_use]
    #[inline]
    pub fn locate(&self, key: &[u8]) -> usize {
        self.inner.dist.place(self.hash(key)).1
    }

    /// Index of the server for an already computed hash.
    #[must_use]
    #[inline]
    pub fn locate_hash(&self, hash: i64) -> usize {
        self.inner.dist.place(hash).1
    }

    /// Hash, slot and server for `key`.
    #[must_use]
    pub fn place(&self, key: &[u8]) -> Placement {
        self.place_hash(self.hash(key))
    }

    /// Slot and server for an already computed hash.
    #[must_use]
    pub fn place_hash(&self, hash: i64) -> Placement {
        let (slot, node) = self.inner.dist.place(hash);
        Placement { hash, slot, node }
    }

    /// The servers to try for `key`, in the order of Whalin's `SockIOPool.getSock` with
    /// failover on, for any strategy: first the primary ([`Locator::locate`]); then, after
    /// each server that turned out dead, the first server not yet tried among the rehashes of
    /// `"0" + key`, `"1" + key`, … (the counter restarts at 0 after every dead server).
    ///
    /// Take items until one is alive; asking for the next item means the previous server
    /// was dead. Unlike the Java loop, this iterator always terminates and yields every
    /// server exactly once (it is an [`ExactSizeIterator`] of length
    /// [`Locator::node_count`]):
    ///
    /// * when one untried server is left it is yielded directly, which is the only server
    ///   the Java loop could ever stop at;
    /// * when no untried server owns a ring point, or a stage has spent
    ///   [`LocatorConfig::max_failover_probes`] rehashes without finding one (Whalin's
    ///   `old-compat` with a bucket count divisible by 3 can loop forever), the **lowest
    ///   untried index** is yielded instead, and the next stage rehashes afresh.
    ///
    /// Below those bounds the order equals the Java client's. Nothing is allocated for up
    /// to 256 servers. `key` must be the bytes the primary was located with (the wire key).
    ///
    /// ```
    /// use memgroup_hash::{HashStrategy, Locator, LocatorConfig, Node};
    /// let nodes = [Node::new("127.0.0.1", 11211), Node::new("127.0.0.1", 11212), Node::new("127.0.0.1", 11213)];
    /// let locator = Locator::new(LocatorConfig::new(HashStrategy::NewCompat), &nodes)?;
    /// let order: Vec<usize> = locator.failover(b"polygenelubricants").collect();
    /// assert_eq!(order, [1, 2, 0]);
    /// # Ok::<(), memgroup_hash::Error>(())
    /// ```
    #[must_use]
    pub fn failover<'a>(&'a self, key: &'a [u8]) -> Failover<'a> {
        Failover {
            inner: &self.inner,
            key,
            prefix: None,
            tried: NodeSet::new(self.inner.node_count),
            untried: self.inner.node_count,
            untried_reachable: self.inner.reachable_count,
            started: false,
        }
    }

    /// python-memcached's server retries for `key` when every server is dead: 10 attempts
    /// (`_SERVER_RETRIES`); after failed attempt `i` the next hash is the strategy's hash of
    /// `str(previous_hash) + str(i)`. Servers may repeat and not all need appear. Meant for
    /// the python-memcached strategies, where it matches the client exactly.
    ///
    /// ```
    /// use memgroup_hash::{HashStrategy, Locator, LocatorConfig, Node};
    /// let nodes = [Node::new("192.168.0.1", 44444).with_weight(5), Node::new("192.168.0.2", 22222).with_weight(3)];
    /// let locator = Locator::new(LocatorConfig::new(HashStrategy::PythonMemcached), &nodes)?;
    /// let mut tries = locator.python_failover(b"polygenelubricants");
    /// assert_eq!(tries.next(), Some(1)); // hash 17734, bucket 6
    /// assert_eq!(tries.next(), Some(1)); // hash of "177340" = 15303, bucket 7
    /// assert_eq!(tries.count(), 8);
    /// # Ok::<(), memgroup_hash::Error>(())
    /// ```
    #[must_use]
    pub fn python_failover(&self, key: &[u8]) -> PythonFailover<'_> {
        PythonFailover {
            inner: &self.inner,
            hash: self.hash(key),
            attempt: 0,
        }
    }

    /// The ring as `(point, node)` in ascending point order; empty for modulo strategies.
    pub fn ring_points(&self) -> impl ExactSizeIterator<Item = (u32, usize)> + '_ {
        let (points, owners): (&[u32], &[u32]) = match &self.inner.dist {
            Distribution::Ring(ring) => (&ring.points, &ring.owners),
            _ => (&[], &[]),
        };
        points.iter().zip(owners).map(|(&p, &o)| (p, o as usize))
    }
}

impl fmt::Debug for Locator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let inner = &*self.inner;
        let mut s = f.debug_struct("Locator");
        s.field("config", &inner.config)
            .field("nodes", &inner.node_count);
        if let Hasher::Custom(h) = &inner.hasher {
            s.field("hasher", h);
        }
        match &inner.dist {
            Distribution::JavaModulo(b) | Distribution::PythonModulo(b) => {
                s.field("buckets", &b.count)
            }
            Distribution::Modula(n) => s.field("buckets", n),
            Distribution::Ring(r) => s.field("ring_points", &r.points.len()),
        };
        s.finish_non_exhaustive()
    }
}

/// A set of node indices, inline for up to 256 nodes so failover allocates nothing then.
#[derive(Debug)]
enum NodeSet {
    Inline([u64; 4]),
    Heap(Box<[u64]>),
}

impl NodeSet {
    fn new(nodes: usize) -> NodeSet {
        if nodes <= 256 {
            NodeSet::Inline([0; 4])
        } else {
            NodeSet::Heap(vec![0; nodes.div_ceil(64)].into())
        }
    }

    fn words(&self) -> &[u64] {
        match self {
            NodeSet::Inline(w) => w,
            NodeSet::Heap(w) => w,
        }
    }

    #[inline]
    fn contains(&self, i: usize) -> bool {
        self.words()[i / 64] & (1 << (i % 64)) != 0
    }

    fn insert(&mut self, i: usize) {
        let words = match self {
            NodeSet::Inline(w) => &mut w[..],
            NodeSet::Heap(w) => &mut w[..],
        };
        words[i / 64] |= 1 << (i % 64);
    }

    /// Lowest index below `n` not in the set.
    fn first_absent(&self, n: usize) -> Option<usize> {
        self.words()
            .iter()
            .enumerate()
            .find(|(_, w)| **w != u64::MAX)
            .map(|(i, w)| i * 64 + w.trailing_ones() as usize)
            .filter(|&i| i < n)
    }
}

/// Whalin-order failover candidates for one key; see [`Locator::failover`].
#[derive(Debug)]
pub struct Failover<'a> {
    inner: &'a Inner,
    key: &'a [u8],
    /// Built on the first rehash: most lookups stop at the primary.
    prefix: Option<PrefixHasher<'a>>,
    tried: NodeSet,
    untried: usize,
    untried_reachable: usize,
    started: bool,
}

impl fmt::Debug for Inner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Inner")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Failover<'_> {
    /// One `getSock` stage: the previous server was dead, rehash until an untried one.
    fn next_after_dead(&mut self) -> usize {
        let inner = self.inner;
        if self.untried > 1 && self.untried_reachable > 0 {
            let key = self.key;
            let prefix = self.prefix.get_or_insert_with(|| {
                PrefixHasher::new(inner.hasher.as_dyn(), inner.hasher.builtin(), key)
            });
            let limit = inner.config.max_failover_probes.min(i32::MAX as u32);
            let mut tries = DecimalCounter::new();
            for _ in 0..limit {
                let (_, node) = inner.dist.place(prefix.hash(tries.as_bytes()));
                if !self.tried.contains(node) {
                    return node;
                }
                tries.increment();
            }
        }
        // A single candidate is the only server the Java loop could ever stop at; otherwise
        // the rehash cannot reach any candidate, or the probe budget is spent.
        self.tried
            .first_absent(inner.node_count)
            .expect("untried > 0 implies an untried index")
    }
}

impl Iterator for Failover<'_> {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        if self.untried == 0 {
            return None;
        }
        let node = if self.started {
            self.next_after_dead()
        } else {
            self.started = true;
            self.inner.dist.place(self.inner.hasher.hash(self.key)).1
        };
        self.tried.insert(node);
        self.untried -= 1;
        if self.inner.owns_slot[node] {
            self.untried_reachable -= 1;
        }
        Some(node)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.untried, Some(self.untried))
    }
}

impl ExactSizeIterator for Failover<'_> {}
impl FusedIterator for Failover<'_> {}

/// python-memcached's retry sequence for one key; see [`Locator::python_failover`].
#[derive(Debug)]
pub struct PythonFailover<'a> {
    inner: &'a Inner,
    hash: i64,
    attempt: u8,
}

/// python-memcached's `Client._SERVER_RETRIES`.
const PYTHON_SERVER_RETRIES: u8 = 10;

impl Iterator for PythonFailover<'_> {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        if self.attempt >= PYTHON_SERVER_RETRIES {
            return None;
        }
        if self.attempt > 0 {
            // Rehash lazily: the previous server was dead only if we are asked again.
            let (mut a, mut b) = ([0u8; 20], [0u8; 20]);
            let previous = decimal(self.hash, &mut a);
            let attempt = decimal(i64::from(self.attempt - 1), &mut b);
            self.hash = self.inner.hasher.as_dyn().hash_concat(previous, attempt);
        }
        self.attempt += 1;
        Some(self.inner.dist.place(self.hash).1)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = usize::from(PYTHON_SERVER_RETRIES - self.attempt);
        (left, Some(left))
    }
}

impl ExactSizeIterator for PythonFailover<'_> {}
impl FusedIterator for PythonFailover<'_> {}

#[cfg(test)]
mod tests {
    use super::*;

    fn b_nodes() -> Vec<Node> {
        (11211..=11213).map(|p| Node::new("127.0.0.1", p)).collect()
    }

    #[test]
    fn rings_and_their_debug_output() {
        assert!(HashStrategy::Ketama.is_ring() && HashStrategy::Consistent.is_ring());
        assert!(!HashStrategy::Native.is_ring() && !HashStrategy::NewCompat.is_ring());
        let locator = Locator::new(LocatorConfig::new(HashStrategy::Ketama), &b_nodes()).unwrap();
        let text = format!("{locator:?}");
        assert!(
            text.starts_with("Locator") && text.contains("config"),
            "{text}"
        );
    }

    #[test]
    fn python_failover_knows_how_many_tries_are_left() {
        let locator = Locator::new(LocatorConfig::new(HashStrategy::Native), &b_nodes()).unwrap();
        let mut tries = locator.python_failover(b"user:42");
        let total = usize::from(PYTHON_SERVER_RETRIES);
        assert!(total > 1);
        assert_eq!(tries.len(), total);
        assert!(tries.next().is_some());
        assert_eq!(tries.size_hint(), (total - 1, Some(total - 1)));
        assert_eq!(tries.by_ref().count(), total - 1);
        assert_eq!(tries.len(), 0);
    }

    #[test]
    fn bad_input() {
        let config = LocatorConfig::new(HashStrategy::Native);
        assert_eq!(Locator::new(config, &[]).unwrap_err(), Error::NoNodes);
        let nodes = [Node::new("a", 1), Node::new("b", 1).with_weight(0)];
        assert_eq!(
            Locator::new(config, &nodes).unwrap_err(),
            Error::ZeroWeight { index: 1 }
        );
        let nodes = [
            Node::new("a", 1).with_weight(i32::MAX as u32),
            Node::new("b", 1),
        ];
        assert_eq!(
            Locator::new(config, &nodes).unwrap_err(),
            Error::WeightTooLarge { index: 1 }
        );
        let nodes = [Node::new("a", 1).with_weight(30_000_000), Node::new("b", 1)];
        assert!(Locator::new(config, &nodes).is_ok());
        let consistent = LocatorConfig::new(HashStrategy::Consistent);
        assert_eq!(
            Locator::new(consistent, &nodes).unwrap_err(),
            Error::WeightTooLarge { index: 0 }
        );
    }

    #[test]
    fn whalin_bucket_examples() {
        let b = Locator::new(LocatorConfig::new(HashStrategy::Native), &b_nodes()).unwrap();
        assert_eq!(
            b.place(b"polygenelubricants"),
            Placement {
                hash: -2147483648,
                slot: 2,
                node: 2
            }
        );
        let a = [
            Node::new("192.168.0.1", 44444).with_weight(5),
            Node::new("192.168.0.2", 22222).with_weight(3),
        ];
        let a = Locator::new(LocatorConfig::new(HashStrategy::OldCompat), &a).unwrap();
        assert_eq!(a.place(b"user%3A5118636").slot, 2);
        assert_eq!(a.place_hash(-7).slot, 7);
        assert_eq!(a.place_hash(i64::MIN).slot, 0);
    }

    #[test]
    fn ring_wraps_and_clamps() {
        let l = Locator::new(LocatorConfig::new(HashStrategy::Ketama), &b_nodes()).unwrap();
        let first = l.ring_points().next().unwrap();
        let last = l.ring_points().last().unwrap();
        assert_eq!(l.place_hash(-1).slot, u64::from(first.0));
        assert_eq!(l.place_hash(i64::from(last.0) + 1).slot, u64::from(first.0));
        assert_eq!(l.place_hash(1 << 40).slot, u64::from(first.0));
        assert_eq!(l.place_hash(i64::from(last.0)).node, last.1);
    }

    #[test]
    fn indexed_search_equals_binary_search() {
        let mut x = 0x9e37_79b9u32;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x
        };
        for len in [1usize, 2, 3, 4, 5, 7, 8, 9, 100, 640, 16_000] {
            let mut entries: Vec<(u32, u32)> = (0..len).map(|i| (next(), i as u32)).collect();
            // Edge points and clusters.
            entries.extend([(0, 0), (u32::MAX, 0), (1 << 31, 0), ((1 << 31) + 1, 0)]);
            let ring = Ring::new(&entries, Collision::LaterWins);
            let plain = |h: u32| match ring.points.partition_point(|&p| p < h) {
                pos if pos == ring.points.len() => 0,
                pos => pos,
            };
            let mut probes = vec![0, 1, u32::MAX, u32::MAX - 1, 1 << 31];
            for &p in &ring.points {
                probes.extend([p, p.wrapping_sub(1), p.wrapping_add(1)]);
            }
            probes.extend((0..1000).map(|_| next()));
            for h in probes {
                assert_eq!(ring.find(i64::from(h)), plain(h), "len {len} hash {h}");
            }
        }
    }

    #[test]
    fn node_set() {
        for n in [1, 64, 65, 256, 257, 1000] {
            let mut s = NodeSet::new(n);
            for i in 0..n {
                assert_eq!(s.first_absent(n), Some(i));
                assert!(!s.contains(i));
                s.insert(i);
            }
            assert_eq!(s.first_absent(n), None);
        }
    }

    #[test]
    fn evcache_collapse_failover_is_cheap_and_complete() {
        let nodes: Vec<Node> = b_nodes()
            .into_iter()
            .map(|n| n.with_hostname("localhost"))
            .collect();
        let config = LocatorConfig::new(HashStrategy::Ketama).with_node_naming(NodeNaming::Evcache);
        let l = Locator::new(config, &nodes).unwrap();
        assert_eq!(l.failover(b"k").collect::<Vec<_>>(), [2, 0, 1]);
    }
}
