//! The soak: `cargo xtask soak --duration SECONDS` (this example, in
//! release). Three server groups of three real memcached each, a mixed load
//! of reads, writes, multi-key reads and deletes from many tasks, and on a
//! random schedule a server stalled (SIGSTOP) for a while, a server killed
//! (SIGKILL) and restarted, a server's stats reset, or a storm: a server of
//! one group stalled while a server of another is killed, both held at once.
//! At the end it checks:
//!
//! - **nothing lost**: every key whose last write (a set or a delete) was
//!   acknowledged under the ALL policy reads back that value or a newer one
//!   (for a delete: nothing, or a newer value) from at least one group whose
//!   server for the key was not killed since the acknowledgement;
//! - **nothing misdelivered**: every value read carries its own key;
//! - the process's resident memory grew by at most 10 % over the second
//!   half (the repair queue and background writes are bounded, and reach
//!   their bound with the first faults: a leak keeps growing);
//! - its open file descriptors return to their count before the client;
//! - the p99 latency of operations while a fault was active stays below the
//!   operation timeout.
//!
//! Prints a summary and exits 1 on any violation.

use std::collections::HashMap;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use memgroup::client::{Client, Error};
use memgroup::topology::{ClusterSpec, ReadFallback, Topology, WritePolicy};
use memgroup_testkit::Memcached;
use parking_lot::Mutex;

const GROUPS: usize = 3;
const PER_GROUP: usize = 3;
const TASKS: usize = 16;
/// Keys per task: each key has one writer, so its last write is well defined.
const KEYS_PER_TASK: u64 = 500;
const TIMEOUT: Duration = Duration::from_millis(500);

/// A small deterministic generator (xorshift), seeded per task.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Log-linear latency buckets (1/8 octave) of atomics.
struct Latency([AtomicU64; 256]);

impl Latency {
    fn new() -> Latency {
        Latency([const { AtomicU64::new(0) }; 256])
    }

    fn bucket(micros: u64) -> usize {
        if micros < 8 {
            return micros as usize;
        }
        let octave = 63 - micros.leading_zeros() as usize;
        let sub = (micros >> (octave - 3)) & 7;
        (8 + (octave - 3) * 8 + sub as usize).min(255)
    }

    fn upper(index: usize) -> u64 {
        if index < 8 {
            return index as u64;
        }
        let (octave, sub) = ((index - 8) / 8 + 3, (index - 8) % 8);
        ((8 + sub as u64 + 1) << octave) >> 3
    }

    fn record(&self, d: Duration) {
        let micros = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        self.0[Self::bucket(micros)].fetch_add(1, Relaxed);
    }

    fn count(&self) -> u64 {
        self.0.iter().map(|b| b.load(Relaxed)).sum()
    }

    /// Operations that took at least `d` (whole buckets: those whose lower
    /// bound is `d` or more).
    fn at_least(&self, d: Duration) -> u64 {
        let micros = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        self.0
            .iter()
            .enumerate()
            .filter(|&(i, _)| i > 0 && Self::upper(i - 1) >= micros)
            .map(|(_, b)| b.load(Relaxed))
            .sum()
    }

    fn quantile(&self, q: f64) -> Duration {
        let total = self.count();
        let rank = ((total as f64 * q).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, b) in self.0.iter().enumerate() {
            seen += b.load(Relaxed);
            if seen >= rank {
                return Duration::from_micros(Self::upper(i));
            }
        }
        Duration::ZERO
    }
}

/// The last acknowledged write of a key.
#[derive(Debug, Clone, Copy)]
enum Acked {
    /// `maybe_deleted`: a later delete was not acknowledged, but a server
    /// may still have applied it (a timed-out request is not an unsent
    /// one: a stalled server processes it when it resumes).
    Set {
        version: u64,
        at: Instant,
        maybe_deleted: bool,
    },
    Deleted {
        version: u64,
        at: Instant,
    },
}

#[derive(Default)]
struct Counts {
    gets: AtomicU64,
    multi: AtomicU64,
    sets: AtomicU64,
    deletes: AtomicU64,
    acked: AtomicU64,
    misdelivered: AtomicU64,
    errors: Mutex<HashMap<&'static str, u64>>,
}

impl Counts {
    fn error(&self, e: &Error) {
        *self.errors.lock().entry(e.kind().name()).or_default() += 1;
    }
}

fn key(task: usize, i: u64) -> String {
    format!("soak:{task}:{i}")
}

fn value(key: &str, version: u64) -> Vec<u8> {
    let mut v = format!("{key}|{version}|").into_bytes();
    v.resize(v.len() + 64 + (version as usize % 200), b'x');
    v
}

/// The key and version a value carries.
fn parse(value: &[u8]) -> Option<(&str, u64)> {
    let text = std::str::from_utf8(value).ok()?;
    let mut parts = text.splitn(3, '|');
    let key = parts.next()?;
    let version = parts.next()?.parse().ok()?;
    Some((key, version))
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.split_whitespace().next()?.parse().ok())
        })
        .unwrap_or(0)
}

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, Iterator::count)
}

/// `stats reset` on a server, over a raw connection.
/// How the fault thread hurts a server for a while.
#[derive(Debug, Clone, Copy)]
enum Hurt {
    /// SIGSTOP, then SIGCONT.
    Stall,
    /// SIGKILL, then a restart on the same port.
    Kill,
}

fn stats_reset(server: &Memcached) {
    use std::io::{Read, Write};
    if let Ok(mut s) = std::net::TcpStream::connect(server.addr()) {
        let _ = s.set_read_timeout(Some(Duration::from_millis(200)));
        let _ = s.write_all(b"stats reset\r\n");
        let mut buf = [0u8; 64];
        let _ = s.read(&mut buf);
    }
}

fn main() -> ExitCode {
    let mut secs = 60u64;
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < args.len() {
        match (args[i].as_str(), args.get(i + 1)) {
            ("--duration", Some(v)) => {
                secs = v.parse().expect("--duration SECONDS");
                i += 2;
            }
            (other, _) => panic!("unknown argument {other:?} (use --duration SECONDS)"),
        }
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(soak(Duration::from_secs(secs)))
}

async fn soak(duration: Duration) -> ExitCode {
    let fds_before = open_fds();
    let servers: Arc<Vec<Mutex<Memcached>>> = Arc::new(
        (0..GROUPS * PER_GROUP)
            .map(|_| Mutex::new(Memcached::spawn_with(&["-m", "64"])))
            .collect(),
    );
    let names: Vec<String> = servers.iter().map(|s| s.lock().addr_string()).collect();
    let groups: Vec<String> = (0..GROUPS)
        .map(|g| {
            let list = names[g * PER_GROUP..(g + 1) * PER_GROUP].join(",");
            format!("sg{}={list}", g + 1)
        })
        .collect();
    let spec_text = groups.join(";");
    let topology = Topology::new(ClusterSpec::parse_evcache(&spec_text).unwrap()).unwrap();
    let build = |zone: &str, fallback: ReadFallback| {
        Client::builder()
            .evcache_groups(&spec_text)
            .unwrap()
            .zone(zone)
            .read_fallback(fallback)
            .write_policy(WritePolicy::All)
            .backoff(Duration::from_millis(100), Duration::from_secs(1))
            .timeout(TIMEOUT)
            .pool_size(2)
            .build()
            .unwrap()
    };
    let fds_with_servers = open_fds();
    let client = build("sg1", ReadFallback::AllCopies);

    let stop = Arc::new(AtomicBool::new(false));
    let faulting = Arc::new(AtomicBool::new(false));
    let counts = Arc::new(Counts::default());
    let (calm, stormy) = (Arc::new(Latency::new()), Arc::new(Latency::new()));
    // When each server was last killed.
    let killed: Arc<Mutex<Vec<Option<Instant>>>> =
        Arc::new(Mutex::new(vec![None; GROUPS * PER_GROUP]));

    let mut tasks = Vec::new();
    for t in 0..TASKS {
        let (client, stop, faulting, counts, calm, stormy) = (
            client.clone(),
            stop.clone(),
            faulting.clone(),
            counts.clone(),
            calm.clone(),
            stormy.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ (t as u64 + 1));
            let mut versions = vec![0u64; KEYS_PER_TASK as usize];
            let mut acked: HashMap<u64, Acked> = HashMap::new();
            while !stop.load(Relaxed) {
                let started = Instant::now();
                let roll = rng.below(100);
                // Reads may ask any task's keys; writes only this task's.
                let other = rng.below(TASKS as u64) as usize;
                let i = rng.below(KEYS_PER_TASK);
                match roll {
                    0..50 => {
                        counts.gets.fetch_add(1, Relaxed);
                        let k = key(other, i);
                        match client.get(&k).await {
                            Ok(Some(item)) => {
                                if parse(&item.value).map(|(key, _)| key) != Some(k.as_str()) {
                                    counts.misdelivered.fetch_add(1, Relaxed);
                                }
                            }
                            Ok(None) => {}
                            Err(e) => counts.error(&e),
                        }
                    }
                    50..60 => {
                        counts.multi.fetch_add(1, Relaxed);
                        let keys: Vec<String> = (0..10)
                            .map(|j| key(other, (i + j * 37) % KEYS_PER_TASK))
                            .collect();
                        match client.get_multi(&keys).await {
                            Ok(found) => {
                                for (k, item) in found.hits() {
                                    if parse(&item.value).map(|(key, _)| key.as_bytes()) != Some(k)
                                    {
                                        counts.misdelivered.fetch_add(1, Relaxed);
                                    }
                                }
                                // Keys no group answered count as errors, once each call.
                                if let Some((_, e)) = found.errors().next() {
                                    counts.error(e);
                                }
                            }
                            Err(e) => counts.error(&e),
                        }
                    }
                    60..92 => {
                        counts.sets.fetch_add(1, Relaxed);
                        let k = key(t, i);
                        let slot = &mut versions[i as usize];
                        *slot += 1;
                        let version = *slot;
                        match client.set(&k, value(&k, version), 0).await {
                            Ok(outcome) if outcome.applied() => {
                                counts.acked.fetch_add(1, Relaxed);
                                acked.insert(
                                    i,
                                    Acked::Set {
                                        version,
                                        at: Instant::now(),
                                        maybe_deleted: false,
                                    },
                                );
                            }
                            Ok(_) => {}
                            Err(e) => counts.error(&e),
                        }
                    }
                    _ => {
                        counts.deletes.fetch_add(1, Relaxed);
                        let k = key(t, i);
                        let slot = &mut versions[i as usize];
                        *slot += 1;
                        let version = *slot;
                        match client.delete(&k).await {
                            // Applied or not found: either way absent everywhere.
                            Ok(outcome) if outcome.groups.iter().all(|g| g.result.is_ok()) => {
                                counts.acked.fetch_add(1, Relaxed);
                                acked.insert(
                                    i,
                                    Acked::Deleted {
                                        version,
                                        at: Instant::now(),
                                    },
                                );
                            }
                            failed => {
                                if let Err(e) = &failed {
                                    counts.error(e);
                                }
                                if let Some(Acked::Set { maybe_deleted, .. }) = acked.get_mut(&i) {
                                    *maybe_deleted = true;
                                }
                            }
                        }
                    }
                }
                let took = started.elapsed();
                if faulting.load(Relaxed) {
                    &stormy
                } else {
                    &calm
                }
                .record(took);
            }
            acked
        }));
    }

    // Faults on a random schedule, from a thread of their own: signals and
    // restarts block, and blocking inside the runtime would make it start
    // extra threads (whose allocator arenas would count as the client's
    // memory growth).
    let faults = {
        let (servers, stop, faulting, killed) = (
            servers.clone(),
            stop.clone(),
            faulting.clone(),
            killed.clone(),
        );
        std::thread::spawn(move || {
            let mut rng = Rng(0xDEAD_BEEF);
            let (mut stops, mut kills, mut resets, mut storms) = (0u64, 0u64, 0u64, 0u64);
            while !stop.load(Relaxed) {
                std::thread::sleep(Duration::from_millis(500 + rng.below(1500)));
                if stop.load(Relaxed) {
                    break;
                }
                let victim = rng.below(servers.len() as u64) as usize;
                let hold = Duration::from_millis(500 + rng.below(2500));
                // Servers hurt for `hold`, then mended in reverse order.
                let hurt: Vec<(usize, Hurt)> = match rng.below(4) {
                    0 => {
                        stops += 1;
                        vec![(victim, Hurt::Stall)]
                    }
                    1 => {
                        kills += 1;
                        vec![(victim, Hurt::Kill)]
                    }
                    2 => {
                        resets += 1;
                        stats_reset(&servers[victim].lock());
                        continue;
                    }
                    _ => {
                        // Two groups hurt at once: one stalled, one killed.
                        storms += 1;
                        let group = victim / PER_GROUP;
                        let other = (group + 1 + rng.below(GROUPS as u64 - 1) as usize) % GROUPS;
                        let dead = other * PER_GROUP + rng.below(PER_GROUP as u64) as usize;
                        vec![(victim, Hurt::Stall), (dead, Hurt::Kill)]
                    }
                };
                faulting.store(true, Relaxed);
                for &(i, how) in &hurt {
                    match how {
                        Hurt::Stall => servers[i].lock().stop(),
                        Hurt::Kill => {
                            killed.lock()[i] = Some(Instant::now());
                            servers[i].lock().kill();
                        }
                    }
                }
                std::thread::sleep(hold);
                for &(i, how) in hurt.iter().rev() {
                    match how {
                        Hurt::Stall => servers[i].lock().resume(),
                        Hurt::Kill => {
                            servers[i].lock().restart();
                            killed.lock()[i] = Some(Instant::now());
                        }
                    }
                }
                faulting.store(false, Relaxed);
            }
            (stops, kills, resets, storms)
        })
    };

    let started = Instant::now();
    let warm_up = (duration / 10).min(Duration::from_secs(10));
    tokio::time::sleep(warm_up).await;
    let rss_warm = rss_kib();
    // Halfway: the bounded queues (repairs, background writes) have seen
    // faults by then; a leak keeps growing over the second half.
    let half = duration / 2;
    tokio::time::sleep(half.saturating_sub(warm_up)).await;
    let rss_half = rss_kib();
    tokio::time::sleep(duration.saturating_sub(half.max(warm_up))).await;
    let rss_end = rss_kib();
    stop.store(true, Relaxed);
    let (stops, kills, resets, storms) = tokio::task::spawn_blocking(move || faults.join())
        .await
        .expect("join")
        .expect("fault thread");
    let mut acked_keys = Vec::new();
    for (t, task) in tasks.into_iter().enumerate() {
        for (i, ack) in task.await.expect("load task") {
            acked_keys.push((key(t, i), ack));
        }
    }
    let elapsed = started.elapsed();

    // Verification, group by group, past the backoff.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let verifiers: Vec<Client> = (1..=GROUPS)
        .map(|g| build(&format!("sg{g}"), ReadFallback::Never))
        .collect();
    let killed_at = killed.lock().clone();
    let (mut lost, mut excused, mut checked) = (0u64, 0u64, 0u64);
    let mut lost_examples = Vec::new();
    for (k, ack) in &acked_keys {
        let (version, at) = match *ack {
            Acked::Set { version, at, .. } | Acked::Deleted { version, at } => (version, at),
        };
        let mut held = false;
        let mut survivors = 0;
        for (g, verifier) in verifiers.iter().enumerate() {
            let group = &topology.groups()[g];
            let server = group.server_for(k.as_bytes()).0;
            if killed_at[server].is_some_and(|kill| kill >= at) {
                continue;
            }
            survivors += 1;
            let Ok(found) = verifier.get(k).await else {
                continue;
            };
            let newer_or_same = |v: &[u8]| parse(v).is_some_and(|(_, got)| got >= version);
            held |= match ack {
                Acked::Set { maybe_deleted, .. } => match found {
                    Some(item) => newer_or_same(&item.value),
                    None => *maybe_deleted,
                },
                Acked::Deleted { .. } => found
                    .is_none_or(|item| parse(&item.value).is_some_and(|(_, got)| got > version)),
            };
        }
        if survivors == 0 {
            excused += 1;
            continue;
        }
        checked += 1;
        if !held {
            lost += 1;
            if lost_examples.len() < 5 {
                lost_examples.push(format!("{k}: {ack:?}"));
            }
        }
    }
    let status = client.status();
    drop(verifiers);
    drop(client);
    // Connections close once their tasks notice.
    let deadline = Instant::now() + Duration::from_secs(5);
    while open_fds() > fds_with_servers && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let fds_end = open_fds();

    let ops = ["gets", "multi", "sets", "deletes"];
    let counts_v = [
        counts.gets.load(Relaxed),
        counts.multi.load(Relaxed),
        counts.sets.load(Relaxed),
        counts.deletes.load(Relaxed),
    ];
    let total: u64 = counts_v.iter().sum();
    let misdelivered = counts.misdelivered.load(Relaxed);
    let growth = rss_end as f64 / rss_half.max(1) as f64 - 1.0;
    let p99_storm = stormy.quantile(0.99);
    let p99_calm = calm.quantile(0.99);
    println!(
        "| soak | {:.0} s, {GROUPS} groups x {PER_GROUP} memcached, {TASKS} tasks, timeout {TIMEOUT:?} |",
        elapsed.as_secs_f64()
    );
    println!("|---|---|");
    println!(
        "| operations | {total} ({:.0}/s): {} |",
        total as f64 / elapsed.as_secs_f64(),
        ops.iter()
            .zip(counts_v)
            .map(|(n, c)| format!("{n} {c}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let mut errors: Vec<_> = counts
        .errors
        .lock()
        .iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    errors.sort();
    println!(
        "| errors by kind | {} |",
        if errors.is_empty() {
            "none".into()
        } else {
            errors.join(", ")
        }
    );
    println!(
        "| faults injected | {stops} SIGSTOP, {kills} SIGKILL + restart, {resets} stats reset, {storms} storms (a SIGSTOP and a SIGKILL in two groups at once) |"
    );
    println!(
        "| acknowledged writes (ALL) | {} ops; {} keys last acked: {checked} checked, {excused} excused (every group's server killed since) |",
        counts.acked.load(Relaxed),
        acked_keys.len()
    );
    println!(
        "| lost acknowledged writes | **{lost}** {} |",
        lost_examples.join("; ")
    );
    println!("| values for another key | **{misdelivered}** |");
    println!(
        "| resident memory | {rss_warm} KiB after warm-up, {rss_half} KiB halfway, {rss_end} KiB at the end ({:+.1} % over the second half) |",
        growth * 100.0
    );
    println!(
        "| open descriptors | {fds_before} before the servers, {fds_with_servers} with them, {fds_end} after the client |"
    );
    println!(
        "| latency p99 | {p99_calm:?} calm ({} ops), {p99_storm:?} during faults ({} ops) |",
        calm.count(),
        stormy.count()
    );
    // A closed loop's p99 hides a stall (a task waiting out a timeout sends
    // nothing meanwhile): the share that waited the timeout says more.
    let slow = stormy.at_least(TIMEOUT);
    println!(
        "| slower than the timeout during faults | {slow} ops = {:.3} % (closed loop: the open loop of `bench --rate` and `cargo xtask compare --faults` measure it from the schedule) |",
        100.0 * slow as f64 / stormy.count().max(1) as f64
    );
    let dead = status
        .servers
        .iter()
        .filter(|s| s.counters.requests > 0)
        .map(|s| s.failures)
        .sum::<u32>();
    println!(
        "| client view at the end | {} servers, {dead} failures in a row outstanding |",
        status.servers.len()
    );
    println!(
        "| repair queue | {} pending, {} repaired, {} dropped (full); {} hedged reads |",
        status.repairs.pending,
        status.repairs.repaired,
        status.repairs.dropped,
        status.hedged_reads
    );
    let mut violations = Vec::new();
    if lost > 0 {
        violations.push(format!("{lost} acknowledged writes lost"));
    }
    if misdelivered > 0 {
        violations.push(format!("{misdelivered} values for another key"));
    }
    if growth > 0.10 {
        violations.push(format!(
            "memory grew {:.1} % over the second half",
            growth * 100.0
        ));
    }
    if fds_end != fds_with_servers {
        violations.push(format!(
            "{} descriptors left open",
            fds_end as i64 - fds_with_servers as i64
        ));
    }
    if p99_storm >= TIMEOUT {
        violations.push(format!("p99 during faults {p99_storm:?} >= the timeout"));
    }
    if violations.is_empty() {
        println!("\nsoak: no violation");
        ExitCode::SUCCESS
    } else {
        println!("\nsoak: VIOLATIONS: {}", violations.join("; "));
        ExitCode::from(1)
    }
}
