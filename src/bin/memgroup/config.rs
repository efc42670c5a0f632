//! Cluster configuration from flags, `MEMCACHED_SERVERS` or a TOML file
//! (`cluster.toml`, parsed and checked by [`memgroup::config`], whose docs
//! show every setting). A flag wins over the file.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use memgroup::client::value::ValueFormat;
use memgroup::client::{Client, ClientUrl, Credentials, TlsConfig, Watcher};
use memgroup::config::{ClusterFile, TlsFiles};
use memgroup::hash::{HashStrategy, NodeNaming};
use memgroup::topology::{ClusterSpec, ReadFallback, SpecOverrides, WritePolicy};

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
    /// The most bytes one multi-item reply (a multi-key get, a stats
    /// listing) may hold before its connection is closed (default 256 MiB).
    #[arg(long, global = true)]
    pub(crate) max_reply_size: Option<usize>,
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

/// The TLS configuration from its parts (checked by the file's parser or,
/// for flags, by the caller): files read now.
fn tls_config(tls: &TlsFiles) -> Result<TlsConfig, Failure> {
    let bad = |e: memgroup::client::Error| usage(e.chain());
    let mut config = match &tls.ca {
        Some(ca) => TlsConfig::ca_file(ca).map_err(bad)?,
        None => TlsConfig::platform_roots().map_err(bad)?,
    };
    if let (Some(cert), Some(key)) = (&tls.cert, &tls.key) {
        config = config.client_cert_files(cert, key).map_err(bad)?;
    }
    if let Some(name) = &tls.server_name {
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
    let in_old = |m: String| usage(format!("the old layout {text:?}: {m}"));
    let spec = if std::path::Path::new(text).is_file() {
        let file = ClusterFile::read(text).map_err(|e| in_old(e.to_string()))?;
        if file.migrate_from.is_some() {
            return Err(in_old(
                "an old layout that is itself migrating: chains are not supported".into(),
            ));
        }
        file.spec()
            .ok_or_else(|| in_old("the file lists no [[groups]]".into()))?
    } else if text.starts_with("memcache://") {
        ClientUrl::parse(text).map_err(|e| in_old(e.chain()))?.spec
    } else if text.contains('=') {
        ClusterSpec::parse_evcache(text).map_err(|e| in_old(e.to_string()))?
    } else {
        ClusterSpec::parse_server_list(text).map_err(|e| in_old(e.to_string()))?
    };
    Ok(match hash {
        Some(h) => spec.with_hash(h),
        None => spec,
    })
}

fn usage(message: impl Into<String>) -> Failure {
    Failure::Usage(message.into())
}

impl ClusterArgs {
    /// The cluster description. A flag wins over the file; in the file, a
    /// group's own setting wins over the file-wide one.
    pub(crate) fn spec(&self) -> Result<(ClusterSpec, ClientSettings), Failure> {
        let file = match &self.config {
            Some(path) => ClusterFile::read(path).map_err(|e| usage(e.to_string()))?,
            None => ClusterFile::default(),
        };
        let mut url = None;
        let spec = if let Some(groups) = &self.groups {
            file.apply_file_wide(
                ClusterSpec::parse_evcache(groups).map_err(|e| usage(e.to_string()))?,
            )
        } else if let Some(text) = self
            .servers
            .as_deref()
            .filter(|s| s.starts_with("memcache://"))
        {
            let parsed = ClientUrl::parse(text).map_err(|e| usage(e.chain()))?;
            // The URL's settings (zone, policies) stand unless the file or
            // flags override them.
            let spec = file.apply_file_wide(parsed.spec.clone());
            url = Some(parsed);
            spec
        } else if let Some(servers) = &self.servers {
            file.apply_file_wide(
                ClusterSpec::parse_server_list(servers).map_err(|e| usage(e.to_string()))?,
            )
        } else if let Some(spec) = file.spec() {
            spec
        } else {
            return Err(usage(
                "no servers: give --servers, --groups, --config or MEMCACHED_SERVERS",
            ));
        };
        // The flags are one more layer of the file's shape, over it.
        let flags = ClusterFile {
            overrides: SpecOverrides {
                hash: self.hash,
                node_naming: self.node_naming,
                sanitize_keys: self.sanitize.then_some(true),
                pool_size: self.pool_size,
            },
            zone: self.zone.clone(),
            read_fallback: self.read_fallback,
            write_policy: self.write_policy,
            failover: (self.failover || self.no_failover).then_some(self.failover),
            ..ClusterFile::default()
        };
        let mut spec = flags.apply_file_wide(spec);
        if let Some(ms) = self.backoff_ms {
            spec.settings.backoff_initial = Duration::from_millis(ms);
        }
        let login = |user: String, file: Option<&PathBuf>| -> Result<Credentials, Failure> {
            Credentials::new(user, password(file)?).map_err(|e| usage(e.chain()))
        };
        let credentials = match self.username.clone().or(file.username.clone()) {
            None => url.as_mut().and_then(|u| u.credentials.take()),
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
            let flags = TlsFiles {
                ca: self.tls_ca.clone(),
                cert: self.tls_cert.clone(),
                key: self.tls_key.clone(),
                server_name: self.tls_server_name.clone(),
            };
            flags.check().map_err(|e| usage(e.message()))?;
            Some(tls_config(&flags)?)
        } else if let Some(tls) = url.as_mut().and_then(|u| u.tls.take()) {
            Some(tls)
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
            let credentials = g
                .username
                .as_ref()
                .map(|user| login(user.clone(), g.password_file.as_ref()))
                .transpose()?;
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
            op: self
                .timeout_ms
                .map(Duration::from_millis)
                .or(file.timeout)
                .unwrap_or(Duration::from_millis(500)),
            connect: self
                .connect_timeout_ms
                .map(Duration::from_millis)
                .or(file.connect_timeout)
                .unwrap_or(Duration::from_millis(1000)),
            values: self
                .value_format
                .or(file.value_format)
                .or(url.and_then(|u| u.value_format))
                .unwrap_or_default(),
            credentials,
            tls,
            groups,
            migrate_from: match self.migrate_from.as_ref().or(file.migrate_from.as_ref()) {
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
        if let Some(bytes) = self.max_reply_size {
            builder = builder.max_reply_size(bytes);
        }
        if let Some(n) = self.max_in_flight {
            builder = builder.max_in_flight(n);
        }
        builder = builder.merge_gets(!self.no_merge_gets);
        builder.build().map_err(|e| usage(format!("{e}")))
    }
}
