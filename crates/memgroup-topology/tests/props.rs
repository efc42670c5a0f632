//! Property tests for every selection rule, over random clusters (1–5 groups, 1–20 servers
//! per group drawn from a shared pool of 40 addresses, weights 1–10, pool sizes 1–8, mixed
//! strategies, zones and write-only flags), random dead-host states and simulated time.
//!
//! Time is simulated: each test takes one base `Instant` and adds offsets to it.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use memgroup_hash::{HashStrategy, LocatorConfig};
use memgroup_topology::{
    ClusterSpec, DeadHosts, GroupId, GroupKeys, GroupSpec, Keys, MAX_POOL_SIZE, ReadFallback,
    ServerAddr, ServerId, ServerSpec, Settings, Skipped, Target, Topology, WritePolicy,
};
use proptest::prelude::*;

mod model;
use model::arb::*;
use model::{local_zone_groups, model_read_order, model_reads, model_server, model_write};

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Read rule: local zone first (round-robin), fallback per policy, dead groups skipped
    /// (after failover when on), never a write-only group, never a dead server.
    #[test]
    fn read_targets_follow_the_rules(
        spec in arb_cluster(),
        failures in arb_failures(),
        key in arb_key(),
        rotation in any::<u64>(),
        offset_ms in 0u64..4000,
    ) {
        let topology = Topology::new(spec).unwrap();
        let base = Instant::now();
        let dead = dead_hosts(&topology, base, &failures);
        let now = base + Duration::from_millis(offset_ms);
        let key = topology.wire_key(GroupId(0), &key).into_owned();
        let mut targets = topology.read_targets(&key, &dead, now, rotation);
        let got: Vec<Target> = targets.by_ref().collect();
        prop_assert_eq!(&got, &model_reads(&topology, &|_| key.clone(), &dead, now, rotation));

        // The same facts, stated directly.
        let (local, _) = local_zone_groups(&topology);
        let mut groups = HashSet::new();
        for (i, t) in got.iter().enumerate() {
            let group = topology.group(t.group);
            prop_assert!(!group.is_write_only());
            prop_assert!(groups.insert(t.group), "group offered twice");
            prop_assert!(!dead.is_dead(t.server, now));
            prop_assert!(group.servers().contains(&t.server));
            prop_assert!(t.slot < group.pool_size());
            prop_assert!(t.slot < topology.server_slots(t.server));
            // Local groups come before every other group.
            if i > 0 && local.contains(&t.group) {
                prop_assert!(local.contains(&got[i - 1].group));
            }
        }
        let live_groups = model_read_order(&topology, rotation)
            .iter()
            .filter(|(g, _)| model_server(&topology, *g, &key, &dead, now).is_ok())
            .count();
        let limit = topology.settings().read_fallback.max_groups();
        prop_assert_eq!(got.len(), live_groups.min(limit));
        // Nothing live at all: the iterator is empty and names a dead server.
        if got.is_empty() {
            let skipped = targets.skipped().expect("a readable group was skipped");
            prop_assert!(dead.is_dead(skipped.server, now));
        }
        // Without dead servers, the first target is the rotation's pick of the first tier.
        if dead.next_deadline(now).is_none() {
            let first = model_read_order(&topology, rotation)[0];
            prop_assert_eq!((got[0].group, got[0].slot), first);
            let group = topology.group(first.0);
            prop_assert_eq!(got[0].server, group.server_for(&key));
        }
    }

    /// Write rule: exactly one item per group (write-only included), the slot
    /// `rotation % pool_size`, the key's server or its failover, `Skipped` when none is live.
    #[test]
    fn write_targets_cover_every_group_once(
        spec in arb_cluster(),
        failures in arb_failures(),
        key in arb_key(),
        rotation in any::<u64>(),
        offset_ms in 0u64..4000,
    ) {
        let topology = Topology::new(spec).unwrap();
        let base = Instant::now();
        let dead = dead_hosts(&topology, base, &failures);
        let now = base + Duration::from_millis(offset_ms);
        let key = topology.wire_key(GroupId(0), &key).into_owned();
        let writes = topology.write_targets(&key, &dead, now, rotation);
        prop_assert_eq!(writes.len(), topology.groups().len());
        let got: Vec<_> = writes.collect();
        let expected: Vec<_> = topology
            .groups()
            .iter()
            .map(|g| model_write(&topology, g.id(), &key, &dead, now, rotation))
            .collect();
        prop_assert_eq!(&got, &expected);
        for (i, item) in got.iter().enumerate() {
            match item {
                Ok(t) => {
                    prop_assert_eq!(t.group, GroupId(i));
                    prop_assert!(!dead.is_dead(t.server, now));
                }
                Err(s) => {
                    prop_assert_eq!(s.group, GroupId(i));
                    prop_assert!(dead.is_dead(s.server, now));
                    prop_assert_eq!(s.server, topology.group(s.group).server_for(&key));
                }
            }
        }
    }

    /// Each group's own key (`Keys::PerGroup`): reads and writes route every group on
    /// its key, as a selection of that key alone would.
    #[test]
    fn per_group_keys_route_each_group_on_its_own(
        spec in arb_cluster(),
        failures in arb_failures(),
        keys in proptest::collection::vec(arb_key(), 5),
        rotation in any::<u64>(),
    ) {
        struct PerGroup(Vec<Vec<u8>>);
        impl GroupKeys for PerGroup {
            fn key(&self, group: GroupId) -> &[u8] {
                &self.0[group.0]
            }
        }
        let topology = Topology::new(spec).unwrap();
        let now = Instant::now();
        let dead = dead_hosts(&topology, now, &failures);
        let keys = PerGroup(keys);
        let mut cursor = topology.read_cursor_of(Keys::PerGroup(&keys), rotation);
        let mut reads = vec![];
        while let Some(target) = cursor.next(&dead, now) {
            reads.push(target);
        }
        let key_of = |g: GroupId| keys.0[g.0].clone();
        prop_assert_eq!(reads, model_reads(&topology, &key_of, &dead, now, rotation));
        let writes: Vec<_> =
            topology.write_targets_of(Keys::PerGroup(&keys), &dead, now, rotation).collect();
        let expected: Vec<_> = topology
            .groups()
            .iter()
            .map(|g| model_write(&topology, g.id(), &key_of(g.id()), &dead, now, rotation))
            .collect();
        prop_assert_eq!(&writes, &expected);
        let ids: Vec<GroupId> = topology.groups().iter().rev().map(memgroup_topology::Group::id).collect();
        let targeted: Vec<_> = topology
            .targeted_write_targets_of(Keys::PerGroup(&keys), &ids, &dead, now, rotation, None)
            .collect();
        let expected: Vec<_> = expected.into_iter().rev().collect();
        prop_assert_eq!(targeted, expected);
    }

    /// Write slots rotate so that every connection of every group gets the same share.
    #[test]
    fn write_slots_spread_over_the_pool(
        spec in arb_cluster(),
        key in arb_key(),
        start in any::<u32>(),
    ) {
        let topology = Topology::new(spec).unwrap();
        let dead = DeadHosts::new(&topology);
        let now = Instant::now();
        let mut counts: HashMap<(GroupId, usize), usize> = HashMap::new();
        let lcm = 840; // lcm(1..=8)
        for r in 0..lcm {
            for t in topology.write_targets(&key, &dead, now, u64::from(start) + r) {
                *counts.entry((t.unwrap().group, t.unwrap().slot)).or_default() += 1;
            }
        }
        for g in topology.groups() {
            for slot in 0..g.pool_size() {
                prop_assert_eq!(counts[&(g.id(), slot)], lcm as usize / g.pool_size());
            }
        }
    }

    /// Targeted writes: one per distinct targeted group, whatever the pool size (the
    /// regression property for EVCache's pool_size-times duplication), and the filter only
    /// removes items after selection.
    #[test]
    fn targeted_writes_one_per_distinct_group(
        spec in arb_cluster(),
        failures in arb_failures(),
        key in arb_key(),
        targets in prop::collection::vec(0usize..7, 0..12),
        rotation in any::<u64>(),
        filter_mod in 1usize..4,
    ) {
        let base = Instant::now();
        let ids: Vec<GroupId> = targets.into_iter().map(GroupId).collect();
        for pool_size in 1..=8 {
            let topology = Topology::new(spec.clone().with_pool_size(pool_size)).unwrap();
            let dead = dead_hosts(&topology, base, &failures);
            let key = topology.wire_key(GroupId(0), &key).into_owned();
            let distinct: Vec<GroupId> = ids
                .iter()
                .copied()
                .filter(|g| g.0 < topology.groups().len())
                .fold(vec![], |mut v, g| {
                    if !v.contains(&g) { v.push(g) }
                    v
                });
            let got: Vec<_> = topology
                .targeted_write_targets(&key, &ids, &dead, base, rotation, None)
                .collect();
            prop_assert_eq!(got.len(), distinct.len());
            let expected: Vec<_> = distinct
                .iter()
                .map(|&g| model_write(&topology, g, &key, &dead, base, rotation))
                .collect();
            prop_assert_eq!(&got, &expected);

            let keep = |a: &ServerAddr| a.host.len().is_multiple_of(filter_mod);
            let filtered: Vec<_> = topology
                .targeted_write_targets(&key, &ids, &dead, base, rotation, Some(&keep))
                .collect();
            let server = |item: &Result<Target, Skipped>| match item {
                Ok(t) => t.server,
                Err(s) => s.server,
            };
            let expected: Vec<_> = got
                .iter()
                .filter(|item| keep(&topology.servers()[server(item).0]))
                .copied()
                .collect();
            prop_assert_eq!(filtered, expected);
        }
    }

    /// Failover (Whalin): in a single-group cluster failover is on by default; a read goes to
    /// the first live server of the failover sequence, and after each recorded failure the
    /// cursor offers the next live one, each server at most once.
    #[test]
    fn failover_walks_the_whalin_sequence(
        spec in arb_cluster(),
        failures in arb_failures(),
        key in arb_key(),
        rotation in any::<u64>(),
    ) {
        let mut single = spec;
        single.groups.truncate(1);
        single.settings.failover = None;
        let topology = Topology::new(single.clone()).unwrap();
        prop_assert!(topology.failover());
        let base = Instant::now();
        let mut dead = dead_hosts(&topology, base, &failures);
        let now = base;
        let key = topology.wire_key(GroupId(0), &key).into_owned();
        let group = &topology.groups()[0];
        let sequence: Vec<ServerId> =
            group.locator().failover(&key).map(|n| group.servers()[n]).collect();
        let live: Vec<ServerId> =
            sequence.iter().copied().filter(|&s| !dead.is_dead(s, now)).collect();

        let first = topology.read_targets(&key, &dead, now, rotation).next();
        prop_assert_eq!(first.map(|t| t.server), live.first().copied());

        // Every offer fails: the cursor walks the rest of the sequence.
        let mut cursor = topology.read_cursor(&key, rotation);
        let mut offered = vec![];
        while let Some(t) = cursor.next(&dead, now) {
            prop_assert_eq!(t.group, GroupId(0));
            offered.push(t.server);
            dead.record_failure(t.server, now);
            prop_assert!(offered.len() <= sequence.len());
        }
        prop_assert_eq!(&offered, &live);
        // A miss (no failure recorded) ends the read of a one-group cluster instead.
        let dead = DeadHosts::new(&topology);
        let mut cursor = topology.read_cursor(&key, rotation);
        prop_assert!(cursor.next(&dead, now).is_some());
        prop_assert!(cursor.next(&dead, now).is_none());

        // Failover off: a dead primary fails fast with a typed answer.
        let mut off = single;
        off.settings.failover = Some(false);
        let topology = Topology::new(off).unwrap();
        let mut dead = DeadHosts::new(&topology);
        let primary = topology.groups()[0].server_for(&key);
        dead.record_failure(primary, now);
        let mut reads = topology.read_targets(&key, &dead, now, rotation);
        prop_assert_eq!(reads.next(), None);
        prop_assert_eq!(reads.skipped(), Some(Skipped { group: GroupId(0), server: primary }));
        let writes: Vec<_> = topology.write_targets(&key, &dead, now, rotation).collect();
        prop_assert_eq!(writes, vec![Err(Skipped { group: GroupId(0), server: primary })]);
    }

    /// Backoff: 1 s doubling to the cap per consecutive failure, failures while dead ignored,
    /// success resets; `next_deadline` is the earliest future `dead_until`. Checked against a
    /// model over random event sequences in simulated time.
    #[test]
    fn backoff_follows_the_model(
        events in prop::collection::vec((0usize..4, 0u64..5000, 0u8..4), 1..80),
        initial_ms in 1u64..2000,
        cap_factor in 1u64..2000,
    ) {
        let servers = (0..4).map(|i| ServerSpec::new(host(i)));
        let settings = Settings::default().with_backoff(
            Duration::from_millis(initial_ms),
            Duration::from_millis(initial_ms * cap_factor),
        );
        let spec = ClusterSpec::new([GroupSpec::new("g", servers)]).with_settings(settings);
        let topology = Topology::new(spec).unwrap();
        let mut dead = DeadHosts::new(&topology);
        let base = Instant::now();
        let mut t = Duration::ZERO;
        // Model: (consecutive failures, dead until) per server, in time since base.
        let mut model = [(0u32, None::<Duration>); 4];
        for (server, dt, kind) in events {
            t += Duration::from_millis(dt);
            let now = base + t;
            let id = ServerId(server);
            let (failures, until) = &mut model[server];
            match kind {
                0 | 1 => {
                    if until.is_none_or(|u| t >= u) {
                        *failures += 1;
                        let backoff = (initial_ms << (*failures - 1).min(40))
                            .min(initial_ms * cap_factor);
                        *until = Some(t + Duration::from_millis(backoff));
                    }
                    prop_assert_eq!(dead.record_failure(id, now), base + until.unwrap());
                }
                2 => {
                    dead.record_success(id);
                    model[server] = (0, None);
                }
                _ => {}
            }
            for (i, (failures, until)) in model.iter().enumerate() {
                let id = ServerId(i);
                prop_assert_eq!(dead.is_dead(id, now), until.is_some_and(|u| t < u));
                prop_assert_eq!(dead.failures(id), *failures);
            }
            let expected = model.iter().filter_map(|m| m.1).filter(|&u| u > t).min();
            prop_assert_eq!(dead.next_deadline(now), expected.map(|u| base + u));
            // Recovery: at the deadline, that server is eligible again.
            if let Some(deadline) = dead.next_deadline(now) {
                prop_assert!(dead.dead_servers(deadline).count() < dead.dead_servers(now).count());
            }
        }
    }

    /// Write success policy over read-write groups only; QUORUM is a strict majority.
    #[test]
    fn write_policy_counts_read_write_groups(
        spec in arb_cluster(),
        policy in prop::sample::select(WritePolicy::ALL.to_vec()),
        succeeded in prop::collection::vec(0usize..7, 0..12),
    ) {
        let mut spec = spec;
        spec.settings.write_policy = policy;
        let topology = Topology::new(spec).unwrap();
        let n = topology.groups().iter().filter(|g| !g.is_write_only()).count();
        prop_assert_eq!(topology.read_write_groups(), n);
        let required = policy.required(n);
        prop_assert_eq!(topology.required_successes(), required);
        let distinct_rw: HashSet<usize> = succeeded
            .iter()
            .copied()
            .filter(|&g| g < topology.groups().len() && !topology.groups()[g].is_write_only())
            .collect();
        let ids = succeeded.iter().map(|&g| GroupId(g));
        prop_assert_eq!(topology.write_succeeded(ids), distinct_rw.len() >= required);
    }

    /// Topology changes: a new immutable value; the old one answers as before; dead-host state
    /// of servers that stay is carried over by address, new servers start alive.
    #[test]
    fn changes_carry_dead_state_over(
        spec in arb_cluster(),
        failures in arb_failures(),
        key in arb_key(),
        change in 0usize..6,
        pick in any::<prop::sample::Index>(),
        new_host in 0..HOSTS,
        weight in 1u32..=10,
        choice in 0usize..6,
    ) {
        let old = Topology::new(spec).unwrap();
        let base = Instant::now();
        let now = base + Duration::from_millis(500);
        let dead = dead_hosts(&old, base, &failures);
        let key = old.wire_key(GroupId(0), &key).into_owned();
        let reads_before: Vec<_> = old.read_targets(&key, &dead, now, 7).collect();
        let sanitize = old.sanitizes_keys();

        let name = old.groups()[pick.index(old.groups().len())].name().to_owned();
        let in_group = |g: &memgroup_topology::Group, h: usize| {
            g.servers().iter().any(|&id| old.servers()[id.0] == host(h))
        };
        let others_have = |h: usize| old.groups().iter().any(|g| g.name() != name && in_group(g, h));
        let in_any = |h: usize| old.groups().iter().any(|g| in_group(g, h));
        let new = old.change(|spec| {
            let group = spec.group_mut(&name).unwrap();
            match change {
                // A host no other group has (a server is in one group).
                0 if !others_have(new_host) => {
                    let _ = group.remove_server(&host(new_host));
                    group.servers.push(ServerSpec::new(host(new_host)).with_weight(weight));
                }
                0 => {}
                1 if group.servers.len() > 1 => {
                    let addr = group.servers[pick.index(group.servers.len())].addr.clone();
                    group.remove_server(&addr);
                }
                1 => {}
                2 => {
                    let addr = group.servers[pick.index(group.servers.len())].addr.clone();
                    group.set_weight(&addr, weight);
                }
                3 => group.locator = locator(choice, sanitize),
                4 if !in_any(new_host) => {
                    let g = GroupSpec::new("added", [ServerSpec::new(host(new_host))])
                        .with_locator(locator(choice, sanitize));
                    spec.groups.push(g);
                }
                _ if spec.groups.len() > 1 && name != "g0" => {
                    spec.remove_group(&name);
                }
                _ => {}
            }
        });
        let new = new.unwrap();
        let carried = dead.carry_over(&old, &new);
        prop_assert_eq!(carried.len(), new.servers().len());
        for (i, addr) in new.servers().iter().enumerate() {
            let id = ServerId(i);
            match old.server_id(addr) {
                Some(before) => {
                    prop_assert_eq!(carried.dead_until(id), dead.dead_until(before));
                    prop_assert_eq!(carried.failures(id), dead.failures(before));
                    prop_assert_eq!(carried.is_dead(id, now), dead.is_dead(before, now));
                }
                None => {
                    prop_assert_eq!(carried.failures(id), 0);
                    prop_assert!(!carried.is_dead(id, now));
                }
            }
        }
        // The old value is untouched.
        let reads_after: Vec<_> = old.read_targets(&key, &dead, now, 7).collect();
        prop_assert_eq!(&reads_before, &reads_after);
        // A refused change leaves nothing behind either.
        let refused = old.change(|spec| {
            let g = spec.groups[0].clone();
            spec.groups.push(g);
        });
        prop_assert!(refused.is_err());
        let reads_after: Vec<_> = old.read_targets(&key, &dead, now, 7).collect();
        prop_assert_eq!(reads_before, reads_after);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Read round-robin: with every server alive, successive rotations spread the first read
    /// evenly over the first tier's groups and each group's slots.
    #[test]
    fn read_rotation_spreads_over_groups_and_slots(spec in arb_cluster(), key in arb_key()) {
        let topology = Topology::new(spec).unwrap();
        let dead = DeadHosts::new(&topology);
        let now = Instant::now();
        let (local, others) = local_zone_groups(&topology);
        let tier = if local.is_empty() { others } else { local };
        let k = tier.len();
        let rounds = (k * 840) as u64;
        let mut counts: HashMap<(GroupId, usize), usize> = HashMap::new();
        for r in 0..rounds {
            let first = topology.read_targets(&key, &dead, now, r).next().unwrap();
            *counts.entry((first.group, first.slot)).or_default() += 1;
        }
        for g in tier {
            let pool = topology.group(g).pool_size();
            for slot in 0..pool {
                prop_assert_eq!(counts.get(&(g, slot)).copied(), Some(840 / pool));
            }
        }
    }
}

/// The checks of `Topology::new` as first written, one comparison with every earlier
/// entry: the first group named before, the first server listed before in its group, each
/// after the entry's own checks (here only the weight can be wrong). `Ok` holds the
/// distinct servers in order of first appearance and each group's server ids.
#[allow(clippy::type_complexity)]
fn model_validation(
    groups: &[(usize, Vec<(usize, u32)>)],
) -> Result<(Vec<ServerAddr>, Vec<Vec<ServerId>>), memgroup_topology::TopologyError> {
    use memgroup_topology::TopologyError as E;
    let mut servers: Vec<ServerAddr> = Vec::new();
    let mut ids = Vec::new();
    for (index, (name, members)) in groups.iter().enumerate() {
        if groups[..index].iter().any(|(other, _)| other == name) {
            return Err(E::DuplicateGroup {
                name: format!("g{name}"),
            });
        }
        if members.is_empty() {
            return Err(E::EmptyGroup {
                name: format!("g{name}"),
            });
        }
        let mut group_ids = Vec::new();
        for (i, &(h, weight)) in members.iter().enumerate() {
            if weight == 0 {
                return Err(E::ZeroWeight {
                    token: format!("{}:0", host(h)),
                });
            }
            if members[..i].iter().any(|&(o, _)| o == h) {
                return Err(E::DuplicateServer {
                    token: host(h).to_string(),
                });
            }
            if let Some((first, _)) = groups[..index]
                .iter()
                .find(|(_, others)| others.iter().any(|&(o, _)| o == h))
            {
                return Err(E::ServerInTwoGroups {
                    token: host(h).to_string(),
                    first: format!("g{first}"),
                    second: format!("g{name}"),
                });
            }
            let id = match servers.iter().position(|s| *s == host(h)) {
                Some(at) => at,
                None => {
                    servers.push(host(h));
                    servers.len() - 1
                }
            };
            group_ids.push(ServerId(id));
        }
        ids.push(group_ids);
    }
    Ok((servers, ids))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Validation finds repeated groups and servers with hash lookups, not a scan per
    /// entry: the same error (the same culprit) as the scan, and the same server ids.
    #[test]
    fn validation_reports_what_the_linear_scan_did(
        groups in prop::collection::vec(
            (0usize..4, prop::collection::vec((0usize..8, 0u32..=3), 0..=6)),
            1..=4,
        ),
    ) {
        let spec = ClusterSpec::new(groups.iter().map(|(name, members)| {
            GroupSpec::new(
                format!("g{name}"),
                members.iter().map(|&(h, w)| ServerSpec::new(host(h)).with_weight(w)),
            )
        }));
        let built = Topology::new(spec).map(|t| {
            let ids: Vec<Vec<ServerId>> =
                t.groups().iter().map(|g| g.servers().to_vec()).collect();
            (t.servers().to_vec(), ids)
        });
        prop_assert_eq!(built, model_validation(&groups));
    }
}

#[test]
fn quorum_is_a_strict_majority() {
    for n in 1..=64 {
        let q = WritePolicy::Quorum.required(n);
        assert!(2 * q > n && 2 * (q - 1) <= n, "n = {n}: quorum {q}");
    }
    // EVCache's latch computes 1 here; a strict majority is 2 of 3 and 3 of 5.
    assert_eq!(WritePolicy::Quorum.required(3), 2);
    assert_eq!(WritePolicy::Quorum.required(5), 3);
    assert_eq!(WritePolicy::Quorum.required(2), 2);
    let table: Vec<Vec<usize>> = WritePolicy::ALL
        .iter()
        .map(|p| (0..=5).map(|n| p.required(n)).collect())
        .collect();
    assert_eq!(
        table,
        [
            vec![0, 0, 0, 0, 0, 0],
            vec![0, 1, 1, 1, 1, 1],
            vec![0, 1, 2, 2, 3, 3],
            vec![0, 1, 1, 2, 3, 4],
            vec![0, 1, 2, 3, 4, 5],
        ]
    );
    assert_eq!(WritePolicy::default(), WritePolicy::AllMinusOne);
}

#[test]
fn default_backoff_doubles_from_one_second_to_ten_minutes() {
    let topology = Topology::new(ClusterSpec::parse_server_list("h:1").unwrap()).unwrap();
    let mut dead = DeadHosts::new(&topology);
    let s = ServerId(0);
    let mut now = Instant::now();
    let mut seen = vec![];
    for _ in 0..12 {
        let until = dead.record_failure(s, now);
        // Reported again while dead (other in-flight requests): no escalation.
        assert_eq!(
            dead.record_failure(s, now + Duration::from_millis(1)),
            until
        );
        assert!(dead.is_dead(s, until - Duration::from_nanos(1)));
        assert!(!dead.is_dead(s, until));
        seen.push((until - now).as_secs());
        now = until;
    }
    assert_eq!(seen, [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 600, 600]);
    dead.record_success(s);
    assert_eq!(dead.record_failure(s, now), now + Duration::from_secs(1));
}

#[test]
fn failover_defaults_to_single_group_only() {
    let one = Topology::new(ClusterSpec::parse_evcache("a=h:1,h:2").unwrap()).unwrap();
    let two = Topology::new(ClusterSpec::parse_evcache("a=h:1;b=h:2").unwrap()).unwrap();
    assert!(one.failover());
    assert!(!two.failover());
    let mut spec = two.spec().clone();
    spec.settings.failover = Some(true);
    assert!(Topology::new(spec).unwrap().failover());
}

#[test]
fn topology_validation_names_the_culprit() {
    use memgroup_topology::TopologyError as E;
    let group = |name: &str, servers: &str| {
        GroupSpec::new(
            name,
            servers.split(',').map(|s| s.parse::<ServerSpec>().unwrap()),
        )
    };
    let build = |groups: Vec<GroupSpec>| Topology::new(ClusterSpec::new(groups)).map(|_| ());
    assert_eq!(build(vec![]), Err(E::NoGroups));
    assert_eq!(
        build(vec![GroupSpec::new("a", [])]),
        Err(E::EmptyGroup { name: "a".into() })
    );
    assert_eq!(
        build(vec![group("a", "h:1"), group("a", "h:2")]),
        Err(E::DuplicateGroup { name: "a".into() })
    );
    assert_eq!(
        build(vec![group("a", "h:1").with_pool_size(0)]),
        Err(E::ZeroPoolSize { group: "a".into() })
    );
    assert_eq!(
        build(vec![group("a", "h:1").with_pool_size(MAX_POOL_SIZE + 1)]),
        Err(E::PoolSizeTooLarge {
            group: "a".into(),
            pool_size: MAX_POOL_SIZE + 1
        })
    );
    assert!(build(vec![group("a", "h:1").with_pool_size(MAX_POOL_SIZE)]).is_ok());
    assert_eq!(
        build(vec![group("a", "h:1,h:1")]),
        Err(E::DuplicateServer {
            token: "h:1".into()
        })
    );
    assert_eq!(
        build(vec![
            group("a", "h:1").with_server(ServerSpec::new(host(3)).with_weight(0))
        ]),
        Err(E::ZeroWeight {
            token: format!("{}:0", host(3))
        })
    );
    assert_eq!(
        build(vec![group("a", "h:1").with_write_only(true)]),
        Err(E::NoReadableGroup)
    );
    let sanitized = LocatorConfig::new(HashStrategy::Native).with_sanitize_keys(true);
    assert_eq!(
        build(vec![
            group("a", "h:1"),
            group("b", "h:2").with_locator(sanitized)
        ]),
        Err(E::MixedSanitize { group: "b".into() })
    );
    assert!(matches!(
        build(vec![group("a", "h:1:2147483647,h:2:2")]),
        Err(E::Locator(_))
    ));
    // The same address in two groups: every write would reach it twice.
    assert_eq!(
        build(vec![group("a", "h:1,h:2"), group("b", "h:2")]),
        Err(E::ServerInTwoGroups {
            token: "h:2".into(),
            first: "a".into(),
            second: "b".into()
        })
    );
    assert_eq!(
        E::ServerInTwoGroups {
            token: "127.0.0.1:22101".into(),
            first: "a".into(),
            second: "b".into()
        }
        .to_string(),
        "server 127.0.0.1:22101 is in two groups (\"a\" and \"b\"): each group needs servers of its own"
    );
}

#[test]
fn write_only_groups_get_writes_but_no_reads() {
    let mut spec = ClusterSpec::parse_evcache("a=h1:1;b=h2:1;new=h3:1").unwrap();
    spec.group_mut("new").unwrap().write_only = true;
    spec.settings.read_fallback = ReadFallback::AllCopies;
    spec.settings.write_policy = WritePolicy::All;
    let topology = Topology::new(spec).unwrap();
    let dead = DeadHosts::new(&topology);
    let now = Instant::now();
    for r in 0..10 {
        let reads: Vec<_> = topology.read_targets(b"k", &dead, now, r).collect();
        assert_eq!(reads.len(), 2);
        assert!(reads.iter().all(|t| t.group != GroupId(2)));
        assert_eq!(topology.write_targets(b"k", &dead, now, r).count(), 3);
    }
    // ALL means all read-write groups; the write-only group never counts.
    assert!(topology.write_succeeded([GroupId(0), GroupId(1)]));
    assert!(!topology.write_succeeded([GroupId(0), GroupId(2)]));
}

#[test]
fn recovery_in_simulated_time() {
    // Two zones; the local zone's server for the key dies, reads move to the other zone,
    // and come back when the backoff ends.
    let spec = ClusterSpec::parse_evcache("a=h1:1;b=h2:1")
        .unwrap()
        .with_settings(Settings::default().with_local_zone("a"));
    let topology = Topology::new(spec).unwrap();
    let mut dead = DeadHosts::new(&topology);
    let base = Instant::now();
    let first = |dead: &DeadHosts, t: Duration| {
        topology
            .read_targets(b"k", dead, base + t, 0)
            .next()
            .map(|t| t.group)
    };
    assert_eq!(first(&dead, Duration::ZERO), Some(GroupId(0)));
    let until = dead.record_failure(ServerId(0), base);
    assert_eq!(dead.next_deadline(base), Some(until));
    assert_eq!(first(&dead, Duration::from_millis(999)), Some(GroupId(1)));
    assert_eq!(first(&dead, Duration::from_secs(1)), Some(GroupId(0)));
    // The retry fails again: two seconds this time.
    let until = dead.record_failure(ServerId(0), base + Duration::from_secs(1));
    assert_eq!(until, base + Duration::from_secs(3));
    assert_eq!(first(&dead, Duration::from_millis(2999)), Some(GroupId(1)));
    assert_eq!(dead.next_deadline(base + Duration::from_secs(3)), None);
    // Both zones dead: nothing to read, and the skip names the local server.
    dead.record_failure(ServerId(1), base + Duration::from_secs(1));
    let mut reads = topology.read_targets(b"k", &dead, base + Duration::from_millis(1500), 0);
    assert_eq!(reads.next(), None);
    assert_eq!(
        reads.skipped(),
        Some(Skipped {
            group: GroupId(0),
            server: ServerId(0)
        })
    );
}

#[test]
fn foreign_server_ids_never_panic() {
    // A caller racing a topology swap may hand an id of the old topology to the new state.
    let small = Topology::new(ClusterSpec::parse_server_list("h:1").unwrap()).unwrap();
    let mut dead = DeadHosts::new(&small);
    let now = Instant::now();
    assert_eq!(dead.record_failure(ServerId(5), now), now);
    dead.record_success(ServerId(5));
    assert!(!dead.is_dead(ServerId(5), now));
    assert_eq!(dead.failures(ServerId(5)), 0);
    let big = Topology::new(ClusterSpec::parse_server_list("a:1,b:1,c:1").unwrap()).unwrap();
    assert_eq!(big.read_targets(b"k", &dead, now, 0).count(), 1);
    assert_eq!(big.write_targets(b"k", &dead, now, 0).count(), 1);
}

/// The arbiter is the first read-write group by name, whatever order the
/// groups are listed in (services list their own zone first), or the one
/// named; a name that is no read-write group is refused.
#[test]
fn the_arbiter_is_the_first_read_write_group_by_name_or_the_one_named() {
    let group = |name: &str, h: usize, write_only: bool| {
        let mut g = GroupSpec::new(name, [ServerSpec::new(host(h))]);
        g.write_only = write_only;
        g
    };
    let listed = || {
        vec![
            group("sg2", 1, false),
            group("sg0", 2, true),
            group("sg1", 3, false),
        ]
    };
    let names = |t: &Topology| -> Vec<String> {
        t.arbiters()
            .iter()
            .map(|&g| t.group(g).name().to_string())
            .collect()
    };
    let t = Topology::new(ClusterSpec::new(listed())).unwrap();
    assert_eq!(t.group(t.arbiter()).name(), "sg1", "sg0 is write-only");
    assert_eq!(names(&t), ["sg1", "sg2"]);
    let named = ClusterSpec::new(listed()).with_settings(Settings::default().with_arbiter("sg2"));
    let t = Topology::new(named).unwrap();
    assert_eq!(names(&t), ["sg2", "sg1"]);
    for bad in ["sg0", "sg9"] {
        let spec = ClusterSpec::new(listed()).with_settings(Settings::default().with_arbiter(bad));
        let error = Topology::new(spec).unwrap_err();
        assert!(error.to_string().contains(bad), "{error}");
    }
}
