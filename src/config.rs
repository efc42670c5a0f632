//! `cluster.toml`: a cluster described in a file (feature `config`).
//!
//! The file the `memgroup` tool reads with `--config`, readable by services
//! too, so that they and the operator's tool agree on the fleet.
//! [`ClusterFile::parse`] checks the whole text at once: TOML syntax,
//! unknown settings, every named setting (hash, policies, value format),
//! every server list and TLS section, so that a bad file is refused with one
//! clear message before anything connects. Numeric ranges that depend on the
//! whole cluster (pool sizes, weights) are checked when the topology is built
//! from [`ClusterFile::spec`]. Files the configuration names (passwords, TLS
//! certificates, an old layout) are read when [`ClusterFile::builder`] makes
//! the file into a client builder with every setting applied.
//!
//! ```toml
//! # cluster.toml
//! hash = "ketama"              # default strategy of every group
//! zone = "us-east-1a"          # the caller's zone: reads prefer it
//! arbiter = "us-east-1a"       # the group deciding add/cas/incr/…: default the first by name
//! pool_size = 2
//! timeout_ms = 500
//! connect_timeout_ms = 1000
//! read_fallback = "one-more"   # never | one-more | all-copies
//! write_policy = "quorum"      # none | one | quorum | all-minus-one | all
//! value_format = "evcache"     # raw | spymemcached | evcache | whalin | python-memcached
//! username = "app"             # memcached -Y login; the password is read from
//! password_file = "/run/secrets/memcached"   # (or MEMGROUP_PASSWORD)
//! max_value_size = 1048576     # bytes; also max_reply_size, max_in_flight
//! long_keys = true             # keys over 250 bytes go under an MD5 digest key (read back by memgroup only);
//! long_keys_max_len = 200      #   optional: a lower limit, and the digest keys' prefix (default "mglk:")
//! long_keys_prefix = "lk:"
//! # evcache_keys = { hash_key = true, hash_algo = "siphash24" }   # EVCache's hashed keys (a group's
//! #   own, in its [[groups]] entry, over these: evcache_keys = { hash_algo = "md5" })
//! #   (or auto_hash_keys = true; max_key_length, max_digest_bytes, max_hash_length, hash_encoder)
//! key_prefix = "app:"          # in front of every key (EVCache's cache prefix "app", Dalli's namespace)
//! migrate_from = "old.toml"    # migration mode: the old layout (file, URL or list)
//! meta_protocol = "detect"     # detect | always | never: "never" for memcached 1.4/1.5 or twemproxy
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
//!
//! ```
//! use memgroup::config::ClusterFile;
//!
//! let file = ClusterFile::parse(
//!     r#"
//!     hash = "new-compat"
//!     [[groups]]
//!     name = "sg1"
//!     servers = ["10.0.0.1:11211", "10.0.0.2:11211:5"]
//!     "#,
//! )?;
//! let spec = file.spec().expect("the file lists groups");
//! assert_eq!(spec.groups[0].servers[1].weight, 5);
//! # Ok::<(), memgroup::config::ConfigError>(())
//! ```
//!
//! A service builds its client from the file in one call; a configuration
//! error converts into the client's [`Error`](memgroup_client::Error), so
//! `?` works in a function returning it:
//!
//! ```no_run
//! use memgroup::config::ClusterFile;
//!
//! # async fn demo() -> Result<(), memgroup::client::Error> {
//! let client = ClusterFile::read("cluster.toml")?.builder()?.build()?;
//! client.set_as("visits", &41i64, 0).await?;
//! # Ok(()) }
//! ```

use std::path::{Path, PathBuf};
use std::time::Duration;

use memgroup_client::LongKeys;
use memgroup_client::value::ValueFormat;
use memgroup_topology::{ClusterSpec, GroupSpec, ReadFallback, SpecOverrides, WritePolicy};
use serde::Deserialize;

mod group;
mod keys;
mod load;

pub use group::FileGroup;
use group::RawGroup;
pub use load::{PASSWORD_ENV, login, old_layout, password};

/// A `cluster.toml` that is not valid: the message names the setting (and
/// the group) and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    message: String,
}

impl ConfigError {
    fn new(message: impl Into<String>) -> ConfigError {
        ConfigError {
            message: message.into(),
        }
    }

    /// What is wrong, without the file's name.
    #[must_use]
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ConfigError {}

/// A `[tls]` section (file-wide, or a group's own): paths, not yet read.
#[derive(Debug, Default, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsFiles {
    /// Trusted certificate authorities (PEM); without it, the platform's roots.
    pub ca: Option<PathBuf>,
    /// A client certificate (PEM), for servers that want one. Given with `key`.
    pub cert: Option<PathBuf>,
    /// The private key (PEM) of `cert`.
    pub key: Option<PathBuf>,
    /// Verify the servers' certificates for this name instead of each host.
    pub server_name: Option<String>,
}

impl TlsFiles {
    /// Refuses a certificate without its key (or the reverse) and an empty
    /// server name.
    pub fn check(&self) -> Result<(), ConfigError> {
        if self.cert.is_some() != self.key.is_some() {
            return Err(ConfigError::new(
                "a TLS client certificate needs both cert and key",
            ));
        }
        if self.server_name.as_deref() == Some("") {
            return Err(ConfigError::new("the TLS server name is empty"));
        }
        Ok(())
    }
}

/// The client's limits, each `None` for the client's default (see
/// [`ClientBuilder`](memgroup_client::ClientBuilder)'s methods of the same
/// names).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The largest value read or written, in bytes.
    pub max_value_size: Option<usize>,
    /// The most bytes one multi-item reply may hold.
    pub max_reply_size: Option<usize>,
    /// Requests in flight per connection before callers wait (at least 1).
    pub max_in_flight: Option<usize>,
}

impl Limits {
    /// Each limit of `self`, else of `other` (flags over a file, say).
    #[must_use]
    pub fn or(self, other: Limits) -> Limits {
        Limits {
            max_value_size: self.max_value_size.or(other.max_value_size),
            max_reply_size: self.max_reply_size.or(other.max_reply_size),
            max_in_flight: self.max_in_flight.or(other.max_in_flight),
        }
    }

    /// Sets the limits given on `builder`.
    #[must_use]
    pub fn apply(
        self,
        mut builder: memgroup_client::ClientBuilder,
    ) -> memgroup_client::ClientBuilder {
        if let Some(bytes) = self.max_value_size {
            builder = builder.max_value_size(bytes);
        }
        if let Some(bytes) = self.max_reply_size {
            builder = builder.max_reply_size(bytes);
        }
        if let Some(n) = self.max_in_flight {
            builder = builder.max_in_flight(n);
        }
        builder
    }
}

/// A parsed and checked `cluster.toml`. Every setting is optional: a
/// caller's own flags may override or complete it.
#[derive(Debug, Clone, Default)]
pub struct ClusterFile {
    /// File-wide hashing strategy (`hash`), node naming, key sanitizing
    /// (`sanitize`: URL-encode keys like the Whalin Java client) and
    /// connections per server: each group's default; and the cluster's key
    /// prefix (`key_prefix`).
    pub overrides: SpecOverrides,
    /// The caller's zone: reads prefer it.
    pub zone: Option<String>,
    /// The group that decides conditional writes (`arbiter`; default the
    /// first read-write group by name) and whether they may move to the next
    /// while it is unreachable (`arbiter_failover`, default false).
    pub arbiter: Option<String>,
    /// See [`ClusterFile::arbiter`].
    pub arbiter_failover: Option<bool>,
    /// Per-operation timeout (`timeout_ms`).
    pub timeout: Option<Duration>,
    /// Connect timeout (`connect_timeout_ms`).
    pub connect_timeout: Option<Duration>,
    /// Read fallback across groups.
    pub read_fallback: Option<ReadFallback>,
    /// Write policy across groups.
    pub write_policy: Option<WritePolicy>,
    /// How typed values are read and written.
    pub value_format: Option<ValueFormat>,
    /// Failover within a group.
    pub failover: Option<bool>,
    /// The client's limits (`max_value_size`, `max_reply_size`,
    /// `max_in_flight`).
    pub limits: Limits,
    /// Long keys (`long_keys = true`, with `long_keys_max_len` and
    /// `long_keys_prefix`; off when absent): see
    /// [`ClientBuilder::long_keys`](crate::client::ClientBuilder::long_keys).
    pub long_keys: Option<LongKeys>,
    /// EVCache's hashed keys (`[evcache_keys]`): see
    /// [`ClientBuilder::evcache_keys`](crate::client::ClientBuilder::evcache_keys).
    pub evcache_keys: Option<memgroup_hash::evcache::EvcacheKeys>,
    /// The login of every connection (memcached `-Y`).
    pub username: Option<String>,
    /// Where the password of the login is.
    pub password_file: Option<PathBuf>,
    /// TLS for every connection.
    pub tls: Option<TlsFiles>,
    /// Migration mode: the old layout (a path, list or URL; see the tool's
    /// `--migrate-from`).
    pub migrate_from: Option<String>,
    /// Whether the servers speak memcached's meta protocol
    /// (`meta_protocol`): see [`ClientBuilder::meta_protocol`](crate::client::ClientBuilder::meta_protocol).
    pub meta_protocol: Option<crate::client::MetaProtocol>,
    /// The server groups; empty when the servers come from elsewhere.
    pub groups: Vec<FileGroup>,
    /// The configuration endpoint of a cluster of one group
    /// (`discover = "host:port"`, [`ClientBuilder::discover`](crate::client::ClientBuilder::discover)).
    pub discover: Option<String>,
    /// How often discovery asks again (`discover_every_s`, default 60).
    pub discover_every: Option<Duration>,
    /// Read repair (`read_repair = true`; off when absent): see
    /// [`ClientBuilder::read_repair`](crate::client::ClientBuilder::read_repair).
    pub read_repair: Option<bool>,
    /// Where repairs outlive the process (`repair_journal`: a directory, or
    /// `"off"`): see [`ClientBuilder::repair_journal`](crate::client::ClientBuilder::repair_journal).
    /// Absent: the library keeps repairs in memory; the tool uses its
    /// default directory.
    pub repair_journal: Option<RepairJournal>,
    /// `[proxy] listen`: the addresses `memgroup proxy` listens on beside
    /// its `--listen` flags, followed when the file changes.
    pub proxy_listen: Vec<std::net::SocketAddr>,
}

/// The file's `repair_journal`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RepairJournal {
    /// `"off"`: repairs in memory only.
    Off,
    /// A directory.
    Dir(PathBuf),
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    hash: Option<String>,
    node_naming: Option<String>,
    sanitize: Option<bool>,
    zone: Option<String>,
    arbiter: Option<String>,
    arbiter_failover: Option<bool>,
    pool_size: Option<i64>,
    timeout_ms: Option<u64>,
    connect_timeout_ms: Option<u64>,
    read_fallback: Option<String>,
    write_policy: Option<String>,
    value_format: Option<String>,
    username: Option<String>,
    password_file: Option<PathBuf>,
    failover: Option<bool>,
    max_value_size: Option<usize>,
    max_reply_size: Option<usize>,
    max_in_flight: Option<usize>,
    long_keys: Option<bool>,
    long_keys_max_len: Option<usize>,
    long_keys_prefix: Option<String>,
    evcache_keys: Option<keys::RawEvcacheKeys>,
    key_prefix: Option<String>,
    tls: Option<TlsFiles>,
    migrate_from: Option<String>,
    meta_protocol: Option<String>,
    discover: Option<String>,
    discover_every_s: Option<u64>,
    repair_journal: Option<String>,
    read_repair: Option<bool>,
    proxy: Option<RawProxy>,
    #[serde(default)]
    groups: Vec<RawGroup>,
}

/// `[proxy]`: what `memgroup proxy` reads of the file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProxy {
    #[serde(default)]
    listen: Vec<String>,
}

/// A named setting parsed through its type's `FromStr`, whose error names
/// the bad text (and, where the type knows them, the valid names).
fn named<T>(setting: &str, text: Option<String>) -> Result<Option<T>, ConfigError>
where
    T: std::str::FromStr,
    T::Err: std::fmt::Display,
{
    text.map(|t| {
        t.parse()
            .map_err(|e| ConfigError::new(format!("{setting}: {e}")))
    })
    .transpose()
}

/// A `pool_size` as written: connections per server, 1 to the limit.
fn checked_pool_size(size: Option<i64>) -> Result<Option<usize>, ConfigError> {
    use memgroup_topology::MAX_POOL_SIZE;
    match size.map(usize::try_from) {
        None => Ok(None),
        Some(Ok(n)) if (1..=MAX_POOL_SIZE).contains(&n) => Ok(Some(n)),
        _ => Err(ConfigError::new(format!(
            "pool_size = {}: give 1 to {MAX_POOL_SIZE} connections per server",
            size.unwrap_or_default()
        ))),
    }
}

fn checked_tls(tls: Option<TlsFiles>) -> Result<Option<TlsFiles>, ConfigError> {
    if let Some(t) = &tls {
        t.check()?;
    }
    Ok(tls)
}

/// A TOML error on one line, with where it is: the parser's message (empty
/// for some syntax errors, several lines for others) and the line and column
/// of its span.
fn toml_error(text: &str, e: &toml::de::Error) -> ConfigError {
    let message = e.message().trim().replace('\n', "; ");
    let what = match message.as_str() {
        "" => "not valid TOML",
        m => m,
    };
    match e.span() {
        Some(span) => {
            let before = text.get(..span.start).unwrap_or(text);
            let line = before.matches('\n').count() + 1;
            let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
            ConfigError::new(format!("line {line}, column {column}: {what}"))
        }
        None => ConfigError::new(what),
    }
}

impl ClusterFile {
    /// Parses and checks the text of a `cluster.toml`.
    pub fn parse(text: &str) -> Result<ClusterFile, ConfigError> {
        let mut raw: RawFile = toml::from_str(text).map_err(|e| toml_error(text, &e))?;
        if raw.max_in_flight == Some(0) {
            return Err(ConfigError::new(
                "max_in_flight: 0 would let no request through: give at least 1",
            ));
        }
        if raw.discover.is_some() && !raw.groups.is_empty() {
            return Err(ConfigError::new(
                "discover at the top is a cluster of one group: with [[groups]], give each its own discover",
            ));
        }
        if raw.discover_every_s == Some(0) {
            return Err(ConfigError::new("discover_every_s: give at least 1 second"));
        }
        let pool_size = checked_pool_size(raw.pool_size)?;
        if let Some(twice) = raw
            .groups
            .iter()
            .enumerate()
            .find(|(i, g)| raw.groups[..*i].iter().any(|h| h.name == g.name))
        {
            return Err(ConfigError::new(format!(
                "group {:?} is defined twice",
                twice.1.name
            )));
        }
        let long_keys = keys::long_keys(&raw)?;
        let evcache_keys = keys::evcache_keys(&raw)?;
        let groups = std::mem::take(&mut raw.groups)
            .into_iter()
            .map(|g| FileGroup::from_raw(g, &raw))
            .collect::<Result<_, _>>()?;
        let repair_journal = match raw.repair_journal.as_deref() {
            None => None,
            Some("off") => Some(RepairJournal::Off),
            Some("") => {
                return Err(ConfigError::new(
                    "repair_journal: give a directory, or \"off\"",
                ));
            }
            Some(dir) => Some(RepairJournal::Dir(PathBuf::from(dir))),
        };
        let proxy_listen = raw
            .proxy
            .unwrap_or_default()
            .listen
            .iter()
            .map(|a| {
                a.parse().map_err(|_| {
                    ConfigError::new(format!(
                        "[proxy] listen: {a:?} is not host:port (an IP address and a port)"
                    ))
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(ClusterFile {
            long_keys,
            evcache_keys,
            repair_journal,
            proxy_listen,
            read_repair: raw.read_repair,
            discover: raw.discover,
            discover_every: raw.discover_every_s.map(Duration::from_secs),
            overrides: SpecOverrides {
                hash: named("hash", raw.hash)?,
                node_naming: named("node_naming", raw.node_naming)?,
                sanitize_keys: raw.sanitize,
                pool_size,
                key_prefix: raw.key_prefix,
            },
            zone: raw.zone,
            arbiter: raw.arbiter,
            arbiter_failover: raw.arbiter_failover,
            timeout: raw.timeout_ms.map(Duration::from_millis),
            connect_timeout: raw.connect_timeout_ms.map(Duration::from_millis),
            read_fallback: named("read_fallback", raw.read_fallback)?,
            write_policy: named("write_policy", raw.write_policy)?,
            value_format: named("value_format", raw.value_format)?,
            failover: raw.failover,
            limits: Limits {
                max_value_size: raw.max_value_size,
                max_reply_size: raw.max_reply_size,
                max_in_flight: raw.max_in_flight,
            },
            username: raw.username,
            password_file: raw.password_file,
            tls: checked_tls(raw.tls)?,
            migrate_from: raw.migrate_from,
            meta_protocol: named("meta_protocol", raw.meta_protocol)?,
            groups,
        })
    }

    /// Reads and parses the file at `path`; errors name the file.
    pub fn read(path: impl AsRef<Path>) -> Result<ClusterFile, ConfigError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError::new(format!("cannot read {}: {e}", path.display())))?;
        ClusterFile::parse(&text).map_err(|e| ConfigError::new(format!("{}: {e}", path.display())))
    }

    /// Applies the file-wide settings to `spec` (servers given elsewhere,
    /// such as on a command line): hashing, node naming, key sanitizing,
    /// pool size, key prefix, zone, read fallback, write policy and
    /// failover, each only where the file gives it.
    #[must_use]
    pub fn apply_file_wide(&self, spec: ClusterSpec) -> ClusterSpec {
        let mut spec = spec.with_overrides(&self.overrides);
        let settings = &mut spec.settings;
        if let Some(zone) = &self.zone {
            settings.local_zone = Some(zone.clone());
        }
        if let Some(f) = self.read_fallback {
            settings.read_fallback = f;
        }
        if let Some(p) = self.write_policy {
            settings.write_policy = p;
        }
        if let Some(f) = self.failover {
            settings.failover = Some(f);
        }
        if let Some(arbiter) = &self.arbiter {
            settings.arbiter = Some(arbiter.clone());
        }
        if let Some(on) = self.arbiter_failover {
            settings.arbiter_failover = on;
        }
        spec
    }

    /// The cluster the file's groups describe, with the file-wide settings
    /// and each group's own (which win); `None` when the file lists no group.
    #[must_use]
    pub fn spec(&self) -> Option<ClusterSpec> {
        if self.groups.is_empty() {
            return None;
        }
        let groups = self.groups.iter().map(|g| {
            let mut group = GroupSpec::new(g.name.clone(), g.servers.clone());
            group.zone = g.zone.clone();
            group.write_only = g.write_only;
            group
        });
        let mut spec = self.apply_file_wide(ClusterSpec::new(groups));
        for (group, g) in spec.groups.iter_mut().zip(&self.groups) {
            if let Some(h) = g.hash {
                group.locator.strategy = h;
            }
            if let Some(n) = g.node_naming {
                group.locator.node_naming = n;
            }
            if let Some(p) = g.pool_size {
                group.pool_size = p;
            }
        }
        Some(spec)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memgroup_hash::HashStrategy;

    #[test]
    fn a_full_file_parses_to_typed_settings_and_a_spec() {
        let file = ClusterFile::parse(
            r#"
            hash = "ketama"
            zone = "b"
            pool_size = 2
            timeout_ms = 250
            write_policy = "quorum"
            read_fallback = "all-copies"
            value_format = "python-memcached"
            failover = true
            [tls]
            ca = "/ca.pem"
            [[groups]]
            name = "sg1"
            zone = "a"
            servers = ["h1:11211", "h2:11211:5"]
            hash = "new-compat"
            pool_size = 3
            [[groups]]
            name = "sg2"
            zone = "b"
            write_only = true
            servers = ["h3:11211"]
            username = "warmer"
            password_file = "/pw"
            tls = { server_name = "cache" }
            "#,
        )
        .unwrap();
        assert_eq!(file.timeout, Some(Duration::from_millis(250)));
        assert!(matches!(
            file.value_format,
            Some(ValueFormat::PythonMemcached { .. })
        ));
        assert_eq!(file.groups[1].username.as_deref(), Some("warmer"));
        assert_eq!(
            file.groups[1].tls.as_ref().unwrap().server_name.as_deref(),
            Some("cache")
        );
        let spec = file.spec().unwrap();
        let (sg1, sg2) = (&spec.groups[0], &spec.groups[1]);
        assert_eq!(sg1.locator.strategy, HashStrategy::NewCompat);
        assert_eq!(sg2.locator.strategy, HashStrategy::Ketama);
        assert_eq!((sg1.pool_size, sg2.pool_size), (3, 2));
        assert_eq!(sg1.servers[1].weight, 5);
        assert!(sg2.write_only && !sg1.write_only);
        assert_eq!(spec.settings.local_zone.as_deref(), Some("b"));
        assert_eq!(spec.settings.write_policy, WritePolicy::Quorum);
        assert_eq!(spec.settings.read_fallback, ReadFallback::AllCopies);
        assert_eq!(spec.settings.failover, Some(true));
    }

    #[test]
    fn bad_files_are_refused_with_the_setting_named() {
        for (text, says) in [
            ("hash = \"sha1\"", "hash: "),
            ("bogus = 1", "unknown field `bogus`"),
            ("write_policy = \"most\"", "write_policy: "),
            ("[tls]\ncert = \"/c.pem\"", "needs both cert and key"),
            ("[tls]\nserver_name = \"\"", "server name is empty"),
            (
                "[[groups]]\nname = \"g\"\nservers = []",
                "group \"g\": no servers",
            ),
            (
                "[[groups]]\nname = \"g\"\nservers = [\"h:99999\"]",
                "group \"g\": ",
            ),
            (
                "[[groups]]\nname = \"g\"\nservers = [\"h:1\"]\npassword_file = \"/p\"",
                "password_file without username",
            ),
            (
                "[[groups]]\nname = \"g\"\nservers = [\"h:1\"]\nnode_naming = \"x\"",
                "group \"g\": node_naming: ",
            ),
            ("hash = ", "line 1, column 8: not valid TOML"),
            (
                "zone = \"a\"\nbogus = 1",
                "line 2, column 1: unknown field `bogus`",
            ),
            ("zone = 5", "invalid type: integer"),
        ] {
            let e = ClusterFile::parse(text).unwrap_err();
            assert!(e.message().contains(says), "{text:?}: {e}");
        }
    }

    #[test]
    fn a_file_without_groups_has_no_spec_but_applies_file_wide() {
        let file = ClusterFile::parse(
            "hash = \"native\"\nsanitize = true\npool_size = 4\nzone = \"z\"\nfailover = false",
        )
        .unwrap();
        assert!(file.spec().is_none());
        let spec = file.apply_file_wide(ClusterSpec::parse_server_list("h:1,h:2").unwrap());
        assert_eq!(spec.groups[0].locator.strategy, HashStrategy::Native);
        assert!(spec.groups[0].locator.sanitize_keys);
        assert_eq!(spec.groups[0].pool_size, 4);
        assert_eq!(spec.settings.local_zone.as_deref(), Some("z"));
        assert_eq!(spec.settings.failover, Some(false));
    }

    #[test]
    fn long_keys_are_off_unless_turned_on_and_their_settings_are_checked() {
        assert!(ClusterFile::parse("").unwrap().long_keys.is_none());
        assert!(
            ClusterFile::parse("long_keys = false")
                .unwrap()
                .long_keys
                .is_none()
        );
        let on = ClusterFile::parse("long_keys = true").unwrap().long_keys;
        assert_eq!(on.unwrap().to_string(), "keys over 250 bytes as mglk:<md5>");
        let tuned = ClusterFile::parse(
            "long_keys = true\nlong_keys_max_len = 200\nlong_keys_prefix = \"lk:\"",
        )
        .unwrap()
        .long_keys;
        assert_eq!(
            tuned.unwrap().to_string(),
            "keys over 200 bytes as lk:<md5>"
        );
        for (text, says) in [
            ("long_keys_prefix = \"lk:\"", "need long_keys = true"),
            (
                "long_keys = false\nlong_keys_max_len = 9",
                "need long_keys = true",
            ),
            ("long_keys = true\nlong_keys_max_len = 0", "give 1 to 250"),
            ("long_keys = true\nlong_keys_max_len = 251", "give 1 to 250"),
            (
                "long_keys = true\nlong_keys_prefix = \"a b\"",
                "not a key part",
            ),
            (
                "long_keys = true\nlong_keys_prefix = \"\"",
                "not a key part",
            ),
        ] {
            let e = ClusterFile::parse(text).unwrap_err();
            assert!(e.message().contains(says), "{text:?}: {e}");
        }
    }

    #[test]
    fn read_names_the_file() {
        let e = ClusterFile::read("/nonexistent/cluster.toml").unwrap_err();
        assert!(
            e.message()
                .starts_with("cannot read /nonexistent/cluster.toml")
        );
    }
}
