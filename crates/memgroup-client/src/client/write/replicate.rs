//! The replication engine: a write built into one request per targeted
//! group (one slot each, whatever the pool size), sent concurrently, and
//! judged by the write policy on group ids.

use memgroup_proto::{Key, MetaFlag, MetaStatus, Request, Response, SetMode, StoreCommand};
use memgroup_topology::{GroupId, ServerId, Skipped, Target};

use crate::client::trace::{self, Attempt};
use crate::client::{Client, WireKey, unexpected};
use crate::clock::now;
use crate::error::{Error, ErrorKind};
use crate::events::Event;
use crate::item::{GroupOutcome, WriteOutcome};
use crate::join::{BoxFuture, join_all};
use crate::longkey;
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
        let enveloped;
        let op = match (&wire.long, op) {
            (None, op) => op,
            (
                Some(original),
                WriteOp::Store {
                    command:
                        command @ (StoreCommand::Set
                        | StoreCommand::Add
                        | StoreCommand::Replace
                        | StoreCommand::Cas(_)),
                    data,
                    flags,
                    exptime,
                    noreply,
                },
            ) => {
                enveloped = longkey::wrap(original, data)?;
                WriteOp::Store {
                    command,
                    data: &enveloped,
                    flags,
                    exptime,
                    noreply,
                }
            }
            (Some(_), op @ (WriteOp::Delete { .. } | WriteOp::Touch { .. })) => op,
            (Some(_), other) => {
                return Err(Error::new(
                    ErrorKind::InvalidArgument,
                    format!(
                        "{} cannot apply to a long key: its value is stored in an envelope",
                        other.request(wire.key()).command()
                    ),
                ));
            }
        };
        let request = op.request(wire.key());
        let name = request.command();
        let span = trace::operation_span(self, name, Some(key));
        let result = trace::await_in_span!(
            span,
            self.replicate_request(&snap, &wire, only.as_deref(), &request, judge)
        );
        trace::operation_done(&span, &result);
        result
    }

    /// [`Client::replicate`] once the key is checked and the request built.
    async fn replicate_request(
        &self,
        snap: &Snapshot,
        wire: &WireKey<'_>,
        only: Option<&[GroupId]>,
        request: &Request<'_>,
        judge: bool,
    ) -> Result<(WriteOutcome, Vec<Option<Response>>), Error> {
        let plan: Vec<Result<Target, Skipped>> = {
            let rotation = self.rotation();
            let dead = self.inner.pool.dead();
            let now = now();
            let topology = &snap.topology;
            match only {
                None => topology
                    .write_targets(&wire.bytes, &dead, now, rotation)
                    .collect(),
                Some(groups) => topology
                    .targeted_write_targets(&wire.bytes, groups, &dead, now, rotation, None)
                    .collect(),
            }
        };
        type Part = (GroupId, ServerId, Result<Option<Response>, Error>);
        let futures: Vec<BoxFuture<'_, Part>> = plan
            .into_iter()
            .map(|target| {
                Box::pin(async move {
                    match target {
                        Ok(t) => (
                            t.group,
                            t.server,
                            self.exec(snap, t, request, Attempt::First).await,
                        ),
                        Err(skip) => {
                            let error = Error::new(ErrorKind::ServerDead, "server is marked dead")
                                .at(snap.name(skip.server));
                            (skip.group, skip.server, Err(error))
                        }
                    }
                }) as BoxFuture<'_, Part>
            })
            .collect();
        let mut outcome = WriteOutcome::default();
        let mut replies = Vec::new();
        for (id, server, reply) in join_all(futures).await {
            let result = match &reply {
                Ok(None) => Ok(true),
                Ok(Some(reply)) => applied(reply),
                Err(e) => Err(e.clone()),
            };
            outcome.groups.push(GroupOutcome {
                id,
                group: snap.topology.group(id).name().to_string(),
                server: Some(snap.name(server).to_string()),
                result,
            });
            replies.push(reply.ok().flatten());
        }
        if !judge {
            return Ok((outcome, replies));
        }
        self.judge(snap, request.command(), &outcome, only.is_some())?;
        Ok((outcome, replies))
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
        self.inner.pool.events().emit(|| Event::PolicyMissed {
            command,
            failed: failed.iter().map(ToString::to_string).collect(),
            groups: outcome.groups.len(),
        });
        let mut error = Error::new(
            ErrorKind::WritePolicy,
            format!(
                "write missed its policy ({} of {} groups failed: {})",
                failed.len(),
                outcome.groups.len(),
                failed.join(", ")
            ),
        );
        if let Some((_, first)) = outcome.failed().next() {
            error = error.with_source(first.clone());
        }
        Err(error)
    }
}
