//! Live membership with real memcached: under a running load, the watched
//! server list gains a server and loses another. No operation fails, the
//! removed server's connections close (its own `curr_connections` returns to
//! what it was), keys go where the new layout says, and a file that does not
//! parse is rejected without touching the topology.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use memgroup::client::{Client, Event};
use memgroup::topology::{ClusterSpec, Topology};

use crate::support::{HeldClock, Load, Memcached, eventually, raw, server_list};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watched_server_list_changes_under_load() {
    let servers: Vec<Memcached> = (0..4).map(|_| Memcached::spawn()).collect();
    let (a, b, c, d) = (&servers[0], &servers[1], &servers[2], &servers[3]);
    let dir = crate::support::tempdir::Dir::new("membership");
    let file = dir.path().join("servers");
    std::fs::write(&file, server_list(&servers[..3])).unwrap();
    // memcached counts its own connections; this one is the stat call's.
    let baseline = raw::stat(c.addr(), "curr_connections");

    let events = Arc::new(Mutex::new(Vec::new()));
    let seen = events.clone();
    let client = Client::builder()
        .servers(&std::fs::read_to_string(&file).unwrap())
        .pool_size(2)
        .on_event(move |e| seen.lock().unwrap().push(e.clone()))
        .build()
        .unwrap();
    let _watcher = client.watch_file(&file, Duration::from_millis(20), |text| {
        ClusterSpec::parse_server_list(text.trim())
    });

    let load = Load::start(&client, 8, 500);
    eventually("the load to reach C", || {
        raw::stat(c.addr(), "curr_connections") > baseline
    })
    .await;

    // A file that does not parse: rejected, nothing changes.
    std::fs::write(&file, "not a server list").unwrap();
    eventually("the rejection", || {
        events
            .lock()
            .unwrap()
            .iter()
            .any(|e| matches!(e, Event::TopologyRejected { .. }))
    })
    .await;
    assert_eq!(client.topology().servers().len(), 3);

    // C leaves, D joins.
    let new_list = format!(
        "{},{},{}",
        a.addr_string(),
        b.addr_string(),
        d.addr_string()
    );
    std::fs::write(&file, &new_list).unwrap();
    eventually("the new topology", || {
        client
            .topology()
            .servers()
            .iter()
            .any(|s| s.to_string() == d.addr_string())
    })
    .await;
    let before = load.ops();
    eventually("more load on the new layout", || load.ops() > before + 2000).await;
    let (_, failed) = load.stop().await;
    assert_eq!(failed, 0, "operations failed across the change");
    // C's connections closed once their last requests were done.
    eventually("C's connections to close", || {
        raw::stat(c.addr(), "curr_connections") == baseline
    })
    .await;
    // Keys land where the new layout says.
    let layout = Topology::new(ClusterSpec::parse_server_list(&new_list).unwrap()).unwrap();
    for i in 0..50 {
        let key = format!("after:{i}");
        client.set(&key, "x", 0).await.unwrap();
        let home = &layout.servers()[layout.groups()[0].server_for(key.as_bytes()).0];
        let at = servers
            .iter()
            .find(|s| s.addr_string() == home.to_string())
            .unwrap();
        assert_eq!(
            raw::get(at.addr(), key.as_bytes()).as_deref(),
            Some(&b"x"[..])
        );
    }
    assert!(events.lock().unwrap().iter().any(|e| matches!(e,
        Event::TopologyChanged { added, removed }
            if added == &[d.addr_string()] && removed == &[c.addr_string()])));
}

/// `memgroup --config CONFIG --json status --watch 0.2 EXTRA…`, its stdout
/// and stderr piped.
fn status_watch(config: &std::path::Path, extra: &[&str]) -> std::process::Child {
    std::process::Command::new(env!("CARGO_BIN_EXE_memgroup"))
        // Each test its own state: no repair journal shared across tests.
        .env("MEMGROUP_REPAIR_JOURNAL", "off")
        .args([
            "--config",
            config.to_str().unwrap(),
            "--json",
            "status",
            "--watch",
            "0.2",
        ])
        .args(extra)
        .env_remove("MEMCACHED_SERVERS")
        .env_remove("MEMGROUP_GROUPS")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// The tool's long-running commands follow their `--config` file:
/// `status --watch` reports the server the file gains, without a restart.
#[test]
fn status_watch_follows_the_config_file() {
    use std::io::BufRead;

    let servers: Vec<Memcached> = (0..3).map(|_| Memcached::spawn()).collect();
    let dir = crate::support::tempdir::Dir::new("watch");
    let config = dir.path().join("cluster.toml");
    let write = |servers: &[Memcached]| {
        let list: Vec<String> = servers
            .iter()
            .map(|s| format!("{:?}", s.addr_string()))
            .collect();
        let text = format!(
            "[[groups]]\nname = \"sg1\"\nservers = [{}]\n",
            list.join(", ")
        );
        std::fs::write(&config, text).unwrap();
    };
    write(&servers[..2]);
    let mut child = status_watch(&config, &[]);
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let count = |line: &str| -> usize {
        let records: Vec<serde_json::Value> = serde_json::from_str(line).unwrap();
        records.iter().filter(|r| r["kind"] == "server").count()
    };
    assert_eq!(count(&lines.next().unwrap().unwrap()), 2);
    write(&servers);
    let mut seen = 2;
    for _ in 0..50 {
        seen = count(&lines.next().unwrap().unwrap());
        if seen == 3 {
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(seen, 3, "status --watch never showed the added server");
}

/// `status --watch --group` follows the file for that group, and a change
/// that drops the group is said on stderr (the command goes on with the
/// cluster as it was) instead of being ignored without a word.
#[test]
fn status_watch_of_a_group_says_when_the_file_drops_it() {
    use std::io::BufRead;

    let (a, b) = (Memcached::spawn(), Memcached::spawn());
    let dir = crate::support::tempdir::Dir::new("watch-group");
    let config = dir.path().join("cluster.toml");
    let group = |name: &str, server: &Memcached| {
        format!(
            "[[groups]]\nname = \"{name}\"\nservers = [{:?}]\n",
            server.addr_string()
        )
    };
    std::fs::write(&config, group("sg1", &a) + &group("sg2", &b)).unwrap();
    let mut child = status_watch(&config, &["--group", "sg2"]);
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let (tx, warnings) = std::sync::mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            let _ = tx.send(line);
        }
    });
    let servers = |line: &str| -> Vec<String> {
        let records: Vec<serde_json::Value> = serde_json::from_str(line).unwrap();
        records
            .iter()
            .filter(|r| r["kind"] == "server")
            .map(|r| r["server"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(servers(&lines.next().unwrap().unwrap()), [b.addr_string()]);
    std::fs::write(&config, group("sg1", &a)).unwrap();
    let mut said = None;
    for _ in 0..50 {
        // Still sg2's server, as it was.
        assert_eq!(servers(&lines.next().unwrap().unwrap()), [b.addr_string()]);
        if let Some(line) = warnings
            .try_iter()
            .find(|l| l.contains("no longer in the file"))
        {
            said = Some(line);
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    let said = said.expect("the dropped group was never said on stderr");
    assert!(said.contains("sg2") && said.contains("as it was"), "{said}");
}

/// `reconnect` (what `watch_dns` does when a name moves): the server's
/// connections are let go and the next requests open new ones.
#[tokio::test]
async fn reconnect_opens_new_connections() {
    let server = Memcached::spawn();
    let client = Client::builder()
        .servers(&server.addr_string())
        .pool_size(2)
        .build()
        .unwrap();
    // Requests on both slots: memcached has accepted both connections.
    for i in 0..10 {
        client.set(format!("k{i}"), "v", 0).await.unwrap();
    }
    let opened = raw::stat(server.addr(), "total_connections");
    client.reconnect(&server.addr_string()).unwrap();
    for i in 0..10 {
        client.set(format!("k{i}"), "v", 0).await.unwrap();
    }
    // Two new connections (the pool's), plus the stat call's own.
    assert_eq!(raw::stat(server.addr(), "total_connections"), opened + 3);
    assert!(client.reconnect("127.0.0.1:1").is_err());
}

/// `watch_dns` on a name that keeps resolving the same: no reconnect, however
/// many times it looks. Under paused time the watcher's passes are counted
/// by the clock, not hoped for: tokio moves a paused clock only when nothing
/// can run and no blocking task (a name lookup) is running, so each pass due
/// before the test's own timer has finished by the time it fires. (A watcher
/// that never looked would pass too: while the name resolves the same,
/// looking has no effect to observe.)
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn watch_dns_keeps_the_connections_of_a_name_that_resolves_the_same() {
    let server = Memcached::spawn();
    let name = format!("localhost:{}", server.addr().port());
    let by_name = Client::builder().servers(&name).build().unwrap();
    let clock = HeldClock::hold();
    by_name.set("k", "v", 0).await.unwrap();
    by_name.get("k").await.unwrap();
    drop(clock);
    let interval = Duration::from_secs(1);
    let _watcher = by_name.watch_dns(interval);
    let before = raw::stat(server.addr(), "total_connections");
    // Passes at 0, 1, …, 10 s: the first records the addresses, ten compare.
    tokio::time::sleep(interval * 10 + interval / 2).await;
    let _clock = HeldClock::hold();
    by_name.get("k").await.unwrap();
    // Only the stat call's own connection is new.
    let after = raw::stat(server.addr(), "total_connections");
    assert_eq!(after, before + 1);
    // A reconnect would show: the next get opens a new connection.
    by_name.reconnect(&name).unwrap();
    by_name.get("k").await.unwrap();
    assert_eq!(raw::stat(server.addr(), "total_connections"), after + 2);
}
