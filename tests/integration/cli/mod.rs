//! The `memgroup` binary against real memcached: every subcommand's happy
//! path and its bad-input path, by command family.

mod basics;
mod bench;
mod config;
mod json;
mod replicas;
mod stats;
mod usage;
mod warm;

use std::process::Output;

pub(super) fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub(super) fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The one JSON document of a run: stdout must be exactly one JSON array on
/// one line (not one object per line, not a bare object).
pub(super) fn json_array(o: &Output) -> Vec<serde_json::Value> {
    let out = stdout(o);
    assert_eq!(out.trim_end().lines().count(), 1, "one line: {out}");
    match serde_json::from_str(&out) {
        Ok(serde_json::Value::Array(records)) => records,
        other => panic!("not one JSON array ({other:?}): {out}"),
    }
}

/// Every stderr line of a `--json` run, each a JSON object.
pub(super) fn json_errors(o: &Output) -> Vec<serde_json::Value> {
    stderr(o)
        .lines()
        .map(|line| match serde_json::from_str(line) {
            Ok(v @ serde_json::Value::Object(_)) => v,
            other => panic!("stderr line is no JSON object ({other:?}): {line}"),
        })
        .collect()
}
