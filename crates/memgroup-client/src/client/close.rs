//! Closing: the writes still finishing and the repair queue drained up to
//! a deadline, and what is still owed left in the repair journal.

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::Client;
use crate::clock::now;
use crate::error::{Error, ErrorKind};
#[cfg(doc)]
use crate::{RepairStatus, WriteWait};

impl Client {
    /// Waits, for at most `deadline`, until the writes still finishing in
    /// the background (groups a write did not wait for, see
    /// [`WriteWait::Policy`]) are done and the repair queue is drained
    /// ([`RepairStatus`]): call it before the process exits, since both
    /// live in memory. The client stays usable. A repair whose server is
    /// down cannot drain: then the error, an [`ErrorKind::Timeout`], says
    /// what is left — at once when every such server stays in its backoff
    /// past the deadline.
    pub async fn close(&self, deadline: Duration) -> Result<(), Error> {
        let waited = self.drain_until(deadline).await;
        if waited.is_err() && self.inner.background.load(Ordering::Acquire) > 0 {
            // Writes still outstanding in some group: each such group owes
            // a repair, queued (and so journaled) by the task finishing it.
            self.inner.closing.send_replace(true);
            for _ in 0..100 {
                if self.inner.background.load(Ordering::Acquire) == 0 {
                    break;
                }
                tokio::task::yield_now().await;
            }
            self.inner.closing.send_replace(false);
        }
        // What is still owed goes to the journal, compacted to just that.
        let journaled = match (
            &self.inner.repairs.journal,
            self.inner.repairs.compact_journal(),
        ) {
            (None, _) => None,
            (Some(journal), Ok(owed)) => Some(Ok((journal.dir().to_path_buf(), owed.len()))),
            (Some(_), Err(e)) => Some(Err(e)),
        };
        match (waited, journaled) {
            (Ok(()), _) => Ok(()),
            (Err(e), None) => Err(e),
            (Err(e), Some(Ok((dir, owed)))) => Err(Error::new(
                ErrorKind::Timeout,
                format!(
                    "{}; {owed} journaled in {} (done by the next client that opens it, or `memgroup repair`)",
                    e.message(),
                    dir.display()
                ),
            )),
            (Err(e), Some(Err(io))) => Err(Error::new(
                ErrorKind::Timeout,
                format!("{}; not journaled: {io}", e.message()),
            )),
        }
    }

    /// [`Client::close`]'s wait: until nothing is left to drain, or the
    /// deadline.
    async fn drain_until(&self, deadline: Duration) -> Result<(), Error> {
        let until = now() + deadline;
        loop {
            let settled = self.inner.settled.notified();
            tokio::pin!(settled);
            settled.as_mut().enable();
            let background = self.inner.background.load(Ordering::Acquire);
            let repairs = self.inner.repairs.status().pending;
            if background == 0 && repairs == 0 {
                return Ok(());
            }
            let left = until.saturating_duration_since(now());
            let stuck = background == 0 && self.repairs_stuck_until(until);
            if left.is_zero() || stuck {
                let why = match (stuck, repairs) {
                    (true, 1) => "its server is down past the deadline".to_string(),
                    (true, _) => "their servers are down past the deadline".to_string(),
                    (false, _) => format!("after {deadline:?}"),
                };
                let counted = |n: usize, what: &str| match n {
                    1 => format!("1 {what}"),
                    n => format!("{n} {what}s"),
                };
                let left = match (background, repairs) {
                    (0, r) => counted(r, "repair"),
                    (b, 0) => counted(b, "background write"),
                    (b, r) => format!(
                        "{} and {}",
                        counted(b, "background write"),
                        counted(r, "repair")
                    ),
                };
                return Err(Error::new(
                    ErrorKind::Timeout,
                    format!("closing: {left} still pending ({why})"),
                ));
            }
            let _ = tokio::time::timeout(left, settled).await;
        }
    }

    /// Whether every pending repair's server stays in its backoff past
    /// `until`: then waiting cannot drain them. Not when no repair is queued
    /// any more (the count the caller read is older: the drain finished
    /// them meanwhile), which every server would vacuously satisfy.
    fn repairs_stuck_until(&self, until: std::time::Instant) -> bool {
        let snap = self.snapshot();
        let dead = self.inner.pool.dead();
        stuck(&self.inner.repairs.servers(), |name| {
            snap.server_by_name(name)
                .is_ok_and(|id| dead.dead_until(id).is_some_and(|t| t > until))
        })
    }
}

/// Whether repairs on `servers` cannot drain: there are some, and every
/// one of their servers is `down` past the deadline.
fn stuck(servers: &[std::sync::Arc<str>], down: impl Fn(&str) -> bool) -> bool {
    !servers.is_empty() && servers.iter().all(|name| down(name))
}

#[cfg(test)]
mod tests {
    /// A queue drained since its count was read is not stuck: the close
    /// waits again (and finds nothing left) instead of failing with the
    /// old count as "still pending".
    #[test]
    fn a_drained_queue_is_not_stuck() {
        assert!(!super::stuck(&[], |_| true));
        let servers = ["a:1".into(), "b:2".into()];
        assert!(super::stuck(&servers, |_| true));
        assert!(!super::stuck(&servers, |name| name == "a:1"));
    }
}
