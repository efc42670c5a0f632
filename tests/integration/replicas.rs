//! Replicas that agree: conditional and arithmetic writes decided by one
//! arbiter group, the other groups brought in line. Each test reads every
//! copy on the servers themselves.

use memgroup::client::{Client, IfPresent};

use crate::support::{Memcached, memgroup, raw};

/// Two groups of one server each; the arbiter is `sg1` (first by name).
pub(crate) fn two_groups() -> (Memcached, Memcached, String) {
    let (a, b) = (Memcached::spawn(), Memcached::spawn());
    // Listed local zone first, as services do: the arbiter is still sg1.
    let groups = format!("sg2={};sg1={}", b.addr_string(), a.addr_string());
    (a, b, groups)
}

fn client(groups: &str, zone: &str) -> Client {
    Client::builder()
        .evcache_groups(groups)
        .zone(zone)
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cas_from_any_zone_leaves_no_group_holding_another_value() {
    let (sg1, sg2, groups) = two_groups();
    let far = client(&groups, "sg2");
    far.set("k", "v1", 0).await.unwrap();
    // gets reads the arbiter's copy whatever the zone, so the unique matches.
    let item = far.gets("k").await.unwrap().unwrap();
    let outcome = far.cas("k", "v2", item.cas.unwrap(), 0).await.unwrap();
    assert!(outcome.applied(), "{outcome:?}");
    assert!(outcome.is_complete(), "{outcome:?}");
    // The outcome tells the group that decided from the one cleared.
    let cleared: Vec<(&str, bool)> = outcome
        .groups
        .iter()
        .map(|g| (&*g.group, g.cleared))
        .collect();
    assert_eq!(cleared, [("sg1", false), ("sg2", true)]);
    assert_eq!(raw::get(sg1.addr(), b"k").as_deref(), Some(&b"v2"[..]));
    // The other copy is gone, not the old value: its readers fall back.
    assert_eq!(raw::get(sg2.addr(), b"k"), None);
    assert_eq!(far.get("k").await.unwrap().unwrap().value, "v2");
    // A stale unique is refused by the arbiter, and the others still agree.
    let stale = far.cas("k", "v3", item.cas.unwrap(), 0).await.unwrap();
    assert!(!stale.applied());
    assert_eq!(raw::get(sg1.addr(), b"k").as_deref(), Some(&b"v2"[..]));
    assert_eq!(raw::get(sg2.addr(), b"k"), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn incr_answers_with_the_arbiters_count_and_no_replica_keeps_another() {
    let (sg1, sg2, groups) = two_groups();
    let far = client(&groups, "sg2");
    far.set("n", "10", 0).await.unwrap();
    // sg2 missed a write: its copy says 5.
    raw::set(sg2.addr(), b"n", b"5");
    assert_eq!(far.incr("n", 1).await.unwrap(), Some(11));
    assert_eq!(raw::get(sg1.addr(), b"n").as_deref(), Some(&b"11"[..]));
    assert_eq!(raw::get(sg2.addr(), b"n"), None);
    // The tool says the same from the far zone.
    let out = memgroup(&["--groups", &groups, "--zone", "sg2", "incr", "n", "1"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "12");
    // Two incr loops on one counter at once: the arbiter has every step,
    // and the replica holds nothing older.
    let loops: Vec<_> = (0..2)
        .map(|_| {
            let client = client(&groups, "sg2");
            tokio::spawn(async move {
                for _ in 0..200 {
                    client.incr("n", 1).await.unwrap();
                }
            })
        })
        .collect();
    for l in loops {
        l.await.unwrap();
    }
    assert_eq!(raw::get(sg1.addr(), b"n").as_deref(), Some(&b"412"[..]));
    assert_eq!(raw::get(sg2.addr(), b"n"), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn add_from_two_zones_grants_one_lock() {
    let (sg1, sg2, groups) = two_groups();
    let (near, far) = (client(&groups, "sg1"), client(&groups, "sg2"));
    for round in 0..50 {
        let key = format!("lock:{round}");
        let (a, b) = tokio::join!(near.add(&key, "near", 60), far.add(&key, "far", 60));
        let (a, b) = (a.unwrap(), b.unwrap());
        assert!(
            a.applied() != b.applied(),
            "round {round}: exactly one wins"
        );
        let winner = if a.applied() { "near" } else { "far" };
        assert_eq!(
            raw::get(sg1.addr(), key.as_bytes()).as_deref(),
            Some(winner.as_bytes())
        );
        // No group holds the loser's value.
        let other = raw::get(sg2.addr(), key.as_bytes());
        assert!(
            other.is_none() || other.as_deref() == Some(winner.as_bytes()),
            "{other:?}"
        );
    }
    // The warmer's targeted write is no conditional write: it fills sg2.
    near.add_or_set("w", "v", 0, &["sg2"], IfPresent::Keep)
        .await
        .unwrap();
    assert_eq!(raw::get(sg2.addr(), b"w").as_deref(), Some(&b"v"[..]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_its_arbiter_a_conditional_write_fails_unless_failover_is_on() {
    let (mut sg1, sg2, groups) = two_groups();
    sg1.kill();
    let far = client(&groups, "sg2");
    let error = far.add("k", "v", 0).await.unwrap_err();
    assert!(error.is_server_dead(), "{error}");
    assert!(error.to_string().contains("\"sg1\""), "{error}");
    assert_eq!(raw::get(sg2.addr(), b"k"), None, "nothing written");
    // Plain writes still follow their policy.
    far.set("plain", "v", 0).await.unwrap();
    let failing_over = Client::builder()
        .evcache_groups(&groups)
        .arbiter_failover(true)
        .build()
        .unwrap();
    assert!(failing_over.add("k", "v", 0).await.unwrap().applied());
    assert_eq!(raw::get(sg2.addr(), b"k").as_deref(), Some(&b"v"[..]));
}

#[test]
fn the_arbiter_can_be_named_in_the_file_or_by_flag() {
    let (sg1, sg2, groups) = two_groups();
    raw::set(sg1.addr(), b"n", b"10");
    raw::set(sg2.addr(), b"n", b"5");
    let run = memgroup;
    let out = run(&["--groups", &groups, "--arbiter", "sg2", "incr", "n", "1"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "6");
    assert_eq!(raw::get(sg1.addr(), b"n"), None);
    let dir = crate::support::tempdir::Dir::new("arbiter");
    let file = dir.path().join("cluster.toml");
    std::fs::write(
        &file,
        format!(
            "arbiter = \"sg2\"\n[[groups]]\nname = \"sg1\"\nservers = [\"{}\"]\n[[groups]]\nname = \"sg2\"\nservers = [\"{}\"]\n",
            sg1.addr_string(),
            sg2.addr_string()
        ),
    )
    .unwrap();
    let file = file.to_string_lossy().into_owned();
    let out = run(&["--config", &file, "incr", "n", "1"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "7");
    let shown = String::from_utf8_lossy(&run(&["--config", &file, "config"]).stdout).into_owned();
    let line = shown
        .lines()
        .find(|l| l.starts_with("arbiter"))
        .unwrap()
        .to_string();
    assert!(line.contains("sg2") && line.contains("file"), "{line}");
    let bad = run(&["--groups", &groups, "--arbiter", "sg9", "incr", "n", "1"]);
    assert_eq!(bad.status.code(), Some(2));
}

/// The tool's lines for a conditional write say which group decided and
/// which was only cleared: an `add` the arbiter applies clears the other
/// group's copy (a stale one, written outside memgroup), which does not
/// read as if it had stored the value; a `replace` of a missing key is "not
/// stored: no such key" at the arbiter and touches no other group.
#[test]
fn the_tool_tells_the_deciding_group_from_the_cleared_one() {
    let (sg1, sg2, groups) = two_groups();
    raw::set(sg2.addr(), b"r", b"stale");
    let out = memgroup(&["--groups", &groups, "add", "r", "new"]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(0), "{text}");
    let line = |text: &str, group: &str| {
        text.lines()
            .find(|l| l.starts_with(&format!("r: {group} ")))
            .unwrap_or_else(|| panic!("no line for {group}: {text}"))
            .to_string()
    };
    assert!(line(&text, "sg1").ends_with(": ok"), "{text}");
    assert!(
        line(&text, "sg2").ends_with(": copy cleared (the arbiter group decides)"),
        "{text}"
    );
    assert_eq!(raw::get(sg1.addr(), b"r").as_deref(), Some(&b"new"[..]));
    assert_eq!(raw::get(sg2.addr(), b"r"), None);
    raw::set(sg2.addr(), b"r2", b"stale");
    let out = memgroup(&["--groups", &groups, "replace", "r2", "new"]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(1), "{text}");
    let line = line(&text.replace("r2:", "r:"), "sg1");
    assert!(line.ends_with(": not stored: no such key"), "{text}");
    assert!(!text.contains("sg2"), "{text}");
    assert_eq!(raw::get(sg2.addr(), b"r2").as_deref(), Some(&b"stale"[..]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_meta_set_in_add_mode_is_decided_by_the_arbiter_too() {
    use memgroup::client::MetaFlag;
    use memgroup::proto::SetMode;
    let (sg1, sg2, groups) = two_groups();
    let far = client(&groups, "sg2");
    raw::set(sg2.addr(), b"m", b"stale");
    let add = [MetaFlag::SetMode(SetMode::Add)];
    // Absent at the arbiter: stored there, and the far copy deleted.
    assert!(far.meta_set("m", "new", &add).await.unwrap().applied());
    assert_eq!(raw::get(sg1.addr(), b"m").as_deref(), Some(&b"new"[..]));
    assert_eq!(raw::get(sg2.addr(), b"m"), None);
    // Present at the arbiter: refused, whatever the far group holds.
    assert!(!far.meta_set("m", "again", &add).await.unwrap().applied());
    assert_eq!(raw::get(sg1.addr(), b"m").as_deref(), Some(&b"new"[..]));
    // A plain ms still goes to every group.
    far.meta_set("p", "v", &[]).await.unwrap();
    assert_eq!(raw::get(sg2.addr(), b"p").as_deref(), Some(&b"v"[..]));
}

/// Three groups of one server each; the arbiter is `sg1`.
pub(crate) fn three_groups() -> ([Memcached; 3], String) {
    let servers = [Memcached::spawn(), Memcached::spawn(), Memcached::spawn()];
    let groups = format!(
        "sg3={};sg2={};sg1={}",
        servers[2].addr_string(),
        servers[1].addr_string(),
        servers[0].addr_string()
    );
    (servers, groups)
}

/// With three groups, cas, incr and decr from any zone leave the arbiter
/// deciding and no other group holding another value.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_three_groups_cas_and_counters_leave_no_group_disagreeing() {
    let (servers, groups) = three_groups();
    let others = || servers[1..].iter().map(|s| raw::get(s.addr(), b"k"));
    for zone in ["sg1", "sg2", "sg3"] {
        let c = client(&groups, zone);
        c.set("k", "v0", 0).await.unwrap();
        let cas = c.gets("k").await.unwrap().unwrap().cas.unwrap();
        assert!(c.cas("k", zone, cas, 0).await.unwrap().applied(), "{zone}");
        assert_eq!(
            raw::get(servers[0].addr(), b"k").as_deref(),
            Some(zone.as_bytes())
        );
        assert!(others().all(|copy| copy.is_none() || copy.as_deref() == Some(zone.as_bytes())));
        // A stale unique is refused by the arbiter, and changes nothing.
        assert!(!c.cas("k", "late", cas, 0).await.unwrap().applied());
        assert!(others().all(|copy| copy.as_deref() != Some(&b"late"[..])));
    }
    let c = client(&groups, "sg3");
    c.set("n", "100", 0).await.unwrap();
    raw::set(servers[2].addr(), b"n", b"7");
    assert_eq!(c.incr("n", 5).await.unwrap(), Some(105));
    assert_eq!(c.decr("n", 10).await.unwrap(), Some(95));
    // (memcached pads a counter that shrank in place with spaces.)
    let counter = raw::get(servers[0].addr(), b"n").map(|v| String::from_utf8(v).unwrap());
    assert_eq!(counter.as_deref().map(str::trim), Some("95"));
    for s in &servers[1..] {
        assert_eq!(raw::get(s.addr(), b"n"), None);
    }
}

/// After a conditional write only the arbiter's group holds the key: a read
/// in another zone that misses there falls back to the arbiter's group
/// first, so it finds the value on every rotation, not on some.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_that_missed_locally_asks_the_arbiter_next() {
    let (servers, groups) = three_groups();
    let c = client(&groups, "sg2");
    for i in 0..8 {
        let key = format!("ap{i}");
        c.set(&key, "a", 0).await.unwrap();
        assert!(c.append(&key, "b").await.unwrap().applied());
        crate::support::background_done(&c).await;
        // Only the arbiter (sg1) keeps the key.
        assert_eq!(
            raw::get(servers[0].addr(), key.as_bytes()).as_deref(),
            Some(&b"ab"[..])
        );
        for s in &servers[1..] {
            assert_eq!(raw::get(s.addr(), key.as_bytes()), None, "{key}");
        }
        // Reads rotate through the fallback groups: each finds it.
        for _ in 0..6 {
            let got = c.get(&key).await.unwrap().map(|item| item.value);
            assert_eq!(got.as_deref(), Some(&b"ab"[..]), "{key}");
        }
    }
}

/// `add` from two zones at once while a non-arbiter group's server is
/// stalled: exactly one wins each round, and once the server is back (and
/// its repairs drained) no group holds the loser's value.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn add_races_with_a_stalled_replica_grant_one_lock() {
    use std::time::Duration;

    use memgroup::client::{Error, ErrorKind, WriteOutcome};

    use crate::support::{HeldClock, TICK, advance_until};
    let _clock = HeldClock::hold();
    let (servers, groups) = three_groups();
    let build = |zone: &str| {
        Client::builder()
            .evcache_groups(&groups)
            .zone(zone)
            .timeout(Duration::from_millis(300))
            .backoff(Duration::from_secs(1), Duration::from_secs(8))
            .build()
            .unwrap()
    };
    let (near, far) = (build("sg1"), build("sg3"));
    servers[1].stop();
    let mut winners = Vec::new();
    for round in 0..5 {
        let key = format!("lock:{round}");
        let adds = [(near.clone(), "near"), (far.clone(), "far")].map(|(c, v)| {
            let key = key.clone();
            tokio::spawn(async move { c.add(&key, v, 60).await })
        });
        advance_until(10 * TICK, || {
            adds.iter().all(tokio::task::JoinHandle::is_finished)
        })
        .await;
        let [a, b] = adds;
        let (a, b) = (a.await.unwrap(), b.await.unwrap());
        let applied = |r: &Result<WriteOutcome, Error>| {
            r.as_ref().is_ok_and(WriteOutcome::applied)
                || r.as_ref()
                    .is_err_and(|e| e.kind() == ErrorKind::WritePolicy)
        };
        // A policy miss (the stalled group) is the arbiter's yes all the same.
        let (a_won, b_won) = (applied(&a), applied(&b));
        let refused = |r: &Result<WriteOutcome, Error>| r.as_ref().is_ok_and(|o| !o.applied());
        assert!(
            (a_won && refused(&b)) || (b_won && refused(&a)),
            "round {round}: exactly one wins: {a:?} / {b:?}"
        );
        winners.push((key, if a_won { "near" } else { "far" }));
    }
    servers[1].resume();
    advance_until(30 * TICK, || {
        near.health().repairs.pending == 0 && far.health().repairs.pending == 0
    })
    .await;
    for (key, winner) in &winners {
        assert_eq!(
            raw::get(servers[0].addr(), key.as_bytes()).as_deref(),
            Some(winner.as_bytes())
        );
        for s in &servers[1..] {
            let copy = raw::get(s.addr(), key.as_bytes());
            assert!(
                copy.is_none() || copy.as_deref() == Some(winner.as_bytes()),
                "{key}: {copy:?}"
            );
        }
    }
}

/// A conditional write the arbiter refused changed nothing there, so no
/// other group is touched: identical copies stay where they are.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_conditional_write_clears_no_group() {
    let (sg1, sg2, groups) = two_groups();
    let far = client(&groups, "sg2");
    far.set("k", "v", 0).await.unwrap();
    let refused = far.add("k", "other", 0).await.unwrap();
    assert!(!refused.applied(), "{refused:?}");
    let stale = far.cas("k", "other", 999_999, 0).await.unwrap();
    assert!(!stale.applied(), "{stale:?}");
    assert_eq!(
        refused.groups.iter().map(|g| &*g.group).collect::<Vec<_>>(),
        ["sg1"]
    );
    for server in [&sg1, &sg2] {
        assert_eq!(raw::get(server.addr(), b"k").as_deref(), Some(&b"v"[..]));
        assert_eq!(raw::stat(server.addr(), "delete_hits"), 0);
    }
}

/// An `add` sent to a stalled arbiter and not answered may have been
/// applied: it fails with its own kind, is not granted by a second arbiter
/// (arbiter failover on), and the other group's copy is still cleared.
/// Resumed, the arbiter applies it: the lock has one holder, the caller
/// that was told its outcome is unknown, and no second grant.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn an_unanswered_conditional_write_is_unknown_and_never_decided_twice() {
    use crate::support::{HeldClock, advance_until};
    use memgroup::client::ErrorKind;
    use std::time::Duration;
    let _clock = HeldClock::hold();
    let timeout = Duration::from_millis(300);
    let (sg1, sg2, groups) = two_groups();
    let far = Client::builder()
        .evcache_groups(&groups)
        .zone("sg2")
        .timeout(timeout)
        .arbiter_failover(true)
        .build()
        .unwrap();
    far.set("lock", "old", 0).await.unwrap();
    far.delete("lock").await.unwrap();
    raw::set(sg2.addr(), b"lock", b"stale");
    sg1.stop();
    let (added, ()) = tokio::join!(far.add("lock", "mine", 60), async {
        crate::support::let_io_happen().await;
        tokio::time::advance(timeout).await;
    });
    let error = added.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::OutcomeUnknown, "{error}");
    assert!(error.to_string().contains("\"sg1\""), "{error}");
    // Not granted at sg2 by failover; its stale copy cleared.
    advance_until(Duration::from_secs(1), || {
        raw::get(sg2.addr(), b"lock").is_none()
    })
    .await;
    sg1.resume();
    advance_until(Duration::from_secs(1), || {
        raw::get(sg1.addr(), b"lock").is_some()
    })
    .await;
    assert_eq!(raw::get(sg1.addr(), b"lock").as_deref(), Some(&b"mine"[..]));
    assert_eq!(raw::get(sg2.addr(), b"lock"), None);
    // The tool's exit code for it is 4, its own. (Told the servers speak
    // the meta protocol: a new process would otherwise ask the stalled
    // arbiter first, and, unanswered, send it nothing: exit 1.)
    sg1.stop();
    let out = memgroup(&[
        "--meta-protocol",
        "always",
        "--groups",
        &groups,
        "--zone",
        "sg2",
        "--timeout-ms",
        "300",
        "add",
        "other",
        "v",
    ]);
    sg1.resume();
    assert_eq!(out.status.code(), Some(4), "{out:?}");
}
