//! Plain tables for humans; JSON (`--json`) for scripts.

use std::io::Write;

use memgroup::client::WriteOutcome;
use memgroup::client::value::Value;
use serde_json::json;

static QUIET: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
static JSON: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// `-q`: informational lines ([`info`]) are not printed.
pub(crate) fn set_quiet(quiet: bool) {
    QUIET.store(quiet, std::sync::atomic::Ordering::Relaxed);
}

/// Whether `-q` was given.
pub(crate) fn quiet() -> bool {
    QUIET.load(std::sync::atomic::Ordering::Relaxed)
}

/// `--json`: problems on stderr ([`warn`], [`fail`]) are JSON objects too.
pub(crate) fn set_json(json: bool) {
    JSON.store(json, std::sync::atomic::Ordering::Relaxed);
}

/// Whether `--json` was given: the one place the output mode is kept.
pub(crate) fn json() -> bool {
    JSON.load(std::sync::atomic::Ordering::Relaxed)
}

/// A key a command over several keys could not read or write (no server
/// answered, say): named on stderr with why ([`warn`]), and with `--json` a
/// record `{"key", "error"}` among the run's records.
pub(crate) fn key_failed(
    key: &str,
    error: &memgroup::client::Error,
    records: &mut Vec<serde_json::Value>,
) {
    if json() {
        records.push(json!({"key": key, "error": error.chain()}));
    }
    warn(Some(key), &error.chain());
}

/// A problem that does not stop the command (a key not found, a key no
/// server answered for, a short listing), on one stderr line: `memgroup:
/// KEY: MESSAGE`, or with `--json` `{"key": KEY, "error": MESSAGE}` (no
/// `key` when the problem is not about one key).
pub(crate) fn warn(key: Option<&str>, message: &str) {
    stderr_line(("error", ""), key, message);
}

/// A notice that is no failure (a setting overridden, repairs left to the
/// journal at exit), on one stderr line: `memgroup: warning: [KEY: ]MESSAGE`,
/// or with `--json` `{"warning": MESSAGE}` (and `"key"` when it is about
/// one key).
pub(crate) fn warning(key: Option<&str>, message: &str) {
    stderr_line(("warning", "warning: "), key, message);
}

/// One stderr line about `key` (or none): with `--json` an object with
/// `message` under `field`, else `memgroup: ` and `label` before it.
fn stderr_line((field, label): (&str, &str), key: Option<&str>, message: &str) {
    if json() {
        let mut line = json!({ field: message });
        if let Some(key) = key {
            line["key"] = json!(key);
        }
        eprintln!("{line}");
    } else {
        match key {
            Some(key) => eprintln!("memgroup: {label}{}: {}", clean(key), clean(message)),
            None => eprintln!("memgroup: {label}{}", clean(message)),
        }
    }
}

/// The error that ends the run, on one stderr line: `memgroup: MESSAGE`, or
/// with `--json` `{"error": MESSAGE, "exit": CODE}`; gives the exit code.
pub(crate) fn fail(message: &str, code: u8) -> std::process::ExitCode {
    if json() {
        eprintln!("{}", json!({"error": message, "exit": code}));
    } else {
        eprintln!("memgroup: {}", clean(message));
    }
    std::process::ExitCode::from(code)
}

/// A note about what the command is about to do, on stderr (`memgroup:
/// NOTE`), so stdout stays the command's output; not with `-q` or `--json`.
pub(crate) fn note(line: &str) {
    if !quiet() && !json() {
        eprintln!("memgroup: {}", clean(line));
    }
}

/// Writes an informational line (a write report, a confirmation), unless `-q`.
pub(crate) fn info(line: &str) {
    if !QUIET.load(std::sync::atomic::Ordering::Relaxed) {
        write_line(line);
    }
}

/// Writes one line to stdout. A closed pipe (`memgroup … | head`) ends the
/// program quietly instead of panicking like `println!`.
pub(crate) fn write_line(line: &str) {
    if let Err(e) = writeln!(std::io::stdout().lock(), "{line}") {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        let _ = fail(&format!("writing output: {e}"), 1);
        std::process::exit(1);
    }
}

/// `println!` through [`write_line`].
macro_rules! outln {
    () => {
        $crate::output::write_line("")
    };
    ($($arg:tt)*) => {
        $crate::output::write_line(&format!($($arg)*))
    };
}
pub(crate) use outln;

/// A value's bytes made safe for a terminal: control bytes other than
/// newline and tab (ESC, BEL, CR, DEL, NUL, …) become `\xNN`; the rest, text
/// in any encoding included, is left as it is.
pub(crate) fn terminal_safe(data: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    let unsafe_byte = |b: u8| (b < 0x20 && b != b'\n' && b != b'\t') || b == 0x7f;
    if !data.iter().copied().any(unsafe_byte) {
        return std::borrow::Cow::Borrowed(data);
    }
    let mut shown = Vec::with_capacity(data.len() + 8);
    for &b in data {
        if unsafe_byte(b) {
            shown.extend_from_slice(format!("\\x{b:02x}").as_bytes());
        } else {
            shown.push(b);
        }
    }
    std::borrow::Cow::Owned(shown)
}

/// Text from a server (an error message, a version string) made safe for a
/// terminal: control characters (ESC, BEL, CR, …) are shown escaped, so a
/// server cannot move the cursor or rewrite the operator's screen.
pub(crate) fn clean(text: &str) -> String {
    if !text.chars().any(char::is_control) {
        return text.to_string();
    }
    text.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// Prints rows as an aligned table with a header. Cells are [`clean`]ed.
pub(crate) fn table(header: &[&str], rows: &[Vec<String>]) {
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|row| row.iter().map(|cell| clean(cell)).collect())
        .collect();
    let rows = &rows;
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        write_line(padded.join("  ").trim_end());
    };
    line(header.to_vec());
    for row in rows {
        line(row.iter().map(String::as_str).collect());
    }
}

/// A report for people or scripts: table rows under a header, and JSON
/// records (usually one per row), printed as the table or, with `--json`,
/// as one JSON array.
#[derive(Debug)]
pub(crate) struct Report {
    header: &'static [&'static str],
    rows: Vec<Vec<String>>,
    records: Vec<serde_json::Value>,
}

impl Report {
    /// An empty report whose table has these columns.
    pub(crate) fn new(header: &'static [&'static str]) -> Report {
        Report {
            header,
            rows: Vec::new(),
            records: Vec::new(),
        }
    }

    /// Adds a table row.
    pub(crate) fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// Adds a JSON record.
    pub(crate) fn record(&mut self, record: serde_json::Value) {
        self.records.push(record);
    }

    /// The JSON records, for a report inside a larger JSON object.
    pub(crate) fn records(&self) -> &[serde_json::Value] {
        &self.records
    }

    /// Whether the table has no rows.
    pub(crate) fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Prints the table ([`table`]).
    pub(crate) fn print_table(&self) {
        table(self.header, &self.rows);
    }

    /// Prints the records as one JSON array with `--json`, else the table.
    pub(crate) fn print(&self) {
        if json() {
            records(&self.records);
        } else {
            self.print_table();
        }
    }
}

/// Why a group refused a write by its condition, in the words a user of
/// that command expects (the outcome only knows applied or not; JSON
/// keeps `"applied": false`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// `set`, `cp`, `ms`: the server did not store it.
    NotStored,
    /// `add`: the key was there.
    Exists,
    /// `replace`, `append`, `prepend`: the key was not there.
    Missing,
    /// `cas`: the item changed since that unique was read, or is gone.
    Changed,
    /// `delete`, `touch`, `invalidate`: the key was not there.
    NotFound,
    /// `md`: not there, or (with a CAS given) changed.
    NotDeleted,
}

impl Refused {
    fn words(self) -> &'static str {
        match self {
            Refused::NotStored => "not stored",
            Refused::Exists => "not stored: the key exists",
            Refused::Missing => "not stored: no such key",
            Refused::Changed => "not stored: the item changed or is gone",
            Refused::NotFound => "not found",
            Refused::NotDeleted => "not deleted: not found, or its cas differs",
        }
    }
}

/// Reports a write to every group: with `--json` one record of the key and
/// each group's result added to `records` (printed by the caller, with the
/// other keys', as one array), else one informational line per group, a
/// refusal in the words of `refused`. How far it got is
/// `Done::of_write(outcome)`.
pub(crate) fn write_outcome(
    key: &str,
    outcome: &WriteOutcome,
    refused: Refused,
    records: &mut Vec<serde_json::Value>,
) {
    if json() {
        let groups: Vec<_> = outcome
            .groups
            .iter()
            .map(|g| match &g.result {
                Ok(_) if g.cleared => {
                    json!({"group": &*g.group, "server": g.server.as_deref(), "cleared": true})
                }
                Ok(applied) => json!({"group": &*g.group, "server": g.server.as_deref(), "applied": applied}),
                Err(e) if g.cleared => {
                    json!({"group": &*g.group, "server": g.server.as_deref(), "cleared": false, "error": e.chain()})
                }
                Err(e) => json!({"group": &*g.group, "server": g.server.as_deref(), "error": e.chain()}),
            })
            .collect();
        records.push(json!({"key": key, "groups": groups}));
    } else {
        for g in &outcome.groups {
            let server = g.server.as_deref().unwrap_or("-");
            info(&match &g.result {
                Ok(_) if g.cleared => format!(
                    "{key}: {} {server}: copy cleared (the arbiter group decides)",
                    g.group
                ),
                Ok(true) => format!("{key}: {} {server}: ok", g.group),
                Ok(false) => format!("{key}: {} {server}: {}", g.group, refused.words()),
                Err(e) if g.cleared => format!(
                    "{key}: {} {server}: its copy not cleared (may be stale): {}",
                    g.group,
                    clean(&e.chain())
                ),
                Err(e) => format!("{key}: {} {server}: error: {}", g.group, clean(&e.chain())),
            });
        }
    }
}

/// Prints the one JSON document of a run: its records as one array, on
/// one line (a command with one result prints an array of one).
pub(crate) fn records(records: &[serde_json::Value]) {
    write_line(&serde_json::Value::from(records).to_string());
}

/// A failure that stops a command after some keys were done: with `--json`
/// their records are printed first (the run's one array, of the keys done
/// before it), then the failure goes on to be reported.
pub(crate) fn records_before<F>(done: &[serde_json::Value], failure: F) -> F {
    if json() && !done.is_empty() {
        records(done);
    }
    failure
}

/// [`records`] of one record.
pub(crate) fn record(record: serde_json::Value) {
    records(&[record]);
}

/// Text for possibly-binary bytes.
pub(crate) fn show(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A decoded value as the bytes `get` prints: text and numbers as text,
/// bytes (and serialized objects) as they are.
pub(crate) fn value_bytes(value: &Value) -> Vec<u8> {
    match value {
        Value::Bytes(b) | Value::Serialized { data: b, .. } => b.to_vec(),
        other => value_text(other).unwrap_or_default().into_bytes(),
    }
}

/// The text form of a non-byte value.
fn value_text(value: &Value) -> Option<String> {
    Some(match value {
        Value::String(s) | Value::BigInt(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        Value::Byte(n) => n.to_string(),
        Value::Short(n) => n.to_string(),
        Value::Int(n) => n.to_string(),
        Value::Long(n) | Value::Date(n) => n.to_string(),
        Value::Float(f) => f.to_string(),
        Value::Double(f) => f.to_string(),
        Value::Char(c) => c.to_string(),
        _ => return None,
    })
}

/// Adds `value` (and, for bytes that are not UTF-8, `"encoding": "base64"`)
/// to a JSON record: binary-safe.
pub(crate) fn json_value(record: &mut serde_json::Value, value: &Value) {
    let (v, encoding) = match value {
        Value::Bytes(b) | Value::Serialized { data: b, .. } => match std::str::from_utf8(b) {
            Ok(text) => (json!(text), None),
            Err(_) => {
                let mut encoded = Vec::new();
                memgroup::proto::base64_encode(b, &mut encoded);
                (json!(String::from_utf8_lossy(&encoded)), Some("base64"))
            }
        },
        Value::Bool(b) => (json!(b), None),
        Value::Byte(n) => (json!(n), None),
        Value::Short(n) => (json!(n), None),
        Value::Int(n) => (json!(n), None),
        Value::Long(n) | Value::Date(n) => (json!(n), None),
        Value::Float(f) => (json!(f), None),
        Value::Double(f) => (json!(f), None),
        other => (json!(value_text(other)), None),
    };
    record["value"] = v;
    if let Some(encoding) = encoding {
        record["encoding"] = json!(encoding);
    }
}

#[cfg(test)]
mod tests {
    use super::terminal_safe;

    /// Escapes and bells are shown, not obeyed; text, newlines and tabs
    /// pass untouched (and uncopied).
    #[test]
    fn values_are_made_safe_for_a_terminal() {
        assert_eq!(&*terminal_safe(b"a\x1b[31mred\x07"), b"a\\x1b[31mred\\x07");
        assert_eq!(&*terminal_safe(b"\0\r\x7f"), b"\\x00\\x0d\\x7f");
        let text = "line 1\n\tcaf\u{e9} \u{2603}".as_bytes();
        assert!(matches!(terminal_safe(text), std::borrow::Cow::Borrowed(t) if t == text));
    }
}
