//! Migration mode against real memcached: 20,000 keys written with native
//! (modulo) hashing on 3 servers, some with a TTL; the client switches to
//! ketama on 4 servers with `migrate_from` the old layout. Every key reads
//! back (100 % hits); the second read of each is served by the new
//! placement (the servers' own counters: no miss anywhere); TTLs carry over;
//! a key deleted during the migration stays deleted; writes go only where
//! the new layout puts keys.

use std::collections::HashMap;
use std::time::Duration;

use memgroup::client::{Client, MetaFlag};
use memgroup::hash::HashStrategy;
use memgroup::topology::{ClusterSpec, Topology};

use crate::support::{Memcached, memgroup_ok, raw, server_list};

const KEYS: usize = 20_000;

fn key(i: usize) -> String {
    format!("user:{i}")
}

/// Keys with a TTL: every tenth.
fn has_ttl(i: usize) -> bool {
    i.is_multiple_of(10)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_layout_reads_through_to_the_old_and_backfills() {
    let servers: Vec<Memcached> = (0..4).map(|_| Memcached::spawn()).collect();
    let old_spec = ClusterSpec::parse_server_list(&server_list(&servers[..3]))
        .unwrap()
        .with_hash(HashStrategy::Native);
    let new_spec = ClusterSpec::parse_server_list(&server_list(&servers))
        .unwrap()
        .with_hash(HashStrategy::Ketama);
    let old = Client::builder()
        .cluster(old_spec.clone())
        .timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    // The servers count TTLs in wall-clock seconds: how many passed since
    // the first write bounds how much of the 300 s may be gone.
    let written_at = std::time::Instant::now();
    let writers: Vec<_> = (0..8)
        .map(|w| {
            let old = old.clone();
            tokio::spawn(async move {
                for i in (w..KEYS).step_by(8) {
                    let exptime = if has_ttl(i) { 300 } else { 0 };
                    old.set(key(i), key(i), exptime).await.unwrap();
                }
            })
        })
        .collect();
    for w in writers {
        w.await.unwrap();
    }
    let client = Client::builder()
        .cluster(new_spec.clone())
        .migrate_from(old_spec)
        .timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    // Where the new layout puts each key, and how many move.
    let new_topology = Topology::new(new_spec).unwrap();
    let old_topology = Topology::new(
        ClusterSpec::parse_server_list(&server_list(&servers[..3]))
            .unwrap()
            .with_hash(HashStrategy::Native),
    )
    .unwrap();
    let home = |t: &Topology, i: usize| {
        t.servers()[t.groups()[0].server_for(key(i).as_bytes()).0].to_string()
    };
    let moved: Vec<usize> = (0..KEYS)
        .filter(|&i| home(&old_topology, i) != home(&new_topology, i))
        .collect();
    assert!(
        moved.len() > KEYS / 2,
        "modulo to ketama moves most keys: {}",
        moved.len()
    );

    // A key that moved, deleted before anyone read it: gone from both.
    let deleted = moved[0];
    client.delete(key(deleted)).await.unwrap();

    let stat =
        |name: &str| -> Vec<u64> { servers.iter().map(|s| raw::stat(s.addr(), name)).collect() };
    let sets_before = stat("cmd_set");
    // First pass (16 callers): every key but the deleted one is a hit.
    let readers: Vec<_> = (0..16)
        .map(|r| {
            let client = client.clone();
            tokio::spawn(async move {
                let mut hits = 0;
                for i in (r..KEYS).step_by(16) {
                    let item = client.get(key(i)).await.unwrap();
                    if i == deleted {
                        assert!(item.is_none(), "a deleted key came back");
                        continue;
                    }
                    assert_eq!(item.expect("every key reads back").value, key(i));
                    hits += 1;
                }
                hits
            })
        })
        .collect();
    let mut hits = 0;
    for r in readers {
        hits += r.await.unwrap();
    }
    assert_eq!(hits, KEYS - 1);
    let migration = client.health().migration.unwrap();
    assert_eq!(migration.old_hits as usize, moved.len() - 1);
    assert_eq!(migration.backfills as usize, moved.len() - 1);
    assert_eq!((migration.old_errors, migration.backfill_failed), (0, 0));

    // The writes went exactly where the new layout puts the moved keys.
    let sets_after = stat("cmd_set");
    let mut expected: HashMap<String, u64> = HashMap::new();
    for &i in &moved[1..] {
        *expected.entry(home(&new_topology, i)).or_default() += 1;
    }
    for (s, (before, after)) in servers.iter().zip(sets_before.iter().zip(&sets_after)) {
        let want = expected.get(&s.addr_string()).copied().unwrap_or(0);
        assert_eq!(after - before, want, "sets on {}", s.addr_string());
    }

    // Second pass: served by the new placement, no miss on any server.
    let (hits_before, misses_before) = (stat("get_hits"), stat("get_misses"));
    let keys: Vec<String> = (0..KEYS).filter(|&i| i != deleted).map(key).collect();
    for chunk in keys.chunks(500) {
        assert_eq!(
            client.get_multi(chunk).await.unwrap().hit_count(),
            chunk.len()
        );
    }
    let (hits_after, misses_after) = (stat("get_hits"), stat("get_misses"));
    let delta = |a: &[u64], b: &[u64]| -> u64 { a.iter().zip(b).map(|(a, b)| a - b).sum() };
    assert_eq!(
        delta(&misses_after, &misses_before),
        0,
        "a key was missing from its new home"
    );
    assert_eq!(delta(&hits_after, &hits_before) as usize, KEYS - 1);
    assert_eq!(
        client.health().migration.unwrap().old_hits as usize,
        moved.len() - 1
    );

    // TTLs carried over: the moved keys with one still have ~300 s (less
    // the seconds since they were written; a loaded machine takes a while),
    // the others none.
    let passed = i64::try_from(written_at.elapsed().as_secs()).unwrap() + 2;
    for &i in moved[1..].iter().take(200) {
        let meta = client
            .meta_get(key(i), &[MetaFlag::ReturnTtl])
            .await
            .unwrap()
            .expect("backfilled");
        let ttl = meta.ttl().unwrap();
        if has_ttl(i) {
            assert!(
                (300 - passed..=300).contains(&ttl),
                "{}: ttl {ttl}, {passed} s since written",
                key(i)
            );
        } else {
            assert_eq!(ttl, -1, "{}: no expiry stays none", key(i));
        }
    }
    assert!(client.get(key(deleted)).await.unwrap().is_none());
}

/// The tool: `route --compare` reports the share that moves (modulo 3 -> 4
/// servers ~75 %, ketama ~25 %), from a sample or the keys in the cluster;
/// `--migrate-from` reads through to the old layout.
#[test]
fn the_tool_plans_and_migrates() {
    let servers: Vec<Memcached> = (0..4).map(|_| Memcached::spawn()).collect();
    let (old, new) = (server_list(&servers[..3]), server_list(&servers));
    let run = memgroup_ok;
    let share = |hash: &str, extra: &[&str]| -> (u64, f64) {
        let mut args = vec![
            "--json",
            "--servers",
            &new,
            "--hash",
            hash,
            "route",
            "--compare",
            &old,
        ];
        args.extend_from_slice(&["--old-hash", hash]);
        args.extend_from_slice(extra);
        let groups: serde_json::Value = serde_json::from_str(&run(&args)).unwrap();
        let group = &groups[0];
        (
            group["keys"].as_u64().unwrap(),
            group["share"].as_f64().unwrap(),
        )
    };
    let (keys, native) = share("native", &[]);
    assert_eq!(keys, 10_000);
    assert!((0.70..0.80).contains(&native), "native moved {native}");
    let (_, ketama) = share("ketama", &[]);
    assert!((0.15..0.35).contains(&ketama), "ketama moved {ketama}");

    // 300 keys stored under the old layout (native), listed from the cluster.
    for i in 0..300 {
        run(&[
            "--servers",
            &old,
            "--hash",
            "native",
            "set",
            &key(i),
            &key(i),
        ]);
    }
    let (keys, native) = share("native", &["--from-cluster"]);
    assert_eq!(keys, 300);
    assert!((0.6..0.9).contains(&native), "{native}");
    // Migration mode from the tool: every key reads back under ketama on 4.
    for i in (0..300).step_by(7) {
        let value = run(&[
            "--servers",
            &new,
            "--hash",
            "ketama",
            "--migrate-from",
            &old,
            "--old-hash",
            "native",
            "get",
            &key(i),
        ]);
        assert_eq!(value, key(i));
    }
}

/// A client's key prefix holds for the old layout too (the same keys,
/// moving), given to the builder or in the new layout's description: a key
/// stored behind it on the old server is read through and backfilled
/// behind it on the new one.
#[tokio::test]
async fn the_key_prefix_holds_for_the_old_layout() {
    for from_url in [false, true] {
        let (old_server, new_server) = (Memcached::spawn(), Memcached::spawn());
        raw::set(old_server.addr(), b"app:k", b"old");
        let builder = if from_url {
            Client::builder().url(&format!(
                "memcache://{}?key_prefix=app:",
                new_server.addr_string()
            ))
        } else {
            Client::builder()
                .servers(&new_server.addr_string())
                .key_prefix("app:")
        };
        let client = builder
            .migrate_from(ClusterSpec::parse_server_list(&old_server.addr_string()).unwrap())
            .build()
            .unwrap();
        let found = client.get("k").await.unwrap();
        assert_eq!(
            found.expect("read through to the old layout").value,
            &b"old"[..],
            "from_url {from_url}"
        );
        // Backfilled (an `add`, done before the read returns) behind the prefix.
        assert_eq!(
            raw::get(new_server.addr(), b"app:k").as_deref(),
            Some(&b"old"[..])
        );
        assert_eq!(raw::get(new_server.addr(), b"k"), None);
    }
}

/// `route --compare --from-cluster` places the stored keys as they are:
/// with `--sanitize`, a stored key is already sanitised (`user+1` for
/// `user 1`), and sanitising it again (`user%2B1`) would place another key.
/// The moves the tool counts are the stored keys' own.
#[test]
fn route_compare_from_the_cluster_places_stored_keys_as_they_are() {
    let stored = Memcached::spawn();
    let old = stored.addr_string();
    // The new layout's other servers are only placed on, never asked.
    let new = format!("{old},127.0.0.1:1,127.0.0.1:2");
    let keys: Vec<String> = (0..100).map(|i| format!("user+{i}")).collect();
    for key in &keys {
        raw::set(stored.addr(), key.as_bytes(), b"v");
    }
    let plan = memgroup_ok(&[
        "--json",
        "--servers",
        &new,
        "--sanitize",
        "route",
        "--compare",
        &old,
        "--from-cluster",
    ]);
    let plan: serde_json::Value = serde_json::from_str(&plan).unwrap();
    let placed = Topology::new(ClusterSpec::parse_server_list(&new).unwrap()).unwrap();
    let group = placed.group(memgroup::topology::GroupId(0));
    let home = placed.server_id(&old.parse().unwrap()).unwrap();
    let moving = keys
        .iter()
        .filter(|k| group.server_for(k.as_bytes()) != home)
        .count();
    assert_eq!(plan[0]["keys"], 100, "{plan}");
    assert_eq!(plan[0]["moved"], moving, "{plan}");
}

/// A running client begins a migration with the layout change (what a
/// reloaded `cluster.toml` that adds a server and names `migrate_from`
/// does), keeps it when the same layout is given again, and ends it: keys
/// that moved read through and are backfilled behind the key prefix while
/// it lasts; after it, the new placement alone answers.
#[tokio::test]
async fn a_running_client_begins_and_ends_a_migration() {
    let servers = [Memcached::spawn(), Memcached::spawn()];
    let old_spec = ClusterSpec::parse_server_list(&servers[0].addr_string()).unwrap();
    let client = Client::builder()
        .cluster(old_spec.clone())
        .key_prefix("app:")
        .build()
        .unwrap();
    const N: usize = 300;
    for i in 0..N {
        client.set(key(i), key(i), 0).await.unwrap();
    }
    let new_spec = ClusterSpec::parse_server_list(&server_list(&servers)).unwrap();
    let new_topology = Topology::new(new_spec.clone()).unwrap();
    let moved: Vec<usize> = (0..N)
        .filter(|&i| {
            let wire = format!("app:{}", key(i));
            new_topology.groups()[0].server_for(wire.as_bytes()).0 == 1
        })
        .collect();
    assert!(
        moved.len() > N / 4,
        "a second server takes a share: {}",
        moved.len()
    );

    client.set_migration(Some(old_spec.clone())).unwrap();
    client.set_topology(new_spec).unwrap();
    let half = moved.len() / 2;
    for &i in &moved[..half] {
        let item = client.get(key(i)).await.unwrap();
        assert_eq!(item.expect("read through to the old layout").value, key(i));
        let wire = format!("app:{}", key(i));
        assert_eq!(
            raw::get(servers[1].addr(), wire.as_bytes()).as_deref(),
            Some(key(i).as_bytes()),
            "backfilled behind the prefix"
        );
    }
    // The same old layout again (a file re-read): the migration goes on.
    client.set_migration(Some(old_spec)).unwrap();
    let migration = client.health().migration.expect("migrating");
    assert_eq!(
        (migration.old_hits, migration.backfills),
        (half as u64, half as u64)
    );

    client.set_migration(None).unwrap();
    assert_eq!(client.health().migration, None);
    for &i in &moved[half..] {
        assert_eq!(
            client.get(key(i)).await.unwrap(),
            None,
            "the old placement no longer read"
        );
    }
    for &i in &moved[..half] {
        assert!(
            client.get(key(i)).await.unwrap().is_some(),
            "backfilled copies stay"
        );
    }
}

/// `set_timeout` changes the timeout of every handle without its own, for
/// operations started after it; zero is refused.
#[tokio::test]
async fn a_running_client_changes_its_timeout() {
    let server = Memcached::spawn();
    let client = Client::builder()
        .servers(&server.addr_string())
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    client.set("k", "v", 0).await.unwrap();
    let own = client.with_timeout(Duration::from_millis(150));
    let clone = client.clone();
    assert!(client.set_timeout(Duration::ZERO).is_err());
    client.set_timeout(Duration::from_millis(60)).unwrap();
    server.stop();
    let error = clone.get("k").await.unwrap_err().to_string();
    assert!(error.contains("60ms"), "{error}");
    let error = own.get("k").await.unwrap_err().to_string();
    assert!(error.contains("150ms"), "{error}");
    server.resume();
}
