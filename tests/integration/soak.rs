//! A short soak under faults: writers and readers run against two groups
//! while one group's servers are stalled (SIGSTOP/SIGCONT), killed and
//! restarted over and over. Checked at the end: the client saw every kill
//! (the faults happened under load, not beside it), no caller ever got
//! another key's value, and every write acknowledged by the surviving group
//! is there with its value. `SOAK_SECS` lengthens it (default 2 s).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use memgroup::client::{Client, Event};
use memgroup::topology::{ReadFallback, WritePolicy};

use crate::support::{Memcached, server_list};

fn value_of(key: &str) -> Vec<u8> {
    format!("value-of-{key}").into_bytes()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_acknowledged_is_lost_and_no_value_is_misdelivered_under_faults() {
    let secs: u64 = std::env::var("SOAK_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2);
    let faulty: Vec<Memcached> = (0..2).map(|_| Memcached::spawn()).collect();
    let steady: Vec<Memcached> = (0..2).map(|_| Memcached::spawn()).collect();
    let groups = format!(
        "faulty={};steady={}",
        server_list(&faulty),
        server_list(&steady)
    );
    // `ServerDown` events by server: how often the client found one dead.
    let downs = Arc::new(Mutex::new(HashMap::<String, usize>::new()));
    let seen = downs.clone();
    let client = Client::builder()
        .evcache_groups(&groups)
        .on_event(move |e| {
            if let Event::ServerDown { server, .. } = e {
                *seen.lock().unwrap().entry(server.clone()).or_default() += 1;
            }
        })
        .zone("faulty")
        .read_fallback(ReadFallback::OneMore)
        .write_policy(WritePolicy::One)
        .backoff(Duration::from_millis(50), Duration::from_millis(200))
        .timeout(Duration::from_millis(300))
        .pool_size(2)
        .build()
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));

    // Writers: write-once keys; remember those the steady group acknowledged.
    let mut writers = Vec::new();
    for w in 0..8 {
        let (client, stop) = (client.clone(), stop.clone());
        writers.push(tokio::spawn(async move {
            let mut acked = Vec::new();
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) {
                let key = format!("soak:{w}:{i}");
                i += 1;
                if let Ok(outcome) = client.set(&key, value_of(&key), 0).await
                    && outcome
                        .groups
                        .iter()
                        .any(|g| &*g.group == "steady" && matches!(g.result, Ok(true)))
                {
                    acked.push(key);
                }
            }
            acked
        }));
    }
    // Readers: any hit must be the key's own value.
    let mut readers = Vec::new();
    for r in 0..8 {
        let (client, stop) = (client.clone(), stop.clone());
        readers.push(tokio::spawn(async move {
            let mut hits = 0u64;
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let key = format!("soak:{}:{}", (r + n) % 8, n / 3);
                n += 1;
                if let Ok(Some(item)) = client.get(&key).await {
                    assert_eq!(item.value, value_of(&key), "{key} got another key's value");
                    hits += 1;
                }
                let keys: Vec<String> = (0..5).map(|j| format!("soak:{j}:{}", n / 4)).collect();
                if let Ok(found) = client.get_multi(&keys).await {
                    for (k, item) in found.into_hits() {
                        let k = String::from_utf8(k).unwrap();
                        assert_eq!(item.value, value_of(&k), "{k} got another key's value");
                    }
                }
            }
            hits
        }));
    }

    // The chaos: stall, resume, kill, restart the faulty group's servers.
    let chaos = {
        let stop = stop.clone();
        let mut faulty = faulty;
        tokio::task::spawn_blocking(move || {
            let mut round = 0usize;
            // Kills of each faulty server.
            let mut kills = [0usize; 2];
            let deadline = Instant::now() + Duration::from_secs(secs);
            // At least two of each fault, however slow the machine.
            while round < 6 || Instant::now() < deadline {
                let s = &mut faulty[round % 2];
                match round % 3 {
                    0 => {
                        s.stop();
                        std::thread::sleep(Duration::from_millis(150));
                        s.resume();
                    }
                    1 => {
                        s.kill();
                        kills[round % 2] += 1;
                        std::thread::sleep(Duration::from_millis(100));
                        s.restart();
                    }
                    _ => std::thread::sleep(Duration::from_millis(100)),
                }
                round += 1;
            }
            stop.store(true, Ordering::Relaxed);
            (faulty, round, kills)
        })
    };
    let (faulty, rounds, kills) = chaos.await.unwrap();
    let mut acked = Vec::new();
    for w in writers {
        acked.extend(w.await.unwrap());
    }
    let mut hits = 0;
    for r in readers {
        hits += r.await.unwrap();
    }
    // Every kill met requests: in the 100 ms and more each killed server
    // was down, the client failed on it and marked it dead (again: the
    // previous kill of the same server was six rounds earlier, longer ago
    // than the longest backoff).
    let downs = downs.lock().unwrap().clone();
    for (server, kills) in faulty.iter().zip(kills) {
        let down = downs.get(&server.addr_string()).copied().unwrap_or(0);
        assert!(
            down >= kills,
            "{}: killed {kills} times in {rounds} rounds, marked dead {down} times",
            server.addr_string()
        );
    }
    assert!(
        acked.len() > 100,
        "writes were acknowledged ({})",
        acked.len()
    );
    assert!(hits > 0, "reads were served");
    // Every write the steady group acknowledged is there, with its value.
    let steady_client = Client::builder()
        .evcache_groups(&format!("steady={}", server_list(&steady)))
        .build()
        .unwrap();
    for chunk in acked.chunks(200) {
        let found = steady_client.get_multi(chunk).await.unwrap();
        for key in chunk {
            let item = found
                .get(key.as_bytes())
                .unwrap_or_else(|| panic!("acknowledged {key} is lost"));
            assert_eq!(item.value, value_of(key));
        }
    }
}
