//! The cluster the flags describe, resolved: its servers, groups and routing
//! (a [`ClusterSpec`]) and the client's own settings, from flags, the
//! environment (`MEMCACHED_SERVERS`, `MEMGROUP_GROUPS`, `MEMGROUP_CONFIG`), a
//! `memcache://` URL or a TOML file (`cluster.toml`, parsed and checked by
//! [`memgroup::config`], whose docs show every setting), by the one rule of
//! [`crate::sources`]: flag > environment > file > default.

use std::path::PathBuf;
use std::time::Duration;

use memgroup::client::value::ValueFormat;
use memgroup::client::{
    Client, ClientUrl, Credentials, Hedge, LongKeys, MetaProtocol, TlsConfig, Watcher, WriteWait,
};
use memgroup::config::{self, ClusterFile, Limits, TlsFiles};
use memgroup::hash::HashStrategy;
use memgroup::hash::evcache::EvcacheKeys;
use memgroup::topology::{ClusterSpec, SpecOverrides};

use crate::exit::Failure;
use crate::flags::ClusterFlags;
use crate::sources::{self, ConfigFile, Servers};

mod clients;
mod effective;
mod journal;
mod keys;

pub(crate) use clients::{close_clients, only_group};

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
    /// The cluster file read, if any.
    config: Option<ConfigFile>,
    /// Where each setting came from, for `memgroup config`.
    pub(crate) origins: Vec<(&'static str, String)>,
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
    /// When writes return: every group by default (the exit codes report
    /// each group); `bench` measures the library's default, the policy.
    pub(crate) write_wait: WriteWait,
    /// Hedged gets: the library's default; `bench --hedge-ms` sets it.
    pub(crate) hedge: Hedge,
    /// Groups found at configuration endpoints (`--discover`, or the
    /// file's `discover`): `(group, endpoint)`.
    discovery: Vec<(String, String)>,
    /// How often discovery asks again.
    discover_every: Option<Duration>,
    /// Long keys, if on.
    long_keys: Option<LongKeys>,
    /// EVCache's hashed keys, if on.
    evcache_keys: Option<EvcacheKeys>,
    /// The groups' own EVCache key settings (the file's).
    group_keys: keys::GroupKeys,
    /// The repair journal's directory, unless off.
    pub(crate) repair_journal: Option<std::path::PathBuf>,
    /// Read repair on (`--read-repair`, the file's `read_repair`).
    read_repair: bool,
    /// Whether the servers speak the meta protocol (the file's `meta_protocol`).
    meta_protocol: MetaProtocol,
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
        let mut warnings = Vec::new();
        let cluster = Cluster::resolve(flags, &sources::process_env, &mut warnings)?;
        for warning in warnings {
            crate::output::warning(None, &warning);
        }
        Ok(cluster)
    }

    /// [`from_flags`](Cluster::from_flags) with the environment given and
    /// its warnings collected, not printed.
    pub(crate) fn resolve(
        flags: &ClusterFlags,
        env: &impl Fn(&str) -> Option<String>,
        warnings: &mut Vec<String>,
    ) -> Result<Cluster, Failure> {
        let config = sources::config_file(flags, env, warnings);
        let file = match &config {
            Some(c) => ClusterFile::read(&c.path).map_err(|e| usage(e.to_string()))?,
            None => ClusterFile::default(),
        };
        let source = sources::servers(
            flags,
            env,
            config.as_ref(),
            !file.groups.is_empty() || file.discover.is_some(),
            warnings,
        )?
        .ok_or_else(|| {
            usage(format!(
                "no servers: give --servers, --groups, --discover or --config (or {}, {} or {})",
                sources::SERVERS_ENV,
                sources::GROUPS_ENV,
                sources::CONFIG_ENV
            ))
        })?;
        let mut url = None;
        let mut url_given = Vec::new();
        let spec = match &source.servers {
            Servers::Groups(groups) => file.apply_file_wide(
                ClusterSpec::parse_evcache(groups).map_err(|e| usage(e.to_string()))?,
            ),
            Servers::List(text) if text.starts_with("memcache://") => {
                let parsed = ClientUrl::parse(text).map_err(|e| usage(e.chain()))?;
                // The URL's own parameters rank as where the URL came from
                // (a flag or the environment): above the file.
                url_given = sources::url_params(text);
                let spec = sources::without(&file, &url_given).apply_file_wide(parsed.spec.clone());
                url = Some(parsed);
                spec
            }
            Servers::List(servers) => file.apply_file_wide(
                ClusterSpec::parse_server_list(servers).map_err(|e| usage(e.to_string()))?,
            ),
            // A file's one discovered group: no servers until it connects.
            // A file's one discovered group: no servers until it connects,
            // but there, so the hashing and pool settings apply to it.
            Servers::File | Servers::Discover(_) => file.spec().unwrap_or_else(|| {
                file.apply_file_wide(ClusterSpec::new([memgroup::topology::GroupSpec::new(
                    memgroup::topology::DEFAULT_GROUP_NAME,
                    Vec::new(),
                )]))
            }),
        };
        let discovery: Vec<(String, String)> = match &source.servers {
            Servers::Discover(endpoint) => {
                vec![(
                    memgroup::topology::DEFAULT_GROUP_NAME.to_string(),
                    endpoint.clone(),
                )]
            }
            Servers::File => file
                .discover
                .iter()
                .map(|e| {
                    (
                        memgroup::topology::DEFAULT_GROUP_NAME.to_string(),
                        e.clone(),
                    )
                })
                .chain(
                    file.groups
                        .iter()
                        .filter_map(|g| Some((g.name.clone(), g.discover.clone()?))),
                )
                .collect(),
            _ => Vec::new(),
        };
        // The flags are one more layer of the file's shape, over it.
        let layer = ClusterFile {
            overrides: SpecOverrides {
                hash: flags.hash,
                node_naming: flags.node_naming,
                sanitize_keys: flags.sanitize.then_some(true),
                pool_size: flags.pool_size,
                key_prefix: flags.key_prefix.clone(),
            },
            zone: flags.zone.clone(),
            arbiter: flags.arbiter.clone(),
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
        // A login: the flag's, else the URL's, else the file's.
        let url_login = url.as_mut().and_then(|u| u.credentials.take());
        let credentials = match (flags.username.clone(), url_login) {
            (Some(user), _) => Some(login(
                user,
                flags.password_file.as_ref().or(file.password_file.as_ref()),
            )?),
            (None, Some(from_url)) => Some(from_url),
            (None, None) => match file.username.clone() {
                Some(user) => Some(login(
                    user,
                    flags.password_file.as_ref().or(file.password_file.as_ref()),
                )?),
                None => None,
            },
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
        // The file's groups' own logins and TLS, when they are the servers.
        let file_groups = if source.servers == Servers::File {
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
        let (repair_journal, journal_origin) = journal::dir(
            flags,
            env,
            file.repair_journal.as_ref(),
            config.as_ref(),
            warnings,
        );
        let (long_keys, evcache_keys, group_keys) = keys::key_schemes(flags, &file, file_groups);
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
                .or(url.as_ref().and_then(|u| u.value_format))
                .or(file.value_format)
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
            write_wait: WriteWait::AllGroups,
            hedge: Hedge::default(),
            discovery,
            discover_every: file.discover_every,
            long_keys,
            evcache_keys,
            group_keys,
            repair_journal,
            read_repair: flags.read_repair || file.read_repair == Some(true),
            meta_protocol: flags
                .meta_protocol
                .or(file.meta_protocol)
                .unwrap_or_default(),
        };
        let mut origins = sources::origins(flags, &source, config.as_ref(), &file, &url_given);
        origins.push(("repair_journal", journal_origin));
        let in_file = config.as_ref().map(|c| format!("file ({})", c.name));
        origins.push((
            "read_repair",
            match (flags.read_repair, file.read_repair.is_some(), in_file) {
                (true, _, _) => "flag --read-repair".to_string(),
                (false, true, Some(file)) => file,
                _ => "default".to_string(),
            },
        ));
        Ok(Cluster {
            spec,
            settings,
            flags: flags.clone(),
            config,
            origins,
        })
    }

    /// That the cluster is one every command takes (a topology can be built
    /// from it), unless its servers come from discovery (known only once
    /// an endpoint answers): what `config` checks after printing.
    pub(crate) fn check(&self) -> Result<(), Failure> {
        if !self.settings.discovery.is_empty() {
            return Ok(());
        }
        // Built as every command builds it (the builder's checks too: a
        // zone no group has); no connection opens.
        Client::builder()
            .cluster(self.spec.clone())
            .repair_queue(0)
            .build()
            .map(drop)
            .map_err(Failure::from)
    }

    /// A client for the cluster (connections open lazily).
    pub(crate) fn client(&self) -> Result<Client, Failure> {
        self.settings.client_of(self.spec.clone(), true)
    }

    /// A client for group `name` alone, reading its copies only (no
    /// fallback to another group, no failover within it): what `get
    /// --group` compares replicas with.
    pub(crate) fn group_client(&self, name: &str) -> Result<Client, Failure> {
        Failure::group_in_spec(&self.spec, name)?;
        self.settings.client_of(only_group(&self.spec, name), true)
    }

    /// A client for the cluster, or (`group`) for that group alone
    /// ([`Cluster::group_client`]).
    pub(crate) fn client_for(&self, group: Option<&str>) -> Result<Client, Failure> {
        match group {
            Some(name) => self.group_client(name),
            None => self.client(),
        }
    }

    /// An old layout (for migration and `route --compare`), read as
    /// [`old_layout`] reads it, with `--old-hash` for its hashing.
    pub(crate) fn old_layout(&self, text: &str) -> Result<ClusterSpec, Failure> {
        old_layout(text, self.flags.old_hash)
    }

    /// The cluster file's path, when one was read.
    pub(crate) fn config_path(&self) -> Option<&std::path::Path> {
        self.config.as_ref().map(|c| c.path.as_path())
    }

    /// Makes a long-running command (bench, warm, status --watch, proxy)
    /// follow changes to the `--config` file, checked every second; `adjust`
    /// is applied to each new description as it was to the first (or
    /// refuses it, saying why). A changed `timeout_ms` and `migrate_from`
    /// apply too; a setting that applies only at a restart is said on
    /// stderr. A change that cannot be applied is said on stderr and the
    /// cluster stays as it was. `None` without a file (the cluster then
    /// comes from flags only).
    pub(crate) fn watch(
        &self,
        client: &Client,
        adjust: impl Fn(ClusterSpec) -> Result<ClusterSpec, String> + Send + 'static,
    ) -> Option<Watcher> {
        let path = self.config.as_ref()?.path.clone();
        let flags = self.flags.clone();
        let (client_now, last) = (client.clone(), std::sync::Mutex::new(self.settings.clone()));
        Some(client.watch_file(path, Duration::from_secs(1), move |_| {
            let cluster = Cluster::resolve(&flags, &sources::process_env, &mut Vec::new())
                .map_err(|(Failure::Usage(m) | Failure::Op(m) | Failure::Unknown(m))| m)?;
            let spec = adjust(cluster.spec)?;
            // Checked before any setting changes: a file refused changes nothing.
            memgroup::topology::Topology::new(spec.clone()).map_err(|e| e.to_string())?;
            let mut last = last
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let new = cluster.settings;
            if new.migrate_from != last.migrate_from {
                client_now
                    .set_migration(new.migrate_from.clone())
                    .map_err(|e| format!("migrate_from: {e}"))?;
                crate::output::note(match new.migrate_from {
                    Some(_) => "migrate_from applied: misses read through to the old layout",
                    None => "migrate_from removed: the migration has ended",
                });
            }
            if new.timeout != last.timeout {
                client_now
                    .set_timeout(new.timeout)
                    .map_err(|e| e.to_string())?;
            }
            for name in last.restart_only(&new) {
                crate::output::note(&format!(
                    "the file's {name} changed: it applies at a restart"
                ));
            }
            *last = new;
            Ok::<_, String>(spec)
        }))
    }
}

impl ClientSettings {
    /// The settings a running client keeps until it restarts that differ
    /// between `self` and `new`.
    fn restart_only(&self, new: &ClientSettings) -> Vec<&'static str> {
        let changed = [
            (
                "connect_timeout_ms",
                self.connect_timeout != new.connect_timeout,
            ),
            ("value_format", self.values != new.values),
            ("credentials", self.credentials != new.credentials),
            ("limits", self.limits != new.limits),
            ("read_repair", self.read_repair != new.read_repair),
            ("repair_journal", self.repair_journal != new.repair_journal),
            ("discover", self.discovery != new.discovery),
            ("meta_protocol", self.meta_protocol != new.meta_protocol),
        ];
        changed
            .iter()
            .filter(|(_, c)| *c)
            .map(|(n, _)| *n)
            .collect()
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
