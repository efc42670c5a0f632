//! The read engine: every key's walk through its [`ReadCursor`] in rounds,
//! keys bound for the same slot batched into one request, and each reply
//! settled into hits, misses and errors (see the [module docs](super)).

use std::sync::Arc;

use memgroup_proto::{Key, Request, Response};
use memgroup_topology::{DeadHosts, GroupId, ReadCursor, Target};

use crate::client::hedge::{Resend, Walk};
use crate::client::repair::Repairs;
use crate::client::trace::Attempt;
use crate::client::{Client, WireKey, unexpected};
use crate::error::{Error, ErrorKind};
use crate::join::{BoxFuture, join_all};
use crate::pool::{Pool, Snapshot};

/// A kind of read: the request that carries a batch of keys, and how its
/// reply turns into hits.
pub(crate) trait ReadOp: Sync {
    type Hit: Send;
    /// Whether keys bound for the same slot share one request.
    const BATCHES: bool;
    /// Whether a single-key read may be hedged ([`crate::client::hedge`]):
    /// a plain `get` of one key, a meta get that only reads.
    fn hedges(&self) -> bool {
        false
    }
    /// A hedged read's op, owned, for the request it sends again on a
    /// task of its own (when `hedges`).
    fn resend(&self) -> Resend {
        Resend::Get
    }
    /// Whether `reply` is a hit a hedged read can use: for a key stored in
    /// an envelope (`long`), one holding this key's value.
    fn is_hit(&self, _reply: &Response, _long: Option<&crate::longkey::LongKey>) -> bool {
        false
    }
    /// Whether read repair may follow a single-key read (when it is on): a
    /// plain `get`, and the client's own meta reads of a value.
    fn repairs(&self) -> bool {
        self.hedges()
    }
    /// The request for `keys` (exactly one key unless `BATCHES`).
    fn request<'a>(&'a self, keys: &'a [Key<'a>]) -> Request<'a>;
    /// A hit for a long key stored in an envelope ([`crate::longkey`]): its
    /// value unwrapped, or `None` when the envelope holds another key.
    fn unwrap_long(long: &crate::longkey::LongKey, hit: Self::Hit) -> Option<Self::Hit>;
    /// Calls `hit(j, …)` for every `keys[j]` the reply holds; the other keys
    /// missed.
    fn hits(
        &self,
        reply: Response,
        keys: &[Key<'_>],
        hit: impl FnMut(usize, Self::Hit),
    ) -> Result<(), Error>;
}

/// One key's walk through its read targets.
pub(super) struct KeyRead<'a, T> {
    pub(super) key: Key<'a>,
    cursor: ReadCursor<'a>,
    hit: Option<T>,
    /// Some group answered (with a miss, as a hit ends the walk).
    answered: bool,
    /// The last error met.
    error: Option<Error>,
    /// Still looking: no hit, and the cursor may offer more.
    looking: bool,
    /// The group of the last target offered.
    last_group: Option<GroupId>,
    /// Which try the current target is.
    attempt: Attempt,
    /// Where the hit came from.
    pub(super) hit_at: Option<Target>,
    /// With read repair on: the targets that answered with a miss.
    pub(super) missed: Option<Vec<Target>>,
    /// For a key stored in an envelope: the key it must hold. A hit whose
    /// envelope holds another key (a collision) or none is a miss there,
    /// and the walk goes on to the next group, as EVCache's reads do.
    long: Option<&'a crate::longkey::LongKey>,
    /// The key in every group (`key` and `long` are the cluster's).
    wire: &'a WireKey<'a>,
}

impl<'a, T> KeyRead<'a, T> {
    #[inline]
    pub(super) fn new(snap: &'a Snapshot, wire: &'a WireKey<'a>, rotation: u64) -> Self {
        KeyRead {
            key: wire.key(),
            cursor: snap.topology.read_cursor_of(wire.keys(), rotation),
            hit: None,
            answered: false,
            error: None,
            looking: true,
            last_group: None,
            attempt: Attempt::First,
            hit_at: None,
            missed: None,
            long: wire.long.as_ref(),
            wire,
        }
    }

    /// Whether every group stores the key alike.
    pub(super) fn uniform(&self) -> bool {
        self.wire.uniform()
    }

    /// The key in `group`.
    #[inline]
    pub(super) fn key_at(&self, group: GroupId) -> Key<'a> {
        if self.wire.uniform() {
            self.key
        } else {
            self.wire.key_of(group)
        }
    }

    /// The envelope of the key's value in `group`.
    #[inline]
    pub(super) fn long_at(&self, group: GroupId) -> Option<&'a crate::longkey::LongKey> {
        if self.wire.uniform() {
            self.long
        } else {
            self.wire.long_of(group)
        }
    }

    /// Records the targets that answer with a miss, for a read repair
    /// ([`super::backfill`]).
    pub(super) fn noting_misses(mut self, on: bool) -> Self {
        if on {
            self.missed = Some(Vec::new());
        }
        self
    }

    /// Asks the cursor for the next target (given the dead hosts at `now`),
    /// noting which try it is; `None` ends the walk.
    fn next(&mut self, dead: &DeadHosts, now: std::time::Instant) -> Option<Target> {
        let Some(target) = self.cursor.next(dead, now) else {
            self.looking = false;
            return None;
        };
        self.attempt = match self.last_group {
            Some(group) if group == target.group => Attempt::Failover,
            Some(_) => Attempt::Fallback,
            None if self.cursor.skipped().is_some() => Attempt::Fallback,
            None => Attempt::First,
        };
        self.last_group = Some(target.group);
        Some(target)
    }

    /// The key's result once the engine is done with it, taken out of the
    /// walk (which is not moved: its cursor is most of its size). Call it
    /// once, last: the hit and the error are gone after it.
    pub(super) fn outcome(&mut self, snap: &Snapshot, pool: &Pool) -> Result<Option<T>, Error> {
        if self.hit.is_some() {
            return Ok(self.hit.take());
        }
        if self.cursor.groups_tried() == 0 {
            // Backed off because it refused our login: say so.
            if let Some(refused) = self
                .cursor
                .skipped()
                .and_then(|s| pool.refused(snap, s.server))
            {
                return Err(refused);
            }
            let mut error = Error::new(
                ErrorKind::ServerDead,
                "no live server holds this key (all candidates are marked dead)",
            );
            if let Some(skipped) = self.cursor.skipped() {
                error = error.at(snap.name(skipped.server));
            }
            return Err(error);
        }
        match self.error.take() {
            Some(e) if !self.answered => Err(e),
            _ => Ok(None),
        }
    }
}

/// A key's walk as a hedged `get` takes it on (its next group).
struct KeyWalk<'r, 'a, T> {
    read: &'r mut KeyRead<'a, T>,
    pool: &'r Pool,
}

impl<T> Walk for KeyWalk<'_, '_, T> {
    fn next(&mut self) -> Option<Target> {
        let dead = self.pool.dead_view();
        self.read.next(&dead, dead.now())
    }

    fn more(&self) -> bool {
        let dead = self.pool.dead_view();
        self.read.cursor.clone().next(&dead, dead.now()).is_some()
    }
}

/// Whether every key of `batch` may pass a stalled server over, as a
/// single `get`'s try may: its first try, or a fallback after some group
/// answered it with a miss (which stands). Another fallback waits, so the
/// last candidate still answers.
fn passable<T>(batch: &[(Target, usize)], reads: &[KeyRead<'_, T>]) -> bool {
    batch
        .iter()
        .all(|&(_, i)| reads[i].attempt == Attempt::First || reads[i].answered)
}

/// Whether two planned reads go to the same connection slot.
fn same_slot(a: &(Target, usize), b: &(Target, usize)) -> bool {
    a.0.server == b.0.server && a.0.slot == b.0.slot
}

impl Client {
    /// A read's request at `target`, unless it is the key's first try and
    /// the server is over the read queue bound, or (`stall_skip`: a batch
    /// of plain `get`s whose keys may pass a stalled server over, see
    /// [`passable`]) it looks stalled ([`crate::client::hedge`]): then
    /// passed over at once for the next group.
    async fn read_exec(
        &self,
        snap: &Snapshot,
        target: Target,
        request: &Request<'_>,
        attempt: Attempt,
        stall_skip: bool,
    ) -> Result<Option<Response>, Error> {
        let hedging = &self.inner.hedging;
        let overloaded = (attempt == Attempt::First)
            .then(|| hedging.overloaded(snap, target))
            .flatten()
            .or_else(|| stall_skip.then(|| hedging.stalled(snap, target)).flatten());
        match overloaded {
            Some(overloaded) => Err(overloaded),
            None => self.exec(snap, target, request, attempt).await,
        }
    }

    /// Runs `reads` to the end (see the module docs).
    pub(super) async fn read<R: ReadOp>(
        &self,
        snap: &Arc<Snapshot>,
        op: &R,
        reads: &mut [KeyRead<'_, R::Hit>],
    ) {
        if let [read] = reads {
            // One key: the same rounds, without planning or batching.
            while read.looking {
                let target = {
                    let dead = self.inner.pool.dead_view();
                    read.next(&dead, dead.now())
                };
                let Some(target) = target else {
                    break;
                };
                let (key, attempt) = (read.key_at(target.group), read.attempt);
                let keys = [key];
                let blocked = [blocked_at(snap, &self.inner.repairs, target, key)];
                // Each try of a read that hedges (a plain get, a meta get
                // that only reads) may hedge (see `hedged_get` for which
                // may pass a stalled server over); a server over the read
                // queue bound is passed over by a first try only.
                let answered = read.answered;
                let answers =
                    if op.hedges() && self.inner.hedging.overloaded(snap, target).is_none() {
                        let pool = &self.inner.pool;
                        let (long, wire) = (read.long_at(target.group), read.wire);
                        let walk = KeyWalk { read, pool };
                        let tries = (target, attempt, answered);
                        self.hedged_get(snap, op, (key, long), wire, tries, walk)
                            .await
                    } else {
                        let reply = self
                            .read_exec(snap, target, &op.request(&keys), attempt, false)
                            .await;
                        ((target, reply), None)
                    };
                let (first, second) = answers;
                let sent_to = target;
                for (target, reply) in std::iter::once(first).chain(second) {
                    // (A hedge's target is checked at its reply.) Each answer
                    // under the key its group stores.
                    let blocked = [blocked[0] && target == sent_to];
                    let keys = [read.key_at(target.group)];
                    settle(
                        op,
                        snap,
                        &self.inner.repairs,
                        reply,
                        (&[(target, 0)], &blocked),
                        &keys,
                        std::slice::from_mut(read),
                    );
                }
            }
            return;
        }
        // (target, index into `reads`), sorted into one run per slot.
        let mut plan: Vec<(Target, usize)> = Vec::with_capacity(reads.len());
        loop {
            plan.clear();
            {
                let dead = self.inner.pool.dead_view();
                let now = dead.now();
                for (i, r) in reads.iter_mut().enumerate().filter(|(_, r)| r.looking) {
                    if let Some(target) = r.next(&dead, now) {
                        plan.push((target, i));
                    }
                }
            }
            if plan.is_empty() {
                return;
            }
            // Stable, so keys keep their order within a request; a plan that
            // is already in order (one server) costs one pass.
            plan.sort_by_key(|(t, _)| (t.server, t.slot));
            let batches: Vec<&[(Target, usize)]> = if R::BATCHES {
                plan.chunk_by(same_slot).collect()
            } else {
                plan.chunks(1).collect()
            };
            let keys: Vec<Vec<Key<'_>>> = batches
                .iter()
                .map(|b| b.iter().map(|&(t, i)| reads[i].key_at(t.group)).collect())
                .collect();
            // Which copies await a repair as the reads go out: none (and
            // nothing allocated) while no repair is queued or held.
            let repairs = &self.inner.repairs;
            let blocked: Vec<bool> = if repairs.awaiting() {
                plan.iter()
                    .map(|&(t, i)| blocked_at(snap, repairs, t, reads[i].key_at(t.group)))
                    .collect()
            } else {
                Vec::new()
            };
            let blocked: Vec<&[bool]> = batches
                .iter()
                .scan(0, |at, b| {
                    let part = blocked.get(*at..*at + b.len()).unwrap_or(&[]);
                    *at += b.len();
                    Some(part)
                })
                .collect();
            if let ([batch], [keys]) = (&batches[..], &keys[..]) {
                // The common case needs no joining.
                let attempt = reads[batch[0].1].attempt;
                let skip = op.hedges() && passable(batch, reads);
                let reply = self
                    .read_exec(snap, batch[0].0, &op.request(keys), attempt, skip)
                    .await;
                settle(op, snap, repairs, reply, (batch, blocked[0]), keys, reads);
            } else {
                let futures: Vec<BoxFuture<'_, _>> = batches
                    .iter()
                    .zip(&keys)
                    .map(|(batch, keys)| {
                        let attempt = reads[batch[0].1].attempt;
                        let skip = op.hedges() && passable(batch, reads);
                        Box::pin(async move {
                            self.read_exec(snap, batch[0].0, &op.request(keys), attempt, skip)
                                .await
                        }) as BoxFuture<'_, _>
                    })
                    .collect();
                for (((reply, batch), keys), blocked) in join_all(futures)
                    .await
                    .into_iter()
                    .zip(&batches)
                    .zip(&keys)
                    .zip(&blocked)
                {
                    settle(op, snap, repairs, reply, (batch, blocked), keys, reads);
                }
            }
        }
    }
}

/// Whether `target`'s copy of `key` awaits a repair as a read is sent: its
/// reply may then predate the repair's delete even if the repair is done
/// when the reply comes (a stale copy once served so, under load).
fn blocked_at(snap: &Snapshot, repairs: &Repairs, target: Target, key: Key<'_>) -> bool {
    repairs.blocks(snap.name(target.server), key.as_bytes())
}

/// Applies one request's reply to the keys it carried: hits end their walk
/// (unless that server's copy awaits a repair, or did when the read was
/// sent: a miss there); an answer marks the others as missed there; an
/// error is remembered.
fn settle<R: ReadOp>(
    op: &R,
    snap: &Snapshot,
    repairs: &Repairs,
    reply: Result<Option<Response>, Error>,
    (batch, blocked): (&[(Target, usize)], &[bool]),
    keys: &[Key<'_>],
    reads: &mut [KeyRead<'_, R::Hit>],
) {
    // Asked once a reply, not once a hit: while no repair is queued or
    // held, no copy awaits one.
    let awaiting = repairs.awaiting();
    let result = reply
        .and_then(|r| r.ok_or_else(|| unexpected(None)))
        .and_then(|r| {
            op.hits(r, keys, |j, hit| {
                if blocked.get(j).copied().unwrap_or(false)
                    || (awaiting
                        && repairs.blocks(snap.name(batch[j].0.server), keys[j].as_bytes()))
                {
                    return;
                }
                let read = &mut reads[batch[j].1];
                let hit = match read.long_at(batch[j].0.group) {
                    Some(long) => match R::unwrap_long(long, hit) {
                        Some(hit) => hit,
                        None => return,
                    },
                    None => hit,
                };
                read.hit = Some(hit);
                read.hit_at = Some(batch[j].0);
                read.looking = false;
            })
        });
    if result.is_ok() {
        let (mut hits, mut fallbacks) = (0, 0);
        for &(_, i) in batch {
            if reads[i].hit.is_some() {
                hits += 1;
                // Served by a group after the first one: tried before, or
                // passed over because its server is dead.
                let cursor = &reads[i].cursor;
                fallbacks += u64::from(cursor.groups_tried() > 1 || cursor.skipped().is_some());
            }
        }
        let misses = batch.len() as u64 - hits;
        snap.counters(batch[0].0.server)
            .reads(hits, misses, fallbacks);
        crate::metrics::fallbacks(fallbacks);
    }
    for &(target, i) in batch {
        match &result {
            Ok(()) => {
                let read = &mut reads[i];
                read.answered = true;
                if let (None, Some(missed)) = (&read.hit, &mut read.missed) {
                    missed.push(target);
                }
            }
            // A refused login stays the reported cause: a later group's
            // failure must not hide it.
            Err(e) if reads[i].error.as_ref().is_some_and(Error::is_refusal) && !e.is_refusal() => {
            }
            Err(e) => reads[i].error = Some(e.clone()),
        }
    }
}
