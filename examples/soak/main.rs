//! The soak: `cargo xtask soak --duration SECONDS` (this example, in
//! release). Three server groups of three real memcached each, a mixed load
//! of reads, writes, multi-key reads, deletes and counter increments (shared
//! by every task) from many tasks, with read repair on, and on a random
//! schedule a server stalled (SIGSTOP) for a while, a server killed
//! (SIGKILL) and restarted, a server's stats reset, or a storm: a server of
//! one group stalled while a server of another is killed, both held at once.
//! At the end it checks:
//!
//! - **nothing lost**: every key whose last write (a set or a delete) was
//!   acknowledged under the ALL policy reads back that value or a newer one
//!   (for a delete: nothing, or a newer value) from at least one group whose
//!   server for the key was not killed since the acknowledgement; every
//!   counter's arbiter copy is at least the highest value an `incr` sent
//!   since that server last restarted (empty) returned;
//! - **converged**: once the faults stopped and the client closed (its
//!   repair queue drained), no group holds a copy older than the key's last
//!   acknowledged write ("stale copies after heal"; for a counter, lower
//!   than another group's), and no two groups hold different values
//!   ("divergent keys"); absence is allowed, since a killed server restarts
//!   empty;
//! - **nothing misdelivered**: every value read carries its own key;
//! - the process's resident memory grew by at most 10 % over the second
//!   half (the repair queue and background writes are bounded, and reach
//!   their bound with the first faults: a leak keeps growing);
//! - its open file descriptors return to their count before the client;
//! - the p99 latency of operations while a fault was active stays below the
//!   operation timeout.
//!
//! Beside the main client, two kinds of writers in processes of their own
//! (`writers.rs`) race it: a second writer in another zone on the same keys
//! for the whole run, and short-lived writers that write and exit at once
//! (during a stall, leaving repairs to the journal). After the heal a
//! client takes the journal, as the next process would, before the
//! verdicts: the short writers' keys must hold the last one's value or
//! nothing.
//!
//! Prints a summary and exits 1 on any violation.

mod check;
mod faults;
mod load;
mod measure;
mod proxy;
mod reload;
mod text;
mod writers;

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};

use memgroup::client::Client;
use memgroup::topology::{ClusterSpec, ReadFallback, Topology, WritePolicy};
use memgroup_testkit::Memcached;
use parking_lot::Mutex;

use load::{Counts, Front, Timing, key};
use measure::{Latency, lowest_rss_over, open_fds, rss_kib};

const GROUPS: usize = 3;
const PER_GROUP: usize = 3;
const TASKS: usize = 16;
/// Keys per task: each key has one writer, so its last write is well defined.
const KEYS_PER_TASK: u64 = 500;
/// Counters, each incremented by every task.
const COUNTERS: usize = 12;
const TIMEOUT: Duration = Duration::from_millis(500);

fn main() -> ExitCode {
    let mut secs = 60u64;
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("--second-writer") => {
            return writers::second_writer(
                &args[1],
                args[2].parse().expect("seconds"),
                std::path::Path::new(&args[3]),
            );
        }
        Some("--short-writer") => {
            return writers::short_writer(
                &args[1],
                args[2].parse().expect("version"),
                std::path::Path::new(&args[3]),
            );
        }
        _ => {}
    }
    let mut i = 0;
    let mut through_proxy = false;
    while i < args.len() {
        match (args[i].as_str(), args.get(i + 1)) {
            ("--duration", Some(v)) => {
                secs = v.parse().expect("--duration SECONDS");
                i += 2;
            }
            ("--proxy", _) => {
                through_proxy = true;
                i += 1;
            }
            (other, _) => {
                panic!("unknown argument {other:?} (use --duration SECONDS, --proxy)")
            }
        }
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(soak(Duration::from_secs(secs), through_proxy))
}

async fn soak(duration: Duration, through_proxy: bool) -> ExitCode {
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
    // A spare server, never faulted: reloads add it and take it away.
    let spare_server = Memcached::spawn_with(&["-m", "64"]);
    let spare = Arc::new(reload::Spare::new(&spec_text, spare_server.addr_string()));
    let topology = Topology::new(ClusterSpec::parse_evcache(&spec_text).unwrap()).unwrap();
    let build = |zone: &str, fallback: ReadFallback| {
        Client::builder()
            .evcache_groups(&spec_text)
            .zone(zone)
            .read_fallback(fallback)
            .write_policy(WritePolicy::All)
            .backoff(Duration::from_millis(100), Duration::from_secs(1))
            .timeout(TIMEOUT)
            .pool_size(2)
    };
    let fds_with_servers = open_fds();
    let journal = std::env::temp_dir().join(format!("memgroup-soak-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&journal);
    let client = build("sg1", ReadFallback::AllCopies)
        .read_repair(true)
        .repair_journal(&journal)
        .build()
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    // With --proxy the load goes through a memgroup proxy serving this
    // client, by text-protocol clients of it (proxy.rs).
    let proxy = if through_proxy {
        Some(proxy::start(&client, TIMEOUT * 4, stop.clone()).await)
    } else {
        None
    };
    let second = writers::spawn(&[
        "--second-writer".into(),
        spec_text.clone(),
        duration.as_secs().to_string(),
        journal.display().to_string(),
    ]);

    let faulting = Arc::new(AtomicBool::new(false));
    let counts = Arc::new(Counts::default());
    let (calm, stormy) = (Arc::new(Latency::new()), Arc::new(Latency::new()));
    // When each server was last killed.
    let killed: Arc<Mutex<Vec<Option<Instant>>>> =
        Arc::new(Mutex::new(vec![None; GROUPS * PER_GROUP]));

    let tasks: Vec<_> = (0..TASKS)
        .map(|t| {
            let timing = Timing {
                faulting: faulting.clone(),
                calm: calm.clone(),
                stormy: stormy.clone(),
            };
            let front = match &proxy {
                Some(proxy) => Front::Text(proxy.conns()),
                None => Front::Client(client.clone()),
            };
            tokio::spawn(load::task(t, front, stop.clone(), counts.clone(), timing))
        })
        .collect();
    let faults = faults::start(
        servers.clone(),
        stop.clone(),
        faulting.clone(),
        killed.clone(),
    );
    let short = writers::short_writers(spec_text.clone(), journal.clone(), stop.clone());
    let reloads = reload::start(client.clone(), spare.clone(), TIMEOUT, stop.clone());

    let started = Instant::now();
    let warm_up = (duration / 10).min(Duration::from_secs(10));
    tokio::time::sleep(warm_up).await;
    let rss_warm = rss_kib();
    // Halfway: the bounded queues (repairs, background writes) have seen
    // faults by then; a leak keeps growing over the second half, so the
    // lowest resident size of its last quarter exceeds that of its first.
    let half = duration / 2;
    tokio::time::sleep(half.saturating_sub(warm_up)).await;
    let quarter = duration.saturating_sub(half.max(warm_up)) / 2;
    let rss_half = lowest_rss_over(quarter).await;
    let rss_end = lowest_rss_over(quarter).await;
    stop.store(true, Relaxed);
    let injected = tokio::task::spawn_blocking(move || faults.join())
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
    let reloads = reloads.await.expect("the reload task");
    let short_runs = tokio::task::spawn_blocking(move || short.join())
        .await
        .expect("join")
        .expect("short writers");
    let second_out = tokio::task::spawn_blocking(move || second.wait_with_output())
        .await
        .expect("join")
        .expect("second writer");
    let second_said = String::from_utf8_lossy(&second_out.stdout).into_owned();
    let mut second_numbers = second_said
        .split_whitespace()
        .map(|n| n.parse::<u64>().unwrap_or(0));
    let (second_writes, second_converged) = (
        second_numbers.next().unwrap_or(0),
        second_numbers.next().unwrap_or(0),
    );

    // The proxy drains first: its client is the one that heals.
    let drained = match proxy {
        Some(proxy) => Some(proxy.stop().await),
        None => None,
    };
    // The heal: every server is back; the client's background writes and
    // repairs drain (past the backoff of the last restarted servers).
    let healing = Instant::now();
    let closed = client.close(Duration::from_secs(30)).await;
    let healed_in = healing.elapsed();
    // The next process: takes what the writers journaled, and does it.
    let taker = build("sg1", ReadFallback::AllCopies)
        .repair_journal(&journal)
        .build()
        .unwrap();
    let taken = taker.health().repairs.pending;
    let taken_closed = taker.close(Duration::from_secs(30)).await;
    let (left_where, for_spare) = writers::journal_left(&journal, &spare_server.addr_string());
    let journal_left = left_where.len();
    // An entry left that the main client owes: queued after its close; one
    // the taker owes: kept by it (a server it does not know?).
    let main_owed = writers::owed(&client);
    let taker_owed = writers::owed(&taker);
    drop(taker);
    let _ = std::fs::remove_dir_all(&journal);
    // Verification, group by group, past the backoff.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let verifiers: Vec<Client> = (1..=GROUPS)
        .map(|g| {
            build(&format!("sg{g}"), ReadFallback::Never)
                .build()
                .unwrap()
        })
        .collect();
    let killed_at = killed.lock().clone();
    let judged = check::Judged {
        topology: &topology,
        killed_at: &killed_at,
        spare: &spare,
    };
    let losses = check::losses(&verifiers, &judged, &acked_keys).await;
    let mut converged = check::convergence(&verifiers, &judged, &acked_keys, &counts).await;
    let (short_checked, short_stale, short_divergent) =
        check::short_keys(&verifiers, &short_runs, &mut converged.examples).await;
    let status = client.health();
    drop(verifiers);
    drop(client);
    // Connections close once their tasks notice.
    let deadline = Instant::now() + Duration::from_secs(5);
    while open_fds() > fds_with_servers && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let fds_end = open_fds();

    let ops = ["gets", "multi", "sets", "deletes", "incrs"];
    let counts_v = [
        counts.gets.load(Relaxed),
        counts.multi.load(Relaxed),
        counts.sets.load(Relaxed),
        counts.deletes.load(Relaxed),
        counts.incrs.load(Relaxed),
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
        "| faults injected | {} SIGSTOP, {} SIGKILL + restart, {} stats reset, {} storms (a SIGSTOP and a SIGKILL in two groups at once) |",
        injected.stops, injected.kills, injected.resets, injected.storms
    );
    println!(
        "| acknowledged writes (ALL) | {} ops; {} keys last acked: {} checked, {} excused (every group's server killed since), {} moved by the reloads (not judged) |",
        counts.acked.load(Relaxed),
        acked_keys.len(),
        losses.checked,
        losses.excused,
        losses.moved
    );
    println!(
        "| lost acknowledged writes | **{}** {} (keys one writer writes; of those the second writer races on, {} ended with nothing newer anywhere, as a race may) |",
        losses.lost,
        losses.examples.join("; "),
        losses.raced_to_nothing
    );
    println!(
        "| counters behind their last acknowledged incr | **{}** of {} checked ({COUNTERS} counters; each against the incrs sent since its arbiter server last restarted empty) |",
        converged.counters_behind, converged.counters_checked
    );
    println!(
        "| heal | client closed in {healed_in:.1?} ({}) |",
        match &closed {
            Ok(()) => "background writes and repairs drained".to_string(),
            Err(e) => e.to_string(),
        }
    );
    println!(
        "| stale copies after heal | **{}** ({} keys read in every group, {} copies unreadable; {} keys moved by the reloads not judged) |",
        converged.stale, converged.keys, converged.unread, converged.moved
    );
    println!(
        "| divergent keys | **{}** {} |",
        converged.divergent,
        converged.examples.join("; ")
    );
    println!(
        "| second writer (zone sg2, the even keys) | {second_writes} sets; copies its convergence checks deleted: {second_converged}, the main client's: {} |",
        status.converged
    );
    println!(
        "| short-lived writers | {} runs of {} keys, each exiting 200 ms after its writes; the next process took {taken} journaled repairs ({}), {journal_left} left journaled ({} kept for the spare server, out of the topology) |",
        short_runs.runs,
        writers::SHORT_KEYS,
        match &taken_closed {
            Ok(()) => "all done".to_string(),
            Err(e) => e.to_string(),
        },
        for_spare
    );
    println!(
        "| short-lived writers' keys after the journal | **{short_stale}** stale copies, **{short_divergent}** divergent keys ({short_checked} keys the last run acknowledged) |"
    );
    println!("| values for another key | **{misdelivered}** |");
    println!(
        "| resident memory | {rss_warm} KiB after warm-up; lowest {rss_half} KiB in the third quarter, {rss_end} KiB in the last ({:+.1} % over the second half) |",
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
        "| client view at the end | {} servers, {dead} failures in a row outstanding; {} reloads while the load ran (timeouts, a spare server added and removed in migration mode: {} reads the old layout answered, {} backfilled; generation {}) |",
        status.servers.len(),
        reloads.applied,
        reloads.old_hits,
        reloads.backfills,
        status.topology_generation
    );
    println!(
        "| repair queue | {} pending, {} repaired, {} dropped (full); {} hedged reads; {} copies by read repair |",
        status.repairs.pending,
        status.repairs.repaired,
        status.repairs.dropped,
        status.hedged_reads,
        status.read_repairs
    );
    let mut violations = Vec::new();
    if let Some(drained) = &drained {
        drained.print();
        drained.violations(&mut violations);
    }
    if losses.lost > 0 {
        violations.push(format!("{} acknowledged writes lost", losses.lost));
    }
    if converged.counters_behind > 0 {
        violations.push(format!(
            "{} counters behind their acknowledged incr",
            converged.counters_behind
        ));
    }
    if converged.stale > 0 {
        violations.push(format!("{} stale copies after heal", converged.stale));
    }
    if converged.divergent > 0 {
        violations.push(format!("{} divergent keys", converged.divergent));
    }
    if closed.is_err() {
        violations.push("the client could not drain its repairs".into());
    }
    if short_stale > 0 || short_divergent > 0 {
        violations.push(format!(
            "short-lived writers' keys: {short_stale} stale copies, {short_divergent} divergent"
        ));
    }
    if let Err(e) = &taken_closed {
        violations.push(format!("the next process's close: {e}"));
    }
    if journal_left > 0 {
        violations.push(format!(
            "{journal_left} journaled repairs left undone: {} (the main client owed then: [{}], the next process's client: [{}]; this process is {}, its segments {}-N)",
            left_where.join(", "),
            main_owed.join(", "),
            taker_owed.join(", "),
            std::process::id(),
            std::process::id()
        ));
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
