//! Repeated keys of a `get_multi` batch, found without hashing each key
//! with SipHash.

use std::hash::BuildHasher;
use std::sync::OnceLock;

/// Finds the repeated keys of a batch: an open-addressing table of indices
/// into the keys kept so far. Cheaper than a `HashSet<&[u8]>` (SipHash) on the
/// `get_multi` path; the FNV-1a hash is seeded per process, so a caller cannot
/// pick keys that all collide without knowing the seed.
pub(super) struct Distinct {
    /// `index + 1` of a kept key, `0` for an empty slot.
    slots: Vec<u32>,
    mask: usize,
    seed: u64,
}

impl Distinct {
    pub(super) fn with_capacity(n: usize) -> Distinct {
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
    pub(super) fn insert(&mut self, kept: &[&[u8]], key: &[u8]) -> bool {
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
