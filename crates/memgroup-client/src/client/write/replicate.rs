//! The replication engine: a write built into one request per targeted
//! group (one slot each, whatever the pool size), sent concurrently, and
//! judged by the write policy on group ids.

use memgroup_proto::{Key, MetaFlag, MetaStatus, Request, Response, SetMode, StoreCommand};
use std::sync::Arc;

use memgroup_topology::{GroupId, ServerId, Skipped, Target, Topology};

use crate::client::trace::{self, Attempt};
use crate::client::{Client, unexpected};
use crate::clock::now;
use crate::error::{Error, ErrorKind};
use crate::events::Event;
use crate::item::{GroupOutcome, WriteOutcome};
use crate::join::{BoxFuture, Unordered};
use crate::longkey;
use crate::options::WriteWait;
use crate::pool::Snapshot;

/// A write, minus its key: built into a request once the wire key is known.
#[derive(Debug, Clone, Copy)]
pub(super) enum WriteOp<'a> {
    Store {
        command: StoreCommand,
        data: &'a [u8],
        flags: u32,
        exptime: u32,
        noreply: bool,
    },
    Delete {
        noreply: bool,
    },
    Touch {
        exptime: u32,
    },
    Arith {
        increment: bool,
        delta: u64,
    },
    MetaSet {
        data: &'a [u8],
        flags: &'a [MetaFlag],
    },
}

impl<'a> WriteOp<'a> {
    /// Whether a group that missed it is repaired by deleting the key there
    /// ([`crate::client::repair`]): every plain write; not an `add` (a miss
    /// leaves what the add would have kept) nor a conditional write (the
    /// arbiter decides those, and their other groups' deletes repair).
    fn repairs_on_miss(&self) -> bool {
        !self.is_conditional()
            && !matches!(
                self,
                WriteOp::Store {
                    command: StoreCommand::Add,
                    ..
                }
            )
    }

    /// The command's name (`add`, `incr`, …).
    pub(super) fn command(&self) -> &'static str {
        self.request(Key::new(b"k").expect("a valid key")).command()
    }

    /// Whether one group must decide it for all (see `arbiter.rs`): the
    /// conditional stores, `incr`/`decr`, and an `ms` with a mode other than
    /// set, a compare-and-swap or an invalidation.
    pub(super) fn is_conditional(&self) -> bool {
        match self {
            WriteOp::Arith { .. }
            | WriteOp::Store {
                command:
                    StoreCommand::Add
                    | StoreCommand::Replace
                    | StoreCommand::Cas(_)
                    | StoreCommand::Append
                    | StoreCommand::Prepend,
                ..
            } => true,
            WriteOp::MetaSet { flags, .. } => flags.iter().any(|f| {
                matches!(
                    f,
                    MetaFlag::CompareCas(_)
                        | MetaFlag::Invalidate
                        | MetaFlag::SetMode(
                            SetMode::Add | SetMode::Append | SetMode::Prepend | SetMode::Replace
                        )
                )
            }),
            _ => false,
        }
    }

    fn request<'k>(&self, key: Key<'k>) -> Request<'k>
    where
        'a: 'k,
    {
        match *self {
            WriteOp::Store {
                command,
                data,
                flags,
                exptime,
                noreply,
            } => Request::Store {
                command,
                key,
                flags,
                exptime,
                data,
                noreply,
            },
            WriteOp::Delete { noreply } => Request::Delete { key, noreply },
            WriteOp::Touch { exptime } => Request::Touch {
                key,
                exptime,
                noreply: false,
            },
            WriteOp::Arith { increment, delta } => Request::Arith {
                key,
                increment,
                delta,
                noreply: false,
            },
            WriteOp::MetaSet { data, flags } => Request::MetaSet { key, data, flags },
        }
    }
}

/// A write with its key, owned: its groups' parts may outlive the call.
pub(super) struct Job {
    /// The wire key.
    key: Vec<u8>,
    /// The op, its value and meta flags borrowed from `data` and `flags`.
    op: WriteOp<'static>,
    data: Vec<u8>,
    flags: Vec<MetaFlag>,
}

impl Job {
    /// `op` on `key`, with `data` (an envelope) in place of its value.
    fn new(key: &[u8], op: WriteOp<'_>, data: Option<Vec<u8>>) -> Job {
        let (data, flags) = match op {
            WriteOp::Store { data: value, .. } => {
                (data.unwrap_or_else(|| value.to_vec()), Vec::new())
            }
            WriteOp::MetaSet { data: value, flags } => (value.to_vec(), flags.to_vec()),
            _ => (Vec::new(), Vec::new()),
        };
        let op = match op {
            WriteOp::Store {
                command,
                flags,
                exptime,
                noreply,
                ..
            } => WriteOp::Store {
                command,
                data: &[],
                flags,
                exptime,
                noreply,
            },
            WriteOp::MetaSet { .. } => WriteOp::MetaSet {
                data: &[],
                flags: &[],
            },
            WriteOp::Delete { noreply } => WriteOp::Delete { noreply },
            WriteOp::Touch { exptime } => WriteOp::Touch { exptime },
            WriteOp::Arith { increment, delta } => WriteOp::Arith { increment, delta },
        };
        Job {
            key: key.to_vec(),
            op,
            data,
            flags,
        }
    }

    /// The op, borrowing its value and flags from the job.
    fn op(&self) -> WriteOp<'_> {
        match self.op {
            WriteOp::Store {
                command,
                flags,
                exptime,
                noreply,
                ..
            } => WriteOp::Store {
                command,
                data: &self.data,
                flags,
                exptime,
                noreply,
            },
            WriteOp::MetaSet { .. } => WriteOp::MetaSet {
                data: &self.data,
                flags: &self.flags,
            },
            other => other,
        }
    }

    fn request(&self) -> Request<'_> {
        self.op()
            .request(Key::new(&self.key).expect("validated when made"))
    }
}

/// One group's answer to a write.
struct Part {
    group: GroupId,
    /// The server written to (or, when the group was passed over, the key's own).
    server: ServerId,
    reply: Result<Option<Response>, Error>,
}

/// Whether a write's policy is decided by `parts`, with `outstanding`
/// groups still to answer: met (and the local zone's read-write groups have
/// answered), or out of reach even if every outstanding group succeeds.
fn decided(topology: &Topology, parts: &[Part], outstanding: &[GroupId]) -> bool {
    let succeeded = || parts.iter().filter(|p| p.reply.is_ok()).map(|p| p.group);
    if topology.write_succeeded(succeeded()) {
        let local = topology.local_groups();
        return !outstanding.iter().any(|g| local.contains(g));
    }
    !topology.write_succeeded(succeeded().chain(outstanding.iter().copied()))
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
    /// policy. Returns the outcome and, aligned with its groups, each reply.
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
        let snap = self.snapshot();
        let wire = self.wire_key(&snap, key)?;
        let only: Option<Vec<GroupId>> = only
            .map(|names| names.iter().map(|name| snap.group_id(name)).collect())
            .transpose()?;
        let job = match (&wire.long, op) {
            (None, op) => Job::new(&wire.bytes, op, None),
            (
                Some(original),
                op @ WriteOp::Store {
                    command:
                        StoreCommand::Set
                        | StoreCommand::Add
                        | StoreCommand::Replace
                        | StoreCommand::Cas(_),
                    data,
                    ..
                },
            ) => Job::new(&wire.bytes, op, Some(longkey::wrap(original, data)?)),
            (Some(_), op @ (WriteOp::Delete { .. } | WriteOp::Touch { .. })) => {
                Job::new(&wire.bytes, op, None)
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
        };
        let name = job.op().command();
        let span = trace::operation_span(self, name, Some(key));
        let result = trace::await_in_span!(
            span,
            self.replicate_request(&snap, Arc::new(job), only.as_deref(), judge)
        );
        trace::operation_done(&span, &result);
        result
    }

    /// [`Client::replicate`] once the key is checked and the request built.
    /// Returns as soon as the write policy is decided (met, with the local
    /// zone's read-write group among the answers, or no longer reachable);
    /// the groups still outstanding then finish on a task of their own,
    /// bounded by the timeout. Every group that missed the key's own server
    /// queues a repair ([`crate::client::repair`]).
    async fn replicate_request(
        &self,
        snap: &Arc<Snapshot>,
        job: Arc<Job>,
        only: Option<&[GroupId]>,
        judge: bool,
    ) -> Result<(WriteOutcome, Vec<Option<Response>>), Error> {
        let plan: Vec<Result<Target, Skipped>> = {
            let rotation = self.rotation();
            let dead = self.inner.pool.dead();
            let now = now();
            let topology = &snap.topology;
            match only {
                None => topology
                    .write_targets(&job.key, &dead, now, rotation)
                    .collect(),
                Some(groups) => topology
                    .targeted_write_targets(&job.key, groups, &dead, now, rotation, None)
                    .collect(),
            }
        };
        let mut outstanding: Vec<GroupId> = plan
            .iter()
            .map(|t| match t {
                Ok(t) => t.group,
                Err(skip) => skip.group,
            })
            .collect();
        let order = outstanding.clone();
        let futures = plan
            .into_iter()
            .map(|target| self.part(snap, &job, target))
            .collect();
        let mut running = Unordered::new(futures);
        let wait_all = !judge || only.is_some() || self.inner.write_wait == WriteWait::AllGroups;
        let mut parts: Vec<Part> = Vec::with_capacity(order.len());
        while let Some(part) = running.next().await {
            outstanding.retain(|&g| g != part.group);
            self.repair_if_missed(snap, &job, &part);
            parts.push(part);
            if !wait_all && decided(&snap.topology, &parts, &outstanding) {
                break;
            }
        }
        if running.len() > 0 {
            let (client, snap, job) = (self.clone(), snap.clone(), job.clone());
            let background = self.inner.background();
            tokio::spawn(async move {
                while let Some(part) = running.next().await {
                    client.repair_if_missed(&snap, &job, &part);
                }
                drop(background);
            });
        }
        parts.sort_by_key(|p| order.iter().position(|&g| g == p.group));
        let mut outcome = WriteOutcome::default();
        let mut replies = Vec::with_capacity(parts.len());
        for part in parts {
            let result = match &part.reply {
                Ok(None) => Ok(true),
                Ok(Some(reply)) => applied(reply),
                Err(e) => Err(e.clone()),
            };
            outcome.groups.push(GroupOutcome {
                id: part.group,
                group: snap.topology.group(part.group).name().to_string(),
                server: Some(snap.name(part.server).to_string()),
                result,
            });
            replies.push(part.reply.ok().flatten());
        }
        outcome.pending = outstanding
            .iter()
            .map(|&g| snap.topology.group(g).name().to_string())
            .collect();
        if !judge {
            return Ok((outcome, replies));
        }
        self.judge(snap, job.op().command(), &outcome, only.is_some())?;
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
        let (client, snap, job) = (self.clone(), snap.clone(), job.clone());
        Box::pin(async move {
            match target {
                Ok(t) => Part {
                    group: t.group,
                    server: t.server,
                    reply: client.exec(&snap, t, &job.request(), Attempt::First).await,
                },
                Err(skip) => Part {
                    group: skip.group,
                    server: skip.server,
                    reply: Err(Error::new(ErrorKind::ServerDead, "server is marked dead")
                        .at(snap.name(skip.server))),
                },
            }
        })
    }

    /// Queues a repair when `part` did not reach the key's own server of its
    /// group: it failed, or went to a failover replacement.
    fn repair_if_missed(&self, snap: &Snapshot, job: &Job, part: &Part) {
        if !job.op().repairs_on_miss() {
            return;
        }
        let group = snap.topology.group(part.group);
        let own = group.server_for(&job.key);
        match &part.reply {
            Ok(_) if part.server == own => self.write_applied(snap.name(own), &job.key),
            Ok(_) => self.queue_repair(snap.name(own), group.name(), &job.key, None),
            Err(e) => self.queue_repair(snap.name(own), group.name(), &job.key, Some(e)),
        }
    }

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
        let mut error = Error::new(
            ErrorKind::WritePolicy,
            format!(
                "write missed its policy ({} of {groups} groups failed: {})",
                failed.len(),
                failed.join(", ")
            ),
        );
        if let Some((_, first)) = outcome.failed().next() {
            error = error.with_source(first.clone());
        }
        Err(error)
    }
}
