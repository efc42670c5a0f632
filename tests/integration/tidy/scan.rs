//! Reading the sources for the tidy rules: files, code without comments,
//! the module a file is, the paths it uses, a manifest's dependencies.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`, sorted (a `target` directory skipped).
pub(super) fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.unwrap().path();
            if path.is_dir() {
                if !path.ends_with("target") {
                    stack.push(path);
                }
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
/// these checks do not look for) and without its trailing `mod tests`;
/// nothing of a `tests.rs`, such a module in a file of its own.
pub(super) fn code(path: &Path) -> String {
    if path.file_name().is_some_and(|name| name == "tests.rs") {
        return String::new();
    }
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

/// The module path of `file` inside the crate whose sources are `src`
/// (`lib.rs`/`main.rs`: the root, `[]`; `a/mod.rs` and `a.rs`: `["a"]`;
/// `a/b.rs`: `["a", "b"]`).
pub(super) fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let relative = file.strip_prefix(src).unwrap();
    let mut path: Vec<String> = relative
        .iter()
        .map(|c| c.to_string_lossy().into_owned())
        .collect();
    let last = path.pop().unwrap();
    let stem = last.trim_end_matches(".rs");
    let at_root = path.is_empty() && (stem == "lib" || stem == "main");
    if stem != "mod" && !at_root {
        path.push(stem.to_string());
    }
    path
}

pub(super) fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The paths `text` starts with (`a::b::{c, d::e}` is two), as segments,
/// and how many bytes they took.
fn parse_path(text: &str) -> (Vec<Vec<String>>, usize) {
    let mut segments = Vec::new();
    let mut at = 0;
    loop {
        let rest = &text[at..];
        let trimmed = rest.trim_start();
        at += rest.len() - trimmed.len();
        if let Some(group) = trimmed.strip_prefix('{') {
            // Items split at the group's own commas.
            let mut depth = 1;
            let mut items = Vec::new();
            let mut start = 0;
            let mut end = group.len();
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 1 => {
                        end = i;
                        break;
                    }
                    '}' => depth -= 1,
                    ',' if depth == 1 => {
                        items.push(&group[start..i]);
                        start = i + 1;
                    }
                    _ => {}
                }
            }
            items.push(&group[start..end]);
            let mut paths = Vec::new();
            for item in items.iter().filter(|i| !i.trim().is_empty()) {
                for tail in parse_path(item).0 {
                    let mut path = segments.clone();
                    path.extend(tail.into_iter().filter(|s| s != "self"));
                    paths.push(path);
                }
            }
            return (paths, at + 1 + end + 1);
        }
        let name: String = trimmed.chars().take_while(|&c| is_ident(c)).collect();
        if name.is_empty() {
            return (vec![segments], at);
        }
        at += name.len();
        segments.push(name);
        match text[at..].strip_prefix("::") {
            Some(_) => at += 2,
            None => return (vec![segments], at),
        }
    }
}

/// Every path in `code` that starts with one of `prefixes` (each ending in
/// `::`, not preceded by an identifier or `::`), groups expanded, the prefix
/// kept as the first segment.
pub(super) fn paths_from(code: &str, prefixes: &[&str]) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    let mut i = 0;
    while let Some(c) = code[i..].chars().next() {
        let rest = &code[i..];
        let before = code[..i].chars().next_back();
        let starts = prefixes.iter().any(|p| rest.starts_with(p));
        if starts && !before.is_some_and(|b| is_ident(b) || b == ':') {
            let (paths, len) = parse_path(rest);
            found.extend(paths);
            i += len.max(1);
        } else {
            i += c.len_utf8();
        }
    }
    found
}

/// The `crate::…` and `super::…` paths of `code`, in the module `at`,
/// resolved to paths from the crate root: `super::super::pool::Pool` in
/// `conn/probe.rs` is `["pool", "Pool"]`.
pub(super) fn crate_paths(code: &str, at: &[String]) -> Vec<Vec<String>> {
    let mut resolved = Vec::new();
    for path in paths_from(code, &["crate::", "super::"]) {
        let supers = path.iter().take_while(|s| *s == "super").count();
        let (base, rest) = if path[0] == "crate" {
            (&at[..0], &path[1..])
        } else if supers <= at.len() {
            (&at[..at.len() - supers], &path[supers..])
        } else {
            continue; // above the root: not code rustc accepts
        };
        let mut full = base.to_vec();
        full.extend(rest.iter().cloned());
        if !full.is_empty() {
            resolved.push(full);
        }
    }
    resolved
}

/// The crate root's re-exports: `pub use room::…::{A, B}` makes `crate::A`
/// a path into `room`.
pub(super) fn reexports(lib: &str) -> HashMap<String, String> {
    let mut map = HashMap::new();
    for statement in lib.split(';') {
        let Some(path) = statement.trim().strip_prefix("pub use ") else {
            continue;
        };
        for path in parse_path(path).0 {
            if let (Some(room), Some(name)) = (path.first(), path.last()) {
                map.insert(name.clone(), room.clone());
            }
        }
    }
    map
}

/// The names of the items a crate root file defines at its top level.
pub(super) fn root_items(code: &str) -> Vec<String> {
    let mut names = Vec::new();
    for line in code.lines().filter(|l| !l.starts_with(char::is_whitespace)) {
        let words: Vec<&str> = line.split_whitespace().collect();
        for pair in words.windows(2) {
            if ["fn", "struct", "enum", "const", "static", "type", "trait"].contains(&pair[0]) {
                let name: String = pair[1].chars().take_while(|&c| is_ident(c)).collect();
                names.push(name);
            }
        }
    }
    names
}

/// The crates a manifest depends on outside tests: every `[dependencies]`
/// and `[build-dependencies]` table, `[target.….dependencies]` ones too, and
/// the `[dependencies.NAME]` form.
pub(super) fn manifest_dependencies(manifest: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut in_table = false;
    for line in manifest.lines().map(str::trim) {
        if let Some(header) = line.strip_prefix('[') {
            let header = header.trim_end_matches(']');
            // The last dotted part outside quotes decides the table.
            let parts: Vec<&str> = header.rsplitn(2, '.').collect();
            let kinds = ["dependencies", "build-dependencies"];
            in_table = kinds
                .iter()
                .any(|k| header == *k || header.ends_with(&format!(".{k}")));
            if !in_table
                && parts.len() == 2
                && kinds
                    .iter()
                    .any(|k| parts[1] == *k || parts[1].ends_with(&format!(".{k}")))
            {
                names.push(parts[0].trim_matches('"').to_string());
            }
            continue;
        }
        if in_table && !line.is_empty() && !line.starts_with('#') {
            let name = line.split(['=', '.']).next().unwrap_or("").trim();
            names.push(name.trim_matches('"').to_string());
        }
    }
    names
}
