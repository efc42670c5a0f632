//! `warm`: copy a group's keys into other groups — the cache warmer.
//!
//! 1. Enumerate the source group's keys on each source server with
//!    `lru_crawler metadump hash` (`all` on servers before 1.6.9), checked
//!    against the server's own `curr_items` (`Client::list_keys`): expired
//!    items reclaimed first, a listing shorter than the lower count before
//!    and after is listed again, and one still short is reported and fails
//!    the warm. Duplicates are dropped.
//! 2. Fetch values with their flags in batches (`get_multi` on the source
//!    group only); the remaining TTL comes from the dump's absolute expiry and
//!    the server's own clock (`stats` `time`).
//! 3. Write each key once into every target group with `add_or_set`
//!    (`add` by default, `set` with `--replace`).
//! 4. List the source again and copy what the first pass did not see
//!    (keys written meanwhile).
//! 5. With `--verify`, check every key of the source's listings in each
//!    target group: present, with the value and flags copied. A mismatch
//!    re-reads the source once: a key that changed, expired or was deleted
//!    there meanwhile is not a failure.
//!
//! Nothing is silently lost: every listed key is copied, already present,
//! skipped with a reason (expired, gone from the source before it could be
//! read) or counted as an error; a short listing or a key missing from a
//! target fails the warm (exit 1), and the report says which.

use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use memgroup::client::Client;
use memgroup::client::crawler::DumpEntry;
use parking_lot::Mutex;
use serde_json::json;

use crate::cluster::{Cluster, only_group};
use crate::dump::{self, Checked};
use crate::exit::{self, Failure};
use crate::flags::ClusterFlags;
use crate::output::{self, outln};

mod copy;
mod verify;

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
    /// A target group has no live server: the copy stopped.
    stopped: std::sync::atomic::AtomicBool,
}

/// What the copy did with a key, for `--verify`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Copied {
    /// Written: a digest of the value, and its flags.
    Value { digest: u64, flags: u32 },
    /// The target already had it (`add` refused): only presence is checked.
    Present,
}

impl Copied {
    fn value(value: &[u8], flags: u32) -> Copied {
        Copied::Value {
            digest: digest(value),
            flags,
        }
    }
}

/// A value's digest: equal values, equal digests (one process).
fn digest(value: &[u8]) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    value.hash(&mut hasher);
    hasher.finish()
}

/// Every key the copy wrote (or found present), by key.
type CopiedKeys = Mutex<HashMap<Vec<u8>, Copied>>;

/// A key to copy, with its source server's clock (`stats time`) and when it was read.
#[derive(Debug, Clone)]
struct Job {
    key: DumpEntry,
    server_time: i64,
    clock_read_at: Instant,
}

/// `warm --from G --to G…`: the copy in two passes, then (`--verify`) the
/// check; exit 1 if a key was not copied or is missing.
pub(crate) async fn run(args: &Args, flags: &ClusterFlags) -> Result<ExitCode, Failure> {
    let json = crate::output::json();
    let cluster = Cluster::from_flags(flags)?;
    let settings = &cluster.settings.as_dumped();
    let spec = dump::as_dumped(cluster.spec.clone());
    for name in std::iter::once(&args.from).chain(&args.to) {
        Failure::group_in_spec(&spec, name)?;
    }
    if args.to.contains(&args.from) {
        return Err(Failure::Usage(
            "--to must not include the --from group".into(),
        ));
    }
    // Keys are copied as stored: a group whose own key settings store them
    // otherwise (another digest, no envelope) cannot take them.
    let differing = args
        .to
        .iter()
        .find(|to| cluster.key_settings_of(to) != cluster.key_settings_of(&args.from));
    if let Some(to) = differing {
        return Err(Failure::Usage(format!(
            "warm copies keys as {} stores them, and {to} has other key settings (evcache_keys): it would store them under other keys",
            args.from
        )));
    }
    let writer = settings.client(spec.clone())?;
    // A target group's servers may change during a long warm.
    let _watch = cluster.watch(&writer, |spec| Ok(dump::as_dumped(spec)));
    let reader = settings.client(only_group(&spec, &args.from))?;
    let topology = reader.topology();
    let sources: Vec<String> = topology.servers().iter().map(ToString::to_string).collect();

    let counters = Arc::new(Counters::default());
    let copied_keys = Arc::new(CopiedKeys::default());
    let mut seen = HashSet::new();
    let mut listings: Vec<Checked> = Vec::new();
    let bar = ProgressBar::new(0).with_style(
        ProgressStyle::with_template("warm [{bar:30}] {pos}/{len} keys {per_sec} {msg}")
            .expect("valid template")
            .progress_chars("=> "),
    );
    let started = Instant::now();
    for pass in 0..2 {
        let jobs = dump_pass(
            &reader,
            &sources,
            settings.timeout,
            &mut seen,
            &mut listings,
        )
        .await?;
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
        copy::copy(
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

    let stopped = counters.stopped.load(Ordering::Relaxed);
    let verified = args.verify && !stopped;
    let mut missing: Vec<(String, Vec<u8>)> = Vec::new();
    if verified {
        let copied = copied_keys.lock().clone();
        let mut listed: Vec<Vec<u8>> = seen.iter().cloned().collect();
        listed.sort_unstable();
        for group in &args.to {
            let check = settings.client(only_group(&spec, group))?;
            let target = verify::Target {
                group,
                client: &check,
            };
            missing.extend(verify::check(&reader, &target, &listed, &copied, args).await?);
        }
    }
    // The last listing of each server says how far it can be trusted.
    let mut last: Vec<&Checked> = Vec::new();
    for listing in listings.iter().rev() {
        if !last.iter().any(|l| l.server == listing.server) {
            last.push(listing);
        }
    }
    last.reverse();
    let short_servers: Vec<&Checked> = last.iter().copied().filter(|l| !l.complete).collect();
    for listing in &short_servers {
        output::warn(None, &listing.shortfall());
    }
    let method = last.first().map_or("hash", |l| l.method);
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
        output::record(json!({
            "from": args.from, "to": args.to, "keys": dumped, "copied": copied, "already_present": present,
            "expired_skipped": expired, "vanished_skipped": vanished, "errors": errors, "seconds": elapsed,
            "keys_per_second": dumped as f64 / elapsed,
            // A copy that stopped is not verified: no count of missing keys.
            "verified": verified, "missing": verified.then_some(missing.len()),
            "listing": {"method": method, "checked_against": "curr_items",
                "servers": last.iter().map(|l| json!({"server": l.server, "listed": l.listed,
                    "expected_at_least": l.expected, "dumps": l.attempts, "complete": l.complete})).collect::<Vec<_>>()},
            "short_listings": short_servers.iter().map(|l| l.server.clone()).collect::<Vec<_>>(),
            "first_missing": missing.iter().take(20).map(|(g, k)| json!({"group": g, "key": output::show(k)})).collect::<Vec<_>>(),
        }));
    } else {
        // `-q`: the summary is information; missing keys still print.
        output::info(&format!(
            "warmed {} from {}: {dumped} keys in {elapsed:.2} s ({:.0} keys/s): {copied} copied, {present} already present, \
             {expired} expired (skipped), {vanished} gone from the source (skipped), {errors} errors",
            args.to.join(","),
            args.from,
            dumped as f64 / elapsed
        ));
        output::info(&format!(
            "listing: metadump {method} on {} servers, each checked against its curr_items: {}",
            last.len(),
            if short_servers.is_empty() {
                "all complete".to_string()
            } else {
                format!("{} short (see above)", short_servers.len())
            }
        ));
        if args.verify && !verified {
            output::info("verify: skipped (the copy stopped)");
        } else if verified {
            output::info(&format!(
                "verify: {} listed keys checked in {}: missing = {}",
                seen.len(),
                args.to.join(","),
                missing.len()
            ));
            for (g, k) in missing.iter().take(20) {
                outln!("  missing in {g}: {}", output::show(k));
            }
        }
    }
    Ok(exit::code(
        !stopped && errors == 0 && missing.is_empty() && short_servers.is_empty(),
    ))
}

/// Lists every source server (each listing read to its end first, and
/// checked against the server's count), keeping keys not seen before.
async fn dump_pass(
    reader: &Client,
    sources: &[String],
    timeout: Duration,
    seen: &mut HashSet<Vec<u8>>,
    listings: &mut Vec<Checked>,
) -> Result<Vec<Job>, Failure> {
    let times = reader.server_stats(None).await?;
    // The servers' clocks (`stats time`) were read now: a job's server time
    // is that plus what has passed since, whichever server it is on.
    let read_at = Instant::now();
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
        let clock_read_at = read_at;
        let listing = reader.list_keys(server, timeout, max_keys).await?;
        for key in &listing.entries {
            if seen.insert(key.key.clone()) {
                jobs.push(Job {
                    key: key.clone(),
                    server_time,
                    clock_read_at,
                });
            }
        }
        listings.push(Checked::of(&listing));
    }
    Ok(jobs)
}
