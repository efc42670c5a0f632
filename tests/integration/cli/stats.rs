//! `stats` and `status`: every server, totals, a down server, watch rounds,
//! and server text shown safely.

use std::io::Write;

use crate::support::{Memcached, fault_peer, memgroup, server_list as list};

use super::{json_array, stderr, stdout};

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

/// `stats` (and `version`) with a server down: its row shows no figures (`-`) and stderr
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

    // `version` shows the down server the same way.
    let o = run(&["version"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let down = stdout(&o)
        .lines()
        .find(|l| l.contains("127.0.0.1:1"))
        .map(|l| l.split_whitespace().map(str::to_string).collect::<Vec<_>>());
    assert_eq!(
        down.as_deref().and_then(|r| r.get(2)).map(String::as_str),
        Some("-"),
        "{}",
        stdout(&o)
    );
    assert!(stderr(&o).contains("127.0.0.1:1"), "{}", stderr(&o));
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
