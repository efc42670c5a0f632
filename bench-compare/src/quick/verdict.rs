//! The light-load targets, each as a ratio taken round by round against the
//! reference it names (the best of several clients in that round, where the
//! target says "the fastest peer" or "the lowest peer CPU"), its median
//! held against the bound: one line per target after a quick row's
//! medians, so `COMPARE_QUICK=seq,4,32,multi` gives the verdict for every
//! row in one command. Instructions per call (the `multi` row's gate) are
//! counted under callgrind, outside this harness (PERFORMANCE.md).

/// Which measure of a run a target reads.
#[derive(Clone, Copy)]
enum Measure {
    /// Operations per second (higher is better).
    Ops,
    /// Client CPU per operation (lower is better).
    Cpu,
}

/// One target: `subject`'s measure ÷ the best of `references` in the same
/// round, at least (`Ops`) or at most (`Cpu`) `bound`.
struct Target {
    row: fn(&str) -> bool,
    subject: &'static str,
    references: &'static [&'static str],
    measure: Measure,
    bound: f64,
    what: &'static str,
}

const PEERS_GET: &[&str] = &["memcache-async get", "memcached-rs get"];
const PEERS_SET: &[&str] = &["memcache-async set", "memcached-rs set"];
const PEERS_IN_FLIGHT: &[&str] = &["memcache-async", "memcached-rs"];
const PEERS_MULTI: &[&str] = &["memcache-async get_multi", "async-memcached get_multi"];

fn in_flight(row: &str, n: usize) -> bool {
    row.parse() == Ok(n)
}

const TARGETS: &[Target] = &[
    Target {
        row: |r| r == "seq",
        subject: "memgroup get",
        references: &["tokio floor get"],
        measure: Measure::Cpu,
        bound: 1.10,
        what: "one caller: get CPU ÷ the bare socket's",
    },
    Target {
        row: |r| r == "seq",
        subject: "memgroup set",
        references: &["tokio floor set"],
        measure: Measure::Cpu,
        bound: 1.10,
        what: "one caller: set CPU ÷ the bare socket's",
    },
    Target {
        row: |r| r == "seq",
        subject: "memgroup get",
        references: PEERS_GET,
        measure: Measure::Ops,
        bound: 0.95,
        what: "one caller: gets/s ÷ the fastest peer's",
    },
    Target {
        row: |r| r == "seq",
        subject: "memgroup set",
        references: PEERS_SET,
        measure: Measure::Ops,
        bound: 0.95,
        what: "one caller: sets/s ÷ the fastest peer's",
    },
    Target {
        row: |r| in_flight(r, 4),
        subject: "memgroup pool 4",
        references: &["memcache-async"],
        measure: Measure::Ops,
        bound: 1.0,
        what: "4 callers, pool 4: ops/s ÷ the best tokio peer's (a connection per caller)",
    },
    Target {
        row: |r| in_flight(r, 4),
        subject: "memgroup pool 4",
        references: &["memcache-async"],
        measure: Measure::Cpu,
        bound: 1.0,
        what: "4 callers, pool 4: CPU per get ÷ the best tokio peer's",
    },
    Target {
        row: |r| in_flight(r, 4),
        subject: "memgroup",
        references: &["one-socket floor"],
        measure: Measure::Ops,
        bound: 1.0,
        what: "4 callers, one connection: ops/s ÷ the one-socket floor's",
    },
    Target {
        row: |r| in_flight(r, 32),
        subject: "memgroup",
        references: &["one-socket floor, merged"],
        measure: Measure::Ops,
        bound: 0.9,
        what: "32 callers: ops/s ÷ the merged one-socket floor's",
    },
    Target {
        row: |r| in_flight(r, 32),
        subject: "memgroup",
        references: PEERS_IN_FLIGHT,
        measure: Measure::Cpu,
        bound: 0.45,
        what: "32 callers: CPU per op ÷ the lowest peer's",
    },
    Target {
        row: |r| r == "multi",
        subject: "memgroup get_multi 100",
        references: PEERS_MULTI,
        measure: Measure::Ops,
        bound: 1.15,
        what: "get of 100 keys: calls/s ÷ the fastest peer's (reported)",
    },
    Target {
        row: |r| r == "multi",
        subject: "memgroup get_multi 100",
        references: PEERS_MULTI,
        measure: Measure::Cpu,
        bound: 0.8,
        what: "get of 100 keys: CPU per call ÷ the lowest peer's (reported)",
    },
];

/// The ratio of `subject` to the best reference, round by round; `None`
/// when the subject or every reference is missing (not run).
fn ratios(results: &[(&str, Vec<(f64, f64)>)], target: &Target) -> Option<Vec<f64>> {
    let runs = |name: &str| super::runs_of(results, name);
    let subject = runs(target.subject)?;
    let references: Vec<&Vec<(f64, f64)>> =
        target.references.iter().filter_map(|r| runs(r)).collect();
    if references.is_empty() {
        return None;
    }
    let pick = |run: &(f64, f64)| match target.measure {
        Measure::Ops => run.0,
        Measure::Cpu => run.1,
    };
    let mut out = Vec::with_capacity(subject.len());
    for (round, run) in subject.iter().enumerate() {
        let values = references.iter().filter_map(|r| r.get(round)).map(pick);
        let best = match target.measure {
            Measure::Ops => values.fold(f64::NAN, f64::max),
            Measure::Cpu => values.fold(f64::NAN, f64::min),
        };
        if best.is_finite() && best > 0.0 {
            out.push(pick(run) / best);
        }
    }
    out.sort_by(f64::total_cmp);
    (!out.is_empty()).then_some(out)
}

/// Prints row `row`'s targets: the median ratio with its quartiles, the
/// bound, and whether the median meets it.
pub(crate) fn print(row: &str, results: &[(&str, Vec<(f64, f64)>)]) {
    let mut header = false;
    for target in TARGETS.iter().filter(|t| (t.row)(row)) {
        let Some(r) = ratios(results, target) else {
            continue;
        };
        if !header {
            println!("targets (median of the per-round ratios [quartiles]):");
            header = true;
        }
        let q = |f: f64| super::quantile(&r, f);
        let median = q(0.5);
        let (met, sign) = match target.measure {
            Measure::Ops => (median >= target.bound, "≥"),
            Measure::Cpu => (median <= target.bound, "≤"),
        };
        println!(
            "  {:<74} {median:.3} [{:.3}–{:.3}]  target {sign} {:.2}  {}",
            target.what,
            q(0.25),
            q(0.75),
            target.bound,
            if met { "met" } else { "MISSED" }
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reference_is_the_best_peer_of_each_round() {
        let results = vec![
            ("memgroup get", vec![(100.0, 10.0), (90.0, 10.0)]),
            ("memcache-async get", vec![(50.0, 8.0), (100.0, 9.0)]),
            ("memcached-rs get", vec![(80.0, 20.0), (60.0, 5.0)]),
        ];
        let ops = &TARGETS[2];
        assert_eq!(ratios(&results, ops).unwrap(), vec![0.9, 1.25]);
        let cpu = Target {
            references: PEERS_GET,
            ..TARGETS[0]
        };
        assert_eq!(ratios(&results, &cpu).unwrap(), vec![1.25, 2.0]);
        let missing = Target {
            subject: "memgroup set",
            ..TARGETS[2]
        };
        assert!(ratios(&results, &missing).is_none());
    }
}
