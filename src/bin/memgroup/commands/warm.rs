//! `warm`: copy a group's keys into other groups — the cache warmer.
//!
//! 1. Enumerate the source group's keys with `lru_crawler metadump all` on
//!    each source server (its own connection; the dump of a server is read to
//!    the end before any value is fetched from it), dropping duplicates.
//! 2. Fetch values with their flags in batches (`get_multi` on the source
//!    group only); the remaining TTL comes from the dump's absolute expiry and
//!    the server's own clock (`stats` `time`).
//! 3. Write each key once into every target group with `add_or_set`
//!    (`add` by default, `set` with `--replace`).
//! 4. Dump the source again and copy what the first pass missed (the crawler
//!    skips items a concurrent read holds locked).
//! 5. With `--verify`, read every copied key back from each target group.
//!
//! Nothing is silently lost: every key is copied, already present, skipped
//! with a reason (expired, gone from the source before it could be read), or
//! counted as an error, and the report says which.

use std::collections::HashSet;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use memgroup::client::crawler::DumpEntry;
use memgroup::client::{Client, Error, Expiry, IfPresent, WriteOptions};
use memgroup::topology::{ClusterSpec, ReadFallback};
use parking_lot::Mutex;
use serde_json::json;

use crate::cluster::Cluster;
use crate::dump;
use crate::exit::{self, Failure};
use crate::flags::ClusterFlags;
use crate::output::{self, outln};

/// Warmer settings.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct Args {
    /// The group to copy from.
    #[arg(long)]
    from: String,
    /// The groups to fill, comma-separated.
    #[arg(long, value_delimiter = ',', required = true)]
    to: Vec<String>,
    /// At most this many keys per second (0 = unlimited).
    #[arg(long, default_value_t = 0)]
    rate: u64,
    /// Batches in flight.
    #[arg(long, default_value_t = 8)]
    concurrency: usize,
    /// Keys per `get_multi` batch.
    #[arg(long, default_value_t = 100)]
    batch: usize,
    /// Overwrite keys the target already has (`set` instead of `add`).
    #[arg(long)]
    replace: bool,
    /// Re-read every copied key from each target group and report missing ones.
    #[arg(long)]
    verify: bool,
    /// Attempts per batch on transient errors.
    #[arg(long, default_value_t = 3)]
    retries: u32,
}

#[derive(Debug, Default)]
struct Counters {
    dumped: AtomicU64,
    copied: AtomicU64,
    present: AtomicU64,
    expired: AtomicU64,
    vanished: AtomicU64,
    errors: AtomicU64,
}

/// A key to copy, with the source server's clock when it was dumped.
#[derive(Debug, Clone)]
struct Job {
    key: DumpEntry,
    server_time: i64,
    dumped_at: Instant,
}

fn only_group(spec: &ClusterSpec, name: &str) -> ClusterSpec {
    let mut one = spec.clone();
    one.groups.retain(|g| g.name == name);
    one.settings.read_fallback = ReadFallback::Never;
    one.settings.local_zone = None;
    one.settings.failover = Some(false);
    one
}

/// Dumped keys are already wire keys: sanitizing them again would
/// double-encode, so the warmer's clients send them as they are.
fn as_dumped(mut spec: ClusterSpec) -> ClusterSpec {
    for g in &mut spec.groups {
        g.locator.sanitize_keys = false;
    }
    spec
}

/// `warm --from G --to G…`: the copy in two passes, then (`--verify`) the
/// check; exit 1 if a key was not copied or is missing.
pub(crate) async fn run(
    args: &Args,
    flags: &ClusterFlags,
    json: bool,
) -> Result<ExitCode, Failure> {
    let cluster = Cluster::from_flags(flags)?;
    let settings = &cluster.settings;
    let spec = as_dumped(cluster.spec.clone());
    for name in std::iter::once(&args.from).chain(&args.to) {
        if !spec.groups.iter().any(|g| &g.name == name) {
            return Err(Failure::Usage(format!("unknown group {name:?}")));
        }
    }
    if args.to.contains(&args.from) {
        return Err(Failure::Usage(
            "--to must not include the --from group".into(),
        ));
    }
    let writer = settings.client(spec.clone())?;
    // A target group's servers may change during a long warm.
    let _watch = cluster.watch(&writer, as_dumped);
    let reader = settings.client(only_group(&spec, &args.from))?;
    let topology = reader.topology();
    let sources: Vec<String> = topology.servers().iter().map(ToString::to_string).collect();

    let counters = Arc::new(Counters::default());
    let copied_keys = Arc::new(Mutex::new(Vec::<Vec<u8>>::new()));
    let mut seen = HashSet::new();
    let bar = ProgressBar::new(0).with_style(
        ProgressStyle::with_template("warm [{bar:30}] {pos}/{len} keys {per_sec} {msg}")
            .expect("valid template")
            .progress_chars("=> "),
    );
    let started = Instant::now();
    for pass in 0..2 {
        let jobs = dump_pass(&reader, &sources, settings.timeout, &mut seen).await?;
        counters
            .dumped
            .fetch_add(jobs.len() as u64, Ordering::Relaxed);
        bar.inc_length(jobs.len() as u64);
        if pass == 1 && !jobs.is_empty() {
            bar.println(format!(
                "second pass: {} keys the first dump missed",
                jobs.len()
            ));
        }
        copy(
            &reader,
            &writer,
            args,
            jobs,
            &counters,
            &copied_keys,
            &bar,
            started,
        )
        .await;
    }
    bar.finish_and_clear();
    let elapsed = started.elapsed().as_secs_f64();

    let mut missing: Vec<(String, Vec<u8>)> = Vec::new();
    if args.verify {
        let keys = copied_keys.lock().clone();
        for group in &args.to {
            let check = settings.client(only_group(&spec, group))?;
            for chunk in keys.chunks(args.batch.max(1)) {
                let found = retry(args.retries, || check.get_multi(chunk))
                    .await
                    .map_err(Failure::from)?;
                missing.extend(
                    chunk
                        .iter()
                        .filter(|k| found.get(k).is_none())
                        .map(|k| (group.clone(), k.clone())),
                );
            }
        }
    }

    let c = |a: &AtomicU64| a.load(Ordering::Relaxed);
    let (dumped, copied, present, expired, vanished, errors) = (
        c(&counters.dumped),
        c(&counters.copied),
        c(&counters.present),
        c(&counters.expired),
        c(&counters.vanished),
        c(&counters.errors),
    );
    if json {
        output::json(&json!({
            "from": args.from, "to": args.to, "keys": dumped, "copied": copied, "already_present": present,
            "expired_skipped": expired, "vanished_skipped": vanished, "errors": errors, "seconds": elapsed,
            "keys_per_second": dumped as f64 / elapsed,
            "verified": args.verify, "missing": missing.len(),
            "first_missing": missing.iter().take(20).map(|(g, k)| json!({"group": g, "key": output::show(k)})).collect::<Vec<_>>(),
        }));
    } else {
        outln!(
            "warmed {} from {}: {dumped} keys in {elapsed:.2} s ({:.0} keys/s): {copied} copied, {present} already present, \
             {expired} expired (skipped), {vanished} gone from the source (skipped), {errors} errors",
            args.to.join(","),
            args.from,
            dumped as f64 / elapsed
        );
        if args.verify {
            outln!("verify: missing = {}", missing.len());
            for (g, k) in missing.iter().take(20) {
                outln!("  missing in {g}: {}", output::show(k));
            }
        }
    }
    Ok(exit::code(errors == 0 && missing.is_empty()))
}

/// Dumps every source server (each dump read to its end first), keeping keys not seen before.
async fn dump_pass(
    reader: &Client,
    sources: &[String],
    timeout: Duration,
    seen: &mut HashSet<Vec<u8>>,
) -> Result<Vec<Job>, Failure> {
    let times = reader.stats(None).await?;
    let mut jobs = Vec::new();
    for server in sources {
        let stats = times
            .iter()
            .find(|s| &s.server == server)
            .and_then(|s| s.stats.as_ref().ok());
        let stat = |name: &str| {
            stats
                .and_then(|s| s.get(name))
                .and_then(|t| t.parse::<i64>().ok())
        };
        let server_time = stat("time").ok_or_else(|| {
            Failure::Op(format!("cannot read the clock (stats time) of {server}"))
        })?;
        let max_keys = dump::bound(stat("curr_items"));
        let dumped_at = Instant::now();
        let keys = reader.metadump(server, timeout, max_keys).await?;
        for key in keys {
            if seen.insert(key.key.clone()) {
                jobs.push(Job {
                    key,
                    server_time,
                    dumped_at,
                });
            }
        }
    }
    Ok(jobs)
}

async fn retry<T, F, Fut>(attempts: u32, mut f: F) -> Result<T, Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, Error>>,
{
    let mut tries = 0;
    loop {
        match f().await {
            Err(e) if e.is_transient() && tries + 1 < attempts.max(1) => {
                tries += 1;
                tokio::time::sleep(Duration::from_millis(50 << tries)).await;
            }
            other => return other,
        }
    }
}

#[allow(clippy::too_many_arguments)]
async fn copy(
    reader: &Client,
    writer: &Client,
    args: &Args,
    jobs: Vec<Job>,
    counters: &Arc<Counters>,
    copied_keys: &Arc<Mutex<Vec<Vec<u8>>>>,
    bar: &ProgressBar,
    started: Instant,
) {
    let targets: Arc<Vec<String>> = Arc::new(args.to.clone());
    let mut batches = tokio::task::JoinSet::new();
    let mut scheduled = 0u64;
    for chunk in jobs.chunks(args.batch.max(1)) {
        if args.rate > 0 {
            // Pace batch starts so that keys/s stays under the rate.
            let due = started + Duration::from_secs_f64(scheduled as f64 / args.rate as f64);
            tokio::time::sleep_until(due.into()).await;
        }
        scheduled += chunk.len() as u64;
        while batches.len() >= args.concurrency.max(1) {
            let _ = batches.join_next().await;
        }
        let (reader, writer, chunk, counters, copied_keys, bar, targets) = (
            reader.clone(),
            writer.clone(),
            chunk.to_vec(),
            counters.clone(),
            copied_keys.clone(),
            bar.clone(),
            targets.clone(),
        );
        let (replace, retries) = (args.replace, args.retries);
        batches.spawn(async move {
            copy_batch(
                &reader,
                &writer,
                &chunk,
                &targets,
                replace,
                retries,
                &counters,
                &copied_keys,
            )
            .await;
            bar.inc(chunk.len() as u64);
            let c = |a: &AtomicU64| a.load(Ordering::Relaxed);
            bar.set_message(format!(
                "copied {} present {} expired {} errors {}",
                c(&counters.copied),
                c(&counters.present),
                c(&counters.expired),
                c(&counters.errors)
            ));
        });
    }
    while batches.join_next().await.is_some() {}
}

#[allow(clippy::too_many_arguments)]
async fn copy_batch(
    reader: &Client,
    writer: &Client,
    jobs: &[Job],
    targets: &[String],
    replace: bool,
    retries: u32,
    counters: &Counters,
    copied_keys: &Mutex<Vec<Vec<u8>>>,
) {
    // A key the dump listed but no client could request (a space, a control
    // character, over 250 bytes after decoding) is one error, not a failed
    // batch: the good keys beside it are still copied.
    let (jobs, bad): (Vec<&Job>, Vec<&Job>) = jobs
        .iter()
        .partition(|j| memgroup::proto::Key::new(&j.key.key).is_ok());
    for job in &bad {
        eprintln!(
            "memgroup: skipping {}: not a valid memcached key",
            output::clean(&output::show(&job.key.key))
        );
    }
    counters
        .errors
        .fetch_add(bad.len() as u64, Ordering::Relaxed);
    let keys: Vec<&[u8]> = jobs.iter().map(|j| &j.key.key[..]).collect();
    let found = match retry(retries, || reader.get_multi(&keys)).await {
        Ok(found) => found,
        Err(e) => {
            eprintln!(
                "memgroup: reading a batch of {} keys failed: {}",
                keys.len(),
                output::clean(&e.chain())
            );
            counters
                .errors
                .fetch_add(keys.len() as u64, Ordering::Relaxed);
            return;
        }
    };
    let target_refs: Vec<&str> = targets.iter().map(String::as_str).collect();
    for job in jobs {
        let item = match found.outcome(&job.key.key) {
            Some(Ok(Some(item))) => item,
            Some(Err(e)) => {
                eprintln!(
                    "memgroup: reading {} failed: {}",
                    output::clean(&String::from_utf8_lossy(&job.key.key)),
                    output::clean(&e.chain())
                );
                counters.errors.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            _ => {
                // Deleted or evicted between the dump and the read.
                counters.vanished.fetch_add(1, Ordering::Relaxed);
                continue;
            }
        };
        // The time left by the source's own clock; the library sends it
        // relative, or absolute past 30 days.
        let exptime = match job.key.exp {
            None => Expiry::Never,
            Some(exp) => {
                let now = job.server_time + job.dumped_at.elapsed().as_secs() as i64;
                let remaining = exp - now;
                if remaining <= 0 {
                    counters.expired.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                Expiry::secs(remaining.unsigned_abs())
            }
        };
        let write = || {
            writer.add_or_set(
                &job.key.key,
                &item.value,
                WriteOptions::new().flags(item.flags).expiry(exptime),
                &target_refs,
                if replace {
                    IfPresent::Overwrite
                } else {
                    IfPresent::Keep
                },
            )
        };
        match retry(retries, write).await {
            Ok(outcome) => {
                let present = outcome.groups.iter().all(|g| matches!(g.result, Ok(false)));
                if present {
                    counters.present.fetch_add(1, Ordering::Relaxed);
                } else {
                    counters.copied.fetch_add(1, Ordering::Relaxed);
                }
                copied_keys.lock().push(job.key.key.clone());
            }
            Err(e) => {
                eprintln!(
                    "memgroup: copying {}: {}",
                    output::clean(&output::show(&job.key.key)),
                    output::clean(&e.chain())
                );
                counters.errors.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}
