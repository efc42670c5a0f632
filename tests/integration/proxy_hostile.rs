//! Hostile clients against the tool's proxy process: each costs only its
//! own connection while a well-behaved client is served throughout, the
//! process's memory stays within the limits, and 10,000 idle connections
//! cost it under 4 KiB each (its resident memory, from `/proc`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::{Memcached, ToolProxy};

/// The process's resident memory, in bytes.
fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap();
    kib * 1024
}

/// Raises this process's soft limit on open descriptors to the hard one;
/// the hard one.
fn raise_descriptor_limit() -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: both calls only read and write the struct on this stack.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit), 0);
        limit.rlim_cur = limit.rlim_max;
        assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &limit), 0);
    }
    limit.rlim_max
}

/// Reads until the connection closes or `secs` pass; what came, and
/// whether it closed.
async fn drain(stream: &mut TcpStream, secs: u64) -> (Vec<u8>, bool) {
    let mut got = Vec::new();
    let mut buf = [0u8; 65536];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    loop {
        match tokio::time::timeout_at(deadline, stream.read(&mut buf)).await {
            Err(_) => return (got, false),
            Ok(Ok(0) | Err(_)) => return (got, true),
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
        }
    }
}

/// Sets and reads back its keys until stopped; every reply must be right.
async fn good_client(addr: std::net::SocketAddr, stop: Arc<AtomicBool>) -> u64 {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let mut rounds = 0u64;
    while !stop.load(Relaxed) {
        rounds += 1;
        let request = format!(
            "set good{} 0 0 6\r\n{rounds:06}\r\nget good{}\r\n",
            rounds % 50,
            rounds % 50
        );
        stream.write_all(request.as_bytes()).await.unwrap();
        let want = format!(
            "STORED\r\nVALUE good{} 0 6\r\n{rounds:06}\r\nEND\r\n",
            rounds % 50
        );
        let mut reply = vec![0u8; want.len()];
        stream.read_exact(&mut reply).await.unwrap();
        assert_eq!(String::from_utf8_lossy(&reply), want);
    }
    rounds
}

/// Garbage, an endless line, values longer and shorter than announced, a
/// huge announced value, a request dripped byte by byte and a client that
/// never reads: each gets memcached's words or is closed, the good client
/// is served all along, the proxy grows by no more than its limits allow.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_clients_cost_only_their_own_connections() {
    let server = Memcached::spawn();
    let tool = ToolProxy::start(&["--servers", &server.addr_string()], &[]);
    let addr = tool.addr;
    let before = rss(tool.pid());
    let stop = Arc::new(AtomicBool::new(false));
    let good = tokio::spawn(good_client(addr, stop.clone()));

    // Garbage lines: memcached's ERROR for each, the connection kept.
    let mut garbage = TcpStream::connect(addr).await.unwrap();
    garbage
        .write_all(b"\x01\x02 hello\r\nfoo bar\r\n")
        .await
        .unwrap();
    garbage.write_all(b"version\r\n").await.unwrap();
    let mut reply = vec![0u8; b"ERROR\r\nERROR\r\nVERSION ".len()];
    garbage.read_exact(&mut reply).await.unwrap();
    assert_eq!(&reply, b"ERROR\r\nERROR\r\nVERSION ");

    // A line without end: closed once it passes what memcached allows.
    let mut endless = TcpStream::connect(addr).await.unwrap();
    let _ = endless.write_all(&vec![b'x'; 64 * 1024]).await;
    assert!(
        drain(&mut endless, 10).await.1,
        "an endless line was not closed"
    );

    // A value longer than announced: memcached's CLIENT_ERROR, then the
    // rest read as commands.
    let mut longer = TcpStream::connect(addr).await.unwrap();
    longer
        .write_all(b"set k 0 0 3\r\nabcdef\r\n")
        .await
        .unwrap();
    let mut reply = vec![0u8; b"CLIENT_ERROR bad data chunk\r\n".len()];
    longer.read_exact(&mut reply).await.unwrap();
    assert_eq!(&reply, b"CLIENT_ERROR bad data chunk\r\n");

    // A huge announced value: refused without being allocated, and its
    // data swallowed as memcached does.
    let mut huge = TcpStream::connect(addr).await.unwrap();
    huge.write_all(b"set k 0 0 2000000000\r\n").await.unwrap();
    let mut reply = vec![0u8; b"SERVER_ERROR object too large for cache\r\n".len()];
    huge.read_exact(&mut reply).await.unwrap();
    assert_eq!(&reply, b"SERVER_ERROR object too large for cache\r\n");

    // A value shorter than announced, and a request dripped a byte at a
    // time: both wait for the rest, costing their own connections only.
    let mut shorter = TcpStream::connect(addr).await.unwrap();
    shorter.write_all(b"set k 0 0 100000\r\nabc").await.unwrap();
    let mut drip = TcpStream::connect(addr).await.unwrap();
    for &byte in b"get good1\r\n" {
        drip.write_all(&[byte]).await.unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (dripped, _) = drain(&mut drip, 1).await;
    assert!(
        dripped.ends_with(b"END\r\n"),
        "{}",
        String::from_utf8_lossy(&dripped)
    );

    // A client that sends many large gets and never reads.
    let big = vec![b'v'; 500_000];
    crate::support::raw::set(server.addr(), b"big", &big);
    let mut hog = TcpStream::connect(addr).await.unwrap();
    hog.write_all(&b"get big\r\n".repeat(200)).await.unwrap();

    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, Relaxed);
    let rounds = good.await.unwrap();
    assert!(rounds > 50, "the good client was served {rounds} rounds");
    // The hog holds at most the reply budget (4 MiB) and socket buffers; the
    // short value at most its announced size; the rest nothing.
    let grown = rss(tool.pid()).saturating_sub(before);
    eprintln!("the proxy grew by {grown} bytes of resident memory");
    assert!(grown < 32 << 20, "grew {grown} bytes");
    drop((shorter, hog, garbage, longer, huge));
    let (status, _, stderr) = tool.terminate().await;
    assert_eq!(status.code(), Some(0), "{stderr}");
}

/// 10,000 idle connections, each served once, cost the proxy process under
/// 4 KiB each of resident memory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_idle_connections_cost_under_4_kib_each() {
    const IDLE: usize = 10_000;
    // This process holds the client ends: room for them beside the rest.
    let hard = raise_descriptor_limit();
    assert!(
        hard >= 12_000,
        "the hard descriptor limit ({hard}) is below 12,000"
    );
    let server = Memcached::spawn();
    let tool = ToolProxy::start(&["--servers", &server.addr_string()], &[]);
    // Warm: the first connections' one-time costs are not theirs.
    let mut warm = Vec::new();
    for _ in 0..100 {
        let mut stream = TcpStream::connect(tool.addr).await.unwrap();
        stream.write_all(b"get k\r\n").await.unwrap();
        let mut end = [0u8; 5];
        stream.read_exact(&mut end).await.unwrap();
        warm.push(stream);
    }
    let before = rss(tool.pid());
    let mut idle = Vec::with_capacity(IDLE);
    for _ in 0..IDLE {
        let mut stream = TcpStream::connect(tool.addr).await.unwrap();
        stream.write_all(b"get k\r\n").await.unwrap();
        let mut end = [0u8; 5];
        stream.read_exact(&mut end).await.unwrap();
        assert_eq!(&end, b"END\r\n");
        idle.push(stream);
    }
    let per_connection = rss(tool.pid()).saturating_sub(before) / IDLE as u64;
    eprintln!("{per_connection} bytes of resident memory per idle connection");
    assert!(per_connection <= 4096, "{per_connection} bytes each");
    drop(idle);
    drop(warm);
}
