//! Batch writes: `set_multi`, `delete_multi`, `touch_multi` — every key in
//! every group, one quiet meta batch per connection, each key's outcome of
//! its own. Every copy read on the servers themselves.

use crate::support::{raw, two_zones};

fn keys(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("batch:{i}")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_writes_every_key_in_every_group_and_reports_each() {
    let (sg1, sg2, client) = two_zones(|b| b);
    let names = keys(50);
    let items: Vec<(String, String)> = names
        .iter()
        .map(|k| (k.clone(), format!("v-{k}")))
        .collect();
    let written = client.set_multi(&items, 300).await.unwrap();
    assert!(written.is_complete());
    assert_eq!(written.keys.len(), 50);
    for (key, value) in &items {
        for server in [&sg1, &sg2] {
            let (copy, _, ttl) = raw::copy(server.addr(), key.as_bytes()).expect("stored");
            assert_eq!(copy, value.as_bytes());
            // memcached's clock moves in whole seconds and, on a loaded
            // machine, can lag and then jump: a few seconds of slack.
            assert!((295..=300).contains(&ttl), "{ttl}");
        }
        let outcome = written.outcome(key).unwrap().as_ref().unwrap();
        assert!(outcome.is_complete(), "{outcome:?}");
    }
    // One `ms` per key per server: nothing sent twice.
    assert_eq!(raw::stat(sg1.addr(), "cmd_set"), 50);
    assert_eq!(raw::stat(sg2.addr(), "cmd_set"), 50);

    let touched = client.touch_multi(&names[..10], 60).await.unwrap();
    assert!(touched.is_complete());
    let (_, _, ttl) = raw::copy(sg2.addr(), names[0].as_bytes()).unwrap();
    // 60 s now, not the set's 300 (slack as above).
    assert!((55..=60).contains(&ttl), "{ttl}");

    // Deleted everywhere; an absent key is not applied, and no error.
    let mut gone = names[..20].to_vec();
    gone.push("batch:absent".into());
    let deleted = client.delete_multi(&gone).await.unwrap();
    assert!(deleted.is_complete());
    for key in &names[..20] {
        assert_eq!(raw::get(sg1.addr(), key.as_bytes()), None);
        assert_eq!(raw::get(sg2.addr(), key.as_bytes()), None);
        assert!(deleted.outcome(key).unwrap().as_ref().unwrap().applied());
    }
    let absent = deleted.outcome("batch:absent").unwrap().as_ref().unwrap();
    assert!(!absent.applied());
    assert!(
        raw::get(sg1.addr(), names[20].as_bytes()).is_some(),
        "not in the batch"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_key_refuses_the_batch_and_a_dead_group_is_repaired() {
    let (sg1, mut sg2, client) = two_zones(|b| b);
    let refused = client
        .set_multi(&[("ok", "v"), ("bad key", "v")], 0)
        .await
        .unwrap_err();
    assert!(refused.is_invalid_key(), "{refused}");
    assert_eq!(raw::stat(sg1.addr(), "cmd_set"), 0, "nothing sent");
    sg2.kill();
    let items: Vec<(String, &str)> = keys(10).into_iter().map(|k| (k, "v")).collect();
    let written = client.set_multi(&items, 0).await.unwrap();
    // The local group took every key; the dead one owes a repair per key.
    for (key, _) in &items {
        assert_eq!(
            raw::get(sg1.addr(), key.as_bytes()).as_deref(),
            Some(&b"v"[..])
        );
        let outcome = written.outcome(key).unwrap().as_ref().unwrap();
        assert_eq!(outcome.failed().count(), 1, "{outcome:?}");
    }
    assert_eq!(client.health().repairs.pending, 10);
}

/// A batch's first write after a server died fails over too, key by key,
/// as a single write does: no connection to the dead server could be
/// opened, so its keys go to the servers failover picks; each written once,
/// and the dead server owes a repair per key. Without failover those keys
/// fail and nothing of them lands elsewhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_after_a_server_died_fails_over_key_by_key() {
    use memgroup::client::Client;
    use memgroup::hash::HashStrategy;

    use crate::support::{Memcached, server_list};

    let mut servers: Vec<Memcached> = (0..3).map(|_| Memcached::spawn()).collect();
    let list = server_list(&servers);
    servers[0].kill();
    let client = |failover| {
        Client::builder()
            .servers(&list)
            .hash(HashStrategy::NewCompat)
            .failover(failover)
            .build()
            .unwrap()
    };
    let items: Vec<(String, String)> = keys(60).into_iter().map(|k| (k.clone(), k)).collect();
    let strict = client(false).set_multi(&items, 0).await.unwrap();
    let lost = strict.errors().count();
    assert!(lost > 5 && lost < 60, "{lost} keys on the dead server");
    let live = |stat| raw::stat(servers[1].addr(), stat) + raw::stat(servers[2].addr(), stat);
    assert_eq!(live("cmd_set"), (60 - lost) as u64);

    let client = client(true);
    let written = client.set_multi(&items, 0).await.unwrap();
    assert!(written.is_complete(), "{:?}", written.errors().next());
    for (key, value) in &items {
        let found = servers[1..]
            .iter()
            .filter_map(|s| raw::get(s.addr(), key.as_bytes()))
            .collect::<Vec<_>>();
        assert_eq!(found, [value.as_bytes()], "{key}: one copy");
    }
    // Each key written once more: nothing sent twice.
    assert_eq!(live("cmd_set"), (60 - lost + 60) as u64);
    assert_eq!(client.health().repairs.pending, lost);
}
