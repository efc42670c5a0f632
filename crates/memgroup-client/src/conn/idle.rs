//! The idle check: whether a connection nobody reads (no reply due) was
//! closed by the server or sent something unasked, seen only in the
//! socket's readiness.
//!
//! The readiness is exact here: a read that takes all the socket has clears
//! it ([`Transport::fill`](super::transport::Transport::fill)), so a
//! connection whose last reply was read whole is not readable until the
//! server sends or closes, and the check costs no system call.

use super::transport::Filled;
use super::{ReadSide, Shared};
use crate::error::{Error, ErrorKind};

impl Shared {
    /// Whether an idle connection (nobody reading, no reply due) was closed
    /// by the server or sent something unasked: nobody reads it, so that
    /// shows only in the socket's readiness. Fails the connection if so.
    pub(super) fn idle_check(&self) -> bool {
        // Nothing arrived (the usual case): no lock taken.
        if !self.transport.is_readable_now() {
            return false;
        }
        // Replies are due (the usual case under load): someone reads.
        if !self.state.lock().read_idle() {
            return false;
        }
        // Someone holds the read side: they are reading, so it is not idle.
        let Some(mut side) = self.read_side.try_lock() else {
            return false;
        };
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
                // Stale readiness (the last read filled the buffer to the
                // brim), now cleared, or TLS records without data (session
                // tickets).
                Ok(Filled::Bytes(_) | Filled::Blocked) => return false,
                Err(error) => error,
            }
        };
        drop(side);
        self.fail(&error.at(&self.server));
        true
    }
}
