//! The proxy's own statistics: `stats latency` (each command's latency over
//! a recent window), `stats servers` (each server as the client sees it)
//! and the client's part of `stats`, checked against what was sent and
//! against a server killed behind it.

use memgroup::client::Client;

use crate::proxy::{exchange, proxy, stat};
use crate::support::Memcached;

/// `stats <section>` on a connection of its own, read to its `END` (no end
/// marker after it: that would be one more get for the servers to count).
async fn stats(addr: std::net::SocketAddr, section: &str) -> Vec<u8> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(format!("stats {section}\r\n").as_bytes())
        .await
        .unwrap();
    let mut reply = Vec::new();
    let mut buf = [0u8; 4096];
    while !reply.ends_with(b"END\r\n") {
        let n = stream.read(&mut buf).await.unwrap();
        assert!(n > 0, "closed: {}", String::from_utf8_lossy(&reply));
        reply.extend_from_slice(&buf[..n]);
    }
    reply
}

/// The value of `STAT <name> <value>`, as text.
fn text(reply: &[u8], name: &str) -> Option<String> {
    String::from_utf8_lossy(reply)
        .lines()
        .find_map(|l| l.strip_prefix(&format!("STAT {name} ")).map(str::to_string))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latency_and_servers_sections_count_what_was_sent() {
    let (a, b) = (Memcached::spawn(), Memcached::spawn());
    let client = Client::builder()
        .servers(&format!("{},{}", a.addr_string(), b.addr_string()))
        .build()
        .unwrap();
    let proxied = proxy(client).await;
    let mut script = Vec::new();
    for i in 0..20 {
        script.extend_from_slice(format!("set k{i} 0 0 1\r\n1\r\nget k{i}\r\n").as_bytes());
    }
    script.extend_from_slice(b"delete k0\r\nincr k1 1\r\ntouch k2 10\r\nversion\r\n");
    exchange(proxied, &script).await;

    let latency = exchange(proxied, b"stats latency\r\n").await;
    assert!(latency.ends_with(b"END\r\n"));
    // The exchange's end marker (`mg __end__ k`) is a get too.
    assert_eq!(stat(&latency, "get:count"), 21);
    assert_eq!(stat(&latency, "set:count"), 20);
    for command in ["delete", "arith", "touch"] {
        assert_eq!(stat(&latency, &format!("{command}:count")), 1);
    }
    // `version` is the proxy's own: not timed.
    assert_eq!(stat(&latency, "other:count"), 0);
    let (p50, p99, p999) = (
        stat(&latency, "get:p50_us"),
        stat(&latency, "get:p99_us"),
        stat(&latency, "get:p999_us"),
    );
    assert!(0 < p50 && p50 <= p99 && p99 <= p999, "{p50} {p99} {p999}");
    assert!(text(&latency, "other:p50_us").is_none());

    let servers = stats(proxied, "servers").await;
    let mut requests = 0;
    for server in [&a, &b] {
        let name = server.addr_string();
        assert_eq!(text(&servers, &format!("{name}:state")).unwrap(), "up");
        assert_eq!(
            text(&servers, &format!("{name}:groups")).unwrap(),
            "default"
        );
        // The keys each server found and missed, as it counted them.
        for (ours, its) in [("hits", "get_hits"), ("misses", "get_misses")] {
            assert_eq!(
                stat(&servers, &format!("{name}:{ours}")),
                crate::support::raw::stat(server.addr(), its),
                "{name} {ours}"
            );
        }
        let sent = stat(&servers, &format!("{name}:requests"));
        assert!(sent > 0);
        requests += sent;
    }
    let general = exchange(proxied, b"stats\r\n").await;
    assert_eq!(stat(&general, "server_requests"), requests);
    assert_eq!(stat(&general, "servers"), 2);
    assert_eq!(stat(&general, "servers_up"), 2);
    assert_eq!(stat(&general, "topology_generation"), 1);

    // A server killed: its keys' requests fail, it is marked dead.
    let b_name = b.addr_string();
    drop(b);
    let mut gets = Vec::new();
    for i in 0..20 {
        gets.extend_from_slice(format!("get k{i}\r\n").as_bytes());
    }
    exchange(proxied, &gets).await;
    let servers = stats(proxied, "servers").await;
    assert_eq!(
        text(&servers, &format!("{b_name}:state")).unwrap(),
        "dead",
        "{}",
        String::from_utf8_lossy(&servers)
    );
    assert!(stat(&servers, &format!("{b_name}:errors")) >= 1);
    assert!(stat(&servers, &format!("{b_name}:retry_in_ms")) > 0);
    assert_eq!(
        stat(&exchange(proxied, b"stats\r\n").await, "servers_up"),
        1
    );

    // `stats reset` empties the window.
    assert_eq!(exchange(proxied, b"stats reset\r\n").await, b"RESET\r\n");
    let latency = exchange(proxied, b"stats latency\r\n").await;
    assert_eq!(stat(&latency, "set:count"), 0);
}

/// The metrics one Prometheus scrape of `addr` reads, as `name value` by
/// name (labels kept in the name); empty when nothing listens yet.
fn scrape(addr: std::net::SocketAddr) -> std::collections::HashMap<String, f64> {
    use std::io::{Read, Write};
    let Ok(mut stream) = std::net::TcpStream::connect(addr) else {
        return std::collections::HashMap::new();
    };
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut reply = String::new();
    stream.read_to_string(&mut reply).unwrap();
    let body = reply.split_once("\r\n\r\n").map_or("", |(_, body)| body);
    body.lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| {
            let (name, value) = line.rsplit_once(' ')?;
            Some((name.to_owned(), value.parse().ok()?))
        })
        .collect()
}

/// `memgroup proxy --metrics-listen`: a Prometheus scrape reads the proxy's
/// `stats` (as `memgroup_proxy_*`, refreshed every second) and the client's
/// operation durations, counted against what was sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_reads_what_stats_says() {
    let server = Memcached::spawn();
    let metrics = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let metrics_addr = metrics.local_addr().unwrap();
    drop(metrics);
    let tool = crate::support::ToolProxy::start(
        &["--servers", &server.addr_string()],
        &["--metrics-listen", &metrics_addr.to_string()],
    );
    let front = Client::builder()
        .servers(&tool.addr.to_string())
        .build()
        .unwrap();
    for i in 0..30 {
        front.set(&format!("k{i}"), "v", 0).await.unwrap();
    }
    for i in 0..50 {
        front.get(&format!("k{i}")).await.unwrap();
    }
    let mut seen = std::collections::HashMap::new();
    for _ in 0..100 {
        seen = scrape(metrics_addr);
        if seen.get("memgroup_proxy_cmd_get") == Some(&50.0) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(seen.get("memgroup_proxy_cmd_get"), Some(&50.0), "{seen:?}");
    assert_eq!(seen.get("memgroup_proxy_cmd_set"), Some(&30.0));
    assert_eq!(seen.get("memgroup_proxy_get_hits"), Some(&30.0));
    assert_eq!(seen.get("memgroup_proxy_get_misses"), Some(&20.0));
    assert_eq!(seen.get("memgroup_proxy_curr_connections"), Some(&1.0));
    assert_eq!(seen.get("memgroup_proxy_servers_up"), Some(&1.0));
    // The client's histogram: every set the proxy forwarded.
    let sets = seen
        .iter()
        .find(|(name, _)| {
            name.starts_with("db_client_operation_duration_count")
                && name.contains("db_operation_name=\"set\"")
        })
        .map(|(_, count)| *count);
    assert_eq!(sets, Some(30.0), "{seen:?}");
    let (status, _, stderr) = tool.terminate().await;
    assert_eq!(status.code(), Some(0), "{stderr}");
}
