//! The write policy: when a write's answers decide it, and the verdict
//! over its outcome.

use memgroup_topology::{GroupId, Topology};

use crate::client::Client;
use crate::error::{Error, ErrorKind};
use crate::events::Event;
use crate::item::{GroupOutcome, WriteOutcome};
use crate::pool::Snapshot;

/// Whether a write's policy is decided by the groups `answered`, with `outstanding`
/// groups still to answer: met (and the local zone's read-write groups and
/// the arbiter have answered, so a local `get`, and a `gets`, `cas` or other
/// conditional write decided by the arbiter, see it), or out of reach even
/// if every outstanding group succeeds.
pub(super) fn decided(
    topology: &Topology,
    answered: &[GroupOutcome],
    mut outstanding: impl Iterator<Item = GroupId> + Clone,
) -> bool {
    let succeeded = || answered.iter().filter(|g| g.result.is_ok()).map(|g| g.id);
    if topology.write_succeeded(succeeded()) {
        let (local, arbiter) = (topology.local_groups(), topology.arbiter());
        return !outstanding.any(|g| local.contains(&g) || g == arbiter);
    }
    !topology.write_succeeded(succeeded().chain(outstanding))
}

impl Client {
    /// The write policy over an outcome: every group for a targeted write,
    /// else the cluster's policy; a miss is an event and a typed error.
    pub(super) fn judge(
        &self,
        snap: &Snapshot,
        command: &'static str,
        outcome: &WriteOutcome,
        targeted: bool,
    ) -> Result<(), Error> {
        let succeeded = if targeted {
            // A targeted write succeeds when every targeted group took it.
            outcome.groups.iter().all(|g| g.result.is_ok())
        } else {
            snap.topology.write_succeeded(
                outcome
                    .groups
                    .iter()
                    .filter(|g| g.result.is_ok())
                    .map(|g| g.id),
            )
        };
        if succeeded {
            return Ok(());
        }
        // The groups by name; the first one's error is the source (each
        // group's own error is in its `GroupOutcome`).
        let failed: Vec<&str> = outcome.failed().map(|(g, _)| g).collect();
        // Groups still pending count among those written to.
        let groups = outcome.groups.len() + outcome.pending.len();
        self.inner.pool.events().emit(|| Event::PolicyMissed {
            command,
            failed: failed.iter().map(ToString::to_string).collect(),
            groups,
        });
        // One group (a plain server list): no policy to speak of, the write
        // failed, and its cause says where.
        let message = if groups == 1 && failed.len() == 1 {
            "write failed".to_string()
        } else {
            // Where it landed all the same: those copies are the new value.
            let took: Vec<&str> = outcome
                .groups
                .iter()
                .filter(|g| g.result.is_ok())
                .map(|g| &*g.group)
                .collect();
            let mut message = format!(
                "write missed its policy ({} of {groups} groups failed: {}",
                failed.len(),
                failed.join(", ")
            );
            for (what, names) in [
                ("applied in", took),
                (
                    "not yet answered:",
                    outcome.pending.iter().map(|g| &**g).collect(),
                ),
            ] {
                if !names.is_empty() {
                    message += &format!("; {what} {}", names.join(", "));
                }
            }
            message + ")"
        };
        // No group could be sent it (servers without the meta protocol):
        // that is the error, not a missed policy.
        if outcome.groups.iter().all(|g| {
            g.result
                .as_ref()
                .is_err_and(|e| e.kind() == ErrorKind::Unsupported)
        }) && let Some((_, first)) = outcome.failed().next()
        {
            return Err(first.clone());
        }
        let mut error = Error::new(ErrorKind::WritePolicy, message);
        if let Some((_, first)) = outcome.failed().next() {
            error = error.with_source(first.clone());
        }
        Err(error)
    }
}
