//! The open loop of `bench --rate`: requests issued on a fixed schedule,
//! the i-th due at start + i/rate, each its own task whatever the latency of
//! the others, and each timed from its slot in the schedule rather than from
//! when it was sent. A closed loop's workers wait out a stalled server, so
//! the requests it would have delayed are never sent and hide under the
//! percentiles (coordinated omission); here they are sent, and counted.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use indicatif::ProgressBar;
use memgroup::client::Client;
use serde_json::json;
use tokio::task::JoinSet;
use tokio::time::{Instant, MissedTickBehavior};

use super::tally::micros;
use super::{Load, Outcome, Tally, joined, style};
use crate::exit::{self, Failure};
use crate::output::{self, outln};

/// The schedule: `total` requests at `rate` a second in all, at most `cap`
/// outstanding; `timeout` is the client's, the line between an answer and
/// a request reported slow.
#[derive(Debug, Clone, Copy)]
pub(super) struct Schedule {
    /// Requests a second.
    pub(super) rate: f64,
    /// Requests in all.
    pub(super) total: u64,
    /// The most requests outstanding at once.
    pub(super) cap: usize,
    /// The client's per-operation timeout.
    pub(super) timeout: Duration,
    /// Requests scheduled this long after the start are the first counted
    /// (the ones before are sent, not timed).
    pub(super) warm_up: Duration,
}

/// Runs the schedule and prints its summary and percentile table (one JSON
/// record with `--json`); exit 1 if a request failed.
pub(super) async fn run(
    client: &Client,
    load: &Arc<Load>,
    schedule: Schedule,
) -> Result<ExitCode, Failure> {
    let json = crate::output::json();
    let Schedule {
        rate,
        total,
        cap,
        timeout,
        warm_up,
    } = schedule;
    let bar = ProgressBar::new(total).with_style(style("bench"));
    let shards = Tally::shards(cap);
    let started = Instant::now();
    let mut ticks = tokio::time::interval_at(started, Duration::from_secs_f64(1.0 / rate));
    // Ticks the loop comes to behind time (a busy runtime, a full cap) fire
    // at once, one after another: their requests are sent late, timed from
    // their slots, never skipped.
    ticks.set_missed_tick_behavior(MissedTickBehavior::Burst);
    let mut tasks = JoinSet::new();
    // Requests due while `cap` were outstanding: sent once one finished.
    let mut late = 0u64;
    for i in 0..total {
        let slot = ticks.tick().await;
        while let Some(done) = tasks.try_join_next() {
            joined(done)?;
        }
        if tasks.len() >= cap {
            late += 1;
            if let Some(done) = tasks.join_next().await {
                joined(done)?;
            }
        }
        let (client, load, shards, bar) =
            (client.clone(), load.clone(), shards.clone(), bar.clone());
        let counted = slot >= started + warm_up;
        tasks.spawn(async move {
            let lag = slot.elapsed();
            let (get, outcome) = load.issue(&client, splitmix(i)).await;
            let latency = slot.elapsed();
            if !counted {
                bar.inc(1);
                return;
            }
            let mut shard = shards[(i % shards.len() as u64) as usize].lock();
            shard.record(get, outcome, latency);
            shard.lag.saturating_record(micros(lag));
            if outcome == Outcome::Failed || latency > timeout {
                shard.slow += 1;
            }
            bar.inc(1);
        });
    }
    while let Some(done) = tasks.join_next().await {
        joined(done)?;
    }
    // What is counted began after the warm-up.
    let elapsed = started.elapsed().saturating_sub(warm_up).as_secs_f64();
    bar.finish_and_clear();

    let total = Tally::merge(&shards);
    let ops = total.ops();
    let achieved = ops as f64 / elapsed;
    let slow_percent = if ops == 0 {
        0.0
    } else {
        total.slow as f64 * 100.0 / ops as f64
    };
    let timeout_ms = timeout.as_millis();
    let lag = &total.lag;
    let (lag_p50, lag_p99) = (lag.value_at_quantile(0.5), lag.value_at_quantile(0.99));
    let report = total.report(elapsed);
    if json {
        output::record(
            json!({"seconds": elapsed, "ops": ops, "ops_per_second": achieved,
            "rate": rate, "late": late, "concurrency": cap, "timeout_ms": timeout_ms,
            "slower_than_timeout": total.slow, "slower_than_timeout_percent": slow_percent,
            "hits": total.hits, "misses": total.misses, "errors": total.errors,
            "send_lag_p50_us": lag_p50, "send_lag_p99_us": lag_p99, "send_lag_max_us": lag.max(),
            "ops_detail": report.records()}),
        );
    } else {
        outln!(
            "{ops} ops in {elapsed:.2} s: {achieved:.0} ops/s of {rate} scheduled, at most {cap} outstanding, {late} late (due with all {cap} out), {} hits, {} misses, {} errors",
            total.hits,
            total.misses,
            total.errors
        );
        outln!(
            "slower than the timeout ({timeout_ms} ms) or failed: {} = {slow_percent:.1} %",
            total.slow
        );
        outln!(
            "latencies from each request's slot in the schedule; sent after it by {lag_p50} µs at p50, {lag_p99} µs at p99, {} µs at most (the runtime's 1 ms timer, a busy generator, a full cap)",
            lag.max()
        );
        report.print_table();
    }
    Ok(exit::code(total.errors == 0))
}

/// The `i`-th draw of a random stream (splitmix64): each request picks its
/// key and operation from its place in the schedule alone.
fn splitmix(i: u64) -> u64 {
    let mut z = i.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}
