//! Bulk writes: `cp` (files as values) and `load` (generated keys).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use serde_json::json;

use crate::cluster::Cluster;
use crate::exit::Done;
use crate::exit::{self, Failure};
use crate::expiry::ExpiryArgs;
use crate::flags::ClusterFlags;
use crate::output::{self, Refused};

/// The files to store.
#[derive(Debug, clap::Args)]
pub(crate) struct CpArgs {
    /// The files.
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Store the one file under this key instead of its name.
    #[arg(long, value_name = "KEY")]
    key: Option<String>,
    #[command(flatten)]
    expiry: ExpiryArgs,
}

/// How many keys to write, and how.
#[derive(Debug, clap::Args)]
pub(crate) struct LoadArgs {
    /// How many keys (`--keys` too, as `bench` calls it).
    #[arg(long, alias = "keys", default_value_t = 10_000)]
    count: usize,
    /// Key prefix; keys are `<prefix><n>`.
    #[arg(long, default_value = "key:")]
    prefix: String,
    /// Value size in bytes.
    #[arg(long, default_value_t = 100)]
    value_size: usize,
    /// Requests in flight.
    #[arg(long, default_value_t = 64)]
    concurrency: usize,
}

/// `cp FILE…`: each file's contents stored under its file name (like memcp),
/// or one file's under `--key`.
pub(crate) async fn cp(args: &CpArgs, flags: &ClusterFlags) -> Result<ExitCode, Failure> {
    let json = crate::output::json();
    if args.key.is_some() && args.files.len() > 1 {
        return Err(Failure::Usage(format!(
            "--key names one file's key: {} files given",
            args.files.len()
        )));
    }
    // Every path checked before the first write: a directory among the
    // files stores none of them.
    if let Some(dir) = args.files.iter().find(|f| f.is_dir()) {
        return Err(Failure::Usage(format!(
            "{} is a directory: cp stores files (e.g. {}/*)",
            dir.display(),
            dir.display()
        )));
    }
    let client = Cluster::from_flags(flags)?.client()?;
    let exptime = args.expiry.expiry();
    let mut done = Done::Everywhere;
    let mut records = Vec::new();
    for file in &args.files {
        let stored = async {
            let key = match &args.key {
                Some(key) => key.as_str(),
                None => file.file_name().and_then(|n| n.to_str()).ok_or_else(|| {
                    Failure::Usage(format!("{}: no usable file name", file.display()))
                })?,
            };
            let data = std::fs::read(file)
                .map_err(|e| Failure::Usage(format!("cannot read {}: {e}", file.display())))?;
            // A file name that is no valid key is named as the file (a
            // `--key` names itself).
            let outcome = client.set(key, &data, exptime).await.map_err(|e| {
                if e.is_invalid_key() && args.key.is_none() {
                    Failure::Usage(format!("{}: {e}", file.display()))
                } else if e.is_invalid_key() {
                    Failure::Usage(format!("--key: {e}"))
                } else {
                    Failure::from(e)
                }
            })?;
            Ok::<_, Failure>((key, outcome))
        };
        let (key, outcome) = match stored.await {
            Ok(stored) => stored,
            Err(failure) => return Err(output::records_before(&records, failure)),
        };
        output::write_outcome(key, &outcome, Refused::NotStored, &mut records);
        done = done.max(Done::of_write(&outcome));
    }
    if json {
        output::records(&records);
    }
    Ok(done.code())
}

/// `load`: `count` generated keys of `value_size` bytes written with
/// `concurrency` requests in flight; exit 1 if a write failed, 3 if some
/// group missed a write (each such group named with its count).
pub(crate) async fn load(args: &LoadArgs, flags: &ClusterFlags) -> Result<ExitCode, Failure> {
    let json = crate::output::json();
    let client = Cluster::from_flags(flags)?.client()?;
    let (count, prefix) = (args.count, args.prefix.as_str());
    let (value_size, concurrency) = (args.value_size, args.concurrency);
    let started = Instant::now();
    let value: std::sync::Arc<[u8]> = vec![b'v'; value_size].into();
    let next = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..concurrency.max(1) {
        let (client, next, value, prefix) = (
            client.clone(),
            next.clone(),
            value.clone(),
            prefix.to_string(),
        );
        workers.spawn(async move {
            let mut tally = Tally::default();
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= count {
                    return tally;
                }
                match client.set(format!("{prefix}{i}"), &value[..], 0).await {
                    Err(_) => tally.errors += 1,
                    Ok(outcome) if outcome.is_partial() => {
                        tally.partial += 1;
                        for (group, _) in outcome.failed() {
                            *tally.missed.entry(group.to_string()).or_default() += 1;
                        }
                    }
                    Ok(_) => {}
                }
            }
        });
    }
    let mut tally = Tally::default();
    while let Some(worker) = workers.join_next().await {
        let worker = worker.map_err(|e| Failure::Op(format!("worker failed: {e}")))?;
        tally.errors += worker.errors;
        tally.partial += worker.partial;
        for (group, n) in worker.missed {
            *tally.missed.entry(group).or_default() += n;
        }
    }
    let Tally {
        errors,
        partial,
        missed,
    } = tally;
    let secs = started.elapsed().as_secs_f64();
    if json {
        output::record(json!({
            "keys": count,
            "errors": errors,
            "partial": partial,
            "missed_by_group": missed,
            "seconds": secs,
            "keys_per_second": count as f64 / secs,
        }));
    } else {
        // A summary: information, quiet under `-q`.
        output::info(&format!(
            "loaded {count} keys ({errors} errors, {partial} partly) in {secs:.2} s: {:.0} keys/s",
            count as f64 / secs
        ));
        for (group, n) in &missed {
            output::warn(
                None,
                &format!(
                    "group {group} missed or did not answer {n} of the writes (repairs queued)"
                ),
            );
        }
    }
    Ok(if errors > 0 {
        exit::code(false)
    } else if partial > 0 {
        Done::Partly.code()
    } else {
        exit::code(true)
    })
}

/// What a `load` worker saw.
#[derive(Default)]
struct Tally {
    /// Writes that failed their policy.
    errors: usize,
    /// Writes applied by their policy while some group missed them.
    partial: usize,
    /// Per group, the writes it missed or did not answer.
    missed: std::collections::BTreeMap<String, usize>,
}
