//! The async client against real memcached processes: placement, replication,
//! warming, faults (SIGKILL, SIGSTOP, restart), failover, bad input
//! (concurrent `get`s merged into one command: `merge.rs`).

use std::collections::HashMap;
use std::time::Duration;

use memgroup::client::{Client, ClientBuilder, Error, GroupState, IfPresent, ServerState};
use memgroup::hash::{HashStrategy, Locator, LocatorConfig, Node};
use memgroup::topology::{ReadFallback, WritePolicy};

use crate::support::{
    HeldClock, Memcached, advance_until, eventually, fault_peer, raw, server_list, unread_bytes_at,
};

/// `groups` groups of `per_group` servers each.
pub(crate) fn spawn_groups(groups: usize, per_group: usize) -> Vec<Vec<Memcached>> {
    (0..groups)
        .map(|_| (0..per_group).map(|_| Memcached::spawn()).collect())
        .collect()
}

/// EVCache node list: `sg0=127.0.0.1:p,…;sg1=…`.
pub(crate) fn evcache_list(groups: &[Vec<Memcached>]) -> String {
    groups
        .iter()
        .enumerate()
        .map(|(i, g)| format!("sg{i}={}", server_list(g)))
        .collect::<Vec<_>>()
        .join(";")
}

fn locator(servers: &[Memcached], config: LocatorConfig) -> Locator {
    let nodes: Vec<Node> = servers
        .iter()
        .map(|s| Node::new("127.0.0.1", s.addr().port()))
        .collect();
    Locator::new(config, &nodes).unwrap()
}

fn sum_stat(servers: &[Memcached], name: &str) -> u64 {
    servers.iter().map(|s| raw::stat(s.addr(), name)).sum()
}

/// A client of one server.
pub(crate) fn one_server(server: &Memcached) -> ClientBuilder {
    Client::builder().servers(&server.addr_string())
}

/// Bounds every test: a hang is a failure, not a stuck CI job.
pub(crate) async fn bounded<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(60), f)
        .await
        .expect("test took more than 60 s: something hangs")
}

#[test]
fn client_is_clone_send_sync() {
    fn check<T: Clone + Send + Sync + 'static>() {}
    check::<Client>();
    check::<Error>();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_sit_exactly_where_the_locator_says() {
    bounded(async {
        let groups = spawn_groups(2, 3);
        let client = Client::builder()
            .evcache_groups(&evcache_list(&groups))
            .hash(HashStrategy::Ketama)
            .pool_size(3)
            .build()
            .unwrap();
        let keys: Vec<String> = (0..300).map(|i| format!("place:{i}")).collect();
        for k in &keys {
            client.set(k, format!("v-{k}"), 0).await.unwrap();
        }
        for group in &groups {
            let locator = locator(group, LocatorConfig::new(HashStrategy::Ketama));
            for k in &keys {
                let owner = locator.locate(k.as_bytes());
                for (i, server) in group.iter().enumerate() {
                    let got = raw::get(server.addr(), k.as_bytes());
                    if i == owner {
                        assert_eq!(got.as_deref(), Some(format!("v-{k}").as_bytes()), "{k}");
                    } else {
                        assert_eq!(got, None, "{k} also on server {i}");
                    }
                }
            }
        }

        // A single group with the Whalin client's defaults: new-compat hashing
        // and sanitized (URL-encoded) keys, on the wire too.
        let single = spawn_groups(1, 3).remove(0);
        let client = Client::builder()
            .servers(&server_list(&single))
            .hash(HashStrategy::NewCompat)
            .sanitize_keys(true)
            .build()
            .unwrap();
        let config = LocatorConfig::new(HashStrategy::NewCompat).with_sanitize_keys(true);
        let locator = locator(&single, config);
        for k in ["user:1", "café", "a b", "100%", "tilde~key"] {
            client.set(k, k, 0).await.unwrap();
            let wire = locator.wire_key(k.as_bytes());
            assert_ne!(&*wire, k.as_bytes(), "{k} is sanitized");
            let owner = locator.locate(&wire);
            assert_eq!(
                raw::get(single[owner].addr(), &wire).as_deref(),
                Some(k.as_bytes())
            );
            assert_eq!(client.get(k).await.unwrap().unwrap().value, k.as_bytes());
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_write_per_group_per_key_whatever_the_pool_size() {
    bounded(async {
        let groups = spawn_groups(2, 3);
        let client = Client::builder()
            .evcache_groups(&evcache_list(&groups))
            .pool_size(4)
            .build()
            .unwrap();
        let before: Vec<u64> = groups.iter().map(|g| sum_stat(g, "cmd_set")).collect();
        for i in 0..500 {
            let outcome = client.set(format!("rep:{i}"), "x", 0).await.unwrap();
            // Returned at the policy: the other group may still be pending.
            assert_eq!(outcome.groups.len() + outcome.pending.len(), 2);
            assert!(outcome.applied());
        }
        client.close(Duration::from_secs(5)).await.unwrap();
        for (g, group) in groups.iter().enumerate() {
            assert_eq!(sum_stat(group, "cmd_set") - before[g], 500, "group sg{g}");
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn warming_a_new_group_writes_each_key_exactly_once() {
    bounded(async {
        // The EVCache bug: with poolSize 6 a targeted write went out 6 times.
        let groups = spawn_groups(3, 3);
        // Counts, not latency: 500 writes at once on a loaded 2-core
        // machine (the rest of the suite runs beside it) may take more than
        // the default timeout.
        let client = Client::builder()
            .evcache_groups(&evcache_list(&groups))
            .pool_size(6)
            .timeout(Duration::from_secs(5))
            .build()
            .unwrap();
        const N: usize = 10_000;
        let keys: Vec<String> = (0..N).map(|i| format!("warm:{i}")).collect();
        for chunk in keys.chunks(500) {
            let writes = chunk
                .iter()
                .map(|k| client.add_or_set(k, k, 0, &["sg0", "sg1"], IfPresent::Overwrite));
            for r in join(writes).await {
                r.unwrap();
            }
        }
        let target = &groups[2];
        let before = sum_stat(target, "cmd_set");
        assert_eq!(sum_stat(target, "curr_items"), 0);
        for chunk in keys.chunks(500) {
            let writes = chunk
                .iter()
                .map(|k| client.add_or_set(k, k, 0, &["sg2"], IfPresent::Keep));
            for r in join(writes).await {
                let outcome = r.unwrap();
                assert_eq!(outcome.groups.len(), 1);
            }
        }
        assert_eq!(sum_stat(target, "cmd_set") - before, N as u64);
        assert_eq!(sum_stat(target, "curr_items"), N as u64);
        // Every key reads back from the new group alone.
        let reader = Client::builder()
            .servers(&server_list(target))
            .build()
            .unwrap();
        let mut found = 0;
        for chunk in keys.chunks(1000) {
            let got = reader.get_multi(chunk).await.unwrap();
            for k in chunk {
                assert_eq!(got[k.as_bytes()].value, k.as_bytes());
            }
            found += got.hit_count();
        }
        assert_eq!(found, N);
    })
    .await;
}

/// Polls the futures concurrently (a tiny `join_all` for tests).
pub(crate) async fn join<F: std::future::Future>(
    futures: impl Iterator<Item = F>,
) -> Vec<F::Output> {
    let mut futures: Vec<_> = futures.map(Box::pin).collect();
    let mut out: Vec<Option<F::Output>> = futures.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (f, o) in futures.iter_mut().zip(out.iter_mut()) {
            if o.is_none() {
                match f.as_mut().poll(cx) {
                    std::task::Poll::Ready(v) => *o = Some(v),
                    std::task::Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(())
        }
    })
    .await;
    out.into_iter().map(Option::unwrap).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_server_reads_fall_back_and_writes_report_the_group() {
    bounded(async {
        let mut groups = spawn_groups(2, 3);
        let list = evcache_list(&groups);
        let client = Client::builder()
            .evcache_groups(&list)
            .zone("sg0")
            .read_fallback(ReadFallback::OneMore)
            .write_policy(WritePolicy::All)
            .timeout(Duration::from_millis(500))
            .build()
            .unwrap();
        let keys: Vec<String> = (0..200).map(|i| format!("kill:{i}")).collect();
        for k in &keys {
            client.set(k, k, 0).await.unwrap();
        }
        let sg0 = locator(&groups[0], LocatorConfig::new(HashStrategy::Ketama));
        let victims: Vec<&String> = keys
            .iter()
            .filter(|k| sg0.locate(k.as_bytes()) == 0)
            .collect();
        assert!(!victims.is_empty());
        groups[0][0].kill();

        // Every key still reads, the victims from the other group.
        for k in &keys {
            let item = client.get(k).await.unwrap().expect("fallback read");
            assert_eq!(item.value, k.as_bytes());
        }
        let got = client.get_multi(&keys).await.unwrap();
        assert_eq!(got.hit_count(), keys.len());

        // Writes of victim keys miss the ALL policy and name the failed group.
        for k in &victims {
            let err = client.set(*k, "new", 0).await.unwrap_err();
            assert!(err.is_write_policy(), "{err}");
            // The failed group, and the other: it took the write, or had not
            // answered when the policy was decided (All: at sg0's failure).
            let said = err.to_string();
            assert!(
                said.contains("failed: sg0; applied in sg1)")
                    || said.contains("failed: sg0; not yet answered: sg1)"),
                "{said}"
            );
        }
        // Under ONE, the same write succeeds and reports sg0 as failed.
        let lenient = Client::builder()
            .evcache_groups(&list)
            .write_policy(WritePolicy::One)
            .build()
            .unwrap();
        let outcome = lenient.set(victims[0], "new", 0).await.unwrap();
        let failed: Vec<&str> = outcome.failed().map(|(g, _)| g).collect();
        assert_eq!(failed, ["sg0"]);
        assert_eq!(
            outcome.in_state(GroupState::Applied).collect::<Vec<_>>(),
            ["sg1"]
        );
    })
    .await;
}

/// With one request allowed in flight per connection, forty callers at once
/// still each get their own value: the others wait for a place and go as
/// replies free one.
#[tokio::test]
async fn callers_beyond_the_cap_on_requests_in_flight_wait_their_turn() {
    let server = Memcached::spawn();
    let client = Client::builder()
        .servers(&server.addr_string())
        .max_in_flight(1)
        .build()
        .unwrap();
    for i in 0..40 {
        client
            .set(format!("cap:{i}"), format!("v{i}"), 0)
            .await
            .unwrap();
    }
    let got = join((0..40).map(|i| {
        let client = client.clone();
        async move { client.get(format!("cap:{i}")).await }
    }))
    .await;
    for (i, item) in got.into_iter().enumerate() {
        assert_eq!(item.unwrap().unwrap().value, format!("v{i}").as_bytes());
    }
}

/// A request in flight on a stalled server keeps its place until its reply
/// is read: one waiting for a place times out at its own deadline, and once
/// the server resumes (the late reply read and dropped) the place is free
/// again. Runs under paused time.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_request_waiting_for_a_place_times_out_at_its_deadline() {
    let _clock = HeldClock::hold();
    let server = Memcached::spawn();
    let client = Client::builder()
        .servers(&server.addr_string())
        .max_in_flight(1)
        .failover(false)
        .timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    client.set("k", "v", 0).await.unwrap();
    server.stop();
    let started = tokio::time::Instant::now();
    let (first, second, ()) = tokio::join!(
        client.get("k"),
        client.get("k"),
        tokio::time::advance(Duration::from_millis(300))
    );
    assert_eq!(started.elapsed(), Duration::from_millis(300));
    assert!(first.unwrap_err().is_timeout());
    assert!(second.unwrap_err().is_timeout());
    server.resume();
    // The first request's late reply frees its place.
    assert_eq!(client.get("k").await.unwrap().unwrap().value, &b"v"[..]);
}

/// A caller reading its own reply has no timer of its own: when its
/// connection is closed under it (another caller's timeout on the other
/// connection marks the stalled server down), it is woken then, not at its
/// own deadline ten seconds later. Runs under paused time.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_lone_reader_is_woken_when_its_connection_closes() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::task::{Context, Poll, Wake, Waker};

    /// Remembers being woken.
    struct Flag(AtomicBool);
    impl Wake for Flag {
        fn wake(self: Arc<Self>) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    let _clock = HeldClock::hold();
    let server = Memcached::spawn();
    let client = Client::builder()
        .servers(&server.addr_string())
        .pool_size(2)
        .failover(false)
        .timeout(Duration::from_secs(10))
        .timeouts_until_down(1)
        .build()
        .unwrap();
    client.set("a", "1", 0).await.unwrap();
    // Operations take the pool's slots in turn: both connections open.
    for _ in 0..2 {
        assert!(client.get("a").await.unwrap().is_some());
    }
    server.stop();
    // Alone on its connection, it reads its own reply.
    let lone = client.get("a");
    tokio::pin!(lone);
    let flag = Arc::new(Flag(AtomicBool::new(false)));
    let waker = Waker::from(flag.clone());
    assert!(
        lone.as_mut()
            .poll(&mut Context::from_waker(&waker))
            .is_pending()
    );
    // On the other connection, a request with a short timeout: its timeout
    // marks the server down and closes both connections.
    let hasty = client.with_timeout(Duration::from_millis(100));
    let (short, ()) = tokio::join!(
        hasty.get("a"),
        tokio::time::advance(Duration::from_millis(100))
    );
    server.resume();
    assert!(short.unwrap_err().is_timeout());
    assert!(
        flag.0.load(Ordering::SeqCst),
        "the lone reader was not woken when its connection closed"
    );
    let Poll::Ready(result) = lone.as_mut().poll(&mut Context::from_waker(&waker)) else {
        panic!("woken, the lone reader still waits");
    };
    let error = result.unwrap_err();
    assert!(error.is_server_dead(), "{error}");
}

/// Runs under paused time: the timeouts pass when the test moves the clock.
/// A SIGSTOPped server: its first requests wait out the timeout, then (three
/// timeouts in a row) it is marked down and the next requests fail at once
/// instead of each waiting; the other servers answer throughout. Once it
/// resumes and its backoff has passed, a probe gets a reply and it serves
/// again. Runs under paused time.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn stalled_server_is_marked_down_after_three_timeouts_and_probed_back() {
    let _clock = HeldClock::hold();
    {
        let group = spawn_groups(1, 3).remove(0);
        let budget = Duration::from_millis(300);
        let client = Client::builder()
            .servers(&server_list(&group))
            .failover(false)
            .timeout(budget)
            .backoff(Duration::from_secs(1), Duration::from_secs(8))
            .build()
            .unwrap();
        let keys: Vec<String> = (0..60).map(|i| format!("stall:{i}")).collect();
        for k in &keys {
            client.set(k, k, 0).await.unwrap();
        }
        let loc = locator(&group, LocatorConfig::new(HashStrategy::Ketama));
        let stalled: Vec<&String> = keys
            .iter()
            .filter(|k| loc.locate(k.as_bytes()) == 1)
            .collect();
        assert!(stalled.len() > 5);
        group[1].stop();
        let mut timeouts = 0;
        for k in &keys {
            let started = tokio::time::Instant::now();
            let result = if loc.locate(k.as_bytes()) == 1 && timeouts < 3 {
                // The request goes out, then the budget passes.
                let (result, ()) = tokio::join!(client.get(k), tokio::time::advance(budget));
                result
            } else {
                client.get(k).await
            };
            if loc.locate(k.as_bytes()) == 1 {
                let err = result.unwrap_err();
                if timeouts < 3 {
                    assert!(err.is_timeout(), "{err}");
                    timeouts += 1;
                } else {
                    // Marked down: refused at once, no time passes.
                    assert!(err.is_server_dead(), "{err}");
                    assert_eq!(started.elapsed(), Duration::ZERO);
                }
            } else {
                assert_eq!(result.unwrap().unwrap().value, k.as_bytes());
            }
        }
        let status = client.health();
        let down = status
            .servers
            .iter()
            .find(|s| s.server == group[1].addr_string())
            .unwrap();
        assert!(
            matches!(down.state, ServerState::Dead { .. }),
            "{:?}",
            down.state
        );
        // Back from the backoff while still stopped: the connect succeeds
        // (the kernel's backlog) but the probe gets no answer, so it stays down.
        tokio::time::advance(Duration::from_millis(1100)).await;
        let (probed, ()) = tokio::join!(client.get(stalled[0]), tokio::time::advance(budget));
        let err = probed.unwrap_err();
        assert!(err.is_timeout(), "{err}");
        // One timeout is enough for a server on probation.
        let started = tokio::time::Instant::now();
        assert!(client.get(stalled[1]).await.unwrap_err().is_server_dead());
        assert_eq!(started.elapsed(), Duration::ZERO);
        // Resumed: after the (doubled) backoff the probe answers and it serves.
        group[1].resume();
        tokio::time::advance(Duration::from_millis(2100)).await;
        for k in &stalled {
            assert_eq!(client.get(k).await.unwrap().unwrap().value, k.as_bytes());
        }
    }
}

/// Runs under paused time: the backoff passes when the test moves the clock.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn restarted_server_takes_writes_again_after_the_backoff() {
    let _clock = HeldClock::hold();
    {
        let mut group = spawn_groups(1, 3).remove(0);
        let client = Client::builder()
            .servers(&server_list(&group))
            .failover(false)
            .backoff(Duration::from_millis(200), Duration::from_secs(2))
            .build()
            .unwrap();
        let loc = locator(&group, LocatorConfig::new(HashStrategy::Ketama));
        let keys: Vec<String> = (0..100)
            .map(|i| format!("restart:{i}"))
            .filter(|k| loc.locate(k.as_bytes()) == 2)
            .collect();
        assert!(!keys.is_empty());
        client.set(&keys[0], "before", 0).await.unwrap();
        group[2].kill();
        let err = client.set(&keys[0], "during", 0).await.unwrap_err();
        assert!(err.is_write_policy(), "{err}");
        // While marked dead the server is skipped without connecting.
        let err = client.get(&keys[0]).await.unwrap_err();
        assert!(err.is_server_dead() || err.is_connection(), "{err}");

        group[2].restart();
        tokio::time::advance(Duration::from_millis(2100)).await;
        // The repair of the write it missed probes it back first.
        advance_until(Duration::from_secs(1), || {
            client.health().repairs.pending == 0
        })
        .await;
        for k in &keys {
            client.set(k, "after", 0).await.unwrap();
            assert_eq!(
                raw::get(group[2].addr(), k.as_bytes()).as_deref(),
                Some(&b"after"[..])
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failover_picks_the_server_the_java_client_would() {
    bounded(async {
        let mut group = spawn_groups(1, 3).remove(0);
        let client = Client::builder()
            .servers(&server_list(&group))
            .hash(HashStrategy::NewCompat)
            .failover(true)
            .build()
            .unwrap();
        let loc = locator(&group, LocatorConfig::new(HashStrategy::NewCompat));
        group[0].kill();
        // Make sure the client has noticed: the first write to server 0 fails
        // or fails over.
        let keys: Vec<String> = (0..200)
            .map(|i| format!("fo:{i}"))
            .filter(|k| loc.locate(k.as_bytes()) == 0)
            .collect();
        assert!(keys.len() > 10);
        let _ = client.set(&keys[0], "warmup", 0).await;
        let mut moved: HashMap<usize, usize> = HashMap::new();
        for k in &keys[1..] {
            client.set(k, k, 0).await.unwrap();
            // Java's getSock: the first live server of the failover sequence.
            let expected = loc.failover(k.as_bytes()).find(|&i| i != 0).unwrap();
            assert_eq!(
                raw::get(group[expected].addr(), k.as_bytes()).as_deref(),
                Some(k.as_bytes()),
                "{k}"
            );
            *moved.entry(expected).or_default() += 1;
            assert_eq!(client.get(k).await.unwrap().unwrap().value, k.as_bytes());
        }
        assert!(!moved.is_empty());
    })
    .await;
}

/// The first write after a server died fails over within its group, as a
/// read does: no connection to the dead server could be opened, so nothing
/// was sent and the write goes to the server Java's getSock picks; the key's
/// own server gets a repair. Without failover the same write fails and
/// nothing lands elsewhere. (A fresh client, as each run of the tool is:
/// the dead-host record does not know the server is down yet.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_write_after_a_server_died_fails_over_too() {
    bounded(async {
        let mut group = spawn_groups(1, 3).remove(0);
        let loc = locator(&group, LocatorConfig::new(HashStrategy::NewCompat));
        let key = (0..200)
            .map(|i| format!("ffo:{i}"))
            .find(|k| loc.locate(k.as_bytes()) == 0)
            .unwrap();
        group[0].kill();
        let client = |failover| {
            Client::builder()
                .servers(&server_list(&group))
                .hash(HashStrategy::NewCompat)
                .failover(failover)
                .build()
                .unwrap()
        };
        let strict = client(false);
        let error = strict.set(&key, "strict", 0).await.unwrap_err();
        // One group: the write failed, and says why (no policy jargon).
        assert!(
            error
                .to_string()
                .starts_with("write failed: connect failed (server "),
            "{error}"
        );
        let next = loc.failover(key.as_bytes()).find(|&i| i != 0).unwrap();
        assert_eq!(raw::get(group[next].addr(), key.as_bytes()), None);

        let client = client(true);
        let outcome = client.set(&key, "moved", 0).await.unwrap();
        assert!(outcome.is_complete(), "{outcome:?}");
        assert_eq!(
            outcome.groups[0].server.as_deref(),
            Some(group[next].addr_string().as_str())
        );
        assert_eq!(
            raw::get(group[next].addr(), key.as_bytes()).as_deref(),
            Some(&b"moved"[..])
        );
        assert_eq!(client.get(&key).await.unwrap().unwrap().value, "moved");
        assert_eq!(client.health().repairs.pending, 1);
    })
    .await;
}

/// `get_multi` walks the same read targets as `get`: after an I/O error on
/// the key's server it fails over within the group (one group, failover on).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_multi_fails_over_within_the_group_like_get() {
    bounded(async {
        let mut group = spawn_groups(1, 3).remove(0);
        let client = Client::builder()
            .servers(&server_list(&group))
            .hash(HashStrategy::NewCompat)
            .failover(true)
            .build()
            .unwrap();
        let loc = locator(&group, LocatorConfig::new(HashStrategy::NewCompat));
        let keys: Vec<String> = (0..200).map(|i| format!("mfo:{i}")).collect();
        let mut victims = 0;
        for k in &keys {
            client.set(k, k, 0).await.unwrap();
            if loc.locate(k.as_bytes()) == 0 {
                // The copy Java's getSock would find once server 0 is dead.
                let next = loc.failover(k.as_bytes()).find(|&i| i != 0).unwrap();
                raw::set(group[next].addr(), k.as_bytes(), k.as_bytes());
                victims += 1;
            }
        }
        assert!(victims > 10);
        // The client's connection to server 0 is open: it learns of the death
        // from the I/O error of this very call.
        group[0].kill();
        let got = client.get_multi(&keys).await.unwrap();
        for k in &keys {
            let item = got.get(k.as_bytes()).unwrap_or_else(|| panic!("{k}: miss"));
            assert_eq!(item.value, k.as_bytes());
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_refused_before_any_byte_is_sent() {
    bounded(async {
        let server = Memcached::spawn();
        let client = one_server(&server).build().unwrap();
        client.set("good", "v", 0).await.unwrap();
        let counters = [
            "cmd_get",
            "cmd_set",
            "cmd_flush",
            "cmd_touch",
            "delete_misses",
            "delete_hits",
        ];
        let before: Vec<u64> = counters
            .iter()
            .map(|c| raw::stat(server.addr(), c))
            .collect();
        let long = "k".repeat(251);
        for bad in [
            "a b",
            "a\r\nflush_all",
            "tab\tkey",
            "",
            "\u{7f}",
            long.as_str(),
        ] {
            assert!(
                client.get(bad).await.unwrap_err().is_invalid_key(),
                "{bad:?}"
            );
            assert!(client.set(bad, "v", 0).await.unwrap_err().is_invalid_key());
            assert!(client.delete(bad).await.unwrap_err().is_invalid_key());
            assert!(client.touch(bad, 1).await.unwrap_err().is_invalid_key());
            let err = client.get_multi(&["good", bad]).await.unwrap_err();
            assert!(err.is_invalid_key());
        }
        let huge = vec![0u8; 2 * 1024 * 1024];
        assert!(
            client
                .set("good", &huge, 0)
                .await
                .unwrap_err()
                .is_value_too_large()
        );
        let after: Vec<u64> = counters
            .iter()
            .map(|c| raw::stat(server.addr(), c))
            .collect();
        assert_eq!(before, after, "{counters:?}");
        assert_eq!(
            client.get("good").await.unwrap().unwrap().value,
            "v".as_bytes()
        );
    })
    .await;
}

/// Runs under paused time: the timeouts pass when the test moves the clock.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn cancelled_and_timed_out_requests_keep_the_connection_in_sync() {
    let _clock = HeldClock::hold();
    {
        let server = Memcached::spawn();
        let client = one_server(&server).build().unwrap();
        let keys: Vec<String> = (0..200).map(|i| format!("sync:{i}")).collect();
        for k in &keys {
            client.set(k, k, 0).await.unwrap();
        }
        // Cancellation: start many gets and drop every other one mid-flight.
        for round in 0..20 {
            let futures = keys.iter().enumerate().map(|(i, k)| {
                let client = client.clone();
                async move {
                    let get = client.get(k);
                    if (i + round) % 2 == 0 {
                        // Dropped after one poll.
                        let mut get = std::pin::pin!(get);
                        std::future::poll_fn(|cx| {
                            let _ = get.as_mut().poll(cx);
                            std::task::Poll::Ready(())
                        })
                        .await;
                        None
                    } else {
                        Some((k, get.await))
                    }
                }
            });
            for (k, got) in join(futures).await.into_iter().flatten() {
                assert_eq!(
                    got.unwrap().unwrap().value,
                    k.as_bytes(),
                    "reply went to the wrong caller"
                );
            }
        }
        // Timeout: a stalled server, short timeouts, then it resumes. (Not
        // marked down after a few, so that all twenty replies come late.)
        let quick = one_server(&server)
            .timeouts_until_down(0)
            .timeout(Duration::from_millis(100))
            .build()
            .unwrap();
        for k in &keys {
            assert_eq!(quick.get(k).await.unwrap().unwrap().value, k.as_bytes());
        }
        server.stop();
        for k in &keys[..20] {
            let (got, ()) = tokio::join!(
                quick.get(k),
                tokio::time::advance(Duration::from_millis(100))
            );
            assert!(got.unwrap_err().is_timeout());
        }
        server.resume();
        for k in &keys {
            assert_eq!(quick.get(k).await.unwrap().unwrap().value, k.as_bytes());
        }
    }
}

/// A client of `server` (2 s timeout) holding keys `a` to `d`, whose
/// connection has just answered two callers together (`get a` and `get b`,
/// each written at once): the next caller to queue hands its write to the
/// writer task, which waits a moment for the others to join its `get` line.
async fn two_answered_together(server: &Memcached) -> Client {
    let client = one_server(server)
        .timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    for k in ["a", "b", "c", "d"] {
        client.set(k, k, 0).await.unwrap();
    }
    let (a, b) = tokio::join!(client.get("a"), client.get("b"));
    assert_eq!(a.unwrap().unwrap().value, "a".as_bytes());
    assert_eq!(b.unwrap().unwrap().value, "b".as_bytes());
    client
}

/// Polls `future` once: whether it finished.
async fn poll_once<F: std::future::Future>(future: std::pin::Pin<&mut F>) -> bool {
    let mut future = future;
    std::future::poll_fn(|cx| std::task::Poll::Ready(future.as_mut().poll(cx).is_ready())).await
}

/// After two callers answered together, a caller dropped after one poll
/// (its write handed over) still has its request sent: the server reads
/// it, and the next caller gets its own reply.
#[tokio::test(flavor = "current_thread")]
async fn a_caller_dropped_after_handing_over_its_write_still_sends_its_request() {
    let server = Memcached::spawn();
    let client = two_answered_together(&server).await;
    let read_before = raw::stat(server.addr(), "cmd_get");
    {
        let get = client.get("c");
        let get = std::pin::pin!(get);
        assert!(!poll_once(get).await, "the caller waits for its reply");
    }
    assert_eq!(
        client.get("d").await.unwrap().unwrap().value,
        "d".as_bytes()
    );
    assert_eq!(
        raw::stat(server.addr(), "cmd_get") - read_before,
        2,
        "the server read the dropped caller's key and the next one"
    );
}

/// After two callers answered together, a third polled once and left
/// unpolled (neither awaited nor dropped, as a future parked in a
/// structure can be) holds up no one: the next caller's request still goes
/// out and is answered, and the parked one's reply waits for it.
#[tokio::test(flavor = "current_thread")]
async fn a_caller_polled_once_and_left_unpolled_holds_up_no_one() {
    let server = Memcached::spawn();
    let client = two_answered_together(&server).await;
    let parked = client.get("c");
    let mut parked = std::pin::pin!(parked);
    assert!(!poll_once(parked.as_mut()).await);
    assert_eq!(
        client.get("d").await.unwrap().unwrap().value,
        "d".as_bytes()
    );
    assert_eq!(parked.await.unwrap().unwrap().value, "c".as_bytes());
}

/// Requests in flight together on a stalled server: their replies are the
/// reader task's to read, so each caller's deadline is watched by the
/// connection's timer (no timer per request). Each fails at its own
/// deadline — still waiting 1 ms before it, failed 1 ms after, whatever the
/// runtime ran meanwhile — and once the server resumes the late replies are
/// read and dropped: every later caller gets its own value.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn requests_in_flight_together_time_out_each_at_its_deadline() {
    let _clock = HeldClock::hold();
    let server = Memcached::spawn();
    let client = one_server(&server)
        .timeouts_until_down(0)
        .timeout(Duration::from_millis(100))
        .build()
        .unwrap();
    let keys: Vec<String> = (0..8).map(|i| format!("late:{i}")).collect();
    for k in &keys {
        client.set(k, k, 0).await.unwrap();
    }
    server.stop();
    let poll = |get: &mut std::pin::Pin<Box<dyn std::future::Future<Output = _> + '_>>| {
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        get.as_mut().poll(&mut cx)
    };
    // Half now, half 40 ms later: two deadlines.
    let mut gets: Vec<std::pin::Pin<Box<dyn std::future::Future<Output = _>>>> = Vec::new();
    for k in &keys[..4] {
        gets.push(Box::pin(client.get(k)));
    }
    for get in &mut gets {
        assert!(poll(get).is_pending());
    }
    tokio::time::advance(Duration::from_millis(40)).await;
    for k in &keys[4..] {
        gets.push(Box::pin(client.get(k)));
    }
    for get in &mut gets[4..] {
        assert!(poll(get).is_pending());
    }
    // 99 ms after the first four: all still waiting.
    tokio::time::advance(Duration::from_millis(59)).await;
    for get in &mut gets {
        assert!(poll(get).is_pending(), "timed out before its 100 ms");
    }
    // 101 ms: the first four have failed, the others wait on.
    tokio::time::advance(Duration::from_millis(2)).await;
    for (i, get) in gets.iter_mut().enumerate() {
        match poll(get) {
            std::task::Poll::Ready(result) if i < 4 => {
                let error = result.unwrap_err();
                assert!(error.is_timeout(), "{error}");
            }
            std::task::Poll::Pending if i >= 4 => {}
            other => panic!("get {i} at 101 ms: {other:?}"),
        }
    }
    // 141 ms: the rest have failed too.
    tokio::time::advance(Duration::from_millis(40)).await;
    for get in &mut gets[4..] {
        let std::task::Poll::Ready(result) = poll(get) else {
            panic!("still waiting past its deadline");
        };
        assert!(result.unwrap_err().is_timeout());
    }
    drop(gets);
    server.resume();
    for k in &keys {
        assert_eq!(client.get(k).await.unwrap().unwrap().value, k.as_bytes());
    }
}

/// A client outliving the runtime its connections were opened on (a client
/// shared by several runtimes, as by several `#[tokio::test]`s): those
/// connections' tasks ended with it, so nobody would read their replies or
/// watch their deadlines. The next requests, several at once, go out on a
/// new connection and get their replies.
#[test]
fn a_client_outliving_its_connections_runtime_reconnects() {
    let server = Memcached::spawn();
    let client = {
        let first = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        first.block_on(async {
            let client = one_server(&server).build().unwrap();
            client.set("k", "v", 0).await.unwrap();
            client
        })
    };
    let second = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    second.block_on(bounded(async {
        for got in join((0..8).map(|_| client.get("k"))).await {
            assert_eq!(got.unwrap().unwrap().value, "v");
        }
    }));
}

/// A hostile peer (a fault injector, not a memcached stand-in) that answers a
/// `get` of many keys with values for ever and never `END`: the client
/// refuses the reply at its size limit with a protocol error, instead of
/// growing memory until the timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endless_reply_is_refused_at_the_reply_limit() {
    bounded(async {
        let item = b"VALUE k 0 100\r\n"
            .iter()
            .chain(&[b'x'; 100])
            .chain(b"\r\n")
            .copied()
            .collect::<Vec<u8>>()
            .repeat(100);
        // Values until the client hangs up.
        let addr = fault_peer(move |_, peer| {
            use std::io::Write;
            while peer.write_all(&item).is_ok() {}
            false
        });
        let client = Client::builder()
            .servers(&addr)
            .max_reply_size(1 << 20)
            .timeout(Duration::from_secs(30))
            .build()
            .unwrap();
        // Enough keys that the item bound (one per key) is not what stops it.
        let keys: Vec<String> = (0..20_000).map(|i| format!("k{i}")).collect();
        let found = client.get_multi(&keys).await.unwrap();
        let (_, err) = found.errors().next().expect("the keys got no answer");
        assert_eq!(found.errors().count(), keys.len());
        assert!(err.is_protocol(), "{err}");
        assert!(err.to_string().contains("without an END"), "{err}");
    })
    .await;
}

/// A caller's future polled once and then left unpolled (a slow consumer of
/// a buffered stream, say) must not hold up other callers' replies on the
/// same connection: the reader task takes the reading over as soon as a
/// second caller waits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unpolled_call_does_not_hold_up_other_callers() {
    bounded(async {
        let server = Memcached::spawn();
        let client = one_server(&server).build().unwrap();
        client.set("a", "1", 0).await.unwrap();
        client.set("b", "2", 0).await.unwrap();
        // A's request goes out while the server is stalled, so A is still
        // waiting for its reply after its first poll.
        server.stop();
        let mut a = Box::pin(client.get("a"));
        let first = std::future::poll_fn(|cx| std::task::Poll::Ready(a.as_mut().poll(cx))).await;
        assert!(first.is_pending());
        server.resume();
        // A is never polled again while B runs.
        let b = client.get("b").await.unwrap().unwrap();
        assert_eq!(b.value, "2");
        drop(a);
        assert_eq!(client.get("a").await.unwrap().unwrap().value, "1");
    })
    .await;
}

/// A server restarted while the client's connection to it sat idle: the
/// next request finds the close (the idle check sees the socket readable
/// with no reply due) and reconnects, instead
/// of failing on the dead connection and backing the server off.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_the_server_closed_while_idle_is_replaced_quietly() {
    bounded(async {
        let mut server = Memcached::spawn();
        let client = one_server(&server).build().unwrap();
        client.set("k", "v", 0).await.unwrap();
        server.restart();
        // Time for the close to reach the client's socket.
        tokio::time::sleep(Duration::from_millis(100)).await;
        client.set("k", "w", 0).await.unwrap();
        assert_eq!(client.get("k").await.unwrap().unwrap().value, "w");
        let status = client.health();
        assert_eq!(status.servers[0].failures, 0, "{:?}", status.servers[0]);
        assert_eq!(status.servers[0].counters.errors_total(), 0);
    })
    .await;
}

/// `key_prefix`: every key is stored behind the prefix, on the server a
/// client without it places the whole key (so services that prefix by hand,
/// or EVCache with its cache prefix, share the keys); replies and errors
/// speak of the keys as given.
#[tokio::test]
async fn a_key_prefix_stores_every_key_behind_it() {
    let servers: Vec<Memcached> = (0..3).map(|_| Memcached::spawn()).collect();
    let list = server_list(&servers);
    let prefixed = Client::builder()
        .servers(&list)
        .key_prefix("app:")
        .build()
        .unwrap();
    let plain = Client::builder().servers(&list).build().unwrap();
    let keys: Vec<String> = (0..30).map(|i| format!("k{i}")).collect();
    for (i, key) in keys.iter().enumerate() {
        prefixed.set(key, format!("v{i}"), 0).await.unwrap();
    }
    // On the servers: each key once, behind the prefix, where the plain
    // client places the whole key.
    let items: u64 = servers
        .iter()
        .map(|s| raw::stat(s.addr(), "curr_items"))
        .sum();
    assert_eq!(items, 30);
    for (i, key) in keys.iter().enumerate() {
        let whole = format!("app:{key}");
        let holders = servers
            .iter()
            .filter(|s| raw::get(s.addr(), whole.as_bytes()).is_some())
            .count();
        assert_eq!(holders, 1, "{whole}");
        assert!(
            servers
                .iter()
                .all(|s| raw::get(s.addr(), key.as_bytes()).is_none())
        );
        let found = plain
            .get(&whole)
            .await
            .unwrap()
            .expect("the plain client finds it");
        assert_eq!(found.value, format!("v{i}").as_bytes());
    }
    // Multi-key reads, keyed by the keys as given.
    let asked: Vec<&str> = keys.iter().map(String::as_str).chain(["absent"]).collect();
    let found = prefixed.get_multi(&asked).await.unwrap();
    assert_eq!(found.hit_count(), 30);
    assert_eq!(found.get("k7").map(|i| &i.value[..]), Some(&b"v7"[..]));
    assert!(found.get("absent").is_none());
    // A key written whole by another client is read through the prefix;
    // delete and incr go behind it too.
    plain.set("app:n", "41", 0).await.unwrap();
    assert_eq!(prefixed.incr("n", 1).await.unwrap(), Some(42));
    prefixed.delete("n").await.unwrap();
    assert!(plain.get("app:n").await.unwrap().is_none());
    // The prefix counts toward memcached's 250 bytes: refused before any
    // byte is sent, the message naming the key as given and the prefix.
    let sets: u64 = servers.iter().map(|s| raw::stat(s.addr(), "cmd_set")).sum();
    let long = "x".repeat(247);
    let error = prefixed.set(&long, "v", 0).await.unwrap_err();
    assert!(error.is_invalid_key(), "{error}");
    let message = error.to_string();
    assert!(
        message.contains(r#"behind the key prefix "app:""#),
        "{message}"
    );
    assert!(message.contains("251 bytes"), "{message}");
    assert!(
        plain.set(&long, "v", 0).await.is_ok(),
        "247 bytes alone fit"
    );
    let after: u64 = servers.iter().map(|s| raw::stat(s.addr(), "cmd_set")).sum();
    assert_eq!(
        after,
        sets + 1,
        "only the plain client's set reached a server"
    );
    // The message counts a bad byte's offset in the key as given; an empty
    // key is refused too (it would be the prefix alone).
    let error = prefixed.set("a b", "v", 0).await.unwrap_err();
    assert!(error.to_string().contains("at offset 1"), "{error}");
    assert!(prefixed.set("", "v", 0).await.unwrap_err().is_invalid_key());
    // A binary key (b) would have memcached decode the prefix as base64.
    let error = prefixed
        .meta_get(b"\x00bin", &[memgroup::client::MetaFlag::Base64Key])
        .await
        .unwrap_err();
    assert!(
        error.to_string().contains("behind the key prefix"),
        "{error}"
    );
    // A description read again (a watched file, a server list) keeps the
    // prefix unless it names one: no key moves.
    prefixed
        .set_topology(memgroup::topology::ClusterSpec::parse_server_list(&list).unwrap())
        .unwrap();
    assert_eq!(prefixed.get("k7").await.unwrap().unwrap().value, &b"v7"[..]);
    // A prefix no key could start with is refused when the client is built.
    let bad = Client::builder()
        .servers(&list)
        .key_prefix("my app:")
        .build();
    assert!(
        bad.unwrap_err()
            .to_string()
            .contains("cannot go in front of keys")
    );
}

/// With several connections to a server, a request takes an idle one rather
/// than queueing behind another caller's on a busy one: the rotation alone
/// sent it to the busy connection here, while the other had nothing to do.
/// Seen from the stalled server's own sockets: two requests, one on each
/// connection; one request still goes to the server per call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_takes_an_idle_connection_over_a_busy_one() {
    bounded(async {
        let servers = [Memcached::spawn(), Memcached::spawn()];
        let client = Client::builder()
            .servers(&server_list(&servers))
            .hash(HashStrategy::Ketama)
            .pool_size(2)
            .failover(false)
            .timeout(Duration::from_secs(30))
            .build()
            .unwrap();
        let loc = locator(&servers, LocatorConfig::new(HashStrategy::Ketama));
        let on = |server: usize| {
            let loc = &loc;
            (0..)
                .map(|n| format!("idle:{n:04}"))
                .filter(move |k| loc.locate(k.as_bytes()) == server)
        };
        let (a, b) = {
            let mut keys = on(0);
            (keys.next().unwrap(), keys.next().unwrap())
        };
        let elsewhere = on(1).next().unwrap();
        client.connect_all().await.unwrap();
        let stalled = &servers[0];
        let gets_before = raw::stat(stalled.addr(), "cmd_get");
        stalled.stop();
        let get = |key: String| {
            let client = client.clone();
            tokio::spawn(async move { client.get(&key).await })
        };
        let first = get(a.clone());
        let sent = |key: &str| (format!("get {key}\r\n").len()) as u64;
        eventually("the first get to reach the stalled server", || {
            unread_bytes_at(stalled.addr()).iter().sum::<u64>() == sent(&a)
        })
        .await;
        // The next slot in turn goes to the other server, so the rotation
        // hands the next request to the stalled server the first one's slot.
        assert_eq!(client.get(&elsewhere).await.unwrap(), None);
        let second = get(b.clone());
        eventually("the second get to reach the stalled server", || {
            unread_bytes_at(stalled.addr()).iter().sum::<u64>() == sent(&a) + sent(&b)
        })
        .await;
        let mut waiting = unread_bytes_at(stalled.addr());
        waiting.sort_unstable();
        let mut expected = vec![sent(&a), sent(&b)];
        expected.sort_unstable();
        assert_eq!(
            waiting, expected,
            "one request on each connection, not both on one"
        );
        stalled.resume();
        assert_eq!(first.await.unwrap().unwrap(), None);
        assert_eq!(second.await.unwrap().unwrap(), None);
        assert_eq!(raw::stat(stalled.addr(), "cmd_get") - gets_before, 2);
    })
    .await;
}
