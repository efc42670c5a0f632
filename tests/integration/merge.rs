//! Concurrent `get`s of one connection merged into one command, each caller
//! handed its own values: counted on the server, with merging off, on a
//! server killed mid-flight, on a current-thread runtime.

use std::time::{Duration, Instant};

use memgroup::client::{Client, Hedge, WriteOptions};
use memgroup::topology::ReadFallback;

use crate::client::{bounded, evcache_list, join, one_server, spawn_groups};
use crate::support::{HeldClock, Memcached, raw};

/// Commands a server read during `f`, from its `bytes_read`, when every
/// command is a `get` of `KEY_LEN`-byte keys: a line is `get` + keys × (1 +
/// `KEY_LEN`) + `\r\n`. The `stats` requests' own bytes are measured first.
async fn get_commands<F: std::future::Future<Output = ()>>(
    server: &Memcached,
    keys: u64,
    key_len: u64,
    f: F,
) -> u64 {
    let b0 = raw::stat(server.addr(), "bytes_read");
    let b1 = raw::stat(server.addr(), "bytes_read");
    let per_stats = b1 - b0;
    f.await;
    let b2 = raw::stat(server.addr(), "bytes_read");
    let bytes = b2 - b1 - per_stats;
    let per_command = "get\r\n".len() as u64;
    let key_bytes = keys * (1 + key_len);
    assert_eq!(
        (bytes - key_bytes) % per_command,
        0,
        "not only gets were read"
    );
    (bytes - key_bytes) / per_command
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_gets_merge_and_each_caller_gets_its_own_reply() {
    bounded(async {
        let server = Memcached::spawn();
        let client = one_server(&server).build().unwrap();
        // Hits with distinct values and flags; every fourth key is missing.
        let keys: Vec<String> = (0..400).map(|i| format!("mrg:{i:04}")).collect();
        for (i, k) in keys.iter().enumerate() {
            if i % 4 != 3 {
                let value = format!("{k}={}", "x".repeat(i));
                client
                    .set(k, value, WriteOptions::new().flags(i as u32))
                    .await
                    .unwrap();
            }
        }
        let expect =
            |i: usize| (i % 4 != 3).then(|| (format!("{}={}", keys[i], "x".repeat(i)), i as u32));
        // 800 callers at once on one connection, misses mixed in, each key
        // wanted by two neighbouring callers (so by two callers of one merged
        // command).
        let picks: Vec<usize> = (0..800).map(|j| (j / 2 * 7) % 400).collect();
        let got = join(picks.iter().map(|&i| client.get(&keys[i]))).await;
        for (&i, got) in picks.iter().zip(got) {
            let got = got
                .unwrap()
                .map(|item| (String::from_utf8(item.value.to_vec()).unwrap(), item.flags));
            assert_eq!(got, expect(i), "caller of {} got another reply", keys[i]);
        }
        // Distinct keys: the server read far fewer commands than there were
        // callers. The server is stalled while they queue, so how many merge
        // does not depend on how fast this machine answers the first ones.
        let commands = get_commands(&server, 400, 8, async {
            server.stop();
            let reads = tokio::spawn({
                let (client, keys) = (client.clone(), keys.clone());
                async move { join(keys.iter().map(|k| client.get(k))).await }
            });
            tokio::time::sleep(Duration::from_millis(200)).await;
            server.resume();
            for (i, got) in reads.await.unwrap().into_iter().enumerate() {
                assert_eq!(got.unwrap().is_some(), expect(i).is_some());
            }
        })
        .await;
        assert!(
            commands < 400 / 4,
            "{commands} commands for 400 concurrent gets"
        );

        // gets: each caller's CAS unique is its own key's.
        let got = join(keys.iter().map(|k| client.gets(k))).await;
        for (i, got) in got.into_iter().enumerate() {
            let got = got.unwrap();
            match expect(i) {
                None => assert!(got.is_none()),
                Some(_) => {
                    let item = got.unwrap();
                    let cas = item.cas.unwrap();
                    // The CAS unique works for this key and no other.
                    assert!(
                        client
                            .cas(&keys[i], "swapped", cas, 0)
                            .await
                            .unwrap()
                            .applied()
                    );
                }
            }
        }
        for (i, k) in keys.iter().enumerate() {
            let want = expect(i).map(|_| b"swapped".to_vec());
            assert_eq!(raw::get(server.addr(), k.as_bytes()), want, "{k}");
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn merging_can_be_turned_off() {
    bounded(async {
        let server = Memcached::spawn();
        // Connected first: the connection's question (`mn`) is not a get.
        let client = one_server(&server)
            .merge_gets(false)
            .connect()
            .await
            .unwrap();
        let keys: Vec<String> = (0..200).map(|i| format!("off:{i:04}")).collect();
        let commands = get_commands(&server, 200, 8, async {
            for got in join(keys.iter().map(|k| client.get(k))).await {
                assert!(got.unwrap().is_none());
            }
        })
        .await;
        assert_eq!(commands, 200);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn merged_gets_on_a_server_killed_mid_flight_fall_back_together() {
    bounded(async {
        let mut groups = spawn_groups(2, 1);
        let client = Client::builder()
            .evcache_groups(&evcache_list(&groups))
            .zone("sg0")
            .read_fallback(ReadFallback::OneMore)
            // Longer than `bounded`: a caller the failure does not reach
            // hangs the test instead of falling back after a timeout.
            .timeout(Duration::from_secs(120))
            // Every get waits on the stalled server: none hedged to sg1, none
            // passed over for its queue.
            .hedge(Hedge::off())
            .max_read_queue(0)
            .build()
            .unwrap();
        let keys: Vec<String> = (0..300).map(|i| format!("midkill:{i}")).collect();
        for k in &keys {
            client.set(k, k, 0).await.unwrap();
        }
        // Stall sg0's server, queue 300 gets on its connection (they merge and
        // are written, unanswered), then kill it: the merged commands fail
        // together and every caller reads its own value from sg1.
        groups[0][0].stop();
        let reads = tokio::spawn({
            let (client, keys) = (client.clone(), keys.clone());
            async move { join(keys.iter().map(|k| client.get(k))).await }
        });
        // The client's own count: gets written to the stalled server and
        // awaiting their replies.
        let stalled = groups[0][0].addr_string();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let status = client.health();
            let server = status.servers.iter().find(|s| s.server == stalled).unwrap();
            if server.in_flight > 0 {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "no get was written to the stalled server: {server:?}"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let sg1_hits = raw::stat(groups[1][0].addr(), "get_hits");
        assert!(
            !reads.is_finished(),
            "reads finished while their server was stopped"
        );
        groups[0][0].kill();
        let got = reads.await.unwrap();
        for (k, got) in keys.iter().zip(got) {
            let item = got.unwrap().unwrap_or_else(|| panic!("{k}: miss"));
            assert_eq!(item.value, k.as_bytes(), "{k} got another key's value");
        }
        // They really were served by sg1, after the kill.
        let served = raw::stat(groups[1][0].addr(), "get_hits") - sg1_hits;
        assert_eq!(served, keys.len() as u64);
    })
    .await;
}

/// Runs under paused time: the backoff passes when the test moves the clock.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_failed_connection_is_closed_and_replaced_after_the_backoff() {
    let _clock = HeldClock::hold();
    {
        let server = Memcached::spawn();
        let big = vec![b'x'; 4096];
        let small = Client::builder()
            .servers(&server.addr_string())
            .max_value_size(1024)
            .build()
            .unwrap();
        // Written past the client, which refuses to read it.
        raw::set(server.addr(), b"big", &big);
        small.set("ok", "fine", 0).await.unwrap();
        let open = || raw::stat(server.addr(), "curr_connections");
        let before = open();
        // A value over the limit is a protocol error: the connection closes.
        let err = small.get("big").await.unwrap_err();
        assert!(err.is_protocol(), "{err}");
        // During the backoff the server is skipped, and the failed
        // connection's socket is let go: the server sees it close.
        assert!(small.get("ok").await.unwrap_err().is_server_dead());
        let deadline = Instant::now() + Duration::from_secs(10);
        while open() >= before {
            assert!(
                Instant::now() < deadline,
                "the failed connection stayed open"
            );
            // Lets the runtime drop the failed connection's tasks.
            tokio::task::yield_now().await;
            std::thread::sleep(Duration::from_millis(5));
        }
        // After the backoff (1 s) a new connection serves again.
        tokio::time::advance(Duration::from_millis(1100)).await;
        assert_eq!(small.get("ok").await.unwrap().unwrap().value, "fine");
    }
}

/// The batching writer yields to let callers queue: on a single-threaded
/// runtime that must still make progress (nothing else runs the writer).
#[tokio::test(flavor = "current_thread")]
async fn batching_and_merging_work_on_a_current_thread_runtime() {
    bounded(async {
        let server = Memcached::spawn();
        let client = one_server(&server).build().unwrap();
        let keys: Vec<String> = (0..300).map(|i| format!("ct:{i}")).collect();
        for got in join(keys.iter().map(|k| client.set(k, k, 0))).await {
            assert!(got.unwrap().applied());
        }
        for _ in 0..5 {
            let got = join(keys.iter().map(|k| client.get(k))).await;
            for (k, got) in keys.iter().zip(got) {
                assert_eq!(got.unwrap().unwrap().value, k.as_bytes());
            }
        }
        assert_eq!(raw::stat(server.addr(), "get_hits"), 5 * 300);
    })
    .await;
}
