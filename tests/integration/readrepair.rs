//! Read repair and the consistent read: groups a read found out of line
//! brought back in line. Real memcached; tokio's clock held by the test;
//! every copy (value, flags, remaining TTL) read on the servers themselves.

use std::time::Duration;

use memgroup::client::Client;

use crate::support::{HeldClock, Memcached, TICK, advance_until, raw, two_zones};

const TIMEOUT: Duration = Duration::from_millis(300);

/// A hit in `sg2` after a miss in `sg1` is added to `sg1` with its flags and
/// remaining TTL, for `get` and `get_multi`; without read repair nothing is
/// copied.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_fallback_hit_is_added_where_it_missed_with_its_ttl() {
    let _clock = HeldClock::hold();
    let (sg1, sg2, client) = two_zones(|b| b.read_repair(true).timeout(TIMEOUT));
    let groups = format!("sg1={};sg2={}", sg1.addr_string(), sg2.addr_string());
    let plain = Client::builder()
        .evcache_groups(&groups)
        .zone("sg1")
        .build()
        .unwrap();
    raw::set_with(sg2.addr(), b"k", b"v", 5, 100);
    // Read repair off: the hit is served, nothing copied.
    let item = plain.get("k").await.unwrap().unwrap();
    assert_eq!((&item.value[..], item.flags), (&b"v"[..], 5));
    advance_until(3 * TICK, || plain.health().background_writes == 0).await;
    assert_eq!(raw::get(sg1.addr(), b"k"), None);
    assert_eq!(plain.health().read_repairs, 0);

    let item = client.get("k").await.unwrap().unwrap();
    assert_eq!((&item.value[..], item.flags), (&b"v"[..], 5));
    advance_until(3 * TICK, || client.health().read_repairs == 1).await;
    let (value, flags, ttl) = raw::copy(sg1.addr(), b"k").expect("copied into sg1");
    assert_eq!((&value[..], flags), (&b"v"[..], 5));
    assert!((98..=100).contains(&ttl), "remaining TTL copied: {ttl}");

    // A multi-get repairs each key that missed, and only those.
    raw::set(sg2.addr(), b"m1", b"one");
    raw::set(sg2.addr(), b"m2", b"two");
    raw::set(sg1.addr(), b"m3", b"three");
    let found = client.get_multi(&["m1", "m2", "m3", "none"]).await.unwrap();
    assert_eq!(found.hit_count(), 3);
    advance_until(3 * TICK, || client.health().read_repairs == 3).await;
    assert_eq!(raw::get(sg1.addr(), b"m1").as_deref(), Some(&b"one"[..]));
    assert_eq!(raw::get(sg1.addr(), b"m2").as_deref(), Some(&b"two"[..]));
    assert_eq!(
        raw::get(sg2.addr(), b"m3"),
        None,
        "a local hit copies nothing"
    );
    assert_eq!(client.health().read_repairs, 3);
    client.close(Duration::ZERO).await.unwrap();
}

/// A write of the key that starts after the read, before its repair ran,
/// cancels the repair: no `add` reaches the group that missed.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_write_after_the_read_cancels_its_repair() {
    let _clock = HeldClock::hold();
    let (sg1, sg2, client) = two_zones(|b| b.read_repair(true).timeout(TIMEOUT));
    raw::set(sg2.addr(), b"k", b"old");
    assert!(client.get("k").await.unwrap().is_some());
    // The repair's task has not run yet (one thread): this set starts first.
    client.set("k", "new", 0).await.unwrap();
    advance_until(3 * TICK, || client.health().background_writes == 0).await;
    assert_eq!(raw::stat(sg1.addr(), "cmd_set"), 1, "only the set, no add");
    assert_eq!(client.health().read_repairs, 0);
    assert_eq!(raw::get(sg1.addr(), b"k").as_deref(), Some(&b"new"[..]));
    assert_eq!(raw::get(sg2.addr(), b"k").as_deref(), Some(&b"new"[..]));
}

/// A copy awaiting a repair is never read, so never copied: a delete that
/// timed out on a stalled `sg2`, whose late copy lands while its repair is
/// pending, leaves `sg1` empty however often the key is read.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_copy_awaiting_a_repair_is_never_copied() {
    let _clock = HeldClock::hold();
    let (sg1, sg2, client) = two_zones(|b| {
        b.read_repair(true)
            .timeout(TIMEOUT)
            .backoff(Duration::from_secs(1), Duration::from_secs(8))
            .repair_grace(Duration::from_secs(1))
    });
    client.set("k", "v1", 0).await.unwrap();
    advance_until(3 * TICK, || client.health().background_writes == 0).await;
    sg2.stop();
    client.delete("k").await.unwrap();
    tokio::time::advance(TIMEOUT).await;
    advance_until(3 * TICK, || client.health().repairs.pending == 1).await;
    sg2.resume();
    advance_until(3 * TICK, || raw::get(sg2.addr(), b"k").is_none()).await;
    assert_eq!(
        client.health().repairs.pending,
        1,
        "the confirming delete is due"
    );
    raw::set(sg2.addr(), b"k", b"late");
    for _ in 0..3 {
        assert_eq!(client.get("k").await.unwrap(), None);
    }
    advance_until(3 * TICK, || client.health().background_writes == 0).await;
    assert_eq!(raw::get(sg1.addr(), b"k"), None);
    assert_eq!(client.health().read_repairs, 0);
}

/// Three groups of one server each, `sg1` the client's zone and arbiter.
fn three_zones() -> ([Memcached; 3], Client) {
    let servers = [Memcached::spawn(), Memcached::spawn(), Memcached::spawn()];
    let groups = format!(
        "sg1={};sg2={};sg3={}",
        servers[0].addr_string(),
        servers[1].addr_string(),
        servers[2].addr_string()
    );
    let client = Client::builder()
        .evcache_groups(&groups)
        .zone("sg1")
        .timeout(TIMEOUT)
        .build()
        .unwrap();
    (servers, client)
}

/// A consistent read returns what a majority of the groups holds — even
/// when the local group is the one out of line — and repairs the others: a
/// differing copy is deleted, an absent one filled with the TTL left.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_consistent_read_returns_the_majority_and_repairs_the_minority() {
    let _clock = HeldClock::hold();
    let ([sg1, sg2, sg3], client) = three_zones();
    client.set("k", "v", 100).await.unwrap();
    advance_until(3 * TICK, || client.health().background_writes == 0).await;
    let item = client.get_consistent("k").await.unwrap().unwrap();
    assert_eq!(&item.value[..], b"v");
    assert_eq!(client.health().read_repairs, 0, "all agree: nothing to do");

    // The local group holds another value: the majority's wins, the copy goes.
    raw::set(sg1.addr(), b"k", b"stray");
    assert_eq!(&client.get("k").await.unwrap().unwrap().value[..], b"stray");
    let item = client.get_consistent("k").await.unwrap().unwrap();
    assert_eq!(&item.value[..], b"v");
    advance_until(3 * TICK, || raw::get(sg1.addr(), b"k").is_none()).await;
    assert_eq!(client.health().read_repairs, 1);

    // Absent in two groups: the majority says absent, the last copy goes too.
    raw::delete(sg2.addr(), b"k");
    assert_eq!(client.get_consistent("k").await.unwrap(), None);
    advance_until(3 * TICK, || raw::get(sg3.addr(), b"k").is_none()).await;
    assert_eq!(client.health().read_repairs, 2);

    // Absent in one group: filled with the majority's value and TTL.
    raw::set_with(sg2.addr(), b"j", b"w", 9, 100);
    raw::set_with(sg3.addr(), b"j", b"w", 9, 100);
    let item = client.get_consistent("j").await.unwrap().unwrap();
    assert_eq!((&item.value[..], item.flags), (&b"w"[..], 9));
    advance_until(3 * TICK, || raw::get(sg1.addr(), b"j").is_some()).await;
    let (value, flags, ttl) = raw::copy(sg1.addr(), b"j").unwrap();
    assert_eq!((&value[..], flags), (&b"w"[..], 9));
    assert!((98..=100).contains(&ttl), "{ttl}");
    advance_until(3 * TICK, || client.health().read_repairs == 3).await;
    client.close(Duration::from_secs(1)).await.unwrap();
}

/// Two groups that differ: the arbiter's copy (`sg1`, first by name) wins,
/// whichever zone reads.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn two_groups_that_differ_agree_on_the_arbiters_copy() {
    let _clock = HeldClock::hold();
    let (sg1, sg2, local) = two_zones(|b| b.timeout(TIMEOUT));
    let groups = format!("sg1={};sg2={}", sg1.addr_string(), sg2.addr_string());
    let far = Client::builder()
        .evcache_groups(&groups)
        .zone("sg2")
        .timeout(TIMEOUT)
        .build()
        .unwrap();
    raw::set(sg1.addr(), b"k", b"arbiter");
    raw::set(sg2.addr(), b"k", b"other");
    let item = far.get_consistent("k").await.unwrap().unwrap();
    assert_eq!(&item.value[..], b"arbiter");
    advance_until(3 * TICK, || raw::get(sg2.addr(), b"k").is_none()).await;
    assert_eq!(
        &local.get_consistent("k").await.unwrap().unwrap().value[..],
        b"arbiter"
    );
    // The arbiter without the key: absent wins, the other copy goes.
    raw::set(sg2.addr(), b"k", b"other");
    raw::delete(sg1.addr(), b"k");
    assert_eq!(local.get_consistent("k").await.unwrap(), None);
    advance_until(3 * TICK, || raw::get(sg2.addr(), b"k").is_none()).await;
}

/// Read repair follows the arbiter as writes do: a hit in a group that is
/// not the arbiter is copied only into groups that include the arbiter
/// (there, with the arbiter missing it, it becomes the arbiter's copy);
/// into the rest alone it would spread a value the arbiter may disagree
/// with.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn read_repair_copies_nothing_the_arbiter_may_disagree_with() {
    let _clock = HeldClock::hold();
    let (sg1, sg2, sg3) = (Memcached::spawn(), Memcached::spawn(), Memcached::spawn());
    // The arbiter is sg1; this client reads sg3, then sg1 (the arbiter is
    // the first fallback), then sg2.
    let groups = format!(
        "sg3={};sg2={};sg1={}",
        sg3.addr_string(),
        sg2.addr_string(),
        sg1.addr_string()
    );
    let client = Client::builder()
        .evcache_groups(&groups)
        .zone("sg3")
        .read_fallback(memgroup::topology::ReadFallback::AllCopies)
        .read_repair(true)
        .timeout(TIMEOUT)
        .build()
        .unwrap();
    raw::set(sg2.addr(), b"k", b"sg2's");
    raw::set(sg1.addr(), b"k", b"the arbiter's");
    // The arbiter's copy is copied where it missed.
    let item = client.get("k").await.unwrap().unwrap();
    assert_eq!(item.value, "the arbiter's");
    advance_until(3 * TICK, || client.health().background_writes == 0).await;
    assert_eq!(
        raw::get(sg3.addr(), b"k").as_deref(),
        Some(&b"the arbiter's"[..])
    );
    // The arbiter stalled: the read passes it for sg2, whose value is not
    // copied into sg3.
    raw::delete(sg3.addr(), b"k");
    sg1.stop();
    let (item, ()) = tokio::join!(client.get("k"), async {
        crate::support::let_io_happen().await;
        tokio::time::advance(TIMEOUT).await;
    });
    assert_eq!(item.unwrap().unwrap().value, "sg2's");
    advance_until(3 * TICK, || client.health().background_writes == 0).await;
    assert_eq!(raw::get(sg3.addr(), b"k"), None, "sg2's value spread");
    sg1.resume();
    client.close(Duration::ZERO).await.unwrap();
}

/// The consistent read's fill follows the arbiter too: the majority's
/// value is added where it was absent, and deleted again if the arbiter's
/// copy it agreed with was replaced meanwhile (another process's write),
/// so no group is left holding the older value beside the arbiter's new.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_consistent_reads_fill_is_undone_when_the_arbiter_moved_on() {
    let _clock = HeldClock::hold();
    let ([sg1, sg2, sg3], client) = three_zones();
    for server in [&sg1, &sg2] {
        raw::set(server.addr(), b"k", b"v");
    }
    let item = client.get_consistent("k").await.unwrap().unwrap();
    assert_eq!(&item.value[..], b"v");
    // Another process writes the arbiter before the fill runs.
    raw::set(sg1.addr(), b"k", b"new");
    advance_until(3 * TICK, || client.health().background_writes == 0).await;
    assert_eq!(raw::get(sg3.addr(), b"k"), None, "the older value stayed");
    assert_eq!(raw::get(sg1.addr(), b"k").as_deref(), Some(&b"new"[..]));
    client.close(Duration::from_secs(1)).await.unwrap();
}
