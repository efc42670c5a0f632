//! Hostile peers: a small misbehaving TCP peer (a fault injector, not a
//! memcached stand-in) answers the client's first request with a script —
//! lying lengths, lines that never end, endless values, a close mid-value,
//! values for keys nobody asked for, a drip of one byte at a time, binary
//! garbage. For each: a clear, typed error (or a miss) within the timeout,
//! never a hang, a panic or another key's value; and a second group on a
//! real memcached keeps serving.

use std::io::Write;
use std::time::Duration;

use memgroup::client::{Client, Error};
use memgroup::topology::ReadFallback;

use crate::support::{Memcached, fault_peer};

/// What the peer does after reading a request.
#[derive(Clone)]
enum Act {
    /// Writes these bytes once.
    Send(&'static [u8]),
    /// Writes these bytes again and again until the client hangs up.
    Repeat(&'static [u8]),
    /// Writes one byte every `ms` milliseconds, for ever.
    Drip(&'static [u8], u64),
    /// Closes the connection.
    Close,
}

/// A fault-injecting peer that plays `acts` after the first request of
/// every connection, then holds the connection open and silent.
fn peer(acts: Vec<Act>) -> String {
    fault_peer(move |_, conn| {
        for act in &acts {
            match act {
                Act::Send(bytes) => {
                    if conn.write_all(bytes).is_err() {
                        return false;
                    }
                }
                Act::Repeat(bytes) => while conn.write_all(bytes).is_ok() {},
                Act::Drip(bytes, ms) => {
                    for b in bytes.iter().cycle() {
                        if conn.write_all(&[*b]).is_err() {
                            return false;
                        }
                        std::thread::sleep(Duration::from_millis(*ms));
                    }
                }
                Act::Close => return false,
            }
        }
        // Then silence: later requests get nothing.
        true
    })
}

/// The limits every client here is given: 64 KiB values, 1 MiB replies.
const MAX_VALUE: usize = 64 * 1024;
const MAX_REPLY: usize = 1 << 20;

/// A client of the peer alone, with small limits and a short timeout.
fn client_of(addr: &str) -> Client {
    Client::builder()
        .servers(addr)
        .max_value_size(MAX_VALUE)
        .max_reply_size(MAX_REPLY)
        .timeout(Duration::from_millis(400))
        .build()
        .unwrap()
}

/// `VALUE k 0 60000` and its data, without the END.
fn near_limit_value() -> &'static [u8] {
    let mut bytes = b"VALUE k 0 60000\r\n".to_vec();
    bytes.resize(bytes.len() + 60_000, b'v');
    bytes.extend_from_slice(b"\r\n");
    Box::leak(bytes.into_boxed_slice())
}

/// A script: what it is, what the peer does, the error the client must report.
type Case = (&'static str, Vec<Act>, fn(&Error) -> bool);

/// Each script, and the error kind the client must report for `get k`.
fn cases() -> Vec<Case> {
    vec![
        (
            "a VALUE header with a huge length",
            vec![Act::Send(b"VALUE k 0 99999999999\r\n")],
            Error::is_protocol,
        ),
        (
            "a VALUE with more data than declared",
            vec![Act::Send(b"VALUE k 0 3\r\nabcdef\r\nEND\r\n")],
            Error::is_protocol,
        ),
        (
            "a line that never ends",
            vec![Act::Repeat(b"VALUEVALUEVALUE")],
            Error::is_protocol,
        ),
        (
            "values for ever, no END",
            vec![Act::Repeat(b"VALUE k 0 5\r\nhello\r\n")],
            Error::is_protocol,
        ),
        (
            "values for keys nobody asked for, for ever",
            vec![Act::Repeat(b"VALUE other 0 6\r\nsecret\r\n")],
            Error::is_protocol,
        ),
        (
            "a close mid-value",
            vec![Act::Send(b"VALUE k 0 100\r\nabc"), Act::Close],
            Error::is_connection,
        ),
        (
            "one byte every 150 ms",
            vec![Act::Drip(b"VALUE k 0 5\r\nhello\r\nEND\r\n", 150)],
            Error::is_timeout,
        ),
        (
            "binary garbage",
            vec![Act::Send(b"\x00\xff\x13\x37garbage\r\n")],
            Error::is_protocol,
        ),
        ("silence", vec![], Error::is_timeout),
        (
            "one value near the value limit, then nothing",
            vec![Act::Send(near_limit_value())],
            Error::is_timeout,
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_misbehaviour_is_a_typed_error_within_the_timeout() {
    for (what, acts, kind) in cases() {
        let addr = peer(acts);
        let client = client_of(&addr);
        // Bounded by the client's own 400 ms timeout; 5 s is a hang.
        let got = tokio::time::timeout(Duration::from_secs(5), client.get("k"))
            .await
            .unwrap_or_else(|_| panic!("{what}: the client hung"));
        let err = got.expect_err(what);
        assert!(kind(&err), "{what}: {}", err.chain());
        assert_eq!(
            err.server(),
            Some(addr.as_str()),
            "{what}: names the server"
        );
    }
}

/// Memory held by the client while each script plays, against its limits.
/// The client runs on this test's own thread (a current-thread runtime),
/// where the counting allocator (`memgroup_testkit::alloc`, installed in
/// `main.rs`) counts every byte it has live; the peer's threads
/// are not counted.
#[tokio::test(flavor = "current_thread")]
async fn every_misbehaviour_stays_within_the_memory_limits() {
    let mut report = Vec::new();
    for (what, acts, kind) in cases() {
        let addr = peer(acts);
        let client = client_of(&addr);
        let peak = memgroup_testkit::alloc::Peak::start();
        let got = tokio::time::timeout(Duration::from_secs(5), client.get("k"))
            .await
            .unwrap_or_else(|_| panic!("{what}: the client hung"));
        let err = got.expect_err(what);
        assert!(kind(&err), "{what}: {}", err.chain());
        report.push((what, peak.bytes()));
        // Let the connection's aborted tasks go, so that their buffers are
        // not freed during the next script's measurement.
        drop(client);
        for _ in 0..20 {
            tokio::task::yield_now().await;
        }
    }
    for (what, bytes) in &report {
        eprintln!("{what:45} peak {bytes:>9} bytes");
    }
    // The limits, the read buffer and the client's own bookkeeping: far
    // below what an unbounded reply reaches in 400 ms (tens of MB).
    let bound = MAX_REPLY + MAX_VALUE + 128 * 1024;
    for (what, bytes) in &report {
        assert!(*bytes <= bound, "{what}: {bytes} bytes held, bound {bound}");
    }
    // A get of one key takes one item: endless values are refused at the
    // second, far below the reply limit (they were held up to it before).
    for (what, bytes) in &report {
        match *what {
            "values for ever, no END" | "values for keys nobody asked for, for ever" => {
                assert!(*bytes <= MAX_VALUE + 128 * 1024, "{what}: {bytes} bytes");
            }
            // And the counting sees the client at all.
            "one value near the value limit, then nothing" => {
                assert!(*bytes >= 60_000, "{what}: only {bytes} bytes seen");
            }
            _ => {}
        }
    }
}

/// A `stats` reply that never ends stops at the stats limit (4 MiB), not
/// at the reply limit for values (256 MiB by default: it reached 263 MB).
#[tokio::test(flavor = "current_thread")]
async fn an_endless_stats_reply_stops_at_the_stats_limit() {
    let addr = peer(vec![Act::Repeat(b"STAT pid 12345678901234567890\r\n")]);
    let client = Client::builder()
        .servers(&addr)
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let peak = memgroup_testkit::alloc::Peak::start();
    let stats = client.server_stats(None).await.unwrap();
    let error = stats[0].stats.as_ref().unwrap_err();
    assert!(error.is_protocol(), "{error}");
    assert!(error.to_string().contains("4194304"), "{error}");
    let limit = memgroup::proto::Limits::default().max_stats;
    assert!(peak.bytes() <= 2 * limit, "{} bytes held", peak.bytes());
    assert!(
        peak.bytes() >= limit / 2,
        "the counting sees it: {}",
        peak.bytes()
    );
}

/// Values for keys nobody asked for are never handed to a caller as its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_value_for_another_key_is_never_returned() {
    let addr = peer(vec![Act::Send(b"VALUE other 0 6\r\nsecret\r\nEND\r\n")]);
    let got = client_of(&addr).get("k").await.unwrap();
    assert_eq!(got, None, "another key's value");
    let addr = peer(vec![Act::Send(
        b"VALUE x 0 1\r\n1\r\nVALUE y 0 1\r\n2\r\nEND\r\n",
    )]);
    let got = client_of(&addr).get_multi(&["a", "b"]).await.unwrap();
    assert_eq!(got.hit_count(), 0, "{got:?}");
}

/// A hostile group fails alone: reads fall back to a real memcached in the
/// other group, and its connections keep serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_group_does_not_affect_the_other() {
    let real = Memcached::spawn();
    for (what, acts, _) in cases() {
        let addr = peer(acts);
        let client = Client::builder()
            .evcache_groups(&format!("bad={addr};good={}", real.addr_string()))
            .zone("bad")
            .read_fallback(ReadFallback::OneMore)
            .write_policy(memgroup::topology::WritePolicy::One)
            .timeout(Duration::from_millis(400))
            .max_value_size(MAX_VALUE)
            .max_reply_size(MAX_REPLY)
            .build()
            .unwrap();
        crate::support::raw::set(real.addr(), b"k", b"from the good group");
        let got = tokio::time::timeout(Duration::from_secs(5), client.get("k"))
            .await
            .unwrap_or_else(|_| panic!("{what}: hung"))
            .unwrap_or_else(|e| panic!("{what}: {}", e.chain()));
        assert_eq!(
            got.map(|i| i.value).as_deref(),
            Some(&b"from the good group"[..]),
            "{what}"
        );
    }
}

/// The tool run under GNU time: its output and its peak resident memory (KiB).
fn tool_with_peak_rss(addr: &str) -> (std::process::Output, u64) {
    const TIME: &str = "/usr/bin/time";
    let gnu = std::process::Command::new(TIME)
        .arg("--version")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("GNU"));
    assert!(
        gnu,
        "GNU time ({TIME}) measures the tool's memory: apt-get install time"
    );
    let rss_file = std::env::temp_dir().join(format!(
        "memgroup-rss-{}-{}",
        std::process::id(),
        addr.replace([':', '.'], "-")
    ));
    let o = std::process::Command::new(TIME)
        .args(["-f", "%M", "-o"])
        .arg(&rss_file)
        .arg(env!("CARGO_BIN_EXE_memgroup"))
        // Each test its own state: no repair journal shared across tests.
        .env("MEMGROUP_REPAIR_JOURNAL", "off")
        .args([
            "--servers",
            addr,
            "--timeout-ms",
            "400",
            "--max-value-size",
            &MAX_VALUE.to_string(),
            "--max-reply-size",
            &MAX_REPLY.to_string(),
            "get",
            "k",
        ])
        .env_remove("MEMCACHED_SERVERS")
        // Fewer allocator arenas: peak RSS then varies less with the cores.
        .env("MALLOC_ARENA_MAX", "2")
        .output()
        .unwrap();
    let text = std::fs::read_to_string(&rss_file).unwrap();
    std::fs::remove_file(&rss_file).unwrap();
    // GNU time notes a non-zero exit on a line of its own before the figure.
    let kib = text.lines().last().and_then(|l| l.trim().parse().ok());
    (o, kib.unwrap_or_else(|| panic!("GNU time wrote {text:?}")))
}

/// The same scripts through the tool: exit 1, one line on stderr naming the
/// server, no raw control characters, within the timeout; and its peak
/// resident memory within the limits it was given (64 KiB values, 1 MiB
/// replies) of what a plain miss costs it.
#[test]
fn the_tool_reports_each_misbehaviour_on_one_clean_line() {
    let (o, baseline) = tool_with_peak_rss(&peer(vec![Act::Send(b"END\r\n")]));
    assert_eq!(o.status.code(), Some(1), "a miss exits 1");
    let mut report = Vec::new();
    for (what, acts, _) in cases() {
        let addr = peer(acts);
        let (o, rss) = tool_with_peak_rss(&addr);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{what}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{what}: {err}");
        assert!(err.contains(&addr), "{what}: {err}");
        assert!(
            !err.chars().any(|c| c.is_control() && c != '\n'),
            "{what}: {err:?}"
        );
        report.push((what, rss));
    }
    eprintln!(
        "{:45} peak RSS {baseline:>6} KiB",
        "a plain miss (baseline)"
    );
    for (what, rss) in &report {
        eprintln!("{what:45} peak RSS {rss:>6} KiB");
    }
    // Limits plus allocator slack; an unbounded reply reaches tens of MB.
    let bound = baseline + ((MAX_REPLY + MAX_VALUE) / 1024) as u64 + 2048;
    for (what, rss) in report {
        assert!(rss <= bound, "{what}: {rss} KiB, bound {bound} KiB");
    }
}

/// An endless reply under the default (large) reply limit: a retrieval of
/// one key takes one item, so the second ends it at once with a protocol
/// error (before, the reader spun on it until the timeout, 400 ms).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endless_reply_is_refused_at_its_second_item() {
    let addr = peer(vec![Act::Repeat(b"VALUE k 0 5\r\nhello\r\n")]);
    let client = Client::builder()
        .servers(&addr)
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let got = tokio::time::timeout(Duration::from_secs(5), client.get("k"))
        .await
        .expect("refused long before the timeout");
    let error = got.unwrap_err();
    assert!(error.is_protocol(), "{error}");
    assert!(error.to_string().contains("more items"), "{error}");
}
