//! The replication engine: a write built into one request per targeted
//! group (one slot each, whatever the pool size), sent concurrently, and
//! judged by the write policy on group ids.

use std::sync::Arc;

use memgroup_proto::{MetaFlag, MetaStatus, Response, SetMode, StoreCommand};
use memgroup_topology::{GroupId, ServerId, Skipped, Target};

use super::op::{Job, WriteOp};
use super::policy::decided;
use super::rest::Rest;
use crate::client::repair::Tracking;
use crate::client::trace::{self, Attempt};
use crate::client::{Client, unexpected};
use crate::error::{Error, ErrorKind};
use crate::item::{GroupOutcome, Settling, WriteOutcome};
use crate::join::{BoxFuture, Unordered};
use crate::longkey::LongKey;
use crate::options::WriteWait;
use crate::pool::Snapshot;

/// Writes finishing in the background at most; beyond, writes wait for
/// every group.
const MAX_BACKGROUND: usize = 4096;

/// One group's answer to a write.
pub(super) struct Part {
    pub(super) group: GroupId,
    /// The server written to (or, when the group was passed over, the key's own).
    pub(super) server: ServerId,
    /// The key's own server in the group.
    pub(super) own: ServerId,
    pub(super) reply: Result<Option<Response>, Error>,
    /// What the reply means for the group, as the outcome reports it and
    /// the policy judges it: applied, refused by its condition, or failed.
    pub(super) result: Result<bool, Error>,
    /// Its registration as a write in flight, with repairs on.
    pub(super) tracking: Option<Tracking>,
}

impl Part {
    /// The group's outcome, as the caller's [`WriteOutcome`] lists it.
    pub(super) fn outcome(&self, snap: &Snapshot) -> GroupOutcome {
        GroupOutcome {
            id: self.group,
            group: snap.group_name(self.group).clone(),
            server: Some(snap.name(self.server).clone()),
            result: self.result.clone(),
            cleared: false,
            reply: self.reply.as_ref().ok().cloned().flatten(),
        }
    }
}

/// The group a write's target is in (passed over or not).
pub(super) fn group_of(target: &Result<Target, Skipped>) -> GroupId {
    match target {
        Ok(t) => t.group,
        Err(skip) => skip.group,
    }
}

/// Whether a write reply means "applied" (`true`) or "refused by its
/// condition" (`false`).
fn applied(reply: &Response) -> Result<bool, Error> {
    match reply {
        Response::Stored
        | Response::Deleted
        | Response::Touched
        | Response::Ok
        | Response::Number(_) => Ok(true),
        Response::NotStored | Response::NotFound | Response::Exists => Ok(false),
        Response::Meta(m) => Ok(matches!(m.status, MetaStatus::Hd | MetaStatus::Va)),
        other => Err(unexpected(Some(other))),
    }
}

impl Client {
    /// Writes one request to exactly one slot of every group (of the groups
    /// in `only`, for targeted writes), concurrently, and applies the write
    /// policy. Returns the outcome and, for a conditional write (whose reply
    /// is its result), each reply aligned with its groups; for any other,
    /// no replies.
    pub(super) async fn replicate(
        &self,
        key: &[u8],
        only: Option<&[&str]>,
        op: WriteOp<'_>,
    ) -> Result<(WriteOutcome, Vec<Option<Response>>), Error> {
        self.replicate_judged(key, only, op, true).await
    }

    /// [`Client::replicate`], judging the write policy only when `judge`:
    /// otherwise every group's result is in the outcome, for the caller to
    /// judge (the arbiter's conditional writes).
    pub(super) async fn replicate_judged(
        &self,
        key: &[u8],
        only: Option<&[&str]>,
        op: WriteOp<'_>,
        judge: bool,
    ) -> Result<(WriteOutcome, Vec<Option<Response>>), Error> {
        self.replicate_after(key, only, op, judge, false).await
    }

    /// [`Client::replicate_judged`]; `landed`: the write this one completes
    /// landed (or may have): the other groups' clear after the arbiter
    /// decided. Its misses then owe their repairs whatever becomes of it —
    /// a clear that reached no group (nothing could be sent) leaves the
    /// older copies there, where a plain delete that reached no group
    /// changed nothing anywhere.
    pub(super) async fn replicate_after(
        &self,
        key: &[u8],
        only: Option<&[&str]>,
        op: WriteOp<'_>,
        judge: bool,
        landed: bool,
    ) -> Result<(WriteOutcome, Vec<Option<Response>>), Error> {
        let snap = self.snapshot();
        let wire = self.wire_key(&snap, key)?;
        let only: Option<Vec<GroupId>> = only
            .map(|names| names.iter().map(|name| snap.group_id(name)).collect())
            .transpose()?;
        // Only the groups written: a conditional write's arbiter part does
        // not depend on what another group's scheme allows.
        let written = |g: &GroupId| only.as_ref().is_none_or(|only| only.contains(g));
        let cluster_written = wire.uniform()
            || (snap.topology.groups().iter())
                .any(|g| written(&g.id()) && wire.follows_cluster(g.id()));
        let mut job = match &wire.long {
            // (Not sent when no group written follows the cluster's scheme.)
            Some(long) if cluster_written => {
                self.wrapped(Some(long), op, |op| Job::new(&wire.bytes, op))?
            }
            _ => Job::new(&wire.bytes, op),
        };
        for (group, bytes, long) in wire.others().filter(|(g, _, _)| written(g)) {
            self.wrapped(long, op, |op| job.in_group(group, bytes, op))?;
        }
        // With several groups, a plain store keeps each group's CAS receipt
        // for the convergence check (`converge.rs`).
        let groups = snap.topology.groups().len();
        if self.inner.converge && judge && only.is_none() && groups > 1 && job.can_take_receipts() {
            job = job.with_receipts(groups);
        }
        // Numbered as it starts: nothing awaits between here and its parts'
        // registration.
        if landed {
            job.landing.landed();
        }
        let (number, writing) = self.inner.repairs.start_write(&wire.bytes);
        (job.number, job.digest) = (number, writing.digest());
        job.writing = Some(writing);
        if let Some(near) = &self.inner.near {
            near.forget(&wire.bytes);
        }
        let name = job.command();
        let span = trace::operation_span(self, name, Some(key));
        let result = trace::await_in_span!(
            span,
            self.replicate_request(&snap, Arc::new(job), only.as_deref(), judge)
        );
        trace::operation_done(&span, &result);
        result
    }

    /// `op` as it goes to a group that stores the key in `long`'s envelope
    /// (`None`: as given), handed to `then`: a store's value wrapped (its
    /// client flags and TTL inside), what needs no value as it is; refused
    /// for what cannot apply to a value in an envelope (`append`, …).
    fn wrapped<R>(
        &self,
        long: Option<&LongKey>,
        op: WriteOp<'_>,
        then: impl FnOnce(WriteOp<'_>) -> R,
    ) -> Result<R, Error> {
        Ok(match (long, op) {
            (None, op) => then(op),
            (
                Some(long),
                WriteOp::Store {
                    command:
                        command @ (StoreCommand::Set
                        | StoreCommand::Add
                        | StoreCommand::Replace
                        | StoreCommand::Cas(_)),
                    data,
                    flags,
                    exptime,
                },
            ) => {
                let (envelope, flags) = self.enveloped(long, data, flags, exptime)?;
                let op = WriteOp::Store {
                    command,
                    data: &envelope,
                    flags,
                    exptime,
                };
                then(op)
            }
            // A meta set (not append or prepend, not a binary key): its
            // client flags (F) and TTL (T) go inside the envelope, the
            // envelope's flags on the item.
            (Some(long), WriteOp::MetaSet { data, flags })
                if !flags.iter().any(|f| {
                    matches!(
                        f,
                        MetaFlag::Base64Key | MetaFlag::SetMode(SetMode::Append | SetMode::Prepend)
                    )
                }) =>
            {
                let given = |pick: fn(&MetaFlag) -> Option<u32>| flags.iter().find_map(pick);
                let client_flags = given(|f| match f {
                    MetaFlag::SetFlags(v) => Some(*v),
                    _ => None,
                });
                let ttl = given(|f| match f {
                    MetaFlag::Ttl(t) => Some(*t),
                    _ => None,
                });
                let (envelope, outer) =
                    self.enveloped(long, data, client_flags.unwrap_or(0), ttl.unwrap_or(0))?;
                let mut flags: Vec<MetaFlag> = flags
                    .iter()
                    .filter(|f| !matches!(f, MetaFlag::SetFlags(_)))
                    .cloned()
                    .collect();
                flags.push(MetaFlag::SetFlags(outer));
                let op = WriteOp::MetaSet {
                    data: &envelope,
                    flags: &flags,
                };
                then(op)
            }
            (
                Some(_),
                op @ (WriteOp::Delete { .. } | WriteOp::Touch { .. } | WriteOp::MetaDelete { .. }),
            ) => then(op),
            (Some(long), op @ (WriteOp::Arith { .. } | WriteOp::MetaArith { .. }))
                if long.takes_arithmetic() =>
            {
                then(op)
            }
            (Some(_), other) => {
                return Err(Error::new(
                    ErrorKind::InvalidArgument,
                    format!(
                        "{} cannot apply to a long key: its value is stored in an envelope",
                        other.command()
                    ),
                ));
            }
        })
    }

    /// [`Client::replicate`] once the key is checked and the request built.
    /// Returns as soon as the write policy is decided (met, with the local
    /// zone's read-write groups and the arbiter among the answers, or no
    /// longer reachable);
    /// the groups still outstanding then finish on a task of their own,
    /// bounded by the timeout. Every group that missed the key's own server
    /// queues a repair ([`crate::client::repair`]), held while the write may
    /// have landed nowhere (`missed.rs`).
    async fn replicate_request(
        &self,
        snap: &Arc<Snapshot>,
        job: Arc<Job>,
        only: Option<&[GroupId]>,
        judge: bool,
    ) -> Result<(WriteOutcome, Vec<Option<Response>>), Error> {
        // The targets, chosen under the dead-host lock (held only for that)
        // into `running`; then each group's part starts there, kept in the
        // topology's order until it answers.
        let groups = only.map_or(snap.topology.groups().len(), <[GroupId]>::len);
        let mut running = Unordered::with_capacity(groups);
        {
            let rotation = self.rotation();
            let dead = self.inner.pool.dead_view();
            let now = dead.now();
            let topology = &snap.topology;
            match only {
                None => running.extend(topology.write_targets_of(job.keys(), &dead, now, rotation)),
                Some(groups) => running.extend(topology.targeted_write_targets_of(
                    job.keys(),
                    groups,
                    &dead,
                    now,
                    rotation,
                    None,
                )),
            }
        }
        job.landing.expect(running.tags());
        running.start(|target| self.part(snap, &job, target));
        let mut rest = Rest {
            running,
            client: self,
            snap,
            job: &job,
            settling: None,
        };
        // Too many writes already finishing in the background (a group that
        // is slow but not down): this one waits, so their memory is bounded.
        let wait_all = !judge
            || only.is_some()
            || self.inner.write_wait == WriteWait::AllGroups
            || self.inner.background_count() >= MAX_BACKGROUND;
        // Each group's outcome and reply as it answers; put in the
        // topology's order once the policy is decided.
        let mut outcome = WriteOutcome::new(Vec::with_capacity(groups));
        // Replies matter to a conditional write only (its arbiter's answer
        // is its result: a number, a CAS unique); others return none.
        let keep_replies = job.op().is_conditional();
        let mut replies = Vec::with_capacity(if keep_replies { groups } else { 0 });
        // The group of the part at `at`, in the order the parts started.
        let group_at = |running: &Unordered<_, _>, at| group_of(&running.tag(at));
        while let Some(mut part) = rest.running.next().await {
            self.repair_if_missed(snap, &job, &mut part);
            outcome.groups.push(part.outcome(snap));
            if keep_replies {
                replies.push(part.reply.ok().flatten());
            }
            // The groups still to answer: those whose part runs (none left:
            // the loop ends anyway, no need to ask).
            if !wait_all
                && rest.running.len() > 0
                && decided(
                    &snap.topology,
                    &outcome.groups,
                    rest.running.pending().map(|at| group_at(&rest.running, at)),
                )
            {
                break;
            }
        }
        // The groups still outstanding, in the topology's order, as their
        // parts move to a task of their own.
        let pending: Vec<Arc<str>> = rest
            .running
            .pending()
            .map(|at| snap.group_name(group_at(&rest.running, at)).clone())
            .collect();
        if !pending.is_empty() {
            let settling = Arc::new(Settling::new(pending.len()));
            rest.settling = Some(settling.clone());
            outcome = outcome.settling_in(settling);
        }
        // In the order the parts started (a group has one), the replies with
        // them: an insertion sort, as a write has a handful of groups.
        let running = &rest.running;
        let at =
            |g: &GroupOutcome| (0..running.tags()).position(|at| group_at(running, at) == g.id);
        for i in 1..outcome.groups.len() {
            let mut j = i;
            while j > 0 && at(&outcome.groups[j - 1]) > at(&outcome.groups[j]) {
                outcome.groups.swap(j - 1, j);
                if keep_replies {
                    replies.swap(j - 1, j);
                }
                j -= 1;
            }
        }
        drop(rest);
        outcome.pending = pending;
        if !judge {
            return Ok((outcome, replies));
        }
        self.judge(snap, job.command(), &outcome, only.is_some())?;
        Ok((outcome, replies))
    }

    /// One group's part of a write, owning what it needs so that it can
    /// finish after the caller has its answer.
    fn part(
        &self,
        snap: &Arc<Snapshot>,
        job: &Arc<Job>,
        target: Result<Target, Skipped>,
    ) -> BoxFuture<'static, Part> {
        let (group, server) = match target {
            Ok(t) => (t.group, t.server),
            Err(skip) => (skip.group, skip.server),
        };
        let own = snap.topology.group(group).server_for(job.key_of(group));
        // Registered from the start (before any await): a later write that
        // is applied there while this part runs is seen when it ends.
        let repairs = &self.inner.repairs;
        let tracking = (repairs.enabled() && job.op().repairs_on_miss())
            .then(|| repairs.inflight.begin(own, job.digest_of(group)));
        let (client, snap, job) = (self.clone(), snap.clone(), job.clone());
        Box::pin(async move {
            let (server, reply) = match target {
                Ok(t) => {
                    let request = job.request(t.group);
                    let reply = client.exec(&snap, t, &request, Attempt::First).await;
                    match client.failover_after(&snap, &job, t, &reply) {
                        Some(other) => (
                            other.server,
                            client.exec(&snap, other, &request, Attempt::Failover).await,
                        ),
                        None => (t.server, reply),
                    }
                }
                Err(_) => (server, Err(Error::passed_over(snap.name(server)))),
            };
            let result = match &reply {
                Ok(None) => Ok(true),
                Ok(Some(reply)) => applied(reply),
                Err(e) => Err(e.clone()),
            };
            Part {
                group,
                server,
                own,
                reply,
                result,
                tracking,
            }
        })
    }

    /// Where a write's request to its group's `target` goes again after
    /// `reply`: when no connection to that server could be opened (nothing
    /// was sent: the first write after a server died, before the dead-host
    /// record knew) and the group fails over, to the server failover picks
    /// now that the record knows, as a read would; the key's own server then
    /// gets a repair. (Not an `async fn` of its own: awaited in the part,
    /// the request's future is moved once less.)
    fn failover_after(
        &self,
        snap: &Snapshot,
        job: &Job,
        target: Target,
        reply: &Result<Option<Response>, Error>,
    ) -> Option<Target> {
        if !reply.as_ref().is_err_and(Error::is_unsent) {
            return None;
        }
        self.group_target(snap, job.key_of(target.group), target.group)
            .filter(|other| other.server != target.server)
    }
}
