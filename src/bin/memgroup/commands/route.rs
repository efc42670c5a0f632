//! `route`: which server each key maps to, per group (and strategy); with
//! `--compare OLD`, planning a layout change. For a sample of keys, the given
//! keys, or the keys stored on the old layout's servers, which server each
//! key lives on before and after, per group: the share that moves (a cold
//! miss each, unless the client runs in migration mode) and the moves per
//! server, from -> to.

use std::collections::BTreeMap;
use std::process::ExitCode;

use memgroup::hash::HashStrategy;
use memgroup::topology::{GroupId, Topology};
use serde_json::json;

use crate::cluster::Cluster;
use crate::dump;
use crate::exit::Failure;
use crate::flags::ClusterFlags;
use crate::output::{self, Report, outln, show};

/// `route`'s keys, and what to show of them.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The keys (with --compare: optional, else a sample).
    #[arg(required_unless_present = "compare")]
    keys: Vec<String>,
    /// A table across every hashing strategy (all ten).
    #[arg(long, conflicts_with = "compare")]
    all_strategies: bool,
    /// Plan a layout change: what share of keys moves from the OLD
    /// layout (a cluster.toml path, a server list, EVCache groups or a
    /// memcache:// URL; --old-hash for its hashing) to the configured
    /// one, per server from -> to.
    #[arg(long, value_name = "OLD")]
    compare: Option<String>,
    /// With --compare and no keys: this many sample keys (key:0, key:1, …).
    #[arg(long, default_value_t = 10_000, requires = "compare")]
    sample: usize,
    /// With --compare: the keys stored on the old layout's servers
    /// (lru_crawler metadump) instead of a sample.
    #[arg(long, requires = "compare")]
    from_cluster: bool,
}

/// `route`: the table of where each key lives, or with `--compare` the plan.
pub(crate) async fn run(args: &Args, flags: &ClusterFlags) -> Result<ExitCode, Failure> {
    match &args.compare {
        Some(old) => compare(flags, old, &args.keys, args.sample, args.from_cluster).await,
        None => route(flags, &args.keys, args.all_strategies),
    }
}

/// Where each key lives: per key, strategy (one, or every one with `all`)
/// and group, the server.
fn route(flags: &ClusterFlags, keys: &[String], all: bool) -> Result<ExitCode, Failure> {
    let cluster = Cluster::from_flags(flags)?;
    // The checks a client's build makes (a zone no group has, …): routing
    // is refused for what every other command would refuse.
    let client = cluster.client()?;
    let (long_keys, evcache_keys) = cluster.short_keys();
    let shortened = long_keys.is_some() || evcache_keys.is_some() || cluster.own_group_keys();
    let spec = cluster.spec;
    let variants: Vec<(String, std::sync::Arc<Topology>)> = if all {
        HashStrategy::ALL
            .iter()
            .map(|&s| {
                let mut spec = spec.clone();
                for g in &mut spec.groups {
                    g.locator.strategy = s;
                }
                Ok((s.to_string(), std::sync::Arc::new(Topology::new(spec)?)))
            })
            .collect::<Result<_, Failure>>()?
    } else {
        // The client's own topology: built once (a ring of 40,000 servers
        // takes a while).
        let t = client.topology();
        let name = spec
            .groups
            .first()
            .map(|g| g.locator.strategy.to_string())
            .unwrap_or_default();
        vec![(name, t)]
    };
    // A key `set` would refuse has no route: say so, as `set` would (the
    // strategies compared differ in hashing only, not in the wire key).
    super::check_keys(&client, keys)?;
    // Keys stored under short ones: the key on the wire beside the key.
    let mut report = Report::new(if shortened {
        &["KEY", "WIRE KEY", "STRATEGY", "GROUP", "SERVER"]
    } else {
        &["KEY", "STRATEGY", "GROUP", "SERVER"]
    });
    for key in keys {
        // The key as each group stores it, as the client sends it.
        let wires = client.wire_keys(key)?;
        for (strategy, topology) in &variants {
            for (group, (_, wire)) in topology.groups().iter().zip(&wires) {
                let server = &topology.servers()[group.server_for(wire).0];
                let mut row = vec![
                    key.clone(),
                    strategy.clone(),
                    group.name().to_string(),
                    server.to_string(),
                ];
                if shortened {
                    row.insert(1, show(wire));
                }
                report.row(row);
                report.record(json!({"key": key, "wire_key": show(wire), "strategy": strategy, "group": group.name(), "server": server.to_string()}));
            }
        }
    }
    report.print();
    Ok(ExitCode::SUCCESS)
}

/// `route --compare OLD`: for each group, the share of `keys` (or of a
/// sample, or of the old servers' stored keys) that move from the old layout
/// to the configured one, and the moves per server.
async fn compare(
    flags: &ClusterFlags,
    old: &str,
    keys: &[String],
    sample: usize,
    from_cluster: bool,
) -> Result<ExitCode, Failure> {
    let json = crate::output::json();
    let cluster = Cluster::from_flags(flags)?;
    let new_spec = cluster.spec.clone();
    // The same keys move (as migration mode reads them).
    let old_spec = cluster.old_layout(old)?.old_layout_of(&new_spec);
    let mut new = Topology::new(new_spec.clone())?;
    let mut old_topology = Topology::new(old_spec.clone())?;
    let keys: Vec<Vec<u8>> = if !keys.is_empty() {
        keys.iter().map(|k| k.as_bytes().to_vec()).collect()
    } else if from_cluster {
        let client = cluster.settings.client(old_spec.clone())?;
        let bounds = dump::Bounds::of(&client).await?;
        let mut stored = Vec::new();
        for server in old_topology.servers() {
            let server = server.to_string();
            let dumped = bounds
                .dump(&client, &server, cluster.settings.timeout)
                .await?;
            stored.extend(dumped.into_iter().map(|entry| entry.key));
        }
        stored.sort_unstable();
        stored.dedup();
        // Stored keys are wire keys, placed as they are.
        new = Topology::new(dump::as_dumped(new_spec))?;
        old_topology = Topology::new(dump::as_dumped(old_spec))?;
        stored
    } else {
        (0..sample)
            .map(|i| format!("key:{i}").into_bytes())
            .collect()
    };
    if keys.is_empty() {
        return Err(Failure::Op("no keys to compare".into()));
    }
    let mut records = Vec::new();
    for (gi, group) in new.groups().iter().enumerate() {
        // The old group of the same name, or the only one.
        let old_group = old_topology
            .group_by_name(group.name())
            .or_else(|| (old_topology.groups().len() == 1).then_some(GroupId(0)));
        let Some(og) = old_group else {
            if json {
                records.push(json!({"group": group.name(), "keys": keys.len(), "new": true}));
            } else {
                outln!(
                    "group {}: new (no group of that name in the old layout)",
                    group.name()
                );
            }
            continue;
        };
        let home = |t: &Topology, g: GroupId, key: &[u8]| {
            let wire = t.wire_key(g, key);
            t.servers()[t.group(g).server_for(&wire).0].to_string()
        };
        let mut moves: BTreeMap<(String, String), usize> = BTreeMap::new();
        let mut moved = 0usize;
        for key in &keys {
            let (from, to) = (home(&old_topology, og, key), home(&new, GroupId(gi), key));
            if from != to {
                moved += 1;
                *moves.entry((from, to)).or_default() += 1;
            }
        }
        let share = moved as f64 / keys.len() as f64;
        let mut moves: Vec<((String, String), usize)> = moves.into_iter().collect();
        moves.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let mut report = Report::new(&["FROM", "TO", "KEYS", "SHARE"]);
        for ((from, to), n) in moves {
            let percent = n as f64 * 100.0 / keys.len() as f64;
            report.row(vec![
                from.clone(),
                to.clone(),
                n.to_string(),
                format!("{percent:.1} %"),
            ]);
            report.record(json!({"from": from, "to": to, "keys": n}));
        }
        if json {
            records.push(json!({
                "group": group.name(), "keys": keys.len(), "moved": moved, "share": share,
                "moves": report.records(),
            }));
            continue;
        }
        outln!(
            "group {}: {moved} of {} keys move ({:.1} %)",
            group.name(),
            keys.len(),
            share * 100.0
        );
        if !report.is_empty() {
            report.print_table();
        }
    }
    if json {
        // One record per group, each with the number of keys compared.
        output::records(&records);
    }
    Ok(ExitCode::SUCCESS)
}
