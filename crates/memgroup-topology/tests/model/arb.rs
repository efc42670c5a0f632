//! The random clusters, dead-host states and keys the property tests run
//! over: 1–5 groups, 1–20 servers per group drawn from a shared pool of 40
//! addresses, weights 1–10, pool sizes 1–8, mixed strategies, zones and
//! write-only flags.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use memgroup_hash::{HashStrategy, LocatorConfig, NodeNaming};
use memgroup_topology::{
    ClusterSpec, DeadHosts, GroupSpec, ReadFallback, ServerAddr, ServerId, ServerSpec, Settings,
    Topology, WritePolicy,
};
use proptest::prelude::*;

pub(crate) const HOSTS: usize = 40;
pub(crate) const ZONES: [&str; 3] = ["us-east-1c", "us-east-1d", "us-east-1e"];

pub(crate) fn host(i: usize) -> ServerAddr {
    ServerAddr::new(format!("10.0.{}.{}", i % 3, i), 11211 + (i % 2) as u16)
}

pub(crate) fn locator(choice: usize, sanitize: bool) -> LocatorConfig {
    let config = match choice {
        0 => LocatorConfig::new(HashStrategy::Ketama),
        1 => LocatorConfig::new(HashStrategy::Ketama).with_node_naming(NodeNaming::Evcache),
        2 => LocatorConfig::new(HashStrategy::NewCompat),
        3 => LocatorConfig::new(HashStrategy::Native),
        4 => LocatorConfig::new(HashStrategy::Consistent),
        _ => LocatorConfig::new(HashStrategy::LibmemcachedModulaCrc),
    };
    // A modest probe bound keeps pathological rehash stages quick in debug builds.
    config
        .with_sanitize_keys(sanitize)
        .with_max_failover_probes(20_000)
}

/// (servers as (host index, weight), zone, write-only, pool size, locator choice)
pub(crate) type GroupParts = (Vec<(usize, u32)>, Option<usize>, bool, usize, usize);

pub(crate) fn arb_group() -> impl Strategy<Value = GroupParts> {
    (
        prop::collection::vec((0..HOSTS, 1u32..=10), 1..=20),
        prop::option::of(0..ZONES.len()),
        prop::bool::weighted(0.25),
        1usize..=8,
        0usize..6,
    )
}

pub(crate) fn arb_settings() -> impl Strategy<Value = Settings> {
    (
        prop::option::of(0..ZONES.len()),
        prop::sample::select(ReadFallback::ALL.to_vec()),
        prop::sample::select(WritePolicy::ALL.to_vec()),
        prop::option::of(any::<bool>()),
    )
        .prop_map(|(zone, read_fallback, write_policy, failover)| Settings {
            local_zone: zone.map(|z| ZONES[z].to_owned()),
            read_fallback,
            write_policy,
            failover,
            ..Settings::default()
        })
}

pub(crate) fn arb_cluster() -> impl Strategy<Value = ClusterSpec> {
    (
        prop::collection::vec(arb_group(), 1..=5),
        arb_settings(),
        any::<bool>(),
    )
        .prop_map(|(groups, settings, sanitize)| {
            let count = groups.len();
            let groups = groups.into_iter().enumerate().map(
                |(g, (servers, zone, write_only, pool_size, choice))| {
                    let mut seen = HashSet::new();
                    // Each group its own hosts (those of index g modulo the
                    // number of groups): a server is in one group only.
                    let span = HOSTS - HOSTS % count;
                    let servers = servers
                        .into_iter()
                        .map(|(h, w)| (h % span - h % span % count + g, w))
                        .filter(|&(h, _)| seen.insert(h))
                        .map(|(h, w)| ServerSpec::new(host(h)).with_weight(w));
                    let mut group = GroupSpec::new(format!("g{g}"), servers)
                        .with_write_only(write_only && g > 0)
                        .with_pool_size(pool_size)
                        .with_locator(locator(choice, sanitize));
                    group.zone = zone.map(|z| ZONES[z].to_owned());
                    group
                },
            );
            ClusterSpec::new(groups).with_settings(settings)
        })
}

/// Consecutive failures per server of the pool (mostly none), and a density switch that
/// sometimes kills everything.
pub(crate) fn arb_failures() -> impl Strategy<Value = (Vec<u8>, bool)> {
    (
        prop::collection::vec(
            prop_oneof![4 => Just(0u8), 2 => Just(1), 1 => Just(2)],
            HOSTS,
        ),
        prop::bool::weighted(0.1),
    )
}

/// Dead-host state at simulated time: failures are recorded at t = 0 s and, for a second
/// consecutive failure, again at t = 1 s (when the first backoff ends).
pub(crate) fn dead_hosts(
    topology: &Topology,
    base: Instant,
    failures: &(Vec<u8>, bool),
) -> DeadHosts {
    let mut dead = DeadHosts::new(topology);
    for (i, addr) in topology.servers().iter().enumerate() {
        let pool_index = (0..HOSTS).find(|&h| host(h) == *addr).unwrap();
        let n = if failures.1 {
            1
        } else {
            failures.0[pool_index]
        };
        for k in 0..n {
            dead.record_failure(ServerId(i), base + Duration::from_secs(u64::from(k)));
        }
    }
    dead
}

pub(crate) fn arb_key() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(b'!'..=b'~', 1..40),
        prop::collection::vec(any::<u8>(), 0..24),
    ]
}
