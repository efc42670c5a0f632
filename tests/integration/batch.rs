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
            assert!((299..=300).contains(&ttl), "{ttl}");
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
    assert!((59..=60).contains(&ttl), "{ttl}");

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
    assert_eq!(client.status().repairs.pending, 10);
}
