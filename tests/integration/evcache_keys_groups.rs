//! EVCache's key settings per server group (`<app>.<group>.hash.key`,
//! `.hash.algo`, …): each group read and written under its own key and
//! envelope, as that group's Java clients do, through writes, deletes,
//! counters, repairs and the convergence check. Real memcached; every copy
//! read on the servers, and Java's EVCache format written and read back by
//! the JDK harness.

use std::time::Duration;

use memgroup::client::evcache::{EvcacheHashAlgorithm, EvcacheKeyHash, EvcacheKeys};
use memgroup::client::value::ValueFormat;
use memgroup::client::{Client, ClientBuilder, ErrorKind};
use memgroup::hash::HashStrategy;

use crate::support::{HeldClock, Memcached, advance_until, raw};

const TIMEOUT: Duration = Duration::from_millis(300);

/// Every key hashed with `algorithm`.
fn every(algorithm: EvcacheHashAlgorithm) -> EvcacheKeys {
    EvcacheKeys::every_key(EvcacheKeyHash::new(algorithm))
}

/// Three groups (`replicas::three_groups`), each with its own settings:
/// `sg1` (the arbiter) hashes every key with MD5 (the cluster's setting),
/// `sg2` only keys over 200 characters (its own: EVCache's
/// `auto.hash.keys`), `sg3` every key with SHA-256 (its own).
fn groups() -> ([Memcached; 3], String) {
    crate::replicas::three_groups()
}

fn builder(list: &str, zone: &str) -> ClientBuilder {
    Client::builder()
        .evcache_groups(list)
        .zone(zone)
        .hash(HashStrategy::Ketama)
        .value_format(ValueFormat::evcache())
        .evcache_keys(every(EvcacheHashAlgorithm::Md5))
        .group_evcache_keys(
            "sg2",
            Some(EvcacheKeys::long_keys(EvcacheKeyHash::new(
                EvcacheHashAlgorithm::Md5,
            ))),
        )
        .group_evcache_keys("sg3", Some(every(EvcacheHashAlgorithm::Sha256)))
        .timeout(TIMEOUT)
}

/// The key `key` is stored under in each group.
fn wire_keys(key: &str) -> [String; 3] {
    [
        every(EvcacheHashAlgorithm::Md5)
            .wire_key(key.as_bytes())
            .unwrap(),
        key.to_string(),
        every(EvcacheHashAlgorithm::Sha256)
            .wire_key(key.as_bytes())
            .unwrap(),
    ]
}

/// A set lands in each group under that group's key (an envelope, memcached
/// flags 1, where the group hashes; the value as it is where it does not),
/// every zone reads it, and a delete, a counter through the arbiter and a
/// `get_multi` each reach every group's own copy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_group_is_written_and_read_under_its_own_key() {
    let (servers, list) = groups();
    let client = builder(&list, "sg2").build().unwrap();
    client.set("user:42", "Ada", 0).await.unwrap();
    crate::support::background_done(&client).await;
    let wire = wire_keys("user:42");
    for (server, wire) in servers.iter().zip(&wire) {
        assert!(raw::get(server.addr(), wire.as_bytes()).is_some(), "{wire}");
    }
    // Hashed: in an envelope (flags 1); as given in sg2: the value itself.
    assert_eq!(
        raw::copy(servers[0].addr(), wire[0].as_bytes()).unwrap().1,
        1
    );
    assert_eq!(
        raw::get(servers[1].addr(), b"user:42").as_deref(),
        Some(&b"Ada"[..])
    );
    assert_eq!(
        raw::copy(servers[2].addr(), wire[2].as_bytes()).unwrap().1,
        1
    );
    // No group holds another group's key.
    assert_eq!(raw::get(servers[0].addr(), b"user:42"), None);
    assert_eq!(raw::get(servers[2].addr(), b"user:42"), None);
    for zone in ["sg1", "sg2", "sg3"] {
        let local = builder(&list, zone)
            .read_fallback(memgroup::topology::ReadFallback::Never)
            .build()
            .unwrap();
        let got = local.get_as::<String>("user:42").await.unwrap();
        assert_eq!(got.as_deref(), Some("Ada"), "{zone}");
        let many = local.get_multi(&["user:42", "absent"]).await.unwrap();
        assert_eq!(many.hit_count(), 1, "{zone}");
    }
    client.delete("user:42").await.unwrap();
    crate::support::background_done(&client).await;
    for (server, wire) in servers.iter().zip(&wire) {
        assert_eq!(raw::get(server.addr(), wire.as_bytes()), None, "{wire}");
    }
    // A counter (a plain number under each group's key, as EVCache's incr
    // keeps it): decided at the arbiter under its key, the other groups'
    // copies cleared under theirs.
    let wire = wire_keys("n");
    for (server, wire) in servers.iter().zip(&wire) {
        raw::set(server.addr(), wire.as_bytes(), b"5");
    }
    assert_eq!(client.incr("n", 2).await.unwrap(), Some(7));
    crate::support::background_done(&client).await;
    assert_eq!(
        raw::get(servers[0].addr(), wire[0].as_bytes()).as_deref(),
        Some(&b"7"[..])
    );
    assert_eq!(raw::get(servers[1].addr(), b"n"), None);
    assert_eq!(raw::get(servers[2].addr(), wire[2].as_bytes()), None);
    // Each group's copy read as a whole compares raw bytes: refused.
    let refused = client.get_consistent("n").await.unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::Unsupported, "{refused}");
}

/// A delete that missed a stalled group is repaired there under that
/// group's own key once it is back: its old copy does not come back.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_missed_groups_repair_uses_its_own_key() {
    let _clock = HeldClock::hold();
    let (servers, list) = groups();
    let client = builder(&list, "sg1")
        .backoff(Duration::from_secs(1), Duration::from_secs(8))
        .repair_grace(Duration::from_secs(1))
        .build()
        .unwrap();
    client.set("k", "old", 0).await.unwrap();
    advance_until(3 * crate::support::TICK, || {
        client.health().background_writes == 0
    })
    .await;
    let sg3 = wire_keys("k")[2].clone();
    assert!(raw::get(servers[2].addr(), sg3.as_bytes()).is_some());
    servers[2].stop();
    client.delete("k").await.unwrap();
    tokio::time::advance(TIMEOUT).await;
    advance_until(3 * crate::support::TICK, || {
        client.health().repairs.pending == 1
    })
    .await;
    let owed = client.owed_repairs();
    assert_eq!(owed.len(), 1);
    assert_eq!(owed[0].key, sg3.as_bytes(), "queued under sg3's key");
    servers[2].resume();
    advance_until(Duration::from_secs(30), || {
        raw::get(servers[2].addr(), sg3.as_bytes()).is_none()
            && client.health().repairs.pending == 0
    })
    .await;
    assert_eq!(client.get("k").await.unwrap(), None);
}

/// Two writers of the same keys in two zones at once (four connections a
/// server, so their writes land in different orders in different groups):
/// once their convergence checks are done, every group holds the arbiter's
/// value or nothing, each read in its own group (under its own key).
#[test]
fn racing_writers_converge_in_every_group_under_its_own_key() {
    let (_servers, list) = groups();
    const KEYS: u64 = 500;
    let write = |zone: &'static str, w: u64| {
        let writer = builder(&list, zone).pool_size(4);
        std::thread::spawn(move || crate::writers::race(writer, w, KEYS, 1_000))
    };
    let (a, b) = (write("sg1", 0), write("sg3", 1));
    a.join().unwrap();
    b.join().unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let readers: Vec<Client> = ["sg1", "sg2", "sg3"]
            .into_iter()
            .map(|zone| {
                builder(&list, zone)
                    .read_fallback(memgroup::topology::ReadFallback::Never)
                    .build()
                    .unwrap()
            })
            .collect();
        let mut divergent = vec![];
        for i in 0..KEYS {
            let key = format!("race:{i}");
            let mut copies = vec![];
            for reader in &readers {
                copies.push(reader.get_as::<String>(&key).await.unwrap());
            }
            let arbiter = &copies[0];
            if copies[1..].iter().any(|c| c.is_some() && c != arbiter) {
                divergent.push((key, copies));
            }
        }
        assert!(
            divergent.is_empty(),
            "{} divergent: {divergent:?}",
            divergent.len()
        );
    });
}
