//! Long keys (off by default): a key longer than memcached allows (250
//! bytes) — or than a configured limit — is stored under a short digest key,
//! its value wrapped in an envelope that holds the original key. A read
//! unwraps the envelope and checks the key: a value stored under the same
//! digest by another key (a collision) is a miss, never that key's value.
//!
//! EVCache does the same per server group, with a Java-serialized
//! `EVCacheValue` as the envelope. memgroup's envelope is its own (below),
//! so its long keys are read back by memgroup only; Java clients of the
//! fleet see an opaque value under the digest key. Cluster-wide here.
//!
//! Envelope: `MGLK` `\x01`, the key's length (u32, big-endian), the key, the
//! value. The wire key: a prefix, then the digest in standard, padded
//! base64 (valid memcached key characters).
//!
//! Only whole-value commands carry envelopes: `set`, `add`, `replace`,
//! `cas`, reads, `delete`, `touch`. `append`, `prepend`, `incr`, `decr` and
//! the meta commands on a long key are refused (`InvalidArgument`): they
//! would change the value without its envelope.

use std::fmt;
use std::sync::Arc;

use bytes::Bytes;
use md5::{Digest, Md5};

use crate::error::{Error, ErrorKind};

const MAGIC: &[u8; 5] = b"MGLK\x01";

/// A digest function of keys.
pub type DigestFn = dyn Fn(&[u8]) -> Vec<u8> + Send + Sync;

/// How long keys are turned into short ones.
#[derive(Clone)]
pub enum KeyDigest {
    /// MD5 of the key (16 bytes, 24 characters of base64).
    Md5,
    /// Any function of the key (for tests: one that collides).
    Custom(Arc<DigestFn>),
}

impl fmt::Debug for KeyDigest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyDigest::Md5 => f.write_str("Md5"),
            KeyDigest::Custom(_) => f.write_str("Custom"),
        }
    }
}

/// Long-key settings: [`ClientBuilder::long_keys`](crate::ClientBuilder::long_keys).
///
/// Long keys (off by default): a key longer than memcached allows (250
/// bytes) — or than a configured limit — is stored under a short digest key,
/// its value wrapped in an envelope that holds the original key. A read
/// unwraps the envelope and checks the key: a value stored under the same
/// digest by another key (a collision) is a miss, never that key's value.
///
/// EVCache does the same per server group, with a Java-serialized
/// `EVCacheValue` as the envelope. memgroup's envelope is its own (below),
/// so its long keys are read back by memgroup only; Java clients of the
/// fleet see an opaque value under the digest key. Cluster-wide here.
///
/// Envelope: `MGLK` `\x01`, the key's length (u32, big-endian), the key, the
/// value. The wire key: a prefix, then the digest in standard, padded
/// base64 (valid memcached key characters).
///
/// Only whole-value commands carry envelopes: `set`, `add`, `replace`,
/// `cas`, reads, `delete`, `touch`. `append`, `prepend`, `incr`, `decr` and
/// the meta commands on a long key are refused (`InvalidArgument`): they
/// would change the value without its envelope.
#[derive(Debug, Clone)]
pub struct LongKeys {
    max_len: usize,
    digest: KeyDigest,
    prefix: String,
}

impl Default for LongKeys {
    /// Keys over 250 bytes (memcached's limit), MD5, prefix `mglk:`.
    fn default() -> Self {
        LongKeys {
            max_len: memgroup_proto::MAX_KEY_LEN,
            digest: KeyDigest::Md5,
            prefix: "mglk:".into(),
        }
    }
}

impl LongKeys {
    /// Keys longer than `max_len` bytes (at most 250) are digested.
    pub fn max_len(mut self, max_len: usize) -> Self {
        self.max_len = max_len.min(memgroup_proto::MAX_KEY_LEN);
        self
    }

    /// The digest (default MD5).
    pub fn digest(mut self, digest: KeyDigest) -> Self {
        self.digest = digest;
        self
    }

    /// The digest keys' prefix (default `mglk:`); it must be a valid key part.
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// The digest key a long `key` (as it would go on the wire) is stored
    /// under; `None` for a key short enough to go as it is. For tools that
    /// show where a key lives (`memgroup route --long-keys`).
    pub fn digest_key(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.is_long(key).then(|| self.short_key(key))
    }

    /// Whether `key` (as it would go on the wire) is long.
    pub(crate) fn is_long(&self, key: &[u8]) -> bool {
        key.len() > self.max_len
    }

    /// The short key standing for `key`.
    pub(crate) fn short_key(&self, key: &[u8]) -> Vec<u8> {
        let digest = match &self.digest {
            KeyDigest::Md5 => Md5::digest(key).to_vec(),
            KeyDigest::Custom(f) => f(key),
        };
        let mut out = self.prefix.as_bytes().to_vec();
        memgroup_proto::base64_encode(&digest, &mut out);
        out.truncate(memgroup_proto::MAX_KEY_LEN);
        out
    }
}

impl fmt::Display for LongKeys {
    /// What `memgroup config` shows: `keys over 250 bytes as mglk:<md5>`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let digest = match self.digest {
            KeyDigest::Md5 => "md5",
            KeyDigest::Custom(_) => "digest",
        };
        write!(
            f,
            "keys over {} bytes as {}<{digest}>",
            self.max_len, self.prefix
        )
    }
}

/// `value` in an envelope holding `key`.
pub(crate) fn wrap(key: &[u8], value: &[u8]) -> Result<Vec<u8>, Error> {
    let len = u32::try_from(key.len())
        .map_err(|_| Error::new(ErrorKind::InvalidKey, "key longer than 4 GiB"))?;
    let mut out = Vec::with_capacity(MAGIC.len() + 4 + key.len() + value.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(key);
    out.extend_from_slice(value);
    Ok(out)
}

/// The value inside `stored` if its envelope holds `key`; `None` for
/// another key's value (a digest collision) or bytes without an envelope.
pub(crate) fn unwrap(key: &[u8], stored: &Bytes) -> Option<Bytes> {
    let rest = stored.strip_prefix(MAGIC.as_slice())?;
    let len = u32::from_be_bytes(rest.get(..4)?.try_into().ok()?) as usize;
    let held = rest.get(4..4 + len)?;
    (held == key).then(|| stored.slice(MAGIC.len() + 4 + len..))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_print_their_kind() {
        assert_eq!(format!("{:?}", KeyDigest::Md5), "Md5");
        let custom = KeyDigest::Custom(Arc::new(|_: &[u8]| b"same".to_vec()));
        assert_eq!(format!("{custom:?}"), "Custom");
    }

    #[test]
    fn an_envelope_returns_its_own_keys_value_only() {
        let stored = Bytes::from(wrap(b"long key", b"value").unwrap());
        assert_eq!(unwrap(b"long key", &stored).unwrap(), "value");
        assert_eq!(unwrap(b"other key", &stored), None);
        assert_eq!(unwrap(b"long key", &Bytes::from_static(b"plain")), None);
        assert_eq!(unwrap(b"long key", &stored.slice(..8)), None, "truncated");
        let empty = Bytes::from(wrap(b"k", b"").unwrap());
        assert_eq!(unwrap(b"k", &empty).unwrap(), "");
    }

    #[test]
    fn short_keys_are_valid_memcached_keys() {
        let long = LongKeys::default();
        let key = vec![b'k'; 1000];
        assert!(long.is_long(&key) && !long.is_long(&key[..250]));
        let short = long.short_key(&key);
        assert_eq!(short.len(), "mglk:".len() + 24);
        memgroup_proto::Key::new(&short).unwrap();
        assert_ne!(short, long.short_key(&key[..999]));
    }
}
