//! The cluster the flags describe, resolved: its servers, groups and routing
//! (a [`ClusterSpec`]) and the client's own settings, from flags,
//! `MEMCACHED_SERVERS`, a `memcache://` URL or a TOML file (`cluster.toml`,
//! parsed and checked by [`memgroup::config`], whose docs show every
//! setting). A flag wins over the file.

use std::path::PathBuf;
use std::time::Duration;

use memgroup::client::value::ValueFormat;
use memgroup::client::{Client, ClientUrl, Credentials, TlsConfig, Watcher};
use memgroup::config::{self, ClusterFile, Limits, TlsFiles};
use memgroup::hash::HashStrategy;
use memgroup::topology::{ClusterSpec, SpecOverrides};

use crate::exit::Failure;
use crate::flags::ClusterFlags;

/// The cluster a command works on: the flags resolved, their files read.
#[derive(Debug, Clone)]
pub(crate) struct Cluster {
    /// Servers, groups, hashing and policies.
    pub(crate) spec: ClusterSpec,
    /// How the client talks to them.
    pub(crate) settings: ClientSettings,
    /// The flags it was resolved from: a watched file is resolved again with
    /// them, and an old layout is read with their `--old-hash`.
    flags: ClusterFlags,
}

/// The client's own settings: timeouts, the value format, logins, TLS,
/// migration and limits.
#[derive(Debug, Clone)]
pub(crate) struct ClientSettings {
    /// The per-operation timeout.
    pub(crate) timeout: Duration,
    /// The connect timeout.
    connect_timeout: Duration,
    /// How typed values are read and written (`get`, `set --type`).
    values: ValueFormat,
    /// The login of every connection (memcached `-Y`), if any.
    credentials: Option<Credentials>,
    /// TLS for every connection, if any.
    tls: Option<TlsConfig>,
    /// Groups' own logins and TLS.
    groups: Vec<GroupSecurity>,
    /// Migration mode: the old layout.
    migrate_from: Option<ClusterSpec>,
    /// The largest value and multi-item reply, requests in flight per
    /// connection.
    limits: Limits,
    /// Whether concurrent single-key gets are merged into multi-key commands.
    merge_gets: bool,
}

/// A group's own login and TLS (from the file).
#[derive(Debug, Clone)]
struct GroupSecurity {
    group: String,
    credentials: Option<Credentials>,
    tls: Option<TlsConfig>,
}

impl Cluster {
    /// Resolves the flags: reads the file, URL, password and TLS files they
    /// name. A flag wins over the file; in the file, a group's own setting
    /// wins over the file-wide one.
    pub(crate) fn from_flags(flags: &ClusterFlags) -> Result<Cluster, Failure> {
        let file = match &flags.config {
            Some(path) => ClusterFile::read(path).map_err(|e| usage(e.to_string()))?,
            None => ClusterFile::default(),
        };
        let mut url = None;
        let spec = if let Some(groups) = &flags.groups {
            file.apply_file_wide(
                ClusterSpec::parse_evcache(groups).map_err(|e| usage(e.to_string()))?,
            )
        } else if let Some(text) = flags
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
        } else if let Some(servers) = &flags.servers {
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
        let layer = ClusterFile {
            overrides: SpecOverrides {
                hash: flags.hash,
                node_naming: flags.node_naming,
                sanitize_keys: flags.sanitize.then_some(true),
                pool_size: flags.pool_size,
            },
            zone: flags.zone.clone(),
            read_fallback: flags.read_fallback,
            write_policy: flags.write_policy,
            failover: (flags.failover || flags.no_failover).then_some(flags.failover),
            ..ClusterFile::default()
        };
        let mut spec = layer.apply_file_wide(spec);
        if let Some(ms) = flags.backoff_ms {
            spec.settings.backoff_initial = Duration::from_millis(ms);
        }
        if flags.password_file.is_some() && flags.username.is_none() && file.username.is_none() {
            return Err(usage(
                "--password-file needs --username (or username in the file)",
            ));
        }
        let login = |user: String, file: Option<&PathBuf>| -> Result<Credentials, Failure> {
            config::login(&user, file.map(PathBuf::as_path)).map_err(|e| usage(e.message()))
        };
        let credentials = match flags.username.clone().or(file.username.clone()) {
            None => url.as_mut().and_then(|u| u.credentials.take()),
            Some(user) => Some(login(
                user,
                flags.password_file.as_ref().or(file.password_file.as_ref()),
            )?),
        };
        // TLS: a flag wins over the URL, the URL over the file.
        let flags_tls = flags.tls
            || flags.tls_ca.is_some()
            || flags.tls_cert.is_some()
            || flags.tls_server_name.is_some();
        let tls = if flags_tls {
            let files = TlsFiles {
                ca: flags.tls_ca.clone(),
                cert: flags.tls_cert.clone(),
                key: flags.tls_key.clone(),
                server_name: flags.tls_server_name.clone(),
            };
            files.check().map_err(|e| usage(e.message()))?;
            Some(tls_config(&files)?)
        } else if let Some(tls) = url.as_mut().and_then(|u| u.tls.take()) {
            Some(tls)
        } else {
            file.tls.as_ref().map(tls_config).transpose()?
        };
        let mut groups = Vec::new();
        // The file's groups describe the cluster only without --groups/--servers.
        let file_groups = if flags.groups.is_none() && flags.servers.is_none() {
            &file.groups[..]
        } else {
            &[]
        };
        for g in file_groups {
            let credentials = g.credentials().map_err(|e| usage(e.message()))?;
            let tls = g.tls_config().map_err(|e| usage(e.message()))?;
            if credentials.is_some() || tls.is_some() {
                groups.push(GroupSecurity {
                    group: g.name.clone(),
                    credentials,
                    tls,
                });
            }
        }
        let settings = ClientSettings {
            timeout: flags
                .timeout_ms
                .map(Duration::from_millis)
                .or(file.timeout)
                .unwrap_or(Duration::from_millis(500)),
            connect_timeout: flags
                .connect_timeout_ms
                .map(Duration::from_millis)
                .or(file.connect_timeout)
                .unwrap_or(Duration::from_millis(1000)),
            values: flags
                .value_format
                .or(file.value_format)
                .or(url.and_then(|u| u.value_format))
                .unwrap_or_default(),
            credentials,
            tls,
            groups,
            migrate_from: match flags.migrate_from.as_ref().or(file.migrate_from.as_ref()) {
                Some(old) => Some(old_layout(old, flags.old_hash)?),
                None => None,
            },
            limits: Limits {
                max_value_size: flags.max_value_size,
                max_reply_size: flags.max_reply_size,
                max_in_flight: flags.max_in_flight,
            }
            .or(file.limits),
            merge_gets: !flags.no_merge_gets,
        };
        Ok(Cluster {
            spec,
            settings,
            flags: flags.clone(),
        })
    }

    /// A client for the cluster (connections open lazily).
    pub(crate) fn client(&self) -> Result<Client, Failure> {
        self.settings.client(self.spec.clone())
    }

    /// An old layout (for migration and `route --compare`), read as
    /// [`old_layout`] reads it, with `--old-hash` for its hashing.
    pub(crate) fn old_layout(&self, text: &str) -> Result<ClusterSpec, Failure> {
        old_layout(text, self.flags.old_hash)
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
        let path = self.flags.config.clone()?;
        let flags = self.flags.clone();
        Some(client.watch_file(
            path,
            Duration::from_secs(1),
            move |_| match Cluster::from_flags(&flags) {
                Ok(cluster) => Ok(adjust(cluster.spec)),
                Err(Failure::Usage(m) | Failure::Op(m)) => Err(m),
            },
        ))
    }
}

impl ClientSettings {
    /// A client for `spec` with these settings (connections open lazily).
    pub(crate) fn client(&self, spec: ClusterSpec) -> Result<Client, Failure> {
        let mut builder = Client::builder()
            .cluster(spec)
            .timeout(self.timeout)
            .connect_timeout(self.connect_timeout)
            .value_format(self.values);
        if let Some(credentials) = self.credentials.clone() {
            builder = builder.credentials(credentials);
        }
        if let Some(tls) = self.tls.clone() {
            builder = builder.tls(tls);
        }
        if let Some(old) = self.migrate_from.clone() {
            builder = builder.migrate_from(old);
        }
        for own in &self.groups {
            if let Some(credentials) = own.credentials.clone() {
                builder = builder.group_credentials(&own.group, credentials);
            }
            if let Some(tls) = own.tls.clone() {
                builder = builder.group_tls(&own.group, tls);
            }
        }
        builder = self.limits.apply(builder).merge_gets(self.merge_gets);
        builder.build().map_err(|e| usage(format!("{e}")))
    }
}

/// The TLS configuration from its parts (checked by the file's parser or,
/// for flags, by the caller): files read now.
fn tls_config(tls: &TlsFiles) -> Result<TlsConfig, Failure> {
    tls.load().map_err(|e| usage(e.message()))
}

/// An old layout (for migration and `route --compare`): a cluster.toml
/// path, a `memcache://` URL, EVCache groups (`sg1=h:p,…;sg2=…`) or a server
/// list; `hash` overrides its hashing.
fn old_layout(text: &str, hash: Option<HashStrategy>) -> Result<ClusterSpec, Failure> {
    let spec =
        config::old_layout(text).map_err(|e| usage(format!("the old layout {text:?}: {e}")))?;
    Ok(match hash {
        Some(h) => spec.with_hash(h),
        None => spec,
    })
}

fn usage(message: impl Into<String>) -> Failure {
    Failure::Usage(message.into())
}
