//! Test support: real memcached processes on free loopback ports.

use std::thread;
use std::time::{Duration, Instant};

pub use memgroup_testkit::Memcached;

pub mod relay;

/// `127.0.0.1:p1,127.0.0.1:p2,…` — a libmemcached-style server list.
pub fn server_list(servers: &[Memcached]) -> String {
    servers
        .iter()
        .map(Memcached::addr_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// Minimal temp directories (no extra crate): removed on drop.
pub mod tempdir {
    use std::path::{Path, PathBuf};

    pub struct Dir(PathBuf);

    impl Dir {
        pub fn new(tag: &str) -> Dir {
            let path = std::env::temp_dir().join(format!(
                "memgroup-{tag}-{}-{:?}",
                std::process::id(),
                std::thread::current().id()
            ));
            std::fs::create_dir_all(&path).unwrap();
            Dir(path)
        }

        pub fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// Blocking one-shot access to a server, bypassing the client: used to check
/// where keys really are and what the server's counters say.
pub mod raw {
    use std::io::{Read, Write};
    use std::net::{SocketAddr, TcpStream};
    use std::time::Duration;

    use bytes::BytesMut;
    use memgroup::proto::{Decoder, Key, Request, Response};

    fn call(addr: SocketAddr, request: Request<'_>) -> Response {
        let mut stream = TcpStream::connect(addr).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let mut out = BytesMut::new();
        request.encode(&mut out);
        stream.write_all(&out).unwrap();
        let mut decoder = Decoder::default();
        let mut buf = BytesMut::new();
        loop {
            if let Some(r) = decoder.decode(&mut buf, request.expect().unwrap()).unwrap() {
                return r;
            }
            let mut chunk = [0u8; 65536];
            let n = stream.read(&mut chunk).unwrap();
            assert!(n > 0, "server closed");
            buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// Stores `value` under `key` (flags 0, no expiry).
    pub fn set(addr: SocketAddr, key: &[u8], value: &[u8]) {
        set_with(addr, key, value, 0, 0);
    }

    /// Deletes `key` (whether or not it is there).
    pub fn delete(addr: SocketAddr, key: &[u8]) {
        let request = Request::Delete {
            key: Key::new(key).unwrap(),
            noreply: false,
        };
        let reply = call(addr, request);
        assert!(
            matches!(reply, Response::Deleted | Response::NotFound),
            "{reply:?}"
        );
    }

    /// `key`'s value, client flags and remaining TTL (`-1`: none), if
    /// stored.
    pub fn copy(addr: SocketAddr, key: &[u8]) -> Option<(Vec<u8>, u32, i64)> {
        use memgroup::proto::{MetaFlag, MetaStatus};
        let flags = [
            MetaFlag::ReturnValue,
            MetaFlag::ReturnFlags,
            MetaFlag::ReturnTtl,
        ];
        let request = Request::MetaGet {
            key: Key::new(key).unwrap(),
            flags: &flags,
        };
        match call(addr, request) {
            Response::Meta(m) if m.status == MetaStatus::En => None,
            Response::Meta(m) => Some((
                m.value.clone().unwrap().to_vec(),
                m.flag_u64(b'f').unwrap() as u32,
                m.ttl().unwrap(),
            )),
            other => panic!("unexpected {other:?}"),
        }
    }

    /// Stores `value` under `key` with client `flags` and `exptime`.
    pub fn set_with(addr: SocketAddr, key: &[u8], value: &[u8], flags: u32, exptime: u32) {
        let request = Request::Store {
            command: memgroup::proto::StoreCommand::Set,
            key: Key::new(key).unwrap(),
            flags,
            exptime,
            data: value,
            noreply: false,
        };
        assert_eq!(call(addr, request), Response::Stored);
    }

    /// The value stored under `key`, if any.
    pub fn get(addr: SocketAddr, key: &[u8]) -> Option<Vec<u8>> {
        let keys = [Key::new(key).unwrap()];
        match call(addr, Request::Get { keys: &keys }) {
            Response::Values(mut v) => v.pop().map(|v| v.data.to_vec()),
            other => panic!("unexpected {other:?}"),
        }
    }

    /// The value stored under `key` with its CAS unique, if any.
    pub fn gets(addr: SocketAddr, key: &[u8]) -> Option<(Vec<u8>, u64)> {
        let keys = [Key::new(key).unwrap()];
        match call(addr, Request::Gets { keys: &keys }) {
            Response::Values(mut v) => v.pop().map(|v| (v.data.to_vec(), v.cas.expect("a unique"))),
            other => panic!("unexpected {other:?}"),
        }
    }

    /// One numeric `stats` counter (`cmd_set`, `cmd_get`, `curr_items`, …).
    pub fn stat(addr: SocketAddr, name: &str) -> u64 {
        match call(addr, Request::Stats { arg: None }) {
            Response::Stats(stats) => stats
                .iter()
                .find(|s| s.name_str() == name)
                .and_then(|s| s.value_str().parse().ok())
                .unwrap_or_else(|| panic!("no stat {name}")),
            other => panic!("unexpected {other:?}"),
        }
    }
}

/// One TCP socket of `/proc/net/tcp`: its local and remote address (as the
/// file writes them), state, and send and receive queues.
struct TcpRow {
    local: String,
    remote: String,
    state: String,
    tx: u64,
    rx: u64,
}

/// `server` (an IPv4 address) as `/proc/net/tcp` writes it: "0100007F:2BCB",
/// the address's bytes read as a native-endian word, in hex, then the port
/// in hex.
fn proc_address(server: std::net::SocketAddr) -> String {
    let std::net::SocketAddr::V4(server) = server else {
        panic!("{server}: IPv4 only")
    };
    format!(
        "{:08X}:{:04X}",
        u32::from_ne_bytes(server.ip().octets()),
        server.port()
    )
}

/// Every IPv4 TCP socket of the machine.
fn tcp_rows() -> Vec<TcpRow> {
    std::fs::read_to_string("/proc/net/tcp")
        .expect("/proc/net/tcp")
        .lines()
        .skip(1)
        .filter_map(|line| {
            // sl local_address rem_address st tx_queue:rx_queue …
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (tx, rx) = fields.get(4)?.split_once(':')?;
            Some(TcpRow {
                local: fields.get(1)?.to_string(),
                remote: fields.get(2)?.to_string(),
                state: fields.get(3)?.to_string(),
                tx: u64::from_str_radix(tx, 16).unwrap(),
                rx: u64::from_str_radix(rx, 16).unwrap(),
            })
        })
        .collect()
}

/// Bytes sent to `server` (an IPv4 address) that its kernel has not
/// acknowledged, summed over every TCP connection to it, per
/// `/proc/net/tcp`. On loopback data is acknowledged as soon as it lands in
/// the receiver's buffer, so this stays above zero only while a (stalled)
/// server's receive buffer is full: what it cannot take waits in the
/// sender's send queue.
pub fn unacked_bytes_to(server: std::net::SocketAddr) -> u64 {
    let remote = proc_address(server);
    tcp_rows()
        .into_iter()
        .filter(|row| row.remote == remote)
        .map(|row| row.tx)
        .sum()
}

/// The bytes waiting in each of `server`'s accepted connections that the
/// server process has not read (their receive queues, per `/proc/net/tcp`),
/// one entry per established connection that has any: what a stalled
/// (SIGSTOPped) server was sent, connection by connection.
pub fn unread_bytes_at(server: std::net::SocketAddr) -> Vec<u64> {
    let local = proc_address(server);
    tcp_rows()
        .into_iter()
        // 01 is ESTABLISHED (a listening socket's queue counts connections).
        .filter(|row| row.local == local && row.state == "01" && row.rx > 0)
        .map(|row| row.rx)
        .collect()
}

/// Holds tokio's paused clock still while the test talks to real processes.
///
/// Under `#[tokio::test(start_paused = true)]` tokio moves the clock to the
/// next timer whenever the runtime has nothing to run — including while a
/// real memcached's reply is on its way, which would fire every operation
/// timeout at once. A running blocking task inhibits that auto-advance on a
/// current-thread runtime, so while this guard lives the clock moves only by
/// `tokio::time::advance`: backoffs and timeouts pass exactly when the test
/// says, without sleeping.
#[derive(Debug)]
pub struct HeldClock {
    _release: std::sync::mpsc::Sender<()>,
    _watchdog: Watchdog,
}

impl HeldClock {
    /// Holds the clock of the current (paused, current-thread) runtime. A
    /// test still running after 60 real seconds is ended as hung: tokio's
    /// own timeouts cannot fire while the clock is held.
    pub fn hold() -> HeldClock {
        let (release, wait) = std::sync::mpsc::channel::<()>();
        tokio::task::spawn_blocking(move || {
            // Returns when the sender is dropped.
            let _ = wait.recv();
        });
        HeldClock {
            _release: release,
            _watchdog: Watchdog::start(Duration::from_secs(60)),
        }
    }
}

/// Groups `sg1` (the builder's zone) and `sg2` of one fresh memcached
/// each, with a builder for them that `configure` finishes.
pub fn two_zones(
    configure: impl FnOnce(memgroup::client::ClientBuilder) -> memgroup::client::ClientBuilder,
) -> (Memcached, Memcached, memgroup::client::Client) {
    let (sg1, sg2) = (Memcached::spawn(), Memcached::spawn());
    let groups = format!("sg1={};sg2={}", sg1.addr_string(), sg2.addr_string());
    let builder = memgroup::client::Client::builder()
        .evcache_groups(&groups)
        .zone("sg1");
    let client = configure(builder).build().unwrap();
    (sg1, sg2, client)
}

/// The step [`advance_until`] moves a held clock by.
pub const TICK: Duration = Duration::from_millis(100);

/// Lets the runtime handle real I/O for a moment while the clock stands.
pub async fn let_io_happen() {
    tokio::task::spawn_blocking(|| std::thread::sleep(Duration::from_millis(20)))
        .await
        .unwrap();
}

/// Waits (letting I/O happen, the clock standing) until `client` has no
/// write finishing in the background: no group's part, no convergence
/// check still to send its requests.
pub async fn background_done(client: &memgroup::client::Client) {
    while client.health().background_writes > 0 {
        let_io_happen().await;
    }
}

/// Moves the clock a tick at a time (letting I/O happen between) until
/// `done`, for at most `bound`; returns the clock time it took.
pub async fn advance_until(bound: Duration, mut done: impl FnMut() -> bool) -> Duration {
    let mut waited = Duration::ZERO;
    loop {
        let_io_happen().await;
        if done() {
            return waited;
        }
        assert!(waited < bound, "not done within {bound:?} of clock time");
        tokio::time::advance(TICK).await;
        waited += TICK;
    }
}

/// Ends the whole test process if the test holding it runs past `limit` in
/// real time: a hang is a failure, not a stuck CI job.
#[derive(Debug)]
struct Watchdog(std::sync::Arc<std::sync::atomic::AtomicBool>);

impl Watchdog {
    fn start(limit: Duration) -> Watchdog {
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let seen = done.clone();
        let test = thread::current().name().unwrap_or("?").to_string();
        thread::spawn(move || {
            let deadline = Instant::now() + limit;
            while Instant::now() < deadline {
                if seen.load(std::sync::atomic::Ordering::Acquire) {
                    return;
                }
                thread::sleep(Duration::from_millis(50));
            }
            eprintln!("test {test} took more than {limit:?}: something hangs");
            std::process::exit(101);
        });
        Watchdog(done)
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::Release);
    }
}

/// A fault injector, never a memcached stand-in: a TCP peer on a free
/// loopback port that hands every request it reads, on every connection, to
/// `respond`, which writes whatever misbehaviour the test wants to the
/// stream and returns whether to keep reading. Returns `host:port`.
///
/// A connection's first question, whether the peer speaks the meta
/// protocol (`mn`), is answered `MN` here, so the misbehaviour meets the
/// requests; [`fault_peer_raw`] hands it to `respond` too.
pub fn fault_peer(
    respond: impl Fn(&[u8], &mut std::net::TcpStream) -> bool + Send + Sync + 'static,
) -> String {
    use std::io::Write;
    let asked = std::sync::Mutex::new(std::collections::HashSet::new());
    fault_peer_raw(move |request, conn| {
        let peer = conn.peer_addr().ok();
        if request.starts_with(b"mn\r\n") && asked.lock().unwrap().insert(peer) {
            if conn.write_all(b"MN\r\n").is_err() {
                return false;
            }
            let rest = &request[4..];
            return rest.is_empty() || respond(rest, conn);
        }
        respond(request, conn)
    })
}

/// [`fault_peer`] without the answer to the first `mn`.
pub fn fault_peer_raw(
    respond: impl Fn(&[u8], &mut std::net::TcpStream) -> bool + Send + Sync + 'static,
) -> String {
    use std::io::Read;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let respond = std::sync::Arc::new(respond);
    thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { return };
            let respond = respond.clone();
            thread::spawn(move || {
                let mut buf = [0u8; 1024];
                while let Ok(n) = conn.read(&mut buf) {
                    if n == 0 || !respond(&buf[..n], &mut conn) {
                        return;
                    }
                }
            });
        }
    });
    addr
}

/// Whether `client`'s dump of `server` lists `key`, dumping up to 100 times:
/// the LRU crawler can miss an item in one pass (the warmer dumps again too).
pub async fn metadump_lists(client: &memgroup::client::Client, server: &str, key: &[u8]) -> bool {
    for _ in 0..100 {
        let keys = client
            .metadump(server, Duration::from_secs(10), usize::MAX)
            .await
            .unwrap();
        if keys.iter().any(|k| k.key == key) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    false
}

/// Runs the built `memgroup` tool with `args`, with none of its environment
/// settings inherited and nothing on stdin.
pub fn memgroup(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_memgroup"))
        // Each test its own state: no repair journal shared across tests.
        .env("MEMGROUP_REPAIR_JOURNAL", "off")
        .args(args)
        .env_remove("MEMGROUP_PASSWORD")
        .env_remove("MEMCACHED_SERVERS")
        .env_remove("MEMGROUP_GROUPS")
        .env_remove("MEMGROUP_CONFIG")
        .env_remove("RUST_LOG")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap()
}

/// The built tool running `proxy --listen 127.0.0.1:0` after `args` (the
/// cluster flags) and before `proxy_args`; its address read from its first
/// line. Killed when dropped, unless [`ToolProxy::terminate`] ended it.
pub struct ToolProxy {
    child: Option<std::process::Child>,
    /// Where it listens.
    pub addr: std::net::SocketAddr,
    stdout: Option<std::io::Lines<std::io::BufReader<std::process::ChildStdout>>>,
    /// Its stderr so far, read by a thread of its own.
    stderr: std::sync::Arc<std::sync::Mutex<String>>,
    stderr_reader: Option<thread::JoinHandle<()>>,
}

impl ToolProxy {
    /// Starts it and waits for its listening line.
    pub fn start(args: &[&str], proxy_args: &[&str]) -> ToolProxy {
        use std::io::BufRead;
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_memgroup"))
            .env("MEMGROUP_REPAIR_JOURNAL", "off")
            .env_remove("MEMCACHED_SERVERS")
            .env_remove("MEMGROUP_GROUPS")
            .env_remove("MEMGROUP_CONFIG")
            .args(args)
            .args(["proxy", "--listen", "127.0.0.1:0"])
            .args(proxy_args)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let (pipe, into) = (child.stderr.take().unwrap(), stderr.clone());
        let stderr_reader = Some(thread::spawn(move || {
            for line in std::io::BufReader::new(pipe).lines().map_while(Result::ok) {
                let mut text = into.lock().unwrap();
                text.push_str(&line);
                text.push('\n');
            }
        }));
        let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let first = stdout.next().unwrap().unwrap();
        let addr = first
            .strip_prefix("memgroup proxy listening on ")
            .unwrap_or_else(|| panic!("{first}"))
            // The first: the --listen given here.
            .split(", ")
            .next()
            .unwrap()
            .parse()
            .unwrap();
        ToolProxy {
            child: Some(child),
            addr,
            stdout: Some(stdout),
            stderr,
            stderr_reader,
        }
    }

    /// Waits up to 5 s for `text` in its stderr; whether it came.
    pub async fn said(&self, text: &str) -> bool {
        for _ in 0..250 {
            if self.stderr.lock().unwrap().contains(text) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        false
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    /// Sends it `signal` (`"TERM"`, `"HUP"`, …).
    pub fn signal(&self, signal: &str) {
        let pid = self.child.as_ref().unwrap().id();
        let status = std::process::Command::new("kill")
            .args([&format!("-{signal}"), &pid.to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// SIGTERM, then its exit status, the rest of its stdout and all its
    /// stderr.
    pub async fn terminate(mut self) -> (std::process::ExitStatus, Vec<String>, String) {
        self.signal("TERM");
        let (mut child, stdout) = (self.child.take().unwrap(), self.stdout.take().unwrap());
        let (reader, stderr) = (self.stderr_reader.take().unwrap(), self.stderr.clone());
        tokio::task::spawn_blocking(move || {
            let status = child.wait().unwrap();
            let rest = stdout.map_while(Result::ok).collect();
            reader.join().unwrap();
            let stderr = std::mem::take(&mut *stderr.lock().unwrap());
            (status, rest, stderr)
        })
        .await
        .unwrap()
    }
}

impl Drop for ToolProxy {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// [`memgroup`], asserting it succeeded; returns its stdout.
pub fn memgroup_ok(args: &[&str]) -> String {
    let o = memgroup(args);
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Polls `done` every 10 ms for up to 5 s (real time: the tests that use
/// it watch real processes and a real polling task).
pub async fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while !done() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A running load: `tasks` callers each setting and reading back their
/// own `keys` keys until stopped, counting operations and failures.
pub struct Load {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    ops: std::sync::Arc<std::sync::atomic::AtomicU64>,
    failures: std::sync::Arc<std::sync::atomic::AtomicU64>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Load {
    /// Starts the callers.
    pub fn start(client: &memgroup::client::Client, tasks: usize, keys: u64) -> Load {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
        let stop = Arc::new(AtomicBool::new(false));
        let (ops, failures) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let tasks = (0..tasks)
            .map(|t| {
                let (client, stop, ops, failures) =
                    (client.clone(), stop.clone(), ops.clone(), failures.clone());
                tokio::spawn(async move {
                    let mut i = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        let key = format!("load:{t}:{}", i % keys);
                        let ok = client.set(&key, "v", 0).await.is_ok()
                            && client.get(&key).await.is_ok();
                        ops.fetch_add(1, Ordering::Relaxed);
                        if !ok {
                            failures.fetch_add(1, Ordering::Relaxed);
                        }
                        i += 1;
                    }
                })
            })
            .collect();
        Load {
            stop,
            ops,
            failures,
            tasks,
        }
    }

    /// Operations done so far.
    pub fn ops(&self) -> u64 {
        self.ops.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Stops the callers; the operations done and how many failed.
    pub async fn stop(self) -> (u64, u64) {
        use std::sync::atomic::Ordering;
        self.stop.store(true, Ordering::Relaxed);
        for task in self.tasks {
            task.await.unwrap();
        }
        (
            self.ops.load(Ordering::Relaxed),
            self.failures.load(Ordering::Relaxed),
        )
    }
}
