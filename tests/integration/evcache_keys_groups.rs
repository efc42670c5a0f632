//! EVCache's key settings per server group (`<app>.<group>.hash.key`,
//! `.hash.algo`, …): each group read and written under its own key and
//! envelope, as that group's Java clients do, through writes, deletes,
//! counters, leases, hedges, repairs and the convergence check. Real
//! memcached; every copy read on the servers (Java, the file, the tool and
//! the proxy: `evcache_keys_groups_interop.rs`).

use std::time::Duration;

use memgroup::client::evcache::{EvcacheHashAlgorithm, EvcacheKeyHash, EvcacheKeys};
use memgroup::client::value::ValueFormat;
use memgroup::client::{Client, ClientBuilder, ErrorKind, Freshness};
use memgroup::hash::HashStrategy;

use crate::support::{HeldClock, Memcached, advance_until, raw};

const TIMEOUT: Duration = Duration::from_millis(300);

/// Every key hashed with `algorithm`.
pub(crate) fn every(algorithm: EvcacheHashAlgorithm) -> EvcacheKeys {
    EvcacheKeys::every_key(EvcacheKeyHash::new(algorithm))
}

/// Three groups (`replicas::three_groups`), each with its own settings:
/// `sg1` (the arbiter) hashes every key with MD5 (the cluster's setting),
/// `sg2` only keys over 200 characters (its own: EVCache's
/// `auto.hash.keys`), `sg3` every key with SHA-256 (its own).
pub(crate) fn groups() -> ([Memcached; 3], String) {
    crate::replicas::three_groups()
}

pub(crate) fn builder(list: &str, zone: &str) -> ClientBuilder {
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
pub(crate) fn wire_keys(key: &str) -> [String; 3] {
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

/// `get_or_fill` from the zone that stores keys as given (`sg2`): the lease
/// is taken at the arbiter under its digest, the filled value stored there
/// in its envelope and in each other group under that group's own key; the
/// next call is served from the local group's copy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_or_fill_leases_at_the_arbiter_under_its_key() {
    let (servers, list) = groups();
    let client = builder(&list, "sg2").build().unwrap();
    let fill = |value: &'static str| move || async move { Ok::<_, std::io::Error>(value) };
    let filled = client.get_or_fill("f", 300, fill("filled")).await.unwrap();
    assert_eq!(
        (&filled.item.value[..], filled.freshness),
        (&b"filled"[..], Freshness::Filled)
    );
    crate::support::background_done(&client).await;
    let wire = wire_keys("f");
    let (at_arbiter, flags, _) = raw::copy(servers[0].addr(), wire[0].as_bytes()).unwrap();
    assert_eq!(
        (flags, &at_arbiter[..2]),
        (1, &[0xAC, 0xED][..]),
        "an EVCacheValue"
    );
    assert_eq!(
        raw::get(servers[1].addr(), b"f").as_deref(),
        Some(&b"filled"[..])
    );
    assert_eq!(
        raw::copy(servers[2].addr(), wire[2].as_bytes()).unwrap().1,
        1
    );
    // The local copy is read under the local key: a value put there alone
    // is what the next call serves.
    raw::set(servers[1].addr(), b"f", b"local");
    let cached = client.get_or_fill("f", 300, fill("again")).await.unwrap();
    assert_eq!(
        (&cached.item.value[..], cached.freshness),
        (&b"local"[..], Freshness::Cached)
    );
}

/// A hedged `get` whose hedge goes to a group that stores the key as given
/// (the local group hashes it): the hedge's answer is read under that
/// group's own key, a hit, while the local server is stalled. Real memcached
/// stalled by SIGSTOP; tokio's clock held by the test.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_hedge_to_a_group_with_its_own_key_is_a_hit() {
    let _clock = HeldClock::hold();
    let (servers, list) = groups();
    let client = builder(&list, "sg1")
        .hedge(memgroup::client::Hedge::new(Duration::from_millis(5), 1.0))
        .build()
        .unwrap();
    client.set("h", "hedged", 0).await.unwrap();
    advance_until(3 * crate::support::TICK, || {
        client.health().background_writes == 0
    })
    .await;
    servers[0].stop();
    // A first read waits out its timeout on the stalled server: the next
    // one sees it stalled and is hedged at once.
    let (_, ()) = tokio::join!(client.get("h"), async {
        crate::support::let_io_happen().await;
        tokio::time::advance(TIMEOUT).await;
    });
    // (One more group to read: the hedge's answer decides. Were it read
    // under the stalled group's key, the read would wait out that server.)
    let started = tokio::time::Instant::now();
    let ((hit, took), ()) = tokio::join!(
        async { (client.get("h").await, started.elapsed()) },
        async {
            crate::support::let_io_happen().await;
            tokio::time::advance(TIMEOUT).await;
        }
    );
    assert_eq!(client.health().hedged_reads, 1, "the read was hedged");
    assert_eq!(hit.unwrap().expect("the hedge's hit").value, "hedged");
    assert!(took < TIMEOUT, "{took:?}");
    servers[0].resume();
}

/// A conditional write goes to the arbiter alone and clears the others:
/// what another group's scheme refuses (`append` to an envelope) does not
/// stop it where the arbiter stores keys as given; the others' copies are
/// cleared under their own keys.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_append_at_an_arbiter_storing_keys_as_given_clears_the_others() {
    let (servers, list) = groups();
    let client = builder(&list, "sg2")
        .group_evcache_keys("sg1", None)
        .build()
        .unwrap();
    client.set("log", "a", 0).await.unwrap();
    assert!(client.append("log", "b").await.unwrap().applied());
    crate::support::background_done(&client).await;
    assert_eq!(
        raw::get(servers[0].addr(), b"log").as_deref(),
        Some(&b"ab"[..])
    );
    assert_eq!(raw::get(servers[1].addr(), b"log"), None);
    let sg3 = &wire_keys("log")[2];
    assert_eq!(raw::get(servers[2].addr(), sg3.as_bytes()), None);
    assert_eq!(
        client.get_as::<String>("log").await.unwrap().as_deref(),
        Some("ab")
    );
}

/// Every group with settings of its own and none for the cluster: a key
/// too long to go as given is stored under each group's digest (the
/// cluster's would-be key, used by no group, is not asked to be valid);
/// groups whose own settings agree store the key alike, so what needs every
/// copy alike (`get_consistent`) works there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn groups_with_only_their_own_settings() {
    let (servers, list) = groups();
    let own = |b: ClientBuilder, sg3: EvcacheHashAlgorithm| {
        b.group_evcache_keys("sg1", Some(every(EvcacheHashAlgorithm::Md5)))
            .group_evcache_keys("sg2", Some(every(EvcacheHashAlgorithm::Md5)))
            .group_evcache_keys("sg3", Some(every(sg3)))
    };
    let plain = |zone| {
        Client::builder()
            .evcache_groups(&list)
            .zone(zone)
            .hash(HashStrategy::Ketama)
            .value_format(ValueFormat::evcache())
    };
    let long = "l".repeat(300);
    let client = own(plain("sg1"), EvcacheHashAlgorithm::Sha256)
        .build()
        .unwrap();
    client.set(&long, "long", 0).await.unwrap();
    crate::support::background_done(&client).await;
    let wire = wire_keys(&long);
    let md5 = &wire[0];
    for (server, wire) in servers.iter().zip([md5, md5, &wire[2]]) {
        assert!(raw::get(server.addr(), wire.as_bytes()).is_some(), "{wire}");
    }
    let reader = own(plain("sg3"), EvcacheHashAlgorithm::Sha256)
        .read_fallback(memgroup::topology::ReadFallback::Never)
        .build()
        .unwrap();
    assert_eq!(
        reader.get_as::<String>(&long).await.unwrap().as_deref(),
        Some("long")
    );
    // All three alike: every copy compared.
    let alike = own(plain("sg1"), EvcacheHashAlgorithm::Md5)
        .build()
        .unwrap();
    alike.set("same", "v", 0).await.unwrap();
    crate::support::background_done(&alike).await;
    let agreed = alike.get_consistent("same").await.unwrap();
    assert_eq!(agreed.map(|item| item.value), Some("v".into()));
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
