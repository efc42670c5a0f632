//! `--json`: one array of records on stdout, errors as objects on stderr.

use crate::support::{Memcached, memgroup, raw};

use super::{json_array, json_errors, stderr, stdout};

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

/// A notice that is no failure (here: a repair journal that cannot be
/// used) is a `{"warning"}` object on stderr under `--json`, as every line
/// there is; the run still succeeds.
#[test]
fn a_warning_is_a_json_object_on_stderr() {
    let s = Memcached::spawn();
    let addr = s.addr_string();
    let args = [
        "--servers",
        &addr,
        "--json",
        "--repair-journal",
        "/dev/null/journal",
    ];
    let o = memgroup(&[&args[..], &["set", "k", "v"]].concat());
    assert!(o.status.success(), "{}", stderr(&o));
    let lines: Vec<serde_json::Value> = stderr(&o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert_eq!(lines.len(), 1, "{}", stderr(&o));
    let warning = lines[0]["warning"].as_str().unwrap_or_default();
    assert!(warning.contains("repair journal"), "{}", stderr(&o));
    assert!(lines[0].get("error").is_none(), "{}", stderr(&o));
}
