//! The near cache (off by default, [`ClientBuilder::near_cache`](crate::ClientBuilder::near_cache)):
//! a small in-process cache of the keys memcached itself reports hot.
//!
//! With it on, a single-key [`Client::get`] is a meta get (`mg … v f t h
//! l`): a key whose copy was hit before (`h1`) and last read within
//! [`NearCache::hot_within`] is kept in process for at most
//! [`NearCache::ttl`] (memcached's "probabilistic hot cache" technique), and
//! served from there without a request until then. What it costs:
//!
//! - a value may be [`NearCache::ttl`] older than the cluster's — other
//!   clients' writes are not seen until the entry expires; this client's
//!   own writes of the key drop it at once;
//! - single-key `get`s no longer merge into multi-key `get` commands (a
//!   meta get carries one key), so under heavy concurrent load they cost
//!   more requests; [`Client::get_multi`] is unchanged and does not use it;
//! - single-key `get`s are no longer hedged ([`Hedge`](crate::Hedge)) nor
//!   read-repaired;
//! - a lease stub of [`Client::get_or_fill`] reads as a miss, as it should;
//!   a stale value is served (as a plain `get` serves it) but never kept,
//!   and the refill right its read is handed goes back at once.
//!
//! When full, the oldest entry goes (entries live briefly: that is close to
//! least recently used, without a list to keep).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::item::Item;

/// The near cache's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct NearCache {
    /// Entries held at most.
    pub capacity: usize,
    /// How long an entry is served without asking the cluster.
    pub ttl: Duration,
    /// A key read (by anyone) this recently, and hit before, is hot.
    pub hot_within: Duration,
}

impl NearCache {
    /// Up to `capacity` hot keys, each served from memory for `ttl`; hot
    /// means hit before and last read within a second.
    pub fn new(capacity: usize, ttl: Duration) -> NearCache {
        NearCache {
            capacity,
            ttl,
            hot_within: Duration::from_secs(1),
        }
    }

    /// Sets [`NearCache::hot_within`].
    pub fn hot_within(mut self, within: Duration) -> NearCache {
        self.hot_within = within;
        self
    }
}

/// The near cache's counters, in [`Health::near_cache`](crate::Health::near_cache).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct NearStatus {
    /// Reads served from the near cache.
    pub hits: u64,
    /// Reads that asked the cluster.
    pub misses: u64,
    /// Entries held now (some may have expired).
    pub entries: usize,
}

/// An entry: the item, until when, its insertion's number, and the long key
/// it is, if stored under a digest.
type Entry = (Item, Instant, u64, Option<Box<[u8]>>);

#[derive(Debug, Default)]
struct Entries {
    /// By wire key: the item, until when, its insertion's number, and for
    /// a long key stored under a digest the key it is (a colliding key's
    /// read must not be served it).
    by_key: HashMap<Box<[u8]>, Entry>,
    /// Keys by insertion, with the insertion's number (a key re-inserted
    /// later has a newer one; stale queue entries are skipped).
    order: VecDeque<(Box<[u8]>, u64)>,
    next: u64,
}

/// The cache itself.
#[derive(Debug)]
pub(crate) struct Near {
    pub(crate) settings: NearCache,
    entries: Mutex<Entries>,
    hits: AtomicU64,
    misses: AtomicU64,
}

impl Near {
    pub(crate) fn new(settings: NearCache) -> Near {
        Near {
            settings,
            entries: Mutex::default(),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    /// The entry for the wire key `key` (of the long key `owner`, if one),
    /// if fresh at `now`.
    pub(crate) fn get(&self, (key, owner): (&[u8], Option<&[u8]>), now: Instant) -> Option<Item> {
        let found = {
            let mut entries = self.entries.lock();
            match entries.by_key.get(key) {
                Some((item, until, _, held)) if *until > now => {
                    (held.as_deref() == owner).then(|| item.clone())
                }
                Some(_) => {
                    entries.by_key.remove(key);
                    None
                }
                None => None,
            }
        };
        let counter = if found.is_some() {
            &self.hits
        } else {
            &self.misses
        };
        counter.fetch_add(1, Ordering::Relaxed);
        found
    }

    /// Keeps `item` of the wire key `key` (of the long key `owner`, if
    /// one) until `until`, evicting the oldest when full.
    pub(crate) fn put(&self, (key, owner): (&[u8], Option<&[u8]>), item: Item, until: Instant) {
        if self.settings.capacity == 0 {
            return;
        }
        let mut entries = self.entries.lock();
        let number = entries.next;
        entries.next += 1;
        entries
            .by_key
            .insert(key.into(), (item, until, number, owner.map(Into::into)));
        entries.order.push_back((key.into(), number));
        while entries.by_key.len() > self.settings.capacity {
            let Some((oldest, n)) = entries.order.pop_front() else {
                break;
            };
            if entries.by_key.get(&oldest).is_some_and(|e| e.2 == n) {
                entries.by_key.remove(&oldest);
            }
        }
        // Queue entries of keys since re-inserted or forgotten pile up only
        // until the queue is twice the map: then it is rebuilt.
        if entries.order.len() > 2 * entries.by_key.len().max(16) {
            let Entries { by_key, order, .. } = &mut *entries;
            order.retain(|(k, n)| by_key.get(k).is_some_and(|e| e.2 == *n));
        }
    }

    /// Drops `key` (this client wrote it).
    pub(crate) fn forget(&self, key: &[u8]) {
        let mut entries = self.entries.lock();
        if !entries.by_key.is_empty() {
            entries.by_key.remove(key);
        }
    }

    pub(crate) fn status(&self) -> NearStatus {
        NearStatus {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            entries: self.entries.lock().by_key.len(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::{Near, NearCache};
    use crate::item::Item;

    fn item(v: &'static str) -> Item {
        Item {
            value: v.into(),
            flags: 0,
            cas: None,
        }
    }

    /// Entries expire, are forgotten on a write, and the oldest goes when
    /// the cache is full; the queue does not grow with re-inserts.
    #[test]
    fn entries_expire_are_forgotten_and_the_oldest_is_evicted() {
        let near = Near::new(NearCache::new(2, Duration::from_secs(1)));
        let now = Instant::now();
        let later = now + Duration::from_secs(1);
        near.put((b"a", None), item("1"), later);
        assert_eq!(near.get((b"a", None), now), Some(item("1")));
        assert_eq!(near.get((b"a", None), later), None, "expired");
        near.put((b"a", None), item("1"), later);
        near.forget(b"a");
        assert_eq!(near.get((b"a", None), now), None, "forgotten");
        near.put((b"a", None), item("1"), later);
        near.put((b"b", None), item("2"), later);
        near.put((b"c", None), item("3"), later);
        assert_eq!(near.get((b"a", None), now), None, "the oldest went");
        assert_eq!(near.get((b"c", None), now), Some(item("3")));
        for _ in 0..1000 {
            near.put((b"b", None), item("2"), later);
        }
        assert!(near.entries.lock().order.len() <= 32);
        assert_eq!(near.get((b"c", None), now), Some(item("3")));
        let status = near.status();
        assert_eq!((status.hits, status.entries), (3, 2));
    }

    /// A long key's entry under its digest is served to that key only: a
    /// key with the same digest (a collision) misses it.
    #[test]
    fn a_digests_entry_is_its_own_keys_only() {
        let near = Near::new(NearCache::new(4, Duration::from_secs(1)));
        let now = Instant::now();
        let later = now + Duration::from_secs(1);
        near.put((b"digest", Some(&b"first"[..])), item("first's"), later);
        assert_eq!(
            near.get((b"digest", Some(&b"first"[..])), now),
            Some(item("first's"))
        );
        assert_eq!(near.get((b"digest", Some(&b"other"[..])), now), None);
        assert_eq!(near.get((b"digest", None), now), None);
    }
}
