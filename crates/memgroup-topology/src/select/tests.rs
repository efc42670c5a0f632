use super::*;
use crate::{ClusterSpec, DeadHosts, GroupId, ReadFallback, ServerAddr};

/// The read targets' size hint bounds what they yield, and shrinks as
/// they are taken.
#[test]
fn read_targets_know_how_many_groups_are_left() {
    let mut spec = ClusterSpec::parse_evcache("a=h1:1;b=h2:1;c=h3:1").unwrap();
    spec.settings.read_fallback = ReadFallback::AllCopies;
    let topology = Topology::new(spec).unwrap();
    let dead = DeadHosts::new(&topology);
    let mut targets = topology.read_targets(b"k", &dead, Instant::now(), 0);
    assert_eq!(targets.size_hint(), (0, Some(3)));
    assert!(targets.next().is_some());
    assert_eq!(targets.size_hint(), (0, Some(2)));
    assert_eq!(targets.count(), 2);
}

/// Write targets know how many groups are left; targeted ones bound it;
/// the cursor counts the groups it offered.
#[test]
fn write_targets_and_cursors_count_what_is_left() {
    let mut spec = ClusterSpec::parse_evcache("a=h1:1;b=h2:1;c=h3:1").unwrap();
    spec.settings.read_fallback = ReadFallback::AllCopies;
    let topology = Topology::new(spec).unwrap();
    let dead = DeadHosts::new(&topology);
    let now = Instant::now();
    let mut writes = topology.write_targets(b"k", &dead, now, 0);
    assert_eq!(writes.size_hint(), (3, Some(3)));
    writes.next();
    assert_eq!(writes.size_hint(), (2, Some(2)));
    let groups = [GroupId(0), GroupId(2)];
    let mut targeted = topology.targeted_write_targets(b"k", &groups, &dead, now, 0, None);
    assert_eq!(targeted.size_hint(), (0, Some(2)));
    assert!(format!("{targeted:?}").starts_with("TargetedWrites"));
    targeted.next();
    assert_eq!(targeted.size_hint(), (0, Some(1)));
    let mut cursor = topology.read_cursor(b"k", 0);
    assert_eq!(cursor.groups_tried(), 0);
    cursor.next(&dead, now);
    cursor.next(&dead, now);
    assert_eq!(cursor.groups_tried(), 2);
}

#[test]
fn a_group_spec_finds_and_reweighs_its_servers() {
    let mut spec = ClusterSpec::parse_server_list("h1:1,h2:1").unwrap();
    let group = &mut spec.groups[0];
    let (h2, h9) = (ServerAddr::new("h2", 1), ServerAddr::new("h9", 1));
    assert_eq!(group.server(&h2).map(|s| &s.addr), Some(&h2));
    assert!(group.server(&h9).is_none());
    assert!(group.set_weight(&h2, 7));
    assert_eq!(group.server(&h2).unwrap().weight, 7);
    assert_eq!(group.servers[0].weight, 1);
    assert!(!group.set_weight(&h9, 7));
}

#[test]
fn specs_and_topologies_look_things_up_by_name() {
    use crate::{Settings, WritePolicy};
    let settings = Settings::default()
        .with_read_fallback(ReadFallback::Never)
        .with_write_policy(WritePolicy::One)
        .with_failover(false);
    assert_eq!(settings.read_fallback, ReadFallback::Never);
    assert_eq!(settings.write_policy, WritePolicy::One);
    assert_eq!(settings.failover, Some(false));

    let mut spec = ClusterSpec::parse_evcache("a=h1:1;b=h2:1,h3:1").unwrap();
    assert_eq!(spec.group("b").map(|g| g.servers.len()), Some(2));
    assert!(spec.group("z").is_none());
    let topology = Topology::new(spec.clone().with_sanitize_keys(true)).unwrap();
    assert_eq!(topology.group_by_name("b"), Some(GroupId(1)));
    assert_eq!(topology.group_by_name("z"), None);
    assert_eq!(
        topology.server_id(&ServerAddr::new("h3", 1)).map(|s| s.0),
        Some(2)
    );
    assert_eq!(topology.server_id(&ServerAddr::new("h9", 1)), None);
    // Whalin's sanitizing URL-encodes the key on the wire.
    assert_eq!(&topology.wire_key(GroupId(0), b"a b")[..], b"a+b");
    assert_eq!(&topology.wire_key(GroupId(0), b"plain")[..], b"plain");
    assert_eq!(
        spec.remove_group("a").map(|g| g.name),
        Some("a".to_string())
    );
    assert!(spec.remove_group("a").is_none());
    assert_eq!(spec.groups.len(), 1);
}

/// With more than 128 groups (the heap-backed set) as with fewer (the
/// inline one), a group counted twice still counts once toward the write
/// policy.
#[test]
fn write_policy_counts_each_of_many_groups_once() {
    use crate::WritePolicy;
    for n in [70, 130] {
        let list: Vec<String> = (0..n).map(|g| format!("g{g}=h{g}:1")).collect();
        let mut spec = ClusterSpec::parse_evcache(&list.join(";")).unwrap();
        spec.settings.write_policy = WritePolicy::All;
        let topology = Topology::new(spec).unwrap();
        let twice = std::iter::repeat_n(GroupId(5), n);
        assert!(!topology.write_succeeded(twice), "{n} groups");
        assert!(topology.write_succeeded((0..n).map(GroupId)), "{n} groups");
    }
}
