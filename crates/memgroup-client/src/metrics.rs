//! Metrics (feature `metrics`), through the `metrics` facade: whatever
//! exporter the service installs (Prometheus, OpenTelemetry, StatsD)
//! receives them; with none installed each record is a no-op call, and
//! without the feature every function here is empty.
//!
//! | name | kind | labels |
//! |---|---|---|
//! | `db.client.operation.duration` | histogram, seconds | `db.system.name` (`memcached`), `db.operation.name`, `error.type` when it failed |
//! | `memgroup.client.connections.opened` | counter | `server.address`, `server.port` |
//! | `memgroup.client.fallbacks` | counter | — reads served by another group |
//! | `memgroup.client.hedges` | counter | — hedged reads sent |
//! | `memgroup.client.servers_down` | counter | `server.address`, `server.port` |
//! | `memgroup.client.policy_misses` | counter | `db.operation.name` |
//! | `memgroup.client.repairs_dropped` | counter | — |
//! | `memgroup.client.discovery.version` | gauge | `group` |
//! | `memgroup.client.discovery.failures` | counter | `group` |
//!
//! The labels are bounded: operation names are memcached's commands, error
//! types the [`ErrorKind`](crate::ErrorKind) names, servers those of the
//! cluster; keys are never labels. The operation histogram has no server
//! label: one operation may touch several (a replicated write, a fallback
//! read). Nothing is recorded per request: a first version counted each
//! request by server, whose labels cost two allocations per request even
//! with no recorder installed (+14 % CPU per operation in `cargo xtask
//! compare --metrics`); per-server request counts are in
//! [`Client::health`](crate::Client::health).
//!
//! Exporters choose the histogram's buckets. OpenTelemetry advises, for
//! `db.client.operation.duration`, the boundaries (seconds)
//! `[0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10]`; memcached answers in
//! tens to hundreds of microseconds, so finer low buckets (from 0.0001) show
//! more — e.g. `metrics-exporter-prometheus`'s `set_buckets_for_metric`.

#[cfg(feature = "metrics")]
use std::time::Instant;

/// The operation names whose duration histograms a client keeps handles
/// to (memcached's commands, and the batch writes' names); another name is
/// recorded through the facade each time.
#[cfg(feature = "metrics")]
const OPERATIONS: [&str; 29] = [
    "get",
    "gets",
    "gat",
    "gats",
    "set",
    "add",
    "replace",
    "append",
    "prepend",
    "cas",
    "delete",
    "incr",
    "decr",
    "touch",
    "flush_all",
    "version",
    "config get",
    "stats",
    "verbosity",
    "mg",
    "ms",
    "md",
    "ma",
    "mn",
    "me",
    "BATCH set",
    "BATCH delete",
    "BATCH",
    "quit",
];

/// A client's handles to its operation-duration histograms, one per
/// operation name and outcome (success, or each error kind), each
/// registered with the recorder on its first use. Recording then costs a
/// load and the recorder's own work: building the labels and looking the
/// histogram up again on every operation cost +4.5 % CPU per operation with
/// no recorder installed (`cargo xtask compare --metrics`). As with any
/// `metrics` handle, a recorder installed after a client's first operation
/// of a kind does not see that kind from that client: install it first.
#[derive(Debug, Default)]
pub(crate) struct Durations {
    #[cfg(feature = "metrics")]
    handles: Box<[std::sync::OnceLock<::metrics::Histogram>]>,
}

impl Durations {
    /// Handles for every operation and outcome, none registered yet.
    pub(crate) fn new() -> Durations {
        Durations {
            #[cfg(feature = "metrics")]
            handles: (0..OPERATIONS.len() * (1 + crate::ErrorKind::ALL.len()))
                .map(|_| std::sync::OnceLock::new())
                .collect(),
        }
    }
}

/// When an operation started (nothing without the feature), and where its
/// duration goes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Started<'a> {
    #[cfg(feature = "metrics")]
    at: Instant,
    #[cfg(feature = "metrics")]
    durations: &'a Durations,
    #[cfg(not(feature = "metrics"))]
    durations: std::marker::PhantomData<&'a Durations>,
}

/// Now, for an operation's duration into `durations`.
#[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
#[inline(always)]
pub(crate) fn start(durations: &Durations) -> Started<'_> {
    Started {
        #[cfg(feature = "metrics")]
        at: crate::clock::now(),
        #[cfg(feature = "metrics")]
        durations,
        #[cfg(not(feature = "metrics"))]
        durations: std::marker::PhantomData,
    }
}

/// An operation ended.
#[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
#[inline(always)]
pub(crate) fn operation(
    started: Started<'_>,
    operation: &'static str,
    error: Option<&'static str>,
) {
    #[cfg(feature = "metrics")]
    {
        let seconds = (crate::clock::now() - started.at).as_secs_f64();
        let outcome = match error {
            None => Some(0),
            Some(kind) => crate::ErrorKind::ALL
                .iter()
                .position(|k| k.name() == kind)
                .map(|i| i + 1),
        };
        let index = OPERATIONS
            .iter()
            .position(|&o| o == operation)
            .zip(outcome)
            .map(|(o, e)| o * (1 + crate::ErrorKind::ALL.len()) + e);
        match index.and_then(|i| started.durations.handles.get(i)) {
            Some(cell) => cell
                .get_or_init(|| duration_histogram(operation, error))
                .record(seconds),
            None => duration_histogram(operation, error).record(seconds),
        }
    }
}

/// The duration histogram of `operation` with its outcome, as the recorder
/// registers it.
#[cfg(feature = "metrics")]
fn duration_histogram(
    operation: &'static str,
    error: Option<&'static str>,
) -> ::metrics::Histogram {
    match error {
        None => ::metrics::histogram!(
            "db.client.operation.duration",
            "db.system.name" => "memcached",
            "db.operation.name" => operation,
        ),
        Some(kind) => ::metrics::histogram!(
            "db.client.operation.duration",
            "db.system.name" => "memcached",
            "db.operation.name" => operation,
            "error.type" => kind,
        ),
    }
}

/// `host:port` as the `server.address` and `server.port` labels.
#[cfg(feature = "metrics")]
fn server_labels(server: &str) -> (String, String) {
    let (address, port) = memgroup_topology::ServerAddr::split(server);
    (
        address.to_string(),
        port.map(|p| p.to_string()).unwrap_or_default(),
    )
}

/// A connection to `server` opened.
#[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
#[inline(always)]
pub(crate) fn connection_opened(server: &str) {
    #[cfg(feature = "metrics")]
    {
        let (address, port) = server_labels(server);
        ::metrics::counter!(
            "memgroup.client.connections.opened",
            "server.address" => address,
            "server.port" => port,
        )
        .increment(1);
    }
}

/// `n` reads were served by a fallback group.
#[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
#[inline(always)]
pub(crate) fn fallbacks(n: u64) {
    #[cfg(feature = "metrics")]
    if n > 0 {
        ::metrics::counter!("memgroup.client.fallbacks").increment(n);
    }
}

/// A hedged read was sent.
#[inline(always)]
pub(crate) fn hedge() {
    #[cfg(feature = "metrics")]
    ::metrics::counter!("memgroup.client.hedges").increment(1);
}
