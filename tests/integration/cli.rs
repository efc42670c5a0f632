//! The `memgroup` binary against real memcached: every subcommand's happy
//! path and its bad-input path, and a 50,000-key warm.

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use memgroup::client::{Client, IfPresent, MetaFlag, WriteOptions};
use memgroup::hash::{HashStrategy, Locator, LocatorConfig, Node};

use std::io::Write;

use crate::support::{Memcached, fault_peer, memgroup, raw, server_list as list};

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn route_matches_the_locator() {
    let servers = "10.0.0.1:11211,10.0.0.2:11211,10.0.0.3:11211";
    let o = memgroup(&[
        "--servers",
        servers,
        "--hash",
        "new-compat",
        "route",
        "user:1",
        "café",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let nodes: Vec<Node> = servers.split(',').map(|s| s.parse().unwrap()).collect();
    let loc = Locator::new(LocatorConfig::new(HashStrategy::NewCompat), &nodes).unwrap();
    for key in ["user:1", "café"] {
        let expected = nodes[loc.locate(key.as_bytes())].to_string();
        let line = stdout(&o)
            .lines()
            .find(|l| l.starts_with(key))
            .unwrap()
            .to_string();
        assert!(line.ends_with(&expected), "{line} vs {expected}");
    }
    let o = memgroup(&[
        "--servers",
        servers,
        "route",
        "k",
        "--all-strategies",
        "--json",
    ]);
    let rows: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(rows.as_array().unwrap().len(), HashStrategy::ALL.len());
    // `--help` names every strategy.
    let help = stdout(&memgroup(&["--help"]));
    for s in HashStrategy::ALL {
        assert!(help.contains(s.name()), "{s} in {help}");
    }
}

#[test]
fn get_set_delete_touch_incr_decr() {
    let s = Memcached::spawn();
    let addr = s.addr_string();
    let base = ["--servers", addr.as_str()];
    let run = |extra: &[&str]| memgroup(&[&base[..], extra].concat());

    let o = run(&[
        "set",
        "greeting",
        "hello",
        "--flags",
        "7",
        "--exptime",
        "100",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        raw::get(s.addr(), b"greeting").as_deref(),
        Some(&b"hello"[..])
    );
    let o = run(&["get", "greeting"]);
    assert_eq!(stdout(&o), "hello", "one key: the exact bytes");
    let o = run(&["get", "greeting", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v[0]["flags"], 7);

    // Value from stdin.
    let mut child = Command::new(env!("CARGO_BIN_EXE_memgroup"))
        // Each test its own state: no repair journal shared across tests.
        .env("MEMGROUP_REPAIR_JOURNAL", "off")
        .args(["--servers", &addr, "set", "piped", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    std::io::Write::write_all(child.stdin.as_mut().unwrap(), b"from\nstdin").unwrap();
    drop(child.stdin.take());
    assert!(child.wait().unwrap().success());
    assert_eq!(
        raw::get(s.addr(), b"piped").as_deref(),
        Some(&b"from\nstdin"[..])
    );
    // A lone `-` as the value itself: stdin (closed, empty) is not read, or
    // the value stored would be empty.
    let o = Command::new(env!("CARGO_BIN_EXE_memgroup"))
        // Each test its own state: no repair journal shared across tests.
        .env("MEMGROUP_REPAIR_JOURNAL", "off")
        .args(["--servers", &addr, "set", "dash", "-", "--literal"])
        .stdin(Stdio::piped())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(raw::get(s.addr(), b"dash").as_deref(), Some(&b"-"[..]));
    assert!(run(&["append", "dash", "-", "--literal"]).status.success());
    assert!(run(&["ms", "dash2", "-", "--literal"]).status.success());
    assert_eq!(raw::get(s.addr(), b"dash").as_deref(), Some(&b"--"[..]));
    assert_eq!(raw::get(s.addr(), b"dash2").as_deref(), Some(&b"-"[..]));

    assert!(run(&["set", "n", "10"]).status.success());
    assert_eq!(stdout(&run(&["incr", "n", "5"])), "15\n");
    assert_eq!(stdout(&run(&["decr", "n"])), "14\n");
    assert!(run(&["touch", "n", "100"]).status.success());
    // touch takes the stores' flags too; --ttl is --exptime; rm is delete.
    assert!(run(&["touch", "n", "--exptime", "10m"]).status.success());
    assert!(run(&["touch", "n", "--ttl", "100"]).status.success());
    assert_eq!(run(&["touch", "n"]).status.code(), Some(2));
    assert!(run(&["set", "m", "v", "--ttl", "1h"]).status.success());
    assert!(run(&["rm", "m"]).status.success());
    assert_eq!(raw::get(s.addr(), b"m"), None);
    assert!(run(&["delete", "n"]).status.success());
    assert_eq!(raw::get(s.addr(), b"n"), None);

    // Misses exit 1 with a message.
    let o = run(&["get", "n"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("n: not found"), "{}", stderr(&o));
    assert_eq!(run(&["incr", "n"]).status.code(), Some(1));
    // --initial creates the missing counter, then counts.
    assert_eq!(
        stdout(&run(&["incr", "n", "5", "--initial", "100"])),
        "100\n"
    );
    assert_eq!(
        stdout(&run(&["decr", "n", "5", "--initial", "100"])),
        "95\n"
    );
    // (memcached keeps a decremented number's length: "95 ".)
    let stored = raw::get(s.addr(), b"n").unwrap();
    assert_eq!(String::from_utf8_lossy(&stored).trim_end(), "95");
    assert!(run(&["delete", "n"]).status.success());
    assert_eq!(run(&["touch", "n", "5"]).status.code(), Some(1));
    // Invalid keys are usage errors, refused before sending.
    let o = run(&["set", "bad key", "v"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("invalid key"), "{}", stderr(&o));
    // Among valid keys too, for every command taking several: all are
    // checked first, so the server sees no read and no delete of the
    // valid one.
    assert!(run(&["set", "ok", "v"]).status.success());
    let (gets, deletes) = (
        raw::stat(s.addr(), "cmd_get"),
        raw::stat(s.addr(), "delete_hits"),
    );
    for command in ["get", "gets", "exist", "delete", "invalidate"] {
        let o = run(&[command, "ok", "bad key"]);
        assert_eq!(o.status.code(), Some(2), "{command}: {}", stderr(&o));
        assert!(
            stderr(&o).contains(r#"invalid key "bad key""#),
            "{command}: {}",
            stderr(&o)
        );
        assert!(stdout(&o).is_empty(), "{command}: {}", stdout(&o));
    }
    assert_eq!(raw::stat(s.addr(), "cmd_get"), gets);
    assert_eq!(raw::stat(s.addr(), "delete_hits"), deletes);
    assert_eq!(raw::get(s.addr(), b"ok").as_deref(), Some(&b"v"[..]));

    // A write its condition refused exits 1 and says why in the command's
    // own words, the server left as it was.
    let unique = raw::gets(s.addr(), b"ok").expect("ok is there").1;
    let stale = (unique + 1000).to_string();
    for (command, words) in [
        (&["add", "ok", "v2"][..], "not stored: the key exists"),
        (&["replace", "absent", "v2"], "not stored: no such key"),
        (&["append", "absent", "v2"], "not stored: no such key"),
        (
            &["cas", "ok", "v2", "--cas", &stale],
            "not stored: the item changed or is gone",
        ),
        (&["delete", "absent"], "not found"),
        (&["touch", "absent", "5"], "not found"),
        (
            &["md", "absent"],
            "not deleted: not found, or its cas differs",
        ),
    ] {
        let o = run(command);
        assert_eq!(o.status.code(), Some(1), "{command:?}: {}", stderr(&o));
        let line = stdout(&o);
        assert!(
            line.trim_end().ends_with(&format!(": {words}")),
            "{command:?}: {line}"
        );
    }
    assert_eq!(raw::get(s.addr(), b"ok").as_deref(), Some(&b"v"[..]));
    assert_eq!(raw::get(s.addr(), b"absent"), None);
}

/// A zone no group has is refused (every read would be remote, silently),
/// naming the zones there are, or saying that a plain server list has none.
#[test]
fn a_mistyped_zone_is_refused_naming_the_zones() {
    let (a, b) = (Memcached::spawn(), Memcached::spawn());
    let groups = format!("sg1={};sg2={}", a.addr_string(), b.addr_string());
    let o = memgroup(&["--groups", &groups, "--zone", "nope", "get", "k"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains(r#"zone "nope" is no group's zone (the groups' zones: sg1, sg2)"#),
        "{}",
        stderr(&o)
    );
    // The right zone reads (a miss: exit 1, no refusal).
    let o = memgroup(&["--groups", &groups, "--zone", "sg2", "get", "k"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let o = memgroup(&["--servers", &a.addr_string(), "--zone", "sg1", "get", "k"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("no group has a zone"), "{}", stderr(&o));
}

#[test]
fn flush_needs_yes_and_stats_reports_every_server() {
    let a = [Memcached::spawn(), Memcached::spawn()];
    let b = [Memcached::spawn()];
    let groups = format!("sg1={};sg2={}", list(&a), list(&b));
    let run = |extra: &[&str]| memgroup(&[&["--groups", groups.as_str()][..], extra].concat());
    assert!(run(&["set", "k", "v"]).status.success());

    let o = run(&["stats", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let rows: Vec<serde_json::Value> = serde_json::from_str(&stdout(&o)).unwrap();
    let rows: Vec<_> = rows.iter().filter(|r| r["kind"] == "server").collect();
    assert_eq!(rows.len(), 3);
    let items: u64 = rows.iter().map(|r| r["curr_items"].as_u64().unwrap()).sum();
    assert_eq!(items, 2, "one copy per group");
    let o = run(&["stats", "--group", "sg2"]);
    assert!(stdout(&o).contains(&b[0].addr_string()));
    assert!(!stdout(&o).contains(&a[0].addr_string()));
    // `general` (memcached itself answers `stats general` with ERROR): every
    // general statistic of each server, its item count the server's own.
    let o = run(&["stats", "general", "--json", "--group", "sg2"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let rows: Vec<serde_json::Value> = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["server"], b[0].addr_string());
    let curr_items: u64 = rows[0]["stats"]["curr_items"]
        .as_str()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no curr_items in {rows:?}"));
    assert_eq!(curr_items, raw::stat(b[0].addr(), "curr_items"));
    assert_eq!(curr_items, 1);

    let o = run(&["flush", "--group", "sg2"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--yes"));
    assert!(run(&["flush", "--group", "sg2", "--yes"]).status.success());
    assert_eq!(raw::get(b[0].addr(), b"k"), None);
    assert!(
        a.iter().any(|s| raw::get(s.addr(), b"k").is_some()),
        "sg1 untouched"
    );
    // Several groups: which one must be said.
    let o = run(&["flush", "--yes"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--group (sg1, sg2)"), "{}", stderr(&o));
    // One group (a plain server list): no name needed.
    let one = memgroup(&["--servers", &b[0].addr_string(), "set", "k", "v"]);
    assert!(one.status.success());
    let one = memgroup(&["--servers", &b[0].addr_string(), "flush", "--yes"]);
    assert!(one.status.success(), "{}", stderr(&one));
    assert_eq!(raw::get(b[0].addr(), b"k"), None);
    let o = run(&["flush", "--group", "nope", "--yes"]);
    assert_eq!(o.status.code(), Some(2));
    // The error names the groups the cluster has.
    assert!(
        stderr(&o).contains(r#"unknown group "nope" (the cluster's groups: sg1, sg2)"#),
        "{}",
        stderr(&o)
    );
}

/// A command line clap refuses (an unknown flag, a missing key) is exit 2
/// with clap's message and tip but not its `Usage:` line, which would list
/// the flags typed as if the command required them.
#[test]
fn a_refused_command_line_shows_no_usage_line_of_flags_typed() {
    for args in [
        &["--groups", "sg1=127.0.0.1:1", "get", "k", "--bogus"][..],
        &["--groups", "sg1=127.0.0.1:1", "get"],
    ] {
        let o = memgroup(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = stderr(&o);
        assert!(err.starts_with("error: "), "{err}");
        assert!(err.contains("try '--help'"), "{err}");
        assert!(!err.contains("Usage:"), "{err}");
        assert!(!err.contains("--groups <GROUPS>"), "{err}");
    }
}

#[test]
fn bad_configuration_is_one_clear_line_and_exit_2() {
    let cases: &[(&[&str], &str)] = &[
        (&["--servers", "127.0.0.1:99999", "get", "k"], "99999"),
        (&["--servers", "", "get", "k"], ""),
        (
            &["--servers", "127.0.0.1:1", "--hash", "sha1", "get", "k"],
            "sha1",
        ),
        (
            &["--groups", "sg1=127.0.0.1:1;sg1=127.0.0.1:2", "get", "k"],
            "sg1",
        ),
        (&["--servers", "127.0.0.1:1:0", "get", "k"], "127.0.0.1:1:0"),
        // Another scheme: the hint names the URL form taken.
        (
            &["--servers", "memcached://127.0.0.1:1", "get", "k"],
            "or a memcache:// URL",
        ),
        (
            &[
                "--servers",
                "127.0.0.1:1",
                "--read-fallback",
                "bogus",
                "get",
                "k",
            ],
            "(read fallbacks: never, one-more, all-copies)",
        ),
        (&["get", "k"], "no servers"),
        (
            &[
                "--servers",
                "127.0.0.1:1",
                "--write-policy",
                "most",
                "get",
                "k",
            ],
            "most",
        ),
        (
            &["--servers", "127.0.0.1:1", "bench", "--ratio", "x"],
            "ratio",
        ),
        (
            &["--servers", "127.0.0.1:1", "bench", "--rate", "0"],
            "--rate",
        ),
        (
            &["--servers", "127.0.0.1:1", "bench", "--duration=-1"],
            "--duration",
        ),
        (
            &["--servers", "127.0.0.1:1", "bench", "--duration", "NaN"],
            "--duration",
        ),
    ];
    for (args, token) in cases {
        let o = memgroup(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        let err = stderr(&o);
        assert!(err.contains(token), "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
    }
    // A bad cluster.toml (every rule is unit-tested in memgroup::config):
    // the tool names the file and the place, on one line.
    let dir = crate::support::tempdir::Dir::new("badcfg");
    let files: &[(&str, &str)] = &[
        ("hash = \n", "line 1, column 8: invalid string"),
        ("write_policy = \"most\"\n", "write_policy: "),
        (
            "[[groups]]\nname = \"sg1\"\nservers = [\"127.0.0.1:99999\"]\n",
            "group \"sg1\": ",
        ),
        ("hash = \"native\"\n", "no servers"),
    ];
    for (i, (text, token)) in files.iter().enumerate() {
        let path = dir.path().join(format!("{i}.toml"));
        std::fs::write(&path, text).unwrap();
        let o = memgroup(&["--config", path.to_str().unwrap(), "get", "k"]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{text:?}: {err}");
        assert!(err.contains(token), "{text:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{text:?}: {err}");
    }
}

#[test]
fn unreachable_server_fails_fast_with_a_clear_message() {
    // A port nothing listens on: reserve one, then close it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let server = format!("127.0.0.1:{port}");
    for args in [vec!["get", "k"], vec!["set", "k", "v"], vec!["stats"]] {
        let started = Instant::now();
        let o = memgroup(
            &[
                &["--servers", server.as_str(), "--timeout-ms", "500"][..],
                &args,
            ]
            .concat(),
        );
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        assert!(started.elapsed() < Duration::from_secs(10));
        let err = stderr(&o);
        let out = stdout(&o);
        assert!(
            err.contains(&server) || out.contains(&server),
            "{args:?}: {err}{out}"
        );
    }
}

#[test]
fn bench_reports_percentiles() {
    let s = Memcached::spawn();
    let o = memgroup(&[
        "--servers",
        &s.addr_string(),
        "--json",
        "bench",
        "--ops",
        "2000",
        "--keys",
        "100",
        "--concurrency",
        "8",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let report: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    let report = &report[0];
    assert_eq!(report["ops"], 2000);
    assert_eq!(report["errors"], 0);
    let get = &report["ops_detail"][0];
    assert_eq!(get["op"], "get");
    assert!(get["p50_us"].as_u64().unwrap() <= get["p99_us"].as_u64().unwrap());
    assert!(raw::stat(s.addr(), "cmd_set") >= 100);
    // Without --json, it says first what it writes (on stderr).
    let o = memgroup(&[
        "--servers",
        &s.addr_string(),
        "bench",
        "--ops",
        "10",
        "--keys",
        "5",
        "--prefix",
        "b:",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("first writing 5 keys (b:0 … b:4, 100 bytes each)"),
        "{}",
        stderr(&o)
    );
}

/// `bench --rate`: the open loop issues its requests on a fixed schedule
/// whatever their latency, so a stalled server cannot hold requests back
/// (coordinated omission): every scheduled request is issued and counted.
/// Timing is checked in bands only.
#[test]
fn bench_open_loop_keeps_its_schedule() {
    let s = Memcached::spawn();
    let addr = s.addr_string();
    let bench = |extra: &[&str]| {
        let o = memgroup(
            &[
                &["--servers", &addr, "--json", "bench", "--keys", "100"],
                extra,
            ]
            .concat(),
        );
        let report: serde_json::Value = serde_json::from_str(stdout(&o).trim())
            .unwrap_or_else(|e| panic!("{e}: {}{}", stdout(&o), stderr(&o)));
        let records = report.as_array().expect("one JSON array");
        assert_eq!(records.len(), 1, "one summary record: {report}");
        (o, records[0].clone())
    };

    let (o, r) = bench(&["--rate", "500", "--duration", "1"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(r["rate"], 500.0, "{r}");
    assert_eq!(r["ops"], 500, "every scheduled request is issued: {r}");
    let achieved = r["ops_per_second"].as_f64().unwrap();
    assert!((250.0..=550.0).contains(&achieved), "{r}");
    assert_eq!(r["errors"], 0, "{r}");
    assert_eq!(r["late"], 0, "{r}");
    let get = &r["ops_detail"][0];
    assert_eq!(get["op"], "get", "{r}");
    let (p50, p99, max) = (&get["p50_us"], &get["p99_us"], &get["max_us"]);
    assert!(p50.as_u64().unwrap() <= p99.as_u64().unwrap(), "{r}");
    assert!(p99.as_u64().unwrap() <= max.as_u64().unwrap(), "{r}");
    assert!(
        r["slower_than_timeout_percent"].as_f64().unwrap() < 50.0,
        "{r}"
    );
    let lag = r["send_lag_p50_us"].as_u64().unwrap();
    assert!(lag <= r["send_lag_max_us"].as_u64().unwrap(), "{r}");

    // A stopped server: its requests time out (and once it is marked down,
    // fail at once). The open loop issues all 200 on schedule, and reports
    // the share that got no answer within the timeout; with a cap of 5
    // outstanding, the requests due while 5 wait are sent late, not skipped.
    s.stop();
    let stalled = [
        "--timeout-ms",
        "100",
        "--no-prefill",
        "--rate",
        "200",
        "--duration",
        "1",
    ];
    let (o, r) = bench(&stalled);
    let (capped_o, capped) = bench(&[&stalled[..], &["--concurrency", "5"]].concat());
    s.resume();
    assert_eq!(o.status.code(), Some(1), "requests failed: {r}");
    assert_eq!(r["ops"], 200, "{r}");
    assert_eq!(r["timeout_ms"], 100, "{r}");
    let slow = r["slower_than_timeout"].as_u64().unwrap();
    assert!(slow >= 100, "{r}");
    assert!(r["errors"].as_u64().unwrap() > 0, "{r}");
    assert!(
        r["slower_than_timeout_percent"].as_f64().unwrap() >= 50.0,
        "{r}"
    );
    assert_eq!(capped_o.status.code(), Some(1), "{capped}");
    assert_eq!(capped["ops"], 200, "none skipped: {capped}");
    assert!(capped["late"].as_u64().unwrap() > 0, "{capped}");
    assert!(
        capped["slower_than_timeout"].as_u64().unwrap() >= 100,
        "{capped}"
    );
}

/// Sizes from 1 B to 500 KiB, mostly small.
fn value_for(i: usize) -> Vec<u8> {
    let len = match i {
        i if i % 1000 == 0 => 500 * 1024,
        i if i % 100 == 0 => 50 * 1024,
        i if i % 10 == 0 => 5 * 1024,
        i => 1 + i % 200,
    };
    (0..len).map(|j| (i * 31 + j * 7) as u8).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn warm_copies_every_live_key_once_with_value_flags_and_ttl() {
    let big = ["-m", "512"];
    let source: Vec<Memcached> = (0..3).map(|_| Memcached::spawn_with(&big)).collect();
    let target: Vec<Memcached> = (0..3).map(|_| Memcached::spawn_with(&big)).collect();
    let groups = format!("src={};dst={}", list(&source), list(&target));
    let groups_again = groups.clone();
    let client = Client::builder()
        .evcache_groups(&groups)
        .pool_size(6)
        .build()
        .unwrap();

    const N: usize = 50_000;
    // TTLs: none, minutes, an hour, and past 30 days (sent as an absolute time).
    let ttl = move |i: usize| match i % 4 {
        0 => 0,
        1 => 300,
        2 => 3600,
        _ => 40 * 24 * 3600,
    };
    let keys: Vec<String> = (0..N).map(|i| format!("w:{i}")).collect();
    for chunk in (0..N).collect::<Vec<_>>().chunks(200) {
        let writes = chunk.iter().map(|&i| {
            let client = client.clone();
            let key = keys[i].clone();
            tokio::spawn(async move {
                client
                    .add_or_set(
                        &key,
                        value_for(i),
                        WriteOptions::new()
                            .flags((i as u32).wrapping_mul(2_654_435_761))
                            .expiry(ttl(i)),
                        &["src"],
                        IfPresent::Overwrite,
                    )
                    .await
            })
        });
        for w in writes.collect::<Vec<_>>() {
            w.await.unwrap().unwrap();
        }
    }
    let sets_before: u64 = target.iter().map(|s| raw::stat(s.addr(), "cmd_set")).sum();
    assert_eq!(sets_before, 0);

    let o = tokio::task::spawn_blocking(move || {
        memgroup(&[
            "--groups",
            &groups,
            "--pool-size",
            "6",
            "--json",
            "warm",
            "--from",
            "src",
            "--to",
            "dst",
            "--verify",
        ])
    })
    .await
    .unwrap();
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    let report: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    let report = &report[0];
    assert_eq!(report["keys"], N as u64, "{report}");
    assert_eq!(report["copied"], N as u64, "{report}");
    assert_eq!(report["errors"], 0);
    assert_eq!(report["missing"], 0);

    // Exactly one write per copied key landed in the target group.
    let sets: u64 = target.iter().map(|s| raw::stat(s.addr(), "cmd_set")).sum();
    assert_eq!(sets, N as u64);

    // Value, flags and TTL (±2 s) survived.
    let dst_only = format!("dst={}", list(&target));
    let src_only = format!("src={}", list(&source));
    let dst = Client::builder().evcache_groups(&dst_only).build().unwrap();
    let src = Client::builder().evcache_groups(&src_only).build().unwrap();
    for chunk in keys.chunks(1000) {
        let got = dst.get_multi(chunk).await.unwrap();
        assert_eq!(got.hit_count(), chunk.len());
        for k in chunk {
            let i: usize = k[2..].parse().unwrap();
            let item = &got[k.as_bytes()];
            assert_eq!(item.value, value_for(i), "{k}");
            assert_eq!(item.flags, (i as u32).wrapping_mul(2_654_435_761), "{k}");
        }
    }
    for i in (0..N).step_by(97) {
        let flags = [MetaFlag::ReturnTtl];
        let t_dst = dst
            .meta_get(&keys[i], &flags)
            .await
            .unwrap()
            .unwrap()
            .ttl()
            .unwrap();
        let t_src = src
            .meta_get(&keys[i], &flags)
            .await
            .unwrap()
            .unwrap()
            .ttl()
            .unwrap();
        // Up to a second each: the two servers' clocks tick at different
        // fractions of a second, the warmer counts whole seconds since it
        // read the source's clock, and the two reads may straddle a tick.
        assert!(
            (t_dst - t_src).abs() <= 3,
            "{}: ttl {t_dst} vs {t_src}",
            keys[i]
        );
        assert_eq!(t_dst == -1, ttl(i) == 0);
    }

    // `-q`: a warm that succeeds (every key already there) prints nothing;
    // its exit code says it.
    let o = tokio::task::spawn_blocking(move || {
        memgroup(&[
            "--groups",
            &groups_again,
            "-q",
            "warm",
            "--from",
            "src",
            "--to",
            "dst",
        ])
    })
    .await
    .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "", "-q warm printed its summary");
}

/// `--value-format` decodes what a format stored (here EVCache's gzip), `set
/// --type` encodes per the format, and `--json` stays binary-safe.
#[test]
fn value_formats_in_the_tool() {
    let s = Memcached::spawn();
    let addr = s.addr_string();
    let run = |args: &[&str]| memgroup(&[&["--servers", addr.as_str()][..], args].concat());
    let long = "a".repeat(500);
    let o = run(&[
        "--value-format",
        "evcache",
        "set",
        "text",
        &long,
        "--type",
        "string",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    // EVCache compressed it: raw shows gzip bytes (base64 in JSON)…
    let o = run(&["get", "text", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v[0]["flags"], 2);
    assert_eq!(v[0]["encoding"], "base64");
    // …and the format reads the text.
    let o = run(&["--value-format", "evcache", "get", "text", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v[0]["type"], "string");
    assert_eq!(v[0]["value"], long.as_str());
    let o = run(&[
        "--value-format",
        "evcache",
        "set",
        "n",
        "42",
        "--type",
        "long",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(raw::get(s.addr(), b"n").as_deref(), Some(&[42u8][..]));
    let o = run(&["--value-format", "evcache", "get", "n"]);
    assert_eq!(stdout(&o), "42");
    // A bad value for the type is a usage error.
    let o = run(&[
        "--value-format",
        "evcache",
        "set",
        "n",
        "forty",
        "--type",
        "long",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("is not a long"), "{}", stderr(&o));
    // The raw format stores bytes: a typed number is refused (`get` would
    // print its encoding's bytes), text is stored as it is.
    let o = run(&["set", "visits", "41", "--type", "long"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--value-format"), "{}", stderr(&o));
    assert_eq!(raw::get(s.addr(), b"visits"), None);
    assert!(
        run(&["set", "visits", "41", "--type", "string"])
            .status
            .success()
    );
    assert_eq!(stdout(&run(&["get", "visits"])), "41");
    // The other stores take --type too, encoded as `set` encodes it.
    let evcache = |args: &[&str]| run(&[&["--value-format", "evcache"][..], args].concat());
    assert!(
        evcache(&["add", "m", "7", "--type", "long"])
            .status
            .success()
    );
    assert_eq!(raw::get(s.addr(), b"m").as_deref(), Some(&[7u8][..]));
    assert!(
        evcache(&["replace", "m", "8", "--type", "long"])
            .status
            .success()
    );
    let o = evcache(&["--json", "gets", "m"]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v[0]["value"], 8, "{v}");
    let unique = v[0]["cas"].to_string();
    let o = evcache(&["cas", "m", "9", "--cas", &unique, "--type", "long"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&evcache(&["get", "m"])), "9");
    // `--protocol` prints what memcached sent (the format's bytes), for get
    // and gets alike.
    let o = evcache(&["get", "--protocol", "m"]);
    assert_eq!(o.stdout, b"VALUE m 768 1\r\n\x09\r\nEND\r\n", "{o:?}");
    let o = evcache(&["gets", "--protocol", "m"]);
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        text.starts_with("VALUE m 768 1 ") && text.ends_with("\r\n\x09\r\nEND\r\n"),
        "{text:?}"
    );
    let o = evcache(&["append", "m", "1", "--type", "long"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("--type does not apply"),
        "{}",
        stderr(&o)
    );
    let o = run(&["add", "m2", "7", "--type", "long"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(raw::get(s.addr(), b"m2"), None);
    // Corrupt compressed data (gzip flag, not gzip): a clear error naming
    // the key, exit 1.
    {
        use std::io::{Read, Write};
        let mut c = std::net::TcpStream::connect(s.addr()).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        c.write_all(b"set junk 2 0 11\r\n\x1f\x8b not gzip\r\n")
            .unwrap();
        let mut reply = [0u8; 8];
        c.read_exact(&mut reply).unwrap();
        assert_eq!(&reply, b"STORED\r\n");
    }
    let o = run(&["--value-format", "evcache", "get", "junk"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("junk") && stderr(&o).contains("gzip"),
        "{}",
        stderr(&o)
    );
}

/// Text a server sends (an error message, a version) never reaches the
/// terminal with raw control characters: a hostile peer (a fault injector)
/// answering with escape sequences cannot rewrite the operator's screen.
#[test]
fn server_text_is_shown_without_control_characters() {
    let addr = fault_peer(|_, peer| {
        let _ = peer.write_all(b"SERVER_ERROR \x1b]0;pwned\x07\x1b[2J gone\r\n");
        true
    });
    let o = memgroup(&["--servers", &addr, "get", "k"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("SERVER_ERROR"), "{err}");
    assert!(
        !err.contains(['\x1b', '\x07']),
        "raw control characters: {err:?}"
    );
    assert!(err.contains("\\u{1b}"), "shown escaped: {err:?}");
}

/// Absurd counters from a server (a fault injector answering `stats`) do not
/// overflow the per-group totals: they saturate, no panic.
#[test]
fn absurd_stats_counters_saturate_in_the_totals() {
    let peer = || {
        fault_peer(|_, peer| {
            let max = u64::MAX;
            let reply = format!(
                "STAT version 1.6.18\r\nSTAT uptime {max}\r\nSTAT curr_items {max}\r\n\
                 STAT get_hits {max}\r\nSTAT get_misses {max}\r\nSTAT cmd_set {max}\r\nEND\r\n"
            );
            peer.write_all(reply.as_bytes()).is_ok()
        })
    };
    let servers = format!("{},{}", peer(), peer());
    let o = memgroup(&["--servers", &servers, "stats"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains(&u64::MAX.to_string()), "{}", stdout(&o));
}

/// A key the dump lists but no client could request (stored through a
/// base64 meta key: here with a space and a control character) is one
/// error, and the good keys of its batch are still copied.
#[test]
fn warm_skips_an_unrequestable_key_and_copies_the_rest() {
    let src = Memcached::spawn();
    let dst = Memcached::spawn();
    for i in 0..20 {
        raw::set(src.addr(), format!("good:{i}").as_bytes(), b"v");
    }
    {
        use std::io::{Read, Write};
        let mut c = std::net::TcpStream::connect(src.addr()).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut key = Vec::new();
        memgroup::proto::base64_encode(b"bad key\x01", &mut key);
        c.write_all(&[b"ms ", &key[..], b" 1 b\r\nx\r\n"].concat())
            .unwrap();
        let mut reply = [0u8; 4];
        c.read_exact(&mut reply).unwrap();
        assert_eq!(&reply, b"HD\r\n");
    }
    let groups = format!("src={};dst={}", src.addr_string(), dst.addr_string());
    let o = memgroup(&[
        "--groups", &groups, "--json", "warm", "--from", "src", "--to", "dst",
    ]);
    let report: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    let report = &report[0];
    assert_eq!(report["copied"], 20, "{report}");
    assert_eq!(report["errors"], 1, "{report}");
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("not a valid memcached key"),
        "{}",
        stderr(&o)
    );
    assert!(!stderr(&o).contains('\x01'), "{:?}", stderr(&o));
    assert_eq!(raw::stat(dst.addr(), "curr_items"), 20);
}

/// `warm` against a source whose metadump never answers (a fault injector
/// that answers `stats` and then stays silent) fails with a timeout error
/// after the operation timeout, instead of waiting minutes.
#[test]
fn warm_gives_up_on_a_silent_metadump_source_after_the_timeout() {
    let addr = fault_peer(|request, peer| {
        if request.starts_with(b"stats") {
            let _ = peer.write_all(b"STAT time 1700000000\r\nEND\r\n");
        }
        // Anything else (the metadump): silence.
        true
    });
    let dst = Memcached::spawn();
    let groups = format!("src={addr};dst={}", dst.addr_string());
    let o = memgroup(&[
        "--groups",
        &groups,
        "--timeout-ms",
        "300",
        "warm",
        "--from",
        "src",
        "--to",
        "dst",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("timed out"), "{}", stderr(&o));
}

/// A `memcache://` URL in `--servers` / MEMCACHED_SERVERS, and MEMGROUP_GROUPS,
/// route exactly as the equivalent flags do.
#[test]
fn urls_and_environment_route_like_the_flags() {
    let route = |args: &[&str], env: &[(&str, &str)]| {
        let o = Command::new(env!("CARGO_BIN_EXE_memgroup"))
            // Each test its own state: no repair journal shared across tests.
            .env("MEMGROUP_REPAIR_JOURNAL", "off")
            .args(args)
            .env_remove("MEMCACHED_SERVERS")
            .env_remove("MEMGROUP_GROUPS")
            .env_remove("MEMGROUP_CONFIG")
            .envs(env.iter().copied())
            .output()
            .unwrap();
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        stdout(&o)
    };
    fn with<'a>(pre: &[&'a str]) -> Vec<&'a str> {
        [pre, &["route", "user:1", "user:2", "café", "k9"][..]].concat()
    }
    let flags = route(
        &with(&[
            "--servers",
            "10.0.0.1:11211,10.0.0.2:11211:3",
            "--hash",
            "native",
        ]),
        &[],
    );
    let url = "memcache://10.0.0.1:11211,10.0.0.2:11211:3?hash=native";
    assert_eq!(route(&with(&["--servers", url]), &[]), flags);
    assert_eq!(route(&with(&[]), &[("MEMCACHED_SERVERS", url)]), flags);
    let groups = "a=10.0.0.1:11211;b=10.0.0.2:11211,10.0.0.3:11211";
    assert_eq!(
        route(&with(&[]), &[("MEMGROUP_GROUPS", groups)]),
        route(&with(&["--groups", groups]), &[])
    );
    // A bad URL is one line and exit 2.
    let o = memgroup(&["--servers", "memcache://h:1?hash=sha1", "route", "k"]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(stderr(&o).trim_end().lines().count(), 1, "{}", stderr(&o));
}

/// The libmemcached-like commands: add/replace/append/prepend, gets + cas,
/// exist, version, stats sections; each happy path and its failure exit.
#[test]
fn conditional_stores_gets_cas_exist_version_and_stats_sections() {
    let s = Memcached::spawn();
    let addr = s.addr_string();
    let run = |args: &[&str]| memgroup(&[&["--servers", addr.as_str()][..], args].concat());
    assert!(run(&["add", "a", "1"]).status.success());
    // add and replace take --flags as set does; append/prepend refuse it.
    assert!(run(&["add", "fl", "v", "--flags", "7"]).status.success());
    let o = run(&["--json", "get", "fl"]);
    assert_eq!(json_array(&o)[0]["flags"], 7);
    assert!(
        run(&["replace", "fl", "w", "--flags", "9"])
            .status
            .success()
    );
    assert_eq!(json_array(&run(&["--json", "get", "fl"]))[0]["flags"], 9);
    assert_eq!(
        run(&["append", "fl", "x", "--flags", "1"]).status.code(),
        Some(2)
    );
    assert_eq!(
        run(&["add", "a", "2"]).status.code(),
        Some(1),
        "add of a present key"
    );
    assert_eq!(
        run(&["replace", "zz", "2"]).status.code(),
        Some(1),
        "replace of an absent key"
    );
    assert!(run(&["replace", "a", "3"]).status.success());
    assert!(run(&["append", "a", "x"]).status.success());
    assert!(run(&["prepend", "a", "y"]).status.success());
    assert_eq!(raw::get(s.addr(), b"a").as_deref(), Some(&b"y3x"[..]));
    let o = run(&["--json", "gets", "a"]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let cas = v[0]["cas"].as_u64().unwrap().to_string();
    assert!(run(&["cas", "a", "new", "--cas", &cas]).status.success());
    assert_eq!(
        run(&["cas", "a", "stale", "--cas", &cas]).status.code(),
        Some(1)
    );
    assert_eq!(raw::get(s.addr(), b"a").as_deref(), Some(&b"new"[..]));
    assert_eq!(run(&["gets", "nope"]).status.code(), Some(1));
    assert!(run(&["exist", "a"]).status.success());
    assert_eq!(run(&["exist", "a", "nope"]).status.code(), Some(1));
    let o = run(&["version"]);
    assert!(stdout(&o).contains("1.6"), "{}", stdout(&o));
    let o = run(&["--json", "stats", "settings"]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v[0]["stats"]["tcpport"], s.addr().port().to_string());
    // A bad key is a usage error, an unknown stats section a server refusal.
    assert_eq!(run(&["add", "bad key", "1"]).status.code(), Some(2));
    assert_eq!(run(&["stats", "nonsense"]).status.code(), Some(1));
    // Every byte value round-trips exactly: set -, get, and --json (base64).
    let all: Vec<u8> = (0..=255u8).collect();
    let mut child = Command::new(env!("CARGO_BIN_EXE_memgroup"))
        // Each test its own state: no repair journal shared across tests.
        .env("MEMGROUP_REPAIR_JOURNAL", "off")
        .args(["--servers", &addr, "set", "bin", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    std::io::Write::write_all(child.stdin.as_mut().unwrap(), &all).unwrap();
    drop(child.stdin.take());
    assert!(child.wait().unwrap().success());
    assert_eq!(run(&["get", "bin"]).stdout, all);
    let v: serde_json::Value =
        serde_json::from_str(&stdout(&run(&["--json", "get", "bin"]))).unwrap();
    assert_eq!(v[0]["encoding"], "base64");
    let decoded = memgroup::proto::base64_decode(v[0]["value"].as_str().unwrap().as_bytes());
    assert_eq!(decoded.as_deref(), Some(&all[..]));
}

/// `keys` lists exactly the keys stored on a group of three servers; `ping`
/// reports each server and exits 1 when one is down; `cp` stores files under
/// their names.
#[test]
fn keys_ping_and_cp() {
    let servers: Vec<Memcached> = (0..3).map(|_| Memcached::spawn()).collect();
    let list = list(&servers);
    let run = |args: &[&str]| memgroup(&[&["--servers", list.as_str()][..], args].concat());
    let stored: Vec<String> = (0..120).map(|i| format!("k:{i}")).collect();
    for k in &stored {
        assert!(run(&["set", k, "v"]).status.success());
    }
    assert!(run(&["set", "other", "v"]).status.success());
    // The crawler can miss an item in one pass (a concurrent request holds
    // it): ask again until the listing settles, as the warmer does.
    let mut names = Vec::new();
    for _ in 0..50 {
        let o = run(&["--json", "keys", "--prefix", "k:"]);
        assert!(o.status.success(), "{}", stderr(&o));
        let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
        names = v
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["key"].as_str().unwrap().to_string())
            .collect();
        if names.len() == stored.len() {
            break;
        }
    }
    names.sort();
    let mut want = stored.clone();
    want.sort();
    assert_eq!(names, want);
    let o = run(&["--json", "keys", "--prefix", "k:", "--limit", "7"]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v.as_array().unwrap().len(), 7);
    // Stored without an expiry: no Unix time, no time left.
    assert!(
        v.as_array()
            .unwrap()
            .iter()
            .all(|r| r["expires_at"].is_null() && r["ttl_s"].is_null())
    );
    // One that expires: its Unix time, and the time left in the table.
    assert!(
        run(&["set", "brief", "v", "--exptime", "10m"])
            .status
            .success()
    );
    let o = run(&["--json", "keys", "--prefix", "brief"]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let ttl = v[0]["ttl_s"].as_u64().unwrap();
    assert!((590..=600).contains(&ttl), "{v}");
    assert!(v[0]["expires_at"].as_u64().unwrap() > 1_700_000_000, "{v}");
    let o = run(&["keys", "--prefix", "brief"]);
    assert!(
        stdout(&o).contains(" in 9m") || stdout(&o).contains(" in 10m0s"),
        "{}",
        stdout(&o)
    );
    // `-q`: the keys alone, one a line (for xargs).
    let o = run(&["-q", "keys", "--prefix", "k:", "--limit", "3"]);
    let out = stdout(&o);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "{out}");
    assert!(
        lines.iter().all(|k| stored.iter().any(|s| s == k)),
        "{lines:?}"
    );

    let o = run(&["--json", "ping", "--count", "2"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v.as_array().unwrap().len(), 3);
    assert!(v.as_array().unwrap().iter().all(|s| s["up"] == true));
    // Each server with its group, round trips in whole microseconds.
    assert!(
        v.as_array()
            .unwrap()
            .iter()
            .all(|s| s["group"].is_string() && s["min_us"].is_u64() && s["avg_us"].is_u64())
    );
    let dead = format!("{list},127.0.0.1:1");
    let o = memgroup(&["--servers", &dead, "ping", "--count", "1"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stdout(&o).contains("down"), "{}", stdout(&o));

    let dir = crate::support::tempdir::Dir::new("cp");
    let file = dir.path().join("notes.txt");
    std::fs::write(&file, b"file contents\n").unwrap();
    assert!(run(&["cp", file.to_str().unwrap()]).status.success());
    assert_eq!(run(&["get", "notes.txt"]).stdout, b"file contents\n");
    // One file under a key of its own; a directory, or --key with several
    // files, is a usage error that stores nothing.
    let path = file.to_str().unwrap();
    assert!(run(&["cp", "--key", "motd", path]).status.success());
    assert_eq!(run(&["get", "motd"]).stdout, b"file contents\n");
    let o = run(&["cp", "--key", "both", path, path]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(run(&["get", "both"]).status.code(), Some(1));
    let o = run(&["cp", dir.path().to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("is a directory"), "{}", stderr(&o));
    // A directory among files: none of them is stored.
    let other = dir.path().join("other.txt");
    std::fs::write(&other, b"other").unwrap();
    let o = run(&["cp", other.to_str().unwrap(), dir.path().to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(run(&["get", "other.txt"]).status.code(), Some(1));
    let o = run(&["cp", dir.path().join("absent").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
}

/// `--help` lists exit codes and examples; completions come from the same
/// definition; `-q` keeps write reports quiet but still prints values.
#[test]
fn help_completions_and_quiet() {
    let o = memgroup(&["--help"]);
    assert!(stdout(&o).contains("Exit codes:") && stdout(&o).contains("Examples:"));
    for shell in ["bash", "zsh", "fish"] {
        let o = memgroup(&["completions", shell]);
        assert!(o.status.success(), "{shell}: {}", stderr(&o));
        for sub in ["warm", "bench", "keys", "cas"] {
            assert!(stdout(&o).contains(sub), "{shell} completions lack {sub}");
        }
    }
    let s = Memcached::spawn();
    let addr = s.addr_string();
    let o = memgroup(&["--servers", &addr, "-q", "set", "k", "v"]);
    assert!(o.status.success());
    assert_eq!(stdout(&o), "", "quiet write");
    let o = memgroup(&["--servers", &addr, "-q", "add", "k", "v"]);
    assert_eq!(o.status.code(), Some(1), "still the exit code");
    assert_eq!(
        stdout(&memgroup(&["--servers", &addr, "-q", "get", "k"])),
        "v"
    );
}

/// Client settings reach the tool by flag, and `flush` speaks JSON too.
#[test]
fn client_settings_by_flag_and_flush_json() {
    let s = Memcached::spawn();
    let addr = s.addr_string();
    let o = memgroup(&[
        "--servers",
        &addr,
        "--max-value-size",
        "10",
        "set",
        "k",
        "0123456789ABCDEF",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("exceeds the 10-byte limit"),
        "{}",
        stderr(&o)
    );
    // The same limit from cluster.toml; the flag wins over the file.
    let dir = crate::support::tempdir::Dir::new("limits");
    let config = dir.path().join("cluster.toml");
    let text = format!("max_value_size = 10\n[[groups]]\nname = \"g\"\nservers = [\"{addr}\"]\n");
    std::fs::write(&config, text).unwrap();
    let config = config.to_str().unwrap();
    let o = memgroup(&["--config", config, "set", "k", "0123456789ABCDEF"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("exceeds the 10-byte limit"),
        "{}",
        stderr(&o)
    );
    let o = memgroup(&[
        "--config",
        config,
        "--max-value-size",
        "100",
        "set",
        "k",
        "0123456789ABCDEF",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = memgroup(&[
        "--servers",
        &addr,
        "--no-merge-gets",
        "--max-in-flight",
        "4",
        "--connect-timeout-ms",
        "500",
        "--backoff-ms",
        "100",
        "--no-failover",
        "set",
        "k",
        "v",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = memgroup(&[
        "--servers",
        &addr,
        "--json",
        "flush",
        "--group",
        "default",
        "--yes",
    ]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v[0]["flushed"], true);
    assert_eq!(
        memgroup(&["--servers", &addr, "get", "k"]).status.code(),
        Some(1)
    );
}

/// A metadump source that keeps listing keys (a fault injector whose stats
/// say it holds 5 items) is refused by `warm`, `keys` and `route --compare
/// --from-cluster` at a bound derived from its `curr_items`, instead of
/// filling memory.
#[test]
fn a_metadump_listing_far_more_keys_than_the_server_holds_is_refused() {
    let addr = fault_peer(|request, peer| {
        if request.starts_with(b"stats") {
            let _ = peer.write_all(b"STAT time 1700000000\r\nSTAT curr_items 5\r\nEND\r\n");
        } else if request.starts_with(b"lru_crawler") {
            // Keys for ever, until the client hangs up.
            for i in 0u64.. {
                let line = format!("key=k{i} exp=-1 la=1 cas=1 fetch=no cls=1 size=60\n");
                if peer.write_all(line.as_bytes()).is_err() {
                    return false;
                }
            }
        }
        true
    });
    let dst = Memcached::spawn();
    let groups = format!("src={addr};dst={}", dst.addr_string());
    for args in [
        &["--groups", &groups, "warm", "--from", "src", "--to", "dst"][..],
        &["--servers", &addr, "keys"][..],
        &[
            "--servers",
            &addr,
            "route",
            "--compare",
            &addr,
            "--from-cluster",
        ][..],
    ] {
        let o = memgroup(args);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("more than 10010 keys"),
            "{args:?}: {}",
            stderr(&o)
        );
    }
}

/// The one JSON document of a run: stdout must be exactly one JSON array on
/// one line (not one object per line, not a bare object).
fn json_array(o: &Output) -> Vec<serde_json::Value> {
    let out = stdout(o);
    assert_eq!(out.trim_end().lines().count(), 1, "one line: {out}");
    match serde_json::from_str(&out) {
        Ok(serde_json::Value::Array(records)) => records,
        other => panic!("not one JSON array ({other:?}): {out}"),
    }
}

/// Every stderr line of a `--json` run, each a JSON object.
fn json_errors(o: &Output) -> Vec<serde_json::Value> {
    stderr(o)
        .lines()
        .map(|line| match serde_json::from_str(line) {
            Ok(v @ serde_json::Value::Object(_)) => v,
            other => panic!("stderr line is no JSON object ({other:?}): {line}"),
        })
        .collect()
}

/// `--json` is one array of records for every command: reads, writes (one
/// record per key), single-result commands (an array of one) and reports.
#[test]
fn json_is_one_array_of_records_for_every_command() {
    let (a, b) = (Memcached::spawn(), Memcached::spawn());
    let groups = format!("sg1={};sg2={}", a.addr_string(), b.addr_string());
    let run_on = |cluster: &[&str], extra: &[&str]| {
        let o = memgroup(&[cluster, &["--json"], extra].concat());
        assert!(
            o.status.success(),
            "{extra:?}: {}{}",
            stdout(&o),
            stderr(&o)
        );
        json_array(&o)
    };
    let run = |extra: &[&str]| run_on(&["--groups", groups.as_str()], extra);
    let write_on = |cluster: &[&str], extra: &[&str], key: &str| {
        let records = run_on(cluster, extra);
        assert_eq!(records.len(), 1, "{extra:?}: {records:?}");
        assert_eq!(records[0]["key"], key, "{extra:?}");
        let groups = records[0]["groups"].as_array().unwrap();
        // Applied, or (a conditional write's other groups) cleared to stay
        // in line with the arbiter, which applied it.
        assert!(groups.iter().any(|g| g["applied"] == true), "{extra:?}");
        assert!(
            groups
                .iter()
                .all(|g| g["applied"] == true || (g["cleared"] == true && g["applied"].is_null())),
            "{extra:?}: {groups:?}"
        );
    };
    let write = |extra: &[&str], key: &str| write_on(&["--groups", groups.as_str()], extra, key);
    write(&["set", "k", "v"], "k");
    // Before the conditional writes below: those leave the key in the
    // arbiter (sg1) only, where a touch of sg2 finds nothing.
    write(&["touch", "k", "100"], "k");
    write(&["add", "k2", "v"], "k2");
    write(&["replace", "k", "w"], "k");
    write(&["append", "k", "x"], "k");
    write(&["prepend", "k", "y"], "k");
    // cas on one group: each group has a CAS unique of its own.
    let a_addr = a.addr_string();
    let one = ["--servers", a_addr.as_str()];
    let cas = run_on(&one, &["gets", "k"])[0]["cas"].to_string();
    write_on(&one, &["cas", "k", "z", "--cas", &cas], "k");
    let deleted = run(&["delete", "k", "k2"]);
    assert_eq!(deleted.len(), 2, "one record per key: {deleted:?}");
    assert_eq!(deleted[1]["key"], "k2");
    write(&["set", "n", "1"], "n");
    assert_eq!(
        run(&["incr", "n", "4"]),
        [serde_json::json!({"key": "n", "value": 5})]
    );
    assert_eq!(
        run(&["decr", "n"]),
        [serde_json::json!({"key": "n", "value": 4})]
    );
    let dir = crate::support::tempdir::Dir::new("json");
    let file = dir.path().join("motd");
    std::fs::write(&file, "hi").unwrap();
    write(&["cp", file.to_str().unwrap()], "motd");
    // Removed before the reads below: the value comes from the server.
    std::fs::remove_dir_all(dir.path()).unwrap();
    assert_eq!(run(&["get", "motd"])[0]["value"], "hi");
    assert_eq!(run(&["exist", "motd"])[0]["exists"], true);
    let loaded = run(&["load", "--count", "20"]);
    assert_eq!(loaded[0]["keys"], 20, "{loaded:?}");
    let flushed = run(&["flush", "--group", "sg2", "--yes"]);
    assert_eq!(
        flushed,
        [serde_json::json!({"group": "sg2", "flushed": true})]
    );
    let warmed = run(&["warm", "--from", "sg1", "--to", "sg2"]);
    assert_eq!(warmed.len(), 1, "{warmed:?}");
    assert_eq!(warmed[0]["keys"], 22, "{warmed:?}");
    let benched = run(&["bench", "--ops", "200", "--keys", "10"]);
    assert_eq!(benched[0]["ops"], 200, "{benched:?}");
    // Each takes the other's name for its key count.
    let loaded = run(&["load", "--keys", "5", "--prefix", "again:"]);
    assert_eq!(loaded[0]["keys"], 5, "{loaded:?}");
    let benched = run(&["bench", "--ops", "100", "--count", "10"]);
    assert_eq!(benched[0]["ops"], 100, "{benched:?}");
    let compared = run(&["route", "--compare", &a.addr_string(), "k1", "k2"]);
    assert_eq!(compared.len(), 2, "one record per group: {compared:?}");
    assert_eq!(compared[0]["keys"], 2, "{compared:?}");
    assert!(compared.iter().all(|g| g["share"].is_f64()), "{compared:?}");
    for listing in [
        &["route", "k"][..],
        &["version"],
        &["ping", "--count", "1"],
        &["keys"],
        &["stats"],
        &["stats", "settings"],
        &["status"],
    ] {
        assert!(!run(listing).is_empty(), "{listing:?}");
    }
    let status = run(&["status"]);
    let servers = status.iter().filter(|r| r["kind"] == "server").count();
    let groups = status.iter().filter(|r| r["kind"] == "group").count();
    assert_eq!((servers, groups, status.len()), (2, 2, 4), "{status:?}");
}

/// With `--json` every error is a JSON object on stderr, one a line: the
/// one that ends the run (`{"error": …, "exit": N}`, the exit code
/// unchanged) and each key's failure (`{"key": …, "error": …}`).
#[test]
fn json_errors_are_objects_on_stderr() {
    let s = Memcached::spawn();
    let addr = s.addr_string();
    let ended = |args: &[&str], code: i32, token: &str| {
        let o = memgroup(args);
        assert_eq!(o.status.code(), Some(code), "{args:?}: {}", stderr(&o));
        let errors = json_errors(&o);
        assert_eq!(errors.len(), 1, "{args:?}: {errors:?}");
        assert_eq!(errors[0]["exit"], code, "{args:?}: {errors:?}");
        let message = errors[0]["error"].as_str().unwrap();
        assert!(message.contains(token), "{args:?}: {message}");
        assert!(!message.starts_with("memgroup:"), "{message}");
    };
    // Usage and configuration: exit 2, from clap and from the tool.
    ended(
        &["--json", "--servers", &addr, "set", "bad key", "v"],
        2,
        "invalid key",
    );
    ended(
        &[
            "--json",
            "--servers",
            &addr,
            "--timeout-ms",
            "0",
            "get",
            "k",
        ],
        2,
        "timeout-ms",
    );
    ended(&["--json", "--servers", &addr, "get"], 2, "<KEYS>");
    ended(
        &["--servers", &addr, "--hash", "sha1", "--json", "get", "k"],
        2,
        "sha1",
    );
    ended(
        &[
            "--json",
            "--servers",
            &addr,
            "flush",
            "--group",
            "nope",
            "--yes",
        ],
        2,
        "nope",
    );
    // A failed operation: exit 1.
    ended(
        &["--json", "--servers", "127.0.0.1:1", "keys"],
        1,
        "127.0.0.1:1",
    );

    // Per-key failures: a miss, and keys no server answered for.
    let o = memgroup(&["--json", "--servers", &addr, "get", "gone"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(json_array(&o)[0]["value"], serde_json::Value::Null);
    let errors = json_errors(&o);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0]["key"], "gone");
    assert_eq!(errors[0]["error"], "not found");
    let o = memgroup(&["--json", "--servers", &addr, "incr", "gone"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(json_errors(&o)[0]["key"], "gone");

    let mut dead = Memcached::spawn();
    let dead_addr = dead.addr_string();
    dead.kill();
    let servers = format!("{addr},{dead_addr}");
    let keys: Vec<String> = (0..20).map(|i| format!("k{i}")).collect();
    let mut args = vec!["--json", "--servers", &servers, "--no-failover", "get"];
    args.extend(keys.iter().map(String::as_str));
    let o = memgroup(&args);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let records = json_array(&o);
    assert_eq!(records.len(), 20);
    let unanswered: Vec<_> = json_errors(&o)
        .into_iter()
        .filter(|e| e["error"] != "not found")
        .collect();
    assert!(!unanswered.is_empty());
    for e in &unanswered {
        assert!(keys.iter().any(|k| e["key"] == k.as_str()), "{e}");
        assert!(e["error"].as_str().unwrap().contains(&dead_addr), "{e}");
    }

    // Every key in one command with the dead server, and whether a stderr
    // line names `key` with that server.
    let over_all = |command: &str| {
        let mut args = vec!["--servers", &servers, "--no-failover", command];
        args.extend(keys.iter().map(String::as_str));
        memgroup(&args)
    };
    let names_dead = |err: &str, key: &str| {
        err.lines()
            .any(|l| l.contains(&format!("{key}: ")) && l.contains(&dead_addr))
    };

    // `exist` does not call a key no server answered for missing: it is
    // named with its server, and the answered keys make it partly done.
    let o = over_all("exist");
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let (out, err) = (stdout(&o), stderr(&o));
    for key in &keys {
        let answered = out.lines().any(|l| l == format!("{key}: not found"));
        let named = names_dead(&err, key);
        assert!(answered != named, "{key}: stdout {out:?}, stderr {err:?}");
    }
    // Nor does `gets` stop at the first such key: the others are read.
    let o = over_all("gets");
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let (gets_out, gets_err) = (stdout(&o), stderr(&o));
    for key in &keys {
        let read = gets_out
            .lines()
            .any(|l| l.starts_with(&format!("{key} cas=")));
        let named = names_dead(&gets_err, key);
        let missed = gets_err
            .lines()
            .any(|l| l.ends_with(&format!("{key}: not found")));
        assert!(
            [read, named, missed].iter().filter(|&&b| b).count() == 1,
            "{key}: stdout {gets_out:?}, stderr {gets_err:?}"
        );
    }
    // A delete of keys some of which live on the dead server deletes the
    // others and names the ones it could not reach (exit 1: not all done).
    for key in &keys {
        raw::set(s.addr(), key.as_bytes(), b"v");
    }
    let o = over_all("delete");
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let (del_out, del_err) = (stdout(&o), stderr(&o));
    let mut deleted = 0;
    for key in &keys {
        let ok = del_out
            .lines()
            .any(|l| l == format!("{key}: default {addr}: ok"));
        let named = names_dead(&del_err, key);
        assert!(ok != named, "{key}: stdout {del_out:?}, stderr {del_err:?}");
        if ok {
            deleted += 1;
            assert_eq!(raw::get(s.addr(), key.as_bytes()), None, "{key}");
        }
    }
    assert!(deleted > 0 && deleted < keys.len(), "{deleted}");
    let dead_only = keys
        .iter()
        .find(|k| err.contains(&format!("{k}: ")))
        .unwrap();
    let o = memgroup(&[
        "--json",
        "--servers",
        &servers,
        "--no-failover",
        "exist",
        dead_only,
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let records = json_array(&o);
    assert_eq!(records[0]["key"], dead_only.as_str());
    assert!(records[0].get("exists").is_none(), "{records:?}");
    assert!(records[0]["error"].as_str().unwrap().contains(&dead_addr));
}

/// A stalled server (SIGSTOP: it accepts and never answers) rather than a
/// dead one: `exist`, `gets` and `delete` over keys on both servers name
/// each timed-out key with that server and still serve the others, and the
/// live server's own counters show every one of its keys was asked.
#[test]
fn a_stalled_server_costs_multi_key_commands_only_its_keys() {
    let live = Memcached::spawn();
    let stalled = Memcached::spawn();
    let (live_addr, stalled_addr) = (live.addr_string(), stalled.addr_string());
    let servers = format!("{live_addr},{stalled_addr}");
    let keys: Vec<String> = (0..12).map(|i| format!("st{i}")).collect();
    for key in &keys {
        let o = memgroup(&["--servers", &servers, "set", key, "v"]);
        assert!(o.status.success(), "{}", stderr(&o));
    }
    let on_live: Vec<&String> = keys
        .iter()
        .filter(|k| raw::get(live.addr(), k.as_bytes()).is_some())
        .collect();
    assert!(
        !on_live.is_empty() && on_live.len() < keys.len(),
        "{on_live:?}"
    );
    stalled.stop();
    let over_all = |command: &str| {
        let mut args = vec![
            "--servers",
            &servers,
            "--no-failover",
            "--timeout-ms",
            "200",
            command,
        ];
        args.extend(keys.iter().map(String::as_str));
        memgroup(&args)
    };
    let named = |err: &str, key: &str| {
        err.lines()
            .any(|l| l.contains(&format!("{key}: ")) && l.contains(&stalled_addr))
    };
    let gets_before = raw::stat(live.addr(), "cmd_get");
    let o = over_all("exist");
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let (out, err) = (stdout(&o), stderr(&o));
    for key in &keys {
        let exists = out.lines().any(|l| l == format!("{key}: exists"));
        assert_eq!(exists, on_live.contains(&key), "{key}: {out:?} {err:?}");
        assert_eq!(named(&err, key), !exists, "{key}: {err:?}");
    }
    let o = over_all("gets");
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let (out, err) = (stdout(&o), stderr(&o));
    for key in &keys {
        let read = out.lines().any(|l| l.starts_with(&format!("{key} cas=")));
        assert_eq!(read, on_live.contains(&key), "{key}: {out:?} {err:?}");
        assert_eq!(named(&err, key), !read, "{key}: {err:?}");
    }
    // The live server was asked for each of its keys by both commands.
    assert!(
        raw::stat(live.addr(), "cmd_get") - gets_before >= 2 * on_live.len() as u64,
        "{}",
        raw::stat(live.addr(), "cmd_get") - gets_before
    );
    let o = over_all("delete");
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    for key in &keys {
        if on_live.contains(&key) {
            assert_eq!(raw::get(live.addr(), key.as_bytes()), None, "{key}");
            assert!(!named(&err, key), "{key}: {err:?}");
        } else {
            assert!(named(&err, key), "{key}: {err:?}");
        }
    }
    stalled.resume();
}

/// `get --protocol` prints what memcached itself sends, `VALUE key flags
/// bytes`, the bytes, then `END`: values with newlines and any byte survive.
#[test]
fn get_protocol_is_binary_safe() {
    let s = Memcached::spawn();
    let addr = s.addr_string();
    raw::set(s.addr(), b"nl", b"one\ntwo\xff\r\nthree");
    let o = memgroup(&["--servers", &addr, "set", "plain", "text", "--flags", "7"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = memgroup(&[
        "--servers",
        &addr,
        "get",
        "--protocol",
        "nl",
        "gone",
        "plain",
    ]);
    assert_eq!(o.status.code(), Some(1), "a miss: {}", stderr(&o));
    assert_eq!(
        o.stdout,
        b"VALUE nl 0 15\r\none\ntwo\xff\r\nthree\r\nVALUE plain 7 4\r\ntext\r\nEND\r\n",
        "{:?}",
        stdout(&o)
    );
    assert!(stderr(&o).contains("gone: not found"), "{}", stderr(&o));
    // One key too, and `gets` adds the CAS unique as memcached does.
    let o = memgroup(&["--servers", &addr, "get", "--protocol", "nl"]);
    assert!(o.stdout.starts_with(b"VALUE nl 0 15\r\none\ntwo\xff"));
    let o = memgroup(&["--servers", &addr, "gets", "--protocol", "plain"]);
    let text = stdout(&o);
    let header = text.lines().next().unwrap();
    let fields: Vec<&str> = header.split(' ').collect();
    assert_eq!(fields[..4], ["VALUE", "plain", "7", "4"], "{text:?}");
    assert!(fields[4].trim_end().parse::<u64>().is_ok(), "{text:?}");
    assert!(text.ends_with("\r\ntext\r\nEND\r\n"), "{text:?}");
    // Two output forms at once are refused.
    let o = memgroup(&["--json", "--servers", &addr, "get", "--protocol", "nl"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        json_errors(&o)[0]["error"]
            .as_str()
            .unwrap()
            .contains("--protocol")
    );
}

/// `get --group` reads one group's copy alone (no fallback): the way to
/// compare a key's replicas; `exist --group` too.
#[test]
fn reads_of_one_group_compare_replicas() {
    let (a, b) = (Memcached::spawn(), Memcached::spawn());
    let groups = format!("sg1={};sg2={}", a.addr_string(), b.addr_string());
    let run = |extra: &[&str]| memgroup(&[&["--groups", groups.as_str()][..], extra].concat());
    assert!(run(&["set", "k", "same"]).status.success());
    raw::set(b.addr(), b"k", b"drifted");
    assert_eq!(stdout(&run(&["get", "--group", "sg1", "k"])), "same");
    assert_eq!(stdout(&run(&["get", "--group", "sg2", "k"])), "drifted");
    let o = run(&["--json", "gets", "--group", "sg2", "k"]);
    assert_eq!(json_array(&o)[0]["value"], "drifted");
    // A copy missing in one group: that group's read misses, the cluster's
    // read falls back to the other.
    raw::delete(a.addr(), b"k");
    assert_eq!(
        run(&["exist", "--group", "sg1", "k"]).status.code(),
        Some(1)
    );
    assert!(run(&["exist", "--group", "sg2", "k"]).status.success());
    let o = run(&["get", "--group", "sg3", "k"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("(the cluster's groups: sg1, sg2)"),
        "{}",
        stderr(&o)
    );
}

/// `stats` with a server down: its row shows no figures (`-`) and stderr
/// says why; the group's totals count every server and those that answered
/// (SERVERS, UP); a server that never served a get has no hit ratio (`-`,
/// `null` in JSON), not 0 %.
#[test]
fn stats_shows_a_down_server_apart_and_no_ratio_without_gets() {
    let a = Memcached::spawn();
    let groups = format!("sg1={},127.0.0.1:1", a.addr_string());
    let run = |extra: &[&str]| memgroup(&[&["--groups", groups.as_str()][..], extra].concat());
    let o = run(&["stats"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("(server 127.0.0.1:1)"),
        "{}",
        stderr(&o)
    );
    let text = stdout(&o);
    let row = |server: &str| {
        text.lines()
            .find(|l| l.split_whitespace().nth(1) == Some(server))
            .map(|l| l.split_whitespace().map(str::to_string).collect::<Vec<_>>())
            .unwrap_or_else(|| panic!("{server} in {text}"))
    };
    let down = row("127.0.0.1:1");
    assert_eq!(down.len(), 11, "{down:?}");
    assert!(down[2..].iter().all(|c| c == "-"), "{down:?}");
    assert_eq!(row(&a.addr_string())[5], "-", "no get yet: {text}");
    let totals = text
        .lines()
        .skip_while(|l| !l.starts_with("GROUP") || !l.contains("SERVERS"))
        .nth(1)
        .unwrap_or_else(|| panic!("totals in {text}"));
    let totals: Vec<&str> = totals.split_whitespace().collect();
    assert_eq!(totals[..3], ["sg1", "2", "1"], "{text}");

    let o = run(&["--json", "stats"]);
    let records = json_array(&o);
    let group = records.iter().find(|r| r["kind"] == "group").unwrap();
    assert_eq!(
        (group["servers"].as_u64(), group["up"].as_u64()),
        (Some(2), Some(1))
    );
    let live = records
        .iter()
        .find(|r| r["server"] == a.addr_string().as_str())
        .unwrap();
    assert!(live["get_hit_ratio"].is_null(), "{live}");
}

/// `stats --json` carries the group totals of the table; `stats --server`
/// is every statistic of one server (NAME VALUE, or one record each).
#[test]
fn stats_json_has_group_totals_and_one_server_has_every_stat() {
    let a = [Memcached::spawn(), Memcached::spawn()];
    let b = [Memcached::spawn()];
    let groups = format!("sg1={};sg2={}", list(&a), list(&b));
    let run = |extra: &[&str]| memgroup(&[&["--groups", groups.as_str()][..], extra].concat());
    for i in 0..10 {
        assert!(run(&["set", &format!("k{i}"), "v"]).status.success());
    }
    let o = run(&["--json", "stats"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let records = json_array(&o);
    let totals: Vec<_> = records.iter().filter(|r| r["kind"] == "group").collect();
    assert_eq!(totals.len(), 2, "{records:?}");
    assert_eq!(totals[0]["group"], "sg1");
    assert_eq!(totals[0]["servers"], 2);
    for t in &totals {
        assert_eq!(t["curr_items"], 10, "{t}");
        assert!(t["cmd_set"].as_u64().unwrap() >= 10, "{t}");
    }
    let servers = records.iter().filter(|r| r["kind"] == "server").count();
    assert_eq!(servers, 3, "{records:?}");

    let one = b[0].addr_string();
    let o = run(&["stats", "--server", &one]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(text.starts_with("NAME"), "{text}");
    let value = |name: &str| {
        text.lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .map(str::to_string)
    };
    assert_eq!(value("curr_items").as_deref(), Some("10"), "{text}");
    assert_eq!(value("pid"), b[0].pid().map(|p| p.to_string()), "{text}");
    assert!(text.lines().count() > 40, "every stat: {text}");
    let o = run(&["--json", "stats", "--server", &one]);
    let records = json_array(&o);
    let record = records.iter().find(|r| r["name"] == "curr_items").unwrap();
    assert_eq!(record["value"], "10");
    assert_eq!(record["server"], one.as_str());
    assert_eq!(records.len(), text.lines().count() - 1);
    let o = run(&["--json", "stats", "slabs", "--server", &one]);
    assert!(json_array(&o).iter().any(|r| r["name"] == "active_slabs"));
    let o = run(&["stats", "--server", "127.0.0.1:1"]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "not in the cluster: {}",
        stderr(&o)
    );
}

/// `status --watch` prints each round under the time it was taken (UTC),
/// its table right after; piped, rounds are set apart by a blank line.
#[test]
fn status_watch_heads_each_round_with_its_time() {
    use std::io::BufRead;

    let s = Memcached::spawn();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_memgroup"))
        // Each test its own state: no repair journal shared across tests.
        .env("MEMGROUP_REPAIR_JOURNAL", "off")
        .args(["--servers", &s.addr_string(), "status", "--watch", "0.1"])
        .env_remove("MEMCACHED_SERVERS")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let lines: Vec<String> = std::io::BufReader::new(child.stdout.take().unwrap())
        .lines()
        .take(9)
        .map(Result::unwrap)
        .collect();
    let _ = child.kill();
    let _ = child.wait();
    // Two rounds: header, table (column names, server, group total), blank.
    for round in [&lines[0..4], &lines[5..9]] {
        let time = round[0].strip_prefix("status at ").expect(&round[0]);
        assert!(time.ends_with(" UTC, every 100ms"), "{time}");
        assert_eq!(time.as_bytes()[2], b':', "{time}");
        assert!(round[1].starts_with("GROUP"), "{lines:?}");
        assert!(round[2].contains(&s.addr_string()), "{lines:?}");
    }
    assert_eq!(lines[4], "", "{lines:?}");
}

/// `status`, `ping` and `version` take `--group` as `stats` does: a group
/// whose servers answer reports alone (exit 0) while another has a server
/// down; an unknown group is a usage error naming the groups.
#[test]
fn status_ping_and_version_look_at_one_group() {
    let a = Memcached::spawn();
    let groups = format!("sg1={};sg2=127.0.0.1:1", a.addr_string());
    let run =
        |extra: &[&str]| memgroup(&[&["--groups", groups.as_str(), "--json"], extra].concat());
    for command in [&["status"][..], &["ping", "--count", "1"], &["version"]] {
        let all = run(command);
        assert_eq!(all.status.code(), Some(1), "{command:?}: {}", stdout(&all));
        let one = run(&[command, &["--group", "sg1"]].concat());
        assert!(
            one.status.success(),
            "{command:?}: {}{}",
            stdout(&one),
            stderr(&one)
        );
        let records: Vec<serde_json::Value> = serde_json::from_str(&stdout(&one)).unwrap();
        let servers: Vec<&serde_json::Value> =
            records.iter().filter(|r| r["server"].is_string()).collect();
        assert_eq!(servers.len(), 1, "{command:?}: {records:?}");
        // `status` names a server's groups (a server may be in several).
        assert!(
            servers
                .iter()
                .all(|r| r["group"] == "sg1" || r["groups"] == serde_json::json!(["sg1"])),
            "{records:?}"
        );
        let unknown = run(&[command, &["--group", "sg9"]].concat());
        assert_eq!(unknown.status.code(), Some(2), "{command:?}");
        assert!(stderr(&unknown).contains("sg1"), "{}", stderr(&unknown));
    }
}

/// A group looked at alone keeps working whatever the file says of the
/// cluster: a named arbiter that is another group, the group write-only (a
/// warm target), another group's own login. `status`, `version` and `get`
/// with `--group` on each group exit 0, and `get --group` reads the
/// write-only group's copy.
#[test]
fn one_group_alone_whatever_the_cluster_file_says() {
    let dir = crate::support::tempdir::Dir::new("one-group");
    let authfile = dir.path().join("authfile");
    std::fs::write(&authfile, "alice:s3cret\n").unwrap();
    let password = dir.path().join("password");
    std::fs::write(&password, "s3cret\n").unwrap();
    let sg1 = Memcached::spawn_with(&["-Y", authfile.to_str().unwrap()]);
    let sg2 = Memcached::spawn();
    let file = dir.path().join("cluster.toml");
    std::fs::write(
        &file,
        format!(
            "arbiter = \"sg1\"\n\
             [[groups]]\nname = \"sg1\"\nservers = [\"{}\"]\nusername = \"alice\"\npassword_file = \"{}\"\n\
             [[groups]]\nname = \"sg2\"\nwrite_only = true\nservers = [\"{}\"]\n",
            sg1.addr_string(),
            password.display(),
            sg2.addr_string()
        ),
    )
    .unwrap();
    let config = file.to_str().unwrap();
    let run = |extra: &[&str]| memgroup(&[&["--config", config][..], extra].concat());
    assert!(run(&["set", "k", "v"]).status.success());
    for group in ["sg1", "sg2"] {
        for command in [&["status"][..], &["version"], &["get", "k"]] {
            let o = run(&[command, &["--group", group]].concat());
            assert!(
                o.status.success(),
                "{command:?} --group {group}: {}{}",
                stdout(&o),
                stderr(&o)
            );
        }
    }
    assert_eq!(run(&["get", "--group", "sg2", "k"]).stdout, b"v");
}

/// The key prefix from each place the tool reads its settings: the flag,
/// a URL's `key_prefix=`, a cluster file's `key_prefix`; checked against
/// the server, which holds the keys behind it.
#[test]
fn the_key_prefix_from_a_flag_a_url_and_a_file() {
    let s = Memcached::spawn();
    let addr = s.addr_string();
    let o = memgroup(&["--servers", &addr, "--key-prefix", "app:", "set", "k", "v"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(raw::get(s.addr(), b"app:k").as_deref(), Some(&b"v"[..]));
    assert_eq!(raw::get(s.addr(), b"k"), None);
    let url = format!("memcache://{addr}?key_prefix=app:");
    let o = memgroup(&["--servers", &url, "get", "k"]);
    assert_eq!(stdout(&o), "v", "{}", stderr(&o));
    let dir = crate::support::tempdir::Dir::new("key-prefix");
    let file = dir.path().join("cluster.toml");
    std::fs::write(
        &file,
        format!("key_prefix = \"app:\"\n[[groups]]\nname = \"sg1\"\nservers = [\"{addr}\"]\n"),
    )
    .unwrap();
    let config = file.to_str().unwrap();
    let o = memgroup(&["--config", config, "delete", "k"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(raw::get(s.addr(), b"app:k"), None);
    // A URL's prefix ranks above a file's (here a file without groups:
    // settings for the servers given elsewhere).
    let wide = dir.path().join("wide.toml");
    std::fs::write(&wide, "key_prefix = \"file:\"\n").unwrap();
    let wide = wide.to_str().unwrap();
    let o = memgroup(&["--config", wide, "--servers", &url, "set", "ranked", "v"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        raw::get(s.addr(), b"app:ranked").as_deref(),
        Some(&b"v"[..])
    );
    let o = memgroup(&["--config", wide, "--servers", &url, "config"]);
    let line = stdout(&o)
        .lines()
        .find(|l| l.starts_with("key_prefix"))
        .map(str::to_owned)
        .unwrap_or_default();
    assert!(
        line.contains("app:") && line.contains("URL"),
        "{}",
        stdout(&o)
    );
    raw::delete(s.addr(), b"app:ranked");
    // `route` shows the key as it goes on the wire.
    let o = memgroup(&[
        "--servers",
        &addr,
        "--key-prefix",
        "app:",
        "--json",
        "route",
        "k",
    ]);
    assert!(
        stdout(&o).contains(r#""wire_key":"app:k""#),
        "{}",
        stdout(&o)
    );
    // `keys` lists the keys behind the prefix as the other commands take
    // them; another service's key is not among them.
    raw::set(s.addr(), b"app:listed", b"1");
    raw::set(s.addr(), b"other:key", b"1");
    let o = memgroup(&["--servers", &addr, "--key-prefix", "app:", "-q", "keys"]);
    assert_eq!(stdout(&o), "listed\n", "{}", stderr(&o));
    // `route --compare` of a layout with itself: no key moves (the old
    // layout's keys are behind the same prefix; with the prefix on one side
    // only, about two in three of the keys would move between 3 servers).
    let three = "127.0.0.1:1,127.0.0.1:2,127.0.0.1:3";
    let keys: Vec<String> = (0..30).map(|i| format!("key{i}")).collect();
    let mut args = vec![
        "--servers",
        three,
        "--key-prefix",
        "app:",
        "--json",
        "route",
        "--compare",
        three,
    ];
    args.extend(keys.iter().map(String::as_str));
    let o = memgroup(&args);
    let plan: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!(plan[0]["keys"], 30, "{plan}");
    assert_eq!(plan[0]["moved"], 0, "{plan}");
    // A prefix no key could start with: a usage error, nothing sent.
    let o = memgroup(&[
        "--servers",
        &addr,
        "--key-prefix",
        "my app:",
        "set",
        "k",
        "v",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("cannot go in front of keys"),
        "{}",
        stderr(&o)
    );
    // `warm` copies the stored keys as they are: behind the prefix once.
    let dst = Memcached::spawn();
    let groups = format!("src={addr};dst={}", dst.addr_string());
    let o = memgroup(&[
        "--groups",
        &groups,
        "--key-prefix",
        "app:",
        "warm",
        "--from",
        "src",
        "--to",
        "dst",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        raw::get(dst.addr(), b"app:listed").as_deref(),
        Some(&b"1"[..])
    );
    assert_eq!(raw::get(dst.addr(), b"app:app:listed"), None);
    assert_eq!(
        raw::stat(dst.addr(), "curr_items"),
        raw::stat(s.addr(), "curr_items")
    );
}

/// `config` prints the settings as resolved, and refuses (exit 2, one
/// line) a cluster every other command refuses: a zone no group has.
/// `-q load` prints nothing on success (its summary is information).
#[test]
fn config_refuses_what_the_commands_refuse_and_quiet_load_is_quiet() {
    let dir = crate::support::tempdir::Dir::new("config-check");
    let file = dir.path().join("zone.toml");
    std::fs::write(
        &file,
        "zone = \"nowhere\"\n[[groups]]\nname = \"a\"\nzone = \"z1\"\nservers = [\"127.0.0.1:1\"]\n",
    )
    .unwrap();
    let out = memgroup(&["--config", file.to_str().unwrap(), "config"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("zone \"nowhere\" is no group's zone"),
        "{stderr}"
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("zone"),
        "settings still shown"
    );
    let server = crate::support::Memcached::spawn();
    let out = memgroup(&[
        "-q",
        "--servers",
        &server.addr_string(),
        "load",
        "--count",
        "10",
    ]);
    assert_eq!(out.status.code(), Some(0));
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// A value outside a flag's list is one line naming it, the list and the
/// likely one (`--hash ketma`), exit 2.
#[test]
fn a_mistyped_choice_names_the_valid_ones_on_one_line() {
    let out = memgroup(&["--servers", "127.0.0.1:1", "--hash", "ketma", "get", "k"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("invalid value 'ketma'")
            && stderr.contains("one of: native, old-compat")
            && stderr.contains("did you mean \"ketama\"?"),
        "{stderr}"
    );
}

/// `--read-repair` (or the file's `read_repair`): a zone restarted empty
/// fills as the tool reads it; without it nothing is copied.
#[test]
fn read_repair_fills_an_empty_zone_as_the_tool_reads() {
    let (sg1, sg2) = (Memcached::spawn(), Memcached::spawn());
    let groups = format!("sg1={};sg2={}", sg1.addr_string(), sg2.addr_string());
    raw::set(sg1.addr(), b"k", b"v");
    raw::set(sg1.addr(), b"j", b"w");
    let plain = memgroup(&["--groups", &groups, "--zone", "sg2", "get", "k"]);
    assert_eq!(&plain.stdout[..], b"v");
    assert_eq!(raw::get(sg2.addr(), b"k"), None, "copied without the flag");
    let repaired = memgroup(&[
        "--groups",
        &groups,
        "--zone",
        "sg2",
        "--read-repair",
        "get",
        "j",
    ]);
    assert_eq!(&repaired.stdout[..], b"w");
    assert_eq!(raw::get(sg2.addr(), b"j").as_deref(), Some(&b"w"[..]));
    let shown = memgroup(&["--groups", &groups, "--read-repair", "config"]);
    let text = String::from_utf8_lossy(&shown.stdout);
    let row = text.lines().find(|l| l.starts_with("read_repair")).unwrap();
    assert!(
        row.contains("on") && row.contains("flag --read-repair"),
        "{row}"
    );
}
