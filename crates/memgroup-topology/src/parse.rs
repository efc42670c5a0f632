//! The text forms of a cluster: EVCache's node list, libmemcached's server list and the
//! `memcache://` URL. The grammars are documented on the crate root.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use crate::{
    ClusterSpec, GroupSpec, ReadFallback, ServerAddr, ServerSpec, TopologyError, WritePolicy,
};

/// libmemcached's port when an entry has none.
const MEMCACHED_PORT: u16 = 11211;

/// The single group of a plain server list.
pub(crate) const DEFAULT_GROUP: &str = crate::DEFAULT_GROUP_NAME;

/// One parsed server entry, `[hostname/]host[:port[:weight]]`.
#[derive(Debug)]
pub(crate) struct Entry {
    pub(crate) addr: ServerAddr,
    pub(crate) weight: Option<u32>,
    pub(crate) hostname: Option<String>,
}

impl Entry {
    /// Parses a trimmed entry. Without `default_port` the port is required.
    pub(crate) fn parse(token: &str, default_port: Option<u16>) -> Result<Entry, TopologyError> {
        let bad_address = || TopologyError::BadAddress {
            token: token.to_owned(),
        };
        if token.is_empty() || token.contains(char::is_whitespace) {
            return Err(bad_address());
        }
        // EVCache's `hostname/ip:port` names the host a JVM would report for the IP.
        let (hostname, rest) = match token.split_once('/') {
            Some(("", _)) => return Err(bad_address()),
            Some((alias, rest)) => (Some(alias.to_owned()), rest),
            None => (None, token),
        };
        // A bracketed IPv6 literal keeps its colons (and brackets, so `host:port` stays
        // unambiguous when printed).
        let (host, fields) = if rest.starts_with('[') {
            let end = rest.find(']').ok_or_else(bad_address)?;
            match &rest[end + 1..] {
                "" => (&rest[..=end], None),
                tail => match tail.strip_prefix(':') {
                    Some(fields) => (&rest[..=end], Some(fields)),
                    None => return Err(bad_address()),
                },
            }
        } else {
            match rest.split_once(':') {
                Some((host, fields)) => (host, Some(fields)),
                None => (rest, None),
            }
        };
        if host.is_empty() || host == "[]" || host.contains('/') {
            return Err(bad_address());
        }
        let (port, weight) = match fields {
            None => (None, None),
            Some(fields) => match fields.split_once(':') {
                Some((_, weight)) if weight.contains(':') => return Err(bad_address()),
                Some((port, weight)) => (Some(port), Some(weight)),
                None => (Some(fields), None),
            },
        };
        let port = match port {
            Some(port) => parse_decimal::<u16>(port)
                .filter(|&p| p != 0)
                .ok_or_else(|| TopologyError::BadPort {
                    token: token.to_owned(),
                })?,
            None => default_port.ok_or_else(|| TopologyError::BadPort {
                token: token.to_owned(),
            })?,
        };
        let weight = match weight {
            None => None,
            Some(weight) => match parse_decimal::<u32>(weight) {
                Some(0) => {
                    return Err(TopologyError::ZeroWeight {
                        token: token.to_owned(),
                    });
                }
                Some(w) => Some(w),
                None => {
                    return Err(TopologyError::BadWeight {
                        token: token.to_owned(),
                    });
                }
            },
        };
        Ok(Entry {
            addr: ServerAddr::new(host, port),
            weight,
            hostname,
        })
    }

    pub(crate) fn into_spec(self) -> ServerSpec {
        ServerSpec {
            addr: self.addr,
            weight: self.weight.unwrap_or(1),
            hostname: self.hostname,
        }
    }
}

/// Plain ASCII decimal digits only: the std parsers would also take a leading `+`.
fn parse_decimal<T: std::str::FromStr>(s: &str) -> Option<T> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// A comma-separated server list (trimmed entries), refusing empty entries and repeats.
fn server_list(list: &str, default_port: Option<u16>) -> Result<Vec<ServerSpec>, TopologyError> {
    let mut seen = HashSet::new();
    let mut servers = Vec::new();
    for token in list.split(',').map(str::trim) {
        if token.is_empty() {
            return Err(TopologyError::EmptyEntry {
                list: list.to_owned(),
            });
        }
        let spec = Entry::parse(token, default_port)?.into_spec();
        if !seen.insert(spec.addr.clone()) {
            return Err(TopologyError::DuplicateServer {
                token: token.to_owned(),
            });
        }
        servers.push(spec);
    }
    Ok(servers)
}

/// The parameters of a `memcache://` URL [`ClusterSpec::parse_url`] takes,
/// as its unknown-parameter error lists them.
pub const URL_PARAMS: [&str; 13] = [
    "hash",
    "naming",
    "node_naming",
    "sanitize",
    "pool_size",
    "zone",
    "read_fallback",
    "write_policy",
    "failover",
    "write_only",
    "backoff_initial_ms",
    "backoff_max_ms",
    "key_prefix",
];

impl ClusterSpec {
    /// Parses EVCache's simple node list (the `<APP>-NODES` property of its
    /// `SimpleNodeListProvider`): `name=server,server;name=server,…`.
    ///
    /// Each group's zone is its name, as EVCache's `ServerGroup(name, name)`; a server is
    /// `host:port` or `hostname/ip:port` (the alias feeds EVCache ring names), optionally
    /// followed by `:weight` (an extension; EVCache has no weights). Whitespace around
    /// tokens is ignored and empty `;` segments are skipped (EVCache's tokenizer does the
    /// same), but an empty server entry, a missing port, a repeated server within a group
    /// and a repeated group name are errors. Groups get [`GroupSpec::default_locator`].
    ///
    /// ```
    /// use memgroup_topology::ClusterSpec;
    /// let nodes = "us-east-1c=10.0.0.1:11211,10.0.0.2:11211;us-east-1d=10.0.1.1:11211";
    /// let spec = ClusterSpec::parse_evcache(nodes)?;
    /// assert_eq!(spec.groups.len(), 2);
    /// assert_eq!(spec.groups[1].zone.as_deref(), Some("us-east-1d"));
    /// # Ok::<(), memgroup_topology::TopologyError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`TopologyError::EmptyServerList`], [`TopologyError::BadGroup`],
    /// [`TopologyError::EmptyGroup`], [`TopologyError::DuplicateGroup`], and the server entry
    /// errors ([`TopologyError::BadAddress`], [`TopologyError::BadPort`],
    /// [`TopologyError::BadWeight`], [`TopologyError::ZeroWeight`],
    /// [`TopologyError::EmptyEntry`], [`TopologyError::DuplicateServer`]).
    pub fn parse_evcache(list: &str) -> Result<ClusterSpec, TopologyError> {
        let mut groups: Vec<GroupSpec> = Vec::new();
        let mut names: HashSet<&str> = HashSet::new();
        for segment in list.split(';').map(str::trim) {
            if segment.is_empty() {
                continue;
            }
            let (name, servers) =
                segment
                    .split_once('=')
                    .ok_or_else(|| TopologyError::BadGroup {
                        token: segment.to_owned(),
                    })?;
            let (name, servers) = (name.trim(), servers.trim());
            if name.is_empty() || name.contains(char::is_whitespace) {
                return Err(TopologyError::BadGroup {
                    token: segment.to_owned(),
                });
            }
            if !names.insert(name) {
                return Err(TopologyError::DuplicateGroup {
                    name: name.to_owned(),
                });
            }
            if servers.is_empty() {
                return Err(TopologyError::EmptyGroup {
                    name: name.to_owned(),
                });
            }
            groups.push(GroupSpec::new(name, server_list(servers, None)?).with_zone(name));
        }
        if groups.is_empty() {
            return Err(TopologyError::EmptyServerList);
        }
        Ok(ClusterSpec::new(groups))
    }

    /// Parses libmemcached's server list, `host[:port[:weight]],…` (as
    /// `memcached_servers_parse` and the tools' `--servers` take it): one group named
    /// `"default"`, without a zone. The port defaults to 11211; whitespace around entries is
    /// ignored; `[v6]:port` holds an IPv6 literal.
    ///
    /// ```
    /// use memgroup_topology::{ClusterSpec, ServerAddr};
    /// let spec = ClusterSpec::parse_server_list("10.0.0.1:11211:2, 10.0.0.2")?;
    /// let group = &spec.groups[0];
    /// assert_eq!((group.name.as_str(), group.servers[0].weight), ("default", 2));
    /// assert_eq!(group.servers[1].addr, ServerAddr::new("10.0.0.2", 11211));
    /// # Ok::<(), memgroup_topology::TopologyError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`TopologyError::EmptyServerList`] and the server entry errors.
    pub fn parse_server_list(list: &str) -> Result<ClusterSpec, TopologyError> {
        let list = list.trim();
        if list.is_empty() {
            return Err(TopologyError::EmptyServerList);
        }
        // `sg1=h:p;sg2=…` is a list of groups, not of servers: say so rather
        // than try to resolve "sg1=h" as a host.
        if let Some(token) = list.split([',', ';']).find(|t| t.contains('=')) {
            return Err(TopologyError::GroupsAsServers {
                token: token.trim().to_string(),
            });
        }
        let servers = server_list(list, Some(MEMCACHED_PORT))?;
        Ok(ClusterSpec::new([GroupSpec::new(DEFAULT_GROUP, servers)]))
    }

    /// Parses the value of libmemcached's `MEMCACHED_SERVERS` environment variable, which
    /// has the [server list](ClusterSpec::parse_server_list) form. The caller reads the
    /// environment; this crate does not.
    ///
    /// ```
    /// use memgroup_topology::ClusterSpec;
    /// let value = "127.0.0.1:11211,127.0.0.1:11212"; // std::env::var("MEMCACHED_SERVERS")
    /// assert_eq!(ClusterSpec::parse_memcached_servers(value)?.groups[0].servers.len(), 2);
    /// # Ok::<(), memgroup_topology::TopologyError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As for [`ClusterSpec::parse_server_list`].
    pub fn parse_memcached_servers(value: &str) -> Result<ClusterSpec, TopologyError> {
        ClusterSpec::parse_server_list(value)
    }

    /// Parses a `memcache://` URL: `memcache://SERVERS[?PARAM&PARAM…]`.
    ///
    /// `SERVERS`, everything up to `?`, is an [EVCache node list](ClusterSpec::parse_evcache)
    /// when it holds a `=`, else a [server list](ClusterSpec::parse_server_list) (one group
    /// named `default`). Nothing is percent-decoded. Parameters, each at most once:
    ///
    /// | parameter | value | effect |
    /// |---|---|---|
    /// | `hash` | a [`HashStrategy`](memgroup_hash::HashStrategy) name | every group's strategy |
    /// | `naming` | `spymemcached`, `libmemcached`, `evcache` | every group's ketama names |
    /// | `sanitize` | `true` / `false` | every group's key sanitising |
    /// | `pool_size` | integer ≥ 1 | every group's connection slots per server |
    /// | `zone` | text | [`Settings::local_zone`](crate::Settings::local_zone) |
    /// | `read_fallback` | `never`, `one-more`, `all-copies` | [`ReadFallback`] |
    /// | `write_policy` | `none`, `one`, `quorum`, `all-minus-one`, `all` | [`WritePolicy`] |
    /// | `failover` | `true`, `false`, `auto` | [`Settings::failover`](crate::Settings::failover) |
    /// | `write_only` | group names, `,`-separated | marks those groups write-only |
    /// | `backoff_initial_ms`, `backoff_max_ms` | integer | the dead-host backoff bounds |
    /// | `key_prefix` | text (as given: `app:`) | [`Settings::key_prefix`](crate::Settings::key_prefix) |
    ///
    /// `_` and `-` are interchangeable inside policy names.
    ///
    /// ```
    /// use memgroup_hash::HashStrategy;
    /// use memgroup_topology::{ClusterSpec, WritePolicy};
    /// let spec = ClusterSpec::parse_url("memcache://h1:11211,h2:11212?hash=native&pool_size=4")?;
    /// assert_eq!(spec.groups[0].locator.strategy, HashStrategy::Native);
    /// assert_eq!(spec.groups[0].pool_size, 4);
    ///
    /// let spec = ClusterSpec::parse_url(
    ///     "memcache://a=h1:11211;b=h2:11211;c=h3:11211?zone=a&write_policy=quorum&write_only=c",
    /// )?;
    /// assert_eq!(spec.settings.local_zone.as_deref(), Some("a"));
    /// assert_eq!(spec.settings.write_policy, WritePolicy::Quorum);
    /// assert!(spec.groups[2].write_only);
    /// # Ok::<(), memgroup_topology::TopologyError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`TopologyError::BadUrl`] without the `memcache://` scheme;
    /// [`TopologyError::UnknownParam`], [`TopologyError::BadParam`],
    /// [`TopologyError::DuplicateParam`], [`TopologyError::UnknownGroup`] for the
    /// parameters; the list parsers' errors for `SERVERS`.
    pub fn parse_url(url: &str) -> Result<ClusterSpec, TopologyError> {
        let url = url.trim();
        let rest = url
            .strip_prefix("memcache://")
            .ok_or_else(|| TopologyError::BadUrl {
                token: url.to_owned(),
            })?;
        let (servers, query) = rest.split_once('?').unwrap_or((rest, ""));
        let mut spec = if servers.contains('=') {
            ClusterSpec::parse_evcache(servers)?
        } else {
            ClusterSpec::parse_server_list(servers)?
        };
        let mut seen: Vec<&str> = Vec::new();
        for param in query.split('&').filter(|p| !p.is_empty()) {
            let bad = || TopologyError::BadParam {
                token: param.to_owned(),
            };
            let (name, value) = param.split_once('=').ok_or_else(bad)?;
            // The cluster file's and the tool's name for it (`node_naming`,
            // `--node-naming`) is taken too: the same parameter.
            let name = if name == "node_naming" {
                "naming"
            } else {
                name
            };
            if seen.contains(&name) {
                return Err(TopologyError::DuplicateParam {
                    token: param.to_owned(),
                });
            }
            seen.push(name);
            let millis = || parse_decimal::<u64>(value).map(Duration::from_millis);
            match name {
                "hash" => {
                    spec = spec.with_hash(value.parse().map_err(|_| bad())?);
                }
                "naming" => {
                    spec = spec.with_node_naming(value.parse().map_err(|_| bad())?);
                }
                "sanitize" => {
                    spec = spec.with_sanitize_keys(parse_bool(value).ok_or_else(bad)?);
                }
                "pool_size" => {
                    let size = parse_decimal::<usize>(value)
                        .filter(|&n| n > 0)
                        .ok_or_else(bad)?;
                    spec = spec.with_pool_size(size);
                }
                "zone" if !value.is_empty() => spec.settings.local_zone = Some(value.to_owned()),
                "read_fallback" => {
                    spec.settings.read_fallback =
                        value.parse::<ReadFallback>().map_err(|_| bad())?;
                }
                "write_policy" => {
                    spec.settings.write_policy = value.parse::<WritePolicy>().map_err(|_| bad())?;
                }
                "failover" => {
                    spec.settings.failover = match value {
                        "auto" => None,
                        _ => Some(parse_bool(value).ok_or_else(bad)?),
                    };
                }
                "write_only" => {
                    // The first group of each name, as `ClusterSpec::group_mut` finds it.
                    let mut index: HashMap<&str, usize> = HashMap::new();
                    for (i, g) in spec.groups.iter().enumerate() {
                        index.entry(g.name.as_str()).or_insert(i);
                    }
                    let marked = value
                        .split(',')
                        .map(str::trim)
                        .map(|name| {
                            index
                                .get(name)
                                .copied()
                                .ok_or_else(|| TopologyError::UnknownGroup {
                                    name: name.to_owned(),
                                })
                        })
                        .collect::<Result<Vec<usize>, _>>()?;
                    for i in marked {
                        spec.groups[i].write_only = true;
                    }
                }
                "key_prefix" => spec.settings.key_prefix = Some(value.to_owned()),
                "backoff_initial_ms" => spec.settings.backoff_initial = millis().ok_or_else(bad)?,
                "backoff_max_ms" => spec.settings.backoff_max = millis().ok_or_else(bad)?,
                "zone" => return Err(bad()),
                // A name added above belongs in `URL_PARAMS` too (a test
                // checks each of those is taken).
                _ => {
                    return Err(TopologyError::UnknownParam {
                        token: param.to_owned(),
                    });
                }
            }
        }
        Ok(spec)
    }
}

fn parse_bool(value: &str) -> Option<bool> {
    match value {
        "true" | "on" | "1" => Some(true),
        "false" | "off" | "0" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Settings;
    use memgroup_hash::{HashStrategy, NodeNaming};

    fn addr(host: &str, port: u16) -> ServerAddr {
        ServerAddr::new(host, port)
    }

    /// Each server of each group as `(group, host:port, weight, alias)`.
    fn flatten(spec: &ClusterSpec) -> Vec<(String, String, u32, Option<String>)> {
        spec.groups
            .iter()
            .flat_map(|g| {
                g.servers.iter().map(|s| {
                    (
                        g.name.clone(),
                        s.addr.to_string(),
                        s.weight,
                        s.hostname.clone(),
                    )
                })
            })
            .collect()
    }

    fn check_list(input: &str, expected: &[(&str, u32)]) {
        let spec = ClusterSpec::parse_server_list(input)
            .unwrap_or_else(|e| panic!("{input:?} refused: {e}"));
        let got: Vec<(String, u32)> = flatten(&spec)
            .into_iter()
            .map(|(_, a, w, _)| (a, w))
            .collect();
        let expected: Vec<(String, u32)> =
            expected.iter().map(|&(a, w)| (a.to_owned(), w)).collect();
        assert_eq!(got, expected, "{input:?}");
        assert_eq!(spec.groups.len(), 1);
        assert_eq!(spec.groups[0].name, "default");
        assert_eq!(spec.groups[0].zone, None);
        assert_eq!(spec.settings, Settings::default());
    }

    #[test]
    fn server_lists() {
        check_list("h1:11211", &[("h1:11211", 1)]);
        check_list("h1", &[("h1:11211", 1)]);
        check_list(
            "h1:1,h2:2:5, h3:3:1 ,h4",
            &[("h1:1", 1), ("h2:2", 5), ("h3:3", 1), ("h4:11211", 1)],
        );
        check_list("  10.0.0.1:11211:10  ", &[("10.0.0.1:11211", 10)]);
        check_list(
            "[::1]:11212:3,[fe80::1]",
            &[("[::1]:11212", 3), ("[fe80::1]:11211", 1)],
        );
        check_list("h:65535:4294967295", &[("h:65535", u32::MAX)]);
        // The same host on different ports is two servers.
        check_list("h:1,h:2", &[("h:1", 1), ("h:2", 1)]);
        assert_eq!(
            ClusterSpec::parse_memcached_servers("a:1,b:2").unwrap(),
            ClusterSpec::parse_server_list("a:1,b:2").unwrap()
        );
    }

    #[test]
    fn server_list_errors() {
        use TopologyError as E;
        let token = |s: &str| s.to_owned();
        let cases: Vec<(&str, TopologyError)> = vec![
            ("", E::EmptyServerList),
            ("   ", E::EmptyServerList),
            (
                "a:1,,b:2",
                E::EmptyEntry {
                    list: token("a:1,,b:2"),
                },
            ),
            (
                "a:1,",
                E::EmptyEntry {
                    list: token("a:1,"),
                },
            ),
            (
                ",a:1",
                E::EmptyEntry {
                    list: token(",a:1"),
                },
            ),
            (
                "h:99999",
                E::BadPort {
                    token: token("h:99999"),
                },
            ),
            (
                "h:0",
                E::BadPort {
                    token: token("h:0"),
                },
            ),
            ("h:", E::BadPort { token: token("h:") }),
            (
                "h:x",
                E::BadPort {
                    token: token("h:x"),
                },
            ),
            (
                "h:+1",
                E::BadPort {
                    token: token("h:+1"),
                },
            ),
            (
                "h:-1",
                E::BadPort {
                    token: token("h:-1"),
                },
            ),
            (
                "ok:1, h:70000:2",
                E::BadPort {
                    token: token("h:70000:2"),
                },
            ),
            (
                "h:1:0",
                E::ZeroWeight {
                    token: token("h:1:0"),
                },
            ),
            (
                "a:1,h:1:00",
                E::ZeroWeight {
                    token: token("h:1:00"),
                },
            ),
            (
                "h:1:x",
                E::BadWeight {
                    token: token("h:1:x"),
                },
            ),
            (
                "h:1:",
                E::BadWeight {
                    token: token("h:1:"),
                },
            ),
            (
                "h:1:-2",
                E::BadWeight {
                    token: token("h:1:-2"),
                },
            ),
            (
                "h:1:4294967296",
                E::BadWeight {
                    token: token("h:1:4294967296"),
                },
            ),
            (
                "h:1:2:3",
                E::BadAddress {
                    token: token("h:1:2:3"),
                },
            ),
            (
                ":11211",
                E::BadAddress {
                    token: token(":11211"),
                },
            ),
            (
                "h 1:11211",
                E::BadAddress {
                    token: token("h 1:11211"),
                },
            ),
            (
                "[::1:11211",
                E::BadAddress {
                    token: token("[::1:11211"),
                },
            ),
            (
                "[::1]11211",
                E::BadAddress {
                    token: token("[::1]11211"),
                },
            ),
            (
                "[]:1",
                E::BadAddress {
                    token: token("[]:1"),
                },
            ),
            (
                "a:1,b:2,a:1",
                E::DuplicateServer {
                    token: token("a:1"),
                },
            ),
            // 11211 is the default port, so these are the same server.
            (
                "a, a:11211:3",
                E::DuplicateServer {
                    token: token("a:11211:3"),
                },
            ),
        ];
        for (input, expected) in cases {
            assert_eq!(
                ClusterSpec::parse_server_list(input),
                Err(expected.clone()),
                "{input:?}"
            );
            // Every error names what it found wrong.
            let message = expected.to_string();
            match &expected {
                E::EmptyServerList => {}
                E::EmptyEntry { list } => assert!(message.contains(list.as_str()), "{message}"),
                E::BadAddress { token }
                | E::BadPort { token }
                | E::BadWeight { token }
                | E::ZeroWeight { token }
                | E::DuplicateServer { token } => {
                    assert!(message.contains(token.as_str()), "{message}");
                }
                other => panic!("unexpected case {other:?}"),
            }
        }
    }

    #[test]
    fn evcache_node_lists() {
        let spec = ClusterSpec::parse_evcache(
            "us-east-1c=10.0.0.1:11211,10.0.0.2:11211; us-east-1d = ip-10-0-1-1/10.0.1.1:11212 ;",
        )
        .unwrap();
        assert_eq!(
            flatten(&spec),
            vec![
                (
                    "us-east-1c".to_owned(),
                    "10.0.0.1:11211".to_owned(),
                    1,
                    None
                ),
                (
                    "us-east-1c".to_owned(),
                    "10.0.0.2:11211".to_owned(),
                    1,
                    None
                ),
                (
                    "us-east-1d".to_owned(),
                    "10.0.1.1:11212".to_owned(),
                    1,
                    Some("ip-10-0-1-1".to_owned())
                ),
            ]
        );
        for group in &spec.groups {
            assert_eq!(group.zone.as_deref(), Some(group.name.as_str()));
            assert_eq!(group.locator, GroupSpec::default_locator());
            assert_eq!(group.pool_size, 1);
            assert!(!group.write_only);
        }
        // The parser takes the same server in two groups; the topology
        // refuses it (`TopologyError::ServerInTwoGroups`).
        let shared = ClusterSpec::parse_evcache("a=h:1;b=h:1,h:2:7").unwrap();
        assert_eq!(shared.groups[1].servers[1].weight, 7);
    }

    #[test]
    fn evcache_errors() {
        use TopologyError as E;
        let s = |s: &str| s.to_owned();
        let cases: Vec<(&str, TopologyError)> = vec![
            ("", E::EmptyServerList),
            (" ; ;", E::EmptyServerList),
            (
                "h:11211",
                E::BadGroup {
                    token: s("h:11211"),
                },
            ),
            ("=h:1", E::BadGroup { token: s("=h:1") }),
            (
                "a b=h:1",
                E::BadGroup {
                    token: s("a b=h:1"),
                },
            ),
            ("a=", E::EmptyGroup { name: s("a") }),
            ("a=h:1;b= ", E::EmptyGroup { name: s("b") }),
            ("a=h:1;a=h:2", E::DuplicateGroup { name: s("a") }),
            // The first repeat is named, wherever its first use was.
            (
                "a=h:1;b=h:2;c=h:3;b=h:4;a=h:5",
                E::DuplicateGroup { name: s("b") },
            ),
            (
                "a=h:1,h:2,h:3,h:2,h:1",
                E::DuplicateServer { token: s("h:2") },
            ),
            ("a=h:1,h:1", E::DuplicateServer { token: s("h:1") }),
            ("a=h", E::BadPort { token: s("h") }),
            (
                "a=h:123456",
                E::BadPort {
                    token: s("h:123456"),
                },
            ),
            ("a=h:1:0", E::ZeroWeight { token: s("h:1:0") }),
            (
                "a=h:1,,h:2",
                E::EmptyEntry {
                    list: s("h:1,,h:2"),
                },
            ),
            (
                "a=/10.0.0.1:1",
                E::BadAddress {
                    token: s("/10.0.0.1:1"),
                },
            ),
            (
                "a=x/y/10.0.0.1:1",
                E::BadAddress {
                    token: s("x/y/10.0.0.1:1"),
                },
            ),
        ];
        for (input, expected) in cases {
            assert_eq!(
                ClusterSpec::parse_evcache(input),
                Err(expected),
                "{input:?}"
            );
        }
    }

    #[test]
    fn urls() {
        let spec = ClusterSpec::parse_url("memcache://h1:11211,h2:11212:3").unwrap();
        assert_eq!(
            spec,
            ClusterSpec::parse_server_list("h1:11211,h2:11212:3").unwrap()
        );

        let spec = ClusterSpec::parse_url(
            "memcache://a=h1:1;b=h2:2;c=h3:3?hash=new-compat&naming=libmemcached&sanitize=true\
             &pool_size=4&zone=b&read_fallback=all_copies&write_policy=quorum&failover=on\
             &write_only=c,a&backoff_initial_ms=250&backoff_max_ms=60000",
        )
        .unwrap();
        for group in &spec.groups {
            assert_eq!(group.locator.strategy, HashStrategy::NewCompat);
            assert_eq!(group.locator.node_naming, NodeNaming::Libmemcached);
            assert!(group.locator.sanitize_keys);
            assert_eq!(group.pool_size, 4);
        }
        let write_only: Vec<bool> = spec.groups.iter().map(|g| g.write_only).collect();
        assert_eq!(write_only, [true, false, true]);
        assert_eq!(
            spec.settings,
            Settings {
                local_zone: Some("b".to_owned()),
                read_fallback: ReadFallback::AllCopies,
                write_policy: WritePolicy::Quorum,
                failover: Some(true),
                backoff_initial: Duration::from_millis(250),
                backoff_max: Duration::from_secs(60),
                ..Settings::default()
            }
        );
        let auto = ClusterSpec::parse_url("memcache://h:1?failover=auto&").unwrap();
        assert_eq!(auto.settings.failover, None);
        for off in ["false", "off", "0"] {
            let url = format!("memcache://h:1?failover={off}&sanitize={off}");
            let spec = ClusterSpec::parse_url(&url).unwrap();
            assert_eq!(spec.settings.failover, Some(false), "{off}");
            assert!(!spec.groups[0].locator.sanitize_keys, "{off}");
        }
        let ipv6 = ClusterSpec::parse_url("memcache://[::1]:11211?pool_size=2").unwrap();
        assert_eq!(ipv6.groups[0].servers[0].addr, addr("[::1]", 11211));
    }

    /// Every parameter the unknown-parameter error lists is taken, and the
    /// error lists them.
    #[test]
    fn the_listed_url_parameters_are_the_known_ones() {
        let value = |name: &str| match name {
            "hash" => "ketama",
            "naming" | "node_naming" => "spymemcached",
            "sanitize" | "failover" => "true",
            "zone" | "write_only" => "default",
            "read_fallback" => "never",
            "write_policy" => "one",
            _ => "2",
        };
        for name in URL_PARAMS {
            let url = format!("memcache://h:1?{name}={}", value(name));
            assert!(ClusterSpec::parse_url(&url).is_ok(), "{url}");
        }
        let error = ClusterSpec::parse_url("memcache://h:1?bogus=1").unwrap_err();
        assert!(
            error
                .to_string()
                .ends_with(&format!("(known: {})", URL_PARAMS.join(", "))),
            "{error}"
        );
    }

    #[test]
    fn url_errors() {
        use TopologyError as E;
        let s = |s: &str| s.to_owned();
        let cases: Vec<(&str, TopologyError)> = vec![
            ("h:1", E::BadUrl { token: s("h:1") }),
            (
                "memcached://h:1",
                E::BadUrl {
                    token: s("memcached://h:1"),
                },
            ),
            ("memcache://", E::EmptyServerList),
            ("memcache://?pool_size=2", E::EmptyServerList),
            ("memcache://h:0", E::BadPort { token: s("h:0") }),
            (
                "memcache://h:1?pool=2",
                E::UnknownParam { token: s("pool=2") },
            ),
            (
                "memcache://h:1?pool_size=0",
                E::BadParam {
                    token: s("pool_size=0"),
                },
            ),
            (
                "memcache://h:1?pool_size",
                E::BadParam {
                    token: s("pool_size"),
                },
            ),
            (
                "memcache://h:1?hash=md5",
                E::BadParam {
                    token: s("hash=md5"),
                },
            ),
            (
                "memcache://h:1?naming=x",
                E::BadParam {
                    token: s("naming=x"),
                },
            ),
            (
                "memcache://h:1?sanitize=yes",
                E::BadParam {
                    token: s("sanitize=yes"),
                },
            ),
            ("memcache://h:1?zone=", E::BadParam { token: s("zone=") }),
            (
                "memcache://h:1?write_policy=most",
                E::BadParam {
                    token: s("write_policy=most"),
                },
            ),
            (
                "memcache://h:1?read_fallback=2",
                E::BadParam {
                    token: s("read_fallback=2"),
                },
            ),
            (
                "memcache://h:1?failover=maybe",
                E::BadParam {
                    token: s("failover=maybe"),
                },
            ),
            (
                "memcache://h:1?backoff_max_ms=1s",
                E::BadParam {
                    token: s("backoff_max_ms=1s"),
                },
            ),
            (
                "memcache://h:1?write_only=x",
                E::UnknownGroup { name: s("x") },
            ),
            // The first unknown name, after known ones.
            (
                "memcache://a=h:1;b=h:2?write_only=b,x,a,y",
                E::UnknownGroup { name: s("x") },
            ),
            (
                "memcache://h:1?pool_size=2&pool_size=3",
                E::DuplicateParam {
                    token: s("pool_size=3"),
                },
            ),
            // `node_naming` is `naming` by the cluster file's name.
            (
                "memcache://h:1?naming=spymemcached&node_naming=spymemcached",
                E::DuplicateParam {
                    token: s("node_naming=spymemcached"),
                },
            ),
            ("memcache://a=h:1;a=h:2", E::DuplicateGroup { name: s("a") }),
        ];
        for (input, expected) in cases {
            assert_eq!(ClusterSpec::parse_url(input), Err(expected), "{input:?}");
        }
    }

    #[test]
    fn policy_names() {
        for p in ReadFallback::ALL {
            assert_eq!(p.to_string().parse::<ReadFallback>(), Ok(p));
            assert_eq!(p.name().replace('-', "_").parse::<ReadFallback>(), Ok(p));
        }
        for p in WritePolicy::ALL {
            assert_eq!(p.to_string().parse::<WritePolicy>(), Ok(p));
            assert_eq!(p.name().replace('-', "_").parse::<WritePolicy>(), Ok(p));
        }
        assert_eq!(
            "ALL".parse::<WritePolicy>(),
            Err(TopologyError::UnknownPolicy {
                token: "ALL".to_owned()
            })
        );
    }

    #[test]
    fn addresses_and_entries() {
        assert_eq!("h:1".parse::<ServerAddr>(), Ok(addr("h", 1)));
        assert_eq!(" h:1 ".parse::<ServerAddr>(), Ok(addr("h", 1)));
        for bad in ["h", "h:1:2", "a/h:1", "", "h:0"] {
            assert!(bad.parse::<ServerAddr>().is_err(), "{bad:?}");
        }
        let spec: ServerSpec = "n/10.0.0.1:5:6".parse().unwrap();
        assert_eq!(
            spec,
            ServerSpec::new(addr("10.0.0.1", 5))
                .with_weight(6)
                .with_hostname("n")
        );
        for a in [addr("h", 1), addr("[::1]", 65535), addr("10.0.0.1", 11211)] {
            assert_eq!(a.to_string().parse::<ServerAddr>(), Ok(a));
        }
    }
}
