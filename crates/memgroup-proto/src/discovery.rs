//! The cluster list a configuration endpoint serves (ElastiCache Auto
//! Discovery, Memorystore's discovery endpoint).
//!
//! Asked with `config get cluster` ([`Request::ConfigGet`](crate::Request::ConfigGet))
//! or, on engines before 1.4.14, read as the item `AmazonElastiCache:cluster`
//! ([`LEGACY_CONFIG_KEY`]). Either way the data block (its length announced
//! by the header, so it is taken whole, never searched for an end) is:
//!
//! ```text
//! <version>\n
//! <host>|<ip>|<port> <host>|<ip>|<port> …\n
//! ```
//!
//! The IP may be empty (then the host is resolved); the node line ends with
//! `\n` inside the block, and the block with the reply's usual `\r\n`.
//!
//! ```
//! use memgroup_proto::ClusterConfig;
//! let data = b"12\nc.0001.cache.amazonaws.com|10.82.235.120|11211 c.0002.cache.amazonaws.com||11211\n";
//! let config = ClusterConfig::parse(data).unwrap();
//! assert_eq!(config.version, 12);
//! assert_eq!(config.nodes[0].address(), "10.82.235.120:11211");
//! assert_eq!(config.nodes[1].address(), "c.0002.cache.amazonaws.com:11211");
//! ```

use core::net::IpAddr;
use std::fmt;

/// The item engines before 1.4.14 serve the cluster list under (what
/// `config get cluster` answers on later ones).
pub const LEGACY_CONFIG_KEY: &[u8] = b"AmazonElastiCache:cluster";

/// The most nodes one list may name: a bound on what a lying endpoint can
/// make a client build.
pub const MAX_CONFIG_NODES: usize = 65_536;

/// One node of a cluster list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigNode {
    /// The node's DNS name.
    pub host: String,
    /// Its IP address, when the list gives one.
    pub ip: Option<IpAddr>,
    /// Its port.
    pub port: u16,
}

impl ConfigNode {
    /// The address to connect to and to name the node by: `ip:port` when
    /// the list gives an IP (`[ip]:port` for IPv6), `host:port` otherwise.
    /// This is the address the AWS cluster client (spymemcached) connects
    /// to when an IP is given, so ketama names the node as it does.
    pub fn address(&self) -> String {
        match self.ip {
            Some(IpAddr::V6(ip)) => format!("[{ip}]:{}", self.port),
            Some(ip) => format!("{ip}:{}", self.port),
            None => format!("{}:{}", self.host, self.port),
        }
    }
}

/// A parsed cluster list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterConfig {
    /// The configuration version: it grows with every change of the
    /// cluster (and starts again at 1 when a cluster is recreated).
    pub version: u64,
    /// The nodes, in the order listed (never empty).
    pub nodes: Vec<ConfigNode>,
}

/// Why a cluster list was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigError {
    /// The block is not text.
    NotText,
    /// The first line is not a version number.
    BadVersion(String),
    /// The version line is not followed by a node line.
    NoNodeLine,
    /// The list names no node.
    NoNodes,
    /// More than [`MAX_CONFIG_NODES`] nodes.
    TooManyNodes,
    /// An entry that is not `host|ip|port` with a host, a valid (or empty)
    /// IP and a port from 1 to 65535.
    BadNode(String),
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::NotText => write!(f, "the cluster list is not text"),
            ConfigError::BadVersion(v) => write!(f, "bad configuration version {v:?}"),
            ConfigError::NoNodeLine => write!(f, "the cluster list has no node line"),
            ConfigError::NoNodes => write!(f, "the cluster list names no node"),
            ConfigError::TooManyNodes => {
                write!(
                    f,
                    "the cluster list names more than {MAX_CONFIG_NODES} nodes"
                )
            }
            ConfigError::BadNode(n) => write!(f, "bad node entry {n:?} (want host|ip|port)"),
        }
    }
}

impl std::error::Error for ConfigError {}

/// At most this much of a bad token is quoted in an error.
const QUOTE: usize = 80;

fn quote(s: &str) -> String {
    s.chars().take(QUOTE).collect()
}

impl ClusterConfig {
    /// Parses a list's data block (as [`ClusterConfig`]'s module docs show).
    /// Line ends may be `\n` or `\r\n`; entries are separated by spaces.
    pub fn parse(data: &[u8]) -> Result<ClusterConfig, ConfigError> {
        let text = std::str::from_utf8(data).map_err(|_| ConfigError::NotText)?;
        let (version, rest) = text.split_once('\n').ok_or(ConfigError::NoNodeLine)?;
        let version = version.trim_end_matches('\r');
        let version = version
            .parse::<u64>()
            .map_err(|_| ConfigError::BadVersion(quote(version)))?;
        let line = rest.split(['\r', '\n']).next().unwrap_or("");
        let mut nodes = Vec::new();
        for entry in line.split(' ').filter(|e| !e.is_empty()) {
            if nodes.len() == MAX_CONFIG_NODES {
                return Err(ConfigError::TooManyNodes);
            }
            nodes.push(parse_node(entry)?);
        }
        if nodes.is_empty() {
            return Err(ConfigError::NoNodes);
        }
        Ok(ClusterConfig { version, nodes })
    }
}

fn parse_node(entry: &str) -> Result<ConfigNode, ConfigError> {
    let bad = || ConfigError::BadNode(quote(entry));
    let mut fields = entry.split('|');
    let (Some(host), Some(ip), Some(port), None) =
        (fields.next(), fields.next(), fields.next(), fields.next())
    else {
        return Err(bad());
    };
    let host_ok = !host.is_empty()
        && host.len() <= 253
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_' | b':'));
    if !host_ok {
        return Err(bad());
    }
    let ip = match ip {
        "" => None,
        ip => Some(ip.parse::<IpAddr>().map_err(|_| bad())?),
    };
    let port = port
        .parse::<u16>()
        .ok()
        .filter(|&p| p != 0)
        .ok_or_else(bad)?;
    Ok(ConfigNode {
        host: host.to_string(),
        ip,
        port,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_documented_reply_parses() {
        let data = b"12\nmyCluster.pc4ldq.0001.use1.cache.amazonaws.com|10.82.235.120|11211 myCluster.pc4ldq.0002.use1.cache.amazonaws.com|10.80.249.27|11211\n";
        let c = ClusterConfig::parse(data).unwrap();
        assert_eq!(c.version, 12);
        assert_eq!(c.nodes.len(), 2);
        assert_eq!(
            c.nodes[1].host,
            "myCluster.pc4ldq.0002.use1.cache.amazonaws.com"
        );
        assert_eq!(c.nodes[1].address(), "10.80.249.27:11211");
    }

    #[test]
    fn line_ends_and_spacing_vary() {
        let c = ClusterConfig::parse(b"3\r\na||11211  b|::1|7000\r\n").unwrap();
        assert_eq!(c.version, 3);
        assert_eq!(c.nodes[0].address(), "a:11211");
        assert_eq!(c.nodes[1].address(), "[::1]:7000");
        // No trailing line end at all.
        assert_eq!(
            ClusterConfig::parse(b"1\nh|10.0.0.1|1")
                .unwrap()
                .nodes
                .len(),
            1
        );
    }

    #[test]
    fn bad_lists_are_typed_errors() {
        let cases: [(&[u8], ConfigError); 9] = [
            (b"", ConfigError::NoNodeLine),
            (b"12", ConfigError::NoNodeLine),
            (b"x\nh|1.2.3.4|1\n", ConfigError::BadVersion("x".into())),
            (b"-1\nh|1.2.3.4|1\n", ConfigError::BadVersion("-1".into())),
            (b"1\n\n", ConfigError::NoNodes),
            (b"1\nh|1.2.3.4\n", ConfigError::BadNode("h|1.2.3.4".into())),
            (
                b"1\nh|1.2.3.4|0\n",
                ConfigError::BadNode("h|1.2.3.4|0".into()),
            ),
            (
                b"1\nh|1.2.3|11211\n",
                ConfigError::BadNode("h|1.2.3|11211".into()),
            ),
            (
                b"1\n|1.2.3.4|11211\n",
                ConfigError::BadNode("|1.2.3.4|11211".into()),
            ),
        ];
        for (data, want) in cases {
            assert_eq!(
                ClusterConfig::parse(data),
                Err(want),
                "{:?}",
                String::from_utf8_lossy(data)
            );
        }
        assert_eq!(
            ClusterConfig::parse(b"1\n\xff|a|1\n"),
            Err(ConfigError::NotText)
        );
        let many = format!(
            "1\n{}\n",
            vec!["h|10.0.0.1|1"; MAX_CONFIG_NODES + 1].join(" ")
        );
        assert_eq!(
            ClusterConfig::parse(many.as_bytes()),
            Err(ConfigError::TooManyNodes)
        );
        // Every message is one line.
        assert!(!ConfigError::BadNode("a\nb".into()).to_string().is_empty());
    }
}
