//! Reads that do not wait on a slow server.
//!
//! - **Hedged `get`s** (and read-only meta gets, below). When a single-key
//!   `get`'s server looks stalled — a
//!   request has waited on it for the hedge delay with nothing answered
//!   since —
//!   the key's next group is asked at once too and the first hit wins (a
//!   miss from the hedge, the server still stalled at the stall watch's
//!   next look, passes it over; so does a failed hedge, when the key's
//!   walk has a group left and the try may pass a server over). (A
//!   per-request timer would cost every `get` a timer and an allocation,
//!   about a tenth of the throughput at 32 in flight; this check is two
//!   atomic loads.) A `get` already waiting when its server stalls is told
//!   by the stall watch, one task per client that runs while requests wait
//!   and looks at every server once per hedge delay, and hedges then: so a
//!   server that stops answering costs a waiting `get` about twice the
//!   delay, not its timeout (the `get` waits on its server's `Notify`
//!   besides its reply: with several groups and hedging on only). The
//!   request to the stalled server still goes out and runs on, so its
//!   timeout counts and the server is marked down (for a `get` already
//!   waiting it is sent again, as its own request cannot move to a task:
//!   the one waiting is left to its connection, timed out there
//!   uncounted). What it does not catch is one slow
//!   reply from a server that keeps answering others: the read queue bound
//!   and the timeout cover that. Past the budget, a read passes a
//!   stalled-looking server over for the next group without a second
//!   request, as the fast-fail below does. Any try of a `get` hedges; a
//!   key's first try and a fallback after some group answered the key
//!   with a miss also pass a stalled server over (a stalled last candidate
//!   too, then: the miss stands); another fallback never does, so the
//!   last candidate still answers.
//!   Hedges come out of a budget — a share of reads (10 % by default) with a
//!   small burst — since cross-zone traffic costs money and a fixed delay
//!   would hedge a fixed share under load. A meta get that only reads (its
//!   flags ask for the value, client flags, TTL, CAS, size, key, hit or
//!   last access: a proxy's `mg`, the client's own freshness reads) hedges
//!   as a `get` does; `gets`, `gat`, a meta get with a lease (`N`, `R`) or
//!   a touch (`T`) never do (with several groups a CAS unique asked by
//!   `gets` or `meta_get` is read at the arbiter, unhedged). An answer to
//!   a hedged meta get that is dropped (the slower of the two, or the
//!   first request left waiting when it is sent again) may carry the right
//!   to refill a stale value (`W`): lost with it, as any client's `mg`
//!   takes it, until the value is set again (in every group, by whoever
//!   refills); the request sent again also reads the item's hit and last
//!   access as that first request left them. A multi-key `get`'s batch for a
//!   stalled-looking server is not sent twice but goes to the keys' next
//!   group at once (a first try, or a fallback after each of its keys
//!   missed elsewhere: the misses stand, as a single `get`'s does).
//! - **The read queue's fast-fail** (EVCache's `max.read.queue.length`): a
//!   server with as many requests outstanding as the bound is passed over by
//!   a read's first try while it is over it ([`ErrorKind::Overloaded`](crate::ErrorKind::Overloaded)),
//!   so they fall back to the next group at once instead of queueing behind
//!   a server that is not answering.

use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use memgroup_proto::{Key, MetaFlag, Request, Response};
use memgroup_topology::Target;

use super::read::ReadOp;
use super::trace::Attempt;
use super::{Client, WireKey};
use crate::clock::now;
use crate::error::{Error, ErrorKind};
use crate::join::BoxFuture;
use crate::longkey::LongKey;
use crate::pool::Snapshot;

mod watch;

use watch::unless_stalled;

/// Hedges in hand at most (the budget's burst), in thousandths.
const BURST: u64 = 10_000;

/// Hedged reads: when, and how many.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hedge {
    delay: Duration,
    share: f64,
}

impl Hedge {
    /// Hedge a `get` whose server has answered nothing for `delay` while
    /// requests wait on it, for at most `share` of reads (0.0 to 1.0; a
    /// burst of 10 hedges on top).
    pub fn new(delay: Duration, share: f64) -> Hedge {
        Hedge {
            delay,
            share: share.clamp(0.0, 1.0),
        }
    }

    /// No hedged reads.
    pub fn off() -> Hedge {
        Hedge::new(Duration::ZERO, 0.0)
    }

    fn is_on(&self) -> bool {
        self.share > 0.0 && !self.delay.is_zero()
    }
}

impl Default for Hedge {
    /// After 5 ms, for at most 10 % of reads.
    fn default() -> Hedge {
        Hedge::new(Duration::from_millis(5), 0.10)
    }
}

/// The rest of a key's walk through its read targets, as a hedged `get`
/// sees it.
pub(crate) trait Walk {
    /// Takes the key's next target (the group a hedge goes to).
    fn next(&mut self) -> Option<Target>;
    /// Whether the walk has a target left, without taking it.
    fn more(&self) -> bool;
}

/// A hedged read's op, owned: what its first request, sent again on a task
/// of its own, asks.
pub(crate) enum Resend {
    /// A plain `get`.
    Get,
    /// A meta get with these flags.
    Meta(Box<[MetaFlag]>),
}

impl Resend {
    fn request<'a>(&'a self, keys: &'a [Key<'a>]) -> Request<'a> {
        match self {
            Resend::Get => Request::Get { keys },
            Resend::Meta(flags) => Request::MetaGet {
                key: keys[0],
                flags,
            },
        }
    }
}

/// The client's hedging state: its settings and budget.
#[derive(Debug)]
pub(crate) struct Hedging {
    hedge: Hedge,
    /// Thousandths of a hedge earned per read.
    earn: u64,
    /// Hedges in hand, in thousandths (at most [`BURST`]).
    tokens: AtomicU64,
    /// Hedges sent.
    pub(crate) hedged: AtomicU64,
    /// The read queue bound (0: off).
    pub(crate) max_read_queue: usize,
    /// Whether the stall watch runs.
    watching: AtomicBool,
}

impl Hedging {
    pub(crate) fn new(hedge: Hedge, max_read_queue: usize) -> Hedging {
        Hedging {
            hedge,
            earn: (hedge.share * 1000.0).round() as u64,
            tokens: AtomicU64::new(BURST),
            hedged: AtomicU64::new(0),
            max_read_queue,
            watching: AtomicBool::new(false),
        }
    }

    /// A read that may hedge earns its share of the budget.
    fn earn(&self) {
        let _ = self
            .tokens
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |t| {
                (t < BURST).then(|| (t + self.earn).min(BURST))
            });
    }

    /// What a read does about its stalled server: `Ok` hedges to the
    /// key's next target (`walk` gives it) with a hedge from the budget;
    /// `Err(true)` passes the server over (no request there, or none
    /// awaited) for the next group; `Err(false)` waits for it. Past the
    /// budget a `passable` try passes it over (the hedges sent go on timing
    /// out there, so the server is marked down), as the read queue's
    /// fast-fail does. Either way, with no target left, only when some
    /// group already answered the key (`answered`: its answer, a miss,
    /// stands), else the server is the last to ask.
    fn on_stall(
        &self,
        walk: &mut impl Walk,
        (passable, answered): (bool, bool),
    ) -> Result<Target, bool> {
        if !self.take() {
            return Err(passable && (answered || walk.more()));
        }
        match walk.next() {
            Some(second) => Ok(second),
            None => {
                // Nowhere else to ask: the hedge goes back to the budget.
                self.tokens.fetch_add(1000, Ordering::Relaxed);
                Err(answered)
            }
        }
    }

    /// Takes one hedge from the budget, if there is one.
    fn take(&self) -> bool {
        self.tokens
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |t| {
                t.checked_sub(1000)
            })
            .is_ok()
    }

    /// Whether a read's first try passes `server` over: as many requests
    /// outstanding as the bound, and another group to read from.
    pub(crate) fn overloaded(&self, snap: &Snapshot, target: Target) -> Option<Error> {
        if self.max_read_queue == 0 || snap.topology.groups().len() < 2 {
            return None;
        }
        let outstanding = snap.counters(target.server).outstanding_now();
        (outstanding >= self.max_read_queue).then(|| {
            passed_over(
                snap,
                target,
                format!(
                    "{outstanding} requests outstanding (read queue bound {})",
                    self.max_read_queue
                ),
            )
        })
    }

    /// Whether a multi-key `get`'s batch passes `target`'s server over: it
    /// looks stalled (a request has waited the hedge delay with nothing
    /// answered since) and another group can serve. A batch is not sent
    /// twice: its keys go to their next group at once.
    pub(crate) fn stalled(&self, snap: &Snapshot, target: Target) -> Option<Error> {
        if !self.hedge.is_on() || snap.topology.groups().len() < 2 {
            return None;
        }
        let counters = snap.counters(target.server);
        counters
            .looks_stalled(crate::clock::nanos(now()), self.hedge.delay)
            .then(|| {
                passed_over(
                    snap,
                    target,
                    format!(
                        "a request has waited over {:?} with nothing answered",
                        self.hedge.delay
                    ),
                )
            })
    }
}

/// The error of a read's try that passed `target`'s server over, saying why.
fn passed_over(snap: &Snapshot, target: Target, why: String) -> Error {
    Error::new(ErrorKind::Overloaded, why).at(snap.name(target.server))
}

/// A reply, and the target it came from.
pub(crate) type Answer = (Target, Result<Option<Response>, Error>);

impl Client {
    /// A single-key read (`op`: a plain `get`, a meta get that only reads)
    /// of the wire key `key` at `first`, hedged to the target `walk` gives
    /// (the key's next group) when `first`'s server looks stalled — requests
    /// outstanding and no answer for the hedge delay — and the budget
    /// allows. Returns the answers to settle, in order: the
    /// second only when a hedge was sent and the first answer was no hit.
    /// `long`: the key is stored in an envelope, and a hit is one that
    /// holds this key's (another key's, a collision, is no hit); `wire`
    /// gives both in the next group.
    pub(crate) async fn hedged_get<R: ReadOp>(
        &self,
        snap: &Arc<Snapshot>,
        op: &R,
        (key, long): (Key<'_>, Option<&LongKey>),
        wire: &WireKey<'_>,
        (first, attempt, answered): (Target, Attempt, bool),
        mut walk: impl Walk,
    ) -> (Answer, Option<Answer>) {
        let hedging = &self.inner.hedging;
        let keys = [key];
        let request = op.request(&keys);
        if !(hedging.hedge.is_on() && snap.topology.groups().len() > 1) {
            let reply = self.exec(snap, first, &request, attempt).await;
            return ((first, reply), None);
        }
        hedging.earn();
        // A key's first try may pass a stalled server over, and so may a
        // try after some group answered the key (with a miss, which
        // stands); another fallback hedges at most, so the last candidate
        // still answers.
        let passable = attempt == Attempt::First || answered;
        // Boxed: the two requests' futures stay out of every `get`'s.
        let hedge = |second, walk| {
            let tries = (first, second, attempt, passable);
            Box::pin(self.hedge(snap, op, (key, long), wire, tries, walk))
        };
        if let Some(stalled) = hedging.stalled(snap, first) {
            match hedging.on_stall(&mut walk, (passable, answered)) {
                Ok(second) => return hedge(second, &walk).await,
                Err(true) => return ((first, Err(stalled)), None),
                Err(false) => {}
            }
        }
        // Sent while the server seemed well: if it stalls with this request
        // waiting, the stall watch says so after the hedge delay, and the
        // hedge goes out then.
        let mut exec = pin!(self.exec(snap, first, &request, attempt));
        // (Its first look comes a hedge delay on: the request is sent and
        // counted as outstanding by then.)
        self.watch_stalls();
        let counters = snap.counters(first.server);
        if let Some(reply) = unless_stalled(exec.as_mut(), counters).await {
            return ((first, reply), None);
        }
        // (The server answered meanwhile: no longer stalled.) The request
        // waiting is left to its connection (timed out there, uncounted);
        // a hedge's own request to the stalled server counts.
        if hedging.stalled(snap, first).is_some() {
            match hedging.on_stall(&mut walk, (passable, answered)) {
                Ok(second) => return hedge(second, &walk).await,
                // Passed over once the watch finds it stalled still (one
                // look more: a server only slow for a moment still answers).
                Err(true) => match unless_stalled(exec.as_mut(), counters).await {
                    Some(reply) => return ((first, reply), None),
                    None => {
                        if let Some(stalled) = hedging.stalled(snap, first) {
                            return ((first, Err(stalled)), None);
                        }
                    }
                },
                Err(false) => {}
            }
        }
        ((first, exec.await), None)
    }

    /// Sends the `get` of the key to `first` and its hedge to `second`
    /// (the key and its envelope in each, from `wire` there); the first
    /// hit wins. A hedge that answers without the key, or (a `passable`
    /// try with a group left in `walk`) fails, leaves the first server
    /// passed over once the stall watch finds it stalled still.
    async fn hedge<R: ReadOp>(
        &self,
        snap: &Arc<Snapshot>,
        op: &R,
        (key, long): (Key<'_>, Option<&LongKey>),
        wire: &WireKey<'_>,
        (first, second, attempt, passable): (Target, Target, Attempt, bool),
        walk: &impl Walk,
    ) -> (Answer, Option<Answer>) {
        let at = [
            (key, long),
            (wire.key_of(second.group), wire.long_of(second.group)),
        ];
        let keys = [at[1].0];
        let request = op.request(&keys);
        self.inner.hedging.hedged.fetch_add(1, Ordering::Relaxed);
        crate::metrics::hedge();
        // The first request still goes out (its timeout counts towards
        // marking the server down), owning what it uses so it can run on.
        let mut primary = self.owned_read(snap, op.resend(), at[0].0, first, attempt);
        let hedge = self.exec(snap, second, &request, Attempt::Hedge);
        tokio::pin!(hedge);
        // The watch is what ends a wait for the first server below (a
        // server already looking stalled may have no watch running).
        self.watch_stalls();
        // A hit the read can use: not from a copy awaiting a repair, and
        // for a key in an envelope, this key's envelope.
        let is_hit = |target: Target,
                      (key, long): (Key<'_>, Option<&LongKey>),
                      reply: &Result<Option<Response>, Error>| {
            matches!(reply, Ok(Some(reply)) if op.is_hit(reply, long))
                && !self
                    .inner
                    .repairs
                    .blocks(snap.name(target.server), key.as_bytes())
        };
        tokio::select! {
            reply = &mut primary => {
                if is_hit(first, at[0], &reply) {
                    return ((first, reply), None);
                }
                ((first, reply), Some((second, hedge.await)))
            }
            reply = &mut hedge => {
                if is_hit(second, at[1], &reply) {
                    // The slow request runs on: its timeout still counts.
                    tokio::spawn(primary);
                    return ((second, reply), None);
                }
                // A failure answers nothing: the first server is the one
                // to wait for, unless the try may pass it over and the walk
                // has another target. (Looked at as the failure comes: a
                // target marked dead during the wait below leaves the key
                // an error. Looking after the wait instead, as 59197ef did,
                // cost `compare --faults`' open-loop gets a p99 of 4-26 ms
                // instead of 3 in most runs, for no reason found.)
                if reply.is_err() && !(passable && walk.more()) {
                    return ((second, reply), Some((first, primary.await)));
                }
                // An answer without the key (or that failure): the first
                // server's is awaited until the stall watch finds it stalled
                // still (one look more, so a server that was only slow for a
                // moment still answers); then it is passed over as past the
                // budget (the key's walk goes on, or ends with this miss),
                // its request running on.
                let waited = unless_stalled(primary.as_mut(), snap.counters(first.server)).await;
                let answer = match waited {
                    Some(answer) => answer,
                    None => match self.inner.hedging.stalled(snap, first) {
                        Some(stalled) => {
                            tokio::spawn(primary);
                            Err(stalled)
                        }
                        None => primary.await,
                    },
                };
                ((second, reply), Some((first, answer)))
            }
        }
    }

    /// A read (`op`) that owns what it uses, so it can finish on its own
    /// task.
    fn owned_read(
        &self,
        snap: &Arc<Snapshot>,
        op: Resend,
        key: Key<'_>,
        target: Target,
        attempt: Attempt,
    ) -> BoxFuture<'static, Result<Option<Response>, Error>> {
        let (client, snap, key) = (self.clone(), snap.clone(), key.as_bytes().to_vec());
        Box::pin(async move {
            let keys = [Key::new_raw(&key).expect("a valid key")];
            client
                .exec(&snap, target, &op.request(&keys), attempt)
                .await
        })
    }
}
