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
use memgroup::client::Client;
use memgroup::hash::{HashStrategy, NodeNaming};
use memgroup::topology::{ClusterSpec, GroupSpec, ReadFallback, WritePolicy};
use serde::Deserialize;

use crate::Failure;

/// Operation and connect timeouts.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timeouts {
    pub(crate) op: Duration,
    pub(crate) connect: Duration,
}

/// Where the cluster is and how to talk to it.
#[derive(Debug, Clone, Args)]
pub(crate) struct ClusterArgs {
    /// One group of servers: `host:port[:weight],…` (libmemcached form).
    #[arg(long, global = true, env = "MEMCACHED_SERVERS")]
    pub(crate) servers: Option<String>,
    /// Server groups, EVCache form: `sg1=host:port,…;sg2=…`.
    #[arg(long, global = true)]
    pub(crate) groups: Option<String>,
    /// A TOML file describing groups, zones, weights, hashing and timeouts.
    #[arg(long, global = true)]
    pub(crate) config: Option<PathBuf>,
    /// Hashing strategy: native, old-compat, new-compat, consistent, ketama, …
    #[arg(long, global = true)]
    pub(crate) hash: Option<String>,
    /// Ketama node naming: spymemcached, libmemcached, evcache.
    #[arg(long, global = true)]
    pub(crate) node_naming: Option<String>,
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
    /// Read fallback: never, one-more, all-copies.
    #[arg(long, global = true)]
    pub(crate) read_fallback: Option<String>,
    /// Write policy: none, one, quorum, all-minus-one, all.
    #[arg(long, global = true)]
    pub(crate) write_policy: Option<String>,
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

pub(crate) fn parse_hash(name: &str) -> Result<HashStrategy, Failure> {
    name.parse().map_err(|_| {
        usage(format!(
            "unknown hashing strategy {name:?} (native, old-compat, new-compat, consistent, ketama)"
        ))
    })
}

fn parse_naming(name: &str) -> Result<NodeNaming, Failure> {
    name.parse().map_err(|_| {
        usage(format!(
            "unknown node naming {name:?} (spymemcached, libmemcached, evcache)"
        ))
    })
}

fn parse_fallback(name: &str) -> Result<ReadFallback, Failure> {
    name.parse().map_err(|_| {
        usage(format!(
            "unknown read fallback {name:?} (never, one-more, all-copies)"
        ))
    })
}

fn parse_policy(name: &str) -> Result<WritePolicy, Failure> {
    name.parse().map_err(|_| {
        usage(format!(
            "unknown write policy {name:?} (none, one, quorum, all-minus-one, all)"
        ))
    })
}

impl ClusterArgs {
    /// The cluster description: flags override the file's settings.
    pub(crate) fn spec(&self) -> Result<(ClusterSpec, Timeouts), Failure> {
        let file = match &self.config {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| usage(format!("cannot read {}: {e}", path.display())))?;
                toml::from_str::<FileConfig>(&text)
                    .map_err(|e| usage(format!("{}: {}", path.display(), e.message())))?
            }
            None => FileConfig::default(),
        };
        let mut spec = if let Some(groups) = &self.groups {
            ClusterSpec::parse_evcache(groups).map_err(|e| usage(e.to_string()))?
        } else if let Some(servers) = &self.servers {
            ClusterSpec::parse_server_list(servers).map_err(|e| usage(e.to_string()))?
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
                if let Some(h) = &g.hash {
                    group.locator.strategy = parse_hash(h)?;
                }
                if let Some(n) = &g.node_naming {
                    group.locator = group.locator.with_node_naming(parse_naming(n)?);
                }
                if let Some(p) = g.pool_size {
                    group.pool_size = p;
                }
                groups.push(group);
            }
            ClusterSpec {
                groups,
                settings: Default::default(),
            }
        } else {
            return Err(usage(
                "no servers: give --servers, --groups, --config or MEMCACHED_SERVERS",
            ));
        };

        let hash = self
            .hash
            .as_deref()
            .or(file.hash.as_deref())
            .map(parse_hash)
            .transpose()?;
        let naming = self
            .node_naming
            .as_deref()
            .or(file.node_naming.as_deref())
            .map(parse_naming)
            .transpose()?;
        let sanitize = self.sanitize || file.sanitize.unwrap_or(false);
        let pool_size = self.pool_size.or(file.pool_size);
        let per_group_hash: Vec<bool> = file.groups.iter().map(|g| g.hash.is_some()).collect();
        for (i, group) in spec.groups.iter_mut().enumerate() {
            if let Some(h) = hash.filter(|_| !per_group_hash.get(i).copied().unwrap_or(false)) {
                group.locator.strategy = h;
            }
            if let Some(n) = naming {
                group.locator = group.locator.with_node_naming(n);
            }
            group.locator = group.locator.with_sanitize_keys(sanitize);
            if let Some(p) = pool_size {
                group.pool_size = p;
            }
        }
        let settings = &mut spec.settings;
        if let Some(zone) = self.zone.clone().or(file.zone) {
            settings.local_zone = Some(zone);
        }
        if let Some(f) = self
            .read_fallback
            .as_deref()
            .or(file.read_fallback.as_deref())
        {
            settings.read_fallback = parse_fallback(f)?;
        }
        if let Some(p) = self
            .write_policy
            .as_deref()
            .or(file.write_policy.as_deref())
        {
            settings.write_policy = parse_policy(p)?;
        }
        if let Some(f) = file.failover {
            settings.failover = Some(f);
        }
        let timeouts = Timeouts {
            op: Duration::from_millis(self.timeout_ms.or(file.timeout_ms).unwrap_or(500)),
            connect: Duration::from_millis(file.connect_timeout_ms.unwrap_or(1000)),
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
        timeouts: Timeouts,
    ) -> Result<Client, Failure> {
        Client::builder()
            .cluster(spec)
            .timeout(timeouts.op)
            .connect_timeout(timeouts.connect)
            .build()
            .map_err(|e| usage(format!("{e}")))
    }
}
