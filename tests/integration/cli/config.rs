//! The cluster file and client settings: flags against the file, one group
//! alone, the key prefix, and what the file refuses.

use crate::support::{Memcached, memgroup, raw};

use super::{stderr, stdout};

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
