//! Real clients through `memgroup proxy` in front of two zones of two
//! servers: spymemcached (the Java harness) and python-memcached write every
//! type of value through the proxy, and the same harnesses, pointed straight
//! at each zone's servers with their own hashing, read every value back, so
//! each copy is in every group and on the server the fleet's routing names;
//! pymemcache works through it too, and its own integration suite passes
//! through the proxy every test it passes against a memcached.

use std::collections::BTreeSet;
use std::net::SocketAddr;

use memgroup::client::Client;
use memgroup::hash::HashStrategy;
use memgroup::proxy::{Proxy, ProxyConfig};

use crate::interop::{
    assert_all_ok, java_at, java_cases, pymemcache_suite, python, python_at, python_cases,
};
use crate::support::Memcached;

/// Two zones of two servers each, behind a proxy hashing with `hash`.
async fn zones_behind_a_proxy(hash: HashStrategy) -> ([Vec<Memcached>; 2], SocketAddr) {
    let zones = [
        vec![Memcached::spawn(), Memcached::spawn()],
        vec![Memcached::spawn(), Memcached::spawn()],
    ];
    let list = |z: &[Memcached]| {
        z.iter()
            .map(Memcached::addr_string)
            .collect::<Vec<_>>()
            .join(",")
    };
    let client = Client::builder()
        .evcache_groups(&format!("sg1={};sg2={}", list(&zones[0]), list(&zones[1])))
        .zone("sg1")
        .hash(hash)
        .write_wait(memgroup::client::WriteWait::AllGroups)
        .build()
        .unwrap();
    let proxy = Proxy::bind(
        client,
        ProxyConfig::listen(["127.0.0.1:0".parse().unwrap()]),
    )
    .await
    .unwrap();
    let addr = proxy.local_addrs()[0];
    tokio::spawn(proxy.serve());
    (zones, addr)
}

/// Runs a blocking harness off the runtime the proxy serves on.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spymemcached_through_the_proxy_lands_where_ketama_says_in_every_zone() {
    let (zones, proxied) = zones_behind_a_proxy(HashStrategy::Ketama).await;
    let proxy_list = vec![proxied.to_string()];
    blocking(move || java_at("write", &proxy_list, 16_384, "jp:")).await;
    for zone in &zones {
        let list: Vec<String> = zone.iter().map(Memcached::addr_string).collect();
        let report = blocking(move || java_at("read", &list, 16_384, "jp:")).await;
        assert_all_ok(&report, java_cases().len());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_memcached_through_the_proxy_lands_where_its_hashing_says_in_every_zone() {
    let (zones, proxied) = zones_behind_a_proxy(HashStrategy::PythonMemcached).await;
    let through = proxied.to_string();
    blocking(move || python_at("write", &through, 100, "pp:")).await;
    for zone in &zones {
        let list = zone
            .iter()
            .map(Memcached::addr_string)
            .collect::<Vec<_>>()
            .join(",");
        let report = blocking(move || python_at("read", &list, 100, "pp:")).await;
        assert_all_ok(&report, python_cases().len());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pymemcache_works_through_the_proxy() {
    let (zones, proxied) = zones_behind_a_proxy(HashStrategy::Ketama).await;
    let script = format!(
        "from pymemcache.client.base import Client\n\
         c = Client(('{}', {}))\n\
         assert c.set('pm:a', b'alpha', expire=300)\n\
         assert c.get('pm:a') == b'alpha'\n\
         value, cas = c.gets('pm:a')\n\
         assert value == b'alpha'\n\
         assert c.cas('pm:a', b'beta', cas) is True\n\
         assert c.cas('pm:a', b'gamma', cas) is False\n\
         assert c.add('pm:a', b'x', noreply=False) is False\n\
         assert c.set_many({{'pm:%d' % i: b'v%d' % i for i in range(20)}}) == []\n\
         got = c.get_many(['pm:%d' % i for i in range(20)] + ['pm:none'])\n\
         assert len(got) == 20, got\n\
         c.set('pm:n', b'5')\n\
         assert c.incr('pm:n', 3) == 8\n\
         assert c.decr('pm:n', 10) == 0\n\
         assert c.touch('pm:a', 100, noreply=False)\n\
         assert c.delete('pm:0', noreply=False)\n\
         assert c.version().startswith(b'1.6.18')\n\
         print('ok')\n",
        proxied.ip(),
        proxied.port()
    );
    let out = blocking(move || {
        std::process::Command::new(python())
            .args(["-c", &script])
            .output()
            .unwrap()
    })
    .await;
    assert!(
        out.status.success() && out.stdout == b"ok\n",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Each zone holds pymemcache's final values or nothing (a conditional
    // write, decided at the arbiter sg1, clears the other zone's copy), read
    // straight from its servers by a client of that zone alone.
    for (i, zone) in zones.iter().enumerate() {
        let list = zone
            .iter()
            .map(Memcached::addr_string)
            .collect::<Vec<_>>()
            .join(",");
        let direct = Client::builder()
            .servers(&list)
            .hash(HashStrategy::Ketama)
            .build()
            .unwrap();
        let read = |k: &'static str| {
            let direct = direct.clone();
            async move { direct.get(k).await.unwrap().map(|i| i.value.to_vec()) }
        };
        let arbiter = i == 0;
        for (key, want) in [("pm:a", &b"beta"[..]), ("pm:n", b"0")] {
            let got = read(key).await;
            assert!(
                got.as_deref() == Some(want) || (!arbiter && got.is_none()),
                "zone {i}: {key} = {got:?}"
            );
        }
        assert_eq!(read("pm:0").await, None);
        assert_eq!(read("pm:7").await.as_deref(), Some(&b"v7"[..]));
    }
}

/// The tests of pymemcache's own integration suite (`test_integration.py`,
/// every client class, with and without a key prefix) that pass against
/// `port`, and pytest's last line.
fn pymemcache_passes(port: u16) -> (BTreeSet<String>, String) {
    let suite = pymemcache_suite();
    let out = std::process::Command::new(python())
        .args([
            "-m",
            "pytest",
            "-q",
            "-rA",
            "-p",
            "no:cacheprovider",
            "-W",
            "ignore",
        ])
        // Not its setup.cfg, which asks for coverage plugins.
        .args(["-c", "/dev/null", "--rootdir"])
        .arg(suite)
        .arg(suite.join("pymemcache/test/test_integration.py"))
        .args(["--port", &port.to_string()])
        .current_dir(suite)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let passed = text
        .lines()
        .filter_map(|l| l.strip_prefix("PASSED "))
        .map(str::to_string)
        .collect();
    (passed, text.lines().last().unwrap_or("").to_string())
}

/// pymemcache's own suite, once against a memcached and once through the
/// proxy in front of two zones: every test that passes against memcached
/// passes through the proxy (the conformance run of the text protocol).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pymemcaches_own_suite_passes_through_the_proxy() {
    let direct = Memcached::spawn();
    let (_zones, proxied) = zones_behind_a_proxy(HashStrategy::Ketama).await;
    let port = direct.addr().port();
    let (memcached, summary) = blocking(move || pymemcache_passes(port)).await;
    // The suite ran: it has about a hundred cases (100 pass on 1.6.18).
    assert!(memcached.len() >= 90, "against memcached: {summary}");
    let (through, summary) = blocking(move || pymemcache_passes(proxied.port())).await;
    let failing: Vec<&String> = memcached.difference(&through).collect();
    assert!(
        failing.is_empty(),
        "{} pass against memcached, not through the proxy: {failing:#?} ({summary})",
        failing.len()
    );
}
