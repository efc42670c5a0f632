//! One connection slot, and the choice among a server's slots.

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
/// when the server has several slots and this one's connection is busy, but
/// with fewer callers than the server has slots, an idle open connection of
/// another of its slots (the first after `slot`) serves instead.
///
/// Rotating slots alone let callers meet on one connection while another
/// sat idle: at 4 callers and a pool of 4, a request often queued behind
/// another's (and the reply went through the reader task) while a
/// connection had nothing to do. Taking an idle one gives each caller a
/// connection of its own at light load, where a lone caller writes its
/// request and reads its reply without a task switch. Under load (as many
/// callers on this connection as the server has connections, or more)
/// another is seldom idle, so the rotation's slot serves without a look at
/// the others: load still spreads evenly, and concurrent `get`s still merge.
/// Only the connection changes: the request still goes to the same server,
/// once.
pub(super) fn pick(slots: &[std::sync::Arc<Slot>], slot: usize) -> Option<(Connection, usize)> {
    let slot = slot % slots.len();
    let conn = slots[slot].live()?;
    let callers = conn.callers();
    if slots.len() == 1 || callers == 0 || callers >= slots.len() {
        return Some((conn, slot));
    }
    let idle = (1..slots.len())
        .map(|step| (slot + step) % slots.len())
        .find_map(|other| {
            let found = slots[other]
                .conn
                .lock()
                .as_ref()
                .filter(|c| c.is_idle() && !c.is_closed())
                .cloned();
            found.map(|c| (c, other))
        });
    Some(idle.unwrap_or((conn, slot)))
}
