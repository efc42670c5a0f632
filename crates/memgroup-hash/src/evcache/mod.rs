//! EVCache's hashed keys (`<app>.hash.key`, `<app>.auto.hash.keys`): the
//! canonical key (`prefix:key`, or the key alone) hashed over its UTF-8 bytes
//! by the function `<app>.hash.algo` names, the digest cut to
//! `max.digest.bytes`, encoded as standard base64 without padding (or
//! ascii85) and cut to `max.hash.length`. That string alone is the memcached
//! key, and what ketama routes on. Every rule as EVCache 5.x's `KeyHasher`
//! and `EVCacheKey` apply it with Guava's hash functions, checked against
//! Java in the integration tests.
//!
//! ```
//! use memgroup_hash::evcache::{EvcacheHashAlgorithm, EvcacheKeyHash, EvcacheKeys};
//! let hash = EvcacheKeyHash::new(EvcacheHashAlgorithm::SipHash24);
//! assert_eq!(hash.wire_key(b"foo"), "HY1HHtTBuOA");
//! // `auto.hash.keys`: only keys longer than 200 Java characters.
//! let keys = EvcacheKeys::long_keys(hash);
//! assert_eq!(keys.wire_key(b"foo"), None);
//! assert_eq!(keys.wire_key("é".repeat(201).as_bytes()).map(|k| k.len()), Some(11));
//! ```

use std::fmt;
use std::str::FromStr;

use md5::{Digest, Md5};

mod functions;

use functions::{adler32, ascii85, base64_unpadded, murmur3_x64_128, siphash24};

/// The hash function of `<app>.hash.algo` (Guava's, by EVCache's names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum EvcacheHashAlgorithm {
    /// `siphash24`, EVCache's default: SipHash-2-4 with the key bytes
    /// `00..0f` (Guava's `sipHash24()`), 8 bytes little-endian.
    SipHash24,
    /// `md5`, also what an unknown name means.
    Md5,
    /// `sha1`.
    Sha1,
    /// `sha256`.
    Sha256,
    /// `murmur3`: MurmurHash3 x64 128-bit, seed 0.
    Murmur3,
    /// `crc32`, 4 bytes little-endian.
    Crc32,
    /// `adler32`, 4 bytes little-endian.
    Adler32,
}

impl EvcacheHashAlgorithm {
    /// The algorithm EVCache takes `name` for: `None` for an empty name (no
    /// hashing); a name it does not know is MD5, as in EVCache
    /// (`goodfasthash`, seeded by each JVM's start time, cannot match any
    /// other process and is MD5 in EVCache's later releases too).
    pub fn from_evcache_name(name: &str) -> Option<EvcacheHashAlgorithm> {
        if name.is_empty() {
            return None;
        }
        Some(match name.to_lowercase().as_str() {
            "siphash24" => EvcacheHashAlgorithm::SipHash24,
            "sha1" => EvcacheHashAlgorithm::Sha1,
            "sha256" => EvcacheHashAlgorithm::Sha256,
            "murmur3" => EvcacheHashAlgorithm::Murmur3,
            "crc32" => EvcacheHashAlgorithm::Crc32,
            "adler32" => EvcacheHashAlgorithm::Adler32,
            _ => EvcacheHashAlgorithm::Md5,
        })
    }

    /// EVCache's name.
    pub fn name(self) -> &'static str {
        match self {
            EvcacheHashAlgorithm::SipHash24 => "siphash24",
            EvcacheHashAlgorithm::Md5 => "md5",
            EvcacheHashAlgorithm::Sha1 => "sha1",
            EvcacheHashAlgorithm::Sha256 => "sha256",
            EvcacheHashAlgorithm::Murmur3 => "murmur3",
            EvcacheHashAlgorithm::Crc32 => "crc32",
            EvcacheHashAlgorithm::Adler32 => "adler32",
        }
    }

    /// The digest of `data`, in the bytes Guava's `HashCode.asBytes()` gives.
    pub fn digest(self, data: &[u8]) -> Vec<u8> {
        match self {
            EvcacheHashAlgorithm::SipHash24 => {
                siphash24(0x0706_0504_0302_0100, 0x0f0e_0d0c_0b0a_0908, data)
                    .to_le_bytes()
                    .to_vec()
            }
            EvcacheHashAlgorithm::Md5 => Md5::digest(data).to_vec(),
            EvcacheHashAlgorithm::Sha1 => sha1::Sha1::digest(data).to_vec(),
            EvcacheHashAlgorithm::Sha256 => sha2::Sha256::digest(data).to_vec(),
            EvcacheHashAlgorithm::Murmur3 => murmur3_x64_128(data),
            EvcacheHashAlgorithm::Crc32 => crc32fast::hash(data).to_le_bytes().to_vec(),
            EvcacheHashAlgorithm::Adler32 => adler32(data).to_le_bytes().to_vec(),
        }
    }
}

impl fmt::Display for EvcacheHashAlgorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for EvcacheHashAlgorithm {
    type Err = String;

    /// Strict, for settings: one of EVCache's names (where EVCache itself
    /// would take a misspelling for MD5).
    fn from_str(name: &str) -> Result<Self, String> {
        match EvcacheHashAlgorithm::from_evcache_name(name) {
            Some(EvcacheHashAlgorithm::Md5) if !name.eq_ignore_ascii_case("md5") => Err(format!(
                "unknown EVCache hash algorithm {name:?} (one of: siphash24, md5, sha1, sha256, murmur3, crc32, adler32)"
            )),
            Some(algorithm) => Ok(algorithm),
            None => Err("an empty hash algorithm".into()),
        }
    }
}

/// How the digest becomes a key (`<group>.hash.encoder`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum EvcacheKeyEncoding {
    /// Standard base64 without padding (EVCache's default).
    #[default]
    Base64,
    /// Ascii85 without delimiters, `z` for a group of four zero bytes
    /// (`max.hash.length` does not apply). EVCache calls the
    /// `com.github.fzakaria:ascii85` library at `latest.release`; this is
    /// what its releases with the unsigned group arithmetic write. Its
    /// early code divided each group as a signed `int`: any group with its
    /// top bit set (about half of them) came out as other characters,
    /// spaces and non-ASCII among them, which this encoding does not
    /// reproduce (and memcached would refuse). Not checked against Java
    /// here: neither jar is at hand.
    Ascii85,
}

impl FromStr for EvcacheKeyEncoding {
    type Err = String;

    /// `base64` or `ascii85`, as `hash.encoder` names them.
    fn from_str(name: &str) -> Result<Self, String> {
        match name {
            "base64" => Ok(EvcacheKeyEncoding::Base64),
            "ascii85" => Ok(EvcacheKeyEncoding::Ascii85),
            other => Err(format!("{other:?} (one of: base64, ascii85)")),
        }
    }
}

/// One server group's key hashing: the algorithm and the two caps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EvcacheKeyHash {
    algorithm: EvcacheHashAlgorithm,
    max_digest_bytes: Option<usize>,
    max_hash_length: Option<usize>,
    encoding: EvcacheKeyEncoding,
}

impl EvcacheKeyHash {
    /// `algorithm`, the whole digest, base64.
    pub fn new(algorithm: EvcacheHashAlgorithm) -> EvcacheKeyHash {
        EvcacheKeyHash {
            algorithm,
            max_digest_bytes: None,
            max_hash_length: None,
            encoding: EvcacheKeyEncoding::Base64,
        }
    }

    /// `max.digest.bytes`: the digest's first `bytes` (0 or more than the
    /// digest: all of it).
    pub fn max_digest_bytes(mut self, bytes: usize) -> Self {
        self.max_digest_bytes = Some(bytes);
        self
    }

    /// `max.hash.length`: the encoded key's first `chars` (base64 only; 0
    /// or more than its length: all of it).
    pub fn max_hash_length(mut self, chars: usize) -> Self {
        self.max_hash_length = Some(chars);
        self
    }

    /// `hash.encoder`.
    pub fn encoding(mut self, encoding: EvcacheKeyEncoding) -> Self {
        self.encoding = encoding;
        self
    }

    /// The algorithm.
    pub fn algorithm(&self) -> EvcacheHashAlgorithm {
        self.algorithm
    }

    /// The memcached key of the canonical key `canonical` (its UTF-8 bytes).
    pub fn wire_key(&self, canonical: &[u8]) -> String {
        let mut digest = self.algorithm.digest(canonical);
        if let Some(n) = self.max_digest_bytes.filter(|&n| n > 0) {
            digest.truncate(n);
        }
        match self.encoding {
            EvcacheKeyEncoding::Base64 => {
                let mut key = base64_unpadded(&digest);
                if let Some(n) = self.max_hash_length.filter(|&n| n > 0) {
                    key.truncate(n);
                }
                key
            }
            EvcacheKeyEncoding::Ascii85 => ascii85(&digest),
        }
    }
}

impl fmt::Display for EvcacheKeyHash {
    /// `siphash24`, `md5 (8 digest bytes, 10 characters)`, `crc32 ascii85`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.algorithm)?;
        if self.encoding == EvcacheKeyEncoding::Ascii85 {
            f.write_str(" ascii85")?;
        }
        let caps: Vec<String> = [
            self.max_digest_bytes.map(|n| format!("{n} digest bytes")),
            self.max_hash_length.map(|n| format!("{n} characters")),
        ]
        .into_iter()
        .flatten()
        .collect();
        if !caps.is_empty() {
            write!(f, " ({})", caps.join(", "))?;
        }
        Ok(())
    }
}

/// Which keys are hashed: every key (`<app>.hash.key`), or only those
/// longer than a length in Java characters (`<app>.auto.hash.keys` with
/// `max.key.length`, 200 by default).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EvcacheKeys {
    every_key: bool,
    max_key_length: usize,
    hash: EvcacheKeyHash,
}

/// EVCache's `max.key.length` default.
pub const EVCACHE_MAX_KEY_LENGTH: usize = 200;

impl EvcacheKeys {
    /// Every key hashed (`<app>.hash.key=true`).
    pub fn every_key(hash: EvcacheKeyHash) -> EvcacheKeys {
        EvcacheKeys {
            every_key: true,
            max_key_length: EVCACHE_MAX_KEY_LENGTH,
            hash,
        }
    }

    /// Keys longer than `max.key.length` (200) hashed
    /// (`<app>.auto.hash.keys=true`).
    pub fn long_keys(hash: EvcacheKeyHash) -> EvcacheKeys {
        EvcacheKeys {
            every_key: false,
            max_key_length: EVCACHE_MAX_KEY_LENGTH,
            hash,
        }
    }

    /// `max.key.length`: the longest key, in Java characters (UTF-16 code
    /// units, the prefix and its `:` counted), stored as it is.
    pub fn max_key_length(mut self, chars: usize) -> Self {
        self.max_key_length = chars;
        self
    }

    /// The hashing.
    pub fn hash(&self) -> &EvcacheKeyHash {
        &self.hash
    }

    /// Whether every key is hashed.
    pub fn hashes_every_key(&self) -> bool {
        self.every_key
    }

    /// The memcached key of the canonical key `canonical` when it is
    /// hashed; `None` when it goes as it is.
    pub fn wire_key(&self, canonical: &[u8]) -> Option<String> {
        // A key has no more UTF-16 units than bytes: a short one is not counted.
        let hashed = self.every_key
            || (canonical.len() > self.max_key_length
                && java_length(canonical) > self.max_key_length);
        hashed.then(|| self.hash.wire_key(canonical))
    }
}

impl fmt::Display for EvcacheKeys {
    /// `every key as siphash24`, `keys over 200 characters as md5`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.every_key {
            write!(f, "every key as {}", self.hash)
        } else {
            write!(
                f,
                "keys over {} characters as {}",
                self.max_key_length, self.hash
            )
        }
    }
}

impl FromStr for EvcacheKeys {
    type Err = String;

    /// The tool's `--evcache-keys`: `every` or `long` (`hash.key` or
    /// `auto.hash.keys`), then `:` and optional comma-separated settings:
    /// an algorithm's name, `digest=N` (`max.digest.bytes`), `length=N`
    /// (`max.hash.length`), `max=N` (`max.key.length`), `ascii85`. E.g.
    /// `every`, `long:md5,max=150`, `every:siphash24,digest=4,length=6`.
    fn from_str(text: &str) -> Result<Self, String> {
        let (scope, settings) = text.split_once(':').unwrap_or((text, ""));
        let mut hash = EvcacheKeyHash::new(EvcacheHashAlgorithm::SipHash24);
        let mut max = EVCACHE_MAX_KEY_LENGTH;
        for setting in settings.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let number = |value: &str| {
                value
                    .parse::<usize>()
                    .map_err(|_| format!("{setting:?}: {value:?} is not a number"))
            };
            match setting.split_once('=') {
                Some(("digest", n)) => hash = hash.max_digest_bytes(number(n)?),
                Some(("length", n)) => hash = hash.max_hash_length(number(n)?),
                Some(("max", n)) => max = number(n)?,
                None => match setting.parse::<EvcacheKeyEncoding>() {
                    Ok(encoding) => hash = hash.encoding(encoding),
                    Err(_) => hash.algorithm = setting.parse()?,
                },
                Some(_) => {
                    return Err(format!(
                        "{setting:?}: not an EVCache key setting (digest=N, length=N, max=N)"
                    ));
                }
            }
        }
        let keys = match scope {
            "every" => EvcacheKeys::every_key(hash),
            "long" => EvcacheKeys::long_keys(hash),
            other => {
                return Err(format!(
                    "{other:?}: give every (hash.key) or long (auto.hash.keys), then :settings"
                ));
            }
        };
        Ok(keys.max_key_length(max))
    }
}

/// A key's length as Java's `String.length()` counts it: UTF-16 code units
/// (invalid UTF-8 counted as Java would decode it, one U+FFFD each).
pub fn java_length(key: &[u8]) -> usize {
    crate::hash::utf16_len(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn foo_hashes_as_evcache_does() {
        let key =
            |a, f: fn(EvcacheKeyHash) -> EvcacheKeyHash| f(EvcacheKeyHash::new(a)).wire_key(b"foo");
        use EvcacheHashAlgorithm::*;
        assert_eq!(key(SipHash24, |h| h), "HY1HHtTBuOA");
        assert_eq!(key(SipHash24, |h| h.max_digest_bytes(4)), "HY1HHg");
        assert_eq!(key(Md5, |h| h), "rL0Y20zC+Fzt72VPzMSk2A");
        assert_eq!(key(Md5, |h| h.max_hash_length(10)), "rL0Y20zC+F");
        assert_eq!(key(Sha1, |h| h), "C+7Hteo/D9vJXQ3UfzxbwnXaijM");
        assert_eq!(
            key(Sha256, |h| h),
            "LCa0a2j/xo/5m0U8HTBBNBNCLXBkg7+g+YpeiGJm564"
        );
        assert_eq!(key(Murmur3, |h| h), "YUX1AVeGceKHfbor5Ievfg");
        assert_eq!(key(Crc32, |h| h), "IWVzjA");
        assert_eq!(key(Adler32, |h| h), "RQGCAg");
        assert_eq!(
            key(SipHash24, |h| h.encoding(EvcacheKeyEncoding::Ascii85)),
            "*K<Q1eA8ZQ"
        );
        assert_eq!(
            key(Md5, |h| h
                .encoding(EvcacheKeyEncoding::Ascii85)
                .max_hash_length(3)),
            "XM#J*9Z$R0mI+U^bf$=0",
            "max.hash.length does not cut ascii85"
        );
    }

    #[test]
    fn names_parse_as_evcache_parses_them() {
        use EvcacheHashAlgorithm::*;
        assert_eq!(
            EvcacheHashAlgorithm::from_evcache_name("SipHash24"),
            Some(SipHash24)
        );
        assert_eq!(
            EvcacheHashAlgorithm::from_evcache_name("goodfasthash"),
            Some(Md5)
        );
        assert_eq!(EvcacheHashAlgorithm::from_evcache_name(""), None);
        assert!("goodfasthash".parse::<EvcacheHashAlgorithm>().is_err());
        assert_eq!("MD5".parse::<EvcacheHashAlgorithm>(), Ok(Md5));
        for a in [SipHash24, Md5, Sha1, Sha256, Murmur3, Crc32, Adler32] {
            assert_eq!(a.name().parse::<EvcacheHashAlgorithm>(), Ok(a));
        }
    }

    #[test]
    fn the_settings_parse_from_one_string() {
        use EvcacheHashAlgorithm::*;
        let every: EvcacheKeys = "every".parse().unwrap();
        assert_eq!(
            every,
            EvcacheKeys::every_key(EvcacheKeyHash::new(SipHash24))
        );
        let tuned: EvcacheKeys = "long:md5, digest=4,length=5,max=150,ascii85"
            .parse()
            .unwrap();
        let hash = EvcacheKeyHash::new(Md5)
            .max_digest_bytes(4)
            .max_hash_length(5)
            .encoding(EvcacheKeyEncoding::Ascii85);
        assert_eq!(tuned, EvcacheKeys::long_keys(hash).max_key_length(150));
        for bad in ["all", "every:md6", "long:digest=x", "every:size=3"] {
            assert!(bad.parse::<EvcacheKeys>().is_err(), "{bad}");
        }
    }

    #[test]
    fn long_keys_are_counted_in_java_characters() {
        let keys = EvcacheKeys::long_keys(EvcacheKeyHash::new(EvcacheHashAlgorithm::Md5));
        assert_eq!(keys.wire_key("k".repeat(200).as_bytes()), None);
        assert!(keys.wire_key("k".repeat(201).as_bytes()).is_some());
        // 100 characters outside the BMP are 200 UTF-16 units, 400 bytes.
        assert_eq!(keys.wire_key("😀".repeat(100).as_bytes()), None);
        assert!(
            keys.wire_key(format!("{}k", "😀".repeat(100)).as_bytes())
                .is_some()
        );
        let every = EvcacheKeys::every_key(EvcacheKeyHash::new(EvcacheHashAlgorithm::Md5));
        assert_eq!(
            every.wire_key(b"foo").as_deref(),
            Some("rL0Y20zC+Fzt72VPzMSk2A")
        );
        assert_eq!(every.to_string(), "every key as md5");
        assert_eq!(
            keys.max_key_length(10).to_string(),
            "keys over 10 characters as md5"
        );
    }
}
