//! Reloads while the load runs: every 2 s the client's topology is replaced
//! by an equal one with other backoff settings, as a changed cluster file
//! would replace it (no key moves: the checks need no exceptions).
//! Requests in flight finish on the topology they started with, new ones
//! take the new one; every check must come out as without reloads.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::Duration;

use memgroup::client::Client;
use tokio::task::JoinHandle;

/// Reloads `client`'s topology every 2 s until `stop`; how many it applied.
pub(crate) fn start(client: Client, stop: Arc<AtomicBool>) -> JoinHandle<u64> {
    tokio::spawn(async move {
        let mut applied: u64 = 0;
        while !stop.load(Relaxed) {
            tokio::time::sleep(Duration::from_secs(2)).await;
            let mut spec = client.topology().spec().clone();
            spec.settings.backoff_initial = if applied.is_multiple_of(2) {
                Duration::from_millis(150)
            } else {
                Duration::from_millis(100)
            };
            client.set_topology(spec).expect("an equal topology");
            applied += 1;
        }
        applied
    })
}
