//! TLS in front of `memgroup proxy` (certificates made at test time by the
//! testkit's `Pki`): memgroup's own client over TLS through it to a
//! plaintext memcached, mutual TLS refusing a client without a certificate,
//! a plaintext client counted as a failed handshake while the others are
//! served, and the tool serving TLS to the tool.

use std::time::Duration;

use memgroup::client::{Client, TlsConfig};
use memgroup::proxy::ServerTls;
use memgroup_testkit::Pki;

use crate::proxy::{exchange, free_port, proxy_with};
use crate::proxy_limits::client_of;
use crate::support::{Memcached, ToolProxy, raw};

/// A proxy for `server` serving TLS with the test server certificate;
/// with `mutual`, requiring client certificates of the test CA.
async fn tls_proxy(server: &Memcached, pki: &Pki, mutual: bool) -> std::net::SocketAddr {
    let mut config = free_port();
    let ca = pki.ca();
    let client_ca = mutual.then_some(ca.as_path());
    config.tls =
        Some(ServerTls::from_files(&pki.server_cert(), &pki.server_key(), client_ca).unwrap());
    proxy_with(client_of(server), config).await
}

fn through(addr: std::net::SocketAddr, tls: TlsConfig) -> Client {
    Client::builder()
        .servers(&addr.to_string())
        .timeout(Duration::from_secs(2))
        .tls(tls)
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_client_reaches_a_plaintext_server_through_the_proxy() {
    let (pki, server) = (Pki::new(), Memcached::spawn());
    let addr = tls_proxy(&server, &pki, false).await;
    let client = through(addr, TlsConfig::ca_file(pki.ca()).unwrap());
    let keys: Vec<String> = (0..100).map(|i| format!("k{i}")).collect();
    for key in &keys {
        client.set(key, key.as_bytes(), 0).await.unwrap();
    }
    // On the server, in plaintext, as sent.
    assert_eq!(raw::get(server.addr(), b"k7").as_deref(), Some(&b"k7"[..]));
    let got = client.get_multi(&keys).await.unwrap();
    assert_eq!(got.hit_count(), keys.len());
    // A value over several TLS records.
    let big = vec![b'x'; 900 * 1024];
    client.set("big", &big[..], 0).await.unwrap();
    assert_eq!(client.get("big").await.unwrap().unwrap().value, big);

    // A plaintext client: no handshake, closed, counted; the TLS client is
    // served on.
    assert!(exchange(addr, b"get k7\r\n").await.ends_with(b"<CLOSED>"));
    assert!(client.get("k8").await.unwrap().is_some());
    let stats = client.server_stats(None).await.unwrap();
    let stats = stats[0].stats.as_ref().unwrap();
    assert_eq!(stats["ssl_handshake_errors"], "1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls_in_front_refuses_a_client_without_a_certificate() {
    let (pki, server) = (Pki::new(), Memcached::spawn());
    let addr = tls_proxy(&server, &pki, true).await;
    let without = through(addr, TlsConfig::ca_file(pki.ca()).unwrap());
    let error = without.get("k").await.expect_err("no client certificate");
    assert_eq!(error.kind(), memgroup::client::ErrorKind::Tls, "{error}");
    let with = through(
        addr,
        TlsConfig::ca_file(pki.ca())
            .unwrap()
            .client_cert_files(pki.client_cert(), pki.client_key())
            .unwrap(),
    );
    with.set("k", "v", 0).await.unwrap();
    assert_eq!(raw::get(server.addr(), b"k").as_deref(), Some(&b"v"[..]));
    // Nothing of the refused client reached the server.
    assert_eq!(raw::stat(server.addr(), "cmd_get"), 1);
}

/// The tool's proxy serving TLS, the tool's get over TLS through it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tool_serves_tls_in_front() {
    let (pki, server) = (Pki::new(), Memcached::spawn());
    // Copies the proxy reads, replaced below as a renewal would.
    let dir = crate::support::tempdir::Dir::new("proxy-tls");
    let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    std::fs::copy(pki.server_cert(), &cert).unwrap();
    std::fs::copy(pki.server_key(), &key).unwrap();
    let tool = ToolProxy::start(
        &["--servers", &server.addr_string()],
        &[
            "--listen-cert",
            cert.to_str().unwrap(),
            "--listen-key",
            key.to_str().unwrap(),
        ],
    );
    raw::set(server.addr(), b"greeting", b"hello");
    let addr = tool.addr.to_string();
    let get_trusting = |ca: &std::path::Path| {
        crate::support::memgroup(&[
            "--servers",
            &addr,
            "--tls-ca",
            ca.to_str().unwrap(),
            "--timeout-ms",
            "2000",
            "get",
            "greeting",
        ])
    };
    let got = get_trusting(&pki.ca());
    assert_eq!(String::from_utf8_lossy(&got.stdout).trim(), "hello");
    let stats = exchange(tool.addr, b"stats\r\n").await;
    assert!(
        stats.ends_with(b"<CLOSED>"),
        "plaintext served on a TLS port"
    );

    // A file that does not load: the certificate in use stays.
    std::fs::write(&cert, "not a certificate").unwrap();
    tool.signal("HUP");
    assert!(tool.said("keeping the certificate in use").await);
    // A renewed certificate: SIGHUP, and new handshakes present it.
    let renewed = Pki::new();
    std::fs::copy(renewed.server_cert(), &cert).unwrap();
    std::fs::copy(renewed.server_key(), &key).unwrap();
    tool.signal("HUP");
    let mut served = false;
    for _ in 0..100 {
        if get_trusting(&renewed.ca()).status.success() {
            served = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(served, "the renewed certificate was never presented");
    assert!(!get_trusting(&pki.ca()).status.success());
    let (status, _, stderr) = tool.terminate().await;
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("new handshakes present the certificate read now"),
        "{stderr}"
    );
}

/// A renewed certificate served without a restart: new handshakes present
/// it (a client trusting only the old authority is refused), while a
/// connection opened before keeps being served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_certificate_serves_new_handshakes() {
    use memgroup::proxy::Proxy;
    let (old, new, server) = (Pki::new(), Pki::new(), Memcached::spawn());
    let mut config = free_port();
    config.tls = Some(ServerTls::from_files(&old.server_cert(), &old.server_key(), None).unwrap());
    let proxy = Proxy::bind(client_of(&server), config).await.unwrap();
    let (addr, control) = (proxy.local_addrs()[0], proxy.control());
    tokio::spawn(proxy.serve());
    let before = through(addr, TlsConfig::ca_file(old.ca()).unwrap());
    before.set("k", "v", 0).await.unwrap();

    let renewed = ServerTls::from_files(&new.server_cert(), &new.server_key(), None).unwrap();
    assert!(control.set_tls(renewed));
    let after = through(addr, TlsConfig::ca_file(new.ca()).unwrap());
    assert_eq!(after.get("k").await.unwrap().unwrap().value, b"v"[..]);
    let stale = through(addr, TlsConfig::ca_file(old.ca()).unwrap());
    let error = stale.get("k").await.expect_err("the old authority");
    assert_eq!(error.kind(), memgroup::client::ErrorKind::Tls, "{error}");
    // Opened before: its session stands.
    assert_eq!(before.get("k").await.unwrap().unwrap().value, b"v"[..]);
}
