//! The key a selection routes on in each group, and the work shared between
//! the groups of one selection.

use std::fmt;

use memgroup_hash::HashFunction;

use crate::{Group, GroupId, ServerId};

/// The wire key a selection routes on in each group: one key for every group, or each
/// group's own, where groups store a key under different names (EVCache's per-group
/// hashed keys).
#[derive(Clone, Copy)]
pub enum Keys<'a> {
    /// The same key in every group.
    Same(&'a [u8]),
    /// Each group's own key.
    PerGroup(&'a dyn GroupKeys),
}

/// Each group's wire key for one key of the caller's ([`Keys::PerGroup`]).
pub trait GroupKeys: Sync {
    /// The wire key in `group`.
    fn key(&self, group: GroupId) -> &[u8];
}

impl<'a> Keys<'a> {
    /// The key in `group`.
    #[inline]
    #[must_use]
    pub fn of(&self, group: GroupId) -> &'a [u8] {
        match *self {
            Keys::Same(key) => key,
            Keys::PerGroup(keys) => keys.key(group),
        }
    }
}

impl fmt::Debug for Keys<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Keys::Same(key) => f
                .debug_tuple("Same")
                .field(&String::from_utf8_lossy(key))
                .finish(),
            Keys::PerGroup(_) => f.write_str("PerGroup"),
        }
    }
}

/// Work shared between the groups of one selection: the last key hash, reused by the next
/// group with the same hash function and key (with every group on ketama, a write to three
/// groups hashes the key once), and the last write slot, reused by the next group with the
/// same pool size.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Memo {
    /// The hash function, the key's address and length, the hash.
    hash: Option<(HashFunction, usize, usize, i64)>,
    slot: Option<(usize, usize)>,
}

impl Memo {
    #[inline]
    pub(super) fn primary(&mut self, group: &Group, key: &[u8]) -> ServerId {
        // Every strategy maps every key to a group's only server: skip the hash.
        if let [only] = group.servers() {
            return *only;
        }
        let at = key.as_ptr() as usize;
        let hash = match self.hash {
            Some((function, a, len, hash))
                if function == group.hash_function && a == at && len == key.len() =>
            {
                hash
            }
            _ => {
                let hash = group.locator().hash(key);
                self.hash = Some((group.hash_function, at, key.len(), hash));
                hash
            }
        };
        group.server_for_hash(hash)
    }

    /// `rotation % pool_size`.
    #[inline]
    pub(super) fn slot(&mut self, rotation: u64, pool_size: usize) -> usize {
        match self.slot {
            Some((pool, slot)) if pool == pool_size => slot,
            _ => {
                let slot = div_rem(rotation, pool_size).1;
                self.slot = Some((pool_size, slot));
                slot
            }
        }
    }
}

/// `(n / d, n % d)` for `d ≥ 1`, without a division for the common divisors (1 and powers
/// of two: one local group, pool sizes 1, 2, 4, 8); a 64-bit division costs more than the
/// rest of a selection with a cheap hash.
#[inline]
pub(super) fn div_rem(n: u64, d: usize) -> (u64, usize) {
    let d64 = d as u64;
    if d.is_power_of_two() {
        (n >> d64.trailing_zeros(), (n & (d64 - 1)) as usize)
    } else {
        // The remainder is below d, so it fits usize.
        (n / d64, (n % d64) as usize)
    }
}
