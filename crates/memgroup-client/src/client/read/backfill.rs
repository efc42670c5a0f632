//! Bringing the groups a read found out of line back in line: read repair
//! after a fallback hit ([`ClientBuilder::read_repair`](crate::ClientBuilder::read_repair)),
//! and the consistent read ([`Client::get_consistent`]).
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
//! another process in that window is not seen: that group may then hold the
//! value read until it expires or the key is written again.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use memgroup_proto::{Key, MetaFlag, MetaStatus, Request, Response, SetMode};
use memgroup_topology::{GroupId, Target};

use super::engine::KeyRead;
use crate::client::trace::Attempt;
use crate::client::{Client, unexpected};
use crate::clock::now;
use crate::error::{Error, ErrorKind};
use crate::item::Item;
use crate::join::{BoxFuture, join_all};
use crate::longkey;
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
struct Copy {
    value: Bytes,
    flags: u32,
    exptime: u32,
    cas: u64,
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

/// What one group's copy said in a consistent read.
enum Vote {
    Held(Copy),
    Absent,
    /// No answer (an error, or the server dead): no vote.
    Silent(Error),
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
                (!missed.is_empty()).then(|| Backfill {
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
    /// TTL, then added where it missed.
    async fn repair_read(&self, snap: &Snapshot, fill: &Backfill, since: u64) {
        let repairs = &self.inner.repairs;
        if repairs.written_since(&fill.key, since)
            || repairs.blocks(snap.name(fill.source.server), &fill.key)
        {
            return;
        }
        let Ok(Some(copy)) = self.read_copy(snap, fill.source, &fill.key).await else {
            return;
        };
        self.copy_into(snap, &fill.key, &copy, &fill.missed, since)
            .await;
    }

    /// `mg key v f t` at `target`: the copy there, `None` when absent or
    /// about to expire.
    async fn read_copy(
        &self,
        snap: &Snapshot,
        target: Target,
        key: &[u8],
    ) -> Result<Option<Copy>, Error> {
        let request = Request::MetaGet {
            key: Key::new(key).expect("a valid wire key"),
            flags: &COPY_FLAGS,
        };
        let reply = self.exec(snap, target, &request, Attempt::Repair).await?;
        let meta = match reply {
            Some(Response::Meta(m)) if m.status == MetaStatus::En => return Ok(None),
            Some(Response::Meta(m)) if m.status == MetaStatus::Va => m,
            other => return Err(unexpected(other.as_ref())),
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
    /// if it is still there. Returns how many stayed.
    async fn copy_into(
        &self,
        snap: &Snapshot,
        key: &[u8],
        copy: &Copy,
        targets: &[Target],
        since: u64,
    ) -> u64 {
        let repairs = &self.inner.repairs;
        if repairs.written_since(key, since) {
            return 0;
        }
        let flags = [
            MetaFlag::SetMode(SetMode::Add),
            MetaFlag::SetFlags(copy.flags),
            MetaFlag::Ttl(copy.exptime),
            MetaFlag::ReturnCas,
        ];
        let request = Request::MetaSet {
            key: Key::new(key).expect("a valid wire key"),
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
            return 0;
        }
        self.inner
            .read_repairs
            .fetch_add(stored.len() as u64, Ordering::Relaxed);
        stored.len() as u64
    }

    /// Deletes `key` at each target whose copy still has the CAS unique
    /// given (`md … C`): a newer write there stays. Where the server cannot
    /// be asked, a repair is queued (the copy may be the older one).
    /// Returns how many were deleted.
    async fn delete_if_unchanged(
        &self,
        snap: &Snapshot,
        key: &[u8],
        copies: &[(Target, u64)],
    ) -> u64 {
        let wire = Key::new(key).expect("a valid wire key");
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
                    self.queue_repair(snap.name(t.server), group, key, number, None);
                }
            }
        }
        deleted
    }

    /// Reads a key from every group that serves reads and returns the copy
    /// (value and flags) a majority of all of them holds — absence counts as
    /// a copy — or, with no majority, the arbiter's. The groups that differ
    /// are then brought in line on a task of their own: the winning value
    /// added where it was absent (with its remaining TTL), other copies
    /// deleted if unchanged since they were read (`md … C<cas>`) — unless a
    /// write of the key is in flight or began meanwhile. A group that does
    /// not answer, or answers with a lease stub or a stale value
    /// (`get_or_fill`, `invalidate`), has no vote; with no majority and no answer from the arbiter the read
    /// fails with [`ErrorKind::ServerDead`]. It costs one `mg` per group,
    /// concurrently, so a cross-zone round trip; as EVCache's
    /// `get(key, Policy)`, with the quorum taken over every group (of three,
    /// two must agree).
    ///
    /// ```no_run
    /// # async fn demo(client: memgroup_client::Client) -> Result<(), memgroup_client::Error> {
    /// if let Some(item) = client.get_consistent("config:flags").await? {
    ///     println!("{} bytes agreed on", item.value.len());
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn get_consistent(&self, key: impl AsRef<[u8]>) -> Result<Option<Item>, Error> {
        let key = key.as_ref();
        let snap = self.snapshot();
        let wire = self.wire_key(&snap, key)?;
        let topology = &snap.topology;
        let groups: Vec<GroupId> = topology
            .groups()
            .iter()
            .filter(|g| !g.is_write_only())
            .map(memgroup_topology::Group::id)
            .collect();
        let since = self.inner.repairs.reading();
        let targets: Vec<Result<Target, Error>> = {
            let dead = self.inner.pool.dead();
            topology
                .targeted_write_targets(&wire.bytes, &groups, &dead, now(), self.rotation(), None)
                .map(|t| {
                    t.map_err(|s| {
                        Error::new(ErrorKind::ServerDead, "the key's server is marked dead")
                            .at(snap.name(s.server))
                    })
                })
                .collect()
        };
        let reads: Vec<BoxFuture<'_, Vote>> = targets
            .iter()
            .map(|t| {
                let (snap, wire) = (&snap, &wire);
                Box::pin(async move {
                    let target = match t {
                        Ok(target) => *target,
                        Err(e) => return Vote::Silent(e.clone()),
                    };
                    // A copy awaiting a repair is as good as deleted.
                    if self
                        .inner
                        .repairs
                        .blocks(snap.name(target.server), &wire.bytes)
                    {
                        return Vote::Absent;
                    }
                    match self.read_copy(snap, target, &wire.bytes).await {
                        Ok(Some(copy)) => Vote::Held(copy),
                        Ok(None) => Vote::Absent,
                        Err(e) => Vote::Silent(e),
                    }
                }) as BoxFuture<'_, _>
            })
            .collect();
        let votes = join_all(reads).await;
        let arbiter = groups.iter().position(|&g| g == topology.arbiter());
        let winner = tally(&votes, arbiter)?;
        self.reconcile(&snap, &wire.bytes, &targets, &votes, winner.clone(), since);
        let Some(copy) = winner else {
            return Ok(None);
        };
        let value = match &wire.long {
            Some(original) => match longkey::unwrap(original, &copy.value) {
                Some(value) => value,
                None => return Ok(None),
            },
            None => copy.value,
        };
        Ok(Some(Item {
            value,
            flags: copy.flags,
            cas: None,
        }))
    }

    /// After a consistent read: the groups whose copy is not `winner` are
    /// brought in line, on a task of their own: a differing copy deleted if
    /// unchanged since it was read, the winner added where it was absent.
    fn reconcile(
        &self,
        snap: &Arc<Snapshot>,
        key: &[u8],
        targets: &[Result<Target, Error>],
        votes: &[Vote],
        winner: Option<Copy>,
        since: u64,
    ) {
        // A write of the key in flight or begun since the read: the groups
        // may differ only because it has not landed everywhere yet.
        if self.inner.repairs.written_since(key, since) {
            return;
        }
        let (mut absent, mut differ) = (Vec::new(), Vec::new());
        for (target, vote) in targets.iter().zip(votes) {
            let Ok(target) = target else { continue };
            match (vote, &winner) {
                (Vote::Held(c), Some(w)) if same(c, w) => {}
                (Vote::Absent, None) => {}
                (Vote::Absent, Some(_)) => absent.push(*target),
                (Vote::Held(c), _) => differ.push((*target, c.cas)),
                (Vote::Silent(_), _) => {}
            }
        }
        let winner = winner.filter(|_| !absent.is_empty());
        if differ.is_empty() && winner.is_none() {
            return;
        }
        let (client, snap, key) = (self.clone(), snap.clone(), Box::<[u8]>::from(key));
        let background = self.inner.background();
        tokio::spawn(async move {
            let _background = background;
            let deleted = client.delete_if_unchanged(&snap, &key, &differ).await;
            client
                .inner
                .read_repairs
                .fetch_add(deleted, Ordering::Relaxed);
            if let Some(winner) = winner {
                client.copy_into(&snap, &key, &winner, &absent, since).await;
            }
        });
    }
}

/// Two copies agree when value and flags do (TTLs differ by when each was
/// written).
fn same(a: &Copy, b: &Copy) -> bool {
    a.value == b.value && a.flags == b.flags
}

/// The consistent read's answer: the copy (`None`: absent) held by a
/// majority of all the votes' groups, else the arbiter's (`votes[arbiter]`)
/// when it answered.
fn tally(votes: &[Vote], arbiter: Option<usize>) -> Result<Option<Copy>, Error> {
    let quorum = votes.len() / 2 + 1;
    let agree = |candidate: &Vote| {
        votes
            .iter()
            .filter(|v| match (v, candidate) {
                (Vote::Held(a), Vote::Held(b)) => same(a, b),
                (Vote::Absent, Vote::Absent) => true,
                _ => false,
            })
            .count()
    };
    for vote in votes {
        if matches!(vote, Vote::Silent(_)) || agree(vote) < quorum {
            continue;
        }
        return Ok(match vote {
            Vote::Held(copy) => Some(copy.clone()),
            _ => None,
        });
    }
    match arbiter.map(|a| &votes[a]) {
        Some(Vote::Held(copy)) => Ok(Some(copy.clone())),
        Some(Vote::Absent) => Ok(None),
        Some(Vote::Silent(e)) => Err(Error::new(
            ErrorKind::ServerDead,
            "no majority of the groups agrees on the key, and the arbiter did not answer",
        )
        .with_source(e.clone())),
        None => Err(Error::new(
            ErrorKind::ServerDead,
            "no majority of the groups agrees on the key, and the arbiter serves no reads",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::{Copy, Vote, tally};
    use crate::error::{Error, ErrorKind};

    fn held(v: &'static str) -> Vote {
        Vote::Held(Copy {
            value: v.into(),
            flags: 0,
            exptime: 0,
            cas: 1,
        })
    }

    fn silent() -> Vote {
        Vote::Silent(Error::new(ErrorKind::Timeout, "timed out"))
    }

    fn value(winner: Result<Option<Copy>, Error>) -> Option<String> {
        winner
            .unwrap()
            .map(|c| String::from_utf8(c.value.to_vec()).unwrap())
    }

    /// Of three groups two must agree (EVCache's latch took one as quorum),
    /// absence votes like a value, and with no majority the arbiter's copy
    /// wins.
    #[test]
    fn the_majority_of_all_groups_wins_else_the_arbiter() {
        let a = Some("a".to_string());
        assert_eq!(value(tally(&[held("a"), held("a"), held("b")], Some(2))), a);
        assert_eq!(value(tally(&[held("b"), held("a"), held("a")], Some(0))), a);
        assert_eq!(
            value(tally(&[Vote::Absent, Vote::Absent, held("a")], Some(2))),
            None
        );
        // Two groups that differ: the arbiter's copy.
        assert_eq!(value(tally(&[held("a"), held("b")], Some(0))), a);
        assert_eq!(value(tally(&[held("b"), Vote::Absent], Some(1))), None);
        // One answer of three is no majority: the arbiter decides.
        assert_eq!(value(tally(&[held("a"), silent(), silent()], Some(0))), a);
        let no_arbiter = tally(&[held("a"), held("b"), silent()], Some(2)).unwrap_err();
        assert_eq!(no_arbiter.kind(), ErrorKind::ServerDead);
        // Flags are part of the copy.
        let flagged = Vote::Held(Copy {
            value: "a".into(),
            flags: 7,
            exptime: 0,
            cas: 2,
        });
        let winner = tally(&[held("a"), flagged, held("a")], Some(1)).unwrap();
        assert_eq!(winner.map(|c| c.flags), Some(0));
    }
}
