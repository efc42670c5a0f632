//! Connection slots: `pool_size` lazily opened connections per server,
//! reconnected after the topology's dead-host backoff.

use std::sync::Arc;

use memgroup_topology::{ServerId, Topology};
use parking_lot::Mutex;

use crate::conn::Connection;

/// One connection slot of one server.
#[derive(Debug, Default)]
pub(crate) struct Slot {
    /// The live connection, if any. A closed one is replaced on next use.
    pub(crate) conn: Mutex<Option<Connection>>,
    /// Held while connecting so concurrent callers wait for one attempt
    /// instead of each opening a socket.
    pub(crate) connecting: tokio::sync::Mutex<()>,
}

impl Slot {
    /// The slot's connection, if it is open.
    pub(crate) fn live(&self) -> Option<Connection> {
        let conn = self.conn.lock().clone()?;
        if conn.is_closed() {
            self.release_failed();
            return None;
        }
        Some(conn)
    }

    /// Lets go of the slot's connection if it has failed, so its socket
    /// closes as soon as the callers still holding it are done.
    pub(crate) fn release_failed(&self) {
        let mut slot = self.conn.lock();
        let failed = slot.take_if(|c| c.is_closed());
        drop(slot);
        drop(failed);
    }
}

/// A topology together with the connection slots of its servers. Swapped as
/// a whole on a topology change; slots of servers that stay are shared with
/// the previous snapshot, so their connections survive the change.
#[derive(Debug)]
pub(crate) struct Snapshot {
    pub(crate) topology: Arc<Topology>,
    /// `slots[server][slot]`, the number of slots being the largest
    /// `pool_size` of the groups the server belongs to.
    pub(crate) slots: Vec<Vec<Arc<Slot>>>,
    /// `host:port` of each server, for connecting and for error messages.
    pub(crate) names: Vec<Arc<str>>,
}

impl Snapshot {
    pub(crate) fn new(topology: Arc<Topology>, previous: Option<&Snapshot>) -> Snapshot {
        let names: Vec<Arc<str>> = topology
            .servers()
            .iter()
            .map(|a| Arc::from(a.to_string()))
            .collect();
        let mut sizes = vec![1usize; names.len()];
        for group in topology.groups() {
            for &server in group.servers() {
                sizes[server.0] = sizes[server.0].max(group.pool_size());
            }
        }
        let slots = names
            .iter()
            .zip(sizes)
            .map(|(name, size)| {
                let old = previous
                    .and_then(|p| p.names.iter().position(|n| n == name).map(|i| &p.slots[i]));
                (0..size)
                    .map(|i| old.and_then(|o| o.get(i).cloned()).unwrap_or_default())
                    .collect()
            })
            .collect();
        Snapshot {
            topology,
            slots,
            names,
        }
    }

    pub(crate) fn slot(&self, server: ServerId, slot: usize) -> &Arc<Slot> {
        let slots = &self.slots[server.0];
        &slots[slot % slots.len()]
    }

    pub(crate) fn name(&self, server: ServerId) -> &Arc<str> {
        &self.names[server.0]
    }
}
