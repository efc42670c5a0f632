//! The pool's snapshot: settings per server, names, what a topology change keeps.

use memgroup_topology::ClusterSpec;

use super::*;

fn topology(groups: &str) -> Topology {
    Topology::new(ClusterSpec::parse_evcache(groups).unwrap()).unwrap()
}

// The update fills `tls` when the feature is on.
#[allow(clippy::needless_update)]
fn login(user: &str) -> GroupSecurity {
    GroupSecurity {
        group: user.to_string(),
        credentials: Some(Arc::new(Credentials::new(user, "pw").unwrap())),
        ..GroupSecurity::default()
    }
}

fn user(snap: &Snapshot, server: &str) -> Option<String> {
    let id = snap.server_by_name(server).unwrap();
    let settings = snap.settings(id);
    settings
        .credentials
        .as_ref()
        .map(|c| c.username().to_string())
}

/// A server takes its group's own login, or none; names are found
/// exactly, and unknown ones are refused by name.
#[test]
fn servers_take_their_groups_settings_and_are_found_by_name() {
    let t = topology("a=h:1,h:2;b=h:3;c=h:4");
    let groups = [login("c"), login("b")];
    let snap = Snapshot::new(Arc::new(t), None, &ConnSettings::default(), &groups);
    assert_eq!(snap.server_count(), 4);
    for (server, expected) in [
        ("h:1", None),
        ("h:2", None),
        ("h:3", Some("b")),
        ("h:4", Some("c")),
    ] {
        assert_eq!(user(&snap, server).as_deref(), expected, "{server}");
        assert_eq!(&**snap.name(snap.server_by_name(server).unwrap()), server);
    }
    for unknown in ["h:5", "h:1 ", "h"] {
        let error = snap.server_by_name(unknown).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::InvalidArgument);
        assert!(error.to_string().contains(unknown), "{error}");
    }
    let none = Snapshot::new(
        Arc::new(topology("a=h:1")),
        None,
        &ConnSettings::default(),
        &[],
    );
    assert_eq!(user(&none, "h:1"), None);
}

/// A change keeps the slots and counters of the servers that stay (by
/// name, wherever they now are) and reports the others as added or
/// removed, in the order of their snapshot.
#[test]
fn a_topology_change_keeps_the_servers_that_stay() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let events = {
        let seen = seen.clone();
        Events::new(move |e| {
            if let Event::TopologyChanged { added, removed } = e {
                seen.lock().push((added.clone(), removed.clone()));
            }
        })
    };
    let pool = Pool::new(
        topology("a=h:1,h:2,h:3,h:4"),
        ConnSettings::default(),
        Vec::new(),
        events,
    );
    let before = pool.snapshot();
    pool.set_topology(topology("a=h:9,h:4;b=h:2,h:8:1"));
    let after = pool.snapshot();
    for server in ["h:2", "h:4"] {
        let (old, new) = (
            before.server_by_name(server).unwrap(),
            after.server_by_name(server).unwrap(),
        );
        assert!(
            Arc::ptr_eq(before.slot(old, 0), after.slot(new, 0)),
            "{server}"
        );
        assert!(Arc::ptr_eq(before.counters(old), after.counters(new)));
    }
    let fresh = after.server_by_name("h:9").unwrap();
    assert!(
        !before
            .slots
            .iter()
            .flatten()
            .any(|s| Arc::ptr_eq(s, after.slot(fresh, 0)))
    );
    let strings = |v: &[&str]| v.iter().map(ToString::to_string).collect::<Vec<_>>();
    assert_eq!(
        *seen.lock(),
        [(strings(&["h:9", "h:8"]), strings(&["h:1", "h:3"]))]
    );
}

/// Targets are chosen without the dead-host lock only while no server has a
/// failure on record: a failure shows in the next view (the server dead),
/// and once every server has answered again the view is clear.
#[test]
fn the_dead_host_view_is_clear_only_while_nothing_failed() {
    let pool = Pool::new(
        topology("a=h:1,h:2"),
        ConnSettings::default(),
        Vec::new(),
        Events::default(),
    );
    let snap = pool.snapshot();
    let (h1, h2) = (ServerId(0), ServerId(1));
    assert!(matches!(pool.dead_view(), DeadView::Clear(..)));
    let error = Error::new(ErrorKind::Connection, "refused");
    pool.failed(&snap, h1, &error);
    pool.failed(&snap, h2, &error);
    let view = pool.dead_view();
    assert!(matches!(view, DeadView::Locked(_)));
    assert!(view.is_dead(h1, now()) && view.is_dead(h2, now()));
    drop(view);
    // One back: the other still has its failure on record.
    assert!(pool.succeeded(h1));
    assert!(matches!(pool.dead_view(), DeadView::Locked(_)));
    assert!(pool.succeeded(h2));
    assert!(matches!(pool.dead_view(), DeadView::Clear(..)));
    assert!(!pool.succeeded(h2), "no failures left on record");
}

/// A clear record is judged at the pool's making, without a clock read per
/// choice; once a failure is on record the view reads the clock, so a
/// backoff ends when the clock says.
#[tokio::test(start_paused = true)]
async fn only_a_view_with_failures_reads_the_clock() {
    let pool = Pool::new(
        topology("a=h:1,h:2"),
        ConnSettings::default(),
        Vec::new(),
        Events::default(),
    );
    let made = now();
    tokio::time::advance(std::time::Duration::from_secs(5)).await;
    assert_eq!(pool.dead_view().now(), made, "no failure: no clock read");
    let error = Error::new(ErrorKind::Connection, "refused");
    pool.failed(&pool.snapshot(), ServerId(0), &error);
    let view = pool.dead_view();
    assert_eq!(view.now(), now());
    assert_eq!(view.now() - made, std::time::Duration::from_secs(5));
}
