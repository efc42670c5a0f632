//! The reads: `get`, `gets` (with CAS uniques) and `exist`.

use std::process::ExitCode;

use memgroup::client::value::{Value, ValueFormat};
use serde_json::json;

use crate::cluster::Cluster;
use crate::exit::{self, Failure};
use crate::flags::ClusterFlags;
use crate::output::{self, outln};

/// The keys to read.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The keys.
    #[arg(required = true)]
    keys: Vec<String>,
}

/// `get`: each key's value, decoded by the value format; one key's bytes
/// exactly as stored, several as `key: value` lines.
pub(crate) async fn get(
    args: &Args,
    flags: &ClusterFlags,
    json: bool,
) -> Result<ExitCode, Failure> {
    let client = Cluster::from_flags(flags)?.client()?;
    let keys = &args.keys[..];
    let found = client.get_multi(keys).await?;
    let (mut failed, mut unanswered) = (0, 0);
    let mut records = Vec::new();
    for key in keys {
        let item = match found.outcome(key.as_bytes()) {
            Some(Ok(Some(item))) => item,
            Some(Err(e)) => {
                // No group answered for this key: name it and its server.
                unanswered += 1;
                if json {
                    records.push(json!({"key": key, "error": e.chain()}));
                }
                output::warn(Some(key), &e.chain());
                continue;
            }
            _ => {
                failed += 1;
                not_found(key, json, &mut records);
                continue;
            }
        };
        // `raw` shows the bytes as stored; a format decodes them.
        let value = match client.value_format() {
            ValueFormat::Raw => Ok(Value::Bytes(item.value.clone())),
            _ => client.decode(key, item),
        };
        let value = match value {
            Ok(value) => value,
            Err(e) => {
                failed += 1;
                if json {
                    records.push(json!({"key": key, "flags": item.flags, "error": e.chain()}));
                }
                output::warn(None, &e.chain());
                continue;
            }
        };
        if json {
            let mut record = json!({"key": key, "flags": item.flags, "type": value.type_name()});
            output::json_value(&mut record, &value);
            records.push(record);
        } else {
            use std::io::Write;
            let mut out = std::io::stdout().lock();
            if keys.len() == 1 {
                // One key: exactly the value's bytes, as memcat writes them.
                let _ = out.write_all(&output::value_bytes(&value));
            } else {
                let _ = write!(out, "{key}: ");
                let _ = out.write_all(&output::value_bytes(&value));
                let _ = writeln!(out);
            }
        }
    }
    if unanswered > 0 && unanswered < keys.len() {
        // Partly done: some keys got no answer while others did.
        finish(&records, json, true);
        return Ok(ExitCode::from(exit::PARTIAL));
    }
    Ok(finish(&records, json, failed + unanswered == 0))
}

/// `gets`: each key's value with its CAS unique, for a later `cas`.
pub(crate) async fn gets(
    args: &Args,
    flags: &ClusterFlags,
    json: bool,
) -> Result<ExitCode, Failure> {
    let client = Cluster::from_flags(flags)?.client()?;
    let keys = &args.keys[..];
    let mut missing = 0;
    let mut records = Vec::new();
    for key in keys {
        match client.gets(key).await? {
            Some(item) => {
                let cas = item.cas.unwrap_or(0);
                if json {
                    let mut record = json!({"key": key, "flags": item.flags, "cas": cas});
                    output::json_value(&mut record, &Value::Bytes(item.value.clone()));
                    records.push(record);
                } else {
                    use std::io::Write;
                    let mut out = std::io::stdout().lock();
                    let _ = write!(out, "{key} cas={cas} flags={}: ", item.flags);
                    let _ = out.write_all(&item.value);
                    let _ = writeln!(out);
                }
            }
            None => {
                missing += 1;
                not_found(key, json, &mut records);
            }
        }
    }
    Ok(finish(&records, json, missing == 0))
}

/// `exist`: exit 0 only if every key exists (like libmemcached's memexist).
pub(crate) async fn exist(
    args: &Args,
    flags: &ClusterFlags,
    json: bool,
) -> Result<ExitCode, Failure> {
    let client = Cluster::from_flags(flags)?.client()?;
    let keys = &args.keys[..];
    let found = client.get_multi(keys).await?;
    let mut records = Vec::new();
    for key in keys {
        let present = found.get(key.as_bytes()).is_some();
        if json {
            records.push(json!({"key": key, "exists": present}));
        } else {
            outln!("{key}: {}", if present { "exists" } else { "missing" });
        }
    }
    let all = keys.iter().all(|k| found.get(k.as_bytes()).is_some());
    Ok(finish(&records, json, all))
}

/// A key that is not there: a line on stderr ([`output::warn`]), and with
/// `json` a record with a null value.
fn not_found(key: &str, json: bool, records: &mut Vec<serde_json::Value>) {
    if json {
        records.push(json!({"key": key, "value": null}));
    }
    output::warn(Some(key), "not found");
}

/// The end of a read: with `json` the records as one JSON array (without,
/// each key's line was printed as it came); exit 1 unless `ok`.
fn finish(records: &[serde_json::Value], json: bool, ok: bool) -> ExitCode {
    if json {
        output::records(records);
    }
    exit::code(ok)
}
