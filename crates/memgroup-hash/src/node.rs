//! Server descriptions and the ketama node-naming policies.

use std::fmt::{self, Write as _};
use std::str::FromStr;

use crate::Error;

/// One server as the reference clients see it.
///
/// Locators return positions in the node slice they were built from, so the caller keeps
/// whatever connection state it likes alongside. Two nodes with the same address are still
/// two positions.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Node {
    /// Host exactly as configured (an IP literal or a name). It is hashed verbatim into ring
    /// point names; nothing here resolves or normalises it.
    pub host: String,
    /// TCP port.
    pub port: u16,
    /// Weight, if one was configured. `None` means "the client was given no weight", which
    /// differs from `Some(1)` in one place: spymemcached only uses its weighted (float) ketama
    /// point count when weights are given. Everywhere else `None` counts as 1. Zero is
    /// refused when building a locator.
    pub weight: Option<u32>,
    /// The host name a JVM would report for this address (`InetAddress.getHostName()`,
    /// usually from reverse DNS). Only the [`NodeNaming::Evcache`] policy uses it; when `None`
    /// the `host` string stands in, which is what EVCache produces for addresses without a
    /// reverse DNS record (the "VPC" style `10.0.0.1/10.0.0.1:11211`).
    pub hostname: Option<String>,
}

impl Node {
    /// A node with no weight and no host name alias.
    #[must_use]
    pub fn new(host: impl Into<String>, port: u16) -> Node {
        Node {
            host: host.into(),
            port,
            weight: None,
            hostname: None,
        }
    }

    /// Sets the weight.
    #[must_use]
    pub fn with_weight(mut self, weight: u32) -> Node {
        self.weight = Some(weight);
        self
    }

    /// Sets the host name alias used by [`NodeNaming::Evcache`].
    #[must_use]
    pub fn with_hostname(mut self, hostname: impl Into<String>) -> Node {
        self.hostname = Some(hostname.into());
        self
    }

    /// The weight the reference clients use when a weight matters: the configured one or 1.
    pub(crate) fn effective_weight(&self) -> u32 {
        self.weight.unwrap_or(1)
    }
}

/// `host:port`, the server string the Java clients hash for their ring points.
impl fmt::Display for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.host, self.port)
    }
}

/// Parses `host:port` (split at the last `:`); the result has no weight and no alias.
///
/// ```
/// let node: memgroup_hash::Node = "127.0.0.1:11211".parse()?;
/// assert_eq!((node.host.as_str(), node.port), ("127.0.0.1", 11211));
/// # Ok::<(), memgroup_hash::Error>(())
/// ```
impl FromStr for Node {
    type Err = Error;

    fn from_str(s: &str) -> Result<Node, Error> {
        let invalid = || Error::InvalidAddress(s.to_owned());
        let (host, port) = s.rsplit_once(':').ok_or_else(invalid)?;
        // u16's parser would accept a leading '+', which no client writes.
        if host.is_empty() || port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit()) {
            return Err(invalid());
        }
        Ok(Node::new(host, port.parse().map_err(|_| invalid())?))
    }
}

/// How a ketama ring names a node's points: point set `i` of a node is the MD5 of
/// `node_key(node, i)`. The naming also selects the ring's construction rules, because each
/// name belongs to one client family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum NodeNaming {
    /// spymemcached's default `KetamaNodeKeyFormat.SPYMEMCACHED`: `host:port-i`.
    ///
    /// spymemcached formats the `InetSocketAddress`; for an address created from an IP literal
    /// (what `AddrUtil` does with `10.0.0.1:11211`) that is `ip:port`, matched here. An address
    /// created from a host name prints as `name/ip:port`, which needs DNS and is not
    /// reproduced. Ring rules: 160 points per node, or the float-weighted count when any node
    /// has a weight; on an exact point collision the later node wins (`TreeMap.put`).
    #[default]
    Spymemcached,
    /// libmemcached's continuum names: `host-i` when the port is 11211, else `host:port-i`,
    /// with `host` exactly as configured (no DNS). Ring rules are libmemcached's
    /// `KETAMA_WEIGHTED` ones: the float-weighted point count always (a missing weight counts
    /// as 1, like `memcached_server_add`), and on a collision the lower node index wins.
    ///
    /// spymemcached's `KetamaNodeKeyFormat.LIBMEMCACHED` writes the same names after a reverse
    /// DNS lookup; configure `host` as the name it resolves to (e.g. `localhost`) to match it.
    /// That client gives unweighted nodes 160 points, which equals the float count for up to
    /// 24 equal nodes, but not for some larger clusters (25 equal nodes get 156).
    Libmemcached,
    /// Netflix EVCache's `EVCacheKetamaNodeLocatorConfiguration`:
    /// `hostname/ip:11211-i`, with `hostname` from [`Node::hostname`] (or `host`), `ip` the
    /// `host` string, and the port **hard-coded to 11211**. Two nodes on one host therefore
    /// get identical point names: the later node takes every point and the earlier ones get
    /// none (three memcached processes on 127.0.0.1 all route to the last one; observed in
    /// the reference vectors). Ring rules as for [`NodeNaming::Spymemcached`].
    Evcache,
}

impl NodeNaming {
    /// All policies, in declaration order.
    pub const ALL: [NodeNaming; 3] = [
        NodeNaming::Spymemcached,
        NodeNaming::Libmemcached,
        NodeNaming::Evcache,
    ];

    /// The policy's name, as accepted by `FromStr`.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            NodeNaming::Spymemcached => "spymemcached",
            NodeNaming::Libmemcached => "libmemcached",
            NodeNaming::Evcache => "evcache",
        }
    }

    /// The MD5 input for point set `repetition` of `node`.
    ///
    /// ```
    /// use memgroup_hash::{Node, NodeNaming};
    /// let node = Node::new("127.0.0.1", 11211).with_hostname("localhost");
    /// assert_eq!(NodeNaming::Spymemcached.node_key(&node, 0), "127.0.0.1:11211-0");
    /// assert_eq!(NodeNaming::Libmemcached.node_key(&node, 3), "127.0.0.1-3");
    /// assert_eq!(NodeNaming::Evcache.node_key(&node, 0), "localhost/127.0.0.1:11211-0");
    /// ```
    #[must_use]
    pub fn node_key(self, node: &Node, repetition: u32) -> String {
        let mut key = self.node_key_prefix(node);
        let _ = write!(key, "{repetition}");
        key
    }

    /// Everything before the repetition number, so ring building formats it once per node.
    pub(crate) fn node_key_prefix(self, node: &Node) -> String {
        match self {
            NodeNaming::Spymemcached => format!("{node}-"),
            NodeNaming::Libmemcached if node.port == 11211 => format!("{}-", node.host),
            NodeNaming::Libmemcached => format!("{node}-"),
            NodeNaming::Evcache => format!(
                "{}/{}:11211-",
                node.hostname.as_deref().unwrap_or(&node.host),
                node.host
            ),
        }
    }
}

impl fmt::Display for NodeNaming {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for NodeNaming {
    type Err = Error;

    fn from_str(s: &str) -> Result<NodeNaming, Error> {
        NodeNaming::ALL
            .into_iter()
            .find(|n| n.name() == s)
            .ok_or_else(|| Error::UnknownNodeNaming(s.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_addresses() {
        assert_eq!("h:1".parse::<Node>().unwrap(), Node::new("h", 1));
        for bad in ["", "h", ":1", "h:", "h:+1", "h:65536", "h:x"] {
            assert!(bad.parse::<Node>().is_err(), "{bad}");
        }
    }

    #[test]
    fn naming_round_trip() {
        for n in NodeNaming::ALL {
            assert_eq!(n.to_string().parse::<NodeNaming>().unwrap(), n);
        }
        assert!("ketama".parse::<NodeNaming>().is_err());
    }
}
