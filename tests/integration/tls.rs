//! TLS with real memcached (`-Z`, certificates made at test time by the
//! testkit's `Pki`): server-only TLS works for single and multi-key reads and
//! writes; a wrong CA or server name, a missing client certificate, a
//! plaintext client on a TLS port and a TLS client on a plaintext port are
//! clear errors within the timeout; mutual TLS works; a restarted server is
//! handshaked with again; more than 16 KB of requests in flight do not stall.

use std::time::{Duration, Instant};

use memgroup::client::{Client, ClientBuilder, IfPresent, TlsConfig};
use memgroup_testkit::Pki;

use memgroup::client::Credentials;

use crate::support::{HeldClock, Memcached, memgroup_ok, metadump_lists, unacked_bytes_to};

fn builder(server: &Memcached) -> ClientBuilder {
    Client::builder()
        .servers(&server.addr_string())
        .timeout(Duration::from_secs(2))
        .connect_timeout(Duration::from_secs(2))
}

fn trusting(pki: &Pki) -> TlsConfig {
    TlsConfig::ca_file(pki.ca()).unwrap()
}

#[tokio::test]
async fn server_only_tls_carries_every_operation() {
    let pki = Pki::new();
    let server = Memcached::spawn_tls(&pki, false, &[]);
    let client = builder(&server).tls(trusting(&pki)).build().unwrap();
    client.set("greeting", "hello over tls", 0).await.unwrap();
    let item = client.get("greeting").await.unwrap().expect("stored");
    assert_eq!(&item.value[..], b"hello over tls");
    let keys: Vec<String> = (0..200).map(|i| format!("k{i}")).collect();
    for key in &keys {
        client.set(key, key.as_bytes(), 0).await.unwrap();
    }
    let got = client.get_multi(&keys).await.unwrap();
    assert_eq!(got.hit_count(), keys.len());
    for (key, item) in got.hits() {
        assert_eq!(key, &item.value[..]);
    }
    // A large value, over several TLS records.
    let big = vec![b'x'; 900 * 1024];
    client.set("big", &big[..], 0).await.unwrap();
    assert_eq!(
        client.get("big").await.unwrap().unwrap().value.len(),
        big.len()
    );
}

/// The error of the first read on a client that cannot get in (a write's
/// error is the write policy's, with this as its source).
async fn first_error(client: &Client) -> memgroup::client::Error {
    let started = std::time::Instant::now();
    let error = client.get("k").await.expect_err("must not get in");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
    error
}

#[tokio::test]
async fn a_certificate_from_the_wrong_authority_or_for_another_name_is_refused() {
    let pki = Pki::new();
    let server = Memcached::spawn_tls(&pki, false, &[]);
    let wrong_ca = TlsConfig::ca_file(pki.other_ca()).unwrap();
    let client = builder(&server).tls(wrong_ca).build().unwrap();
    let error = first_error(&client).await;
    assert!(error.is_tls(), "{error:?}");
    let text = error.to_string();
    assert!(text.contains("TLS handshake failed"), "{text}");
    assert!(text.contains("certificate"), "{text}");
    assert!(text.contains(&server.addr_string()), "{text}");

    let other_name = trusting(&pki).server_name("cache.example.com");
    let client = builder(&server).tls(other_name).build().unwrap();
    let error = first_error(&client).await;
    assert!(error.is_tls(), "{error:?}");
    assert!(error.to_string().contains("certificate"), "{error}");

    // The certificate's own name, instead of the address, is accepted.
    let by_name = trusting(&pki).server_name("localhost");
    let client = builder(&server).tls(by_name).build().unwrap();
    client.set("k", "v", 0).await.unwrap();
}

#[tokio::test]
async fn a_server_requiring_client_certificates_refuses_clients_without_one() {
    let pki = Pki::new();
    let server = Memcached::spawn_tls(&pki, true, &[]);
    let client = builder(&server).tls(trusting(&pki)).build().unwrap();
    let error = first_error(&client).await;
    // Under TLS 1.3 the refusal is an alert after the handshake.
    assert!(error.is_tls(), "{error:?}");
    assert!(error.to_string().contains("alert"), "{error}");

    let mutual = trusting(&pki)
        .client_cert_files(pki.client_cert(), pki.client_key())
        .unwrap();
    let client = builder(&server).tls(mutual).build().unwrap();
    client.set("k", "mutual", 0).await.unwrap();
    assert_eq!(client.get("k").await.unwrap().unwrap().value, "mutual");
}

#[tokio::test]
async fn plaintext_and_tls_ports_mixed_up_fail_clearly_and_promptly() {
    let pki = Pki::new();
    let tls_server = Memcached::spawn_tls(&pki, false, &[]);
    let plain_server = Memcached::spawn();
    // A plaintext client on the TLS port.
    let client = builder(&tls_server).build().unwrap();
    let error = first_error(&client).await;
    assert!(error.is_connection() || error.is_timeout(), "{error:?}");
    // A TLS client on the plaintext port.
    let client = builder(&plain_server).tls(trusting(&pki)).build().unwrap();
    let error = first_error(&client).await;
    assert!(error.is_tls(), "{error:?}");
    assert!(
        error.to_string().contains("TLS handshake failed"),
        "{error}"
    );
}

#[tokio::test]
async fn tls_and_authentication_together() {
    let pki = Pki::new();
    let authfile = pki.dir().join("authfile");
    std::fs::write(&authfile, "alice:secret\n").unwrap();
    let server = Memcached::spawn_tls(&pki, false, &["-Y", authfile.to_str().unwrap()]);
    let login = |password: &str| {
        builder(&server)
            .tls(trusting(&pki))
            .credentials(Credentials::new("alice", password).unwrap())
            .build()
            .unwrap()
    };
    let alice = login("secret");
    alice.set("k", "v", 0).await.unwrap();
    assert_eq!(alice.get("k").await.unwrap().unwrap().value, "v");
    let error = first_error(&login("wrong")).await;
    assert!(error.is_auth(), "{error:?}");
    assert!(!format!("{error:?}").contains("wrong"), "{error:?}");
    // The warmer's dump goes over TLS and logs in too.
    let listed = metadump_lists(&alice, &server.addr_string(), b"k").await;
    assert!(listed, "metadump over TLS never listed the key");
}

/// A group's own TLS and login apply to that group only: a plaintext
/// group, a TLS group (`group_tls`) and a group behind `-Y`
/// (`group_credentials`) in one cluster, each written and read.
#[tokio::test]
async fn each_group_its_own_tls_and_login() {
    use memgroup::topology::{ReadFallback, WritePolicy};
    let pki = Pki::new();
    let authfile = pki.dir().join("authfile");
    std::fs::write(&authfile, "bob:hunter2\n").unwrap();
    let plain = Memcached::spawn();
    let tls = Memcached::spawn_tls(&pki, false, &[]);
    let auth = Memcached::spawn_with(&["-Y", authfile.to_str().unwrap()]);
    let groups = format!(
        "plain={};tls={};auth={}",
        plain.addr_string(),
        tls.addr_string(),
        auth.addr_string()
    );
    let client = |zone: &str| {
        Client::builder()
            .evcache_groups(&groups)
            .zone(zone)
            .read_fallback(ReadFallback::Never)
            .write_policy(WritePolicy::All)
            .group_tls("tls", trusting(&pki))
            .group_credentials("auth", Credentials::new("bob", "hunter2").unwrap())
            .timeout(Duration::from_secs(2))
            .connect_timeout(Duration::from_secs(2))
            .build()
            .unwrap()
    };
    let writer = client("plain");
    let outcome = writer.set("k", "in every group", 0).await.unwrap();
    assert!(outcome.applied(), "{outcome:?}");
    for zone in ["plain", "tls", "auth"] {
        let item = client(zone).get("k").await.unwrap();
        assert_eq!(
            item.map(|i| i.value).as_deref(),
            Some(&b"in every group"[..]),
            "{zone}"
        );
    }
    // The login went to its group only: a plain server would have stored
    // memcached's login command (`set auth …`) as an item.
    assert_eq!(crate::support::raw::get(plain.addr(), b"auth"), None);
}

/// A value larger than the sockets' buffers, sent while the server is
/// stalled: the encrypted write meets a full socket (`WouldBlock`), waits,
/// and finishes once the server reads again.
#[tokio::test(flavor = "current_thread")]
async fn a_write_larger_than_the_socket_buffers_waits_for_a_stalled_server() {
    let pki = Pki::new();
    let server = Memcached::spawn_tls(&pki, false, &["-I", "16m"]);
    let client = builder(&server)
        .tls(trusting(&pki))
        .max_value_size(16 << 20)
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    client.set("warm-up", "1", 0).await.unwrap();
    server.stop();
    let big = vec![b'z'; 12 << 20];
    let write = {
        let (client, big) = (client.clone(), big.clone());
        tokio::spawn(async move { client.set("big", big, 0).await })
    };
    // Wait until the writer has filled the socket: the stalled server's
    // kernel stops acknowledging, and the send queue stops growing.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut queued = 0;
    loop {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let now = unacked_bytes_to(server.addr());
        if now > 0 && now == queued {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the 12 MB write never filled the socket ({now} bytes unacknowledged)"
        );
        queued = now;
    }
    assert!(
        !write.is_finished(),
        "a stalled server cannot have taken 12 MB"
    );
    server.resume();
    let outcome = write.await.unwrap().unwrap();
    assert!(outcome.applied(), "{outcome:?}");
    let item = client.get("big").await.unwrap().expect("stored");
    assert!(item.value == big, "{} bytes read back", item.value.len());
}

/// Under paused time: the backoff after the kill passes when the test moves
/// the clock.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_restarted_server_is_handshaked_with_again() {
    let _clock = HeldClock::hold();
    let pki = Pki::new();
    let mut server = Memcached::spawn_tls(&pki, false, &[]);
    let client = builder(&server).tls(trusting(&pki)).build().unwrap();
    client.set("before", "1", 0).await.unwrap();
    server.kill();
    assert!(client.get("before").await.is_err());
    server.restart();
    tokio::time::advance(Duration::from_secs(2)).await;
    client.set("after", "2", 0).await.unwrap();
    assert_eq!(client.get("after").await.unwrap().unwrap().value, "2");
}

/// memcached 1.6.18 stops processing a TLS connection with more than about
/// 16 KB of requests unanswered until more bytes arrive: a burst of 40 sets
/// of 1,000 bytes queued at once (one batch of ~40 KB without the client's
/// bound on unanswered bytes) would leave the last few waiting into their
/// timeout. Then 32 callers writing and reading 2 KB values keep the
/// connection busy.
#[tokio::test(flavor = "current_thread")]
async fn many_requests_in_flight_over_tls_do_not_stall() {
    let pki = Pki::new();
    let server = Memcached::spawn_tls(&pki, false, &[]);
    let client = builder(&server).tls(trusting(&pki)).build().unwrap();
    client.set("warm-up", "1", 0).await.unwrap();
    // All 40 queue before the writer task runs (one thread, FIFO).
    let mut burst = tokio::task::JoinSet::new();
    for i in 0..40 {
        let client = client.clone();
        burst.spawn(async move { client.set(&format!("b{i}"), vec![b'b'; 1000], 0).await });
    }
    while let Some(done) = burst.join_next().await {
        done.unwrap().unwrap();
    }
    let value = vec![b'v'; 2048];
    let mut tasks = tokio::task::JoinSet::new();
    for task in 0..32 {
        let (client, value) = (client.clone(), value.clone());
        tasks.spawn(async move {
            for i in 0..100 {
                let key = format!("t{task}-{i}");
                client.set(&key, &value[..], 0).await.unwrap();
                let item = client.get(&key).await.unwrap().expect("just stored");
                assert_eq!(item.value.len(), value.len());
            }
            let keys: Vec<String> = (0..100).map(|i| format!("t{task}-{i}")).collect();
            assert_eq!(client.get_multi(&keys).await.unwrap().hit_count(), 100);
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.unwrap();
    }
}

/// The tool over TLS and logins: flags (`--tls-ca`, `--username`, a
/// password file ending in a newline), a URL (`tls_ca=`) and a
/// `cluster.toml` with `[tls]` sections; `set`, `get`, `stats`, `keys`,
/// a `warm` of 3,000 keys and a 32-in-flight `bench` finish without stalling.
#[test]
fn the_tool_works_over_tls_with_logins() {
    let pki = Pki::new();
    let authfile = pki.dir().join("authfile");
    std::fs::write(&authfile, "alice:secret\n").unwrap();
    let password_file = pki.dir().join("password");
    std::fs::write(&password_file, "secret\n").unwrap();
    let auth = ["-Y", authfile.to_str().unwrap()];
    let (a, b) = (
        Memcached::spawn_tls(&pki, false, &auth),
        Memcached::spawn_tls(&pki, false, &auth),
    );
    let ca = pki.ca().display().to_string();
    let groups = format!("sg1={};sg2={}", a.addr_string(), b.addr_string());
    let run = memgroup_ok;
    let password = password_file.to_str().unwrap();
    let flags = |rest: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = [
            "--groups",
            &groups,
            "--tls-ca",
            &ca,
            "--username",
            "alice",
            "--password-file",
            password,
        ]
        .iter()
        .map(ToString::to_string)
        .collect();
        v.extend(rest.iter().map(ToString::to_string));
        v
    };
    let with = |rest: &[&str]| {
        let args = flags(rest);
        run(&args.iter().map(String::as_str).collect::<Vec<_>>())
    };
    with(&["set", "t", "over tls"]);
    assert_eq!(with(&["--zone", "sg2", "get", "t"]), "over tls");
    assert!(with(&["stats"]).contains("sg2"));
    // 3,000 keys written only to sg1, then warmed into sg2 (its dump over
    // TLS too).
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let items = |server: &Memcached| {
        rt.block_on(async {
            let client = builder(server)
                .tls(trusting(&pki))
                .credentials(Credentials::new("alice", "secret").unwrap())
                .build()
                .unwrap();
            let stats = client.server_stats(None).await.unwrap();
            let stats = stats[0].stats.as_ref().unwrap();
            stats.get("curr_items").unwrap().parse::<u64>().unwrap()
        })
    };
    rt.block_on(async {
        let client = Client::builder()
            .evcache_groups(&groups)
            .tls(trusting(&pki))
            .credentials(Credentials::new("alice", "secret").unwrap())
            .build()
            .unwrap();
        for i in 0..3000 {
            client
                .add_or_set(
                    format!("w:{i}"),
                    vec![b'w'; 500],
                    0,
                    &["sg1"],
                    IfPresent::Overwrite,
                )
                .await
                .unwrap();
        }
    });
    let before = items(&b);
    let listed = with(&["keys", "--group", "sg1", "--prefix", "w:"]);
    assert!(listed.lines().count() > 100, "{listed}");
    with(&["warm", "--from", "sg1", "--to", "sg2", "--verify"]);
    assert_eq!(items(&b), before + 3000);
    // 32 in flight with 1 KB values: more than 16 KB of requests queue.
    let bench = with(&[
        "bench",
        "--keys",
        "2000",
        "--ops",
        "20000",
        "--concurrency",
        "32",
        "--value-size",
        "1000",
    ]);
    assert!(!bench.is_empty());

    // A URL with the login and the CA.
    let url = format!(
        "memcache://alice:secret@{}?tls_ca={}",
        a.addr_string(),
        ca.replace('/', "%2F")
    );
    assert_eq!(run(&["--servers", &url, "get", "t"]), "over tls");
    // A cluster.toml with a file-wide [tls] and a group's own login.
    let config = pki.dir().join("cluster.toml");
    std::fs::write(
        &config,
        format!(
            "[tls]\nca = {ca:?}\n\n[[groups]]\nname = \"sg1\"\nservers = [{:?}]\nusername = \"alice\"\npassword_file = {password:?}\n",
            a.addr_string()
        ),
    )
    .unwrap();
    assert_eq!(
        run(&["--config", config.to_str().unwrap(), "get", "t"]),
        "over tls"
    );
}

/// A TLS server name that is no DNS name or IP address is a configuration
/// error naming it, from the builder and from the tool (it panicked: exit 101).
#[test]
fn an_invalid_tls_server_name_is_refused_not_a_panic() {
    let pki = Pki::new();
    let error = Client::builder()
        .servers("127.0.0.1:1")
        .tls(trusting(&pki).server_name("a b"))
        .build()
        .unwrap_err();
    assert!(error.to_string().contains("\"a b\""), "{error}");
    let ca = pki.ca().display().to_string();
    let out = crate::support::memgroup(&[
        "--servers",
        "127.0.0.1:1",
        "--tls-ca",
        &ca,
        "--tls-server-name",
        "a b",
        "get",
        "k",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("\"a b\""), "{stderr}");
    let url = format!("memcache://127.0.0.1:1?tls_ca={ca}&tls_server_name=a%20b");
    let out = crate::support::memgroup(&["--servers", &url, "get", "k"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
