//! Writes that return at their policy, and missed writes repaired: a group
//! whose server did not take a write is sent a delete of the key once it
//! answers again, so it holds the newest value or nothing. Real memcached,
//! stalled by SIGSTOP; tokio's clock held by the test (timeouts, backoffs
//! and the repair's grace pass when it says), every copy read on the
//! servers themselves.

use std::sync::Arc;
use std::time::Duration;

use memgroup::client::{Client, GroupState, ServerState};

use crate::support::{HeldClock, Memcached, advance_until, raw, two_zones};

const TIMEOUT: Duration = Duration::from_millis(300);
const BACKOFF: Duration = Duration::from_secs(1);
const GRACE: Duration = Duration::from_secs(1);
const TICK: Duration = crate::support::TICK;

/// Groups `sg1` (the client's zone) and `sg2` of one server each.
fn cluster() -> (Memcached, Memcached, Client) {
    two_zones(|b| {
        b.timeout(TIMEOUT)
            .backoff(BACKOFF, Duration::from_secs(8))
            .repair_grace(GRACE)
            .repair_queue(10_000)
    })
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_set_returns_at_its_policy_and_the_stalled_groups_copy_is_repaired() {
    let _clock = HeldClock::hold();
    let (sg1, sg2, client) = cluster();
    client.set("k", "v1", 0).await.unwrap();
    // (sg2's reply may come in after the call returned.)
    advance_until(3 * TICK, || client.health().background_writes == 0).await;
    sg2.stop();
    // all-minus-one is met by the local group alone: no time passes.
    let started = tokio::time::Instant::now();
    let outcome = client.set("k", "v2", 0).await.unwrap();
    assert_eq!(started.elapsed(), Duration::ZERO);
    assert_eq!(outcome.pending, [Arc::from("sg2")], "{outcome:?}");
    // Pending is neither applied nor missed: not partial, not complete.
    assert!(!outcome.is_partial() && !outcome.is_complete());
    assert_eq!(client.health().background_writes, 1);
    // The stalled group's part times out in the background: a repair.
    tokio::time::advance(TIMEOUT).await;
    advance_until(3 * TICK, || client.health().background_writes == 0).await;
    assert_eq!(client.health().repairs.pending, 1);
    // The settled outcome has it: sent, not answered, so unknown.
    let settled = outcome.settled().await;
    assert!(settled.pending.is_empty(), "{settled:?}");
    assert!(settled.is_partial() && !settled.is_complete());
    assert_eq!(
        settled.in_state(GroupState::Unknown).collect::<Vec<_>>(),
        ["sg2"]
    );
    let states: Vec<GroupState> = settled
        .groups
        .iter()
        .map(memgroup::client::GroupOutcome::state)
        .collect();
    assert_eq!(states, [GroupState::Applied, GroupState::Unknown]);
    // A close cannot drain it while the server is stalled, and says so.
    let (closed, ()) = tokio::join!(
        client.close(Duration::from_millis(500)),
        tokio::time::advance(Duration::from_millis(500))
    );
    let err = closed.unwrap_err();
    assert!(
        err.is_timeout() && err.to_string().contains("closing: 1 repair still pending"),
        "{err}"
    );
    // Resumed, the server applies the set still in its socket, then the
    // repair's first delete behind it on the same connection.
    sg2.resume();
    advance_until(3 * TICK, || raw::get(sg2.addr(), b"k").is_none()).await;
    assert_eq!(
        client.health().repairs.pending,
        1,
        "a confirming delete is due"
    );
    // A copy landing late (the old socket of a server that was stalled) is
    // never read while the repair is pending: with the local copy gone, the
    // read finds nothing rather than the stale one.
    raw::set(sg2.addr(), b"k", b"late");
    raw::delete(sg1.addr(), b"k");
    assert_eq!(client.get("k").await.unwrap(), None);
    // The grace period later, the confirming delete removes it.
    let took = advance_until(GRACE + 3 * TICK, || client.health().repairs.pending == 0).await;
    assert!(took >= GRACE - TICK, "{took:?}");
    assert_eq!(raw::get(sg2.addr(), b"k"), None);
    let status = client.health();
    assert_eq!((status.repairs.repaired, status.repairs.dropped), (1, 0));
    client.close(Duration::ZERO).await.unwrap();
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_delete_that_skipped_a_down_server_reaches_it_once_it_is_back() {
    let _clock = HeldClock::hold();
    let (sg1, sg2, client) = cluster();
    client.set("gone", "old", 0).await.unwrap();
    advance_until(3 * TICK, || client.health().background_writes == 0).await;
    sg2.stop();
    // Three timeouts in a row (the writes' and the first repairs' own) mark
    // the stalled server down.
    let dead = || {
        let status = client.health();
        let sg2 = status
            .servers
            .iter()
            .find(|s| s.server == sg2.addr_string());
        matches!(sg2.unwrap().state, ServerState::Dead { .. })
    };
    let mut writes = 0;
    while !dead() {
        assert!(writes < 3, "still up after {writes} timed-out writes");
        let outcome = client.set(format!("other:{writes}"), "x", 0).await.unwrap();
        assert_eq!(outcome.pending, [Arc::from("sg2")], "{outcome:?}");
        tokio::time::advance(TIMEOUT).await;
        advance_until(3 * TICK, || client.health().background_writes == 0).await;
        writes += 1;
    }
    // The delete passes the down server over: without a repair its old copy
    // would be served again once it is back.
    let outcome = client.delete("gone").await.unwrap();
    assert!(
        outcome
            .groups
            .iter()
            .any(|g| &*g.group == "sg2" && g.result.is_err())
    );
    assert_eq!(client.health().repairs.pending, writes + 1);
    assert_eq!(raw::get(sg1.addr(), b"gone"), None);
    sg2.resume();
    // Back after its backoff (a probe answered), each repair's two deletes.
    let took = advance_until(BACKOFF + GRACE + 5 * TICK, || {
        client.health().repairs.pending == 0
    })
    .await;
    assert_eq!(
        raw::get(sg2.addr(), b"gone"),
        None,
        "repaired after {took:?}"
    );
    for i in 0..writes {
        assert_eq!(raw::get(sg2.addr(), format!("other:{i}").as_bytes()), None);
    }
    assert_eq!(client.health().repairs.repaired, writes as u64 + 1);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_full_repair_queue_drops_its_oldest_and_counts_them() {
    let _clock = HeldClock::hold();
    let events = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = events.clone();
    let (_sg1, sg2, client) = two_zones(|b| {
        b.timeout(TIMEOUT)
            .backoff(Duration::from_secs(60), Duration::from_secs(60))
            .repair_queue(2)
            .on_event(move |e| {
                if matches!(e, memgroup::client::Event::RepairsDropped { capacity: 2 }) {
                    seen.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
            })
    });
    client.set("warm", "up", 0).await.unwrap();
    advance_until(3 * TICK, || client.health().background_writes == 0).await;
    drop(sg2);
    for i in 0..5 {
        client.delete(format!("k{i}")).await.unwrap();
        advance_until(3 * TICK, || client.health().background_writes == 0).await;
    }
    let repairs = client.health().repairs;
    assert_eq!((repairs.pending, repairs.dropped), (2, 3), "{repairs:?}");
    assert_eq!(events.load(std::sync::atomic::Ordering::Relaxed), 1);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_write_from_another_zone_waits_for_the_arbiter() {
    let _clock = HeldClock::hold();
    // The arbiter is sg1 (first by name); this client's zone is sg2. A
    // `gets` or `cas` right after a `set` is decided by the arbiter, so the
    // set waits for it, even while it is stalled.
    let (sg1, _sg2, client) = two_zones(|b| b.zone("sg2").timeout(TIMEOUT));
    client.set("k", "v1", 0).await.unwrap();
    assert_eq!(client.gets("k").await.unwrap().unwrap().value, "v1");
    sg1.stop();
    let started = tokio::time::Instant::now();
    let ((outcome, took), ()) = tokio::join!(
        async { (client.set("k", "v2", 0).await, started.elapsed()) },
        async {
            crate::support::let_io_happen().await;
            tokio::time::advance(TIMEOUT).await;
        }
    );
    let outcome = outcome.unwrap();
    assert_eq!(took, TIMEOUT);
    assert!(outcome.pending.is_empty(), "{outcome:?}");
    let arbiter = outcome.groups.iter().find(|g| &*g.group == "sg1").unwrap();
    assert!(
        arbiter
            .result
            .as_ref()
            .is_err_and(memgroup::client::Error::is_timeout),
        "{outcome:?}"
    );
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn an_outcome_lists_its_groups_in_the_topologys_order_however_they_answer() {
    let _clock = HeldClock::hold();
    let (sg1, sg2, client) = two_zones(|b| {
        b.timeout(TIMEOUT)
            .write_wait(memgroup::client::WriteWait::AllGroups)
    });
    client.set("k", "v1", 0).await.unwrap();
    // sg1 answers last: stalled until sg2 has applied the set.
    sg1.stop();
    let ((outcome, sets), ()) = tokio::join!(
        async {
            let outcome = client.set("k", "v2", 0).await;
            (outcome, raw::stat(sg2.addr(), "cmd_set"))
        },
        async {
            while raw::stat(sg2.addr(), "cmd_set") < 2 {
                crate::support::let_io_happen().await;
            }
            // The client takes sg2's reply before sg1 can answer.
            crate::support::let_io_happen().await;
            sg1.resume();
        }
    );
    let outcome = outcome.unwrap();
    assert_eq!(sets, 2);
    let groups: Vec<(&str, bool)> = outcome
        .groups
        .iter()
        .map(|g| (&*g.group, matches!(g.result, Ok(true))))
        .collect();
    assert_eq!(groups, [("sg1", true), ("sg2", true)], "{outcome:?}");
    assert_eq!(raw::get(sg1.addr(), b"k").as_deref(), Some(&b"v2"[..]));
}

/// The soak's divergent key (`versions [64, 63]`): a write handed to a
/// stalled server and then cut off when the server was marked down (three
/// timeouts in a row abort what waits on its connections) counted as a
/// known miss, so a later write applied there superseded its repair; the
/// old bytes, still in the server's socket, could land after that later
/// write and stay. Cut off after it was handed over, its outcome is
/// unknown: the repair stands, and its confirming pass removes the late
/// copy.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_write_cut_off_by_its_server_going_down_may_still_land_and_stays_repaired() {
    let _clock = HeldClock::hold();
    let (sg1, sg2, client) = cluster();
    client.set("k", "v62", 0).await.unwrap();
    advance_until(3 * TICK, || client.health().background_writes == 0).await;
    sg2.stop();
    // Three writes wait on the stalled server; half a timeout later, k's.
    for key in ["a", "b", "c"] {
        client.set(key, "x", 0).await.unwrap();
    }
    tokio::time::advance(TIMEOUT / 2).await;
    let outcome = client.set("k", "v63", 0).await.unwrap();
    assert_eq!(outcome.pending, [Arc::from("sg2")], "{outcome:?}");
    // The first three time out, marking sg2 down: k's part is cut off.
    tokio::time::advance(TIMEOUT / 2).await;
    advance_until(3 * TICK, || client.health().background_writes == 0).await;
    assert_eq!(client.health().repairs.pending, 4);
    sg2.resume();
    // Back after its backoff (a probe answered), the next write of k is
    // applied there.
    advance_until(BACKOFF + 5 * TICK, || {
        client
            .health()
            .servers
            .iter()
            .all(|s| matches!(s.state, ServerState::Up))
    })
    .await;
    client.set("k", "v64", 0).await.unwrap();
    advance_until(3 * TICK, || client.health().background_writes == 0).await;
    assert_eq!(raw::get(sg2.addr(), b"k").as_deref(), Some(&b"v64"[..]));
    // v63 lands late from the old socket, after v64.
    raw::set(sg2.addr(), b"k", b"v63");
    // Its repair was not superseded: the confirming pass removes it.
    advance_until(GRACE + 5 * TICK, || client.health().repairs.pending == 0).await;
    assert_eq!(raw::get(sg1.addr(), b"k").as_deref(), Some(&b"v64"[..]));
    assert_ne!(
        raw::get(sg2.addr(), b"k").as_deref(),
        Some(&b"v63"[..]),
        "the late copy stayed"
    );
    client.close(Duration::ZERO).await.unwrap();
}

/// Healthy writes under the default wait (return at the policy, the other
/// zone's reply coming in later): none is partial, and each settled outcome
/// is complete, on two groups and on three.
#[tokio::test]
async fn healthy_writes_are_never_partial_and_settle_complete() {
    for groups in [2, 3] {
        let servers: Vec<Memcached> = (0..groups).map(|_| Memcached::spawn()).collect();
        let list: Vec<String> = servers
            .iter()
            .enumerate()
            .map(|(i, s)| format!("sg{}={}", i + 1, s.addr_string()))
            .collect();
        let client = Client::builder()
            .evcache_groups(&list.join(";"))
            .zone("sg1")
            .build()
            .unwrap();
        let (mut pending, mut partial, mut incomplete) = (0, 0, 0);
        for i in 0..1000 {
            let outcome = client.set(format!("k{i}"), "v", 0).await.unwrap();
            pending += usize::from(!outcome.pending.is_empty());
            partial += usize::from(outcome.is_partial());
            let settled = outcome.settled().await;
            partial += usize::from(settled.is_partial());
            incomplete += usize::from(!settled.is_complete() || !settled.pending.is_empty());
        }
        assert_eq!((partial, incomplete), (0, 0), "{groups} groups");
        // The default wait does return before the other zones answer.
        assert!(pending > 0, "{groups} groups: no write returned early");
        client.close(Duration::from_secs(5)).await.unwrap();
        // One write per key per group; the convergence check's cost: one
        // `me` per set in each group (the arbiter's copy, then each other
        // group's), no delete where nobody raced.
        for server in &servers {
            assert_eq!(raw::stat(server.addr(), "cmd_set"), 1000);
            assert_eq!(raw::stat(server.addr(), "cmd_meta"), 1000);
            assert_eq!(raw::stat(server.addr(), "delete_hits"), 0);
        }
    }
}

/// A cluster of one group sends nothing beyond the writes: a classic
/// `set` each, no check, no `me`.
#[tokio::test]
async fn one_group_sends_nothing_extra() {
    let server = Memcached::spawn();
    let client = Client::builder()
        .servers(&server.addr_string())
        .build()
        .unwrap();
    for i in 0..200 {
        let outcome = client.set(format!("k{i}"), "v", 0).await.unwrap();
        assert!(outcome.is_complete(), "{outcome:?}");
    }
    client.close(Duration::from_secs(5)).await.unwrap();
    assert_eq!(raw::stat(server.addr(), "cmd_set"), 200);
    assert_eq!(raw::stat(server.addr(), "cmd_meta"), 0);
    assert_eq!(raw::stat(server.addr(), "cmd_get"), 0);
}

/// `load` while a group's server is stalled: every write met its policy,
/// but that group missed them, so the tool says which group and exits 3
/// (it used to say `0 errors` and exit 0 with the zone's copies stale).
#[test]
fn load_during_a_stall_names_the_group_that_missed_and_exits_3() {
    let (sg1, sg2) = (Memcached::spawn(), Memcached::spawn());
    let groups = format!("sg1={};sg2={}", sg1.addr_string(), sg2.addr_string());
    sg2.stop();
    let out = crate::support::memgroup(&[
        "--groups",
        &groups,
        "--zone",
        "sg1",
        "--timeout-ms",
        "200",
        "load",
        "--count",
        "40",
    ]);
    sg2.resume();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(3), "{stdout}{stderr}");
    assert!(stdout.contains("(0 errors, 40 partly)"), "{stdout}");
    assert!(
        stderr.contains("group sg2 missed or did not answer 40 of the writes"),
        "{stderr}"
    );
    assert_eq!(raw::stat(sg1.addr(), "cmd_set"), 40);
}

/// A repair never removes a value this client wrote after the write it
/// repairs: a set that timed out on a stalled group, then at once a new
/// set applied everywhere, then the repair. The repair reads the copy's
/// CAS: the later write's own copy (its receipt) stays, through the
/// confirming pass too; only another copy would be deleted, by its CAS.
/// (A plain delete there lost the newest value: 5 of 40 keys.)
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_repair_keeps_the_value_this_client_wrote_after_the_missed_write() {
    let _clock = HeldClock::hold();
    // Not marked down by the 40 timeouts: the next writes reach it.
    let (sg1, sg2, client) = two_zones(|b| {
        b.timeout(TIMEOUT)
            .timeouts_until_down(0)
            .repair_grace(GRACE)
    });
    let keys: Vec<String> = (0..40).map(|i| format!("k{i}")).collect();
    sg2.stop();
    for key in &keys {
        client.set(key, "v1", 0).await.unwrap();
    }
    // sg2's parts time out (one timeout each, together: the server stays up).
    tokio::time::advance(TIMEOUT).await;
    advance_until(3 * TICK, || client.health().background_writes == 0).await;
    assert_eq!(client.health().repairs.pending, 40);
    sg2.resume();
    for key in &keys {
        let outcome = client.set(key, "v2", 0).await.unwrap().settled().await;
        assert!(outcome.is_complete(), "{outcome:?}");
    }
    advance_until(GRACE + 10 * TICK, || client.health().repairs.pending == 0).await;
    for key in &keys {
        assert_eq!(
            raw::get(sg1.addr(), key.as_bytes()).as_deref(),
            Some(&b"v2"[..])
        );
        assert_eq!(
            raw::get(sg2.addr(), key.as_bytes()).as_deref(),
            Some(&b"v2"[..]),
            "{key}: the repair removed the newer value"
        );
    }
    client.close(Duration::ZERO).await.unwrap();
}

/// Repairs outlive the process: deletes that passed over a group whose
/// server was down are repairs; the client closes before the server is
/// back, so it journals them. A second client opening the journal (the
/// next process) takes them: its reads never serve the stale copies, and
/// once the server answers it deletes them there. (In memory only, the
/// deleted values came back in that zone.)
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn repairs_a_client_could_not_drain_are_done_by_the_next_one() {
    let _clock = HeldClock::hold();
    let journal = crate::support::tempdir::Dir::new("journal");
    let (sg1, sg2) = (Memcached::spawn(), Memcached::spawn());
    let groups = format!("sg1={};sg2={}", sg1.addr_string(), sg2.addr_string());
    let client = |zone: &str| {
        Client::builder()
            .evcache_groups(&groups)
            .zone(zone)
            .timeout(TIMEOUT)
            .backoff(BACKOFF, Duration::from_secs(8))
            .repair_grace(GRACE)
            .repair_journal(journal.path())
            .build()
            .unwrap()
    };
    let first = client("sg1");
    assert_eq!(first.repair_journal(), Some(journal.path()));
    let keys: Vec<String> = (0..25).map(|i| format!("gone:{i}")).collect();
    for key in &keys {
        first.set(key, "old", 0).await.unwrap().settled().await;
    }
    sg2.stop();
    // Three timeouts in a row mark sg2 down.
    for i in 0..3 {
        first.set(format!("other:{i}"), "x", 0).await.unwrap();
    }
    tokio::time::advance(TIMEOUT).await;
    advance_until(3 * TICK, || first.health().background_writes == 0).await;
    // The deletes pass sg2 over: known missed, a repair each.
    for key in &keys {
        let outcome = first.delete(key).await.unwrap();
        assert!(outcome.is_partial(), "{outcome:?}");
    }
    assert_eq!(first.owed_repairs().len(), 28);
    let (closed, ()) = tokio::join!(first.close(Duration::from_millis(500)), async {
        tokio::time::advance(Duration::from_millis(500)).await;
    });
    let error = closed.unwrap_err().to_string();
    assert!(error.contains("28 journaled in"), "{error}");
    drop(first);
    sg2.resume();
    advance_until(3 * TICK, || raw::get(sg2.addr(), b"other:0").is_some()).await;
    for key in &keys {
        assert_eq!(
            raw::get(sg2.addr(), key.as_bytes()).as_deref(),
            Some(&b"old"[..])
        );
    }
    // The next process, reading from sg2's zone.
    let next = client("sg2");
    assert_eq!(next.health().repairs.pending, 28);
    for key in &keys {
        assert_eq!(
            next.get(key).await.unwrap(),
            None,
            "{key}: a stale copy served"
        );
    }
    advance_until(BACKOFF + GRACE + 10 * TICK, || {
        next.health().repairs.pending == 0
    })
    .await;
    for key in &keys {
        assert_eq!(
            raw::get(sg2.addr(), key.as_bytes()),
            None,
            "{key}: came back"
        );
    }
    next.close(Duration::ZERO).await.unwrap();
    assert!(
        memgroup::client::list_repair_journal(journal.path()).is_empty(),
        "nothing left journaled"
    );
}

/// The tool: a write command during a stall waits `--drain` for its
/// repairs, journals the rest, names the keys and exits 3; `repair --list`
/// shows them (held by no one); once the server is back, `repair` takes
/// and does them: every copy there is deleted or agrees, and the journal
/// is empty.
#[test]
fn the_tool_journals_what_it_could_not_repair_and_memgroup_repair_does_it() {
    let journal = crate::support::tempdir::Dir::new("tool-journal");
    let dir = journal.path().to_str().unwrap().to_string();
    let (sg1, sg2) = (Memcached::spawn(), Memcached::spawn());
    let groups = format!("sg1={};sg2={}", sg1.addr_string(), sg2.addr_string());
    let tool = |args: &[&str]| {
        let mut all = vec![
            "--groups",
            &groups,
            "--zone",
            "sg1",
            "--repair-journal",
            &dir,
        ];
        all.extend_from_slice(args);
        crate::support::memgroup(&all)
    };
    sg2.stop();
    let out = tool(&["--timeout-ms", "200", "--drain", "0.5", "set", "k", "new"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("1 journaled in"), "{stderr}");
    assert!(
        stderr.contains("k: not yet repaired in group sg2"),
        "{stderr}"
    );
    let listed = tool(&["--json", "repair", "--list"]);
    let text = String::from_utf8_lossy(&listed.stdout);
    let records: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(records.as_array().unwrap().len(), 1, "{text}");
    assert_eq!(records[0]["key"], "k");
    assert_eq!(records[0]["server"], sg2.addr_string());
    assert_eq!(records[0]["held"], false);
    // Forgetting another server's repairs leaves this one's.
    let forgot = tool(&["repair", "--forget", "127.0.0.1:1"]);
    assert!(
        String::from_utf8_lossy(&forgot.stdout).contains("forgot 0 repairs owed to 127.0.0.1:1"),
        "{forgot:?}"
    );
    assert_eq!(
        memgroup::client::list_repair_journal(journal.path()).len(),
        1
    );
    sg2.resume();
    let out = tool(&["--json", "repair", "--wait", "10"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(report[0]["taken"], 1, "{text}");
    assert_eq!(report[0]["left"].as_array().unwrap().len(), 0, "{text}");
    // The set that sat in sg2's socket landed, then the repair read its
    // CAS and deleted it: sg2 holds nothing, never an older value.
    assert_eq!(raw::get(sg2.addr(), b"k"), None);
    assert_eq!(raw::get(sg1.addr(), b"k").as_deref(), Some(&b"new"[..]));
    assert!(memgroup::client::list_repair_journal(journal.path()).is_empty());
}

/// `incr` while the other zone's server is stalled: the arbiter's count is
/// the answer, and the zone whose copy could not be cleared is named with
/// the key (its repair journaled); exit 3.
#[test]
fn incr_with_a_zone_stalled_names_the_copy_not_cleared_and_exits_3() {
    let journal = crate::support::tempdir::Dir::new("incr-journal");
    let (sg1, sg2) = (Memcached::spawn(), Memcached::spawn());
    let groups = format!("sg1={};sg2={}", sg1.addr_string(), sg2.addr_string());
    raw::set(sg1.addr(), b"n", b"10");
    raw::set(sg2.addr(), b"n", b"10");
    sg2.stop();
    let out = crate::support::memgroup(&[
        "--groups",
        &groups,
        "--timeout-ms",
        "200",
        "--drain",
        "0.3",
        "--repair-journal",
        journal.path().to_str().unwrap(),
        "incr",
        "n",
        "1",
    ]);
    sg2.resume();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(stdout.trim(), "11", "{stderr}");
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("n: not yet repaired in group sg2"),
        "{stderr}"
    );
}

/// A close whose deadline passes while a write is still outstanding in a
/// stalled group journals that group's repair (the write may still land
/// there): nothing a process leaves unfinished is only in its memory.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_write_still_outstanding_at_close_is_journaled() {
    let _clock = HeldClock::hold();
    let journal = crate::support::tempdir::Dir::new("outstanding");
    let (sg1, sg2) = (Memcached::spawn(), Memcached::spawn());
    let groups = format!("sg1={};sg2={}", sg1.addr_string(), sg2.addr_string());
    let client = Client::builder()
        .evcache_groups(&groups)
        .zone("sg1")
        .timeout(TIMEOUT)
        .repair_journal(journal.path())
        .build()
        .unwrap();
    client.set("k", "v1", 0).await.unwrap().settled().await;
    sg2.stop();
    let outcome = client.set("k", "v2", 0).await.unwrap();
    assert_eq!(outcome.pending, [Arc::from("sg2")], "{outcome:?}");
    let error = client.close(Duration::ZERO).await.unwrap_err().to_string();
    assert!(error.contains("1 journaled in"), "{error}");
    let journaled = memgroup::client::list_repair_journal(journal.path());
    assert_eq!(journaled.len(), 1, "{journaled:?}");
    let repair = &journaled[0].repair;
    assert_eq!(
        (repair.server.as_str(), &repair.key[..], repair.may_land),
        (sg2.addr_string().as_str(), &b"k"[..], true)
    );
    sg2.resume();
}

/// `memgroup config` shows where the repair journal is and where that came
/// from: the flag over the environment over the file; `off` anywhere.
#[test]
fn config_shows_the_repair_journal_and_its_origin() {
    let row = |args: &[&str], env: Option<&str>| {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_memgroup"));
        command
            .args(["--servers", "127.0.0.1:1"])
            .args(args)
            .arg("config")
            .env_remove("MEMGROUP_CONFIG")
            .env_remove("MEMCACHED_SERVERS")
            .env_remove("MEMGROUP_GROUPS");
        match env {
            Some(dir) => command.env("MEMGROUP_REPAIR_JOURNAL", dir),
            None => command.env_remove("MEMGROUP_REPAIR_JOURNAL"),
        };
        let out = command.output().unwrap();
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .find(|l| l.starts_with("repair_journal"))
            .unwrap_or_default()
            .split_whitespace()
            .skip(1)
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert_eq!(
        row(&["--repair-journal", "/j/flag"], Some("/j/env")),
        "/j/flag flag --repair-journal"
    );
    assert_eq!(
        row(&[], Some("/j/env")),
        "/j/env environment MEMGROUP_REPAIR_JOURNAL"
    );
    assert_eq!(
        row(&[], Some("off")),
        "off environment MEMGROUP_REPAIR_JOURNAL"
    );
}

/// A write no server took changed nothing, so it owes no repair: a client
/// that could reach none of the servers (up for everyone else) once queued
/// a repair per group and, when they came back, deleted in every group the
/// value another client had written — an acknowledged write gone from
/// every zone with no fault on any server (the soak's losses). A write
/// that reached one group still repairs the group it missed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_that_reached_no_server_deletes_no_one_elses_copy() {
    use crate::support::relay::Switch;
    let (sg1, sg2) = (Memcached::spawn(), Memcached::spawn());
    let (mut via1, mut via2) = (Switch::to(sg1.addr()), Switch::to(sg2.addr()));
    let other = Client::builder()
        .evcache_groups(&format!(
            "sg1={};sg2={}",
            sg1.addr_string(),
            sg2.addr_string()
        ))
        .build()
        .unwrap();
    let cut_off = through(&via1, &via2);
    let copies = || [&sg1, &sg2].map(|s| raw::copy(s.addr(), b"k").map(|(value, _, _)| value));

    // Every server unreachable from `cut_off`: its write fails everywhere
    // unsent, and queues nothing.
    other.set("k", "theirs", 0).await.unwrap();
    via1.off();
    via2.off();
    assert!(cut_off.set("k", "mine", 0).await.is_err());
    crate::support::background_done(&cut_off).await;
    assert_eq!(cut_off.health().repairs.pending, 0);
    via1.on();
    via2.on();
    // (Read once the backoff lets it try the servers again.)
    let mut read = cut_off.get("k").await;
    for _ in 0..100 {
        if read.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        read = cut_off.get("k").await;
    }
    assert_eq!(read.unwrap().unwrap().value, b"theirs"[..]);
    cut_off.close(Duration::from_secs(5)).await.unwrap();
    let theirs = Some(b"theirs".to_vec());
    assert_eq!(copies(), [theirs.clone(), theirs]);

    // Reaching one group is landing: the other's copy is repaired away.
    let cut_off = through(&via1, &via2);
    via2.off();
    let outcome = cut_off.set("k", "mine", 0).await.unwrap().settled().await;
    assert!(outcome.is_partial(), "{outcome:?}");
    assert_eq!(cut_off.health().repairs.pending, 1);
    via2.on();
    cut_off.close(Duration::from_secs(5)).await.unwrap();
    assert_eq!(copies(), [Some(b"mine".to_vec()), None]);
}

/// A client of groups sg1 and sg2 through `via1` and `via2`, quick to try a
/// server again.
fn through(via1: &crate::support::relay::Switch, via2: &crate::support::relay::Switch) -> Client {
    Client::builder()
        .evcache_groups(&format!("sg1={};sg2={}", via1.addr(), via2.addr()))
        .zone("sg1")
        .backoff(Duration::from_millis(20), Duration::from_millis(100))
        .repair_grace(Duration::from_millis(50))
        .build()
        .unwrap()
}
