//! The file's short keys: `long_keys` (memgroup's own) or `[evcache_keys]`
//! (EVCache's hashed keys, its properties' names: `hash_key`,
//! `auto_hash_keys`, `max_key_length`, `hash_algo`, `max_digest_bytes`,
//! `max_hash_length`, `hash_encoder`), each checked whole.

use memgroup_client::LongKeys;
use memgroup_hash::evcache::{EvcacheKeyEncoding, EvcacheKeyHash, EvcacheKeys};
use serde::Deserialize;

use super::{ConfigError, RawFile};

/// `[evcache_keys]` as written (a group's `evcache_keys` too).
#[derive(Debug, Default, Clone, Deserialize)]
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
    match checked(e, "[evcache_keys]")? {
        Some(keys) => Ok(Some(keys)),
        // Hashing nothing itself: the settings its groups' own fall back to.
        None if raw.groups.iter().any(|g| g.evcache_keys.is_some()) => Ok(None),
        None => Err(ConfigError::new(
            "[evcache_keys]: give hash_key = true (every key) or auto_hash_keys = true (keys over max_key_length)",
        )),
    }
}

/// A group's own `evcache_keys` (EVCache's `<app>.<group>.hash.key`, …):
/// each setting it does not give is the file's `[evcache_keys]` one, as
/// EVCache's per-group properties fall back to the app's. `Some(None)`:
/// neither `hash_key` nor `auto_hash_keys` holds, so the group stores keys
/// as given; `None`: the group has none of its own.
pub(super) fn group_evcache_keys(
    raw: &RawFile,
    own: Option<&RawEvcacheKeys>,
) -> Result<Option<Option<EvcacheKeys>>, ConfigError> {
    let Some(own) = own else {
        return Ok(None);
    };
    if raw.long_keys == Some(true) {
        return Err(ConfigError::new(
            "long_keys and evcache_keys both shorten keys: give one",
        ));
    }
    let base = raw.evcache_keys.clone().unwrap_or_default();
    let merged = RawEvcacheKeys {
        hash_key: own.hash_key.or(base.hash_key),
        auto_hash_keys: own.auto_hash_keys.or(base.auto_hash_keys),
        max_key_length: own.max_key_length.or(base.max_key_length),
        hash_algo: own.hash_algo.clone().or(base.hash_algo),
        max_digest_bytes: own.max_digest_bytes.or(base.max_digest_bytes),
        max_hash_length: own.max_hash_length.or(base.max_hash_length),
        hash_encoder: own.hash_encoder.clone().or(base.hash_encoder),
    };
    checked(&merged, "evcache_keys").map(Some)
}

/// EVCache's key settings `e` (named `what` in errors), checked; `None`
/// when they hash no key (neither `hash_key` nor `auto_hash_keys`).
fn checked(e: &RawEvcacheKeys, what: &str) -> Result<Option<EvcacheKeys>, ConfigError> {
    let algorithm = e.hash_algo.as_deref().unwrap_or("siphash24");
    let algorithm = algorithm
        .parse()
        .map_err(|e: String| ConfigError::new(format!("{what} hash_algo: {e}")))?;
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
            .map_err(|e: String| ConfigError::new(format!("{what} hash_encoder: {e}")))?;
        hash = hash.encoding(encoding);
    }
    let keys = match (e.hash_key == Some(true), e.auto_hash_keys == Some(true)) {
        (true, _) => EvcacheKeys::every_key(hash),
        (false, true) => EvcacheKeys::long_keys(hash),
        (false, false) => return Ok(None),
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

    /// A group's own settings fall back to the file's, setting by setting;
    /// neither `hash_key` nor `auto_hash_keys` there: keys as given.
    #[test]
    fn a_groups_evcache_keys_fall_back_to_the_files() {
        let group = |name: &str, own: &str| {
            format!("[[groups]]\nname = \"{name}\"\nservers = [\"h:1\"]\n{own}\n")
        };
        let file = ClusterFile::parse(&format!(
            "[evcache_keys]\nhash_key = true\nhash_algo = \"md5\"\nmax_hash_length = 10\n\n{}{}{}",
            group("a", ""),
            group("b", "evcache_keys = { hash_algo = \"sha1\" }"),
            group("c", "evcache_keys = { hash_key = false }"),
        ))
        .unwrap();
        let own: Vec<_> = file.groups.iter().map(|g| g.evcache_keys).collect();
        let sha1 = EvcacheKeyHash::new(EvcacheHashAlgorithm::Sha1).max_hash_length(10);
        assert_eq!(
            own,
            [None, Some(Some(EvcacheKeys::every_key(sha1))), Some(None)]
        );
        let bad = group(
            "a",
            "evcache_keys = { hash_key = true, hash_algo = \"md6\" }",
        );
        let err = ClusterFile::parse(&bad).unwrap_err().to_string();
        assert!(err.contains("group \"a\"") && err.contains("md6"), "{err}");
        // The file's settings as its groups' defaults alone, hashing nothing.
        let defaults = ClusterFile::parse(&format!(
            "[evcache_keys]\nhash_algo = \"sha1\"\n\n{}{}",
            group("a", ""),
            group("b", "evcache_keys = { hash_key = true }"),
        ))
        .unwrap();
        assert_eq!(defaults.evcache_keys, None);
        let sha1 = EvcacheKeyHash::new(EvcacheHashAlgorithm::Sha1);
        assert_eq!(
            defaults.groups[1].evcache_keys,
            Some(Some(EvcacheKeys::every_key(sha1)))
        );
    }
}
