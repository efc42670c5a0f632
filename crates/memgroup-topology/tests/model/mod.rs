//! The selection rules written out plainly, independently of the selection
//! code: what the property tests in `props.rs` compare it with.

use std::time::Instant;

pub(crate) mod arb;

use memgroup_topology::{DeadHosts, GroupId, ReadFallback, ServerId, Skipped, Target, Topology};

/// The server a group uses for `key`: the primary when live, else (failover on) the first
/// live server of the Whalin sequence; `None` when skipped. Built from the hash crate
/// directly, independently of the selection code.
pub(crate) fn model_server(
    topology: &Topology,
    group: GroupId,
    key: &[u8],
    dead: &DeadHosts,
    now: Instant,
) -> Result<ServerId, ServerId> {
    let g = topology.group(group);
    let primary = g.servers()[g.locator().locate(key)];
    if !dead.is_dead(primary, now) {
        return Ok(primary);
    }
    if topology.failover()
        && let Some(s) = g
            .locator()
            .failover(key)
            .map(|n| g.servers()[n])
            .find(|&s| !dead.is_dead(s, now))
    {
        return Ok(s);
    }
    Err(primary)
}

pub(crate) fn local_zone_groups(topology: &Topology) -> (Vec<GroupId>, Vec<GroupId>) {
    let local = topology.settings().local_zone.as_deref();
    let (l, o): (Vec<_>, Vec<_>) = topology
        .groups()
        .iter()
        .filter(|g| !g.is_write_only())
        .partition(|g| local.is_some() && g.zone() == local);
    (
        l.iter().map(|g| g.id()).collect(),
        o.iter().map(|g| g.id()).collect(),
    )
}

/// The read order, with slots: local tier then the others, each rotated.
pub(crate) fn model_read_order(topology: &Topology, rotation: u64) -> Vec<(GroupId, usize)> {
    let (local, others) = local_zone_groups(topology);
    let mut order = vec![];
    for tier in [local, others] {
        let k = tier.len() as u64;
        for j in 0..k {
            let g = tier[((rotation % k + j) % k) as usize];
            let pool = topology.group(g).pool_size() as u64;
            order.push((g, ((rotation / k) % pool) as usize));
        }
    }
    order
}

/// The read targets, each group routing on `key(group)`.
pub(crate) fn model_reads(
    topology: &Topology,
    key: &dyn Fn(GroupId) -> Vec<u8>,
    dead: &DeadHosts,
    now: Instant,
    rotation: u64,
) -> Vec<Target> {
    let limit = match topology.settings().read_fallback {
        ReadFallback::Never => 1,
        ReadFallback::OneMore => 2,
        ReadFallback::AllCopies => usize::MAX,
    };
    let (local, _) = local_zone_groups(topology);
    let live: Vec<Target> = model_read_order(topology, rotation)
        .into_iter()
        .filter_map(|(group, slot)| {
            model_server(topology, group, &key(group), dead, now)
                .ok()
                .map(|server| Target {
                    group,
                    server,
                    slot,
                })
        })
        .collect();
    // The local tier's live groups; then, once some group was offered, the
    // arbiter's (when live and not local); then the other groups in order.
    let (mut order, others): (Vec<Target>, Vec<Target>) =
        live.into_iter().partition(|t| local.contains(&t.group));
    let mut others = others.into_iter();
    if order.is_empty() {
        order.extend(others.next());
    }
    let arbiter = topology.arbiter();
    let pool = topology.group(arbiter).pool_size() as u64;
    if !order.iter().any(|t| t.group == arbiter)
        && let Ok(server) = model_server(topology, arbiter, &key(arbiter), dead, now)
    {
        order.push(Target {
            group: arbiter,
            server,
            slot: (rotation % pool) as usize,
        });
    }
    order.extend(others.filter(|t| t.group != arbiter));
    order.truncate(limit);
    order
}

pub(crate) fn model_write(
    topology: &Topology,
    group: GroupId,
    key: &[u8],
    dead: &DeadHosts,
    now: Instant,
    rotation: u64,
) -> Result<Target, Skipped> {
    let slot = (rotation % topology.group(group).pool_size() as u64) as usize;
    match model_server(topology, group, key, dead, now) {
        Ok(server) => Ok(Target {
            group,
            server,
            slot,
        }),
        Err(server) => Err(Skipped { group, server }),
    }
}
