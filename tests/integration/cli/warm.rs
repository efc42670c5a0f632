//! `memgroup warm`: a 50,000-key copy, and the sources it refuses or skips.

use std::time::Duration;

use memgroup::client::{Client, IfPresent, MetaFlag, WriteOptions};

use std::io::Write;

use crate::support::{Memcached, fault_peer, memgroup, raw, server_list as list};

use super::{stderr, stdout};

/// Sizes from 1 B to 500 KiB, mostly small.
fn value_for(i: usize) -> Vec<u8> {
    let len = match i {
        i if i % 1000 == 0 => 500 * 1024,
        i if i % 100 == 0 => 50 * 1024,
        i if i % 10 == 0 => 5 * 1024,
        i => 1 + i % 200,
    };
    (0..len).map(|j| (i * 31 + j * 7) as u8).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn warm_copies_every_live_key_once_with_value_flags_and_ttl() {
    let big = ["-m", "512"];
    let source: Vec<Memcached> = (0..3).map(|_| Memcached::spawn_with(&big)).collect();
    let target: Vec<Memcached> = (0..3).map(|_| Memcached::spawn_with(&big)).collect();
    let groups = format!("src={};dst={}", list(&source), list(&target));
    let groups_again = groups.clone();
    let client = Client::builder()
        .evcache_groups(&groups)
        .pool_size(6)
        .build()
        .unwrap();

    const N: usize = 50_000;
    // TTLs: none, minutes, an hour, and past 30 days (sent as an absolute time).
    let ttl = move |i: usize| match i % 4 {
        0 => 0,
        1 => 300,
        2 => 3600,
        _ => 40 * 24 * 3600,
    };
    let keys: Vec<String> = (0..N).map(|i| format!("w:{i}")).collect();
    for chunk in (0..N).collect::<Vec<_>>().chunks(200) {
        let writes = chunk.iter().map(|&i| {
            let client = client.clone();
            let key = keys[i].clone();
            tokio::spawn(async move {
                client
                    .add_or_set(
                        &key,
                        value_for(i),
                        WriteOptions::new()
                            .flags((i as u32).wrapping_mul(2_654_435_761))
                            .expiry(ttl(i)),
                        &["src"],
                        IfPresent::Overwrite,
                    )
                    .await
            })
        });
        for w in writes.collect::<Vec<_>>() {
            w.await.unwrap().unwrap();
        }
    }
    let sets_before: u64 = target.iter().map(|s| raw::stat(s.addr(), "cmd_set")).sum();
    assert_eq!(sets_before, 0);

    let o = tokio::task::spawn_blocking(move || {
        memgroup(&[
            "--groups",
            &groups,
            "--pool-size",
            "6",
            "--json",
            "warm",
            "--from",
            "src",
            "--to",
            "dst",
            "--verify",
        ])
    })
    .await
    .unwrap();
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    let report: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    let report = &report[0];
    assert_eq!(report["keys"], N as u64, "{report}");
    assert_eq!(report["copied"], N as u64, "{report}");
    assert_eq!(report["errors"], 0);
    assert_eq!(report["missing"], 0);

    // Exactly one write per copied key landed in the target group.
    let sets: u64 = target.iter().map(|s| raw::stat(s.addr(), "cmd_set")).sum();
    assert_eq!(sets, N as u64);

    // Value, flags and TTL (±2 s) survived.
    let dst_only = format!("dst={}", list(&target));
    let src_only = format!("src={}", list(&source));
    let dst = Client::builder().evcache_groups(&dst_only).build().unwrap();
    let src = Client::builder().evcache_groups(&src_only).build().unwrap();
    for chunk in keys.chunks(1000) {
        let got = dst.get_multi(chunk).await.unwrap();
        assert_eq!(got.hit_count(), chunk.len());
        for k in chunk {
            let i: usize = k[2..].parse().unwrap();
            let item = &got[k.as_bytes()];
            assert_eq!(item.value, value_for(i), "{k}");
            assert_eq!(item.flags, (i as u32).wrapping_mul(2_654_435_761), "{k}");
        }
    }
    for i in (0..N).step_by(97) {
        let flags = [MetaFlag::ReturnTtl];
        let t_dst = dst
            .meta_get(&keys[i], &flags)
            .await
            .unwrap()
            .unwrap()
            .ttl()
            .unwrap();
        let t_src = src
            .meta_get(&keys[i], &flags)
            .await
            .unwrap()
            .unwrap()
            .ttl()
            .unwrap();
        // Up to a second each: the two servers' clocks tick at different
        // fractions of a second, the warmer counts whole seconds since it
        // read the source's clock, and the two reads may straddle a tick.
        assert!(
            (t_dst - t_src).abs() <= 3,
            "{}: ttl {t_dst} vs {t_src}",
            keys[i]
        );
        assert_eq!(t_dst == -1, ttl(i) == 0);
    }

    // `-q`: a warm that succeeds (every key already there) prints nothing;
    // its exit code says it.
    let o = tokio::task::spawn_blocking(move || {
        memgroup(&[
            "--groups",
            &groups_again,
            "-q",
            "warm",
            "--from",
            "src",
            "--to",
            "dst",
        ])
    })
    .await
    .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "", "-q warm printed its summary");
}

/// A key the dump lists but no client could request (stored through a
/// base64 meta key: here with a space and a control character) is one
/// error, and the good keys of its batch are still copied.
#[test]
fn warm_skips_an_unrequestable_key_and_copies_the_rest() {
    let src = Memcached::spawn();
    let dst = Memcached::spawn();
    for i in 0..20 {
        raw::set(src.addr(), format!("good:{i}").as_bytes(), b"v");
    }
    {
        use std::io::{Read, Write};
        let mut c = std::net::TcpStream::connect(src.addr()).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut key = Vec::new();
        memgroup::proto::base64_encode(b"bad key\x01", &mut key);
        c.write_all(&[b"ms ", &key[..], b" 1 b\r\nx\r\n"].concat())
            .unwrap();
        let mut reply = [0u8; 4];
        c.read_exact(&mut reply).unwrap();
        assert_eq!(&reply, b"HD\r\n");
    }
    let groups = format!("src={};dst={}", src.addr_string(), dst.addr_string());
    let o = memgroup(&[
        "--groups", &groups, "--json", "warm", "--from", "src", "--to", "dst",
    ]);
    let report: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    let report = &report[0];
    assert_eq!(report["copied"], 20, "{report}");
    assert_eq!(report["errors"], 1, "{report}");
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("not a valid memcached key"),
        "{}",
        stderr(&o)
    );
    assert!(!stderr(&o).contains('\x01'), "{:?}", stderr(&o));
    assert_eq!(raw::stat(dst.addr(), "curr_items"), 20);
}

/// `warm` against a source whose metadump never answers (a fault injector
/// that answers `stats` and then stays silent) fails with a timeout error
/// after the operation timeout, instead of waiting minutes.
#[test]
fn warm_gives_up_on_a_silent_metadump_source_after_the_timeout() {
    let addr = fault_peer(|request, peer| {
        if request.starts_with(b"stats") {
            let _ = peer.write_all(b"STAT time 1700000000\r\nEND\r\n");
        }
        // Anything else (the metadump): silence.
        true
    });
    let dst = Memcached::spawn();
    let groups = format!("src={addr};dst={}", dst.addr_string());
    let o = memgroup(&[
        "--groups",
        &groups,
        "--timeout-ms",
        "300",
        "warm",
        "--from",
        "src",
        "--to",
        "dst",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("timed out"), "{}", stderr(&o));
}

/// A metadump source that keeps listing keys (a fault injector whose stats
/// say it holds 5 items) is refused by `warm`, `keys` and `route --compare
/// --from-cluster` at a bound derived from its `curr_items`, instead of
/// filling memory.
#[test]
fn a_metadump_listing_far_more_keys_than_the_server_holds_is_refused() {
    let addr = fault_peer(|request, peer| {
        if request.starts_with(b"stats") {
            let _ = peer.write_all(b"STAT time 1700000000\r\nSTAT curr_items 5\r\nEND\r\n");
        } else if request.starts_with(b"lru_crawler") {
            // Keys for ever, until the client hangs up.
            for i in 0u64.. {
                let line = format!("key=k{i} exp=-1 la=1 cas=1 fetch=no cls=1 size=60\n");
                if peer.write_all(line.as_bytes()).is_err() {
                    return false;
                }
            }
        }
        true
    });
    let dst = Memcached::spawn();
    let groups = format!("src={addr};dst={}", dst.addr_string());
    for args in [
        &["--groups", &groups, "warm", "--from", "src", "--to", "dst"][..],
        &["--servers", &addr, "keys"][..],
        &[
            "--servers",
            &addr,
            "route",
            "--compare",
            &addr,
            "--from-cluster",
        ][..],
    ] {
        let o = memgroup(args);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("more than 10010 keys"),
            "{args:?}: {}",
            stderr(&o)
        );
    }
}

/// `warm` into a group whose only server is stalled stops once the client
/// marks it down, with one line saying so, instead of a line per key for
/// minutes; exit 1. Its `--verify` says it was skipped, not "missing = 0".
#[test]
fn warm_stops_when_the_target_group_has_no_live_server() {
    let (c1, c2) = (Memcached::spawn(), Memcached::spawn());
    let groups = format!("c1={};c2={}", c1.addr_string(), c2.addr_string());
    for i in 0..3000 {
        raw::set(c1.addr(), format!("w:{i}").as_bytes(), b"v");
    }
    c2.stop();
    let started = std::time::Instant::now();
    let out = crate::support::memgroup(&[
        "--groups",
        &groups,
        "--timeout-ms",
        "200",
        "warm",
        "--from",
        "c1",
        "--to",
        "c2",
        "--verify",
    ]);
    c2.resume();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let said = format!("{stderr}{}", String::from_utf8_lossy(&out.stdout));
    assert!(
        said.contains("verify: skipped (the copy stopped)"),
        "{said}"
    );
    assert!(!said.contains("missing = "), "{said}");
    assert_eq!(
        stderr
            .matches("warm stopped: target group c2 has no live server")
            .count(),
        1,
        "{stderr}"
    );
    let per_key = stderr.matches("copying failed").count();
    assert!(per_key < 50, "{per_key} lines, one per key");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
}
