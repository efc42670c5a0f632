//! Side-by-side benchmark: `memgroup-client` against the memcached crates
//! Rust projects use today, `memcache` (sync, r2d2-pooled),
//! `async-memcached` (tokio), `memcache-async` (any async stream) and
//! `memcached-rs` (sync, binary protocol), on the same memcached processes in
//! the same run.
//!
//! Run with `cargo xtask compare` (or `cargo run --release --manifest-path
//! bench-compare/Cargo.toml`). It spawns its own `memcached` processes on free
//! loopback ports, kills them at the end (a `Drop` guard, and
//! `PR_SET_PDEATHSIG` should this process die without unwinding), and prints a
//! markdown table.
//!
//! What each client gets, so the comparison is fair:
//! - All but `memcached-rs` speak the text protocol. `memcache` defaults to
//!   the binary protocol; it is given `?protocol=ascii` (memcached 1.6
//!   deprecates binary). `memcached-rs` has only the binary protocol, which
//!   memcached still serves (`-B auto`, the default, detects it per
//!   connection).
//! - `memcache`'s own constructors leave r2d2's `test_on_check_out` on, which
//!   sends a `version` round trip before every operation. The pools here are
//!   built with it off (`Client::with_pools`), the peer's best configuration;
//!   the stock `Client::connect` is measured in one row for reference.
//! - `async-memcached`'s `Client` is one connection and takes `&mut self`: N
//!   requests in flight means N tasks each with its own connection. It has no
//!   multi-server routing, so the 3-server `get_multi` row is n/a for it.
//! - `memcache-async`'s `Protocol` wraps one stream and takes `&mut self`
//!   too: N in flight means N tasks each with its own connection. It runs on
//!   tokio through its `with-tokio` feature, on a `tokio::net::TcpStream`
//!   (no futures-io compat layer) with `TCP_NODELAY` set as every other
//!   client here sets it (the crate leaves the socket to its caller), behind
//!   a `tokio::io::BufWriter`: the crate writes a command in pieces (one write
//!   per key in `get_multi`) and flushes after each, so buffered, every
//!   command is one write. Its `set` is `noreply` and awaits nothing, so its
//!   seq set row times a write, not a round trip. No multi-server routing:
//!   the 3-server `get_multi` row is n/a for it.
//! - `memcache` is synchronous: N in flight means N OS threads sharing one
//!   `Client` whose pool holds N connections per server.
//! - `memcached-rs` is synchronous and its `Client` (one connection per
//!   server) is neither `Send` nor shareable (`&mut self`): N in flight means
//!   N OS threads each with its own `Client`. It routes single keys over
//!   several servers, but its `get_multi` asserts a single server, so the
//!   3-server `get_multi` row is n/a for it.
//! - memgroup: N tasks sharing one `Client`, pipelining on `pool_size`
//!   connections (1, and 4 in extra rows), with its defaults: concurrent
//!   single-key `get`s merge into multi-key commands. An extra row turns that
//!   off (`merge_gets(false)`) to show what batching alone gives.
//! - The async clients run on a multi-thread tokio runtime with 2 workers.
//! - A reference beside the one-caller and in-flight verdicts, the tokio
//!   floor: a bare `tokio::net::TcpStream` per task, one write and reads to
//!   the reply's end a request, nothing decoded — what no tokio client with
//!   a connection per caller goes below.
//!
//! Environment: `COMPARE_SECS` (measured seconds per throughput run, default
//! 3), `COMPARE_ROUNDS` (interleaved rounds per throughput config, the
//! median one reported, default 3; each round starts with a different
//! client),
//! `COMPARE_SEQ_ROUNDS` (rounds of the sequential and 1-server `get_multi`
//! rows, each client once per round in a rotated order, the median round
//! reported, default 5: one run of such a row moves by a fifth or more on a
//! busy machine).

use std::collections::HashMap;
use std::fmt;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use async_memcached::AsciiProtocol;
use memcached::proto::{MultiOperation, Operation};
use memgroup_testkit::Memcached;

mod groups;
use tokio::runtime::Runtime;

/// A `memcache-async` client: the text protocol on one tokio connection,
/// writes buffered (see [`memcache_async_client`]).
type MemcacheAsync = memcache_async::ascii::Protocol<tokio::io::BufWriter<tokio::net::TcpStream>>;

/// Every value read or written is this long.
const VALUE_LEN: usize = 100;
static VALUE: [u8; VALUE_LEN] = [b'v'; VALUE_LEN];
/// Keys pre-set on every server: `key:000000` … (all the same length, which
/// the round-trip accounting relies on).
const KEYS: usize = 10_000;
const KEY_LEN: usize = 10;
const SEQ_OPS: usize = 20_000;
const SEQ_WARMUP: usize = 2_000;
const MULTI_KEYS: usize = 100;
const MULTI_CALLS: usize = 2_000;
const MULTI_WARMUP: usize = 200;
const WARMUP: Duration = Duration::from_millis(500);
const IN_FLIGHT: [usize; 3] = [4, 32, 256];

fn key(i: usize) -> String {
    format!("key:{i:06}")
}

fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(default)
}

// ---- memcached processes ------------------------------------------------------

/// A memcached process on a loopback port (`memgroup-testkit`), killed when
/// dropped, and on Linux also when this process dies without unwinding.
fn spawn_server() -> Memcached {
    Memcached::try_spawn_with(&["-t", "2"], |cmd| {
        #[cfg(target_os = "linux")]
        {
            use std::os::unix::process::CommandExt;
            // SAFETY: prctl is async-signal-safe; nothing else runs
            // between fork and exec.
            unsafe {
                cmd.pre_exec(|| {
                    // Die with this process even if it is killed outright.
                    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                    Ok(())
                });
            }
        }
        #[cfg(not(target_os = "linux"))]
        let _ = cmd;
    })
    .expect("memcached on PATH (`cargo xtask compare` installs it)")
}

/// `stats` over a fresh plain TCP connection, independent of the clients
/// under test.
fn raw_stats(addr: &str) -> HashMap<String, String> {
    let mut stream = TcpStream::connect(addr).expect("connect for stats");
    stream.write_all(b"stats\r\n").expect("send stats");
    let mut reader = BufReader::new(stream);
    let mut stats = HashMap::new();
    let mut line = String::new();
    loop {
        line.clear();
        assert!(
            reader.read_line(&mut line).expect("read stats") > 0,
            "stats: EOF"
        );
        let line = line.trim_end();
        if line == "END" {
            return stats;
        }
        let (name, value) = line
            .strip_prefix("STAT ")
            .and_then(|rest| rest.split_once(' '))
            .unwrap_or_else(|| panic!("stats: unexpected line {line:?}"));
        stats.insert(name.to_string(), value.to_string());
    }
}

fn stat(stats: &HashMap<String, String>, name: &str) -> i64 {
    stats
        .get(name)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("stats has no numeric {name}"))
}

/// Stores every key with a 100-byte value, pipelined in batches.
fn preload(addr: &str) {
    let mut stream = TcpStream::connect(addr).expect("connect for preload");
    stream.set_nodelay(true).unwrap();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let indices: Vec<usize> = (0..KEYS).collect();
    let mut line = String::new();
    for batch in indices.chunks(500) {
        let mut buf = Vec::new();
        for &i in batch {
            write!(buf, "set {} 0 0 {VALUE_LEN}\r\n", key(i)).unwrap();
            buf.extend_from_slice(&VALUE);
            buf.extend_from_slice(b"\r\n");
        }
        stream.write_all(&buf).unwrap();
        for _ in batch {
            line.clear();
            reader.read_line(&mut line).unwrap();
            assert_eq!(line, "STORED\r\n", "preload of {addr}");
        }
    }
}

// ---- measurement helpers ---------------------------------------------------------

/// Latency summary in microseconds, and this process's CPU time per call
/// over the same calls.
#[derive(Clone, Copy)]
struct Lat {
    mean: f64,
    p50: f64,
    p99: f64,
    cpu_us: f64,
}

impl Lat {
    fn of(mut ns: Vec<u64>, cpu: Duration) -> Lat {
        ns.sort_unstable();
        let pct = |p: f64| ns[((ns.len() as f64 * p) as usize).min(ns.len() - 1)] as f64 / 1e3;
        Lat {
            mean: ns.iter().sum::<u64>() as f64 / ns.len() as f64 / 1e3,
            p50: pct(0.50),
            p99: pct(0.99),
            cpu_us: cpu.as_secs_f64() * 1e6 / ns.len() as f64,
        }
    }

    /// Sequential calls per second.
    fn per_sec(&self) -> f64 {
        1e6 / self.mean
    }
}

impl fmt::Display for Lat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.1} / {:.1} / {:.1}", self.mean, self.p50, self.p99)
    }
}

/// One client's part of a round of sequential rows: its rows, measured.
type Step<'a> = Box<dyn Fn() -> Vec<(&'static str, Lat)> + 'a>;

/// A sequential row's rounds, by row name.
#[derive(Default)]
struct Samples(HashMap<&'static str, Vec<Lat>>);

impl Samples {
    /// Runs every step once a round for `rounds` rounds, each round starting
    /// at the next step (so no client always runs first, or right after the
    /// same neighbour), and keeps what they measured.
    fn of_rounds(steps: &[Step<'_>], rounds: usize, what: &str) -> Samples {
        let mut samples = Samples::default();
        for round in 0..rounds {
            eprintln!("{what}, round {} / {rounds} …", round + 1);
            for k in 0..steps.len() {
                for (name, lat) in steps[(k + round) % steps.len()]() {
                    samples.push(name, lat);
                }
            }
        }
        samples
    }

    fn push(&mut self, name: &'static str, lat: Lat) {
        self.0.entry(name).or_default().push(lat);
    }

    /// The row's median round by mean latency (its p50, p99 and CPU are
    /// that round's).
    fn median(&self, name: &str) -> Lat {
        let mut rounds = self.0[name].clone();
        rounds.sort_by(|a, b| a.mean.total_cmp(&b.mean));
        rounds[rounds.len() / 2]
    }
}

/// Times `ops` sequential calls of `op(i)` after `warmup` untimed ones.
fn time_sync(warmup: usize, ops: usize, mut op: impl FnMut(usize)) -> Lat {
    for i in 0..warmup {
        op(i);
    }
    let mut ns = Vec::with_capacity(ops);
    let cpu0 = cpu_time();
    for i in 0..ops {
        let start = Instant::now();
        op(i);
        ns.push(start.elapsed().as_nanos() as u64);
    }
    Lat::of(ns, cpu_time() - cpu0)
}

/// The async twin of [`time_sync`]: `op` is run inside one task on the
/// runtime (not on the `block_on` thread).
macro_rules! time_async {
    ($rt:expr, $warmup:expr, $ops:expr, |$i:ident| $body:expr) => {{
        $rt.block_on($rt.spawn(async move {
            for $i in 0..$warmup {
                $body;
            }
            let mut ns = Vec::with_capacity($ops);
            let cpu0 = $crate::cpu_time();
            for $i in 0..$ops {
                let start = std::time::Instant::now();
                $body;
                ns.push(start.elapsed().as_nanos() as u64);
            }
            $crate::Lat::of(ns, $crate::cpu_time() - cpu0)
        }))
        .expect("timed task panicked")
    }};
}

mod quick;

/// memgroup's sequential get and set rows, on `client`.
fn memgroup_seq(
    rt: &Runtime,
    client: &memgroup_client::Client,
    keys: &Arc<Vec<String>>,
) -> [Lat; 2] {
    let (c, k) = (client.clone(), keys.clone());
    let get = time_async!(rt, SEQ_WARMUP, SEQ_OPS, |i| value_ok(
        c.get(&k[i % KEYS]).await.unwrap().expect("hit").value.len()
    ));
    let (c, k) = (client.clone(), keys.clone());
    let set = time_async!(rt, SEQ_WARMUP, SEQ_OPS, |i| assert!(
        c.set(&k[i % KEYS], &VALUE[..], 0).await.unwrap().applied()
    ));
    [get, set]
}

/// This process's user + system CPU time (the memcached servers are other
/// processes and are not counted).
fn cpu_time() -> Duration {
    // SAFETY: rusage is plain data; getrusage fills it.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    assert_eq!(rc, 0, "getrusage");
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// Per-worker counters, one cache line each, written by their worker only.
#[repr(align(128))]
#[derive(Default)]
struct Counter {
    ops: AtomicU64,
    errors: AtomicU64,
}

impl Counter {
    fn ok(&self) {
        self.ops.store(self.ops.load(Relaxed) + 1, Relaxed);
    }
    fn error(&self) {
        self.errors.store(self.errors.load(Relaxed) + 1, Relaxed);
    }
}

/// One throughput run's result.
#[derive(Clone, Copy, Default)]
struct Tput {
    ops_per_sec: f64,
    cpu_us_per_op: f64,
    errors: u64,
}

/// Lets the workers warm up, then measures ops and CPU over the window.
fn measure_window(counters: &[Arc<Counter>], secs: Duration) -> Tput {
    let total = || counters.iter().map(|c| c.ops.load(Relaxed)).sum::<u64>();
    std::thread::sleep(WARMUP);
    let (ops0, cpu0, t0) = (total(), cpu_time(), Instant::now());
    std::thread::sleep(secs);
    let (ops1, cpu1, t1) = (total(), cpu_time(), Instant::now());
    let ops = (ops1 - ops0).max(1);
    Tput {
        ops_per_sec: ops as f64 / (t1 - t0).as_secs_f64(),
        cpu_us_per_op: (cpu1 - cpu0).as_secs_f64() * 1e6 / ops as f64,
        errors: counters.iter().map(|c| c.errors.load(Relaxed)).sum(),
    }
}

/// Where worker `w` starts in the key space, so workers do not walk in step.
fn start_key(w: usize) -> usize {
    (w * 7_919) % KEYS
}

// ---- the clients ---------------------------------------------------------------------

fn memgroup_client(rt: &Runtime, addrs: &[&str], pool: usize) -> memgroup_client::Client {
    memgroup_client_with(rt, addrs, pool, true)
}

fn memgroup_client_with(
    rt: &Runtime,
    addrs: &[&str],
    pool: usize,
    merge_gets: bool,
) -> memgroup_client::Client {
    rt.block_on(
        memgroup_client::Client::builder()
            .servers(&addrs.join(","))
            .pool_size(pool)
            .merge_gets(merge_gets)
            .connect(),
    )
    .expect("memgroup connect")
}

/// The CPU seconds process `pid` has used (user and system), from
/// `/proc/PID/stat`; 0 where that cannot be read.
pub(crate) fn server_cpu(pid: Option<u32>) -> f64 {
    let Some(stat) = pid.and_then(|p| std::fs::read_to_string(format!("/proc/{p}/stat")).ok())
    else {
        return 0.0;
    };
    // The fields after the command name (in parentheses, which may hold
    // spaces): utime and stime are the 14th and 15th of the line.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    (ticks(11) + ticks(12)) / hz.max(1.0)
}

/// A memcached serving TLS (`-Z`, certificates made now), pre-set with the
/// same keys.
struct TlsServer {
    pki: memgroup_testkit::Pki,
    server: Memcached,
}

impl TlsServer {
    fn start(rt: &Runtime) -> TlsServer {
        let pki = memgroup_testkit::Pki::new();
        let server = Memcached::spawn_tls(&pki, false, &["-m", "256"]);
        let tls = TlsServer { pki, server };
        let client = tls.client(rt);
        rt.block_on(async {
            for i in 0..KEYS {
                client
                    .set(&key(i), &VALUE[..], 0)
                    .await
                    .expect("preload over TLS");
            }
        });
        tls
    }

    /// A memgroup client (one connection) over TLS.
    fn client(&self, rt: &Runtime) -> memgroup_client::Client {
        let tls = memgroup_client::TlsConfig::ca_file(self.pki.ca()).expect("CA");
        rt.block_on(
            memgroup_client::Client::builder()
                .servers(&self.server.addr_string())
                .tls(tls)
                .connect(),
        )
        .expect("memgroup TLS connect")
    }
}

/// A `memcache` client over `addrs` with `pool` connections per server: text
/// protocol, no per-checkout health check (see the crate docs above).
fn memcache_client(addrs: &[&str], pool: u32) -> memcache::Client {
    let pools = addrs
        .iter()
        .map(|addr| {
            let url = memcache::Url::parse(&format!("memcache://{addr}?protocol=ascii")).unwrap();
            r2d2::Pool::builder()
                .max_size(pool)
                .test_on_check_out(false)
                .build(memcache::ConnectionManager::new(url))
                .expect("memcache pool")
        })
        .collect();
    memcache::Client::with_pools(pools).expect("memcache client")
}

fn async_memcached_client(rt: &Runtime, addr: &str) -> async_memcached::Client {
    rt.block_on(async_memcached::Client::new(format!("tcp://{addr}")))
        .expect("async-memcached connect")
}

/// A `memcache-async` protocol on one tokio TCP connection to `addr` (the
/// crate's `with-tokio` feature), with `TCP_NODELAY` on as the other clients
/// have it. The crate buffers reads itself but writes a command in pieces
/// straight to its stream (`get_multi` one write per key, `set` three) and
/// flushes after each command: behind a `BufWriter` every command leaves in
/// one write, its best configuration.
fn memcache_async_client(rt: &Runtime, addr: &str) -> MemcacheAsync {
    rt.block_on(async {
        let stream = tokio::net::TcpStream::connect(addr)
            .await
            .expect("memcache-async connect");
        stream
            .set_nodelay(true)
            .expect("memcache-async TCP_NODELAY");
        memcache_async::ascii::Protocol::new(tokio::io::BufWriter::new(stream))
    })
}

/// A `memcached-rs` client over `addrs`: binary protocol, one blocking
/// connection per server (it sets `TCP_NODELAY` itself). Not `Send`: a
/// thread makes its own.
fn memcached_rs_client(addrs: &[&str]) -> memcached::Client {
    let servers: Vec<(String, usize)> = addrs.iter().map(|a| (format!("tcp://{a}"), 1)).collect();
    memcached::Client::connect(&servers, memcached::proto::ProtoType::Binary)
        .expect("memcached-rs connect")
}

/// The floor under any tokio client's sequential row: a bare
/// `tokio::net::TcpStream` (`TCP_NODELAY` on), each request one write, its
/// reply read until its last line, nothing decoded but a value's length.
pub(crate) struct RawSocket {
    stream: tokio::net::TcpStream,
    out: Vec<u8>,
    buf: Vec<u8>,
}

pub(crate) fn raw_socket(rt: &tokio::runtime::Runtime, addr: &str) -> RawSocket {
    rt.block_on(async {
        let stream = tokio::net::TcpStream::connect(addr)
            .await
            .expect("raw connect");
        stream.set_nodelay(true).expect("raw TCP_NODELAY");
        RawSocket {
            stream,
            out: Vec::with_capacity(256),
            buf: Vec::with_capacity(4096),
        }
    })
}

impl RawSocket {
    /// Writes `out`, then reads until the reply ends with `end`.
    async fn round_trip(&mut self, end: &[u8]) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        self.stream.write_all(&self.out).await.expect("raw write");
        self.buf.clear();
        while !self.buf.ends_with(end) {
            let n = self.stream.read_buf(&mut self.buf).await.expect("raw read");
            assert!(n > 0, "raw: the server closed");
        }
    }

    /// A `get`: the length of the value.
    pub(crate) async fn get(&mut self, key: &str) -> usize {
        self.out.clear();
        self.out.extend_from_slice(b"get ");
        self.out.extend_from_slice(key.as_bytes());
        self.out.extend_from_slice(b"\r\n");
        self.round_trip(b"END\r\n").await;
        let line = self.buf.split(|&b| b == b'\n').next().expect("a line");
        let len = line
            .trim_ascii()
            .rsplit(|&b| b == b' ')
            .next()
            .expect("a length");
        std::str::from_utf8(len)
            .expect("digits")
            .parse()
            .expect("a number")
    }

    /// The `get`s of `keys` in one `write`, each its own command or (`merged`)
    /// one multi-key `get`; their replies read until the last one's end.
    /// Returns how many came back with a value of the bench's length (the
    /// value holds no `END`).
    pub(crate) async fn get_batch(&mut self, keys: &[&str], merged: bool) -> usize {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        self.out.clear();
        if merged {
            self.out.extend_from_slice(b"get");
            for key in keys {
                self.out.push(b' ');
                self.out.extend_from_slice(key.as_bytes());
            }
            self.out.extend_from_slice(b"\r\n");
        } else {
            for key in keys {
                self.out.extend_from_slice(b"get ");
                self.out.extend_from_slice(key.as_bytes());
                self.out.extend_from_slice(b"\r\n");
            }
        }
        self.stream.write_all(&self.out).await.expect("raw write");
        self.buf.clear();
        let replies = if merged { 1 } else { keys.len() };
        // Each read's bytes are scanned once (from 4 bytes back, for an
        // `END\r\n` split across two reads).
        let (mut ends, mut scanned) = (0, 0usize);
        while ends < replies {
            let n = self.stream.read_buf(&mut self.buf).await.expect("raw read");
            assert!(n > 0, "raw: the server closed");
            let from = scanned.saturating_sub(4);
            ends += self.buf[from..]
                .windows(5)
                .filter(|w| w == b"END\r\n")
                .count();
            scanned = self.buf.len();
        }
        let lengths = format!(" {VALUE_LEN}\r\n");
        self.buf
            .windows(lengths.len())
            .filter(|w| *w == lengths.as_bytes())
            .count()
    }

    /// A `set` of the bench's value, its `STORED` awaited.
    pub(crate) async fn set(&mut self, key: &str) {
        self.out.clear();
        self.out.extend_from_slice(b"set ");
        self.out.extend_from_slice(key.as_bytes());
        std::io::Write::write_fmt(&mut self.out, format_args!(" 0 0 {}\r\n", VALUE.len()))
            .expect("a Vec takes it");
        self.out.extend_from_slice(&VALUE);
        self.out.extend_from_slice(b"\r\n");
        self.round_trip(b"STORED\r\n").await;
    }
}

fn value_ok(len: usize) {
    assert_eq!(len, VALUE_LEN, "wrong value length");
}

// ---- throughput runs -------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq)]
enum Config {
    /// `decode`: every value is decoded by the spymemcached format (`get_value`).
    /// `tls`: to the TLS server, over TLS.
    Memgroup {
        pool: usize,
        merge: bool,
        decode: bool,
        tls: bool,
    },
    Memcache,
    AsyncMemcached,
    MemcacheAsync,
    MemcachedRs,
    /// The tokio floor ([`RawSocket`]): one bare socket per task.
    Floor,
    /// The one-connection floor ([`RawSocket::get_batch`]): one bare socket
    /// and one task, writing all the requests in flight in one `write` and
    /// reading their replies back, round after round; `merged`: as one
    /// multi-key `get` (what memgroup's merging makes of them).
    PipelinedFloor {
        merged: bool,
    },
}

impl Config {
    /// memgroup with its defaults on one connection.
    fn memgroup() -> Config {
        Config::Memgroup {
            pool: 1,
            merge: true,
            decode: false,
            tls: false,
        }
    }
}

fn throughput(
    rt: &Runtime,
    addr: &str,
    tls_server: Option<&TlsServer>,
    keys: &Arc<Vec<String>>,
    config: Config,
    in_flight: usize,
    secs: Duration,
) -> Tput {
    let stop = Arc::new(AtomicBool::new(false));
    let counters: Vec<Arc<Counter>> = (0..in_flight).map(|_| Arc::default()).collect();
    match config {
        Config::Memgroup {
            pool,
            merge,
            decode,
            tls,
        } => {
            let client = if tls {
                tls_server.expect("a TLS server for TLS rows").client(rt)
            } else {
                memgroup_client_with(rt, &[addr], pool, merge)
            };
            let client = if decode {
                client.with_value_format(memgroup_client::value::ValueFormat::spymemcached())
            } else {
                client
            };
            let tasks: Vec<_> = counters
                .iter()
                .enumerate()
                .map(|(w, counter)| {
                    let (client, stop, counter, keys) =
                        (client.clone(), stop.clone(), counter.clone(), keys.clone());
                    rt.spawn(async move {
                        let mut i = start_key(w);
                        while !stop.load(Relaxed) {
                            let ok = if decode {
                                matches!(
                                    client.get_as::<memgroup_client::value::Value>(&keys[i]).await,
                                    Ok(Some(memgroup_client::value::Value::String(s))) if s.len() == VALUE_LEN
                                )
                            } else {
                                matches!(client.get(&keys[i]).await, Ok(Some(item)) if item.value.len() == VALUE_LEN)
                            };
                            if ok {
                                counter.ok();
                            } else {
                                counter.error();
                            }
                            i = (i + 1) % KEYS;
                        }
                    })
                })
                .collect();
            let result = measure_window(&counters, secs);
            stop.store(true, Relaxed);
            rt.block_on(async {
                for task in tasks {
                    task.await.expect("memgroup worker panicked");
                }
            });
            result
        }
        // One connection per task: these clients take `&mut self`.
        Config::AsyncMemcached => {
            let clients = (0..in_flight).map(|_| async_memcached_client(rt, addr));
            per_task(rt, clients.collect(), &counters, &stop, keys, secs)
        }
        Config::MemcacheAsync => {
            let clients = (0..in_flight).map(|_| memcache_async_client(rt, addr));
            per_task(rt, clients.collect(), &counters, &stop, keys, secs)
        }
        Config::Floor => {
            let sockets = (0..in_flight).map(|_| raw_socket(rt, addr));
            per_task(rt, sockets.collect(), &counters, &stop, keys, secs)
        }
        Config::PipelinedFloor { merged } => {
            let (mut raw, stop2, counter, keys) = (
                raw_socket(rt, addr),
                stop.clone(),
                counters[0].clone(),
                keys.clone(),
            );
            let task = rt.spawn(async move {
                let mut i = 0;
                while !stop2.load(Relaxed) {
                    let batch: Vec<&str> = (0..in_flight)
                        .map(|k| keys[(i + k) % KEYS].as_str())
                        .collect();
                    for _ in 0..raw.get_batch(&batch, merged).await {
                        counter.ok();
                    }
                    i = (i + in_flight) % KEYS;
                }
            });
            let result = measure_window(&counters, secs);
            stop.store(true, Relaxed);
            rt.block_on(task)
                .expect("the pipelined floor's task panicked");
            result
        }
        Config::Memcache => {
            // Synchronous: one OS thread per request in flight, one pooled
            // connection per thread.
            let client = memcache_client(&[addr], in_flight as u32);
            std::thread::scope(|scope| {
                for (w, counter) in counters.iter().enumerate() {
                    let (client, stop, keys) = (&client, &stop, &keys);
                    scope.spawn(move || {
                        let mut i = start_key(w);
                        while !stop.load(Relaxed) {
                            match client.get::<Vec<u8>>(&keys[i]) {
                                Ok(Some(v)) if v.len() == VALUE_LEN => counter.ok(),
                                _ => counter.error(),
                            }
                            i = (i + 1) % KEYS;
                        }
                    });
                }
                let result = measure_window(&counters, secs);
                stop.store(true, Relaxed);
                result
            })
        }
        Config::MemcachedRs => {
            // Synchronous and not `Send`: one OS thread per request in
            // flight, each connecting its own client; the window opens once
            // all are connected.
            let connected = std::sync::Barrier::new(in_flight + 1);
            std::thread::scope(|scope| {
                for (w, counter) in counters.iter().enumerate() {
                    let (connected, stop, keys) = (&connected, &stop, &keys);
                    scope.spawn(move || {
                        // Reach the barrier even if connecting panicked,
                        // so the panic surfaces instead of a hang.
                        let client = std::panic::catch_unwind(|| memcached_rs_client(&[addr]));
                        connected.wait();
                        let mut client = client.unwrap_or_else(|p| std::panic::resume_unwind(p));
                        let mut i = start_key(w);
                        while !stop.load(Relaxed) {
                            match client.get(keys[i].as_bytes()) {
                                Ok((v, _flags)) if v.len() == VALUE_LEN => counter.ok(),
                                _ => counter.error(),
                            }
                            i = (i + 1) % KEYS;
                        }
                    });
                }
                connected.wait();
                let result = measure_window(&counters, secs);
                stop.store(true, Relaxed);
                result
            })
        }
    }
}

/// A client that is one connection and takes `&mut self`: N in flight
/// means N tasks, each with its own.
trait OwnConnection: Send + 'static {
    /// A `get` of `key`: whether a value of the bench's length came back.
    fn get_ok<'a>(&'a mut self, key: &'a str) -> impl Future<Output = bool> + Send + 'a;
}

impl OwnConnection for async_memcached::Client {
    async fn get_ok(&mut self, key: &str) -> bool {
        matches!(self.get(key).await,
            Ok(Some(v)) if v.data.as_ref().map(Vec::len) == Some(VALUE_LEN))
    }
}

impl OwnConnection for MemcacheAsync {
    async fn get_ok(&mut self, key: &str) -> bool {
        // A miss is an `Err` of kind `NotFound`.
        matches!(self.get(&key).await, Ok(v) if v.len() == VALUE_LEN)
    }
}

impl OwnConnection for RawSocket {
    async fn get_ok(&mut self, key: &str) -> bool {
        self.get(key).await == VALUE_LEN
    }
}

/// The throughput of `clients`, one task each, getting keys in a loop until
/// the window closes.
fn per_task<C: OwnConnection>(
    rt: &Runtime,
    clients: Vec<C>,
    counters: &[Arc<Counter>],
    stop: &Arc<AtomicBool>,
    keys: &Arc<Vec<String>>,
    secs: Duration,
) -> Tput {
    let tasks: Vec<_> = clients
        .into_iter()
        .zip(counters)
        .enumerate()
        .map(|(w, (mut client, counter))| {
            let (stop, counter, keys) = (stop.clone(), counter.clone(), keys.clone());
            rt.spawn(async move {
                let mut i = start_key(w);
                while !stop.load(Relaxed) {
                    if client.get_ok(&keys[i]).await {
                        counter.ok();
                    } else {
                        counter.error();
                    }
                    i = (i + 1) % KEYS;
                }
            })
        })
        .collect();
    let result = measure_window(counters, secs);
    stop.store(true, Relaxed);
    rt.block_on(async {
        for task in tasks {
            task.await.expect("a client's task panicked");
        }
    });
    result
}

// ---- get_multi round trips ---------------------------------------------------------------

/// Commands each server read during `call`, from its `bytes_read` and
/// `get_hits + get_misses` deltas: a `get k1 … kn\r\n` line is
/// `prefix + n × (1 + KEY_LEN) + 2` bytes, so
/// `commands = (bytes − n × (1 + KEY_LEN)) / (prefix + 2)`. The `stats`
/// requests' own bytes are measured first and subtracted. Returns
/// `(keys, commands)` per server.
fn commands_per_server(addrs: &[&str], prefix: &str, call: impl FnOnce()) -> Vec<(i64, f64)> {
    let bytes = |s: &HashMap<String, String>| stat(s, "bytes_read");
    let keys = |s: &HashMap<String, String>| stat(s, "get_hits") + stat(s, "get_misses");
    let idle: Vec<i64> = addrs
        .iter()
        .map(|a| {
            let (x, y) = (raw_stats(a), raw_stats(a));
            bytes(&y) - bytes(&x)
        })
        .collect();
    let before: Vec<_> = addrs.iter().map(|a| raw_stats(a)).collect();
    call();
    let after: Vec<_> = addrs.iter().map(|a| raw_stats(a)).collect();
    (0..addrs.len())
        .map(|s| {
            let n = keys(&after[s]) - keys(&before[s]);
            let line_bytes = bytes(&after[s]) - bytes(&before[s]) - idle[s];
            let per_key = n * (1 + KEY_LEN as i64);
            (n, (line_bytes - per_key) as f64 / (prefix.len() + 2) as f64)
        })
        .collect()
}

fn describe_commands(per_server: &[(i64, f64)]) -> String {
    let cmds: Vec<String> = per_server
        .iter()
        .map(|&(_, c)| {
            if c.fract() == 0.0 {
                format!("{c:.0}")
            } else {
                format!("{c:.2}")
            }
        })
        .collect();
    let keys: Vec<String> = per_server.iter().map(|(n, _)| n.to_string()).collect();
    format!("{} (keys {})", cmds.join(" / "), keys.join("/"))
}

// ---- report ----------------------------------------------------------------------------

fn kops(t: &Tput) -> String {
    format!("{:.1}k", t.ops_per_sec / 1e3)
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

/// The runtime every async client runs on: tokio's multi-thread scheduler
/// with 2 workers.
fn runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(env_num("COMPARE_WORKERS", 2) as usize)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// `COMPARE_ONLY=32`: memgroup's get throughput at 32 in flight (pool 1),
/// one line `ops_per_sec cpu_us_per_op`, for the A/B runs of `cargo xtask
/// compare --tracing` (this binary built with and without the feature).
fn only_memgroup_32(secs: Duration) {
    let server = spawn_server();
    let addr = server.addr_string();
    preload(&addr);
    let keys: Arc<Vec<String>> = Arc::new((0..KEYS).map(key).collect());
    let rt = runtime();
    let config = Config::Memgroup {
        pool: 1,
        merge: true,
        decode: false,
        tls: false,
    };
    let t = throughput(&rt, &addr, None, &keys, config, 32, secs);
    assert_eq!(t.errors, 0, "errors during the run");
    println!("{:.0} {:.3}", t.ops_per_sec, t.cpu_us_per_op);
}

fn main() {
    let secs = Duration::from_secs(env_num("COMPARE_SECS", 3));
    if std::env::var("COMPARE_ONLY").as_deref() == Ok("32") {
        return only_memgroup_32(secs);
    }
    if let Ok(rows) = std::env::var("COMPARE_QUICK") {
        return quick::run(&rows, secs);
    }
    if std::env::var("COMPARE_CONVERGE").is_ok() {
        return groups::converge_cost(env_num("COMPARE_ROUNDS", 5) as usize);
    }
    let rounds = env_num("COMPARE_ROUNDS", 3) as usize;
    let load_before = loadavg();
    let version = Command::new("memcached")
        .arg("-V")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();

    let servers: Vec<Memcached> = (0..3).map(|_| spawn_server()).collect();
    let addr_strings: Vec<String> = servers.iter().map(Memcached::addr_string).collect();
    let addrs: Vec<&str> = addr_strings.iter().map(String::as_str).collect();
    for addr in &addrs {
        preload(addr);
    }
    let one = addrs[0];
    let keys: Arc<Vec<String>> = Arc::new((0..KEYS).map(key).collect());
    let batches: Arc<Vec<Vec<String>>> = Arc::new(
        (0..KEYS / MULTI_KEYS)
            .map(|b| keys[b * MULTI_KEYS..(b + 1) * MULTI_KEYS].to_vec())
            .collect(),
    );
    let rt = runtime();

    // 1. Sequential latency on one connection: each client once per round,
    // the round order rotated, and each row its client's median round (one
    // run of a sequential row moves by a fifth on a busy machine).
    let tls_server = TlsServer::start(&rt);
    let seq_rounds = env_num("COMPARE_SEQ_ROUNDS", 5) as usize;
    let seq_steps: Vec<Step<'_>> = vec![
        Box::new(|| {
            let [get, set] = memgroup_seq(&rt, &memgroup_client(&rt, &[one], 1), &keys);
            vec![("mg_get", get), ("mg_set", set)]
        }),
        Box::new(|| {
            let get = {
                let (mut raw, k) = (raw_socket(&rt, one), keys.clone());
                time_async!(rt, SEQ_WARMUP, SEQ_OPS, |i| value_ok(
                    raw.get(&k[i % KEYS]).await
                ))
            };
            let set = {
                let (mut raw, k) = (raw_socket(&rt, one), keys.clone());
                time_async!(rt, SEQ_WARMUP, SEQ_OPS, |i| raw.set(&k[i % KEYS]).await)
            };
            vec![("floor_get", get), ("floor_set", set)]
        }),
        Box::new(|| {
            let [get, set] = memgroup_seq(&rt, &tls_server.client(&rt), &keys);
            vec![("mg_tls_get", get), ("mg_tls_set", set)]
        }),
        Box::new(|| {
            let mc = memcache_client(&[one], 1);
            let get = time_sync(SEQ_WARMUP, SEQ_OPS, |i| {
                value_ok(
                    mc.get::<Vec<u8>>(&keys[i % KEYS])
                        .unwrap()
                        .expect("hit")
                        .len(),
                );
            });
            let set = time_sync(SEQ_WARMUP, SEQ_OPS, |i| {
                mc.set(&keys[i % KEYS], &VALUE[..], 0).unwrap();
            });
            vec![("mc_get", get), ("mc_set", set)]
        }),
        Box::new(|| {
            let get = {
                let (mut c, k) = (async_memcached_client(&rt, one), keys.clone());
                time_async!(rt, SEQ_WARMUP, SEQ_OPS, |i| value_ok(
                    c.get(&k[i % KEYS])
                        .await
                        .unwrap()
                        .expect("hit")
                        .data
                        .unwrap()
                        .len()
                ))
            };
            let set = {
                let (mut c, k) = (async_memcached_client(&rt, one), keys.clone());
                time_async!(rt, SEQ_WARMUP, SEQ_OPS, |i| c
                    .set(&k[i % KEYS], &VALUE[..], None, None)
                    .await
                    .unwrap())
            };
            vec![("am_get", get), ("am_set", set)]
        }),
        Box::new(|| {
            let get = {
                let (mut c, k) = (memcache_async_client(&rt, one), keys.clone());
                time_async!(rt, SEQ_WARMUP, SEQ_OPS, |i| value_ok(
                    c.get(&k[i % KEYS])
                        .await
                        .expect("memcache-async get of a pre-set key")
                        .len()
                ))
            };
            // `noreply`: the crate's `set` writes and returns without a reply.
            let set = {
                let (mut c, k) = (memcache_async_client(&rt, one), keys.clone());
                time_async!(rt, SEQ_WARMUP, SEQ_OPS, |i| c
                    .set(&k[i % KEYS], &VALUE[..], 0)
                    .await
                    .expect("memcache-async set"))
            };
            vec![("ma_get", get), ("ma_set", set)]
        }),
        Box::new(|| {
            let mut mr = memcached_rs_client(&[one]);
            let get = time_sync(SEQ_WARMUP, SEQ_OPS, |i| {
                let (value, _flags) = mr
                    .get(keys[i % KEYS].as_bytes())
                    .expect("memcached-rs get of a pre-set key");
                value_ok(value.len());
            });
            let set = time_sync(SEQ_WARMUP, SEQ_OPS, |i| {
                mr.set(keys[i % KEYS].as_bytes(), &VALUE[..], 0, 0)
                    .expect("memcached-rs set");
            });
            vec![("mr_get", get), ("mr_set", set)]
        }),
    ];
    let seq = Samples::of_rounds(&seq_steps, seq_rounds, "sequential latency");
    drop(seq_steps);
    let [
        mg_get,
        mg_set,
        mg_tls_get,
        mg_tls_set,
        mc_get,
        mc_set,
        am_get,
        am_set,
        ma_get,
        ma_set,
    ] = [
        "mg_get",
        "mg_set",
        "mg_tls_get",
        "mg_tls_set",
        "mc_get",
        "mc_set",
        "am_get",
        "am_set",
        "ma_get",
        "ma_set",
    ]
    .map(|name| seq.median(name));
    let [mr_get, mr_set] = ["mr_get", "mr_set"].map(|name| seq.median(name));
    let [floor_get, floor_set] = ["floor_get", "floor_set"].map(|name| seq.median(name));
    // The crate's stock constructor (binary protocol, r2d2 check-out test
    // on): a reference row, once.
    let mc_stock = memcache::Client::connect(format!("memcache://{one}")).expect("memcache stock");
    let mc_stock_get = time_sync(SEQ_WARMUP, SEQ_OPS, |i| {
        value_ok(
            mc_stock
                .get::<Vec<u8>>(&keys[i % KEYS])
                .unwrap()
                .expect("hit")
                .len(),
        );
    });
    drop(mc_stock);

    // 2 + 4. Throughput and CPU per op, rounds interleaved, the median kept.
    let configs = [
        Config::Memgroup {
            pool: 1,
            merge: true,
            decode: false,
            tls: false,
        },
        Config::Memgroup {
            pool: 4,
            merge: true,
            decode: false,
            tls: false,
        },
        Config::Memcache,
        Config::AsyncMemcached,
        Config::Memgroup {
            pool: 1,
            merge: false,
            decode: false,
            tls: false,
        },
        Config::Memgroup {
            pool: 1,
            merge: true,
            decode: true,
            tls: false,
        },
        Config::Memgroup {
            pool: 1,
            merge: true,
            decode: false,
            tls: true,
        },
        Config::MemcacheAsync,
        Config::MemcachedRs,
        Config::Floor,
        Config::PipelinedFloor { merged: false },
        Config::PipelinedFloor { merged: true },
    ];
    // Every round's run and memcached's CPU µs per op in it, per config and
    // number in flight.
    let mut runs: HashMap<(usize, usize), Vec<(Tput, f64)>> = HashMap::new();
    for round in 0..rounds {
        for &n in &IN_FLIGHT {
            // Each round starts with another client, so none always runs
            // first (or right after the same neighbour).
            for k in 0..configs.len() {
                let c = (k + round) % configs.len();
                let config = configs[c];
                eprintln!(
                    "throughput round {} / {rounds}: config {c}, {n} in flight …",
                    round + 1
                );
                // The server's CPU over the run (its share of a core at the
                // run's rate gives its CPU per op).
                let pid = match config {
                    Config::Memgroup { tls: true, .. } => tls_server.server.pid(),
                    _ => servers[0].pid(),
                };
                let (cpu0, t0) = (server_cpu(pid), Instant::now());
                let t = throughput(&rt, one, Some(&tls_server), &keys, config, n, secs);
                let busy = (server_cpu(pid) - cpu0) / t0.elapsed().as_secs_f64();
                runs.entry((c, n))
                    .or_default()
                    .push((t, busy * 1e6 / t.ops_per_sec));
            }
        }
    }
    // Each config's median round by throughput (its CPU and the server's are
    // that round's); the errors of every round.
    let mut kept: HashMap<(usize, usize), Tput> = HashMap::new();
    let mut server_cost: HashMap<(usize, usize), f64> = HashMap::new();
    for (at, mut rounds) in runs {
        let errors = rounds.iter().map(|(t, _)| t.errors).sum();
        rounds.sort_by(|a, b| a.0.ops_per_sec.total_cmp(&b.0.ops_per_sec));
        let (mut median, cost) = rounds[rounds.len() / 2];
        median.errors = errors;
        kept.insert(at, median);
        server_cost.insert(at, cost);
    }
    let tput = |c: usize, n: usize| kept[&(c, n)];

    // 3. get_multi of 100 keys: 3 servers, and 1 server.
    eprintln!("get_multi …");
    let mg3 = memgroup_client(&rt, &addrs, 1);
    let mg_multi3 = {
        let (c, b) = (mg3.clone(), batches.clone());
        time_async!(rt, MULTI_WARMUP, MULTI_CALLS, |i| assert_eq!(
            c.get_multi(&b[i % b.len()]).await.unwrap().hit_count(),
            MULTI_KEYS
        ))
    };
    let mg_rt = commands_per_server(&addrs, "get", || {
        let (c, b) = (mg3.clone(), batches.clone());
        let found =
            rt.block_on(rt.spawn(async move { c.get_multi(&b[7]).await.unwrap().hit_count() }));
        assert_eq!(found.unwrap(), MULTI_KEYS);
    });
    drop(mg3);

    let refs: Vec<Vec<&str>> = batches
        .iter()
        .map(|b| b.iter().map(String::as_str).collect())
        .collect();
    let mc3 = memcache_client(&addrs, 1);
    let mc_multi3 = time_sync(MULTI_WARMUP, MULTI_CALLS, |i| {
        let got = mc3.gets::<Vec<u8>>(&refs[i % refs.len()]).unwrap();
        assert_eq!(got.len(), MULTI_KEYS);
    });
    let mc_rt = commands_per_server(&addrs, "gets", || {
        assert_eq!(mc3.gets::<Vec<u8>>(&refs[7]).unwrap().len(), MULTI_KEYS);
    });
    drop(mc3);

    // The 1-server rows in rounds, like the sequential ones.
    let byte_refs: Vec<Vec<&[u8]>> = batches
        .iter()
        .map(|b| b.iter().map(String::as_bytes).collect())
        .collect();
    let multi_steps: Vec<Step<'_>> = vec![
        Box::new(|| {
            let (c, b) = (memgroup_client(&rt, &[one], 1), batches.clone());
            vec![(
                "mg",
                time_async!(rt, MULTI_WARMUP, MULTI_CALLS, |i| assert_eq!(
                    c.get_multi(&b[i % b.len()]).await.unwrap().hit_count(),
                    MULTI_KEYS
                )),
            )]
        }),
        Box::new(|| {
            let mc1 = memcache_client(&[one], 1);
            vec![(
                "mc",
                time_sync(MULTI_WARMUP, MULTI_CALLS, |i| {
                    let got = mc1.gets::<Vec<u8>>(&refs[i % refs.len()]).unwrap();
                    assert_eq!(got.len(), MULTI_KEYS);
                }),
            )]
        }),
        Box::new(|| {
            let (mut c, b) = (async_memcached_client(&rt, one), batches.clone());
            vec![(
                "am",
                time_async!(rt, MULTI_WARMUP, MULTI_CALLS, |i| assert_eq!(
                    c.get_multi(&b[i % b.len()]).await.unwrap().len(),
                    MULTI_KEYS
                )),
            )]
        }),
        Box::new(|| {
            let (mut c, b) = (memcache_async_client(&rt, one), batches.clone());
            vec![(
                "ma",
                time_async!(rt, MULTI_WARMUP, MULTI_CALLS, |i| assert_eq!(
                    c.get_multi(&b[i % b.len()])
                        .await
                        .expect("memcache-async get_multi")
                        .len(),
                    MULTI_KEYS
                )),
            )]
        }),
        Box::new(|| {
            let mut mr1 = memcached_rs_client(&[one]);
            vec![(
                "mr",
                time_sync(MULTI_WARMUP, MULTI_CALLS, |i| {
                    let got = mr1
                        .get_multi(&byte_refs[i % byte_refs.len()])
                        .expect("memcached-rs get_multi");
                    assert_eq!(got.len(), MULTI_KEYS);
                }),
            )]
        }),
    ];
    let multi = Samples::of_rounds(&multi_steps, seq_rounds, "get_multi, 1 server");
    drop(multi_steps);
    let [mg_multi1, mc_multi1, am_multi1, ma_multi1, mr_multi1] =
        ["mg", "mc", "am", "ma", "mr"].map(|name| multi.median(name));
    let load_after = loadavg();
    let two_groups = groups::report(&rt, addrs[0], addrs[1], secs);
    drop(rt);
    drop(servers);
    drop(tls_server);

    // ---- the table ----
    let (mg1c, mg4c, mcc, amc, mg_nomerge, mg_decode, mg_tls, mac, mrc, flc, pfc, pmc) =
        (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11);
    println!();
    println!(
        "## memgroup vs memcache vs async-memcached vs memcache-async vs memcached-rs ({version}, 127.0.0.1, {VALUE_LEN}-byte values, {KEYS} keys pre-set)"
    );
    println!();
    println!(
        "{} CPUs; load average before {load_before}, after {load_after}. Throughput: {} s measured after {} ms warm-up, median of {rounds} interleaved rounds. Latency: mean / p50 / p99 µs; sequential and 1-server get_multi rows: each client's median of {seq_rounds} interleaved rounds.",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        secs.as_secs(),
        WARMUP.as_millis()
    );
    println!();
    println!(
        "| metric | memgroup | memcache 0.21 | async-memcached 0.9 | memcache-async 0.10 | memcached-rs 0.4 |"
    );
    println!("|---|---|---|---|---|---|");
    println!(
        "| seq get, 1 connection, {SEQ_OPS} ops (µs) | {mg_get} | {mc_get} | {am_get} | {ma_get} | {mr_get} (binary protocol) |"
    );
    println!(
        "| seq set, 1 connection, {SEQ_OPS} ops (µs) | {mg_set} | {mc_set} | {am_set} | {ma_set} (`noreply`: no reply awaited) | {mr_set} (binary protocol) |"
    );
    println!(
        "| seq get over TLS, 1 connection, {SEQ_OPS} ops (µs) | {mg_tls_get} | — | — | — | — |"
    );
    println!(
        "| seq set over TLS, 1 connection, {SEQ_OPS} ops (µs) | {mg_tls_set} | — | — | — | — |"
    );
    println!(
        "| seq get, memcache stock `Client::connect` (binary protocol, r2d2 check-out `version`) (µs) | — | {mc_stock_get} | — | — | — |"
    );
    for &n in &IN_FLIGHT {
        println!(
            "| get ops/s, {n} in flight | {} (1 conn, {n} tasks, pipelined) | {} ({n} threads, pool of {n} conns) | {} ({n} tasks, {n} conns) | {} ({n} tasks, {n} conns) | {} ({n} threads, {n} conns) |",
            kops(&tput(mg1c, n)),
            kops(&tput(mcc, n)),
            kops(&tput(amc, n)),
            kops(&tput(mac, n)),
            kops(&tput(mrc, n)),
        );
        println!(
            "| get ops/s, {n} in flight, memgroup pool_size 4 | {} (4 conns, {n} tasks) | — | — | — | — |",
            kops(&tput(mg4c, n)),
        );
        println!(
            "| get ops/s, {n} in flight, memgroup `merge_gets(false)` | {} (1 conn, {n} tasks, one `get` per key) | — | — | — | — |",
            kops(&tput(mg_nomerge, n)),
        );
        println!(
            "| get ops/s, {n} in flight, memgroup `value_format(spymemcached)`, each value decoded | {} (1 conn, {n} tasks) | — | — | — | — |",
            kops(&tput(mg_decode, n)),
        );
        println!(
            "| get ops/s, {n} in flight, memgroup over TLS (rustls, TLS 1.3) | {} (1 conn, {n} tasks; CPU {:.2} µs/op) | — | — | — | — |",
            kops(&tput(mg_tls, n)),
            tput(mg_tls, n).cpu_us_per_op,
        );
    }
    for &n in &IN_FLIGHT {
        println!(
            "| client CPU µs/op, {n} in flight | {:.2} (pool 1) / {:.2} (pool 4) / {:.2} (no merging) / {:.2} (decoded) | {:.2} | {:.2} | {:.2} | {:.2} |",
            tput(mg1c, n).cpu_us_per_op,
            tput(mg4c, n).cpu_us_per_op,
            tput(mg_nomerge, n).cpu_us_per_op,
            tput(mg_decode, n).cpu_us_per_op,
            tput(mcc, n).cpu_us_per_op,
            tput(amc, n).cpu_us_per_op,
            tput(mac, n).cpu_us_per_op,
            tput(mrc, n).cpu_us_per_op,
        );
    }
    println!(
        "| get_multi {MULTI_KEYS} keys over 3 servers, {MULTI_CALLS} calls (µs) | {mg_multi3} | {mc_multi3} | n/a (one connection, no multi-server routing) | n/a (one connection, no multi-server routing) | n/a (its `get_multi` asserts one server) |"
    );
    println!(
        "| get_multi over 3 servers: commands per server per call | {} | {} | n/a | n/a | n/a |",
        describe_commands(&mg_rt),
        describe_commands(&mc_rt),
    );
    println!(
        "| get_multi {MULTI_KEYS} keys, 1 server, {MULTI_CALLS} calls (µs) | {mg_multi1} | {mc_multi1} | {am_multi1} | {ma_multi1} | {mr_multi1} ({MULTI_KEYS} binary `getkq` + `noop`, one write) |"
    );
    println!(
        "| get_multi {MULTI_KEYS} keys, 1 server: calls/s, client CPU µs/call | {:.0}/s, {:.1} | {:.0}/s, {:.1} | {:.0}/s, {:.1} | {:.0}/s, {:.1} | {:.0}/s, {:.1} |",
        mg_multi1.per_sec(),
        mg_multi1.cpu_us,
        mc_multi1.per_sec(),
        mc_multi1.cpu_us,
        am_multi1.per_sec(),
        am_multi1.cpu_us,
        ma_multi1.per_sec(),
        ma_multi1.cpu_us,
        mr_multi1.per_sec(),
        mr_multi1.cpu_us,
    );
    println!(
        "| seq get, 1 connection: client CPU µs/op | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} |",
        mg_get.cpu_us, mc_get.cpu_us, am_get.cpu_us, ma_get.cpu_us, mr_get.cpu_us,
    );
    let errors = |c: usize| IN_FLIGHT.iter().map(|&n| tput(c, n).errors).sum::<u64>();
    println!(
        "| errors/misses during throughput runs | {} (pool 1) / {} (pool 4) / {} (no merging) | {} | {} | {} | {} |",
        errors(mg1c),
        errors(mg4c),
        errors(mg_nomerge),
        errors(mcc),
        errors(amc),
        errors(mac),
        errors(mrc),
    );
    println!();

    // ---- ratios against the project's targets ----
    let verdict = |ok: bool| if ok { "met" } else { "MISSED" };
    // Every peer's throughput run at `n` in flight; "best peer" is the best
    // of these.
    let peers = |n: usize| {
        [
            ("memcache", tput(mcc, n)),
            ("async-memcached", tput(amc, n)),
            ("memcache-async", tput(mac, n)),
            ("memcached-rs", tput(mrc, n)),
        ]
    };
    // The targets of the speed issue (#27), each against the peer it names.
    let seq_gets = [
        ("memcache", mc_get),
        ("async-memcached", am_get),
        ("memcache-async", ma_get),
        ("memcached-rs", mr_get),
    ];
    // memcache-async's `set` is `noreply`: no round trip to compare with.
    let seq_sets = [
        ("memcache", mc_set),
        ("async-memcached", am_set),
        ("memcached-rs", mr_set),
    ];
    for (what, mine, floor, theirs) in [
        ("get", mg_get, floor_get, &seq_gets[..]),
        ("set", mg_set, floor_set, &seq_sets[..]),
    ] {
        let (fast_name, fastest) = theirs
            .iter()
            .max_by(|a, b| a.1.per_sec().total_cmp(&b.1.per_sec()))
            .unwrap();
        let (lean_name, leanest) = theirs
            .iter()
            .min_by(|a, b| a.1.cpu_us.total_cmp(&b.1.cpu_us))
            .unwrap();
        let (r, c) = (
            mine.per_sec() / fastest.per_sec(),
            mine.cpu_us / leanest.cpu_us,
        );
        println!(
            "- One caller, sequential {what}: memgroup ÷ fastest peer ({fast_name}) = **{r:.2}×** — target ≥ 0.95×: {}; client CPU/op ÷ lowest ({lean_name}) = **{c:.2}** — target ≤ 1.05: {}",
            verdict(r >= 0.95),
            verdict(c <= 1.05)
        );
        // What no tokio client goes below: a bare socket, one write and one
        // read a request, nothing decoded.
        println!(
            "  - the tokio floor (a bare socket): ÷ fastest peer {:.2}×, CPU/op ÷ lowest {:.2}; memgroup ÷ floor: {:.2}× at {:.2}× its CPU/op",
            floor.per_sec() / fastest.per_sec(),
            floor.cpu_us / leanest.cpu_us,
            mine.per_sec() / floor.per_sec(),
            mine.cpu_us / floor.cpu_us,
        );
    }
    for &n in &IN_FLIGHT {
        let (best_name, best_peer) = peers(n)
            .into_iter()
            .max_by(|a, b| a.1.ops_per_sec.total_cmp(&b.1.ops_per_sec))
            .unwrap();
        let r1 = tput(mg1c, n).ops_per_sec / best_peer.ops_per_sec;
        let r4 = tput(mg4c, n).ops_per_sec / best_peer.ops_per_sec;
        let r_nm = tput(mg_nomerge, n).ops_per_sec / best_peer.ops_per_sec;
        let c1 = tput(mg1c, n).cpu_us_per_op / best_peer.cpu_us_per_op;
        let target = match n {
            4 => format!(
                " — target ≥ 1.2× at no more CPU/op ({c1:.2} of its): {}",
                verdict(r1 >= 1.2 && c1 <= 1.0)
            ),
            32 => format!(
                " — target ≥ 2.5× at ≤ 0.45 of its CPU/op ({c1:.2}): {}",
                verdict(r1 >= 2.5 && c1 <= 0.45)
            ),
            _ => String::new(),
        };
        println!(
            "- Throughput, {n} in flight: memgroup ÷ best peer ({best_name}) = **{r1:.2}×** (pool 1), {r4:.2}× (pool 4), {r_nm:.2}× (no merging){target}"
        );
        // One bare socket per task: what no client with a connection per
        // caller goes below on this runtime.
        let floor = tput(flc, n);
        println!(
            "  - the tokio floor (a bare socket per task): ÷ best peer {:.2}× at {:.2} of its CPU/op; memgroup ÷ floor: {:.2}× at {:.2}× its CPU/op",
            floor.ops_per_sec / best_peer.ops_per_sec,
            floor.cpu_us_per_op / best_peer.cpu_us_per_op,
            tput(mg1c, n).ops_per_sec / floor.ops_per_sec,
            tput(mg1c, n).cpu_us_per_op / floor.cpu_us_per_op,
        );
        // One bare socket and one task, all N requests in one write, their
        // replies read back, in lockstep: what one connection does at N in
        // flight with nothing but the socket's own cost.
        let (one, merged) = (tput(pfc, n), tput(pmc, n));
        println!(
            "  - the one-connection floor (one bare socket, one task, the {n} requests in one write, lockstep): ÷ best peer {:.2}× at {:.2} of its CPU/op; as one multi-key `get`: {:.2}× at {:.2}; memgroup ÷ the merged floor: {:.2}× at {:.2}× its CPU/op",
            one.ops_per_sec / best_peer.ops_per_sec,
            one.cpu_us_per_op / best_peer.cpu_us_per_op,
            merged.ops_per_sec / best_peer.ops_per_sec,
            merged.cpu_us_per_op / best_peer.cpu_us_per_op,
            tput(mg1c, n).ops_per_sec / merged.ops_per_sec,
            tput(mg1c, n).cpu_us_per_op / merged.cpu_us_per_op,
        );
    }
    for &n in &IN_FLIGHT {
        let (best_name, best_peer) = peers(n)
            .into_iter()
            .min_by(|a, b| a.1.cpu_us_per_op.total_cmp(&b.1.cpu_us_per_op))
            .unwrap();
        let r1 = tput(mg1c, n).cpu_us_per_op / best_peer.cpu_us_per_op;
        let r4 = tput(mg4c, n).cpu_us_per_op / best_peer.cpu_us_per_op;
        let r_nm = tput(mg_nomerge, n).cpu_us_per_op / best_peer.cpu_us_per_op;
        println!(
            "- Client CPU/op, {n} in flight: memgroup ÷ lowest peer ({best_name}) = **{r1:.2}** (pool 1), {r4:.2} (pool 4), {r_nm:.2} (no merging)"
        );
    }
    for &n in &IN_FLIGHT {
        let r = tput(mg_decode, n).cpu_us_per_op / tput(mg1c, n).cpu_us_per_op;
        let target = match n {
            4 | 32 => format!(" — target ≤ 1.05: {}", verdict(r <= 1.05)),
            _ => String::new(),
        };
        println!(
            "- Decoding each value (spymemcached format), {n} in flight: CPU/op ÷ raw = **{r:.3}**{target}"
        );
    }
    for &n in &IN_FLIGHT {
        let r = tput(mg_tls, n).ops_per_sec / tput(mg1c, n).ops_per_sec;
        let c = tput(mg_tls, n).cpu_us_per_op / tput(mg1c, n).cpu_us_per_op;
        let target = match n {
            4 => format!(" — target ≥ 0.85: {}", verdict(r >= 0.85)),
            _ => String::new(),
        };
        let (plain_server, tls_server) = (server_cost[&(mg1c, n)], server_cost[&(mg_tls, n)]);
        println!(
            "- Over TLS, {n} in flight: memgroup throughput ÷ plaintext = **{r:.2}**, client CPU/op ÷ plaintext = {c:.2} ({:.2} → {:.2} µs), memcached's CPU/op ÷ plaintext = {:.2} ({plain_server:.2} → {tls_server:.2} µs){target}",
            tput(mg1c, n).cpu_us_per_op,
            tput(mg_tls, n).cpu_us_per_op,
            tls_server / plain_server
        );
        // Client and server share these cores: with the client's TLS work
        // taken away (its CPU/op as in plaintext), the pair's CPU per op is
        // still the plaintext client's plus the TLS server's.
        let plain_client = tput(mg1c, n).cpu_us_per_op;
        println!(
            "  - the server's share: client + server CPU/op {:.2} µs in plaintext, {:.2} over TLS; with the client's TLS cost at zero, {:.2}, so where the two cores bound the run, TLS ÷ plaintext ≤ **{:.2}**",
            plain_client + plain_server,
            tput(mg_tls, n).cpu_us_per_op + tls_server,
            plain_client + tls_server,
            (plain_client + plain_server) / (plain_client + tls_server),
        );
    }
    println!(
        "- Sequential get over TLS ÷ plaintext, mean latency = **{:.2}**",
        mg_tls_get.mean / mg_get.mean
    );
    let (multi_name, multi_best) = [
        ("memcache", mc_multi1),
        ("async-memcached", am_multi1),
        ("memcache-async", ma_multi1),
        ("memcached-rs", mr_multi1),
    ]
    .into_iter()
    .max_by(|a, b| a.1.per_sec().total_cmp(&b.1.per_sec()))
    .unwrap();
    let cpu_ratio = mg_multi1.cpu_us / multi_best.cpu_us;
    let tput_ratio = mg_multi1.per_sec() / multi_best.per_sec();
    println!(
        "- get_multi of {MULTI_KEYS} keys, 1 server, memgroup ÷ best peer ({multi_name}): calls/s **{tput_ratio:.2}×** — target ≥ 1.15×: {}; client CPU per call **{cpu_ratio:.2}** — target ≤ 0.8: {}",
        verdict(tput_ratio >= 1.15),
        verdict(cpu_ratio <= 0.8)
    );
    let fastest = [mc_get, am_get, ma_get, mr_get]
        .iter()
        .map(|l| l.mean)
        .fold(f64::INFINITY, f64::min);
    println!(
        "- Sequential get, mean latency, memgroup ÷ fastest peer = **{:.3}**",
        mg_get.mean / fastest
    );
    let one_each = mg_rt.iter().all(|&(n, c)| n == 0 || c == 1.0)
        && mg_rt.iter().map(|&(n, _)| n).sum::<i64>() == MULTI_KEYS as i64;
    println!(
        "- get_multi of {MULTI_KEYS} keys over 3 servers, memgroup: {} — target one round trip per server: {}",
        describe_commands(&mg_rt),
        verdict(one_each)
    );
    println!();
    println!("Notes:");
    println!(
        "- memcache runs with `?protocol=ascii` and r2d2 `test_on_check_out(false)` (its best setting); its stock constructor's cost is the `stock` row."
    );
    println!(
        "- async-memcached's Client and memcache-async's Protocol are one connection taking `&mut self`: N in flight = N tasks, N connections. memcache is blocking: N in flight = N OS threads sharing one pool. memcached-rs is blocking and its Client is not `Send`: N in flight = N OS threads, each with its own Client (one connection)."
    );
    println!(
        "- memcache-async runs on tokio through its `with-tokio` feature (a `tokio::net::TcpStream`, `TCP_NODELAY` on, behind a `BufWriter` so each command is one write); its `set` is `noreply`, so its seq set row is a write without a round trip. memcached-rs speaks only the binary protocol."
    );
    println!(
        "- Commands per server come from each server's `bytes_read` and `get_hits + get_misses` deltas (memcached's `cmd_get` counts keys, not commands)."
    );
    println!(
        "- memgroup merges concurrent single-key `get`s on a connection into one multi-key `get` (as spymemcached does); each caller still gets exactly its own key's reply. The `merge_gets(false)` rows show write batching alone."
    );
    println!(
        "- Client and the memcached servers share the machine's CPUs, and other work on the machine adds noise: compare within one run only."
    );
    println!();
    println!("{two_groups}");
}
