//! Reads: one engine for every retrieval, single-key or many.
//!
//! Each key walks its own [`ReadCursor`]: the local group first, then — after
//! an I/O error, with failover on — the next live server of the same group,
//! then the fallback groups the read policy allows, until a hit. The engine
//! runs in rounds: every key still looking asks its cursor for its next
//! target, keys bound for the same connection slot share one request
//! (`get k1 k2 …`), the requests of a round go out concurrently, and the
//! replies settle each key as a hit, a miss (on to the next group) or an error
//! (also on). A single-key `get` is a batch of one, so `get` and `get_multi`
//! fail over and fall back by the same rules.
//!
//! A key's result: its hit; else a miss if any group answered for it; else
//! the last error, or "no live server" when every candidate was dead.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::OnceLock;

use memgroup_proto::{Key, MetaFlag, MetaResponse, MetaStatus, Request, Response};
use memgroup_topology::{DeadHosts, GroupId, ReadCursor, Target};

use crate::client::{Client, WireKey, unexpected};
use crate::error::{Error, ErrorKind};
use crate::item::Item;
use crate::join::{BoxFuture, join_all};
use crate::longkey;
use crate::merge::circular;
use crate::migrate::Migration;
use crate::pool::{Pool, Snapshot, now};
use crate::trace::{self, Attempt};

/// A kind of read: the request that carries a batch of keys, and how its
/// reply turns into hits.
trait ReadOp: Sync {
    type Hit: Send;
    /// Whether keys bound for the same slot share one request.
    const BATCHES: bool;
    /// The request for `keys` (exactly one key unless `BATCHES`).
    fn request<'a>(&'a self, keys: &'a [Key<'a>]) -> Request<'a>;
    /// A hit for a long key stored in an envelope ([`crate::longkey`]): its
    /// value unwrapped, or `None` when the envelope holds another key.
    fn unwrap_long(original: &[u8], hit: Self::Hit) -> Option<Self::Hit>;
    /// Calls `hit(j, …)` for every `keys[j]` the reply holds; the other keys
    /// missed.
    fn hits(
        &self,
        reply: Response,
        keys: &[Key<'_>],
        hit: impl FnMut(usize, Self::Hit),
    ) -> Result<(), Error>;
}

/// The classic retrieval commands.
#[derive(Debug, Clone, Copy)]
enum Retrieve {
    Get,
    Gets,
    Gat(u32),
}

impl ReadOp for Retrieve {
    type Hit = Item;
    const BATCHES: bool = true;

    fn unwrap_long(original: &[u8], mut item: Item) -> Option<Item> {
        item.value = longkey::unwrap(original, &item.value)?;
        Some(item)
    }

    fn request<'a>(&'a self, keys: &'a [Key<'a>]) -> Request<'a> {
        match *self {
            Retrieve::Get => Request::Get { keys },
            Retrieve::Gets => Request::Gets { keys },
            Retrieve::Gat(exptime) => Request::Gat { exptime, keys },
        }
    }

    fn hits(
        &self,
        reply: Response,
        keys: &[Key<'_>],
        mut hit: impl FnMut(usize, Item),
    ) -> Result<(), Error> {
        let Response::Values(values) = reply else {
            return Err(unexpected(Some(&reply)));
        };
        // Values come in request order: scan on from the last match. A value
        // for a key not asked for is dropped.
        let mut from = 0;
        for v in values {
            if let Some(j) = circular(from, keys.len()).find(|&j| keys[j].as_bytes() == v.key) {
                from = j + 1;
                hit(j, Item::from(v));
            }
        }
        Ok(())
    }
}

/// A meta get (`mg`) with its flags; one key per request.
struct MetaGet<'f>(&'f [MetaFlag]);

impl ReadOp for MetaGet<'_> {
    type Hit = MetaResponse;
    const BATCHES: bool = false;

    /// Without the value (no `v` flag) the envelope cannot be checked: the
    /// reply is returned as it is.
    fn unwrap_long(original: &[u8], mut meta: MetaResponse) -> Option<MetaResponse> {
        if let Some(value) = &meta.value {
            meta.value = Some(longkey::unwrap(original, value)?);
        }
        Some(meta)
    }

    fn request<'a>(&'a self, keys: &'a [Key<'a>]) -> Request<'a> {
        Request::MetaGet {
            key: keys[0],
            flags: self.0,
        }
    }

    fn hits(
        &self,
        reply: Response,
        _keys: &[Key<'_>],
        mut hit: impl FnMut(usize, MetaResponse),
    ) -> Result<(), Error> {
        match reply {
            Response::Meta(m) if m.status == MetaStatus::En => Ok(()),
            Response::Meta(m) => {
                hit(0, m);
                Ok(())
            }
            other => Err(unexpected(Some(&other))),
        }
    }
}

/// One key's walk through its read targets.
struct KeyRead<'a, T> {
    key: Key<'a>,
    cursor: ReadCursor<'a>,
    hit: Option<T>,
    /// Some group answered (with a miss, as a hit ends the walk).
    answered: bool,
    /// The last error met.
    error: Option<Error>,
    /// Still looking: no hit, and the cursor may offer more.
    looking: bool,
    /// The group of the last target offered.
    last_group: Option<GroupId>,
    /// Which try the current target is.
    attempt: Attempt,
}

impl<'a, T> KeyRead<'a, T> {
    fn new(snap: &'a Snapshot, wire: &'a WireKey<'_>, rotation: u64) -> Self {
        KeyRead {
            key: wire.key(),
            cursor: snap.topology.read_cursor(&wire.bytes, rotation),
            hit: None,
            answered: false,
            error: None,
            looking: true,
            last_group: None,
            attempt: Attempt::First,
        }
    }

    /// Asks the cursor for the next target (given the dead hosts at `now`),
    /// noting which try it is; `None` ends the walk.
    fn next(&mut self, dead: &DeadHosts, now: std::time::Instant) -> Option<Target> {
        let Some(target) = self.cursor.next(dead, now) else {
            self.looking = false;
            return None;
        };
        self.attempt = match self.last_group {
            Some(group) if group == target.group => Attempt::Failover,
            Some(_) => Attempt::Fallback,
            None if self.cursor.skipped().is_some() => Attempt::Fallback,
            None => Attempt::First,
        };
        self.last_group = Some(target.group);
        Some(target)
    }

    /// The key's result once the engine is done with it.
    fn outcome(self, snap: &Snapshot, pool: &Pool) -> Result<Option<T>, Error> {
        if self.hit.is_some() {
            return Ok(self.hit);
        }
        if self.cursor.groups_tried() == 0 {
            // Backed off because it refused our login: say so.
            if let Some(refused) = self
                .cursor
                .skipped()
                .and_then(|s| pool.refused(snap, s.server))
            {
                return Err(refused);
            }
            let mut error = Error::new(
                ErrorKind::ServerDead,
                "no live server holds this key (all candidates are marked dead)",
            );
            if let Some(skipped) = self.cursor.skipped() {
                error = error.at(snap.name(skipped.server));
            }
            return Err(error);
        }
        match self.error {
            Some(e) if !self.answered => Err(e),
            _ => Ok(None),
        }
    }
}

/// Whether two planned reads go to the same connection slot.
fn same_slot(a: &(Target, usize), b: &(Target, usize)) -> bool {
    a.0.server == b.0.server && a.0.slot == b.0.slot
}

impl Client {
    /// Runs `reads` to the end (see the module docs).
    async fn read<R: ReadOp>(&self, snap: &Snapshot, op: &R, reads: &mut [KeyRead<'_, R::Hit>]) {
        if let [read] = reads {
            // One key: the same rounds, without planning or batching.
            while read.looking {
                let target = {
                    let dead = self.inner.pool.dead();
                    read.next(&dead, now())
                };
                let Some(target) = target else {
                    break;
                };
                let keys = [read.key];
                let reply = self
                    .exec(snap, target, &op.request(&keys), read.attempt)
                    .await;
                settle(
                    op,
                    snap,
                    reply,
                    &[(target, 0)],
                    &keys,
                    std::slice::from_mut(read),
                );
            }
            return;
        }
        // (target, index into `reads`), sorted into one run per slot.
        let mut plan: Vec<(Target, usize)> = Vec::with_capacity(reads.len());
        loop {
            plan.clear();
            {
                let dead = self.inner.pool.dead();
                let now = now();
                for (i, r) in reads.iter_mut().enumerate().filter(|(_, r)| r.looking) {
                    if let Some(target) = r.next(&dead, now) {
                        plan.push((target, i));
                    }
                }
            }
            if plan.is_empty() {
                return;
            }
            // Stable, so keys keep their order within a request; a plan that
            // is already in order (one server) costs one pass.
            plan.sort_by_key(|(t, _)| (t.server, t.slot));
            let batches: Vec<&[(Target, usize)]> = if R::BATCHES {
                plan.chunk_by(same_slot).collect()
            } else {
                plan.chunks(1).collect()
            };
            let keys: Vec<Vec<Key<'_>>> = batches
                .iter()
                .map(|b| b.iter().map(|&(_, i)| reads[i].key).collect())
                .collect();
            if let ([batch], [keys]) = (&batches[..], &keys[..]) {
                // The common case needs no joining.
                let attempt = reads[batch[0].1].attempt;
                let reply = self
                    .exec(snap, batch[0].0, &op.request(keys), attempt)
                    .await;
                settle(op, snap, reply, batch, keys, reads);
            } else {
                let futures: Vec<BoxFuture<'_, _>> = batches
                    .iter()
                    .zip(&keys)
                    .map(|(batch, keys)| {
                        let attempt = reads[batch[0].1].attempt;
                        Box::pin(async move {
                            self.exec(snap, batch[0].0, &op.request(keys), attempt)
                                .await
                        }) as BoxFuture<'_, _>
                    })
                    .collect();
                for ((reply, batch), keys) in
                    join_all(futures).await.into_iter().zip(&batches).zip(&keys)
                {
                    settle(op, snap, reply, batch, keys, reads);
                }
            }
        }
    }

    /// Reads one key with `op`.
    async fn read_one<R: ReadOp>(&self, key: &[u8], op: &R) -> Result<Option<R::Hit>, Error> {
        let snap = self.snapshot();
        let wire = self.wire_key(&snap, key)?;
        let mut reads = [KeyRead::new(&snap, &wire, self.rotation())];
        let name = op.request(std::slice::from_ref(&reads[0].key)).command();
        let span = trace::operation_span(self, name, Some(key));
        trace::await_in_span!(span, self.read(&snap, op, &mut reads));
        let [read] = reads;
        let mut result = read.outcome(&snap, &self.inner.pool);
        if let (Some(original), Ok(hit)) = (&wire.long, &mut result) {
            *hit = hit.take().and_then(|h| R::unwrap_long(original, h));
        }
        trace::operation_done(&span, &result);
        result
    }

    /// Reads a key: `Ok(None)` on a miss. Tries the local group first and
    /// falls back to other groups on a miss or an error, per the read policy.
    ///
    /// ```no_run
    /// # async fn demo(client: memgroup_client::Client) -> Result<(), memgroup_client::Error> {
    /// if let Some(item) = client.get("user:42").await? {
    ///     println!("{} bytes, flags {}", item.value.len(), item.flags);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Item>, Error> {
        let key = key.as_ref();
        let found = self.read_one(key, &Retrieve::Get).await;
        match (found, &self.inner.migration) {
            (Ok(None), Some(migration)) => Ok(migration.fill(self, key).await),
            (found, _) => found,
        }
    }

    /// Reads a key with its CAS unique, for a later [`Client::cas`]. In
    /// migration mode a key found only in the old placement is backfilled
    /// and read again, so the CAS unique is the new copy's.
    pub async fn gets(&self, key: impl AsRef<[u8]>) -> Result<Option<Item>, Error> {
        let key = key.as_ref();
        let found = self.read_one(key, &Retrieve::Gets).await;
        match (found, &self.inner.migration) {
            (Ok(None), Some(migration)) => match migration.fill(self, key).await {
                Some(_) => self.read_one(key, &Retrieve::Gets).await,
                None => Ok(None),
            },
            (found, _) => found,
        }
    }

    /// Reads a key and sets its expiration time (`gat`).
    pub async fn get_and_touch(
        &self,
        key: impl AsRef<[u8]>,
        exptime: u32,
    ) -> Result<Option<Item>, Error> {
        self.read_one(key.as_ref(), &Retrieve::Gat(exptime)).await
    }

    /// Reads many keys at once. Keys are grouped by server: one `get k1 k2 …`
    /// per connection, sent concurrently; keys missing from the first group
    /// are then asked from the fallback groups, and after an I/O error a key
    /// fails over like [`Client::get`]. The map holds the hits, keyed by the
    /// key as given; duplicates are fetched once. Fails only if some key got
    /// no answer from any group.
    pub async fn get_multi<K: AsRef<[u8]>>(
        &self,
        keys: &[K],
    ) -> Result<HashMap<Vec<u8>, Item>, Error> {
        let snap = self.snapshot();
        // Validate everything before sending anything.
        let mut given: Vec<&[u8]> = Vec::with_capacity(keys.len());
        let mut wires = Vec::with_capacity(keys.len());
        let mut seen = Distinct::with_capacity(keys.len());
        for key in keys {
            let key = key.as_ref();
            if seen.insert(&given, key) {
                wires.push(self.wire_key(&snap, key)?);
                given.push(key);
            }
        }
        let rotation = self.rotation();
        let mut reads: Vec<KeyRead<'_, Item>> = wires
            .iter()
            .map(|w| KeyRead::new(&snap, w, rotation))
            .collect();
        let span = trace::operation_span(self, "get_multi", None);
        trace::await_in_span!(span, self.read(&snap, &Retrieve::Get, &mut reads));
        let mut found = HashMap::with_capacity(reads.len());
        let mut error = None;
        for ((key, read), wire) in given.into_iter().zip(reads).zip(&wires) {
            match read.outcome(&snap, &self.inner.pool) {
                Ok(Some(item)) => {
                    let item = match &wire.long {
                        Some(original) => Retrieve::unwrap_long(original, item),
                        None => Some(item),
                    };
                    if let Some(item) = item {
                        found.insert(key.to_vec(), item);
                    }
                }
                Ok(None) => {}
                Err(e) => error = Some(e),
            }
        }
        let result = match error {
            Some(e) => Err(e),
            None => Ok(found),
        };
        trace::operation_done(&span, &result);
        match (result, &self.inner.migration) {
            (Ok(found), Some(migration)) => Ok(self.fill_multi(migration, keys, found).await),
            (result, _) => result,
        }
    }

    /// Migration mode: the keys the new placement missed, read from the old
    /// one (concurrently) and backfilled.
    async fn fill_multi<K: AsRef<[u8]>>(
        &self,
        migration: &Migration,
        keys: &[K],
        mut found: HashMap<Vec<u8>, Item>,
    ) -> HashMap<Vec<u8>, Item> {
        let mut missing: Vec<&[u8]> = keys
            .iter()
            .map(AsRef::as_ref)
            .filter(|k| !found.contains_key(*k))
            .collect();
        missing.sort_unstable();
        missing.dedup();
        let fills: Vec<BoxFuture<'_, Option<Item>>> = missing
            .iter()
            .map(|&key| Box::pin(migration.fill(self, key)) as BoxFuture<'_, _>)
            .collect();
        for (key, item) in missing.iter().zip(join_all(fills).await) {
            if let Some(item) = item {
                found.insert(key.to_vec(), item);
            }
        }
        found
    }

    /// A meta get (`mg`) with the given flags, read like [`Client::get`]
    /// (local group first, fallback on miss or error). `Ok(None)` on a miss.
    pub async fn meta_get(
        &self,
        key: impl AsRef<[u8]>,
        flags: &[MetaFlag],
    ) -> Result<Option<MetaResponse>, Error> {
        if flags.iter().any(|f| f.is_quiet()) {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                "quiet mode (q) is not supported by meta_get",
            ));
        }
        self.read_one(key.as_ref(), &MetaGet(flags)).await
    }
}

/// Applies one request's reply to the keys it carried: hits end their walk;
/// an answer marks the others as missed there; an error is remembered.
fn settle<R: ReadOp>(
    op: &R,
    snap: &Snapshot,
    reply: Result<Option<Response>, Error>,
    batch: &[(Target, usize)],
    keys: &[Key<'_>],
    reads: &mut [KeyRead<'_, R::Hit>],
) {
    let result = reply
        .and_then(|r| r.ok_or_else(|| unexpected(None)))
        .and_then(|r| {
            op.hits(r, keys, |j, hit| {
                let read = &mut reads[batch[j].1];
                read.hit = Some(hit);
                read.looking = false;
            })
        });
    if result.is_ok() {
        let (mut hits, mut fallbacks) = (0, 0);
        for &(_, i) in batch {
            if reads[i].hit.is_some() {
                hits += 1;
                // Served by a group after the first one: tried before, or
                // passed over because its server is dead.
                let cursor = &reads[i].cursor;
                fallbacks += u64::from(cursor.groups_tried() > 1 || cursor.skipped().is_some());
            }
        }
        let misses = batch.len() as u64 - hits;
        snap.counters(batch[0].0.server)
            .reads(hits, misses, fallbacks);
    }
    for &(_, i) in batch {
        match &result {
            Ok(()) => reads[i].answered = true,
            // A refused login stays the reported cause: a later group's
            // failure must not hide it.
            Err(e) if reads[i].error.as_ref().is_some_and(Error::is_refusal) && !e.is_refusal() => {
            }
            Err(e) => reads[i].error = Some(e.clone()),
        }
    }
}

/// Finds the repeated keys of a batch: an open-addressing table of indices
/// into the keys kept so far. Cheaper than a `HashSet<&[u8]>` (SipHash) on the
/// `get_multi` path; the FNV-1a hash is seeded per process, so a caller cannot
/// pick keys that all collide without knowing the seed.
struct Distinct {
    /// `index + 1` of a kept key, `0` for an empty slot.
    slots: Vec<u32>,
    mask: usize,
    seed: u64,
}

impl Distinct {
    fn with_capacity(n: usize) -> Distinct {
        static SEED: OnceLock<u64> = OnceLock::new();
        let seed =
            *SEED.get_or_init(|| std::collections::hash_map::RandomState::new().hash_one(0u8));
        // At most half full, so probe runs stay short.
        let size = (n.max(1) * 2).next_power_of_two();
        Distinct {
            slots: vec![0; size],
            mask: size - 1,
            seed,
        }
    }

    fn hash(&self, key: &[u8]) -> usize {
        let mut h = 0xcbf2_9ce4_8422_2325 ^ self.seed;
        for &b in key {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
        // Fold the high bits in: the table index takes the low ones.
        (h ^ (h >> 29)) as usize
    }

    /// Whether `key` is new to `kept` (the keys inserted so far, in order);
    /// if so it is recorded as `kept[kept.len()]`, which the caller pushes.
    fn insert(&mut self, kept: &[&[u8]], key: &[u8]) -> bool {
        let mut i = self.hash(key) & self.mask;
        loop {
            match self.slots[i] {
                0 => {
                    self.slots[i] = kept.len() as u32 + 1;
                    return true;
                }
                k if kept[k as usize - 1] == key => return false,
                _ => i = (i + 1) & self.mask,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Distinct;

    proptest::proptest! {
        /// `Distinct` keeps exactly the first occurrence of every key.
        #[test]
        fn distinct_keeps_first_occurrences(keys in proptest::collection::vec(0u16..64, 0..300)) {
            let names: Vec<Vec<u8>> = keys.iter().map(|k| format!("k{k}").into_bytes()).collect();
            let mut seen = Distinct::with_capacity(names.len());
            let mut kept: Vec<&[u8]> = Vec::new();
            for name in &names {
                let new = seen.insert(&kept, name);
                proptest::prop_assert_eq!(new, !kept.contains(&&name[..]));
                if new {
                    kept.push(name);
                }
            }
            let mut want: Vec<&[u8]> = Vec::new();
            for name in &names {
                if !want.contains(&&name[..]) {
                    want.push(name);
                }
            }
            proptest::prop_assert_eq!(kept, want);
        }
    }
}
