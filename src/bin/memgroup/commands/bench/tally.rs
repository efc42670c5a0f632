//! The bench's results: latency histograms in shards, merged at the end
//! into the percentile table.

use std::sync::Arc;
use std::time::Duration;

use hdrhistogram::Histogram;
use serde_json::json;

use super::Outcome;
use crate::output::Report;

/// Latency histograms are kept in this many shards, whatever the
/// concurrency: a worker (or the open loop's request) records into shard
/// `n % SHARDS`, so memory stays flat at 10,000 in flight while contention
/// on a shard stays low.
pub(super) const SHARDS: usize = 16;

/// A latency in whole microseconds, at least 1 (the histograms' floor).
pub(super) fn micros(latency: Duration) -> u64 {
    u64::try_from(latency.as_micros())
        .unwrap_or(u64::MAX)
        .max(1)
}

/// Results, per shard, merged at the end.
pub(super) struct Tally {
    pub(super) get: Histogram<u64>,
    pub(super) set: Histogram<u64>,
    pub(super) hits: u64,
    pub(super) misses: u64,
    pub(super) errors: u64,
    /// Requests that failed or took longer than the client's timeout (the
    /// open loop's; the closed loop leaves it 0).
    pub(super) slow: u64,
    /// How long after its slot each request was sent (the open loop's; the
    /// closed loop leaves it empty).
    pub(super) lag: Histogram<u64>,
}

impl Tally {
    pub(super) fn new() -> Tally {
        let h = || Histogram::new_with_bounds(1, 60_000_000, 3).expect("valid bounds");
        Tally {
            get: h(),
            set: h(),
            hits: 0,
            misses: 0,
            errors: 0,
            slow: 0,
            lag: h(),
        }
    }

    /// Counts one request: a get or a set, what it got, how long it took.
    pub(super) fn record(&mut self, get: bool, outcome: Outcome, latency: Duration) {
        match outcome {
            Outcome::Hit => self.hits += 1,
            Outcome::Miss => self.misses += 1,
            Outcome::Stored => {}
            Outcome::Failed => self.errors += 1,
        }
        let h = if get { &mut self.get } else { &mut self.set };
        h.saturating_record(micros(latency));
    }

    /// Empty shards for `concurrency` workers or requests in flight.
    pub(super) fn shards(concurrency: usize) -> Arc<Vec<parking_lot::Mutex<Tally>>> {
        Arc::new(
            (0..SHARDS.min(concurrency))
                .map(|_| parking_lot::Mutex::new(Tally::new()))
                .collect(),
        )
    }

    /// The shards' results, merged.
    pub(super) fn merge(shards: &[parking_lot::Mutex<Tally>]) -> Tally {
        let mut total = Tally::new();
        for shard in shards {
            let shard = shard.lock();
            total.get.add(&shard.get).expect("same bounds");
            total.set.add(&shard.set).expect("same bounds");
            total.hits += shard.hits;
            total.misses += shard.misses;
            total.errors += shard.errors;
            total.slow += shard.slow;
            total.lag.add(&shard.lag).expect("same bounds");
        }
        total
    }

    /// Requests counted.
    pub(super) fn ops(&self) -> u64 {
        self.get.len() + self.set.len()
    }

    /// The percentile table, a row (and a JSON record) per operation, its
    /// rate over `elapsed` seconds.
    pub(super) fn report(&self, elapsed: f64) -> Report {
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
        for (name, h) in [("get", &self.get), ("set", &self.set)] {
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
        report
    }
}
