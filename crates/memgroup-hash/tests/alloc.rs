//! Lookups allocate nothing: a counting global allocator watches `hash`, `locate`, `place`,
//! `wire_key` (when nothing changes) and both failover iterators.

use std::hint::black_box;

use memgroup_hash::{HashStrategy, Locator, LocatorConfig, Node, NodeNaming};
use memgroup_testkit::alloc::{Counting, allocations_during};

// Counted per thread, so the test harness's other threads cannot disturb the count.
#[global_allocator]
static GLOBAL: Counting = Counting;

fn nodes(n: usize) -> Vec<Node> {
    (0..n)
        .map(|i| {
            Node::new(
                format!("10.4.{}.{}", i / 100, i % 100),
                11211 + (i % 3) as u16,
            )
            .with_weight(1 + (i % 4) as u32)
        })
        .collect()
}

#[test]
fn lookups_do_not_allocate() {
    let keys: Vec<Vec<u8>> = vec![
        b"user:5118636".to_vec(),
        b"a".to_vec(),
        Vec::new(),
        "café 😀 über:key".as_bytes().to_vec(),
        b"bad\xff\xfeutf8\xe2\x82".to_vec(),
        "界".repeat(83).into_bytes(),
        vec![b'k'; 250],
    ];
    let mut locators = Vec::new();
    for n in [1usize, 3, 10] {
        let nodes = nodes(n);
        for strategy in HashStrategy::ALL {
            for naming in NodeNaming::ALL {
                // A modest probe bound keeps the pathological old-compat stages quick in debug
                // builds; the loop body is the same whatever the bound.
                let config = LocatorConfig::new(strategy)
                    .with_node_naming(naming)
                    .with_max_failover_probes(5_000);
                locators.push(Locator::new(config, &nodes).unwrap());
            }
        }
    }
    // The largest server count whose tried-set stays inline; a cheap hash keeps the ~n·ln n
    // failover probes fast.
    let config = LocatorConfig::new(HashStrategy::NewCompat).with_max_failover_probes(5_000);
    locators.push(Locator::new(config, &nodes(256)).unwrap());
    let plain = Locator::new(
        LocatorConfig::new(HashStrategy::Native).with_sanitize_keys(true),
        &[Node::new("h", 1)],
    )
    .unwrap();

    let allocations = allocations_during(|| {
        for locator in &locators {
            for key in &keys {
                black_box(locator.hash(key));
                black_box(locator.locate(key));
                black_box(locator.place(key));
                black_box(locator.locate_hash(black_box(-12345)));
                let mut seen = 0usize;
                for node in locator.failover(key) {
                    seen += 1;
                    black_box(node);
                }
                assert_eq!(seen, locator.node_count());
                black_box(locator.python_failover(key).sum::<usize>());
                black_box(locator.wire_key(key));
            }
        }
        black_box(plain.wire_key(b"already_safe-key.1*"));
    });
    assert_eq!(allocations, 0, "lookups allocated {allocations} times");

    // The counter does see allocations, so the zero above means something.
    assert!(allocations_during(|| drop(black_box(plain.wire_key(b"needs escaping")))) > 0);
}
