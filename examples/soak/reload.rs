//! Reloads while the load runs, as changed cluster files would apply them,
//! every 2 s in a cycle of four:
//! 1. other backoff settings and another operation timeout (no key moves);
//! 2. a spare server added to the first group, in migration mode from the
//!    layout before (misses read through to it);
//! 3. the spare removed again, migrating from the layout with it;
//! 4. migration ended.
//!
//! Requests in flight finish on the topology they started with, new ones
//! take the new one. Keys the spare takes change their first group's server
//! back and forth while other writers (the second writer, the short-lived
//! ones) keep the first layout: what a rolling configuration change gives
//! and migration mode cannot reconcile (a copy left at a key's old server is
//! no miss). The checks leave those keys out, counted ([`Spare::moves`]);
//! every other check must come out as without reloads.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::Duration;

use memgroup::client::Client;
use memgroup::topology::{ClusterSpec, Topology};
use tokio::task::JoinHandle;

/// The layout with the spare server in the first group.
pub(crate) struct Spare {
    with: Topology,
    name: String,
}

impl Spare {
    /// `base` (EVCache groups) with `spare` added to its first group.
    pub(crate) fn new(base: &str, spare: String) -> Spare {
        let (first, rest) = base.split_once(';').unwrap_or((base, ""));
        let text = format!("{first},{spare};{rest}");
        let spec =
            ClusterSpec::parse_evcache(text.trim_end_matches(';')).expect("the spare layout");
        Spare {
            with: Topology::new(spec).expect("the spare layout"),
            name: spare,
        }
    }

    /// Whether the spare takes `key` in its group.
    pub(crate) fn moves(&self, key: &str) -> bool {
        let server = self.with.groups()[0].server_for(key.as_bytes());
        self.with.servers()[server.0].to_string() == self.name
    }
}

/// What the reloads did.
#[derive(Debug, Default)]
pub(crate) struct Reloads {
    pub(crate) applied: u64,
    /// Reads the old layout answered while migrating, and their backfills.
    pub(crate) old_hits: u64,
    pub(crate) backfills: u64,
}

/// Reloads `client` every 2 s until `stop`, then leaves it on its first
/// layout and timeout, migration ended.
pub(crate) fn start(
    client: Client,
    spare: Arc<Spare>,
    timeout: Duration,
    stop: Arc<AtomicBool>,
) -> JoinHandle<Reloads> {
    tokio::spawn(async move {
        let base = client.topology().spec().clone();
        let mut with = base.clone();
        with.groups[0].servers.push(
            spare.with.spec().groups[0]
                .servers
                .last()
                .expect("the spare")
                .clone(),
        );
        let mut out = Reloads::default();
        let mut applied: u64 = 0;
        while !stop.load(Relaxed) {
            tokio::time::sleep(Duration::from_secs(2)).await;
            let cycle = applied / 4;
            if let Some(migration) = client.health().migration {
                // Each migration's counters, read before the step replaces
                // or ends it.
                out.old_hits += migration.old_hits;
                out.backfills += migration.backfills;
            }
            match applied % 4 {
                0 => {
                    let mut spec = base.clone();
                    spec.settings.backoff_initial =
                        Duration::from_millis(if cycle.is_multiple_of(2) { 150 } else { 100 });
                    client.set_topology(spec).expect("the first layout");
                    let longer = if cycle.is_multiple_of(2) {
                        timeout * 3 / 2
                    } else {
                        timeout
                    };
                    client.set_timeout(longer).expect("a timeout");
                }
                1 => {
                    client.set_migration(Some(base.clone())).expect("migrating");
                    client.set_topology(with.clone()).expect("the spare layout");
                }
                2 => {
                    client
                        .set_migration(Some(with.clone()))
                        .expect("migrating back");
                    client.set_topology(base.clone()).expect("the first layout");
                }
                _ => client.set_migration(None).expect("migration ended"),
            }
            applied += 1;
        }
        if let Some(migration) = client.health().migration {
            out.old_hits += migration.old_hits;
            out.backfills += migration.backfills;
        }
        client.set_migration(None).expect("migration ended");
        client.set_topology(base).expect("the first layout");
        client.set_timeout(timeout).expect("the timeout");
        out.applied = applied;
        out
    })
}
