//! Key hash functions (key bytes → integer), bit-compatible with the reference clients.

use std::fmt;

use md5::{Digest, Md5};

/// Calls `f` with every UTF-16 code unit of `key` decoded as UTF-8, which is the `char`
/// sequence a JVM holds for a `String` built from those bytes.
///
/// Invalid UTF-8 becomes one U+FFFD per maximal invalid subsequence, the substitution of
/// `String::from_utf8_lossy` (and of Java's `new String(bytes, UTF_8)`), without allocating.
#[inline]
pub(crate) fn for_each_utf16(key: &[u8], mut f: impl FnMut(u16)) {
    // Most keys are ASCII; the check is vectorised and the loop then needs no decoding.
    if key.is_ascii() {
        key.iter().for_each(|&b| f(u16::from(b)));
        return;
    }
    for chunk in key.utf8_chunks() {
        chunk.valid().encode_utf16().for_each(&mut f);
        if !chunk.invalid().is_empty() {
            f(char::REPLACEMENT_CHARACTER as u16);
        }
    }
}

/// Number of UTF-16 code units [`for_each_utf16`] produces for `key`.
pub(crate) fn utf16_len(key: &[u8]) -> usize {
    let mut n = 0;
    for_each_utf16(key, |_| n += 1);
    n
}

/// Java `String.hashCode()` state: `h = 31·h + c` over UTF-16 code units, 32-bit wrap.
#[inline]
fn java_fold(mut h: u32, key: &[u8]) -> u32 {
    for_each_utf16(key, |u| h = h.wrapping_mul(31).wrapping_add(u32::from(u)));
    h
}

/// Whalin OLD_COMPAT state: `h = 33·h + c` over UTF-16 code units, 64-bit wrap.
#[inline]
fn old_compat_fold(mut h: u64, key: &[u8]) -> u64 {
    for_each_utf16(key, |u| h = h.wrapping_mul(33).wrapping_add(u64::from(u)));
    h
}

/// Whalin NATIVE_HASH: Java's `String.hashCode()` of the key, sign-extended to `i64`
/// (the Java client widens the `int` to a `long` before taking the bucket remainder).
///
/// The key is decoded as UTF-8 and hashed over UTF-16 code units, as the JVM sees it; for
/// invalid UTF-8 see [`HashFunction::Native`].
///
/// ```
/// assert_eq!(memgroup_hash::native_hash(b"a"), 97);
/// assert_eq!(memgroup_hash::native_hash(b"polygenelubricants"), -2147483648);
/// assert_eq!(memgroup_hash::native_hash("café".as_bytes()), 3045921);
/// ```
#[must_use]
pub fn native_hash(key: &[u8]) -> i64 {
    i64::from(java_fold(0, key) as i32)
}

/// Whalin OLD_COMPAT_HASH: `h = h·33 + c` over the UTF-16 code units, in a wrapping signed
/// 64-bit integer (so it may be negative after overflow).
///
/// ```
/// assert_eq!(memgroup_hash::old_compat_hash(b"polygenelubricants"), 8136042914648030586);
/// assert_eq!(memgroup_hash::old_compat_hash(b"user%3A5118636"), -4018010527777005306);
/// ```
#[must_use]
pub fn old_compat_hash(key: &[u8]) -> i64 {
    old_compat_fold(0, key) as i64
}

/// The 15-bit CRC hash shared by Whalin NEW_COMPAT_HASH, python-memcached ≥ 1.60
/// `cmemcache_hash` and libmemcached `MEMCACHED_HASH_CRC`: `(crc32(key) >> 16) & 0x7fff`
/// with the IEEE/zlib CRC-32. Always in `0..=32767`.
///
/// ```
/// assert_eq!(memgroup_hash::new_compat_hash(b"a"), 26807);
/// ```
#[must_use]
pub fn new_compat_hash(key: &[u8]) -> u32 {
    crc15(crc32fast::hash(key))
}

#[inline]
fn crc15(crc: u32) -> u32 {
    (crc >> 16) & 0x7fff
}

/// python-memcached 1.58/1.59 `cmemcache_hash`: [`new_compat_hash`] with `or 1`, so a hash
/// of 0 becomes 1. Versions 1.60 and later dropped the `or 1`.
///
/// ```
/// assert_eq!(memgroup_hash::new_compat_hash_or_one(b"71"), 1);
/// assert_eq!(memgroup_hash::new_compat_hash(b"71"), 0);
/// ```
#[must_use]
pub fn new_compat_hash_or_one(key: &[u8]) -> u32 {
    new_compat_hash(key).max(1)
}

/// MD5 of the key bytes, digest bytes 0..3 read as a little-endian `u32`: Whalin
/// CONSISTENT_HASH, spymemcached `KETAMA_HASH` and libmemcached `MEMCACHED_HASH_MD5`.
///
/// ```
/// assert_eq!(memgroup_hash::md5_hash(b"a"), 3111502092);
/// ```
#[must_use]
pub fn md5_hash(key: &[u8]) -> u32 {
    md5_words(key)[0]
}

/// The four little-endian `u32` words of `md5(bytes)`: one key hash, or four ketama points.
#[inline]
pub(crate) fn md5_words(bytes: &[u8]) -> [u32; 4] {
    words(&Md5::digest(bytes))
}

#[inline]
fn words(d: &[u8]) -> [u32; 4] {
    std::array::from_fn(|i| {
        u32::from_le_bytes([d[4 * i], d[4 * i + 1], d[4 * i + 2], d[4 * i + 3]])
    })
}

/// libmemcached's default hash (`MEMCACHED_HASH_DEFAULT`): Jenkins one-at-a-time, reading
/// each byte through a plain `char`. On x86-64 `char` is signed, so bytes ≥ 0x80 are
/// sign-extended (0xE9 becomes 0xFFFFFFE9); the reference vectors confirm this for every
/// non-ASCII key.
///
/// ```
/// assert_eq!(memgroup_hash::one_at_a_time_hash(b"a"), 3392050242);
/// ```
#[must_use]
pub fn one_at_a_time_hash(key: &[u8]) -> u32 {
    oaat_finish(oaat_update(0, key))
}

#[inline]
fn oaat_update(mut h: u32, bytes: &[u8]) -> u32 {
    for &b in bytes {
        // C's `(uint32_t)(char)b` with a signed char: sign-extend, then reinterpret.
        h = h.wrapping_add(i32::from(b as i8) as u32);
        h = h.wrapping_add(h << 10);
        h ^= h >> 6;
    }
    h
}

#[inline]
fn oaat_finish(mut h: u32) -> u32 {
    h = h.wrapping_add(h << 3);
    h ^= h >> 11;
    h.wrapping_add(h << 15)
}

/// A key hash function: turns key bytes into the integer a locator places.
///
/// Implement it to plug your own hash into a [`Locator`](crate::Locator) (see
/// [`Locator::with_hasher`](crate::Locator::with_hasher)); the built-in functions are the
/// [`HashFunction`] values. Implementations must be pure: the same bytes always give the
/// same value.
pub trait KeyHasher: fmt::Debug + Send + Sync {
    /// Hashes `key`. Ring locators expect values in `0..=u32::MAX` (anything else lands on the
    /// first ring point); modulo locators accept any value.
    fn hash(&self, key: &[u8]) -> i64;

    /// Hashes the concatenation `prefix ++ key`, as used by the failover rehash
    /// (`"<n>" + key`). The default concatenates into a stack buffer (heap only past 256
    /// bytes); override it if your hash can be fed in pieces.
    fn hash_concat(&self, prefix: &[u8], key: &[u8]) -> i64 {
        let len = prefix.len() + key.len();
        let mut stack = [0u8; 256];
        if len <= stack.len() {
            stack[..prefix.len()].copy_from_slice(prefix);
            stack[prefix.len()..len].copy_from_slice(key);
            self.hash(&stack[..len])
        } else {
            self.hash(&[prefix, key].concat())
        }
    }
}

/// The built-in key hash functions, one per reference client behaviour.
///
/// Which [`HashStrategy`](crate::HashStrategy) uses which function is listed in the crate
/// documentation. Every function reads the key as raw bytes and never validates it.
///
/// Invalid UTF-8: the UTF-16 functions ([`Native`](HashFunction::Native),
/// [`OldCompat`](HashFunction::OldCompat)) see the lossily decoded text, as a JVM would; the
/// byte functions hash the raw bytes, as libmemcached and python-memcached do (a JVM would
/// hash the UTF-8 of U+FFFD instead, but a Java application cannot produce such keys).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum HashFunction {
    /// [`native_hash`]: Java `String.hashCode()` over UTF-16, sign-extended.
    ///
    /// Invalid UTF-8 is decoded with one U+FFFD per maximal invalid subsequence (as
    /// `String::from_utf8_lossy` and Java's `new String(bytes, UTF_8)` do), so such a key
    /// hashes like the string a JVM would have decoded from the same bytes.
    Native,
    /// [`old_compat_hash`]: `h·33 + c` over UTF-16, wrapping `i64`; invalid UTF-8 as for
    /// [`HashFunction::Native`].
    OldCompat,
    /// [`new_compat_hash`]: 15-bit CRC of the raw bytes.
    NewCompat,
    /// [`new_compat_hash_or_one`]: python-memcached 1.59's CRC hash (0 becomes 1).
    NewCompatOrOne,
    /// [`md5_hash`]: MD5 word 0 of the raw bytes.
    Md5,
    /// [`one_at_a_time_hash`]: libmemcached's default, with sign-extended bytes.
    OneAtATime,
}

impl HashFunction {
    /// Hashes `key`, returning the value in the reference client's own signedness (the
    /// 32-bit unsigned functions are widened without sign extension).
    #[must_use]
    pub fn hash(self, key: &[u8]) -> i64 {
        match self {
            HashFunction::Native => native_hash(key),
            HashFunction::OldCompat => old_compat_hash(key),
            HashFunction::NewCompat => i64::from(new_compat_hash(key)),
            HashFunction::NewCompatOrOne => i64::from(new_compat_hash_or_one(key)),
            HashFunction::Md5 => i64::from(md5_hash(key)),
            HashFunction::OneAtATime => i64::from(one_at_a_time_hash(key)),
        }
    }

    /// Hashes `prefix ++ key` without building the concatenation: every function here can be
    /// fed in pieces (the UTF-16 ones because an ASCII prefix never splits a character).
    #[must_use]
    pub fn hash_concat(self, prefix: &[u8], key: &[u8]) -> i64 {
        match self {
            HashFunction::Native => {
                // A prefix ending in a partial UTF-8 sequence would decode differently when
                // joined; callers only pass decimal digits, which cannot.
                debug_assert!(prefix.is_ascii());
                i64::from(java_fold(java_fold(0, prefix), key) as i32)
            }
            HashFunction::OldCompat => {
                debug_assert!(prefix.is_ascii());
                old_compat_fold(old_compat_fold(0, prefix), key) as i64
            }
            HashFunction::NewCompat | HashFunction::NewCompatOrOne => {
                let mut crc = crc32fast::Hasher::new();
                crc.update(prefix);
                crc.update(key);
                let h = crc15(crc.finalize());
                i64::from(if self == HashFunction::NewCompatOrOne {
                    h.max(1)
                } else {
                    h
                })
            }
            HashFunction::Md5 => {
                let mut md5 = Md5::new();
                md5.update(prefix);
                md5.update(key);
                i64::from(words(&md5.finalize())[0])
            }
            HashFunction::OneAtATime => {
                i64::from(oaat_finish(oaat_update(oaat_update(0, prefix), key)))
            }
        }
    }
}

impl KeyHasher for HashFunction {
    fn hash(&self, key: &[u8]) -> i64 {
        HashFunction::hash(*self, key)
    }

    fn hash_concat(&self, prefix: &[u8], key: &[u8]) -> i64 {
        HashFunction::hash_concat(*self, prefix, key)
    }
}

/// Repeated-rehash helper for the failover probes `"<n>" + key`: precomputes what depends
/// only on the key, so that the pathological million-probe stages cost a few nanoseconds
/// per probe instead of a full rehash of the key.
#[derive(Debug)]
pub(crate) enum PrefixHasher<'a> {
    /// Java `hashCode`: `H(p ++ k) = H(p)·31^len16(k) + H(k)` (mod 2^32), since the fold is
    /// linear in its starting state.
    Native { key_hash: u32, scale: u32 },
    /// OLD_COMPAT: the same identity with 33 and mod 2^64.
    OldCompat { key_hash: u64, scale: u64 },
    /// Everything else is streamed: prefix, then the key.
    Streamed {
        hasher: &'a dyn KeyHasher,
        key: &'a [u8],
    },
}

impl<'a> PrefixHasher<'a> {
    pub(crate) fn new(
        hasher: &'a dyn KeyHasher,
        builtin: Option<HashFunction>,
        key: &'a [u8],
    ) -> Self {
        match builtin {
            Some(HashFunction::Native) => PrefixHasher::Native {
                key_hash: java_fold(0, key),
                // Truncating the 64-bit power is exact: multiplication mod 2^64 reduces mod 2^32.
                scale: pow_wrapping(31, utf16_len(key)) as u32,
            },
            Some(HashFunction::OldCompat) => PrefixHasher::OldCompat {
                key_hash: old_compat_fold(0, key),
                scale: pow_wrapping(33, utf16_len(key)),
            },
            _ => PrefixHasher::Streamed { hasher, key },
        }
    }

    /// Hash of `prefix ++ key`; `prefix` must be ASCII (it is the rehash counter).
    #[inline]
    pub(crate) fn hash(&self, prefix: &[u8]) -> i64 {
        debug_assert!(prefix.is_ascii());
        match *self {
            PrefixHasher::Native { key_hash, scale } => {
                // ASCII bytes are their own UTF-16 code units: fold them directly.
                let p = prefix
                    .iter()
                    .fold(0u32, |h, &b| h.wrapping_mul(31).wrapping_add(u32::from(b)));
                i64::from(p.wrapping_mul(scale).wrapping_add(key_hash) as i32)
            }
            PrefixHasher::OldCompat { key_hash, scale } => {
                let p = prefix
                    .iter()
                    .fold(0u64, |h, &b| h.wrapping_mul(33).wrapping_add(u64::from(b)));
                p.wrapping_mul(scale).wrapping_add(key_hash) as i64
            }
            PrefixHasher::Streamed { hasher, key } => hasher.hash_concat(prefix, key),
        }
    }
}

/// The failover rehash counter as decimal text, incremented in place: the probe loop runs up
/// to millions of times, and this avoids a division per digit per probe.
#[derive(Debug)]
pub(crate) struct DecimalCounter {
    digits: [u8; 10],
    start: usize,
}

impl DecimalCounter {
    /// The counter at `0`.
    pub(crate) fn new() -> DecimalCounter {
        DecimalCounter {
            digits: [b'0'; 10],
            start: 9,
        }
    }

    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.digits[self.start..]
    }

    /// Adds one. Callers stop below `i32::MAX`, so ten digits never overflow.
    pub(crate) fn increment(&mut self) {
        for i in (0..self.digits.len()).rev() {
            if self.digits[i] == b'9' {
                self.digits[i] = b'0';
            } else {
                self.digits[i] += 1;
                self.start = self.start.min(i);
                return;
            }
        }
    }
}

/// `base^exp` modulo 2^64 by squaring (the UTF-16 length of a key is the exponent).
fn pow_wrapping(base: u64, mut exp: usize) -> u64 {
    let (mut acc, mut b) = (1u64, base);
    while exp > 0 {
        if exp & 1 == 1 {
            acc = acc.wrapping_mul(b);
        }
        b = b.wrapping_mul(b);
        exp >>= 1;
    }
    acc
}

/// Decimal text of `n` written into `buf`, as Java's `String.valueOf(int)` or Python's
/// `str(int)` produce it, without allocating.
#[inline]
pub(crate) fn decimal(n: i64, buf: &mut [u8; 20]) -> &[u8] {
    let mut i = buf.len();
    let mut m = n.unsigned_abs();
    loop {
        i -= 1;
        buf[i] = b'0' + (m % 10) as u8;
        m /= 10;
        if m == 0 {
            break;
        }
    }
    if n < 0 {
        i -= 1;
        buf[i] = b'-';
    }
    &buf[i..]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worked_examples() {
        assert_eq!(native_hash(b"user:5118636"), -1585931321);
        assert_eq!(old_compat_hash(b"user:5118636"), 6094408478213838375);
        assert_eq!(new_compat_hash(b"user:5118636"), 23294);
        assert_eq!(md5_hash(b"user:5118636"), 3154109255);
        assert_eq!(native_hash("😀".as_bytes()), 1772899);
        assert_eq!(old_compat_hash("😀".as_bytes()), 1883613);
        assert_eq!(new_compat_hash("😀".as_bytes()), 1357);
        assert_eq!(md5_hash("😀".as_bytes()), 3286893098);
        assert_eq!(
            md5_words(b"192.168.0.1:44444-0"),
            [3337833682, 4294416579, 4127035778, 220502374]
        );
    }

    #[test]
    fn invalid_utf8_hashes_like_lossy_string() {
        let raw = b"ab\xffc\xe2\x82";
        let lossy = String::from_utf8_lossy(raw);
        assert_eq!(native_hash(raw), native_hash(lossy.as_bytes()));
        assert_eq!(old_compat_hash(raw), old_compat_hash(lossy.as_bytes()));
    }

    #[test]
    fn concat_matches_plain_hash() {
        let fns = [
            HashFunction::Native,
            HashFunction::OldCompat,
            HashFunction::NewCompat,
            HashFunction::NewCompatOrOne,
            HashFunction::Md5,
            HashFunction::OneAtATime,
        ];
        for f in fns {
            for key in ["", "a", "user:1", "café😀", "x\u{1F600}y"] {
                for prefix in ["", "0", "12", "1000000"] {
                    let joined = [prefix.as_bytes(), key.as_bytes()].concat();
                    assert_eq!(
                        f.hash_concat(prefix.as_bytes(), key.as_bytes()),
                        f.hash(&joined)
                    );
                    let p = PrefixHasher::new(&f, Some(f), key.as_bytes());
                    assert_eq!(
                        p.hash(prefix.as_bytes()),
                        f.hash(&joined),
                        "{f:?} {prefix}{key}"
                    );
                }
            }
        }
    }

    /// A user's hasher implementing only `hash`: the default `hash_concat`
    /// hashes exactly `prefix ++ key`, through the stack buffer and past it.
    #[test]
    fn the_default_concat_hashes_the_joined_bytes() {
        #[derive(Debug)]
        struct Fnv;
        impl KeyHasher for Fnv {
            fn hash(&self, key: &[u8]) -> i64 {
                i64::from(key.iter().fold(0x811c_9dc5u32, |h, &b| {
                    (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
                }))
            }
        }
        let long = vec![b'k'; 300];
        for (prefix, key) in [
            (&b""[..], &b""[..]),
            (b"7", b"user:1"),
            (b"12", &long[..250]),
            (b"1", &long[..255]),
            (b"12", &long[..255]),
            (b"123", &long[..]),
        ] {
            let joined = [prefix, key].concat();
            assert_eq!(
                Fnv.hash_concat(prefix, key),
                Fnv.hash(&joined),
                "{}+{}",
                prefix.len(),
                key.len()
            );
        }
    }

    #[test]
    fn counter_counts() {
        let mut c = DecimalCounter::new();
        let mut buf = [0; 20];
        for n in 0..=123_456 {
            assert_eq!(c.as_bytes(), decimal(n, &mut buf));
            c.increment();
        }
    }

    #[test]
    fn decimal_text() {
        let mut buf = [0; 20];
        assert_eq!(decimal(0, &mut buf), b"0");
        assert_eq!(decimal(17734, &mut buf), b"17734");
        assert_eq!(decimal(-5, &mut buf), b"-5");
        assert_eq!(decimal(i64::MIN, &mut buf), b"-9223372036854775808");
    }
}
