//! Writers in processes of their own, the soak re-run in another mode:
//!
//! - **the second writer** (`--second-writer SPEC SECS JOURNAL`): a
//!   long-lived process in zone sg2 writing the main load's own keys for
//!   the whole run, its versions above any the main writer uses (so a copy
//!   of it is never "older" than the main writer's last acknowledgement);
//!   the two race on the even keys ([`shared`]), and only the convergence
//!   check keeps the groups agreeing;
//! - **short-lived writers** (`--short-writer SPEC VERSION JOURNAL`): one
//!   after another, each writes the [`SHORT_KEYS`] keys `soak:short:<i>`
//!   with its version and exits at once (a drain of 200 ms), leaving to
//!   the repair journal whatever a stalled server kept it from repairing.
//!   After the heal, `soak` takes the journal (a client of its own, as the
//!   next process would) before the verdicts: every group's copy of such a
//!   key is the last writer's version or absent.

use std::path::Path;
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use memgroup::client::Client;
use memgroup::topology::WritePolicy;

use crate::TIMEOUT;
use crate::load::key;
use crate::measure::Rng;

/// Keys each short-lived writer writes.
pub(crate) const SHORT_KEYS: u64 = 200;

/// Whether the second writer writes key `i` of each task too: the even
/// ones. The main writer alone writes the odd ones, whose acknowledged
/// writes must all survive; on the shared ones a race may end in nothing
/// (two writes each finding the other's copy clear their own), which the
/// promise allows (every zone: the newest value or nothing).
pub(crate) fn shared(i: u64) -> bool {
    i.is_multiple_of(2)
}

/// The second writer's versions start here: above any of the main load.
pub(crate) const SECOND_VERSIONS: u64 = 1 << 40;

/// The short-lived writers' keys.
pub(crate) fn short_key(i: u64) -> String {
    format!("soak:short:{i}")
}

fn client(spec: &str, zone: &str, journal: &Path) -> Client {
    Client::builder()
        .evcache_groups(spec)
        .zone(zone)
        .write_policy(WritePolicy::All)
        .backoff(Duration::from_millis(100), Duration::from_secs(1))
        .timeout(TIMEOUT)
        .pool_size(2)
        .repair_journal(journal)
        .build()
        .expect("client")
}

/// `--second-writer`: sets of the main load's keys from zone sg2 for
/// `secs`, 8 tasks; prints how many it wrote and how many copies its
/// convergence checks deleted.
pub(crate) fn second_writer(spec: &str, secs: u64, journal: &Path) -> ExitCode {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let client = client(spec, "sg2", journal);
        let until = Instant::now() + Duration::from_secs(secs);
        let tasks: Vec<_> = (0..8u64)
            .map(|w| {
                let client = client.clone();
                tokio::spawn(async move {
                    let mut rng = Rng(0xD1B5_4A32_D192_ED03 ^ (w + 1));
                    let mut written = 0u64;
                    while Instant::now() < until {
                        let t = rng.below(crate::TASKS as u64) as usize;
                        let k = key(t, 2 * rng.below(crate::KEYS_PER_TASK / 2));
                        let version = SECOND_VERSIONS + (w << 32) + written;
                        let _ = client.set(&k, crate::load::value(&k, version), 0).await;
                        written += 1;
                    }
                    written
                })
            })
            .collect();
        let mut written = 0;
        for task in tasks {
            written += task.await.unwrap_or(0);
        }
        let _ = client.close(Duration::from_secs(30)).await;
        println!("{written} {}", client.health().converged);
    });
    ExitCode::SUCCESS
}

/// `--short-writer`: every short key at `version`, then exit after a
/// drain of 200 ms; prints the keys whose write met its policy.
pub(crate) fn short_writer(spec: &str, version: u64, journal: &Path) -> ExitCode {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let client = client(spec, "sg3", journal);
        let mut acked = Vec::new();
        for i in 0..SHORT_KEYS {
            let k = short_key(i);
            if client
                .set(&k, crate::load::value(&k, version), 0)
                .await
                .is_ok_and(|o| o.applied())
            {
                acked.push(i.to_string());
            }
        }
        let _ = client.close(Duration::from_millis(200)).await;
        println!("{}", acked.join(" "));
    });
    ExitCode::SUCCESS
}

/// Runs this program in one of the modes above; its stdout.
pub(crate) fn spawn(args: &[String]) -> std::process::Child {
    Command::new(std::env::current_exe().expect("own path"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn a writer")
}

/// What the short-lived writers did: the last one's version, and which
/// keys it acknowledged.
#[derive(Debug, Default, Clone)]
pub(crate) struct ShortRuns {
    pub(crate) runs: u64,
    pub(crate) last_version: u64,
    pub(crate) last_acked: Vec<u64>,
}

/// Short-lived writers one after another until `stop`, a pause between.
pub(crate) fn short_writers(
    spec: String,
    journal: std::path::PathBuf,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<ShortRuns> {
    std::thread::spawn(move || {
        let mut runs = ShortRuns::default();
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            let version = runs.runs + 1;
            let child = spawn(&[
                "--short-writer".into(),
                spec.clone(),
                version.to_string(),
                journal.display().to_string(),
            ]);
            let Ok(out) = child.wait_with_output() else {
                break;
            };
            runs.runs = version;
            runs.last_version = version;
            runs.last_acked = String::from_utf8_lossy(&out.stdout)
                .split_whitespace()
                .filter_map(|i| i.parse().ok())
                .collect();
            std::thread::sleep(Duration::from_millis(700));
        }
        runs
    })
}

/// What is left in the repair journal at `dir` once the next process took
/// it: each entry named (key, server, segment, held or not), and how many
/// are owed to the spare server (`spare`, `host:port`). Those stay
/// journaled by design once the reloads took the spare out of the
/// topology (kept for a client whose topology has it; the main client's
/// segment, alive, holds them): not the next process's to do.
pub(crate) fn journal_left(dir: &Path, spare: &str) -> (Vec<String>, usize) {
    let (for_spare, left): (Vec<_>, Vec<_>) = memgroup::client::list_repair_journal(dir)
        .into_iter()
        .partition(|e| e.repair.server == spare);
    let named = left
        .iter()
        .map(|e| {
            let segment = e.segment.file_name().unwrap_or_default().to_string_lossy();
            let held = if e.held { ", held" } else { "" };
            format!(
                "{} on {} ({segment}{held})",
                String::from_utf8_lossy(&e.repair.key),
                e.repair.server
            )
        })
        .collect();
    (named, for_spare.len())
}

/// What `client` owes as the journal is read, each named (key on server):
/// an entry left in its own segment that it owes is a repair queued after
/// its close returned; one it does not owe, a record the journal kept.
pub(crate) fn owed(client: &Client) -> Vec<String> {
    client
        .owed_repairs()
        .iter()
        .map(|r| format!("{} on {}", String::from_utf8_lossy(&r.key), r.server))
        .collect()
}
