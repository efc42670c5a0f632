//! Repeated keys of a multi-key read, found without hashing each key with
//! SipHash: the table `get_multi` dedupes its keys with, then kept in the
//! result to look keys up by.

use std::hash::BuildHasher;
use std::sync::OnceLock;

/// An open-addressing table of indices into a list of distinct keys that
/// lives elsewhere (each call is given a way to read key `i`). Cheaper than
/// a `HashSet<&[u8]>` (SipHash) on the `get_multi` path; the hash is
/// seeded per process, so a caller cannot pick keys that all collide without
/// knowing the seed.
#[derive(Debug, Clone, Default)]
pub(crate) struct Distinct {
    /// `index + 1` of a kept key, `0` for an empty slot.
    slots: Vec<u32>,
    seed: u64,
}

impl Distinct {
    /// A table for up to `n` distinct keys.
    pub(crate) fn with_capacity(n: usize) -> Distinct {
        static SEED: OnceLock<u64> = OnceLock::new();
        let seed =
            *SEED.get_or_init(|| std::collections::hash_map::RandomState::new().hash_one(0u8));
        // At most half full, so probe runs stay short.
        let size = (n.max(1) * 2).next_power_of_two();
        Distinct {
            slots: vec![0; size],
            seed,
        }
    }

    /// Eight bytes at a time, each word folded in by a 128-bit multiply
    /// (as foldhash and wyhash do), not byte by byte.
    fn hash(&self, key: &[u8]) -> usize {
        const K: u64 = 0x9e37_79b9_7f4a_7c15;
        let fold = |a: u64, b: u64| {
            let m = u128::from(a) * u128::from(b);
            (m as u64) ^ ((m >> 64) as u64)
        };
        let mut h = self.seed ^ (key.len() as u64).wrapping_mul(K);
        let mut words = key.chunks_exact(8);
        for word in &mut words {
            let w = u64::from_le_bytes(word.try_into().expect("eight bytes"));
            h = fold(h ^ w, K);
        }
        let tail = words.remainder();
        if !tail.is_empty() {
            let mut last = [0u8; 8];
            last[..tail.len()].copy_from_slice(tail);
            h = fold(h ^ u64::from_le_bytes(last), K);
        }
        // Fold the high bits in: the table index takes the low ones.
        (h ^ (h >> 29)) as usize
    }

    /// The slot holding `key`, or the empty one it would go in (`None` for
    /// a table made by `Default`, which holds nothing).
    fn probe<'k>(&self, key: &[u8], kept: impl Fn(usize) -> &'k [u8]) -> Option<usize> {
        let mask = self.slots.len().checked_sub(1)?;
        let mut i = self.hash(key) & mask;
        loop {
            match self.slots[i] {
                0 => return Some(i),
                k if kept(k as usize - 1) == key => return Some(i),
                _ => i = (i + 1) & mask,
            }
        }
    }

    /// `Ok(i)` when `key` is the kept key `i` (`kept(i)` reads it); else
    /// records it as the `len`-th, which the caller keeps next, and returns
    /// `Err(len)`.
    pub(crate) fn find_or_insert<'k>(
        &mut self,
        key: &[u8],
        len: usize,
        kept: impl Fn(usize) -> &'k [u8],
    ) -> Result<usize, usize> {
        let slot = self.probe(key, kept).expect("a table made with a capacity");
        match self.slots[slot] {
            0 => {
                self.slots[slot] = u32::try_from(len + 1).expect("fewer than 2^32 keys");
                Err(len)
            }
            k => Ok(k as usize - 1),
        }
    }

    /// The index of `key` among the kept keys, if it is one.
    pub(crate) fn find<'k>(&self, key: &[u8], kept: impl Fn(usize) -> &'k [u8]) -> Option<usize> {
        match self.slots[self.probe(key, kept)?] {
            0 => None,
            k => Some(k as usize - 1),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Distinct;

    proptest::proptest! {
        /// `Distinct` keeps exactly the first occurrence of every key, and
        /// finds each kept key at its index.
        #[test]
        fn distinct_keeps_first_occurrences(keys in proptest::collection::vec(0u16..64, 0..300)) {
            let names: Vec<Vec<u8>> = keys.iter().map(|k| format!("k{k}").into_bytes()).collect();
            let mut seen = Distinct::with_capacity(names.len());
            let mut kept: Vec<&[u8]> = Vec::new();
            for name in &names {
                let at = kept.iter().position(|k| k == name);
                match seen.find_or_insert(name, kept.len(), |i| kept[i]) {
                    Ok(i) => proptest::prop_assert_eq!(Some(i), at),
                    Err(i) => {
                        proptest::prop_assert_eq!(at, None);
                        proptest::prop_assert_eq!(i, kept.len());
                        kept.push(name);
                    }
                }
            }
            let mut want: Vec<&[u8]> = Vec::new();
            for name in &names {
                if !want.contains(&&name[..]) {
                    want.push(name);
                }
            }
            proptest::prop_assert_eq!(&kept, &want);
            for (i, name) in kept.iter().enumerate() {
                proptest::prop_assert_eq!(seen.find(name, |j| kept[j]), Some(i));
            }
            proptest::prop_assert_eq!(seen.find(b"absent", |j| kept[j]), None);
            proptest::prop_assert_eq!(Distinct::default().find(b"k1", |j| kept[j]), None);
        }
    }
}
