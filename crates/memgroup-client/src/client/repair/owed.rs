//! A later write superseding a repair, the repairs still owed, and the
//! journal: what is synced, compacted, listed and taken from a dead
//! client's segments.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use super::{Repairs, journal};

/// A held repair: its write, group and the later copy it keeps.
#[derive(Debug, Clone)]
pub(crate) struct Held {
    pub(crate) write: u64,
    pub(crate) group: Arc<str>,
    pub(crate) keep: Option<(u64, u64)>,
}

impl Repairs {
    /// Whether any repair is queued or held (else no copy awaits one).
    pub(crate) fn awaiting(&self) -> bool {
        self.pending.load(Ordering::Acquire) > 0 || self.holding.load(Ordering::Acquire) > 0
    }

    /// Whether `server`'s copy of `key` awaits a repair (reads pass it over).
    pub(crate) fn blocks(&self, server: &str, key: &[u8]) -> bool {
        if !self.awaiting() {
            return false;
        }
        let queue = self.queue.read();
        queue
            .servers
            .get(server)
            .is_some_and(|keys| keys.contains_key(key))
            || (!queue.held.is_empty() && queue.held.contains_key(&(server.into(), key.into())))
    }

    /// Holds the repair of write `held.write` of `key` on `server` until
    /// [`Repairs::unhold`].
    pub(crate) fn hold(&self, server: &Arc<str>, key: &[u8], held: Held) {
        let mut queue = self.queue.write();
        let at = (server.clone(), key.into());
        let newer = queue.held.get(&at).is_some_and(|h| h.write > held.write);
        if !newer {
            queue.held.insert(at, held);
        }
        self.holding.store(queue.held.len(), Ordering::Release);
    }

    /// The held repair of write `write` of `key` on `server`, taken out
    /// (`None` when superseded or held for another write meanwhile).
    pub(crate) fn unhold(&self, server: &Arc<str>, key: &[u8], write: u64) -> Option<Held> {
        let mut queue = self.queue.write();
        let at = (server.clone(), Box::<[u8]>::from(key));
        let held = if queue.held.get(&at).is_some_and(|h| h.write == write) {
            queue.held.remove(&at)
        } else {
            None
        };
        self.holding.store(queue.held.len(), Ordering::Release);
        held
    }

    /// Whether a repair of a write older than `write` is queued (read lock
    /// only: the common answer during an outage is no).
    fn blocks_older(&self, server: &str, key: &[u8], write: u64) -> bool {
        self.queue
            .read()
            .servers
            .get(server)
            .and_then(|keys| keys.get(key))
            .is_some_and(|e| e.write < write)
    }

    /// Write `write` of `key` was applied on `server`, its copy of CAS
    /// `receipt` when known: a repair for an older missed write that cannot
    /// land any more is superseded (the server holds the newest value) and
    /// counted as done. One whose write may have been applied unanswered is
    /// not: that write may still land after this one (from another
    /// connection of a server that was stalled). Its repair stands, keeping
    /// this write's copy (by its CAS) and deleting any other, so that
    /// server ends with the newest value or nothing, never the older one.
    pub(super) fn superseded(&self, server: &str, key: &[u8], write: u64, receipt: Option<u64>) {
        if self.holding.load(Ordering::Acquire) > 0 {
            let mut queue = self.queue.write();
            let at = (Arc::<str>::from(server), Box::<[u8]>::from(key));
            if queue.held.get(&at).is_some_and(|h| h.write < write) {
                queue.held.remove(&at);
                self.holding.store(queue.held.len(), Ordering::Release);
            }
        }
        if self.pending.load(Ordering::Acquire) == 0 || !self.blocks_older(server, key, write) {
            return;
        }
        let mut queue = self.queue.write();
        let Some(entry) = queue
            .servers
            .get_mut(server)
            .and_then(|keys| keys.get_mut(key))
            .filter(|e| e.write < write)
        else {
            return;
        };
        if entry.may_land {
            if entry.keep.is_none_or(|(kept, _)| kept < write) {
                entry.keep = receipt.map(|cas| (write, cas));
            }
            return;
        }
        let number = entry.number;
        self.remove_entry(&mut queue, number, server, key);
        self.repaired.fetch_add(1, Ordering::Relaxed);
    }

    /// Takes entry `number` of `key` on `server` out of the queue (and the
    /// journal).
    fn remove_entry(&self, queue: &mut super::Queue, number: u64, server: &str, key: &[u8]) {
        queue.take(number, server, key);
        if queue.age.len() < self.capacity {
            queue.full = false;
        }
        self.pending.store(queue.age.len(), Ordering::Release);
        if let Some(journal) = &self.journal {
            journal.done(server, key);
        }
    }

    /// Syncs the journal if it was not synced for [`journal::SYNC_EVERY`].
    pub(crate) fn sync_journal(&self, now: Instant) {
        let Some(journal) = &self.journal else {
            return;
        };
        let mut synced = self.synced.lock();
        if synced.is_none_or(|at| now.saturating_duration_since(at) >= journal::SYNC_EVERY) {
            journal.sync();
            *synced = Some(now);
        }
    }

    /// Every repair still owed — queued, and journaled for servers outside
    /// the topology — as the journal records them.
    pub(crate) fn owed(&self) -> Vec<journal::OwedRepair> {
        self.owed_in(&self.queue.read())
    }

    /// [`Repairs::owed`] with the queue's lock held.
    fn owed_in(&self, queue: &super::Queue) -> Vec<journal::OwedRepair> {
        let mut owed: Vec<journal::OwedRepair> = queue
            .age
            .values()
            .map(|(server, key)| {
                let entry = &queue.servers[server][key];
                journal::OwedRepair {
                    server: server.to_string(),
                    group: entry.group.to_string(),
                    key: key.to_vec(),
                    may_land: entry.may_land,
                }
            })
            .collect();
        owed.extend(self.foreign.lock().iter().cloned());
        owed
    }

    /// Rewrites the journal with only what is still owed; the repairs that
    /// are, when any.
    pub(crate) fn compact_journal(&self) -> std::io::Result<Vec<journal::OwedRepair>> {
        // The queue's lock is held through the rewrite: a repair done
        // meanwhile would record its `D` in the segment being replaced, and
        // the new one would keep its `A` (lock order as a repair's: queue,
        // then journal).
        let queue = self.queue.read();
        let owed = self.owed_in(&queue);
        if let Some(journal) = &self.journal {
            journal.compact(&owed)?;
        }
        Ok(owed)
    }

    /// Takes a dead client's journaled repairs: those of servers in the
    /// topology (`known`) queued here, due now (journaled in this client's
    /// own segment), the others kept. Whether a drain task must start.
    pub(crate) fn adopt(&self, known: impl Fn(&str) -> Option<Arc<str>>, now: Instant) -> bool {
        let Some(journal) = &self.journal else {
            return false;
        };
        let mut start = false;
        for record in journal.claim() {
            match known(&record.server) {
                Some(server) => {
                    // Number 0: older than any write of this client.
                    let pushed = self.push(
                        &server,
                        &record.group,
                        &record.key,
                        super::Missed {
                            write: 0,
                            may_land: record.may_land,
                            keep: None,
                        },
                        now,
                    );
                    start |= pushed.start_drain;
                }
                None => {
                    journal.added(&record);
                    self.foreign.lock().push(record);
                }
            }
        }
        start
    }
}
