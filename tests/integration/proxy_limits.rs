//! `memgroup proxy` as a process left running: the most connections, idle
//! connections closed and holding no buffer, and the drain on shutdown
//! (every request already read answered, the rest cut after the grace).

use std::time::Duration;

use memgroup::client::Client;
use memgroup::proxy::{Drained, Proxy};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::proxy::{free_port, stat};
use crate::support::{Memcached, ToolProxy};

pub(crate) fn client_of(server: &Memcached) -> Client {
    Client::builder()
        .servers(&server.addr_string())
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap()
}

/// Sends `request` and reads until `ends` closes the reply (or the
/// connection closes: `<CLOSED>` appended).
async fn ask(stream: &mut TcpStream, request: &[u8], ends: &[u8]) -> Vec<u8> {
    stream.write_all(request).await.unwrap();
    let mut reply = Vec::new();
    let mut buf = [0u8; 4096];
    while !reply.ends_with(ends) {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => {
                reply.extend_from_slice(b"<CLOSED>");
                break;
            }
            Ok(n) => reply.extend_from_slice(&buf[..n]),
        }
    }
    reply
}

/// A proxy for `server` serving until the sender is used, then draining
/// for `grace`.
async fn draining(
    server: &Memcached,
    grace: Duration,
) -> (
    std::net::SocketAddr,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<Drained>,
) {
    let proxy = Proxy::bind(client_of(server), free_port()).await.unwrap();
    let addr = proxy.local_addrs()[0];
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(proxy.serve_until(
        async {
            let _ = stopped.await;
        },
        grace,
    ));
    (addr, stop, serving)
}

/// One connection over the most allowed gets memcached's own words and is
/// closed; counted; once one closes, a new one is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_over_the_most_gets_memcacheds_error() {
    let server = Memcached::spawn();
    let mut config = free_port();
    config.max_connections = 2;
    let proxy = Proxy::bind(client_of(&server), config).await.unwrap();
    let addr = proxy.local_addrs()[0];
    tokio::spawn(proxy.serve());
    let mut first = TcpStream::connect(addr).await.unwrap();
    let mut second = TcpStream::connect(addr).await.unwrap();
    for stream in [&mut first, &mut second] {
        assert_eq!(ask(stream, b"mn\r\n", b"MN\r\n").await, b"MN\r\n");
    }
    let mut third = TcpStream::connect(addr).await.unwrap();
    assert_eq!(
        ask(&mut third, b"mn\r\n", b"\r\n").await,
        b"ERROR Too many open connections\r\n"
    );
    assert!(ask(&mut third, b"", b"never").await.ends_with(b"<CLOSED>"));
    let stats = ask(&mut first, b"stats\r\n", b"END\r\n").await;
    assert_eq!(stat(&stats, "rejected_connections"), 1);
    assert_eq!(stat(&stats, "curr_connections"), 2);
    drop(second);
    // The proxy sees the close when it next reads that connection.
    let mut again = loop {
        let stats = ask(&mut first, b"stats\r\n", b"END\r\n").await;
        if stat(&stats, "curr_connections") == 1 {
            break TcpStream::connect(addr).await.unwrap();
        }
        tokio::task::yield_now().await;
    };
    assert_eq!(ask(&mut again, b"mn\r\n", b"MN\r\n").await, b"MN\r\n");
}

/// With an idle timeout, a connection with nothing to do is closed when it
/// passes (counted: `idle_kicks`) and a busy one is not. The proxy's clock
/// is the test's (paused; it advances when everything waits).
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn an_idle_connection_is_closed_and_a_busy_one_is_not() {
    let server = Memcached::spawn();
    let mut config = free_port();
    config.idle_timeout = Some(Duration::from_secs(60));
    let proxy = Proxy::bind(client_of(&server), config).await.unwrap();
    let addr = proxy.local_addrs()[0];
    tokio::spawn(proxy.serve());
    let mut idle = TcpStream::connect(addr).await.unwrap();
    let mut busy = TcpStream::connect(addr).await.unwrap();
    // `version` is the proxy's own reply: no server is waited for.
    for _ in 0..5 {
        tokio::time::sleep(Duration::from_secs(40)).await;
        let reply = ask(&mut busy, b"version\r\n", b"\r\n").await;
        assert!(reply.starts_with(b"VERSION "), "{reply:?}");
    }
    // 200 s have passed: the idle one was closed at 60.
    assert_eq!(ask(&mut idle, b"", b"never").await, b"<CLOSED>");
    let stats = ask(&mut busy, b"stats\r\n", b"END\r\n").await;
    assert_eq!(stat(&stats, "idle_kicks"), 1);
}

/// Idle connections hold no buffer: a few hundred of them cost the proxy
/// well under 4 KiB of heap each (measured by the counting allocator on
/// this test's thread, where the proxy's tasks run).
#[tokio::test(flavor = "current_thread")]
async fn idle_connections_cost_under_4_kib_each() {
    let server = Memcached::spawn();
    let proxy = Proxy::bind(client_of(&server), free_port()).await.unwrap();
    let addr = proxy.local_addrs()[0];
    tokio::spawn(proxy.serve());
    // Warm: the first connection's one-time allocations are not theirs.
    let mut warm = TcpStream::connect(addr).await.unwrap();
    assert_eq!(ask(&mut warm, b"mn\r\n", b"MN\r\n").await, b"MN\r\n");
    const IDLE: usize = 400;
    let peak = memgroup_testkit::alloc::Peak::start();
    let mut streams = Vec::with_capacity(IDLE);
    for _ in 0..IDLE {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        // Served once (its buffers were needed), then idle.
        assert_eq!(ask(&mut stream, b"mn\r\n", b"MN\r\n").await, b"MN\r\n");
        streams.push(stream);
    }
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
    let per_connection = peak.bytes() / IDLE;
    // Both ends are counted (the test's streams too): still under 4 KiB.
    assert!(per_connection <= 4096, "{per_connection} bytes each");
    assert!(
        per_connection >= 100,
        "the counting sees them: {per_connection}"
    );
}

/// Sends `n` gets in one write, waits for the first reply, then shuts the
/// proxy down: every request sent is answered, in whole, then the
/// connection closes and no new one is accepted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shutdown_answers_every_request_already_read() {
    let server = Memcached::spawn();
    let (addr, stop, serving) = draining(&server, Duration::from_secs(30)).await;
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let n = 200;
    let mut script = b"set k 0 0 1\r\nv\r\n".to_vec();
    for _ in 0..n {
        script.extend_from_slice(b"get k\r\n");
    }
    // The first read may carry some of the gets' replies after the STORED.
    stream.write_all(&script).await.unwrap();
    let mut first = Vec::new();
    while first.len() < b"STORED\r\n".len() {
        let mut chunk = [0u8; 4096];
        let n_read = stream.read(&mut chunk).await.unwrap();
        assert!(n_read > 0, "closed before STORED");
        first.extend_from_slice(&chunk[..n_read]);
    }
    assert!(first.starts_with(b"STORED\r\n"), "{first:?}");
    stop.send(()).unwrap();
    let mut rest = first[b"STORED\r\n".len()..].to_vec();
    rest.extend(ask(&mut stream, b"", b"<never>").await);
    let answered = rest.windows(5).filter(|w| w == b"END\r\n").count();
    assert_eq!(answered, n, "{}", String::from_utf8_lossy(&rest));
    assert!(rest.ends_with(b"END\r\n<CLOSED>"));
    let drained: Drained = serving.await.unwrap();
    assert_eq!((drained.connections, drained.cut), (1, 0));
    assert!(drained.answered <= n as u64);
    assert!(TcpStream::connect(addr).await.is_err(), "still accepting");
}

/// A request that cannot be answered (its server stopped) is cut when the
/// grace period ends; the drain says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_still_running_after_the_grace_is_cut() {
    let server = Memcached::spawn();
    let (addr, stop, serving) = draining(&server, Duration::from_millis(100)).await;
    let mut stream = TcpStream::connect(addr).await.unwrap();
    assert_eq!(ask(&mut stream, b"mn\r\n", b"MN\r\n").await, b"MN\r\n");
    server.stop();
    // Read at once and sent to the stopped server, where it waits out its
    // 5-s timeout: longer than the drain's grace.
    stream.write_all(b"get k\r\n").await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    stop.send(()).unwrap();
    let drained = serving.await.unwrap();
    server.resume();
    assert_eq!((drained.connections, drained.cut), (1, 1));
    assert_eq!(ask(&mut stream, b"", b"<never>").await, b"<CLOSED>");
}

/// The tool as an operator runs it: SIGTERM drains (a request waiting on a
/// stopped server when the signal comes is answered), says what it drained,
/// and exits 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tool_drains_on_sigterm_and_exits_0() {
    let server = Memcached::spawn();
    let tool = ToolProxy::start(&["--servers", &server.addr_string()], &["--grace", "5"]);
    let mut stream = TcpStream::connect(tool.addr).await.unwrap();
    assert_eq!(
        ask(&mut stream, b"set k 0 0 1\r\nv\r\n", b"\r\n").await,
        b"STORED\r\n"
    );
    // A get in flight when the signal comes: its server stopped, it waits
    // past the signal, and is answered once the server resumes.
    server.stop();
    stream.write_all(b"get k\r\n").await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let stopping = tokio::spawn(tool.terminate());
    tokio::time::sleep(Duration::from_millis(200)).await;
    server.resume();
    let reply = ask(&mut stream, b"", b"<never>").await;
    assert_eq!(
        reply,
        b"VALUE k 0 1\r\nv\r\nEND\r\n<CLOSED>",
        "{}",
        String::from_utf8_lossy(&reply)
    );
    let (status, rest, stderr) = stopping.await.unwrap();
    assert_eq!(status.code(), Some(0), "{rest:?} {stderr}");
    assert!(rest.iter().any(|l| l.contains("draining")), "{rest:?}");
    assert!(
        rest.iter()
            .any(|l| l.contains("0 cut after the grace period")),
        "{rest:?}"
    );
}
