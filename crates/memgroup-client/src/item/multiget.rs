//! [`MultiGet`]: what a multi-key read found, per key given.

use std::collections::HashMap;

use super::Item;
use super::distinct::Distinct;
use crate::error::Error;

/// What a multi-key read found: for each key given, in the order given, its
/// own outcome — a hit, a miss (`Ok(None)`) or the error that kept it from
/// an answer — so one server down costs only its own keys. Also reachable
/// by key ([`get`](MultiGet::get), `multi[key]` for a hit).
///
/// Built without a key copy per key or a SipHash: the keys given sit end to
/// end in one buffer, and lookups by key go through the table the read
/// deduplicated its keys with.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct MultiGet {
    /// The keys as given, repeats included, end to end.
    key_bytes: Vec<u8>,
    /// Where each key given ends in `key_bytes`.
    key_ends: Vec<usize>,
    /// `outcomes[slot[i]]` is the outcome of the `i`-th key given (a
    /// repeated key shares its first occurrence's).
    slot: Vec<usize>,
    /// For each distinct key, the position given of its first occurrence.
    first: Vec<usize>,
    /// One per distinct key, in the order of first occurrence.
    outcomes: Vec<Result<Option<Item>, Error>>,
    /// Distinct key → its index in `outcomes`.
    index: Distinct,
}

impl MultiGet {
    /// The result for `keys` as given: `slot[i]` is the distinct index of
    /// `keys[i]`, `first[j]` the position of distinct key `j`'s first
    /// occurrence, `index` the table that found them, `outcomes` one per
    /// distinct key.
    pub(crate) fn new<K: AsRef<[u8]>>(
        keys: &[K],
        slot: Vec<usize>,
        first: Vec<usize>,
        index: Distinct,
        outcomes: Vec<Result<Option<Item>, Error>>,
    ) -> MultiGet {
        let total = keys.iter().map(|k| k.as_ref().len()).sum();
        let mut key_bytes = Vec::with_capacity(total);
        let mut key_ends = Vec::with_capacity(keys.len());
        for key in keys {
            key_bytes.extend_from_slice(key.as_ref());
            key_ends.push(key_bytes.len());
        }
        debug_assert_eq!(slot.len(), keys.len());
        debug_assert_eq!(first.len(), outcomes.len());
        MultiGet {
            key_bytes,
            key_ends,
            slot,
            first,
            outcomes,
            index,
        }
    }

    /// The `i`-th key given.
    fn key(&self, i: usize) -> &[u8] {
        let start = match i {
            0 => 0,
            i => self.key_ends[i - 1],
        };
        &self.key_bytes[start..self.key_ends[i]]
    }

    /// The index in `outcomes` of `key`, if it was given.
    fn position(&self, key: &[u8]) -> Option<usize> {
        self.index.find(key, |j| self.key(self.first[j]))
    }

    /// The outcome of a distinct key, to change it (migration's fill).
    pub(crate) fn outcome_mut(&mut self, key: &[u8]) -> Option<&mut Result<Option<Item>, Error>> {
        let i = self.position(key)?;
        self.outcomes.get_mut(i)
    }

    /// How many keys were given (repeats included).
    pub fn len(&self) -> usize {
        self.key_ends.len()
    }

    /// Whether no key was given.
    pub fn is_empty(&self) -> bool {
        self.key_ends.is_empty()
    }

    /// Each key given with its outcome, in the order given.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &Result<Option<Item>, Error>)> {
        self.slot
            .iter()
            .enumerate()
            .map(|(i, &j)| (self.key(i), &self.outcomes[j]))
    }

    /// The outcome of `key`, if it was given.
    pub fn outcome(&self, key: impl AsRef<[u8]>) -> Option<&Result<Option<Item>, Error>> {
        self.position(key.as_ref()).map(|i| &self.outcomes[i])
    }

    /// The item of `key`, if it was given and hit.
    pub fn get(&self, key: impl AsRef<[u8]>) -> Option<&Item> {
        self.outcome(key)?.as_ref().ok()?.as_ref()
    }

    /// The distinct keys that hit, with their items, in the order given.
    pub fn hits(&self) -> impl Iterator<Item = (&[u8], &Item)> {
        self.distinct()
            .filter_map(|(k, o)| Some((k, o.as_ref().ok()?.as_ref()?)))
    }

    /// How many distinct keys hit.
    pub fn hit_count(&self) -> usize {
        self.outcomes
            .iter()
            .filter(|o| matches!(o, Ok(Some(_))))
            .count()
    }

    /// Whether some key hit with a value of zero bytes (a scan of the
    /// outcomes, one per distinct key: no allocation).
    pub(crate) fn has_empty_hit(&self) -> bool {
        self.outcomes
            .iter()
            .any(|o| matches!(o, Ok(Some(item)) if item.value.is_empty()))
    }

    /// The distinct keys that got no answer from any group, with why.
    pub fn errors(&self) -> impl Iterator<Item = (&[u8], &Error)> {
        self.distinct()
            .filter_map(|(k, o)| Some((k, o.as_ref().err()?)))
    }

    /// Whether every key got an answer (a hit or a miss): no errors.
    pub fn is_complete(&self) -> bool {
        self.outcomes.iter().all(Result::is_ok)
    }

    /// The hits by key, dropping misses and errors.
    pub fn into_hits(self) -> HashMap<Vec<u8>, Item> {
        let keys: Vec<Vec<u8>> = self.first.iter().map(|&i| self.key(i).to_vec()).collect();
        keys.into_iter()
            .zip(self.outcomes)
            .filter_map(|(k, o)| Some((k, o.ok()??)))
            .collect()
    }

    /// Each distinct key once, at its first occurrence, with its outcome.
    fn distinct(&self) -> impl Iterator<Item = (&[u8], &Result<Option<Item>, Error>)> {
        self.first
            .iter()
            .zip(&self.outcomes)
            .map(|(&i, o)| (self.key(i), o))
    }
}

impl<K: AsRef<[u8]>> std::ops::Index<K> for MultiGet {
    type Output = Item;

    /// The item of a key that hit; panics on a miss, an error or a key not
    /// given (use [`MultiGet::get`] to ask).
    fn index(&self, key: K) -> &Item {
        let key = key.as_ref();
        self.get(key)
            .unwrap_or_else(|| panic!("no hit for key {:?}", String::from_utf8_lossy(key)))
    }
}
