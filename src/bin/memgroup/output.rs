//! Plain tables for humans; JSON (`--json`) for scripts.

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
        println!("{}", padded.join("  ").trim_end());
    };
    line(header.to_vec());
    for row in rows {
        line(row.iter().map(String::as_str).collect());
    }
}

/// Prints a JSON value on one line.
pub(crate) fn json(value: &serde_json::Value) {
    println!("{value}");
}

/// Text for possibly-binary bytes.
pub(crate) fn show(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}
