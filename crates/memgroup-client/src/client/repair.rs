//! The repair queue: a write or delete that did not reach a key's own server
//! in some group — the server dead or in backoff, a broken connection, a
//! timeout, or the write sent to a failover replacement instead — becomes a
//! `delete` of that key for that server, retried until the server answers.
//! A group then holds the newest value or nothing, never the copy the missed
//! write should have replaced.
//!
//! - **After the missed write could still land.** A timed-out `set` may sit
//!   in a stalled server's socket and be applied when it resumes, after a
//!   delete sent on a new connection. So the repair of a timed-out write is
//!   two deletes: one once the server answers again, and a confirming one a
//!   grace period later ([`ClientBuilder::repair_grace`](crate::ClientBuilder::repair_grace)),
//!   by when the old socket's bytes have been read. A write that was
//!   refused, or sent to a failover replacement, cannot land: one delete
//!   does, and a later write applied on that server supersedes the repair.
//!   A repair otherwise deletes the key even if a later write put it back:
//!   the group then holds nothing, never an older value.
//! - **Bounded and in memory.** At most
//!   [`ClientBuilder::repair_queue`](crate::ClientBuilder::repair_queue)
//!   entries (one per server and key); a full queue drops its oldest entry,
//!   counted in [`RepairStatus::dropped`] with an
//!   [`Event::RepairsDropped`]. A process that exits loses what is queued:
//!   [`Client::close`] drains it first.
//! - **Never read around.** While a repair is pending, reads treat that
//!   server's copy of the key as a miss and fall back to other groups.
//! - **Drained in the background** by one task that lives while entries do:
//!   every [`REPAIR_TICK`], each due entry's delete goes out; one whose
//!   server is still in its backoff is passed over without I/O and tried
//!   again on a later tick. So a
//!   server's repairs are done within its probe, one tick and the grace
//!   period after it is back.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use memgroup_proto::{Key, Request, Response};
use memgroup_topology::Target;
use parking_lot::RwLock;

use super::trace::Attempt;
use super::{Client, Inner};
use crate::clock::now;
use crate::error::Error;
use crate::events::Event;
use crate::join::{BoxFuture, join_all};

/// How often the drain task looks for due repairs.
pub(crate) const REPAIR_TICK: Duration = Duration::from_millis(100);

/// Deletes sent per round of the drain task.
const ROUND: usize = 256;

/// The repair queue's counters, in [`Status::repairs`](crate::Status::repairs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RepairStatus {
    /// Repairs queued, not yet done (one per server and key).
    pub pending: usize,
    /// Repairs done since the client started.
    pub repaired: u64,
    /// Repairs dropped because the queue was full (their server may serve
    /// a stale copy until it expires).
    pub dropped: u64,
}

/// The queue and its counters; shared with the drain task.
#[derive(Debug)]
pub(crate) struct Repairs {
    capacity: usize,
    grace: Duration,
    /// Read-locked by every hit while entries are pending; written by
    /// writes that miss and by the drain task.
    queue: RwLock<Queue>,
    /// Entries queued, readable without the lock: the read path's check.
    pending: AtomicUsize,
    repaired: AtomicU64,
    dropped: AtomicU64,
}

#[derive(Debug, Default)]
struct Queue {
    next: u64,
    /// By server (`host:port`), then wire key.
    servers: HashMap<Arc<str>, HashMap<Box<[u8]>, Entry>>,
    /// Every entry by age: its number, server and key.
    age: BTreeMap<u64, (Arc<str>, Box<[u8]>)>,
    /// Dropping since the queue was last below its capacity (one event per
    /// episode).
    full: bool,
    /// Whether a drain task runs: set by the push that starts one, cleared
    /// by the task when it finds the queue empty, both under the lock.
    draining: bool,
}

#[derive(Debug)]
struct Entry {
    number: u64,
    /// A group the server belongs to (for the request's span).
    group: Arc<str>,
    due: Instant,
    /// The missed write timed out: it may still be applied from a stalled
    /// server's socket, so a later write does not supersede the repair and
    /// a second delete confirms it after the grace period.
    may_land: bool,
    /// The first delete was answered: the next one confirms.
    confirming: bool,
}

/// A due repair, as the drain task sends it.
struct Due {
    number: u64,
    server: Arc<str>,
    group: Arc<str>,
    key: Box<[u8]>,
}

/// What a push did.
struct Pushed {
    /// Entries dropped to make room.
    dropped: u64,
    /// The queue just became full.
    became_full: bool,
    /// No drain task ran: start one.
    start_drain: bool,
}

/// What became of a due repair's delete.
enum Answer {
    /// The server answered it.
    Done,
    /// It failed, or the server is still in its backoff: again later.
    Later,
    /// The server left the topology: nothing reads its copy.
    Gone,
}

impl Repairs {
    pub(crate) fn new(capacity: usize, grace: Duration) -> Repairs {
        Repairs {
            capacity,
            grace,
            queue: RwLock::new(Queue::default()),
            pending: AtomicUsize::new(0),
            repaired: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
        }
    }

    /// The counters now.
    pub(crate) fn status(&self) -> RepairStatus {
        RepairStatus {
            pending: self.pending.load(Ordering::Acquire),
            repaired: self.repaired.load(Ordering::Relaxed),
            dropped: self.dropped.load(Ordering::Relaxed),
        }
    }

    /// The servers with repairs pending.
    pub(crate) fn servers(&self) -> Vec<Arc<str>> {
        self.queue.read().servers.keys().cloned().collect()
    }

    /// Whether a repair a later write supersedes is queued (read lock only:
    /// the common answer during an outage is no).
    fn blocks_superseded(&self, server: &str, key: &[u8]) -> bool {
        self.queue
            .read()
            .servers
            .get(server)
            .and_then(|keys| keys.get(key))
            .is_some_and(|e| !e.may_land)
    }

    /// Whether `server`'s copy of `key` awaits a repair (reads pass it over).
    pub(crate) fn blocks(&self, server: &str, key: &[u8]) -> bool {
        if self.pending.load(Ordering::Acquire) == 0 {
            return false;
        }
        self.queue
            .read()
            .servers
            .get(server)
            .is_some_and(|keys| keys.contains_key(key))
    }

    /// Queues a repair of `key` on `server` (a member of `group`); one
    /// already queued starts over, since the write that just missed may land
    /// after its deletes.
    fn push(
        &self,
        server: &Arc<str>,
        group: &str,
        key: &[u8],
        may_land: bool,
        now: Instant,
    ) -> Pushed {
        let mut queue = self.queue.write();
        let number = queue.next;
        queue.next += 1;
        let mut entry = Entry {
            number,
            group: group.into(),
            due: now,
            may_land,
            confirming: false,
        };
        let keys = queue.servers.entry(server.clone()).or_default();
        if let Some(old) = keys.remove(key) {
            entry.may_land |= old.may_land;
            queue.age.remove(&old.number);
        }
        let keys = queue.servers.entry(server.clone()).or_default();
        keys.insert(key.into(), entry);
        queue.age.insert(number, (server.clone(), key.into()));
        let mut dropped = 0;
        while queue.age.len() > self.capacity {
            let (_, (server, key)) = queue.age.pop_first().expect("over capacity");
            queue.remove(&server, &key);
            dropped += 1;
        }
        let became_full = dropped > 0 && !queue.full;
        if dropped > 0 {
            queue.full = true;
        }
        let start_drain = !std::mem::replace(&mut queue.draining, true);
        self.pending.store(queue.age.len(), Ordering::Release);
        Pushed {
            dropped,
            became_full,
            start_drain,
        }
    }

    /// Up to [`ROUND`] entries due at `now` on the servers `ready` accepts
    /// (those not in their backoff: the others are passed over whole),
    /// oldest first.
    fn due(&self, now: Instant, ready: impl Fn(&str) -> bool) -> Vec<Due> {
        let queue = self.queue.read();
        let mut due: Vec<Due> = queue
            .servers
            .iter()
            .filter(|(server, _)| ready(server))
            .flat_map(|(server, keys)| {
                keys.iter()
                    .filter(|(_, e)| e.due <= now)
                    .map(move |(key, e)| Due {
                        number: e.number,
                        server: server.clone(),
                        group: e.group.clone(),
                        key: key.clone(),
                    })
            })
            .collect();
        due.sort_unstable_by_key(|d| d.number);
        due.truncate(ROUND);
        due
    }

    /// Whether the queue is empty; if so the drain task's role is given up
    /// in the same step.
    fn release_if_empty(&self) -> bool {
        let mut queue = self.queue.write();
        let empty = queue.age.is_empty();
        if empty {
            queue.draining = false;
        }
        empty
    }

    /// Records what became of a due entry's delete, unless the entry was
    /// queued again meanwhile.
    fn answered(&self, due: &Due, answer: &Answer, now: Instant) {
        let mut queue = self.queue.write();
        let Some(entry) = queue
            .servers
            .get_mut(&due.server)
            .and_then(|keys| keys.get_mut(&due.key))
            .filter(|e| e.number == due.number)
        else {
            return;
        };
        match answer {
            Answer::Later => {
                entry.due = now + REPAIR_TICK;
                return;
            }
            Answer::Done if entry.may_land && !entry.confirming => {
                entry.confirming = true;
                entry.due = now + self.grace;
                return;
            }
            Answer::Done => {
                self.repaired.fetch_add(1, Ordering::Relaxed);
            }
            Answer::Gone => {}
        }
        queue.take(due.number, &due.server, &due.key);
        if queue.age.len() < self.capacity {
            queue.full = false;
        }
        self.pending.store(queue.age.len(), Ordering::Release);
    }

    /// A later write of `key` was applied on `server`: a repair for a missed
    /// write that cannot land any more is superseded (the server holds the
    /// newest value) and counted as done.
    fn superseded(&self, server: &str, key: &[u8]) {
        if self.pending.load(Ordering::Acquire) == 0 || !self.blocks_superseded(server, key) {
            return;
        }
        let mut queue = self.queue.write();
        let Some(number) = queue
            .servers
            .get(server)
            .and_then(|keys| keys.get(key))
            .filter(|e| !e.may_land)
            .map(|e| e.number)
        else {
            return;
        };
        queue.take(number, server, key);
        if queue.age.len() < self.capacity {
            queue.full = false;
        }
        self.pending.store(queue.age.len(), Ordering::Release);
        self.repaired.fetch_add(1, Ordering::Relaxed);
    }
}

impl Queue {
    /// Removes entry `number` (of `server` and `key`), if still queued.
    fn take(&mut self, number: u64, server: &str, key: &[u8]) {
        if self.age.remove(&number).is_some() {
            self.remove(server, key);
        }
    }

    fn remove(&mut self, server: &str, key: &[u8]) {
        if let Some(keys) = self.servers.get_mut(server) {
            keys.remove(key);
            if keys.is_empty() {
                self.servers.remove(server);
            }
        }
    }
}

impl Client {
    /// Queues a repair of the wire key `key` on `server` (of `group`), whose
    /// write failed with `error`, and starts the drain task if none runs.
    pub(crate) fn queue_repair(
        &self,
        server: &Arc<str>,
        group: &str,
        key: &[u8],
        error: Option<&Error>,
    ) {
        let repairs = &self.inner.repairs;
        if repairs.capacity == 0 {
            return;
        }
        // A write that timed out may sit in the server's socket; one sent to
        // a failover replacement (no error) or refused cannot land there.
        let may_land = error.is_some_and(Error::is_timeout);
        let pushed = repairs.push(server, group, key, may_land, now());
        if pushed.dropped > 0 {
            repairs.dropped.fetch_add(pushed.dropped, Ordering::Relaxed);
            if pushed.became_full {
                let capacity = repairs.capacity;
                self.inner
                    .pool
                    .events()
                    .emit(|| Event::RepairsDropped { capacity });
            }
        }
        if pushed.start_drain {
            tokio::spawn(drain(
                Arc::downgrade(&self.inner),
                self.inner.repairs.clone(),
                self.timeout,
            ));
        }
    }

    /// A write of the wire key `key` was applied on `server`.
    pub(crate) fn write_applied(&self, server: &str, key: &[u8]) {
        self.inner.repairs.superseded(server, key);
    }

    /// Sends one due repair's delete, unless its server is still in its
    /// backoff (then no request is made).
    async fn repair(&self, due: &Due) -> Answer {
        let snap = self.snapshot();
        let Ok(server) = snap.server_by_name(&due.server) else {
            return Answer::Gone;
        };
        if self.inner.pool.dead().is_dead(server, now()) {
            return Answer::Later;
        }
        let topology = &snap.topology;
        // Its group, or (renamed or removed) any group it is in.
        let group = snap.group_id(&due.group).ok().or_else(|| {
            topology
                .groups()
                .iter()
                .find(|g| g.servers().contains(&server))
                .map(memgroup_topology::Group::id)
        });
        let Some(group) = group else {
            return Answer::Gone;
        };
        let target = Target {
            group,
            server,
            slot: (self.rotation() as usize) % topology.server_slots(server).max(1),
        };
        let key = Key::new(&due.key).expect("queued as a valid wire key");
        let request = Request::Delete {
            key,
            noreply: false,
        };
        match self.exec(&snap, target, &request, Attempt::Repair).await {
            Ok(Some(Response::Deleted | Response::NotFound)) => Answer::Done,
            _ => Answer::Later,
        }
    }
}

/// The drain task: sends due repairs, round after round, while any are
/// queued and some handle of the client lives.
async fn drain(client: Weak<Inner>, repairs: Arc<Repairs>, timeout: Duration) {
    // However the task ends (the client dropped, the runtime shut down), the
    // role is given up, so the next push starts a new task.
    let mut role = DrainRole {
        repairs: &repairs,
        released: false,
    };
    let mut busy;
    loop {
        {
            let Some(inner) = client.upgrade() else {
                return;
            };
            let client = Client::background(inner, timeout);
            let snap = client.snapshot();
            let due = {
                let dead = client.inner.pool.dead();
                let now = now();
                // A server that left the topology is ready: its entries go.
                repairs.due(now, |name| {
                    snap.server_by_name(name)
                        .map_or(true, |id| !dead.is_dead(id, now))
                })
            };
            busy = !due.is_empty();
            let sent: Vec<BoxFuture<'_, Answer>> = due
                .iter()
                .map(|d| Box::pin(client.repair(d)) as BoxFuture<'_, _>)
                .collect();
            let answers = join_all(sent).await;
            let now = now();
            for (due, answer) in due.iter().zip(&answers) {
                repairs.answered(due, answer, now);
            }
            client.inner.settled.notify_waiters();
        }
        if repairs.release_if_empty() {
            role.released = true;
            return;
        }
        // A round scans the queue: the next one soon while there was work
        // (a grace period or a retry to come), else a tick later.
        let wait = if busy { REPAIR_TICK / 10 } else { REPAIR_TICK };
        tokio::time::sleep(wait).await;
    }
}

/// Held by the drain task: gives the role up if the task ends before it
/// found the queue empty (which gives it up under the queue's lock).
struct DrainRole<'a> {
    repairs: &'a Repairs,
    released: bool,
}

impl Drop for DrainRole<'_> {
    fn drop(&mut self) {
        if !self.released {
            self.repairs.queue.write().draining = false;
        }
    }
}
