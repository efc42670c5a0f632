//! `exec`, the one step every operation shares: one request to one target
//! (a connection slot), within the client's timeout, its reply checked.

use memgroup_proto::{Request, Response};
use memgroup_topology::Target;

use super::trace::{self, Attempt};
use super::{Client, unexpected};
use crate::clock::now;
use crate::error::{Error, ErrorKind};
use crate::pool::Snapshot;

impl Client {
    /// A meta request at `target`: its reply, `None` for `EN` (a meta get's
    /// miss); any other kind of reply is a protocol error.
    pub(crate) async fn meta_at(
        &self,
        snap: &Snapshot,
        target: Target,
        request: &Request<'_>,
        attempt: Attempt,
    ) -> Result<Option<memgroup_proto::MetaResponse>, Error> {
        match self.exec(snap, target, request, attempt).await? {
            Some(Response::Meta(m)) if m.status == memgroup_proto::MetaStatus::En => Ok(None),
            Some(Response::Meta(m)) => Ok(Some(m)),
            other => Err(unexpected(other.as_ref())),
        }
    }

    /// The CAS unique of the copy of the wire key `key` at `target`, read
    /// by `me` (meta debug: no value, no LRU bump, and no win token taken
    /// from an invalidated item, as any `mg` would); `None` when absent.
    pub(crate) async fn cas_at(
        &self,
        snap: &Snapshot,
        target: Target,
        key: &[u8],
    ) -> Result<Option<u64>, Error> {
        let request = Request::MetaDebug {
            key: memgroup_proto::Key::new_raw(key).expect("a valid wire key"),
        };
        match self
            .meta_at(snap, target, &request, Attempt::Repair)
            .await?
        {
            None => Ok(None),
            Some(m) => match debug_cas(&m.flags) {
                Some(cas) => Ok(Some(cas)),
                None => Err(unexpected(Some(&Response::Meta(m)))),
            },
        }
    }

    /// Deletes the copy of the wire key `key` at `target` only if it still
    /// has the CAS unique `cas` (`md … C<cas>`): a copy written since stays.
    /// The server's answer (`HD` deleted, `NF` absent, `EX` another copy).
    pub(crate) async fn delete_if_cas(
        &self,
        snap: &Snapshot,
        target: Target,
        key: &[u8],
        cas: u64,
    ) -> Result<Option<memgroup_proto::MetaResponse>, Error> {
        let flags = [memgroup_proto::MetaFlag::CompareCas(cas)];
        let request = Request::MetaDelete {
            key: memgroup_proto::Key::new_raw(key).expect("a valid wire key"),
            flags: &flags,
        };
        self.meta_at(snap, target, &request, Attempt::Repair).await
    }

    /// Sends one request to one target within the timeout. A broken
    /// connection marks the server dead (backoff) and frees the slot; error
    /// replies (`SERVER_ERROR`, `CLIENT_ERROR`, `ERROR`) become errors.
    pub(crate) async fn exec(
        &self,
        snap: &Snapshot,
        target: Target,
        request: &Request<'_>,
        attempt: Attempt,
    ) -> Result<Option<Response>, Error> {
        let started = now();
        // What hedging and the read queue bound look at, kept only where
        // there is another group to read from (shared atomics per request).
        let watched = snap.topology.groups().len() > 1;
        let _outstanding = watched.then(|| {
            let counters = snap.counters(target.server);
            counters.sent(crate::clock::nanos(started));
            counters.outstanding()
        });
        let span = trace::request_span(
            snap.topology.group(target.group).name(),
            snap.name(target.server),
            request.command(),
            attempt,
        );
        // Each step is its own `async fn` called in place: a future bound to
        // a local and then awaited is stored twice in the caller's.
        let deadline = crate::clock::deadline(started, self.timeout());
        let result = trace::await_in_span!(
            span,
            self.exec_timed(snap, target, request, watched, deadline)
        );
        trace::request_done(&span, &result);
        let store = matches!(request, Request::Store { .. } | Request::MetaSet { .. });
        snap.counters(target.server).request(
            now() - started,
            store,
            result.as_ref().err().map(Error::kind),
        );
        result
    }

    /// [`Client::exec`]'s request within the timeout, its reply checked.
    async fn exec_timed(
        &self,
        snap: &Snapshot,
        target: Target,
        request: &Request<'_>,
        watched: bool,
        deadline: std::time::Instant,
    ) -> Result<Option<Response>, Error> {
        match self.exec_call(snap, target, request, deadline).await {
            Call::Done(result) => {
                if matches!(result, Ok(Some(_))) {
                    let counters = snap.counters(target.server);
                    counters.answered();
                    if watched {
                        counters.replied(crate::clock::nanos(now()));
                    }
                }
                result.and_then(|r| {
                    r.map(|r| check_reply(r, snap.name(target.server)))
                        .transpose()
                })
            }
            Call::TimedOut { handed } => {
                self.inner.pool.timed_out(snap, target.server);
                let error = Error::new(
                    ErrorKind::Timeout,
                    format!("operation timed out after {:?}", self.timeout()),
                )
                .at(snap.name(target.server));
                Err(if handed {
                    error.handed()
                } else {
                    error.unsent()
                })
            }
        }
    }

    /// [`Client::exec`]'s request on the target's connection; a broken
    /// connection frees the slot and marks the server dead. Timed out when
    /// `deadline` passed first: opening the connection, or waiting for the
    /// reply (the connection's timer says so: no timer per request). An
    /// error after the request was handed to the connection is marked so
    /// ([`Error::may_have_applied`]): its bytes may reach the server.
    async fn exec_call(
        &self,
        snap: &Snapshot,
        target: Target,
        request: &Request<'_>,
        deadline: std::time::Instant,
    ) -> Call {
        let pool = &self.inner.pool;
        let (conn, slot) = match pool.live_connection(snap, target.server, target.slot) {
            Some(live) => live,
            None => {
                let opening = pool.connection(snap, target.server, target.slot);
                match tokio::time::timeout_at(deadline.into(), opening).await {
                    Ok(Ok(conn)) => (conn, target.slot),
                    // Nothing was sent: a write may go to another server.
                    Ok(Err(e)) => return Call::Done(Err(e.unsent())),
                    Err(_) => return Call::TimedOut { handed: false },
                }
            }
        };
        match conn.call(request, deadline).await {
            // The only timeout a call reports: its deadline passed.
            Err(e) if e.is_timeout() => Call::TimedOut { handed: true },
            Err(e) if e.is_connection() || e.is_protocol() => {
                drop(conn);
                pool.connection_failed(snap, target.server, slot, &e);
                Call::Done(Err(e.handed()))
            }
            // Ended unanswered (the server marked down while it waited).
            Err(e) => Call::Done(Err(e.handed())),
            other => Call::Done(other),
        }
    }
}

/// How [`Client::exec_call`] ended.
enum Call {
    /// An answer, or an error.
    Done(Result<Option<Response>, Error>),
    /// The deadline passed; `handed`: after the request went to a connection.
    TimedOut { handed: bool },
}

/// Turns error replies into errors.
fn check_reply(reply: Response, server: &str) -> Result<Response, Error> {
    match reply {
        Response::ServerError(m) => Err(Error::new(
            ErrorKind::Server,
            format!("SERVER_ERROR {}", String::from_utf8_lossy(&m)),
        )
        .at(server)),
        Response::ClientError(m) if m.starts_with(b"unauthenticated") => Err(Error::new(
            ErrorKind::Auth,
            "the server requires authentication (CLIENT_ERROR unauthenticated); configure credentials",
        )
        .at(server)),
        Response::ClientError(m) => Err(Error::new(
            ErrorKind::Client,
            format!("CLIENT_ERROR {}", String::from_utf8_lossy(&m)),
        )
        .at(server)),
        Response::Error => Err(Error::new(ErrorKind::Client, "ERROR (unknown command)").at(server)),
        other => Ok(other),
    }
}

/// The key's own server in `group` (whatever its state), as a target:
/// where a copy is read or deleted by CAS.
pub(crate) fn own_target(snap: &Snapshot, group: memgroup_topology::GroupId, key: &[u8]) -> Target {
    Target {
        group,
        server: snap.topology.group(group).server_for(key),
        slot: 0,
    }
}

/// The `cas=` field of a meta debug reply's `k=v` pairs.
fn debug_cas(fields: &[u8]) -> Option<u64> {
    fields
        .split(|&b| b == b' ')
        .find_map(|field| field.strip_prefix(b"cas="))
        .and_then(|n| std::str::from_utf8(n).ok()?.parse().ok())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_cas_of_a_meta_debug_reply() {
        let reply = b"k exp=-1 la=0 cas=4711 fetch=no cls=1 size=66";
        assert_eq!(super::debug_cas(reply), Some(4711));
        assert_eq!(super::debug_cas(b"k exp=-1 la=0"), None);
        assert_eq!(super::debug_cas(b"k cas=x"), None);
    }
}
