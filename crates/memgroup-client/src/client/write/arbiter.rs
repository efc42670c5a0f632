//! Conditional writes through one arbiter. `add`, `replace`, `cas`,
//! `append`, `prepend`, `incr` and `decr` sent to every group at once let
//! each group decide for itself, and the copies drift apart with no fault at
//! all: CAS uniques are per server, counters that missed a write disagree,
//! two writers racing `add` from two zones can each win in a different
//! group. Here one group decides — the topology's arbiter, the first
//! read-write group by name unless the cluster names one, so every memgroup
//! client of the cluster agrees (other clients of a mixed fleet do not know
//! it) — and its answer is the answer. The other groups are then brought in
//! line by deleting their copies: concurrent writers' results could reach
//! them out of order (memcached 1.6.18 has no ordered replica write), so a
//! replica holds the arbiter's newest value or nothing, and a reader there
//! falls back to the arbiter's copy. `gets` reads the arbiter's copy only,
//! so its CAS unique is the one `cas` is checked against.
//!
//! A write the arbiter refused by its condition changed nothing there, so
//! no other group is touched. While the arbiter's server is unreachable,
//! conditional writes fail with a typed error ([`ErrorKind::ServerDead`]
//! naming the arbiter) unless the cluster opts into
//! [`Settings::arbiter_failover`](memgroup_topology::Settings::arbiter_failover).
//! One sent to the arbiter and not answered (timed out, cut off) may have
//! been applied there: it fails with [`ErrorKind::OutcomeUnknown`], after
//! the other groups were cleared, and is never sent to a second arbiter,
//! which could grant the same `add` again.

use memgroup_proto::{Key, Request, Response};
use memgroup_topology::{GroupId, Target};

use super::op::WriteOp;
use crate::client::Client;
use crate::client::trace::Attempt;
use crate::error::{Error, ErrorKind};
use crate::item::{GroupState, Item, WriteOutcome};
use crate::pool::Snapshot;

impl Client {
    /// A conditional write: decided by the arbiter, then the other groups'
    /// copies deleted, the write policy judged over all of them. With one
    /// group, that group decides alone.
    pub(super) async fn conditional(
        &self,
        key: &[u8],
        op: WriteOp<'_>,
    ) -> Result<(WriteOutcome, Vec<Option<Response>>), Error> {
        let snap = self.snapshot();
        let topology = &snap.topology;
        if topology.groups().len() == 1 {
            return self.replicate(key, None, op).await;
        }
        let candidates: &[GroupId] = if topology.settings().arbiter_failover {
            topology.arbiters()
        } else {
            &topology.arbiters()[..1]
        };
        let mut unreachable = None;
        for &arbiter in candidates {
            let name = topology.group(arbiter).name();
            let command = op.command();
            let (mut outcome, replies) =
                self.replicate_judged(key, Some(&[name]), op, false).await?;
            let decided = outcome
                .groups
                .first()
                .map(|g| (g.state(), g.result.clone()));
            let unknown = match decided {
                // Refused by its condition: nothing changed at the arbiter,
                // so nothing to bring in line.
                Some((GroupState::Refused, _)) => return Ok((outcome, replies)),
                Some((GroupState::Applied, _)) => None,
                // Known not applied (never sent, or an error reply): the
                // next arbiter, where the cluster allows it, may decide.
                Some((GroupState::Missed, Err(e))) => {
                    unreachable = Some(
                        Error::new(
                            ErrorKind::ServerDead,
                            format!(
                                "the arbiter group {name:?} did not decide the {command}: conditional writes need it"
                            ),
                        )
                        .with_source(e),
                    );
                    continue;
                }
                // Sent and not answered: it may have been applied. Another
                // arbiter could grant it a second time, so none is asked;
                // the other groups are cleared all the same.
                Some((_, Err(e))) => Some(
                    Error::new(
                        ErrorKind::OutcomeUnknown,
                        format!(
                            "the arbiter group {name:?} did not answer the {command}: it may have been applied"
                        ),
                    )
                    .with_source(e),
                ),
                _ => None,
            };
            // The others hold the arbiter's newest value or nothing.
            let others: Vec<&str> = topology
                .groups()
                .iter()
                .filter(|g| g.id() != arbiter)
                .map(memgroup_topology::Group::name)
                .collect();
            let (cleaned, _) = self
                .replicate_after(key, Some(&others), WriteOp::Delete, false, true)
                .await?;
            for mut group in cleaned.groups {
                // Deleted or already absent: in line either way.
                if group.result.is_ok() {
                    group.result = Ok(true);
                }
                group.cleared = true;
                outcome.groups.push(group);
            }
            if let Some(unknown) = unknown {
                return Err(unknown);
            }
            self.judge(&snap, command, &outcome, false)?;
            return Ok((outcome, replies));
        }
        Err(unreachable.expect("at least one arbiter was tried"))
    }

    /// `group`'s server for the wire key `wire`, unless it is dead.
    pub(crate) fn group_target(
        &self,
        snap: &Snapshot,
        wire: &[u8],
        group: GroupId,
    ) -> Option<Target> {
        let dead = self.inner.pool.dead_view();
        snap.topology
            .targeted_write_targets(wire, &[group], &dead, dead.now(), self.rotation(), None)
            .next()
            .and_then(Result::ok)
    }

    /// The arbiter group's server for the wire key `wire`; unreachable, an
    /// error saying `why` it matters.
    pub(crate) fn arbiter_target(
        &self,
        snap: &Snapshot,
        wire: &[u8],
        why: &str,
    ) -> Result<Target, Error> {
        let arbiter = snap.topology.arbiter();
        self.group_target(snap, wire, arbiter).ok_or_else(|| {
            let name = snap.topology.group(arbiter).name();
            Error::new(
                ErrorKind::ServerDead,
                format!("the arbiter group {name:?} is unreachable: {why}"),
            )
        })
    }

    /// `gets` from the arbiter's copy alone (no fallback): its CAS unique is
    /// the one a later `cas` is checked against.
    pub(crate) async fn gets_from_arbiter(&self, key: &[u8]) -> Result<Option<Item>, Error> {
        let snap = self.snapshot();
        let wire = self.wire_key(&snap, key)?;
        let arbiter = snap.topology.arbiter();
        let target =
            self.arbiter_target(&snap, wire.bytes_of(arbiter), "gets reads its copy only")?;
        let keys: [Key<'_>; 1] = [wire.key_of(arbiter)];
        let reply = self
            .exec(
                &snap,
                target,
                &Request::Gets { keys: &keys },
                Attempt::First,
            )
            .await?;
        let item = match reply {
            Some(Response::Values(values)) => values.into_iter().next().map(Item::from),
            other => return Err(crate::client::unexpected(other.as_ref())),
        };
        Ok(match (wire.long_of(arbiter), item) {
            (Some(long), Some(item)) => crate::client::wire::unwrap_item(long, item),
            (_, item) => item,
        })
    }
}
