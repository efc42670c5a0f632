//! Cluster discovery: a group's servers as a configuration endpoint lists
//! them (AWS ElastiCache Auto Discovery, Google Memorystore's discovery
//! endpoint), followed while the client runs.
//!
//! The endpoint is asked `config get cluster`; one that does not know the
//! command (`ERROR`, engines before 1.4.14) is read the item
//! `AmazonElastiCache:cluster` instead. The list's format and its parser
//! are [`memgroup_proto::ClusterConfig`]'s.
//!
//! - **First discovery** in [`ClientBuilder::connect`](crate::ClientBuilder::connect)
//!   ([`build`](crate::ClientBuilder::build) is synchronous and refuses a
//!   discovering cluster). An endpoint that cannot be asked at start is an
//!   error, unless the group has static servers configured: then those are
//!   used (and the failure is an [`Event::DiscoveryFailed`]).
//! - **Polling** every interval (60 s by default, as the AWS client). A
//!   list is applied only if its version is higher than the one applied,
//!   through [`Client::set_topology`]: connections to servers that stay
//!   are kept, a removed server's connections finish their requests, and
//!   routing follows the group's hash over the new list. A failed poll
//!   keeps the current list ([`Event::DiscoveryFailed`]); it never empties
//!   a group. A recreated cluster starts again at version 1: a lower
//!   version is accepted once [`LOWER_AGREEING`] polls in a row serve it.
//! - **Node names.** A node listed with its IP is the server `ip:port`
//!   (what the AWS cluster client, built on spymemcached, connects to, so
//!   ketama names it `ip:port-i` as it does); one without an IP is
//!   `host:port`, resolved at connect (the AWS client names such a node
//!   `host/ip:port`, which needs its DNS answer: not reproduced).
//! - **Precedence.** Discovery owns the servers of its groups: every
//!   version it applies replaces that group's servers in the topology
//!   current at the time, and leaves the other groups, the settings and
//!   weights of other groups as they are. A [`Client::set_topology`] or a
//!   watched file ([`Client::watch_file`]) may change them meanwhile; the
//!   next version discovered replaces that group's servers again.
//! - The endpoint connection uses the cluster's TLS and login.

use std::sync::{Arc, Weak};
use std::time::Duration;

use bytes::BytesMut;
use memgroup_proto::{ClusterConfig, Decoder, Key, LEGACY_CONFIG_KEY, Request, Response};
use memgroup_topology::{ClusterSpec, GroupSpec, ServerAddr, ServerSpec};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::client::{Client, Inner};
use crate::conn::{self, ConnSettings};
use crate::error::{Error, ErrorKind};
use crate::events::Event;

/// Polls in a row that must serve the same lower version before it is
/// accepted (a recreated cluster).
pub const LOWER_AGREEING: u32 = 3;

/// The default polling interval.
pub const DEFAULT_DISCOVER_EVERY: Duration = Duration::from_secs(60);

/// What the builder was told to discover.
#[derive(Debug, Clone)]
pub(crate) struct Discovery {
    /// `(group, endpoint)` pairs.
    pub(crate) groups: Vec<(String, String)>,
    pub(crate) every: Duration,
}

impl Default for Discovery {
    fn default() -> Self {
        Discovery {
            groups: Vec::new(),
            every: DEFAULT_DISCOVER_EVERY,
        }
    }
}

/// One group's followed list.
#[derive(Debug)]
struct Followed {
    group: String,
    endpoint: String,
    version: u64,
    /// A lower version seen, and in how many polls in a row.
    lower: Option<(u64, u32)>,
}

/// Asks `endpoint` for its cluster list.
pub(crate) async fn fetch(
    endpoint: &str,
    settings: &ConnSettings,
    timeout: Duration,
) -> Result<ClusterConfig, Error> {
    let exchange = async {
        let mut stream = conn::open(endpoint, settings).await?;
        // The default limits: the user's value size bound is for their
        // values, not for the cluster list.
        let mut decoder = Decoder::default();
        let mut buf = BytesMut::with_capacity(4096);
        let cluster = Key::new(b"cluster").expect("a valid key");
        let data = match call(
            &mut stream,
            &mut decoder,
            &mut buf,
            &Request::ConfigGet { key: cluster },
        )
        .await?
        {
            Response::Values(mut v) if v.len() == 1 => v.pop().expect("one item").data,
            Response::Error => {
                // No `config get`: the legacy item.
                let keys = [Key::new(LEGACY_CONFIG_KEY).expect("a valid key")];
                match call(
                    &mut stream,
                    &mut decoder,
                    &mut buf,
                    &Request::Get { keys: &keys },
                )
                .await?
                {
                    Response::Values(mut v) if v.len() == 1 => v.pop().expect("one item").data,
                    Response::Values(_) => {
                        return Err(Error::new(
                            ErrorKind::Config,
                            "the endpoint serves no cluster list (no config get, no AmazonElastiCache:cluster item)",
                        ));
                    }
                    other => return Err(crate::client::unexpected(Some(&other))),
                }
            }
            other => return Err(crate::client::unexpected(Some(&other))),
        };
        ClusterConfig::parse(&data)
            .map_err(|e| Error::new(ErrorKind::Protocol, "bad cluster list").with_source(e))
    };
    match tokio::time::timeout(timeout, exchange).await {
        Ok(result) => result.map_err(|e| e.at(endpoint)),
        Err(_) => Err(Error::new(
            ErrorKind::Timeout,
            format!("discovery timed out after {timeout:?}"),
        )
        .at(endpoint)),
    }
}

/// How long one discovery exchange may take: the operation timeout, but at
/// least a second (a list of many nodes is one larger reply).
pub(crate) fn discovery_timeout(op_timeout: Duration) -> Duration {
    op_timeout.max(Duration::from_secs(1))
}

/// One request and its reply on a private connection.
async fn call(
    stream: &mut conn::Stream,
    decoder: &mut Decoder,
    buf: &mut BytesMut,
    request: &Request<'_>,
) -> Result<Response, Error> {
    let mut out = BytesMut::new();
    request.encode(&mut out);
    stream
        .write_all(&out)
        .await
        .map_err(|e| Error::new(ErrorKind::Connection, "write failed").with_source(e))?;
    let expect = request.expect().expect("a request with a reply");
    loop {
        if let Some(reply) = decoder
            .decode(buf, expect)
            .map_err(|e| Error::new(ErrorKind::Protocol, "bad reply").with_source(e))?
        {
            return Ok(reply);
        }
        buf.reserve(4096);
        let n = stream
            .read_buf(buf)
            .await
            .map_err(|e| Error::new(ErrorKind::Connection, "read failed").with_source(e))?;
        if n == 0 {
            return Err(Error::new(
                ErrorKind::Connection,
                "connection closed by the server",
            ));
        }
    }
}

/// `spec` with `group`'s servers replaced by `config`'s nodes. The group is
/// added (with default settings) if the spec has none of that name.
pub(crate) fn with_nodes(
    mut spec: ClusterSpec,
    group: &str,
    config: &ClusterConfig,
) -> Result<ClusterSpec, Error> {
    let mut servers = Vec::with_capacity(config.nodes.len());
    for node in &config.nodes {
        let addr: ServerAddr = node.address().parse()?;
        let mut server = ServerSpec::new(addr);
        if node.ip.is_some() {
            server = server.with_hostname(node.host.clone());
        }
        servers.push(server);
    }
    match spec.groups.iter_mut().find(|g| g.name == group) {
        Some(g) => g.servers = servers,
        None => spec.groups.push(GroupSpec::new(group, servers)),
    }
    Ok(spec)
}

impl Followed {
    /// What to do with a list of `version`: apply it or not (counting a
    /// lower version's agreeing polls).
    fn accepts(&mut self, version: u64) -> Result<bool, Error> {
        if version > self.version {
            self.lower = None;
            return Ok(true);
        }
        if version == self.version {
            self.lower = None;
            return Ok(false);
        }
        let seen = match self.lower {
            Some((v, n)) if v == version => n + 1,
            _ => 1,
        };
        self.lower = Some((version, seen));
        if seen >= LOWER_AGREEING {
            self.lower = None;
            return Ok(true);
        }
        Err(Error::new(
            ErrorKind::Config,
            format!(
                "the endpoint serves version {version}, below the applied {} ({seen} of {LOWER_AGREEING} polls in a row before it is taken as a recreated cluster)",
                self.version
            ),
        ))
    }
}

/// Starts following the lists of `discovery` (each group starting from the
/// version applied in `versions`) on a task that ends with the client: it
/// holds no strong reference to it between polls.
pub(crate) fn follow(
    client: &Client,
    discovery: Discovery,
    versions: Vec<u64>,
    settings: ConnSettings,
) {
    let weak: Weak<Inner> = Arc::downgrade(&client.inner);
    let (timeout, values) = (client.timeout, client.values);
    let mut followed: Vec<Followed> = discovery
        .groups
        .into_iter()
        .zip(versions)
        .map(|((group, endpoint), version)| Followed {
            group,
            endpoint,
            version,
            lower: None,
        })
        .collect();
    let every = discovery.every;
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(every).await;
            let Some(inner) = weak.upgrade() else { return };
            let client = Client {
                inner,
                timeout,
                values,
                raw_keys: false,
            };
            for f in &mut followed {
                poll(&client, &settings, f).await;
            }
        }
    });
}

/// One poll of one group's endpoint.
async fn poll(client: &Client, settings: &ConnSettings, f: &mut Followed) {
    let outcome = match fetch(&f.endpoint, settings, discovery_timeout(client.timeout())).await {
        Ok(config) => match f.accepts(config.version) {
            Ok(true) => with_nodes(
                ClusterSpec::clone(client.topology().spec()),
                &f.group,
                &config,
            )
            .and_then(|spec| client.set_topology(spec))
            .map(|()| {
                let previous = std::mem::replace(&mut f.version, config.version);
                client.inner.pool.events().emit(|| Event::Discovered {
                    group: f.group.clone(),
                    version: config.version,
                    previous,
                    servers: config.nodes.len(),
                });
            }),
            Ok(false) => Ok(()),
            Err(e) => Err(e),
        },
        Err(e) => Err(e),
    };
    if let Err(error) = outcome {
        client.inner.pool.events().emit(|| Event::DiscoveryFailed {
            group: f.group.clone(),
            endpoint: f.endpoint.clone(),
            error,
        });
    }
}
