//! The idle check: whether a connection nobody reads (no reply due) was
//! closed by the server or sent something unasked, seen only in the
//! socket's readiness.

use super::transport::Filled;
use super::{ReadSide, Shared};
use crate::clock::now;
use crate::error::{Error, ErrorKind};

/// How long a connection must have been quiet before its idle check reads
/// the socket. A lone caller reads its own reply and stops short of
/// `WouldBlock`, so the socket's readiness stays set and every check right
/// after a reply costs a `recvfrom` that fails with `EAGAIN` — one wasted
/// system call per operation at light load. A server closing the
/// connection within this window is found by the next request instead, as
/// one that closes it between a check and a write always was.
pub(super) const IDLE_CHECK_AFTER: std::time::Duration = std::time::Duration::from_millis(50);

impl Shared {
    /// Whether an idle connection (nobody reading, no reply due) was closed
    /// by the server or sent something unasked: nobody reads it, so that
    /// shows only in the socket's readiness. Fails the connection if so.
    pub(super) fn idle_check(&self) -> bool {
        // Replies are due (the usual case under load): someone reads.
        if !self.state.lock().read_idle() {
            return false;
        }
        // Someone holds the read side: they are reading, so it is not idle.
        let Some(mut side) = self.read_side.try_lock() else {
            return false;
        };
        // Just answered: the readiness is most likely the stale one of that
        // reply, not a close (see IDLE_CHECK_AFTER).
        if side
            .last_read
            .is_some_and(|at| now().saturating_duration_since(at) < IDLE_CHECK_AFTER)
        {
            return false;
        }
        if !self.transport.is_readable_now() {
            return false;
        }
        let error = {
            // Held while reading, so no request is queued meanwhile whose
            // reply could be taken for stray bytes.
            let state = self.state.lock();
            if !state.read_idle() || state.closed().is_some() {
                return false;
            }
            let ReadSide { buf, .. } = &mut *side;
            match self.transport.fill(buf) {
                Ok(Filled::Eof) => {
                    Error::new(ErrorKind::Connection, "connection closed by the server")
                }
                Ok(Filled::Bytes(n)) if n > 0 => Error::new(
                    ErrorKind::Protocol,
                    format!("{n} unsolicited bytes from the server"),
                ),
                // Stale readiness (the last read stopped short of
                // `WouldBlock`), now cleared, or TLS records without data
                // (session tickets).
                Ok(Filled::Bytes(_) | Filled::Blocked) => return false,
                Err(error) => error,
            }
        };
        drop(side);
        self.fail(&error.at(&self.server));
        true
    }
}
