//! The near cache: hot keys (as memcached reports them) served from
//! process memory for a short TTL, dropped on this client's own writes.
//! Real memcached; tokio's clock held, so the TTL passes when the test says.

use std::time::Duration;

use memgroup::client::{Client, NearCache};

use crate::support::{HeldClock, Memcached, raw};

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn hot_keys_are_served_from_memory_until_their_ttl_or_a_write() {
    let _clock = HeldClock::hold();
    let server = Memcached::spawn();
    let client = Client::builder()
        .servers(&server.addr_string())
        .near_cache(NearCache::new(100, Duration::from_secs(2)).hot_within(Duration::from_secs(60)))
        .build()
        .unwrap();
    raw::set(server.addr(), b"k", b"v1");
    let gets = || raw::stat(server.addr(), "cmd_get");
    // First read: not hit before, so not hot; second: hot, kept.
    for _ in 0..2 {
        assert_eq!(&client.get("k").await.unwrap().unwrap().value[..], b"v1");
    }
    let before = gets();
    raw::set(server.addr(), b"k", b"v2");
    // Served from memory: the other writer's value is not seen yet.
    assert_eq!(&client.get("k").await.unwrap().unwrap().value[..], b"v1");
    assert_eq!(gets(), before, "no request for a near hit");
    let near = client.health().near_cache.unwrap();
    assert_eq!((near.hits, near.entries), (1, 1));
    // Past its TTL, the cluster is asked again.
    tokio::time::advance(Duration::from_secs(2)).await;
    assert_eq!(&client.get("k").await.unwrap().unwrap().value[..], b"v2");
    // Hot again; this client's own write drops it at once.
    assert_eq!(&client.get("k").await.unwrap().unwrap().value[..], b"v2");
    client.set("k", "mine", 0).await.unwrap();
    assert_eq!(&client.get("k").await.unwrap().unwrap().value[..], b"mine");
    // A lease stub of get_or_fill reads as a miss, not an empty value.
    let raw_client = Client::builder()
        .servers(&server.addr_string())
        .build()
        .unwrap();
    raw_client
        .meta_get("filling", &[memgroup::client::MetaFlag::Vivify(30)])
        .await
        .unwrap();
    assert_eq!(client.get("filling").await.unwrap(), None);
    // So it does to a client without the near cache, single or multi,
    // while other clients' classic `get` sees an empty value.
    assert_eq!(raw_client.get("filling").await.unwrap(), None);
    raw::set(server.addr(), b"empty", b"");
    let found = raw_client.get_multi(&["filling", "empty"]).await.unwrap();
    assert_eq!(found.get("filling"), None);
    assert_eq!(found.get("empty").map(|i| i.value.len()), Some(0));
    assert_eq!(raw::get(server.addr(), b"filling"), Some(Vec::new()));
}
