//! Per-server commands: `stats`, `version` (as [`Client::probe`]), `flush_all` and `cache_memlimit`, sent once to every
//! distinct server (on its first connection slot), concurrently.

use std::time::Duration;

use memgroup_proto::{Key, Request, Response};
use memgroup_topology::{GroupId, ServerId, Target};

use crate::client::trace::Attempt;
use crate::client::{Client, unexpected};
use crate::clock::now;
use crate::error::Error;
use crate::item::ServerStats;
use crate::join::{BoxFuture, join_all};

/// One server's answer: its group (the first it belongs to), its server and
/// the reply.
struct Answer {
    group: GroupId,
    server: ServerId,
    reply: Result<Option<Response>, Error>,
    /// From sending the request to its reply (connecting included).
    round_trip: Duration,
}

/// One server's answer to a [`Client::probe`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Probe {
    /// The first group it belongs to.
    pub group: String,
    /// `host:port`.
    pub server: String,
    /// Its version, or why it did not answer.
    pub version: Result<String, Error>,
    /// How long the answer took (connecting included, if a connection had
    /// to be opened).
    pub round_trip: Duration,
}

impl Client {
    /// `stats` (or `stats <group>`) of every server. `stats reset` (which
    /// zeroes the servers' counters) answers with no statistics.
    pub async fn server_stats(&self, arg: Option<&str>) -> Result<Vec<ServerStats>, Error> {
        let arg = arg.map(|a| Key::new(a.as_bytes())).transpose()?;
        let request = Request::Stats { arg };
        let snap = self.snapshot();
        let answers = self.servers_of(None, &request).await;
        Ok(answers
            .into_iter()
            .map(|a| ServerStats {
                group: snap.topology.group(a.group).name().to_string(),
                server: snap.name(a.server).to_string(),
                stats: a.reply.and_then(|r| match r {
                    Some(Response::Stats(stats)) => Ok(stats
                        .iter()
                        .map(|s| (s.name_str().to_string(), s.value_str().to_string()))
                        .collect()),
                    // `stats reset` answers `RESET`.
                    Some(Response::Ok) => Ok(Default::default()),
                    other => Err(unexpected(other.as_ref())),
                }),
            })
            .collect())
    }

    /// Asks every server for its version, concurrently, timing each answer:
    /// a health check (a server that does not answer within the timeout is
    /// marked dead, as after any failed request).
    pub async fn probe(&self) -> Vec<Probe> {
        let snap = self.snapshot();
        self.servers_of(None, &Request::Version)
            .await
            .into_iter()
            .map(|a| Probe {
                group: snap.topology.group(a.group).name().to_string(),
                server: snap.name(a.server).to_string(),
                version: a.reply.and_then(|r| match r {
                    Some(Response::Version(v)) => Ok(String::from_utf8_lossy(&v).into_owned()),
                    other => Err(unexpected(other.as_ref())),
                }),
                round_trip: a.round_trip,
            })
            .collect()
    }

    /// Invalidates every item on every server of `group` (all groups when
    /// `None`).
    pub async fn flush_all(&self, group: Option<&str>) -> Result<(), Error> {
        let only = group
            .map(|name| self.snapshot().group_id(name))
            .transpose()?;
        let request = Request::FlushAll {
            delay: None,
            noreply: false,
        };
        for answer in self.servers_of(only, &request).await {
            answer.reply?;
        }
        Ok(())
    }

    /// Sets the memory limit of every server of every group to `megabytes`
    /// (`cache_memlimit`). A server's refusal (under 8 megabytes, or over
    /// 1,000,000,000: bytes mistaken for megabytes) is its error, the
    /// others keep the new limit.
    pub async fn cache_memlimit(&self, megabytes: u32) -> Result<(), Error> {
        let request = Request::CacheMemlimit {
            megabytes,
            noreply: false,
        };
        for answer in self.servers_of(None, &request).await {
            match answer.reply? {
                Some(Response::Ok) => {}
                other => return Err(unexpected(other.as_ref())),
            }
        }
        Ok(())
    }

    /// Sends `request` once to every distinct server of `group` (of every
    /// group when `None`), on slot 0.
    async fn servers_of(&self, group: Option<GroupId>, request: &Request<'_>) -> Vec<Answer> {
        let snap = self.snapshot();
        let mut seen = vec![false; snap.server_count()];
        let mut futures: Vec<BoxFuture<'_, Answer>> = Vec::new();
        for g in snap.topology.groups() {
            if group.is_some_and(|only| only != g.id()) {
                continue;
            }
            for &server in g.servers() {
                if std::mem::replace(&mut seen[server.0], true) {
                    continue;
                }
                let snap = &snap;
                let target = Target {
                    group: g.id(),
                    server,
                    slot: 0,
                };
                futures.push(Box::pin(async move {
                    let started = now();
                    let reply = self.exec(snap, target, request, Attempt::First).await;
                    Answer {
                        group: target.group,
                        server,
                        reply,
                        round_trip: now() - started,
                    }
                }));
            }
        }
        join_all(futures).await
    }

    /// The metadata of a key's copy at the arbiter group (`me <key>`: the
    /// server's `ME <key> exp=… la=… cas=… fetch=… cls=… size=…` reply, its
    /// fields raw in [`MetaResponse::flags`](memgroup_proto::MetaResponse::flags)),
    /// `None` when that copy is absent: what a proxy answers to `me`.
    pub async fn meta_debug(
        &self,
        key: impl AsRef<[u8]>,
    ) -> Result<Option<memgroup_proto::MetaResponse>, Error> {
        let snap = self.snapshot();
        let wire = self.wire_key(&snap, key.as_ref())?;
        let group = snap.topology.arbiters()[0];
        let target = crate::client::exec::own_target(&snap, group, wire.bytes_of(group));
        let request = Request::MetaDebug {
            key: wire.key_of(group),
        };
        self.meta_at(&snap, target, &request, Attempt::First).await
    }
}
