//! The reads: `get`, `gets` (with CAS uniques) and `exist`.

use std::process::ExitCode;

use memgroup::client::value::{Value, ValueFormat};
use memgroup::client::{Client, Freshness, Item};
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
    /// Read only this group's copies (no fallback to another group, no
    /// failover within it): to compare the replicas of a key.
    #[arg(long, value_name = "GROUP")]
    group: Option<String>,
}

/// The keys to read, and how to print their values.
#[derive(Debug, clap::Args)]
pub(crate) struct GetArgs {
    #[command(flatten)]
    read: Args,
    /// Print each value found as memcached itself sends it: `VALUE <key>
    /// <flags> <bytes>[ <cas>]`, CRLF, the value's bytes, CRLF; then `END`,
    /// CRLF. Binary-safe (the length says where a value ends, whatever bytes
    /// it holds), for one key or many; keys not found are left out (and
    /// named on stderr).
    #[arg(long)]
    protocol: bool,
    /// Print a value marked stale (by `invalidate`, waiting for its refill)
    /// as found, named stale on stderr. Without it a stale value is left
    /// out like a missing key (exit 1), where a plain memcached `get`
    /// would return it as if fresh.
    #[arg(long)]
    stale_ok: bool,
}

/// How `get`/`gets` print values without `--json`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Form {
    /// One key: exactly its bytes.
    Bytes,
    /// Several: `key: value` lines (`gets`: with cas and flags).
    Lines,
    /// `--protocol`: memcached's own `VALUE` blocks.
    Protocol,
}

impl Form {
    fn of(args: &GetArgs) -> Result<Form, Failure> {
        let json = crate::output::json();
        if args.protocol && json {
            return Err(Failure::Usage(
                "--protocol and --json are two output forms: choose one".into(),
            ));
        }
        Ok(if args.protocol {
            Form::Protocol
        } else if args.read.keys.len() == 1 {
            Form::Bytes
        } else {
            Form::Lines
        })
    }
}

/// Writes `data` to stdout in `form`: one `VALUE` block for
/// [`Form::Protocol`], else `prefix` (if any) then the bytes and, for
/// [`Form::Lines`], a newline.
///
/// On a terminal, a value's control bytes are shown escaped (`\x1b`), so a
/// stored value cannot move the cursor or rewrite the screen, and one key's
/// value ends its line; piped, the bytes go out exactly as stored.
fn write_value(form: Form, key: &str, flags: u32, cas: Option<u64>, prefix: &str, data: &[u8]) {
    use std::io::{IsTerminal, Write};
    let mut out = std::io::stdout().lock();
    let terminal = out.is_terminal();
    let shown;
    let data = if terminal && !matches!(form, Form::Protocol) {
        shown = output::terminal_safe(data);
        &shown[..]
    } else {
        data
    };
    let _ = match form {
        Form::Protocol => {
            let cas = cas.map(|c| format!(" {c}")).unwrap_or_default();
            write!(out, "VALUE {key} {flags} {}{cas}\r\n", data.len())
                .and_then(|()| out.write_all(data))
                .and_then(|()| out.write_all(b"\r\n"))
        }
        Form::Bytes if terminal && !data.ends_with(b"\n") => {
            out.write_all(data).and_then(|()| writeln!(out))
        }
        Form::Bytes => out.write_all(data),
        Form::Lines => write!(out, "{prefix}")
            .and_then(|()| out.write_all(data))
            .and_then(|()| writeln!(out)),
    };
}

/// `get`: each key's value, decoded by the value format; one key's bytes
/// exactly as stored, several as `key: value` lines, or (`--protocol`)
/// memcached's `VALUE` blocks.
pub(crate) async fn get(args: &GetArgs, flags: &ClusterFlags) -> Result<ExitCode, Failure> {
    let json = crate::output::json();
    let form = Form::of(args)?;
    let client = Cluster::from_flags(flags)?.client_for(args.read.group.as_deref())?;
    let keys = &args.read.keys[..];
    super::check_keys(&client, keys)?;
    // One meta read per key, all at once: a stale value is told apart.
    // At most 256 at once: a long key list is not a task per key.
    let mut found = Vec::with_capacity(keys.len());
    for chunk in keys.chunks(256) {
        let reads: Vec<_> = chunk
            .iter()
            .map(|key| {
                let (client, key) = (client.clone(), key.clone());
                tokio::spawn(async move { client.get_with_freshness(key).await })
            })
            .collect();
        for read in reads {
            found.push(read.await.expect("a read task does not panic"));
        }
    }
    let (mut failed, mut unanswered) = (0, 0);
    let mut records = Vec::new();
    for (key, found) in keys.iter().zip(found) {
        let (item, stale) = match found {
            Ok(Some(filled)) if filled.freshness == Freshness::Stale && !args.stale_ok => {
                failed += 1;
                if json {
                    records.push(json!({"key": key, "value": null, "stale": true}));
                }
                output::warn(
                    Some(key),
                    "stale (invalidated, awaiting its refill): left out; --stale-ok prints it",
                );
                continue;
            }
            Ok(Some(filled)) => (filled.item, filled.freshness == Freshness::Stale),
            Err(e) => {
                unanswered += 1;
                output::key_failed(key, &e, &mut records);
                continue;
            }
            Ok(None) => {
                failed += 1;
                not_found(key, &mut records);
                continue;
            }
        };
        if stale {
            output::warn(Some(key), "stale (invalidated, awaiting its refill)");
        }
        // `--protocol` prints what memcached sent, whatever the format.
        if matches!(form, Form::Protocol) {
            write_value(form, key, item.flags, None, "", &item.value);
            continue;
        }
        let record = json!({"key": key, "flags": item.flags});
        let Some(value) = decoded(&client, key, &item, json.then_some((record, &mut records)))
        else {
            failed += 1;
            continue;
        };
        if json {
            let mut record = json!({"key": key, "flags": item.flags, "type": value.type_name()});
            if stale {
                record["stale"] = json!(true);
            }
            output::json_value(&mut record, &value);
            records.push(record);
        } else {
            // One key: exactly the value's bytes, as memcat writes them;
            // several: `key: value` lines.
            let data = output::value_bytes(&value);
            write_value(form, key, item.flags, None, &format!("{key}: "), &data);
        }
    }
    Ok(finish(&records, form, keys.len(), failed, unanswered))
}

/// What `get` and `gets` show of an item: `raw` the bytes as stored, a
/// format what it decodes them to. A value the format cannot decode is
/// `None`, said on stderr and (with `--json`: the key's record so far, and
/// the records) recorded with its error.
fn decoded(
    client: &Client,
    key: &str,
    item: &Item,
    json: Option<(serde_json::Value, &mut Vec<serde_json::Value>)>,
) -> Option<Value> {
    let value = match client.value_format() {
        ValueFormat::Raw => Ok(Value::Bytes(item.value.clone())),
        _ => client.decode_as::<Value>(key, item),
    };
    match value {
        Ok(value) => Some(value),
        Err(e) => {
            if let Some((mut record, records)) = json {
                record["error"] = json!(e.chain());
                records.push(record);
            }
            output::warn(None, &e.chain());
            None
        }
    }
}

/// `gets`: each key's value with its CAS unique, for a later `cas`.
pub(crate) async fn gets(args: &GetArgs, flags: &ClusterFlags) -> Result<ExitCode, Failure> {
    let json = crate::output::json();
    // `gets` prints `key cas=… flags=…: value` lines, one key or several.
    let form = match Form::of(args)? {
        Form::Bytes => Form::Lines,
        form => form,
    };
    let client = Cluster::from_flags(flags)?.client_for(args.read.group.as_deref())?;
    let keys = &args.read.keys[..];
    super::check_keys(&client, keys)?;
    let (mut failed, mut unanswered) = (0, 0);
    let mut records = Vec::new();
    let items = super::concurrently(keys, |key| client.gets(key)).await;
    for (key, item) in keys.iter().zip(items) {
        let item = match item {
            Ok(item) => item,
            // No group answered for this key: name it and its server, and
            // go on with the others (as `get` does).
            Err(e) => {
                unanswered += 1;
                output::key_failed(key, &e, &mut records);
                continue;
            }
        };
        match item {
            Some(item) => {
                let cas = item.cas.unwrap_or(0);
                if matches!(form, Form::Protocol) {
                    write_value(form, key, item.flags, Some(cas), "", &item.value);
                    continue;
                }
                let record = json!({"key": key, "flags": item.flags, "cas": cas});
                let Some(value) =
                    decoded(&client, key, &item, json.then_some((record, &mut records)))
                else {
                    failed += 1;
                    continue;
                };
                if json {
                    let mut record = json!({"key": key, "flags": item.flags, "cas": cas, "type": value.type_name()});
                    output::json_value(&mut record, &value);
                    records.push(record);
                } else {
                    let prefix = format!("{key} cas={cas} flags={}: ", item.flags);
                    let data = output::value_bytes(&value);
                    write_value(form, key, item.flags, Some(cas), &prefix, &data);
                }
            }
            None => {
                failed += 1;
                not_found(key, &mut records);
            }
        }
    }
    Ok(finish(&records, form, keys.len(), failed, unanswered))
}

/// `exist`: exit 0 only if every key exists (like libmemcached's memexist).
/// A key no group answered for is neither: it is named on stderr with why,
/// and exits 3 (partly done) beside keys that were answered, as `get` does.
pub(crate) async fn exist(args: &Args, flags: &ClusterFlags) -> Result<ExitCode, Failure> {
    let json = crate::output::json();
    let client = Cluster::from_flags(flags)?.client_for(args.group.as_deref())?;
    let keys = &args.keys[..];
    let found = client.get_multi(keys).await?;
    let (mut missing, mut unanswered) = (0, 0);
    let mut records = Vec::new();
    for (key, (_, outcome)) in keys.iter().zip(found.iter()) {
        match outcome {
            Ok(item) => {
                let present = item.is_some();
                missing += usize::from(!present);
                if json {
                    records.push(json!({"key": key, "exists": present}));
                } else {
                    // The same words as `get` for a key that is not there.
                    outln!("{key}: {}", if present { "exists" } else { "not found" });
                }
            }
            Err(e) => {
                unanswered += 1;
                output::key_failed(key, e, &mut records);
            }
        }
    }
    Ok(finish(
        &records,
        Form::Lines,
        keys.len(),
        missing,
        unanswered,
    ))
}

/// A key that is not there: a line on stderr ([`output::warn`]), and with
/// `--json` a record with a null value.
fn not_found(key: &str, records: &mut Vec<serde_json::Value>) {
    let json = crate::output::json();
    if json {
        records.push(json!({"key": key, "value": null}));
    }
    output::warn(Some(key), "not found");
}

/// The end of a read of `keys` keys, `failed` of them not found (or not
/// shown) and `unanswered` with no answer: with `--json` the records as one
/// JSON array (without, each key's line was printed as it came;
/// `--protocol` ends with `END`). Exit 3 (partly done) when some keys got
/// no answer while others did, else 1 unless every key was shown.
fn finish(
    records: &[serde_json::Value],
    form: Form,
    keys: usize,
    failed: usize,
    unanswered: usize,
) -> ExitCode {
    let json = crate::output::json();
    if json {
        output::records(records);
    } else if form == Form::Protocol {
        use std::io::Write;
        let _ = std::io::stdout().lock().write_all(b"END\r\n");
    }
    if unanswered > 0 && unanswered < keys {
        return ExitCode::from(exit::PARTIAL);
    }
    exit::code(failed + unanswered == 0)
}
