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
        .build()
        .unwrap();
    let long_key = "k".repeat(1000);
    assert!(plain.get(&long_key).await.unwrap_err().is_invalid_key());
    // `check_key` says so without sending anything, as each request would.
    assert!(plain.check_key(&long_key).unwrap_err().is_invalid_key());
    assert!(plain.check_key("bad key").unwrap_err().is_invalid_key());
    assert!(plain.check_key("k".repeat(250)).is_ok());

    let client = Client::builder()
        .servers(&server.addr_string())
        .long_keys(LongKeys::default())
        .build()
        .unwrap();
    assert!(client.check_key(&long_key).is_ok());
    assert!(client.check_key("bad key").unwrap_err().is_invalid_key());
    // Nothing so far reached the server: refused reads and checks alike.
    assert_eq!(raw::stat(server.addr(), "cmd_get"), 0);
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

/// The tool reads and writes long keys as a service using the library's
/// long keys does: with `--long-keys`, or `long_keys = true` (and its
/// prefix) in cluster.toml. Without, a long key is refused before anything
/// is sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tool_shares_long_keys_with_services() {
    use crate::support::memgroup;
    let server = Memcached::spawn();
    let addr = server.addr_string();
    let service = |long_keys: LongKeys| {
        Client::builder()
            .servers(&addr)
            .long_keys(long_keys)
            .build()
            .unwrap()
    };
    let long_key = "u".repeat(400);
    service(LongKeys::default())
        .set(&long_key, "from the service", 0)
        .await
        .unwrap();
    let out = memgroup(&["--servers", &addr, "--long-keys", "get", &long_key]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(out.stdout, b"from the service");
    // `route` shows the digest key the value lives under.
    let out = memgroup(&[
        "--servers",
        &addr,
        "--long-keys",
        "--json",
        "route",
        &long_key,
    ]);
    assert!(out.status.success(), "{out:?}");
    let routed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let digest = LongKeys::default().digest_key(long_key.as_bytes()).unwrap();
    assert_eq!(
        routed[0]["wire_key"],
        String::from_utf8(digest.clone()).unwrap()
    );
    assert!(raw::get(server.addr(), &digest).is_some());
    let refused = memgroup(&["--servers", &addr, "route", &long_key]);
    assert_eq!(refused.status.code(), Some(2), "{refused:?}");
    // A usage error, as for `route` (it was exit 1 before every command
    // checked its keys first).
    let refused = memgroup(&["--servers", &addr, "get", &long_key]);
    assert_eq!(refused.status.code(), Some(2), "{refused:?}");
    assert!(String::from_utf8_lossy(&refused.stderr).contains("the limit is 250"));

    // The file's own prefix and limit, as the service configured them.
    let tuned = LongKeys::default().max_len(100).prefix("lk:");
    let medium_key = "m".repeat(150);
    let dir = crate::support::tempdir::Dir::new("longkeys");
    let file = dir.path().join("cluster.toml");
    std::fs::write(
        &file,
        format!(
            "long_keys = true\nlong_keys_max_len = 100\nlong_keys_prefix = \"lk:\"\n[[groups]]\nname = \"sg1\"\nservers = [\"{addr}\"]\n"
        ),
    )
    .unwrap();
    let file = file.to_string_lossy().into_owned();
    let out = memgroup(&["--config", &file, "set", &medium_key, "from the tool"]);
    assert!(out.status.success(), "{out:?}");
    let read = service(tuned).get(&medium_key).await.unwrap().unwrap();
    assert_eq!(read.value, "from the tool");
    // Stored under the prefix's digest key, not under the key itself.
    assert_eq!(raw::get(server.addr(), medium_key.as_bytes()), None);
    let config = memgroup(&["--config", &file, "config"]);
    let shown = String::from_utf8_lossy(&config.stdout).into_owned();
    let line = shown.lines().find(|l| l.starts_with("long_keys")).unwrap();
    assert!(line.contains("keys over 100 bytes as lk:<md5>"), "{line}");
}
