//! The copy: values read from the source in batches, each key written once
//! into every target group (`add_or_set`), each outcome counted.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, UNIX_EPOCH};

use indicatif::ProgressBar;
use memgroup::client::{Client, Error, Expiry, IfPresent, MAX_RELATIVE_EXPTIME, WriteOptions};

use super::{Args, Copied, CopiedKeys, Counters, Job};
use crate::output;

pub(super) async fn retry<T, F, Fut>(attempts: u32, mut f: F) -> Result<T, Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, Error>>,
{
    let mut tries = 0;
    loop {
        match f().await {
            Err(e) if e.is_transient() && tries + 1 < attempts.max(1) => {
                tries += 1;
                tokio::time::sleep(Duration::from_millis(50 << tries)).await;
            }
            other => return other,
        }
    }
}

#[allow(clippy::too_many_arguments)]
pub(super) async fn copy(
    reader: &Client,
    writer: &Client,
    args: &Args,
    jobs: Vec<Job>,
    counters: &Arc<Counters>,
    copied_keys: &Arc<CopiedKeys>,
    bar: &ProgressBar,
    started: Instant,
) {
    let targets: Arc<Vec<String>> = Arc::new(args.to.clone());
    let mut batches = tokio::task::JoinSet::new();
    let mut scheduled = 0u64;
    for chunk in jobs.chunks(args.batch.max(1)) {
        if counters.stopped.load(Ordering::Relaxed) {
            break;
        }
        if args.rate > 0 {
            // Pace batch starts so that keys/s stays under the rate.
            let due = started + Duration::from_secs_f64(scheduled as f64 / args.rate as f64);
            tokio::time::sleep_until(due.into()).await;
        }
        scheduled += chunk.len() as u64;
        while batches.len() >= args.concurrency.max(1) {
            let _ = batches.join_next().await;
        }
        let (reader, writer, chunk, counters, copied_keys, bar, targets) = (
            reader.clone(),
            writer.clone(),
            chunk.to_vec(),
            counters.clone(),
            copied_keys.clone(),
            bar.clone(),
            targets.clone(),
        );
        let (replace, retries) = (args.replace, args.retries);
        batches.spawn(async move {
            copy_batch(
                &reader,
                &writer,
                &chunk,
                &targets,
                replace,
                retries,
                &counters,
                &copied_keys,
            )
            .await;
            bar.inc(chunk.len() as u64);
            let c = |a: &AtomicU64| a.load(Ordering::Relaxed);
            bar.set_message(format!(
                "copied {} present {} expired {} errors {}",
                c(&counters.copied),
                c(&counters.present),
                c(&counters.expired),
                c(&counters.errors)
            ));
        });
    }
    while batches.join_next().await.is_some() {}
}

#[allow(clippy::too_many_arguments)]
async fn copy_batch(
    reader: &Client,
    writer: &Client,
    jobs: &[Job],
    targets: &[String],
    replace: bool,
    retries: u32,
    counters: &Counters,
    copied_keys: &CopiedKeys,
) {
    // A key the dump listed but no client could request (a space, a control
    // character, over 250 bytes after decoding) is one error, not a failed
    // batch: the good keys beside it are still copied.
    let (jobs, bad): (Vec<&Job>, Vec<&Job>) = jobs
        .iter()
        .partition(|j| memgroup::proto::Key::new(&j.key.key).is_ok());
    for job in &bad {
        output::warn(
            Some(&output::show(&job.key.key)),
            "skipped: not a valid memcached key",
        );
    }
    counters
        .errors
        .fetch_add(bad.len() as u64, Ordering::Relaxed);
    let keys: Vec<&[u8]> = jobs.iter().map(|j| &j.key.key[..]).collect();
    let found = match retry(retries, || reader.get_multi(&keys)).await {
        Ok(found) => found,
        Err(e) => {
            output::warn(
                None,
                &format!(
                    "reading a batch of {} keys failed: {}",
                    keys.len(),
                    e.chain()
                ),
            );
            counters
                .errors
                .fetch_add(keys.len() as u64, Ordering::Relaxed);
            return;
        }
    };
    let target_refs: Vec<&str> = targets.iter().map(String::as_str).collect();
    for job in jobs {
        if counters.stopped.load(Ordering::Relaxed) {
            return;
        }
        let item = match found.outcome(&job.key.key) {
            Some(Ok(Some(item))) => item,
            Some(Err(e)) => {
                output::warn(
                    Some(&output::show(&job.key.key)),
                    &format!("reading failed: {}", e.chain()),
                );
                counters.errors.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            _ => {
                // Deleted or evicted between the dump and the read.
                counters.vanished.fetch_add(1, Ordering::Relaxed);
                continue;
            }
        };
        // The time left by the source's own clock.
        let exptime = match job.key.exp {
            None => Expiry::Never,
            Some(exp) => {
                let now = job.server_time + job.clock_read_at.elapsed().as_secs() as i64;
                let remaining = exp - now;
                if remaining <= 0 {
                    counters.expired.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                if remaining > i64::from(MAX_RELATIVE_EXPTIME) {
                    // Sent absolute anyway: the source's own end time is
                    // exact, where now + remaining would drift by a second.
                    Expiry::At(UNIX_EPOCH + Duration::from_secs(exp.unsigned_abs()))
                } else {
                    Expiry::secs(remaining.unsigned_abs())
                }
            }
        };
        let write = || {
            writer.add_or_set(
                &job.key.key,
                &item.value,
                WriteOptions::new().flags(item.flags).expiry(exptime),
                &target_refs,
                if replace {
                    IfPresent::Overwrite
                } else {
                    IfPresent::Keep
                },
            )
        };
        match retry(retries, write).await {
            Ok(outcome) => {
                let present = outcome.groups.iter().all(|g| matches!(g.result, Ok(false)));
                let copied = if present {
                    counters.present.fetch_add(1, Ordering::Relaxed);
                    Copied::Present
                } else {
                    counters.copied.fetch_add(1, Ordering::Relaxed);
                    Copied::value(&item.value, item.flags)
                };
                copied_keys.lock().insert(job.key.key.clone(), copied);
            }
            Err(e) => {
                counters.errors.fetch_add(1, Ordering::Relaxed);
                if let Some(group) = e
                    .is_transient()
                    .then(|| dead_target(writer, targets))
                    .flatten()
                {
                    // One line, not one per key still to come.
                    if !counters.stopped.swap(true, Ordering::Relaxed) {
                        output::warn(
                            None,
                            &format!(
                                "warm stopped: target group {group} has no live server ({}); run it again once it is back",
                                e.chain()
                            ),
                        );
                    }
                    return;
                }
                output::warn(
                    Some(&output::show(&job.key.key)),
                    &format!("copying failed: {}", e.chain()),
                );
            }
        }
    }
}

/// A target group none of whose servers is up (all marked dead), if any.
fn dead_target(writer: &Client, targets: &[String]) -> Option<String> {
    writer
        .health()
        .groups
        .into_iter()
        .find(|g| targets.contains(&g.group) && g.servers_up == 0)
        .map(|g| g.group)
}
