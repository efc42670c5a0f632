//! The cluster flags as clap parses them, before anything is read or
//! checked: where the cluster is and how to talk to it. [`crate::cluster`]
//! resolves them into the cluster the commands use; the command line they
//! are part of is [`crate::Cli`].

use std::path::PathBuf;

use clap::Args;
use memgroup::client::value::ValueFormat;
use memgroup::hash::{HashStrategy, NodeNaming};
use memgroup::topology::{ReadFallback, WritePolicy};

/// Where the cluster is and how to talk to it.
#[derive(Debug, Clone, Default, Args)]
pub(crate) struct ClusterFlags {
    /// One group of servers: `host:port[:weight],…` (libmemcached form), or
    /// a `memcache://[user:password@]host:port,…?param=…` URL.
    /// (Or MEMCACHED_SERVERS; a flag beats the environment.)
    #[arg(long, global = true)]
    pub(crate) servers: Option<String>,
    /// Server groups, EVCache form: `sg1=host:port,…;sg2=…`.
    /// (Or MEMGROUP_GROUPS.)
    #[arg(long, global = true)]
    pub(crate) groups: Option<String>,
    /// One group found at a configuration endpoint (ElastiCache, Memorystore):
    /// `host:port`, asked `config get cluster` (or the legacy item
    /// `AmazonElastiCache:cluster`). Ranks as --servers.
    #[arg(long, global = true, hide_short_help = true, value_name = "HOST:PORT", value_parser = endpoint)]
    pub(crate) discover: Option<String>,
    /// A TOML file describing groups, zones, weights, hashing and timeouts.
    /// (Or MEMGROUP_CONFIG.) For the server list it ranks as a flag: with
    /// --servers or --groups too, that is two server sources (an error).
    #[arg(long, global = true)]
    pub(crate) config: Option<PathBuf>,
    /// Hashing strategy (default ketama).
    #[arg(long, global = true, value_parser = hash_strategy())]
    pub(crate) hash: Option<HashStrategy>,
    /// Ketama node naming: spymemcached, libmemcached, evcache (default
    /// spymemcached).
    #[arg(long, global = true, hide_short_help = true)]
    pub(crate) node_naming: Option<NodeNaming>,
    /// URL-encode keys like the Whalin Java client (routing and wire).
    #[arg(long, global = true, hide_short_help = true)]
    pub(crate) sanitize: bool,
    /// Put this in front of every key, as the services sharing the fleet do
    /// (EVCache's cache prefix `app` is `app:` here; Dalli's namespace too).
    #[arg(long, global = true, hide_short_help = true, value_name = "PREFIX")]
    pub(crate) key_prefix: Option<String>,
    /// The caller's zone: reads prefer its groups. With --groups a group's
    /// zone is its name; in cluster.toml it is the group's `zone` entry.
    #[arg(long, global = true)]
    pub(crate) zone: Option<String>,
    /// The group that decides conditional writes (add, replace, cas,
    /// append, prepend, incr, decr) for every client (default: the first
    /// read-write group by name).
    #[arg(long, global = true, hide_short_help = true)]
    pub(crate) arbiter: Option<String>,
    /// Connections per server (default 1).
    #[arg(long, global = true, hide_short_help = true, value_parser = pool_size)]
    pub(crate) pool_size: Option<usize>,
    /// Per-operation timeout in milliseconds (default 500).
    #[arg(long, global = true, value_parser = millis)]
    pub(crate) timeout_ms: Option<u64>,
    /// Connect timeout in milliseconds (default 1000).
    #[arg(long, global = true, hide_short_help = true, value_parser = millis)]
    pub(crate) connect_timeout_ms: Option<u64>,
    /// Turn Whalin-style failover within a group off (default: on for one
    /// group, off for several).
    #[arg(
        long,
        global = true,
        hide_short_help = true,
        conflicts_with = "failover"
    )]
    pub(crate) no_failover: bool,
    /// Turn failover within a group on.
    #[arg(long, global = true, hide_short_help = true)]
    pub(crate) failover: bool,
    /// First dead-host backoff in milliseconds (doubles per failure, up to 10 minutes).
    #[arg(long, global = true, hide_short_help = true)]
    pub(crate) backoff_ms: Option<u64>,
    /// The largest value read or written, in bytes (default 1 MiB).
    #[arg(long, global = true, hide_short_help = true)]
    pub(crate) max_value_size: Option<usize>,
    /// The most bytes one multi-item reply (a multi-key get, a stats
    /// listing) may hold before its connection is closed (default 256 MiB).
    #[arg(long, global = true, hide_short_help = true)]
    pub(crate) max_reply_size: Option<usize>,
    /// Requests in flight per connection before callers wait (default 1024).
    #[arg(long, global = true, hide_short_help = true, value_parser = at_least_one)]
    pub(crate) max_in_flight: Option<usize>,
    /// Do not merge concurrent single-key gets into multi-key commands.
    #[arg(long, global = true, hide_short_help = true)]
    pub(crate) no_merge_gets: bool,
    /// Log in as this user (memcached's ASCII authentication, `-Y`); the
    /// password comes from --password-file or MEMGROUP_PASSWORD.
    #[arg(long, global = true)]
    pub(crate) username: Option<String>,
    /// The password for `--username`: a file holding it (one trailing newline
    /// is ignored); or the MEMGROUP_PASSWORD environment variable.
    #[arg(long, global = true, hide_short_help = true)]
    pub(crate) password_file: Option<PathBuf>,
    /// Connect over TLS (memcached -Z), trusting the platform's roots unless
    /// --tls-ca is given. Any --tls-* flag implies it.
    #[arg(long, global = true)]
    pub(crate) tls: bool,
    /// Trust the certificate authorities in this PEM file.
    #[arg(long, global = true, hide_short_help = true, value_name = "FILE")]
    pub(crate) tls_ca: Option<PathBuf>,
    /// Present this client certificate (PEM) to servers that want one.
    #[arg(
        long,
        global = true,
        hide_short_help = true,
        value_name = "FILE",
        requires = "tls_key"
    )]
    pub(crate) tls_cert: Option<PathBuf>,
    /// The private key (PEM) of --tls-cert.
    #[arg(
        long,
        global = true,
        hide_short_help = true,
        value_name = "FILE",
        requires = "tls_cert"
    )]
    pub(crate) tls_key: Option<PathBuf>,
    /// Verify the servers' certificates for this name instead of each host.
    #[arg(long, global = true, hide_short_help = true, value_name = "NAME")]
    pub(crate) tls_server_name: Option<String>,
    /// Migration mode: the layout the cache was filled under (a cluster.toml
    /// path, a server list, EVCache groups or a memcache:// URL). Reads that
    /// miss fall through to it and backfill the new layout; deletes go to
    /// both. Also `migrate_from = "old.toml"` in cluster.toml.
    #[arg(long, global = true, hide_short_help = true, value_name = "OLD")]
    pub(crate) migrate_from: Option<String>,
    /// The hashing strategy of the old layout, when given as a list (for
    /// --migrate-from and `route --compare`).
    #[arg(long, global = true, hide_short_help = true, value_name = "STRATEGY", value_parser = hash_strategy())]
    pub(crate) old_hash: Option<HashStrategy>,
    /// Read fallback: never, one-more, all-copies (default one-more).
    #[arg(long, global = true, hide_short_help = true)]
    pub(crate) read_fallback: Option<ReadFallback>,
    /// Write policy: none, one, quorum, all-minus-one, all (default
    /// all-minus-one).
    #[arg(long, global = true, hide_short_help = true)]
    pub(crate) write_policy: Option<WritePolicy>,
    /// How values are decoded and encoded: raw (bytes as stored),
    /// spymemcached, evcache, whalin, python-memcached (default raw).
    #[arg(long, global = true)]
    pub(crate) value_format: Option<ValueFormat>,
    /// Whether the servers speak memcached's meta protocol: detect (ask
    /// each once, the default), always, never (memcached 1.4/1.5,
    /// twemproxy: classic commands only, nothing asked).
    #[arg(
        long,
        global = true,
        hide_short_help = true,
        value_name = "detect|always|never"
    )]
    pub(crate) meta_protocol: Option<memgroup::client::MetaProtocol>,
    /// Long keys, as services using the library's long keys store them:
    /// keys over 250 bytes go under an MD5 digest key (prefix mglk:), the
    /// value in an envelope naming the key. Also `long_keys = true` (with
    /// long_keys_max_len, long_keys_prefix) in cluster.toml.
    #[arg(long, global = true, hide_short_help = true)]
    pub(crate) long_keys: bool,
    /// EVCache's hashed keys, as the EVCache apps of the fleet store them:
    /// `every` (<app>.hash.key) or `long` (<app>.auto.hash.keys), then `:`
    /// and comma-separated settings: the algorithm (siphash24, the default;
    /// md5, sha1, sha256, murmur3, crc32, adler32), digest=N, length=N,
    /// max=N (max.key.length), ascii85. Also [evcache_keys] in cluster.toml.
    #[arg(
        long,
        global = true,
        hide_short_help = true,
        value_name = "SPEC",
        conflicts_with = "long_keys"
    )]
    pub(crate) evcache_keys: Option<memgroup::hash::evcache::EvcacheKeys>,
    /// Where repairs this run could not finish are journaled for the next
    /// run (or `memgroup repair`) to do, and where it takes those an
    /// earlier run left: a directory, or `off`. Default
    /// $XDG_STATE_HOME/memgroup/repairs (~/.local/state/memgroup/repairs).
    /// Also MEMGROUP_REPAIR_JOURNAL, and `repair_journal` in cluster.toml.
    #[arg(long, global = true, hide_short_help = true, value_name = "DIR|off")]
    pub(crate) repair_journal: Option<String>,
    /// Read repair: a key a read found in a later group than one that
    /// answered with a miss is copied there (with its flags and remaining
    /// TTL), so a zone restarted empty fills as it is read. Also
    /// `read_repair = true` in cluster.toml.
    #[arg(long, global = true, hide_short_help = true)]
    pub(crate) read_repair: bool,
    /// How long a command waits at its end for its repairs (a group that
    /// missed a write) before journaling the rest, in seconds (default 5).
    #[arg(
        long,
        global = true,
        hide_short_help = true,
        value_name = "SECS",
        default_value_t = 5.0
    )]
    pub(crate) drain: f64,
}

/// A configuration endpoint, `host[:port]` as a `--servers` entry (the
/// port 11211 when left out): one server, no weight.
fn endpoint(text: &str) -> Result<String, String> {
    let spec =
        memgroup::topology::ClusterSpec::parse_server_list(text).map_err(|e| e.to_string())?;
    match &spec.groups[..] {
        [group] if group.servers.len() == 1 && group.servers[0].weight == 1 => {
            let addr = &group.servers[0].addr;
            Ok(if addr.host.contains(':') {
                format!("[{}]:{}", addr.host, addr.port)
            } else {
                addr.to_string()
            })
        }
        _ => Err("expected one endpoint, host[:port]".to_string()),
    }
}

/// A count that must be at least 1 (0 would let nothing through).
fn at_least_one(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(0) => Err("must be at least 1".to_string()),
        Ok(n) => Ok(n),
        Err(_) => Err("expected a whole number".to_string()),
    }
}

/// Connections per server: 1 to the topology's limit.
fn pool_size(text: &str) -> Result<usize, String> {
    use memgroup::topology::MAX_POOL_SIZE;
    match at_least_one(text)? {
        n if n > MAX_POOL_SIZE => Err(format!("must be at most {MAX_POOL_SIZE}")),
        n => Ok(n),
    }
}

/// Milliseconds of a timeout: at least 1 (0 would time everything out).
fn millis(text: &str) -> Result<u64, String> {
    at_least_one(text).map(|n| n as u64)
}

/// Parses a hashing strategy by name; `--help` lists every one
/// ([`HashStrategy::ALL`]) and a typo gets the nearest name suggested.
fn hash_strategy() -> impl clap::builder::TypedValueParser<Value = HashStrategy> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(HashStrategy::ALL.map(HashStrategy::name)).map(
        |name| {
            name.parse::<HashStrategy>()
                .expect("every listed name parses")
        },
    )
}
