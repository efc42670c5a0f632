//! What memgroup reports is what is in the cluster: each test checks an
//! answer of the library or the tool against the servers themselves.

use std::time::{Duration, SystemTime};

use memgroup::client::{Client, Expiry, MetaFlag, WriteOptions};

use crate::support::Memcached;

/// The TTL memcached itself reports for `key` (`mg key t`): -1 for none.
async fn server_ttl(client: &Client, key: &str) -> Option<i64> {
    client
        .meta_get(key, &[MetaFlag::ReturnTtl])
        .await
        .unwrap()
        .and_then(|m| m.ttl())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expiry_over_thirty_days_keeps_the_item_that_long() {
    let server = Memcached::spawn();
    let client = Client::builder()
        .servers(&server.addr_string())
        .unwrap()
        .build()
        .unwrap();
    const FORTY_DAYS: i64 = 40 * 86_400;
    // The same 40 days three ways: seconds, a Duration, options.
    client.set("secs", "v", FORTY_DAYS as u32).await.unwrap();
    let forty = Duration::from_secs(FORTY_DAYS as u64);
    client.set("duration", "v", forty).await.unwrap();
    let options = WriteOptions::new().expiry(forty).flags(7);
    client.set("options", "v", options).await.unwrap();
    for key in ["secs", "duration", "options"] {
        let ttl = server_ttl(&client, key).await.expect("stored, not expired");
        assert!(
            (FORTY_DAYS - 5..=FORTY_DAYS + 2).contains(&ttl),
            "{key}: the server holds it for {ttl} s"
        );
    }
    assert_eq!(client.get("options").await.unwrap().unwrap().flags, 7);
    // touch and gat take the same expiry.
    client
        .touch("secs", Duration::from_secs(31 * 86_400))
        .await
        .unwrap();
    let ttl = server_ttl(&client, "secs").await.unwrap();
    assert!((31 * 86_400 - 5..=31 * 86_400 + 2).contains(&ttl), "{ttl}");
    client
        .get_and_touch("duration", Expiry::Never)
        .await
        .unwrap();
    assert_eq!(server_ttl(&client, "duration").await, Some(-1));
    // An absolute time: in the future kept until then, in the past refused
    // before anything is sent.
    let at = SystemTime::now() + Duration::from_secs(3600);
    client.set("at", "v", at).await.unwrap();
    let ttl = server_ttl(&client, "at").await.unwrap();
    assert!((3590..=3602).contains(&ttl), "{ttl}");
    let past = SystemTime::now() - Duration::from_secs(10);
    let error = client.set("past", "v", past).await.unwrap_err();
    assert_eq!(error.kind(), memgroup::client::ErrorKind::InvalidArgument);
    assert!(client.get("past").await.unwrap().is_none());
}
