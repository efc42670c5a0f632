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
//! [tls]                        # connect over TLS (memcached -Z)
//! ca = "/etc/memcached/ca.pem" # trusted CAs; without it, the platform's roots
//! cert = "/etc/app/client.pem" # a client certificate, for servers that want one
//! key = "/etc/app/client.key"
//! server_name = "cache.internal"   # verify this name instead of each host
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
//! username = "warmer"          # a group's own login and TLS win over the file-wide ones
//! password_file = "/run/secrets/sg2"
//! tls = { ca = "/etc/memcached/sg2-ca.pem" }
//! ```

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use memgroup::client::value::ValueFormat;
use memgroup::client::{Client, ClientUrl, Credentials, TlsConfig, Watcher};
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
    /// TLS for every connection, if any.
    pub(crate) tls: Option<TlsConfig>,
    /// Groups' own logins and TLS.
    pub(crate) groups: Vec<GroupSecurity>,
    /// Migration mode: the old layout.
    pub(crate) migrate_from: Option<ClusterSpec>,
}

/// A group's own login and TLS (from the file).
#[derive(Debug, Clone)]
pub(crate) struct GroupSecurity {
    group: String,
    credentials: Option<Credentials>,
    tls: Option<TlsConfig>,
}

/// Where the cluster is and how to talk to it.
#[derive(Debug, Clone, Default, Args)]
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
    /// Connect over TLS (memcached -Z), trusting the platform's roots unless
    /// --tls-ca is given. Any --tls-* flag implies it.
    #[arg(long, global = true)]
    pub(crate) tls: bool,
    /// Trust the certificate authorities in this PEM file.
    #[arg(long, global = true, value_name = "FILE")]
    pub(crate) tls_ca: Option<PathBuf>,
    /// Present this client certificate (PEM) to servers that want one.
    #[arg(long, global = true, value_name = "FILE", requires = "tls_key")]
    pub(crate) tls_cert: Option<PathBuf>,
    /// The private key (PEM) of --tls-cert.
    #[arg(long, global = true, value_name = "FILE", requires = "tls_cert")]
    pub(crate) tls_key: Option<PathBuf>,
    /// Verify the servers' certificates for this name instead of each host.
    #[arg(long, global = true, value_name = "NAME")]
    pub(crate) tls_server_name: Option<String>,
    /// Migration mode: the layout the cache was filled under (a cluster.toml
    /// path, a server list, EVCache groups or a memcache:// URL). Reads that
    /// miss fall through to it and backfill the new layout; deletes go to
    /// both. Also `migrate_from = "old.toml"` in cluster.toml.
    #[arg(long, global = true, value_name = "OLD")]
    pub(crate) migrate_from: Option<String>,
    /// The hashing strategy of the old layout, when given as a list (for
    /// --migrate-from and `route --compare`).
    #[arg(long, global = true, value_name = "STRATEGY")]
    pub(crate) old_hash: Option<HashStrategy>,
    /// Set while reading an old layout: one that migrates itself is refused.
    #[arg(skip)]
    pub(crate) reading_old_layout: bool,
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
    tls: Option<FileTls>,
    /// Migration mode: the old layout (see `--migrate-from`).
    migrate_from: Option<String>,
    #[serde(default)]
    groups: Vec<FileGroup>,
}

/// A `[tls]` section (file-wide, or a group's own).
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileTls {
    ca: Option<PathBuf>,
    cert: Option<PathBuf>,
    key: Option<PathBuf>,
    server_name: Option<String>,
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
    username: Option<String>,
    password_file: Option<PathBuf>,
    tls: Option<FileTls>,
}

/// The TLS configuration from its parts (files read now): `ca` or the
/// platform's roots, an optional client certificate, an optional name.
fn tls_config(tls: &FileTls) -> Result<TlsConfig, Failure> {
    let bad = |e: memgroup::client::Error| usage(e.chain());
    let mut config = match &tls.ca {
        Some(ca) => TlsConfig::ca_file(ca).map_err(bad)?,
        None => TlsConfig::platform_roots().map_err(bad)?,
    };
    match (&tls.cert, &tls.key) {
        (Some(cert), Some(key)) => config = config.client_cert_files(cert, key).map_err(bad)?,
        (None, None) => {}
        _ => return Err(usage("a TLS client certificate needs both cert and key")),
    }
    if let Some(name) = &tls.server_name {
        if name.is_empty() {
            return Err(usage("the TLS server name is empty"));
        }
        config = config.server_name(name);
    }
    Ok(config)
}

/// A password: from `file` (one trailing newline ignored), else from
/// MEMGROUP_PASSWORD.
fn password(file: Option<&PathBuf>) -> Result<String, Failure> {
    match file {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| {
                usage(format!(
                    "cannot read the password file {}: {e}",
                    path.display()
                ))
            })?;
            let text = text.strip_suffix('\n').unwrap_or(&text);
            Ok(text.strip_suffix('\r').unwrap_or(text).to_string())
        }
        None => std::env::var("MEMGROUP_PASSWORD")
            .map_err(|_| usage("--username needs --password-file or MEMGROUP_PASSWORD")),
    }
}

/// An old layout (for migration and `route --compare`): a cluster.toml
/// path, a `memcache://` URL, EVCache groups (`sg1=h:p,…;sg2=…`) or a server
/// list; `hash` overrides its hashing.
pub(crate) fn old_layout(text: &str, hash: Option<HashStrategy>) -> Result<ClusterSpec, Failure> {
    let mut args = ClusterArgs::default();
    if std::path::Path::new(text).is_file() {
        args.config = Some(PathBuf::from(text));
    } else if text.contains('=') && !text.starts_with("memcache://") {
        args.groups = Some(text.to_string());
    } else {
        args.servers = Some(text.to_string());
    }
    args.hash = hash;
    args.reading_old_layout = true;
    let (spec, _) = args.spec().map_err(|e| match e {
        Failure::Usage(m) | Failure::Op(m) => usage(format!("the old layout {text:?}: {m}")),
    })?;
    Ok(spec)
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
        let (mut url_credentials, mut url_format, mut url_tls) = (None, None, None);
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
            url_tls = url.tls;
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
        let login = |user: String, file: Option<&PathBuf>| -> Result<Credentials, Failure> {
            Credentials::new(user, password(file)?).map_err(|e| usage(e.chain()))
        };
        let credentials = match self.username.clone().or(file.username.clone()) {
            None => url_credentials,
            Some(user) => Some(login(
                user,
                self.password_file.as_ref().or(file.password_file.as_ref()),
            )?),
        };
        // TLS: a flag wins over the URL, the URL over the file.
        let flags_tls = self.tls
            || self.tls_ca.is_some()
            || self.tls_cert.is_some()
            || self.tls_server_name.is_some();
        let tls = if flags_tls {
            Some(tls_config(&FileTls {
                ca: self.tls_ca.clone(),
                cert: self.tls_cert.clone(),
                key: self.tls_key.clone(),
                server_name: self.tls_server_name.clone(),
            })?)
        } else if url_tls.is_some() {
            url_tls
        } else {
            file.tls.as_ref().map(tls_config).transpose()?
        };
        let mut groups = Vec::new();
        // The file's groups describe the cluster only without --groups/--servers.
        let file_groups = if self.groups.is_none() && self.servers.is_none() {
            &file.groups[..]
        } else {
            &[]
        };
        for g in file_groups {
            let credentials = match &g.username {
                Some(user) => Some(login(user.clone(), g.password_file.as_ref())?),
                None if g.password_file.is_some() => {
                    return Err(usage(format!(
                        "group {:?}: password_file without username",
                        g.name
                    )));
                }
                None => None,
            };
            let tls = g.tls.as_ref().map(tls_config).transpose()?;
            if credentials.is_some() || tls.is_some() {
                groups.push(GroupSecurity {
                    group: g.name.clone(),
                    credentials,
                    tls,
                });
            }
        }
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
            tls,
            groups,
            migrate_from: match self.migrate_from.as_ref().or(file.migrate_from.as_ref()) {
                Some(_) if self.reading_old_layout => {
                    return Err(usage(
                        "an old layout that is itself migrating: chains are not supported",
                    ));
                }
                Some(old) => Some(old_layout(old, self.old_hash)?),
                None => None,
            },
        };
        Ok((spec, timeouts))
    }

    /// Makes a long-running command (bench, warm, status --watch) follow
    /// changes to the `--config` file, checked every second; `adjust` is
    /// applied to each new description as it was to the first. `None`
    /// without a file (the cluster then comes from flags only).
    pub(crate) fn watch(
        &self,
        client: &Client,
        adjust: impl Fn(ClusterSpec) -> ClusterSpec + Send + 'static,
    ) -> Option<Watcher> {
        let path = self.config.clone()?;
        let args = self.clone();
        Some(
            client.watch_file(path, Duration::from_secs(1), move |_| match args.spec() {
                Ok((spec, _)) => Ok(adjust(spec)),
                Err(Failure::Usage(m) | Failure::Op(m)) => Err(m),
            }),
        )
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
        if let Some(tls) = timeouts.tls {
            builder = builder.tls(tls);
        }
        if let Some(old) = timeouts.migrate_from {
            builder = builder.migrate_from(old);
        }
        for own in timeouts.groups {
            if let Some(credentials) = own.credentials {
                builder = builder.group_credentials(&own.group, credentials);
            }
            if let Some(tls) = own.tls {
                builder = builder.group_tls(&own.group, tls);
            }
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
