//! The consistent read ([`Client::get_consistent`]): every group asked,
//! the majority's copy returned, the others brought in line with
//! [`super::backfill`]'s conditional copies and deletes.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use memgroup_topology::{GroupId, Target};

use super::backfill::Copy;
use crate::client::Client;
use crate::error::{Error, ErrorKind};
use crate::item::Item;
use crate::join::{BoxFuture, join_all};
use crate::pool::Snapshot;

/// What one group's copy said in a consistent read.
enum Vote {
    Held(Copy),
    Absent,
    /// No answer (an error, or the server dead): no vote.
    Silent(Error),
}

impl Client {
    /// Reads a key from every group that serves reads and returns the copy
    /// (value and flags) a majority of all of them holds — absence counts as
    /// a copy — or, with no majority, the arbiter's. The groups that differ
    /// are then brought in line on a task of their own: the winning value
    /// added where it was absent (with its remaining TTL), other copies
    /// deleted if unchanged since they were read (`md … C<cas>`) — unless a
    /// write of the key is in flight or began meanwhile; and, as writes
    /// converge on the arbiter's copy, the values added are deleted again
    /// if the arbiter no longer holds the copy they agree with (another
    /// process wrote the key meanwhile). A group that does
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
        if !wire.uniform() {
            // The votes compare raw copies, which such groups store under
            // other keys and envelopes.
            return Err(Error::new(
                ErrorKind::Unsupported,
                "a consistent read compares every group's raw copy: not of a key some group's own key scheme (group_evcache_keys) stores otherwise",
            ));
        }
        let topology = &snap.topology;
        let groups: Vec<GroupId> = topology
            .groups()
            .iter()
            .filter(|g| !g.is_write_only())
            .map(memgroup_topology::Group::id)
            .collect();
        let since = self.inner.repairs.reading();
        let targets: Vec<Result<Target, Error>> = {
            let dead = self.inner.pool.dead_view();
            topology
                .targeted_write_targets(
                    &wire.bytes,
                    &groups,
                    &dead,
                    dead.now(),
                    self.rotation(),
                    None,
                )
                .map(|t| t.map_err(|s| Error::passed_over(snap.name(s.server))))
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
        let item = Item {
            value: copy.value,
            flags: copy.flags,
            cas: None,
        };
        Ok(match &wire.long {
            Some(long) => crate::client::wire::unwrap_item(long, item),
            None => Some(item),
        })
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
        // What the arbiter must still hold for the copies added to stay:
        // its copy of the winner as read, or the one added there. (A
        // differing arbiter copy is deleted by its CAS: nothing to keep to.)
        let arbiter = snap.topology.arbiter();
        let arbiter_at = targets
            .iter()
            .position(|t| t.as_ref().is_ok_and(|t| t.group == arbiter));
        let arbiter_held = arbiter_at.and_then(|at| match (&votes[at], &winner) {
            (Vote::Held(c), Some(w)) if same(c, w) => Some(c.cas),
            _ => None,
        });
        let arbiter_absent = arbiter_at.is_some_and(|at| matches!(votes[at], Vote::Absent));
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
                let stored = client.copy_into(&snap, &key, &winner, &absent, since).await;
                let expected = match (arbiter_held, arbiter_absent) {
                    (Some(cas), _) => Some(Some(cas)),
                    (None, true) => Some(
                        stored
                            .iter()
                            .find(|(t, _)| t.group == arbiter)
                            .map(|&(_, cas)| cas),
                    ),
                    (None, false) => None,
                };
                if let Some(expected) = expected {
                    client
                        .keep_if_arbiter_holds(&snap, &key, expected, &stored)
                        .await;
                }
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
