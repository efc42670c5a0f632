//! One `[[groups]]` entry of `cluster.toml`: as written, and checked.

use std::path::PathBuf;

use memgroup_hash::{HashStrategy, NodeNaming};
use memgroup_topology::{ClusterSpec, ServerSpec};
use serde::Deserialize;

use super::{ConfigError, RawFile, TlsFiles, checked_pool_size, checked_tls, keys, named};

/// One `[[groups]]` entry: a server group and its own settings, which win
/// over the file-wide ones.
#[derive(Debug, Clone)]
pub struct FileGroup {
    /// The group's name (EVCache: the server group).
    pub name: String,
    /// Its availability zone.
    pub zone: Option<String>,
    /// Takes writes only (a group being warmed).
    pub write_only: bool,
    /// Its servers, in the file's order, weights parsed (with `discover`,
    /// the fallback at start; may then be empty).
    pub servers: Vec<ServerSpec>,
    /// Its configuration endpoint (`discover = "host:port"`): its servers
    /// are discovered there ([`ClientBuilder::group_discover`](crate::client::ClientBuilder::group_discover)).
    pub discover: Option<String>,
    /// Its own hashing strategy.
    pub hash: Option<HashStrategy>,
    /// Its own ketama node naming.
    pub node_naming: Option<NodeNaming>,
    /// Its own connections per server.
    pub pool_size: Option<usize>,
    /// Its own login (`username`); `password_file` is never given without it.
    pub username: Option<String>,
    /// Where the password of `username` is.
    pub password_file: Option<PathBuf>,
    /// Its own TLS section.
    pub tls: Option<TlsFiles>,
    /// Its own EVCache key settings (`evcache_keys = { … }`, each setting
    /// not given the file's `[evcache_keys]` one): `Some(None)` stores keys
    /// as given there; see
    /// [`ClientBuilder::group_evcache_keys`](crate::client::ClientBuilder::group_evcache_keys).
    pub evcache_keys: Option<Option<memgroup_hash::evcache::EvcacheKeys>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawGroup {
    pub(super) name: String,
    zone: Option<String>,
    #[serde(default)]
    write_only: bool,
    #[serde(default)]
    servers: Vec<String>,
    discover: Option<String>,
    hash: Option<String>,
    node_naming: Option<String>,
    pool_size: Option<i64>,
    username: Option<String>,
    password_file: Option<PathBuf>,
    tls: Option<TlsFiles>,
    pub(super) evcache_keys: Option<keys::RawEvcacheKeys>,
}

impl FileGroup {
    pub(super) fn from_raw(g: RawGroup, file: &RawFile) -> Result<FileGroup, ConfigError> {
        let in_group = |e: ConfigError| ConfigError::new(format!("group {:?}: {e}", g.name));
        if g.servers.is_empty() && g.discover.is_none() {
            return Err(in_group(ConfigError::new(
                "no servers (and no discover endpoint)",
            )));
        }
        let servers = if g.servers.is_empty() {
            Vec::new()
        } else {
            ClusterSpec::parse_server_list(&g.servers.join(","))
                .map_err(|e| in_group(ConfigError::new(e.to_string())))?
                .groups
                .into_iter()
                .flat_map(|g| g.servers)
                .collect()
        };
        if g.username.is_none() && g.password_file.is_some() {
            return Err(in_group(ConfigError::new("password_file without username")));
        }
        Ok(FileGroup {
            servers,
            discover: g.discover,
            zone: g.zone,
            write_only: g.write_only,
            hash: named("hash", g.hash).map_err(in_group)?,
            node_naming: named("node_naming", g.node_naming).map_err(in_group)?,
            pool_size: checked_pool_size(g.pool_size).map_err(in_group)?,
            username: g.username,
            password_file: g.password_file,
            tls: checked_tls(g.tls).map_err(in_group)?,
            evcache_keys: keys::group_evcache_keys(file, g.evcache_keys.as_ref())
                .map_err(in_group)?,
            name: g.name,
        })
    }
}
