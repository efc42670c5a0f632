//! memcached's ASCII authentication (`memcached -Y authfile`) with real
//! servers: right credentials work (also through a URL, and for the warmer's
//! metadump); a wrong password, an unknown user or no credentials are the
//! typed auth error naming the server, never the password, and store
//! nothing; a restarted server is logged in to again.

use std::time::Duration;

use memgroup::client::{Client, Credentials, IfPresent};

use crate::support::{HeldClock, Memcached, metadump_lists, raw, tempdir};

/// A server requiring `alice`/`s3cret-wörd` (non-ASCII is fine in a
/// password), and the authfile's directory kept alive with it.
fn auth_server() -> (Memcached, tempdir::Dir) {
    let dir = tempdir::Dir::new("auth");
    let file = dir.path().join("authfile");
    std::fs::write(&file, "alice:s3cret-wörd\nbob:other\n").unwrap();
    let server = Memcached::spawn_with(&["-Y", file.to_str().unwrap()]);
    (server, dir)
}

fn client(server: &Memcached, user: &str, password: &str) -> Client {
    Client::builder()
        .servers(&server.addr_string())
        .credentials(Credentials::new(user, password).unwrap())
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn right_credentials_work_everywhere() {
    let (server, _dir) = auth_server();
    let alice = client(&server, "alice", "s3cret-wörd");
    alice.set("k", "v", 0).await.unwrap();
    assert_eq!(alice.get("k").await.unwrap().unwrap().value, "v");
    let many = alice.get_multi(&["k", "nope"]).await.unwrap();
    assert_eq!(many.hit_count(), 1);
    assert!(alice.server_stats(None).await.unwrap()[0].stats.is_ok());
    // One login per connection: counted as auth, not as sets.
    assert_eq!(raw_auth_stat(&server, "cmd_set"), 1);
    // A URL with percent-encoded credentials.
    let url = format!("memcache://alice:s3cret-w%C3%B6rd@{}", server.addr_string());
    let by_url = Client::connect(&url).await.unwrap();
    assert_eq!(by_url.get("k").await.unwrap().unwrap().value, "v");
    // The warmer's metadump logs in too. (The crawler can miss an item in one
    // pass, so the warmer dumps again; so does this.)
    let seen = metadump_lists(&by_url, &server.addr_string(), b"k").await;
    assert!(seen, "metadump never listed the key");
}

/// `stats` over an authenticated raw connection (the raw helpers do not log in).
fn raw_auth_stat(server: &Memcached, name: &str) -> u64 {
    use std::io::{BufRead, BufReader, Write};
    let mut c = std::net::TcpStream::connect(server.addr()).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let login = "alice s3cret-wörd";
    write!(c, "set a 0 0 {}\r\n{login}\r\nstats\r\n", login.len()).unwrap();
    let mut lines = BufReader::new(c).lines();
    assert_eq!(lines.next().unwrap().unwrap(), "STORED");
    for line in lines {
        let line = line.unwrap();
        if let Some(v) = line.strip_prefix(&format!("STAT {name} ")) {
            return v.parse().unwrap();
        }
        assert_ne!(line, "END", "no stat {name}");
    }
    unreachable!()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_logins_are_auth_errors_and_store_nothing() {
    let (server, _dir) = auth_server();
    for (who, user, password) in [
        ("wrong password", "alice", "guess"),
        ("unknown user", "mallory", "s3cret-wörd"),
    ] {
        let c = client(&server, user, password);
        let err = c.set("k", "v", 0).await.unwrap_err();
        // A write to one group misses its policy; the cause is the login.
        let cause = std::error::Error::source(&err)
            .and_then(|e| e.downcast_ref::<memgroup::client::Error>())
            .unwrap_or(&err);
        assert!(cause.is_auth(), "{who}: {}", err.chain());
        let text = err.chain();
        assert!(text.contains(&server.addr_string()), "{who}: {text}");
        assert!(text.contains("authentication failed"), "{who}: {text}");
        assert!(!text.contains(password), "{who}: {text}");
        // Reads say the same, also while the server is backed off.
        for _ in 0..3 {
            let err = c.get("k").await.unwrap_err();
            assert!(err.is_auth(), "{who}: {}", err.chain());
        }
        assert!(
            !format!("{c:?}").contains(password),
            "Debug hides the password"
        );
    }
    // No credentials: the server's `unauthenticated` is the auth error too.
    let anonymous = Client::builder()
        .servers(&server.addr_string())
        .build()
        .unwrap();
    let err = anonymous.get("k").await.unwrap_err();
    assert!(err.is_auth(), "{}", err.chain());
    // Nothing was stored by any of them.
    assert_eq!(raw_auth_stat(&server, "cmd_set"), 0);
    assert_eq!(raw_auth_stat(&server, "curr_items"), 0);
    assert!(raw_auth_stat(&server, "auth_errors") >= 2);
    let _ = raw::stat; // the unauthenticated helpers cannot read this server
}

/// Runs under paused time: the backoff after the kill passes when the test
/// moves the clock.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_restarted_server_is_logged_in_to_again() {
    let _clock = HeldClock::hold();
    let (mut server, _dir) = auth_server();
    let alice = client(&server, "alice", "s3cret-wörd");
    alice.set("before", "1", 0).await.unwrap();
    server.kill();
    assert!(alice.get("before").await.is_err());
    server.restart();
    tokio::time::advance(Duration::from_secs(2)).await;
    alice.set("after", "2", 0).await.unwrap();
    assert_eq!(alice.get("after").await.unwrap().unwrap().value, "2");
}

/// The tool logs in with `--username` and a password file (ending in a
/// newline, as editors leave them) or MEMGROUP_PASSWORD; `warm` copies
/// between two servers requiring logins, its metadump included.
#[test]
fn the_tool_logs_in_for_every_command() {
    let (a, dir) = auth_server();
    let (b, _dir_b) = auth_server();
    let password_file = dir.path().join("password");
    std::fs::write(&password_file, "s3cret-wörd\n").unwrap();
    let groups = format!("sg1={};sg2={}", a.addr_string(), b.addr_string());
    let memgroup = |args: &[&str], env_password: Option<&str>| {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_memgroup"));
        // Each test its own state: no repair journal shared across tests.
        cmd.env("MEMGROUP_REPAIR_JOURNAL", "off");
        cmd.args(["--groups", &groups, "--username", "alice"])
            .args(args)
            .env_remove("MEMGROUP_PASSWORD")
            .env_remove("MEMCACHED_SERVERS");
        match env_password {
            Some(p) => cmd.env("MEMGROUP_PASSWORD", p),
            None => cmd.arg("--password-file").arg(&password_file),
        };
        cmd.output().unwrap()
    };
    let ok = |o: std::process::Output| {
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    // Keys only in sg1 (written there by a targeted client), then warmed into sg2.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let c = Client::builder()
            .evcache_groups(&groups)
            .credentials(Credentials::new("alice", "s3cret-wörd").unwrap())
            .build()
            .unwrap();
        for i in 0..300 {
            c.add_or_set(format!("w:{i}"), "v", 0, &["sg1"], IfPresent::Overwrite)
                .await
                .unwrap();
        }
    });
    ok(memgroup(
        &["warm", "--from", "sg1", "--to", "sg2", "--verify"],
        None,
    ));
    assert_eq!(raw_auth_stat(&b, "curr_items"), 300);
    ok(memgroup(&["set", "t", "hello"], Some("s3cret-wörd")));
    assert_eq!(ok(memgroup(&["--zone", "sg2", "get", "t"], None)), "hello");
    assert!(ok(memgroup(&["stats"], None)).contains("sg2"));
    // A wrong password: exit 1, the auth error, no password in the output.
    let o = memgroup(&["get", "t"], Some("nope-nope"));
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("authentication failed") && !err.contains("nope-nope"),
        "{err}"
    );
}
