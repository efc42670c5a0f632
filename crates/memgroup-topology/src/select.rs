//! Read and write target selection. Nothing here allocates (for groups of up to 256
//! servers; larger groups allocate only while walking a failover sequence).

use std::fmt;
use std::iter::FusedIterator;
use std::time::Instant;

use crate::{DeadHosts, Group, GroupId, ServerAddr, ServerId, Skipped, Target, Topology};

mod keys;
pub use keys::{GroupKeys, Keys};
use keys::{Memo, div_rem};

/// The server to use for `key` in `group`: the primary when alive; else, with failover,
/// the first live server of the Whalin sequence. `Ok((server, position in the
/// sequence))`, or `Err(primary)` when there is none.
#[inline]
fn resolve(
    topology: &Topology,
    group: &Group,
    key: &[u8],
    primary: ServerId,
    dead: &DeadHosts,
    now: Instant,
) -> Result<(ServerId, usize), ServerId> {
    if !dead.is_dead(primary, now) {
        return Ok((primary, 0));
    }
    if topology.failover
        && let Some(found) = walk(group, key, 0, dead, now)
    {
        return Ok(found);
    }
    Err(primary)
}

/// The first live server of `group`'s failover sequence for `key` after position `after`
/// (position 0 is the primary). Each server appears once in the sequence, so a walk that
/// resumes after its last position never offers a server twice.
#[cold]
fn walk(
    group: &Group,
    key: &[u8],
    after: usize,
    dead: &DeadHosts,
    now: Instant,
) -> Option<(ServerId, usize)> {
    group
        .locator()
        .failover(key)
        .enumerate()
        .skip(after + 1)
        .map(|(pos, node)| (group.servers()[node], pos))
        .find(|&(server, _)| !dead.is_dead(server, now))
}

impl Topology {
    /// The groups to read `key` from, in order, as [`Target`]s; see [`ReadCursor`] for the
    /// rules. Allocates nothing. An empty iterator means no readable group has a live server
    /// for the key ([`ReadTargets::skipped`] names one that was dead).
    ///
    /// `key` is the wire key ([`Topology::wire_key`]); `rotation` a per-operation counter
    /// (round-robin among equally preferred groups, and the connection slot).
    ///
    /// Because this borrows `dead` for as long as it runs, it reflects failures recorded
    /// before the call only; [`Topology::read_cursor`] takes `dead` per step instead.
    ///
    /// ```
    /// use std::time::Instant;
    /// use memgroup_topology::{ClusterSpec, DeadHosts, Settings, Topology};
    /// let spec = ClusterSpec::parse_evcache("us-east-1c=h1:1,h2:1;us-east-1d=h3:1,h4:1")?
    ///     .with_settings(Settings::default().with_local_zone("us-east-1d"));
    /// let topology = Topology::new(spec)?;
    /// let dead = DeadHosts::new(&topology);
    /// let key = topology.wire_key(topology.groups()[0].id(), b"user:42");
    /// let order: Vec<&str> = topology
    ///     .read_targets(&key, &dead, Instant::now(), 0)
    ///     .map(|t| topology.group(t.group).name())
    ///     .collect();
    /// assert_eq!(order, ["us-east-1d", "us-east-1c"]); // local zone first, one fallback
    /// # Ok::<(), memgroup_topology::TopologyError>(())
    /// ```
    #[must_use]
    #[inline]
    pub fn read_targets<'a>(
        &'a self,
        key: &'a [u8],
        dead: &'a DeadHosts,
        now: Instant,
        rotation: u64,
    ) -> ReadTargets<'a> {
        ReadTargets {
            cursor: self.read_cursor(key, rotation),
            dead,
            now,
        }
    }

    /// A [`ReadCursor`] for `key`, stepped with the dead-host state of the moment, so that
    /// the caller need not hold its `DeadHosts` lock while a request is in flight.
    #[must_use]
    #[inline]
    pub fn read_cursor<'a>(&'a self, key: &'a [u8], rotation: u64) -> ReadCursor<'a> {
        self.read_cursor_of(Keys::Same(key), rotation)
    }

    /// [`Topology::read_cursor`] where each group may have a key of its own.
    #[must_use]
    #[inline]
    pub fn read_cursor_of<'a>(&'a self, keys: Keys<'a>, rotation: u64) -> ReadCursor<'a> {
        ReadCursor {
            topology: self,
            keys,
            rotation,
            limit: self.settings().read_fallback.max_groups(),
            next_pos: 0,
            tried: 0,
            current: None,
            skipped: None,
            memo: Memo::default(),
            tiers: [None; 2],
            arbiter_pending: self.read_order.len() > 1,
            skip_arbiter: false,
        }
    }

    /// Where to write `key`: exactly one item per group (read-write and write-only), in
    /// [`GroupId`] order. The slot of every group is `rotation % pool_size`, so successive
    /// writes rotate through all connections of each server (EVCache's transposed write
    /// sets); the server is the key's server, or with failover the next live one. A group
    /// without a live server yields `Err(Skipped)`, which the caller counts as failed for
    /// that group. Allocates nothing.
    ///
    /// ```
    /// use std::time::Instant;
    /// use memgroup_topology::{ClusterSpec, DeadHosts, Topology};
    /// let spec = ClusterSpec::parse_evcache("a=h1:1,h2:1;b=h3:1")?.with_pool_size(4);
    /// let topology = Topology::new(spec)?;
    /// let dead = DeadHosts::new(&topology);
    /// let slots: Vec<usize> = topology
    ///     .write_targets(b"k", &dead, Instant::now(), 6)
    ///     .map(|t| t.unwrap().slot)
    ///     .collect();
    /// assert_eq!(slots, [2, 2]);
    /// # Ok::<(), memgroup_topology::TopologyError>(())
    /// ```
    #[must_use]
    #[inline]
    pub fn write_targets<'a>(
        &'a self,
        key: &'a [u8],
        dead: &'a DeadHosts,
        now: Instant,
        rotation: u64,
    ) -> WriteTargets<'a> {
        self.write_targets_of(Keys::Same(key), dead, now, rotation)
    }

    /// [`Topology::write_targets`] where each group may have a key of its own.
    #[must_use]
    #[inline]
    pub fn write_targets_of<'a>(
        &'a self,
        keys: Keys<'a>,
        dead: &'a DeadHosts,
        now: Instant,
        rotation: u64,
    ) -> WriteTargets<'a> {
        WriteTargets {
            topology: self,
            keys,
            dead,
            now,
            rotation,
            next: 0,
            memo: Memo::default(),
        }
    }

    /// Where to write `key` for a targeted write (cache warming, EVCache's `addOrSet` into
    /// chosen groups): exactly one item per **distinct** group of `groups`, in order of first
    /// appearance, selected as by [`Topology::write_targets`]; unknown ids are ignored. Then,
    /// if `dest_filter` is given, items whose selected server fails it are dropped.
    ///
    /// The number of items never depends on `pool_size` (EVCache's targeted write iterated
    /// over its `pool_size` write sets and wrote each group `pool_size` times).
    ///
    /// ```
    /// use std::time::Instant;
    /// use memgroup_topology::{ClusterSpec, DeadHosts, GroupId, Topology};
    /// let spec = ClusterSpec::parse_evcache("a=h1:1;b=h2:1;c=h3:1")?.with_pool_size(8);
    /// let topology = Topology::new(spec)?;
    /// let dead = DeadHosts::new(&topology);
    /// let groups = [GroupId(2), GroupId(0), GroupId(2)];
    /// let now = Instant::now();
    /// let writes = topology.targeted_write_targets(b"k", &groups, &dead, now, 0, None);
    /// assert_eq!(writes.count(), 2);
    /// let only_h1 = |a: &memgroup_topology::ServerAddr| a.host == "h1";
    /// let writes = topology.targeted_write_targets(b"k", &groups, &dead, now, 0, Some(&only_h1));
    /// assert_eq!(writes.map(|t| t.unwrap().group).collect::<Vec<_>>(), [GroupId(0)]);
    /// # Ok::<(), memgroup_topology::TopologyError>(())
    /// ```
    #[must_use]
    #[inline]
    pub fn targeted_write_targets<'a>(
        &'a self,
        key: &'a [u8],
        groups: &'a [GroupId],
        dead: &'a DeadHosts,
        now: Instant,
        rotation: u64,
        dest_filter: Option<&'a dyn Fn(&ServerAddr) -> bool>,
    ) -> TargetedWrites<'a> {
        self.targeted_write_targets_of(Keys::Same(key), groups, dead, now, rotation, dest_filter)
    }

    /// [`Topology::targeted_write_targets`] where each group may have a key of its own.
    #[must_use]
    #[inline]
    pub fn targeted_write_targets_of<'a>(
        &'a self,
        keys: Keys<'a>,
        groups: &'a [GroupId],
        dead: &'a DeadHosts,
        now: Instant,
        rotation: u64,
        dest_filter: Option<&'a dyn Fn(&ServerAddr) -> bool>,
    ) -> TargetedWrites<'a> {
        TargetedWrites {
            topology: self,
            keys,
            groups,
            dead,
            now,
            rotation,
            dest_filter,
            next: 0,
            memo: Memo::default(),
        }
    }

    /// The group at position `pos` of the read order for `rotation`, and the number its
    /// slot is taken from. `tiers` caches each tier's `(rotation % len, rotation / len)`.
    #[inline]
    fn read_group(
        &self,
        pos: usize,
        rotation: u64,
        tiers: &mut [Option<(usize, u64)>; 2],
    ) -> (GroupId, u64) {
        let (tier, start, len) = if pos < self.local_len {
            (0, 0, self.local_len)
        } else {
            (1, self.local_len, self.read_order.len() - self.local_len)
        };
        let (offset, seed) = *tiers[tier].get_or_insert_with(|| {
            let (quotient, remainder) = div_rem(rotation, len);
            (remainder, quotient)
        });
        // Rotate the tier: offset < len and pos - start < len, so one wrap at most.
        let mut index = offset + (pos - start);
        if index >= len {
            index -= len;
        }
        (self.read_order[start + index], seed)
    }

    #[inline]
    fn write_target(
        &self,
        group: &Group,
        key: &[u8],
        memo: &mut Memo,
        dead: &DeadHosts,
        now: Instant,
        rotation: u64,
    ) -> Result<Target, Skipped> {
        let primary = memo.primary(group, key);
        match resolve(self, group, key, primary, dead, now) {
            Ok((server, _)) => Ok(Target {
                group: group.id(),
                server,
                slot: memo.slot(rotation, group.pool_size()),
            }),
            Err(server) => Err(Skipped {
                group: group.id(),
                server,
            }),
        }
    }
}

/// Step-by-step read selection for one key.
///
/// The rules:
///
/// * **Order.** The readable groups of the caller's zone
///   ([`Settings::local_zone`](crate::Settings::local_zone)) come first, the other readable
///   groups after; within each tier the start rotates with `rotation`, round-robin. With no
///   local group, that is round-robin over every readable group.
/// * **The arbiter first among fallbacks.** Once a group has been offered, the first group
///   past the local tier is the [arbiter](Topology::arbiter)'s (then the rest of the tier as
///   rotated, without it): a conditional write leaves its value in the arbiter's group and
///   clears the others' copies, so a read that missed locally finds it at the next try. The
///   arbiter's zone therefore takes the other zones' fallback reads.
/// * **Policy.** At most [`ReadFallback::max_groups`](crate::ReadFallback::max_groups)
///   groups are offered: 1 for `Never`, 2 for `OneMore`, all for `AllCopies`. The caller
///   asks for the next one after a miss or an error.
/// * **Dead hosts.** A group whose server for the key is dead is skipped and does not
///   count toward the policy. With failover on, the server is instead the first live one of
///   the hash crate's Whalin failover sequence; the group is skipped only when the whole
///   sequence is dead.
/// * **Failover after an error.** With failover on, if the caller recorded a failure of
///   the last offered server before asking again, the next offer is the following live
///   server of the same group's sequence (Whalin's `getSock` retry); each server is offered
///   at most once per group. Otherwise the next group follows.
/// * **Slot.** In a tier of `k` groups the slot is `(rotation / k) % pool_size`, so that
///   successive rotations cover every (group, slot) pair of the tier evenly; with one group
///   per zone that is `rotation % pool_size`.
///
/// ```
/// use std::sync::Mutex;
/// use std::time::Instant;
/// use memgroup_topology::{ClusterSpec, DeadHosts, Topology};
/// let topology = Topology::new(ClusterSpec::parse_server_list("h1:1,h2:1,h3:1")?)?;
/// let dead = Mutex::new(DeadHosts::new(&topology));
/// let now = Instant::now();
/// let mut cursor = topology.read_cursor(b"user:42", 0);
/// let first = cursor.next(&dead.lock().unwrap(), now).unwrap();
/// // The request to `first` fails with an I/O error (no lock is held meanwhile):
/// dead.lock().unwrap().record_failure(first.server, now);
/// // One group, so failover is on: the next server of the Whalin sequence.
/// let second = cursor.next(&dead.lock().unwrap(), now).unwrap();
/// assert_ne!(second.server, first.server);
/// # Ok::<(), memgroup_topology::TopologyError>(())
/// ```
#[derive(Debug, Clone)]
pub struct ReadCursor<'a> {
    topology: &'a Topology,
    keys: Keys<'a>,
    rotation: u64,
    limit: usize,
    /// Next position in the read order.
    next_pos: usize,
    /// Groups offered so far.
    tried: usize,
    current: Option<Current>,
    skipped: Option<Skipped>,
    memo: Memo,
    tiers: [Option<(usize, u64)>; 2],
    /// The arbiter's group is yet to come first among fallbacks (several groups).
    arbiter_pending: bool,
    /// It came out of its turn: its place in the order is passed.
    skip_arbiter: bool,
}

/// The last offer and its position in its group's failover sequence.
#[derive(Debug, Clone, Copy)]
struct Current {
    target: Target,
    position: usize,
}

impl ReadCursor<'_> {
    /// The next target to read from, given the dead-host state at `now`; `None` when the
    /// policy or the groups are exhausted.
    #[allow(clippy::should_implement_trait)]
    // takes arguments; `ReadTargets` is the iterator
    // Inlined into its caller, the cursor's fields stay in registers: a
    // read-target walk costs 1.6× a bare lookup instead of 2.7× (new-compat).
    #[inline(always)]
    pub fn next(&mut self, dead: &DeadHosts, now: Instant) -> Option<Target> {
        let topology = self.topology;
        if let Some(current) = self.current.take()
            && topology.failover
            && dead.is_dead(current.target.server, now)
        {
            let group = topology.group(current.target.group);
            let key = self.keys.of(group.id());
            if let Some((server, position)) = walk(group, key, current.position, dead, now) {
                let target = Target {
                    server,
                    ..current.target
                };
                self.current = Some(Current { target, position });
                return Some(target);
            }
        }
        while self.tried < self.limit {
            // The first fallback past the local tier is the arbiter's
            // group: after a conditional write it may hold the only copy.
            let (id, seed) =
                if self.arbiter_pending && self.tried > 0 && self.next_pos >= topology.local_len {
                    (self.arbiter_pending, self.skip_arbiter) = (false, true);
                    (topology.arbiter(), self.rotation)
                } else {
                    if self.next_pos >= topology.read_order.len() {
                        break;
                    }
                    let (id, seed) =
                        topology.read_group(self.next_pos, self.rotation, &mut self.tiers);
                    self.next_pos += 1;
                    if (self.arbiter_pending || self.skip_arbiter) && id == topology.arbiter() {
                        if self.skip_arbiter {
                            continue;
                        }
                        self.arbiter_pending = false;
                    }
                    (id, seed)
                };
            let group = topology.group(id);
            let key = self.keys.of(id);
            let primary = self.memo.primary(group, key);
            match resolve(topology, group, key, primary, dead, now) {
                Ok((server, position)) => {
                    self.tried += 1;
                    let target = Target {
                        group: id,
                        server,
                        slot: div_rem(seed, group.pool_size()).1,
                    };
                    self.current = Some(Current { target, position });
                    return Some(target);
                }
                Err(server) => {
                    self.skipped.get_or_insert(Skipped { group: id, server });
                }
            }
        }
        None
    }

    /// The first group passed over because its server was dead, if any: when
    /// [`ReadCursor::next`] offered nothing at all, the typed "server dead" answer.
    #[must_use]
    pub fn skipped(&self) -> Option<Skipped> {
        self.skipped
    }

    /// How many groups have been offered.
    #[must_use]
    pub fn groups_tried(&self) -> usize {
        self.tried
    }
}

/// The read targets of one key against a fixed dead-host state; see
/// [`Topology::read_targets`] and, for the rules, [`ReadCursor`].
#[derive(Debug, Clone)]
pub struct ReadTargets<'a> {
    cursor: ReadCursor<'a>,
    dead: &'a DeadHosts,
    now: Instant,
}

impl ReadTargets<'_> {
    /// The first group passed over because its server was dead, if any.
    #[must_use]
    pub fn skipped(&self) -> Option<Skipped> {
        self.cursor.skipped()
    }
}

impl Iterator for ReadTargets<'_> {
    type Item = Target;

    #[inline]
    fn next(&mut self) -> Option<Target> {
        self.cursor.next(self.dead, self.now)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let c = &self.cursor;
        let groups_left = c.topology.read_order.len() - c.next_pos;
        (0, Some(groups_left.min(c.limit - c.tried)))
    }
}

impl FusedIterator for ReadTargets<'_> {}

/// One write target per group; see [`Topology::write_targets`].
#[derive(Debug, Clone)]
pub struct WriteTargets<'a> {
    topology: &'a Topology,
    keys: Keys<'a>,
    dead: &'a DeadHosts,
    now: Instant,
    rotation: u64,
    next: usize,
    memo: Memo,
}

impl Iterator for WriteTargets<'_> {
    type Item = Result<Target, Skipped>;

    #[inline]
    fn next(&mut self) -> Option<Result<Target, Skipped>> {
        let group = self.topology.groups().get(self.next)?;
        self.next += 1;
        Some(self.topology.write_target(
            group,
            self.keys.of(group.id()),
            &mut self.memo,
            self.dead,
            self.now,
            self.rotation,
        ))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.topology.groups().len() - self.next;
        (left, Some(left))
    }
}

impl ExactSizeIterator for WriteTargets<'_> {}
impl FusedIterator for WriteTargets<'_> {}

/// One write target per distinct targeted group; see
/// [`Topology::targeted_write_targets`].
#[derive(Clone)]
pub struct TargetedWrites<'a> {
    topology: &'a Topology,
    keys: Keys<'a>,
    groups: &'a [GroupId],
    dead: &'a DeadHosts,
    now: Instant,
    rotation: u64,
    dest_filter: Option<&'a dyn Fn(&ServerAddr) -> bool>,
    next: usize,
    memo: Memo,
}

impl fmt::Debug for TargetedWrites<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TargetedWrites")
            .field("groups", &self.groups)
            .field("rotation", &self.rotation)
            .field("dest_filter", &self.dest_filter.is_some())
            .field("next", &self.next)
            .finish_non_exhaustive()
    }
}

impl Iterator for TargetedWrites<'_> {
    type Item = Result<Target, Skipped>;

    fn next(&mut self) -> Option<Result<Target, Skipped>> {
        while self.next < self.groups.len() {
            let i = self.next;
            self.next += 1;
            let id = self.groups[i];
            // Repeats and unknown groups produce no write: one per distinct group.
            if self.groups[..i].contains(&id) {
                continue;
            }
            let Some(group) = self.topology.groups().get(id.0) else {
                continue;
            };
            let item = self.topology.write_target(
                group,
                self.keys.of(id),
                &mut self.memo,
                self.dead,
                self.now,
                self.rotation,
            );
            // The filter applies to the selection, never instead of it.
            let server = match item {
                Ok(t) => t.server,
                Err(s) => s.server,
            };
            if self
                .dest_filter
                .is_none_or(|keep| keep(&self.topology.servers()[server.0]))
            {
                return Some(item);
            }
        }
        None
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(self.groups.len() - self.next))
    }
}

impl FusedIterator for TargetedWrites<'_> {}

#[cfg(test)]
mod tests;
