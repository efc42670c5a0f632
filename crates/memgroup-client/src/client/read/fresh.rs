//! Meta reads that take no part in a fill: they tell a stale value from a
//! fresh one, read a lease stub as a miss, and hand back the right to refill
//! that any `mg` of a stale value is given.

use memgroup_proto::{MetaFlag, MetaResponse};

use crate::client::Client;
use crate::client::fill::{Filled, Freshness};
use crate::error::Error;
use crate::item::{Item, MultiGet};
use crate::join::{BoxFuture, join_all};

use super::MetaGet;

impl Client {
    /// Reads `key` like [`Client::get`] (local group first, fallback on a
    /// miss or an error; in migration mode a miss is filled from the old
    /// placement), and says how fresh the value is: [`Freshness::Stale`]
    /// for a value marked stale by [`Client::invalidate`] (which a plain
    /// `get` returns like any other), [`Freshness::Cached`] otherwise.
    ///
    /// It never refills: a lease stub of a running
    /// [`Client::get_or_fill`] reads as a miss, and the right to refill a
    /// stale value, which memcached hands to any meta read of it, goes back
    /// to the callers that fill. One `mg` per key (no merging into a
    /// multi-key `get`).
    pub async fn get_with_freshness(&self, key: impl AsRef<[u8]>) -> Result<Option<Filled>, Error> {
        // `t`: a won right to refill goes back with the TTL the value had.
        const FLAGS: [MetaFlag; 4] = [
            MetaFlag::ReturnValue,
            MetaFlag::ReturnFlags,
            MetaFlag::ReturnTtl,
            MetaFlag::ReturnCas,
        ];
        // A server without the meta protocol has no TTL to give (nor stale
        // values, nor rights to refill): there it is a `gets`.
        const CLASSIC: [MetaFlag; 3] = [
            MetaFlag::ReturnValue,
            MetaFlag::ReturnFlags,
            MetaFlag::ReturnCas,
        ];
        let key = key.as_ref();
        let found = match self.read_no_fill(key, &FLAGS).await {
            Err(e) if e.kind() == crate::ErrorKind::Unsupported => {
                self.read_no_fill(key, &CLASSIC).await
            }
            found => found,
        };
        if let Some(meta) = found? {
            let freshness = if meta.is_stale() {
                Freshness::Stale
            } else {
                Freshness::Cached
            };
            let mut item = Item::from_meta(&meta);
            item.cas = None;
            return Ok(Some(Filled { item, freshness }));
        }
        Ok(match self.migration() {
            Some(migration) => migration.fill(self, key).await.map(|item| Filled {
                item,
                freshness: Freshness::Cached,
            }),
            None => None,
        })
    }

    /// A classic `get` cannot tell a lease stub of
    /// [`Client::get_or_fill`] (an empty item vivified by `mg … N`) from an
    /// empty value: a hit of zero bytes is read again with `mg`, and is a
    /// miss if it is a stub. Empty values are rare, so this costs nothing
    /// in the common case.
    pub(super) async fn unless_stub(
        &self,
        key: &[u8],
        item: Option<Item>,
    ) -> Result<Option<Item>, Error> {
        match item {
            // A check that fails leaves the hit as it was read.
            // Boxed: a rare second read, kept out of every `get`'s future.
            Some(item) if item.value.is_empty() => match Box::pin(self.is_stub(key)).await {
                Ok(true) => Ok(None),
                _ => Ok(Some(item)),
            },
            item => Ok(item),
        }
    }

    /// Whether `key` reads (with `mg`, as no filler) as a lease stub.
    async fn is_stub(&self, key: &[u8]) -> Result<bool, Error> {
        const FLAGS: [MetaFlag; 2] = [MetaFlag::ReturnValue, MetaFlag::ReturnCas];
        Ok(self.read_no_fill(key, &FLAGS).await?.is_none())
    }

    /// [`Client::unless_stub`] for each empty hit of a multi-get, at once.
    pub(super) async fn drop_stubs(&self, found: &mut MultiGet) {
        // The common case, no empty value, costs one pass and no allocation.
        if !found.has_empty_hit() {
            return;
        }
        let empty: Vec<Vec<u8>> = found
            .hits()
            .filter(|(_, item)| item.value.is_empty())
            .map(|(key, _)| key.to_vec())
            .collect();
        if empty.is_empty() {
            return;
        }
        let checks: Vec<BoxFuture<'_, _>> = empty
            .iter()
            .map(|key| Box::pin(self.is_stub(key)) as BoxFuture<'_, _>)
            .collect();
        for (key, checked) in empty.iter().zip(join_all(checks).await) {
            if let (Ok(true), Some(outcome)) = (checked, found.outcome_mut(key)) {
                *outcome = Ok(None);
            }
        }
    }

    /// A meta get of `key` (wire form `wire`) that is no filler: a won
    /// right to refill is given back, and a lease stub is a miss.
    pub(super) async fn read_no_fill(
        &self,
        key: &[u8],
        flags: &[MetaFlag],
    ) -> Result<Option<MetaResponse>, Error> {
        // With the value asked for, a fallback hit may be read-repaired.
        let op = MetaGet(flags, flags.contains(&MetaFlag::ReturnValue));
        let (found, at, snap) = self.read_one_at(key, &op).await;
        let Some(meta) = found? else {
            return Ok(None);
        };
        if meta.won() {
            // Any `mg` of a stale value is handed its win: back to the
            // callers that refill (`get_or_fill`).
            // Under the key as the group it came from stores it.
            if let Some(at) = at
                && let Ok(wire) = self.wire_key(&snap, key)
            {
                self.give_back(&snap, at, wire.bytes_of(at.group), &meta)
                    .await;
            }
        }
        // A lease stub of `get_or_fill`: a fill is running.
        Ok((!meta.is_stub()).then_some(meta))
    }
}
