#![allow(missing_docs)]
//! Target selection costs (`memgroup_topology`), against the bare locator lookup.
//!
//! The cluster: three EVCache-style zones of 100 servers each, `pool_size` 4, the caller in
//! the first zone, the default read fallback (one more group); every server alive.
//!
//! * `topology/locate/<strategy>`: the baseline, `Locator::locate` of one group (hash plus
//!   lookup of a 40-byte key).
//! * `topology/read-first/<strategy>`: the first read target, what a hit costs.
//! * `topology/read-all/<strategy>`: the first target and the fallback group, what a miss
//!   costs.
//! * `topology/write/<strategy>`: one target in each of the three groups.
//! * `topology/write-dead/<strategy>`: the same with the key's server dead in one group
//!   (failover off: that group reports `Skipped`).
//!
//! Target: selecting the read or write targets costs at most twice the bare lookup. Groups
//! sharing a hash function hash the key once, so a three-group write is one hash and three
//! lookups. Nothing allocates (see `crates/memgroup-topology/tests/alloc.rs`).

use std::hint::black_box;
use std::time::Instant;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use memgroup_hash::{HashStrategy, LocatorConfig};
use memgroup_topology::{
    ClusterSpec, DeadHosts, GroupId, GroupSpec, ServerAddr, ServerSpec, Settings, Topology,
};

const KEYS: usize = 1024;

/// `KEYS` distinct printable ASCII keys of 40 bytes.
fn keys() -> Vec<Vec<u8>> {
    (0..KEYS)
        .map(|i| {
            let mut key = format!("obj:{i:05}:").into_bytes();
            let mut x = (i as u32).wrapping_mul(2_654_435_761) | 1;
            while key.len() < 40 {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                key.push(b'a' + (x % 26) as u8);
            }
            key
        })
        .collect()
}

fn topology(strategy: HashStrategy) -> Topology {
    let zones = ["us-east-1c", "us-east-1d", "us-east-1e"];
    let groups = zones.iter().enumerate().map(|(z, zone)| {
        let servers =
            (0..100).map(|i| ServerSpec::new(ServerAddr::new(format!("10.{z}.0.{i}"), 11211)));
        GroupSpec::new(*zone, servers)
            .with_zone(*zone)
            .with_pool_size(4)
            .with_locator(LocatorConfig::new(strategy))
    });
    let spec =
        ClusterSpec::new(groups).with_settings(Settings::default().with_local_zone(zones[0]));
    Topology::new(spec).expect("valid cluster")
}

fn bench_selection(c: &mut Criterion) {
    let keys = keys();
    let now = Instant::now();
    let mut group = c.benchmark_group("topology");
    for (name, strategy) in [
        ("ketama", HashStrategy::Ketama),
        ("new-compat", HashStrategy::NewCompat),
    ] {
        let topology = topology(strategy);
        let alive = DeadHosts::new(&topology);
        let mut one_dead = DeadHosts::new(&topology);
        // In group 1, the server of every 3rd key is dead (most keys keep their servers).
        for key in keys.iter().step_by(3) {
            one_dead.record_failure(topology.group(GroupId(1)).server_for(key), now);
        }
        let locator = topology.group(GroupId(0)).locator().clone();

        group.bench_function(BenchmarkId::new("locate", name), |b| {
            let mut i = 0;
            b.iter(|| {
                i = (i + 1) % KEYS;
                locator.locate(black_box(&keys[i]))
            });
        });
        group.bench_function(BenchmarkId::new("read-first", name), |b| {
            let mut i = 0;
            b.iter(|| {
                i = (i + 1) % KEYS;
                topology
                    .read_targets(black_box(&keys[i]), &alive, now, i as u64)
                    .next()
            });
        });
        group.bench_function(BenchmarkId::new("read-all", name), |b| {
            let mut i = 0;
            b.iter(|| {
                i = (i + 1) % KEYS;
                topology
                    .read_targets(black_box(&keys[i]), &alive, now, i as u64)
                    .fold(0, |acc, t| acc + t.server.0 + t.slot)
            });
        });
        for (bench, dead) in [("write", &alive), ("write-dead", &one_dead)] {
            group.bench_function(BenchmarkId::new(bench, name), |b| {
                let mut i = 0;
                b.iter(|| {
                    i = (i + 1) % KEYS;
                    topology
                        .write_targets(black_box(&keys[i]), dead, now, i as u64)
                        .fold(0, |acc, t| acc + t.map_or(1, |t| t.server.0 + t.slot))
                });
            });
        }
    }
    group.finish();
}

criterion_group!(benches, bench_selection);
criterion_main!(benches);
