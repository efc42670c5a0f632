//! `bench`: a memslap-like load generator with latency percentiles. The
//! closed loop (here) runs workers that each wait for their request; with
//! `--rate` the open loop ([`open`]) issues requests on a fixed schedule and
//! times each from its slot, so a stalled server cannot hide its delay.

mod herd;
mod open;
mod tally;

use tally::Tally;

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use memgroup::client::{Client, Hedge, WriteWait};
use serde_json::json;

use crate::cluster::Cluster;
use crate::exit::{self, Failure};
use crate::flags::ClusterFlags;
use crate::output::{self, outln};

/// Load-generator settings.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct Args {
    /// Gets to sets, e.g. `9:1`.
    #[arg(long, default_value = "9:1")]
    ratio: String,
    /// Distinct keys (written once before the run so gets can hit;
    /// `--count` too, as `load` calls it).
    #[arg(long, alias = "count", default_value_t = 10_000)]
    keys: u64,
    /// Value size in bytes.
    #[arg(long, default_value_t = 100)]
    value_size: usize,
    /// Requests in flight: the concurrent workers of the closed loop
    /// (default 32); with --rate, the most requests outstanding at once
    /// (default 10,000; one due while that many are outstanding waits, and
    /// is counted late).
    #[arg(long)]
    concurrency: Option<usize>,
    /// Run for this many seconds…
    #[arg(long, conflicts_with = "ops", value_parser = seconds)]
    duration: Option<f64>,
    /// …or for this many operations (default: 10 s).
    #[arg(long)]
    ops: Option<u64>,
    /// Open loop: OPS requests a second on a fixed schedule, each timed from
    /// its slot, not from when it was sent. (A closed loop's workers wait out
    /// a stalled server and send few requests meanwhile, so its delay hides
    /// under the percentiles: coordinated omission.)
    #[arg(long, value_name = "OPS", value_parser = rate)]
    rate: Option<f64>,
    /// Key prefix.
    #[arg(long, default_value = "bench:")]
    prefix: String,
    /// Skip writing every key once before the run.
    #[arg(long)]
    no_prefill: bool,
    /// With --rate: requests scheduled in the first SECONDS are sent but not
    /// counted (e.g. the client finding a stalled server): the figures are
    /// of the rest of the run.
    #[arg(long, value_name = "SECONDS", default_value_t = 0.0, value_parser = warm_up, requires = "rate")]
    warm_up: f64,
    /// Hedge a get to the key's next group when its server has had a request
    /// waiting MS milliseconds with nothing answered, for at most a tenth of
    /// gets (the library's default, 5); 0 turns hedging off.
    #[arg(long, value_name = "MS", default_value_t = 5)]
    hedge_ms: u64,
    /// The thundering herd: --concurrency callers on --herd-keys keys that
    /// expire every --herd-ttl seconds, each read through `get_or_fill`
    /// (one fill per expiry across the cluster); reports this process's
    /// fills, the stores the arbiter's servers took meanwhile (cmd_set:
    /// every process's fills, and any other write), per expiry the keys'
    /// TTL allows, and the callers' latency.
    #[arg(long, conflicts_with_all = ["rate", "ops", "ratio"])]
    herd: bool,
    /// With --herd: the hot keys.
    #[arg(long, default_value_t = 10, requires = "herd")]
    herd_keys: u64,
    /// With --herd: the keys' TTL in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 2, requires = "herd")]
    herd_ttl: u32,
    /// With --herd: how long a fill (the backend) takes, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 50, requires = "herd")]
    fill_ms: u64,
    /// With --herd: read cache-aside (`get`, then `set` after a fill on a
    /// miss) instead of through leases, to compare.
    #[arg(long, requires = "herd")]
    no_lease: bool,
}

/// The closed loop's workers, and the prefill's, unless `--concurrency`.
const WORKERS: usize = 32;

/// The open loop's cap on outstanding requests, unless `--concurrency`.
const OPEN_CAP: usize = 10_000;

/// A warm-up: zero or more seconds, finite.
fn warm_up(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(s) if s.is_finite() && s >= 0.0 => Ok(s),
        _ => Err(format!("{text:?} is not a number of seconds (0 or more)")),
    }
}

/// A rate: a positive number of requests a second, at most one a nanosecond
/// (the schedule's resolution).
fn rate(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(r) if r.is_finite() && r > 0.0 && r <= 1e9 => Ok(r),
        Ok(_) => Err("must be above 0 and at most 1000000000".to_string()),
        Err(e) => Err(e.to_string()),
    }
}

/// `--duration`: seconds, above 0 and at most a year (a negative or NaN
/// duration panicked in `Duration::from_secs_f64`).
fn seconds(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(s) if s.is_finite() && s > 0.0 && s <= 365.0 * 86_400.0 => Ok(s),
        Ok(_) => Err("must be above 0 seconds and at most a year".to_string()),
        Err(e) => Err(e.to_string()),
    }
}

/// `--ratio`: gets and sets, `G:S`, not both 0.
fn parse_ratio(ratio: &str) -> Result<(u64, u64), Failure> {
    let bad = || {
        Failure::Usage(format!(
            "bad --ratio {ratio:?}: expected gets:sets such as 9:1"
        ))
    };
    let (g, s) = ratio.split_once(':').ok_or_else(bad)?;
    let (g, s) = (
        g.parse::<u64>().map_err(|_| bad())?,
        s.parse::<u64>().map_err(|_| bad())?,
    );
    if g + s == 0 {
        return Err(bad());
    }
    Ok((g, s))
}

/// What the requests are: keys, the mix of gets and sets, the value set.
struct Load {
    /// Keys `prefix0` to `prefix{keys - 1}`.
    keys: u64,
    /// Gets to sets: `gets` of every `gets + sets` requests are gets.
    gets: u64,
    sets: u64,
    prefix: String,
    /// What every set stores.
    value: Arc<[u8]>,
}

/// What one request got.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// A get found the key.
    Hit,
    /// A get found no key.
    Miss,
    /// A set was stored.
    Stored,
    /// No answer within the timeout, or an error.
    Failed,
}

impl Load {
    /// The request a random draw `r` picks (its key, get or set), issued;
    /// whether it was a get, and what it got.
    async fn issue(&self, client: &Client, r: u64) -> (bool, Outcome) {
        let key = format!("{}{}", self.prefix, r % self.keys);
        if (r >> 32) % (self.gets + self.sets) < self.gets {
            let outcome = match client.get(&key).await {
                Ok(Some(_)) => Outcome::Hit,
                Ok(None) => Outcome::Miss,
                Err(_) => Outcome::Failed,
            };
            (true, outcome)
        } else {
            let outcome = match client.set(&key, &self.value[..], 0).await {
                Ok(_) => Outcome::Stored,
                Err(_) => Outcome::Failed,
            };
            (false, outcome)
        }
    }
}

/// `bench`: prefill, then gets and sets at the ratio for the duration or
/// the number of operations, in a closed loop or (`--rate`) an open one,
/// following changes to the `--config` file; exit 1 if a request failed.
pub(crate) async fn run(args: &Args, flags: &ClusterFlags) -> Result<ExitCode, Failure> {
    let mut cluster = Cluster::from_flags(flags)?;
    // The library's default: a write returns once its policy is decided.
    cluster.settings.write_wait = WriteWait::Policy;
    cluster.settings.hedge = match args.hedge_ms {
        0 => Hedge::off(),
        ms => Hedge::new(std::time::Duration::from_millis(ms), 0.10),
    };
    let client = &cluster.client()?;
    let _watch = cluster.watch(client, Ok);
    if args.herd {
        let herd = herd::Herd {
            keys: args.herd_keys,
            ttl: args.herd_ttl,
            fill: Duration::from_millis(args.fill_ms),
            callers: args.concurrency.unwrap_or(WORKERS),
            duration: Duration::from_secs_f64(args.duration.unwrap_or(10.0)),
            lease: !args.no_lease,
            prefix: format!("{}herd:", args.prefix),
        };
        return herd::run(client, herd).await;
    }
    let (gets, sets) = parse_ratio(&args.ratio)?;
    let concurrency = args.concurrency.unwrap_or(if args.rate.is_some() {
        OPEN_CAP
    } else {
        WORKERS
    });
    if args.keys == 0 || concurrency == 0 {
        return Err(Failure::Usage(
            "--keys and --concurrency must be positive".into(),
        ));
    }
    let load = Arc::new(Load {
        keys: args.keys,
        gets,
        sets,
        prefix: args.prefix.clone(),
        value: vec![b'x'; args.value_size].into(),
    });
    if !args.no_prefill {
        // The closed loop's workers write the keys; the open loop's cap is
        // no number of workers.
        let workers = match args.rate {
            Some(_) => concurrency.min(WORKERS),
            None => concurrency,
        };
        output::note(&format!(
            "first writing {} keys ({}0 … {}{}, {} bytes each) into every group \
             (--no-prefill skips this, --prefix names them)",
            load.keys,
            load.prefix,
            load.prefix,
            load.keys - 1,
            load.value.len()
        ));
        prefill(client, &load, workers).await?;
    }
    match args.rate {
        Some(rate) => {
            let seconds = args.duration.unwrap_or(10.0);
            let schedule = open::Schedule {
                rate,
                total: args.ops.unwrap_or((seconds * rate).round().max(1.0) as u64),
                cap: concurrency,
                timeout: cluster.settings.timeout,
                warm_up: Duration::from_secs_f64(args.warm_up),
            };
            open::run(client, &load, schedule).await
        }
        None => closed(client, &load, args, concurrency).await,
    }
}

/// Writes every key once, from `workers` workers, so that gets can hit.
async fn prefill(client: &Client, load: &Arc<Load>, workers: usize) -> Result<(), Failure> {
    let bar = ProgressBar::new(load.keys).with_style(style("prefill"));
    let next = Arc::new(AtomicU64::new(0));
    let mut tasks: tokio::task::JoinSet<Result<(), memgroup::client::Error>> =
        tokio::task::JoinSet::new();
    for _ in 0..workers {
        let (client, next, load, bar) = (client.clone(), next.clone(), load.clone(), bar.clone());
        tasks.spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= load.keys {
                    return Ok(());
                }
                client
                    .set(format!("{}{i}", load.prefix), &load.value[..], 0)
                    .await?;
                bar.inc(1);
            }
        });
    }
    while let Some(r) = tasks.join_next().await {
        joined(r)??;
    }
    bar.finish_and_clear();
    Ok(())
}

/// A finished task's result; a task that panicked or was cancelled fails
/// the run.
fn joined<T>(done: Result<T, tokio::task::JoinError>) -> Result<T, Failure> {
    done.map_err(|e| Failure::Op(format!("worker failed: {e}")))
}

/// The closed loop: `workers` workers, each issuing a request and waiting
/// for it, until the deadline or the number of operations.
async fn closed(
    client: &Client,
    load: &Arc<Load>,
    args: &Args,
    workers: usize,
) -> Result<ExitCode, Failure> {
    let json = crate::output::json();
    let deadline = match (args.duration, args.ops) {
        (Some(d), _) => Some(Instant::now() + Duration::from_secs_f64(d)),
        (None, Some(_)) => None,
        (None, None) => Some(Instant::now() + Duration::from_secs(10)),
    };
    let total_ops = args.ops;
    let bar = match total_ops {
        Some(n) => ProgressBar::new(n),
        None => ProgressBar::new((args.duration.unwrap_or(10.0) * 10.0) as u64),
    }
    .with_style(style("bench"));
    let done = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let shards = Tally::shards(workers);
    let mut tasks = tokio::task::JoinSet::new();
    for w in 0..workers {
        let (client, load, done, stop, shards) = (
            client.clone(),
            load.clone(),
            done.clone(),
            stop.clone(),
            shards.clone(),
        );
        tasks.spawn(async move {
            let shard = &shards[w % shards.len()];
            // xorshift: a cheap per-worker random stream, seeded apart.
            let mut rng =
                0x9E37_79B9_7F4A_7C15u64 ^ (w as u64 + 1).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            loop {
                if stop.load(Ordering::Relaxed) || deadline.is_some_and(|d| Instant::now() >= d) {
                    break;
                }
                let n = done.fetch_add(1, Ordering::Relaxed);
                if total_ops.is_some_and(|t| n >= t) {
                    break;
                }
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                let t0 = Instant::now();
                let (get, outcome) = load.issue(&client, rng).await;
                shard.lock().record(get, outcome, t0.elapsed());
            }
        });
    }
    // Progress: ops done, or tenths of a second elapsed.
    let ticker = {
        let (bar, done, stop) = (bar.clone(), done.clone(), stop.clone());
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                tokio::time::sleep(Duration::from_millis(100)).await;
                match total_ops {
                    Some(t) => bar.set_position(done.load(Ordering::Relaxed).min(t)),
                    None => bar.set_position((started.elapsed().as_millis() / 100) as u64),
                }
            }
        })
    };
    while let Some(t) = tasks.join_next().await {
        joined(t)?;
    }
    let total = Tally::merge(&shards);
    let elapsed = started.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    let _ = ticker.await;
    bar.finish_and_clear();

    let ops = total.ops();
    let report = total.report(elapsed);
    if json {
        output::record(
            json!({"seconds": elapsed, "ops": ops, "ops_per_second": ops as f64 / elapsed,
            "hits": total.hits, "misses": total.misses, "errors": total.errors, "concurrency": workers,
            "ops_detail": report.records()}),
        );
    } else {
        outln!(
            "{ops} ops in {elapsed:.2} s: {:.0} ops/s, concurrency {workers}, {} hits, {} misses, {} errors",
            ops as f64 / elapsed,
            total.hits,
            total.misses,
            total.errors
        );
        report.print_table();
    }
    Ok(exit::code(total.errors == 0))
}

/// A progress bar's look, named `prefix`.
fn style(prefix: &str) -> ProgressStyle {
    ProgressStyle::with_template(&format!(
        "{prefix} [{{bar:40}}] {{pos}}/{{len}} {{per_sec}}"
    ))
    .expect("valid template")
    .progress_chars("=> ")
}
