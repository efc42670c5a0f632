//! EVCache's hashed keys on every path, not only `get` and `set` of one
//! group: a zone whose copy under the digest is another key's falls back to
//! the next zone (as EVCache's reads do), `get_or_fill` leases under the
//! digest, a meta read's size and flags are the value's inside the
//! envelope, the envelope's size is what the limit checks, and settings that
//! cannot hold together are refused. Real memcached; every copy read on the
//! servers.

use memgroup::client::evcache::{EvcacheHashAlgorithm, EvcacheKeyHash, EvcacheKeys};
use memgroup::client::value::ValueFormat;
use memgroup::client::{
    Client, ClientBuilder, ErrorKind, Fill, Freshness, Hedge, MetaFlag, MetaStatus,
};
use memgroup::hash::HashStrategy;

use crate::support::{HeldClock, Memcached, let_io_happen, memgroup, raw, server_list, two_zones};

/// One base64 character of MD5: keys collide quickly.
fn tiny() -> EvcacheKeys {
    EvcacheKeys::every_key(EvcacheKeyHash::new(EvcacheHashAlgorithm::Md5).max_hash_length(1))
}

/// Two keys with the same digest under `keys`.
fn colliding(keys: EvcacheKeys) -> (String, String, String) {
    let first = "collide:0".to_string();
    let wire = keys.wire_key(first.as_bytes()).unwrap();
    let other = (1..)
        .map(|i| format!("collide:{i}"))
        .find(|k| keys.wire_key(k.as_bytes()).unwrap() == wire)
        .unwrap();
    (first, other, wire)
}

/// One memcached, and a client of it with tiny hashed keys.
fn one_server() -> ([Memcached; 1], Client) {
    let servers = [Memcached::spawn()];
    let client = alone(&servers[0]);
    (servers, client)
}

fn builder(keys: EvcacheKeys) -> ClientBuilder {
    evcache(Client::builder(), keys)
}

/// `b` with EVCache's hashing, value format and hashed keys `keys`.
fn evcache(b: ClientBuilder, keys: EvcacheKeys) -> ClientBuilder {
    b.hash(HashStrategy::Ketama)
        .value_format(ValueFormat::evcache())
        .evcache_keys(keys)
}

/// A client of `server` alone, with tiny hashed keys.
fn alone(server: &Memcached) -> Client {
    builder(tiny())
        .servers(&server_list(std::slice::from_ref(server)))
        .build()
        .unwrap()
}

/// The local zone holds another key's envelope under the digest (a
/// collision): the read goes on to the next zone, which holds this key's
/// value, for `get` and `get_multi`; the local zone's copy is left alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collision_in_the_local_zone_falls_back_to_the_next() {
    // No hedging: the walk from sg1 to sg2 is what is checked.
    let (sg1, sg2, client) = two_zones(|b| evcache(b, tiny()).hedge(Hedge::off()));
    let (first, other, wire) = colliding(tiny());
    client.set(&first, "first's", 0).await.unwrap();
    // Its convergence check done first: a change of the digest's copy while
    // it runs is, on the wire, a second writer of the key (it converges).
    crate::support::background_done(&client).await;
    // Only sg1 then gets the other key's value under the same digest.
    let sg1_only = alone(&sg1);
    sg1_only.set(&other, "other's", 0).await.unwrap();
    assert_eq!(
        sg1_only.get(&first).await.unwrap(),
        None,
        "sg1 alone: a collision"
    );
    let hit = client.get(&first).await.unwrap().expect("sg2's copy");
    assert_eq!(hit.value, "first's");
    let found = client.get_multi(&[&first, &other]).await.unwrap();
    assert_eq!(found.get(&first).unwrap().value, "first's");
    assert_eq!(found.get(&other).unwrap().value, "other's");
    let (sg1_copy, _, _) = raw::copy(sg1.addr(), wire.as_bytes()).unwrap();
    let (sg2_copy, _, _) = raw::copy(sg2.addr(), wire.as_bytes()).unwrap();
    assert_ne!(sg1_copy, sg2_copy, "sg1's copy is another key's, untouched");
}

/// `get_or_fill` on a hashed key: the lease and the filled value live under
/// the digest, the value in its envelope (what Java reads); the next call is
/// served from the cache. Where the digest holds another key's value, the
/// fill's value is returned and nothing is written over it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_or_fill_leases_and_fills_under_the_digest() {
    let (servers, client) = one_server();
    let (first, other, wire) = colliding(tiny());
    let fill = |value: &'static str| move || async move { Ok::<_, std::io::Error>(value) };
    let filled = client
        .get_or_fill(&first, 300, fill("filled"))
        .await
        .unwrap();
    assert_eq!(
        (&filled.item.value[..], filled.freshness),
        (&b"filled"[..], Freshness::Filled)
    );
    let (stored, flags, ttl) = raw::copy(servers[0].addr(), wire.as_bytes()).unwrap();
    assert_eq!(
        (flags, &stored[..2]),
        (1, &[0xAC, 0xED][..]),
        "an EVCacheValue"
    );
    assert!((290..=300).contains(&ttl), "the fill's TTL: {ttl}");
    let cached = client
        .get_or_fill(&first, 300, fill("again"))
        .await
        .unwrap();
    assert_eq!(
        (&cached.item.value[..], cached.freshness),
        (&b"filled"[..], Freshness::Cached)
    );
    assert_eq!(client.get(&first).await.unwrap().unwrap().value, "filled");
    let collided = client
        .get_or_fill(&other, 300, fill("other's"))
        .await
        .unwrap();
    assert_eq!(
        (&collided.item.value[..], collided.freshness),
        (&b"other's"[..], Freshness::Filled)
    );
    assert_eq!(
        raw::copy(servers[0].addr(), wire.as_bytes()).unwrap().0,
        stored,
        "the first key's envelope stays"
    );
}

/// A meta read without the value (`mg k s f`) answers with the size and
/// client flags of the value inside the envelope, not the envelope's, and
/// `k` with the key asked for, not its digest; the
/// size limit applies to the envelope, the size the server stores.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn meta_sizes_and_flags_are_the_values_and_the_limit_the_envelopes() {
    let (servers, client) = one_server();
    client
        .set(
            "sized",
            "abcde",
            memgroup::client::WriteOptions::new().flags(7),
        )
        .await
        .unwrap();
    let meta = client
        .meta_get("sized", &[MetaFlag::ReturnSize, MetaFlag::ReturnFlags])
        .await
        .unwrap()
        .unwrap();
    assert_eq!(meta.status, MetaStatus::Hd);
    assert_eq!(
        (meta.flag_u64(b's'), meta.flag_u64(b'f')),
        (Some(5), Some(7))
    );
    assert_eq!(meta.value, None);
    let size_only = client
        .meta_get("sized", &[MetaFlag::ReturnSize])
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&size_only.flags[..], b"s5", "no flags asked, none returned");
    // The key returned is the one asked for, not its digest.
    for flags in [
        &[
            MetaFlag::ReturnKey,
            MetaFlag::ReturnValue,
            MetaFlag::ReturnSize,
        ][..],
        &[MetaFlag::ReturnSize, MetaFlag::ReturnKey][..],
    ] {
        let keyed = client.meta_get("sized", flags).await.unwrap().unwrap();
        assert_eq!(keyed.flag(b'k'), Some(&b"sized"[..]), "{flags:?}");
        assert_eq!(keyed.flag_u64(b's'), Some(5), "the size inside: {flags:?}");
    }
    let limited = builder(tiny())
        .servers(&server_list(&servers))
        .max_value_size(100)
        .build()
        .unwrap();
    let refused = limited.set("big", vec![b'v'; 95], 0).await.unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::ValueTooLarge, "{refused}");
    assert!(refused.to_string().contains("envelope"), "{refused}");
    let wire = tiny().wire_key(b"big").unwrap();
    assert!(raw::copy(servers[0].addr(), wire.as_bytes()).is_none());
}

/// Settings that cannot hold together are refused, and a flag picks the key
/// scheme over the file's: `sanitize_keys` with hashed keys (EVCache hashes
/// keys as given) fails `build`; `--long-keys` over a cluster.toml with
/// `[evcache_keys]` stores under memgroup's own digest key.
#[test]
fn conflicting_key_settings_are_refused_or_the_flag_wins() {
    let refused = builder(tiny())
        .servers("127.0.0.1:1")
        .sanitize_keys(true)
        .build()
        .unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::Config, "{refused}");
    assert!(refused.to_string().contains("sanitize_keys"), "{refused}");
    let server = Memcached::spawn();
    let addr = server.addr_string();
    let dir = crate::support::tempdir::Dir::new("evcache-paths");
    let file = dir.path().join("cluster.toml");
    std::fs::write(
        &file,
        format!("[evcache_keys]\nhash_key = true\n\n[[groups]]\nname = \"sg1\"\nservers = [\"{addr}\"]\n"),
    )
    .unwrap();
    let file = file.to_string_lossy().into_owned();
    let long = "k".repeat(300);
    let out = memgroup(&["--config", &file, "--long-keys", "--json", "route", &long]);
    assert!(out.status.success(), "{out:?}");
    let route = String::from_utf8_lossy(&out.stdout);
    assert!(
        route.contains("\"wire_key\":\"mglk:"),
        "memgroup's digest key: {route}"
    );
}

/// `get_or_fill` gives back what is not its own: a stale value of another
/// key under the digest hands this caller the refill (`W`), which goes back
/// so that key's own caller refills it; a filled value whose envelope is
/// over the size limit fails the fill and releases the lease at once, so
/// the next caller fills without waiting out the lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_or_fill_gives_back_leases_it_cannot_use() {
    let (servers, client) = one_server();
    let (first, other, _) = colliding(tiny());
    let fill = |value: &'static str| move || async move { Ok::<_, std::io::Error>(value) };
    client.set(&other, "other's", 0).await.unwrap();
    client.invalidate(&other, 30).await.unwrap();
    let uncached = client
        .get_or_fill(&first, 300, fill("first's"))
        .await
        .unwrap();
    assert_eq!(uncached.item.value, "first's", "served, not cached");
    let refilled = client
        .get_or_fill(&other, 300, fill("other's again"))
        .await
        .unwrap();
    assert_eq!(
        (&refilled.item.value[..], refilled.freshness),
        (&b"other's again"[..], Freshness::Filled),
        "the win went back to the other key's callers"
    );
    // A lease asked with meta_get (N, at the arbiter of two zones) on the
    // same digest gives the win back as well.
    let (_sg1, _sg2, zones) = two_zones(|b| evcache(b, tiny()).hedge(Hedge::off()));
    zones.set(&other, "other's", 0).await.unwrap();
    crate::support::background_done(&zones).await;
    zones.invalidate(&other, 30).await.unwrap();
    crate::support::background_done(&zones).await;
    let leased = [
        MetaFlag::ReturnValue,
        MetaFlag::ReturnCas,
        MetaFlag::Vivify(30),
    ];
    assert_eq!(zones.meta_get(&first, &leased).await.unwrap(), None);
    let refilled_there = zones
        .get_or_fill(&other, 300, fill("other's, zones"))
        .await
        .unwrap();
    assert_eq!(
        refilled_there.freshness,
        Freshness::Filled,
        "the win went back"
    );
    // A won refresh of an envelope holding an empty value, given back when
    // its fill fails: judged as stored (a value, not a stub), so the value
    // stays, where a stub would be deleted.
    // (A key whose one-character digest no other key here shares.)
    let taken = [tiny().wire_key(first.as_bytes()), tiny().wire_key(b"big")];
    let empty = (0..)
        .map(|i| format!("empty:{i}"))
        .find(|k| !taken.contains(&tiny().wire_key(k.as_bytes())))
        .unwrap();
    client.set(&empty, "", 100).await.unwrap();
    let refresh = Fill::new(300).refresh_before(std::time::Duration::from_secs(200));
    let failed = client
        .get_or_fill(&empty, refresh, || async {
            Err::<&str, _>(std::io::Error::other("backend down"))
        })
        .await
        .unwrap_err();
    assert_eq!(failed.kind(), ErrorKind::Fill, "{failed}");
    let wire = tiny().wire_key(empty.as_bytes()).unwrap();
    assert!(
        raw::copy(servers[0].addr(), wire.as_bytes()).is_some(),
        "the value stays"
    );
    let limited = builder(tiny())
        .servers(&server_list(&servers))
        .max_value_size(300)
        .build()
        .unwrap();
    let quick = Fill::new(300).wait(std::time::Duration::from_millis(500));
    // 280 bytes: under the limit, its envelope (about 450) over it.
    let big = vec![b'v'; 280];
    let refused = limited
        .get_or_fill(
            "big",
            quick,
            move || async move { Ok::<_, std::io::Error>(big) },
        )
        .await
        .unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::ValueTooLarge, "{refused}");
    let next = limited
        .get_or_fill("big", quick, fill("small"))
        .await
        .unwrap();
    assert_eq!(
        (&next.item.value[..], next.freshness),
        (&b"small"[..], Freshness::Filled),
        "the lease was released"
    );
}

/// A hedged `get` whose hedge answers first with another key's value under
/// the digest takes that for no hit: it waits for the first group's answer,
/// which holds this key's (the first server answers before the stall watch
/// looks again). A real memcached stalled by SIGSTOP; tokio's clock held by
/// the test.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_hedge_answering_with_a_collision_is_no_hit() {
    let _clock = HeldClock::hold();
    const TIMEOUT: std::time::Duration = std::time::Duration::from_millis(300);
    let (sg1, sg2, client) = two_zones(|b| {
        evcache(b, tiny())
            .timeout(TIMEOUT)
            .hedge(Hedge::new(std::time::Duration::from_millis(5), 1.0))
    });
    let (first, other, _) = colliding(tiny());
    client.set(&first, "first's", 0).await.unwrap();
    crate::support::background_done(&client).await;
    let sg2_only = alone(&sg2);
    sg2_only.set(&other, "other's", 0).await.unwrap();
    sg1.stop();
    // A first read waits out its timeout on the stalled server: the next
    // one sees it stalled and is hedged at once.
    let (_, ()) = tokio::join!(client.get(&first), async {
        let_io_happen().await;
        tokio::time::advance(TIMEOUT).await;
    });
    let (hit, ()) = tokio::join!(client.get(&first), async {
        let_io_happen().await;
        sg1.resume();
    });
    assert_eq!(client.health().hedged_reads, 1, "the read was hedged");
    assert_eq!(
        hit.unwrap()
            .expect("sg1's answer, not the hedge's collision")
            .value,
        "first's"
    );
}
