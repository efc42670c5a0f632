#![allow(missing_docs)] // criterion_group! generates undocumented items

//! The async client against real memcached processes spawned here:
//! sequential latency on one connection, throughput with 32 and 256 requests
//! in flight, and `get_multi` of 100 keys over 3 servers.
//! Run with `cargo xtask bench` (or `cargo bench --bench client`).

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use memgroup::client::Client;
use memgroup_testkit::Memcached;

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let servers: Vec<Memcached> = (0..3)
        .map(|_| Memcached::spawn_with(&["-t", "2"]))
        .collect();
    let addrs: Vec<String> = servers.iter().map(Memcached::addr_string).collect();
    let one = Client::builder()
        .servers(&addrs[0])
        .pool_size(1)
        .build()
        .unwrap();
    let list: Vec<&str> = addrs.iter().map(String::as_str).collect();
    let three = Client::builder()
        .servers(&list.join(","))
        .pool_size(1)
        .build()
        .unwrap();
    let value = vec![b'v'; 100];
    let keys: Vec<String> = (0..1000).map(|i| format!("bench:key:{i:010}")).collect();
    rt.block_on(async {
        for k in &keys {
            one.set(k, &value, 0).await.unwrap();
            three.set(k, &value, 0).await.unwrap();
        }
    });

    let mut g = c.benchmark_group("client");
    g.throughput(Throughput::Elements(1));
    g.bench_function("get, sequential, one connection", |b| {
        let mut i = 0;
        b.to_async(&rt).iter(|| {
            i = (i + 1) % keys.len();
            let (one, key) = (&one, &keys[i]);
            async move { one.get(key).await.unwrap().unwrap() }
        });
    });
    g.bench_function("set, sequential, one connection", |b| {
        let mut i = 0;
        b.to_async(&rt).iter(|| {
            i = (i + 1) % keys.len();
            let (one, key, value) = (&one, &keys[i], &value);
            async move { one.set(key, value, 0).await.unwrap() }
        });
    });
    for in_flight in [32usize, 256] {
        g.throughput(Throughput::Elements(in_flight as u64 * 100));
        g.bench_function(format!("get, {in_flight} in flight, one connection"), |b| {
            b.to_async(&rt).iter(|| {
                let one = one.clone();
                let keys = keys.clone();
                async move {
                    // `in_flight` tasks, 100 gets each, sharing one pipelined connection.
                    let mut tasks = tokio::task::JoinSet::new();
                    for t in 0..in_flight {
                        let (one, keys) = (one.clone(), keys.clone());
                        tasks.spawn(async move {
                            for j in 0..100 {
                                one.get(&keys[(t * 7 + j) % keys.len()]).await.unwrap();
                            }
                        });
                    }
                    while tasks.join_next().await.is_some() {}
                }
            });
        });
    }
    g.throughput(Throughput::Elements(100));
    let batch: Vec<&str> = keys[..100].iter().map(String::as_str).collect();
    g.bench_function("get_multi 100 keys over 3 servers", |b| {
        b.to_async(&rt).iter(|| {
            let (three, batch) = (&three, &batch);
            async move { assert_eq!(three.get_multi(batch).await.unwrap().hit_count(), 100) }
        });
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
