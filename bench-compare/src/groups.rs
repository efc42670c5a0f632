//! memgroup's own rows, with no peer to compare: what replication across
//! two groups costs a conditional write (the arbiter decides, then the other
//! group's copy is deleted: one round trip more than a `set`), what the
//! near cache saves a hot `get`, and the thundering herd with and without
//! `get_or_fill`.

use parking_lot::Mutex;
use std::sync::Arc;
use std::time::{Duration, Instant};

use memgroup_client::{Client, NearCache};
use tokio::runtime::Runtime;

use crate::{Lat, SEQ_OPS, SEQ_WARMUP, VALUE, cpu_time};

/// A client of two groups, `sg1` (its zone and the arbiter) and `sg2`.
fn two_groups(rt: &Runtime, a: &str, b: &str) -> Client {
    in_zone(rt, a, b, "sg1", true)
}

/// A client of two groups, `sg1` (the arbiter) and `sg2`, in `zone`, with
/// the convergence check on or off.
fn in_zone(rt: &Runtime, a: &str, b: &str, zone: &str, converge: bool) -> Client {
    let _guard = rt.enter();
    Client::builder()
        .evcache_groups(&format!("sg1={a};sg2={b}"))
        .zone(zone)
        .converge(converge)
        .build()
        .expect("client")
}

/// `COMPARE_CONVERGE=1`: what the convergence check costs a `set` from the
/// zone that is not the arbiter's: sequential sets with it on and off,
/// alternated over `rounds`; latency, client CPU per set (the check's
/// background requests included: the process's CPU) and requests per set
/// on the servers' side, as the client counted them.
pub fn converge_cost(rounds: usize) {
    let rt = crate::runtime();
    let (a, b) = (crate::spawn_server(), crate::spawn_server());
    let (a, b) = (a.addr_string(), b.addr_string());
    let (ops, warmup) = (SEQ_OPS / 2, SEQ_WARMUP / 2);
    let mut rows: Vec<(&str, Vec<Lat>, Vec<f64>)> = vec![
        ("set from sg2, converge on", Vec::new(), Vec::new()),
        ("set from sg2, converge off", Vec::new(), Vec::new()),
    ];
    for round in 0..rounds {
        for k in 0..2 {
            let which = (k + round) % 2;
            let client = in_zone(&rt, &a, &b, "sg2", which == 0);
            let c = client.clone();
            let lat = time(&rt, warmup, ops, move |i| {
                let c = c.clone();
                async move {
                    c.set(format!("g:conv:{}", i % 1000), &VALUE[..], 0)
                        .await
                        .unwrap();
                }
            });
            rt.block_on(client.close(Duration::from_secs(10)))
                .expect("close");
            let requests: u64 = client
                .health()
                .servers
                .iter()
                .map(|s| s.counters.requests)
                .sum();
            rows[which].1.push(lat);
            rows[which].2.push(requests as f64 / (ops + warmup) as f64);
        }
    }
    println!(
        "| set, two groups, zone sg2 (the arbiter is sg1) | mean / p50 / p99 µs | client CPU µs/set | requests/set |"
    );
    println!("|---|---|---|---|");
    for (name, lats, requests) in &rows {
        let med = |mut v: Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        let mean = med(lats.iter().map(|l| l.mean).collect());
        let p50 = med(lats.iter().map(|l| l.p50).collect());
        let p99 = med(lats.iter().map(|l| l.p99).collect());
        let cpu = med(lats.iter().map(|l| l.cpu_us).collect());
        let req = med(requests.clone());
        println!("| {name} | {mean:.1} / {p50:.1} / {p99:.1} | {cpu:.1} | {req:.2} |");
    }
}

/// Times `ops` sequential calls of `op(i)` after `warmup` untimed ones.
fn time<F, Fut>(rt: &Runtime, warmup: usize, ops: usize, op: F) -> Lat
where
    F: Fn(usize) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    rt.block_on(rt.spawn(async move {
        for i in 0..warmup {
            op(i).await;
        }
        let mut ns = Vec::with_capacity(ops);
        let cpu0 = cpu_time();
        for i in warmup..warmup + ops {
            let start = Instant::now();
            op(i).await;
            ns.push(start.elapsed().as_nanos() as u64);
        }
        Lat::of(ns, cpu_time() - cpu0)
    }))
    .expect("timed task panicked")
}

/// The two-group rows: sequential latency of each write kind and of a
/// near-cache hit.
fn writes(rt: &Runtime, a: &str, b: &str) -> Vec<(&'static str, &'static str, Lat)> {
    let client = two_groups(rt, a, b);
    let (ops, warmup) = (SEQ_OPS / 4, SEQ_WARMUP / 4);
    let mut rows = Vec::new();
    let c = client.clone();
    rows.push((
        "set",
        "1: both groups at once",
        time(rt, warmup, ops, move |i| {
            let c = c.clone();
            async move {
                c.set(format!("g:set:{i}"), &VALUE[..], 0).await.unwrap();
            }
        }),
    ));
    let c = client.clone();
    rows.push((
        "add (a new key)",
        "2: the arbiter, then sg2's delete",
        time(rt, warmup, ops, move |i| {
            let c = c.clone();
            async move {
                assert!(
                    c.add(format!("g:add:{i}"), &VALUE[..], 0)
                        .await
                        .unwrap()
                        .applied()
                );
            }
        }),
    ));
    let c = client.clone();
    rows.push((
        "incr",
        "2: the arbiter, then sg2's delete",
        time(rt, warmup, ops, move |_| {
            let c = c.clone();
            async move {
                if c.incr("g:counter", 1).await.unwrap().is_none() {
                    c.add("g:counter", "0", 0).await.unwrap();
                }
            }
        }),
    ));
    let c = client.clone();
    rows.push((
        "append",
        "2: the arbiter, then sg2's delete",
        time(rt, warmup, ops, move |_| {
            let c = c.clone();
            async move {
                if !c.append("g:log", "x").await.unwrap().applied() {
                    c.set("g:log", "x", 0).await.unwrap();
                }
            }
        }),
    ));
    let c = client.clone();
    rows.push((
        "gets + cas",
        "1 + 2: gets at the arbiter; cas, then sg2's delete",
        time(rt, warmup, ops, move |_| {
            let c = c.clone();
            async move {
                let cas = match c.gets("g:cas").await.unwrap() {
                    Some(item) => item.cas.unwrap(),
                    None => {
                        c.set("g:cas", "v", 0).await.unwrap();
                        c.gets("g:cas").await.unwrap().unwrap().cas.unwrap()
                    }
                };
                c.cas("g:cas", &VALUE[..], cas, 0).await.unwrap();
            }
        }),
    ));
    let c = client.clone();
    rows.push((
        "get (hit)",
        "1",
        time(rt, warmup, ops, move |_| {
            let c = c.clone();
            async move {
                assert!(c.get("g:set:0").await.unwrap().is_some());
            }
        }),
    ));
    let near = {
        let _guard = rt.enter();
        Client::builder()
            .evcache_groups(&format!("sg1={a};sg2={b}"))
            .zone("sg1")
            .near_cache(NearCache::new(1_000, Duration::from_secs(3600)))
            .build()
            .expect("client")
    };
    rows.push((
        "get (near-cache hit)",
        "0",
        time(rt, warmup, ops, move |_| {
            let c = near.clone();
            async move {
                assert!(c.get("g:set:1").await.unwrap().is_some());
            }
        }),
    ));
    rows
}

/// The herd: `callers` tasks on `keys` keys whose TTL is `ttl`, a fill of
/// `fill`, for `secs`: fills per expiry and p99, through `get_or_fill` or
/// cache-aside.
fn herd(rt: &Runtime, a: &str, b: &str, lease: bool, secs: Duration) -> (f64, Duration, u64) {
    const CALLERS: usize = 200;
    const KEYS: u64 = 5;
    const TTL: u32 = 1;
    const FILL: Duration = Duration::from_millis(20);
    let client = two_groups(rt, a, b);
    let fills: Arc<Mutex<Vec<(u64, Instant)>>> = Arc::default();
    let prefix = if lease { "herd:lease:" } else { "herd:aside:" };
    let started = Instant::now();
    let tasks: Vec<_> = (0..CALLERS)
        .map(|w| {
            let (c, fills) = (client.clone(), fills.clone());
            rt.spawn(async move {
                let mut lat = Vec::new();
                let mut n = w as u64;
                while started.elapsed() < secs {
                    n = n.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                    let k = (n >> 33) % KEYS;
                    let key = format!("{prefix}{k}");
                    let fill = || async {
                        fills.lock().push((k, Instant::now()));
                        tokio::time::sleep(FILL).await;
                        Ok::<_, std::io::Error>(&VALUE[..])
                    };
                    let t = Instant::now();
                    if lease {
                        c.get_or_fill(&key, TTL, fill).await.unwrap();
                    } else if c.get(&key).await.unwrap().is_none() {
                        let v = fill().await.unwrap();
                        c.set(&key, v, TTL).await.unwrap();
                    }
                    lat.push(t.elapsed());
                }
                lat
            })
        })
        .collect();
    let mut lat: Vec<Duration> = tasks
        .into_iter()
        .flat_map(|t| rt.block_on(t).expect("herd task"))
        .collect();
    lat.sort();
    let p99 = lat[(lat.len() * 99 / 100).min(lat.len() - 1)];
    // The fills of one key that began within half a TTL of the first of
    // them answered one expiry (a herd starts within a fill's time).
    let mut starts = fills.lock().clone();
    starts.sort();
    let mut expiries = 0;
    let mut current: Option<(u64, Instant)> = None;
    for &(k, at) in &starts {
        let same = current.is_some_and(|(ck, first)| {
            ck == k && at.duration_since(first) < Duration::from_secs(u64::from(TTL)) / 2
        });
        if !same {
            expiries += 1;
            current = Some((k, at));
        }
    }
    (
        starts.len() as f64 / f64::from(expiries.max(1)),
        p99,
        lat.len() as u64,
    )
}

/// Measures the rows; returns them as two markdown tables.
pub fn report(rt: &Runtime, a: &str, b: &str, secs: Duration) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    eprintln!("memgroup across two groups …");
    let rows = writes(rt, a, b);
    let _ = writeln!(
        out,
        "memgroup across two groups (one caller, sequential; µs mean / p50 / p99, client CPU µs/op):\n"
    );
    let _ = writeln!(out, "| operation | round trips | latency | CPU µs/op |");
    let _ = writeln!(out, "|---|---|---|---|");
    for (op, trips, lat) in &rows {
        let _ = writeln!(out, "| {op} | {trips} | {lat} | {:.1} |", lat.cpu_us);
    }
    eprintln!("herd …");
    let secs = secs.max(Duration::from_secs(3));
    let _ = writeln!(
        out,
        "\nThe thundering herd: 200 callers on 5 keys with a 1 s TTL and a 20 ms fill, {} s:\n",
        secs.as_secs()
    );
    let _ = writeln!(out, "| reads | fills per expiry | p99 | calls |");
    let _ = writeln!(out, "|---|---|---|---|");
    for (name, lease) in [("get_or_fill", true), ("get, then set on a miss", false)] {
        let (per_expiry, p99, calls) = herd(rt, a, b, lease, secs);
        let _ = writeln!(out, "| {name} | {per_expiry:.2} | {p99:.1?} | {calls} |");
    }
    out
}
