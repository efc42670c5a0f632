//! `cargo xtask`: the project's automation, in Rust so it runs wherever cargo does.
//!
//! - `cargo xtask test`  — memcached check/install, fmt, clippy, tests, docs.
//! - `cargo xtask bench [criterion args]` — the criterion benches.
//! - `cargo xtask compare` — memgroup vs the `memcache`, `async-memcached`,
//!   `memcache-async` and `memcached-rs` crates, and memgroup's own rows across
//!   two groups (the standalone `bench-compare/` package, outside the workspace).
//! - `cargo xtask fuzz [seconds]` — every fuzz target, each for `seconds` (needs `cargo install cargo-fuzz`).
//! - `cargo xtask demo` — a local cluster narrated by the `memgroup` tool.
//! - `cargo xtask man` — the tool's man pages into `target/man`.
//! - `cargo xtask cluster up|down` — leave such a cluster running to play with.
//! - `cargo xtask compare --proxy|--faults|--tracing|--metrics` — the proxy
//!   against twemproxy, calm against a stalled server, a feature's cost.
//! - `cargo xtask soak [--duration S] [--proxy]` — the soak under faults.
//! - `cargo xtask package` — the crates packaged and built from their
//!   tarballs; `fuzz/` and `bench-compare/` checked (CI runs it).
//! - `cargo xtask mutants [crate]`, `cargo xtask ensure-memcached`.

mod cluster;
mod compare;
mod demo;
mod faults;
mod package;
mod proxy;

use std::env;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

type Result<T> = std::result::Result<T, String>;

fn main() -> ExitCode {
    let args: Vec<String> = env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("test") => test(),
        Some("bench") => bench(&args[1..]),
        Some("compare") if args.get(1).map(String::as_str) == Some("--faults") => {
            faults::compare_faults()
        }
        Some("compare") if args.get(1).map(String::as_str) == Some("--proxy") => {
            proxy::compare_proxy()
        }
        Some("compare") if args.get(1).map(String::as_str) == Some("--tracing") => {
            compare::compare_feature("tracing", "no subscriber")
        }
        Some("compare") if args.get(1).map(String::as_str) == Some("--metrics") => {
            compare::compare_feature("metrics", "no recorder")
        }
        Some("compare") if args.get(1).map(String::as_str) == Some("--targets") => {
            compare::compare_targets()
        }
        Some("compare") => compare::compare(),
        Some("fuzz") => fuzz(&args[1..]),
        Some("soak") => soak(&args[1..]),
        Some("package") => package::package(),
        Some("mutants") => mutants(&args[1..]),
        Some("ensure-memcached") => ensure_memcached(),
        Some("demo") => demo::demo(),
        Some("man") => man(),
        Some("cluster") => cluster::cluster(args.get(1).map(String::as_str)),
        _ => Err(
            "usage: cargo xtask <demo | test | bench [criterion args] | compare [--targets | --tracing | --metrics | --faults | --proxy] | fuzz [--all] [seconds] [--no-sanitizer] | soak [--duration SECONDS] [--proxy] | package | mutants [crate] | man | cluster up|down | ensure-memcached>"
                .to_string(),
        ),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("xtask: {message}");
            ExitCode::FAILURE
        }
    }
}

pub(crate) fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in the workspace root")
        .to_path_buf()
}

/// The cargo that runs xtask (`$CARGO`), so a toolchain chosen with `+name`
/// or a cargo outside `PATH` is the one that builds and tests.
pub(crate) fn cargo() -> String {
    env::var("CARGO").unwrap_or_else(|_| "cargo".to_string())
}

pub(crate) fn run(program: &str, args: &[&str], envs: &[(&str, &str)]) -> Result<()> {
    eprintln!("$ {program} {}", args.join(" "));
    let status = Command::new(program)
        .args(args)
        .envs(envs.iter().copied())
        .current_dir(root())
        .status()
        .map_err(|e| format!("cannot run {program}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("`{program} {}` failed ({status})", args.join(" ")))
    }
}

pub(crate) fn on_path(program: &str) -> bool {
    env::var_os("PATH")
        .is_some_and(|paths| env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
}

fn is_root() -> bool {
    // /proc/self/status: "Uid:\t<real>\t<effective>\t…"
    std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|ids| ids.split_whitespace().nth(1).map(|e| e == "0"))
            .unwrap_or(false)
    })
}

/// Installs Debian packages when running as root with apt-get; `false` when
/// that is not possible here.
pub(crate) fn apt_install(packages: &[&str]) -> Result<bool> {
    if !(is_root() && on_path("apt-get")) {
        return Ok(false);
    }
    eprintln!("installing the Debian packages {}", packages.join(" "));
    // A fresh machine has no package lists until `apt-get update`.
    run("apt-get", &["update"], &[])?;
    let mut args = vec!["install", "-y"];
    args.extend_from_slice(packages);
    run("apt-get", &args, &[("DEBIAN_FRONTEND", "noninteractive")])?;
    Ok(true)
}

/// `path` exists, or is installed now from the Debian `package`.
fn ensure_installed(path: &str, package: &str) -> Result<()> {
    let there = || std::path::Path::new(path).exists();
    if there() || (apt_install(&[package])? && there()) {
        return Ok(());
    }
    Err(format!(
        "{path} is missing: install {package} (`sudo apt-get install {package}`)"
    ))
}

/// The tests and the demo spawn real memcached processes: make sure there is one.
pub(crate) fn ensure_memcached() -> Result<()> {
    if on_path("memcached") {
        return Ok(());
    }
    if apt_install(&["memcached"])? && on_path("memcached") {
        return Ok(());
    }
    Err(
        "memcached is not on PATH. Install it (Debian/Ubuntu: `sudo apt-get install memcached`, \
         macOS: `brew install memcached`) and run again."
            .to_string(),
    )
}

fn test() -> Result<()> {
    ensure_memcached()?;
    // The interop tests need the real spymemcached jar and Guava (the
    // EVCache harness), a JDK and python3 (which the image has); GNU time
    // measures the tool's peak memory in the hostile-peer tests.
    ensure_installed("/usr/share/java/spymemcached.jar", "libspymemcached-java")?;
    ensure_installed("/usr/share/java/guava.jar", "libguava-java")?;
    ensure_installed("/usr/bin/time", "time")?;
    // twemproxy: the tests of servers without the meta protocol go through it.
    ensure_installed("/usr/sbin/nutcracker", "nutcracker")?;
    run(&cargo(), &["fmt", "--all", "--", "--check"], &[])?;
    // Everything; the client without its optional features (TLS,
    // compression); the root library with cluster.toml but without the tool
    // (its library only: the tests need the tool).
    let lints: [&[&str]; 3] = [
        &["--workspace", "--all-targets"],
        &[
            "-p",
            "memgroup-client",
            "--no-default-features",
            "--all-targets",
        ],
        &[
            "-p",
            "memgroup",
            "--no-default-features",
            "--features",
            "config",
            "--lib",
        ],
    ];
    for which in lints {
        let mut args = vec!["clippy"];
        args.extend(which);
        args.extend(["--", "-D", "warnings"]);
        run(&cargo(), &args, &[])?;
    }
    run(&cargo(), &["test", "--workspace"], &[])?;
    run(
        &cargo(),
        &["doc", "--no-deps", "--workspace"],
        &[("RUSTDOCFLAGS", "-D warnings")],
    )?;
    eprintln!("xtask test: all green");
    Ok(())
}

fn bench(extra: &[String]) -> Result<()> {
    ensure_memcached()?;
    let mut args = vec!["bench", "--workspace"];
    if !extra.is_empty() {
        args.push("--");
        args.extend(extra.iter().map(String::as_str));
    }
    run(&cargo(), &args, &[])
}

/// `cargo xtask soak [--duration SECONDS] [--proxy]`: the soak under faults
/// (`examples/soak/`), in release, its load sent straight or (`--proxy`)
/// through a memgroup proxy; exits non-zero on any violation.
fn soak(args: &[String]) -> Result<()> {
    ensure_memcached()?;
    let mut run_args = vec!["run", "--release", "--example", "soak", "--"];
    run_args.extend(args.iter().map(String::as_str));
    run(&cargo(), &run_args, &[])
}

/// `cargo xtask mutants [crate] [cargo-mutants args]`: mutation testing
/// (cargo-mutants) of one crate (default memgroup-proto) against that
/// crate's own tests (add `--test-workspace true` for every test, far
/// slower); the report lands in `mutants.out/`. Extra arguments go to
/// cargo-mutants (`--file src/decode.rs`, `--shard 0/4`, …).
fn mutants(args: &[String]) -> Result<()> {
    ensure_memcached()?;
    let has = Command::new(cargo())
        .args(["mutants", "--version"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !has {
        return Err("cargo-mutants is missing: `cargo install cargo-mutants`".into());
    }
    let (krate, extra) = match args.split_first() {
        Some((first, rest)) if !first.starts_with('-') => (first.as_str(), rest),
        _ => ("memgroup-proto", args),
    };
    // Not the ignored trees (fuzz corpora a running fuzzer rewrites, targets).
    let mut run_args = vec![
        "mutants",
        "--package",
        krate,
        "--timeout-multiplier",
        "3",
        "--gitignore",
        "true",
    ];
    run_args.extend(extra.iter().map(String::as_str));
    run(&cargo(), &run_args, &[])
}

/// Writes the tool's man pages (from its clap definition) to `target/man`.
fn man() -> Result<()> {
    let dir = root().join("target").join("man");
    let dir = dir.to_str().ok_or("the target directory is not UTF-8")?;
    run(
        &cargo(),
        &["run", "--quiet", "--bin", "memgroup", "--", "man", dir],
        &[],
    )?;
    eprintln!("man pages in {dir} (man -l {dir}/memgroup.1)");
    Ok(())
}

/// `cargo xtask fuzz [--all] [SECONDS] [--no-sanitizer]`: every target for
/// SECONDS each (default 60), on the committed seeds (`fuzz/seeds/<target>`)
/// plus the growing local corpus (`fuzz/corpus/<target>`, not committed);
/// prints the executions per target. `--no-sanitizer` runs without
/// AddressSanitizer (several times faster; the crates are safe Rust, the
/// sanitizer guards the dependencies' unsafe code).
fn fuzz(args: &[String]) -> Result<()> {
    let mut seconds = "60".to_string();
    let mut sanitizer = "address";
    for arg in args {
        match arg.as_str() {
            "--all" => {}
            "--no-sanitizer" => sanitizer = "none",
            n if n.parse::<u64>().is_ok() => seconds = n.to_string(),
            other => return Err(format!("fuzz: unknown argument {other:?}")),
        }
    }
    let has_fuzz = Command::new(cargo())
        .args(["fuzz", "--version"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_fuzz {
        return Err("cargo-fuzz is missing: `cargo install cargo-fuzz`".into());
    }
    let max_time = format!("-max_total_time={seconds}");
    // Every target in fuzz/Cargo.toml, each for `seconds`.
    let list = Command::new(cargo())
        .args(["fuzz", "list", "--fuzz-dir", "fuzz"])
        .current_dir(root())
        .output()
        .map_err(|e| format!("cargo fuzz list: {e}"))?;
    let targets = String::from_utf8_lossy(&list.stdout).into_owned();
    if targets.trim().is_empty() {
        return Err("cargo fuzz list found no targets".into());
    }
    let mut report = Vec::new();
    for target in targets.split_whitespace() {
        let corpus = format!("fuzz/corpus/{target}");
        let seeds = format!("fuzz/seeds/{target}");
        std::fs::create_dir_all(root().join(&corpus)).map_err(|e| e.to_string())?;
        let mut args = vec![
            "fuzz",
            "run",
            "--fuzz-dir",
            "fuzz",
            "-s",
            sanitizer,
            target,
            &corpus,
        ];
        if root().join(&seeds).is_dir() {
            args.push(&seeds);
        }
        args.extend(["--", &max_time, "-print_final_stats=1"]);
        eprintln!("$ cargo {}", args.join(" "));
        // cargo-fuzz passes nightly-only flags (-Zsanitizer); RUSTC_BOOTSTRAP
        // lets the machine's stable toolchain accept them.
        let out = Command::new(cargo())
            .args(&args)
            .env("RUSTC_BOOTSTRAP", "1")
            .current_dir(root())
            .stderr(std::process::Stdio::piped())
            .output()
            .map_err(|e| format!("cargo fuzz run {target}: {e}"))?;
        let log = String::from_utf8_lossy(&out.stderr);
        let stat = |name: &str| {
            log.lines()
                .find_map(|l| l.strip_prefix(&format!("stat::{name}:")))
                .and_then(|v| v.trim().parse::<u64>().ok())
        };
        if !out.status.success() {
            eprintln!("{log}");
            return Err(format!(
                "fuzz target {target} failed (a crash is in fuzz/artifacts/{target})"
            ));
        }
        let runs = stat("number_of_executed_units").unwrap_or(0);
        let features = log
            .lines()
            .rev()
            .find_map(|l| l.split("ft: ").nth(1))
            .and_then(|v| v.split_whitespace().next())
            .unwrap_or("?")
            .to_string();
        eprintln!("{target}: {runs} executions");
        report.push((target.to_string(), runs, features));
    }
    println!("| target | executions | coverage features |");
    println!("|---|---|---|");
    let mut total = 0;
    for (target, runs, features) in &report {
        println!("| {target} | {runs} | {features} |");
        total += runs;
    }
    println!("| total | {total} | |");
    Ok(())
}
