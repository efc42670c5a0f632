//! `cargo xtask compare --proxy`: memcached straight, through nutcracker
//! (twemproxy, Debian's package) and through `memgroup proxy`, side by side
//! on the same two `memcached -t 1`, both proxies with ketama over them.
//!
//! - Throughput from libmemcached's `memcaslap` (90 % get, 100-byte values,
//!   2 threads) at 16, 64 and 256 connections, and multi-gets of 10 and 100
//!   keys (`-d`) at 64; each proxy's CPU per operation from its
//!   `/proc/<pid>/stat`. Rounds alternate the three targets, their order
//!   rotating; medians with the lowest and highest.
//! - Latency of gets: `memgroup bench` pointed at each target as one server,
//!   open loop (`--rate`) at half the calm rate of the direct closed loop,
//!   and one caller in a closed loop; p50/p99 (memcaslap prints none).
//!
//! `COMPARE_ROUNDS` (default 3) and `COMPARE_SECS` (default 5) set the
//! effort; `PROXY_THREADS` the proxy's worker threads (default: all cores).
//! Performance is shown here, never asserted in a test.

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::cluster::Server;
use crate::{Result, cargo, root, run};
use memgroup_testkit::Twemproxy;

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn free_port() -> Result<u16> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    Ok(listener.local_addr().map_err(|e| e.to_string())?.port())
}

fn wait_listening(port: u16) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Err(format!("nothing listens on port {port}"))
}

/// A process's CPU time so far (user + system), from `/proc/<pid>/stat`.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may hold spaces, in parentheses).
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // utime and stime are the 14th and 15th fields: 12th and 13th here.
    (ticks(11) + ticks(12)) / 100.0
}

/// A proxy under test: its name, address and process.
struct Target {
    name: &'static str,
    servers: String,
    pid: Option<u32>,
}

/// One memcaslap run: ops/s and the proxy's CPU µs per operation.
fn memcaslap(target: &Target, connections: u32, division: u32, secs: u64) -> Result<(f64, f64)> {
    let before = target.pid.map(cpu_seconds);
    let out = Command::new("memcaslap")
        .args(["-s", &target.servers, "-T", "2", "-X", "100"])
        .args(["-c", &connections.to_string(), "-t", &format!("{secs}s")])
        .args(["-d", &division.to_string()])
        .output()
        .map_err(|e| format!("cannot run memcaslap: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .rev()
        .find(|l| l.starts_with("Run time"))
        .ok_or_else(|| format!("memcaslap printed no summary: {text}"))?;
    let number = |label: &str| {
        line.split(label)
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .and_then(|n| n.parse::<f64>().ok())
            .unwrap_or(f64::NAN)
    };
    let (ops, tps) = (number("Ops: "), number("TPS: "));
    let cpu = match (before, target.pid) {
        (Some(before), Some(pid)) => (cpu_seconds(pid) - before) * 1e6 / ops,
        _ => f64::NAN,
    };
    Ok((tps, cpu))
}

/// Median, lowest and highest.
fn spread(mut values: Vec<f64>) -> (f64, f64, f64) {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    (values[n / 2], values[0], values[n - 1])
}

fn memgroup_proxy(servers: &str, port: u16) -> Result<Child> {
    let mut command = Command::new(root().join("target/release/memgroup"));
    command
        .args(["--servers", servers, "--hash", "ketama", "proxy"])
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .env("MEMGROUP_REPAIR_JOURNAL", "off")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if let Ok(threads) = std::env::var("PROXY_THREADS") {
        command.args(["--threads", &threads]);
    }
    command
        .spawn()
        .map_err(|e| format!("cannot start memgroup proxy: {e}"))
}

/// `memgroup bench` against `server` with `load` (an open loop's `--rate`,
/// or a closed loop's `--concurrency`): the gets' (p50, p99) µs.
fn latency(server: &str, load: &[&str], secs: u64) -> Result<(f64, f64)> {
    let out = Command::new(root().join("target/release/memgroup"))
        .args(["--json", "--servers", server, "bench", "--ratio", "9:1"])
        .args(["--value-size", "100", "--keys", "10000"])
        .args(load)
        .args(["--duration", &(secs + 1).to_string()])
        .env("MEMGROUP_REPAIR_JOURNAL", "off")
        .output()
        .map_err(|e| e.to_string())?;
    let json = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        // A figure never comes from a run that failed (it read NaN once).
        return Err(format!(
            "memgroup bench {load:?} against {server} failed: {json}"
        ));
    }
    Ok((
        crate::faults::field(&json, "p50_us"),
        crate::faults::field(&json, "p99_us"),
    ))
}

/// `memgroup bench` closed loop, 16 in flight, against `server`: ops/s.
fn calm_rate(server: &str, secs: u64) -> Result<f64> {
    let out = Command::new(root().join("target/release/memgroup"))
        .args(["--json", "--servers", server, "bench", "--ratio", "9:1"])
        .args([
            "--value-size",
            "100",
            "--keys",
            "10000",
            "--concurrency",
            "16",
        ])
        .args(["--duration", &secs.to_string()])
        .env("MEMGROUP_REPAIR_JOURNAL", "off")
        .output()
        .map_err(|e| e.to_string())?;
    Ok(crate::faults::field(
        &String::from_utf8_lossy(&out.stdout),
        "ops_per_second",
    ))
}

pub(crate) fn compare_proxy() -> Result<()> {
    crate::ensure_memcached()?;
    for (tool, package) in [
        ("nutcracker", "nutcracker"),
        ("memcaslap", "libmemcached-tools"),
    ] {
        let present =
            crate::on_path(tool) || crate::apt_install(&[package])? && crate::on_path(tool);
        if !present {
            return Err(format!(
                "{tool} is missing: `sudo apt-get install {package}`"
            ));
        }
    }
    run(&cargo(), &["build", "--release", "--bin", "memgroup"], &[])?;
    let rounds = env_number("COMPARE_ROUNDS", 3).max(1);
    let secs = env_number("COMPARE_SECS", 5).max(1);
    let spawn =
        || Server::try_spawn_with(&["-m", "256", "-t", "1"], |_| {}).map_err(|e| e.to_string());
    let servers: Vec<Server> = (0..2).map(|_| spawn()).collect::<Result<_>>()?;
    let direct: Vec<String> = servers.iter().map(Server::addr_string).collect();
    let direct = direct.join(",");
    let dir = root().join("target/compare-proxy");
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let mg_port = free_port()?;
    let nut =
        Twemproxy::try_spawn(&servers.iter().collect::<Vec<_>>()).map_err(|e| e.to_string())?;
    let mut mg = memgroup_proxy(&direct, mg_port)?;
    let ready = wait_listening(mg_port);
    let result = ready.and_then(|()| {
        let targets = [
            Target {
                name: "direct",
                servers: direct.clone(),
                pid: None,
            },
            Target {
                name: "nutcracker",
                servers: nut.addr_string(),
                pid: Some(nut.pid()),
            },
            Target {
                name: "memgroup proxy",
                servers: format!("127.0.0.1:{mg_port}"),
                pid: Some(mg.id()),
            },
        ];
        measure(&targets, rounds, secs)
    });
    drop(nut);
    let _ = mg.kill();
    let _ = mg.wait();
    result
}

fn measure(targets: &[Target; 3], rounds: u64, secs: u64) -> Result<()> {
    println!(
        "memcaslap, 2 threads, 100-byte values, {secs} s a run, {rounds} rounds alternating (median [lowest-highest])"
    );
    println!(
        "{:<22} {:>26} {:>26} {:>26} {:>9} {:>9} {:>10} {:>10}",
        "load",
        "direct ops/s",
        "nutcracker ops/s",
        "memgroup ops/s",
        "mg/nut",
        "mg/direct",
        "nut µs/op",
        "mg µs/op"
    );
    let loads: [(&str, u32, u32); 5] = [
        ("16 connections", 16, 1),
        ("64 connections", 64, 1),
        ("256 connections", 256, 1),
        ("64 conns, get of 10", 64, 10),
        ("64 conns, get of 100", 64, 100),
    ];
    for (name, connections, division) in loads {
        let mut ops = [Vec::new(), Vec::new(), Vec::new()];
        let mut cpu = [Vec::new(), Vec::new(), Vec::new()];
        for round in 0..rounds as usize {
            for i in 0..3 {
                let t = (i + round) % 3;
                let (o, c) = memcaslap(&targets[t], connections, division, secs)?;
                ops[t].push(o);
                cpu[t].push(c);
            }
        }
        let shown = |v: &[f64]| {
            let (m, lo, hi) = spread(v.to_vec());
            format!("{m:.0} [{lo:.0}-{hi:.0}]")
        };
        let ratio = |a: &[f64], b: &[f64]| {
            let ratios: Vec<f64> = a.iter().zip(b).map(|(a, b)| a / b).collect();
            spread(ratios).0
        };
        println!(
            "{:<22} {:>26} {:>26} {:>26} {:>9.2} {:>9.2} {:>10.1} {:>10.1}",
            name,
            shown(&ops[0]),
            shown(&ops[1]),
            shown(&ops[2]),
            ratio(&ops[2], &ops[1]),
            ratio(&ops[2], &ops[0]),
            spread(cpu[1].clone()).0,
            spread(cpu[2].clone()).0,
        );
    }
    let calm = calm_rate(&targets[0].servers, secs)?;
    let rate = format!("{:.0}", calm / 2.0);
    // Half the calm rate, open loop (the measure: each request timed
    // from its slot, so the runtime's 1 ms timer is in every figure), and one
    // caller in a closed loop (what a request costs alone).
    for (load, why) in [
        (
            vec!["--rate", rate.as_str(), "--warm-up", "1"],
            format!("open loop at {rate}/s, half the direct closed loop's {calm:.0}/s"),
        ),
        (
            vec!["--concurrency", "1"],
            "one caller, closed loop".to_string(),
        ),
    ] {
        println!();
        println!("latency of gets, memgroup bench, {why}, 9:1 get:set");
        println!("{:<16} {:>10} {:>10}", "target", "p50 µs", "p99 µs");
        let mut base = (0.0, 0.0);
        for (i, target) in targets.iter().enumerate() {
            // As one server: the proxy routes; direct is the first memcached.
            let server = target.servers.split(',').next().unwrap_or_default();
            let (p50, p99) = latency(server, &load, secs)?;
            if i == 0 {
                base = (p50, p99);
                println!("{:<16} {p50:>10.0} {p99:>10.0}", target.name);
            } else {
                println!(
                    "{:<16} {p50:>10.0} {p99:>10.0}   (+{:.0} / +{:.0} over direct)",
                    target.name,
                    p50 - base.0,
                    p99 - base.1
                );
            }
        }
    }
    Ok(())
}
