//! The repair queue's two ends on the client: queueing a repair when a write
//! misses, and the drain task that sends the deletes.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use memgroup_proto::{Key, Request, Response};
use memgroup_topology::Target;

use super::{Answer, Due, REPAIR_TICK, Repairs};
use crate::client::trace::Attempt;
use crate::client::{Client, Inner};
use crate::clock::now;
use crate::error::Error;
use crate::events::Event;
use crate::join::{BoxFuture, join_all};

impl Client {
    /// Queues a repair of the wire key `key` on `server` (of `group`), whose
    /// write failed with `error`, and starts the drain task if none runs.
    pub(crate) fn queue_repair(
        &self,
        server: &Arc<str>,
        group: &str,
        key: &[u8],
        write: u64,
        error: Option<&Error>,
        keep: Option<(u64, u64)>,
    ) {
        let repairs = &self.inner.repairs;
        if repairs.capacity == 0 {
            return;
        }
        // A write handed over and unanswered may sit in the server's socket; one sent to
        // a failover replacement (no error) or refused cannot land there.
        let may_land = error.is_some_and(Error::may_have_applied);
        let missed = super::Missed {
            write,
            may_land,
            keep,
        };
        let pushed = repairs.push(server, group, key, missed, now());
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
            self.start_drain();
        }
    }

    /// The held repair of write `write` of `key` on `server` (see
    /// [`Repairs::hold`](super::Repairs::hold)): queued when the write
    /// `landed` somewhere, dropped when it did not.
    pub(crate) fn unhold_repair(&self, server: &Arc<str>, key: &[u8], write: u64, landed: bool) {
        let held = self.inner.repairs.unhold(server, key, write);
        if let Some(held) = held.filter(|_| landed) {
            self.queue_repair(server, &held.group, key, write, None, held.keep);
        }
    }

    /// Starts the drain task (the queue's `draining` role was just taken),
    /// or gives the role back when no runtime is there to run it (a client
    /// built outside one: its first repair queued starts it).
    pub(crate) fn start_drain(&self) {
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(drain(
                    Arc::downgrade(&self.inner),
                    self.inner.repairs.clone(),
                    self.timeout(),
                ));
            }
            Err(_) => self.inner.repairs.queue.write().draining = false,
        }
    }

    /// Takes the repairs a dead client left in the journal (see
    /// [`journal`](super::journal)): queued here, done in the background.
    pub(crate) fn adopt_journal(&self) {
        let snap = self.snapshot();
        let known = |name: &str| {
            snap.server_by_name(name)
                .ok()
                .map(|id| snap.name(id).clone())
        };
        if self.inner.repairs.adopt(known, now()) {
            self.start_drain();
        }
    }

    /// The repair journal's directory, when the client has one
    /// ([`ClientBuilder::repair_journal`](crate::ClientBuilder::repair_journal)).
    pub fn repair_journal(&self) -> Option<&std::path::Path> {
        self.inner
            .repairs
            .journal
            .as_ref()
            .map(super::journal::Journal::dir)
    }

    /// Every repair this client still owes: queued (in the order queued),
    /// and journaled for servers outside its topology. Each such server's
    /// copy of the key may be stale until the repair is done.
    pub fn owed_repairs(&self) -> Vec<super::journal::OwedRepair> {
        self.inner.repairs.owed()
    }

    /// Write number `write` of the wire key `key` was applied on `server`,
    /// its copy there of CAS `receipt` when the reply said.
    pub(crate) fn write_applied(&self, server: &str, key: &[u8], write: u64, receipt: Option<u64>) {
        self.inner.repairs.superseded(server, key, write, receipt);
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
        let key = Key::new_raw(&due.key).expect("queued as a valid wire key");
        if !self.inner.converge {
            // Servers without meta commands: a plain delete.
            let request = Request::Delete {
                key,
                noreply: false,
            };
            return match self.exec(&snap, target, &request, Attempt::Repair).await {
                Ok(Some(Response::Deleted | Response::NotFound)) => Answer::Done,
                _ => Answer::Later,
            };
        }
        // The copy there now, by its CAS: absent, or this client's own later
        // write (its receipt), is in line; any other is deleted by that CAS,
        // so a copy written after this read is never touched.
        let cas = match self.cas_at(&snap, target, &due.key).await {
            Ok(None) => return Answer::Done,
            Ok(Some(cas)) => cas,
            Err(_) => return Answer::Later,
        };
        if due.keep == Some(cas) {
            return Answer::Done;
        }
        match self.delete_if_cas(&snap, target, &due.key, cas).await {
            Ok(None) => Answer::Done,
            Ok(Some(m))
                if matches!(
                    m.status,
                    memgroup_proto::MetaStatus::Hd | memgroup_proto::MetaStatus::Nf
                ) =>
            {
                Answer::Done
            }
            // Changed since the read (`EX`), or no answer: read again.
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
            repairs.sync_journal(now);
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
