//! Tidy checks, as ordinary tests that read the sources (rust-analyzer's
//! style): the client's rooms import only downward, the pure crates stay
//! pure, and no file outgrows its room. They fail with every offending
//! place named, so a change that breaks the layering says where.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};

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

/// Lines a file may hold; the named exceptions are one cohesive state
/// machine and its property test, which read best whole.
const MAX_LINES: usize = 500;
const LONG_FILES: &[&str] = &[
    "crates/memgroup-client/src/conn/state.rs",
    "crates/memgroup-client/src/conn/state/tests.rs",
];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// A file's code without its comments (line comments and doc comments; a
/// `//` inside a string cuts the rest of that line, which only loses code
/// these checks do not look for) and without its trailing `mod tests`.
fn code(path: &Path) -> String {
    let text = fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut out = String::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        if line.trim() == "#[cfg(test)]"
            && lines
                .peek()
                .is_some_and(|next| next.starts_with("mod tests"))
        {
            break;
        }
        out.push_str(line.split("//").next().unwrap_or(""));
        out.push('\n');
    }
    out
}

/// The first path segment of every `crate::…` (and `$crate::…`) path in
/// `code`, expanding `crate::{a, b::c}` groups.
fn crate_paths(code: &str, prefix: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find(prefix) {
        let before = rest[..at].chars().next_back();
        rest = &rest[at + prefix.len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 1;
            let mut item = String::new();
            let mut items = Vec::new();
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 1 => break,
                    '}' => depth -= 1,
                    ',' if depth == 1 => items.push(std::mem::take(&mut item)),
                    _ => item.push(c),
                }
            }
            items.push(item);
            found.extend(items.iter().filter_map(|i| first_segment(i.trim())));
        } else {
            found.extend(first_segment(rest));
        }
    }
    found
}

fn first_segment(path: &str) -> Option<String> {
    let name: String = path
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    (!name.is_empty() && name != "self").then_some(name)
}

/// The crate root's re-exports: `pub use room::…::{A, B}` makes `crate::A`
/// a path into `room`.
fn reexports(lib: &str) -> HashMap<String, String> {
    let mut map = HashMap::new();
    for statement in lib.split(';') {
        let statement = statement.trim();
        let Some(path) = statement.strip_prefix("pub use ") else {
            continue;
        };
        let Some(room) = first_segment(path) else {
            continue;
        };
        let names = match path.find('{') {
            Some(open) => path[open + 1..path.rfind('}').unwrap_or(path.len())].to_string(),
            None => path.rsplit("::").next().unwrap_or("").to_string(),
        };
        for name in names.split(',').filter_map(|n| first_segment(n.trim())) {
            map.insert(name, room.clone());
        }
    }
    map
}

/// Every upward or sideways import among the client's rooms, as
/// `file: uses room (rank) from room (rank)`.
fn client_layering_violations(src: &Path) -> Vec<String> {
    let rank: HashMap<&str, u32> = CLIENT_ROOMS.iter().copied().collect();
    let exports = reexports(&code(&src.join("lib.rs")));
    let mut violations = Vec::new();
    for file in rust_files(src) {
        let relative = file.strip_prefix(src).unwrap();
        if relative == Path::new("lib.rs") {
            continue;
        }
        let first = relative.components().next().unwrap().as_os_str();
        let room = Path::new(first)
            .file_stem()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let Some(&mine) = rank.get(room.as_str()) else {
            violations.push(format!(
                "{}: the room {room:?} is not in CLIENT_ROOMS",
                relative.display()
            ));
            continue;
        };
        let text = code(&file);
        let mut used = crate_paths(&text, "crate::");
        // In a file at the top, `super::` is the crate root too.
        if relative.components().count() == 1 {
            used.extend(crate_paths(&text, "super::"));
        }
        for segment in used {
            let target = exports.get(&segment).cloned().unwrap_or(segment);
            let Some(&theirs) = rank.get(target.as_str()) else {
                continue; // a macro or an item of the root itself
            };
            if target != room && theirs >= mine {
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

#[test]
fn the_client_imports_only_downward() {
    let src = root().join("crates/memgroup-client/src");
    let violations = client_layering_violations(&src);
    assert!(
        violations.is_empty(),
        "upward imports among memgroup-client's rooms (see CLIENT_ROOMS):\n{}",
        violations.join("\n")
    );
}

#[test]
fn the_layering_check_sees_an_upward_import() {
    // A copy of the client's sources with one upward `use` added: the
    // check must name it, or it proves nothing about the real tree.
    let src = root().join("crates/memgroup-client/src");
    let dir = tempdir("tidy-layering");
    let copy = dir.path();
    for file in rust_files(&src) {
        let to = copy.join(file.strip_prefix(&src).unwrap());
        fs::create_dir_all(to.parent().unwrap()).unwrap();
        fs::copy(&file, &to).unwrap();
    }
    let conn = copy.join("conn/mod.rs");
    let text = fs::read_to_string(&conn).unwrap();
    fs::write(&conn, format!("use crate::{{pool::Pool, Client}};\n{text}")).unwrap();
    let counters = copy.join("counters.rs");
    let text = fs::read_to_string(&counters).unwrap();
    fs::write(&counters, format!("use super::events::Event;\n{text}")).unwrap();
    let violations = client_layering_violations(copy);
    assert_eq!(
        violations,
        [
            "conn/mod.rs: uses client (rank 5) from conn (rank 3)",
            "conn/mod.rs: uses pool (rank 4) from conn (rank 3)",
            "counters.rs: uses events (rank 1) from counters (rank 1)",
        ]
    );
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

/// The `[dependencies]` section of a crate's manifest.
fn dependencies(krate: &str) -> String {
    let manifest =
        fs::read_to_string(root().join("crates").join(krate).join("Cargo.toml")).unwrap();
    let start = manifest
        .find("[dependencies]")
        .expect("a [dependencies] section");
    let section = &manifest[start + "[dependencies]".len()..];
    section[..section.find("\n[").unwrap_or(section.len())].to_string()
}

#[test]
fn the_pure_crates_stay_pure() {
    let mut violations = Vec::new();
    // proto and hash: no runtime, no sockets; topology: not even the clock.
    let rules: &[(&str, &[&str], &[&str])] = &[
        (
            "memgroup-proto",
            &["bytes", "nom"],
            &["tokio", "std::net", "Instant::now", "SystemTime::now"],
        ),
        (
            "memgroup-hash",
            &["crc32fast", "md-5"],
            &["tokio", "std::net", "Instant::now", "SystemTime::now"],
        ),
        (
            "memgroup-topology",
            &["memgroup-hash"],
            &["tokio", "std::net", "Instant::now", "SystemTime::now"],
        ),
    ];
    for &(krate, allowed, banned) in rules {
        for line in dependencies(krate).lines() {
            let name = line.split(['=', '.']).next().unwrap_or("").trim();
            if !name.is_empty() && !name.starts_with('#') && !allowed.contains(&name) {
                violations.push(format!("{krate} depends on {name}"));
            }
        }
        for file in rust_files(&root().join("crates").join(krate).join("src")) {
            let text = code(&file);
            for word in banned {
                if text.contains(word) {
                    violations.push(format!("{}: {word}", file.display()));
                }
            }
        }
    }
    // The client reads the time only through its clock module.
    for file in rust_files(&root().join("crates/memgroup-client/src")) {
        if file.ends_with("clock.rs") {
            continue;
        }
        let text = code(&file);
        for word in ["Instant::now", "SystemTime::now"] {
            if text.contains(word) {
                violations.push(format!("{}: {word} outside clock.rs", file.display()));
            }
        }
    }
    assert!(violations.is_empty(), "{}", violations.join("\n"));
}

#[test]
fn no_file_outgrows_its_room() {
    let mut long = Vec::new();
    for dir in ["crates/memgroup-client/src", "src/bin/memgroup"] {
        for file in rust_files(&root().join(dir)) {
            let relative = file
                .strip_prefix(root())
                .unwrap()
                .to_string_lossy()
                .into_owned();
            let lines = fs::read_to_string(&file).unwrap().lines().count();
            if lines > MAX_LINES && !LONG_FILES.contains(&relative.as_str()) {
                long.push(format!("{relative}: {lines} lines"));
            }
        }
    }
    assert!(
        long.is_empty(),
        "over {MAX_LINES} lines (split by job, or name the exception in LONG_FILES):\n{}",
        long.join("\n")
    );
}
