//! `memgroup bench`: closed and open loop.

use crate::support::{Memcached, memgroup, raw};

use super::{stderr, stdout};

#[test]
fn bench_reports_percentiles() {
    let s = Memcached::spawn();
    let o = memgroup(&[
        "--servers",
        &s.addr_string(),
        "--json",
        "bench",
        "--ops",
        "2000",
        "--keys",
        "100",
        "--concurrency",
        "8",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let report: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    let report = &report[0];
    assert_eq!(report["ops"], 2000);
    assert_eq!(report["errors"], 0);
    let get = &report["ops_detail"][0];
    assert_eq!(get["op"], "get");
    assert!(get["p50_us"].as_u64().unwrap() <= get["p99_us"].as_u64().unwrap());
    assert!(raw::stat(s.addr(), "cmd_set") >= 100);
    // Without --json, it says first what it writes (on stderr).
    let o = memgroup(&[
        "--servers",
        &s.addr_string(),
        "bench",
        "--ops",
        "10",
        "--keys",
        "5",
        "--prefix",
        "b:",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("first writing 5 keys (b:0 … b:4, 100 bytes each)"),
        "{}",
        stderr(&o)
    );
}

/// `bench --rate`: the open loop issues its requests on a fixed schedule
/// whatever their latency, so a stalled server cannot hold requests back
/// (coordinated omission): every scheduled request is issued and counted.
/// Timing is checked in bands only.
#[test]
fn bench_open_loop_keeps_its_schedule() {
    let s = Memcached::spawn();
    let addr = s.addr_string();
    let bench = |extra: &[&str]| {
        let o = memgroup(
            &[
                &["--servers", &addr, "--json", "bench", "--keys", "100"],
                extra,
            ]
            .concat(),
        );
        let report: serde_json::Value = serde_json::from_str(stdout(&o).trim())
            .unwrap_or_else(|e| panic!("{e}: {}{}", stdout(&o), stderr(&o)));
        let records = report.as_array().expect("one JSON array");
        assert_eq!(records.len(), 1, "one summary record: {report}");
        (o, records[0].clone())
    };

    let (o, r) = bench(&["--rate", "500", "--duration", "1"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(r["rate"], 500.0, "{r}");
    assert_eq!(r["ops"], 500, "every scheduled request is issued: {r}");
    let achieved = r["ops_per_second"].as_f64().unwrap();
    assert!((250.0..=550.0).contains(&achieved), "{r}");
    assert_eq!(r["errors"], 0, "{r}");
    assert_eq!(r["late"], 0, "{r}");
    let get = &r["ops_detail"][0];
    assert_eq!(get["op"], "get", "{r}");
    let (p50, p99, max) = (&get["p50_us"], &get["p99_us"], &get["max_us"]);
    assert!(p50.as_u64().unwrap() <= p99.as_u64().unwrap(), "{r}");
    assert!(p99.as_u64().unwrap() <= max.as_u64().unwrap(), "{r}");
    assert!(
        r["slower_than_timeout_percent"].as_f64().unwrap() < 50.0,
        "{r}"
    );
    let lag = r["send_lag_p50_us"].as_u64().unwrap();
    assert!(lag <= r["send_lag_max_us"].as_u64().unwrap(), "{r}");

    // A stopped server: its requests time out (and once it is marked down,
    // fail at once). The open loop issues all 200 on schedule, and reports
    // the share that got no answer within the timeout; with a cap of 5
    // outstanding, the requests due while 5 wait are sent late, not skipped.
    s.stop();
    let stalled = [
        "--timeout-ms",
        "100",
        "--no-prefill",
        "--rate",
        "200",
        "--duration",
        "1",
    ];
    let (o, r) = bench(&stalled);
    let (capped_o, capped) = bench(&[&stalled[..], &["--concurrency", "5"]].concat());
    s.resume();
    assert_eq!(o.status.code(), Some(1), "requests failed: {r}");
    assert_eq!(r["ops"], 200, "{r}");
    assert_eq!(r["timeout_ms"], 100, "{r}");
    let slow = r["slower_than_timeout"].as_u64().unwrap();
    assert!(slow >= 100, "{r}");
    assert!(r["errors"].as_u64().unwrap() > 0, "{r}");
    assert!(
        r["slower_than_timeout_percent"].as_f64().unwrap() >= 50.0,
        "{r}"
    );
    assert_eq!(capped_o.status.code(), Some(1), "{capped}");
    assert_eq!(capped["ops"], 200, "none skipped: {capped}");
    assert!(capped["late"].as_u64().unwrap() > 0, "{capped}");
    assert!(
        capped["slower_than_timeout"].as_u64().unwrap() >= 100,
        "{capped}"
    );
}
