//! [`Client::health`]: a plain snapshot of every server (up or dead, its
//! connections and load) and of the live [counters](crate::counters) the
//! client keeps per server, with totals per group.

use std::time::Duration;

use super::Client;
use super::migrate::{Migration, MigrationStatus};
use super::repair::RepairStatus;
use crate::clock::now;
use crate::counters::Counters;

/// Whether a server is taking requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ServerState {
    /// Up (or never tried).
    Up,
    /// Marked dead after a failure: skipped until the backoff ends.
    Dead {
        /// How long until it is tried again.
        retry_in: Duration,
    },
}

/// One server's state, connections and counters.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ServerHealth {
    /// `host:port`.
    pub server: String,
    /// The groups it belongs to.
    pub groups: Vec<String>,
    /// Up, or dead until when.
    pub state: ServerState,
    /// Failures in a row (0 once a request succeeds again).
    pub failures: u32,
    /// Open connections.
    pub connections: usize,
    /// Requests written and awaiting their reply, over its connections.
    pub in_flight: usize,
    /// Requests queued, not yet written.
    pub queued: usize,
    /// Whether it speaks memcached's meta protocol, once a connection found
    /// out or the settings said ([`ClientBuilder::meta_protocol`](crate::ClientBuilder::meta_protocol)).
    pub meta_protocol: Option<bool>,
    /// Since the client started.
    pub counters: Counters,
}

/// A group's servers, summed.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct GroupHealth {
    /// The group's name.
    pub group: String,
    /// Its servers.
    pub servers: usize,
    /// Those not marked dead.
    pub servers_up: usize,
    /// Its servers' counters summed (a server in several groups counts in each).
    pub counters: Counters,
}

/// A snapshot of the client: see [`Client::health`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Health {
    /// Every server of the topology, in its order.
    pub servers: Vec<ServerHealth>,
    /// Every group, in the topology's order.
    pub groups: Vec<GroupHealth>,
    /// In migration mode, what the old placement served.
    pub migration: Option<MigrationStatus>,
    /// The repair queue: deletes owed to servers that missed a write.
    pub repairs: RepairStatus,
    /// Hedged reads sent since the client started ([`Hedge`](crate::Hedge)).
    pub hedged_reads: u64,
    /// Copies brought in line by read repair
    /// ([`ClientBuilder::read_repair`](crate::ClientBuilder::read_repair))
    /// and consistent reads ([`Client::get_consistent`]): values added to
    /// groups that missed, minority copies deleted.
    pub read_repairs: u64,
    /// Copies deleted by the convergence check of concurrent writes
    /// ([`ClientBuilder::converge`](crate::ClientBuilder::converge)): a
    /// value that lost at the arbiter, where another write's stood.
    pub converged: u64,
    /// The near cache's counters, when it is on
    /// ([`ClientBuilder::near_cache`](crate::ClientBuilder::near_cache)).
    pub near_cache: Option<crate::client::NearStatus>,
    /// Writes still finishing for groups their caller did not wait for
    /// ([`WriteWait::Policy`](crate::WriteWait::Policy)), and copies of read
    /// repair and consistent reads on their way.
    pub background_writes: usize,
    /// The topology serving: 1 for the one the client was built with, one
    /// more for each applied since ([`Client::set_topology`], a watched file).
    pub topology_generation: u64,
    /// How long ago the topology serving was applied.
    pub topology_age: Duration,
}

impl Client {
    /// A snapshot of every server — up or dead (and for how long), failures
    /// in a row, open connections, requests in flight and queued — and what
    /// the client did with it since it started: requests, hits, misses,
    /// fallbacks, errors by kind, timeouts, bytes, latency percentiles; with
    /// totals per group. Reading it takes the pool's locks briefly; the
    /// counters themselves are atomics updated without a lock.
    pub fn health(&self) -> Health {
        let snap = self.snapshot();
        let topology = &snap.topology;
        let now = now();
        let mut parts = Vec::with_capacity(snap.server_count());
        let mut servers = Vec::with_capacity(snap.server_count());
        for (i, _) in topology.servers().iter().enumerate() {
            let id = memgroup_topology::ServerId(i);
            let (state, failures) = {
                let dead = self.inner.pool.dead();
                let state = match dead.dead_until(id) {
                    Some(until) if until > now => ServerState::Dead {
                        retry_in: until - now,
                    },
                    _ => ServerState::Up,
                };
                (state, dead.failures(id))
            };
            let (connections, in_flight, queued) = snap.load(id);
            let (counters, latency) = snap.counters(id).snapshot();
            let groups = topology
                .groups()
                .iter()
                .filter(|g| g.servers().contains(&id))
                .map(|g| g.name().to_string())
                .collect();
            servers.push(ServerHealth {
                server: snap.name(id).to_string(),
                groups,
                state,
                failures,
                connections,
                in_flight,
                queued,
                meta_protocol: snap.counters(id).meta(),
                counters: counters.clone(),
            });
            parts.push((counters, latency));
        }
        let groups = topology
            .groups()
            .iter()
            .map(|g| {
                let members: Vec<usize> = g.servers().iter().map(|s| s.0).collect();
                let mine: Vec<(Counters, Vec<u64>)> =
                    members.iter().map(|&i| parts[i].clone()).collect();
                GroupHealth {
                    group: g.name().to_string(),
                    servers: members.len(),
                    servers_up: members
                        .iter()
                        .filter(|&&i| servers[i].state == ServerState::Up)
                        .count(),
                    counters: Counters::sum(&mine),
                }
            })
            .collect();
        Health {
            servers,
            groups,
            migration: self.migration().as_deref().map(Migration::status),
            repairs: self.inner.repairs.status(),
            hedged_reads: self
                .inner
                .hedging
                .hedged
                .load(std::sync::atomic::Ordering::Relaxed),
            read_repairs: self
                .inner
                .read_repairs
                .load(std::sync::atomic::Ordering::Relaxed),
            converged: self
                .inner
                .converged
                .load(std::sync::atomic::Ordering::Relaxed),
            near_cache: self
                .inner
                .near
                .as_ref()
                .map(crate::client::near::Near::status),
            background_writes: self.inner.background_count(),
            topology_generation: snap.generation,
            topology_age: now.saturating_duration_since(snap.since),
        }
    }
}
