//! Key hashing and server lookup costs (`memgroup::hash`).
//!
//! * `hash/<function>/<len>`: one key hash, for 10-, 40- and 250-byte keys.
//! * `locate/<strategy>/<servers>`: hash plus lookup of a 40-byte key, for modulo buckets,
//!   Whalin's ring and a ketama ring with 10, 100 and 1,000 servers.
//! * `lookup/<strategy>/<servers>`: the lookup alone, from a precomputed hash.
//!
//! Each iteration takes the next of 1,024 distinct keys, so ring searches are not served by
//! one hot cache line and branch predictors cannot learn a single path.
//!
//! Targets: new-compat ≤ 20 ns for a 40-byte key; MD5 + ring lookup ≤ 150 ns at 100 servers.

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, criterion_main};
use memgroup::hash::{HashFunction, HashStrategy, Locator, LocatorConfig, Node};

const KEYS: usize = 1024;

/// `KEYS` distinct printable ASCII keys of exactly `len` bytes.
fn keys(len: usize) -> Vec<Vec<u8>> {
    (0..KEYS)
        .map(|i| {
            let mut key = format!("obj:{i:05}:").into_bytes();
            // Deterministic filler that varies per key.
            let mut x = (i as u32).wrapping_mul(2_654_435_761) | 1;
            while key.len() < len {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                key.push(b'a' + (x % 26) as u8);
            }
            key.truncate(len);
            key
        })
        .collect()
}

fn servers(n: usize) -> Vec<Node> {
    (0..n)
        .map(|i| {
            Node::new(
                format!("10.{}.{}.{}", i / 65_536, i / 256 % 256, i % 256),
                11211,
            )
        })
        .collect()
}

fn bench_hash(c: &mut Criterion) {
    let mut group = c.benchmark_group("hash");
    let functions = [
        ("native", HashFunction::Native),
        ("old-compat", HashFunction::OldCompat),
        ("new-compat", HashFunction::NewCompat),
        ("md5", HashFunction::Md5),
        ("one-at-a-time", HashFunction::OneAtATime),
    ];
    for len in [10, 40, 250] {
        let keys = keys(len);
        for (name, function) in functions {
            group.bench_with_input(BenchmarkId::new(name, len), &keys, |b, keys| {
                let mut i = 0;
                b.iter(|| {
                    i = (i + 1) % KEYS;
                    function.hash(black_box(&keys[i]))
                });
            });
        }
    }
    group.finish();
}

fn bench_lookup(c: &mut Criterion) {
    let keys = keys(40);
    let strategies = [
        ("modulo-new-compat", HashStrategy::NewCompat),
        ("whalin-ring", HashStrategy::Consistent),
        ("ketama", HashStrategy::Ketama),
    ];
    for (group_name, hash_included) in [("locate", true), ("lookup", false)] {
        let mut group = c.benchmark_group(group_name);
        for n in [10, 100, 1000] {
            let nodes = servers(n);
            for (name, strategy) in strategies {
                let locator =
                    Locator::new(LocatorConfig::new(strategy), &nodes).expect("valid servers");
                let hashes: Vec<i64> = keys.iter().map(|k| locator.hash(k)).collect();
                group.bench_function(BenchmarkId::new(name, n), |b| {
                    let mut i = 0;
                    if hash_included {
                        b.iter(|| {
                            i = (i + 1) % KEYS;
                            locator.locate(black_box(&keys[i]))
                        });
                    } else {
                        b.iter(|| {
                            i = (i + 1) % KEYS;
                            locator.locate_hash(black_box(hashes[i]))
                        });
                    }
                });
            }
        }
        group.finish();
    }
}

/// The benchmark groups (the macro's generated function carries no docs of its own).
mod groups {
    #![allow(missing_docs, unreachable_pub)]
    use super::{bench_hash, bench_lookup};
    criterion::criterion_group!(benches, bench_hash, bench_lookup);
}

criterion_main!(groups::benches);
