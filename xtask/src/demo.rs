//! `cargo xtask demo`: a local two-zone cluster, narrated by running the real
//! `memgroup` tool, built in release mode: its bench step prints throughput,
//! which a debug build would understate. Every process it starts is killed
//! when it ends, on error too (and Ctrl-C reaches the memcached children,
//! which share the terminal's process group).

use std::process::Command;
use std::time::Instant;

use crate::cluster::{self, Server, groups_spec};
use crate::{Result, cargo, root, run};

const KEYS: &str = "100000";

fn say(title: &str, text: &str) {
    println!();
    println!("\x1b[1m== {title}\x1b[0m");
    println!("{text}");
}

/// Runs the tool with `args`, echoing the command line; returns its stdout.
fn tool(args: &[&str]) -> Result<String> {
    let shown: Vec<String> = args
        .iter()
        .map(|a| {
            if a.contains([';', ' ', '=']) {
                format!("'{a}'")
            } else {
                (*a).to_string()
            }
        })
        .collect();
    println!("$ memgroup {}", shown.join(" "));
    let out = Command::new(root().join("target/release/memgroup"))
        .args(args)
        // The demo's cluster is gone when it ends: repairs it could not
        // finish would stay in the user's journal for servers that no
        // longer exist (and ports another memcached may take).
        .env("MEMGROUP_REPAIR_JOURNAL", "off")
        .output()
        .map_err(|e| format!("cannot run memgroup: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    print!("{stdout}");
    eprint!("{}", String::from_utf8_lossy(&out.stderr));
    if !out.status.success() {
        println!("(exit status {})", out.status.code().unwrap_or(-1));
    }
    Ok(stdout)
}

pub(crate) fn demo() -> Result<()> {
    crate::ensure_memcached()?;
    println!("Building the memgroup tool in release mode (a first build takes a while)…");
    run(
        &cargo(),
        &["build", "--quiet", "--release", "--bin", "memgroup"],
        &[],
    )?;
    let started = Instant::now();

    let sg1: Vec<Server> = (0..3).map(|_| cluster::spawn()).collect::<Result<_>>()?;
    let mut sg2: Vec<Server> = (0..3).map(|_| cluster::spawn()).collect::<Result<_>>()?;
    let two = groups_spec(&[("sg1", &sg1), ("sg2", &sg2)]);
    say(
        "A local cluster",
        &format!(
            "Two server groups (zones sg1 and sg2), each a full copy, three memcached each:\n  {two}"
        ),
    );

    say(
        "1. Routing",
        "Each strategy places a key where the matching Java/Python/C client would. An operator checks agreement with the fleet like this:",
    );
    tool(&[
        "--groups",
        &two,
        "route",
        "user:42",
        "session:9f1c",
        "cart/17/items",
        "--all-strategies",
    ])?;

    say(
        "2. Loading 100,000 keys through the replicated client",
        "One write per key in every group:",
    );
    tool(&[
        "--groups",
        &two,
        "--pool-size",
        "2",
        "load",
        "--count",
        KEYS,
        "--prefix",
        "demo:",
        "--value-size",
        "100",
        "--concurrency",
        "64",
    ])?;
    tool(&["--groups", &two, "stats"])?;

    say(
        "3. Reading with a local-zone preference",
        "A client in zone sg2 reads from sg2 (see GET_HITS):",
    );
    tool(&[
        "--groups", &two, "--zone", "sg2", "get", "demo:1", "demo:2", "demo:3",
    ])?;
    tool(&["--groups", &two, "stats"])?;

    let victim = sg2[0].addr_string();
    say(
        "4. SIGKILL one server of the local group",
        &format!(
            "kill -9 {} ({victim}); reads of its keys fall back to sg1:",
            sg2[0].pid().unwrap_or(0)
        ),
    );
    sg2[0].kill();
    let keys: Vec<String> = (0..8).map(|i| format!("demo:{i}")).collect();
    let mut args = vec![
        "--groups",
        &two,
        "--zone",
        "sg2",
        "--timeout-ms",
        "300",
        "get",
    ];
    args.extend(keys.iter().map(String::as_str));
    tool(&args)?;

    let sg3: Vec<Server> = (0..3).map(|_| cluster::spawn()).collect::<Result<_>>()?;
    let three = groups_spec(&[("sg1", &sg1), ("sg2", &sg2[1..]), ("sg3", &sg3)]);
    say(
        "5. A new, empty group sg3, warmed from sg1",
        "sg2 is listed with its two live servers now. lru_crawler enumerates sg1's keys; each is written once\ninto sg3, with six connections per server (the pool size spreads load, it never multiplies writes):",
    );
    tool(&["--groups", &three, "stats", "--group", "sg3"])?;
    tool(&[
        "--groups",
        &three,
        "--pool-size",
        "6",
        "warm",
        "--from",
        "sg1",
        "--to",
        "sg3",
        "--verify",
    ])?;
    println!("The servers' own counters: sg3's CMD_SET equals the number of keys copied.");
    tool(&["--groups", &three, "stats", "--group", "sg3"])?;

    say(
        "6. A short bench",
        "9 gets : 1 set, 32 in flight, 3 seconds, against the three groups (the release build of the tool,\nall on this machine: client and servers share its cores):",
    );
    tool(&[
        "--groups",
        &three,
        "--zone",
        "sg3",
        "bench",
        "--ratio",
        "9:1",
        "--keys",
        "10000",
        "--concurrency",
        "32",
        "--duration",
        "3",
        "--prefix",
        "demo:",
        "--no-prefill",
    ])?;

    proxy_step(&three)?;

    say(
        "Done",
        &format!(
            "in {:.1} s; stopping every memcached this demo started.",
            started.elapsed().as_secs_f64()
        ),
    );
    drop((sg1, sg2, sg3));
    Ok(())
}

/// The groups' summed `cmd_set`, from the tool's `--json stats`.
fn sets_per_group(groups: &str) -> Result<Vec<(String, u64)>> {
    let out = Command::new(root().join("target/release/memgroup"))
        .args(["--json", "--groups", groups, "stats"])
        .env("MEMGROUP_REPAIR_JOURNAL", "off")
        .output()
        .map_err(|e| format!("cannot run memgroup: {e}"))?;
    let json = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut sums: Vec<(String, u64)> = Vec::new();
    // The servers' rows only (the group totals would count twice).
    for object in json
        .split("},{")
        .filter(|o| o.contains("\"kind\":\"server\""))
    {
        let text = |name: &str| {
            let key = format!("\"{name}\":");
            object.find(&key).map(|at| &object[at + key.len()..])
        };
        let (Some(group), Some(sets)) = (text("group"), text("cmd_set")) else {
            continue;
        };
        let group = group.trim_start_matches('"');
        let group = &group[..group.find('"').unwrap_or(group.len())];
        let sets: u64 = sets
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        match sums.iter_mut().find(|(g, _)| g == group) {
            Some((_, sum)) => *sum += sets,
            None => sums.push((group.to_string(), sets)),
        }
    }
    Ok(sums)
}

/// A venv with python-memcached (the one the interop tests make, under
/// `target/interop/venv`), made when missing; `None` when it cannot be.
fn python_memcached() -> Option<std::path::PathBuf> {
    let venv = root().join("target/interop/venv");
    let python = venv.join("bin/python");
    let ready = || {
        Command::new(&python)
            .args(["-c", "import memcache"])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if !ready() {
        println!(
            "(making a Python venv with python-memcached under {})",
            venv.display()
        );
        let made = Command::new("python3")
            .args(["-m", "venv"])
            .arg(&venv)
            .output()
            .is_ok_and(|o| o.status.success())
            && Command::new(venv.join("bin/pip"))
                .args(["install", "--quiet", "python-memcached==1.62"])
                .output()
                .is_ok_and(|o| o.status.success());
        if !made || !ready() {
            return None;
        }
    }
    Some(python)
}

/// Step 7, `memgroup proxy`: a Python service, through the proxy, gets the same
/// replication: the servers' own counters show one write in every group.
fn proxy_step(groups: &str) -> Result<()> {
    say(
        "7. memgroup proxy: every language gets the same routing and replication",
        "A sidecar speaking memcached's own protocol, forwarding through the library (zone sg3):",
    );
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| e.to_string())?
        .port();
    let listen = format!("127.0.0.1:{port}");
    println!("$ memgroup --groups '{groups}' --zone sg3 proxy --listen {listen} &");
    let mut proxy = Command::new(root().join("target/release/memgroup"))
        .args([
            "--groups", groups, "--zone", "sg3", "proxy", "--listen", &listen,
        ])
        .env("MEMGROUP_REPAIR_JOURNAL", "off")
        .stdout(std::process::Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start memgroup proxy: {e}"))?;
    let result = (|| {
        let Some(python) = python_memcached() else {
            println!("(no python3 venv with python-memcached here: step skipped)");
            return Ok(());
        };
        let deadline = Instant::now() + std::time::Duration::from_secs(10);
        while std::net::TcpStream::connect(&listen).is_err() && Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let before = sets_per_group(groups)?;
        let script = format!(
            "import memcache\nmc = memcache.Client(['{listen}'])\nfor i in range(100):\n    mc.set('py:%d' % i, 'written by Python %d' % i)\nprint('python-memcached read back:', repr(mc.get('py:7')))\n"
        );
        println!(
            "$ python -c \"import memcache; mc = memcache.Client(['{listen}']); mc.set(...) x 100; mc.get('py:7')\""
        );
        let out = Command::new(&python)
            .args(["-c", &script])
            .output()
            .map_err(|e| format!("cannot run python: {e}"))?;
        print!("{}", String::from_utf8_lossy(&out.stdout));
        eprint!("{}", String::from_utf8_lossy(&out.stderr));
        // A write returns once its policy is met; the proxy finishes the
        // other groups' parts just after.
        std::thread::sleep(std::time::Duration::from_millis(200));
        let after = sets_per_group(groups)?;
        println!("The servers' own CMD_SET, per group, since the Python script started:");
        for (group, sets) in &after {
            let was = before
                .iter()
                .find(|(g, _)| g == group)
                .map_or(0, |(_, n)| *n);
            println!("  {group}: +{}", sets - was);
        }
        Ok(())
    })();
    let _ = proxy.kill();
    let _ = proxy.wait();
    result
}
