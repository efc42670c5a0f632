//! A [`ClusterFile`] made into a client: [`ClusterFile::builder`] applies
//! every setting and reads the files the configuration names (passwords,
//! TLS PEMs, an old layout); the pieces it is made of ([`login`],
//! [`password`], [`old_layout`], [`TlsFiles::load`], [`FileGroup`]'s) serve
//! callers that layer settings of their own over the file, as the
//! `memgroup` tool does with its flags.

use std::path::Path;

use memgroup_client::{Client, ClientBuilder, ClientUrl, Credentials};
use memgroup_topology::ClusterSpec;

use super::{ClusterFile, ConfigError, FileGroup, TlsFiles};

/// The environment variable a password is read from when a login names no
/// password file.
pub const PASSWORD_ENV: &str = "MEMGROUP_PASSWORD";

impl ClusterFile {
    /// A client builder with every setting of the file applied: its groups
    /// (or, for a file without groups, the file-wide hashing, pool size,
    /// key prefix, zone and policies, for servers added to the builder
    /// afterwards),
    /// timeouts, value format, limits, logins and TLS (file-wide and each
    /// group's own), and migration mode. The files it names are read now:
    /// password files (else [`PASSWORD_ENV`]), TLS certificates and keys,
    /// and a `migrate_from` cluster file; relative paths are taken from the
    /// working directory, as the tool takes them.
    ///
    /// Calls made on the builder afterwards win over the file. A file that
    /// asks for TLS is refused unless the feature `tls` is on.
    ///
    /// ```no_run
    /// use memgroup::config::ClusterFile;
    ///
    /// # async fn demo() -> Result<(), memgroup::client::Error> {
    /// // A configuration error converts into the client's error.
    /// let client = ClusterFile::read("/etc/app/cluster.toml")?.builder()?.build()?;
    /// client.set("user:42", "Ada", 300).await?;
    /// # Ok(()) }
    /// ```
    pub fn builder(&self) -> Result<ClientBuilder, ConfigError> {
        let mut builder = match self.spec() {
            Some(spec) => Client::builder().cluster(spec),
            None => self.file_wide(Client::builder()),
        };
        if let Some(timeout) = self.timeout {
            builder = builder.timeout(timeout);
        }
        if let Some(timeout) = self.connect_timeout {
            builder = builder.connect_timeout(timeout);
        }
        if let Some(format) = self.value_format {
            builder = builder.value_format(format);
        }
        builder = self.limits.apply(builder);
        if let Some(super::RepairJournal::Dir(dir)) = &self.repair_journal {
            builder = builder.repair_journal(dir);
        }
        if let Some(on) = self.read_repair {
            builder = builder.read_repair(on);
        }
        if let Some(long_keys) = &self.long_keys {
            builder = builder.long_keys(long_keys.clone());
        }
        if let Some(keys) = self.evcache_keys {
            builder = builder.evcache_keys(keys);
        }
        if let Some(user) = &self.username {
            builder = builder.credentials(login(user, self.password_file.as_deref())?);
        }
        if let Some(tls) = &self.tls {
            builder = with_tls(builder, None, tls)?;
        }
        for group in &self.groups {
            if let Some(credentials) = group.credentials()? {
                builder = builder.group_credentials(&group.name, credentials);
            }
            if let Some(tls) = &group.tls {
                builder = with_tls(builder, Some(&group.name), tls)
                    .map_err(|e| group.error(e.message()))?;
            }
        }
        if let Some(old) = &self.migrate_from {
            let old = old_layout(old)
                .map_err(|e| ConfigError::new(format!("migrate_from {old:?}: {e}")))?;
            builder = builder.migrate_from(old);
        }
        Ok(self.discovery(builder))
    }

    /// The file's discovery endpoints on `builder` (a discovered cluster is
    /// built with `connect`).
    pub fn discovery(&self, mut builder: ClientBuilder) -> ClientBuilder {
        if let Some(endpoint) = &self.discover {
            builder = builder.discover(endpoint);
        }
        for group in &self.groups {
            if let Some(keys) = group.evcache_keys {
                builder = builder.group_evcache_keys(&group.name, keys);
            }
            if let Some(endpoint) = &group.discover {
                builder = builder.group_discover(&group.name, endpoint);
            }
        }
        if let Some(every) = self.discover_every {
            builder = builder.discover_every(every);
        }
        builder
    }

    /// The file-wide cluster settings as the builder's: they then apply to
    /// the servers added to it.
    fn file_wide(&self, mut builder: ClientBuilder) -> ClientBuilder {
        let overrides = &self.overrides;
        if let Some(hash) = overrides.hash {
            builder = builder.hash(hash);
        }
        if let Some(naming) = overrides.node_naming {
            builder = builder.node_naming(naming);
        }
        if let Some(on) = overrides.sanitize_keys {
            builder = builder.sanitize_keys(on);
        }
        if let Some(size) = overrides.pool_size {
            builder = builder.pool_size(size);
        }
        if let Some(prefix) = &overrides.key_prefix {
            builder = builder.key_prefix(prefix.clone());
        }
        if let Some(zone) = &self.zone {
            builder = builder.zone(zone.clone());
        }
        if let Some(fallback) = self.read_fallback {
            builder = builder.read_fallback(fallback);
        }
        if let Some(policy) = self.write_policy {
            builder = builder.write_policy(policy);
        }
        if let Some(on) = self.failover {
            builder = builder.failover(on);
        }
        builder
    }
}

impl FileGroup {
    /// The group's own login, its password read now (from `password_file`,
    /// else [`PASSWORD_ENV`]); `None` when the group has no `username`.
    pub fn credentials(&self) -> Result<Option<Credentials>, ConfigError> {
        self.username
            .as_ref()
            .map(|user| login(user, self.password_file.as_deref()))
            .transpose()
            .map_err(|e| self.error(e.message()))
    }

    /// The group's own TLS configuration, its PEM files read now; `None`
    /// when the group has no `tls` section (feature `tls`).
    #[cfg(feature = "tls")]
    pub fn tls_config(&self) -> Result<Option<memgroup_client::TlsConfig>, ConfigError> {
        self.tls
            .as_ref()
            .map(TlsFiles::load)
            .transpose()
            .map_err(|e| self.error(e.message()))
    }

    fn error(&self, message: &str) -> ConfigError {
        ConfigError::new(format!("group {:?}: {message}", self.name))
    }
}

/// `tls` on the builder, file-wide or for `group`.
#[cfg(feature = "tls")]
fn with_tls(
    builder: ClientBuilder,
    group: Option<&str>,
    files: &TlsFiles,
) -> Result<ClientBuilder, ConfigError> {
    let config = files.load()?;
    Ok(match group {
        Some(group) => builder.group_tls(group, config),
        None => builder.tls(config),
    })
}

/// Without the feature, a file asking for TLS is refused.
#[cfg(not(feature = "tls"))]
fn with_tls(_: ClientBuilder, _: Option<&str>, _: &TlsFiles) -> Result<ClientBuilder, ConfigError> {
    Err(ConfigError::new(
        "the file asks for TLS, but memgroup was built without its feature \"tls\"",
    ))
}

#[cfg(feature = "tls")]
impl TlsFiles {
    /// The TLS configuration these files describe, read now: the CA bundle
    /// (else the platform's roots), the client certificate and key, the
    /// server name (feature `tls`).
    pub fn load(&self) -> Result<memgroup_client::TlsConfig, ConfigError> {
        use memgroup_client::TlsConfig;
        self.check()?;
        let bad = |e: memgroup_client::Error| ConfigError::new(e.chain());
        let mut config = match &self.ca {
            Some(ca) => TlsConfig::ca_file(ca).map_err(bad)?,
            None => TlsConfig::platform_roots().map_err(bad)?,
        };
        if let (Some(cert), Some(key)) = (&self.cert, &self.key) {
            config = config.client_cert_files(cert, key).map_err(bad)?;
        }
        if let Some(name) = &self.server_name {
            config = config.server_name(name);
        }
        Ok(config)
    }
}

/// A login: `username` with the password read from `password_file`, else
/// from [`PASSWORD_ENV`] (see [`password`]).
pub fn login(username: &str, password_file: Option<&Path>) -> Result<Credentials, ConfigError> {
    Credentials::new(username, password(password_file)?).map_err(|e| ConfigError::new(e.chain()))
}

/// A password: the text of `file` (one trailing newline, as editors leave
/// it, ignored), else [`PASSWORD_ENV`].
pub fn password(file: Option<&Path>) -> Result<String, ConfigError> {
    let Some(path) = file else {
        return std::env::var(PASSWORD_ENV).map_err(|_| {
            ConfigError::new(format!(
                "a username needs a password: give password_file (--password-file) or set {PASSWORD_ENV}"
            ))
        });
    };
    let text = std::fs::read_to_string(path).map_err(|e| {
        ConfigError::new(format!(
            "cannot read the password file {}: {e}",
            path.display()
        ))
    })?;
    let text = text.strip_suffix('\n').unwrap_or(&text);
    Ok(text.strip_suffix('\r').unwrap_or(text).to_string())
}

/// The layout a cache was filled under, for migration mode (`migrate_from`,
/// the tool's `--migrate-from`) and for comparing layouts: the path of a
/// `cluster.toml` (its groups; one that is itself migrating is refused), a
/// `memcache://` URL (its cluster), EVCache groups (`sg1=host:port,…;sg2=…`)
/// or a server list.
pub fn old_layout(text: &str) -> Result<ClusterSpec, ConfigError> {
    let topology = |e: memgroup_topology::TopologyError| ConfigError::new(e.to_string());
    if Path::new(text).is_file() {
        let file = ClusterFile::read(text)?;
        if file.migrate_from.is_some() {
            return Err(ConfigError::new(
                "an old layout that is itself migrating: chains are not supported",
            ));
        }
        file.spec()
            .ok_or_else(|| ConfigError::new("the file lists no [[groups]]"))
    } else if text.starts_with("memcache://") {
        Ok(ClientUrl::parse(text)
            .map_err(|e| ConfigError::new(e.chain()))?
            .spec)
    } else if text.contains('=') {
        ClusterSpec::parse_evcache(text).map_err(topology)
    } else {
        ClusterSpec::parse_server_list(text).map_err(topology)
    }
}

/// `?` on a configuration error in a function returning the client's
/// error: an [`ErrorKind::Config`](memgroup_client::ErrorKind::Config)
/// error, the configuration error its cause.
impl From<ConfigError> for memgroup_client::Error {
    fn from(e: ConfigError) -> memgroup_client::Error {
        memgroup_client::Error::config("invalid cluster configuration", e)
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use memgroup_client::{Error, ErrorKind, HashStrategy, WritePolicy};

    use super::*;

    /// A file in a directory of this test's own, removed on drop.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new(tag: &str) -> Scratch {
            let dir =
                std::env::temp_dir().join(format!("memgroup-config-{tag}-{}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            Scratch(dir)
        }

        fn file(&self, name: &str, text: &str) -> String {
            let path = self.0.join(name);
            std::fs::write(&path, text).unwrap();
            path.display().to_string()
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// `?` turns a configuration error into the client's, kind `Config`,
    /// the message kept and the configuration error its source.
    #[test]
    fn a_configuration_error_converts_into_the_clients_error() {
        fn client(text: &str) -> Result<memgroup_client::Client, Error> {
            let file = ClusterFile::parse(text)?;
            file.builder()?.build()
        }
        let error = client("zone = \"a\"\nbogus = 1").unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Config);
        assert!(
            error.to_string().starts_with(
                "invalid cluster configuration: line 2, column 1: unknown field `bogus`"
            ),
            "{error}"
        );
        let source = std::error::Error::source(&error).expect("a cause");
        assert!(source.downcast_ref::<ConfigError>().is_some(), "{source:?}");
        // A file without groups gives a builder; building it says so.
        let error = client("zone = \"a\"").unwrap_err();
        assert!(error.to_string().contains("no server groups"), "{error}");
    }

    #[tokio::test]
    async fn the_builder_applies_every_setting_of_the_file() {
        let file = ClusterFile::parse(
            r#"
            hash = "native"
            zone = "b"
            pool_size = 2
            timeout_ms = 300
            write_policy = "all"
            value_format = "evcache"
            max_value_size = 100
            long_keys = true
            [[groups]]
            name = "sg1"
            zone = "a"
            servers = ["127.0.0.1:1"]
            hash = "new-compat"
            pool_size = 3
            [[groups]]
            name = "sg2"
            zone = "b"
            servers = ["127.0.0.1:2", "127.0.0.1:3"]
            "#,
        )
        .unwrap();
        let client = file.builder().unwrap().build().unwrap();
        assert_eq!(client.value_format().name(), "evcache");
        let topology = client.topology();
        let [sg1, sg2] = topology.groups() else {
            panic!("two groups")
        };
        assert_eq!((sg1.pool_size(), sg2.pool_size()), (3, 2));
        assert_eq!(sg1.spec().locator.strategy, HashStrategy::NewCompat);
        assert_eq!(sg2.spec().locator.strategy, HashStrategy::Native);
        assert_eq!(topology.settings().local_zone.as_deref(), Some("b"));
        assert_eq!(topology.settings().write_policy, WritePolicy::All);
        // The file's limit: refused before anything is sent (nothing listens).
        let error = client.set("k", vec![b'x'; 101], 0).await.unwrap_err();
        assert!(error.is_value_too_large(), "{error}");
        // Long keys on: a 300-byte key is a long key (an append on one is
        // refused as such), not an invalid one.
        let long = "k".repeat(300);
        let error = client.append(&long, "x").await.unwrap_err();
        assert!(error.to_string().contains("long key"), "{error}");
    }

    #[test]
    fn a_file_without_groups_sets_up_the_servers_added_later() {
        let file =
            ClusterFile::parse("hash = \"native\"\npool_size = 4\nwrite_policy = \"one\"").unwrap();
        let client = file
            .builder()
            .unwrap()
            .servers("h1:11211,h2:11211")
            .build()
            .unwrap();
        let topology = client.topology();
        let group = &topology.groups()[0];
        assert_eq!(group.pool_size(), 4);
        assert_eq!(group.spec().locator.strategy, HashStrategy::Native);
        assert_eq!(topology.settings().write_policy, WritePolicy::One);
    }

    #[test]
    fn logins_read_their_password_files() {
        let scratch = Scratch::new("login");
        let password = scratch.file("password", "s3cret\r\n");
        let file = ClusterFile::parse(&format!(
            "username = \"app\"\npassword_file = {password:?}\n\
             [[groups]]\nname = \"g\"\nservers = [\"h:1\"]\n\
             username = \"warmer\"\npassword_file = {password:?}"
        ))
        .unwrap();
        file.builder().unwrap().build().unwrap();
        let credentials = file.groups[0].credentials().unwrap().unwrap();
        assert_eq!(credentials, Credentials::new("warmer", "s3cret").unwrap());
        assert_eq!(password_of(&scratch, "one newline\n"), "one newline");
        assert_eq!(password_of(&scratch, "two\n\n"), "two\n");
        // A missing password file is named, in its group.
        let missing = ClusterFile::parse(
            "[[groups]]\nname = \"g\"\nservers = [\"h:1\"]\n\
             username = \"u\"\npassword_file = \"/nonexistent/pw\"",
        )
        .unwrap();
        let error = missing.builder().unwrap_err();
        assert!(
            error
                .message()
                .starts_with("group \"g\": cannot read the password file /nonexistent/pw"),
            "{error}"
        );
    }

    fn password_of(scratch: &Scratch, text: &str) -> String {
        password(Some(Path::new(&scratch.file("pw", text)))).unwrap()
    }

    #[test]
    fn migrate_from_reads_the_old_layout() {
        let scratch = Scratch::new("migrate");
        let old = scratch.file(
            "old.toml",
            "[[groups]]\nname = \"old\"\nservers = [\"h:1\", \"h:2\"]",
        );
        let file = |old: &str| {
            ClusterFile::parse(&format!(
                "migrate_from = {old:?}\n[[groups]]\nname = \"g\"\nservers = [\"h:3\"]"
            ))
            .unwrap()
        };
        for old in [old.as_str(), "h:1,h:2", "old=h:1,h:2", "memcache://h:1,h:2"] {
            let client = file(old).builder().unwrap().build().unwrap();
            assert!(client.health().migration.is_some(), "{old}");
        }
        let chained = scratch.file("chained.toml", &format!("migrate_from = {old:?}"));
        let error = file(&chained).builder().unwrap_err();
        assert!(
            error.message().contains("chains are not supported"),
            "{error}"
        );
        let error = file("h:99999").builder().unwrap_err();
        assert!(
            error.message().starts_with("migrate_from \"h:99999\": "),
            "{error}"
        );
    }

    #[test]
    fn tls_sections_are_loaded_or_refused_without_the_feature() {
        let file = ClusterFile::parse("[tls]\nca = \"/nonexistent/ca.pem\"").unwrap();
        let error = file.builder().unwrap_err();
        let expected = if cfg!(feature = "tls") {
            "/nonexistent/ca.pem"
        } else {
            "feature \"tls\""
        };
        assert!(error.message().contains(expected), "{error}");
    }

    #[test]
    fn max_in_flight_of_zero_is_refused() {
        let error = ClusterFile::parse("max_in_flight = 0").unwrap_err();
        assert!(error.message().starts_with("max_in_flight: 0"), "{error}");
        let file = ClusterFile::parse("max_in_flight = 8\nmax_reply_size = 4096").unwrap();
        assert_eq!(
            (file.limits.max_in_flight, file.limits.max_reply_size),
            (Some(8), Some(4096))
        );
    }
}
