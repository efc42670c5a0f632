//! `bench`: a memslap-like load generator with latency percentiles.

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::json;

use crate::cluster::Cluster;
use crate::exit::{self, Failure};
use crate::flags::ClusterFlags;
use crate::output::{self, Report, outln};

/// Load-generator settings.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct Args {
    /// Gets to sets, e.g. `9:1`.
    #[arg(long, default_value = "9:1")]
    ratio: String,
    /// Distinct keys (written once before the run so gets can hit).
    #[arg(long, default_value_t = 10_000)]
    keys: u64,
    /// Value size in bytes.
    #[arg(long, default_value_t = 100)]
    value_size: usize,
    /// Requests in flight (concurrent workers).
    #[arg(long, default_value_t = 32)]
    concurrency: usize,
    /// Run for this many seconds…
    #[arg(long, conflicts_with = "ops")]
    duration: Option<f64>,
    /// …or for this many operations (default: 10 s).
    #[arg(long)]
    ops: Option<u64>,
    /// Key prefix.
    #[arg(long, default_value = "bench:")]
    prefix: String,
    /// Skip writing every key once before the run.
    #[arg(long)]
    no_prefill: bool,
}

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

/// Latency histograms are kept in this many shards, whatever the
/// concurrency: a worker records into shard `worker % SHARDS`, so memory stays
/// flat at 10,000 in flight while contention on a shard stays low.
const SHARDS: usize = 16;

/// Results, per shard for latencies and per worker for counts, merged at the end.
struct Tally {
    get: Histogram<u64>,
    set: Histogram<u64>,
    hits: u64,
    misses: u64,
    errors: u64,
}

impl Tally {
    fn new() -> Tally {
        let h = || Histogram::new_with_bounds(1, 60_000_000, 3).expect("valid bounds");
        Tally {
            get: h(),
            set: h(),
            hits: 0,
            misses: 0,
            errors: 0,
        }
    }
}

/// `bench`: prefill, then gets and sets at the ratio for the duration or
/// the number of operations, following changes to the `--config` file;
/// exit 1 if a request failed.
pub(crate) async fn run(
    args: &Args,
    flags: &ClusterFlags,
    json: bool,
) -> Result<ExitCode, Failure> {
    let cluster = Cluster::from_flags(flags)?;
    let client = &cluster.client()?;
    let _watch = cluster.watch(client, |spec| spec);
    let (gets, sets) = parse_ratio(&args.ratio)?;
    if args.keys == 0 || args.concurrency == 0 {
        return Err(Failure::Usage(
            "--keys and --concurrency must be positive".into(),
        ));
    }
    let value: Arc<[u8]> = vec![b'x'; args.value_size].into();

    // Write every key once so that gets can hit.
    let prefill =
        ProgressBar::new(if args.no_prefill { 0 } else { args.keys }).with_style(style("prefill"));
    let next = Arc::new(AtomicU64::new(if args.no_prefill { args.keys } else { 0 }));
    let mut tasks: tokio::task::JoinSet<Result<(), memgroup::client::Error>> =
        tokio::task::JoinSet::new();
    for _ in 0..args.concurrency {
        let (client, next, value, prefix, bar) = (
            client.clone(),
            next.clone(),
            value.clone(),
            args.prefix.clone(),
            prefill.clone(),
        );
        let keys = args.keys;
        tasks.spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= keys {
                    return Ok(());
                }
                client.set(format!("{prefix}{i}"), &value[..], 0).await?;
                bar.inc(1);
            }
        });
    }
    while let Some(r) = tasks.join_next().await {
        r.map_err(|e| Failure::Op(format!("worker failed: {e}")))??;
    }
    prefill.finish_and_clear();

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
    let shards: Arc<Vec<parking_lot::Mutex<Tally>>> = Arc::new(
        (0..SHARDS.min(args.concurrency))
            .map(|_| parking_lot::Mutex::new(Tally::new()))
            .collect(),
    );
    let mut workers = tokio::task::JoinSet::new();
    for w in 0..args.concurrency {
        let (client, value, done, stop, prefix, shards) = (
            client.clone(),
            value.clone(),
            done.clone(),
            stop.clone(),
            args.prefix.clone(),
            shards.clone(),
        );
        let keys = args.keys;
        workers.spawn(async move {
            let shard = &shards[w % shards.len()];
            let (mut hits, mut misses, mut errors) = (0u64, 0u64, 0u64);
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
                let key = format!("{prefix}{}", rng % keys);
                let is_get = (rng >> 32) % (gets + sets) < gets;
                let t0 = Instant::now();
                if is_get {
                    match client.get(&key).await {
                        Ok(Some(_)) => hits += 1,
                        Ok(None) => misses += 1,
                        Err(_) => errors += 1,
                    }
                    let micros = t0.elapsed().as_micros().max(1) as u64;
                    let _ = shard.lock().get.record(micros);
                } else {
                    if client.set(&key, &value[..], 0).await.is_err() {
                        errors += 1;
                    }
                    let micros = t0.elapsed().as_micros().max(1) as u64;
                    let _ = shard.lock().set.record(micros);
                }
            }
            (hits, misses, errors)
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
    let mut total = Tally::new();
    while let Some(t) = workers.join_next().await {
        let (hits, misses, errors) = t.map_err(|e| Failure::Op(format!("worker failed: {e}")))?;
        total.hits += hits;
        total.misses += misses;
        total.errors += errors;
    }
    for shard in shards.iter() {
        let shard = shard.lock();
        total.get.add(&shard.get).expect("same bounds");
        total.set.add(&shard.set).expect("same bounds");
    }
    let elapsed = started.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    let _ = ticker.await;
    bar.finish_and_clear();

    let ops = total.get.len() + total.set.len();
    let mut report = Report::new(&[
        "OP",
        "COUNT",
        "OPS/S",
        "P50 µs",
        "P90 µs",
        "P99 µs",
        "P99.9 µs",
        "MAX µs",
    ]);
    for (name, h) in [("get", &total.get), ("set", &total.set)] {
        if h.is_empty() {
            continue;
        }
        let per_second = h.len() as f64 / elapsed;
        report.row(vec![
            name.to_string(),
            h.len().to_string(),
            format!("{per_second:.0}"),
            h.value_at_quantile(0.5).to_string(),
            h.value_at_quantile(0.9).to_string(),
            h.value_at_quantile(0.99).to_string(),
            h.value_at_quantile(0.999).to_string(),
            h.max().to_string(),
        ]);
        report.record(json!({"op": name, "count": h.len(), "ops_per_second": per_second,
            "p50_us": h.value_at_quantile(0.5), "p90_us": h.value_at_quantile(0.9), "p99_us": h.value_at_quantile(0.99),
            "p999_us": h.value_at_quantile(0.999), "max_us": h.max()}));
    }
    if json {
        output::record(
            json!({"seconds": elapsed, "ops": ops, "ops_per_second": ops as f64 / elapsed,
            "hits": total.hits, "misses": total.misses, "errors": total.errors, "concurrency": args.concurrency,
            "ops_detail": report.records()}),
        );
    } else {
        outln!(
            "{ops} ops in {elapsed:.2} s: {:.0} ops/s, concurrency {}, {} hits, {} misses, {} errors",
            ops as f64 / elapsed,
            args.concurrency,
            total.hits,
            total.misses,
            total.errors
        );
        report.print_table();
    }
    Ok(exit::code(total.errors == 0))
}

fn style(prefix: &str) -> ProgressStyle {
    ProgressStyle::with_template(&format!(
        "{prefix} [{{bar:40}}] {{pos}}/{{len}} {{per_sec}}"
    ))
    .expect("valid template")
    .progress_chars("=> ")
}
