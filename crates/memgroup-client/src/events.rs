//! What happens to the cluster, as it happens: a server marked dead or back,
//! a write that missed its policy, the topology replaced. Delivered to the
//! callback given to [`ClientBuilder::on_event`](crate::ClientBuilder::on_event)
//! and, with feature `tracing`, logged as tracing events.
//!
//! The callback runs on the task that noticed, outside the client's locks:
//! keep it short (count, log, hand off to a channel).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::error::Error;

/// Something that happened to the cluster.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Event {
    /// A server was marked dead after a failure (again, if it stays down:
    /// once per backoff period): it is skipped for `retry_in`.
    ServerDown {
        /// `host:port`.
        server: String,
        /// Failures in a row, this one included.
        failures: u32,
        /// How long until it is tried again.
        retry_in: Duration,
        /// What failed.
        error: Error,
    },
    /// A server that had failed answered again.
    ServerUp {
        /// `host:port`.
        server: String,
    },
    /// A replicated write did not reach as many groups as the write policy
    /// requires (the caller got an [`ErrorKind::WritePolicy`](crate::ErrorKind::WritePolicy) error).
    PolicyMissed {
        /// The command (`"set"`, `"delete"`, …).
        command: &'static str,
        /// The groups that failed.
        failed: Vec<String>,
        /// Of how many written to.
        groups: usize,
    },
    /// The repair queue is full: its oldest entries are being dropped (their
    /// servers may serve a stale copy until it expires). Once per episode;
    /// [`RepairStatus::dropped`](crate::RepairStatus::dropped) counts each.
    RepairsDropped {
        /// The queue's capacity.
        capacity: usize,
    },
    /// A new cluster description could not be applied (a watched file that
    /// cannot be read or parsed); the topology stays as it was.
    TopologyRejected {
        /// Why.
        error: Error,
    },
    /// The topology was replaced ([`Client::set_topology`](crate::Client::set_topology)).
    TopologyChanged {
        /// Servers the new topology added.
        added: Vec<String>,
        /// Servers it removed.
        removed: Vec<String>,
    },
    /// A configuration endpoint served a new cluster list for a group, and
    /// it was applied ([`ClientBuilder::discover`](crate::ClientBuilder::discover)).
    Discovered {
        /// The group whose servers it lists.
        group: String,
        /// The list's configuration version.
        version: u64,
        /// The version it replaced (0 before the first).
        previous: u64,
        /// How many servers it lists.
        servers: usize,
    },
    /// Asking a configuration endpoint failed, or it served a list that was
    /// not applied (unparsable, or a lower version not yet confirmed): the
    /// group keeps its servers.
    DiscoveryFailed {
        /// The group.
        group: String,
        /// The endpoint asked (`host:port`).
        endpoint: String,
        /// Why.
        error: Error,
    },
}

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Event::ServerDown {
                server,
                failures,
                retry_in,
                error,
            } => write!(
                f,
                "server {server} marked dead ({failures} failures in a row), retried in {retry_in:?}: {error}"
            ),
            Event::ServerUp { server } => write!(f, "server {server} is up again"),
            Event::PolicyMissed {
                command,
                failed,
                groups,
            } => write!(
                f,
                "{command} missed the write policy: {} of {groups} groups failed ({})",
                failed.len(),
                failed.join(", ")
            ),
            Event::RepairsDropped { capacity } => write!(
                f,
                "repair queue full ({capacity} entries): dropping the oldest repairs"
            ),
            Event::TopologyRejected { error } => {
                write!(f, "new topology rejected: {}", error.chain())
            }
            Event::Discovered {
                group,
                version,
                previous,
                servers,
            } => write!(
                f,
                "group {group}: cluster list version {version} applied ({servers} servers; was {previous})"
            ),
            Event::DiscoveryFailed {
                group,
                endpoint,
                error,
            } => write!(
                f,
                "group {group}: discovery at {endpoint} failed: {}",
                error.chain()
            ),
            Event::TopologyChanged { added, removed } => write!(
                f,
                "topology changed: {} servers added, {} removed",
                added.len(),
                removed.len()
            ),
        }
    }
}

/// How the user watches the client: the event callback, and whether spans
/// record keys.
#[derive(Debug, Clone, Default)]
pub(crate) struct Observe {
    pub(crate) events: Events,
    pub(crate) trace_keys: bool,
}

/// The user's event callback.
type Callback = dyn Fn(&Event) + Send + Sync;

/// The user's callback, if any.
#[derive(Clone, Default)]
pub(crate) struct Events(Option<Arc<Callback>>);

impl fmt::Debug for Events {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_some() {
            "Events(callback)"
        } else {
            "Events(none)"
        })
    }
}

impl Events {
    pub(crate) fn new(callback: impl Fn(&Event) + Send + Sync + 'static) -> Events {
        Events(Some(Arc::new(callback)))
    }

    /// Delivers `event` (built only when someone listens).
    pub(crate) fn emit(&self, event: impl FnOnce() -> Event) {
        #[cfg(feature = "metrics")]
        let event = {
            let event = event();
            record(&event);
            move || event
        };
        #[cfg(feature = "tracing")]
        let event = {
            let event = event();
            log(&event);
            move || event
        };
        if let Some(callback) = &self.0 {
            callback(&event());
        }
    }
}

/// The event as a tracing event: a server down or a missed policy is a
/// warning, the rest information.
#[cfg(feature = "tracing")]
fn log(event: &Event) {
    match event {
        Event::ServerDown {
            server,
            failures,
            retry_in,
            error,
        } => tracing::warn!(
            server = %server,
            failures,
            retry_in_ms = retry_in.as_millis() as u64,
            error = %error,
            "memcached server marked dead"
        ),
        Event::ServerUp { server } => tracing::info!(server = %server, "memcached server up again"),
        Event::PolicyMissed {
            command,
            failed,
            groups,
        } => tracing::warn!(
            command,
            failed = %failed.join(","),
            groups,
            "write missed its policy"
        ),
        Event::RepairsDropped { capacity } => {
            tracing::warn!(capacity, "repair queue full: dropping the oldest repairs");
        }
        Event::TopologyRejected { error } => {
            tracing::warn!(error = %error.chain(), "new topology rejected");
        }
        Event::Discovered {
            group,
            version,
            previous,
            servers,
        } => tracing::info!(
            group = %group,
            version,
            previous,
            servers,
            "cluster list applied"
        ),
        Event::DiscoveryFailed {
            group,
            endpoint,
            error,
        } => tracing::warn!(
            group = %group,
            endpoint = %endpoint,
            error = %error.chain(),
            "discovery failed"
        ),
        Event::TopologyChanged { added, removed } => tracing::info!(
            added = %added.join(","),
            removed = %removed.join(","),
            "topology changed"
        ),
    }
}

/// The metrics an event stands for ([`crate::metrics`]).
#[cfg(feature = "metrics")]
fn record(event: &Event) {
    match event {
        Event::ServerDown { server, .. } => {
            let (address, port) = memgroup_topology::ServerAddr::split(server);
            let (address, port) = (
                address.to_string(),
                port.map(|p| p.to_string()).unwrap_or_default(),
            );
            ::metrics::counter!(
                "memgroup.client.servers_down",
                "server.address" => address,
                "server.port" => port,
            )
            .increment(1);
        }
        Event::PolicyMissed { command, .. } => {
            ::metrics::counter!("memgroup.client.policy_misses", "db.operation.name" => *command)
                .increment(1);
        }
        Event::RepairsDropped { .. } => {
            ::metrics::counter!("memgroup.client.repairs_dropped").increment(1);
        }
        Event::Discovered { group, version, .. } => {
            #[allow(clippy::cast_precision_loss)]
            ::metrics::gauge!("memgroup.client.discovery.version", "group" => group.clone())
                .set(*version as f64);
        }
        Event::DiscoveryFailed { group, .. } => {
            ::metrics::counter!("memgroup.client.discovery.failures", "group" => group.clone())
                .increment(1);
        }
        _ => {}
    }
}
