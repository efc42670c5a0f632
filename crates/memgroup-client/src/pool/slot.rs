//! One connection slot, and the choice among a server's slots.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use parking_lot::Mutex;

use crate::conn::Connection;
use crate::error::Error;

/// One connection slot of one server.
#[derive(Debug, Default)]
pub(crate) struct Slot {
    /// The live connection, if any. A closed one is replaced on next use.
    pub(super) conn: Mutex<Option<Connection>>,
    /// Held while connecting so concurrent callers wait for one attempt
    /// instead of each opening a socket.
    pub(super) connecting: tokio::sync::Mutex<()>,
    /// The server refused the last login: during the backoff callers get
    /// this error, not a generic "server dead", so the cause stays visible.
    pub(super) refused: Mutex<Option<Error>>,
    /// The callers holding a place on the slot's connections (the one open
    /// and any closed one still answering), added up by their states: the
    /// slot's load, read without a lock.
    pub(super) callers: Arc<AtomicUsize>,
}

impl Slot {
    /// The slot's connection, if it is open.
    pub(super) fn live(&self) -> Option<Connection> {
        let conn = self.conn.lock().clone()?;
        if conn.is_closed() {
            self.release_failed();
            return None;
        }
        Some(conn)
    }

    /// Lets go of the slot's connection if it has failed, so its socket
    /// closes as soon as the callers still holding it are done.
    pub(super) fn release_failed(&self) {
        let mut slot = self.conn.lock();
        let failed = slot.take_if(|c| c.is_closed());
        drop(slot);
        drop(failed);
    }
}

/// The connection of `slots[slot]` if it is open, with the slot serving:
/// at light load (the server's slots hold fewer callers than it has slots),
/// when this slot's connection is busy, an idle open connection of another
/// of its slots (the first after `slot`) serves instead.
///
/// Rotating slots alone let callers meet on one connection while another
/// sat idle: at 4 callers and a pool of 4, a request often queued behind
/// another's (and the reply went through the reader task) while a
/// connection had nothing to do. Taking an idle one gives each caller a
/// connection of its own at light load, where a lone caller writes its
/// request and reads its reply without a task switch. Under load the
/// rotation's slot serves: load spreads evenly, and concurrent `get`s still
/// merge into a few long commands (sending each to an idle connection as
/// one frees up cost a tenth of the throughput at 32 callers on 4
/// connections). Only the connection changes: the request still goes to
/// the same server, once. `slots` holds two or more.
pub(super) fn pick(slots: &[Arc<Slot>], slot: usize) -> Option<(Connection, usize)> {
    let slot = slot % slots.len();
    let conn = slots[slot].live()?;
    if slots[slot].callers.load(Ordering::Relaxed) == 0 {
        return Some((conn, slot));
    }
    let held: usize = slots
        .iter()
        .map(|s| s.callers.load(Ordering::Relaxed))
        .sum();
    if held >= slots.len() {
        return Some((conn, slot));
    }
    let idle = (1..slots.len())
        .map(|step| (slot + step) % slots.len())
        .filter(|&other| slots[other].callers.load(Ordering::Relaxed) == 0)
        .find_map(|other| slots[other].live().map(|c| (c, other)));
    Some(idle.unwrap_or((conn, slot)))
}
