//! [`ClientBuilder`]: the cluster description, cluster-wide overrides and the
//! client's own settings, validated into a [`Client`].

use std::sync::Arc;
use std::time::Duration;

use memgroup_hash::{HashStrategy, NodeNaming};
use memgroup_topology::{
    ClusterSpec, GroupSpec, ReadFallback, Settings, SpecOverrides, Topology, WritePolicy,
};

use crate::auth::Credentials;
use crate::client::{Client, Parts};
use crate::conn::ConnSettings;
use crate::error::{Error, ErrorKind};
use crate::events::{Event, Events, Observe};
use crate::longkey::LongKeys;
use crate::migrate::Migration;
use crate::pool::GroupSecurity;
use crate::value::{Codec, DEFAULT_MAX_DECOMPRESSED, ValueFormat};

/// Configures and builds a [`Client`].
///
/// ```no_run
/// # async fn demo() -> Result<(), memgroup_client::Error> {
/// use std::time::Duration;
/// use memgroup_client::Client;
/// use memgroup_hash::HashStrategy;
///
/// let client = Client::builder()
///     .evcache_groups("us-east-1a=10.0.0.1:11211,10.0.0.2:11211;us-east-1b=10.0.1.1:11211,10.0.1.2:11211")?
///     .zone("us-east-1a")
///     .hash(HashStrategy::Ketama)
///     .pool_size(4)
///     .timeout(Duration::from_millis(200))
///     .build()?;
/// client.set("user:42", "Ada", 300).await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct ClientBuilder {
    spec: ClusterSpec,
    overrides: SpecOverrides,
    op_timeout: Duration,
    conn: ConnSettings,
    max_value_size: usize,
    values: Codec,
    #[cfg(feature = "tls")]
    tls: Option<crate::TlsConfig>,
    /// Per group: its own TLS and credentials.
    groups: Vec<GroupOverride>,
    observe: Observe,
    /// The old cluster, in migration mode.
    migrate_from: Option<ClusterSpec>,
    long_keys: Option<LongKeys>,
}

/// A group's own TLS and credentials, as given to the builder.
#[derive(Debug, Clone, Default)]
struct GroupOverride {
    group: String,
    #[cfg(feature = "tls")]
    tls: Option<crate::TlsConfig>,
    credentials: Option<Arc<Credentials>>,
}

impl Default for ClientBuilder {
    fn default() -> Self {
        ClientBuilder {
            spec: ClusterSpec::default(),
            overrides: SpecOverrides::default(),
            op_timeout: Duration::from_millis(500),
            conn: ConnSettings::default(),
            max_value_size: 1024 * 1024,
            values: Codec {
                format: ValueFormat::Raw,
                max_decompressed: DEFAULT_MAX_DECOMPRESSED,
            },
            #[cfg(feature = "tls")]
            tls: None,
            groups: Vec::new(),
            observe: Observe::default(),
            migrate_from: None,
            long_keys: None,
        }
    }
}

impl ClientBuilder {
    /// Adds a server group.
    pub fn group(mut self, group: GroupSpec) -> Self {
        self.spec.groups.push(group);
        self
    }

    /// Adds the groups and settings of a parsed cluster description.
    pub fn cluster(mut self, spec: ClusterSpec) -> Self {
        self.spec.groups.extend(spec.groups);
        self.spec.settings = spec.settings;
        self
    }

    /// Adds one group from a libmemcached-style list, `host:port[:weight],…`.
    pub fn servers(self, list: &str) -> Result<Self, Error> {
        Ok(self.cluster_groups(ClusterSpec::parse_server_list(list)?))
    }

    /// Adds groups from EVCache's node list, `sg1=host:port,…;sg2=…`.
    pub fn evcache_groups(self, list: &str) -> Result<Self, Error> {
        Ok(self.cluster_groups(ClusterSpec::parse_evcache(list)?))
    }

    fn cluster_groups(mut self, spec: ClusterSpec) -> Self {
        self.spec.groups.extend(spec.groups);
        self
    }

    fn settings(mut self, change: impl FnOnce(Settings) -> Settings) -> Self {
        self.spec.settings = change(std::mem::take(&mut self.spec.settings));
        self
    }

    /// The caller's zone: reads prefer groups in it.
    pub fn zone(self, zone: impl Into<String>) -> Self {
        self.settings(|s| s.with_local_zone(zone))
    }

    /// Where reads go after a miss or an error in the first group.
    pub fn read_fallback(self, fallback: ReadFallback) -> Self {
        self.settings(|s| s.with_read_fallback(fallback))
    }

    /// How many read-write groups a write must reach to succeed.
    pub fn write_policy(self, policy: WritePolicy) -> Self {
        self.settings(|s| s.with_write_policy(policy))
    }

    /// Whalin-style failover to the next live server of a group when the
    /// key's server is dead (default: on for one group, off for several).
    pub fn failover(self, on: bool) -> Self {
        self.settings(|s| s.with_failover(on))
    }

    /// First dead-host backoff (doubles per consecutive failure).
    pub fn backoff(self, initial: Duration, max: Duration) -> Self {
        self.settings(|s| s.with_backoff(initial, max))
    }

    /// The hashing strategy of every group (see [`ClusterSpec::with_hash`];
    /// the groups' other locator settings are kept).
    pub fn hash(mut self, strategy: HashStrategy) -> Self {
        self.overrides.hash = Some(strategy);
        self
    }

    /// The ketama node-naming policy of every group.
    pub fn node_naming(mut self, naming: NodeNaming) -> Self {
        self.overrides.node_naming = Some(naming);
        self
    }

    /// Whalin-style key sanitizing (URL-encoding), applied to routing and to
    /// the key sent on the wire, so keys match a default Java client's.
    pub fn sanitize_keys(mut self, on: bool) -> Self {
        self.overrides.sanitize_keys = Some(on);
        self
    }

    /// Connections per server in every group (EVCache's poolSize).
    pub fn pool_size(mut self, size: usize) -> Self {
        self.overrides.pool_size = Some(size);
        self
    }

    /// Per-operation timeout (default 500 ms); see also [`Client::with_timeout`].
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.op_timeout = timeout;
        self
    }

    /// Connect timeout (default 1 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.conn.connect_timeout = timeout;
        self
    }

    /// `TCP_NODELAY` (default on).
    pub fn nodelay(mut self, on: bool) -> Self {
        self.conn.nodelay = on;
        self
    }

    /// Requests in flight per connection before callers wait (default 1024).
    pub fn max_in_flight(mut self, n: usize) -> Self {
        self.conn.max_in_flight = n.max(1);
        self
    }

    /// Writes per connection whose replies have not all arrived before new
    /// requests wait for one of them (default 4).
    ///
    /// A request sent while nothing else is on the wire goes out at once.
    /// Under load, requests queue while this many writes are answered and
    /// then go out together in one `write`: fewer, fuller writes cost the
    /// client and the server far fewer system calls and wake-ups per request
    /// (and let queued `get`s merge, see [`merge_gets`](Self::merge_gets)),
    /// at the price of waiting up to one of those replies. Higher values
    /// favour latency under load, lower ones throughput.
    pub fn max_unanswered_writes(mut self, n: usize) -> Self {
        self.conn.max_batches = n.max(1);
        self
    }

    /// Whether single-key `get`s (and `gets`) queued on one connection at the
    /// same time are sent as one multi-key command (default on), as
    /// spymemcached does. Each caller still gets exactly its own key's value
    /// or miss, and a key asked for by several callers is sent once. The
    /// server answers one command with one `write` instead of one per key,
    /// which is most of its cost for small values.
    pub fn merge_gets(mut self, on: bool) -> Self {
        self.conn.merge_gets = on;
        self
    }

    /// The most bytes one multi-item reply (a multi-key `get`'s values, a
    /// `stats` listing) may hold before the connection is closed with a
    /// protocol error (default 256 MiB): a server that keeps sending items
    /// without `END` cannot grow the client's memory without bound. Raise it
    /// for `get_multi` of many large values on one server.
    pub fn max_reply_size(mut self, bytes: usize) -> Self {
        self.conn.limits.max_reply = bytes;
        self
    }

    /// The largest value accepted for writing and reading (default 1 MiB,
    /// memcached's default item size limit; at most 1 GiB, memcached's
    /// largest possible item).
    pub fn max_value_size(mut self, bytes: usize) -> Self {
        let bytes = bytes.min(memgroup_proto::MAX_ITEM_SIZE);
        self.max_value_size = bytes;
        self.conn.limits.max_value = bytes;
        self
    }

    /// Log in with these on every new connection before it carries a
    /// request (memcached's ASCII authentication, `memcached -Y`). A refused
    /// login is an [`ErrorKind::Auth`] error naming the server; the server is
    /// backed off like a dead one, so it is not retried in a tight loop.
    pub fn credentials(mut self, credentials: Credentials) -> Self {
        self.conn.credentials = Some(Arc::new(credentials));
        self
    }

    /// Log in with these on the connections to `group`'s servers, instead of
    /// the cluster-wide [`ClientBuilder::credentials`].
    pub fn group_credentials(mut self, group: &str, credentials: Credentials) -> Self {
        self.group_override(group).credentials = Some(Arc::new(credentials));
        self
    }

    /// Connect over TLS (feature `tls`): every new connection runs a TLS
    /// handshake, verifying the server's certificate against `config`'s
    /// authorities, then logs in if credentials are set. Also used for the
    /// connections [`Client::metadump`] opens.
    #[cfg(feature = "tls")]
    pub fn tls(mut self, config: crate::TlsConfig) -> Self {
        self.tls = Some(config);
        self
    }

    /// Connect to `group`'s servers with this TLS configuration, instead of
    /// the cluster-wide [`ClientBuilder::tls`] (feature `tls`).
    #[cfg(feature = "tls")]
    pub fn group_tls(mut self, group: &str, config: crate::TlsConfig) -> Self {
        self.group_override(group).tls = Some(config);
        self
    }

    /// Calls `callback` on every [`Event`]: a server marked dead or up
    /// again, a write that missed its policy, the topology replaced. It runs
    /// on the task that noticed, outside the client's locks: keep it short.
    ///
    /// ```no_run
    /// use memgroup_client::{Client, Event};
    /// # fn demo() -> Result<(), memgroup_client::Error> {
    /// let client = Client::builder()
    ///     .servers("10.0.0.1:11211,10.0.0.2:11211")?
    ///     .on_event(|event| {
    ///         if let Event::ServerDown { server, .. } = event {
    ///             eprintln!("{server} is down");
    ///         }
    ///     })
    ///     .build()?;
    /// # Ok(()) }
    /// ```
    pub fn on_event(mut self, callback: impl Fn(&Event) + Send + Sync + 'static) -> Self {
        self.observe.events = Events::new(callback);
        self
    }

    /// Record each operation's key in its tracing span (feature `tracing`;
    /// default off: keys can be personal data).
    #[cfg(feature = "tracing")]
    pub fn trace_keys(mut self, on: bool) -> Self {
        self.observe.trace_keys = on;
        self
    }

    fn group_override(&mut self, group: &str) -> &mut GroupOverride {
        match self.groups.iter().position(|g| g.group == group) {
            Some(i) => &mut self.groups[i],
            None => {
                self.groups.push(GroupOverride {
                    group: group.to_string(),
                    ..GroupOverride::default()
                });
                self.groups.last_mut().expect("just pushed")
            }
        }
    }

    /// How typed reads and writes (`get_as`, `set_as`, `get_value`, …)
    /// encode values: the convention of the clients the fleet is shared with
    /// (default [`ValueFormat::Raw`]; see [`crate::value`]). Per call:
    /// [`Client::with_value_format`].
    pub fn value_format(mut self, format: ValueFormat) -> Self {
        self.values.format = format;
        self
    }

    /// The largest a compressed value may grow when decompressed (default
    /// 20 MiB, EVCache's maximum data size); beyond it a read fails with an
    /// [`ErrorKind::Corrupt`] error instead of allocating.
    pub fn max_decompressed_size(mut self, bytes: usize) -> Self {
        self.values.max_decompressed = bytes;
        self
    }

    /// The cluster description with the cluster-wide overrides applied.
    fn spec(&self) -> ClusterSpec {
        self.spec.clone().with_overrides(&self.overrides)
    }

    /// Migration mode (see [`crate::migrate`]): this builder describes the
    /// new layout, `old` the layout the cache was filled under. Reads miss
    /// over to the old placement and backfill the new one (with the
    /// remaining TTL); writes go to the new placement; deletes to both. The
    /// old cluster keeps its own hashing and groups (the builder's `hash`,
    /// `node_naming` and `sanitize_keys` overrides apply to the new one
    /// only); timeouts, TLS, credentials (and a group's own, for groups of
    /// the same name) are shared.
    pub fn migrate_from(mut self, old: ClusterSpec) -> Self {
        self.migrate_from = Some(old);
        self
    }

    /// Store keys longer than the limit (memcached's 250 bytes by default)
    /// under a digest key, the value in an envelope holding the key, checked
    /// on every read ([`crate::longkey`]). Off by default; cluster-wide.
    pub fn long_keys(mut self, long_keys: LongKeys) -> Self {
        self.long_keys = Some(long_keys);
        self
    }

    /// The client of the old cluster, in migration mode.
    fn old_client(&self, old: ClusterSpec) -> Result<Client, Error> {
        let mut builder = self.clone();
        builder.spec = old;
        // The old layout keeps its own hashing; only the pool size carries over.
        builder.overrides = SpecOverrides {
            pool_size: self.overrides.pool_size,
            ..SpecOverrides::default()
        };
        builder.migrate_from = None;
        builder
            .groups
            .retain(|g| builder.spec.groups.iter().any(|s| s.name == g.group));
        builder.build()
    }

    /// Builds the client. Connections open lazily, on first use.
    pub fn build(mut self) -> Result<Client, Error> {
        if self.spec.groups.is_empty() {
            return Err(Error::new(ErrorKind::Config, "no server groups configured"));
        }
        let migration = match self.migrate_from.take() {
            Some(old) => Some(Migration::new(self.old_client(old)?)),
            None => None,
        };
        let topology = Topology::new(self.spec())?;
        #[allow(unused_mut)]
        let mut conn = self.conn;
        #[cfg(feature = "tls")]
        if let Some(tls) = &self.tls {
            conn.tls = Some(tls.connector()?);
        }
        let mut groups = Vec::with_capacity(self.groups.len());
        for own in self.groups {
            if topology.group_by_name(&own.group).is_none() {
                return Err(Error::new(
                    ErrorKind::Config,
                    format!(
                        "TLS or credentials given for group {:?}, which the cluster does not have",
                        own.group
                    ),
                ));
            }
            groups.push(GroupSecurity {
                #[cfg(feature = "tls")]
                tls: own
                    .tls
                    .as_ref()
                    .map(crate::TlsConfig::connector)
                    .transpose()?,
                credentials: own.credentials,
                group: own.group,
            });
        }
        Ok(Client::new(Parts {
            topology,
            conn,
            groups,
            observe: self.observe,
            max_value_size: self.max_value_size,
            timeout: self.op_timeout,
            values: self.values,
            migration,
            long_keys: self.long_keys,
        }))
    }

    /// Builds the client and opens every connection now, failing if no
    /// server at all can be reached.
    pub async fn connect(self) -> Result<Client, Error> {
        let client = self.build()?;
        client.connect_all().await?;
        Ok(client)
    }
}

impl Client {
    /// A builder.
    pub fn builder() -> ClientBuilder {
        ClientBuilder::default()
    }

    /// Connects to a cluster described by a `memcache://` URL or a plain
    /// `host:port[:weight],…` list (one group), opening connections eagerly.
    ///
    /// A URL may carry credentials, percent-encoded, the client's value
    /// format and TLS (see [`ClientUrl`]) besides the cluster parameters of
    /// [`ClusterSpec::parse_url`]:
    /// `memcache://user:p%40ss@10.0.0.1:11211,10.0.0.2:11211?hash=ketama&value_format=evcache&tls_ca=/etc/ca.pem`.
    pub async fn connect(url_or_servers: &str) -> Result<Client, Error> {
        let mut builder = Client::builder();
        let spec = if url_or_servers.starts_with("memcache://") {
            let url = ClientUrl::parse(url_or_servers)?;
            if let Some(credentials) = url.credentials {
                builder = builder.credentials(credentials);
            }
            if let Some(format) = url.value_format {
                builder = builder.value_format(format);
            }
            #[cfg(feature = "tls")]
            if let Some(tls) = url.tls {
                builder = builder.tls(tls);
            }
            url.spec
        } else {
            ClusterSpec::parse_server_list(url_or_servers)?
        };
        builder.cluster(spec).connect().await
    }
}

/// A `memcache://` URL taken apart: the cluster (see
/// [`ClusterSpec::parse_url`]) and the client's own settings it may carry,
/// `user:password@` (percent-encoded), `value_format=`, and TLS: `tls=true`
/// (trusting the platform's roots), `tls_ca=PATH` (trusting that PEM
/// bundle; implies `tls=true`) and `tls_server_name=NAME`. Values are
/// percent-decoded.
///
/// ```
/// use memgroup_client::ClientUrl;
/// let url = ClientUrl::parse("memcache://app:p%40ss@h1:11211,h2:11211?hash=ketama&value_format=evcache")?;
/// assert_eq!(url.spec.groups[0].servers.len(), 2);
/// assert_eq!(url.credentials.unwrap().username(), "app");
/// assert_eq!(url.value_format.unwrap().name(), "evcache");
/// # Ok::<(), memgroup_client::Error>(())
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ClientUrl {
    /// The cluster.
    pub spec: ClusterSpec,
    /// The login, when the URL has `user:password@`.
    pub credentials: Option<Credentials>,
    /// The value format, when the URL has `value_format=`.
    pub value_format: Option<ValueFormat>,
    /// TLS, when the URL has `tls=true` (the platform's roots), `tls_ca=PATH`
    /// (that CA bundle) or `tls_server_name=NAME` (feature `tls`).
    #[cfg(feature = "tls")]
    pub tls: Option<crate::TlsConfig>,
}

impl ClientUrl {
    /// Parses a `memcache://` URL.
    pub fn parse(url: &str) -> Result<ClientUrl, Error> {
        let rest = url.strip_prefix("memcache://").ok_or_else(|| {
            Error::new(ErrorKind::Config, format!("not a memcache:// URL: {url:?}"))
        })?;
        let (credentials, rest) = url_credentials(rest)?;
        let (params, rest) = url_client_params(rest)?;
        let value_format = params
            .iter()
            .find(|(name, _)| *name == "value_format")
            .map(|(_, v)| v.parse())
            .transpose()?;
        #[cfg_attr(not(feature = "tls"), allow(unused_variables))]
        let tls = url_tls(&params)?;
        Ok(ClientUrl {
            spec: ClusterSpec::parse_url(&format!("memcache://{rest}"))?,
            credentials,
            value_format,
            #[cfg(feature = "tls")]
            tls,
        })
    }
}

/// The client's own parameters of a URL's query (the rest are the
/// cluster's, for the topology's URL parser).
const CLIENT_PARAMS: [&str; 4] = ["value_format", "tls", "tls_ca", "tls_server_name"];

/// One of [`CLIENT_PARAMS`] and its percent-decoded value.
type UrlParam = (&'static str, String);

/// Takes the client's parameters ([`CLIENT_PARAMS`]) out of a URL's query:
/// returns them by name and the URL without them.
fn url_client_params(rest: &str) -> Result<(Vec<UrlParam>, String), Error> {
    let Some((authority, query)) = rest.split_once('?') else {
        return Ok((Vec::new(), rest.to_string()));
    };
    let mut taken: Vec<UrlParam> = Vec::new();
    let mut kept = Vec::new();
    for param in query.split('&') {
        let (name, value) = param.split_once('=').unwrap_or((param, ""));
        let Some(&name) = CLIENT_PARAMS.iter().find(|&&p| p == name) else {
            kept.push(param);
            continue;
        };
        if taken.iter().any(|(n, _)| *n == name) {
            return Err(Error::new(
                ErrorKind::Config,
                format!("URL parameter {name} is given twice"),
            ));
        }
        let value = percent_decode(value).ok_or_else(|| {
            Error::new(
                ErrorKind::Config,
                format!("bad %-escape in URL parameter {name}"),
            )
        })?;
        taken.push((name, value));
    }
    let rest = if kept.is_empty() {
        authority.to_string()
    } else {
        format!("{authority}?{}", kept.join("&"))
    };
    Ok((taken, rest))
}

/// The TLS settings a URL's `tls`, `tls_ca` and `tls_server_name` ask for:
/// `tls=true` alone trusts the platform's roots; `tls_ca=PATH` (which
/// implies `tls=true`) trusts that bundle.
fn url_tls(params: &[UrlParam]) -> Result<Option<UrlTls>, Error> {
    let get = |name: &str| params.iter().find(|(n, _)| *n == name).map(|(_, v)| v);
    let on = match get("tls").map(String::as_str) {
        None => get("tls_ca").is_some() || get("tls_server_name").is_some(),
        Some("true" | "1" | "yes") => true,
        Some("false" | "0" | "no") => false,
        Some(other) => {
            return Err(Error::new(
                ErrorKind::Config,
                format!("URL parameter tls={other:?}: expected true or false"),
            ));
        }
    };
    if !on {
        return Ok(None);
    }
    #[cfg(feature = "tls")]
    {
        let config = match get("tls_ca") {
            Some(path) => crate::TlsConfig::ca_file(path)?,
            None => crate::TlsConfig::platform_roots()?,
        };
        Ok(Some(match get("tls_server_name") {
            Some(name) => config.server_name(name),
            None => config,
        }))
    }
    #[cfg(not(feature = "tls"))]
    Err(Error::new(
        ErrorKind::Config,
        "the URL asks for TLS, but memgroup-client was built without its feature \"tls\"",
    ))
}

/// What a URL's TLS parameters give: a configuration (feature `tls`).
#[cfg(feature = "tls")]
type UrlTls = crate::TlsConfig;
#[cfg(not(feature = "tls"))]
type UrlTls = std::convert::Infallible;

/// Splits `user:password@` off a URL's authority (after `memcache://`).
fn url_credentials(rest: &str) -> Result<(Option<Credentials>, &str), Error> {
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let Some(at) = rest[..authority_end].rfind('@') else {
        return Ok((None, rest));
    };
    let bad = || {
        Error::new(
            ErrorKind::Config,
            "bad credentials in the URL (user:password@…)",
        )
    };
    let (user, password) = rest[..at].split_once(':').ok_or_else(bad)?;
    let user = percent_decode(user).ok_or_else(bad)?;
    let password = percent_decode(password).ok_or_else(bad)?;
    Ok((Some(Credentials::new(user, password)?), &rest[at + 1..]))
}

/// `%XX` escapes to bytes, which must then be UTF-8.
fn percent_decode(text: &str) -> Option<String> {
    String::from_utf8(memgroup_proto::percent_decode(text.as_bytes())?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_credentials_are_split_and_percent_decoded() {
        let (c, rest) = url_credentials("al%2Dice:p%40ss:w@h:1,h:2?hash=ketama").unwrap();
        let c = c.unwrap();
        assert_eq!(rest, "h:1,h:2?hash=ketama");
        assert_eq!(c, Credentials::new("al-ice", "p@ss:w").unwrap());
        assert!(
            url_credentials("a%20b:pw@h:1").is_err(),
            "no space in a user name"
        );
        assert!(
            !format!("{c:?}").contains("p@ss"),
            "the password never shows"
        );
        assert_eq!(url_credentials("h:1?x=a@b").unwrap().0, None);
        assert!(url_credentials("nouser@h:1").is_err());
        assert!(url_credentials("u:%zz@h:1").is_err());
    }

    #[test]
    fn url_client_params_are_taken_out_of_the_query() {
        let (params, rest) =
            url_client_params("h:1?hash=ketama&value_format=evcache&pool_size=2&tls=true").unwrap();
        assert_eq!(
            params,
            vec![("value_format", "evcache".into()), ("tls", "true".into())]
        );
        assert_eq!(rest, "h:1?hash=ketama&pool_size=2");
        let url = ClientUrl::parse("memcache://h:1?value_format=raw").unwrap();
        assert_eq!(url.value_format, Some(ValueFormat::Raw));
        assert_eq!(url_client_params("h:1").unwrap(), (vec![], "h:1".into()));
        assert!(ClientUrl::parse("memcache://h:1?value_format=json").is_err());
        assert!(url_client_params("h:1?tls=true&tls=false").is_err());
        let (params, _) = url_client_params("h:1?tls_ca=%2Fetc%2Fca.pem").unwrap();
        assert_eq!(params, vec![("tls_ca", "/etc/ca.pem".into())]);
    }

    #[test]
    fn url_tls_parameters() {
        let on = |query: &str| {
            let (params, _) = url_client_params(query).unwrap();
            url_tls(&params).map(|t| t.is_some())
        };
        assert!(!on("h:1").unwrap());
        assert!(!on("h:1?tls=false").unwrap());
        assert!(on("h:1?tls=maybe").is_err());
        // A CA bundle that does not exist is a configuration error, named;
        // without the feature, asking for TLS is one.
        let error = on("h:1?tls_ca=/nonexistent/ca.pem").unwrap_err();
        let expected = if cfg!(feature = "tls") {
            "/nonexistent/ca.pem"
        } else {
            "feature \"tls\""
        };
        assert!(error.to_string().contains(expected), "{error}");
    }
}
