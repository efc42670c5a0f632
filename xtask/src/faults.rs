//! `cargo xtask compare --faults`: what one stalled server of six costs. Two
//! groups of three memcached (`-t 1`), the release tool's `bench` from zone
//! `sg1`, 32 in flight for the closed loop:
//!
//! - gets with a server of the local group SIGSTOPped, sets (all-minus-one
//!   over the two groups) with a server of the other group SIGSTOPped, each
//!   against the same run with every server up (three rounds alternating,
//!   medians);
//! - then the open loop at half the calm rate with the server stopped, for
//!   5 s of which the last 4 are counted: latency from each request's slot
//!   in the schedule (no coordinated omission), and the share slower than
//!   the timeout.
//!
//! Each run is a new process, so a closed stalled run includes the client
//! finding the stall (its first half second); the open one leaves out its
//! first second. Performance is shown here, never
//! asserted in a test.

use std::process::Command;

use crate::cluster::{Server, groups_spec};
use crate::{Result, cargo, root, run};

/// One bench run's figures, from the tool's `--json`.
struct Figures {
    ops_per_second: f64,
    errors: f64,
    p99_us: f64,
    max_us: f64,
    slower_than_timeout_percent: f64,
}

/// A number field of the tool's JSON report (its first occurrence).
pub(crate) fn field(json: &str, name: &str) -> f64 {
    let key = format!("\"{name}\":");
    json.find(&key)
        .map(|at| &json[at + key.len()..])
        .and_then(|rest| {
            let end = rest
                .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == 'e'))
                .unwrap_or(rest.len());
            rest[..end].parse().ok()
        })
        .unwrap_or(f64::NAN)
}

fn bench(groups: &str, args: &[&str]) -> Result<Figures> {
    bench_on(&["--groups", groups, "--zone", "sg1"], args)
}

/// A bench run of the tool on the cluster `cluster` names (`--groups …`,
/// or `--servers` a proxy).
fn bench_on(cluster: &[&str], args: &[&str]) -> Result<Figures> {
    let tool = root().join("target/release/memgroup");
    let out = Command::new(&tool)
        .arg("--json")
        .args(cluster)
        .arg("bench")
        .args(args)
        // A throwaway cluster: nothing for the user's repair journal.
        .env("MEMGROUP_REPAIR_JOURNAL", "off")
        .output()
        .map_err(|e| format!("cannot run {}: {e}", tool.display()))?;
    let json = String::from_utf8_lossy(&out.stdout);
    Ok(Figures {
        ops_per_second: field(&json, "ops_per_second"),
        errors: field(&json, "errors"),
        p99_us: field(&json, "p99_us"),
        max_us: field(&json, "max_us"),
        slower_than_timeout_percent: field(&json, "slower_than_timeout_percent"),
    })
}

/// Closed-loop rounds of each (calm, stalled), alternating.
const ROUNDS: usize = 3;

/// `ROUNDS` closed-loop runs each, calm and with `victim` stopped,
/// alternating so drift on the machine hits both alike.
fn calm_and_stalled(
    cluster: &[&str],
    closed: &[&str],
    victim: &Server,
) -> Result<(Vec<Figures>, Vec<Figures>)> {
    let (mut calm, mut stalled) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        calm.push(bench_on(cluster, closed)?);
        victim.stop();
        let run = bench_on(cluster, closed);
        victim.resume();
        stalled.push(run?);
    }
    Ok((calm, stalled))
}

/// The run of median throughput.
fn median(mut runs: Vec<Figures>) -> Figures {
    runs.sort_by(|a, b| a.ops_per_second.total_cmp(&b.ops_per_second));
    runs.swap_remove(runs.len() / 2)
}

pub(crate) fn compare_faults() -> Result<()> {
    crate::ensure_memcached()?;
    run(&cargo(), &["build", "--release", "--bin", "memgroup"], &[])?;
    let spawn =
        || Server::try_spawn_with(&["-m", "256", "-t", "1"], |_| {}).map_err(|e| e.to_string());
    let sg1: Vec<Server> = (0..3).map(|_| spawn()).collect::<Result<_>>()?;
    let sg2: Vec<Server> = (0..3).map(|_| spawn()).collect::<Result<_>>()?;
    let groups = groups_spec(&[("sg1", &sg1), ("sg2", &sg2)]);
    println!(
        "{:<34} {:>10} {:>10} {:>6} {:>10} {:>10} {:>9}",
        "scenario", "calm ops/s", "stalled", "ratio", "p99 µs", "max µs", "> timeout"
    );
    for (name, ratio, victim) in [
        ("gets, a server of sg1 stopped", "1:0", &sg1[1]),
        ("sets, a server of sg2 stopped", "0:1", &sg2[1]),
    ] {
        let closed = ["--concurrency", "32", "--duration", "3", "--ratio", ratio];
        let cluster = ["--groups", groups.as_str(), "--zone", "sg1"];
        let (calm, stalled) = calm_and_stalled(&cluster, &closed, victim)?;
        let (calm, stalled) = (median(calm), median(stalled));
        println!(
            "{:<34} {:>10.0} {:>10.0} {:>6.2} {:>10.0} {:>10.0} {:>8.2}%",
            format!("{name} (closed)"),
            calm.ops_per_second,
            stalled.ops_per_second,
            stalled.ops_per_second / calm.ops_per_second,
            stalled.p99_us,
            stalled.max_us,
            stalled.slower_than_timeout_percent.max(0.0),
        );
        let rate = format!("{:.0}", calm.ops_per_second / 2.0);
        // The first second (the new client finding the stall) is sent but
        // not counted: the goal is for latency after it.
        let open = [
            "--rate",
            &rate,
            "--duration",
            "5",
            "--warm-up",
            "1",
            "--ratio",
            ratio,
            "--no-prefill",
        ];
        victim.stop();
        let stalled = bench(&groups, &open);
        victim.resume();
        let stalled = stalled?;
        println!(
            "{:<34} {:>10} {:>10.0} {:>6} {:>10.0} {:>10.0} {:>8.2}%",
            format!("{name} (open, {rate}/s)"),
            "",
            stalled.ops_per_second,
            "",
            stalled.p99_us,
            stalled.max_us,
            stalled.slower_than_timeout_percent,
        );
    }
    through_the_proxy(&groups, &sg1, &sg2)
}

/// The same stalls under load through `memgroup proxy` (zone sg1) on the
/// same layout: the tool's bench pointed at the proxy as one server (its own
/// timeout 2 s, so what it counts as errors are the proxy's), calm against
/// stalled, alternating; errors are what the proxy's clients saw.
fn through_the_proxy(groups: &str, sg1: &[Server], sg2: &[Server]) -> Result<()> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| e.to_string())?
        .port();
    let listen = format!("127.0.0.1:{port}");
    let mut proxy = Command::new(root().join("target/release/memgroup"))
        .args([
            "--groups", groups, "--zone", "sg1", "proxy", "--listen", &listen,
        ])
        .env("MEMGROUP_REPAIR_JOURNAL", "off")
        .stdout(std::process::Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start memgroup proxy: {e}"))?;
    let result = (|| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while std::net::TcpStream::connect(&listen).is_err() {
            if std::time::Instant::now() > deadline {
                return Err("memgroup proxy did not start".to_string());
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        println!();
        println!(
            "through memgroup proxy (zone sg1), the bench a client of it (32 in flight, its timeout 2 s):"
        );
        println!(
            "{:<34} {:>10} {:>10} {:>6} {:>10} {:>10} {:>9}",
            "scenario", "calm ops/s", "stalled", "ratio", "p99 µs", "max µs", "errors"
        );
        let cluster = ["--servers", listen.as_str(), "--timeout-ms", "2000"];
        for (name, ratio, victim) in [
            ("gets, a server of sg1 stopped", "1:0", &sg1[1]),
            ("sets, a server of sg2 stopped", "0:1", &sg2[1]),
        ] {
            let closed = ["--concurrency", "32", "--duration", "3", "--ratio", ratio];
            let (calm, stalled) = calm_and_stalled(&cluster, &closed, victim)?;
            let errors: f64 = stalled.iter().map(|f| f.errors).sum();
            let (calm, stalled) = (median(calm), median(stalled));
            println!(
                "{:<34} {:>10.0} {:>10.0} {:>6.2} {:>10.0} {:>10.0} {:>9.0}",
                name,
                calm.ops_per_second,
                stalled.ops_per_second,
                stalled.ops_per_second / calm.ops_per_second,
                stalled.p99_us,
                stalled.max_us,
                errors,
            );
        }
        Ok(())
    })();
    let _ = proxy.kill();
    let _ = proxy.wait();
    result
}
