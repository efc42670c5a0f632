//! `status`: every server probed (`version`, timed) and the client's view of
//! it — up, down (its probe failed) or dead, failures in a row,
//! connections — with totals per group; `--json` adds the client's request
//! counters and latencies. Exit 1 if any server is unreachable.

use std::process::ExitCode;
use std::time::Duration;

use memgroup::client::{Client, Counters, Health, Probe, ServerState};
use serde_json::{Value, json};

use crate::cluster::{Cluster, only_group};
use crate::exit::{self, Failure};
use crate::flags::ClusterFlags;
use crate::output;

/// How often to probe.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Probe again every SECONDS, printing each time, until interrupted.
    #[arg(long, value_name = "SECONDS")]
    watch: Option<f64>,
    /// Only this group's servers.
    #[arg(long)]
    group: Option<String>,
}

/// `status`: probe and report once, or with `--watch` every so often,
/// following changes to the `--config` file.
pub(crate) async fn run(args: &Args, flags: &ClusterFlags) -> Result<ExitCode, Failure> {
    let json = crate::output::json();
    let every = match args.watch {
        Some(s) if s.is_finite() && s > 0.0 => Some(Duration::from_secs_f64(s)),
        Some(s) => return Err(Failure::Usage(format!("--watch {s}: expected seconds > 0"))),
        None => None,
    };
    let cluster = Cluster::from_flags(flags)?;
    let client = cluster.client_for(args.group.as_deref())?;
    let group = args.group.clone();
    let _watch = every.and_then(|_| {
        cluster.watch(&client, move |spec| match &group {
            Some(name) => {
                Failure::group_in_spec(&spec, name)
                    .map_err(|_| format!("the group {name:?} is no longer in the file"))?;
                Ok(only_group(&spec, name))
            }
            None => Ok(spec),
        })
    });
    for round in 0.. {
        if let (Some(every), false) = (every, json) {
            round_header(every, round == 0);
        }
        let code = once(&client).await;
        let Some(every) = every else {
            return Ok(code);
        };
        tokio::time::sleep(every).await;
    }
    unreachable!("the rounds go on until interrupted")
}

/// Before each `--watch` round: on a terminal the screen is cleared, so the
/// table stays in place; then the time (UTC) of the round.
fn round_header(every: Duration, first: bool) {
    use std::io::{IsTerminal, Write};
    let mut stdout = std::io::stdout();
    if stdout.is_terminal() {
        // A closed terminal ends the run at the next line written.
        let _ = stdout.write_all(b"\x1b[2J\x1b[H");
    } else if !first {
        output::outln!();
    }
    let seconds = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (h, m, s) = (seconds / 3600 % 24, seconds / 60 % 60, seconds % 60);
    output::outln!("status at {h:02}:{m:02}:{s:02} UTC, every {every:?}");
}

/// One probe and report; exit 1 if a server did not answer.
async fn once(client: &Client) -> ExitCode {
    let json = crate::output::json();
    let probes = client.probe().await;
    let status = client.health();
    let unreachable = probes.iter().filter(|p| p.version.is_err()).count();
    if json {
        output::records(&records(&probes, &status));
    } else {
        table(&probes, &status);
    }
    exit::code(unreachable == 0)
}

/// What `status` says of a server: the client's view (up, or dead until a
/// retry), except that a server whose probe just failed is never up — a
/// stopped server keeps its socket, times out, and is not (yet) marked dead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shown {
    Up,
    /// The probe failed while the client still has it up.
    Down,
    Dead {
        retry_in: Duration,
    },
}

impl Shown {
    fn of(state: ServerState, probe: Option<&Probe>) -> Shown {
        match state {
            ServerState::Dead { retry_in } => Shown::Dead { retry_in },
            _ if probe.is_some_and(|p| p.version.is_err()) => Shown::Down,
            _ => Shown::Up,
        }
    }

    /// `up`, `down` or `dead`.
    fn name(self) -> &'static str {
        match self {
            Shown::Up => "up",
            Shown::Down => "down",
            Shown::Dead { .. } => "dead",
        }
    }

    /// The STATE column: the name, and for a dead server when it is retried.
    fn text(self) -> String {
        match self {
            Shown::Dead { retry_in } => {
                format!("dead (retry in {:.1} s)", retry_in.as_secs_f64())
            }
            other => other.name().to_string(),
        }
    }

    /// How long until a dead server is retried, in milliseconds.
    fn retry_in_ms(self) -> Option<u64> {
        match self {
            Shown::Dead { retry_in } => {
                Some(u64::try_from(retry_in.as_millis()).unwrap_or(u64::MAX))
            }
            _ => None,
        }
    }
}

/// The probe of `server`, if it was probed.
fn probe_of<'a>(probes: &'a [Probe], server: &str) -> Option<&'a Probe> {
    probes.iter().find(|p| p.server == server)
}

/// A group's servers shown up, and those whose probe failed.
fn group_counts(probes: &[Probe], status: &Health, group: &str) -> (usize, usize) {
    let members = status
        .servers
        .iter()
        .filter(|s| s.groups.iter().any(|g| g == group));
    let (mut up, mut unreachable) = (0, 0);
    for s in members {
        let probe = probe_of(probes, &s.server);
        if Shown::of(s.state, probe) == Shown::Up {
            up += 1;
        }
        if probe.is_some_and(|p| p.version.is_err()) {
            unreachable += 1;
        }
    }
    (up, unreachable)
}

fn micros(d: Option<Duration>) -> Option<u64> {
    d.map(|d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

fn ms(d: Option<Duration>) -> String {
    d.map_or("-".into(), |d| format!("{:.2} ms", d.as_secs_f64() * 1e3))
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

/// The `--json` records: one per server (`"kind": "server"`), then one per
/// group (`"kind": "group"`) with its totals.
fn records(probes: &[Probe], status: &Health) -> Vec<Value> {
    let servers = status.servers.iter().map(|s| {
        let probe = probe_of(probes, &s.server);
        let shown = Shown::of(s.state, probe);
        let mut record = json!({
            "kind": "server", "server": s.server, "groups": s.groups,
            "reachable": probe.is_some_and(|p| p.version.is_ok()),
            "round_trip_us": probe.and_then(|p| p.version.is_ok().then(|| micros(Some(p.round_trip)))),
            "version": probe.and_then(|p| p.version.as_ref().ok()).map(|v| output::clean(v)),
            "state": shown.name(), "state_text": shown.text(), "retry_in_ms": shown.retry_in_ms(),
            "failures": s.failures, "connections": s.connections,
            "in_flight": s.in_flight, "queued": s.queued, "meta_protocol": s.meta_protocol,
            "counters": counters_json(&s.counters),
        });
        if let Some(Err(e)) = probe.map(|p| &p.version) {
            record["error"] = json!(e.chain());
        }
        record
    });
    let groups = status.groups.iter().map(|g| {
        let (up, unreachable) = group_counts(probes, status, &g.group);
        json!({
            "kind": "group", "group": g.group, "servers": g.servers, "servers_up": up,
            "unreachable": unreachable, "counters": counters_json(&g.counters),
        })
    });
    servers.chain(groups).collect()
}

/// The table: the probe's answer and the client's view of each server. The
/// client's request counters and latencies are left to `--json`: this
/// client's only requests are its probes, which an operator would read as
/// the server's traffic (the probe's time is ROUND TRIP).
fn table(probes: &[Probe], status: &Health) {
    let mut rows = Vec::new();
    for group in &status.groups {
        for s in status
            .servers
            .iter()
            .filter(|s| s.groups.contains(&group.group))
        {
            let probe = probe_of(probes, &s.server);
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
                Shown::of(s.state, probe).text(),
                s.failures.to_string(),
                s.connections.to_string(),
                error,
            ]);
        }
        let (up, _) = group_counts(probes, status, &group.group);
        rows.push(vec![
            group.group.clone(),
            "(group total)".into(),
            String::new(),
            String::new(),
            String::new(),
            format!("{up}/{} up", group.servers),
            String::new(),
            String::new(),
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
            "ERROR",
        ],
        &rows,
    );
}
