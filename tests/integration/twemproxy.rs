//! Servers without memcached's meta protocol: the library and the tool
//! through a real twemproxy (Debian `nutcracker`) in front of real
//! memcached. twemproxy closes the connection on `mn`, `mg` and `gat`, as
//! memcached 1.4/1.5 answer `ERROR`: each server is asked once, and what
//! the client would send as a meta command goes as its classic form, or
//! fails with one error naming the server and what it lacks. Every copy is
//! read on the memcached behind the proxy.

use std::time::Duration;

use memgroup::client::{Client, ErrorKind, MetaFlag, MetaProtocol, ServerState};
use memgroup_testkit::Twemproxy;

use crate::support::{Memcached, memgroup, raw};

fn through(proxy: &Twemproxy, meta: MetaProtocol) -> Client {
    Client::builder()
        .servers(&proxy.addr_string())
        .meta_protocol(meta)
        .timeout(Duration::from_secs(2))
        .build()
        .unwrap()
}

#[tokio::test]
async fn the_library_reads_writes_and_deletes_through_twemproxy() {
    let server = Memcached::spawn();
    let proxy = Twemproxy::spawn(&[&server]);
    let client = through(&proxy, MetaProtocol::Detect);
    assert!(client.set("k1", "v1", 300).await.unwrap().is_complete());
    assert_eq!(raw::get(server.addr(), b"k1").as_deref(), Some(&b"v1"[..]));
    assert_eq!(client.get("k1").await.unwrap().unwrap().value, "v1");
    // The read that tells stale from fresh (the tool's `get`) is an `mg`:
    // here a `gets`.
    let read = client.get_with_freshness("k1").await.unwrap().unwrap();
    assert_eq!(read.item.value, "v1");
    let meta = client
        .meta_get(
            "k1",
            &[
                MetaFlag::ReturnValue,
                MetaFlag::ReturnFlags,
                MetaFlag::ReturnKey,
            ],
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(meta.value.as_deref(), Some(&b"v1"[..]));
    assert_eq!(meta.fields().key.as_deref(), Some(&b"k1"[..]));
    let item = client.gets("k1").await.unwrap().unwrap();
    let cas = item.cas.unwrap();
    assert!(client.cas("k1", "v2", cas, 300).await.unwrap().applied());
    assert!(
        !client.cas("k1", "v3", cas, 300).await.unwrap().applied(),
        "the old CAS is refused"
    );
    assert!(client.touch("k1", 600).await.unwrap().applied());
    client.set("n", "41", 0).await.unwrap();
    assert_eq!(client.incr("n", 1).await.unwrap(), Some(42));
    // The batch writes go as single commands, pipelined.
    let items: Vec<(String, String)> = (0..20)
        .map(|i| (format!("b{i}"), format!("v{i}")))
        .collect();
    let written = client.set_multi(&items, 300).await.unwrap();
    assert!(written.is_complete(), "{written:?}");
    for (key, value) in &items {
        assert_eq!(
            raw::get(server.addr(), key.as_bytes()).as_deref(),
            Some(value.as_bytes())
        );
    }
    let got = client.get_multi(&["b0", "b7", "nope"]).await.unwrap();
    assert_eq!(got.get("b7").unwrap().value, "v7");
    let keys: Vec<&str> = items.iter().map(|(k, _)| k.as_str()).collect();
    assert!(client.delete_multi(&keys).await.unwrap().is_complete());
    assert!(client.delete("k1").await.unwrap().applied());
    for key in keys.iter().chain(&["k1"]) {
        assert_eq!(raw::get(server.addr(), key.as_bytes()), None, "{key}");
    }

    // What has no classic form fails with one error naming the server and
    // what it lacks, and the server stays up: nothing failed.
    let lease = client
        .get_or_fill("leased", 300, || async { Ok::<_, std::io::Error>("x") })
        .await
        .unwrap_err();
    assert_eq!(lease.kind(), ErrorKind::Unsupported, "{lease}");
    let text = lease.to_string();
    assert!(
        text.contains("meta protocol") && text.contains(&proxy.addr_string()),
        "{text}"
    );
    assert!(text.contains("leases"), "{text}");
    let stale = client.invalidate("b1", 30).await.unwrap_err();
    assert_eq!(stale.kind(), ErrorKind::Unsupported, "{stale}");
    let status = client.health();
    let proxy_status = &status.servers[0];
    assert_eq!(proxy_status.meta_protocol, Some(false));
    assert_eq!(proxy_status.failures, 0, "{proxy_status:?}");
    assert!(matches!(proxy_status.state, ServerState::Up));
    assert!(
        client
            .set("after", "still", 60)
            .await
            .unwrap()
            .is_complete()
    );
}

#[tokio::test]
async fn the_answer_is_asked_once_and_a_setting_can_give_it() {
    let server = Memcached::spawn();
    let proxy = Twemproxy::spawn(&[&server]);
    // Straight to memcached 1.6: yes.
    let direct = Client::builder()
        .servers(&server.addr_string())
        .build()
        .unwrap();
    direct.set("k", "v", 0).await.unwrap();
    assert_eq!(direct.health().servers[0].meta_protocol, Some(true));
    // twemproxy's own count of connections it closed on a request it does
    // not know (aggregated every 100 ms).
    let closed = || proxy.stat("client_err").unwrap();
    let settled = || std::thread::sleep(Duration::from_millis(350));
    settled();
    assert_eq!(closed(), 0);
    // Declared: no `mn` is sent, so twemproxy closes nothing.
    let never = through(&proxy, MetaProtocol::Never);
    never.set("k", "w", 0).await.unwrap();
    assert_eq!(
        never
            .get_with_freshness("k")
            .await
            .unwrap()
            .unwrap()
            .item
            .value,
        "w"
    );
    assert_eq!(never.health().servers[0].meta_protocol, Some(false));
    settled();
    assert_eq!(closed(), 0, "a declared answer asks nothing");
    // Asked: the first connection is closed by the question and opened
    // again; the pool's two other connections (and every later one) do not
    // ask.
    let pooled = Client::builder()
        .servers(&proxy.addr_string())
        .pool_size(3)
        .connect()
        .await
        .unwrap();
    for i in 0..30 {
        pooled.set(format!("p{i}"), "x", 0).await.unwrap();
        assert_eq!(
            pooled.get(format!("p{i}")).await.unwrap().unwrap().value,
            "x"
        );
    }
    assert_eq!(pooled.health().servers[0].failures, 0);
    assert_eq!(pooled.health().servers[0].connections, 3);
    settled();
    assert_eq!(closed(), 1, "asked once for the server, not per connection");
}

#[test]
fn the_tool_reads_writes_and_deletes_through_twemproxy() {
    let server = Memcached::spawn();
    let proxy = Twemproxy::spawn(&[&server]);
    let at = proxy.addr_string();
    let with = |args: &[&'static str]| {
        let mut all = vec!["--servers", at.as_str()];
        all.extend_from_slice(args);
        memgroup(&all)
    };
    let run = |args: &[&'static str]| {
        let out = with(args);
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    run(&["set", "greeting", "hello"]);
    assert_eq!(
        raw::get(server.addr(), b"greeting").as_deref(),
        Some(&b"hello"[..])
    );
    assert_eq!(run(&["get", "greeting"]), "hello");
    run(&["delete", "greeting"]);
    assert_eq!(raw::get(server.addr(), b"greeting"), None);
    // A lease is one line naming what the server lacks, exit 1.
    let out = with(&["mg", "greeting", "v", "N30"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("meta protocol") && stderr.contains("leases") && stderr.contains(&at),
        "{stderr}"
    );
}

#[tokio::test]
async fn a_peer_that_answers_the_question_wrongly_or_not_at_all_is_a_typed_error() {
    use std::io::Write;
    let garbage = crate::support::fault_peer_raw(|_, conn| {
        let _ = conn.write_all(b"HELLO there\r\n");
        true
    });
    let silent = crate::support::fault_peer_raw(|_, _| true);
    let client = |at: &str| {
        Client::builder()
            .servers(at)
            .connect_timeout(Duration::from_millis(300))
            .timeout(Duration::from_secs(2))
            .build()
            .unwrap()
    };
    let error = client(&garbage).get("k").await.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Protocol, "{error}");
    assert!(
        error.to_string().contains("mn") && error.to_string().contains(&garbage),
        "{error}"
    );
    let error = client(&silent).get("k").await.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Timeout, "{error}");
    assert!(error.to_string().contains("did not answer mn"), "{error}");
}
