//! The servers themselves: `version`, `stats` (and its raw sections),
//! `ping` and `flush`.

use std::collections::HashMap;
use std::process::ExitCode;
use std::time::Instant;

use memgroup::client::Client;
use memgroup::topology::{ClusterSpec, Topology};
use serde_json::json;

use crate::cluster::{ClientSettings, Cluster};
use crate::exit::{self, Failure};
use crate::flags::ClusterFlags;
use crate::output::{self, Report, outln};

/// `stats`: a section, and which group or server.
#[derive(Debug, clap::Args)]
pub(crate) struct StatsArgs {
    /// A stats section (`slabs`, `items`, `settings`, …), every server's
    /// statistics of it; `general` (or `all`) for every general statistic of
    /// each server. Without one, the cluster's summary.
    arg: Option<String>,
    /// Only this group.
    #[arg(long, conflicts_with = "server")]
    group: Option<String>,
    /// Every statistic of this one server of the cluster (HOST:PORT as the
    /// cluster names it), or of its section: a NAME VALUE table, with
    /// `--json` one record per statistic.
    #[arg(long, value_name = "HOST:PORT")]
    server: Option<String>,
}

/// `ping`: how many round trips, and which group.
#[derive(Debug, clap::Args)]
pub(crate) struct PingArgs {
    /// Round trips per server.
    #[arg(long, default_value_t = 3)]
    count: usize,
    /// Only this group's servers.
    #[arg(long)]
    group: Option<String>,
}

/// `version`: which group.
#[derive(Debug, clap::Args)]
pub(crate) struct VersionArgs {
    /// Only this group's servers.
    #[arg(long)]
    group: Option<String>,
}

/// `flush`: the group, and the confirmation.
#[derive(Debug, clap::Args)]
pub(crate) struct FlushArgs {
    /// The group to flush (optional when the cluster has one group, as a
    /// plain server list does).
    #[arg(long)]
    group: Option<String>,
    /// Confirm: flushing loses the group's data.
    #[arg(long)]
    yes: bool,
}

/// `version`: each server's version (of `--group`), with its group.
pub(crate) async fn version(args: &VersionArgs, flags: &ClusterFlags) -> Result<ExitCode, Failure> {
    let client = Cluster::from_flags(flags)?.client_for(args.group.as_deref())?;
    let mut failed = 0;
    let mut report = Report::new(&["GROUP", "SERVER", "VERSION"]);
    for probe in client.probe().await {
        let (group, server) = (probe.group, probe.server);
        match probe.version {
            Ok(v) => {
                report.record(json!({"group": group, "server": server, "version": v}));
                report.row(vec![group, server, v]);
            }
            Err(e) => {
                // No version, as `stats` shows such a server: why, on stderr.
                failed += 1;
                let why = unanswered(&server, &e);
                report.record(json!({"group": group, "server": server, "error": why}));
                report.row(vec![group, server, "-".into()]);
            }
        }
    }
    report.print();
    Ok(exit::code(failed == 0))
}

/// Why `server` gave no figures, on stderr (naming it unless the error
/// does already); the reason.
fn unanswered(server: &str, e: &memgroup::client::Error) -> String {
    let why = e.chain();
    match e.server() {
        Some(_) => output::warn(None, &why),
        None => output::warn(None, &format!("{server}: {why}")),
    }
    why
}

/// `stats [SECTION] [--group G]`: the summary with group totals, or one raw
/// section.
pub(crate) async fn stats(args: &StatsArgs, flags: &ClusterFlags) -> Result<ExitCode, Failure> {
    let cluster = Cluster::from_flags(flags)?;
    if let Some(server) = &args.server {
        let section = args.arg.as_deref().and_then(general_as_none);
        return one_server(&cluster, server, section).await;
    }
    let client = cluster.client()?;
    let group = args.group.as_deref();
    match args.arg.as_deref() {
        None => summary(&client, group).await,
        Some(arg) => section(&client, general_as_none(arg), group).await,
    }
}

/// memcached has no `stats general` (it answers `ERROR`): the general
/// statistics are plain `stats`. `general` and `all` ask for them.
fn general_as_none(section: &str) -> Option<&str> {
    match section {
        "general" | "all" => None,
        other => Some(other),
    }
}

/// `stats [SECTION] --server S`: every statistic of one server, sorted by
/// name; exit 2 if the cluster has no such server, 1 if it did not answer.
async fn one_server(
    cluster: &Cluster,
    server: &str,
    section: Option<&str>,
) -> Result<ExitCode, Failure> {
    let topology = Topology::new(cluster.spec.clone())?;
    let known: Vec<String> = topology.servers().iter().map(ToString::to_string).collect();
    if !known.iter().any(|s| s == server) {
        return Err(Failure::Usage(format!(
            "--server {server:?} is not in the cluster (its servers: {})",
            known.join(", ")
        )));
    }
    let client = server_client(&cluster.settings, server)?;
    let answer = client.server_stats(section).await?.into_iter().next();
    let stats = match answer.map(|a| a.stats) {
        Some(Ok(stats)) => stats,
        Some(Err(e)) => return Err(Failure::Op(e.chain())),
        None => return Err(Failure::Op(format!("{server}: no answer"))),
    };
    let mut names: Vec<&String> = stats.keys().collect();
    names.sort();
    let mut report = Report::new(&["NAME", "VALUE"]);
    for name in names {
        let value = &stats[name];
        report.record(json!({"server": server, "name": name, "value": value}));
        report.row(vec![name.clone(), value.clone()]);
    }
    report.print();
    Ok(ExitCode::SUCCESS)
}

/// A client of `server` alone, with the cluster's settings.
fn server_client(settings: &ClientSettings, server: &str) -> Result<Client, Failure> {
    settings.client(ClusterSpec::parse_server_list(server)?)
}

/// The columns of `stats`'s table of servers.
const SUMMARY: [&str; 11] = [
    "GROUP",
    "SERVER",
    "VERSION",
    "UPTIME",
    "ITEMS",
    "HIT RATIO",
    "BYTES",
    "CONNS",
    "EVICTIONS",
    "CMD_SET",
    "GET_HITS",
];

/// `stats`: the main figures of every server (of `group`), then totals per
/// group (in `--json`, records of `"kind": "group"` after the servers' of
/// `"kind": "server"`); exit 1 if a server did not answer.
async fn summary(client: &Client, group: Option<&str>) -> Result<ExitCode, Failure> {
    let json = crate::output::json();
    if let Some(g) = group {
        Failure::group_in(&client.topology(), g)?;
    }
    let all = client.server_stats(None).await?;
    let mut report = Report::new(&SUMMARY);
    // Per group: the sums, the servers that answered, the servers.
    let mut totals: Vec<(String, [u64; 7], usize, usize)> = Vec::new();
    let mut unreachable = 0;
    for s in all.iter().filter(|s| group.is_none_or(|g| g == s.group)) {
        let entry = match totals.iter().position(|t| t.0 == s.group) {
            Some(i) => i,
            None => {
                totals.push((s.group.clone(), [0; 7], 0, 0));
                totals.len() - 1
            }
        };
        totals[entry].3 += 1;
        match &s.stats {
            Ok(st) => {
                let (hits, misses) = (num(st, "get_hits"), num(st, "get_misses"));
                // Counters come from the server: absurd ones must not overflow.
                // No get yet: no ratio (not 0 %).
                let ratio = match hits.checked_add(misses) {
                    Some(0) => None,
                    Some(sum) => Some(hits as f64 / sum as f64),
                    None => Some(hits as f64 / (hits as f64 + misses as f64)),
                };
                let values = [
                    num(st, "uptime"),
                    num(st, "curr_items"),
                    num(st, "bytes"),
                    num(st, "curr_connections"),
                    num(st, "evictions"),
                    num(st, "cmd_set"),
                    hits,
                ];
                report.row(vec![
                    s.group.clone(),
                    s.server.clone(),
                    st.get("version").cloned().unwrap_or_default(),
                    values[0].to_string(),
                    values[1].to_string(),
                    ratio.map_or_else(|| "-".to_string(), |r| format!("{:.1}%", r * 100.0)),
                    values[2].to_string(),
                    values[3].to_string(),
                    values[4].to_string(),
                    values[5].to_string(),
                    values[6].to_string(),
                ]);
                report.record(json!({"kind": "server", "group": s.group, "server": s.server, "version": st.get("version"), "uptime": values[0],
                    "curr_items": values[1], "get_hit_ratio": ratio, "bytes": values[2], "curr_connections": values[3],
                    "evictions": values[4], "cmd_set": values[5], "get_hits": hits, "get_misses": misses}));
                let entry = &mut totals[entry];
                for (t, v) in entry.1.iter_mut().zip(values) {
                    *t = t.saturating_add(v);
                }
                entry.2 += 1;
            }
            Err(e) => {
                unreachable += 1;
                // Its figures are unknown; why, on stderr.
                let mut row = vec![s.group.clone(), s.server.clone()];
                row.resize(SUMMARY.len(), "-".to_string());
                report.row(row);
                let why = unanswered(&s.server, e);
                report.record(
                    json!({"kind": "server", "group": s.group, "server": s.server, "error": why}),
                );
            }
        }
    }
    for (g, v, up, n) in &totals {
        report.record(
            json!({"kind": "group", "group": g, "servers": n, "up": up, "curr_items": v[1],
            "bytes": v[2], "evictions": v[4], "cmd_set": v[5], "get_hits": v[6]}),
        );
    }
    report.print();
    if !json {
        outln!();
        let total_rows: Vec<Vec<String>> = totals
            .iter()
            .map(|(g, v, up, n)| {
                vec![
                    g.clone(),
                    n.to_string(),
                    up.to_string(),
                    v[1].to_string(),
                    v[2].to_string(),
                    v[4].to_string(),
                    v[5].to_string(),
                    v[6].to_string(),
                ]
            })
            .collect();
        output::table(
            &[
                "GROUP",
                "SERVERS",
                "UP",
                "ITEMS",
                "BYTES",
                "EVICTIONS",
                "CMD_SET",
                "GET_HITS",
            ],
            &total_rows,
        );
    }
    Ok(exit::code(unreachable == 0))
}

/// The names of the client's groups, for an error naming an unknown one.
fn group_names(client: &Client) -> Vec<String> {
    let topology = client.topology();
    topology
        .groups()
        .iter()
        .map(|g| g.name().to_string())
        .collect()
}

/// A counter from a stats listing (0 if absent or not a number).
fn num(stats: &HashMap<String, String>, name: &str) -> u64 {
    stats.get(name).and_then(|v| v.parse().ok()).unwrap_or(0)
}

/// `stats ARG`: one raw statistics section (`slabs`, `items`, `settings`,
/// `sizes`, `conns`, …; `None`: the general one) of every server.
async fn section(
    client: &Client,
    arg: Option<&str>,
    group: Option<&str>,
) -> Result<ExitCode, Failure> {
    let mut failed = 0;
    let mut report = Report::new(&["GROUP", "SERVER", "NAME", "VALUE"]);
    for s in client.server_stats(arg).await? {
        if group.is_some_and(|g| g != s.group) {
            continue;
        }
        match &s.stats {
            Ok(stats) => {
                let mut names: Vec<&String> = stats.keys().collect();
                names.sort();
                for name in names {
                    report.row(vec![
                        s.group.clone(),
                        s.server.clone(),
                        name.clone(),
                        stats[name].clone(),
                    ]);
                }
                report.record(json!({"group": s.group, "server": s.server, "stats": stats}));
            }
            Err(e) => {
                failed += 1;
                report.row(vec![
                    s.group.clone(),
                    s.server.clone(),
                    "error".into(),
                    e.chain(),
                ]);
                report.record(json!({"group": s.group, "server": s.server, "error": e.chain()}));
            }
        }
    }
    report.print();
    Ok(exit::code(failed == 0))
}

/// `ping`: each server's round-trip time (a `version` request on a
/// connection of its own), like memping; exit 1 if any is down.
pub(crate) async fn ping(args: &PingArgs, flags: &ClusterFlags) -> Result<ExitCode, Failure> {
    let count = args.count;
    let Cluster { spec, settings, .. } = Cluster::from_flags(flags)?;
    let topology = Topology::new(spec)?;
    if let Some(name) = &args.group {
        Failure::group_in(&topology, name)?;
    }
    let mut down = 0;
    let mut report = Report::new(&["GROUP", "SERVER", "STATE", "MIN µs", "AVG µs", "ERROR"]);
    let wanted = |name: &str| args.group.as_deref().is_none_or(|g| g == name);
    for group in topology.groups().iter().filter(|g| wanted(g.name())) {
        for &id in group.servers() {
            let addr = topology.servers()[id.0].to_string();
            let client = server_client(&settings, &addr)?;
            let mut times = Vec::with_capacity(count);
            let mut failure = None;
            for _ in 0..count.max(1) {
                let t0 = Instant::now();
                match client.probe().await.into_iter().next().map(|p| p.version) {
                    Some(Ok(_)) => times.push(t0.elapsed().as_secs_f64() * 1e6),
                    Some(Err(e)) => {
                        failure = Some(e.chain());
                        break;
                    }
                    None => break,
                }
            }
            let name = group.name();
            match failure {
                Some(e) => {
                    down += 1;
                    report.record(json!({"group": name, "server": addr, "up": false, "error": e}));
                    report.row(vec![
                        name.into(),
                        addr,
                        "down".into(),
                        "-".into(),
                        "-".into(),
                        e,
                    ]);
                }
                None => {
                    // Whole microseconds: a loopback round trip's noise is
                    // larger than that.
                    let min = times.iter().copied().fold(f64::INFINITY, f64::min).round() as u64;
                    let avg = (times.iter().sum::<f64>() / times.len() as f64).round() as u64;
                    report.record(
                        json!({"group": name, "server": addr, "up": true, "min_us": min, "avg_us": avg}),
                    );
                    report.row(vec![
                        name.into(),
                        addr,
                        "up".into(),
                        min.to_string(),
                        avg.to_string(),
                        String::new(),
                    ]);
                }
            }
        }
    }
    report.print();
    Ok(exit::code(down == 0))
}

/// `flush --group G --yes`: every item of one group invalidated.
pub(crate) async fn flush(args: &FlushArgs, flags: &ClusterFlags) -> Result<ExitCode, Failure> {
    let json = crate::output::json();
    let client = Cluster::from_flags(flags)?.client()?;
    let names = group_names(&client);
    let group = match (&args.group, names.as_slice()) {
        (Some(group), _) => group.as_str(),
        (None, [only]) => only.as_str(),
        (None, _) => {
            return Err(Failure::Usage(format!(
                "the cluster has several groups: name the one to flush with --group ({})",
                names.join(", ")
            )));
        }
    };
    let yes = args.yes;
    Failure::group_in(&client.topology(), group)?;
    if !yes {
        return Err(Failure::Usage(format!(
            "flushing {group:?} invalidates all its items; add --yes to confirm"
        )));
    }
    client.flush_all(Some(group)).await?;
    if json {
        output::record(json!({"group": group, "flushed": true}));
    } else {
        output::info(&format!("flushed {group}"));
    }
    Ok(ExitCode::SUCCESS)
}
