//! `proxy`: a memcached to every client that connects, forwarding through
//! the cluster's client (memgroup-proxy). Follows its `--config` file
//! (every second and on SIGHUP). Runs until SIGTERM or Ctrl-C;
//! then it drains: the listeners close, every request already read is
//! answered, connections still open after `--grace` are cut, and the client
//! closes as every command's does (background writes and repairs drained up
//! to `--drain`, the rest journaled).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use memgroup::proxy::{Logins, Proxy, ProxyConfig, ProxyControl, ServerTls};

use crate::cluster::Cluster;
use crate::exit::Failure;
use crate::flags::ClusterFlags;
use crate::output;

/// Where to listen and what to allow.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// An address to listen on (`host:port`); repeatable. The cluster
    /// file's `[proxy] listen` adds its own, followed when the file changes.
    #[arg(long, value_name = "ADDR")]
    listen: Vec<SocketAddr>,
    /// Checks the cluster (the `--config` file, flags and variables) as the
    /// proxy would read it, says what it found, and exits: 0 valid, 2 not.
    #[arg(long)]
    check: bool,
    /// Refuse `flush_all` (answered `SERVER_ERROR`) instead of flushing
    /// every server of every group.
    #[arg(long)]
    no_flush_all: bool,
    /// Refuse `cache_memlimit` (answered `SERVER_ERROR`) instead of setting
    /// every server's memory limit.
    #[arg(long)]
    no_cache_memlimit: bool,
    /// The most client connections open at once (one more is answered
    /// `ERROR Too many open connections`, as memcached does).
    #[arg(long, value_name = "N", default_value_t = 16_384)]
    max_connections: usize,
    /// Closes a client connection idle this long, in seconds (0: never, the
    /// default, as memcached).
    #[arg(long, value_name = "SECS", default_value_t = 0.0)]
    idle_timeout: f64,
    /// On SIGTERM, how long the connections may take to get the answers to
    /// what they sent, in seconds, before they are cut.
    #[arg(long, value_name = "SECS", default_value_t = 10.0)]
    grace: f64,
    /// The most requests of one client connection in flight at once.
    #[arg(long, value_name = "N", default_value_t = 128)]
    max_in_flight: usize,
    /// The largest value a client may store, in bytes (memcached's `-I`).
    #[arg(long, value_name = "BYTES", default_value_t = 1 << 20)]
    max_value: usize,
    /// Serve TLS to clients with this certificate chain (PEM; the proxy's
    /// own first). The --tls-* flags are for the servers behind it.
    #[arg(long, value_name = "FILE", requires = "listen_key")]
    listen_cert: Option<PathBuf>,
    /// The private key (PEM) of --listen-cert.
    #[arg(long, value_name = "FILE", requires = "listen_cert")]
    listen_key: Option<PathBuf>,
    /// Require a client certificate from this authority (PEM) of every
    /// client (mutual TLS).
    #[arg(long, value_name = "FILE", requires = "listen_cert")]
    listen_client_ca: Option<PathBuf>,
    /// Require memcached's ASCII login of every client, with the users and
    /// passwords of this file (memcached's `-Y` format: `user:password`
    /// lines). --username and its password are for the servers behind.
    #[arg(long, value_name = "FILE")]
    listen_auth_file: Option<PathBuf>,
    /// Serve the metrics to Prometheus on this address (`host:port`, any
    /// path): the proxy's `stats` as `memgroup_proxy_*`, refreshed every
    /// second, and the client's (operation durations, fallbacks, servers
    /// down, ...).
    #[arg(long, value_name = "ADDR")]
    metrics_listen: Option<SocketAddr>,
    /// Worker threads serving clients (default: one per core).
    #[arg(long, value_name = "N")]
    pub(crate) threads: Option<usize>,
}

/// `proxy`: serve until Ctrl-C or SIGTERM.
pub(crate) async fn run(args: &Args, flags: &ClusterFlags) -> Result<ExitCode, Failure> {
    let cluster = Cluster::from_flags(flags)?;
    let client = cluster.client()?;
    if args.check {
        let spec = &cluster.spec;
        let servers: usize = spec.groups.iter().map(|g| g.servers.len()).sum();
        output::info(&format!(
            "cluster valid: {} groups, {servers} servers",
            spec.groups.len()
        ));
        return Ok(ExitCode::SUCCESS);
    }
    let in_file = match cluster.config_path() {
        Some(path) => {
            memgroup::config::ClusterFile::read(path)
                .map_err(|e| Failure::Usage(e.to_string()))?
                .proxy_listen
        }
        None => Vec::new(),
    };
    let listen = together(&args.listen, &in_file);
    if listen.is_empty() {
        return Err(Failure::Usage(
            "nothing to listen on: give --listen ADDR, or [proxy] listen in the cluster file"
                .into(),
        ));
    }
    let mut config = ProxyConfig::listen(listen);
    config.allow_flush_all = !args.no_flush_all;
    config.allow_cache_memlimit = !args.no_cache_memlimit;
    config.max_in_flight = args.max_in_flight.max(1);
    config.max_connections = args.max_connections;
    config.idle_timeout = seconds(args.idle_timeout, "--idle-timeout")?;
    let grace = seconds(args.grace, "--grace")?.unwrap_or_default();
    raise_descriptor_limit(args.max_connections);
    config.limits.max_value = args.max_value;
    if let Some(path) = &args.listen_auth_file {
        let logins =
            Logins::read(path).map_err(|e| Failure::Usage(format!("--listen-auth-file: {e}")))?;
        config.logins = Some(logins);
    }
    if let (Some(cert), Some(key)) = (&args.listen_cert, &args.listen_key) {
        let tls = ServerTls::from_files(cert, key, args.listen_client_ca.as_deref())
            .map_err(|e| Failure::Usage(format!("TLS in front: {e}")))?;
        config.tls = Some(tls);
    }
    let proxy = Proxy::bind(client.clone(), config)
        .await
        .map_err(|e| Failure::Op(e.to_string()))?;
    follow(&cluster, &client, args, proxy.control(), in_file)?;
    if let Some(addr) = args.metrics_listen {
        serve_metrics(addr, proxy.control())?;
    }
    let addrs: Vec<String> = proxy
        .local_addrs()
        .iter()
        .map(ToString::to_string)
        .collect();
    output::info(&format!("memgroup proxy listening on {}", addrs.join(", ")));
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|e| Failure::Op(format!("cannot watch SIGTERM: {e}")))?;
    let shutdown = async {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = terminate.recv() => {}
        }
        output::info("memgroup proxy: draining (no new connections)");
    };
    let drained = proxy.serve_until(shutdown, grace).await;
    output::info(&format!(
        "memgroup proxy: {} requests answered while draining {} connections; {} cut after the grace period",
        drained.answered, drained.connections, drained.cut
    ));
    if drained.cut > 0 {
        // Their requests in flight were read and never answered.
        return Ok(ExitCode::from(crate::exit::PARTIAL));
    }
    Ok(ExitCode::SUCCESS)
}

/// Follows the `--config` file: a change applies to new requests (checked
/// every second, and at once on SIGHUP); one that cannot be read or parsed
/// is said on stderr and the cluster stays as it was. SIGHUP also reads the
/// certificate and key of TLS in front again: new handshakes present them
/// (a renewed certificate), or, when they do not load, the old ones stay
/// and the reason is said.
fn follow(
    cluster: &Cluster,
    client: &memgroup::client::Client,
    args: &Args,
    control: ProxyControl,
    in_file: Vec<SocketAddr>,
) -> Result<(), Failure> {
    let watcher = cluster.watch(client, Ok);
    let mut hangup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        .map_err(|e| Failure::Op(format!("cannot watch SIGHUP: {e}")))?;
    let tls = args.listen_cert.clone().zip(args.listen_key.clone());
    let client_ca = args.listen_client_ca.clone();
    let listens = Listens {
        path: cluster.config_path().map(Path::to_path_buf),
        flags: args.listen.clone(),
        in_file,
        control: control.clone(),
    };
    tokio::spawn(listens.follow());
    tokio::spawn(async move {
        while hangup.recv().await.is_some() {
            match &watcher {
                Some(watcher) => {
                    output::note("SIGHUP: reading the cluster file again");
                    watcher.reload_now();
                }
                None => output::note("SIGHUP: no --config file to read again"),
            }
            if let Some((cert, key)) = &tls {
                match ServerTls::from_files(cert, key, client_ca.as_deref()) {
                    Ok(renewed) => {
                        control.set_tls(renewed);
                        output::note(
                            "SIGHUP: TLS in front: new handshakes present the certificate read now",
                        );
                    }
                    Err(e) => output::note(&format!(
                        "SIGHUP: TLS in front: keeping the certificate in use: {e}"
                    )),
                }
            }
        }
    });
    Ok(())
}

/// The addresses to listen on: the flags', then the file's not among them.
fn together(flags: &[SocketAddr], in_file: &[SocketAddr]) -> Vec<SocketAddr> {
    let mut all = flags.to_vec();
    all.extend(in_file.iter().filter(|a| !flags.contains(a)));
    all
}

/// The listen addresses of the cluster file, followed: read every second
/// (SIGHUP's reading of the file applies here within that second); a
/// change opens the new addresses and stops accepting on the removed ones
/// (their connections are served to the end), or, when one cannot be
/// bound, is refused with a line and nothing changes.
struct Listens {
    path: Option<PathBuf>,
    flags: Vec<SocketAddr>,
    in_file: Vec<SocketAddr>,
    control: ProxyControl,
}

impl Listens {
    async fn follow(mut self) {
        let Some(path) = self.path.take() else {
            return;
        };
        let mut every = tokio::time::interval(Duration::from_secs(1));
        loop {
            every.tick().await;
            // A file that does not parse is the watcher's to report.
            let Ok(file) = memgroup::config::ClusterFile::read(&path) else {
                continue;
            };
            if file.proxy_listen == self.in_file {
                continue;
            }
            let listen = together(&self.flags, &file.proxy_listen);
            match self.control.listen(&listen).await {
                Ok(addrs) => {
                    let addrs: Vec<String> = addrs.iter().map(ToString::to_string).collect();
                    output::note(&format!(
                        "memgroup proxy now listening on {}",
                        addrs.join(", ")
                    ));
                }
                Err(e) => output::note(&format!(
                    "[proxy] listen not applied, the listeners stay as they were: {e}"
                )),
            }
            self.in_file = file.proxy_listen;
        }
    }
}

/// Installs the Prometheus exporter on `addr` as the process's metrics
/// recorder, and records the proxy's counters every second.
fn serve_metrics(addr: SocketAddr, control: ProxyControl) -> Result<(), Failure> {
    use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};
    // memcached answers in tens to hundreds of microseconds: finer low
    // buckets than OpenTelemetry's advice (from 1 ms) show more.
    const BUCKETS: [f64; 14] = [
        0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5,
        1.0, 5.0,
    ];
    PrometheusBuilder::new()
        .with_http_listener(addr)
        .set_buckets_for_metric(
            Matcher::Full("db.client.operation.duration".into()),
            &BUCKETS,
        )
        .and_then(PrometheusBuilder::install)
        .map_err(|e| Failure::Op(format!("--metrics-listen {addr}: {e}")))?;
    tokio::spawn(async move {
        let mut every = tokio::time::interval(Duration::from_secs(1));
        loop {
            every.tick().await;
            control.record_metrics();
        }
    });
    output::note(&format!("metrics for Prometheus on http://{addr}/metrics"));
    Ok(())
}

/// A duration flag in seconds: 0 is `None`, a negative or unreadable one
/// is a usage error.
fn seconds(secs: f64, flag: &str) -> Result<Option<Duration>, Failure> {
    if secs == 0.0 {
        return Ok(None);
    }
    Duration::try_from_secs_f64(secs)
        .map(Some)
        .map_err(|_| Failure::Usage(format!("{flag} {secs}: not a number of seconds")))
}

/// Raises the soft limit on open descriptors to the hard one, so the most
/// connections allowed can be open (a distribution's soft default, 1,024,
/// is far below `--max-connections`); warns when even the hard limit is
/// below what the connections need.
fn raise_descriptor_limit(connections: usize) {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit only read and write the struct
    // passed, which lives on this stack frame.
    let raised = unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 && {
            limit.rlim_cur = limit.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit) == 0
        }
    };
    // The servers' connections and the listeners need descriptors too.
    let needed = connections as u64 + 256;
    if !raised || limit.rlim_cur < needed {
        output::warn(
            None,
            &format!(
                "open descriptors limited to {} (ulimit -n): fewer than --max-connections {connections} and the servers' connections",
                limit.rlim_cur
            ),
        );
    }
}
