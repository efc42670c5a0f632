//! EVCache's per-group key settings as other software gives and reads
//! them: Java's EVCache format per group (the JDK harness), cluster.toml's
//! `evcache_keys` per `[[groups]]` entry, the `memgroup` tool and proxy.

use memgroup::client::Client;
use memgroup::client::evcache::EvcacheHashAlgorithm;
use memgroup::client::value::ValueFormat;

use crate::evcache_keys_groups::{builder, groups, wire_keys};
use crate::support::{Memcached, raw};

/// Java's EVCache, per group: the JDK harness writes each group's servers
/// with that group's settings and memgroup reads every case (non-ASCII,
/// non-BMP and NUL keys, keys of 199 to 1,000 characters) in every zone,
/// each from its own group; memgroup writes once and the harness reads
/// each group with its settings.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn java_reads_and_writes_each_group_with_its_own_settings() {
    use crate::evcache_keys::{cases, java, value_of};
    let (servers, list) = groups();
    let settings = [
        (EvcacheHashAlgorithm::Md5, true),
        (EvcacheHashAlgorithm::Md5, false),
        (EvcacheHashAlgorithm::Sha256, true),
    ];
    for (server, (algorithm, every)) in servers.iter().zip(settings) {
        java(
            "write",
            std::slice::from_ref(server),
            algorithm,
            every,
            "j:",
        );
    }
    for zone in ["sg1", "sg2", "sg3"] {
        let local = builder(&list, zone)
            .read_fallback(memgroup::topology::ReadFallback::Never)
            .build()
            .unwrap();
        for (i, key) in cases("j:").iter().enumerate() {
            let got = local.get_as::<String>(key).await.unwrap();
            assert_eq!(got.as_deref(), Some(&*value_of(i)), "{zone}: case {i}");
        }
    }
    let client = builder(&list, "sg1").build().unwrap();
    for (i, key) in cases("m:").iter().enumerate() {
        client.set_as(key, &value_of(i), 0).await.unwrap();
    }
    crate::support::background_done(&client).await;
    for (server, (algorithm, every)) in servers.iter().zip(settings) {
        let report = java("read", std::slice::from_ref(server), algorithm, every, "m:");
        let lines: Vec<&str> = report.lines().collect();
        assert_eq!(lines.len(), cases("m:").len(), "{report}");
        assert!(
            lines.iter().all(|l| l.ends_with("\tok")),
            "{algorithm}: {report}"
        );
    }
}

/// cluster.toml: a group's own `evcache_keys` over the file's
/// `[evcache_keys]` (what it does not give falls back, as EVCache's
/// properties do; `hash_key = false` stores keys as given). The tool writes
/// each group under its own key, `route` shows each group's, `config` each
/// group's setting, and a library client built from the file reads them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_toml_gives_groups_their_own_key_settings() {
    let (servers, _) = groups();
    let dir = crate::support::tempdir::Dir::new("group-keys");
    let file = dir.path().join("cluster.toml");
    let group = |name: &str, server: &Memcached, own: &str| {
        format!(
            "[[groups]]\nname = \"{name}\"\nservers = [\"{}\"]\n{own}\n",
            server.addr_string()
        )
    };
    std::fs::write(
        &file,
        format!(
            "[evcache_keys]\nhash_key = true\nhash_algo = \"md5\"\n\n{}{}{}",
            group("sg1", &servers[0], ""),
            group("sg2", &servers[1], "evcache_keys = { hash_key = false }"),
            group(
                "sg3",
                &servers[2],
                "evcache_keys = { hash_algo = \"sha256\" }"
            ),
        ),
    )
    .unwrap();
    let file = file.to_string_lossy().into_owned();
    let tool = |args: &[&str]| {
        let mut all = vec!["--config", &file];
        all.extend_from_slice(args);
        crate::support::memgroup_ok(&all)
    };
    tool(&["set", "user:42", "hello"]);
    let wire = wire_keys("user:42");
    for (server, wire) in servers.iter().zip(&wire) {
        assert!(raw::get(server.addr(), wire.as_bytes()).is_some(), "{wire}");
    }
    let route = tool(&["--json", "route", "user:42"]);
    for (group, wire) in ["sg1", "sg2", "sg3"].iter().zip(&wire) {
        let record = format!("\"wire_key\":\"{wire}\"");
        let line = route
            .split("},{")
            .find(|r| r.contains(&format!("\"group\":\"{group}\"")));
        assert!(
            line.is_some_and(|l| l.contains(&record)),
            "{group}: {route}"
        );
    }
    // warm copies keys as stored: not into a group that stores them otherwise.
    let warm =
        crate::support::memgroup(&["--config", &file, "warm", "--from", "sg1", "--to", "sg3"]);
    let said = String::from_utf8_lossy(&warm.stderr);
    assert_eq!(warm.status.code(), Some(2), "{said}");
    assert!(said.contains("sg3 has other key settings"), "{said}");
    let config = tool(&["config"]);
    let line = config.lines().find(|l| l.starts_with("long_keys")).unwrap();
    assert!(
        line.contains("sg2: keys as given") && line.contains("sg3: EVCache"),
        "{line}"
    );
    let client = memgroup::config::ClusterFile::read(&file)
        .unwrap()
        .builder()
        .unwrap()
        .value_format(ValueFormat::evcache())
        .build()
        .unwrap();
    assert_eq!(
        client.get_as::<String>("user:42").await.unwrap().as_deref(),
        Some("hello")
    );
    // Through the proxy: a plain memcached client's write lands in each
    // group under that group's key, and it reads it back.
    let proxy = crate::support::ToolProxy::start(&["--config", &file], &[]);
    let through = Client::builder()
        .servers(&proxy.addr.to_string())
        .build()
        .unwrap();
    through.set("via:proxy", "proxied", 0).await.unwrap();
    let wire_of_proxied = wire_keys("via:proxy");
    for (server, wire) in servers.iter().zip(&wire_of_proxied) {
        assert!(raw::get(server.addr(), wire.as_bytes()).is_some(), "{wire}");
    }
    let got = through
        .get("via:proxy")
        .await
        .unwrap()
        .map(|item| item.value);
    assert_eq!(got.as_deref(), Some(&b"proxied"[..]));
    let own: Vec<Vec<u8>> = client
        .wire_keys("user:42")
        .unwrap()
        .into_iter()
        .map(|(_, w)| w)
        .collect();
    assert_eq!(own, wire.map(String::into_bytes));
}
