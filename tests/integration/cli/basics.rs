//! The everyday commands: route, get/set/delete/touch/incr/decr, the
//! conditional stores, gets/cas, exist, version, keys, ping, cp, flush.

use std::process::{Command, Stdio};

use memgroup::hash::{HashStrategy, Locator, LocatorConfig, Node};

use crate::support::{Memcached, memgroup, raw, server_list as list};

use super::{json_array, stderr, stdout};

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
