//! `proxy`: a memcached to every client that connects, forwarding through
//! the cluster's client (memgroup-proxy). Runs until interrupted; then the
//! client closes as every command's does (background writes drained up to
//! `--drain`, the rest journaled).

use std::net::SocketAddr;
use std::process::ExitCode;

use memgroup::proxy::{Proxy, ProxyConfig};

use crate::cluster::Cluster;
use crate::exit::Failure;
use crate::flags::ClusterFlags;
use crate::output;

/// Where to listen and what to allow.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// An address to listen on (`host:port`); repeatable.
    #[arg(long, value_name = "ADDR", required = true)]
    listen: Vec<SocketAddr>,
    /// Refuse `flush_all` (answered `SERVER_ERROR`) instead of flushing
    /// every server of every group.
    #[arg(long)]
    no_flush_all: bool,
    /// Refuse `cache_memlimit` (answered `SERVER_ERROR`) instead of setting
    /// every server's memory limit.
    #[arg(long)]
    no_cache_memlimit: bool,
    /// The most requests of one client connection in flight at once.
    #[arg(long, value_name = "N", default_value_t = 128)]
    max_in_flight: usize,
    /// The largest value a client may store, in bytes (memcached's `-I`).
    #[arg(long, value_name = "BYTES", default_value_t = 1 << 20)]
    max_value: usize,
    /// Worker threads serving clients (default: one per core).
    #[arg(long, value_name = "N")]
    pub(crate) threads: Option<usize>,
}

/// `proxy`: serve until Ctrl-C or SIGTERM.
pub(crate) async fn run(args: &Args, flags: &ClusterFlags) -> Result<ExitCode, Failure> {
    let client = Cluster::from_flags(flags)?.client()?;
    let mut config = ProxyConfig::listen(args.listen.iter().copied());
    config.allow_flush_all = !args.no_flush_all;
    config.allow_cache_memlimit = !args.no_cache_memlimit;
    config.max_in_flight = args.max_in_flight.max(1);
    config.limits.max_value = args.max_value;
    let proxy = Proxy::bind(client, config)
        .await
        .map_err(|e| Failure::Op(e.to_string()))?;
    let addrs: Vec<String> = proxy
        .local_addrs()
        .iter()
        .map(ToString::to_string)
        .collect();
    output::info(&format!("memgroup proxy listening on {}", addrs.join(", ")));
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|e| Failure::Op(format!("cannot watch SIGTERM: {e}")))?;
    tokio::select! {
        () = proxy.serve() => {}
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate.recv() => {}
    }
    Ok(ExitCode::SUCCESS)
}
