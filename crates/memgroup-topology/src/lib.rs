//! Which servers serve a key: server groups, connection slots, read and write selection,
//! dead hosts. EVCache's replication model, with the Whalin client's dead-host backoff and
//! failover. Pure: no I/O, and no clock — time comes in as `now: Instant`, and
//! [`DeadHosts::next_deadline`] tells the caller when it next needs to look.
//!
//! # The model
//!
//! A cluster ([`ClusterSpec`] → [`Topology`]) has one or more **server groups**
//! ([`GroupSpec`] → [`Group`]), each a full copy of the data (EVCache: one per availability
//! zone). A group has a name, a zone, a write-only flag, weighted servers ([`ServerSpec`]),
//! its own locator ([`memgroup_hash::LocatorConfig`]: strategy, node naming, key sanitising)
//! and `pool_size` connection slots per server — more connections to the same servers,
//! never more copies. The distinct server addresses of all groups are numbered
//! ([`ServerId`]); groups by position ([`GroupId`]).
//!
//! Per operation the caller asks for [`Target`]s (group, server, slot):
//!
//! * [`Topology::read_targets`] / [`Topology::read_cursor`]: the local zone's group first
//!   (round-robin among several; over all readable groups when none is local), then
//!   fallback groups per [`ReadFallback`]; groups whose server is dead are skipped.
//! * [`Topology::write_targets`]: exactly one slot in every group, the slot rotating with
//!   the caller's counter; [`Topology::write_succeeded`] applies the [`WritePolicy`] over
//!   the read-write groups.
//! * [`Topology::targeted_write_targets`]: one slot per distinct chosen group (cache
//!   warming), with an optional destination filter applied after selection.
//!
//! [`DeadHosts`] records failures with Whalin's doubling backoff (1 s … 10 min). With
//! failover on ([`Settings::failover`]; by default only for single-group clusters) a key
//! whose server is dead goes to the next live server of the hash crate's
//! [`failover`](memgroup_hash::Locator::failover) sequence, as Whalin's `getSock` does;
//! with it off the group is skipped and writes report a typed [`Skipped`].
//!
//! A topology is immutable: a change ([`Topology::change`]) builds a new one, readers keep
//! the old one until they take the new, and [`DeadHosts::carry_over`] keeps the state of
//! the servers that stay.
//!
//! ```
//! use std::time::{Duration, Instant};
//! use memgroup_topology::{ClusterSpec, DeadHosts, Settings, Topology};
//!
//! let nodes = "us-east-1c=10.0.0.1:11211,10.0.0.2:11211;us-east-1d=10.0.1.1:11211";
//! let spec = ClusterSpec::parse_evcache(nodes)?
//!     .with_pool_size(2)
//!     .with_settings(Settings::default().with_local_zone("us-east-1c"));
//! let topology = Topology::new(spec)?;
//! let mut dead = DeadHosts::new(&topology);
//! let now = Instant::now(); // in a test: a fixed base plus simulated offsets
//! let key = topology.wire_key(topology.groups()[0].id(), b"user:42");
//!
//! // A read tries the local group, then one more.
//! let reads: Vec<_> = topology.read_targets(&key, &dead, now, 0).collect();
//! assert_eq!(reads.len(), 2);
//! assert_eq!(topology.group(reads[0].group).name(), "us-east-1c");
//!
//! // Its server fails: it is dead for a second, and the read goes to the other zone.
//! dead.record_failure(reads[0].server, now);
//! let reads: Vec<_> = topology.read_targets(&key, &dead, now, 0).collect();
//! assert_eq!(topology.group(reads[0].group).name(), "us-east-1d");
//! assert_eq!(dead.next_deadline(now), Some(now + Duration::from_secs(1)));
//!
//! // A write goes to both groups; the default policy (all-minus-one) needs one of them.
//! let writes: Vec<_> = topology.write_targets(&key, &dead, now, 0).collect();
//! assert!(writes[0].is_err() && writes[1].is_ok());
//! assert!(topology.write_succeeded([writes[1].unwrap().group]));
//! # Ok::<(), memgroup_topology::TopologyError>(())
//! ```
//!
//! # Text forms
//!
//! * **EVCache node list** ([`ClusterSpec::parse_evcache`]), as EVCache's
//!   `SimpleNodeListProvider` reads its `<APP>-NODES` property:
//!   `name=server,server;name=server`, where a server is `host:port` or
//!   `hostname/ip:port` (optionally `:weight`); each group's zone is its name.
//! * **libmemcached server list** ([`ClusterSpec::parse_server_list`],
//!   [`ClusterSpec::parse_memcached_servers`] for the `MEMCACHED_SERVERS` value):
//!   `host[:port[:weight]],…`, port 11211 by default, one group named `default`.
//! * **URL** ([`ClusterSpec::parse_url`]): `memcache://SERVERS?param=value&…`, `SERVERS`
//!   in either form above, parameters for the hashing, pool size and every setting.
//!
//! Parsed groups get [`GroupSpec::default_locator`] (ketama, spymemcached point names)
//! unless the URL says otherwise; set the locator that matches the clients sharing the
//! cluster.

#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod dead;
mod error;
mod parse;
mod select;
mod spec;
mod topology;

/// The name of the one group a plain server list makes (`host:port,…`),
/// and of the group a cluster-wide discovery endpoint fills.
pub const DEFAULT_GROUP_NAME: &str = "default";

pub use dead::DeadHosts;
pub use error::TopologyError;
pub use parse::URL_PARAMS;
pub use select::{GroupKeys, Keys, ReadCursor, ReadTargets, TargetedWrites, WriteTargets};
pub use spec::{
    ClusterSpec, DEFAULT_BACKOFF_INITIAL, DEFAULT_BACKOFF_MAX, GroupSpec, MAX_KEY_PREFIX,
    MAX_POOL_SIZE, ReadFallback, ServerAddr, ServerSpec, Settings, SpecOverrides, WritePolicy,
};
pub use topology::{Group, GroupId, ServerId, Skipped, Target, Topology};
