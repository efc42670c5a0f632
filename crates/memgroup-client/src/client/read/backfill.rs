//! Bringing the groups a read found out of line back in line: read repair
//! after a fallback hit ([`ClientBuilder::read_repair`](crate::ClientBuilder::read_repair));
//! its copying and conditional deletes also serve the consistent read
//! ([`super::consistent`]).
//!
//! Both copy a value only in `add` mode (`ms … ME`, never over a copy a
//! write put there meanwhile), with the flags and remaining TTL of the copy
//! read (`mg … v f t c`), never from or into a copy awaiting a repair. A
//! write of the key that starts in this client after the read cancels the
//! copy, or — when it started while the copy was on its way — has the copies
//! made deleted again, each only if it is still the one copied (`md … C`,
//! with the CAS unique the copy got), so a replica never ends older than the
//! write and a newer value is never deleted. Deletes of differing copies
//! are conditional the same way, on the CAS unique read. A write from
//! another process in that window is caught by the arbiter: read repair
//! copies only the arbiter's copy, or into groups that include it, and
//! once added deletes its copies again (by CAS) if the arbiter no longer
//! holds what it copied. (The consistent read copies its majority winner
//! without that check.)

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use memgroup_proto::{Key, MetaFlag, MetaStatus, Request, Response, SetMode};
use memgroup_topology::Target;

use super::engine::KeyRead;
use crate::client::trace::Attempt;
use crate::client::{Client, unexpected};
use crate::error::{Error, ErrorKind};
use crate::join::{BoxFuture, join_all};
use crate::options::Expiry;
use crate::pool::Snapshot;

/// The flags a copy is read with to be copied: value, client flags, TTL,
/// CAS unique.
const COPY_FLAGS: [MetaFlag; 4] = [
    MetaFlag::ReturnValue,
    MetaFlag::ReturnFlags,
    MetaFlag::ReturnTtl,
    MetaFlag::ReturnCas,
];

/// Background tasks beyond which a read repair is not started.
const MAX_REPAIR_TASKS: usize = 1024;

/// One copy as read for copying: value, flags, the `exptime` that gives its
/// remaining TTL, and its CAS unique on the server it was read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Copy {
    pub(super) value: Bytes,
    pub(super) flags: u32,
    pub(super) exptime: u32,
    pub(super) cas: u64,
}

/// One key a read repair brings in line.
struct Backfill {
    /// The wire key.
    key: Box<[u8]>,
    /// Where it hit.
    source: Target,
    /// Where it missed.
    missed: Vec<Target>,
}

impl Client {
    /// After a read, with read repair on: the keys that hit in a later
    /// group than one that answered with a miss are copied there, on a task
    /// of their own. `since` is [`Repairs::reading`](crate::client::repair::Repairs::reading)
    /// before the read.
    pub(super) fn read_repair<T>(
        &self,
        snap: &Arc<Snapshot>,
        reads: &[KeyRead<'_, T>],
        since: u64,
    ) {
        let fills: Vec<Backfill> = reads
            .iter()
            .filter_map(|r| {
                let (source, missed) = (r.hit_at?, r.missed.as_ref()?);
                // A copy is its raw bytes: not for a key some group's own
                // key scheme stores otherwise (another key, another
                // envelope).
                (!missed.is_empty() && r.uniform()).then(|| Backfill {
                    key: r.key.as_bytes().into(),
                    source,
                    missed: missed.clone(),
                })
            })
            .collect();
        // Best effort, bounded: with this many background tasks already
        // (a group just restarted empty, every read falling back), the
        // copies wait for a later read.
        if fills.is_empty() || self.inner.background_count() >= MAX_REPAIR_TASKS {
            return;
        }
        let (client, snap) = (self.clone(), snap.clone());
        let background = self.inner.background();
        tokio::spawn(async move {
            let _background = background;
            let copies: Vec<BoxFuture<'_, ()>> = fills
                .iter()
                .map(|fill| Box::pin(client.repair_read(&snap, fill, since)) as BoxFuture<'_, _>)
                .collect();
            join_all(copies).await;
        });
    }

    /// One key's read repair: its copy at the source read again with its
    /// TTL, then added where it missed. As writes converge on the arbiter's
    /// copy (`write/converge.rs`), so does a read repair: it copies the
    /// arbiter's copy, or another group's into groups that include the
    /// arbiter (never a copy the arbiter may disagree with into the rest);
    /// once added, if the arbiter no longer holds what was copied (the
    /// copy read there changed, or the one added there was replaced),
    /// every copy it made is deleted again by its CAS.
    async fn repair_read(&self, snap: &Snapshot, fill: &Backfill, since: u64) {
        let repairs = &self.inner.repairs;
        if repairs.written_since(&fill.key, since)
            || repairs.blocks(snap.name(fill.source.server), &fill.key)
        {
            return;
        }
        let arbiter = snap.topology.arbiter();
        let from_arbiter = fill.source.group == arbiter;
        if snap.topology.groups().len() > 1
            && !from_arbiter
            && !fill.missed.iter().any(|t| t.group == arbiter)
        {
            return;
        }
        let Ok(Some(copy)) = self.read_copy(snap, fill.source, &fill.key).await else {
            return;
        };
        let stored = self
            .copy_into(snap, &fill.key, &copy, &fill.missed, since)
            .await;
        let expected = if from_arbiter {
            Some(copy.cas)
        } else {
            stored
                .iter()
                .find(|(t, _)| t.group == arbiter)
                .map(|&(_, cas)| cas)
        };
        self.keep_if_arbiter_holds(snap, &fill.key, expected, &stored)
            .await;
    }

    /// After copies were added (`stored`): unless the arbiter still holds
    /// the copy of CAS `expected` (what was copied, read there or added
    /// there), they are deleted again by their CAS — another process wrote
    /// the key meanwhile, and the arbiter's copy is the one groups agree on.
    pub(super) async fn keep_if_arbiter_holds(
        &self,
        snap: &Snapshot,
        key: &[u8],
        expected: Option<u64>,
        stored: &[(Target, u64)],
    ) {
        if stored.is_empty() || !self.inner.converge {
            return;
        }
        let arbiter = crate::client::exec::own_target(snap, snap.topology.arbiter(), key);
        let at_arbiter = self.cas_at(snap, arbiter, key).await;
        if expected.is_none() || at_arbiter.is_ok_and(|held| held != expected) {
            let deleted = self.delete_if_unchanged(snap, key, stored).await;
            self.inner
                .read_repairs
                .fetch_sub(deleted.min(stored.len() as u64), Ordering::Relaxed);
        }
    }

    /// `mg key v f t` at `target`: the copy there, `None` when absent or
    /// about to expire.
    pub(super) async fn read_copy(
        &self,
        snap: &Snapshot,
        target: Target,
        key: &[u8],
    ) -> Result<Option<Copy>, Error> {
        let request = Request::MetaGet {
            key: Key::new_raw(key).expect("a valid wire key"),
            flags: &COPY_FLAGS,
        };
        let meta = match self
            .meta_at(snap, target, &request, Attempt::Repair)
            .await?
        {
            None => return Ok(None),
            Some(m) if m.status == MetaStatus::Va => m,
            Some(other) => return Err(unexpected(Some(&Response::Meta(other)))),
        };
        if meta.has_lease_flags() {
            // A lease stub or a stale value is no copy to spread; a win
            // this read was handed goes back to the next caller.
            self.give_back(snap, target, key, &meta).await;
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                "the copy is a lease stub or stale: not copied",
            ));
        }
        let exptime = match meta.ttl() {
            Some(-1) => 0,
            // Expiring within the second: nothing worth copying.
            Some(ttl) if ttl > 0 => {
                Expiry::After(Duration::from_secs(ttl.unsigned_abs())).exptime()?
            }
            _ => return Ok(None),
        };
        let flags = u32::try_from(meta.flag_u64(b'f').unwrap_or(0)).unwrap_or(0);
        let cas = meta.flag_u64(b'c').unwrap_or(0);
        Ok(meta.value.map(|value| Copy {
            value,
            flags,
            exptime,
            cas,
        }))
    }

    /// Adds `copy` of `key` at each of `targets` not awaiting a repair,
    /// unless a write of the key started since `since`; if one started
    /// while the copies were on their way, each copy made is deleted again
    /// if it is still there. Returns those that stayed, with the CAS each
    /// got.
    pub(super) async fn copy_into(
        &self,
        snap: &Snapshot,
        key: &[u8],
        copy: &Copy,
        targets: &[Target],
        since: u64,
    ) -> Vec<(Target, u64)> {
        let repairs = &self.inner.repairs;
        if repairs.written_since(key, since) {
            return Vec::new();
        }
        let flags = [
            MetaFlag::SetMode(SetMode::Add),
            MetaFlag::SetFlags(copy.flags),
            MetaFlag::Ttl(copy.exptime),
            MetaFlag::ReturnCas,
        ];
        let request = Request::MetaSet {
            key: Key::new_raw(key).expect("a valid wire key"),
            data: &copy.value,
            flags: &flags,
        };
        let open: Vec<Target> = targets
            .iter()
            .copied()
            .filter(|t| !repairs.blocks(snap.name(t.server), key))
            .collect();
        let adds: Vec<BoxFuture<'_, _>> = open
            .iter()
            .map(|&t| Box::pin(self.exec(snap, t, &request, Attempt::Repair)) as BoxFuture<'_, _>)
            .collect();
        let stored: Vec<(Target, u64)> = open
            .into_iter()
            .zip(join_all(adds).await)
            .filter_map(|(t, reply)| match reply {
                Ok(Some(Response::Meta(m))) if m.status == MetaStatus::Hd => {
                    Some((t, m.flag_u64(b'c').unwrap_or(0)))
                }
                _ => None,
            })
            .collect();
        if repairs.written_since(key, since) {
            // Possibly landed after that write's own copy was deleted.
            self.delete_if_unchanged(snap, key, &stored).await;
            return Vec::new();
        }
        self.inner
            .read_repairs
            .fetch_add(stored.len() as u64, Ordering::Relaxed);
        stored
    }

    /// Deletes `key` at each target whose copy still has the CAS unique
    /// given (`md … C`): a newer write there stays. Where the server cannot
    /// be asked, a repair is queued (the copy may be the older one).
    /// Returns how many were deleted.
    pub(super) async fn delete_if_unchanged(
        &self,
        snap: &Snapshot,
        key: &[u8],
        copies: &[(Target, u64)],
    ) -> u64 {
        let wire = Key::new_raw(key).expect("a valid wire key");
        let flags: Vec<[MetaFlag; 1]> = copies
            .iter()
            .map(|&(_, cas)| [MetaFlag::CompareCas(cas)])
            .collect();
        let deletes: Vec<BoxFuture<'_, _>> = copies
            .iter()
            .zip(&flags)
            .map(|(&(t, _), flags)| {
                let request = Request::MetaDelete { key: wire, flags };
                Box::pin(async move { self.exec(snap, t, &request, Attempt::Repair).await })
                    as BoxFuture<'_, _>
            })
            .collect();
        let mut deleted = 0;
        for (&(t, _), reply) in copies.iter().zip(join_all(deletes).await) {
            match reply {
                Ok(Some(Response::Meta(m))) => deleted += u64::from(m.status == MetaStatus::Hd),
                _ => {
                    let number = self.inner.repairs.number_write(key);
                    let group = snap.topology.group(t.group).name();
                    self.queue_repair(snap.name(t.server), group, key, number, None, None);
                }
            }
        }
        deleted
    }
}
