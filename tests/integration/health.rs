//! `Client::health()` and `on_event` against real memcached: the counters
//! equal the servers' own `stats` deltas; a SIGKILLed server shows as dead
//! with its failures counted while reads fall back (and the fallback counter
//! moves), and as up again after a restart and the backoff; every change is
//! an event.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use memgroup::client::{Client, ErrorKind, Event, ServerState};
use memgroup::topology::{ClusterSpec, ReadFallback, WritePolicy};

use crate::support::{HeldClock, Memcached, advance_until, raw, server_list};

#[tokio::test]
async fn counters_equal_the_servers_own_stats() {
    let servers: Vec<Memcached> = (0..3).map(|_| Memcached::spawn()).collect();
    let client = Client::builder()
        .servers(&server_list(&servers))
        .build()
        .unwrap();
    let names = ["cmd_get", "get_hits", "cmd_set"];
    let before: Vec<Vec<u64>> = servers
        .iter()
        .map(|s| names.iter().map(|n| raw::stat(s.addr(), n)).collect())
        .collect();
    for i in 0..200 {
        client.set(format!("k{i}"), "v", 0).await.unwrap();
    }
    // Hits and misses, one by one and concurrently (merged into multi-key gets).
    for i in 0..300 {
        client.get(format!("k{i}")).await.unwrap();
    }
    let gets: Vec<_> = (0..100)
        .map(|i| {
            let client = client.clone();
            tokio::spawn(async move { client.get(format!("k{}", i * 3)).await.unwrap() })
        })
        .collect();
    for get in gets {
        get.await.unwrap();
    }
    let keys: Vec<String> = (100..250).map(|i| format!("k{i}")).collect();
    assert_eq!(client.get_multi(&keys).await.unwrap().hit_count(), 100);

    let status = client.health();
    assert_eq!(status.servers.len(), 3);
    let mut total_hits = 0;
    for (server, before) in servers.iter().zip(&before) {
        let delta: Vec<u64> = names
            .iter()
            .zip(before)
            .map(|(n, b)| raw::stat(server.addr(), n) - b)
            .collect();
        let s = status
            .servers
            .iter()
            .find(|s| s.server == server.addr_string())
            .unwrap();
        let c = &s.counters;
        assert_eq!(c.hits + c.misses, delta[0], "cmd_get of {}", s.server);
        assert_eq!(c.hits, delta[1], "get_hits of {}", s.server);
        assert_eq!(c.writes, delta[2], "cmd_set of {}", s.server);
        assert_eq!(s.state, ServerState::Up);
        assert_eq!((s.failures, s.connections), (0, 1));
        assert_eq!((s.in_flight, s.queued), (0, 0));
        assert!(c.bytes_in > 0 && c.bytes_out > 0);
        assert!(c.requests >= c.writes && c.errors_total() == 0);
        assert!(c.latency_p50.unwrap() <= c.latency_p99.unwrap());
        total_hits += c.hits;
    }
    // 200 of the 300 single gets, 67 of the 100 concurrent ones (k0, k3, …,
    // k198), 100 of get_multi's 150.
    assert_eq!(total_hits, 367);
    let group = &status.groups[0];
    assert_eq!((group.servers, group.servers_up), (3, 3));
    assert_eq!(group.counters.hits, total_hits);
    assert_eq!(group.counters.writes, 200);
}

/// Under paused time: the backoff after the kill passes when the test moves
/// the clock.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_killed_server_shows_dead_reads_fall_back_and_it_comes_back() {
    let _clock = HeldClock::hold();
    let (mut a, b) = (Memcached::spawn(), Memcached::spawn());
    let events = Arc::new(Mutex::new(Vec::<Event>::new()));
    let seen = events.clone();
    let client = Client::builder()
        .evcache_groups(&format!("sg1={};sg2={}", a.addr_string(), b.addr_string()))
        .zone("sg1")
        .read_fallback(ReadFallback::OneMore)
        .write_policy(WritePolicy::All)
        .on_event(move |e| seen.lock().unwrap().push(e.clone()))
        .build()
        .unwrap();
    for i in 0..10 {
        client.set(format!("k{i}"), "v", 0).await.unwrap();
    }
    // A first connection is not a server coming back.
    assert!(
        !events
            .lock()
            .unwrap()
            .iter()
            .any(|e| matches!(e, Event::ServerUp { .. })),
        "{:?}",
        events.lock().unwrap()
    );
    let status_of = |name: &str| {
        client
            .health()
            .servers
            .into_iter()
            .find(|s| s.server == name)
            .unwrap()
    };
    a.kill();
    // sg1's copy is gone: every read is served by sg2.
    for i in 0..10 {
        assert!(client.get(format!("k{i}")).await.unwrap().is_some());
    }
    let dead = status_of(&a.addr_string());
    assert!(
        matches!(dead.state, ServerState::Dead { retry_in } if retry_in > Duration::ZERO),
        "{dead:?}"
    );
    assert!(dead.failures >= 1, "{dead:?}");
    assert!(dead.counters.errors_total() >= 1, "{dead:?}");
    assert!(
        dead.counters
            .errors
            .iter()
            .any(|(k, _)| *k == ErrorKind::Connection)
    );
    let fallback = status_of(&b.addr_string());
    assert_eq!(fallback.counters.fallbacks, 10, "{fallback:?}");
    let summary = client.health();
    let sg1 = summary.groups.iter().find(|g| g.group == "sg1").unwrap();
    assert_eq!(sg1.servers_up, 0);
    // A write that cannot reach sg1 misses the ALL policy.
    assert!(client.set("w", "v", 0).await.unwrap_err().is_write_policy());
    {
        let events = events.lock().unwrap();
        assert!(events.iter().any(|e| matches!(e,
            Event::ServerDown { server, failures, .. } if *server == a.addr_string() && *failures >= 1)));
        assert!(events.iter().any(|e| matches!(e,
            Event::PolicyMissed { command: "set", failed, groups: 2 } if failed == &["sg1"])));
    }

    a.restart();
    tokio::time::advance(Duration::from_secs(5)).await;
    // The repair of the write it missed probes it back first.
    advance_until(Duration::from_secs(1), || {
        client.health().repairs.pending == 0
    })
    .await;
    client.set("after", "v", 0).await.unwrap();
    let up = status_of(&a.addr_string());
    assert_eq!((up.state, up.failures), (ServerState::Up, 0), "{up:?}");
    assert!(
        events
            .lock()
            .unwrap()
            .iter()
            .any(|e| matches!(e, Event::ServerUp { server } if *server == a.addr_string()))
    );

    // A topology change is an event too, naming what changed.
    client
        .set_topology(ClusterSpec::parse_evcache(&format!("sg2={}", b.addr_string())).unwrap())
        .unwrap();
    let last = events.lock().unwrap().last().cloned().unwrap();
    assert!(
        matches!(&last, Event::TopologyChanged { added, removed } if added.is_empty() && removed == &[a.addr_string()]),
        "{last:?}"
    );
}

/// `memgroup status` with one server down: exit 1, that server unreachable,
/// the others with their round trip and version, group totals; `--json`
/// parses. `-v` logs the server marked dead on stderr.
#[test]
fn the_status_command_lists_an_unreachable_server_and_exits_1() {
    let (a, b, mut down) = (Memcached::spawn(), Memcached::spawn(), Memcached::spawn());
    let dead = down.addr_string();
    down.kill();
    let groups = format!("sg1={},{dead};sg2={}", a.addr_string(), b.addr_string());
    let run = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_memgroup"))
            // Each test its own state: no repair journal shared across tests.
            .env("MEMGROUP_REPAIR_JOURNAL", "off")
            .args(["--groups", &groups])
            .args(args)
            .env_remove("RUST_LOG")
            .output()
            .unwrap()
    };
    let o = run(&["status"]);
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let text = String::from_utf8(o.stdout).unwrap();
    let row = |server: &str| {
        text.lines()
            .find(|l| l.contains(server))
            .unwrap()
            .to_string()
    };
    assert!(
        row(&dead).contains("NO") && row(&dead).contains("dead"),
        "{text}"
    );
    for up in [a.addr_string(), b.addr_string()] {
        let line = row(&up);
        assert!(
            line.contains("yes") && line.contains(" ms") && line.contains("1.6"),
            "{text}"
        );
    }
    assert!(text.contains("1/2 up") && text.contains("1/1 up"), "{text}");

    let o = run(&["--json", "status"]);
    assert_eq!(o.status.code(), Some(1));
    let records: Vec<serde_json::Value> = serde_json::from_slice(&o.stdout).unwrap();
    let sg1 = records
        .iter()
        .find(|r| r["kind"] == "group" && r["group"] == "sg1")
        .unwrap();
    assert_eq!(sg1["unreachable"], 1, "{sg1}");
    for server in records.iter().filter(|r| r["kind"] == "server") {
        let is_dead = server["server"] == dead.as_str();
        assert_eq!(server["reachable"], !is_dead, "{server}");
        assert_eq!(server["round_trip_us"].is_u64(), !is_dead, "{server}");
        assert_eq!(server["state"], if is_dead { "dead" } else { "up" });
    }

    // With every server up: exit 0.
    let all_up = std::process::Command::new(env!("CARGO_BIN_EXE_memgroup"))
        // Each test its own state: no repair journal shared across tests.
        .env("MEMGROUP_REPAIR_JOURNAL", "off")
        .args(["--servers", &a.addr_string(), "status"])
        .output()
        .unwrap();
    assert!(all_up.status.success());

    // -v: the client's events on stderr (20 keys: some map to the dead server).
    let keys: Vec<String> = (0..20).map(|i| format!("k{i}")).collect();
    let mut args = vec!["-v", "--zone", "sg1", "get"];
    args.extend(keys.iter().map(String::as_str));
    let log = String::from_utf8(run(&args).stderr).unwrap();
    assert!(log.contains("marked dead") && log.contains(&dead), "{log}");
    assert!(
        !log.contains('\x1b'),
        "no colours when stderr is not a terminal"
    );
}

/// Requests held by a stalled server show as in flight (or queued) on its
/// one connection while they wait, and none once it answers.
#[tokio::test(flavor = "current_thread")]
async fn requests_waiting_on_a_stalled_server_are_counted_live() {
    let server = Memcached::spawn();
    let client = Client::builder()
        .servers(&server.addr_string())
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    client.set("warm", "v", 0).await.unwrap();
    server.stop();
    let pending: Vec<_> = (0..3)
        .map(|i| {
            let client = client.clone();
            tokio::spawn(async move { client.set(format!("k{i}"), "v", 0).await })
        })
        .collect();
    // The callers run when this task yields; poll until all three wait.
    for _ in 0..10_000 {
        let s = client.health().servers.remove(0);
        if s.in_flight + s.queued == 3 {
            break;
        }
        tokio::task::yield_now().await;
    }
    let waiting = client.health().servers.remove(0);
    assert_eq!(waiting.connections, 1, "{waiting:?}");
    assert_eq!(waiting.in_flight + waiting.queued, 3, "{waiting:?}");
    server.resume();
    for p in pending {
        p.await.unwrap().unwrap();
    }
    let done = client.health().servers.remove(0);
    assert_eq!((done.in_flight, done.queued), (0, 0), "{done:?}");
}

/// A server whose probe failed is never `up`: not one killed (refused), not
/// one SIGSTOPped (it keeps its socket and times out), neither in the STATE
/// column, nor in the group's `n/m up`, nor in `--json`; once it answers
/// again it is up.
#[test]
fn status_never_shows_up_for_a_server_it_could_not_reach() {
    let (live, stopped, mut killed) = (Memcached::spawn(), Memcached::spawn(), Memcached::spawn());
    let (stopped_addr, killed_addr) = (stopped.addr_string(), killed.addr_string());
    // sg2's own server, stalled too (a server is in one group only).
    let far = Memcached::spawn();
    let far_addr = far.addr_string();
    killed.kill();
    stopped.stop();
    far.stop();
    let groups = format!(
        "sg1={},{stopped_addr},{killed_addr};sg2={far_addr}",
        live.addr_string()
    );
    let run = |args: &[&str]| {
        let started = std::time::Instant::now();
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_memgroup"))
            // Each test its own state: no repair journal shared across tests.
            .env("MEMGROUP_REPAIR_JOURNAL", "off")
            .args(["--groups", &groups, "--timeout-ms", "200"])
            .args(["--connect-timeout-ms", "200"])
            .args(args)
            .env_remove("RUST_LOG")
            .output()
            .unwrap();
        assert!(started.elapsed() < Duration::from_secs(5), "quick");
        o
    };
    let o = run(&["status"]);
    assert_eq!(o.status.code(), Some(1));
    let text = String::from_utf8(o.stdout).unwrap();
    let rows = |server: &str| -> Vec<String> {
        text.lines()
            .filter(|l| l.contains(server))
            .map(str::to_string)
            .collect()
    };
    for down in [&stopped_addr, &killed_addr, &far_addr] {
        for row in rows(down) {
            assert!(row.contains("NO"), "{text}");
            assert!(!row.split_whitespace().any(|w| w == "up"), "{text}");
        }
    }
    assert!(
        rows(&live.addr_string())[0]
            .split_whitespace()
            .any(|w| w == "up"),
        "{text}"
    );
    assert!(text.contains("1/3 up") && text.contains("0/1 up"), "{text}");

    let o = run(&["--json", "status"]);
    assert_eq!(o.status.code(), Some(1));
    let records: Vec<serde_json::Value> = serde_json::from_slice(&o.stdout).unwrap();
    for r in records.iter().filter(|r| r["kind"] == "server") {
        let up = r["server"] == live.addr_string().as_str();
        assert_eq!(r["reachable"], up, "{r}");
        assert_eq!(r["state"] == "up", up, "{r}");
    }
    let group = |name: &str| {
        records
            .iter()
            .find(|r| r["kind"] == "group" && r["group"] == name)
            .unwrap()
    };
    assert_eq!(group("sg1")["servers_up"], 1);
    assert_eq!(group("sg2")["servers_up"], 0);

    stopped.resume();
    far.resume();
    let o = run(&["status"]);
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(text.contains("2/3 up") && text.contains("1/1 up"), "{text}");
}
