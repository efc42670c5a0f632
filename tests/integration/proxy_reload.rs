//! `memgroup proxy` following its `--config` file: changes applied under
//! load (on SIGHUP and on its own reads) with no request failed or closed,
//! a bad file refused with one line while the old cluster serves, and
//! `--check`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::tempdir::Dir;
use crate::support::{Memcached, ToolProxy, memgroup};

/// A cluster.toml of one group, `servers` as written (`host:port[:weight]`).
fn cluster_toml(servers: &[String], timeout_ms: u64) -> String {
    let list: Vec<String> = servers.iter().map(|s| format!("{s:?}")).collect();
    format!(
        "hash = \"ketama\"\ntimeout_ms = {timeout_ms}\n\n[[groups]]\nname = \"sg1\"\nservers = [{}]\n",
        list.join(", ")
    )
}

/// Replaces the file at once (written beside it, then renamed), as a
/// deployment tool does: a reader never sees half a file.
fn replace(path: &std::path::Path, text: &str) {
    let next = path.with_extension("next");
    std::fs::write(&next, text).unwrap();
    std::fs::rename(&next, path).unwrap();
}

/// A client connection setting a key and reading it back in one write,
/// over and over; any reply but `STORED` then the value (or a miss or an
/// older value of the key, when the layout changed between the two) counts
/// as a failure.
async fn caller(
    addr: std::net::SocketAddr,
    id: usize,
    stop: Arc<AtomicBool>,
) -> (u64, Vec<String>) {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let (mut ops, mut failures) = (0u64, Vec::new());
    let mut round = 0u64;
    while !stop.load(Relaxed) {
        round += 1;
        let key = format!("c{id}k{}", round % 200);
        let value = format!("{round:08}");
        let request = format!("set {key} 0 0 8\r\n{value}\r\nget {key}\r\n");
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut reply = Vec::new();
        let mut buf = [0u8; 1024];
        while !reply.ends_with(b"END\r\n") {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => {
                    failures.push(format!("{key}: connection closed"));
                    return (ops, failures);
                }
                Ok(n) => reply.extend_from_slice(&buf[..n]),
            }
        }
        // A key the layout moved away and back may find the copy an earlier
        // round left on the server it returned to (no migration mode here):
        // an older value of this key is a layout's doing, anything else a
        // failure.
        let head = format!("STORED\r\nVALUE {key} 0 8\r\n");
        let read = reply
            .strip_prefix(head.as_bytes())
            .and_then(|rest| rest.strip_suffix(b"\r\nEND\r\n"))
            .and_then(|v| std::str::from_utf8(v).ok()?.parse::<u64>().ok());
        let ours = read.is_some_and(|r| r <= round && r % 200 == round % 200);
        if !ours && reply != b"STORED\r\nEND\r\n" {
            failures.push(format!("{key}: {}", String::from_utf8_lossy(&reply)));
        }
        ops += 2;
    }
    (ops, failures)
}

/// Eight connections under load while the file changes ten times (servers
/// added and weighted, the timeout changed, one unparsable version among
/// them), each change announced by SIGHUP: no request fails or is closed,
/// the bad file is said once and the proxy keeps serving, and the last
/// layout is the one serving (keys land on the server added last).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reloads_under_load_fail_no_request() {
    let servers: Vec<Memcached> = (0..3).map(|_| Memcached::spawn()).collect();
    let addr = |i: usize| servers[i].addr_string();
    let dir = Dir::new("proxy-reload");
    let file = dir.path().join("cluster.toml");
    replace(&file, &cluster_toml(&[addr(0)], 2000));
    let path = file.to_str().unwrap();
    let tool = ToolProxy::start(&["--config", path], &[]);

    let stop = Arc::new(AtomicBool::new(false));
    let callers: Vec<_> = (0..8)
        .map(|id| tokio::spawn(caller(tool.addr, id, stop.clone())))
        .collect();
    let versions = [
        cluster_toml(&[addr(0), addr(1)], 2000),
        cluster_toml(&[format!("{}:3", addr(0)), addr(1)], 2000),
        cluster_toml(&[addr(0), addr(1)], 1500),
        "[[groups]]\nname = \"sg1\"\nservers = [\"not a server\"]\n".to_string(),
        cluster_toml(&[addr(1)], 2000),
        cluster_toml(&[addr(0), addr(1)], 2000),
        cluster_toml(&[addr(0), format!("{}:2", addr(1))], 1000),
        cluster_toml(&[addr(1), addr(0)], 2000),
        cluster_toml(&[addr(0)], 2000),
        cluster_toml(&[addr(0), addr(1), addr(2)], 2000),
    ];
    for text in &versions {
        replace(&file, text);
        tool.signal("HUP");
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    // Long enough for the last layout to take load on its new server.
    let before = crate::support::raw::stat(servers[2].addr(), "cmd_set");
    crate::support::eventually("sets on the server added last", || {
        crate::support::raw::stat(servers[2].addr(), "cmd_set") > before + 50
    })
    .await;
    stop.store(true, Relaxed);
    let (mut ops, mut failures) = (0, Vec::new());
    for caller in callers {
        let (n, failed) = caller.await.unwrap();
        ops += n;
        failures.extend(failed);
    }
    let (status, _, stderr) = tool.terminate().await;
    assert!(
        failures.is_empty(),
        "{} failed: {failures:?}",
        failures.len()
    );
    assert!(ops > 1000, "{ops} requests");
    assert_eq!(status.code(), Some(0), "{stderr}");
    let applied = stderr.matches("cluster file applied").count();
    assert!(applied >= 5, "{applied} applied: {stderr}");
    let refused: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("going on with the cluster as it was"))
        .collect();
    assert_eq!(refused.len(), 1, "{stderr}");
    assert!(refused[0].contains("not a server"), "{}", refused[0]);
}

/// `proxy --check` reads the cluster as the proxy would and exits: 0 and a
/// summary for a valid file, 2 and the problem for one that is not.
#[test]
fn check_validates_a_file_and_exits() {
    let dir = Dir::new("proxy-check");
    let file = dir.path().join("cluster.toml");
    replace(
        &file,
        &cluster_toml(&["127.0.0.1:1".into(), "127.0.0.1:2:3".into()], 100),
    );
    let path = file.to_str().unwrap();
    let o = memgroup(&["--config", path, "proxy", "--check"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "cluster valid: 1 groups, 2 servers\n"
    );
    replace(
        &file,
        "[[groups]]\nname = \"sg1\"\nservers = [\"127.0.0.1:x\"]\n",
    );
    let o = memgroup(&["--config", path, "proxy", "--check"]);
    assert_eq!(o.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.contains("127.0.0.1:x"), "{stderr}");
}

/// The library's control handle: a second address opens beside the first,
/// then the first stops accepting while the connection it carried is
/// served to the end, and an address that cannot be bound changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listeners_open_and_close_while_the_proxy_serves() {
    use memgroup::proxy::{Proxy, ProxyConfig};
    let server = Memcached::spawn();
    let first: std::net::SocketAddr = "127.0.0.1:0".parse().unwrap();
    let second: std::net::SocketAddr = "127.0.0.2:0".parse().unwrap();
    let client = crate::proxy_limits::client_of(&server);
    let proxy = Proxy::bind(client, ProxyConfig::listen([first]))
        .await
        .unwrap();
    let control = proxy.control();
    let at_first = proxy.local_addrs()[0];
    tokio::spawn(proxy.serve());
    let mut carried = TcpStream::connect(at_first).await.unwrap();
    let both = control.listen(&[first, second]).await.unwrap();
    assert_eq!(both.len(), 2);
    assert_eq!(both[0], at_first, "an address kept is untouched");
    let at_second = both[1];
    let reply = crate::proxy::exchange(at_second, b"set k 0 0 1\r\nv\r\n").await;
    assert!(reply.starts_with(b"STORED\r\n"), "{reply:?}");

    assert_eq!(control.listen(&[second]).await.unwrap(), [at_second]);
    // The first address refuses new connections...
    assert!(
        TcpStream::connect(at_first).await.is_err(),
        "{at_first} still accepts"
    );
    // ...while the connection it carried is served.
    carried.write_all(b"get k\r\n").await.unwrap();
    let mut reply = vec![0u8; 64];
    let n = carried.read(&mut reply).await.unwrap();
    assert_eq!(&reply[..n], b"VALUE k 0 1\r\nv\r\nEND\r\n");

    // An address in use: refused by name, the listeners as they were.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken = taken.local_addr().unwrap();
    let error = control.listen(&[second, taken]).await.unwrap_err();
    assert!(error.to_string().contains(&taken.to_string()), "{error}");
    assert_eq!(control.local_addrs(), [at_second]);
}

/// A client whose connection the kernel completed but the proxy had not
/// accepted yet when its address left the list is served, not reset: the
/// listener takes what is waiting before it closes. One runtime thread, and
/// blocking connects, so the accept task cannot run in between.
#[tokio::test(flavor = "current_thread")]
async fn connections_waiting_in_a_closed_listeners_backlog_are_served() {
    use memgroup::proxy::{Proxy, ProxyConfig};
    use std::io::{Read, Write};
    let server = Memcached::spawn();
    let first: std::net::SocketAddr = "127.0.0.1:0".parse().unwrap();
    let second: std::net::SocketAddr = "127.0.0.2:0".parse().unwrap();
    let proxy = Proxy::bind(
        crate::proxy_limits::client_of(&server),
        ProxyConfig::listen([first]),
    )
    .await
    .unwrap();
    let control = proxy.control();
    let at_first = proxy.local_addrs()[0];
    tokio::spawn(proxy.serve());
    tokio::task::yield_now().await;
    let waiting: Vec<std::net::TcpStream> = (0..5)
        .map(|_| std::net::TcpStream::connect(at_first).unwrap())
        .collect();
    control.listen(&[second]).await.unwrap();
    let answers = tokio::task::spawn_blocking(move || {
        waiting
            .into_iter()
            .map(|mut stream| {
                stream
                    .set_read_timeout(Some(std::time::Duration::from_secs(5)))
                    .unwrap();
                stream.write_all(b"version\r\n").unwrap();
                let mut reply = [0u8; 64];
                match stream.read(&mut reply) {
                    Ok(n) => String::from_utf8_lossy(&reply[..n]).into_owned(),
                    Err(e) => format!("{e}"),
                }
            })
            .collect::<Vec<_>>()
    })
    .await
    .unwrap();
    for answer in answers {
        assert!(answer.starts_with("VERSION "), "{answer}");
    }
}

/// `[proxy] listen` in the cluster file, followed: the proxy serves on the
/// file's address beside its --listen; the file names another, and the
/// proxy opens it and stops accepting on the old one, whose connection is
/// served on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_proxy_follows_the_listen_addresses_of_its_file() {
    let server = Memcached::spawn();
    let dir = Dir::new("proxy-listen");
    let path = dir.path().join("cluster.toml");
    let port = {
        let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        free.local_addr().unwrap().port()
    };
    let (first, second): (std::net::SocketAddr, std::net::SocketAddr) = (
        format!("127.0.0.2:{port}").parse().unwrap(),
        format!("127.0.0.3:{port}").parse().unwrap(),
    );
    let text = |listen: std::net::SocketAddr| {
        format!(
            "{}\n[proxy]\nlisten = [\"{listen}\"]\n",
            cluster_toml(&[server.addr_string()], 1000)
        )
    };
    replace(&path, &text(first));
    let tool = ToolProxy::start(&["--config", path.to_str().unwrap()], &[]);
    let reply = crate::proxy::exchange(first, b"set k 0 0 1\r\nv\r\n").await;
    assert!(reply.starts_with(b"STORED\r\n"), "{reply:?}");
    // Connected just before the reload: some still wait in the listener's
    // backlog when it closes, connected as far as they know.
    let mut carried = Vec::new();
    for _ in 0..50 {
        carried.push(TcpStream::connect(first).await.unwrap());
    }

    replace(&path, &text(second));
    assert!(tool.said("memgroup proxy now listening on").await);
    let reply = crate::proxy::exchange(second, b"get k\r\n").await;
    assert!(
        reply.starts_with(b"VALUE k 0 1\r\nv\r\nEND\r\n"),
        "{reply:?}"
    );
    assert!(
        TcpStream::connect(first).await.is_err(),
        "{first} still accepts"
    );
    for carried in &mut carried {
        carried.write_all(b"get k\r\n").await.unwrap();
        let mut got = vec![0u8; 64];
        let n = carried.read(&mut got).await.unwrap();
        assert_eq!(&got[..n], b"VALUE k 0 1\r\nv\r\nEND\r\n");
    }
    let (status, _, stderr) = tool.terminate().await;
    assert_eq!(status.code(), Some(0), "{stderr}");
}

/// Sends `request` and reads until the reply ends with `ends`.
async fn ask(stream: &mut TcpStream, request: &[u8], ends: &[u8]) -> Vec<u8> {
    stream.write_all(request).await.unwrap();
    let mut reply = Vec::new();
    let mut buf = [0u8; 4096];
    while !reply.ends_with(ends) {
        let n = stream.read(&mut buf).await.unwrap();
        assert!(n > 0, "closed after {:?}", String::from_utf8_lossy(&reply));
        reply.extend_from_slice(&buf[..n]);
    }
    reply
}

/// A reload that adds a server and names `migrate_from` reads the keys
/// that moved through to the old layout and backfills them; one that drops
/// `migrate_from` ends the migration; a setting that applies only at a
/// restart is said.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_begins_and_ends_a_migration() {
    use memgroup::topology::{ClusterSpec, Topology};
    let servers: Vec<Memcached> = (0..2).map(|_| Memcached::spawn()).collect();
    let addr = |i: usize| servers[i].addr_string();
    let new_layout = Topology::new(
        ClusterSpec::parse_server_list(&format!("{},{}", addr(0), addr(1)))
            .unwrap()
            .with_hash(memgroup::hash::HashStrategy::Ketama),
    )
    .unwrap();
    let moves = |key: &str| new_layout.groups()[0].server_for(key.as_bytes()).0 == 1;
    let keys: Vec<String> = (0..200).map(|i| format!("m{i}")).collect();
    for key in &keys {
        crate::support::raw::set(servers[0].addr(), key.as_bytes(), key.as_bytes());
    }
    let moved: Vec<&String> = keys.iter().filter(|k| moves(k)).collect();
    assert!(moved.len() > 40, "{} moved", moved.len());

    let dir = Dir::new("proxy-migrate");
    let file = dir.path().join("cluster.toml");
    replace(&file, &cluster_toml(&[addr(0)], 2000));
    let tool = ToolProxy::start(&["--config", file.to_str().unwrap()], &[]);
    let both = cluster_toml(&[addr(0), addr(1)], 2000);
    replace(&file, &format!("migrate_from = {:?}\n{both}", addr(0)));
    tool.signal("HUP");
    assert!(tool.said("migrate_from applied").await);
    let mut stream = TcpStream::connect(tool.addr).await.unwrap();
    for key in &moved {
        let reply = ask(&mut stream, format!("get {key}\r\n").as_bytes(), b"END\r\n").await;
        let hit = format!("VALUE {key} 0 {}\r\n{key}\r\nEND\r\n", key.len());
        assert_eq!(String::from_utf8_lossy(&reply), hit, "read through");
        let copy = crate::support::raw::get(servers[1].addr(), key.as_bytes());
        assert_eq!(copy.as_deref(), Some(key.as_bytes()), "backfilled");
    }

    // The migration ends; a copy only the old placement holds is not read.
    let late = (0..)
        .map(|i| format!("late{i}"))
        .find(|k| moves(k))
        .unwrap();
    crate::support::raw::set(servers[0].addr(), late.as_bytes(), b"old");
    replace(
        &file,
        &format!(
            "connect_timeout_ms = 700\n{}",
            cluster_toml(&[addr(0), addr(1)], 1500)
        ),
    );
    tool.signal("HUP");
    assert!(tool.said("the migration has ended").await);
    assert!(
        tool.said("connect_timeout_ms changed: it applies at a restart")
            .await
    );
    let reply = ask(
        &mut stream,
        format!("get {late}\r\n").as_bytes(),
        b"END\r\n",
    )
    .await;
    assert_eq!(String::from_utf8_lossy(&reply), "END\r\n");
    let (status, _, stderr) = tool.terminate().await;
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(
        !stderr.contains("file's timeout_ms"),
        "applied, not deferred: {stderr}"
    );
}
