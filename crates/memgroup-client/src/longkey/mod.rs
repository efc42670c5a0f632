//! Long keys (off by default): a key longer than memcached allows (250
//! bytes) — or than a configured limit — is stored under a short digest key,
//! its value wrapped in an envelope that holds the original key. A read
//! unwraps the envelope and checks the key: a value stored under the same
//! digest by another key (a collision) is a miss, never that key's value.
//!
//! Two schemes: memgroup's own ([`LongKeys`], below: keys that memcached
//! cannot take, in a fleet of memgroup clients), and EVCache's hashed keys
//! ([`EvcacheKeys`](memgroup_hash::evcache::EvcacheKeys): every key or keys
//! over 200 Java characters, the digest alone the key, the value in a
//! Java-serialized `EVCacheValue`, [`evcache`]), read and written by the
//! Java EVCache clients of the same fleet. Cluster-wide here.
//!
//! Envelope: `MGLK` `\x01`, the key's length (u32, big-endian), the key, the
//! value. The wire key: a prefix, then the digest in standard, padded
//! base64 (valid memcached key characters).
//!
//! Only whole-value commands carry envelopes: `set`, `add`, `replace`,
//! `cas`, the meta set (its `F` and `T` inside the envelope), reads,
//! `delete`, `touch`. `append` and `prepend` (either form) are refused
//! (`InvalidArgument`): they would change the value without its envelope;
//! so are `incr` and `decr` under memgroup's scheme (EVCache's applies them
//! to the hashed key, as EVCache does).

use std::fmt;
use std::sync::Arc;

use bytes::Bytes;
use md5::{Digest, Md5};

use crate::error::{Error, ErrorKind};
use memgroup_hash::evcache::EvcacheKeys;

pub(crate) mod evcache;

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
/// `cas`, the meta set, reads, `delete`, `touch`. `append`, `prepend`,
/// `incr` and `decr` on a long key are refused (`InvalidArgument`): they
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

/// How long keys become short ones: the builder's choice.
#[derive(Debug, Clone)]
pub(crate) enum KeyScheme {
    /// memgroup's own ([`LongKeys`]).
    Memgroup(LongKeys),
    /// EVCache's hashed keys.
    Evcache(EvcacheKeys),
}

impl KeyScheme {
    /// The key a wire key (canonical, prefix included) is stored under when
    /// it is shortened, and what its envelope holds; `None` when it goes as
    /// it is.
    pub(crate) fn short_key(&self, key: &[u8]) -> Option<(Vec<u8>, LongKey)> {
        let (short, envelope) = match self {
            KeyScheme::Memgroup(long) => (long.digest_key(key)?, Envelope::Memgroup),
            KeyScheme::Evcache(keys) => (keys.wire_key(key)?.into_bytes(), Envelope::Evcache),
        };
        let original = key.to_vec();
        Some((short, LongKey { original, envelope }))
    }
}

/// How a cluster stores long or hashed keys: its scheme, and the groups
/// that store them otherwise (EVCache lets `<app>.<group>.hash.key` and the
/// other key settings differ per server group).
#[derive(Debug, Clone, Default)]
pub(crate) struct KeySchemes {
    /// The cluster's scheme (`None`: keys go as given).
    pub(crate) cluster: Option<KeyScheme>,
    /// By group name: a group's own scheme (`None`: as given there).
    pub(crate) groups: Vec<(String, Option<KeyScheme>)>,
}

impl KeySchemes {
    /// Whether any group shortens keys.
    pub(crate) fn any(&self) -> bool {
        self.cluster.is_some() || self.groups.iter().any(|(_, s)| s.is_some())
    }

    /// Whether every group stores keys the same way.
    pub(crate) fn uniform(&self) -> bool {
        self.groups.is_empty()
    }

    /// Whether some group uses EVCache's hashed keys.
    pub(crate) fn evcache(&self) -> bool {
        std::iter::once(&self.cluster)
            .chain(self.groups.iter().map(|(_, s)| s))
            .any(|s| matches!(s, Some(KeyScheme::Evcache(_))))
    }
}

/// Which envelope a shortened key's value is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Envelope {
    Memgroup,
    Evcache,
}

/// A key stored under a short one.
#[derive(Debug, Clone)]
pub(crate) struct LongKey {
    /// The key its envelope holds.
    pub(crate) original: Vec<u8>,
    pub(crate) envelope: Envelope,
}

impl LongKey {
    /// `value` (with its client `flags`, stored for `exptime`) in this key's
    /// envelope, and the flags to store it with.
    pub(crate) fn wrap(
        &self,
        value: &[u8],
        flags: u32,
        exptime: u32,
    ) -> Result<(Vec<u8>, u32), Error> {
        match self.envelope {
            Envelope::Memgroup => Ok((wrap(&self.original, value)?, flags)),
            Envelope::Evcache => {
                let envelope = evcache::Envelope {
                    key: String::from_utf8_lossy(&self.original).into_owned(),
                    value: value.to_vec(),
                    flags,
                    ttl: i64::from(exptime),
                    create_time: crate::clock::unix_millis(),
                };
                Ok((evcache::encode(&envelope), evcache::ENVELOPE_FLAGS))
            }
        }
    }

    /// The value and client flags inside `stored` (stored with `flags`,
    /// when the reply says) if its envelope holds this key; `None` for
    /// another key's (a digest collision) or anything not in this envelope.
    pub(crate) fn unwrap(&self, stored: &Bytes, flags: Option<u32>) -> Option<(Bytes, u32)> {
        match self.envelope {
            Envelope::Memgroup => Some((unwrap(&self.original, stored)?, flags.unwrap_or(0))),
            Envelope::Evcache => {
                // Serialized, not compressed: as EVCache writes envelopes.
                // A meta reply without `f` leaves it to the envelope itself.
                if flags.is_some_and(|f| f & 0b11 != evcache::ENVELOPE_FLAGS) {
                    return None;
                }
                let envelope = evcache::decode(stored)?;
                (envelope.key == String::from_utf8_lossy(&self.original))
                    .then(|| (Bytes::from(envelope.value), envelope.flags))
            }
        }
    }

    /// A meta reply for this key with its value unwrapped (and the `f`
    /// token, when asked for, the client flags inside; `s` the size inside;
    /// `k`, the key asked for); `None` when the value is not this key's envelope. A reply
    /// without a value (no `v` asked) or a lease stub (empty, no envelope
    /// yet) keeps its value as it is.
    pub(crate) fn unwrap_meta(
        &self,
        mut meta: memgroup_proto::MetaResponse,
    ) -> Option<memgroup_proto::MetaResponse> {
        let (mut inner_flags, mut inner_len) = (None, None);
        if let Some(value) = meta.value.as_ref().filter(|v| !v.is_empty()) {
            let stored = meta.flag_u64(b'f').and_then(|f| u32::try_from(f).ok());
            let (value, flags) = self.unwrap(value, stored)?;
            inner_len = Some(value.len());
            meta.value = Some(value);
            inner_flags = stored.map(|_| flags);
        }
        // The key returned (`k`) is the one asked for, not its digest, when
        // it can stand as a token.
        let key = (meta.flag(b'k').is_some()
            && self.original.iter().all(|&b| b > b' ' && b != 0x7f))
        .then_some(&self.original[..]);
        if inner_len.is_some() || key.is_some() {
            meta.flags = map_tokens(&meta, |letter| {
                match (letter, inner_flags, key, inner_len) {
                    (b'f', Some(flags), ..) => Token::Value(flags.to_string().into_bytes()),
                    (b'k', _, Some(key), _) => Token::Value(key.to_vec()),
                    (b's', .., Some(len)) => Token::Value(len.to_string().into_bytes()),
                    _ => Token::Keep,
                }
            });
        }
        Some(meta)
    }

    /// Whether `incr` and `decr` apply to this key (without an envelope):
    /// on EVCache's hashed keys, as EVCache applies them (a plain counter
    /// under the hashed key, which EVCache's own reads then miss).
    pub(crate) fn takes_arithmetic(&self) -> bool {
        self.envelope == Envelope::Evcache
    }
}

/// What becomes of one meta return flag.
enum Token {
    Keep,
    Drop,
    /// Its letter with this value.
    Value(Vec<u8>),
}

/// `meta`'s return flags, each as `edit` says by its letter.
fn map_tokens(meta: &memgroup_proto::MetaResponse, mut edit: impl FnMut(u8) -> Token) -> Bytes {
    let mut out = Vec::with_capacity(meta.flags.len() + 8);
    for (letter, kept) in meta.flags() {
        let replaced;
        let value = match edit(letter) {
            Token::Drop => continue,
            Token::Keep => kept,
            Token::Value(value) => {
                replaced = value;
                &replaced[..]
            }
        };
        if !out.is_empty() {
            out.push(b' ');
        }
        out.push(letter);
        out.extend_from_slice(value);
    }
    Bytes::from(out)
}

/// A meta reply read with its value (`v f`) answered as a read without it:
/// the size token (`s`, when `size`) that of the value, the client flags
/// (`f`) only when `flags`, no value, `HD` for `VA`.
pub(crate) fn without_value(
    mut meta: memgroup_proto::MetaResponse,
    size: bool,
    flags: bool,
) -> memgroup_proto::MetaResponse {
    let len = meta.value.take().map_or(0, |v| v.len());
    meta.flags = map_tokens(&meta, |letter| match letter {
        b'f' if !flags => Token::Drop,
        b's' if size => Token::Value(len.to_string().into_bytes()),
        _ => Token::Keep,
    });
    if meta.status == memgroup_proto::MetaStatus::Va {
        meta.status = memgroup_proto::MetaStatus::Hd;
    }
    meta
}

/// `value` in an envelope holding `key`.
fn wrap(key: &[u8], value: &[u8]) -> Result<Vec<u8>, Error> {
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
fn unwrap(key: &[u8], stored: &Bytes) -> Option<Bytes> {
    let rest = stored.strip_prefix(MAGIC.as_slice())?;
    let len = u32::from_be_bytes(rest.get(..4)?.try_into().ok()?) as usize;
    let held = rest.get(4..len.checked_add(4)?)?;
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
