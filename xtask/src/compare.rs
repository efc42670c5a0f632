//! `cargo xtask compare`: memgroup beside the peer crates (`bench-compare/`),
//! the light-load targets' verdicts, and an observability feature's cost.

use std::process::Command;

use crate::{Result, cargo, ensure_memcached, root, run};

/// Side-by-side benchmark against the peer crates. `bench-compare/` is its own
/// workspace (excluded from this one) so the main build never compiles the
/// peers; it builds into `bench-compare/target`.
pub(crate) fn compare() -> Result<()> {
    run_compare(&[])
}

/// `bench-compare` in release, from the repository root (where `run`
/// works), with `envs`.
fn run_compare(envs: &[(&str, &str)]) -> Result<()> {
    ensure_memcached()?;
    let manifest = [
        "run",
        "--release",
        "--manifest-path",
        "bench-compare/Cargo.toml",
    ];
    run(&cargo(), &manifest, envs)
}

/// The light-load targets' verdicts: the quick rows `seq`, `4`, `32` and
/// `multi`, 11 alternating rounds of 1 s each unless `COMPARE_ROUNDS` and
/// `COMPARE_SECS` say otherwise, each target's per-round ratio printed
/// with its quartiles and whether its median meets it.
pub(crate) fn compare_targets() -> Result<()> {
    let rounds = std::env::var("COMPARE_ROUNDS").unwrap_or_else(|_| "11".into());
    let secs = std::env::var("COMPARE_SECS").unwrap_or_else(|_| "1".into());
    run_compare(&[
        ("COMPARE_QUICK", "seq,4,32,multi"),
        ("COMPARE_ROUNDS", &rounds),
        ("COMPARE_SECS", &secs),
    ])
}

/// The cost of an observability feature (`tracing` with no subscriber,
/// `metrics` with no recorder): `bench-compare` built without and with it
/// (two target directories), memgroup's get throughput at 32 in flight
/// measured in alternating runs (so drift on the machine hits both alike),
/// best and median of each.
pub(crate) fn compare_feature(feature: &str, unobserved: &str) -> Result<()> {
    ensure_memcached()?;
    const ROUNDS: usize = 6;
    let build = |features: &[&str], target: &str| -> Result<std::path::PathBuf> {
        let mut args = vec![
            "build",
            "--release",
            "--manifest-path",
            "bench-compare/Cargo.toml",
            "--target-dir",
            target,
        ];
        args.extend_from_slice(features);
        run(&cargo(), &args, &[])?;
        Ok(root().join(target).join("release").join("bench-compare"))
    };
    let off = build(&[], "bench-compare/target")?;
    let on = build(
        &["--features", feature],
        &format!("bench-compare/target-{feature}"),
    )?;
    let measure = |binary: &std::path::Path| -> Result<(f64, f64)> {
        let out = Command::new(binary)
            .env("COMPARE_ONLY", "32")
            .current_dir(root())
            .output()
            .map_err(|e| format!("cannot run {}: {e}", binary.display()))?;
        if !out.status.success() {
            return Err(format!(
                "{} failed: {}",
                binary.display(),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        let text = String::from_utf8_lossy(&out.stdout);
        let mut numbers = text.split_whitespace().map(str::parse::<f64>);
        match (numbers.next(), numbers.next()) {
            (Some(Ok(ops)), Some(Ok(cpu))) => Ok((ops, cpu)),
            _ => Err(format!("unexpected output: {text:?}")),
        }
    };
    let (mut without, mut with) = (Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        // Alternate which goes first.
        let order = if round % 2 == 0 {
            [false, true]
        } else {
            [true, false]
        };
        for enabled in order {
            let (binary, into) = if enabled {
                (&on, &mut with)
            } else {
                (&off, &mut without)
            };
            let result = measure(binary)?;
            eprintln!(
                "round {}: {feature} {}: {:.0} ops/s, {:.2} µs CPU/op",
                round + 1,
                if enabled { "on" } else { "off" },
                result.0,
                result.1
            );
            into.push(result);
        }
    }
    let summary = |runs: &mut Vec<(f64, f64)>| {
        runs.sort_by(|a, b| a.0.total_cmp(&b.0));
        let best = runs[runs.len() - 1].0;
        let median = runs[runs.len() / 2].0;
        let cpu = runs.iter().map(|r| r.1).sum::<f64>() / runs.len() as f64;
        (best, median, cpu)
    };
    let (off_best, off_median, off_cpu) = summary(&mut without);
    let (on_best, on_median, on_cpu) = summary(&mut with);
    println!(
        "| memgroup get, 32 in flight, pool 1 ({ROUNDS} alternating runs of 3 s) | best ops/s | median ops/s | mean CPU µs/op |"
    );
    println!("|---|---|---|---|");
    println!("| feature `{feature}` off | {off_best:.0} | {off_median:.0} | {off_cpu:.2} |");
    println!(
        "| feature `{feature}` on, {unobserved} | {on_best:.0} | {on_median:.0} | {on_cpu:.2} |"
    );
    println!(
        "| on ÷ off | {:.3} | {:.3} | {:.3} |",
        on_best / off_best,
        on_median / off_median,
        on_cpu / off_cpu
    );
    Ok(())
}
