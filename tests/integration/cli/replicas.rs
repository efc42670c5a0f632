//! Reads across zones: one group's replicas compared, a stalled server under
//! multi-key commands, read repair, value formats and binary-safe reads.

use std::time::Duration;

use crate::support::{Memcached, memgroup, raw};

use super::{json_array, json_errors, stderr, stdout};

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
        stderr(&o).contains("unexpected argument '--type'"),
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
