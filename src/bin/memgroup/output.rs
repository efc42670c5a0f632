//! Plain tables for humans; JSON (`--json`) for scripts.

use std::io::Write;

/// Writes one line to stdout. A closed pipe (`memgroup … | head`) ends the
/// program quietly instead of panicking like `println!`.
pub(crate) fn write_line(line: &str) {
    if let Err(e) = writeln!(std::io::stdout().lock(), "{line}") {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("memgroup: writing output: {e}");
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

/// Prints rows as an aligned table with a header.
pub(crate) fn table(header: &[&str], rows: &[Vec<String>]) {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
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

/// Prints a JSON value on one line.
pub(crate) fn json(value: &serde_json::Value) {
    write_line(&value.to_string());
}

/// Text for possibly-binary bytes.
pub(crate) fn show(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}
