//! The file's short keys: `long_keys` (memgroup's own) or `[evcache_keys]`
//! (EVCache's hashed keys, its properties' names: `hash_key`,
//! `auto_hash_keys`, `max_key_length`, `hash_algo`, `max_digest_bytes`,
//! `max_hash_length`, `hash_encoder`), each checked whole.

use memgroup_client::LongKeys;
use memgroup_hash::evcache::{EvcacheKeyEncoding, EvcacheKeyHash, EvcacheKeys};
use serde::Deserialize;

use super::{ConfigError, RawFile};

/// `[evcache_keys]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawEvcacheKeys {
    hash_key: Option<bool>,
    auto_hash_keys: Option<bool>,
    max_key_length: Option<usize>,
    hash_algo: Option<String>,
    max_digest_bytes: Option<usize>,
    max_hash_length: Option<usize>,
    hash_encoder: Option<String>,
}

/// `long_keys = true` and its two optional settings, checked.
pub(super) fn long_keys(raw: &RawFile) -> Result<Option<LongKeys>, ConfigError> {
    let tuned = raw.long_keys_max_len.is_some() || raw.long_keys_prefix.is_some();
    if raw.long_keys != Some(true) {
        return if tuned {
            Err(ConfigError::new(
                "long_keys_max_len and long_keys_prefix need long_keys = true",
            ))
        } else {
            Ok(None)
        };
    }
    let mut long_keys = LongKeys::default();
    if let Some(max) = raw.long_keys_max_len {
        if !(1..=memgroup_proto::MAX_KEY_LEN).contains(&max) {
            return Err(ConfigError::new(format!(
                "long_keys_max_len: {max} is out of range: give 1 to {} (memcached's limit)",
                memgroup_proto::MAX_KEY_LEN
            )));
        }
        long_keys = long_keys.max_len(max);
    }
    if let Some(prefix) = &raw.long_keys_prefix {
        // A digest key is the prefix and 24 characters: it must fit.
        if prefix.len() > 200 || memgroup_proto::Key::new(prefix.as_bytes()).is_err() {
            return Err(ConfigError::new(format!(
                "long_keys_prefix: {prefix:?} is not a key part: at most 200 bytes, no spaces or control characters"
            )));
        }
        long_keys = long_keys.prefix(prefix.clone());
    }
    Ok(Some(long_keys))
}

/// `[evcache_keys]`, checked: one scope, a known algorithm and encoder, not
/// beside `long_keys`.
pub(super) fn evcache_keys(raw: &RawFile) -> Result<Option<EvcacheKeys>, ConfigError> {
    let Some(e) = &raw.evcache_keys else {
        return Ok(None);
    };
    if raw.long_keys == Some(true) {
        return Err(ConfigError::new(
            "long_keys and [evcache_keys] both shorten keys: give one",
        ));
    }
    let algorithm = e.hash_algo.as_deref().unwrap_or("siphash24");
    let algorithm = algorithm
        .parse()
        .map_err(|e: String| ConfigError::new(format!("[evcache_keys] hash_algo: {e}")))?;
    let mut hash = EvcacheKeyHash::new(algorithm);
    if let Some(n) = e.max_digest_bytes {
        hash = hash.max_digest_bytes(n);
    }
    if let Some(n) = e.max_hash_length {
        hash = hash.max_hash_length(n);
    }
    if let Some(encoder) = &e.hash_encoder {
        let encoding: EvcacheKeyEncoding = encoder
            .parse()
            .map_err(|e: String| ConfigError::new(format!("[evcache_keys] hash_encoder: {e}")))?;
        hash = hash.encoding(encoding);
    }
    let keys = match (e.hash_key == Some(true), e.auto_hash_keys == Some(true)) {
        (true, _) => EvcacheKeys::every_key(hash),
        (false, true) => EvcacheKeys::long_keys(hash),
        (false, false) => {
            return Err(ConfigError::new(
                "[evcache_keys]: give hash_key = true (every key) or auto_hash_keys = true (keys over max_key_length)",
            ));
        }
    };
    Ok(Some(match e.max_key_length {
        Some(n) => keys.max_key_length(n),
        None => keys,
    }))
}

#[cfg(test)]
mod tests {
    use super::super::ClusterFile;
    use memgroup_hash::evcache::{EvcacheHashAlgorithm, EvcacheKeyHash, EvcacheKeys};

    #[test]
    fn evcache_keys_are_read_with_evcaches_names_and_checked() {
        let file = ClusterFile::parse(
            "[evcache_keys]\nauto_hash_keys = true\nhash_algo = \"md5\"\nmax_key_length = 150\nmax_hash_length = 10",
        )
        .unwrap();
        let hash = EvcacheKeyHash::new(EvcacheHashAlgorithm::Md5).max_hash_length(10);
        assert_eq!(
            file.evcache_keys,
            Some(EvcacheKeys::long_keys(hash).max_key_length(150))
        );
        let every = ClusterFile::parse("evcache_keys = { hash_key = true }").unwrap();
        assert_eq!(
            every.evcache_keys,
            Some(EvcacheKeys::every_key(EvcacheKeyHash::new(
                EvcacheHashAlgorithm::SipHash24
            )))
        );
        for (bad, says) in [
            ("evcache_keys = {}", "hash_key = true"),
            (
                "evcache_keys = { hash_key = true, hash_algo = \"md6\" }",
                "md6",
            ),
            (
                "evcache_keys = { hash_key = true, hash_encoder = \"hex\" }",
                "hex",
            ),
            ("evcache_keys = { hash_key = true, salt = 1 }", "salt"),
            (
                "long_keys = true\nevcache_keys = { hash_key = true }",
                "give one",
            ),
        ] {
            let err = ClusterFile::parse(bad).unwrap_err().to_string();
            assert!(err.contains(says), "{bad}: {err}");
        }
    }
}
