//! The proxy's latency per command over a recent window, answered to
//! `stats latency`: from a request's start to its reply being ready (the
//! time spent in the client: routing, the servers, fallback, the write
//! policy), for the commands that go through the client.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use bytes::{BufMut, BytesMut};
use memgroup_client::Histogram;
use memgroup_proto::server::{ClientRequest, MetaKind};

/// The commands timed, as `stats latency` names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Command {
    /// `get`, `gets`, `gat`, `gats`, `mg`.
    Get,
    /// `set`, `add`, `replace`, `append`, `prepend`, `cas`, `ms`.
    Set,
    /// `delete`, `md`.
    Delete,
    /// `touch`.
    Touch,
    /// `incr`, `decr`, `ma`.
    Arith,
    /// `flush_all`, `cache_memlimit`, `me`.
    Other,
}

const COMMANDS: [(Command, &str); 6] = [
    (Command::Get, "get"),
    (Command::Set, "set"),
    (Command::Delete, "delete"),
    (Command::Touch, "touch"),
    (Command::Arith, "arith"),
    (Command::Other, "other"),
];

impl Command {
    /// What `request` is timed as.
    pub(crate) fn of(request: &ClientRequest) -> Command {
        match request {
            ClientRequest::Retrieve { .. } => Command::Get,
            ClientRequest::Store { .. } => Command::Set,
            ClientRequest::Delete { .. } => Command::Delete,
            ClientRequest::Touch { .. } => Command::Touch,
            ClientRequest::Arith { .. } => Command::Arith,
            ClientRequest::Meta(meta) => match meta.kind {
                MetaKind::Get => Command::Get,
                MetaKind::Set => Command::Set,
                MetaKind::Delete => Command::Delete,
                MetaKind::Arith => Command::Arith,
                _ => Command::Other,
            },
            _ => Command::Other,
        }
    }
}

/// How long each half of the window lasts: the percentiles cover the last
/// one to two of them.
pub(crate) const HALF: Duration = Duration::from_secs(30);

/// Two histograms per command, alternating: the current half of the window
/// records, the previous one is still read; a half that comes round again
/// is cleared first.
#[derive(Debug)]
pub(crate) struct Latencies {
    started: Instant,
    /// The half being recorded, counted from `started`.
    half: AtomicU64,
    halves: [[Histogram; 2]; COMMANDS.len()],
}

impl Default for Latencies {
    fn default() -> Self {
        Latencies {
            started: Instant::now(),
            half: AtomicU64::new(0),
            halves: Default::default(),
        }
    }
}

impl Latencies {
    /// The half the window is in at `now`, clearing a histogram whose turn
    /// came round again.
    fn turn(&self, now: Instant) -> usize {
        let half = now.saturating_duration_since(self.started).as_secs() / HALF.as_secs();
        let last = self.half.load(Relaxed);
        // One thread clears (the one that moves the half on); the others
        // only read the atomic, which stays shared in their caches.
        if last != half
            && self
                .half
                .compare_exchange(last, half, Relaxed, Relaxed)
                .is_ok()
        {
            let this = (half % 2) as usize;
            for histograms in &self.halves {
                histograms[this].clear();
                // A half with no requests at all leaves the older one stale.
                if half > last + 1 {
                    histograms[1 - this].clear();
                }
            }
        }
        (half % 2) as usize
    }

    /// Counts one request of `command` that took `took`.
    pub(crate) fn record(&self, command: Command, took: Duration) {
        self.record_at(command, took, Instant::now());
    }

    fn record_at(&self, command: Command, took: Duration, now: Instant) {
        let half = self.turn(now);
        self.halves[command as usize][half].record(took);
    }

    /// How many requests of `command` the window holds at `now`.
    #[cfg(test)]
    fn count_at(&self, command: Command, now: Instant) -> u64 {
        self.turn(now);
        let [a, b] = &self.halves[command as usize];
        Histogram::merged(&[a, b], &[]).0
    }

    /// `stats latency`: per command, the requests in the window and their
    /// p50, p99 and p99.9 in microseconds (`STAT get:p99_us 412`); a command
    /// with none in the window has only its count.
    pub(crate) fn encode(&self, out: &mut BytesMut) {
        self.turn(Instant::now());
        let window = (Instant::now().saturating_duration_since(self.started)).min(HALF * 2);
        out.put_slice(format!("STAT window_seconds {}\r\n", window.as_secs()).as_bytes());
        for (command, name) in COMMANDS {
            let [a, b] = &self.halves[command as usize];
            let (count, quantiles) = Histogram::merged(&[a, b], &[0.5, 0.99, 0.999]);
            out.put_slice(format!("STAT {name}:count {count}\r\n").as_bytes());
            for (label, q) in ["p50", "p99", "p999"].iter().zip(quantiles) {
                if let Some(q) = q {
                    let micros = q.as_micros();
                    out.put_slice(format!("STAT {name}:{label}_us {micros}\r\n").as_bytes());
                }
            }
        }
        out.put_slice(b"END\r\n");
    }

    /// `stats reset`.
    pub(crate) fn reset(&self) {
        for histograms in &self.halves {
            for histogram in histograms {
                histogram.clear();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_keeps_two_halves_and_forgets_older_ones() {
        let latencies = Latencies::default();
        let t0 = latencies.started;
        let ms = Duration::from_millis(1);
        latencies.record_at(Command::Get, ms, t0);
        latencies.record_at(Command::Get, ms, t0 + HALF);
        assert_eq!(latencies.count_at(Command::Get, t0 + HALF), 2);
        // The third half reuses the first's histogram: cleared.
        latencies.record_at(Command::Get, ms, t0 + HALF * 2);
        assert_eq!(latencies.count_at(Command::Get, t0 + HALF * 2), 2);
        assert_eq!(latencies.count_at(Command::Set, t0 + HALF * 2), 0);
        // Two idle halves later nothing is left.
        assert_eq!(latencies.count_at(Command::Get, t0 + HALF * 5), 0);
    }
}
