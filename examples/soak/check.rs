//! The soak's verdicts, read from every group's copy on the servers: lost
//! acknowledged writes, and — once the faults stopped and the repair queue
//! drained — whether the groups converged.

use std::time::Instant;

use memgroup::client::Client;
use memgroup::topology::Topology;

use crate::load::{Acked, Counts, counter_key, key, parse};
use crate::reload::Spare;
use crate::{COUNTERS, KEYS_PER_TASK, TASKS};

/// What the verdicts are judged by.
pub(crate) struct Judged<'a> {
    /// The layout the load started with (and ended with).
    pub(crate) topology: &'a Topology,
    /// When each server was last killed.
    pub(crate) killed_at: &'a [Option<Instant>],
    /// The keys the reloads moved to the spare and back: not judged.
    pub(crate) spare: &'a Spare,
}

/// Acknowledged writes checked, excused and lost.
#[derive(Debug, Default)]
pub(crate) struct Losses {
    pub(crate) checked: u64,
    /// Keys the reloads moved (left out).
    pub(crate) moved: u64,
    /// Every group's server for the key was killed since the write, and
    /// no group holds anything newer.
    pub(crate) excused: u64,
    pub(crate) lost: u64,
    /// Keys the second writer writes too whose acknowledged write ended
    /// with nothing newer anywhere: a race the promise allows, counted.
    pub(crate) raced_to_nothing: u64,
    pub(crate) examples: Vec<String>,
}

/// Every key whose last write (a set or a delete) was acknowledged under
/// the ALL policy reads back that value or a newer one from some group (a
/// newer copy anywhere, even in a group whose server was restarted since,
/// means the write was superseded, not lost: the second writer's versions
/// are all newer; after a later write that failed, nothing in a group whose
/// server was not killed since, which that write's repair may have
/// deleted), and for a delete nothing or a newer value in a group whose
/// server for the key was not killed since. A key whose every group
/// lost its server since the acknowledgement, with nothing newer left, is
/// excused; one the second writer writes too is counted apart (a race may
/// leave nothing), the others are lost.
pub(crate) async fn losses(
    verifiers: &[Client],
    judged: &Judged<'_>,
    acked: &[(String, Acked)],
) -> Losses {
    let (topology, killed_at) = (judged.topology, judged.killed_at);
    let mut out = Losses::default();
    for (k, ack) in acked {
        if judged.spare.moves(k) {
            out.moved += 1;
            continue;
        }
        let (version, at) = ack.version_at();
        let mut held = false;
        let mut survivors = 0;
        // What each group held, for the example of a loss.
        let mut seen = Vec::new();
        for (g, verifier) in verifiers.iter().enumerate() {
            let server = topology.groups()[g].server_for(k.as_bytes()).0;
            let killed = killed_at[server].is_some_and(|kill| kill >= at);
            survivors += u32::from(!killed);
            let found = verifier.get(k).await;
            let got = match &found {
                Ok(Some(item)) => parse(&item.value).map(|(_, got)| got),
                _ => None,
            };
            seen.push(
                match (&found, got) {
                    (Err(_), _) => format!("g{g} unreadable"),
                    (Ok(None), _) => format!("g{g} none"),
                    (Ok(Some(_)), None) => format!("g{g} unparsable"),
                    (Ok(Some(_)), Some(got)) => format!("g{g} v{got}"),
                } + if killed { " (restarted since)" } else { "" },
            );
            held |= match (ack, &found) {
                (_, Err(_)) => false,
                (Acked::Set { .. }, Ok(Some(_))) => got.is_some_and(|got| got >= version),
                (Acked::Set { maybe_deleted, .. }, Ok(None)) => *maybe_deleted && !killed,
                (Acked::Deleted { .. }, Ok(Some(_))) => got.is_some_and(|got| got > version),
                (Acked::Deleted { .. }, Ok(None)) => !killed,
            };
        }
        if held {
            out.checked += 1;
            continue;
        }
        if survivors == 0 {
            out.excused += 1;
            continue;
        }
        out.checked += 1;
        let i = k.rsplit(':').next().and_then(|i| i.parse().ok());
        if i.is_some_and(crate::writers::shared) {
            out.raced_to_nothing += 1;
            continue;
        }
        out.lost += 1;
        if out.examples.len() < 5 {
            out.examples
                .push(format!("{k}: {ack:?}; groups hold: {}", seen.join(", ")));
        }
    }
    out
}

/// How far the groups are from agreeing, after the heal.
#[derive(Debug, Default)]
pub(crate) struct Convergence {
    /// Keys read in every group (values and counters).
    pub(crate) keys: u64,
    /// Keys the reloads moved (left out).
    pub(crate) moved: u64,
    /// Copies (key, group) older than the key's last acknowledged write —
    /// for a counter, lower than another group's copy.
    pub(crate) stale: u64,
    /// Keys two groups hold different values of (absence allowed).
    pub(crate) divergent: u64,
    /// Copies no group answered for.
    pub(crate) unread: u64,
    /// Counters whose arbiter's copy is below the highest value an `incr`
    /// sent since its server last restarted returned.
    pub(crate) counters_behind: u64,
    pub(crate) counters_checked: u64,
    pub(crate) examples: Vec<String>,
}

impl Convergence {
    fn example(&mut self, what: String) {
        if self.examples.len() < 5 {
            self.examples.push(what);
        }
    }
}

/// Reads every key's copy in every group: for every key, no group holds a
/// version older than the key's last acknowledged write, and no two groups
/// hold different versions.
pub(crate) async fn convergence(
    verifiers: &[Client],
    judged: &Judged<'_>,
    acked: &[(String, Acked)],
    counts: &Counts,
) -> Convergence {
    let (topology, killed_at) = (judged.topology, judged.killed_at);
    let last: std::collections::HashMap<&str, &Acked> =
        acked.iter().map(|(k, a)| (k.as_str(), a)).collect();
    let mut out = Convergence::default();
    for t in 0..TASKS {
        for i in 0..KEYS_PER_TASK {
            let k = key(t, i);
            if judged.spare.moves(&k) {
                out.moved += 1;
                continue;
            }
            let mut versions = Vec::new();
            for verifier in verifiers {
                match verifier.get(&k).await {
                    Ok(Some(item)) => versions.push(parse(&item.value).map_or(0, |(_, v)| v)),
                    Ok(None) => {}
                    Err(_) => out.unread += 1,
                }
            }
            out.keys += 1;
            if let Some(ack) = last.get(k.as_str()) {
                for &v in &versions {
                    let stale = match ack {
                        Acked::Set { version, .. } => v < *version,
                        Acked::Deleted { version, .. } => v <= *version,
                    };
                    if stale {
                        out.stale += 1;
                        out.example(format!("{k}: a copy of version {v} after {ack:?}"));
                    }
                }
            }
            if versions.windows(2).any(|w| w[0] != w[1]) {
                out.divergent += 1;
                out.example(format!(
                    "{k}: versions {versions:?} (groups in order, absent left out)"
                ));
            }
        }
    }
    let arbiter = topology.arbiter().0;
    for j in 0..COUNTERS {
        let k = counter_key(j);
        if judged.spare.moves(&k) {
            out.moved += 1;
            continue;
        }
        let mut copies: Vec<(usize, u64)> = Vec::new();
        for (g, verifier) in verifiers.iter().enumerate() {
            match verifier.get(&k).await {
                Ok(Some(item)) => {
                    let n = std::str::from_utf8(&item.value)
                        .ok()
                        .and_then(|s| s.trim().parse().ok())
                        .unwrap_or(0);
                    copies.push((g, n));
                }
                Ok(None) => {}
                Err(_) => out.unread += 1,
            }
        }
        out.keys += 1;
        let high = copies.iter().map(|&(_, n)| n).max().unwrap_or(0);
        for &(g, n) in &copies {
            if n < high {
                out.stale += 1;
                out.example(format!("{k}: group {g} holds {n}, another {high}"));
            }
        }
        if copies.windows(2).any(|w| w[0].1 != w[1].1) {
            out.divergent += 1;
        }
        // What the arbiter's server acknowledged since it last restarted
        // (empty): the incrs that started after that.
        let server = topology.groups()[arbiter].server_for(k.as_bytes()).0;
        let counted = counts.counted[j]
            .lock()
            .iter()
            .filter(|&&(started, _)| killed_at[server].is_none_or(|k| started > k))
            .map(|&(_, n)| n)
            .max();
        if let Some(counted) = counted {
            out.counters_checked += 1;
            let at_arbiter = copies
                .iter()
                .find(|&&(g, _)| g == arbiter)
                .map_or(0, |&(_, n)| n);
            if at_arbiter < counted {
                out.counters_behind += 1;
                out.example(format!(
                    "{k}: arbiter holds {at_arbiter}, an incr returned {counted}"
                ));
            }
        }
    }
    out
}

/// The short-lived writers' keys after the heal and the journal's
/// repairs: every group's copy of a key the last writer acknowledged is
/// its version or absent; an older one is stale (a repair it journaled
/// was not done). Returns (keys checked, stale copies, divergent keys).
pub(crate) async fn short_keys(
    verifiers: &[Client],
    runs: &crate::writers::ShortRuns,
    examples: &mut Vec<String>,
) -> (u64, u64, u64) {
    let (mut stale, mut divergent) = (0, 0);
    for &i in &runs.last_acked {
        let k = crate::writers::short_key(i);
        let mut versions = Vec::new();
        for verifier in verifiers {
            if let Ok(Some(item)) = verifier.get(&k).await {
                versions.push(parse(&item.value).map_or(0, |(_, v)| v));
            }
        }
        for &v in &versions {
            if v < runs.last_version {
                stale += 1;
                if examples.len() < 5 {
                    examples.push(format!(
                        "{k}: a copy of version {v} after run {}",
                        runs.last_version
                    ));
                }
            }
        }
        if versions.windows(2).any(|w| w[0] != w[1]) {
            divergent += 1;
        }
    }
    (runs.last_acked.len() as u64, stale, divergent)
}
