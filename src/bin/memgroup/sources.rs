//! Where each setting comes from, by one rule: a command-line flag beats
//! the environment, the environment beats the file, the file beats the
//! default. For the server list a file named by `--config` ranks as a flag
//! (and `MEMGROUP_CONFIG` as the environment), a `memcache://` URL's own
//! parameters rank as where the URL came from, and two server sources at
//! the same rank are an error naming both; a source of a lower rank that is
//! set anyway is ignored with one warning naming it. `memgroup config`
//! prints the outcome with each setting's origin.

use std::path::PathBuf;

use memgroup::config::ClusterFile;

use crate::exit::Failure;
use crate::flags::ClusterFlags;

/// The environment variables that name servers or the file.
pub(crate) const SERVERS_ENV: &str = "MEMCACHED_SERVERS";
/// EVCache groups from the environment.
pub(crate) const GROUPS_ENV: &str = "MEMGROUP_GROUPS";
/// The cluster file from the environment.
pub(crate) const CONFIG_ENV: &str = "MEMGROUP_CONFIG";

/// How high a source ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Rank {
    /// Set in the environment.
    Env,
    /// Given on the command line.
    Flag,
}

/// What a server source holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Servers {
    /// A `host:port[:weight],…` list or a `memcache://` URL.
    List(String),
    /// EVCache groups, `sg1=h:p,…;sg2=…`.
    Groups(String),
    /// The cluster file's groups.
    File,
    /// One group found at a configuration endpoint (`--discover`).
    Discover(String),
}

/// One place the servers can come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Source {
    /// How it ranks.
    pub(crate) rank: Rank,
    /// How the user named it: `--servers`, `MEMCACHED_SERVERS`, `--config
    /// cluster.toml`, ….
    pub(crate) name: String,
    /// What it holds.
    pub(crate) servers: Servers,
}

/// The cluster file to read, and how it was named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ConfigFile {
    /// Its path.
    pub(crate) path: PathBuf,
    /// How it ranks as a server source.
    pub(crate) rank: Rank,
    /// `--config PATH` or `MEMGROUP_CONFIG=PATH`.
    pub(crate) name: String,
}

/// The file to read (before the servers are chosen: whether it lists
/// groups decides whether it is a server source), with a warning when both
/// `--config` and `MEMGROUP_CONFIG` name one.
pub(crate) fn config_file(
    flags: &ClusterFlags,
    env: &impl Fn(&str) -> Option<String>,
    warnings: &mut Vec<String>,
) -> Option<ConfigFile> {
    let from_env = env(CONFIG_ENV).filter(|v| !v.is_empty());
    match (&flags.config, from_env) {
        (Some(path), env_path) => {
            if let Some(env_path) = env_path {
                warnings.push(format!(
                    "{CONFIG_ENV}={env_path} is ignored: --config {} is given",
                    path.display()
                ));
            }
            Some(ConfigFile {
                path: path.clone(),
                rank: Rank::Flag,
                name: format!("--config {}", path.display()),
            })
        }
        (None, Some(env_path)) => Some(ConfigFile {
            name: format!("{CONFIG_ENV}={env_path}"),
            path: PathBuf::from(env_path),
            rank: Rank::Env,
        }),
        (None, None) => None,
    }
}

/// The server source, by rank: `None` when nothing names servers. Two at
/// the highest rank are a usage error naming both; the lower ranked ones
/// that are set become warnings.
pub(crate) fn servers(
    flags: &ClusterFlags,
    env: &impl Fn(&str) -> Option<String>,
    file: Option<&ConfigFile>,
    file_has_groups: bool,
    warnings: &mut Vec<String>,
) -> Result<Option<Source>, Failure> {
    let mut candidates = Vec::new();
    let flag = |name: &str, servers: Servers| Source {
        rank: Rank::Flag,
        name: name.to_string(),
        servers,
    };
    if let Some(list) = &flags.servers {
        candidates.push(flag("--servers", Servers::List(list.clone())));
    }
    if let Some(groups) = &flags.groups {
        candidates.push(flag("--groups", Servers::Groups(groups.clone())));
    }
    if let Some(endpoint) = &flags.discover {
        candidates.push(flag("--discover", Servers::Discover(endpoint.clone())));
    }
    for (var, make) in [
        (SERVERS_ENV, Servers::List as fn(String) -> Servers),
        (GROUPS_ENV, Servers::Groups),
    ] {
        if let Some(value) = env(var).filter(|v| !v.is_empty()) {
            candidates.push(Source {
                rank: Rank::Env,
                name: var.to_string(),
                servers: make(value),
            });
        }
    }
    if let (Some(file), true) = (file, file_has_groups) {
        candidates.push(Source {
            rank: file.rank,
            name: file.name.clone(),
            servers: Servers::File,
        });
    }
    let Some(top) = candidates.iter().map(|c| c.rank).max() else {
        return Ok(None);
    };
    let (chosen, ignored): (Vec<Source>, Vec<Source>) =
        candidates.into_iter().partition(|c| c.rank == top);
    if let [first, second, ..] = &chosen[..] {
        return Err(Failure::Usage(format!(
            "two server sources: {} and {}: give one",
            first.name, second.name
        )));
    }
    let chosen = chosen.into_iter().next().expect("the highest rank has one");
    for source in ignored {
        warnings.push(format!(
            "{} is ignored: {} gives the servers",
            source.name, chosen.name
        ));
    }
    Ok(Some(chosen))
}

/// The query parameter names of a `memcache://` URL (the settings it gives
/// itself, which rank above the file).
pub(crate) fn url_params(url: &str) -> Vec<String> {
    url.split_once('?')
        .map(|(_, query)| {
            query
                .split('&')
                .filter_map(|p| p.split('=').next())
                .filter(|n| !n.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// The process's environment, read once where the tool needs it.
pub(crate) fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// The file without the settings a URL gives itself (they rank above it).
pub(crate) fn without(file: &ClusterFile, url_given: &[String]) -> ClusterFile {
    let given = |name: &str| url_given.iter().any(|g| g == name);
    let mut file = file.clone();
    let o = &mut file.overrides;
    if given("hash") {
        o.hash = None;
    }
    if given("naming") {
        o.node_naming = None;
    }
    if given("sanitize") {
        o.sanitize_keys = None;
    }
    if given("pool_size") {
        o.pool_size = None;
    }
    if given("key_prefix") {
        o.key_prefix = None;
    }
    if given("zone") {
        file.zone = None;
    }
    if given("read_fallback") {
        file.read_fallback = None;
    }
    if given("write_policy") {
        file.write_policy = None;
    }
    if given("failover") {
        file.failover = None;
    }
    file
}

/// Where each setting came from: `flag --x`, the server source's name for
/// what a URL gives, `file PATH`, or `default`.
pub(crate) fn origins(
    flags: &ClusterFlags,
    source: &Source,
    config: Option<&ConfigFile>,
    file: &ClusterFile,
    url_given: &[String],
) -> Vec<(&'static str, String)> {
    let in_file = config.map(|c| format!("file ({})", c.name));
    let from_file = |set: bool| if set { in_file.clone() } else { None };
    let from_url = |param: &str| {
        url_given
            .iter()
            .any(|g| g == param)
            .then(|| format!("URL ({})", source.name))
    };
    let pick = |flag: Option<&str>, url: Option<String>, file: Option<String>| {
        flag.map(|f| format!("flag {f}"))
            .or(url)
            .or(file)
            .unwrap_or_else(|| "default".to_string())
    };
    let file_groups = source.servers == Servers::File;
    let flag = |set: bool, name: &'static str| set.then_some(name);
    let meta = flag(flags.meta_protocol.is_some(), "--meta-protocol");
    vec![
        (
            "servers",
            match (&source.servers, source.rank) {
                (Servers::File, _) => format!("file ({})", source.name),
                (_, Rank::Flag) => format!("flag {}", source.name),
                (_, Rank::Env) => format!("environment {}", source.name),
            },
        ),
        (
            "hash",
            pick(
                flag(flags.hash.is_some(), "--hash"),
                from_url("hash"),
                from_file(file.overrides.hash.is_some()),
            ),
        ),
        (
            "node_naming",
            pick(
                flag(flags.node_naming.is_some(), "--node-naming"),
                from_url("naming"),
                from_file(file.overrides.node_naming.is_some()),
            ),
        ),
        (
            "sanitize",
            pick(
                flag(flags.sanitize, "--sanitize"),
                from_url("sanitize"),
                from_file(file.overrides.sanitize_keys.is_some()),
            ),
        ),
        (
            "pool_size",
            pick(
                flag(flags.pool_size.is_some(), "--pool-size"),
                from_url("pool_size"),
                from_file(
                    file.overrides.pool_size.is_some()
                        || (file_groups && file.groups.iter().any(|g| g.pool_size.is_some())),
                ),
            ),
        ),
        (
            "key_prefix",
            pick(
                flag(flags.key_prefix.is_some(), "--key-prefix"),
                from_url("key_prefix"),
                from_file(file.overrides.key_prefix.is_some()),
            ),
        ),
        (
            "zone",
            pick(
                flag(flags.zone.is_some(), "--zone"),
                from_url("zone"),
                from_file(file.zone.is_some()),
            ),
        ),
        (
            "arbiter",
            pick(
                flag(flags.arbiter.is_some(), "--arbiter"),
                None,
                from_file(file.arbiter.is_some()),
            ),
        ),
        (
            "read_fallback",
            pick(
                flag(flags.read_fallback.is_some(), "--read-fallback"),
                from_url("read_fallback"),
                from_file(file.read_fallback.is_some()),
            ),
        ),
        (
            "write_policy",
            pick(
                flag(flags.write_policy.is_some(), "--write-policy"),
                from_url("write_policy"),
                from_file(file.write_policy.is_some()),
            ),
        ),
        (
            "failover",
            pick(
                flag(
                    flags.failover || flags.no_failover,
                    "--failover / --no-failover",
                ),
                from_url("failover"),
                from_file(file.failover.is_some()),
            ),
        ),
        (
            "timeout",
            pick(
                flag(flags.timeout_ms.is_some(), "--timeout-ms"),
                None,
                from_file(file.timeout.is_some()),
            ),
        ),
        (
            "connect_timeout",
            pick(
                flag(flags.connect_timeout_ms.is_some(), "--connect-timeout-ms"),
                None,
                from_file(file.connect_timeout.is_some()),
            ),
        ),
        (
            "meta_protocol",
            pick(meta, None, from_file(file.meta_protocol.is_some())),
        ),
        (
            "value_format",
            pick(
                flag(flags.value_format.is_some(), "--value-format"),
                from_url("value_format"),
                from_file(file.value_format.is_some()),
            ),
        ),
        (
            "login",
            pick(
                flag(flags.username.is_some(), "--username"),
                source_url_login(source),
                from_file(file.username.is_some()),
            ),
        ),
        (
            "tls",
            pick(
                flag(
                    flags.tls
                        || flags.tls_ca.is_some()
                        || flags.tls_cert.is_some()
                        || flags.tls_server_name.is_some(),
                    "--tls",
                ),
                from_url("tls").or(from_url("tls_ca")),
                from_file(file.tls.is_some()),
            ),
        ),
        (
            "long_keys",
            pick(
                flag(flags.evcache_keys.is_some(), "--evcache-keys").or(flag(
                    flags.long_keys && file.long_keys.is_none(),
                    "--long-keys",
                )),
                None,
                from_file(file.long_keys.is_some() || file.evcache_keys.is_some()),
            ),
        ),
        (
            "migrate_from",
            pick(
                flag(flags.migrate_from.is_some(), "--migrate-from"),
                None,
                from_file(file.migrate_from.is_some()),
            ),
        ),
    ]
}

/// A URL source with `user:password@` gives the login.
fn source_url_login(source: &Source) -> Option<String> {
    match &source.servers {
        Servers::List(text) if text.starts_with("memcache://") => {
            let authority = text["memcache://".len()..]
                .split(['/', '?'])
                .next()
                .unwrap_or("");
            authority
                .contains('@')
                .then(|| format!("URL ({})", source.name))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests;
