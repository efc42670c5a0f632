//! `status`: every server probed (`version`, timed) and the client's view of
//! it — up or dead, failures in a row, connections, requests, errors,
//! latency — with totals per group. Exit 1 if any server is unreachable.

use std::process::ExitCode;
use std::time::Duration;

use memgroup::client::{Client, Counters, Probe, ServerState, Status};
use serde_json::{Value, json};

use crate::cluster::Cluster;
use crate::exit::{self, Failure};
use crate::flags::ClusterFlags;
use crate::output;

/// How often to probe.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Probe again every SECONDS, printing each time, until interrupted.
    #[arg(long, value_name = "SECONDS")]
    watch: Option<f64>,
}

/// `status`: probe and report once, or with `--watch` every so often,
/// following changes to the `--config` file.
pub(crate) async fn run(
    args: &Args,
    flags: &ClusterFlags,
    json: bool,
) -> Result<ExitCode, Failure> {
    let every = match args.watch {
        Some(s) if s.is_finite() && s > 0.0 => Some(Duration::from_secs_f64(s)),
        Some(s) => return Err(Failure::Usage(format!("--watch {s}: expected seconds > 0"))),
        None => None,
    };
    let cluster = Cluster::from_flags(flags)?;
    let client = cluster.client()?;
    let _watch = every.and_then(|_| cluster.watch(&client, |spec| spec));
    loop {
        let code = once(&client, json).await;
        let Some(every) = every else {
            return Ok(code);
        };
        tokio::time::sleep(every).await;
        if !json {
            output::outln!();
        }
    }
}

/// One probe and report; exit 1 if a server did not answer.
async fn once(client: &Client, json: bool) -> ExitCode {
    let probes = client.probe().await;
    let status = client.status();
    let unreachable = probes.iter().filter(|p| p.version.is_err()).count();
    if json {
        output::json(&report(&probes, &status, unreachable));
    } else {
        table(&probes, &status);
    }
    exit::code(unreachable == 0)
}

fn micros(d: Option<Duration>) -> Option<u64> {
    d.map(|d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

fn ms(d: Option<Duration>) -> String {
    d.map_or("-".into(), |d| format!("{:.2} ms", d.as_secs_f64() * 1e3))
}

fn state(state: ServerState) -> (String, Option<u64>) {
    match state {
        ServerState::Dead { retry_in } => (
            format!("dead (retry in {:.1} s)", retry_in.as_secs_f64()),
            Some(u64::try_from(retry_in.as_millis()).unwrap_or(u64::MAX)),
        ),
        _ => ("up".into(), None),
    }
}

fn counters_json(c: &Counters) -> Value {
    let errors: serde_json::Map<String, Value> = c
        .errors
        .iter()
        .map(|(kind, n)| (kind.name().to_string(), json!(n)))
        .collect();
    json!({
        "requests": c.requests, "writes": c.writes, "hits": c.hits, "misses": c.misses,
        "fallbacks": c.fallbacks, "errors": errors, "timeouts": c.timeouts,
        "bytes_in": c.bytes_in, "bytes_out": c.bytes_out,
        "latency_p50_us": micros(c.latency_p50), "latency_p99_us": micros(c.latency_p99),
    })
}

fn report(probes: &[Probe], status: &Status, unreachable: usize) -> Value {
    let servers: Vec<Value> = status
        .servers
        .iter()
        .map(|s| {
            let probe = probes.iter().find(|p| p.server == s.server);
            let (state_text, retry_in_ms) = state(s.state);
            let mut record = json!({
                "server": s.server, "groups": s.groups,
                "reachable": probe.is_some_and(|p| p.version.is_ok()),
                "round_trip_us": probe.and_then(|p| p.version.is_ok().then(|| micros(Some(p.round_trip)))),
                "version": probe.and_then(|p| p.version.as_ref().ok()).map(|v| output::clean(v)),
                "state": if retry_in_ms.is_some() { "dead" } else { "up" },
                "state_text": state_text, "retry_in_ms": retry_in_ms,
                "failures": s.failures, "connections": s.connections,
                "in_flight": s.in_flight, "queued": s.queued,
                "counters": counters_json(&s.counters),
            });
            if let Some(Err(e)) = probe.map(|p| &p.version) {
                record["error"] = json!(e.chain());
            }
            record
        })
        .collect();
    let groups: Vec<Value> = status
        .groups
        .iter()
        .map(|g| {
            json!({
                "group": g.group, "servers": g.servers, "servers_up": g.servers_up,
                "counters": counters_json(&g.counters),
            })
        })
        .collect();
    json!({"ok": unreachable == 0, "unreachable": unreachable, "servers": servers, "groups": groups})
}

fn table(probes: &[Probe], status: &Status) {
    let mut rows = Vec::new();
    for group in &status.groups {
        for s in status
            .servers
            .iter()
            .filter(|s| s.groups.contains(&group.group))
        {
            let probe = probes.iter().find(|p| p.server == s.server);
            let (reach, round_trip, version, error) = match probe.map(|p| &p.version) {
                Some(Ok(v)) => (
                    "yes".to_string(),
                    ms(probe.map(|p| p.round_trip)),
                    v.clone(),
                    String::new(),
                ),
                Some(Err(e)) => ("NO".into(), "-".into(), "-".into(), e.chain()),
                None => ("-".into(), "-".into(), "-".into(), String::new()),
            };
            rows.push(vec![
                group.group.clone(),
                s.server.clone(),
                reach,
                round_trip,
                version,
                state(s.state).0,
                s.failures.to_string(),
                s.connections.to_string(),
                s.counters.requests.to_string(),
                s.counters.errors_total().to_string(),
                ms(s.counters.latency_p50),
                ms(s.counters.latency_p99),
                error,
            ]);
        }
        let c = &group.counters;
        rows.push(vec![
            group.group.clone(),
            "(group total)".into(),
            String::new(),
            String::new(),
            String::new(),
            format!("{}/{} up", group.servers_up, group.servers),
            String::new(),
            String::new(),
            c.requests.to_string(),
            c.errors_total().to_string(),
            ms(c.latency_p50),
            ms(c.latency_p99),
            String::new(),
        ]);
    }
    output::table(
        &[
            "GROUP",
            "SERVER",
            "REACHABLE",
            "ROUND TRIP",
            "VERSION",
            "STATE",
            "FAILURES",
            "CONNS",
            "REQUESTS",
            "ERRORS",
            "P50",
            "P99",
            "ERROR",
        ],
        &rows,
    );
}
