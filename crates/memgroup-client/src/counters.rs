//! Live counters: what the client did with each server since it started,
//! counted on the hot path with relaxed atomics (no lock, no allocation per
//! operation); [`Client::health`](crate::Client::health) reads them.
//!
//! Counted per server: requests sent (one per command: a merged or
//! multi-key `get` is one), storage commands, keys read and whether each hit
//! or missed (as memcached's own `get_hits`/`get_misses` count them),
//! fallback hits (served by a group after the key's first one, which missed,
//! failed or was passed over as dead), errors
//! by kind, bytes in and out (plaintext, before TLS) and a latency histogram
//! of the requests (from queueing to the reply, connecting included).

use std::sync::atomic::{AtomicU8, AtomicU32, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::time::Duration;

use crate::error::ErrorKind;

/// Latencies under this many microseconds have a bucket each.
const LINEAR: u64 = 16;
/// Sub-buckets per power of two above that: 12.5 % resolution.
const SUB_BITS: u32 = 3;
/// Powers of two covered above the linear range (up to 2^35 µs, ~9.5 hours;
/// longer lands in the last bucket).
const OCTAVES: usize = 32;
const BUCKETS: usize = LINEAR as usize + (OCTAVES << SUB_BITS);

/// A latency histogram of atomic counters (log-linear buckets: exact under
/// 16 µs, 12.5 % above), recorded from any thread without a lock, allocated
/// on its first record: a server's shards that no thread counts in cost no
/// buckets (2 KiB each), so a cluster of 40,000 servers is not 0.7 GB of
/// empty histograms. The client's own per-server latencies are kept in
/// these; the proxy keeps its per-command ones in them too.
#[derive(Debug, Default)]
pub struct Histogram {
    buckets: std::sync::OnceLock<Box<[AtomicU64; BUCKETS]>>,
}

impl Histogram {
    fn bucket(micros: u64) -> usize {
        if micros < LINEAR {
            return micros as usize;
        }
        let octave = 63 - micros.leading_zeros(); // >= 4
        let sub = (micros >> (octave - SUB_BITS)) & ((1 << SUB_BITS) - 1);
        let index = LINEAR as usize + (((octave - 4) as usize) << SUB_BITS) + sub as usize;
        index.min(BUCKETS - 1)
    }

    /// The upper bound of a bucket, in microseconds.
    fn upper(index: usize) -> u64 {
        if index < LINEAR as usize {
            return index as u64;
        }
        let rest = index - LINEAR as usize;
        let octave = (rest >> SUB_BITS) as u32 + 4;
        let sub = (rest & ((1 << SUB_BITS) - 1)) as u64;
        let width = 1u64 << (octave - SUB_BITS);
        ((1 << SUB_BITS) + sub + 1) * width
    }

    /// Counts one latency.
    pub fn record(&self, latency: Duration) {
        let micros = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
        let buckets = self
            .buckets
            .get_or_init(|| Box::new([const { AtomicU64::new(0) }; BUCKETS]));
        buckets[Self::bucket(micros)].fetch_add(1, Relaxed);
    }

    fn counts(&self) -> Vec<u64> {
        match self.buckets.get() {
            Some(buckets) => buckets.iter().map(|b| b.load(Relaxed)).collect(),
            None => vec![0; BUCKETS],
        }
    }

    /// Forgets every latency counted (a record racing with it may stay).
    pub fn clear(&self) {
        if let Some(buckets) = self.buckets.get() {
            for bucket in buckets.iter() {
                bucket.store(0, Relaxed);
            }
        }
    }

    /// How many latencies `histograms` hold together, and their latencies
    /// at each quantile of `quantiles` (a bucket's upper bound; `None`
    /// when they hold none).
    pub fn merged(histograms: &[&Histogram], quantiles: &[f64]) -> (u64, Vec<Option<Duration>>) {
        let mut counts = vec![0u64; BUCKETS];
        for histogram in histograms {
            for (sum, n) in counts.iter_mut().zip(histogram.counts()) {
                *sum += n;
            }
        }
        let total = counts.iter().sum();
        (
            total,
            quantiles.iter().map(|&q| quantile(&counts, q)).collect(),
        )
    }
}

/// The latency at quantile `q` of bucket counts, as a bucket's upper bound.
fn quantile(counts: &[u64], q: f64) -> Option<Duration> {
    let total: u64 = counts.iter().sum();
    if total == 0 {
        return None;
    }
    // The rank of the quantile, 1-based, at least 1.
    let rank = ((total as f64 * q).ceil() as u64).clamp(1, total);
    let mut seen = 0;
    for (index, &count) in counts.iter().enumerate() {
        seen += count;
        if seen >= rank {
            return Some(Duration::from_micros(Histogram::upper(index)));
        }
    }
    None
}

/// One shard of a server's counters.
#[derive(Debug, Default)]
struct Shard {
    requests: AtomicU64,
    writes: AtomicU64,
    hits: AtomicU64,
    misses: AtomicU64,
    fallbacks: AtomicU64,
    errors: [AtomicU64; ErrorKind::ALL.len()],
    bytes_in: AtomicU64,
    bytes_out: AtomicU64,
    latency: Histogram,
}

/// A shard on its own cache lines, so threads counting in different shards
/// never contend.
#[derive(Debug, Default)]
#[repr(align(128))]
struct Padded(Shard);

/// Shards per server: each runtime thread counts in its own (threads beyond
/// this share).
const SHARDS: usize = 8;

/// This thread's shard.
fn shard_index() -> usize {
    use std::sync::atomic::AtomicUsize;
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static INDEX: usize = NEXT.fetch_add(1, Relaxed) % SHARDS;
    }
    INDEX.with(|i| *i)
}

/// The counters of one server, sharded by thread, so worker threads on
/// different cores never bounce a counter's cache line between them. In a
/// profile of 32 callers doing gets the counting is ~0.3 % of the client's
/// CPU.
#[derive(Debug, Default)]
pub(crate) struct ServerCounters {
    shards: [Padded; SHARDS],
    /// Requests that timed out since the server last answered one: not
    /// sharded, as "in a row" is across threads; only a timeout writes it
    /// (an answer reads it and writes only to clear it).
    timeouts_in_a_row: AtomicU32,
    /// Requests sent and not yet answered or failed (the read queue's
    /// fast-fail reads it).
    outstanding: AtomicUsize,
    /// Since when a request has waited for the server's answer, in
    /// [`clock::nanos`](crate::clock::nanos) plus one (0: none waits). Set
    /// by a send when none waits; cleared by an answer once it is older than
    /// [`REPLY_GRAIN`] or nothing else is outstanding, so it is written about
    /// once a millisecond under load, not per request.
    waiting_since: AtomicU64,
    /// Told by the stall watch ([`crate::client::hedge`]) while the server
    /// looks stalled: wakes the `get`s waiting on it that may hedge.
    stall: tokio::sync::Notify,
    /// Whether the server speaks the meta protocol, once known
    /// ([`crate::conn::probe`]): 0 not yet, 1 yes, 2 no.
    meta: AtomicU8,
    /// Held by the connection asking the server, so connections opening at
    /// once ask it once (twemproxy closes each connection that asks).
    asking: tokio::sync::Mutex<()>,
}

/// How stale [`ServerCounters::replied`]'s record may be, in nanoseconds.
const REPLY_GRAIN: u64 = 1_000_000;

/// Counts one request outstanding while it lives.
pub(crate) struct Outstanding<'a>(&'a AtomicUsize);

impl Drop for Outstanding<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Relaxed);
    }
}

impl ServerCounters {
    fn shard(&self) -> &Shard {
        &self.shards[shard_index()].0
    }

    /// Whether the server speaks the meta protocol, if a connection found out.
    pub(crate) fn meta(&self) -> Option<bool> {
        match self.meta.load(Relaxed) {
            1 => Some(true),
            2 => Some(false),
            _ => None,
        }
    }

    /// Held while a connection asks the server about the meta protocol.
    pub(crate) async fn asking(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.asking.lock().await
    }

    /// What a connection found out about the meta protocol.
    pub(crate) fn set_meta(&self, speaks: bool) {
        self.meta.store(if speaks { 1 } else { 2 }, Relaxed);
    }

    /// One request done: its latency, whether it stored, its error.
    pub(crate) fn request(&self, latency: Duration, store: bool, error: Option<ErrorKind>) {
        let shard = self.shard();
        shard.requests.fetch_add(1, Relaxed);
        if store {
            shard.writes.fetch_add(1, Relaxed);
        }
        if let Some(kind) = error {
            shard.errors[kind.index()].fetch_add(1, Relaxed);
        }
        shard.latency.record(latency);
    }

    /// Keys read from this server: `hits` found (`fallbacks` of them in a
    /// group other than the first tried), `misses` not.
    pub(crate) fn reads(&self, hits: u64, misses: u64, fallbacks: u64) {
        let shard = self.shard();
        if hits > 0 {
            shard.hits.fetch_add(hits, Relaxed);
        }
        if misses > 0 {
            shard.misses.fetch_add(misses, Relaxed);
        }
        if fallbacks > 0 {
            shard.fallbacks.fetch_add(fallbacks, Relaxed);
        }
    }

    /// A request timed out: how many have in a row now.
    pub(crate) fn timed_out(&self) -> u32 {
        self.timeouts_in_a_row.fetch_add(1, Relaxed) + 1
    }

    /// Counts a request outstanding until the guard drops.
    pub(crate) fn outstanding(&self) -> Outstanding<'_> {
        self.outstanding.fetch_add(1, Relaxed);
        Outstanding(&self.outstanding)
    }

    /// Requests outstanding now.
    pub(crate) fn outstanding_now(&self) -> usize {
        self.outstanding.load(Relaxed)
    }

    /// A request was sent at `at` (nanoseconds, [`crate::clock::nanos`]).
    pub(crate) fn sent(&self, at: u64) {
        if self.waiting_since.load(Relaxed) == 0 {
            let _ = self
                .waiting_since
                .compare_exchange(0, at + 1, Relaxed, Relaxed);
        }
    }

    /// The server answered at `at` (nanoseconds).
    pub(crate) fn replied(&self, at: u64) {
        let since = self.waiting_since.load(Relaxed);
        if since != 0 && (at + 1).saturating_sub(since) > REPLY_GRAIN
            || self.outstanding.load(Relaxed) <= 1
        {
            self.waiting_since.store(0, Relaxed);
        }
    }

    /// Whether the server looks stalled at `now` (nanoseconds): a request
    /// has waited longer than `quiet` and nothing was answered meanwhile.
    pub(crate) fn looks_stalled(&self, now: u64, quiet: Duration) -> bool {
        let quiet = u64::try_from(quiet.as_nanos()).unwrap_or(u64::MAX);
        let since = self.waiting_since.load(Relaxed);
        since != 0 && (now + 1).saturating_sub(since) > quiet
    }

    /// Resolves when the stall watch next finds the server stalled (a
    /// waiter counts from its first poll).
    pub(crate) fn stall_seen(&self) -> tokio::sync::futures::Notified<'_> {
        self.stall.notified()
    }

    /// Wakes every `get` waiting in [`ServerCounters::stall_seen`].
    pub(crate) fn tell_stalled(&self) {
        self.stall.notify_waiters();
    }

    /// The server answered a request: the run of timeouts ends.
    pub(crate) fn answered(&self) {
        if self.timeouts_in_a_row.load(Relaxed) != 0 {
            self.timeouts_in_a_row.store(0, Relaxed);
        }
    }

    pub(crate) fn bytes_out(&self, n: usize) {
        self.shard().bytes_out.fetch_add(n as u64, Relaxed);
    }

    pub(crate) fn bytes_in(&self, n: usize) {
        self.shard().bytes_in.fetch_add(n as u64, Relaxed);
    }

    pub(crate) fn snapshot(&self) -> (Counters, Vec<u64>) {
        let sum = |field: fn(&Shard) -> &AtomicU64| -> u64 {
            self.shards.iter().map(|s| field(&s.0).load(Relaxed)).sum()
        };
        let mut latency = vec![0u64; BUCKETS];
        for shard in &self.shards {
            for (total, n) in latency.iter_mut().zip(shard.0.latency.counts()) {
                *total += n;
            }
        }
        let errors: Vec<(ErrorKind, u64)> = ErrorKind::ALL
            .iter()
            .map(|&kind| {
                let n = self
                    .shards
                    .iter()
                    .map(|s| s.0.errors[kind.index()].load(Relaxed))
                    .sum();
                (kind, n)
            })
            .filter(|&(_, n)| n > 0)
            .collect();
        let counters = Counters {
            requests: sum(|s| &s.requests),
            writes: sum(|s| &s.writes),
            hits: sum(|s| &s.hits),
            misses: sum(|s| &s.misses),
            fallbacks: sum(|s| &s.fallbacks),
            timeouts: count(&errors, ErrorKind::Timeout),
            errors,
            bytes_in: sum(|s| &s.bytes_in),
            bytes_out: sum(|s| &s.bytes_out),
            latency_p50: quantile(&latency, 0.50),
            latency_p99: quantile(&latency, 0.99),
        };
        (counters, latency)
    }
}

fn count(errors: &[(ErrorKind, u64)], kind: ErrorKind) -> u64 {
    errors
        .iter()
        .find(|(k, _)| *k == kind)
        .map_or(0, |&(_, n)| n)
}

/// What the client did with a server (or a group's servers) since it
/// started.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Counters {
    /// Requests sent (a multi-key or merged `get` is one).
    pub requests: u64,
    /// Storage commands among them (`set`, `add`, `replace`, `append`,
    /// `prepend`, `cas`, `ms`): memcached's `cmd_set` counts the same.
    pub writes: u64,
    /// Keys found (memcached's `get_hits`).
    pub hits: u64,
    /// Keys not found (`get_misses`); hits plus misses is `cmd_get`.
    pub misses: u64,
    /// Hits served by a group after the key's first one (which missed,
    /// failed, or was passed over because its server is dead).
    pub fallbacks: u64,
    /// Failed requests by kind (kinds that occurred only).
    pub errors: Vec<(ErrorKind, u64)>,
    /// Requests that timed out (also in `errors`).
    pub timeouts: u64,
    /// Bytes received (plaintext: before TLS).
    pub bytes_in: u64,
    /// Bytes sent (plaintext: before TLS).
    pub bytes_out: u64,
    /// Median request latency (to 12.5 %), if any request was made.
    pub latency_p50: Option<Duration>,
    /// 99th-percentile request latency (to 12.5 %).
    pub latency_p99: Option<Duration>,
}

impl Counters {
    /// All failed requests.
    pub fn errors_total(&self) -> u64 {
        self.errors.iter().map(|(_, n)| n).sum()
    }

    /// The sum of several servers' counters, with percentiles over their
    /// merged histograms.
    pub(crate) fn sum(parts: &[(Counters, Vec<u64>)]) -> Counters {
        let mut total = Counters::default();
        let mut latency = vec![0u64; BUCKETS];
        for (c, hist) in parts {
            total.requests += c.requests;
            total.writes += c.writes;
            total.hits += c.hits;
            total.misses += c.misses;
            total.fallbacks += c.fallbacks;
            total.timeouts += c.timeouts;
            total.bytes_in += c.bytes_in;
            total.bytes_out += c.bytes_out;
            for &(kind, n) in &c.errors {
                match total.errors.iter_mut().find(|(k, _)| *k == kind) {
                    Some((_, sum)) => *sum += n,
                    None => total.errors.push((kind, n)),
                }
            }
            for (sum, n) in latency.iter_mut().zip(hist) {
                *sum += n;
            }
        }
        total.errors.sort_by_key(|&(kind, _)| kind.index());
        total.latency_p50 = quantile(&latency, 0.50);
        total.latency_p99 = quantile(&latency, 0.99);
        total
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_ordered_and_bound_their_values() {
        let mut last = 0;
        for micros in (0..200_000u64).chain([1 << 20, 1 << 30, 1 << 34, u64::MAX]) {
            let b = Histogram::bucket(micros);
            assert!(b >= last, "{micros}: bucket {b} before {last}");
            last = b;
            if b < BUCKETS - 1 {
                assert!(Histogram::upper(b) >= micros, "{micros} > bucket {b}");
                // Within 12.5 % above (or exact in the linear range).
                assert!(Histogram::upper(b) <= micros + micros / 8 + 1, "{micros}");
            }
        }
        // The longest latencies share the last bucket, and recording one is fine.
        assert_eq!(Histogram::bucket(u64::MAX), BUCKETS - 1);
        let h = Histogram::default();
        h.record(Duration::MAX);
        assert_eq!(h.counts()[BUCKETS - 1], 1);
    }

    #[test]
    fn quantiles_of_a_known_distribution() {
        let h = Histogram::default();
        for ms in 1..=100u64 {
            h.record(Duration::from_millis(ms));
        }
        let counts = h.counts();
        let p50 = quantile(&counts, 0.5).unwrap();
        let p99 = quantile(&counts, 0.99).unwrap();
        assert!(
            p50 >= Duration::from_millis(50) && p50 <= Duration::from_millis(57),
            "{p50:?}"
        );
        assert!(
            p99 >= Duration::from_millis(99) && p99 <= Duration::from_millis(112),
            "{p99:?}"
        );
        assert_eq!(quantile(&vec![0; BUCKETS], 0.5), None);
    }

    #[test]
    fn group_sums_add_servers_and_merge_histograms() {
        let (a, b) = (ServerCounters::default(), ServerCounters::default());
        a.request(Duration::from_micros(10), true, None);
        b.request(Duration::from_micros(1000), false, Some(ErrorKind::Timeout));
        b.reads(3, 1, 2);
        let sum = Counters::sum(&[a.snapshot(), b.snapshot()]);
        assert_eq!(
            (sum.requests, sum.writes, sum.hits, sum.misses),
            (2, 1, 3, 1)
        );
        assert_eq!((sum.fallbacks, sum.timeouts, sum.errors_total()), (2, 1, 1));
        assert_eq!(sum.latency_p50, Some(Duration::from_micros(10)));
        assert!(sum.latency_p99.unwrap() >= Duration::from_micros(1000));
    }
}
