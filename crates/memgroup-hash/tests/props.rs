//! Properties beyond the reference vectors: ring stability under removal, weight shares, and
//! the failover iterator's guarantees (checked against a naive model of Whalin's loop).

use std::collections::HashSet;

use memgroup_hash::{
    HashFunction, HashStrategy, Locator, LocatorConfig, Node, NodeNaming, md5_hash,
};
use proptest::prelude::*;

/// Ring flavours whose point counts do not depend on the number of servers when weights are
/// equal, so that removing a server leaves the others' points untouched.
fn ring_configs() -> Vec<LocatorConfig> {
    let ketama = LocatorConfig::new(HashStrategy::Ketama);
    vec![
        LocatorConfig::new(HashStrategy::Consistent),
        ketama,
        ketama.with_node_naming(NodeNaming::Libmemcached),
        ketama.with_node_naming(NodeNaming::Evcache),
        LocatorConfig::new(HashStrategy::LibmemcachedKetamaUnweighted),
    ]
}

fn servers(n: usize) -> Vec<Node> {
    (0..n)
        .map(|i| Node::new(format!("10.1.{}.{}", i / 200, i % 200 + 1), 11211))
        .collect()
}

fn arbitrary_key() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        // Raw bytes, often invalid UTF-8.
        prop::collection::vec(any::<u8>(), 0..48),
        // Unicode text, including characters outside the BMP (surrogate pairs in UTF-16).
        prop::collection::vec(any::<char>(), 0..16)
            .prop_map(|cs| cs.into_iter().collect::<String>().into_bytes()),
        // Typical keys.
        (0u32..1_000_000).prop_map(|n| format!("user:{n}").into_bytes()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Removing one of N servers moves exactly the keys that lived on it.
    #[test]
    fn removing_a_server_moves_only_its_keys(
        n in 2usize..=20,
        removed_seed in any::<usize>(),
        config_index in 0usize..5,
        keys in prop::collection::vec(arbitrary_key(), 1..64),
    ) {
        let removed = removed_seed % n;
        let config = ring_configs()[config_index];
        let all = servers(n);
        let rest: Vec<Node> = all.iter().enumerate().filter(|&(i, _)| i != removed).map(|(_, s)| s.clone()).collect();
        let before = Locator::new(config, &all).unwrap();
        let after = Locator::new(config, &rest).unwrap();
        for key in &keys {
            let old = before.locate(key);
            // Index in the shorter list, mapped back to the full list.
            let new = after.locate(key);
            let new = if new >= removed { new + 1 } else { new };
            if old != removed {
                prop_assert_eq!(new, old, "{:?} moved off a surviving server", config.strategy);
            } else {
                prop_assert_ne!(new, removed);
            }
        }
    }

    /// The failover iterator starts at the primary, never repeats, terminates and yields
    /// every server, and equals a naive transcription of Whalin's `getSock` loop.
    #[test]
    fn failover_is_a_bounded_whalin_permutation(
        strategy_index in 0usize..HashStrategy::ALL.len(),
        naming_index in 0usize..3,
        weights in prop::collection::vec(prop::option::of(1u32..6), 1..9),
        key in arbitrary_key(),
        max_probes in 0u32..3_000,
    ) {
        let strategy = HashStrategy::ALL[strategy_index];
        let config = LocatorConfig::new(strategy)
            .with_node_naming(NodeNaming::ALL[naming_index])
            .with_max_failover_probes(max_probes);
        // Three servers per host, so EVCache naming collides and leaves servers pointless.
        let nodes: Vec<Node> = weights
            .iter()
            .enumerate()
            .map(|(i, w)| Node { weight: *w, ..Node::new(format!("10.2.0.{}", i / 3), 11211 + i as u16) })
            .collect();
        let locator = Locator::new(config, &nodes).unwrap();
        let failover = locator.failover(&key);
        prop_assert_eq!(failover.len(), nodes.len());
        let ours: Vec<usize> = failover.collect();
        prop_assert_eq!(ours[0], locator.locate(&key));
        let distinct: HashSet<usize> = ours.iter().copied().collect();
        prop_assert_eq!(distinct.len(), nodes.len());
        prop_assert!(ours.iter().all(|&i| i < nodes.len()));
        prop_assert_eq!(ours, naive_failover(&locator, &key, max_probes));
    }

    /// python-memcached's retries: 10 attempts, first the primary, each a valid index.
    #[test]
    fn python_failover_shape(weights in prop::collection::vec(1u32..4, 1..6), key in arbitrary_key()) {
        let nodes: Vec<Node> = weights.iter().enumerate().map(|(i, &w)| Node::new("h", i as u16).with_weight(w)).collect();
        let locator = Locator::new(LocatorConfig::new(HashStrategy::PythonMemcached), &nodes).unwrap();
        let tries: Vec<usize> = locator.python_failover(&key).collect();
        prop_assert_eq!(tries.len(), 10);
        prop_assert_eq!(tries[0], locator.locate(&key));
        prop_assert!(tries.iter().all(|&i| i < nodes.len()));
        // Attempt k+1 hashes str(hash_k) + str(k) with the same function.
        let mut hash = locator.hash(&key);
        for (k, &node) in tries.iter().enumerate() {
            prop_assert_eq!(node, locator.locate_hash(hash));
            hash = locator.hash(format!("{hash}{k}").as_bytes());
        }
    }
}

/// Whalin's loop written the obvious way (string concatenation, full rehash per probe), with
/// the documented bound and fallback.
fn naive_failover(locator: &Locator, key: &[u8], max_probes: u32) -> Vec<usize> {
    let n = locator.node_count();
    let mut tried = vec![false; n];
    let mut order = vec![locator.locate(key)];
    tried[order[0]] = true;
    while order.len() < n {
        let mut next = None;
        if n - order.len() > 1 {
            for probe in 0..max_probes {
                let candidate = locator.locate(&[probe.to_string().as_bytes(), key].concat());
                if !tried[candidate] {
                    next = Some(candidate);
                    break;
                }
            }
        }
        let next = next.unwrap_or_else(|| tried.iter().position(|&t| !t).unwrap());
        tried[next] = true;
        order.push(next);
    }
    order
}

/// 100,000 keys spread over weighted servers in proportion to the weights (within 3
/// percentage points), for every strategy that honours weights; libmemcached MODULA and the
/// unweighted libmemcached ring ignore them and spread evenly (the latter only roughly: 100
/// single-word points per server leave its arcs uneven, hence 6 points of tolerance).
#[test]
fn key_shares_follow_weights() {
    let weights = [1u32, 2, 3, 4];
    let total: u32 = weights.iter().sum();
    let nodes: Vec<Node> = weights
        .iter()
        .enumerate()
        .map(|(i, &w)| Node::new(format!("10.3.0.{}", i + 1), 11211).with_weight(w))
        .collect();
    let keys: Vec<Vec<u8>> = (0..100_000)
        .map(|i| format!("object:{i}:v2").into_bytes())
        .collect();
    // One hash per key and function; the locators share it through `locate_hash`.
    let hashes = |f: HashFunction| -> Vec<i64> { keys.iter().map(|k| f.hash(k)).collect() };
    let md5: Vec<i64> = keys.iter().map(|k| i64::from(md5_hash(k))).collect();
    let ketama = LocatorConfig::new(HashStrategy::Ketama);
    let cases: Vec<(String, LocatorConfig, &[i64], bool, f64)> = {
        let native = hashes(HashFunction::Native);
        let old = hashes(HashFunction::OldCompat);
        let crc = hashes(HashFunction::NewCompat);
        let oaat = hashes(HashFunction::OneAtATime);
        let leak = |v: Vec<i64>| -> &'static [i64] { Vec::leak(v) };
        let (native, old, crc, oaat, md5) =
            (leak(native), leak(old), leak(crc), leak(oaat), leak(md5));
        vec![
            (
                "native".into(),
                LocatorConfig::new(HashStrategy::Native),
                native,
                true,
                0.03,
            ),
            (
                "old-compat".into(),
                LocatorConfig::new(HashStrategy::OldCompat),
                old,
                true,
                0.03,
            ),
            (
                "new-compat".into(),
                LocatorConfig::new(HashStrategy::NewCompat),
                crc,
                true,
                0.03,
            ),
            (
                "python".into(),
                LocatorConfig::new(HashStrategy::PythonMemcached),
                crc,
                true,
                0.03,
            ),
            (
                "consistent".into(),
                LocatorConfig::new(HashStrategy::Consistent),
                md5,
                true,
                0.03,
            ),
            ("ketama/spy".into(), ketama, md5, true, 0.03),
            (
                "ketama/libmemcached".into(),
                ketama.with_node_naming(NodeNaming::Libmemcached),
                md5,
                true,
                0.03,
            ),
            (
                "libmemcached-oaat".into(),
                LocatorConfig::new(HashStrategy::LibmemcachedModulaOaat),
                oaat,
                false,
                0.03,
            ),
            (
                "libmemcached-ketama-unweighted".into(),
                LocatorConfig::new(HashStrategy::LibmemcachedKetamaUnweighted),
                md5,
                false,
                0.06,
            ),
        ]
    };
    for (name, config, hashes, weighted, tolerance) in cases {
        let locator = Locator::new(config, &nodes).unwrap();
        let mut counts = [0usize; 4];
        for &h in hashes {
            counts[locator.locate_hash(h)] += 1;
        }
        for (i, &count) in counts.iter().enumerate() {
            let share = count as f64 / keys.len() as f64;
            let want = if weighted {
                f64::from(weights[i]) / f64::from(total)
            } else {
                0.25
            };
            assert!(
                (share - want).abs() < tolerance,
                "{name}: server {i} got {share:.4}, want {want:.4} ({counts:?})"
            );
        }
    }
}

/// Removing one of ten servers moves about a tenth of the keys (exactly those it held).
#[test]
fn removal_moves_about_one_nth() {
    let all = servers(10);
    let rest: Vec<Node> = all
        .iter()
        .filter(|s| s.host != "10.1.0.4")
        .cloned()
        .collect();
    let keys: Vec<Vec<u8>> = (0..20_000)
        .map(|i| format!("session:{i:08x}").into_bytes())
        .collect();
    for config in ring_configs() {
        let (before, after) = (
            Locator::new(config, &all).unwrap(),
            Locator::new(config, &rest).unwrap(),
        );
        let moved = keys
            .iter()
            .filter(|k| {
                let (old, new) = (before.locate(k), after.locate(k));
                all[old].host != rest[new].host
            })
            .count();
        let fraction = moved as f64 / keys.len() as f64;
        assert!(
            (0.05..0.15).contains(&fraction),
            "{:?}: moved {fraction}",
            config.strategy
        );
    }
}

/// More than 256 servers: the iterator keeps its tried-set on the heap; same guarantees.
#[test]
fn failover_beyond_256_servers() {
    let nodes = servers(300);
    let config = LocatorConfig::new(HashStrategy::NewCompat).with_max_failover_probes(2_000);
    let locator = Locator::new(config, &nodes).unwrap();
    for key in [&b"user:1"[..], b"session:abc", "café".as_bytes()] {
        let ours: Vec<usize> = locator.failover(key).collect();
        assert_eq!(ours, naive_failover(&locator, key, 2_000));
        assert_eq!(ours.iter().copied().collect::<HashSet<_>>().len(), 300);
    }
}
