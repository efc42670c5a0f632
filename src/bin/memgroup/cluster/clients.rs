//! Clients made from the resolved cluster: all of it, one group of it, or
//! a layout of its own; each closed before the process exits.

use std::time::Duration;

use memgroup::client::{Client, Event};
use memgroup::topology::{ClusterSpec, ReadFallback};

use super::{ClientSettings, usage};
use crate::exit::Failure;

impl ClientSettings {
    /// These settings for keys as a dump lists them: wire keys already (a
    /// long or hashed key's digest), so none is shortened again.
    pub(crate) fn as_dumped(&self) -> ClientSettings {
        ClientSettings {
            long_keys: None,
            evcache_keys: None,
            group_keys: Vec::new(),
            ..self.clone()
        }
    }

    /// A client for `spec` with these settings (connections open lazily);
    /// never discovering (a spec of its own: one server, one group, an old
    /// layout).
    pub(crate) fn client(&self, spec: ClusterSpec) -> Result<Client, Failure> {
        self.client_of(spec, false)
    }

    /// A client for `spec`; with `discover`, the cluster's discovered groups
    /// are asked for their servers as it connects.
    pub(super) fn client_of(&self, spec: ClusterSpec, discover: bool) -> Result<Client, Failure> {
        // A group's own login, TLS and discovery apply only where the spec
        // has it (one group alone, an old layout).
        let names: Vec<String> = spec.groups.iter().map(|g| g.name.clone()).collect();
        let present = |group: &str| names.iter().any(|n| n == group);
        let mut builder = Client::builder()
            .on_event(|event| {
                // A watched file's change that cannot be applied: the
                // command goes on with the cluster as it was.
                match event {
                    Event::TopologyRejected { error } => crate::output::warning(
                        None,
                        &format!("{}; going on with the cluster as it was", error.chain()),
                    ),
                    Event::TopologyChanged { added, removed } => {
                        crate::output::note(&format!(
                            "cluster file applied: servers added {added:?}, removed {removed:?}"
                        ));
                    }
                    _ => {}
                }
            })
            .cluster(spec)
            .timeout(self.timeout)
            .connect_timeout(self.connect_timeout)
            .value_format(self.values)
            .write_wait(self.write_wait)
            .meta_protocol(self.meta_protocol)
            .hedge(self.hedge);
        if let Some(credentials) = self.credentials.clone() {
            builder = builder.credentials(credentials);
        }
        if let Some(tls) = self.tls.clone() {
            builder = builder.tls(tls);
        }
        if let Some(long_keys) = self.long_keys.clone() {
            builder = builder.long_keys(long_keys);
        }
        if let Some(keys) = self.evcache_keys {
            builder = builder.evcache_keys(keys);
        }
        for (group, keys) in self.group_keys.iter().filter(|(g, _)| present(g)) {
            builder = builder.group_evcache_keys(group, *keys);
        }
        if let Some(dir) = &self.repair_journal {
            builder = builder.repair_journal(dir);
        }
        if self.read_repair {
            builder = builder.read_repair(true);
        }
        if let Some(old) = self.migrate_from.clone() {
            builder = builder.migrate_from(old);
        }
        for own in self.groups.iter().filter(|g| present(&g.group)) {
            if let Some(credentials) = own.credentials.clone() {
                builder = builder.group_credentials(&own.group, credentials);
            }
            if let Some(tls) = own.tls.clone() {
                builder = builder.group_tls(&own.group, tls);
            }
        }
        builder = self.limits.apply(builder).merge_gets(self.merge_gets);
        let discovery: Vec<&(String, String)> =
            self.discovery.iter().filter(|(g, _)| present(g)).collect();
        let client = if discovery.is_empty() || !discover {
            builder.build().map_err(|e| usage(format!("{e}")))?
        } else {
            // Discovery asks the endpoints as the client connects: the
            // tool's commands are synchronous up to here, on a
            // multi-threaded runtime.
            for (group, endpoint) in discovery {
                builder = builder.group_discover(group, endpoint);
            }
            if let Some(every) = self.discover_every {
                builder = builder.discover_every(every);
            }
            tokio::task::block_in_place(|| {
                tokio::runtime::Handle::current().block_on(builder.connect())
            })
            .map_err(Failure::from)?
        };
        if self.repair_journal.is_some() && client.repair_journal().is_none() {
            static WARNED: std::sync::Once = std::sync::Once::new();
            let dir = self
                .repair_journal
                .as_deref()
                .unwrap_or(std::path::Path::new(""));
            WARNED.call_once(|| {
                crate::output::warning(
                    None,
                    &format!(
                        "cannot use the repair journal {}: running without (repairs left at exit are lost)",
                        dir.display()
                    ),
                );
            });
        }
        OPEN.lock().push(client.clone());
        Ok(client)
    }
}

/// Every client the command built, closed before the process exits.
static OPEN: parking_lot::Mutex<Vec<Client>> = parking_lot::Mutex::new(Vec::new());

/// Closes every client the command built, within `deadline` each: writes
/// still finishing and queued repairs are drained, and what cannot be (a
/// server still down) is journaled for the next run, or said lost when the
/// journal is off. Each key not yet repaired is named on stderr. Returns
/// how many repairs are still owed (journaled or lost), and how many of
/// them are lost.
pub(crate) async fn close_clients(deadline: Duration) -> (usize, usize) {
    let clients = std::mem::take(&mut *OPEN.lock());
    let (mut owed, mut dropped) = (0, 0);
    for client in clients {
        let Err(e) = client.close(deadline).await else {
            continue;
        };
        let left = client.owed_repairs();
        owed += left.len();
        let lost = client.repair_journal().is_none();
        if lost {
            dropped += left.len();
        }
        crate::output::warning(
            None,
            &if lost {
                format!(
                    "{e}; dropped at exit (no repair journal): a server that comes back with its data may keep an old copy of what was written now"
                )
            } else {
                e.to_string()
            },
        );
        const NAMED: usize = 10;
        for repair in left.iter().take(NAMED) {
            crate::output::warning(
                Some(&String::from_utf8_lossy(&repair.key)),
                &format!(
                    "not yet repaired in group {} ({}): its copy there may be stale",
                    repair.group, repair.server
                ),
            );
        }
        if left.len() > NAMED {
            crate::output::warning(
                None,
                &format!("… and {} more keys not yet repaired", left.len() - NAMED),
            );
        }
    }
    (owed, dropped)
}

/// `spec` reduced to group `name`, read as it is: no fallback, no failover,
/// no zone preference; readable even if the cluster only writes to it (a
/// warm target), and its own arbiter (the cluster's may be another group).
pub(crate) fn only_group(spec: &ClusterSpec, name: &str) -> ClusterSpec {
    let mut one = spec.clone();
    one.groups.retain(|g| g.name == name);
    for group in &mut one.groups {
        group.write_only = false;
    }
    one.settings.read_fallback = ReadFallback::Never;
    one.settings.local_zone = None;
    one.settings.failover = Some(false);
    one.settings.arbiter = None;
    one.settings.arbiter_failover = false;
    one
}
