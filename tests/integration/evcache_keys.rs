//! EVCache's hashed keys against Java: a harness compiled here with JDK 17,
//! Debian's Guava and spymemcached (`interop/EvcacheHarness.java`, and the
//! `EVCacheValue` envelope class written from EVCache's documented shape),
//! hashes keys as EVCache 5.x does, writes enveloped values through a ketama
//! spymemcached client into real memcached, and reads what memgroup wrote.
//! Keys with non-ASCII, non-BMP characters and NUL, of 199 to 1,000
//! characters, under every algorithm, in both scopes (every key, keys over
//! 200 characters).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use memgroup::client::evcache::{EvcacheHashAlgorithm, EvcacheKeyHash, EvcacheKeys};
use memgroup::client::value::ValueFormat;
use memgroup::client::{Client, ErrorKind, MetaFlag};
use memgroup::hash::HashStrategy;

use crate::interop::{SPY_JAR, run, target_dir};
use crate::support::{Memcached, memgroup, raw, server_list};

const GUAVA_JAR: &str = "/usr/share/java/guava.jar";

const ALGORITHMS: [EvcacheHashAlgorithm; 7] = [
    EvcacheHashAlgorithm::SipHash24,
    EvcacheHashAlgorithm::Md5,
    EvcacheHashAlgorithm::Sha1,
    EvcacheHashAlgorithm::Sha256,
    EvcacheHashAlgorithm::Murmur3,
    EvcacheHashAlgorithm::Crc32,
    EvcacheHashAlgorithm::Adler32,
];

/// The compiled harness's class directory (compiled once per run).
fn harness() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        for jar in [SPY_JAR, GUAVA_JAR] {
            assert!(
                Path::new(jar).exists(),
                "{jar} is missing: install libspymemcached-java and libguava-java \
                 (.ci/run and `cargo xtask test` as root do)"
            );
        }
        let dir = target_dir().join("evcache-java");
        std::fs::create_dir_all(&dir).unwrap();
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/integration/interop");
        run(Command::new("javac")
            .args([
                "-encoding",
                "UTF-8",
                "-cp",
                &format!("{SPY_JAR}:{GUAVA_JAR}"),
                "-d",
            ])
            .arg(&dir)
            .arg(src.join("EvcacheHarness.java"))
            .arg(src.join("com/netflix/evcache/pool/EVCacheValue.java")));
        dir
    })
}

pub(crate) fn java(
    mode: &str,
    servers: &[Memcached],
    algorithm: EvcacheHashAlgorithm,
    every: bool,
    prefix: &str,
) -> String {
    let list: Vec<String> = servers.iter().map(Memcached::addr_string).collect();
    let classpath = format!("{SPY_JAR}:{GUAVA_JAR}:{}", harness().display());
    run(Command::new("java")
        .args([
            "-Dfile.encoding=UTF-8",
            "-cp",
            &classpath,
            "EvcacheHarness",
            mode,
        ])
        .arg(list.join(" "))
        .args([
            algorithm.name(),
            "0",
            "0",
            if every { "every" } else { "auto" },
            prefix,
        ]))
}

/// The harness's canonical keys, in its order.
pub(crate) fn cases(prefix: &str) -> Vec<String> {
    let p = prefix.encode_utf16().count();
    vec![
        format!("{prefix}plain"),
        format!("{prefix}héllo-wörld-ключ"),
        format!("{prefix}emoji-😀-𝄞"),
        format!("{prefix}nul\0{}", "n".repeat(200)),
        format!("{prefix}{}", "x".repeat(199 - p)),
        format!("{prefix}{}", "y".repeat(200 - p)),
        format!("{prefix}{}", "z".repeat(201 - p)),
        format!("{prefix}{}", "é".repeat(201 - p)),
        format!("{prefix}{}k", "😀".repeat(100)),
        format!("{prefix}{}", "w".repeat(1000 - p)),
    ]
}

pub(crate) fn value_of(i: usize) -> String {
    if i == 1 {
        "a long value, compressed inside the envelope. ".repeat(20)
    } else {
        format!("value {i} é")
    }
}

fn keys(algorithm: EvcacheHashAlgorithm, every: bool) -> EvcacheKeys {
    let hash = EvcacheKeyHash::new(algorithm);
    if every {
        EvcacheKeys::every_key(hash)
    } else {
        EvcacheKeys::long_keys(hash)
    }
}

fn client(servers: &[Memcached], keys: EvcacheKeys) -> Client {
    Client::builder()
        .servers(&server_list(servers))
        .hash(HashStrategy::Ketama)
        .value_format(ValueFormat::evcache())
        .evcache_keys(keys)
        .build()
        .unwrap()
}

#[test]
fn wire_keys_equal_evcaches_for_every_algorithm_cap_and_scope() {
    let table = java("keys", &[], EvcacheHashAlgorithm::Md5, true, "app:");
    let cases = cases("app:");
    let mut checked = 0;
    for line in table.lines() {
        let f: Vec<&str> = line.split('\t').collect();
        let algorithm: EvcacheHashAlgorithm = f[0].parse().unwrap();
        let (digest, length): (usize, usize) = (f[1].parse().unwrap(), f[2].parse().unwrap());
        let mut hash = EvcacheKeyHash::new(algorithm);
        if digest > 0 {
            hash = hash.max_digest_bytes(digest);
        }
        if length > 0 {
            hash = hash.max_hash_length(length);
        }
        let keys = if f[3] == "every" {
            EvcacheKeys::every_key(hash)
        } else {
            EvcacheKeys::long_keys(hash)
        };
        let case = &cases[f[4].parse::<usize>().unwrap()];
        let ours = keys.wire_key(case.as_bytes()).unwrap_or_else(|| "-".into());
        assert_eq!(ours, f[5], "{line}");
        checked += 1;
    }
    assert_eq!(checked, ALGORITHMS.len() * 3 * 2 * cases.len());
}

/// Java writes, memgroup reads; memgroup writes, Java reads: every case,
/// every algorithm, both scopes, over three servers routed by ketama on the
/// hashed key (a key routed on the canonical key would miss).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn values_under_hashed_keys_both_ways_for_every_algorithm() {
    let servers: Vec<Memcached> = (0..3).map(|_| Memcached::spawn()).collect();
    for algorithm in ALGORITHMS {
        for every in [true, false] {
            let client = client(&servers, keys(algorithm, every));
            let prefix = format!("j{}{}:", algorithm.name(), u8::from(every));
            java("write", &servers, algorithm, every, &prefix);
            for (i, key) in cases(&prefix).iter().enumerate() {
                let got = client.get_as::<String>(key).await.unwrap();
                assert_eq!(
                    got.as_deref(),
                    Some(&*value_of(i)),
                    "{algorithm} every={every} case {i}"
                );
            }
            let prefix = format!("r{}{}:", algorithm.name(), u8::from(every));
            for (i, key) in cases(&prefix).iter().enumerate() {
                client.set_as(key, &value_of(i), 0).await.unwrap();
            }
            let report = java("read", &servers, algorithm, every, &prefix);
            let lines: Vec<&str> = report.lines().collect();
            assert_eq!(lines.len(), cases(&prefix).len(), "{report}");
            for line in lines {
                assert!(
                    line.ends_with("\tok"),
                    "{algorithm} every={every}: Java read {line}"
                );
            }
        }
    }
}

/// The key prefix (`app:`, EVCache's cache prefix `app`) is part of the
/// canonical key hashed and held in the envelope, as EVCache's is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_key_prefix_is_part_of_the_canonical_key() {
    let servers: Vec<Memcached> = (0..3).map(|_| Memcached::spawn()).collect();
    let client = Client::builder()
        .servers(&server_list(&servers))
        .hash(HashStrategy::Ketama)
        .value_format(ValueFormat::evcache())
        .key_prefix("movies:")
        .evcache_keys(keys(EvcacheHashAlgorithm::SipHash24, true))
        .build()
        .unwrap();
    java(
        "write",
        &servers,
        EvcacheHashAlgorithm::SipHash24,
        true,
        "movies:",
    );
    for (i, canonical) in cases("movies:").iter().enumerate() {
        let key = canonical.strip_prefix("movies:").unwrap();
        let got = client.get_as::<String>(key).await.unwrap();
        assert_eq!(got.as_deref(), Some(&*value_of(i)), "case {i}");
    }
}

/// What lies under a hashed key that is not this key's envelope reads as a
/// miss: another key's envelope (a collision), a plain value, garbage, a
/// counter. delete, touch, incr and decr use the hashed key; append is
/// refused.
#[tokio::test]
async fn anything_but_this_keys_envelope_is_a_miss() {
    let server = Memcached::spawn();
    let servers = [server];
    // One base64 character of digest: keys collide quickly.
    let tiny =
        EvcacheKeys::every_key(EvcacheKeyHash::new(EvcacheHashAlgorithm::Md5).max_hash_length(1));
    let client = client(&servers, tiny);
    let first = "collide:0".to_string();
    let wire = tiny.wire_key(first.as_bytes()).unwrap();
    let other = (1..)
        .map(|i| format!("collide:{i}"))
        .find(|k| tiny.wire_key(k.as_bytes()).unwrap() == wire)
        .unwrap();
    client.set(&first, "first's", 0).await.unwrap();
    assert_eq!(client.get(&first).await.unwrap().unwrap().value, "first's");
    assert_eq!(
        client.get(&other).await.unwrap(),
        None,
        "a collision is a miss"
    );
    let addr = servers[0].addr();
    let (stored, flags, _) = raw::copy(addr, wire.as_bytes()).unwrap();
    assert_eq!(flags, 1, "the envelope's flags");
    assert_eq!(&stored[..2], [0xAC, 0xED], "Java serialization");
    for (bytes, flags) in [
        (&b"plain"[..], 0),
        (&b"\xac\xed\x00\x05garbage"[..], 1),
        (&stored[..stored.len() - 1], 1),
    ] {
        raw::set_with(addr, wire.as_bytes(), bytes, flags, 0);
        assert_eq!(client.get(&first).await.unwrap(), None, "{bytes:?}");
    }
    // Counters: the hashed key, no envelope, as EVCache applies them.
    let counter = "counter:1";
    let counter_wire = tiny.wire_key(counter.as_bytes()).unwrap();
    raw::set(addr, counter_wire.as_bytes(), b"10");
    assert_eq!(client.incr(counter, 5).await.unwrap(), Some(15));
    assert_eq!(client.decr(counter, 3).await.unwrap(), Some(12));
    assert_eq!(raw::copy(addr, counter_wire.as_bytes()).unwrap().0, b"12");
    assert_eq!(
        client.get(counter).await.unwrap(),
        None,
        "no envelope: EVCache misses it too"
    );
    client.set(&first, "again", 0).await.unwrap();
    assert!(client.touch(&first, 100).await.unwrap().applied());
    assert!(client.delete(&first).await.unwrap().applied());
    assert!(raw::copy(addr, wire.as_bytes()).is_none());
    let refused = client.append(&first, "x").await.unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::InvalidArgument, "{refused}");
}

/// The tool shares the hashed keys with services: `--evcache-keys` and
/// `[evcache_keys]` in cluster.toml store and read what the library does,
/// `route` shows the wire key, `config` the setting and where it came from.
#[test]
fn the_tool_and_cluster_toml_use_evcaches_keys() {
    let server = Memcached::spawn();
    let addr = server.addr_string();
    let hashed = EvcacheKeys::every_key(EvcacheKeyHash::new(EvcacheHashAlgorithm::Md5));
    let wire = hashed.wire_key(b"user:42").unwrap();
    let tool = |args: &[&str]| {
        let out = memgroup(args);
        assert!(out.status.success(), "{args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    tool(&[
        "--servers",
        &addr,
        "--evcache-keys",
        "every:md5",
        "set",
        "user:42",
        "hello",
    ]);
    let (stored, flags, _) = raw::copy(server.addr(), wire.as_bytes()).unwrap();
    assert_eq!(
        (flags, &stored[..2]),
        (1, &[0xAC, 0xED][..]),
        "an EVCacheValue"
    );
    let route = tool(&[
        "--servers",
        &addr,
        "--evcache-keys",
        "every:md5",
        "--json",
        "route",
        "user:42",
    ]);
    assert!(
        route.contains(&format!("\"wire_key\":\"{wire}\"")),
        "{route}"
    );
    let table = tool(&[
        "--servers",
        &addr,
        "--evcache-keys",
        "every:md5",
        "route",
        "user:42",
    ]);
    let row = table.lines().find(|l| l.starts_with("user:42")).unwrap();
    assert!(row.contains(&wire), "the wire key beside the key: {table}");
    let dir = crate::support::tempdir::Dir::new("evcache-keys");
    let file = dir.path().join("cluster.toml");
    std::fs::write(
        &file,
        format!("[evcache_keys]\nhash_key = true\nhash_algo = \"md5\"\n\n[[groups]]\nname = \"sg1\"\nservers = [\"{addr}\"]\n"),
    )
    .unwrap();
    let file = file.to_string_lossy().into_owned();
    assert_eq!(
        tool(&["--config", &file, "get", "user:42"]).trim_end(),
        "hello"
    );
    let config = tool(&["--config", &file, "config"]);
    let line = config.lines().find(|l| l.starts_with("long_keys")).unwrap();
    assert!(line.contains("EVCache: every key as md5"), "{line}");
    // Without the setting the key is a plain miss: nothing under it.
    let plain = memgroup(&["--servers", &addr, "get", "user:42"]);
    assert_eq!(plain.status.code(), Some(1), "{plain:?}");
}

/// Through `memgroup proxy --evcache-keys`, any client reads and writes the
/// EVCache apps' hashed keys by their canonical names: here memgroup's own
/// client as a plain one (no hashing of its own), over the meta commands
/// and the classic ones, reading what Java wrote and writing what Java
/// reads. The cases a text-protocol key can carry (no NUL, 250 bytes at
/// most: 201 characters of `z`, not of `é`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proxy_serves_hashed_keys_to_any_client() {
    use memgroup::client::MetaProtocol;
    let servers: Vec<Memcached> = (0..3).map(|_| Memcached::spawn()).collect();
    let list: Vec<String> = servers.iter().map(Memcached::addr_string).collect();
    let list = list.join(",");
    let proxy = crate::support::ToolProxy::start(
        &[
            "--servers",
            &list,
            "--hash",
            "ketama",
            "--evcache-keys",
            "every:md5",
        ],
        &[],
    );
    java("write", &servers, EvcacheHashAlgorithm::Md5, true, "p:");
    for meta in [MetaProtocol::Always, MetaProtocol::Never] {
        let plain = Client::builder()
            .servers(&proxy.addr.to_string())
            .meta_protocol(meta)
            .value_format(ValueFormat::evcache())
            .build()
            .unwrap();
        for (i, key) in carried(&cases("p:")) {
            let got = plain.get_as::<String>(key).await.unwrap();
            assert_eq!(got.as_deref(), Some(&*value_of(i)), "{meta:?} case {i}");
        }
    }
    let plain = Client::builder()
        .servers(&proxy.addr.to_string())
        .value_format(ValueFormat::evcache())
        .build()
        .unwrap();
    let written: Vec<usize> = carried(&cases("q:")).map(|(i, _)| i).collect();
    assert_eq!(written, [0, 1, 2, 4, 5, 6]);
    for (i, key) in carried(&cases("q:")) {
        if i == 0 {
            // A meta client's ms: its F and T go inside the envelope.
            let flags = [MetaFlag::SetFlags(0), MetaFlag::Ttl(100)];
            plain.meta_set(key, value_of(i), &flags).await.unwrap();
        } else {
            plain.set_as(key, &value_of(i), 0).await.unwrap();
        }
    }
    let report = java("read", &servers, EvcacheHashAlgorithm::Md5, true, "q:");
    let ok: Vec<usize> = report
        .lines()
        .filter(|l| l.ends_with("\tok"))
        .map(|l| l.split('\t').next().unwrap().parse().unwrap())
        .collect();
    assert_eq!(ok, written, "{report}");
}

/// The cases a text-protocol key can carry, with their numbers.
fn carried(cases: &[String]) -> impl Iterator<Item = (usize, &String)> {
    cases
        .iter()
        .enumerate()
        .filter(|(_, k)| memgroup::proto::Key::new(k.as_bytes()).is_ok())
}

/// The meta reads unwrap too: with `c` (answered by the arbiter group), and
/// without `f` (the envelope alone says what it is); an empty value reads
/// back empty, not as a lease stub's miss; a binary key (`b`) is refused,
/// as its digest would be decoded as base64; `warm` copies the hashed keys
/// a dump lists as they are.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn meta_reads_empty_values_binary_keys_and_warm() {
    let hashed = keys(EvcacheHashAlgorithm::Md5, true);
    let (sg1, sg2, client) = crate::support::two_zones(|b| {
        b.evcache_keys(hashed)
            .write_wait(memgroup::client::WriteWait::AllGroups)
    });
    client.set("k", "v", 0).await.unwrap();
    for flags in [
        &[
            MetaFlag::ReturnValue,
            MetaFlag::ReturnFlags,
            MetaFlag::ReturnCas,
        ][..],
        &[MetaFlag::ReturnValue][..],
    ] {
        let meta = client.meta_get("k", flags).await.unwrap().unwrap();
        assert_eq!(meta.value.as_deref(), Some(&b"v"[..]), "{flags:?}");
        if flags.contains(&MetaFlag::ReturnFlags) {
            assert_eq!(meta.flag(b'f'), Some(&b"0"[..]), "the client flags inside");
        }
    }
    client.set("empty", "", 0).await.unwrap();
    let empty = client.get("empty").await.unwrap();
    assert_eq!(empty.map(|i| i.value.len()), Some(0));
    let many = client.get_multi(&["empty", "k"]).await.unwrap();
    assert_eq!(many.hits().count(), 2);
    let binary = client
        .meta_get("k", &[MetaFlag::Base64Key, MetaFlag::ReturnValue])
        .await
        .unwrap_err();
    assert_eq!(binary.kind(), ErrorKind::InvalidArgument, "{binary}");

    // warm: sg2 emptied, then filled from sg1's listing of hashed keys.
    let wire = hashed.wire_key(b"k").unwrap();
    raw::delete(sg2.addr(), wire.as_bytes());
    let groups = format!("sg1={};sg2={}", sg1.addr_string(), sg2.addr_string());
    let out = memgroup(&[
        "--groups",
        &groups,
        "--evcache-keys",
        "every:md5",
        "warm",
        "--from",
        "sg1",
        "--to",
        "sg2",
    ]);
    assert!(out.status.success(), "{out:?}");
    let (copied, flags, _) = raw::copy(sg2.addr(), wire.as_bytes()).unwrap();
    assert_eq!(
        (flags, &copied[..2]),
        (1, &[0xAC, 0xED][..]),
        "the envelope copied as it is"
    );
    let read = memgroup(&[
        "--groups",
        &groups,
        "--zone",
        "sg2",
        "--evcache-keys",
        "every:md5",
        "get",
        "k",
    ]);
    assert_eq!(
        String::from_utf8_lossy(&read.stdout).trim_end(),
        "v",
        "{read:?}"
    );
}
