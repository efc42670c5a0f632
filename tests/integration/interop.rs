//! Values shared with the real Java and Python clients, both directions: the
//! spymemcached 2.12.3 jar (Debian `libspymemcached-java`, what EVCache builds
//! on) through a small Java program compiled here, and python-memcached 1.62
//! from PyPI in a venv made here. Each side writes every type — small, and
//! large enough to be compressed — and the other reads it back as its own type
//! and compares. The servers are three memcached processes and both sides
//! route by their ketama / python-memcached hashing, so routing is exercised
//! too: a key on the wrong server would read as a miss.
//!
//! `.ci/run` installs what these need (`cargo xtask test` does too, as root).
//! Run without it, they fail saying what is missing.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use bytes::Bytes;
use memgroup::client::Client;
use memgroup::client::value::{Value, ValueFormat};
use memgroup::hash::HashStrategy;

use crate::support::{Memcached, server_list};

pub(crate) const SPY_JAR: &str = "/usr/share/java/spymemcached.jar";

pub(crate) fn target_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("target")
        .join("interop");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

pub(crate) fn run(cmd: &mut Command) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The compiled Java harness's class directory (compiled once per run).
fn java_harness() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        assert!(
            Path::new(SPY_JAR).exists(),
            "{SPY_JAR} is missing: install the Debian package libspymemcached-java \
             (`apt-get install libspymemcached-java`; .ci/run and `cargo xtask test` as root do)"
        );
        let dir = target_dir().join("java");
        std::fs::create_dir_all(&dir).unwrap();
        let source =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/integration/interop/Harness.java");
        run(Command::new("javac")
            .args(["-cp", SPY_JAR, "-d"])
            .arg(&dir)
            .arg(source));
        dir
    })
}

/// A venv with python-memcached 1.62, pymemcache 4.0.0 and pytest (for
/// pymemcache's own suite), made once, kept under `target/`.
pub fn python() -> &'static Path {
    static PY: OnceLock<PathBuf> = OnceLock::new();
    PY.get_or_init(|| {
        let venv = target_dir().join("venv");
        let py = venv.join("bin/python");
        let ready = py.exists()
            && Command::new(&py)
                .args([
                    "-c",
                    "import memcache, pymemcache, pytest; assert memcache.__version__ == '1.62'",
                ])
                .status()
                .is_ok_and(|s| s.success());
        if !ready {
            run(Command::new("python3").args(["-m", "venv"]).arg(&venv));
            run(Command::new(venv.join("bin/pip")).args([
                "install",
                "--quiet",
                "python-memcached==1.62",
                "pymemcache==4.0.0",
                "pytest==9.2.0",
            ]));
        }
        py
    })
}

/// pymemcache 4.0.0's source distribution from PyPI (its own test suite
/// inside), unpacked once under `target/`.
pub fn pymemcache_suite() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = target_dir().join("pymemcache-4.0.0");
        if !dir.join("pymemcache/test/test_integration.py").exists() {
            let pip = python().with_file_name("pip");
            run(Command::new(pip)
                .args(["download", "--quiet", "--no-deps", "--no-binary", ":all:"])
                .args(["pymemcache==4.0.0", "-d"])
                .arg(target_dir()));
            run(Command::new("tar")
                .arg("-C")
                .arg(target_dir())
                .args(["-xzf", "pymemcache-4.0.0.tar.gz"])
                .current_dir(target_dir()));
        }
        dir
    })
}

fn java(mode: &str, servers: &[Memcached], threshold: usize, prefix: &str) -> String {
    let list: Vec<String> = servers.iter().map(Memcached::addr_string).collect();
    java_at(mode, &list, threshold, prefix)
}

/// The Java harness (spymemcached, ketama) on the servers `list` names.
pub fn java_at(mode: &str, list: &[String], threshold: usize, prefix: &str) -> String {
    let classpath = format!("{SPY_JAR}:{}", java_harness().display());
    run(Command::new("java")
        .args(["-cp", &classpath, "Harness", mode, &list.join(" ")])
        .arg(threshold.to_string())
        .arg(prefix))
}

fn python_harness(
    mode: &str,
    servers: &[Memcached],
    min_compress_len: usize,
    prefix: &str,
) -> String {
    python_at(mode, &server_list(servers), min_compress_len, prefix)
}

/// The python-memcached harness on `list` (`h:p,h:p`).
pub fn python_at(mode: &str, list: &str, min_compress_len: usize, prefix: &str) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/integration/interop/harness.py");
    run(Command::new(python())
        .arg(script)
        .args([mode, list])
        .arg(min_compress_len.to_string())
        .arg(prefix))
}

fn lorem() -> String {
    "lorem ipsum ".repeat(2000)
}

/// The Java harness's cases as memgroup values.
pub fn java_cases() -> Vec<(&'static str, Value)> {
    let big: Vec<u8> = (0..40_000).map(|i| (i % 7) as u8).collect();
    vec![
        ("string", Value::String("héllo wörld".into())),
        ("bigstring", Value::String(lorem())),
        (
            "json",
            Value::String(format!("{{\"k\":\"{}\"}}", "v".repeat(300))),
        ),
        ("bool", Value::Bool(true)),
        ("boolfalse", Value::Bool(false)),
        ("int", Value::Int(42)),
        ("intzero", Value::Int(0)),
        ("intneg", Value::Int(-1)),
        ("long", Value::Long(1_234_567_890_123)),
        ("longneg", Value::Long(-5)),
        ("date", Value::Date(1_700_000_000_000)),
        ("byte", Value::Byte(-7)),
        ("float", Value::Float(1.5)),
        ("double", Value::Double(-2.25)),
        ("bytes", Value::Bytes(Bytes::from_static(&[0, 1, 2, 255]))),
        ("bigbytes", Value::Bytes(Bytes::from(big))),
    ]
}

/// The Python harness's cases as memgroup values.
pub fn python_cases() -> Vec<(&'static str, Value)> {
    vec![
        ("string", Value::String("héllo wörld".into())),
        ("bigstring", Value::String(lorem())),
        (
            "bytes",
            Value::Bytes(Bytes::from_static(b"\x00\x01\x02\xff")),
        ),
        ("int", Value::Long(42)),
        ("intneg", Value::Long(-7)),
        (
            "bigint",
            Value::BigInt("1000000000000000000000000000000".into()),
        ),
        ("bool", Value::Bool(true)),
        ("boolfalse", Value::Bool(false)),
        ("float", Value::Double(2.5)),
        ("floatneg", Value::Double(-0.1)),
    ]
}

pub fn assert_all_ok(report: &str, cases: usize) {
    let lines: Vec<&str> = report.lines().collect();
    assert_eq!(lines.len(), cases, "{report}");
    for line in lines {
        assert!(line.ends_with("\tok"), "the other client read: {line}");
    }
}

/// Writes from Java, reads in memgroup; writes from memgroup, reads in Java;
/// for spymemcached's and EVCache's thresholds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spymemcached_and_evcache_values_both_ways() {
    let servers: Vec<Memcached> = (0..3).map(|_| Memcached::spawn()).collect();
    for (format, threshold) in [
        (ValueFormat::spymemcached(), 16_384),
        (ValueFormat::evcache(), 120),
    ] {
        let client = Client::builder()
            .servers(&server_list(&servers))
            .hash(HashStrategy::Ketama)
            .value_format(format)
            .build()
            .unwrap();
        // Java → memgroup.
        let prefix = format!("j2r:{threshold}:");
        java("write", &servers, threshold, &prefix);
        for (name, want) in java_cases() {
            let key = format!("{prefix}{name}");
            let got = client.get_as::<Value>(&key).await.unwrap();
            assert_eq!(got.as_ref(), Some(&want), "{format}: {key}");
        }
        // The big values really were compressed by Java.
        let raw = client
            .get(format!("{prefix}bigstring"))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(raw.flags & 2, 2, "{format}: gzip flag");
        // memgroup → Java.
        let prefix = format!("r2j:{threshold}:");
        for (name, value) in java_cases() {
            client
                .set_as(format!("{prefix}{name}"), &value, 0)
                .await
                .unwrap();
        }
        let raw = client
            .get(format!("{prefix}bigbytes"))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(raw.flags, 2048 | 2, "{format}: compressed byte array");
        assert_all_ok(
            &java("read", &servers, threshold, &prefix),
            java_cases().len(),
        );
    }
}

/// Writes from python-memcached, reads in memgroup, and back; with
/// compression off (its default) and on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_memcached_values_both_ways() {
    let servers: Vec<Memcached> = (0..3).map(|_| Memcached::spawn()).collect();
    for min_compress_len in [0, 100] {
        let client = Client::builder()
            .servers(&server_list(&servers))
            .hash(HashStrategy::PythonMemcached)
            .value_format(
                ValueFormat::python_memcached().with_compression_threshold(min_compress_len),
            )
            .build()
            .unwrap();
        let prefix = format!("p2r:{min_compress_len}:");
        python_harness("write", &servers, min_compress_len, &prefix);
        for (name, want) in python_cases() {
            let key = format!("{prefix}{name}");
            let got = client.get_as::<Value>(&key).await.unwrap();
            assert_eq!(got.as_ref(), Some(&want), "{key}");
        }
        let raw = client
            .get(format!("{prefix}bigstring"))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(raw.flags & 8 != 0, min_compress_len > 0, "zlib flag");
        let prefix = format!("r2p:{min_compress_len}:");
        for (name, value) in python_cases() {
            client
                .set_as(format!("{prefix}{name}"), &value, 0)
                .await
                .unwrap();
        }
        assert_all_ok(
            &python_harness("read", &servers, min_compress_len, &prefix),
            python_cases().len(),
        );
    }
}

/// Typed Rust values through the same fleet: what `get_as`/`set_as` give.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_types_read_what_java_wrote() {
    let servers: Vec<Memcached> = (0..3).map(|_| Memcached::spawn()).collect();
    let client = Client::builder()
        .servers(&server_list(&servers))
        .hash(HashStrategy::Ketama)
        .value_format(ValueFormat::evcache())
        .build()
        .unwrap();
    java("write", &servers, 120, "typed:");
    assert_eq!(
        client.get_as::<String>("typed:bigstring").await.unwrap(),
        Some(lorem())
    );
    assert_eq!(
        client.get_as::<i64>("typed:long").await.unwrap(),
        Some(1_234_567_890_123)
    );
    assert_eq!(
        client.get_as::<i32>("typed:intneg").await.unwrap(),
        Some(-1)
    );
    assert_eq!(
        client.get_as::<bool>("typed:bool").await.unwrap(),
        Some(true)
    );
    assert_eq!(
        client.get_as::<f64>("typed:double").await.unwrap(),
        Some(-2.25)
    );
    let err = client.get_as::<bool>("typed:long").await.unwrap_err();
    assert!(err.to_string().contains("long"), "{err}");
    assert_eq!(client.get_as::<i64>("typed:absent").await.unwrap(), None);
}
