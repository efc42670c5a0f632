//! Named routing strategies and the locator configuration.

use std::fmt;
use std::str::FromStr;

use crate::{Error, HashFunction, NodeNaming};

/// A routing strategy: which key hash, and how a hash picks a server. Selectable by name
/// (`FromStr`/`Display`); the crate documentation describes each one and the client settings
/// it matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum HashStrategy {
    /// `native`: Whalin NATIVE_HASH (Java `String.hashCode()`) over weight-repeated buckets.
    Native,
    /// `old-compat`: Whalin OLD_COMPAT_HASH (`h·33 + c`, 64-bit) over weight-repeated buckets.
    OldCompat,
    /// `new-compat`: Whalin NEW_COMPAT_HASH (15-bit CRC) over weight-repeated buckets.
    NewCompat,
    /// `consistent`: Whalin CONSISTENT_HASH, MD5 on Whalin's ring (double-rounded weights).
    Consistent,
    /// `ketama`: MD5 on a ketama ring (float-rounded weights) named by a [`NodeNaming`]:
    /// spymemcached, EVCache or libmemcached `KETAMA_WEIGHTED`.
    Ketama,
    /// `libmemcached-modula-oaat`: libmemcached's defaults, one-at-a-time hash and
    /// `MEMCACHED_DISTRIBUTION_MODULA` (weights ignored).
    LibmemcachedModulaOaat,
    /// `libmemcached-modula-crc`: `MEMCACHED_HASH_CRC` with `MEMCACHED_DISTRIBUTION_MODULA`.
    LibmemcachedModulaCrc,
    /// `libmemcached-ketama-unweighted`: `MEMCACHED_BEHAVIOR_KETAMA` without the weighted flag,
    /// `MEMCACHED_HASH_MD5`: 100 points per server, MD5 word 0 only. Not ketama-compatible.
    LibmemcachedKetamaUnweighted,
    /// `python-memcached`: python-memcached ≥ 1.60 (15-bit CRC, weight-repeated buckets).
    PythonMemcached,
    /// `python-memcached-1.59`: python-memcached ≤ 1.59, whose CRC hash maps 0 to 1.
    PythonMemcached159,
}

impl HashStrategy {
    /// Every strategy, in declaration order.
    pub const ALL: [HashStrategy; 10] = [
        HashStrategy::Native,
        HashStrategy::OldCompat,
        HashStrategy::NewCompat,
        HashStrategy::Consistent,
        HashStrategy::Ketama,
        HashStrategy::LibmemcachedModulaOaat,
        HashStrategy::LibmemcachedModulaCrc,
        HashStrategy::LibmemcachedKetamaUnweighted,
        HashStrategy::PythonMemcached,
        HashStrategy::PythonMemcached159,
    ];

    /// The strategy's name, as accepted by `FromStr`.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            HashStrategy::Native => "native",
            HashStrategy::OldCompat => "old-compat",
            HashStrategy::NewCompat => "new-compat",
            HashStrategy::Consistent => "consistent",
            HashStrategy::Ketama => "ketama",
            HashStrategy::LibmemcachedModulaOaat => "libmemcached-modula-oaat",
            HashStrategy::LibmemcachedModulaCrc => "libmemcached-modula-crc",
            HashStrategy::LibmemcachedKetamaUnweighted => "libmemcached-ketama-unweighted",
            HashStrategy::PythonMemcached => "python-memcached",
            HashStrategy::PythonMemcached159 => "python-memcached-1.59",
        }
    }

    /// The key hash function this strategy uses.
    #[must_use]
    pub fn hash_function(self) -> HashFunction {
        match self {
            HashStrategy::Native => HashFunction::Native,
            HashStrategy::OldCompat => HashFunction::OldCompat,
            HashStrategy::NewCompat
            | HashStrategy::LibmemcachedModulaCrc
            | HashStrategy::PythonMemcached => HashFunction::NewCompat,
            HashStrategy::PythonMemcached159 => HashFunction::NewCompatOrOne,
            HashStrategy::Consistent
            | HashStrategy::Ketama
            | HashStrategy::LibmemcachedKetamaUnweighted => HashFunction::Md5,
            HashStrategy::LibmemcachedModulaOaat => HashFunction::OneAtATime,
        }
    }

    /// Whether servers are placed on a hash ring (as opposed to modulo buckets).
    #[must_use]
    pub fn is_ring(self) -> bool {
        matches!(
            self,
            HashStrategy::Consistent
                | HashStrategy::Ketama
                | HashStrategy::LibmemcachedKetamaUnweighted
        )
    }
}

impl fmt::Display for HashStrategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for HashStrategy {
    type Err = Error;

    fn from_str(s: &str) -> Result<HashStrategy, Error> {
        HashStrategy::ALL
            .into_iter()
            .find(|h| h.name() == s)
            .ok_or_else(|| Error::UnknownStrategy(s.to_owned()))
    }
}

/// Default bound on rehash probes per failover stage. The Java client needed 100,001 probes
/// in a non-final stage of the reference vectors; a million leaves a wide margin while a
/// probe costs nanoseconds.
pub const DEFAULT_MAX_FAILOVER_PROBES: u32 = 1_000_000;

/// How a [`Locator`](crate::Locator) routes keys.
///
/// ```
/// use memgroup_hash::{HashStrategy, LocatorConfig, NodeNaming};
/// let config = LocatorConfig::new("ketama".parse::<HashStrategy>()?)
///     .with_node_naming(NodeNaming::Evcache);
/// assert_eq!(config.max_failover_probes, 1_000_000);
/// # Ok::<(), memgroup_hash::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct LocatorConfig {
    /// Key hash and distribution.
    pub strategy: HashStrategy,
    /// Point names for [`HashStrategy::Ketama`]; ignored by every other strategy (Whalin's
    /// ring always uses `host:port-j`, libmemcached's unweighted ring its own names).
    pub node_naming: NodeNaming,
    /// Whether keys go through [`sanitize_key`](crate::sanitize_key) before hashing *and on the
    /// wire*. The locator itself never transforms keys: apply
    /// [`Locator::wire_key`](crate::Locator::wire_key) and use its result for both. Whalin's
    /// `MemCachedClient` defaults to `true`; every other client here has no such step.
    pub sanitize_keys: bool,
    /// Bound on rehash probes in one failover stage (see
    /// [`Locator::failover`](crate::Locator::failover)); capped at `i32::MAX`, past which the
    /// Java counter would overflow.
    pub max_failover_probes: u32,
}

impl LocatorConfig {
    /// A configuration for `strategy` with spymemcached naming, no key sanitising and the
    /// default probe bound.
    #[must_use]
    pub fn new(strategy: HashStrategy) -> LocatorConfig {
        LocatorConfig {
            strategy,
            node_naming: NodeNaming::default(),
            sanitize_keys: false,
            max_failover_probes: DEFAULT_MAX_FAILOVER_PROBES,
        }
    }

    /// Sets [`LocatorConfig::node_naming`].
    #[must_use]
    pub fn with_node_naming(mut self, naming: NodeNaming) -> LocatorConfig {
        self.node_naming = naming;
        self
    }

    /// Sets [`LocatorConfig::sanitize_keys`].
    #[must_use]
    pub fn with_sanitize_keys(mut self, sanitize: bool) -> LocatorConfig {
        self.sanitize_keys = sanitize;
        self
    }

    /// Sets [`LocatorConfig::max_failover_probes`].
    #[must_use]
    pub fn with_max_failover_probes(mut self, probes: u32) -> LocatorConfig {
        self.max_failover_probes = probes;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for s in HashStrategy::ALL {
            assert_eq!(s.to_string().parse::<HashStrategy>().unwrap(), s);
        }
        let err = "md5".parse::<HashStrategy>().unwrap_err();
        assert!(err.to_string().contains("old-compat"), "{err}");
    }
}
