//! The parts of a write still running once the caller has its answer (the
//! policy decided) or gave up: handed to a task of their own, so that every
//! group that misses still queues its repair.

use std::sync::Arc;

use memgroup_topology::{Skipped, Target};

use super::op::Job;
use super::replicate::Part;
use crate::client::Client;
use crate::item::Settling;
use crate::join::Unordered;
use crate::pool::Snapshot;

/// The parts of a write still running. Dropped — at the policy's decision,
/// or with the caller's future — it hands them to a task of their own, so a
/// group that misses still queues its repair. (It borrows the client, the
/// snapshot and the job: only that task needs them owned.)
pub(super) struct Rest<'a> {
    pub(super) running: Unordered<Result<Target, Skipped>, Part>,
    pub(super) client: &'a Client,
    pub(super) snap: &'a Arc<Snapshot>,
    pub(super) job: &'a Arc<Job>,
    /// Where the caller's outcome waits for them
    /// ([`WriteOutcome::settled`](crate::item::WriteOutcome::settled)).
    pub(super) settling: Option<Arc<Settling>>,
}

impl Drop for Rest<'_> {
    fn drop(&mut self) {
        if self.running.len() == 0 {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let mut running = std::mem::replace(&mut self.running, Unordered::with_capacity(0));
        let (client, snap, job) = (self.client.clone(), self.snap.clone(), self.job.clone());
        let settling = self.settling.take();
        let background = client.inner.background();
        let mut closing = client.inner.closing.subscribe();
        runtime.spawn(async move {
            // However the task ends, the caller's settled outcome does not
            // wait for groups nobody will report.
            let _abandon = settling.clone().map(Abandon);
            loop {
                tokio::select! {
                    part = running.next() => {
                        let Some(mut part) = part else { break };
                        client.repair_if_missed(&snap, &job, &mut part);
                        if let Some(settling) = &settling {
                            settling.answered(part.outcome(&snap));
                        }
                    }
                    // A close past its deadline: each group still
                    // outstanding owes a repair (its write may still land),
                    // which the close journals.
                    Ok(_) = closing.wait_for(|c| *c) => {
                        client.owe_outstanding(&snap, &job, &running);
                        break;
                    }
                }
            }
            drop(background);
        });
    }
}

/// Ends a settling outcome's wait when dropped.
struct Abandon(Arc<Settling>);

impl Drop for Abandon {
    fn drop(&mut self) {
        self.0.abandoned();
    }
}
