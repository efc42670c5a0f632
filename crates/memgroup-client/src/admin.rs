//! Per-server commands: `stats`, `version` and `flush_all`, sent once to every
//! distinct server (on its first connection slot), concurrently.

use memgroup_proto::{Key, Request, Response};
use memgroup_topology::{GroupId, ServerId, Target};

use crate::client::{Client, unexpected};
use crate::error::Error;
use crate::item::ServerStats;
use crate::join::{BoxFuture, join_all};
use crate::trace::Attempt;

/// One server's answer: its group (the first it belongs to), its server and
/// the reply.
struct Answer {
    group: GroupId,
    server: ServerId,
    reply: Result<Option<Response>, Error>,
}

impl Client {
    /// `stats` (or `stats <group>`) of every server. `stats reset` (which
    /// zeroes the servers' counters) answers with no statistics.
    pub async fn stats(&self, arg: Option<&str>) -> Result<Vec<ServerStats>, Error> {
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

    /// The version of every server, as `(group, server, version)`.
    pub async fn version(&self) -> Vec<(String, String, Result<String, Error>)> {
        let snap = self.snapshot();
        self.servers_of(None, &Request::Version)
            .await
            .into_iter()
            .map(|a| {
                let version = a.reply.and_then(|r| match r {
                    Some(Response::Version(v)) => Ok(String::from_utf8_lossy(&v).into_owned()),
                    other => Err(unexpected(other.as_ref())),
                });
                (
                    snap.topology.group(a.group).name().to_string(),
                    snap.name(a.server).to_string(),
                    version,
                )
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
                    Answer {
                        group: target.group,
                        server,
                        reply: self.exec(snap, target, request, Attempt::First).await,
                    }
                }));
            }
        }
        join_all(futures).await
    }
}
