//! What a write's part that missed its key's own server owes: a repair
//! there ([`crate::client::repair`]), held until the write is known to have
//! landed somewhere (`Landing` in `op.rs`); a part still outstanding when
//! the client closes owes one too.

use std::sync::Arc;

use memgroup_topology::{Skipped, Target};

use super::op::{Job, Landed};
use super::replicate::{Part, group_of};
use crate::client::Client;
use crate::client::repair::{Held, Tracking};
use crate::error::{Error, ErrorKind};
use crate::join::Unordered;
use crate::pool::Snapshot;

impl Client {
    /// The groups of `job` whose parts in `running` are still outstanding
    /// owe a repair on the key's own server, as a write that may still land.
    pub(super) fn owe_outstanding(
        &self,
        snap: &Snapshot,
        job: &Job,
        running: &Unordered<Result<Target, Skipped>, Part>,
    ) {
        if !job.op().repairs_on_miss() {
            return;
        }
        for (server, group) in job.landing.landed() {
            self.unhold_repair(&server, job.key_of(group), job.number, true);
        }
        let cut_off = Error::new(ErrorKind::Timeout, "outstanding when the client closed").handed();
        for at in running.pending() {
            let group = group_of(&running.tag(at));
            let key = job.key_of(group);
            let own = snap.topology.group(group).server_for(key);
            let name = snap.topology.group(group).name();
            self.queue_repair(snap.name(own), name, key, job.number, Some(&cut_off), None);
        }
    }

    /// Queues a repair when `part` did not reach the key's own server of its
    /// group (it failed, or went to a failover replacement) — unless a later
    /// write was applied there while it ran; an applied part supersedes the
    /// older repairs of the key there.
    pub(super) fn repair_if_missed(&self, snap: &Arc<Snapshot>, job: &Arc<Job>, part: &mut Part) {
        // Reached the key's own server, with the CAS its copy got when the
        // reply says (read once: the check and the repair queue both use it).
        let reached = (part.server == part.own)
            .then(|| part.reply.as_ref().ok().map(super::converge::receipt_of))
            .flatten();
        self.converge_part(snap, job, part.group, reached.flatten());
        let Some(tracking) = part.tracking.as_mut() else {
            return;
        };
        let group = snap.topology.group(part.group).name();
        let key = job.key_of(part.group);
        let write = (key, job.number, job.op().supersedes_repair());
        let error = part.reply.as_ref().err();
        let owed = self.settle_part(snap.name(part.own), write, reached, error, tracking);
        // A reply from any server (its own or a failover), or a request
        // that may yet be applied: the write exists somewhere.
        let landed = error.is_none_or(Error::may_have_applied);
        let number = job.number;
        if let Some(keep) = owed {
            let server = snap.name(part.own);
            if !landed && job.landing.holds() {
                let held = Held {
                    write: number,
                    group: group.into(),
                    keep,
                };
                self.inner.repairs.hold(server, key, held);
                job.landing.held(server.clone(), part.group);
            } else {
                self.queue_repair(server, group, key, number, error, keep);
            }
        }
        let (servers, landed) = match job.landing.part_ended(landed) {
            Landed::Open => return,
            Landed::Somewhere(servers) => (servers, true),
            Landed::Nowhere(servers) => (servers, false),
        };
        for (server, group) in servers {
            self.unhold_repair(&server, job.key_of(group), number, landed);
        }
    }

    /// One group's part of write `(key, number, supersedes)` ended, on the
    /// key's own server `own` (`reached`, with the CAS it stored when the reply
    /// carried it) or not (`error`, or a failover server). Returns the
    /// repair a miss owes (`Some(keep)`, the later write's copy to keep),
    /// none when a later write was applied there meanwhile and this one
    /// cannot land after it; an applied write that leaves the newest value
    /// supersedes older repairs there.
    pub(super) fn settle_part(
        &self,
        own: &str,
        (key, number, supersedes): (&[u8], u64, bool),
        reached: Option<Option<u64>>,
        error: Option<&Error>,
        tracking: &mut Tracking,
    ) -> Option<Option<(u64, u64)>> {
        let applied = reached
            .filter(|_| supersedes)
            .map(|receipt| (number, receipt));
        let (newest, newest_cas) = tracking.finish(applied);
        if let Some(receipt) = reached {
            if applied.is_some() {
                self.write_applied(own, key, number, receipt);
            }
            return None;
        }
        let may_land = error.is_some_and(Error::may_have_applied);
        if newest > number && !may_land {
            // A later write of the key was applied there meanwhile, and
            // this one cannot land after it.
            return None;
        }
        // A later write applied there meanwhile: its copy stays.
        Some(
            (newest > number)
                .then_some(newest_cas.map(|cas| (newest, cas)))
                .flatten(),
        )
    }
}
