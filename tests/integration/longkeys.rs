//! Long keys against real memcached: a 1,000-byte key stores and reads
//! (single and multi-key) under its digest key; two keys forced to collide
//! (a test digest) never return each other's value; commands that would
//! change a value without its envelope are refused before anything is sent.

use std::sync::Arc;

use memgroup::client::{Client, KeyDigest, LongKeys};

use crate::support::{Memcached, raw};

#[tokio::test]
async fn a_thousand_byte_key_stores_and_reads() {
    let server = Memcached::spawn();
    let plain = Client::builder()
        .servers(&server.addr_string())
        .unwrap()
        .build()
        .unwrap();
    let long_key = "k".repeat(1000);
    assert!(plain.get(&long_key).await.unwrap_err().is_invalid_key());

    let client = Client::builder()
        .servers(&server.addr_string())
        .unwrap()
        .long_keys(LongKeys::default())
        .build()
        .unwrap();
    client.set(&long_key, "long value", 0).await.unwrap();
    assert_eq!(
        client.get(&long_key).await.unwrap().unwrap().value,
        "long value"
    );
    let other = format!("{long_key}-2");
    client.set(&other, "second", 0).await.unwrap();
    let both = client
        .get_multi(&[&long_key, &other, &"short".to_string()])
        .await
        .unwrap();
    assert_eq!(both[long_key.as_bytes()].value, "long value");
    assert_eq!(both[other.as_bytes()].value, "second");
    // Short keys are untouched: stored as they are.
    client.set("short", "plain", 0).await.unwrap();
    assert_eq!(
        raw::get(server.addr(), b"short").as_deref(),
        Some(&b"plain"[..])
    );
    // Whole-value commands only.
    let error = client.append(&long_key, "more").await.unwrap_err();
    assert!(
        error.kind() == memgroup::client::ErrorKind::InvalidArgument,
        "{error:?}"
    );
    assert!(
        client.incr(&long_key, 1).await.unwrap_err().kind()
            == memgroup::client::ErrorKind::InvalidArgument
    );
    assert!(client.delete(&long_key).await.unwrap().applied());
    assert!(client.get(&long_key).await.unwrap().is_none());
}

#[tokio::test]
async fn colliding_long_keys_never_return_each_others_value() {
    let server = Memcached::spawn();
    let collide = KeyDigest::Custom(Arc::new(|_: &[u8]| b"same".to_vec()));
    let client = Client::builder()
        .servers(&server.addr_string())
        .unwrap()
        .long_keys(LongKeys::default().max_len(10).digest(collide))
        .build()
        .unwrap();
    let (first, second) = ("a-long-key-number-1", "a-long-key-number-2");
    client.set(first, "one", 0).await.unwrap();
    assert_eq!(client.get(first).await.unwrap().unwrap().value, "one");
    // The same digest key: the second overwrites the first's copy.
    client.set(second, "two", 0).await.unwrap();
    assert_eq!(client.get(second).await.unwrap().unwrap().value, "two");
    assert!(
        client.get(first).await.unwrap().is_none(),
        "another key's value"
    );
    let got = client.get_multi(&[first, second]).await.unwrap();
    assert_eq!(got.hit_count(), 1);
    assert_eq!(got[second.as_bytes()].value, "two");
    // Short keys beside them are plain.
    client.set("short", "s", 0).await.unwrap();
    assert_eq!(client.get("short").await.unwrap().unwrap().value, "s");
}
