//! What memgroup reports is what is in the cluster: each test checks an
//! answer of the library or the tool against the servers themselves.

use std::time::{Duration, SystemTime};

use memgroup::client::{Client, Expiry, MetaFlag, WriteOptions};

use crate::support::{Memcached, memgroup as tool};

/// A client of one server, default settings.
fn one_server(server: &Memcached) -> Client {
    Client::builder()
        .servers(&server.addr_string())
        .build()
        .unwrap()
}

/// The TTL memcached itself reports for `key` (`mg key t`): -1 for none.
async fn server_ttl(client: &Client, key: &str) -> Option<i64> {
    client
        .meta_get(key, &[MetaFlag::ReturnTtl])
        .await
        .unwrap()
        .and_then(|m| m.ttl())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expiry_over_thirty_days_keeps_the_item_that_long() {
    let server = Memcached::spawn();
    let client = one_server(&server);
    const FORTY_DAYS: i64 = 40 * 86_400;
    // The same 40 days three ways: seconds, a Duration, options.
    client.set("secs", "v", FORTY_DAYS as u32).await.unwrap();
    let forty = Duration::from_secs(FORTY_DAYS as u64);
    client.set("duration", "v", forty).await.unwrap();
    let options = WriteOptions::new().expiry(forty).flags(7);
    client.set("options", "v", options).await.unwrap();
    for key in ["secs", "duration", "options"] {
        let ttl = server_ttl(&client, key).await.expect("stored, not expired");
        assert!(
            (FORTY_DAYS - 5..=FORTY_DAYS + 2).contains(&ttl),
            "{key}: the server holds it for {ttl} s"
        );
    }
    assert_eq!(client.get("options").await.unwrap().unwrap().flags, 7);
    // touch and gat take the same expiry.
    client
        .touch("secs", Duration::from_secs(31 * 86_400))
        .await
        .unwrap();
    let ttl = server_ttl(&client, "secs").await.unwrap();
    assert!((31 * 86_400 - 5..=31 * 86_400 + 2).contains(&ttl), "{ttl}");
    client
        .get_and_touch("duration", Expiry::Never)
        .await
        .unwrap();
    assert_eq!(server_ttl(&client, "duration").await, Some(-1));
    // An absolute time: in the future kept until then, in the past refused
    // before anything is sent.
    let at = SystemTime::now() + Duration::from_secs(3600);
    client.set("at", "v", at).await.unwrap();
    let ttl = server_ttl(&client, "at").await.unwrap();
    assert!((3590..=3602).contains(&ttl), "{ttl}");
    let past = SystemTime::now() - Duration::from_secs(10);
    let error = client.set("past", "v", past).await.unwrap_err();
    assert_eq!(error.kind(), memgroup::client::ErrorKind::InvalidArgument);
    assert!(client.get("past").await.unwrap().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multi_get_keeps_the_hits_of_the_servers_that_answered() {
    let mut servers = [Memcached::spawn(), Memcached::spawn()];
    let list = format!("{},{}", servers[0].addr_string(), servers[1].addr_string());
    let client = || {
        Client::builder()
            .servers(&list)
            .failover(false)
            .timeout(Duration::from_millis(500))
            .build()
            .unwrap()
    };
    let writer = client();
    let keys: Vec<String> = (0..40).map(|i| format!("k{i}")).collect();
    for key in &keys {
        writer.set(key, key.as_bytes(), 0).await.unwrap();
    }
    // Which keys live on the server about to die, by asking it directly.
    let dead = servers[1].addr();
    let on_dead: Vec<bool> = keys
        .iter()
        .map(|k| crate::support::raw::get(dead, k.as_bytes()).is_some())
        .collect();
    assert!(on_dead.iter().any(|&d| d) && on_dead.iter().any(|&d| !d));
    servers[1].kill();
    // A key given twice and a miss ride along.
    let mut asked: Vec<&str> = keys.iter().map(String::as_str).collect();
    asked.extend(["k0", "absent"]);
    let found = client().get_multi(&asked).await.unwrap();
    assert_eq!(found.len(), asked.len(), "one outcome per key given");
    for ((key, outcome), i) in found.iter().zip(0..) {
        assert_eq!(key, asked[i].as_bytes(), "aligned with the keys given");
        let Some(&dead_key) = on_dead.get(i) else {
            continue;
        };
        match outcome {
            Ok(Some(item)) => assert!(!dead_key && item.value == key, "{}", asked[i]),
            Err(e) => {
                assert!(dead_key, "{}: {e}", asked[i]);
                assert!(e.to_string().contains(&dead.to_string()), "{e}");
            }
            Ok(None) => panic!("{}: a miss", asked[i]),
        }
    }
    let live = on_dead.iter().filter(|&&d| !d).count();
    assert_eq!(found.hit_count(), live);
    let failed = found.errors().filter(|(k, _)| *k != b"absent").count();
    assert_eq!(failed, keys.len() - live);
    assert!(!found.is_complete());
    // "absent" lives on one of the two servers: a miss or an error.
    assert!(found.get("absent").is_none());

    // The tool prints the hits, names each failed key and its server on
    // stderr, and exits 3: partly done.
    let live_key = &keys[on_dead.iter().position(|&d| !d).unwrap()];
    let dead_key = &keys[on_dead.iter().position(|&d| d).unwrap()];
    let out = tool(&[
        "--servers",
        &list,
        "--no-failover",
        "get",
        live_key,
        dead_key,
    ]);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(3), "{stdout} / {stderr}");
    assert!(
        stdout.contains(&format!("{live_key}: {live_key}")),
        "{stdout}"
    );
    assert!(stderr.contains(dead_key.as_str()), "{stderr}");
    assert!(stderr.contains(&dead.to_string()), "{stderr}");
}

#[test]
fn a_write_a_replica_missed_exits_3_and_one_everywhere_exits_0() {
    let sg1 = Memcached::spawn();
    let mut sg2 = Memcached::spawn();
    let groups = format!("sg1={};sg2={}", sg1.addr_string(), sg2.addr_string());
    let set = |key: &str| tool(&["--groups", &groups, "set", key, "v"]);
    assert_eq!(set("both").status.code(), Some(0));
    sg2.kill();
    // The default policy (all but one) is met by sg1 alone: stored there,
    // and the exit code says a copy is missing.
    let out = set("one");
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        crate::support::raw::get(sg1.addr(), b"one").as_deref(),
        Some(&b"v"[..])
    );
    // The per-group report names the group that missed it.
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(
        report.contains("sg2") && report.contains("error"),
        "{report}"
    );
    // An add refused by its condition is a failure, not a partial write.
    let out = tool(&["--groups", &groups, "add", "one", "w"]);
    assert_eq!(out.status.code(), Some(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tool_reads_ttls_with_units_and_long_ones_keep_the_item() {
    let server = Memcached::spawn();
    let addr = server.addr_string();
    let client = one_server(&server);
    let set = |key: &str, extra: &[&str]| {
        let mut args = vec!["--servers", &addr, "set", key, "v"];
        args.extend_from_slice(extra);
        tool(&args)
    };
    // 3456000 s is 40 days: relative, not a date in 1970.
    for (key, ttl, want) in [
        ("bare", "3456000", 3_456_000),
        ("days", "40d", 3_456_000),
        ("minutes", "10m", 600),
        ("seconds", "90s", 90),
    ] {
        let out = set(key, &["--exptime", ttl]);
        assert_eq!(out.status.code(), Some(0), "{key}");
        let held = server_ttl(&client, key).await.expect("the key is there");
        assert!((want - 5..=want + 2).contains(&held), "{key}: {held}");
    }
    let at = SystemTime::now() + Duration::from_secs(7200);
    let unix = at.duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    let out = set("at", &["--exptime-at", &unix.to_string()]);
    assert_eq!(out.status.code(), Some(0));
    let held = server_ttl(&client, "at").await.unwrap();
    assert!((7190..=7202).contains(&held), "{held}");
    // Nonsense: exit 2, one line naming it, nothing stored.
    for (key, extra) in [
        ("past", &["--exptime-at", "1000"][..]),
        ("unit", &["--exptime", "10w"][..]),
    ] {
        let out = set(key, extra);
        assert_eq!(out.status.code(), Some(2), "{key}");
        assert!(client.get(key).await.unwrap().is_none(), "{key}");
    }
    let out = tool(&["--servers", &addr, "append", "bare", "x", "--exptime", "5"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--exptime"), "{stderr}");
    assert_eq!(client.get("bare").await.unwrap().unwrap().value, "v");
}

/// A warm from a group that is serving reads, as a real source always is:
/// `metadump all` skipped items the reads were moving between LRUs (2,787
/// to 2,971 of 3,000 copied, reported as complete); every key must arrive,
/// checked on the target servers themselves, and `keys` must list them all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_warm_from_a_group_serving_reads_copies_every_key() {
    let source = [Memcached::spawn(), Memcached::spawn()];
    let target = [Memcached::spawn(), Memcached::spawn()];
    let list = |s: &[Memcached]| crate::support::server_list(s);
    let groups = format!("src={};dst={}", list(&source), list(&target));
    let client = Client::builder().evcache_groups(&groups).build().unwrap();
    const N: usize = 3000;
    let keys: Vec<String> = (0..N).map(|i| format!("w:{i}")).collect();
    for key in &keys {
        let value = format!("{key}={}", "v".repeat(500));
        let options = WriteOptions::new().flags(5).expiry(3600);
        client
            .add_or_set(
                key,
                value,
                options,
                &["src"],
                memgroup::client::IfPresent::Overwrite,
            )
            .await
            .unwrap();
    }
    // Readers on the source for as long as the warm and the listing run.
    let reading = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let readers: Vec<_> = (0..4)
        .map(|r| {
            let (client, keys, reading) = (client.clone(), keys.clone(), reading.clone());
            tokio::spawn(async move {
                let mut i = r;
                while reading.load(std::sync::atomic::Ordering::Relaxed) {
                    let batch: Vec<&String> = (0..20).map(|j| &keys[(i + j * 149) % N]).collect();
                    client.get_multi(&batch).await.unwrap();
                    i += 7;
                }
            })
        })
        .collect();
    let groups2 = groups.clone();
    let (warm, listed) = tokio::task::spawn_blocking(move || {
        let listed = tool(&["--groups", &groups2, "keys", "--group", "src"]);
        let warm = tool(&[
            "--groups", &groups2, "warm", "--from", "src", "--to", "dst", "--verify",
        ]);
        (warm, listed)
    })
    .await
    .unwrap();
    reading.store(false, std::sync::atomic::Ordering::Relaxed);
    for reader in readers {
        reader.await.unwrap();
    }
    let (out, err) = (
        String::from_utf8_lossy(&warm.stdout),
        String::from_utf8_lossy(&warm.stderr),
    );
    assert_eq!(warm.status.code(), Some(0), "{out}\n{err}");
    assert!(out.contains("checked against its curr_items"), "{out}");
    assert_eq!(listed.status.code(), Some(0));
    let listed = String::from_utf8_lossy(&listed.stdout);
    assert_eq!(
        listed.lines().filter(|l| l.contains("w:")).count(),
        N,
        "keys listed every key once"
    );
    // The target's own count, and a direct read of every copy.
    let items: u64 = target
        .iter()
        .map(|s| crate::support::raw::stat(s.addr(), "curr_items"))
        .sum();
    assert_eq!(items, N as u64);
    let dst = Client::builder().servers(&list(&target)).build().unwrap();
    for chunk in keys.chunks(500) {
        let found = dst.get_multi(chunk).await.unwrap();
        for key in chunk {
            let item = found
                .get(key)
                .unwrap_or_else(|| panic!("{key} missing in dst"));
            assert_eq!(item.value, format!("{key}={}", "v".repeat(500)));
            assert_eq!(item.flags, 5);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_type_error_names_its_key() {
    let server = Memcached::spawn();
    let client = one_server(&server);
    client.set_as("visits", "many", 0).await.unwrap();
    let error = client.get_as::<i64>("visits").await.unwrap_err();
    assert_eq!(error.kind(), memgroup::client::ErrorKind::Type);
    assert!(error.to_string().contains("key \"visits\""), "{error}");
    assert!(error.to_string().contains("not"), "and why: {error}");
}

/// One rule for every setting: flag > environment > file > default, with a
/// file named by --config ranking as a flag for the server list.
#[test]
fn configuration_sources_rank_by_one_rule() {
    let in_file = Memcached::spawn();
    let in_env = Memcached::spawn();
    let dir = crate::support::tempdir::Dir::new("rank");
    let file = dir.path().join("cluster.toml");
    std::fs::write(
        &file,
        format!(
            "hash = \"native\"\ntimeout_ms = 300\n[[groups]]\nname = \"a\"\nservers = [\"{}\"]\n",
            in_file.addr_string()
        ),
    )
    .unwrap();
    let file = file.to_string_lossy().into_owned();
    let run = |args: &[&str], env: &[(&str, &str)]| {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_memgroup"));
        // Each test its own state: no repair journal shared across tests.
        command.env("MEMGROUP_REPAIR_JOURNAL", "off");
        command
            .args(args)
            .env_remove("MEMCACHED_SERVERS")
            .env_remove("MEMGROUP_GROUPS")
            .env_remove("MEMGROUP_CONFIG")
            .stdin(std::process::Stdio::null());
        for (name, value) in env {
            command.env(name, value);
        }
        command.output().unwrap()
    };
    // An exported MEMCACHED_SERVERS does not replace --config's servers: the
    // write lands on the file's server, and one warning names the variable.
    let exported = [("MEMCACHED_SERVERS", in_env.addr_string())];
    let exported: Vec<(&str, &str)> = exported.iter().map(|(n, v)| (*n, v.as_str())).collect();
    let out = run(&["--config", &file, "set", "rank:k", "v"], &exported);
    assert_eq!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.matches("warning").count(), 1, "{stderr}");
    assert!(stderr.contains("MEMCACHED_SERVERS is ignored"), "{stderr}");
    assert!(crate::support::raw::get(in_file.addr(), b"rank:k").is_some());
    assert!(crate::support::raw::get(in_env.addr(), b"rank:k").is_none());
    // MEMGROUP_CONFIG ranks as the environment: a --servers flag beats it.
    let out = run(
        &["--servers", &in_env.addr_string(), "set", "rank:j", "v"],
        &[("MEMGROUP_CONFIG", &file)],
    );
    assert_eq!(out.status.code(), Some(0));
    assert!(crate::support::raw::get(in_env.addr(), b"rank:j").is_some());
    // A URL on the command line beats the file for what it says itself.
    let url = format!("memcache://{}?hash=ketama", in_env.addr_string());
    let out = run(
        &[
            "--config",
            &dir.path().join("none.toml").to_string_lossy(),
            "config",
        ],
        &[],
    );
    assert_eq!(
        out.status.code(),
        Some(2),
        "a missing file is a usage error"
    );
    let settings_only = dir.path().join("settings.toml");
    std::fs::write(&settings_only, "hash = \"native\"\ntimeout_ms = 300\n").unwrap();
    let settings_only = settings_only.to_string_lossy().into_owned();
    let out = run(
        &["--config", &settings_only, "--servers", &url, "config"],
        &[],
    );
    let shown = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{shown}");
    let line = |name: &str| {
        shown
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("no {name} in {shown}"))
            .to_string()
    };
    assert!(
        line("hash").contains("ketama") && line("hash").contains("URL"),
        "{shown}"
    );
    assert!(
        line("timeout").contains("300 ms") && line("timeout").contains("file"),
        "{shown}"
    );
    assert!(line("servers").contains("flag --servers"), "{shown}");
    assert!(line("value_format").contains("default"), "{shown}");
    // Two server sources at the same rank: exit 2 naming both.
    let out = run(
        &["get", "k"],
        &[
            ("MEMGROUP_GROUPS", "a=127.0.0.1:1"),
            ("MEMCACHED_SERVERS", "127.0.0.1:2"),
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("MEMGROUP_GROUPS") && stderr.contains("MEMCACHED_SERVERS"),
        "{stderr}"
    );
    let out = run(
        &["--config", &file, "--servers", "127.0.0.1:2", "get", "k"],
        &[],
    );
    assert_eq!(out.status.code(), Some(2));
}
