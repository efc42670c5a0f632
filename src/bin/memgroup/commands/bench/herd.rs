//! `bench --herd`: many callers on a few keys that keep expiring, each
//! reading through `get_or_fill` (or, with `--no-lease`, the usual
//! cache-aside `get` then `set` on a miss). Reports how many fills each
//! expiry cost the backend, counted on the servers so that every process
//! of the herd is in it, and the callers' latency.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use memgroup::client::Client;
use parking_lot::Mutex;
use serde_json::json;

use crate::exit::Failure;
use crate::output::Report;

/// The herd: keys, their TTL, how long a fill takes, the callers.
pub(crate) struct Herd {
    pub(crate) keys: u64,
    pub(crate) ttl: u32,
    pub(crate) fill: Duration,
    pub(crate) callers: usize,
    pub(crate) duration: Duration,
    pub(crate) lease: bool,
    pub(crate) prefix: String,
}

/// What the callers saw.
struct Seen {
    latency: Histogram<u64>,
    /// Fills this process made.
    fills: u64,
    errors: u64,
}

/// One caller's read of `key`: through the lease, or cache-aside.
async fn read(client: &Client, herd: &Herd, key: u64, seen: &Mutex<Seen>) -> bool {
    let name = format!("{}{key}", herd.prefix);
    let fill = || async {
        seen.lock().fills += 1;
        tokio::time::sleep(herd.fill).await;
        Ok::<_, std::io::Error>(vec![b'h'; 100])
    };
    if herd.lease {
        return client.get_or_fill(&name, herd.ttl, fill).await.is_ok();
    }
    match client.get(&name).await {
        Ok(Some(_)) => true,
        Ok(None) => {
            let value = fill().await.expect("the fill cannot fail");
            client.set(&name, value, herd.ttl).await.is_ok()
        }
        Err(_) => false,
    }
}

/// The stores the arbiter's group has taken (`cmd_set` over its servers):
/// every fill stores its value there once, whichever process made it (a
/// lease's stub is not a store). `None` when a server did not answer.
async fn arbiter_stores(client: &Client) -> Option<u64> {
    let topology = client.topology();
    let arbiter = topology.group(topology.arbiter()).name().to_string();
    let stats = client.server_stats(None).await.ok()?;
    stats
        .iter()
        .filter(|s| s.group == arbiter)
        .map(|s| s.stats.as_ref().ok()?.get("cmd_set")?.parse::<u64>().ok())
        .sum()
}

/// Runs the herd and prints its table (or JSON record).
pub(crate) async fn run(client: &Client, herd: Herd) -> Result<ExitCode, Failure> {
    if herd.keys == 0 || herd.callers == 0 || herd.ttl == 0 {
        return Err(Failure::Usage(
            "--herd-keys, --concurrency and --herd-ttl must be positive".into(),
        ));
    }
    let herd = Arc::new(herd);
    let seen = Arc::new(Mutex::new(Seen {
        latency: Histogram::new_with_bounds(1, 60_000_000, 3).expect("valid bounds"),
        fills: 0,
        errors: 0,
    }));
    let stores_before = arbiter_stores(client).await;
    let started = Instant::now();
    let workers: Vec<_> = (0..herd.callers)
        .map(|w| {
            let (client, herd, seen) = (client.clone(), herd.clone(), seen.clone());
            tokio::spawn(async move {
                let mut n = w as u64;
                while started.elapsed() < herd.duration {
                    n = n.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                    let asked = Instant::now();
                    let ok = read(&client, &herd, (n >> 33) % herd.keys, &seen).await;
                    let took = u64::try_from(asked.elapsed().as_micros()).unwrap_or(u64::MAX);
                    let mut seen = seen.lock();
                    seen.latency.saturating_record(took.max(1));
                    seen.errors += u64::from(!ok);
                }
            })
        })
        .collect();
    for worker in workers {
        worker
            .await
            .map_err(|e| Failure::Op(format!("a caller failed: {e}")))?;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let stores = match (stores_before, arbiter_stores(client).await) {
        (Some(before), Some(after)) => Some(after.saturating_sub(before)),
        _ => None,
    };
    let seen = seen.lock();
    let fills = seen.fills;
    // Each hot key, read without pause, expires once a TTL (and is filled
    // once more at the start).
    let expiries = herd.keys * ((elapsed / f64::from(herd.ttl)).floor() as u64 + 1);
    let per_expiry = stores.map(|n| n as f64 / expiries as f64);
    let h = &seen.latency;
    let mode = if herd.lease {
        "get_or_fill"
    } else {
        "get + set"
    };
    let mut report = Report::new(&[
        "MODE",
        "CALLS",
        "FILLS HERE",
        "STORES",
        "EXPIRIES",
        "STORES/EXPIRY",
        "P50 µs",
        "P99 µs",
        "MAX µs",
        "ERRORS",
    ]);
    report.row(vec![
        mode.into(),
        h.len().to_string(),
        fills.to_string(),
        stores.map_or("-".into(), |n| n.to_string()),
        expiries.to_string(),
        per_expiry.map_or("-".into(), |r| format!("{r:.2}")),
        h.value_at_quantile(0.5).to_string(),
        h.value_at_quantile(0.99).to_string(),
        h.max().to_string(),
        seen.errors.to_string(),
    ]);
    report.record(json!({
        "mode": mode, "calls": h.len(), "seconds": elapsed, "fills_here": fills,
        "arbiter_stores": stores, "expiries": expiries, "stores_per_expiry": per_expiry,
        "p50_us": h.value_at_quantile(0.5),
        "p99_us": h.value_at_quantile(0.99), "max_us": h.max(), "errors": seen.errors,
    }));
    report.print();
    Ok(crate::exit::code(seen.errors == 0))
}
