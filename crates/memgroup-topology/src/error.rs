//! The crate's single error type.

use std::fmt;

/// Everything that can go wrong in this crate: parsing a server list, a node list or a URL,
/// or building a [`Topology`](crate::Topology) from a description no client could serve.
///
/// Every variant names the offending input: `token` is the text as written (a whole server
/// entry such as `"h1:99999"`, a whole `name=value` parameter), `name` / `group` a group name.
/// Selection and dead-host bookkeeping never fail; only parsing and construction do.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TopologyError {
    /// The input lists no server at all (empty or only whitespace).
    EmptyServerList,
    /// A server list has an empty entry, as in `"h1:11211,,h2:11211"`.
    EmptyEntry {
        /// The whole list holding the empty entry.
        list: String,
    },
    /// A server entry is not `[hostname/]host[:port[:weight]]`: an empty host, an unclosed
    /// `[` of an IPv6 literal, too many `:`-separated fields, whitespace inside.
    BadAddress {
        /// The server entry.
        token: String,
    },
    /// A server entry has a missing, non-numeric, zero or out-of-range (> 65535) port.
    BadPort {
        /// The server entry.
        token: String,
    },
    /// A server entry has a weight that is not a number in `1..=u32::MAX`.
    BadWeight {
        /// The server entry.
        token: String,
    },
    /// A server has weight 0, which every reference client turns into "never used"; almost
    /// always a mistake, so it is refused.
    ZeroWeight {
        /// The server entry (for a [`ServerSpec`](crate::ServerSpec), `host:port:0`).
        token: String,
    },
    /// The same `host:port` appears twice in one group.
    DuplicateServer {
        /// The second occurrence.
        token: String,
    },
    /// The same `host:port` is in two groups: every write would reach it
    /// twice and count as two replicas, and one zone's outage would take
    /// both copies.
    ServerInTwoGroups {
        /// The server.
        token: String,
        /// The group that lists it first.
        first: String,
        /// The group that lists it again.
        second: String,
    },
    /// An EVCache node-list segment is not `name=servers`, or a group name is empty.
    BadGroup {
        /// The segment (or the empty name).
        token: String,
    },
    /// A server list holds `name=servers`: EVCache group syntax, given
    /// where one group's servers were expected.
    GroupsAsServers {
        /// The `name=…` entry.
        token: String,
    },
    /// A group has no servers.
    EmptyGroup {
        /// The group's name.
        name: String,
    },
    /// Two groups have the same name.
    DuplicateGroup {
        /// The repeated name.
        name: String,
    },
    /// A parameter names a group that does not exist (`write_only=` in a URL).
    UnknownGroup {
        /// The unknown name.
        name: String,
    },
    /// The local zone names no group's zone: reads would silently treat
    /// every group as remote. (A [`Topology`](crate::Topology) allows it —
    /// a client in a zone without a copy —; the client's builder and the
    /// tool refuse it as the likely typo it is.)
    UnknownZone {
        /// The zone asked for.
        zone: String,
        /// The zones the groups have.
        zones: Vec<String>,
    },
    /// The arbiter names no read-write group.
    BadArbiter {
        /// The name given.
        name: String,
    },
    /// A cluster needs at least one group.
    NoGroups,
    /// Every group is write-only, so nothing could ever serve a read.
    NoReadableGroup,
    /// A group has `pool_size` 0; every group needs at least one connection slot per server.
    ZeroPoolSize {
        /// The group's name.
        group: String,
    },
    /// A group asks for more than [`MAX_POOL_SIZE`](crate::MAX_POOL_SIZE)
    /// connections per server: a typo, not a pool (each slot is a socket).
    PoolSizeTooLarge {
        /// The group's name.
        group: String,
        /// The pool size asked for.
        pool_size: usize,
    },
    /// Groups disagree on key sanitising. One key has one wire form for the whole cluster
    /// (the client validates and sends a single transformed key), so all groups must agree.
    MixedSanitize {
        /// The first group whose setting differs from the first group's.
        group: String,
    },
    /// The key prefix cannot go in front of a key: over 200 bytes, or a space or
    /// control character in it ([`Settings::key_prefix`](crate::Settings::key_prefix)).
    BadKeyPrefix {
        /// The prefix as given.
        prefix: String,
    },
    /// The text is not a `memcache://` URL.
    BadUrl {
        /// The URL as given.
        token: String,
    },
    /// A URL parameter name is not one of the documented ones.
    UnknownParam {
        /// The `name=value` parameter.
        token: String,
    },
    /// A URL parameter value is invalid (or the parameter lacks `=value`).
    BadParam {
        /// The `name=value` parameter.
        token: String,
    },
    /// The text is not the name of a [`WritePolicy`](crate::WritePolicy).
    UnknownPolicy {
        /// The text.
        token: String,
    },
    /// The text is not the name of a [`ReadFallback`](crate::ReadFallback).
    UnknownReadFallback {
        /// The text.
        token: String,
    },
    /// A URL parameter appears twice.
    DuplicateParam {
        /// The second occurrence.
        token: String,
    },
    /// The hash crate refused a group's server list (for example weights overflowing the
    /// reference clients' 32-bit arithmetic).
    Locator(memgroup_hash::Error),
}

impl fmt::Display for TopologyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TopologyError::EmptyServerList => f.write_str("the server list is empty"),
            TopologyError::EmptyEntry { list } => {
                write!(f, "empty server entry in {list:?}")
            }
            // A URL of another scheme: the one URL form taken is memcache://.
            TopologyError::BadAddress { token } if token.contains("://") => write!(
                f,
                "invalid server {token:?} (expected [hostname/]host:port[:weight], \
                 or a memcache:// URL)"
            ),
            TopologyError::BadAddress { token } => write!(
                f,
                "invalid server {token:?} (expected [hostname/]host:port[:weight])"
            ),
            TopologyError::BadPort { token } => write!(
                f,
                "missing or invalid port in server {token:?} (expected 1..=65535)"
            ),
            TopologyError::BadWeight { token } => write!(
                f,
                "invalid weight in server {token:?} (expected a positive integer)"
            ),
            TopologyError::ZeroWeight { token } => write!(f, "server {token:?} has weight 0"),
            TopologyError::DuplicateServer { token } => {
                write!(f, "server {token:?} appears twice in one group")
            }
            TopologyError::BadGroup { token } => write!(
                f,
                "invalid server group {token:?} (expected name=host:port,...)"
            ),
            TopologyError::EmptyGroup { name } => write!(f, "server group {name:?} is empty"),
            TopologyError::ServerInTwoGroups {
                token,
                first,
                second,
            } => write!(
                f,
                "server {token} is in two groups ({first:?} and {second:?}): each group needs servers of its own"
            ),
            TopologyError::DuplicateGroup { name } => {
                write!(f, "server group {name:?} is defined twice")
            }
            TopologyError::UnknownGroup { name } => write!(f, "unknown server group {name:?}"),
            TopologyError::GroupsAsServers { token } => write!(
                f,
                "{token:?} is a server group (EVCache form name=host:port,…;…), not a server: \
                 give groups as groups (--groups, MEMGROUP_GROUPS, ClusterSpec::parse_evcache)"
            ),
            TopologyError::UnknownZone { zone, zones } if zones.is_empty() => write!(
                f,
                "zone {zone:?} is no group's zone: no group has a zone (a plain server list \
                 has none; give each group its own, e.g. `zone = \"…\"` in each [[groups]] \
                 entry of cluster.toml)"
            ),
            TopologyError::UnknownZone { zone, zones } => write!(
                f,
                "zone {zone:?} is no group's zone (the groups' zones: {})",
                zones.join(", ")
            ),
            TopologyError::BadArbiter { name } => write!(
                f,
                "arbiter {name:?} is not a read-write server group of the cluster"
            ),
            TopologyError::NoGroups => f.write_str("a cluster needs at least one server group"),
            TopologyError::NoReadableGroup => {
                f.write_str("every server group is write-only; nothing could serve a read")
            }
            TopologyError::ZeroPoolSize { group } => {
                write!(f, "server group {group:?} has pool_size 0")
            }
            TopologyError::PoolSizeTooLarge { group, pool_size } => write!(
                f,
                "server group {group:?} has pool_size {pool_size}, over the limit of {}",
                crate::MAX_POOL_SIZE
            ),
            TopologyError::MixedSanitize { group } => write!(
                f,
                "server group {group:?} disagrees with the first group on key sanitising"
            ),
            TopologyError::BadKeyPrefix { prefix } => write!(
                f,
                "key prefix {prefix:?} cannot go in front of keys: at most {} bytes, no spaces or control characters",
                crate::MAX_KEY_PREFIX
            ),
            TopologyError::BadUrl { token } => {
                write!(f, "{token:?} is not a memcache:// URL")
            }
            TopologyError::UnknownParam { token } => {
                write!(
                    f,
                    "unknown URL parameter {token:?} (known: {})",
                    crate::parse::URL_PARAMS.join(", ")
                )
            }
            TopologyError::BadParam { token } => write!(f, "invalid URL parameter {token:?}"),
            TopologyError::UnknownPolicy { token } => {
                let names: Vec<_> = crate::WritePolicy::ALL.iter().map(|p| p.name()).collect();
                write!(
                    f,
                    "unknown write policy {token:?} (write policies: {})",
                    names.join(", ")
                )
            }
            TopologyError::UnknownReadFallback { token } => {
                let names: Vec<_> = crate::ReadFallback::ALL.iter().map(|p| p.name()).collect();
                write!(
                    f,
                    "unknown read fallback {token:?} (read fallbacks: {})",
                    names.join(", ")
                )
            }
            TopologyError::DuplicateParam { token } => {
                write!(f, "URL parameter {token:?} is given twice")
            }
            TopologyError::Locator(e) => write!(f, "invalid server list: {e}"),
        }
    }
}

impl std::error::Error for TopologyError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            TopologyError::Locator(e) => Some(e),
            _ => None,
        }
    }
}

impl From<memgroup_hash::Error> for TopologyError {
    fn from(e: memgroup_hash::Error) -> TopologyError {
        TopologyError::Locator(e)
    }
}
