//! Tidy checks, as ordinary tests that read the sources (rust-analyzer's
//! style): the client's rooms and the tool's import only downward, the
//! tool's command families never import each other, the pure crates stay
//! pure, the client reads the time only through its clock, and no file
//! outgrows its room. Each fails with every offending place named, and each
//! has a self-test that plants a violation and sees it named: a rule that
//! cannot fail proves nothing.

mod scan;
mod selftest;

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};

use scan::{
    code, crate_paths, manifest_dependencies, module_of, paths_from, reexports, root_items,
    rust_files,
};

/// The client's rooms, bottom up: a module may use the rooms of a lower rank
/// only (and itself). Leaves of the same rank may not use each other, so
/// the leaves cannot form a cycle either.
const CLIENT_ROOMS: &[(&str, u32)] = &[
    ("error", 0),
    ("join", 0),
    ("clock", 0),
    ("item", 1),
    ("events", 1),
    ("counters", 1),
    ("longkey", 1),
    ("options", 1),
    ("value", 2),
    ("metrics", 2),
    ("conn", 3),
    ("pool", 4),
    ("client", 5),
];

/// The tool's rooms (src/bin/memgroup), bottom up, as cargo's binary is
/// built: the commands import leaves; leaves never import a command or the
/// command line (`main.rs`'s items).
const TOOL_ROOMS: &[(&str, u32)] = &[
    ("output", 0),
    ("expiry", 0),
    ("flags", 0),
    ("exit", 1),
    ("dump", 2),
    ("sources", 2),
    ("cluster", 3),
    ("commands", 4),
];

/// What every command family may import besides the leaves: `commands`'
/// own items (in its mod.rs) and these shared modules.
const COMMANDS_SHARED: &[&str] = &["common"];

/// Lines a file may hold.
const MAX_LINES: usize = 500;

/// The files over [`MAX_LINES`] today, each with the lines it may not grow
/// past: one cohesive state machine and its property test, which read best
/// whole, and files waiting to be split by job.
const LONG_FILES: &[(&str, usize)] = &[
    ("bench-compare/src/main.rs", 1655),
    ("crates/memgroup-client/src/conn/state.rs", 954),
    ("crates/memgroup-client/src/conn/state/tests.rs", 574),
    ("crates/memgroup-hash/src/hash.rs", 519),
    ("crates/memgroup-hash/src/locator.rs", 922),
    ("crates/memgroup-hash/tests/vectors.rs", 900),
    ("crates/memgroup-proto/src/decode.rs", 618),
    ("crates/memgroup-proto/src/request.rs", 829),
    ("crates/memgroup-proto/src/response.rs", 563),
    ("crates/memgroup-proto/src/tests.rs", 1436),
    ("crates/memgroup-topology/src/parse.rs", 983),
    ("crates/memgroup-topology/src/select.rs", 591),
    ("crates/memgroup-topology/src/spec.rs", 739),
    ("crates/memgroup-topology/src/topology.rs", 617),
    ("crates/memgroup-topology/tests/props.rs", 826),
    ("src/config.rs", 767),
    ("tests/integration/client.rs", 1216),
    ("tests/integration/proxy.rs", 678),
    ("tests/integration/repairs.rs", 764),
    ("tests/integration/support/mod.rs", 630),
];

/// Where the line cap applies: every crate's sources, tests, benches and
/// examples, xtask, bench-compare and the fuzz targets.
const SOURCE_DIRS: &[&str] = &[
    "crates",
    "src",
    "tests",
    "benches",
    "examples",
    "xtask",
    "bench-compare",
    "fuzz",
];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// An empty temp directory, removed when the returned `Dir` is dropped.
fn tempdir(name: &str) -> crate::support::tempdir::Dir {
    let dir = crate::support::tempdir::Dir::new(name);
    // A leftover of a killed earlier run under the same name would add
    // files the copy does not have: start from an empty directory.
    fs::remove_dir_all(dir.path()).ok();
    fs::create_dir_all(dir.path()).unwrap();
    dir
}

/// Every upward or sideways import among the rooms of the crate whose
/// sources are `src` (its root file `root_file`), as `file: uses room
/// (rank) from room (rank)`. A path into the root's re-exports counts as a
/// path into the room it re-exports; one to an item the root file defines
/// itself is an import of the top.
fn layering_violations(src: &Path, root_file: &str, rooms: &[(&str, u32)]) -> Vec<String> {
    let rank: HashMap<&str, u32> = rooms.iter().copied().collect();
    let root_code = code(&src.join(root_file));
    let exports = reexports(&root_code);
    let top = root_items(&root_code);
    let mut violations = Vec::new();
    for file in rust_files(src) {
        let relative = file.strip_prefix(src).unwrap();
        if relative == Path::new(root_file) {
            continue;
        }
        let module = module_of(src, &file);
        let room = module[0].clone();
        let Some(&mine) = rank.get(room.as_str()) else {
            violations.push(format!(
                "{}: the room {room:?} is not in the rooms' list",
                relative.display()
            ));
            continue;
        };
        for path in crate_paths(&code(&file), &module) {
            let segment = &path[0];
            if top.contains(segment) && !exports.contains_key(segment) {
                violations.push(format!(
                    "{}: uses {segment} of {root_file} from {room} (rank {mine})",
                    relative.display()
                ));
                continue;
            }
            let target = exports.get(segment).unwrap_or(segment);
            let Some(&theirs) = rank.get(target.as_str()) else {
                continue; // a macro
            };
            if *target != room && theirs >= mine {
                violations.push(format!(
                    "{}: uses {target} (rank {theirs}) from {room} (rank {mine})",
                    relative.display()
                ));
            }
        }
    }
    violations.sort();
    violations.dedup();
    violations
}

/// Every import of one command family by another in the tool whose
/// sources are `src`, as `file: uses commands::x from commands::y`.
fn command_family_violations(src: &Path) -> Vec<String> {
    let commands = src.join("commands");
    let is_family = |name: &str| {
        !COMMANDS_SHARED.contains(&name)
            && (commands.join(format!("{name}.rs")).exists() || commands.join(name).is_dir())
    };
    let mut violations = Vec::new();
    for file in rust_files(&commands) {
        let module = module_of(src, &file);
        let Some(mine) = module.get(1) else {
            continue; // commands/mod.rs
        };
        for path in crate_paths(&code(&file), &module) {
            if let [first, theirs, ..] = &path[..]
                && first == "commands"
                && theirs != mine
                && is_family(theirs)
            {
                violations.push(format!(
                    "{}: uses commands::{theirs} from commands::{mine}",
                    file.strip_prefix(src).unwrap().display()
                ));
            }
        }
    }
    violations.sort();
    violations.dedup();
    violations
}

/// What the pure crates under `crates` (a workspace's) break: proto and hash
/// have no runtime and no sockets, topology not even the clock; each depends
/// only on what its rule names.
fn purity_violations(crates: &Path) -> Vec<String> {
    let rules: &[(&str, &[&str])] = &[
        ("memgroup-proto", &["bytes", "nom"]),
        ("memgroup-hash", &["crc32fast", "md-5", "sha1", "sha2"]),
        ("memgroup-topology", &["memgroup-hash"]),
    ];
    let mut violations = Vec::new();
    for &(krate, allowed) in rules {
        let manifest = fs::read_to_string(crates.join(krate).join("Cargo.toml")).unwrap();
        for name in manifest_dependencies(&manifest) {
            if !allowed.contains(&name.as_str()) {
                violations.push(format!("{krate} depends on {name}"));
            }
        }
        for file in rust_files(&crates.join(krate).join("src")) {
            let text = code(&file);
            let shown = file.strip_prefix(crates).unwrap().display().to_string();
            // std::net has sockets; core::net only addresses.
            for path in paths_from(&text, &["std::"]) {
                if path.get(1).is_some_and(|s| s == "net") {
                    violations.push(format!("{shown}: {}", path.join("::")));
                }
            }
            if words(&text).any(|w| w == "tokio") {
                violations.push(format!("{shown}: tokio"));
            }
            // Any clock read, whatever the clock type is called here.
            for call in ["::now(", ".elapsed("] {
                if text.contains(call) {
                    violations.push(format!("{shown}: {call}"));
                }
            }
        }
    }
    violations
}

/// The identifiers of `code`.
fn words(code: &str) -> impl Iterator<Item = &str> {
    code.split(|c: char| !scan::is_ident(c))
        .filter(|w| !w.is_empty())
}

/// Where the client under `src` reads the time outside `clock.rs`:
/// `Instant::now`, `SystemTime::now` (by those names or an alias) or
/// `.elapsed()`.
fn clock_violations(src: &Path) -> Vec<String> {
    let mut violations = Vec::new();
    for file in rust_files(src) {
        if file.ends_with("clock.rs") {
            continue;
        }
        let text = code(&file);
        let mut clocks = vec!["Instant".to_string(), "SystemTime".to_string()];
        for clock in ["Instant", "SystemTime"] {
            let alias = format!("{clock} as ");
            for (at, _) in text.match_indices(&alias) {
                let name: String = text[at + alias.len()..]
                    .chars()
                    .take_while(|&c| scan::is_ident(c))
                    .collect();
                clocks.push(name);
            }
        }
        let shown = file.strip_prefix(src).unwrap().display().to_string();
        for clock in &clocks {
            if text.contains(&format!("{clock}::now")) {
                violations.push(format!("{shown}: {clock}::now outside clock.rs"));
            }
        }
        if text.contains(".elapsed(") {
            violations.push(format!("{shown}: .elapsed() outside clock.rs"));
        }
    }
    violations
}

/// The files under `root`'s `dirs` over `max` lines that are not named in
/// `exceptions`, and the named ones grown past their ceiling.
fn long_files(root: &Path, dirs: &[&str], max: usize, exceptions: &[(&str, usize)]) -> Vec<String> {
    let mut long = Vec::new();
    for dir in dirs.iter().map(|d| root.join(d)).filter(|d| d.exists()) {
        for file in rust_files(&dir) {
            let relative = file
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            let lines = fs::read_to_string(&file).unwrap().lines().count();
            let ceiling = exceptions
                .iter()
                .find(|(path, _)| *path == relative)
                .map_or(max, |&(_, ceiling)| ceiling);
            if lines > ceiling {
                long.push(format!("{relative}: {lines} lines (at most {ceiling})"));
            }
        }
    }
    long
}

#[test]
fn the_client_imports_only_downward() {
    let src = root().join("crates/memgroup-client/src");
    let violations = layering_violations(&src, "lib.rs", CLIENT_ROOMS);
    assert!(
        violations.is_empty(),
        "upward imports among memgroup-client's rooms (see CLIENT_ROOMS):\n{}",
        violations.join("\n")
    );
}

#[test]
fn the_tool_imports_only_downward_and_commands_never_each_other() {
    let src = root().join("src/bin/memgroup");
    let mut violations = layering_violations(&src, "main.rs", TOOL_ROOMS);
    violations.extend(command_family_violations(&src));
    assert!(
        violations.is_empty(),
        "upward or sideways imports in the tool (see TOOL_ROOMS, COMMANDS_SHARED):\n{}",
        violations.join("\n")
    );
}

#[test]
fn the_pure_crates_stay_pure_and_the_client_reads_the_time_in_clock_rs() {
    let mut violations = purity_violations(&root().join("crates"));
    violations.extend(clock_violations(&root().join("crates/memgroup-client/src")));
    assert!(violations.is_empty(), "{}", violations.join("\n"));
}

#[test]
fn no_file_outgrows_its_room() {
    let long = long_files(&root(), SOURCE_DIRS, MAX_LINES, LONG_FILES);
    assert!(
        long.is_empty(),
        "over {MAX_LINES} lines (split by job; a file in LONG_FILES may not grow past its ceiling):\n{}",
        long.join("\n")
    );
}
