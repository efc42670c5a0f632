//! Reads that do not wait on a slow server: hedged `get`s within their
//! budget, and the read queue's fast-fail. A real memcached stalled by
//! SIGSTOP; tokio's clock held by the test, so "at once" means no clock time
//! passed.

use std::time::Duration;

use memgroup::client::{Client, Hedge};

use crate::support::{HeldClock, Memcached, let_io_happen, two_zones};

const TIMEOUT: Duration = Duration::from_millis(300);
const DELAY: Duration = Duration::from_millis(5);

/// Groups `sg1` (the client's zone) and `sg2` of one server each, every key
/// written to both.
async fn cluster(
    configure: impl FnOnce(memgroup::client::ClientBuilder) -> memgroup::client::ClientBuilder,
) -> (Memcached, Memcached, Client) {
    let (sg1, sg2, client) = two_zones(|b| {
        configure(
            b.timeout(TIMEOUT)
                .write_wait(memgroup::client::WriteWait::AllGroups),
        )
    });
    for i in 0..20 {
        client
            .set(format!("k{i}"), format!("v{i}"), 0)
            .await
            .unwrap();
    }
    // The writes' convergence checks are done: nothing else waits on a
    // server when a test stalls it.
    crate::support::background_done(&client).await;
    (sg1, sg2, client)
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn gets_from_a_stalled_server_are_hedged_to_the_next_group_within_their_budget() {
    let _clock = HeldClock::hold();
    let (sg1, _sg2, client) = cluster(|b| b.hedge(Hedge::new(DELAY, 0.10))).await;
    sg1.stop();
    // Nothing said the server was stalled when the first get was sent: the
    // stall watch finds its request waiting with nothing answered after
    // the hedge delay, and the hedge goes out then, not at its timeout.
    let started = tokio::time::Instant::now();
    let item = get_stepping_the_clock(&client, "k0").await.unwrap();
    assert_eq!(item.value, "v0");
    let took = started.elapsed();
    assert!(took <= 2 * DELAY, "{took:?}");
    assert_eq!(client.health().hedged_reads, 1);
    // Its request has waited longer than the delay with nothing answered:
    // the next gets are hedged at once. A burst of 10 hedges and a tenth of
    // one earned per read: 10 more of them.
    for i in 1..11 {
        let started = tokio::time::Instant::now();
        let item = client.get(format!("k{i}")).await.unwrap().unwrap();
        assert_eq!(item.value, format!("v{i}").as_bytes());
        assert_eq!(started.elapsed(), Duration::ZERO, "read {i}");
    }
    assert_eq!(client.health().hedged_reads, 11);
    // The budget is spent: the next get passes the stalled server over for
    // sg2 at once, without a second request.
    let started = tokio::time::Instant::now();
    let item = client.get("k11").await.unwrap().unwrap();
    assert_eq!(item.value, "v11");
    assert_eq!(started.elapsed(), Duration::ZERO);
    assert_eq!(client.health().hedged_reads, 11);
    tokio::time::advance(TIMEOUT).await;
    // The hedged gets' requests to the stalled server ran on: their
    // timeouts counted, and it is down.
    let_io_happen().await;
    let status = client.health();
    let stalled = status
        .servers
        .iter()
        .find(|s| s.server == sg1.addr_string())
        .unwrap();
    assert!(stalled.counters.timeouts >= 3, "{:?}", stalled.counters);
    assert!(matches!(
        stalled.state,
        memgroup::client::ServerState::Dead { .. }
    ));
}

/// `client.get(key)` while the clock moves a hedge delay at a time.
async fn get_stepping_the_clock(client: &Client, key: &str) -> Option<memgroup::client::Item> {
    stepping_the_clock(client.get(key)).await.unwrap()
}

/// `client.get(key)` while `server` is stopped: it waits ten hedge delays
/// unanswered (a fifth of the timeout, long past the watch's second look),
/// then `server` resumes; its answer.
async fn get_answered_once_resumed(
    client: &Client,
    server: &Memcached,
    key: &str,
) -> Result<Option<memgroup::client::Item>, memgroup::client::Error> {
    let mut get = std::pin::pin!(client.get(key));
    for _ in 0..10 {
        tokio::select! {
            biased;
            item = &mut get => panic!("answered while the server is stopped: {item:?}"),
            () = let_io_happen() => tokio::time::advance(DELAY).await,
        }
    }
    server.resume();
    stepping_the_clock(get).await
}

/// `read`'s output, the clock moving a hedge delay at a time meanwhile.
async fn stepping_the_clock<T>(read: impl std::future::Future<Output = T>) -> T {
    let mut read = std::pin::pin!(read);
    loop {
        tokio::select! {
            biased;
            out = &mut read => break out,
            () = let_io_happen() => tokio::time::advance(DELAY).await,
        }
    }
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_miss_from_the_hedge_waits_for_no_stalled_server() {
    let _clock = HeldClock::hold();
    let (sg1, _sg2, client) = cluster(|b| b.hedge(Hedge::new(DELAY, 0.10))).await;
    sg1.stop();
    // The get waits on the stalled sg1 until the stall watch says so; its
    // hedge to sg2 answers that it has no such key: the miss stands, the
    // stalled server passed over.
    let started = tokio::time::Instant::now();
    assert!(get_stepping_the_clock(&client, "absent").await.is_none());
    assert!(started.elapsed() < TIMEOUT, "{:?}", started.elapsed());
    assert_eq!(client.health().hedged_reads, 1);
}

/// Groups `sg1` (the client's zone), `sg2` and `sg3` of one server each,
/// read with every copy as a fallback, keys `k0`..`k4` written to each.
async fn three_groups(
    configure: impl FnOnce(memgroup::client::ClientBuilder) -> memgroup::client::ClientBuilder,
) -> ([Memcached; 3], Client) {
    let servers = [Memcached::spawn(), Memcached::spawn(), Memcached::spawn()];
    let groups = format!(
        "sg1={};sg2={};sg3={}",
        servers[0].addr_string(),
        servers[1].addr_string(),
        servers[2].addr_string()
    );
    let client = configure(
        Client::builder()
            .evcache_groups(&groups)
            .zone("sg1")
            .read_fallback(memgroup::client::ReadFallback::AllCopies)
            .timeout(TIMEOUT)
            .write_wait(memgroup::client::WriteWait::AllGroups)
            .hedge(Hedge::new(DELAY, 0.10)),
    )
    .build()
    .unwrap();
    for i in 0..5 {
        client
            .set(format!("k{i}"), format!("v{i}"), 0)
            .await
            .unwrap();
    }
    crate::support::background_done(&client).await;
    (servers, client)
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_fallback_to_a_stalled_server_is_hedged_to_the_next_group() {
    let _clock = HeldClock::hold();
    let ([mut sg1, sg2, _sg3], client) = three_groups(|b| b).await;
    // The local group's server is gone (no answer: a failure, not a miss)
    // and sg2's stalled: a read falling back there is hedged to sg3 once
    // the stall watch says so (or at once, sg2 looking stalled), and waits
    // out no timeout.
    sg1.kill();
    sg2.stop();
    for i in 0..5 {
        let started = tokio::time::Instant::now();
        let item = get_stepping_the_clock(&client, &format!("k{i}")).await;
        assert_eq!(item.unwrap().value, format!("v{i}").as_bytes());
        assert!(
            started.elapsed() < TIMEOUT,
            "read {i}: {:?}",
            started.elapsed()
        );
    }
}

/// A hedge that fails (its group's server killed) leaves the stalled first
/// server passed over at the stall watch's next look when the key's walk
/// has a group left: the read goes on there, and waits out no timeout.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_failed_hedge_passes_a_stalled_server_over_when_a_group_is_left() {
    let _clock = HeldClock::hold();
    // sg2, the arbiter, is the first fallback: the hedge goes there.
    let ([sg1, mut sg2, _sg3], client) = three_groups(|b| b.arbiter("sg2")).await;
    sg1.stop();
    sg2.kill();
    let started = tokio::time::Instant::now();
    let item = get_stepping_the_clock(&client, "k0").await;
    assert_eq!(item.unwrap().value, &b"v0"[..]);
    assert!(started.elapsed() < TIMEOUT, "{:?}", started.elapsed());
    assert_eq!(client.health().hedged_reads, 1);
}

/// With no group left after a failed hedge, the stalled first server is
/// the last to ask: the read waits for it, and it answers once resumed.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_failed_hedge_leaves_the_last_candidate_waited_for() {
    let _clock = HeldClock::hold();
    let (sg1, mut sg2, client) = cluster(|b| b.hedge(Hedge::new(DELAY, 0.10))).await;
    sg1.stop();
    sg2.kill();
    let item = get_answered_once_resumed(&client, &sg1, "k0").await;
    assert_eq!(item.unwrap().unwrap().value, &b"v0"[..]);
}

/// A meta get that only reads (a proxy's `mg key v t`, say) is hedged as a
/// `get` is; one that touches the item (`T`) is not: it waits out the
/// timeout, then falls back.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_meta_get_that_only_reads_is_hedged() {
    use memgroup::client::MetaFlag;
    let _clock = HeldClock::hold();
    let (sg1, _sg2, client) = cluster(|b| b.hedge(Hedge::new(DELAY, 0.10))).await;
    sg1.stop();
    let started = tokio::time::Instant::now();
    let flags = [MetaFlag::ReturnValue, MetaFlag::ReturnTtl];
    let reply = stepping_the_clock(client.meta_get("k0", &flags)).await;
    let reply = reply.unwrap().expect("a hit");
    assert_eq!(&reply.value.unwrap()[..], b"v0");
    assert!(started.elapsed() < TIMEOUT, "{:?}", started.elapsed());
    assert_eq!(client.health().hedged_reads, 1);

    let started = tokio::time::Instant::now();
    let touch = [MetaFlag::ReturnValue, MetaFlag::Ttl(60)];
    let reply = stepping_the_clock(client.meta_get("k1", &touch)).await;
    assert!(reply.unwrap().is_some());
    assert!(started.elapsed() >= TIMEOUT, "{:?}", started.elapsed());
    assert_eq!(client.health().hedged_reads, 1, "the touch is not hedged");
}

/// A multi-key get's fallback after a miss passes a stalled server over at
/// once, as a single get's does: the misses stand.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_multi_get_fallback_after_a_miss_passes_a_stalled_server_over() {
    let _clock = HeldClock::hold();
    let (_sg1, sg2, client) = cluster(|b| b.hedge(Hedge::new(DELAY, 0.10))).await;
    sg2.stop();
    // A get that misses in sg1 waits on sg2 until the watch finds it
    // stalled; its request runs on, so sg2 looks stalled from then on.
    assert!(get_stepping_the_clock(&client, "absent").await.is_none());
    let keys: Vec<String> = (0..10).map(|i| format!("absent{i}")).collect();
    let started = tokio::time::Instant::now();
    let got = stepping_the_clock(client.get_multi(&keys)).await.unwrap();
    assert_eq!(started.elapsed(), Duration::ZERO);
    assert_eq!(got.hit_count(), 0);
    assert_eq!(got.errors().count(), 0, "misses, not errors");
}

/// A get whose server already looks stalled when it is sent (a write has
/// waited on it, and no get started the stall watch) hedges at once; its
/// hedge's miss then waits for the watch's next look, not the timeout:
/// the hedge starts the watch.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_hedge_sent_at_once_starts_the_stall_watch() {
    let _clock = HeldClock::hold();
    let (sg1, _sg2, client) = cluster(|b| b.hedge(Hedge::new(DELAY, 0.10))).await;
    sg1.stop();
    let write = tokio::spawn({
        let client = client.clone();
        async move { client.set("k0", "new", 0).await }
    });
    for _ in 0..2 {
        let_io_happen().await;
        tokio::time::advance(DELAY).await;
    }
    let started = tokio::time::Instant::now();
    assert!(get_stepping_the_clock(&client, "absent").await.is_none());
    assert!(started.elapsed() < TIMEOUT, "{:?}", started.elapsed());
    assert_eq!(client.health().hedged_reads, 1);
    let _ = stepping_the_clock(write).await;
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_miss_waits_for_no_stalled_fallback() {
    let _clock = HeldClock::hold();
    let (_sg1, sg2, client) = cluster(|b| b.hedge(Hedge::new(DELAY, 0.10))).await;
    sg2.stop();
    // sg1 answers that it has no such key; the fallback to sg2 then waits
    // on a server that stopped answering, until the stall watch says so:
    // sg1's miss stands, and nothing waits out the timeout.
    let started = tokio::time::Instant::now();
    assert!(get_stepping_the_clock(&client, "absent").await.is_none());
    assert!(started.elapsed() < TIMEOUT, "{:?}", started.elapsed());
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_get_hedged_while_waiting_leaves_a_request_whose_timeout_counts() {
    let _clock = HeldClock::hold();
    let (sg1, _sg2, client) = cluster(|b| b.hedge(Hedge::new(DELAY, 0.10))).await;
    sg1.stop();
    let started = tokio::time::Instant::now();
    assert_eq!(
        get_stepping_the_clock(&client, "k0").await.unwrap().value,
        "v0"
    );
    assert!(started.elapsed() < TIMEOUT);
    assert_eq!(client.health().hedged_reads, 1);
    // Its request to the stalled server times out, and counts towards
    // marking it down (one of the three in a row).
    tokio::time::advance(TIMEOUT).await;
    let_io_happen().await;
    let status = client.health();
    let stalled = status
        .servers
        .iter()
        .find(|s| s.server == sg1.addr_string())
        .unwrap();
    assert_eq!(stalled.counters.timeouts, 1, "{:?}", stalled.counters);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn gets_waiting_past_the_budget_are_passed_over_when_their_server_stalls() {
    let _clock = HeldClock::hold();
    let (sg1, sg2, client) = cluster(|b| b.hedge(Hedge::new(DELAY, 0.10))).await;
    sg1.stop();
    // Twelve gets wait on the stalled server, sent before anything said it
    // was: the budget's burst hedges ten, the other two go to sg2 without
    // a second request. None waits out its timeout.
    let sg2_gets = crate::support::raw::stat(sg2.addr(), "cmd_get");
    let started = tokio::time::Instant::now();
    let mut gets = std::pin::pin!(spawned_gets(&client, 12));
    let items = loop {
        tokio::select! {
            biased;
            items = &mut gets => break items,
            () = let_io_happen() => tokio::time::advance(DELAY).await,
        }
    };
    assert!(started.elapsed() < TIMEOUT, "{:?}", started.elapsed());
    for (i, item) in items.into_iter().enumerate() {
        assert_eq!(item.unwrap().unwrap().value, format!("v{i}").as_bytes());
    }
    assert_eq!(client.health().hedged_reads, 10);
    let asked = crate::support::raw::stat(sg2.addr(), "cmd_get") - sg2_gets;
    assert_eq!(asked, 12);
}

/// Past the budget a stalled first server is still waited for when the key
/// has no other target left (the other group's server died meanwhile): it
/// is the last to ask, and answers once resumed.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn past_the_budget_the_last_candidate_is_still_waited_for() {
    let _clock = HeldClock::hold();
    let (sg1, mut sg2, client) = cluster(|b| b.hedge(Hedge::new(DELAY, 0.001))).await;
    sg1.stop();
    // The burst goes on ten hedges to sg2.
    let items = stepping_the_clock(spawned_gets(&client, 10)).await;
    assert!(items.iter().all(|i| matches!(i, Ok(Some(_)))), "{items:?}");
    assert_eq!(client.health().hedged_reads, 10);
    // sg2 dies, and a read finds out (its batch skips the stalled sg1).
    sg2.kill();
    let _ = client.get_multi(&["k10", "k11"]).await;
    let item = get_answered_once_resumed(&client, &sg1, "k12").await;
    assert_eq!(item.unwrap().unwrap().value, &b"v12"[..]);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_server_stalled_for_one_look_is_not_passed_over() {
    let _clock = HeldClock::hold();
    let (sg1, sg2, client) = cluster(|b| b.hedge(Hedge::new(DELAY, 0.10))).await;
    sg1.stop();
    let sg2_gets = crate::support::raw::stat(sg2.addr(), "cmd_get");
    let gets = tokio::spawn({
        let client = client.clone();
        async move { spawned_gets(&client, 12).await }
    });
    // Two hedge delays: the stall watch finds sg1 stalled, ten gets hedge
    // and two, past the budget, wait for one look more...
    for _ in 0..2 {
        let_io_happen().await;
        tokio::time::advance(DELAY).await;
    }
    let_io_happen().await;
    // ...which never comes: sg1 answers them first.
    sg1.resume();
    let items = gets.await.unwrap();
    for (i, item) in items.into_iter().enumerate() {
        assert_eq!(item.unwrap().unwrap().value, format!("v{i}").as_bytes());
    }
    assert_eq!(client.health().hedged_reads, 10);
    let asked = crate::support::raw::stat(sg2.addr(), "cmd_get") - sg2_gets;
    assert_eq!(asked, 10, "only the hedges went to sg2");
}

/// Gets of `k0`..`k{n-1}`, each on a task of its own, in order.
async fn spawned_gets(
    client: &Client,
    n: usize,
) -> Vec<Result<Option<memgroup::client::Item>, memgroup::client::Error>> {
    let mut gets: Vec<_> = (0..n)
        .map(|i| {
            let client = client.clone();
            tokio::spawn(async move { client.get(format!("k{i}")).await })
        })
        .collect();
    let mut items = Vec::new();
    for get in gets.drain(..) {
        items.push(get.await.unwrap());
    }
    items
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_server_that_keeps_answering_is_not_hedged() {
    let _clock = HeldClock::hold();
    let (_sg1, _sg2, client) = cluster(|b| b.hedge(Hedge::new(DELAY, 0.10))).await;
    // Idle between reads far longer than the delay: still no hedge.
    for i in 0..20 {
        assert!(client.get(format!("k{i}")).await.unwrap().is_some());
        tokio::time::advance(Duration::from_millis(50)).await;
    }
    assert_eq!(client.health().hedged_reads, 0);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_server_over_the_read_queue_bound_is_passed_over_at_once() {
    let _clock = HeldClock::hold();
    let (sg1, _sg2, client) = cluster(|b| b.hedge(Hedge::off()).max_read_queue(3)).await;
    sg1.stop();
    // Three reads wait on the stalled server...
    let waiting: Vec<_> = (0..3)
        .map(|i| {
            let client = client.clone();
            tokio::spawn(async move { client.get(format!("k{i}")).await })
        })
        .collect();
    let_io_happen().await;
    // ...so the fourth passes it over for the next group, with no time passing.
    let started = tokio::time::Instant::now();
    let item = client.get("k3").await.unwrap().unwrap();
    assert_eq!(item.value, "v3");
    assert_eq!(started.elapsed(), Duration::ZERO);
    assert!(waiting.iter().all(|w| !w.is_finished()));
    // Once they time out (and fall back), reads go to it again.
    tokio::time::advance(TIMEOUT).await;
    for w in waiting {
        let_io_happen().await;
        assert!(w.await.unwrap().unwrap().is_some());
    }
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_multi_get_batch_for_a_stalled_server_goes_to_the_next_group_at_once() {
    let _clock = HeldClock::hold();
    let (sg1, sg2, client) = cluster(|b| b.hedge(Hedge::new(DELAY, 0.10))).await;
    sg1.stop();
    // One get waits on it (hedged or timed out, it is answered): from then
    // on the server looks stalled.
    let (first, ()) = tokio::join!(client.get("k0"), async {
        let_io_happen().await;
        tokio::time::advance(TIMEOUT).await;
    });
    assert!(first.unwrap().is_some());
    let hedged = client.health().hedged_reads;
    let sg2_hits = crate::support::raw::stat(sg2.addr(), "get_hits");
    let keys: Vec<String> = (1..20).map(|i| format!("k{i}")).collect();
    let started = tokio::time::Instant::now();
    let got = client.get_multi(&keys).await.unwrap();
    assert_eq!(started.elapsed(), Duration::ZERO);
    assert_eq!(got.hit_count(), keys.len());
    // Every key came from sg2, and no batch was hedged (sent twice).
    let served = crate::support::raw::stat(sg2.addr(), "get_hits") - sg2_hits;
    assert_eq!(served, keys.len() as u64);
    assert_eq!(client.health().hedged_reads, hedged);
}
