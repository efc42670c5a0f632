//! Connection slots: `pool_size` lazily opened connections per server,
//! opened on first use and reopened after the topology's dead-host backoff.
//!
//! The pool owns the two pieces of shared state every operation consults: the
//! current [`Snapshot`] (topology plus slots, swapped whole on a change) and
//! the [`DeadHosts`] record. Time comes from tokio's clock ([`now`](crate::clock::now)), so tests
//! running under paused time drive the backoff without sleeping.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use memgroup_topology::{DeadHosts, GroupId, ServerId, Topology};
use parking_lot::{Mutex, MutexGuard, RwLock};

use crate::clock::now;
use crate::conn::Credentials;
use crate::conn::{ConnSettings, Connection};
use crate::counters::ServerCounters;
use crate::error::{Error, ErrorKind};
use crate::events::{Event, Events};
use crate::join::{BoxFuture, join_all};

pub(crate) use dead::DeadView;
pub(crate) use slot::Slot;

/// A topology together with the connection slots of its servers. Swapped as
/// a whole on a topology change; slots of servers that stay are shared with
/// the previous snapshot, so their connections survive the change.
#[derive(Debug)]
pub(crate) struct Snapshot {
    pub(crate) topology: Arc<Topology>,
    /// `slots[server][slot]`, the number of slots being the largest
    /// `pool_size` of the groups the server belongs to.
    slots: Vec<Vec<Arc<Slot>>>,
    /// `host:port` of each server, for connecting and for error messages.
    names: Vec<Arc<str>>,
    /// Each group's name, shared by the outcomes of writes.
    group_names: Vec<Arc<str>>,
    /// Each name's server (the first, were two alike): lookups by name, and
    /// the servers a topology change keeps, without a scan per server.
    by_name: HashMap<Arc<str>, ServerId>,
    /// How to open each server's connections (its group's TLS and login).
    settings: Vec<Arc<ConnSettings>>,
    /// What the client did with each server (kept across topology changes
    /// for servers that stay).
    counters: Vec<Arc<ServerCounters>>,
    /// 1 for the client's first topology, one more for each applied since.
    pub(crate) generation: u64,
    /// When it was applied.
    pub(crate) since: Instant,
}

/// A group's own TLS and login, overriding the cluster-wide ones.
#[derive(Debug, Clone, Default)]
pub(crate) struct GroupSecurity {
    /// The group's name.
    pub(crate) group: String,
    #[cfg(feature = "tls")]
    pub(crate) tls: Option<crate::conn::tls::TlsConnector>,
    pub(crate) credentials: Option<Arc<Credentials>>,
    /// Whether the group's servers speak the meta protocol, if the group
    /// says so itself.
    pub(crate) meta: Option<crate::MetaProtocol>,
}

impl GroupSecurity {
    fn apply(&self, settings: &mut ConnSettings) {
        if let Some(meta) = self.meta {
            settings.meta = meta;
        }
        #[cfg(feature = "tls")]
        if let Some(tls) = &self.tls {
            settings.tls = Some(tls.clone());
        }
        if let Some(credentials) = &self.credentials {
            settings.credentials = Some(credentials.clone());
        }
    }
}

impl Snapshot {
    fn new(
        topology: Arc<Topology>,
        previous: Option<&Snapshot>,
        base: &ConnSettings,
        groups: &[GroupSecurity],
    ) -> Snapshot {
        let names: Vec<Arc<str>> = topology
            .servers()
            .iter()
            .map(|a| Arc::from(a.to_string()))
            .collect();
        let mut by_name = HashMap::with_capacity(names.len());
        for (i, name) in names.iter().enumerate() {
            by_name.entry(name.clone()).or_insert(ServerId(i));
        }
        let mut sizes = vec![1usize; names.len()];
        for group in topology.groups() {
            for &server in group.servers() {
                sizes[server.0] = sizes[server.0].max(group.pool_size());
            }
        }
        // Each server's index in the previous snapshot, if it was there.
        let kept: Vec<Option<(&Snapshot, usize)>> = names
            .iter()
            .map(|name| previous.and_then(|p| Some((p, p.by_name.get(name)?.0))))
            .collect();
        let slots = kept
            .iter()
            .zip(sizes)
            .map(|(kept, size)| {
                let old = kept.map(|(p, i)| &p.slots[i]);
                (0..size)
                    .map(|i| old.and_then(|o| o.get(i).cloned()).unwrap_or_default())
                    .collect()
            })
            .collect();
        let counters = kept
            .iter()
            .map(|kept| kept.map_or_else(Arc::default, |(p, i)| p.counters[i].clone()))
            .collect();
        // A server in several groups takes the settings of the first of them
        // that has its own.
        let mut owns: Vec<Option<&GroupSecurity>> = vec![None; names.len()];
        for g in topology.groups() {
            let Some(own) = groups.iter().find(|s| s.group == g.name()) else {
                continue;
            };
            for &server in g.servers() {
                owns[server.0].get_or_insert(own);
            }
        }
        let settings = owns
            .into_iter()
            .map(|own| {
                let mut settings = base.clone();
                if let Some(own) = own {
                    own.apply(&mut settings);
                }
                Arc::new(settings)
            })
            .collect();
        let group_names = topology
            .groups()
            .iter()
            .map(|g| Arc::from(g.name()))
            .collect();
        Snapshot {
            topology,
            slots,
            names,
            group_names,
            by_name,
            settings,
            counters,
            generation: previous.map_or(1, |p| p.generation + 1),
            since: now(),
        }
    }

    /// Every server's counters.
    pub(crate) fn all_counters(&self) -> &[Arc<ServerCounters>] {
        &self.counters
    }

    /// `server`'s counters.
    pub(crate) fn counters(&self, server: ServerId) -> &Arc<ServerCounters> {
        &self.counters[server.0]
    }

    /// `server`'s open connections, and requests in flight (written,
    /// awaiting a reply) and queued (not yet written) over them.
    pub(crate) fn load(&self, server: ServerId) -> (usize, usize, usize) {
        let mut load = (0, 0, 0);
        for slot in &self.slots[server.0] {
            let conn = slot.conn.lock().clone();
            if let Some(conn) = conn.filter(|c| !c.is_failed()) {
                let (in_flight, queued) = conn.load();
                load = (load.0 + 1, load.1 + in_flight, load.2 + queued);
            }
        }
        load
    }

    /// How `server`'s connections are opened.
    pub(crate) fn settings(&self, server: ServerId) -> &ConnSettings {
        &self.settings[server.0]
    }

    /// The server named `host:port`, or an `InvalidArgument` error naming it.
    pub(crate) fn server_by_name(&self, name: &str) -> Result<ServerId, Error> {
        let found = self.by_name.get(name).copied();
        found.ok_or_else(|| {
            Error::new(
                ErrorKind::InvalidArgument,
                format!("{name} is not a server of the cluster"),
            )
        })
    }

    fn slot(&self, server: ServerId, slot: usize) -> &Arc<Slot> {
        let slots = &self.slots[server.0];
        &slots[slot % slots.len()]
    }

    /// `host:port` of `server`.
    pub(crate) fn name(&self, server: ServerId) -> &Arc<str> {
        &self.names[server.0]
    }

    /// `group`'s name.
    pub(crate) fn group_name(&self, group: GroupId) -> &Arc<str> {
        &self.group_names[group.0]
    }

    /// The id of the group named `name`, or an `InvalidArgument` error.
    pub(crate) fn group_id(&self, name: &str) -> Result<GroupId, Error> {
        self.topology.group_by_name(name).ok_or_else(|| {
            Error::new(
                ErrorKind::InvalidArgument,
                format!("unknown server group {name:?}"),
            )
        })
    }

    /// How many distinct servers the topology has.
    pub(crate) fn server_count(&self) -> usize {
        self.names.len()
    }
}

/// The snapshot, the dead-host record and the settings to open connections.
#[derive(Debug)]
pub(crate) struct Pool {
    snapshot: RwLock<Arc<Snapshot>>,
    dead: Mutex<DeadHosts>,
    /// Some server has a failure on record (`dead` is not clear). Written
    /// under `dead`'s lock; while it is unset, choosing targets reads
    /// `clear` instead of taking that client-wide lock.
    any_failed: AtomicBool,
    /// A record with every server alive (it answers alike for any topology).
    clear: DeadHosts,
    /// When the pool was made: the instant a clear record is judged at.
    created: Instant,
    settings: ConnSettings,
    groups: Vec<GroupSecurity>,
    events: Events,
}

impl Pool {
    pub(crate) fn new(
        topology: Topology,
        settings: ConnSettings,
        groups: Vec<GroupSecurity>,
        events: Events,
    ) -> Pool {
        let topology = Arc::new(topology);
        let snapshot = Snapshot::new(topology.clone(), None, &settings, &groups);
        Pool {
            dead: Mutex::new(DeadHosts::new(&topology)),
            any_failed: AtomicBool::new(false),
            clear: DeadHosts::new(&topology),
            created: now(),
            snapshot: RwLock::new(Arc::new(snapshot)),
            settings,
            groups,
            events,
        }
    }

    /// Where events go.
    pub(crate) fn events(&self) -> &Events {
        &self.events
    }

    /// Records a failure of `server`: it enters (or stays in) its backoff.
    fn failed(&self, snap: &Snapshot, server: ServerId, error: &Error) {
        let now = now();
        let (until, failures) = {
            let mut dead = self.dead.lock();
            let until = dead.record_failure(server, now);
            self.any_failed.store(true, Ordering::Release);
            (until, dead.failures(server))
        };
        self.events.emit(|| Event::ServerDown {
            server: snap.name(server).to_string(),
            failures,
            retry_in: until.saturating_duration_since(now),
            error: error.clone(),
        });
    }

    /// The current snapshot; operations hold it for their whole run.
    pub(crate) fn snapshot(&self) -> Arc<Snapshot> {
        self.snapshot.read().clone()
    }

    /// The dead-host record, locked. Hold it only to select targets.
    pub(crate) fn dead(&self) -> MutexGuard<'_, DeadHosts> {
        self.dead.lock()
    }

    /// The dead-host record to choose targets by: while no server has a
    /// failure on record (the usual case), a clear one read without the
    /// client-wide lock. A failure recorded at that moment is seen by the
    /// next choice, as if this one had taken the lock a moment earlier.
    pub(crate) fn dead_view(&self) -> DeadView<'_> {
        if self.any_failed.load(Ordering::Acquire) {
            DeadView::Locked(self.dead.lock())
        } else {
            DeadView::Clear(&self.clear, self.created)
        }
    }

    /// Records that `server` answered a new connection: alive, its backoff
    /// reset. Returns whether it had failures on record.
    pub(crate) fn succeeded(&self, server: ServerId) -> bool {
        let mut dead = self.dead.lock();
        let failures = dead.failures(server);
        dead.record_success(server);
        if failures > 0 && dead.is_clear() {
            self.any_failed.store(false, Ordering::Release);
        }
        failures > 0
    }

    /// Switches to `topology`, keeping the slots and the dead-host state of
    /// servers that stay.
    pub(crate) fn set_topology(&self, topology: Topology) {
        let topology = Arc::new(topology);
        let (added, removed) = {
            let mut current = self.snapshot.write();
            let mut dead = self.dead.lock();
            *dead = dead.carry_over(&current.topology, &topology);
            self.any_failed.store(!dead.is_clear(), Ordering::Release);
            let next = Snapshot::new(topology, Some(&current), &self.settings, &self.groups);
            let missing = |from: &Snapshot, of: &Snapshot| -> Vec<String> {
                of.names
                    .iter()
                    .filter(|n| !from.by_name.contains_key(*n))
                    .map(ToString::to_string)
                    .collect()
            };
            let changes = (missing(&current, &next), missing(&next, &current));
            *current = Arc::new(next);
            changes
        };
        self.events
            .emit(|| Event::TopologyChanged { added, removed });
    }

    /// The slot's connection if it is open (no opening, no `await`), with
    /// the slot serving: with several slots, an idle connection rather than
    /// a busy one (see [`slot::pick`]).
    pub(crate) fn live_connection(
        &self,
        snap: &Snapshot,
        server: ServerId,
        slot: usize,
    ) -> Option<(Connection, usize)> {
        match &snap.slots[server.0][..] {
            // One connection per server (the default): nothing to choose.
            [only] => only.live().map(|conn| (conn, 0)),
            slots => slot::pick(slots, slot),
        }
    }

    /// The connection of a slot, opening it if needed (unless the server is
    /// in its dead-host backoff).
    ///
    /// The open connection is returned without an `await`; opening one
    /// (connect, TLS, login, probe: a future of kilobytes) is boxed, so the
    /// future of every request that awaits this one stays small and moving
    /// it costs no large copy.
    pub(crate) async fn connection(
        &self,
        snap: &Snapshot,
        server: ServerId,
        slot: usize,
    ) -> Result<Connection, Error> {
        match snap.slot(server, slot).live() {
            Some(conn) => Ok(conn),
            None => Box::pin(self.open_slot(snap, server, slot)).await,
        }
    }

    /// Lets go of every connection of `server` (requests in flight finish on
    /// them); the next request connects anew.
    pub(crate) fn release_server(&self, snap: &Snapshot, server: ServerId) {
        for slot in &snap.slots[server.0] {
            let released = slot.conn.lock().take();
            drop(released);
        }
    }

    /// Why `server` refused the last login, if it did (its slots remember).
    pub(crate) fn refused(&self, snap: &Snapshot, server: ServerId) -> Option<Error> {
        snap.slots[server.0]
            .iter()
            .find_map(|slot| slot.refused.lock().clone())
    }

    /// A request to `server` timed out. The timeouts in a row reaching the
    /// setting mark it down like a broken connection (the same backoff), and
    /// every request waiting on its connections ends at once, so reads fail
    /// over and writes report the group instead of each waiting out its
    /// timeout while the server is stalled.
    pub(crate) fn timed_out(&self, snap: &Snapshot, server: ServerId) {
        let limit = self.settings.timeouts_until_down;
        let in_a_row = snap.counters(server).timed_out();
        // A server just back from its backoff that times out again (its
        // probe, or its first requests) goes straight back down.
        let recovering = self.dead.lock().failures(server) > 0;
        if limit == 0 || (in_a_row < limit && !recovering) {
            return;
        }
        snap.counters(server).answered();
        let error = Error::new(
            ErrorKind::ServerDead,
            format!("marked down after {in_a_row} timeouts in a row"),
        )
        .at(snap.name(server));
        self.failed(snap, server, &error);
        for slot in &snap.slots[server.0] {
            if let Some(conn) = slot.conn.lock().take() {
                conn.abort(&error);
            }
        }
    }

    /// Records that `server`'s connection in `slot` broke: the server enters
    /// its backoff and the slot lets go of the connection.
    pub(crate) fn connection_failed(
        &self,
        snap: &Snapshot,
        server: ServerId,
        slot: usize,
        error: &Error,
    ) {
        self.failed(snap, server, error);
        snap.slot(server, slot).release_failed();
    }

    /// Opens every connection slot of every server now. Fails only if no
    /// server could be reached.
    pub(crate) async fn connect_all(&self) -> Result<(), Error> {
        let snap = self.snapshot();
        let mut futures: Vec<BoxFuture<'_, Result<(), Error>>> = Vec::new();
        for (server, slots) in snap.slots.iter().enumerate() {
            for slot in 0..slots.len() {
                let snap = &snap;
                futures.push(Box::pin(async move {
                    self.connection(snap, ServerId(server), slot)
                        .await
                        .map(drop)
                }));
            }
        }
        let results = join_all(futures).await;
        if results.iter().any(Result::is_ok) {
            return Ok(());
        }
        Err(results
            .into_iter()
            .find_map(Result::err)
            .unwrap_or_else(|| Error::new(ErrorKind::Config, "no servers")))
    }
}

mod dead;
mod open;
mod slot;
#[cfg(test)]
mod tests;
