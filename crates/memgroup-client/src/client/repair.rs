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
//!   every [`REPAIR_TICK`] (or at once when an entry is queued), each due
//!   entry's delete goes out; one whose server is still in its backoff is
//!   refused by the pool without I/O and tried again on a later tick. So a
//!   server's repairs are done within its probe, one tick and the grace
//!   period after it is back.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use memgroup_proto::{Key, Request, Response};
use memgroup_topology::Target;
use parking_lot::Mutex;
use tokio::sync::Notify;

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
    queue: Mutex<Queue>,
    /// Entries queued, readable without the lock: the read path's check.
    pending: AtomicUsize,
    repaired: AtomicU64,
    dropped: AtomicU64,
    /// Wakes the drain task.
    wake: Notify,
    /// Whether a drain task runs.
    draining: AtomicBool,
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

impl Repairs {
    pub(crate) fn new(capacity: usize, grace: Duration) -> Repairs {
        Repairs {
            capacity,
            grace,
            queue: Mutex::new(Queue::default()),
            pending: AtomicUsize::new(0),
            repaired: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            wake: Notify::new(),
            draining: AtomicBool::new(false),
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

    /// Whether `server`'s copy of `key` awaits a repair (reads pass it over).
    pub(crate) fn blocks(&self, server: &str, key: &[u8]) -> bool {
        if self.pending.load(Ordering::Acquire) == 0 {
            return false;
        }
        self.queue
            .lock()
            .servers
            .get(server)
            .is_some_and(|keys| keys.contains_key(key))
    }

    /// Queues a repair of `key` on `server` (a member of `group`); one
    /// already queued starts over, since the write that just missed may land
    /// after its deletes. Returns how many entries were dropped to make
    /// room, and whether the queue just became full.
    fn push(
        &self,
        server: &Arc<str>,
        group: &str,
        key: &[u8],
        may_land: bool,
        now: Instant,
    ) -> (u64, bool) {
        let mut queue = self.queue.lock();
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
        queue.full = dropped > 0;
        self.pending.store(queue.age.len(), Ordering::Release);
        (dropped, became_full)
    }

    /// Up to [`ROUND`] entries due at `now`, oldest first.
    fn due(&self, now: Instant) -> Vec<Due> {
        let queue = self.queue.lock();
        queue
            .age
            .iter()
            .filter_map(|(&number, (server, key))| {
                let entry = &queue.servers[server][key];
                (entry.due <= now).then(|| Due {
                    number,
                    server: server.clone(),
                    group: entry.group.clone(),
                    key: key.clone(),
                })
            })
            .take(ROUND)
            .collect()
    }

    /// When the next entry is due, if any.
    fn next_due(&self) -> Option<Instant> {
        let queue = self.queue.lock();
        queue
            .servers
            .values()
            .flat_map(|keys| keys.values())
            .map(|e| e.due)
            .min()
    }

    /// Records the answer to a due entry's delete (`answered`), unless the
    /// entry was queued again meanwhile. Returns whether it is done.
    fn answered(&self, due: &Due, answered: bool, now: Instant) -> bool {
        let mut queue = self.queue.lock();
        let Some(entry) = queue
            .servers
            .get_mut(&due.server)
            .and_then(|keys| keys.get_mut(&due.key))
            .filter(|e| e.number == due.number)
        else {
            return false;
        };
        if !answered {
            entry.due = now + REPAIR_TICK;
            return false;
        }
        if entry.may_land && !entry.confirming {
            entry.confirming = true;
            entry.due = now + self.grace;
            return false;
        }
        queue.take(due.number, &due.server, &due.key);
        if queue.age.len() < self.capacity {
            queue.full = false;
        }
        self.pending.store(queue.age.len(), Ordering::Release);
        self.repaired.fetch_add(1, Ordering::Relaxed);
        true
    }

    /// A later write of `key` was applied on `server`: a repair for a missed
    /// write that cannot land any more is superseded (the server holds the
    /// newest value) and counted as done.
    fn superseded(&self, server: &str, key: &[u8]) {
        if self.pending.load(Ordering::Acquire) == 0 {
            return;
        }
        let mut queue = self.queue.lock();
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
        self.pending.store(queue.age.len(), Ordering::Release);
        self.repaired.fetch_add(1, Ordering::Relaxed);
    }

    /// Forgets a due entry whose server left the topology (nothing reads it).
    fn forget(&self, due: &Due) {
        let mut queue = self.queue.lock();
        queue.take(due.number, &due.server, &due.key);
        self.pending.store(queue.age.len(), Ordering::Release);
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
        let (dropped, became_full) = repairs.push(server, group, key, may_land, now());
        if dropped > 0 {
            repairs.dropped.fetch_add(dropped, Ordering::Relaxed);
            if became_full {
                let capacity = repairs.capacity;
                self.inner
                    .pool
                    .events()
                    .emit(|| Event::RepairsDropped { capacity });
            }
        }
        repairs.wake.notify_one();
        if !repairs.draining.swap(true, Ordering::AcqRel) {
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

    /// Sends one due repair's delete; whether the server answered it.
    async fn repair(&self, due: &Due) -> Option<bool> {
        let snap = self.snapshot();
        let server = snap.server_by_name(&due.server).ok()?;
        let group = snap.group_id(&due.group).ok()?;
        let target = Target {
            group,
            server,
            slot: (self.rotation() as usize) % snap.topology.server_slots(server).max(1),
        };
        let key = Key::new(&due.key).expect("queued as a valid wire key");
        let request = Request::Delete {
            key,
            noreply: false,
        };
        let reply = self.exec(&snap, target, &request, Attempt::Repair).await;
        Some(matches!(
            reply,
            Ok(Some(Response::Deleted | Response::NotFound))
        ))
    }
}

/// The drain task: sends due repairs, round after round, while any are
/// queued and some handle of the client lives.
async fn drain(client: Weak<Inner>, repairs: Arc<Repairs>, timeout: Duration) {
    loop {
        {
            let Some(inner) = client.upgrade() else {
                repairs.draining.store(false, Ordering::Release);
                return;
            };
            let client = Client::background(inner, timeout);
            let due = repairs.due(now());
            let sent: Vec<BoxFuture<'_, Option<bool>>> = due
                .iter()
                .map(|d| Box::pin(client.repair(d)) as BoxFuture<'_, _>)
                .collect();
            let answers = join_all(sent).await;
            let now = now();
            for (due, answer) in due.iter().zip(answers) {
                match answer {
                    None => repairs.forget(due),
                    Some(answered) => {
                        repairs.answered(due, answered, now);
                    }
                }
            }
            client.inner.settled.notify_waiters();
        }
        let Some(next) = repairs.next_due() else {
            repairs.draining.store(false, Ordering::Release);
            // An entry queued after the check above finds no task: take the
            // role back for it.
            if repairs.pending.load(Ordering::Acquire) == 0
                || repairs.draining.swap(true, Ordering::AcqRel)
            {
                return;
            }
            continue;
        };
        let wait = next.saturating_duration_since(now()).min(REPAIR_TICK);
        if !wait.is_zero() {
            let _ = tokio::time::timeout(wait, repairs.wake.notified()).await;
        }
    }
}
