//! What the soak measures with: a seeded generator, latency buckets, the
//! process's memory and descriptors.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// A small deterministic generator (xorshift), seeded per task.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Log-linear latency buckets (1/8 octave) of atomics.
pub(crate) struct Latency([AtomicU64; 256]);

impl Default for Latency {
    fn default() -> Latency {
        Latency::new()
    }
}

impl Latency {
    pub(crate) fn new() -> Latency {
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

    pub(crate) fn record(&self, d: Duration) {
        let micros = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        self.0[Self::bucket(micros)].fetch_add(1, Relaxed);
    }

    pub(crate) fn count(&self) -> u64 {
        self.0.iter().map(|b| b.load(Relaxed)).sum()
    }

    /// Operations that took at least `d` (whole buckets: those whose lower
    /// bound is `d` or more).
    pub(crate) fn at_least(&self, d: Duration) -> u64 {
        let micros = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        self.0
            .iter()
            .enumerate()
            .filter(|&(i, _)| i > 0 && Self::upper(i - 1) >= micros)
            .map(|(_, b)| b.load(Relaxed))
            .sum()
    }

    pub(crate) fn quantile(&self, q: f64) -> Duration {
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

pub(crate) fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.split_whitespace().next()?.parse().ok())
        })
        .unwrap_or(0)
}

/// The lowest resident size sampled (every 250 ms) over the next `span`:
/// what a leak raises, where a passing peak (a burst of buffers, the
/// allocator's timing) does not.
pub(crate) async fn lowest_rss_over(span: std::time::Duration) -> u64 {
    let until = tokio::time::Instant::now() + span;
    let mut lowest = rss_kib();
    while tokio::time::Instant::now() < until {
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
        lowest = lowest.min(rss_kib());
    }
    lowest
}

pub(crate) fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, Iterator::count)
}
