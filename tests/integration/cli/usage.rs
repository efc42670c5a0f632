//! The command line: flags, URLs, environment, help and completions, and how
//! each bad input is refused.

use std::process::Command;
use std::time::{Duration, Instant};

use memgroup::client::Client;

use crate::support::{Memcached, memgroup};

use super::{stderr, stdout};

/// A zone no group has is refused (every read would be remote, silently),
/// naming the zones there are, or saying that a plain server list has none.
#[test]
fn a_mistyped_zone_is_refused_naming_the_zones() {
    let (a, b) = (Memcached::spawn(), Memcached::spawn());
    let groups = format!("sg1={};sg2={}", a.addr_string(), b.addr_string());
    let o = memgroup(&["--groups", &groups, "--zone", "nope", "get", "k"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains(r#"zone "nope" is no group's zone (the groups' zones: sg1, sg2)"#),
        "{}",
        stderr(&o)
    );
    // The right zone reads (a miss: exit 1, no refusal).
    let o = memgroup(&["--groups", &groups, "--zone", "sg2", "get", "k"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let o = memgroup(&["--servers", &a.addr_string(), "--zone", "sg1", "get", "k"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("no group has a zone"), "{}", stderr(&o));
}

/// A command line clap refuses (an unknown flag, a missing key) is exit 2
/// on one line, as every usage error is: clap's message with its tip, not
/// its `Usage:` line, which would list the flags typed as if the command
/// required them.
#[test]
fn a_refused_command_line_is_one_line_without_the_flags_typed() {
    for (args, said) in [
        (
            &["--groups", "sg1=127.0.0.1:1", "get", "k", "--grups"][..],
            "memgroup: unexpected argument '--grups' found; tip: a similar argument exists: '--groups'\n",
        ),
        (
            &["--groups", "sg1=127.0.0.1:1", "get"],
            "memgroup: the following required arguments were not provided: <KEYS>...\n",
        ),
    ] {
        let o = memgroup(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert_eq!(stderr(&o), said);
    }
    // No command: the help.
    let o = memgroup(&[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("\nCommands:\n"), "{}", stderr(&o));
}

#[test]
fn bad_configuration_is_one_clear_line_and_exit_2() {
    let cases: &[(&[&str], &str)] = &[
        (&["--servers", "127.0.0.1:99999", "get", "k"], "99999"),
        (&["--servers", "", "get", "k"], ""),
        (
            &["--servers", "127.0.0.1:1", "--hash", "sha1", "get", "k"],
            "sha1",
        ),
        (
            &["--groups", "sg1=127.0.0.1:1;sg1=127.0.0.1:2", "get", "k"],
            "sg1",
        ),
        (&["--servers", "127.0.0.1:1:0", "get", "k"], "127.0.0.1:1:0"),
        // Another scheme: the hint names the URL form taken.
        (
            &["--servers", "memcached://127.0.0.1:1", "get", "k"],
            "or a memcache:// URL",
        ),
        (
            &[
                "--servers",
                "127.0.0.1:1",
                "--read-fallback",
                "bogus",
                "get",
                "k",
            ],
            "(read fallbacks: never, one-more, all-copies)",
        ),
        (&["get", "k"], "no servers"),
        (
            &[
                "--servers",
                "127.0.0.1:1",
                "--write-policy",
                "most",
                "get",
                "k",
            ],
            "most",
        ),
        (
            &["--servers", "127.0.0.1:1", "bench", "--ratio", "x"],
            "ratio",
        ),
        (
            &["--servers", "127.0.0.1:1", "bench", "--rate", "0"],
            "--rate",
        ),
        (
            &["--servers", "127.0.0.1:1", "bench", "--duration=-1"],
            "--duration",
        ),
        (
            &["--servers", "127.0.0.1:1", "bench", "--duration", "NaN"],
            "--duration",
        ),
    ];
    for (args, token) in cases {
        let o = memgroup(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        let err = stderr(&o);
        assert!(err.contains(token), "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
    }
    // A bad cluster.toml (every rule is unit-tested in memgroup::config):
    // the tool names the file and the place, on one line.
    let dir = crate::support::tempdir::Dir::new("badcfg");
    let files: &[(&str, &str)] = &[
        ("hash = \n", "line 1, column 8: invalid string"),
        ("write_policy = \"most\"\n", "write_policy: "),
        (
            "[[groups]]\nname = \"sg1\"\nservers = [\"127.0.0.1:99999\"]\n",
            "group \"sg1\": ",
        ),
        ("hash = \"native\"\n", "no servers"),
    ];
    for (i, (text, token)) in files.iter().enumerate() {
        let path = dir.path().join(format!("{i}.toml"));
        std::fs::write(&path, text).unwrap();
        let o = memgroup(&["--config", path.to_str().unwrap(), "get", "k"]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{text:?}: {err}");
        assert!(err.contains(token), "{text:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{text:?}: {err}");
    }
}

#[test]
fn unreachable_server_fails_fast_with_a_clear_message() {
    // A port nothing listens on: reserve one, then close it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let server = format!("127.0.0.1:{port}");
    for args in [vec!["get", "k"], vec!["set", "k", "v"], vec!["stats"]] {
        let started = Instant::now();
        let o = memgroup(
            &[
                &["--servers", server.as_str(), "--timeout-ms", "500"][..],
                &args,
            ]
            .concat(),
        );
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        assert!(started.elapsed() < Duration::from_secs(10));
        let err = stderr(&o);
        let out = stdout(&o);
        assert!(
            err.contains(&server) || out.contains(&server),
            "{args:?}: {err}{out}"
        );
    }
}

/// A `memcache://` URL in `--servers` / MEMCACHED_SERVERS, and MEMGROUP_GROUPS,
/// route exactly as the equivalent flags do.
#[test]
fn urls_and_environment_route_like_the_flags() {
    let route = |args: &[&str], env: &[(&str, &str)]| {
        let o = Command::new(env!("CARGO_BIN_EXE_memgroup"))
            // Each test its own state: no repair journal shared across tests.
            .env("MEMGROUP_REPAIR_JOURNAL", "off")
            .args(args)
            .env_remove("MEMCACHED_SERVERS")
            .env_remove("MEMGROUP_GROUPS")
            .env_remove("MEMGROUP_CONFIG")
            .envs(env.iter().copied())
            .output()
            .unwrap();
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        stdout(&o)
    };
    fn with<'a>(pre: &[&'a str]) -> Vec<&'a str> {
        [pre, &["route", "user:1", "user:2", "café", "k9"][..]].concat()
    }
    let flags = route(
        &with(&[
            "--servers",
            "10.0.0.1:11211,10.0.0.2:11211:3",
            "--hash",
            "native",
        ]),
        &[],
    );
    let url = "memcache://10.0.0.1:11211,10.0.0.2:11211:3?hash=native";
    assert_eq!(route(&with(&["--servers", url]), &[]), flags);
    assert_eq!(route(&with(&[]), &[("MEMCACHED_SERVERS", url)]), flags);
    let groups = "a=10.0.0.1:11211;b=10.0.0.2:11211,10.0.0.3:11211";
    assert_eq!(
        route(&with(&[]), &[("MEMGROUP_GROUPS", groups)]),
        route(&with(&["--groups", groups]), &[])
    );
    // A bad URL is one line and exit 2.
    let o = memgroup(&["--servers", "memcache://h:1?hash=sha1", "route", "k"]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(stderr(&o).trim_end().lines().count(), 1, "{}", stderr(&o));
}

/// `--help` lists exit codes and examples; completions come from the same
/// definition; `-q` keeps write reports quiet but still prints values.
#[test]
fn help_completions_and_quiet() {
    let o = memgroup(&["--help"]);
    assert!(stdout(&o).contains("Exit codes:") && stdout(&o).contains("Examples:"));
    // Every exit code the README's table lists, `--help` lists too.
    let readme = include_str!("../../../README.md");
    let table = readme
        .split("Exit codes, the same for every command:")
        .nth(1);
    let codes: Vec<&str> = table
        .expect("the README's exit codes")
        .lines()
        .skip_while(|l| !l.starts_with("|---"))
        .skip(1)
        .take_while(|l| l.starts_with('|'))
        .filter_map(|l| l.split('|').nth(1).map(str::trim))
        .collect();
    assert!(codes.len() >= 5, "{codes:?}");
    for code in codes {
        let listed = format!("\n  {code}  ");
        assert!(
            stdout(&o).contains(&listed),
            "--help lacks exit code {code}"
        );
    }
    for shell in ["bash", "zsh", "fish"] {
        let o = memgroup(&["completions", shell]);
        assert!(o.status.success(), "{shell}: {}", stderr(&o));
        for sub in ["warm", "bench", "keys", "cas"] {
            assert!(stdout(&o).contains(sub), "{shell} completions lack {sub}");
        }
    }
    let s = Memcached::spawn();
    let addr = s.addr_string();
    let o = memgroup(&["--servers", &addr, "-q", "set", "k", "v"]);
    assert!(o.status.success());
    assert_eq!(stdout(&o), "", "quiet write");
    let o = memgroup(&["--servers", &addr, "-q", "add", "k", "v"]);
    assert_eq!(o.status.code(), Some(1), "still the exit code");
    assert_eq!(
        stdout(&memgroup(&["--servers", &addr, "-q", "get", "k"])),
        "v"
    );
}

/// A value outside a flag's list is one line naming it, the list and the
/// likely one (`--hash ketma`), exit 2.
#[test]
fn a_mistyped_choice_names_the_valid_ones_on_one_line() {
    let out = memgroup(&["--servers", "127.0.0.1:1", "--hash", "ketma", "get", "k"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("invalid value 'ketma'")
            && stderr.contains("one of: native, old-compat")
            && stderr.contains("did you mean \"ketama\"?"),
        "{stderr}"
    );
}

/// Nonsense is refused with exit 2 and one line naming it, and an error
/// says why, not only that something was invalid.
#[test]
fn nonsense_is_refused_with_one_line_naming_it() {
    let server = Memcached::spawn();
    let addr = server.addr_string();
    let dir = crate::support::tempdir::Dir::new("nonsense");
    let file = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.to_string_lossy().into_owned()
    };
    let duplicate = file(
        "dup.toml",
        &format!(
            "[[groups]]\nname = \"a\"\nservers = [\"{addr}\"]\n[[groups]]\nname = \"a\"\nservers = [\"{addr}\"]\n"
        ),
    );
    let pool0 = file(
        "pool0.toml",
        &format!("pool_size = 0\n[[groups]]\nname = \"a\"\nservers = [\"{addr}\"]\n"),
    );
    let pool_negative = file(
        "pool-1.toml",
        &format!("[[groups]]\nname = \"a\"\npool_size = -1\nservers = [\"{addr}\"]\n"),
    );
    let zone = file(
        "zone.toml",
        &format!(
            "zone = \"nowhere\"\n[[groups]]\nname = \"a\"\nzone = \"z1\"\nservers = [\"{addr}\"]\n"
        ),
    );
    let password = file("password", "secret\n");
    let spaced = file("a b", "value");
    let groups = format!("sg1={addr};sg2=127.0.0.1:1");
    let cases: &[(&[&str], &str)] = &[
        (
            &["--groups", &format!("a={addr};b={addr}"), "set", "k", "v"],
            "is in two groups (\"a\" and \"b\")",
        ),
        (
            &["--groups", &groups, "--zone", "sg3", "get", "k"],
            "\"sg3\"",
        ),
        (&["--config", &zone, "get", "k"], "\"nowhere\""),
        (
            &["--servers", &format!("sg1={addr}"), "get", "k"],
            "--groups",
        ),
        (
            &["--servers", &addr, "--password-file", &password, "get", "k"],
            "--username",
        ),
        (
            &["--servers", &addr, "--timeout-ms", "0", "get", "k"],
            "--timeout-ms",
        ),
        (
            &["--servers", &addr, "--max-in-flight", "0", "get", "k"],
            "--max-in-flight",
        ),
        (
            &["--servers", &addr, "--pool-size", "0", "get", "k"],
            "--pool-size",
        ),
        (
            &["--servers", &addr, "--pool-size", "100000", "get", "k"],
            "must be at most 1024",
        ),
        (
            &["--servers", &addr, "--connect-timeout-ms", "0", "get", "k"],
            "must be at least 1",
        ),
        (
            &["--servers", &addr, "append", "k", "v", "--exptime", "5"],
            "--exptime",
        ),
        (&["--servers", &addr, "route", "a b"], "invalid key \"a b\""),
        (
            &["--groups", &groups, "--zone", "sg3", "route", "k"],
            "\"sg3\"",
        ),
        (&["--servers", &addr, "cp", &spaced], &spaced),
        (
            &["--config", &duplicate, "get", "k"],
            "dup.toml: group \"a\" is defined twice",
        ),
        (
            &["--config", &pool0, "get", "k"],
            "pool0.toml: pool_size = 0: give 1 to 1024",
        ),
        (
            &["--config", &pool_negative, "get", "k"],
            "pool-1.toml: group \"a\": pool_size = -1: give 1 to 1024",
        ),
    ];
    for (args, names) in cases {
        let out = memgroup(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains(names),
            "{args:?} should name {names}: {stderr}"
        );
        // clap adds a usage hint after a blank line; our own errors are one line.
        let first = stderr.split("\n\n").next().unwrap();
        assert_eq!(first.trim_end().lines().count(), 1, "{args:?}: {stderr}");
    }
    // The same checks in the library's builder.
    let error = Client::builder()
        .evcache_groups(&groups)
        .zone("sg3")
        .build()
        .unwrap_err();
    assert!(error.to_string().contains("\"sg3\""), "{error}");
    assert!(
        error.to_string().contains("sg1, sg2"),
        "the zones listed: {error}"
    );
    let error = Client::builder()
        .servers(&addr)
        .pool_size(0)
        .build()
        .unwrap_err();
    assert!(error.to_string().contains("pool_size 0"), "{error}");
}
