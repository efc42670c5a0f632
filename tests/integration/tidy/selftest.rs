//! Each tidy rule run on a copy of the real sources with violations
//! planted: the rule must name each of them, and nothing else.

use std::fs;
use std::path::Path;

use super::scan::rust_files;
use super::{
    CLIENT_ROOMS, TOOL_ROOMS, clock_violations, command_family_violations, layering_violations,
    long_files, purity_violations, root, tempdir,
};

/// Copies every file under `from` (sources and manifests) to `to`.
fn copy_tree(from: &Path, to: &Path) {
    for entry in fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        let target = to.join(path.file_name().unwrap());
        if path.is_dir() {
            if !path.ends_with("target") {
                fs::create_dir_all(&target).unwrap();
                copy_tree(&path, &target);
            }
        } else {
            fs::copy(&path, &target).unwrap();
        }
    }
}

/// Puts `line` first in the file at `path`.
fn plant(path: &Path, line: &str) {
    let text = fs::read_to_string(path).unwrap();
    fs::write(path, format!("{line}\n{text}")).unwrap();
}

#[test]
fn the_client_layering_rule_sees_upward_and_nested_imports() {
    let dir = tempdir("tidy-client");
    let copy = dir.path();
    copy_tree(&root().join("crates/memgroup-client/src"), copy);
    assert!(!rust_files(copy).is_empty());
    plant(
        &copy.join("conn/mod.rs"),
        "use crate::{pool::Pool, Client};",
    );
    plant(&copy.join("counters.rs"), "use super::events::Event;");
    // Two levels up from conn/probe.rs is the root: pool is above conn.
    plant(&copy.join("conn/probe.rs"), "use super::super::pool::Pool;");
    assert_eq!(
        layering_violations(copy, "lib.rs", CLIENT_ROOMS),
        [
            "conn/mod.rs: uses client (rank 5) from conn (rank 3)",
            "conn/mod.rs: uses pool (rank 4) from conn (rank 3)",
            "conn/probe.rs: uses pool (rank 4) from conn (rank 3)",
            "counters.rs: uses events (rank 1) from counters (rank 1)",
        ]
    );
}

#[test]
fn the_tool_rules_see_a_command_importing_another_and_a_leaf_importing_up() {
    let dir = tempdir("tidy-tool");
    let copy = dir.path();
    copy_tree(&root().join("src/bin/memgroup"), copy);
    plant(&copy.join("commands/meta.rs"), "use super::read::get;");
    plant(
        &copy.join("commands/warm/copy.rs"),
        "use crate::commands::{keys::run};",
    );
    plant(&copy.join("exit.rs"), "use crate::cluster::Cluster;");
    plant(&copy.join("output.rs"), "use crate::Cli;");
    assert_eq!(
        layering_violations(copy, "main.rs", TOOL_ROOMS),
        [
            "exit.rs: uses cluster (rank 3) from exit (rank 1)",
            "output.rs: uses Cli of main.rs from output (rank 0)",
        ]
    );
    assert_eq!(
        command_family_violations(copy),
        [
            "commands/meta.rs: uses commands::read from commands::meta",
            "commands/warm/copy.rs: uses commands::keys from commands::warm",
        ]
    );
}

#[test]
fn the_purity_rules_see_grouped_paths_aliases_and_target_tables() {
    let dir = tempdir("tidy-pure");
    let crates = dir.path().join("crates");
    for krate in ["memgroup-proto", "memgroup-hash", "memgroup-topology"] {
        let to = crates.join(krate);
        fs::create_dir_all(to.join("src")).unwrap();
        copy_tree(
            &root().join("crates").join(krate).join("src"),
            &to.join("src"),
        );
        fs::copy(
            root().join("crates").join(krate).join("Cargo.toml"),
            to.join("Cargo.toml"),
        )
        .unwrap();
    }
    plant(
        &crates.join("memgroup-proto/src/lib.rs"),
        "use std::{io, net::TcpStream};",
    );
    plant(
        &crates.join("memgroup-hash/src/lib.rs"),
        "fn clock() { use std::time::Instant as Clock; let _ = Clock::now(); }",
    );
    let manifest = crates.join("memgroup-topology/Cargo.toml");
    let text = fs::read_to_string(&manifest).unwrap();
    fs::write(
        &manifest,
        format!("{text}\n[target.'cfg(unix)'.dependencies]\ntokio = \"1\"\n\n[dependencies.socket2]\nversion = \"0.5\"\n"),
    )
    .unwrap();
    assert_eq!(
        purity_violations(&crates),
        [
            "memgroup-proto/src/lib.rs: std::net::TcpStream",
            "memgroup-hash/src/lib.rs: ::now(",
            "memgroup-topology depends on tokio",
            "memgroup-topology depends on socket2",
        ]
    );
}

#[test]
fn the_clock_rule_sees_an_alias_and_elapsed() {
    let dir = tempdir("tidy-clock");
    let copy = dir.path();
    copy_tree(&root().join("crates/memgroup-client/src"), copy);
    plant(
        &copy.join("pool/mod.rs"),
        "fn t() { use tokio::time::Instant as Now; let _ = Now::now(); }",
    );
    plant(
        &copy.join("counters.rs"),
        "fn t(s: std::time::Instant) { let _ = s.elapsed(); }",
    );
    assert_eq!(
        clock_violations(copy),
        [
            "counters.rs: .elapsed() outside clock.rs",
            "pool/mod.rs: Now::now outside clock.rs",
        ]
    );
}

#[test]
fn the_line_cap_sees_a_long_file_and_a_grown_exception() {
    let dir = tempdir("tidy-lines");
    let src = dir.path().join("src");
    fs::create_dir_all(&src).unwrap();
    let lines = |n: usize| "//\n".repeat(n);
    fs::write(src.join("long.rs"), lines(501)).unwrap();
    fs::write(src.join("short.rs"), lines(500)).unwrap();
    fs::write(src.join("grown.rs"), lines(30)).unwrap();
    fs::write(src.join("kept.rs"), lines(600)).unwrap();
    let exceptions = [("src/grown.rs", 20), ("src/kept.rs", 600)];
    assert_eq!(
        long_files(dir.path(), &["src"], 500, &exceptions),
        [
            "src/grown.rs: 30 lines (at most 20)",
            "src/long.rs: 501 lines (at most 500)",
        ]
    );
}
