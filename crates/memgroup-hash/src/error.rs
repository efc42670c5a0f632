//! The crate's single error type.

use std::fmt;

/// Everything that can go wrong in this crate: parsing a name or an address, or building a
/// [`Locator`](crate::Locator) from input no reference client would accept.
///
/// Hashing and locating never fail; only construction and parsing do.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// The text is not one of the [`HashStrategy`](crate::HashStrategy) names.
    UnknownStrategy(String),
    /// The text is not one of the [`NodeNaming`](crate::NodeNaming) names.
    UnknownNodeNaming(String),
    /// The text is not a `host:port` address with a non-empty host and a port in 0..=65535.
    InvalidAddress(String),
    /// A locator needs at least one node.
    NoNodes,
    /// The node at `index` has weight 0. The Java clients would silently give it no buckets
    /// and no ring points, which is almost always a configuration mistake, so it is refused.
    ZeroWeight {
        /// Position of the offending node in the list given to the locator.
        index: usize,
    },
    /// The weights overflow the Java `int` arithmetic the reference clients use: the total must
    /// stay within `i32::MAX`, and for the `consistent` strategy so must `40 × nodes × weight`.
    /// Past that point the Java clients compute garbage, which we refuse to imitate.
    WeightTooLarge {
        /// Position of the node whose weight pushed the arithmetic past `i32::MAX`.
        index: usize,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::UnknownStrategy(name) => write!(
                f,
                "unknown hash strategy {name:?} (expected one of: {})",
                crate::HashStrategy::ALL
                    .iter()
                    .map(|s| s.name())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Error::UnknownNodeNaming(name) => write!(
                f,
                "unknown node naming {name:?} (expected spymemcached, libmemcached or evcache)"
            ),
            Error::InvalidAddress(addr) => {
                write!(f, "invalid server address {addr:?} (expected host:port)")
            }
            Error::NoNodes => f.write_str("a locator needs at least one server"),
            Error::ZeroWeight { index } => write!(f, "server #{index} has weight 0"),
            Error::WeightTooLarge { index } => write!(
                f,
                "weight of server #{index} overflows the reference clients' 32-bit arithmetic"
            ),
        }
    }
}

impl std::error::Error for Error {}
