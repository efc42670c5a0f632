//! Metrics through the `metrics` facade, as a debugging recorder sees
//! them: operation durations under OpenTelemetry's name and labels (an
//! error's kind on a failure), requests and connections per server, and
//! the fallback counter, from a real two-group cluster with a server
//! killed.

use memgroup::client::Client;
use metrics_util::debugging::{DebugValue, DebuggingRecorder};

use crate::support::two_zones;

/// Every recorded metric: name, sorted labels, value.
type Seen = Vec<(String, Vec<(String, String)>, DebugValue)>;

fn seen(recorder: &DebuggingRecorder) -> Seen {
    recorder
        .snapshotter()
        .snapshot()
        .into_vec()
        .into_iter()
        .map(|(key, _, _, value)| {
            let key = key.key();
            let mut labels: Vec<(String, String)> = key
                .labels()
                .map(|l| (l.key().to_string(), l.value().to_string()))
                .collect();
            labels.sort();
            (key.name().to_string(), labels, value)
        })
        .collect()
}

fn labels(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut l: Vec<(String, String)> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    l.sort();
    l
}

#[tokio::test(flavor = "current_thread")]
async fn operations_requests_and_fallbacks_are_recorded_by_the_convention() {
    let recorder = DebuggingRecorder::new();
    let _local = metrics::set_default_local_recorder(&recorder);
    let (mut a, b, client) = two_zones(|c| c.write_wait(memgroup::client::WriteWait::AllGroups));
    client.set("k", "v", 0).await.unwrap();
    client.get("k").await.unwrap();
    a.kill();
    // Served by sg2: a fallback.
    assert!(client.get("k").await.unwrap().is_some());
    let lone = Client::builder().servers(&a.addr_string()).build().unwrap();
    assert!(lone.get("k").await.is_err());

    let all = seen(&recorder);
    let find = |name: &str, want: &[(String, String)]| {
        all.iter()
            .find(|(n, l, _)| n == name && l == want)
            .map(|(_, _, v)| v)
            .unwrap_or_else(|| panic!("no {name} {want:?} in {all:#?}"))
    };
    let durations = |v: &DebugValue| match v {
        DebugValue::Histogram(h) => h.iter().map(|x| x.into_inner()).collect::<Vec<f64>>(),
        other => panic!("{other:?}"),
    };
    let ok_get = durations(find(
        "db.client.operation.duration",
        &labels(&[
            ("db.system.name", "memcached"),
            ("db.operation.name", "get"),
        ]),
    ));
    assert_eq!(ok_get.len(), 2, "two gets answered");
    assert!(
        ok_get.iter().all(|s| *s > 0.0 && *s < 5.0),
        "seconds: {ok_get:?}"
    );
    let set = durations(find(
        "db.client.operation.duration",
        &labels(&[
            ("db.system.name", "memcached"),
            ("db.operation.name", "set"),
        ]),
    ));
    assert_eq!(set.len(), 1);
    let failed = all
        .iter()
        .find(|(n, l, _)| {
            n == "db.client.operation.duration" && l.iter().any(|(k, _)| k == "error.type")
        })
        .expect("the failed get has error.type");
    assert!(
        failed
            .1
            .contains(&("db.operation.name".into(), "get".into()))
    );
    let port = b.addr().port().to_string();
    let opened = find(
        "memgroup.client.connections.opened",
        &labels(&[("server.address", "127.0.0.1"), ("server.port", &port)]),
    );
    assert!(
        matches!(opened, DebugValue::Counter(n) if *n >= 1),
        "{opened:?}"
    );
    assert!(matches!(
        find("memgroup.client.fallbacks", &[]),
        DebugValue::Counter(1)
    ));
    let names: std::collections::BTreeSet<&str> = all.iter().map(|(n, _, _)| n.as_str()).collect();
    eprintln!("metrics recorded: {names:?}");
}
