//! A service's client built from `cluster.toml` in one call
//! (`ClusterFile::builder`) really uses the file's settings, seen through
//! their effects on real servers: the operation timeout (a stalled server's
//! read fails at 300 ms, not the default 500), the zone and read fallback,
//! the value format, pool sizes, the value size limit; and, over TLS, a
//! group's own CA and another group's login read from the files named.

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

use memgroup::client::value::ValueFormat;
use memgroup::client::{Client, Error};
use memgroup::config::ClusterFile;

use crate::support::{HeldClock, Memcached, raw, tempdir};

/// Polls `future` once: whether it finished, and how.
async fn poll_once<F: Future>(mut future: Pin<&mut F>) -> Poll<F::Output> {
    std::future::poll_fn(|cx| Poll::Ready(future.as_mut().poll(cx))).await
}

/// Writes `text` as `cluster.toml` in `dir` and builds a client from it the
/// way a service does, errors through `?` into the client's error.
fn client_from_file(dir: &tempdir::Dir, text: &str) -> Result<Client, Error> {
    let path = dir.path().join("cluster.toml");
    std::fs::write(&path, text).unwrap();
    ClusterFile::read(&path)?.builder()?.build()
}

/// Runs under paused time: the timeout passes when the test moves the clock.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_client_from_cluster_toml_uses_the_files_timeout_and_settings() {
    let _clock = HeldClock::hold();
    let (local, remote) = (Memcached::spawn(), Memcached::spawn());
    let dir = tempdir::Dir::new("cluster-file");
    let client = client_from_file(
        &dir,
        &format!(
            r#"
            timeout_ms = 300
            zone = "a"
            read_fallback = "never"
            value_format = "evcache"
            pool_size = 2
            max_value_size = 2000
            [[groups]]
            name = "sg1"
            zone = "a"
            servers = ["{}"]
            [[groups]]
            name = "sg2"
            zone = "b"
            servers = ["{}"]
            pool_size = 3
            "#,
            local.addr_string(),
            remote.addr_string()
        ),
    )
    .unwrap();

    // Pool sizes, file-wide and the group's own; both groups, zoned.
    let topology = client.topology();
    let pools: Vec<(&str, Option<&str>, usize)> = topology
        .groups()
        .iter()
        .map(|g| (g.name(), g.zone(), g.pool_size()))
        .collect();
    assert_eq!(pools, [("sg1", Some("a"), 2), ("sg2", Some("b"), 3)]);

    // The value format: a long written by an EVCache-format client (binary,
    // with spymemcached's type flags) reads back as the number.
    let evcache = Client::builder()
        .servers(&local.addr_string())
        .value_format(ValueFormat::evcache())
        .build()
        .unwrap();
    evcache.set_as("visits", &41i64, 0).await.unwrap();
    assert_eq!(client.get_as::<i64>("visits").await.unwrap(), Some(41));

    // The zone and no fallback: a key only the remote group holds is a miss.
    raw::set(remote.addr(), b"remote-only", b"far");
    assert_eq!(client.get("remote-only").await.unwrap(), None);

    // The limit: refused before a byte is sent.
    let error = client.set("big", vec![b'x'; 2001], 0).await.unwrap_err();
    assert!(error.is_value_too_large(), "{error}");

    // The timeout: with the local server stalled, a read is still waiting
    // at 299 ms and has failed at 301 ms (the default would wait 500).
    client.set("k", "v", 0).await.unwrap();
    local.stop();
    let get = client.get("k");
    tokio::pin!(get);
    assert!(poll_once(get.as_mut()).await.is_pending());
    tokio::time::advance(Duration::from_millis(299)).await;
    assert!(
        poll_once(get.as_mut()).await.is_pending(),
        "timed out before the file's 300 ms"
    );
    tokio::time::advance(Duration::from_millis(2)).await;
    let Poll::Ready(result) = poll_once(get.as_mut()).await else {
        panic!("still waiting after the file's 300 ms: the file's timeout_ms was not applied");
    };
    let error = result.unwrap_err();
    assert!(error.is_timeout(), "{error}");
    assert!(error.to_string().contains("300ms"), "{error}");
    local.resume();
}

/// The files a `cluster.toml` names are read: a TLS group's own CA bundle
/// and a `-Y` group's login with its password file; both groups written and
/// read.
#[cfg(feature = "tls")]
#[tokio::test]
async fn a_client_from_cluster_toml_reads_its_pem_and_password_files() {
    use memgroup_testkit::Pki;

    let pki = Pki::new();
    let authfile = pki.dir().join("authfile");
    std::fs::write(&authfile, "bob:hunter2\n").unwrap();
    let password = pki.dir().join("password");
    std::fs::write(&password, "hunter2\n").unwrap();
    let tls = Memcached::spawn_tls(&pki, false, &[]);
    let auth = Memcached::spawn_with(&["-Y", authfile.to_str().unwrap()]);
    let dir = tempdir::Dir::new("cluster-file-tls");
    let file = |zone: &str| {
        format!(
            r#"
            zone = "{zone}"
            read_fallback = "never"
            write_policy = "all"
            timeout_ms = 2000
            connect_timeout_ms = 2000
            [[groups]]
            name = "tls"
            zone = "tls"
            servers = ["{}"]
            tls = {{ ca = "{}" }}
            [[groups]]
            name = "auth"
            zone = "auth"
            servers = ["{}"]
            username = "bob"
            password_file = "{}"
            "#,
            tls.addr_string(),
            pki.ca().display(),
            auth.addr_string(),
            password.display()
        )
    };
    let writer = client_from_file(&dir, &file("tls")).unwrap();
    let outcome = writer.set("k", "in both groups", 0).await.unwrap();
    assert!(outcome.is_complete(), "{outcome:?}");
    for zone in ["tls", "auth"] {
        let client = client_from_file(&dir, &file(zone)).unwrap();
        let item = client.get("k").await.unwrap();
        assert_eq!(
            item.map(|i| i.value).as_deref(),
            Some(&b"in both groups"[..]),
            "{zone}"
        );
    }
}

/// The example file the README points to parses, builds a client, and
/// says what it shows: two zones of three servers, the third weighted.
#[test]
fn the_example_cluster_toml_is_valid() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/cluster.toml");
    let file = ClusterFile::read(&path).unwrap();
    let spec = file.spec().expect("the example lists groups");
    assert_eq!(spec.groups.len(), 2);
    assert!(spec.groups.iter().all(|g| g.servers.len() == 3));
    assert_eq!(spec.groups[1].servers[2].weight, 2);
    assert_eq!(spec.settings.local_zone.as_deref(), Some("us-east-1a"));
    let client = file.builder().unwrap().build().unwrap();
    assert_eq!(client.topology().groups().len(), 2);
}
