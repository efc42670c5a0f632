//! Cluster discovery against real memcached nodes: the legacy list item
//! served by a real memcached as the configuration endpoint, and — since
//! stock memcached has no `config get cluster` — a small fault-injecting
//! peer answering only that command, with the versions the test sets. A
//! version bump that adds and removes a node is followed under load with
//! no failed operation, the removed node running until it drains.

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use memgroup::client::{Client, ErrorKind, Event};
use memgroup::topology::{ClusterSpec, Topology};

use crate::support::{Load, Memcached, eventually, fault_peer, raw};

/// A cluster list of `version` naming `nodes`, as the endpoint serves it.
fn list(version: u64, nodes: &[&Memcached]) -> String {
    let entries: Vec<String> = nodes
        .iter()
        .map(|n| {
            format!(
                "node{}.local|127.0.0.1|{}",
                n.addr().port(),
                n.addr().port()
            )
        })
        .collect();
    format!("{version}\n{}\n", entries.join(" "))
}

/// A configuration endpoint answering `config get cluster` with whatever
/// `served` holds (`None`: garbage), and `ERROR` to anything else.
fn endpoint(served: Arc<Mutex<Option<String>>>) -> String {
    fault_peer(move |request, conn| {
        let reply = if request.starts_with(b"config get cluster\r\n") {
            match served.lock().unwrap().clone() {
                Some(data) => format!("CONFIG cluster 0 {}\r\n{data}\r\nEND\r\n", data.len()),
                None => "CONFIG cluster 0 5\r\nxy\r\nEND\r\n".to_string(),
            }
        } else {
            "ERROR\r\n".to_string()
        };
        conn.write_all(reply.as_bytes()).is_ok()
    })
}

fn servers_of(client: &Client) -> Vec<String> {
    let mut s: Vec<String> = client
        .topology()
        .servers()
        .iter()
        .map(ToString::to_string)
        .collect();
    s.sort();
    s
}

#[tokio::test]
async fn the_legacy_item_of_a_real_memcached_lists_the_cluster() {
    let (config, a, b) = (Memcached::spawn(), Memcached::spawn(), Memcached::spawn());
    raw::set(
        config.addr(),
        b"AmazonElastiCache:cluster",
        list(4, &[&a, &b]).as_bytes(),
    );
    let client = Client::builder()
        .discover(&config.addr_string())
        .connect()
        .await
        .unwrap();
    let mut want = vec![a.addr_string(), b.addr_string()];
    want.sort();
    assert_eq!(servers_of(&client), want);
    // Named `ip:port` (the names the spymemcached vectors cover): routing
    // is the static list's, key for key.
    let static_list = format!("{},{}", a.addr_string(), b.addr_string());
    let layout = Topology::new(ClusterSpec::parse_server_list(&static_list).unwrap()).unwrap();
    for i in 0..40 {
        let key = format!("k{i}");
        client.set(&key, "v", 0).await.unwrap();
        let home = layout.servers()[layout.groups()[0].server_for(key.as_bytes()).0].to_string();
        let at = if home == a.addr_string() { &a } else { &b };
        assert_eq!(
            raw::get(at.addr(), key.as_bytes()).as_deref(),
            Some(&b"v"[..]),
            "{key}"
        );
    }
    // The endpoint holds only its list.
    assert_eq!(raw::stat(config.addr(), "curr_items"), 1);
    // `build` refuses a discovered cluster; an endpoint with no list and no
    // fallback is an error at connect.
    let refused = Client::builder()
        .discover(&config.addr_string())
        .build()
        .unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::Config);
    raw::delete(config.addr(), b"AmazonElastiCache:cluster");
    let none = Client::builder()
        .discover(&config.addr_string())
        .connect()
        .await
        .unwrap_err();
    assert_eq!(none.kind(), ErrorKind::Config, "{}", none.chain());
    assert!(none.chain().contains("no cluster list"), "{}", none.chain());
    // An endpoint that cannot be reached is a failure of the moment, not of
    // the settings: its own kind (the tool exits 1, not 2).
    let down = Client::builder()
        .discover("127.0.0.1:1")
        .connect()
        .await
        .unwrap_err();
    assert_eq!(down.kind(), ErrorKind::Connection, "{}", down.chain());
    let out = crate::support::memgroup(&["--discover", "127.0.0.1:1", "get", "x"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    // The endpoint is read as a --servers entry when the flag is parsed:
    // a bad port or two endpoints are usage errors naming the flag.
    for (bad, says) in [
        ("127.0.0.1:99999", "port"),
        ("127.0.0.1:1,127.0.0.1:2", "expected one endpoint"),
    ] {
        let out = crate::support::memgroup(&["--discover", bad, "get", "x"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bad}: {stderr}");
        assert!(
            stderr.contains("--discover") && stderr.contains(says),
            "{bad}: {stderr}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_bump_adds_and_removes_a_node_under_load_with_no_failed_operation() {
    let (a, b, c) = (Memcached::spawn(), Memcached::spawn(), Memcached::spawn());
    let served = Arc::new(Mutex::new(Some(list(1, &[&a, &b]))));
    let at = endpoint(served.clone());
    let events = Arc::new(Mutex::new(Vec::new()));
    let seen = events.clone();
    let client = Client::builder()
        .discover(&at)
        .discover_every(Duration::from_millis(30))
        .on_event(move |e| seen.lock().unwrap().push(e.clone()))
        .connect()
        .await
        .unwrap();
    let load = Load::start(&client, 6, 300);
    eventually("load", || load.ops() > 500).await;
    // The same version again changes nothing; garbage is an event.
    *served.lock().unwrap() = None;
    eventually("the failed poll", || {
        events
            .lock()
            .unwrap()
            .iter()
            .any(|e| matches!(e, Event::DiscoveryFailed { .. }))
    })
    .await;
    assert_eq!(servers_of(&client).len(), 2);
    // Version 2: A leaves, C joins.
    *served.lock().unwrap() = Some(list(2, &[&b, &c]));
    let mut want = vec![b.addr_string(), c.addr_string()];
    want.sort();
    eventually("the new list", || servers_of(&client) == want).await;
    let during = load.ops();
    eventually("more load on the new list", || load.ops() > during + 2000).await;
    // A still runs, but is no longer written to.
    let a_sets = raw::stat(a.addr(), "cmd_set");
    let after = load.ops();
    eventually("more load", || load.ops() > after + 1000).await;
    let (total, failed) = load.stop().await;
    assert_eq!(
        raw::stat(a.addr(), "cmd_set"),
        a_sets,
        "a removed node was written to"
    );
    assert!(
        raw::stat(c.addr(), "cmd_set") > 0,
        "the added node took no write"
    );
    assert_eq!(
        failed, 0,
        "operations failed across the change ({total} in all)"
    );
    eprintln!(
        "discovery under load: {total} operations ({during} when the new list was in), 0 failed"
    );
    assert!(events.lock().unwrap().iter().any(|e| matches!(
        e,
        Event::Discovered {
            version: 2,
            previous: 1,
            servers: 2,
            ..
        }
    )));
}

#[tokio::test]
async fn a_lower_version_is_taken_only_once_polls_agree_and_a_fallback_covers_a_dead_endpoint() {
    let (a, b) = (Memcached::spawn(), Memcached::spawn());
    let served = Arc::new(Mutex::new(Some(list(9, &[&a]))));
    let at = endpoint(served.clone());
    let events = Arc::new(Mutex::new(Vec::new()));
    let seen = events.clone();
    let client = Client::builder()
        .discover(&at)
        .discover_every(Duration::from_millis(20))
        .on_event(move |e| seen.lock().unwrap().push(e.clone()))
        .connect()
        .await
        .unwrap();
    assert_eq!(servers_of(&client), [a.addr_string()]);
    // A recreated cluster at version 1: refused until three polls agree.
    *served.lock().unwrap() = Some(list(1, &[&b]));
    eventually("the lower version", || {
        servers_of(&client) == [b.addr_string()]
    })
    .await;
    let refusals = events
        .lock()
        .unwrap()
        .iter()
        .filter(|e| matches!(e, Event::DiscoveryFailed { .. }))
        .count();
    assert_eq!(
        refusals,
        memgroup::client::discover::LOWER_AGREEING as usize - 1
    );
    // An endpoint that cannot be reached, with a static list: the list.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead = closed.local_addr().unwrap().to_string();
    drop(closed);
    let fallback = Client::builder()
        .servers(&a.addr_string())
        .discover(&dead)
        .connect()
        .await
        .unwrap();
    assert_eq!(servers_of(&fallback), [a.addr_string()]);
    fallback.set("f", "1", 0).await.unwrap();
}

/// The tool: `--discover` and a `cluster.toml` with `discover` find the
/// servers at the endpoint; the routed key lands on a discovered node.
#[test]
fn the_tool_discovers_by_flag_and_by_file() {
    use crate::support::{memgroup_ok, tempdir};
    let (config, a, b) = (Memcached::spawn(), Memcached::spawn(), Memcached::spawn());
    raw::set(
        config.addr(),
        b"AmazonElastiCache:cluster",
        list(2, &[&a, &b]).as_bytes(),
    );
    let endpoint = config.addr_string();
    memgroup_ok(&["--discover", &endpoint, "set", "tool:k", "v"]);
    let found = raw::get(a.addr(), b"tool:k").or_else(|| raw::get(b.addr(), b"tool:k"));
    assert_eq!(found.as_deref(), Some(&b"v"[..]));
    assert_eq!(raw::get(config.addr(), b"tool:k"), None);
    let dir = tempdir::Dir::new("discover");
    let file = dir.path().join("cluster.toml");
    std::fs::write(
        &file,
        format!("discover = {endpoint:?}\ndiscover_every_s = 30\n"),
    )
    .unwrap();
    let got = memgroup_ok(&["--config", file.to_str().unwrap(), "get", "tool:k"]);
    assert_eq!(got, "v");
    std::fs::write(
        &file,
        format!("[[groups]]\nname = \"sg1\"\ndiscover = {endpoint:?}\n"),
    )
    .unwrap();
    let got = memgroup_ok(&["--config", file.to_str().unwrap(), "get", "tool:k"]);
    assert_eq!(got, "v");
    // `config` names the endpoint a group's servers come from, and its arbiter.
    let shown = memgroup_ok(&["--config", file.to_str().unwrap(), "config"]);
    let line = |name: &str| shown.lines().find(|l| l.starts_with(name)).unwrap_or("");
    assert!(
        line("servers").contains(&format!("sg1=(discovered from {endpoint})")),
        "{shown}"
    );
    assert!(line("arbiter").contains("sg1"), "{shown}");
}
