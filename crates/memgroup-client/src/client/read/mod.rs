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

use memgroup_proto::{MetaFlag, MetaResponse, Request};

use std::time::Duration;

use crate::client::Client;
use crate::client::migrate::Migration;
use crate::client::near::Near;
use crate::client::trace::{self};
use crate::error::Error;
use crate::item::{Distinct, Item, MultiGet};
use crate::join::{BoxFuture, join_all};
use crate::options::Expiry;
use crate::pool::Snapshot;
use memgroup_topology::Target;
use std::sync::Arc;

mod backfill;
mod consistent;
mod engine;
mod fresh;
mod ops;

use engine::KeyRead;
pub(crate) use engine::ReadOp;
use ops::{MetaGet, Retrieve};

impl Client {
    /// Reads one key with `op`.
    async fn read_one<R: ReadOp>(&self, key: &[u8], op: &R) -> Result<Option<R::Hit>, Error> {
        self.read_one_at(key, op).await.0
    }

    /// [`Client::read_one`], with where the hit came from (in the snapshot
    /// returned).
    async fn read_one_at<R: ReadOp>(
        &self,
        key: &[u8],
        op: &R,
    ) -> (Result<Option<R::Hit>, Error>, Option<Target>, Arc<Snapshot>) {
        let snap = self.snapshot();
        let wire = match self.wire_key(&snap, key) {
            Ok(wire) => wire,
            Err(e) => return (Err(e), None, snap),
        };
        let repairing = self.inner.read_repair && op.repairs();
        let since = self.inner.repairs.reading();
        let mut reads = [KeyRead::new(&snap, &wire, self.rotation()).noting_misses(repairing)];
        let name = op.request(std::slice::from_ref(&reads[0].key)).command();
        let span = trace::operation_span(self, name, Some(key));
        trace::await_in_span!(span, self.read(&snap, op, &mut reads));
        if repairing {
            self.read_repair(&snap, &reads, since);
        }
        let [read] = &mut reads;
        let at = read.hit_at;
        let result = read.outcome(&snap, &self.inner.pool);
        trace::operation_done(&span, &result);
        drop(wire);
        (result, at, snap)
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
        let found = match &self.inner.near {
            Some(near) => self.get_near(near, key).await,
            None => match self.read_one(key, &Retrieve::Get).await {
                Ok(item) => self.unless_stub(key, item).await,
                Err(e) => Err(e),
            },
        };
        // Migration mode reads through on a miss only: a hit takes no lock.
        match found {
            Ok(None) => match self.migration() {
                // Boxed: migration mode's second read stays out of every
                // `get`'s future.
                Some(migration) => Ok(Box::pin(migration.fill(self, key)).await),
                None => Ok(None),
            },
            found => found,
        }
    }

    /// A `get` with the near cache on ([`crate::client::near`]): from the
    /// cache while fresh, else a meta get whose hot answer is kept.
    async fn get_near(&self, near: &Near, key: &[u8]) -> Result<Option<Item>, Error> {
        const FLAGS: [MetaFlag; 6] = [
            MetaFlag::ReturnValue,
            MetaFlag::ReturnFlags,
            MetaFlag::ReturnTtl,
            MetaFlag::ReturnCas,
            MetaFlag::ReturnHit,
            MetaFlag::ReturnLastAccess,
        ];
        let (wire, owner) = {
            let snap = self.snapshot();
            let wire = self.wire_key(&snap, key)?;
            (wire.bytes.into_owned(), wire.long.map(|long| long.original))
        };
        let now = crate::clock::now();
        if let Some(item) = near.get((&wire, owner.as_deref()), now) {
            return Ok(Some(item));
        }
        let since = self.inner.repairs.reading();
        let Some(meta) = self.read_no_fill(key, &FLAGS).await? else {
            return Ok(None);
        };
        let mut item = Item::from_meta(&meta);
        item.cas = None;
        let hot = meta.flag(b'h') == Some(b"1")
            && meta
                .flag_u64(b'l')
                .is_some_and(|l| l <= near.settings.hot_within.as_secs());
        // Never a stale value, nor one read before this client wrote the key.
        if hot && !meta.is_stale() && !self.inner.repairs.written_since(&wire, since) {
            // Never past the copy's own expiry.
            let left = match meta.ttl() {
                Some(t) if t >= 0 => Duration::from_secs(t.unsigned_abs()),
                _ => near.settings.ttl,
            };
            let until = now + near.settings.ttl.min(left);
            near.put((&wire, owner.as_deref()), item.clone(), until);
        }
        Ok(Some(item))
    }

    /// Reads a key with its CAS unique, for a later [`Client::cas`]: with
    /// several groups from the arbiter's copy only (no fallback), so the
    /// unique is the one `cas` is checked against, whatever the reader's
    /// zone — a reader outside the arbiter's zone pays a cross-zone round
    /// trip. In migration mode a key found only in the old placement is backfilled
    /// and read again, so the CAS unique is the new copy's.
    pub async fn gets(&self, key: impl AsRef<[u8]>) -> Result<Option<Item>, Error> {
        let key = key.as_ref();
        let found = self.gets_here(key).await;
        match (found, self.migration()) {
            (Ok(None), Some(migration)) => match migration.fill(self, key).await {
                Some(_) => self.gets_here(key).await,
                None => Ok(None),
            },
            (found, _) => found,
        }
    }

    /// With several groups the arbiter's copy alone (its CAS unique is the
    /// one `cas` is checked against); with one, a read like `get`.
    async fn gets_here(&self, key: &[u8]) -> Result<Option<Item>, Error> {
        if self.snapshot().topology.groups().len() > 1 {
            self.gets_from_arbiter(key).await
        } else {
            self.read_one(key, &Retrieve::Gets).await
        }
    }

    /// Reads a key and sets its expiration time (`gat`): the copy read, and
    /// with several groups every group's copy (a touch beside the read).
    pub async fn get_and_touch(
        &self,
        key: impl AsRef<[u8]>,
        expiry: impl Into<Expiry>,
    ) -> Result<Option<Item>, Error> {
        let exptime = expiry.into().exptime()?;
        let key = key.as_ref();
        if self.snapshot().topology.groups().len() == 1 {
            return self.read_one(key, &Retrieve::Gat(exptime)).await;
        }
        // The read touches the copy it reads; every group's copy gets the
        // new expiry, so no zone's copy outlives or predeceases the others.
        let gat = Retrieve::Gat(exptime);
        let (read, _touched) = tokio::join!(
            self.read_one(key, &gat),
            self.touch(key, Expiry::Exptime(exptime as i32))
        );
        read
    }

    /// Reads many keys at once. Keys are grouped by server: one `get k1 k2 …`
    /// per connection, sent concurrently; keys missing from the first group
    /// are then asked from the fallback groups, and after an I/O error a key
    /// fails over like [`Client::get`]. Returns each key's own outcome
    /// (hit, miss or error), aligned with the keys given: a server that is
    /// down costs only the keys no other group could answer. Repeated keys
    /// are fetched once. `Err` only for invalid input: every key is checked
    /// before a byte is sent.
    ///
    /// ```no_run
    /// # async fn demo(client: memgroup_client::Client) -> Result<(), memgroup_client::Error> {
    /// let found = client.get_multi(&["a", "b", "c"]).await?;
    /// for (key, item) in found.hits() {
    ///     println!("{}: {} bytes", String::from_utf8_lossy(key), item.value.len());
    /// }
    /// for (key, error) in found.errors() {
    ///     eprintln!("{}: {error}", String::from_utf8_lossy(key));
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn get_multi<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<MultiGet, Error> {
        let snap = self.snapshot();
        // Validate everything before sending anything.
        // The first position given of each distinct key, and the distinct
        // index of every key given: the result's layout, found once.
        let mut first: Vec<usize> = Vec::with_capacity(keys.len());
        let mut slot = Vec::with_capacity(keys.len());
        let mut wires = Vec::with_capacity(keys.len());
        let mut seen = Distinct::with_capacity(keys.len());
        for (position, key) in keys.iter().enumerate() {
            let key = key.as_ref();
            match seen.find_or_insert(key, first.len(), |i| keys[first[i]].as_ref()) {
                Ok(i) => slot.push(i),
                Err(i) => {
                    wires.push(self.wire_key(&snap, key)?);
                    first.push(position);
                    slot.push(i);
                }
            }
        }
        let rotation = self.rotation();
        let repairing = self.inner.read_repair;
        let since = self.inner.repairs.reading();
        let mut reads: Vec<KeyRead<'_, Item>> = wires
            .iter()
            .map(|w| KeyRead::new(&snap, w, rotation).noting_misses(repairing))
            .collect();
        let span = trace::operation_span(self, "get_multi", None);
        trace::await_in_span!(span, self.read(&snap, &Retrieve::Get, &mut reads));
        if repairing {
            self.read_repair(&snap, &reads, since);
        }
        let outcomes = reads
            .iter_mut()
            .map(|read| read.outcome(&snap, &self.inner.pool))
            .collect();
        // The walks (hundreds of bytes a key) are done with.
        drop(reads);
        let mut found = MultiGet::new(keys, slot, first, seen, outcomes);
        self.drop_stubs(&mut found).await;
        trace::operation_done(&span, &found);
        if let Some(migration) = self.migration() {
            self.fill_multi(&migration, &mut found).await;
        }
        Ok(found)
    }

    /// Migration mode: the keys the new placement missed, read from the old
    /// one (concurrently) and backfilled.
    async fn fill_multi(&self, migration: &Migration, found: &mut MultiGet) {
        let missing: Vec<Vec<u8>> = found
            .iter()
            .filter(|(_, outcome)| matches!(outcome, Ok(None)))
            .map(|(key, _)| key.to_vec())
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        let fills: Vec<BoxFuture<'_, Option<Item>>> = missing
            .iter()
            .map(|key| Box::pin(migration.fill(self, key)) as BoxFuture<'_, _>)
            .collect();
        for (key, item) in missing.iter().zip(join_all(fills).await) {
            if let (Some(item), Some(outcome)) = (item, found.outcome_mut(key)) {
                *outcome = Ok(Some(item));
            }
        }
    }

    /// A meta get (`mg`) with the given flags, read like [`Client::get`]
    /// (local group first, fallback on miss or error). `Ok(None)` on a miss.
    /// With the lease flags ([`MetaFlag::Vivify`], [`MetaFlag::Recache`])
    /// and several groups it is asked of the arbiter's server alone, so
    /// that one caller of the cluster wins (see [`Client::get_or_fill`],
    /// which builds on this); so is a read of the CAS unique
    /// ([`MetaFlag::ReturnCas`]), as [`Client::gets`]: the arbiter decides
    /// the `C<cas>` of a later meta set, so the CAS must be its copy's. The
    /// reply's flags read as typed fields with [`MetaResponse::fields`]; with [`MetaFlag::Base64Key`] the key is raw
    /// bytes, sent base64 encoded (see [`Client::meta_set`]).
    pub async fn meta_get(
        &self,
        key: impl AsRef<[u8]>,
        flags: &[MetaFlag],
    ) -> Result<Option<MetaResponse>, Error> {
        let asked = |flag| flags.contains(&flag);
        let (size, client_flags) = (asked(MetaFlag::ReturnSize), asked(MetaFlag::ReturnFlags));
        let shortened = |key: &[u8]| {
            self.inner.key_schemes.any()
                && self
                    .wire_key(&self.snapshot(), key)
                    .is_ok_and(|wire| wire.enveloped())
        };
        if !asked(MetaFlag::ReturnValue) && (size || client_flags) && shortened(key.as_ref()) {
            // In an envelope, the size and the client flags are the value's
            // inside it: read with the value, answered as asked.
            let mut widened = flags.to_vec();
            widened.push(MetaFlag::ReturnValue);
            if !client_flags {
                widened.push(MetaFlag::ReturnFlags);
            }
            let reply = self.meta_get_as_given(key.as_ref(), &widened).await?;
            return Ok(reply.map(|m| crate::longkey::without_value(m, size, client_flags)));
        }
        self.meta_get_as_given(key.as_ref(), flags).await
    }

    /// [`Client::meta_get`] with exactly these flags.
    async fn meta_get_as_given(
        &self,
        key: &[u8],
        flags: &[MetaFlag],
    ) -> Result<Option<MetaResponse>, Error> {
        crate::client::refuse_quiet(flags, "meta_get")?;
        let key = self.meta_key(key, flags)?;
        let lease = flags
            .iter()
            .any(|f| matches!(f, MetaFlag::Vivify(_) | MetaFlag::Recache(_)));
        let cas = flags.contains(&MetaFlag::ReturnCas);
        let snap = self.snapshot();
        if (lease || cas) && snap.topology.groups().len() > 1 {
            // A lease is per server: one for the cluster, at the arbiter;
            // a CAS unique is the arbiter's, which decides the `C` of a set.
            let wire = self.wire_key(&snap, &key)?;
            let why = if lease {
                "a lease (N, R) is the arbiter's"
            } else {
                "a CAS unique (c) is read from the arbiter's copy"
            };
            let arbiter = snap.topology.arbiter();
            let target = self.arbiter_target(&snap, wire.bytes_of(arbiter), why)?;
            let request = Request::MetaGet {
                key: wire.key_of(arbiter),
                flags,
            };
            let reply = self
                .meta_at(&snap, target, &request, crate::client::Attempt::First)
                .await?;
            return Ok(match (wire.long_of(arbiter), reply) {
                (Some(long), Some(meta)) => match long.unwrap_meta(meta.clone()) {
                    Some(unwrapped) => Some(unwrapped),
                    None => {
                        // Another key's value under the digest: a win it
                        // handed this read goes back to that key's callers.
                        self.give_back(&snap, target, wire.bytes_of(arbiter), &meta)
                            .await;
                        None
                    }
                },
                (_, reply) => reply,
            });
        }
        self.read_one(&key, &MetaGet(flags, false)).await
    }
}
