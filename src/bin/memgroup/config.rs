//! Cluster configuration from flags, `MEMCACHED_SERVERS` or a TOML file.
//!
//! ```toml
//! # cluster.toml
//! hash = "ketama"              # default strategy of every group
//! zone = "us-east-1a"          # the caller's zone: reads prefer it
//! pool_size = 2
//! timeout_ms = 500
//! read_fallback = "one-more"   # never | one-more | all-copies
//! write_policy = "quorum"      # none | one | quorum | all-minus-one | all
//! value_format = "evcache"     # raw | spymemcached | evcache | whalin | python-memcached
//! username = "app"             # memcached -Y login; the password is read from
//! password_file = "/run/secrets/memcached"   # (or MEMGROUP_PASSWORD)
//!
//! [[groups]]
//! name = "sg1"
//! zone = "us-east-1a"
//! servers = ["10.0.0.1:11211", "10.0.0.2:11211:5"]   # host:port[:weight]
//!
//! [[groups]]
//! name = "sg2"
//! zone = "us-east-1b"
//! write_only = true
//! hash = "new-compat"
//! servers = ["10.0.1.1:11211"]
//! ```

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use memgroup::client::value::ValueFormat;
use memgroup::client::{Client, ClientUrl, Credentials};
use memgroup::hash::{HashStrategy, NodeNaming};
use memgroup::topology::{ClusterSpec, GroupSpec, ReadFallback, WritePolicy};
use serde::Deserialize;

use crate::Failure;

/// The client's own settings: timeouts and the value format.
#[derive(Debug, Clone)]
pub(crate) struct ClientSettings {
    pub(crate) op: Duration,
    pub(crate) connect: Duration,
    /// How typed values are read and written (`get`, `set --type`).
    pub(crate) values: ValueFormat,
    /// The login of every connection (memcached `-Y`), if any.
    pub(crate) credentials: Option<Credentials>,
}

/// Where the cluster is and how to talk to it.
#[derive(Debug, Clone, Args)]
pub(crate) struct ClusterArgs {
    /// One group of servers: `host:port[:weight],…` (libmemcached form), or
    /// a `memcache://[user:password@]host:port,…?param=…` URL.
    #[arg(long, global = true, env = "MEMCACHED_SERVERS")]
    pub(crate) servers: Option<String>,
    /// Server groups, EVCache form: `sg1=host:port,…;sg2=…`.
    #[arg(long, global = true, env = "MEMGROUP_GROUPS")]
    pub(crate) groups: Option<String>,
    /// A TOML file describing groups, zones, weights, hashing and timeouts.
    #[arg(long, global = true, env = "MEMGROUP_CONFIG")]
    pub(crate) config: Option<PathBuf>,
    /// Hashing strategy: native, old-compat, new-compat, consistent, ketama, …
    #[arg(long, global = true)]
    pub(crate) hash: Option<HashStrategy>,
    /// Ketama node naming: spymemcached, libmemcached, evcache.
    #[arg(long, global = true)]
    pub(crate) node_naming: Option<NodeNaming>,
    /// URL-encode keys like the Whalin Java client (routing and wire).
    #[arg(long, global = true)]
    pub(crate) sanitize: bool,
    /// The caller's zone (a group name or zone): reads prefer it.
    #[arg(long, global = true)]
    pub(crate) zone: Option<String>,
    /// Connections per server.
    #[arg(long, global = true)]
    pub(crate) pool_size: Option<usize>,
    /// Per-operation timeout in milliseconds.
    #[arg(long, global = true)]
    pub(crate) timeout_ms: Option<u64>,
    /// Connect timeout in milliseconds.
    #[arg(long, global = true)]
    pub(crate) connect_timeout_ms: Option<u64>,
    /// Turn Whalin-style failover within a group off (default: on for one
    /// group, off for several).
    #[arg(long, global = true, conflicts_with = "failover")]
    pub(crate) no_failover: bool,
    /// Turn failover within a group on.
    #[arg(long, global = true)]
    pub(crate) failover: bool,
    /// First dead-host backoff in milliseconds (doubles per failure, up to 10 minutes).
    #[arg(long, global = true)]
    pub(crate) backoff_ms: Option<u64>,
    /// The largest value read or written, in bytes (default 1 MiB).
    #[arg(long, global = true)]
    pub(crate) max_value_size: Option<usize>,
    /// Requests in flight per connection before callers wait (default 1024).
    #[arg(long, global = true)]
    pub(crate) max_in_flight: Option<usize>,
    /// Do not merge concurrent single-key gets into multi-key commands.
    #[arg(long, global = true)]
    pub(crate) no_merge_gets: bool,
    /// Log in as this user (memcached's ASCII authentication, `-Y`).
    #[arg(long, global = true)]
    pub(crate) username: Option<String>,
    /// The password for `--username`: a file holding it (one trailing newline
    /// is ignored); or the MEMGROUP_PASSWORD environment variable.
    #[arg(long, global = true)]
    pub(crate) password_file: Option<PathBuf>,
    /// Read fallback: never, one-more, all-copies.
    #[arg(long, global = true)]
    pub(crate) read_fallback: Option<ReadFallback>,
    /// Write policy: none, one, quorum, all-minus-one, all.
    #[arg(long, global = true)]
    pub(crate) write_policy: Option<WritePolicy>,
    /// How values are decoded and encoded: raw (bytes as stored),
    /// spymemcached, evcache, whalin, python-memcached.
    #[arg(long, global = true)]
    pub(crate) value_format: Option<ValueFormat>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    hash: Option<String>,
    node_naming: Option<String>,
    sanitize: Option<bool>,
    zone: Option<String>,
    pool_size: Option<usize>,
    timeout_ms: Option<u64>,
    connect_timeout_ms: Option<u64>,
    read_fallback: Option<String>,
    write_policy: Option<String>,
    value_format: Option<String>,
    username: Option<String>,
    password_file: Option<PathBuf>,
    failover: Option<bool>,
    #[serde(default)]
    groups: Vec<FileGroup>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileGroup {
    name: String,
    zone: Option<String>,
    #[serde(default)]
    write_only: bool,
    servers: Vec<String>,
    hash: Option<String>,
    node_naming: Option<String>,
    pool_size: Option<usize>,
}

fn usage(message: impl Into<String>) -> Failure {
    Failure::Usage(message.into())
}

/// Parses a named setting of the file through its type's `FromStr`, whose
/// error names the bad text (and, where the type knows them, the valid names).
fn parse_named<T>(setting: &str, text: &str) -> Result<T, Failure>
where
    T: std::str::FromStr,
    T::Err: std::fmt::Display,
{
    text.parse().map_err(|e| usage(format!("{setting}: {e}")))
}

/// A setting given in the file, parsed.
fn file_setting<T>(setting: &str, text: Option<&String>) -> Result<Option<T>, Failure>
where
    T: std::str::FromStr,
    T::Err: std::fmt::Display,
{
    text.map(|t| parse_named(setting, t)).transpose()
}

/// Applies cluster-wide hashing and pool settings, each only when given.
fn overrides(
    mut spec: ClusterSpec,
    hash: Option<HashStrategy>,
    naming: Option<NodeNaming>,
    sanitize: Option<bool>,
    pool_size: Option<usize>,
) -> ClusterSpec {
    if let Some(h) = hash {
        spec = spec.with_hash(h);
    }
    if let Some(n) = naming {
        spec = spec.with_node_naming(n);
    }
    if let Some(s) = sanitize {
        spec = spec.with_sanitize_keys(s);
    }
    if let Some(p) = pool_size {
        spec = spec.with_pool_size(p);
    }
    spec
}

impl ClusterArgs {
    /// The cluster description. A flag wins over the file; in the file, a
    /// group's own setting wins over the file-wide one.
    pub(crate) fn spec(&self) -> Result<(ClusterSpec, ClientSettings), Failure> {
        let file = match &self.config {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| usage(format!("cannot read {}: {e}", path.display())))?;
                toml::from_str::<FileConfig>(&text)
                    .map_err(|e| usage(format!("{}: {}", path.display(), e.message())))?
            }
            None => FileConfig::default(),
        };
        let file_wide = |spec| -> Result<ClusterSpec, Failure> {
            Ok(overrides(
                spec,
                file_setting("hash", file.hash.as_ref())?,
                file_setting("node_naming", file.node_naming.as_ref())?,
                file.sanitize,
                file.pool_size,
            ))
        };
        let (mut url_credentials, mut url_format) = (None, None);
        let spec = if let Some(groups) = &self.groups {
            file_wide(ClusterSpec::parse_evcache(groups).map_err(|e| usage(e.to_string()))?)?
        } else if let Some(url) = self
            .servers
            .as_deref()
            .filter(|s| s.starts_with("memcache://"))
        {
            let url = ClientUrl::parse(url).map_err(|e| usage(e.chain()))?;
            url_credentials = url.credentials;
            url_format = url.value_format;
            // The URL's settings (zone, policies) stand unless flags override them.
            file_wide(url.spec)?
        } else if let Some(servers) = &self.servers {
            file_wide(ClusterSpec::parse_server_list(servers).map_err(|e| usage(e.to_string()))?)?
        } else if !file.groups.is_empty() {
            let mut groups = Vec::new();
            for g in &file.groups {
                let list = g.servers.join(",");
                let parsed = ClusterSpec::parse_server_list(&list)
                    .map_err(|e| usage(format!("group {:?}: {e}", g.name)))?;
                let mut group = GroupSpec::new(
                    g.name.clone(),
                    parsed
                        .groups
                        .into_iter()
                        .flat_map(|g| g.servers)
                        .collect::<Vec<_>>(),
                );
                group.zone = g.zone.clone();
                group.write_only = g.write_only;
                groups.push(group);
            }
            let mut spec = file_wide(ClusterSpec::new(groups))?;
            for (group, g) in spec.groups.iter_mut().zip(&file.groups) {
                if let Some(h) = file_setting("hash", g.hash.as_ref())? {
                    group.locator.strategy = h;
                }
                if let Some(n) = file_setting("node_naming", g.node_naming.as_ref())? {
                    group.locator.node_naming = n;
                }
                if let Some(p) = g.pool_size {
                    group.pool_size = p;
                }
            }
            spec
        } else {
            return Err(usage(
                "no servers: give --servers, --groups, --config or MEMCACHED_SERVERS",
            ));
        };
        let mut spec = overrides(
            spec,
            self.hash,
            self.node_naming,
            self.sanitize.then_some(true),
            self.pool_size,
        );
        let settings = &mut spec.settings;
        if let Some(zone) = self.zone.clone().or(file.zone) {
            settings.local_zone = Some(zone);
        }
        let fallback = file_setting("read_fallback", file.read_fallback.as_ref())?;
        if let Some(f) = self.read_fallback.or(fallback) {
            settings.read_fallback = f;
        }
        let policy = file_setting("write_policy", file.write_policy.as_ref())?;
        if let Some(p) = self.write_policy.or(policy) {
            settings.write_policy = p;
        }
        if let Some(f) = file.failover {
            settings.failover = Some(f);
        }
        if self.failover || self.no_failover {
            settings.failover = Some(self.failover);
        }
        if let Some(ms) = self.backoff_ms {
            settings.backoff_initial = Duration::from_millis(ms);
        }
        let values = file_setting("value_format", file.value_format.as_ref())?;
        let credentials = match self.username.clone().or(file.username) {
            None => url_credentials,
            Some(user) => {
                let password = match self.password_file.as_ref().or(file.password_file.as_ref()) {
                    Some(path) => {
                        let text = std::fs::read_to_string(path).map_err(|e| {
                            usage(format!(
                                "cannot read the password file {}: {e}",
                                path.display()
                            ))
                        })?;
                        let text = text.strip_suffix('\n').unwrap_or(&text);
                        text.strip_suffix('\r').unwrap_or(text).to_string()
                    }
                    None => std::env::var("MEMGROUP_PASSWORD").map_err(|_| {
                        usage("--username needs --password-file or MEMGROUP_PASSWORD")
                    })?,
                };
                Some(Credentials::new(user, password).map_err(|e| usage(e.chain()))?)
            }
        };
        let timeouts = ClientSettings {
            op: Duration::from_millis(self.timeout_ms.or(file.timeout_ms).unwrap_or(500)),
            connect: Duration::from_millis(
                self.connect_timeout_ms
                    .or(file.connect_timeout_ms)
                    .unwrap_or(1000),
            ),
            values: self
                .value_format
                .or(values)
                .or(url_format)
                .unwrap_or_default(),
            credentials,
        };
        Ok((spec, timeouts))
    }

    /// A client for the configured cluster (connections open lazily).
    pub(crate) fn client(&self) -> Result<Client, Failure> {
        let (spec, timeouts) = self.spec()?;
        self.client_for(spec, timeouts)
    }

    pub(crate) fn client_for(
        &self,
        spec: ClusterSpec,
        timeouts: ClientSettings,
    ) -> Result<Client, Failure> {
        let mut builder = Client::builder()
            .cluster(spec)
            .timeout(timeouts.op)
            .connect_timeout(timeouts.connect)
            .value_format(timeouts.values);
        if let Some(credentials) = timeouts.credentials {
            builder = builder.credentials(credentials);
        }
        if let Some(bytes) = self.max_value_size {
            builder = builder.max_value_size(bytes);
        }
        if let Some(n) = self.max_in_flight {
            builder = builder.max_in_flight(n);
        }
        builder = builder.merge_gets(!self.no_merge_gets);
        builder.build().map_err(|e| usage(format!("{e}")))
    }
}
