//! Concurrent writers end in agreement. Two writers of one key, each
//! sending its value to every group at once, can reach the groups in
//! opposite orders: with no fault at all, one zone ends with A's value and
//! another with B's, for good. memcached 1.6.18 cannot order a write across
//! servers, but it can tell one copy from another: `ms … c` returns the CAS
//! unique it stored (the write's *receipt* in that group), `me k` (meta
//! debug) reads a copy's CAS without its value, and `md k C<cas>` deletes
//! only that exact copy. (Not `mg k c`: on an invalidated item, any `mg`
//! takes the one win token that [`Client::get_or_fill`] hands its refiller.)
//!
//! So a plain store to several groups keeps each group's receipt, and once
//! every group has answered a check runs in the background (never in front
//! of the caller), with the arbiter's copy as the judge
//! ([`Topology::arbiter`](memgroup_topology::Topology::arbiter), the group
//! conditional writes are decided by):
//! - the arbiter still holds this write (its CAS is the receipt): every
//!   other group whose copy is not this write's has that copy deleted, by
//!   the CAS just read, if the arbiter still holds this write when read
//!   again and no write of this client of the key is in flight to it;
//! - it holds something else: this write lost there, so its own copies
//!   elsewhere are deleted, by their receipts;
//! - it holds nothing: a later write of this client there (a delete) means
//!   this one lost, as above; else the copy went to another process's
//!   delete or repair, a concurrent write, and this write's copies stay
//!   where every copy present elsewhere is its own (they agree: deleting
//!   them would turn another process's repair, which may cost a miss, into
//!   the loss of the write everywhere), and go otherwise;
//! - the arbiter missed this write (no receipt: its copy there is the
//!   repair queue's): judged as when it holds nothing.
//!
//! Every delete names the exact copy it judged, so a copy written after the
//! check read it is never touched; that copy's writer runs its own check.
//! Whatever order the writes land in, after the writers stop the last
//! write at the arbiter finds itself the winner and clears every other
//! value, and every other write finds itself a loser and clears its own:
//! each group holds the arbiter's value or nothing. A group that did not
//! answer a write gives no receipt; its copy is the repair queue's
//! ([`crate::client::repair`]). A check whose reads fail does nothing and
//! runs again a little later (up to three times).
//!
//! Not covered: writes from clients outside memgroup (they keep no
//! receipts), binary (base64) keys, the warmer's and
//! migration's fills, and servers without meta commands (their classic
//! `set` gives no receipt, so the check has nothing to judge there).

use std::sync::Arc;

use memgroup_proto::Response;
use memgroup_topology::{GroupId, Target};
use parking_lot::Mutex;

use super::MultiWrite;
use super::op::Job;
use crate::client::Client;
use crate::client::exec::own_target;
use crate::join::{BoxFuture, join_all};
use crate::options::WriteOptions;
use crate::pool::Snapshot;

/// When a check runs: at once, then again after each wait while its reads
/// fail.
const CHECK_RETRIES: [std::time::Duration; 4] = [
    std::time::Duration::ZERO,
    std::time::Duration::from_millis(200),
    std::time::Duration::from_secs(1),
    std::time::Duration::from_secs(3),
];

/// A write's receipts, gathered as its groups answer.
#[derive(Debug)]
pub(super) struct Receipts {
    /// Parts still to answer, and the receipts so far.
    state: Mutex<(usize, Vec<Receipt>)>,
}

/// The CAS a group's copy got from this write.
#[derive(Debug, Clone, Copy)]
struct Receipt {
    group: GroupId,
    cas: u64,
}

impl Receipts {
    /// For a write of `parts` groups.
    pub(super) fn new(parts: usize) -> Receipts {
        Receipts {
            state: Mutex::new((parts, Vec::with_capacity(parts))),
        }
    }

    /// One part ended, with the CAS its group stored (if it was applied on
    /// the key's own server); every receipt once it was the last.
    fn settle(&self, receipt: Option<Receipt>) -> Option<Vec<Receipt>> {
        let mut state = self.state.lock();
        state.1.extend(receipt);
        state.0 = state.0.saturating_sub(1);
        (state.0 == 0).then(|| std::mem::take(&mut state.1))
    }
}

/// The CAS unique a store's reply carries (`HD c<cas>`).
pub(super) fn receipt_of(reply: &Option<Response>) -> Option<u64> {
    match reply {
        Some(Response::Meta(m)) if m.status == memgroup_proto::MetaStatus::Hd => m.flag_u64(b'c'),
        _ => None,
    }
}

impl Client {
    /// One part of `job` ended in `group`, applied on the key's own server
    /// with CAS `receipt` (if so); the last one starts the check.
    pub(super) fn converge_part(
        &self,
        snap: &Arc<Snapshot>,
        job: &Arc<Job>,
        group: GroupId,
        receipt: Option<u64>,
    ) {
        let Some(receipts) = &job.receipts else {
            return;
        };
        let receipt = receipt.map(|cas| Receipt { group, cas });
        let Some(all) = receipts.settle(receipt) else {
            return;
        };
        let background = self.inner.background();
        let (client, snap, job) = (self.clone(), snap.clone(), job.clone());
        tokio::spawn(async move {
            // A check whose reads failed runs again a little later (the
            // copies it could not read may disagree for good otherwise).
            for wait in CHECK_RETRIES {
                tokio::time::sleep(wait).await;
                if client.check(&snap, &job, &all).await {
                    break;
                }
            }
            drop(background);
        });
    }

    /// [`Client::set_multi`] with several groups: a quiet batch returns no
    /// CAS receipts, so each key goes as a single `set` (all at once,
    /// pipelined), each outcome settled as a batch reports it.
    pub(super) async fn set_each(
        &self,
        keys: &[&[u8]],
        values: &[&[u8]],
        options: WriteOptions,
    ) -> Result<MultiWrite, crate::Error> {
        let snap = self.snapshot();
        for key in keys {
            self.wire_key(&snap, key)?;
        }
        let sets: Vec<BoxFuture<'_, _>> = keys
            .iter()
            .zip(values)
            .map(|(k, v)| {
                let set = async move {
                    match self.set(k, v, options).await {
                        Ok(outcome) => Ok(outcome.settled().await),
                        failed => failed,
                    }
                };
                Box::pin(set) as BoxFuture<'_, _>
            })
            .collect();
        let mut written = MultiWrite::default();
        for (key, outcome) in keys.iter().zip(join_all(sets).await) {
            written.keys.push((key.to_vec(), outcome));
        }
        Ok(written)
    }

    /// The check of a write whose groups all answered (see the module doc);
    /// `false` when a read failed before it could judge.
    async fn check(&self, snap: &Snapshot, job: &Job, receipts: &[Receipt]) -> bool {
        let arbiter = snap.topology.arbiter();
        let mine = receipts.iter().find(|r| r.group == arbiter);
        // Each group's copy under its own key, at its key's own server.
        let key = |group| job.key_of(group);
        let at = |group| own_target(snap, group, key(group));
        // The arbiter missed this write: its copy there is the repair
        // queue's (deleted, unless a later write of this client stands),
        // so it judges nothing, and the other groups are judged as when
        // the arbiter holds nothing. (Two writers the arbiter both missed,
        // landing in opposite orders elsewhere, left two zones different
        // for good when such a write went unchecked.)
        let held = match mine {
            Some(_) => match self.cas_at(snap, at(arbiter), key(arbiter)).await {
                Ok(held) => held,
                Err(_) => return false,
            },
            None => None,
        };
        let mut deleted = 0;
        // Whether every copy of the groups this write reached is its own or
        // absent; `None` when a read failed (then nothing is judged).
        let mine_everywhere = async || {
            for receipt in receipts.iter().filter(|r| r.group != arbiter) {
                match self
                    .cas_at(snap, at(receipt.group), key(receipt.group))
                    .await
                {
                    Ok(None) => {}
                    Ok(Some(cas)) if cas == receipt.cas => {}
                    Ok(Some(_)) => return Some(false),
                    Err(_) => return None,
                }
            }
            Some(true)
        };
        let lost = match (held, mine) {
            (Some(cas), Some(mine)) => cas != mine.cas,
            // Nothing at the arbiter, or missed by it: the copies judge. A
            // later write of this client (a delete there) shows in them; an
            // absent copy may be another process's delete or repair, a
            // concurrent write either way: this write's copies stand where
            // every copy present is its own (they agree), any other copy
            // means a race, lost.
            _ => match mine_everywhere().await {
                Some(mine) => !mine,
                None => return false,
            },
        };
        if lost {
            // A loser: its own copies go, wherever they still stand.
            for receipt in receipts.iter().filter(|r| r.group != arbiter) {
                deleted += u64::from(
                    self.deleted(snap, at(receipt.group), key(receipt.group), receipt.cas)
                        .await,
                );
            }
        } else if let Some(mine) = mine.filter(|_| held.is_some()) {
            // The winner: every other copy that is not this write's goes,
            // while the arbiter holds this write. Such a copy was stored
            // after this write there (a server's CAS uniques only grow), so
            // it may be the next winner on its way to the arbiter: not
            // while a write of this client of the key is in flight to the
            // arbiter's server (the winner once deleted this client's own
            // next write, acknowledged, in two zones, and the arbiter's
            // server died next), and only if the arbiter, read again,
            // still holds this write.
            let on_its_way = || {
                self.inner
                    .repairs
                    .inflight
                    .busy(at(arbiter).server, job.digest_of(arbiter))
            };
            for receipt in receipts.iter().filter(|r| r.group != arbiter) {
                if let Ok(Some(cas)) = self
                    .cas_at(snap, at(receipt.group), key(receipt.group))
                    .await
                    && cas != receipt.cas
                    && !on_its_way()
                    && matches!(self.cas_at(snap, at(arbiter), key(arbiter)).await, Ok(Some(a)) if a == mine.cas)
                {
                    deleted += u64::from(
                        self.deleted(snap, at(receipt.group), key(receipt.group), cas)
                            .await,
                    );
                }
            }
        }
        // Else: agreeing copies of this write, the arbiter's gone: kept.
        if deleted > 0 {
            self.inner
                .converged
                .fetch_add(deleted, std::sync::atomic::Ordering::Relaxed);
        }
        true
    }
}

impl Client {
    /// Whether the copy at `target` was deleted for still having CAS `cas`.
    async fn deleted(&self, snap: &Snapshot, target: Target, key: &[u8], cas: u64) -> bool {
        matches!(
            self.delete_if_cas(snap, target, key, cas).await,
            Ok(Some(m)) if m.status == memgroup_proto::MetaStatus::Hd
        )
    }
}
