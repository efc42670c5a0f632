//! `COMPARE_QUICK=rows`: a few rows of the full comparison, memgroup against
//! the peers that lead at light load (`memcache-async`, `memcached-rs`),
//! alternated round by round on one server, medians printed. For iterating
//! on one path (the full run takes minutes); the full run stays the record.
//!
//! `rows` is a comma list of `seq` (sequential get and set), `multi` (get of
//! 100 keys), `tlsN` (memgroup over TLS against plaintext, N in flight:
//! `tls4`, `tls32`, …) and in-flight counts (`4`, `32`, …). The `seq` and
//! in-flight rows include the tokio floor: a bare socket per caller, one
//! write and reads to the reply's end a request; the in-flight rows also
//! the one-connection floor: one bare socket and one task writing all N
//! requests at once, as N commands or as one multi-key `get`, in lockstep
//! (what one connection does with no client around it). `COMPARE_ROUNDS` (default
//! 5) rounds of `COMPARE_SECS` seconds each. `COMPARE_PEERS=0` runs memgroup
//! alone in the `seq` and in-flight rows (to profile it);
//! `COMPARE_PEERS=NAME[,NAME…]` runs only those clients (`seq`, `multi` and
//! in-flight rows; an in-flight row's names as printed, `memgroup` for
//! memgroup's default row). After the medians, each row prints memgroup's
//! ratios to every other client measured in the same rounds (and its
//! variants ÷ its default row, TLS ÷ plaintext), round by round (see
//! [`paired`]): a ratio taken within one round sees the machine as both
//! clients saw it, so it moves far less between runs than a ratio of two
//! medians taken minutes apart. For a verdict on one target, run memgroup
//! and the one peer alone, in short rounds: `COMPARE_PEERS=memgroup,memcache-async
//! COMPARE_SECS=1 COMPARE_ROUNDS=21`. `COMPARE_SIZES=1` prints the sizes of
//! memgroup's `get`, `set` and `get_multi` futures instead (each move of a
//! future copies it).

mod verdict;

use std::sync::Arc;
use std::time::Duration;

use async_memcached::AsciiProtocol;
use memcached::proto::Operation;

use crate::{
    Config, KEYS, Lat, MULTI_CALLS, MULTI_KEYS, MULTI_WARMUP, SEQ_OPS, SEQ_WARMUP, TlsServer, Tput,
    VALUE, key, memcache_async_client, memcached_rs_client, memgroup_client, preload, raw_socket,
    server_cpu, spawn_server, throughput, time_sync, value_ok,
};

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Prints `name: ops/s, CPU µs/op` as medians over the rounds.
fn report(name: &str, runs: &[(f64, f64)]) {
    let ops = median(runs.iter().map(|r| r.0).collect());
    let cpu = median(runs.iter().map(|r| r.1).collect());
    if name.starts_with("  its") {
        // A server's line: its share of a core, its CPU per op.
        println!("{name:<38} {ops:>5.2} of a core  {cpu:>6.2} µs CPU/op");
        return;
    }
    let all: Vec<String> = runs.iter().map(|r| format!("{:.0}", r.0)).collect();
    println!(
        "{name:<28} {ops:>9.0} ops/s  {cpu:>6.2} µs CPU/op   (rounds: {})",
        all.join(" ")
    );
}

/// The `q`-quantile of sorted `v` (nearest rank).
fn quantile(v: &[f64], q: f64) -> f64 {
    v[((v.len() - 1) as f64 * q).round() as usize]
}

/// Client `name`'s runs among `results`, if it ran.
fn runs_of<'r>(results: &'r [(&str, Vec<(f64, f64)>)], name: &str) -> Option<&'r Vec<(f64, f64)>> {
    results.iter().find(|(n, _)| *n == name).map(|(_, r)| r)
}

/// Which memgroup row a client's row is set against: the one of the same
/// operation (`… get`, `… set`, `… get_multi`), else memgroup's default row.
fn base_of<'a>(name: &str, names: &[&'a str]) -> Option<&'a str> {
    let op = ["get_multi", "get", "set"]
        .into_iter()
        .find(|op| name.split(' ').any(|w| w == *op));
    names.iter().copied().find(|n| match op {
        Some(op) => n.starts_with("memgroup ") && n.split(' ').any(|w| w == op),
        None => *n == "memgroup",
    })
}

/// Ratios taken round by round: memgroup ÷ each other client, and
/// memgroup's own variants ÷ the run they vary (decoding values, no merging
/// and a pool of 4 ÷ memgroup's default; TLS ÷ plaintext): throughput and
/// client CPU per op, as the median with the quartiles and the extremes
/// over the rounds. Rounds alternate the
/// clients, so each round's runs sit next to each other in time and share
/// the machine's state; the ratio within a round cancels most of what moves
/// a row between runs. Servers' lines are not set against anything.
fn paired(results: &[(&str, Vec<(f64, f64)>)]) {
    let names: Vec<&str> = results.iter().map(|(n, _)| *n).collect();
    let rounds = |name: &str| runs_of(results, name);
    let mut header = false;
    // (subject, reference): what is divided by what. At 4 in flight the
    // pool of 4 is set against every peer too (equal connections).
    let mut pairs: Vec<(&str, &str)> = Vec::new();
    for &name in &names {
        match name {
            "memgroup decode" | "memgroup no merging" | "memgroup pool 4" => {
                pairs.push((name, "memgroup"))
            }
            "memgroup, TLS" => pairs.push(("memgroup, TLS", "memgroup, plaintext")),
            n if n.starts_with("memgroup") || n.starts_with("  its") => {}
            n => {
                pairs.extend(base_of(n, &names).map(|base| (base, n)));
                if names.contains(&"memgroup pool 4") && !n.contains("floor") {
                    pairs.push(("memgroup pool 4", n));
                }
            }
        }
    }
    for (subject, reference) in pairs {
        let (Some(top), Some(bottom)) = (rounds(subject), rounds(reference)) else {
            continue;
        };
        if top.len() != bottom.len() || top.is_empty() {
            continue;
        }
        if !header {
            println!(
                "paired, per round: median [quartiles] (extremes), {} rounds",
                top.len()
            );
            header = true;
        }
        let ratios = |f: fn(&(f64, f64)) -> f64| {
            let mut r: Vec<f64> = top.iter().zip(bottom).map(|(t, b)| f(t) / f(b)).collect();
            r.sort_by(f64::total_cmp);
            format!(
                "{:.3} [{:.3}–{:.3}] ({:.3}–{:.3})",
                quantile(&r, 0.5),
                quantile(&r, 0.25),
                quantile(&r, 0.75),
                r[0],
                r[r.len() - 1]
            )
        };
        println!(
            "  {subject} ÷ {reference}: ops/s {}   CPU/op {}",
            ratios(|r| r.0),
            ratios(|r| r.1)
        );
    }
}

fn lat(l: Lat) -> (f64, f64) {
    (l.per_sec(), l.cpu_us)
}

fn tput(t: Tput) -> (f64, f64) {
    assert_eq!(t.errors, 0, "errors during the run");
    (t.ops_per_sec, t.cpu_us_per_op)
}

pub(crate) fn run(rows: &str, secs: Duration) {
    let rounds = crate::env_num("COMPARE_ROUNDS", 5) as usize;
    let server = spawn_server();
    let addr = server.addr_string();
    preload(&addr);
    let one = addr.as_str();
    let keys: Arc<Vec<String>> = Arc::new((0..KEYS).map(key).collect());
    let rt = crate::runtime();
    if std::env::var("COMPARE_SIZES").is_ok() {
        let c = memgroup_client(&rt, &[one], 1);
        let _g = rt.enter();
        println!("get future: {} bytes", std::mem::size_of_val(&c.get("k")));
        println!(
            "set future: {} bytes",
            std::mem::size_of_val(&c.set("k", "v", 0))
        );
        println!(
            "get_multi future: {} bytes",
            std::mem::size_of_val(&c.get_multi(&["k"]))
        );
        return;
    }
    let tls_server = rows
        .split(',')
        .any(|r| r.starts_with("tls"))
        .then(|| TlsServer::start(&rt));
    // `COMPARE_PEERS=0`: memgroup alone (for a profile).
    let alone = std::env::var("COMPARE_PEERS").as_deref() == Ok("0");
    // `COMPARE_PEERS=NAME[,NAME…]`: those clients alone (in the `seq` row too).
    let only = std::env::var("COMPARE_PEERS").unwrap_or_default();
    // A name between commas (one of them may hold a comma itself: "one-socket
    // floor, merged").
    let listed = format!(",{only},");
    let runs = |name: &str| only.len() < 2 || listed.contains(&format!(",{name},"));
    for row in rows.split(',') {
        let mut results: Vec<(&str, Vec<(f64, f64)>)> = Vec::new();
        let mut push = |name, r| match results.iter_mut().find(|(n, _)| *n == name) {
            Some((_, v)) => v.push(r),
            None => results.push((name, vec![r])),
        };
        for round in 0..rounds {
            eprintln!("{row}: round {} / {rounds} …", round + 1);
            match row {
                "seq" => {
                    // Each client once a round, the order rotated round by round
                    // (as the in-flight rows do), so that no client always runs
                    // first or after the same one.
                    for k in 0..4 {
                        match (k + round) % 4 {
                            0 => {
                                if runs("memgroup") {
                                    let mg = memgroup_client(&rt, &[one], 1);
                                    let (c, k) = (mg.clone(), keys.clone());
                                    push(
                                        "memgroup get",
                                        lat(time_async!(rt, SEQ_WARMUP, SEQ_OPS, |i| value_ok(
                                            c.get(&k[i % KEYS])
                                                .await
                                                .unwrap()
                                                .expect("hit")
                                                .value
                                                .len()
                                        ))),
                                    );
                                    let (c, k) = (mg.clone(), keys.clone());
                                    push(
                                        "memgroup set",
                                        lat(time_async!(rt, SEQ_WARMUP, SEQ_OPS, |i| assert!(
                                            c.set(&k[i % KEYS], &VALUE[..], 0)
                                                .await
                                                .unwrap()
                                                .applied()
                                        ))),
                                    );
                                }
                            }
                            _ if alone => {}
                            1 => {
                                if runs("memcache-async") {
                                    let (mut c, k) =
                                        (memcache_async_client(&rt, one), keys.clone());
                                    push(
                                        "memcache-async get",
                                        lat(time_async!(rt, SEQ_WARMUP, SEQ_OPS, |i| value_ok(
                                            c.get(&k[i % KEYS]).await.expect("get").len()
                                        ))),
                                    );
                                }
                            }
                            2 => {
                                if runs("tokio floor") {
                                    // What any tokio client pays at least: one write and
                                    // reads until the reply's end on a bare socket, no
                                    // parsing beyond the value's length.
                                    let (mut raw, k) = (raw_socket(&rt, one), keys.clone());
                                    push(
                                        "tokio floor get",
                                        lat(time_async!(rt, SEQ_WARMUP, SEQ_OPS, |i| value_ok(
                                            raw.get(&k[i % KEYS]).await
                                        ))),
                                    );
                                    let (mut raw, k) = (raw_socket(&rt, one), keys.clone());
                                    push(
                                        "tokio floor set",
                                        lat(time_async!(rt, SEQ_WARMUP, SEQ_OPS, |i| raw
                                            .set(&k[i % KEYS])
                                            .await)),
                                    );
                                }
                            }
                            _ => {
                                if runs("memcached-rs") {
                                    let mut mr = memcached_rs_client(&[one]);
                                    push(
                                        "memcached-rs get",
                                        lat(time_sync(SEQ_WARMUP, SEQ_OPS, |i| {
                                            value_ok(
                                                mr.get(keys[i % KEYS].as_bytes())
                                                    .expect("get")
                                                    .0
                                                    .len(),
                                            )
                                        })),
                                    );
                                    push(
                                        "memcached-rs set",
                                        lat(time_sync(SEQ_WARMUP, SEQ_OPS, |i| {
                                            mr.set(keys[i % KEYS].as_bytes(), &VALUE[..], 0, 0)
                                                .expect("set")
                                        })),
                                    );
                                }
                            }
                        }
                    }
                }
                "multi" => {
                    let batches: Arc<Vec<Vec<String>>> = Arc::new(
                        (0..KEYS / MULTI_KEYS)
                            .map(|b| keys[b * MULTI_KEYS..(b + 1) * MULTI_KEYS].to_vec())
                            .collect(),
                    );
                    // Each client once a round, the order rotated as in `seq`.
                    for k in 0..3 {
                        match (k + round) % 3 {
                            0 => {
                                if runs("memgroup") {
                                    let mg = memgroup_client(&rt, &[one], 1);
                                    let b = batches.clone();
                                    push(
                                        "memgroup get_multi 100",
                                        lat(time_async!(
                                            rt,
                                            MULTI_WARMUP,
                                            MULTI_CALLS,
                                            |i| assert_eq!(
                                                mg.get_multi(&b[i % b.len()])
                                                    .await
                                                    .unwrap()
                                                    .hit_count(),
                                                MULTI_KEYS
                                            )
                                        )),
                                    );
                                }
                            }
                            1 => {
                                if runs("memcache-async") && !alone {
                                    let (mut c, b) =
                                        (memcache_async_client(&rt, one), batches.clone());
                                    push(
                                        "memcache-async get_multi",
                                        lat(time_async!(
                                            rt,
                                            MULTI_WARMUP,
                                            MULTI_CALLS,
                                            |i| assert_eq!(
                                                c.get_multi(&b[i % b.len()])
                                                    .await
                                                    .expect("multi")
                                                    .len(),
                                                MULTI_KEYS
                                            )
                                        )),
                                    );
                                }
                            }
                            _ => {
                                if runs("async-memcached") && !alone {
                                    let (mut c, b) =
                                        (crate::async_memcached_client(&rt, one), batches.clone());
                                    push(
                                        "async-memcached get_multi",
                                        lat(time_async!(
                                            rt,
                                            MULTI_WARMUP,
                                            MULTI_CALLS,
                                            |i| assert_eq!(
                                                c.get_multi(&b[i % b.len()]).await.unwrap().len(),
                                                MULTI_KEYS
                                            )
                                        )),
                                    );
                                }
                            }
                        }
                    }
                }
                tls if tls.starts_with("tls") => {
                    let n: usize = tls[3..].parse().expect("tlsN: N in flight");
                    let tls_pid = tls_server.as_ref().and_then(|t| t.server.pid());
                    for (name, tls) in [("memgroup, plaintext", false), ("memgroup, TLS", true)] {
                        let config = Config::Memgroup {
                            pool: 1,
                            merge: true,
                            decode: false,
                            tls,
                        };
                        let pid = if tls { tls_pid } else { server.pid() };
                        let (cpu0, t0) = (server_cpu(pid), std::time::Instant::now());
                        let t = throughput(&rt, one, tls_server.as_ref(), &keys, config, n, secs);
                        // The server's share of a core over the run, and its
                        // CPU per op at the run's rate.
                        let busy = (server_cpu(pid) - cpu0) / t0.elapsed().as_secs_f64();
                        let per_op = busy * 1e6 / t.ops_per_sec;
                        push(name, tput(t));
                        push(
                            if tls {
                                "  its memcached -Z: core share, µs/op"
                            } else {
                                "  its memcached: core share, µs/op"
                            },
                            (busy, per_op),
                        );
                    }
                }
                n => {
                    let n: usize = n.parse().expect("a row: seq, multi, tlsN or a number");
                    let configs = [
                        ("memgroup", Config::memgroup()),
                        (
                            "memgroup decode",
                            Config::Memgroup {
                                pool: 1,
                                merge: true,
                                decode: true,
                                tls: false,
                            },
                        ),
                        (
                            "memgroup no merging",
                            Config::Memgroup {
                                pool: 1,
                                merge: false,
                                decode: false,
                                tls: false,
                            },
                        ),
                        (
                            "memgroup pool 4",
                            Config::Memgroup {
                                pool: 4,
                                merge: true,
                                decode: false,
                                tls: false,
                            },
                        ),
                        ("memcache-async", Config::MemcacheAsync),
                        ("memcached-rs", Config::MemcachedRs),
                        ("tokio floor", Config::Floor),
                        ("one-socket floor", Config::PipelinedFloor { merged: false }),
                        (
                            "one-socket floor, merged",
                            Config::PipelinedFloor { merged: true },
                        ),
                    ];
                    let configs: Vec<_> = configs
                        .into_iter()
                        .filter(|(name, _)| (!alone || name.starts_with("memgroup")) && runs(name))
                        .collect();
                    for k in 0..configs.len() {
                        let (name, config) = configs[(k + round) % configs.len()];
                        push(
                            name,
                            tput(throughput(&rt, one, None, &keys, config, n, secs)),
                        );
                    }
                }
            }
        }
        println!("## {row} ({rounds} rounds, medians)");
        for (name, runs) in &results {
            report(name, runs);
        }
        paired(&results);
        verdict::print(row, &results);
    }
}
