//! Opening a slot's connection: the slow path of
//! [`Pool::connection`](super::Pool::connection), boxed there so the future
//! of every request stays small.

use memgroup_topology::ServerId;

use super::{Pool, Snapshot};
use crate::clock::now;
use crate::conn::Connection;
use crate::error::{Error, ErrorKind};
use crate::events::Event;

impl Pool {
    /// Opens the connection of a slot found without one (see
    /// [`Pool::connection`]).
    pub(super) async fn open_slot(
        &self,
        snap: &Snapshot,
        server: ServerId,
        slot: usize,
    ) -> Result<Connection, Error> {
        let entry = snap.slot(server, slot);
        // A server back from its backoff is being probed by one caller: the
        // others do not queue behind the probe (a stalled server would hold
        // each of them for its timeout) but pass it over as still down.
        let on_probation = self.dead.lock().failures(server) > 0;
        let _connecting = match entry.connecting.try_lock() {
            Ok(guard) => guard,
            Err(_) if on_probation => {
                return Err(Error::new(
                    ErrorKind::ServerDead,
                    "server is being probed after its backoff",
                )
                .at(snap.name(server)));
            }
            Err(_) => entry.connecting.lock().await,
        };
        if let Some(conn) = entry.live() {
            return Ok(conn);
        }
        let name = snap.name(server);
        if self.dead.lock().is_dead(server, now()) {
            if let Some(refused) = entry.refused.lock().clone() {
                return Err(refused);
            }
            return Err(
                Error::new(ErrorKind::ServerDead, "server is marked dead (backoff)").at(name),
            );
        }
        let counters = snap.counters(server).clone();
        let was_down = self.dead.lock().failures(server) > 0;
        let opened =
            Connection::connect(name, snap.settings(server), counters, entry.callers.clone()).await;
        // A server coming back from its backoff must answer before it takes
        // requests: a stopped process still accepts connections (the
        // kernel's backlog), so a connect proves nothing.
        let opened = match opened {
            Ok(conn) if was_down => probe(&conn, snap.settings(server).connect_timeout)
                .await
                .map(|()| conn)
                .map_err(|e| e.at(name)),
            other => other,
        };
        match opened {
            Ok(conn) => {
                #[cfg(feature = "tracing")]
                tracing::debug!(server = %name, slot, "connection opened");
                let was_down = self.succeeded(server);
                if was_down {
                    self.events.emit(|| Event::ServerUp {
                        server: name.to_string(),
                    });
                }
                *entry.refused.lock() = None;
                *entry.conn.lock() = Some(conn.clone());
                Ok(conn)
            }
            Err(e) => {
                // A refused login or TLS handshake backs the server off like
                // a failure, so it is not retried in a tight loop.
                self.failed(snap, server, &e);
                *entry.refused.lock() = e.is_refusal().then(|| e.clone());
                Err(e)
            }
        }
    }
}

/// Asks a reopened connection for the server's version within `timeout`:
/// `Ok` once it answers.
async fn probe(conn: &Connection, timeout: std::time::Duration) -> Result<(), Error> {
    match conn
        .call(
            &memgroup_proto::Request::Version,
            crate::clock::deadline(now(), timeout),
        )
        .await
    {
        Ok(Some(memgroup_proto::Response::Version(_))) => Ok(()),
        Ok(other) => Err(Error::new(
            ErrorKind::Protocol,
            format!("unexpected reply to the probe: {other:?}"),
        )),
        Err(e) if e.is_timeout() => Err(Error::new(
            ErrorKind::Timeout,
            format!(
                "the server accepted a connection but did not answer a probe within {timeout:?}"
            ),
        )),
        Err(e) => Err(e),
    }
}
