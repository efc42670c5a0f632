//! Key hashing and key → server location, bit-compatible with the Java, C and Python
//! memcached clients, so that memgroup reads and writes the same servers as an existing
//! fleet of those clients.
//!
//! A [`Locator`] is built once from a [`LocatorConfig`] and the server list ([`Node`]s, in
//! the clients' configured order) and then answers, without allocating:
//!
//! * [`Locator::locate`]: the index of the server for a key;
//! * [`Locator::hash`]: the raw key hash, in the reference client's own signedness;
//! * [`Locator::failover`]: the order in which Whalin's `getSock` tries servers when some are
//!   dead, as a terminating iterator (and [`Locator::python_failover`] for python-memcached).
//!
//! Keys are raw bytes and are never validated. Key *transforms* are the caller's job: when a
//! client rewrites keys (Whalin's `sanitizeKeys`), pass the key through
//! [`Locator::wire_key`] (or [`sanitize_key`]) and use the result both for locating and on
//! the wire. Strategies are selectable by name ([`HashStrategy`] implements `FromStr` and
//! `Display`), and [`KeyHasher`] plugs in a hash of your own.
//!
//! The behaviour below was established by running the real clients; every rule is checked
//! against their output in this crate's tests.
//!
//! # Whalin / Danga `Memcached-Java-Client` (`SockIOPool` 2.0.1, 3.0.0)
//!
//! Compatible settings: `pool.setHashingAlg(...)` as named below, and the client's
//! `sanitizeKeys` (default **true** for `MemCachedClient` 2.x and `AscIIClient` 3.0, false
//! for the 3.0 `BinaryClient`) mirrored by [`LocatorConfig::sanitize_keys`]. The byte-based
//! hashes use `String.getBytes()` with the **JVM default charset**, so the JVM must run with
//! UTF-8 (`-Dfile.encoding=UTF-8`, the default since JDK 18) for non-ASCII keys; sanitised
//! keys are ASCII and do not depend on it.
//!
//! **`native`** ([`HashStrategy::Native`], `NATIVE_HASH`, Whalin's default): the key's Java
//! `String.hashCode()` (over UTF-16 code units of the key decoded as UTF-8; invalid UTF-8
//! decodes to U+FFFD as in `String::from_utf8_lossy`), sign-extended to 64 bits. Servers are
//! repeated by weight into a bucket list, and the bucket is `|hash rem buckets|`: Java's
//! truncating remainder, negated when negative (not a floored modulo).
//!
//! ```
//! use memgroup_hash::{HashStrategy, Locator, LocatorConfig, Node};
//! let nodes = [Node::new("127.0.0.1", 11211), Node::new("127.0.0.1", 11212), Node::new("127.0.0.1", 11213)];
//! let locator = Locator::new(LocatorConfig::new(HashStrategy::Native), &nodes)?;
//! // hashCode() = -2147483648; -2147483648 % 3 = -2 → bucket 2.
//! assert_eq!(locator.hash(b"polygenelubricants"), -2147483648);
//! assert_eq!(locator.locate(b"polygenelubricants"), 2);
//! # Ok::<(), memgroup_hash::Error>(())
//! ```
//!
//! **`old-compat`** ([`HashStrategy::OldCompat`], `OLD_COMPAT_HASH`): `h = h·33 + c` over
//! the UTF-16 code units in a wrapping signed 64-bit integer, then the same buckets. With a
//! bucket count divisible by 3 the Java failover loop can spin forever; ours cannot (see
//! [`Locator::failover`]).
//!
//! ```
//! use memgroup_hash::{HashStrategy, Locator, LocatorConfig, Node};
//! let nodes = [Node::new("192.168.0.1", 44444).with_weight(5), Node::new("192.168.0.2", 22222).with_weight(3)];
//! let locator = Locator::new(LocatorConfig::new(HashStrategy::OldCompat).with_sanitize_keys(true), &nodes)?;
//! let key = locator.wire_key(b"user:5118636");
//! assert_eq!(&*key, b"user%3A5118636"); // what the Java client hashes and stores
//! // -4018010527777005306 rem 8 = -2 → bucket 2 of [.1 ×5, .2 ×3]
//! assert_eq!(locator.place(&key).slot, 2);
//! assert_eq!(locator.locate(&key), 0);
//! # Ok::<(), memgroup_hash::Error>(())
//! ```
//!
//! **`new-compat`** ([`HashStrategy::NewCompat`], `NEW_COMPAT_HASH`): `(crc32(bytes) >> 16)
//! & 0x7fff` (IEEE CRC-32) over the same buckets. This hash is shared with python-memcached
//! ≥ 1.60 and libmemcached's `MEMCACHED_HASH_CRC`.
//!
//! ```
//! use memgroup_hash::{HashStrategy, Locator, LocatorConfig, Node};
//! let nodes = [Node::new("192.168.0.1", 44444).with_weight(5), Node::new("192.168.0.2", 22222).with_weight(3)];
//! let locator = Locator::new(LocatorConfig::new(HashStrategy::NewCompat), &nodes)?;
//! assert_eq!(locator.hash(b"a"), 26807); // 26807 % 8 = 7 → 192.168.0.2:22222
//! assert_eq!(locator.locate(b"a"), 1);
//! # Ok::<(), memgroup_hash::Error>(())
//! ```
//!
//! **`consistent`** ([`HashStrategy::Consistent`], `CONSISTENT_HASH`): the key hash is MD5
//! digest bytes 0..3 as a little-endian `u32`. Server i gets `floor(40·n·wᵢ / Σw)` digests,
//! computed in **double** arithmetic, of `"host:port-j"`, each giving four ring points; a
//! key goes to the first point ≥ its hash, wrapping to the first point, and on an exact
//! point collision the later server wins.
//!
//! ```
//! use memgroup_hash::{HashStrategy, Locator, LocatorConfig, Node};
//! let nodes = [Node::new("192.168.0.1", 44444).with_weight(5), Node::new("192.168.0.2", 22222).with_weight(3)];
//! let locator = Locator::new(LocatorConfig::new(HashStrategy::Consistent), &nodes)?;
//! let placed = locator.place(b"a");
//! assert_eq!((placed.hash, placed.slot, placed.node), (3111502092, 3124332096, 1));
//! assert_eq!(locator.ring_points().len(), 200 + 120);
//! # Ok::<(), memgroup_hash::Error>(())
//! ```
//!
//! # spymemcached `KetamaNodeLocator` and Netflix EVCache
//!
//! **`ketama`** ([`HashStrategy::Ketama`]) with [`NodeNaming::Spymemcached`] or
//! [`NodeNaming::Evcache`]: spymemcached 2.x with `HashAlgorithm.KETAMA_HASH` and
//! `Locator.CONSISTENT` (`KetamaConnectionFactory`), or EVCache's node locator. The key hash
//! is the same MD5 word (over the key's UTF-8 bytes; spymemcached does not encode keys). Each
//! node gets 40 digests of its node key `name-i` (four points each); when weights are given,
//! `floor(w/Σw · 160/4 · n + 1e-10)` digests in **float** arithmetic, which rounds some
//! weights differently from Whalin's double (weights 3, 5, 2, 7, 8 give 92/160/60/224/252
//! points here, 96/160/64/224/256 in Whalin). Collisions go to the later node. The naming
//! decides the node key, and EVCache's hard-coded port makes all servers on one host collide
//! (see [`NodeNaming::Evcache`]); EVCache's default `bucket.size` of 160 points is assumed.
//!
//! ```
//! use memgroup_hash::{HashStrategy, Locator, LocatorConfig, Node, NodeNaming};
//! let nodes = [Node::new("127.0.0.1", 11211), Node::new("127.0.0.1", 11212), Node::new("127.0.0.1", 11213)];
//! let spy = Locator::new(LocatorConfig::new(HashStrategy::Ketama), &nodes)?;
//! assert_eq!(spy.locate(b"a"), 1);
//! let evcache = LocatorConfig::new(HashStrategy::Ketama).with_node_naming(NodeNaming::Evcache);
//! let evcache = Locator::new(evcache, &nodes)?;
//! assert!((0..100).all(|i| evcache.locate(format!("k{i}").as_bytes()) == 2)); // same-host collapse
//! # Ok::<(), memgroup_hash::Error>(())
//! ```
//!
//! # libmemcached 1.x (libmemcached-awesome 1.1.4)
//!
//! **`ketama` + [`NodeNaming::Libmemcached`]**: `MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED = 1`
//! (MD5 key hash, `MEMCACHED_DISTRIBUTION_CONSISTENT_WEIGHTED`), servers added with
//! `memcached_server_add_with_weight` in the same order and `sort_hosts` off (the default).
//! Point names are `host-j` for port 11211 and `host:port-j` otherwise, with the host string
//! as configured; the float point count always applies, and a collision goes to the lower
//! server index.
//!
//! ```
//! use memgroup_hash::{HashStrategy, Locator, LocatorConfig, Node, NodeNaming};
//! let nodes = [Node::new("127.0.0.1", 11211), Node::new("127.0.0.1", 11212), Node::new("127.0.0.1", 11213)];
//! let config = LocatorConfig::new(HashStrategy::Ketama).with_node_naming(NodeNaming::Libmemcached);
//! assert_eq!(Locator::new(config, &nodes)?.locate(b"a"), 1);
//! # Ok::<(), memgroup_hash::Error>(())
//! ```
//!
//! **`libmemcached-modula-oaat`** ([`HashStrategy::LibmemcachedModulaOaat`]): libmemcached
//! with no behaviours set: Jenkins one-at-a-time over the key bytes read as signed `char`
//! (x86-64), and `MEMCACHED_DISTRIBUTION_MODULA`, `hash % server_count` on `u32`, **ignoring
//! weights**. **`libmemcached-modula-crc`** ([`HashStrategy::LibmemcachedModulaCrc`]):
//! `MEMCACHED_HASH_CRC` with MODULA. **`libmemcached-ketama-unweighted`**
//! ([`HashStrategy::LibmemcachedKetamaUnweighted`]): `MEMCACHED_BEHAVIOR_KETAMA = 1` without
//! the weighted flag and `MEMCACHED_HASH_MD5`: 100 points per server, each the MD5 word 0 of
//! `host[:port]-j`. It is not compatible with any other ketama ring.
//!
//! ```
//! use memgroup_hash::{HashStrategy, Locator, LocatorConfig, Node};
//! let nodes = [Node::new("127.0.0.1", 11211), Node::new("127.0.0.1", 11212), Node::new("127.0.0.1", 11213)];
//! let oaat = Locator::new(LocatorConfig::new(HashStrategy::LibmemcachedModulaOaat), &nodes)?;
//! assert_eq!((oaat.hash(b"a"), oaat.locate(b"a")), (3392050242, 0));
//! let crc = Locator::new(LocatorConfig::new(HashStrategy::LibmemcachedModulaCrc), &nodes)?;
//! assert_eq!((crc.hash(b"a"), crc.locate(b"a")), (26807, 2));
//! # Ok::<(), memgroup_hash::Error>(())
//! ```
//!
//! # python-memcached
//!
//! **`python-memcached`** ([`HashStrategy::PythonMemcached`], versions 1.60–1.62) and
//! **`python-memcached-1.59`** ([`HashStrategy::PythonMemcached159`], 1.58–1.59, whose CRC
//! hash turns 0 into 1): `memcache.Client(servers)` with `("host:port", weight)` tuples or
//! plain strings (weight 1), and the default `serverHashFunction`. Servers are repeated by
//! weight and the server is `buckets[hash % len(buckets)]`; keys are hashed as their UTF-8
//! bytes. [`Locator::python_failover`] reproduces the client's retry sequence.
//!
//! ```
//! use memgroup_hash::{HashStrategy, Locator, LocatorConfig, Node};
//! let nodes = [Node::new("192.168.0.1", 44444).with_weight(5), Node::new("192.168.0.2", 22222).with_weight(3)];
//! let py162 = Locator::new(LocatorConfig::new(HashStrategy::PythonMemcached), &nodes)?;
//! let py159 = Locator::new(LocatorConfig::new(HashStrategy::PythonMemcached159), &nodes)?;
//! assert_eq!((py162.hash(b"71"), py162.place(b"71").slot), (0, 0));
//! assert_eq!((py159.hash(b"71"), py159.place(b"71").slot), (1, 1));
//! # Ok::<(), memgroup_hash::Error>(())
//! ```

#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod error;
pub mod evcache;
mod hash;
mod locator;
mod node;
mod sanitize;
mod strategy;

pub use error::Error;
pub use hash::{
    HashFunction, KeyHasher, md5_hash, native_hash, new_compat_hash, new_compat_hash_or_one,
    old_compat_hash, one_at_a_time_hash,
};
pub use locator::{Failover, Locator, Placement, PythonFailover};
pub use node::{Node, NodeNaming};
pub use sanitize::sanitize_key;
pub use strategy::{DEFAULT_MAX_FAILOVER_PROBES, HashStrategy, LocatorConfig};
