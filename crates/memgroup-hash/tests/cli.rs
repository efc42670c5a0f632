//! The `locate` example, end to end (cargo builds examples before running tests).

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

fn locate_binary() -> PathBuf {
    // target/<profile>/deps/cli-<hash> → target/<profile>/examples/locate
    let exe = std::env::current_exe().expect("test binary path");
    let dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target directory");
    let bin = dir
        .join("examples")
        .join(format!("locate{}", std::env::consts::EXE_SUFFIX));
    assert!(bin.exists(), "{} not built", bin.display());
    bin
}

fn run(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(locate_binary())
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn locate");
    // A rejected command line exits without reading stdin; the write may then fail.
    if let Err(e) = child.stdin.take().expect("stdin").write_all(stdin) {
        assert_eq!(
            e.kind(),
            std::io::ErrorKind::BrokenPipe,
            "writing keys: {e}"
        );
    }
    child.wait_with_output().expect("locate output")
}

fn stdout(args: &[&str], stdin: &[u8]) -> String {
    let out = run(args, stdin);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

const B: &str = "127.0.0.1:11211,127.0.0.1:11212,127.0.0.1:11213";
const A: &str = "192.168.0.1:44444,192.168.0.2:22222";

#[test]
fn servers_hashes_and_failover() {
    // README worked examples.
    assert_eq!(
        stdout(
            &["--strategy", "native", "--servers", B],
            b"polygenelubricants\n"
        ),
        "127.0.0.1:11213\n"
    );
    assert_eq!(
        stdout(
            &[
                "--strategy",
                "new-compat",
                "--servers",
                A,
                "--weights",
                "5,3"
            ],
            b"a\n"
        ),
        "192.168.0.2:22222\n"
    );
    assert_eq!(
        stdout(
            &[
                "--strategy=old-compat",
                "--servers",
                A,
                "--weights=5,3",
                "--sanitize",
                "--hash-only"
            ],
            b"user:5118636\n"
        ),
        "-4018010527777005306\n"
    );
    assert_eq!(
        stdout(
            &["--strategy", "new-compat", "--servers", B, "--failover"],
            b"polygenelubricants\n"
        ),
        "127.0.0.1:11212\t127.0.0.1:11213\t127.0.0.1:11211\n"
    );
    assert_eq!(
        stdout(
            &[
                "--strategy",
                "ketama",
                "--servers",
                B,
                "--node-naming",
                "evcache"
            ],
            b"a\nb\n"
        ),
        "127.0.0.1:11213\n127.0.0.1:11213\n"
    );
}

#[test]
fn keys_are_raw_lines() {
    // Not trimmed, empty lines are keys, no final newline needed, any bytes allowed.
    let out = stdout(
        &["--strategy", "native", "--servers", "h:1", "--hash-only"],
        b" a \n\n\xff\nlast",
    );
    // Java: " a ".hashCode(), "".hashCode(), "\uFFFD".hashCode(), "last".hashCode().
    let want = "33791\n0\n65533\n3314326\n";
    assert_eq!(out, want);
    assert_eq!(
        stdout(&["--strategy", "native", "--servers", "h:1"], b""),
        ""
    );
}

#[test]
fn bad_arguments_exit_2() {
    for args in [
        &["--servers", B][..],
        &["--strategy", "md5", "--servers", B],
        &["--strategy", "native"],
        &["--strategy", "native", "--servers", "nohost"],
        &["--strategy", "native", "--servers", B, "--weights", "1,2"],
        &["--strategy", "native", "--servers", B, "--weights", "1,0,2"],
        &[
            "--strategy",
            "native",
            "--servers",
            B,
            "--failover",
            "--hash-only",
        ],
        &[
            "--strategy",
            "ketama",
            "--servers",
            B,
            "--node-naming",
            "memcached",
        ],
        &["--strategy", "native", "--servers", B, "--frobnicate"],
        &[
            "--strategy",
            "native",
            "--strategy",
            "native",
            "--servers",
            B,
        ],
        &["--strategy", "native", "--servers"],
    ] {
        let out = run(args, b"k\n");
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?}");
        assert!(!out.stderr.is_empty(), "{args:?}");
    }
}
