//! `get_or_fill`: one fill per lease across every caller of the cluster,
//! stale values served while one caller refills, a failed fill's lease
//! released. Real memcached leases (`mg … N`, `md … I`); tokio's clock held
//! by the test, so the fills' and waits' durations are exact.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use memgroup::client::{Client, ErrorKind, Filled, Freshness};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::support::{HeldClock, Memcached, let_io_happen, raw};

const FILL_TAKES: Duration = Duration::from_millis(50);
const STEP: Duration = Duration::from_millis(5);

/// Groups `sg1` (the arbiter) and `sg2`, and a client in each zone: two
/// clients share no state, as two processes would not.
fn cluster() -> (Memcached, Memcached, Client, Client) {
    let (sg1, sg2) = (Memcached::spawn(), Memcached::spawn());
    let groups = format!("sg2={};sg1={}", sg2.addr_string(), sg1.addr_string());
    let client = |zone: &str| {
        Client::builder()
            .evcache_groups(&groups)
            .zone(zone)
            .timeout(Duration::from_millis(500))
            .build()
            .unwrap()
    };
    let (near, far) = (client("sg1"), client("sg2"));
    (sg1, sg2, near, far)
}

/// A caller of `get_or_fill` whose fill takes [`FILL_TAKES`] and counts
/// itself in `fills`; returns what it got and how long it waited.
fn caller(
    client: &Client,
    key: &'static str,
    value: &'static str,
    fills: &Arc<AtomicUsize>,
) -> JoinHandle<(Filled, Duration)> {
    let (client, fills) = (client.clone(), fills.clone());
    tokio::spawn(async move {
        let started = Instant::now();
        let got = client
            .get_or_fill(key, 300, || async move {
                fills.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(FILL_TAKES).await;
                Ok::<_, std::io::Error>(value)
            })
            .await
            .unwrap();
        (got, started.elapsed())
    })
}

/// Moves the held clock in small steps, letting I/O happen, until every
/// task is done (for at most `bound` of clock time).
async fn run_all<T>(tasks: Vec<JoinHandle<T>>, bound: Duration) -> Vec<T> {
    let mut moved = Duration::ZERO;
    while !tasks.iter().all(JoinHandle::is_finished) {
        assert!(moved <= bound, "callers still waiting after {moved:?}");
        let_io_happen().await;
        tokio::time::advance(STEP).await;
        moved += STEP;
    }
    let mut out = Vec::new();
    for task in tasks {
        out.push(task.await.unwrap());
    }
    out
}

/// Every `get` request the servers have answered (`mg` counts as a get).
fn gets(servers: &[&Memcached]) -> u64 {
    servers.iter().map(|s| raw::stat(s.addr(), "cmd_get")).sum()
}

/// 1,000 callers in one process and 100 in another zone's client, on a
/// missing key with a 50 ms fill: the fill runs once, everyone gets its
/// value, and nobody waits longer than the fill plus one retry step.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_thousand_callers_on_a_missing_key_fill_it_once() {
    let _clock = HeldClock::hold();
    let (sg1, sg2, near, far) = cluster();
    let fills = Arc::new(AtomicUsize::new(0));
    let mut tasks: Vec<_> = (0..1000)
        .map(|_| caller(&near, "hot", "computed", &fills))
        .collect();
    tasks.extend((0..100).map(|_| caller(&far, "hot", "computed", &fills)));
    let results = run_all(tasks, Duration::from_secs(1)).await;
    assert_eq!(fills.load(Ordering::SeqCst), 1, "one fill for the cluster");
    let mut by_freshness = std::collections::HashMap::new();
    for (got, waited) in &results {
        assert_eq!(&got.item.value[..], b"computed");
        // The fill, plus at most one poll step (50 ms) and the test's step.
        assert!(
            *waited <= FILL_TAKES + Duration::from_millis(50) + STEP,
            "{waited:?}"
        );
        *by_freshness.entry(got.freshness).or_insert(0) += 1;
    }
    assert_eq!(by_freshness[&Freshness::Filled], 1, "{by_freshness:?}");
    assert_eq!(by_freshness[&Freshness::Waited], 1099, "{by_freshness:?}");
    // One flight per process: a local read, the lease, and the far
    // client's polls — not a request per caller.
    let requests = gets(&[&sg1, &sg2]);
    assert!(requests < 20, "{requests} gets for 1,100 callers");
    // Written to both groups; read back as cached.
    assert_eq!(
        raw::get(sg1.addr(), b"hot").as_deref(),
        Some(&b"computed"[..])
    );
    assert_eq!(
        raw::get(sg2.addr(), b"hot").as_deref(),
        Some(&b"computed"[..])
    );
    let again = near
        .get_or_fill("hot", 300, || async { Err::<Vec<u8>, _>("not called") })
        .await
        .unwrap();
    assert_eq!(again.freshness, Freshness::Cached);
}

/// After `invalidate`, callers in both zones get the old value while
/// exactly one refills it (the arbiter's winner); later callers get the new
/// one, from every group.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn an_invalidated_value_is_served_stale_while_one_caller_refills() {
    let _clock = HeldClock::hold();
    let (sg1, sg2, near, far) = cluster();
    // Every connection open (and its server asked about the meta protocol)
    // first: a connection opened among the callers takes real round trips
    // while the paused clock runs the fill, and a caller so delayed finds
    // the refilled value, cached.
    for client in [&near, &far] {
        client.connect_all().await.unwrap();
    }
    // Both writes in every group before anyone reads: under the default
    // WriteWait::Policy a write returns once its policy is met, the other
    // group's copy still on its way, and a caller in that zone read "old"
    // as fresh (Cached) once in ten runs of the fill tests together.
    near.set("k", "old", 300).await.unwrap().settled().await;
    near.invalidate("k", 30).await.unwrap().settled().await;
    // A plain get still sees the stale value as a hit.
    assert_eq!(&far.get("k").await.unwrap().unwrap().value[..], b"old");
    let fills = Arc::new(AtomicUsize::new(0));
    let mut tasks: Vec<_> = (0..10).map(|_| caller(&near, "k", "new", &fills)).collect();
    tasks.extend((0..10).map(|_| caller(&far, "k", "new", &fills)));
    let results = run_all(tasks, Duration::from_secs(1)).await;
    assert_eq!(fills.load(Ordering::SeqCst), 1);
    for (got, _) in &results {
        match got.freshness {
            Freshness::Filled => assert_eq!(&got.item.value[..], b"new"),
            Freshness::Stale => assert_eq!(&got.item.value[..], b"old"),
            // The filler's own flight-mates wait for it.
            Freshness::Waited => assert_eq!(&got.item.value[..], b"new"),
            // A caller whose reads took real round trips while the paused
            // clock ran the whole fill arrives after it: the new value,
            // cached, is the right answer then (the full suite's load made
            // one such caller in a run after connect_all went first).
            Freshness::Cached => assert_eq!(&got.item.value[..], b"new"),
            other => panic!("{other:?}"),
        }
    }
    assert!(results.iter().any(|(g, _)| g.freshness == Freshness::Stale));
    for server in [&sg1, &sg2] {
        assert_eq!(raw::get(server.addr(), b"k").as_deref(), Some(&b"new"[..]));
    }
    let later = far
        .get_or_fill("k", 300, || async { Err::<Vec<u8>, _>("not called") })
        .await
        .unwrap();
    assert_eq!(
        (later.freshness, &later.item.value[..]),
        (Freshness::Cached, &b"new"[..])
    );
}

/// A fill that fails is an error of its own kind, and releases the lease:
/// the next caller wins at once rather than waiting out the lease.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_failed_fill_releases_its_lease() {
    let _clock = HeldClock::hold();
    let (sg1, _sg2, near, far) = cluster();
    let error = near
        .get_or_fill("k", 300, || async { Err::<Vec<u8>, _>("backend down") })
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Fill);
    let source = std::error::Error::source(&error).map(ToString::to_string);
    assert_eq!(source.as_deref(), Some("backend down"));
    assert_eq!(raw::get(sg1.addr(), b"k"), None, "the stub is gone");
    let started = Instant::now();
    let got = far
        .get_or_fill("k", 300, || async { Ok::<_, std::io::Error>("v") })
        .await
        .unwrap();
    assert_eq!(got.freshness, Freshness::Filled);
    assert_eq!(started.elapsed(), Duration::ZERO, "no wait for a lease");
}

/// The tool's meta commands print the typed reply: a vivified miss won,
/// then a win sent; `invalidate` makes the value stale for `mg`; bad flags
/// are usage errors.
#[test]
fn the_tool_prints_typed_meta_replies() {
    use crate::support::memgroup;
    let server = Memcached::spawn();
    let servers = server.addr_string();
    let json = |args: &[&str]| -> serde_json::Value {
        let mut all = vec!["--servers", &servers, "--json"];
        all.extend_from_slice(args);
        let out = memgroup(&all);
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()[0].clone()
    };
    let first = json(&["mg", "hot", "v", "N30", "t", "c"]);
    assert_eq!(
        (first["won"].as_bool(), first["ttl"].as_i64()),
        (Some(true), Some(30))
    );
    let second = json(&["mg", "hot", "v", "N30"]);
    assert_eq!(
        (second["won"].as_bool(), second["win_sent"].as_bool()),
        (Some(false), Some(true))
    );
    let counter = json(&["ma", "n", "N0", "J5", "v"]);
    assert_eq!(counter["value"].as_str(), Some("5"));
    memgroup(&["--servers", &servers, "ms", "k", "v1", "T60"]);
    memgroup(&[
        "--servers",
        &servers,
        "invalidate",
        "k",
        "--stale-for",
        "20",
    ]);
    let stale = json(&["mg", "k", "v", "t"]);
    assert_eq!(
        (stale["stale"].as_bool(), stale["won"].as_bool()),
        (Some(true), Some(true))
    );
    assert_eq!(stale["value"].as_str(), Some("v1"));
    let bad = memgroup(&["--servers", &servers, "mg", "k", "T"]);
    assert_eq!(bad.status.code(), Some(2));
    let missing = memgroup(&["--servers", &servers, "mg", "absent", "v"]);
    assert_eq!(missing.status.code(), Some(1));
}

/// The tool's `get` tells a stale value apart: left out (exit 1) unless
/// `--stale-ok`, and reading it leaves the right to refill to the fillers.
#[test]
fn the_tool_get_leaves_out_a_stale_value_unless_stale_ok() {
    use crate::support::memgroup;
    let server = Memcached::spawn();
    let servers = server.addr_string();
    let run = |args: &[&str]| {
        let mut all = vec!["--servers", &servers];
        all.extend_from_slice(args);
        memgroup(&all)
    };
    assert!(run(&["set", "k", "v1"]).status.success());
    assert!(run(&["set", "fresh", "f"]).status.success());
    // `--stale-for` takes a unit, as `--exptime` does.
    assert!(
        run(&["invalidate", "k", "--stale-for", "2m"])
            .status
            .success()
    );
    let plain = run(&["get", "k", "fresh"]);
    assert_eq!(plain.status.code(), Some(1));
    assert_eq!(String::from_utf8_lossy(&plain.stdout), "fresh: f\n");
    let err = String::from_utf8_lossy(&plain.stderr);
    assert!(
        err.contains("k: stale") && err.contains("--stale-ok"),
        "{err}"
    );
    let ok = run(&["get", "--stale-ok", "k"]);
    assert_eq!((ok.status.code(), &ok.stdout[..]), (Some(0), &b"v1"[..]));
    assert!(String::from_utf8_lossy(&ok.stderr).contains("stale"));
    // Neither read kept the refill right: the next lease asker wins it.
    let lease = run(&["--json", "mg", "k", "v", "N30"]);
    let reply = &serde_json::from_slice::<serde_json::Value>(&lease.stdout).unwrap()[0];
    assert_eq!(reply["won"].as_bool(), Some(true), "{reply}");
    // (Read last: a meta get of a stale value takes its win.)
    let (_, _, ttl) = crate::support::raw::copy(server.addr(), b"k").unwrap();
    assert!((115..=120).contains(&ttl), "the 2m stale period: {ttl}");
}

/// `bench --herd` from two processes in two zones at once: through leases
/// each expiry costs one fill across both (the arbiter's servers took two
/// stores for two keys, which each process's count includes); cache-aside
/// (`--no-lease`) lets the herd through.
#[test]
fn the_herd_bench_counts_fills_per_expiry_across_processes() {
    use crate::support::memgroup;
    let (sg1, sg2) = (Memcached::spawn(), Memcached::spawn());
    let groups = format!("sg1={};sg2={}", sg1.addr_string(), sg2.addr_string());
    let run = |zone: &str, extra: &[&str]| -> serde_json::Value {
        let mut args = vec![
            "--groups",
            &groups,
            "--zone",
            zone,
            "--json",
            "bench",
            "--herd",
            "--concurrency",
            "20",
            "--herd-keys",
            "2",
            "--herd-ttl",
            "5",
            "--duration",
            "0.3",
        ];
        args.extend_from_slice(extra);
        let out = memgroup(&args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()[0].clone()
    };
    let both = |extra: &[&str]| {
        let before = raw::stat(sg1.addr(), "cmd_set");
        let runs = std::thread::scope(|s| {
            let one = s.spawn(|| run("sg1", extra));
            let two = s.spawn(|| run("sg2", extra));
            [one.join().unwrap(), two.join().unwrap()]
        });
        (runs, raw::stat(sg1.addr(), "cmd_set") - before)
    };
    let (leased, stores) = both(&[]);
    assert_eq!(stores, 2, "{leased:?}");
    let fills: u64 = leased
        .iter()
        .map(|r| r["fills_here"].as_u64().unwrap())
        .sum();
    assert_eq!(fills, 2, "{leased:?}");
    for r in &leased {
        assert_eq!(r["expiries"].as_u64(), Some(2), "{r}");
        let seen = r["arbiter_stores"].as_u64().unwrap();
        assert!(
            (r["fills_here"].as_u64().unwrap()..=2).contains(&seen),
            "{r}"
        );
    }
    let (herd, stores) = both(&["--no-lease", "--prefix", "other:"]);
    assert!(stores > 2, "{herd:?}");
    for r in &herd {
        assert!(r["stores_per_expiry"].as_f64().unwrap() > 1.0, "{r}");
    }
}

/// A caller dropped while it holds the lease gives it back: the next
/// caller wins at once instead of waiting out the lease.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_cancelled_filler_gives_its_lease_back() {
    let _clock = HeldClock::hold();
    let (sg1, _sg2, near, far) = cluster();
    let stuck = {
        let near = near.clone();
        tokio::spawn(async move {
            near.get_or_fill("k", 300, || async {
                tokio::time::sleep(Duration::from_secs(3600)).await;
                Ok::<_, std::io::Error>("never")
            })
            .await
        })
    };
    // Until its lease stub is at the arbiter.
    while raw::copy(sg1.addr(), b"k").is_none() {
        let_io_happen().await;
    }
    stuck.abort();
    assert!(stuck.await.unwrap_err().is_cancelled());
    // The release runs on a task of its own.
    while raw::copy(sg1.addr(), b"k").is_some() {
        let_io_happen().await;
    }
    let started = Instant::now();
    let got = far
        .get_or_fill("k", 300, || async { Ok::<_, std::io::Error>("v") })
        .await
        .unwrap();
    assert_eq!(
        (got.freshness, started.elapsed()),
        (Freshness::Filled, Duration::ZERO)
    );
}

/// A write that lands while a fill runs is not overwritten by the fill's
/// older value: the filler still returns its value, uncached.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_write_during_a_fill_wins_over_the_fill() {
    let _clock = HeldClock::hold();
    let (sg1, sg2, near, far) = cluster();
    let filling = {
        let near = near.clone();
        tokio::spawn(async move {
            near.get_or_fill("k", 300, || async {
                tokio::time::sleep(FILL_TAKES).await;
                Ok::<_, std::io::Error>("from the database")
            })
            .await
        })
    };
    while raw::copy(sg1.addr(), b"k").is_none() {
        let_io_happen().await;
    }
    far.set("k", "newer", 0).await.unwrap();
    let results = run_all(vec![filling], Duration::from_secs(1)).await;
    let got = results.into_iter().next().unwrap().unwrap();
    assert_eq!(
        (got.freshness, &got.item.value[..]),
        (Freshness::Filled, &b"from the database"[..])
    );
    for server in [&sg1, &sg2] {
        assert_eq!(
            raw::get(server.addr(), b"k").as_deref(),
            Some(&b"newer"[..])
        );
    }
}

/// Reads that do not fill give back the refill right a stale value hands
/// them: after `invalidate`, a near-cache `get` and a read repair's copy
/// leave the win to `get_or_fill`, which refills once; the stale value is
/// never copied into the group that missed it.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn reads_that_do_not_fill_leave_the_refill_to_get_or_fill() {
    use memgroup::client::NearCache;
    let _clock = HeldClock::hold();
    let (sg1, sg2, _near, _far) = cluster();
    let groups = format!("sg2={};sg1={}", sg2.addr_string(), sg1.addr_string());
    let reader = Client::builder()
        .evcache_groups(&groups)
        .zone("sg2")
        .read_repair(true)
        .near_cache(NearCache::new(100, Duration::from_secs(1)))
        .build()
        .unwrap();
    // Only the arbiter (sg1) holds it, stale.
    raw::set(sg1.addr(), b"k", b"old");
    reader.invalidate("k", 30).await.unwrap();
    let got = reader.get("k").await.unwrap().unwrap();
    assert_eq!(
        &got.value[..],
        b"old",
        "a plain read serves the stale value"
    );
    // The read repair's task, if any, has run.
    for _ in 0..5 {
        let_io_happen().await;
    }
    // A read-repairing client without the near cache reads it the same way.
    let repairing = Client::builder()
        .evcache_groups(&groups)
        .zone("sg2")
        .read_repair(true)
        .build()
        .unwrap();
    assert_eq!(
        &repairing.get("k").await.unwrap().unwrap().value[..],
        b"old"
    );
    for _ in 0..5 {
        let_io_happen().await;
    }
    assert_eq!(
        raw::get(sg2.addr(), b"k"),
        None,
        "a stale value is not copied"
    );
    assert_eq!(repairing.health().read_repairs, 0);
    let fills = Arc::new(AtomicUsize::new(0));
    let results = run_all(
        vec![caller(&reader, "k", "new", &fills)],
        Duration::from_secs(1),
    )
    .await;
    assert_eq!(
        fills.load(Ordering::SeqCst),
        1,
        "the refill right was given back"
    );
    assert_eq!(results[0].0.freshness, Freshness::Filled);
}
