//! The repair queue: a write or delete that did not reach a key's own server
//! in some group — the server dead or in backoff, a broken connection, a
//! timeout, or the write sent to a failover replacement instead — becomes a
//! repair of that key on that server, retried until the server answers: the
//! copy there is read by its CAS (`me k`) and, unless it is absent or this
//! client's own later write, deleted by that CAS (`md k C<cas>`), so a copy
//! written after the read is never touched. (With
//! [`ClientBuilder::converge`](crate::ClientBuilder::converge) off, for
//! servers without meta commands, a plain `delete`.) A group then holds
//! the newest value or nothing, never the copy the missed write should have
//! replaced.
//!
//! - **After the missed write could still land.** A `set` handed to a
//!   stalled server's connection and not answered — timed out, or cut off
//!   when the server was marked down or the connection broke
//!   ([`Error::may_have_applied`](crate::Error::may_have_applied)) — may sit
//!   in the server's socket and be applied when it resumes, after a
//!   repair sent on a new connection. So such a repair runs twice: once the
//!   server answers again, and a confirming pass a grace period later
//!   ([`ClientBuilder::repair_grace`](crate::ClientBuilder::repair_grace)),
//!   by when the old socket's bytes have been read.
//! - **Newest or nothing.** Writes are numbered as they start. A
//!   part that misses ends — and queues its repair — when its timeout fires,
//!   possibly after a later write of the key was applied on that server; so
//!   every part registers with the key's own server while it runs
//!   ([`inflight`]), and a miss that failed outright queues nothing when a
//!   later write was applied there meanwhile. A write applied there later
//!   supersedes a queued repair of an older one. Not so for a write that
//!   may have been applied unanswered: it may still land after the later
//!   write, so its repair stands, keeping the later write's copy (the CAS
//!   its reply carried) and deleting any other. A repair never removes a
//!   value this client wrote after the write it repairs; a copy another
//!   process wrote may be deleted (a miss for its readers, never a stale
//!   copy).
//! - **Only for a write that exists.** A write no server took — every
//!   group's part passed over, unsent, or refused with an error — changed
//!   no copy, so it owes no repair: a part that surely did not land queues
//!   its repair *held* (never due, yet superseded by a later write applied
//!   there as any other) until another part reaches a server or may still
//!   land (`Landing` in `write/op.rs`); when none does, it is dropped. A
//!   client that wrongly takes every server for dead thus deletes nobody's
//!   copies when they come back. (Batches still repair each miss.)
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
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use parking_lot::{Mutex, RwLock};

/// How often the drain task looks for due repairs.
pub(crate) const REPAIR_TICK: Duration = Duration::from_millis(100);

/// Deletes sent per round of the drain task.
const ROUND: usize = 256;

/// The repair queue's counters, in [`Health::repairs`](crate::Health::repairs).
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
    /// Repairs held (`Queue::held`).
    holding: AtomicUsize,
    repaired: AtomicU64,
    dropped: AtomicU64,
    /// Writes in flight per server and key ([`inflight`]).
    pub(crate) inflight: Arc<Inflight>,
    /// Numbers writes as they start.
    writes: AtomicU64,
    /// The highest write number started per bucket of keys ([`MARKS`]):
    /// lets a read repair tell that a write of its key began since it read.
    marks: Box<[AtomicU64]>,
    /// Writes in flight per bucket: one that began before a read may still
    /// be landing in the groups the read did not see it in.
    writing: Box<[AtomicU32]>,
    /// Where repairs outlive the process, when on ([`journal`]).
    pub(crate) journal: Option<journal::Journal>,
    /// Journaled repairs of servers outside the topology: kept for a client
    /// that has them, never done or dropped here.
    foreign: Mutex<Vec<journal::OwedRepair>>,
    /// When the journal was last synced.
    synced: Mutex<Option<Instant>>,
}

/// A write in flight, counted in its key's bucket until dropped.
#[derive(Debug)]
pub(crate) struct Writing {
    repairs: Arc<Repairs>,
    bucket: usize,
    /// The key's digest ([`inflight::digest`]), for its parts' registration.
    digest: u64,
}

impl Writing {
    /// The written key's digest, computed once per write.
    pub(crate) fn digest(&self) -> u64 {
        self.digest
    }
}

impl Drop for Writing {
    fn drop(&mut self) {
        self.repairs.writing[self.bucket].fetch_sub(1, Ordering::AcqRel);
    }
}

/// Buckets of [`Repairs::marks`]: 32 KiB per client. Keys sharing a bucket
/// make a read repair skip now and then, never copy a stale value.
const MARKS: usize = 4096;

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
    /// Repairs held until their write is known to have landed somewhere
    /// (`Landing` in `write/op.rs`), apart from the queue: never due, never
    /// merged into an entry, superseded by a later write applied there as
    /// entries are; queued when the write landed, dropped when it did not.
    held: HashMap<(Arc<str>, Box<[u8]>), Held>,
}

#[derive(Debug)]
struct Entry {
    number: u64,
    /// A group the server belongs to (for the request's span).
    group: Arc<str>,
    /// The number of the newest write it repairs: a write applied there
    /// with a higher number supersedes it.
    write: u64,
    due: Instant,
    /// The missed write may have been applied (handed over, unanswered): it may still be applied from a stalled
    /// server's socket, so a later write does not supersede the repair and
    /// a second delete confirms it after the grace period.
    may_land: bool,
    /// The first delete was answered: the next one confirms.
    confirming: bool,
    /// The newest later write of this client applied there (its number,
    /// and the CAS its copy got): a copy of that CAS is in line, not stale.
    keep: Option<(u64, u64)>,
}

/// A due repair, as the drain task sends it.
struct Due {
    number: u64,
    server: Arc<str>,
    group: Arc<str>,
    key: Box<[u8]>,
    /// The CAS of this client's own later copy there, which stays.
    pub(super) keep: Option<u64>,
}

/// The write a repair is for.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Missed {
    /// Its number (0: older than any of this client's).
    pub(crate) write: u64,
    /// Sent and not answered: it may still land.
    pub(crate) may_land: bool,
    /// A later write of this client applied there meanwhile: its number and
    /// the CAS its copy got, which the repair keeps.
    pub(crate) keep: Option<(u64, u64)>,
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
    pub(crate) fn new(
        capacity: usize,
        grace: Duration,
        journal: Option<journal::Journal>,
    ) -> Repairs {
        Repairs {
            journal,
            foreign: Mutex::default(),
            synced: Mutex::default(),
            capacity,
            grace,
            queue: RwLock::new(Queue::default()),
            pending: AtomicUsize::new(0),
            holding: AtomicUsize::new(0),
            repaired: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            inflight: Arc::default(),
            writes: AtomicU64::new(1),
            marks: (0..MARKS).map(|_| AtomicU64::new(0)).collect(),
            writing: (0..MARKS).map(|_| AtomicU32::new(0)).collect(),
        }
    }

    /// Whether repairs are on.
    pub(crate) fn enabled(&self) -> bool {
        self.capacity > 0
    }

    /// The next write's number (ascending as writes start), for a write of
    /// the wire key `key`, whose bucket it marks.
    pub(crate) fn number_write(&self, key: &[u8]) -> u64 {
        self.number_digest(inflight::digest(key))
    }

    /// [`Repairs::number_write`] for the key of `digest`.
    fn number_digest(&self, digest: u64) -> u64 {
        let number = self.writes.fetch_add(1, Ordering::AcqRel);
        self.marks[digest as usize % MARKS].fetch_max(number, Ordering::AcqRel);
        number
    }

    /// [`Repairs::number_write`], the write counted in flight until the
    /// guard returned is dropped.
    pub(crate) fn start_write(self: &Arc<Self>, key: &[u8]) -> (u64, Writing) {
        let digest = inflight::digest(key);
        let number = self.number_digest(digest);
        let bucket = digest as usize % MARKS;
        self.writing[bucket].fetch_add(1, Ordering::AcqRel);
        (
            number,
            Writing {
                repairs: self.clone(),
                bucket,
                digest,
            },
        )
    }

    /// The number the next write will get: a read taking it can later ask
    /// [`Repairs::written_since`].
    pub(crate) fn reading(&self) -> u64 {
        self.writes.load(Ordering::Acquire)
    }

    /// Whether a write of `key` (or of a key sharing its bucket) started at
    /// or after [`Repairs::reading`] returned `since`, or is still in flight.
    pub(crate) fn written_since(&self, key: &[u8], since: u64) -> bool {
        let bucket = inflight::digest(key) as usize % MARKS;
        self.writing[bucket].load(Ordering::Acquire) > 0
            || self.marks[bucket].load(Ordering::Acquire) >= since
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

    /// Queues a repair of `key` on `server` (a member of `group`) for the
    /// `missed` write; one already queued starts over, since the write that
    /// just missed may land after its deletes.
    fn push(
        &self,
        server: &Arc<str>,
        group: &str,
        key: &[u8],
        missed: Missed,
        now: Instant,
    ) -> Pushed {
        let Missed {
            write,
            may_land,
            keep,
        } = missed;
        let mut queue = self.queue.write();
        let number = queue.next;
        queue.next += 1;
        let mut entry = Entry {
            number,
            group: group.into(),
            write,
            due: now,
            may_land,
            confirming: false,
            keep,
        };
        let keys = queue.servers.entry(server.clone()).or_default();
        if let Some(old) = keys.remove(key) {
            entry.may_land |= old.may_land;
            entry.write = entry.write.max(old.write);
            // A copy kept for a write newer than every miss still stands.
            let kept = [entry.keep, old.keep].into_iter().flatten().max();
            entry.keep = kept.filter(|&(kept, _)| kept > entry.write);
            queue.age.remove(&old.number);
        }
        if let Some(journal) = &self.journal {
            journal.added(&journal::OwedRepair {
                server: server.to_string(),
                group: group.to_string(),
                key: key.to_vec(),
                may_land: entry.may_land,
            });
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
                        keep: e.keep.map(|(_, cas)| cas),
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
                if let Some(journal) = &self.journal {
                    journal.done(&due.server, &due.key);
                }
            }
            // Kept in the journal for a client whose topology has it.
            Answer::Gone => {
                let record = journal::OwedRepair {
                    server: due.server.to_string(),
                    group: entry.group.to_string(),
                    key: due.key.to_vec(),
                    may_land: entry.may_land,
                };
                self.foreign.lock().push(record);
            }
        }
        queue.take(due.number, &due.server, &due.key);
        if queue.age.len() < self.capacity {
            queue.full = false;
        }
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

mod drain;
mod inflight;
pub(crate) mod journal;
mod owed;

pub(crate) use inflight::{Inflight, Tracking, digest};
pub(crate) use owed::Held;
