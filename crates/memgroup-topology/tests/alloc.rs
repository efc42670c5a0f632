//! Selection allocates nothing: a counting global allocator watches `read_targets`,
//! `read_cursor`, `write_targets`, `targeted_write_targets`, `write_succeeded` and the
//! dead-host queries, with live and dead servers, failover on and off.

use std::hint::black_box;
use std::time::{Duration, Instant};

use memgroup_hash::{HashStrategy, LocatorConfig};
use memgroup_testkit::alloc::{Counting, allocations_during};
use memgroup_topology::{
    ClusterSpec, DeadHosts, GroupId, ReadFallback, ServerAddr, ServerId, Settings, Topology,
};

// Counted per thread, so the test harness's other threads cannot disturb the count.
#[global_allocator]
static GLOBAL: Counting = Counting;

fn topologies() -> Vec<Topology> {
    let evcache = "us-east-1c=10.0.0.1:11211,10.0.0.2:11211,10.0.0.3:11211;\
                   us-east-1d=10.0.1.1:11211,10.0.1.2:11211;\
                   us-east-1e=10.0.2.1:11211,10.0.2.2:11211,10.0.2.3:11211";
    let mut out = Vec::new();
    for fallback in ReadFallback::ALL {
        for failover in [false, true] {
            for strategy in [
                HashStrategy::Ketama,
                HashStrategy::NewCompat,
                HashStrategy::Native,
            ] {
                let settings = Settings::default()
                    .with_local_zone("us-east-1d")
                    .with_read_fallback(fallback)
                    .with_failover(failover);
                let spec = ClusterSpec::parse_evcache(evcache)
                    .unwrap()
                    .with_pool_size(4)
                    .with_locator(LocatorConfig::new(strategy))
                    .with_settings(settings);
                out.push(Topology::new(spec).unwrap());
            }
        }
    }
    // One group, failover on by default, mixed strategies across groups elsewhere.
    out.push(Topology::new(ClusterSpec::parse_server_list("a:1,b:2:3,c:3").unwrap()).unwrap());
    out
}

#[test]
fn selection_does_not_allocate() {
    let keys: Vec<Vec<u8>> = vec![
        b"user:5118636".to_vec(),
        b"a".to_vec(),
        vec![b'k'; 250],
        b"obj:00042:pqrstuvwxyzabcdefghijklmnopqrstuvw".to_vec(),
    ];
    let base = Instant::now();
    let cases: Vec<(Topology, Vec<DeadHosts>)> = topologies()
        .into_iter()
        .map(|t| {
            // Nobody dead; the first server of every group dead; everything dead.
            let alive = DeadHosts::new(&t);
            let mut some = DeadHosts::new(&t);
            for g in t.groups() {
                some.record_failure(g.servers()[0], base);
            }
            let mut all = DeadHosts::new(&t);
            for s in 0..t.servers().len() {
                all.record_failure(ServerId(s), base);
            }
            (t, vec![alive, some, all])
        })
        .collect();
    let targets = [GroupId(2), GroupId(0), GroupId(2), GroupId(9)];
    let keep = |a: &ServerAddr| a.port == 11211;
    let now = base + Duration::from_millis(10);

    let allocations = allocations_during(|| {
        for (topology, states) in &cases {
            for dead in states {
                for key in &keys {
                    for rotation in 0..8 {
                        let mut reads = topology.read_targets(key, dead, now, rotation);
                        for t in reads.by_ref() {
                            black_box(t);
                        }
                        black_box(reads.skipped());
                        let mut cursor = topology.read_cursor(key, rotation);
                        while let Some(t) = cursor.next(dead, now) {
                            black_box(t);
                        }
                        for w in topology.write_targets(key, dead, now, rotation) {
                            black_box(w.ok());
                        }
                        for filter in [None, Some(&keep as &dyn Fn(&ServerAddr) -> bool)] {
                            let writes = topology
                                .targeted_write_targets(key, &targets, dead, now, rotation, filter);
                            black_box(writes.count());
                        }
                        black_box(topology.write_succeeded([GroupId(0), GroupId(1)]));
                        black_box(topology.group(GroupId(0)).server_for(key));
                    }
                }
                black_box(dead.is_dead(ServerId(0), now));
                black_box(dead.next_deadline(now));
                black_box(dead.dead_servers(now).count());
            }
        }
    });
    assert_eq!(allocations, 0, "selection allocated {allocations} times");

    // The counter does see allocations, so the zero above means something.
    assert!(allocations_during(|| drop(black_box(DeadHosts::new(&cases[0].0)))) > 0);
}

#[test]
fn recording_failures_does_not_allocate() {
    let topology = &topologies()[0];
    let mut dead = DeadHosts::new(topology);
    let base = Instant::now();
    let allocations = allocations_during(|| {
        for i in 0..100u64 {
            let s = ServerId((i % 8) as usize);
            black_box(dead.record_failure(s, base + Duration::from_secs(i)));
            if i % 7 == 0 {
                dead.record_success(s);
            }
        }
    });
    assert_eq!(allocations, 0);
}
