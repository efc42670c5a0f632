//! Batch writes: [`Client::set_multi`], [`Client::delete_multi`] (and
//! [`Client::touch_multi`], classic touches at once). Every key gets one
//! write per group, as a single write does; the writes bound for one
//! connection go as quiet meta batches of at most 256 commands (`ms … q
//! O<i>` … `mn`), so the server answers only what did not go as expected,
//! and the batches of all servers are sent concurrently. Each
//! key's own outcome comes back aligned with the keys given, with the write
//! policy judged per key. A group that missed a key queues its repair, as
//! for a single write.

use memgroup_proto::{MetaCommand, MetaFlag, MetaStatus, Request, Response};
use memgroup_topology::{GroupId, Target};

use crate::client::repair::Tracking;
use crate::client::trace::{self, Attempt};
use crate::client::{Client, WireKey, unexpected};
use crate::error::{Error, ErrorKind};
use crate::item::{GroupOutcome, WriteOutcome};
use crate::join::{BoxFuture, join_all};
use crate::options::{Expiry, WriteOptions};
use crate::pool::Snapshot;

/// Each key's outcome of a batch write, in the order the keys were given
/// (a repeated key is written as often as it is given; [`MultiWrite::outcome`]
/// returns its first).
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct MultiWrite {
    /// Every key with its outcome: its write per group (`Ok(false)`: not
    /// applied, as a `delete` of an absent key), or the policy's error.
    pub keys: Vec<(Vec<u8>, Result<WriteOutcome, Error>)>,
}

impl MultiWrite {
    /// The outcome of `key`, if it was in the batch.
    pub fn outcome(&self, key: impl AsRef<[u8]>) -> Option<&Result<WriteOutcome, Error>> {
        let key = key.as_ref();
        self.keys.iter().find(|(k, _)| k == key).map(|(_, o)| o)
    }

    /// Whether every key met its write policy.
    pub fn is_complete(&self) -> bool {
        self.keys.iter().all(|(_, o)| o.is_ok())
    }

    /// The keys whose write failed its policy, with the error.
    pub fn errors(&self) -> impl Iterator<Item = (&[u8], &Error)> {
        self.keys
            .iter()
            .filter_map(|(k, o)| o.as_ref().err().map(|e| (&k[..], e)))
    }
}

/// What a batch does to each key.
#[derive(Clone, Copy)]
enum Kind<'a> {
    Set {
        flags: &'a [MetaFlag],
        options: WriteOptions,
    },
    Delete,
}

impl Kind<'_> {
    fn command(&self) -> &'static str {
        match self {
            Kind::Set { .. } => "set_multi",
            Kind::Delete => "delete_multi",
        }
    }
}

/// Commands per quiet batch at most: a larger batch is split, so one slow
/// reply never holds (or, timed out, owes repairs for) too many keys.
const MAX_BATCH: usize = 256;

/// One connection's share of a batch: the keys (indices) bound for it.
struct Share {
    target: Target,
    keys: Vec<usize>,
}

/// Adds key `i` to the share for `target` with room left (a new one if
/// none): returns the share's place in `shares`.
fn join_share(shares: &mut Vec<Share>, target: Target, i: usize) -> usize {
    match shares
        .iter()
        .position(|s| s.target == target && s.keys.len() < MAX_BATCH)
    {
        Some(at) => {
            shares[at].keys.push(i);
            at
        }
        None => {
            shares.push(Share {
                target,
                keys: vec![i],
            });
            shares.len() - 1
        }
    }
}

impl Client {
    /// Stores every `(key, value)` in every group: one quiet batch per
    /// connection, concurrently (`ms … q O<i>` … `mn`: the server answers
    /// only what did not go as expected). With several groups and
    /// [`ClientBuilder::converge`](crate::ClientBuilder::converge) on, each
    /// key goes as a single [`Client::set`] instead, all at once on the
    /// pipelined connections: a quiet batch returns no CAS receipts, and
    /// concurrent writers of these keys end in agreement as with `set`. Each key's outcome comes back in
    /// the order given, the write policy judged per key; a group that
    /// missed a key queues its repair, as for [`Client::set`]. Every key
    /// and value is checked before a byte is sent.
    ///
    /// ```no_run
    /// # async fn demo(client: memgroup_client::Client) -> Result<(), memgroup_client::Error> {
    /// let written = client.set_multi(&[("a", "1"), ("b", "2")], 300).await?;
    /// for (key, error) in written.errors() {
    ///     eprintln!("{}: {error}", String::from_utf8_lossy(key));
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn set_multi<K: AsRef<[u8]>, V: AsRef<[u8]>>(
        &self,
        items: &[(K, V)],
        options: impl Into<WriteOptions>,
    ) -> Result<MultiWrite, Error> {
        let options = options.into();
        let flags = [
            MetaFlag::Ttl(options.expiry.exptime()?),
            MetaFlag::SetFlags(options.flags),
        ];
        for (_, value) in items {
            self.check_value(value.as_ref())?;
        }
        let keys: Vec<&[u8]> = items.iter().map(|(k, _)| k.as_ref()).collect();
        let values: Vec<&[u8]> = items.iter().map(|(_, v)| v.as_ref()).collect();
        if self.inner.converge && self.snapshot().topology.groups().len() > 1 {
            return self.set_each(&keys, &values, options).await;
        }
        self.batch(
            &keys,
            &values,
            Kind::Set {
                flags: &flags,
                options,
            },
        )
        .await
    }

    /// Deletes every key from every group: one quiet batch per connection,
    /// concurrently. A key absent from a group that another group held is
    /// applied there too, as [`Client::delete`] reports it.
    pub async fn delete_multi<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<MultiWrite, Error> {
        let keys: Vec<&[u8]> = keys.iter().map(AsRef::as_ref).collect();
        self.batch(&keys, &[], Kind::Delete).await
    }

    /// Sets a new expiry on every key in every group: a classic `touch`
    /// per key (all at once, not a quiet batch: a meta `mg … T` of a stale
    /// value would take the win its refill needs), each key's outcome as
    /// [`Client::touch`] reports it.
    pub async fn touch_multi<K: AsRef<[u8]>>(
        &self,
        keys: &[K],
        expiry: impl Into<Expiry>,
    ) -> Result<MultiWrite, Error> {
        let expiry = expiry.into();
        expiry.exptime()?;
        let snap = self.snapshot();
        for key in keys {
            self.wire_key(&snap, key.as_ref())?;
        }
        let touches: Vec<BoxFuture<'_, _>> = keys
            .iter()
            .map(|k| Box::pin(self.touch(k.as_ref(), expiry)) as BoxFuture<'_, _>)
            .collect();
        let mut written = MultiWrite::default();
        for (key, outcome) in keys.iter().zip(join_all(touches).await) {
            written.keys.push((key.as_ref().to_vec(), outcome));
        }
        Ok(written)
    }

    async fn batch(
        &self,
        given: &[&[u8]],
        values: &[&[u8]],
        kind: Kind<'_>,
    ) -> Result<MultiWrite, Error> {
        let snap = self.snapshot();
        // Every key checked before a byte is sent; long keys, keys stored
        // otherwise in some group and migration mode write key by key
        // (envelopes, each group's key, the old placement).
        let mut wires = Vec::with_capacity(given.len());
        for key in given {
            wires.push(self.wire_key(&snap, key)?);
        }
        if self.inner.migration.read().is_some()
            || wires.iter().any(|w| w.enveloped() || !w.uniform())
        {
            return self.one_by_one(given, values, kind).await;
        }
        let span = trace::batch_span(self, kind.command(), given.len());
        // Numbered as they start, and counted in flight until their
        // outcomes are in.
        let (numbers, writing): (Vec<u64>, Vec<_>) = wires
            .iter()
            .map(|w| {
                if let Some(near) = &self.inner.near {
                    near.forget(&w.bytes);
                }
                self.inner.repairs.start_write(&w.bytes)
            })
            .unzip();
        // Per key, per group: its target (or why the group was passed over).
        let groups: Vec<GroupId> = snap
            .topology
            .groups()
            .iter()
            .map(memgroup_topology::Group::id)
            .collect();
        let mut results: Vec<Vec<Option<GroupOutcome>>> =
            vec![vec![None; groups.len()]; wires.len()];
        let mut shares: Vec<Share> = Vec::new();
        {
            let dead = self.inner.pool.dead_view();
            let (now, rotation) = (dead.now(), self.rotation());
            for (i, wire) in wires.iter().enumerate() {
                for (g, target) in snap
                    .topology
                    .write_targets(&wire.bytes, &dead, now, rotation)
                    .enumerate()
                {
                    match target {
                        // Per target: each key's answer is its group's.
                        Ok(t) => {
                            join_share(&mut shares, t, i);
                        }
                        Err(skip) => {
                            let error = Error::passed_over(snap.name(skip.server));
                            let group = snap.topology.group(skip.group).name();
                            self.queue_repair(
                                snap.name(skip.server),
                                group,
                                &wire.bytes,
                                numbers[i],
                                None,
                                None,
                            );
                            results[i][g.min(groups.len() - 1)] = Some(GroupOutcome {
                                id: skip.group,
                                group: snap.group_name(skip.group).clone(),
                                server: None,
                                result: Err(error),
                                cleared: false,
                                reply: None,
                            });
                        }
                    }
                }
            }
        }
        // Every key's part registers with its own server while it runs
        // (`repair::inflight`), as a single write's does.
        let repairs = &self.inner.repairs;
        let mut tracking: Vec<Vec<Option<Tracking>>> = shares
            .iter()
            .map(|share| {
                let group = snap.topology.group(share.target.group);
                share
                    .keys
                    .iter()
                    .map(|&i| {
                        repairs.enabled().then(|| {
                            repairs
                                .inflight
                                .begin(group.server_for(&wires[i].bytes), writing[i].digest())
                        })
                    })
                    .collect()
            })
            .collect();
        let sends: Vec<BoxFuture<'_, _>> = shares
            .iter()
            .map(|share| {
                let send = self.send_share(&snap, &wires, values, kind, share, Attempt::First);
                Box::pin(send) as BoxFuture<'_, _>
            })
            .collect();
        let mut replies = trace::await_in_span!(span, join_all(sends));
        // Shares never sent (no connection to their server could be
        // opened): their keys go, each to the server failover picks now
        // that the dead-host record knows, as a single write's part does.
        let (moved, moved_tracking) =
            self.fail_over_unsent(&snap, &wires, &mut shares, &replies, &mut tracking);
        if !moved.is_empty() {
            let sends: Vec<BoxFuture<'_, _>> = moved
                .iter()
                .map(|share| {
                    let send =
                        self.send_share(&snap, &wires, values, kind, share, Attempt::Failover);
                    Box::pin(send) as BoxFuture<'_, _>
                })
                .collect();
            replies.extend(trace::await_in_span!(span, join_all(sends)));
            shares.extend(moved);
            tracking.extend(moved_tracking);
        }
        for ((share, reply), tracks) in shares.iter().zip(replies).zip(&mut tracking) {
            let answers = answers(share.keys.len(), reply);
            let group = snap.topology.group(share.target.group);
            let g = groups.iter().position(|&id| id == group.id()).unwrap_or(0);
            for ((&i, result), track) in share.keys.iter().zip(answers).zip(tracks) {
                let own = group.server_for(&wires[i].bytes);
                if let Some(track) = track {
                    // Quiet batches carry no CAS receipt.
                    let reached = (result.is_ok() && own == share.target.server).then_some(None);
                    let write = (&wires[i].bytes[..], numbers[i], true);
                    let error = result.as_ref().err();
                    let owed = self.settle_part(snap.name(own), write, reached, error, track);
                    if let Some(keep) = owed {
                        let (key, number) = (write.0, write.1);
                        self.queue_repair(snap.name(own), group.name(), key, number, error, keep);
                    }
                }
                results[i][g] = Some(GroupOutcome {
                    id: group.id(),
                    group: snap.group_name(group.id()).clone(),
                    server: Some(snap.name(share.target.server).clone()),
                    result,
                    cleared: false,
                    reply: None,
                });
            }
        }
        let mut written = MultiWrite::default();
        for (key, groups) in given.iter().zip(results) {
            let mut outcome = WriteOutcome::new(groups.into_iter().flatten().collect());
            if matches!(kind, Kind::Delete) {
                outcome.absent_is_done();
            }
            let judged = self
                .judge(&snap, kind.command(), &outcome, false)
                .map(|()| outcome);
            written.keys.push((key.to_vec(), judged));
        }
        trace::operation_done(&span, &written);
        Ok(written)
    }

    /// One share's keys as one quiet meta batch to its target.
    async fn send_share(
        &self,
        snap: &Snapshot,
        wires: &[WireKey<'_>],
        values: &[&[u8]],
        kind: Kind<'_>,
        share: &Share,
        attempt: Attempt,
    ) -> Result<Option<Response>, Error> {
        let commands: Vec<MetaCommand<'_>> = share
            .keys
            .iter()
            .map(|&i| {
                let key = wires[i].key();
                match kind {
                    Kind::Set { flags, .. } => MetaCommand::Set {
                        key,
                        data: values[i],
                        flags,
                    },
                    Kind::Delete => MetaCommand::Delete { key, flags: &[] },
                }
            })
            .collect();
        let request = Request::MetaBatch {
            commands: &commands,
        };
        self.exec(snap, share.target, &request, attempt).await
    }

    /// The keys of shares whose request was never sent (`replies`, aligned
    /// with `shares`) whose group fails over to another server now: taken
    /// out of their share (with their tracking) and grouped into new shares
    /// by the new target, returned with their tracking aligned. A key with
    /// nowhere else to go stays, with its share's error.
    fn fail_over_unsent(
        &self,
        snap: &Snapshot,
        wires: &[WireKey<'_>],
        shares: &mut [Share],
        replies: &[Result<Option<Response>, Error>],
        tracking: &mut [Vec<Option<Tracking>>],
    ) -> (Vec<Share>, Vec<Vec<Option<Tracking>>>) {
        let (mut moved, mut moved_tracking) = (Vec::new(), Vec::<Vec<Option<Tracking>>>::new());
        for ((share, reply), tracks) in shares.iter_mut().zip(replies).zip(tracking) {
            if !reply.as_ref().is_err_and(Error::is_unsent) {
                continue;
            }
            let (mut kept, mut kept_tracks) = (Vec::new(), Vec::new());
            for (&i, track) in share.keys.iter().zip(tracks.drain(..)) {
                let again = self.group_target(snap, &wires[i].bytes, share.target.group);
                let target = match again {
                    Some(t) if t.server != share.target.server => t,
                    _ => {
                        kept.push(i);
                        kept_tracks.push(track);
                        continue;
                    }
                };
                let at = join_share(&mut moved, target, i);
                if at == moved_tracking.len() {
                    moved_tracking.push(Vec::new());
                }
                moved_tracking[at].push(track);
            }
            share.keys = kept;
            *tracks = kept_tracks;
        }
        (moved, moved_tracking)
    }

    /// Migration mode or long keys: the batch as single writes.
    async fn one_by_one(
        &self,
        keys: &[&[u8]],
        values: &[&[u8]],
        kind: Kind<'_>,
    ) -> Result<MultiWrite, Error> {
        let mut written = MultiWrite::default();
        for (i, key) in keys.iter().enumerate() {
            let outcome = match kind {
                Kind::Set { options, .. } => self.set(key, values[i], options).await,
                Kind::Delete => self.delete(key).await,
            };
            written.keys.push((key.to_vec(), outcome));
        }
        Ok(written)
    }
}

/// Each command's result from a quiet batch's reply: no reply is the
/// common outcome (a quiet `ms` or `md` that did its job answers nothing),
/// a reply with the command's opaque says otherwise. An error reply carries no
/// opaque: then every command without an answer is uncertain, and fails.
fn answers(n: usize, reply: Result<Option<Response>, Error>) -> Vec<Result<bool, Error>> {
    let replies = match reply {
        Ok(Some(Response::MetaBatch(replies))) => replies,
        Ok(other) => return vec![Err(unexpected(other.as_ref())); n],
        Err(e) => return vec![Err(e); n],
    };
    let mut out: Vec<Option<Result<bool, Error>>> = vec![None; n];
    let mut failure = None;
    for reply in replies {
        match reply {
            Response::Meta(m) => {
                let Some(i) = m
                    .flag_u64(b'O')
                    .and_then(|o| usize::try_from(o).ok())
                    .filter(|&i| i < n)
                else {
                    failure = Some(unexpected(Some(&Response::Meta(m))));
                    continue;
                };
                out[i] = Some(Ok(matches!(m.status, MetaStatus::Hd | MetaStatus::Va)));
            }
            other => {
                failure = Some(Error::new(
                    ErrorKind::Server,
                    format!("in a quiet batch: {other:?}"),
                ));
            }
        }
    }
    out.into_iter()
        .map(|r| match (r, &failure) {
            (Some(r), _) => r,
            (None, Some(e)) => Err(e.clone()),
            (None, None) => Ok(true),
        })
        .collect()
}
