//! The simple subcommands: route, get/set/delete/touch/incr/decr, flush, stats, load.

use std::io::Read;
use std::process::ExitCode;
use std::time::Instant;

use memgroup::client::Client;
use memgroup::client::value::{ToValue, Value, ValueFormat};
use memgroup::hash::HashStrategy;
use memgroup::topology::{GroupId, Topology};
use serde_json::json;

use crate::cluster::Cluster;
use crate::dump;
use crate::exit::{self, Failure};
use crate::flags::ClusterFlags;
use crate::output::outln;
use crate::output::{self, Report, show};

/// The strategies `route --all-strategies` compares.
const STRATEGIES: [HashStrategy; 5] = [
    HashStrategy::Native,
    HashStrategy::OldCompat,
    HashStrategy::NewCompat,
    HashStrategy::Consistent,
    HashStrategy::Ketama,
];

pub(crate) fn route(
    flags: &ClusterFlags,
    keys: &[String],
    all: bool,
    json: bool,
) -> Result<ExitCode, Failure> {
    let spec = Cluster::from_flags(flags)?.spec;
    let variants: Vec<(String, Topology)> = if all {
        STRATEGIES
            .iter()
            .map(|&s| {
                let mut spec = spec.clone();
                for g in &mut spec.groups {
                    g.locator.strategy = s;
                }
                Ok((s.to_string(), Topology::new(spec)?))
            })
            .collect::<Result<_, Failure>>()?
    } else {
        let t = Topology::new(spec.clone())?;
        let name = spec
            .groups
            .first()
            .map(|g| g.locator.strategy.to_string())
            .unwrap_or_default();
        vec![(name, t)]
    };
    let mut report = Report::new(&["KEY", "STRATEGY", "GROUP", "SERVER"]);
    for key in keys {
        for (strategy, topology) in &variants {
            for (gi, group) in topology.groups().iter().enumerate() {
                let wire = topology.wire_key(GroupId(gi), key.as_bytes());
                let server = &topology.servers()[group.server_for(&wire).0];
                report.row(vec![
                    key.clone(),
                    strategy.clone(),
                    group.name().to_string(),
                    server.to_string(),
                ]);
                report.record(json!({"key": key, "wire_key": show(&wire), "strategy": strategy, "group": group.name(), "server": server.to_string()}));
            }
        }
    }
    report.print(json);
    Ok(ExitCode::SUCCESS)
}

pub(crate) async fn get(client: &Client, keys: &[String], json: bool) -> Result<ExitCode, Failure> {
    let found = client.get_multi(keys).await?;
    let mut failed = 0;
    let mut records = Vec::new();
    for key in keys {
        let Some(item) = found.get(key.as_bytes()) else {
            failed += 1;
            if json {
                records.push(json!({"key": key, "value": null}));
            } else {
                eprintln!("memgroup: {key}: not found");
            }
            continue;
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
                } else {
                    eprintln!("memgroup: {}", output::clean(&e.chain()));
                }
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
    if json {
        output::json(&json!(records));
    }
    Ok(exit::code(failed == 0))
}

pub(crate) async fn set(
    client: &Client,
    key: &str,
    value: &str,
    exptime: u32,
    flags: u32,
    kind: Option<ValueType>,
    json: bool,
) -> Result<ExitCode, Failure> {
    let data = read_value(value)?;
    let outcome = match kind {
        None => client.set_with_flags(key, &data, flags, exptime).await?,
        Some(kind) => {
            let value = kind.parse(&data)?;
            client.set_value(key, &value, exptime).await?
        }
    };
    Ok(exit::code(output::write_outcome(key, &outcome, json)))
}

/// A value argument: the text itself, or stdin for `-`.
fn read_value(value: &str) -> Result<Vec<u8>, Failure> {
    if value != "-" {
        return Ok(value.as_bytes().to_vec());
    }
    let mut buf = Vec::new();
    std::io::stdin()
        .read_to_end(&mut buf)
        .map_err(|e| Failure::Op(format!("reading stdin: {e}")))?;
    Ok(buf)
}

/// The conditional stores: `add`, `replace`, `append`, `prepend`, `cas`.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Conditional {
    Add,
    Replace,
    Append,
    Prepend,
    Cas(u64),
}

pub(crate) async fn store(
    client: &Client,
    command: Conditional,
    key: &str,
    value: &str,
    exptime: u32,
    flags: u32,
    json: bool,
) -> Result<ExitCode, Failure> {
    let data = read_value(value)?;
    let outcome = match command {
        Conditional::Add => client.add(key, &data, exptime).await?,
        Conditional::Replace => client.replace(key, &data, exptime).await?,
        Conditional::Append => client.append(key, &data).await?,
        Conditional::Prepend => client.prepend(key, &data).await?,
        Conditional::Cas(cas) => client.cas(key, &data, flags, exptime, cas).await?,
    };
    Ok(exit::code(output::write_outcome(key, &outcome, json)))
}

/// `gets`: each key's value with its CAS unique, for a later `cas`.
pub(crate) async fn gets(
    client: &Client,
    keys: &[String],
    json: bool,
) -> Result<ExitCode, Failure> {
    let mut code = ExitCode::SUCCESS;
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
                code = ExitCode::from(1);
                if json {
                    records.push(json!({"key": key, "value": null}));
                } else {
                    eprintln!("memgroup: {key}: not found");
                }
            }
        }
    }
    if json {
        output::json(&json!(records));
    }
    Ok(code)
}

/// `exist`: exit 0 only if every key exists (like libmemcached's memexist).
pub(crate) async fn exist(
    client: &Client,
    keys: &[String],
    json: bool,
) -> Result<ExitCode, Failure> {
    let found = client.get_multi(keys).await?;
    let mut records = Vec::new();
    for key in keys {
        let present = found.contains_key(key.as_bytes());
        if json {
            records.push(json!({"key": key, "exists": present}));
        } else {
            outln!("{key}: {}", if present { "exists" } else { "missing" });
        }
    }
    if json {
        output::json(&json!(records));
    }
    Ok(exit::code(
        keys.iter().all(|k| found.contains_key(k.as_bytes())),
    ))
}

/// `version`: each server's version, with its group.
pub(crate) async fn version(client: &Client, json: bool) -> Result<ExitCode, Failure> {
    let mut failed = 0;
    let mut report = Report::new(&["GROUP", "SERVER", "VERSION"]);
    for (group, server, version) in client.version().await {
        match version {
            Ok(v) => {
                report.record(json!({"group": group, "server": server, "version": v}));
                report.row(vec![group, server, v]);
            }
            Err(e) => {
                failed += 1;
                report.record(json!({"group": group, "server": server, "error": e.chain()}));
                report.row(vec![group, server, format!("error: {}", e.chain())]);
            }
        }
    }
    report.print(json);
    Ok(exit::code(failed == 0))
}

/// `stats ARG`: one raw statistics section (`slabs`, `items`, `settings`,
/// `sizes`, `conns`, …) of every server.
pub(crate) async fn stats_section(
    client: &Client,
    arg: &str,
    group: Option<&str>,
    json: bool,
) -> Result<ExitCode, Failure> {
    let mut failed = 0;
    let mut report = Report::new(&["GROUP", "SERVER", "NAME", "VALUE"]);
    for s in client.stats(Some(arg)).await? {
        if group.is_some_and(|g| g != s.group) {
            continue;
        }
        match &s.stats {
            Ok(stats) => {
                let mut names: Vec<&String> = stats.keys().collect();
                names.sort();
                for name in names {
                    report.row(vec![
                        s.group.clone(),
                        s.server.clone(),
                        name.clone(),
                        stats[name].clone(),
                    ]);
                }
                report.record(json!({"group": s.group, "server": s.server, "stats": stats}));
            }
            Err(e) => {
                failed += 1;
                report.row(vec![
                    s.group.clone(),
                    s.server.clone(),
                    "error".into(),
                    e.chain(),
                ]);
                report.record(json!({"group": s.group, "server": s.server, "error": e.chain()}));
            }
        }
    }
    report.print(json);
    Ok(exit::code(failed == 0))
}

/// `keys`: every key of a group's servers, listed by the LRU crawler
/// (`lru_crawler metadump`), with size and expiry; like memdump / `mc keys`.
pub(crate) async fn keys(
    flags: &ClusterFlags,
    group: Option<&str>,
    prefix: Option<&str>,
    limit: Option<usize>,
    json: bool,
) -> Result<ExitCode, Failure> {
    let cluster = Cluster::from_flags(flags)?;
    let client = cluster.client()?;
    let topology = client.topology();
    let bounds = dump::Bounds::of(&client).await?;
    let groups: Vec<&memgroup::topology::Group> = match group {
        Some(name) => vec![
            topology
                .group_by_name(name)
                .map(|id| topology.group(id))
                .ok_or_else(|| Failure::Usage(format!("unknown group {name:?}")))?,
        ],
        None => topology.groups().iter().collect(),
    };
    let mut report = Report::new(&["GROUP", "SERVER", "KEY", "SIZE", "EXPIRES"]);
    let mut listed = 0usize;
    let full = |listed: usize| limit.is_some_and(|l| listed >= l);
    'groups: for g in groups {
        for &server in g.servers() {
            let addr = topology.servers()[server.0].to_string();
            let dumped = bounds
                .dump(&client, &addr, cluster.settings.timeout)
                .await?;
            for entry in dumped {
                if prefix.is_some_and(|p| !entry.key.starts_with(p.as_bytes())) {
                    continue;
                }
                if full(listed) {
                    break 'groups;
                }
                listed += 1;
                let key = output::show(&entry.key);
                let exp = entry.exp.map_or("never".to_string(), |e| e.to_string());
                let mut record = json!({"group": g.name(), "server": addr,
                    "size": entry.size, "exp": entry.exp});
                // Binary-safe: a key that is not UTF-8 goes base64, with
                // "key_encoding": "base64".
                let mut key_field = json!({});
                output::json_value(&mut key_field, &Value::Bytes(entry.key.clone().into()));
                record["key"] = key_field["value"].take();
                if let Some(encoding) = key_field.get("encoding") {
                    record["key_encoding"] = encoding.clone();
                }
                report.record(record);
                report.row(vec![
                    g.name().to_string(),
                    addr.clone(),
                    key,
                    entry.size.to_string(),
                    exp,
                ]);
            }
        }
    }
    report.print(json);
    Ok(ExitCode::SUCCESS)
}

/// `ping`: each server's round-trip time (a `version` request on a
/// connection of its own), like memping; exit 1 if any is down.
pub(crate) async fn ping(
    flags: &ClusterFlags,
    count: usize,
    json: bool,
) -> Result<ExitCode, Failure> {
    let Cluster { spec, settings, .. } = Cluster::from_flags(flags)?;
    let topology = Topology::new(spec)?;
    let mut down = 0;
    let mut report = Report::new(&["SERVER", "STATE", "ROUND TRIP"]);
    for addr in topology.servers() {
        let one = memgroup::topology::ClusterSpec::parse_server_list(&addr.to_string())?;
        let client = settings.client(one)?;
        let mut times = Vec::with_capacity(count);
        let mut failure = None;
        for _ in 0..count.max(1) {
            let t0 = Instant::now();
            match client.version().await.into_iter().next().map(|(_, _, v)| v) {
                Some(Ok(_)) => times.push(t0.elapsed().as_secs_f64() * 1e6),
                Some(Err(e)) => {
                    failure = Some(e.chain());
                    break;
                }
                None => break,
            }
        }
        match failure {
            Some(e) => {
                down += 1;
                report.record(json!({"server": addr.to_string(), "up": false, "error": e}));
                report.row(vec![addr.to_string(), "down".into(), e]);
            }
            None => {
                let min = times.iter().copied().fold(f64::INFINITY, f64::min);
                let avg = times.iter().sum::<f64>() / times.len() as f64;
                report.record(
                    json!({"server": addr.to_string(), "up": true, "min_us": min, "avg_us": avg}),
                );
                report.row(vec![
                    addr.to_string(),
                    "up".into(),
                    format!("min {min:.0} µs, avg {avg:.0} µs"),
                ]);
            }
        }
    }
    report.print(json);
    Ok(exit::code(down == 0))
}

/// `cp FILE…`: each file's contents stored under its file name (like memcp).
pub(crate) async fn cp(
    client: &Client,
    files: &[std::path::PathBuf],
    exptime: u32,
    json: bool,
) -> Result<ExitCode, Failure> {
    let mut applied = true;
    for file in files {
        let key = file
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or_else(|| Failure::Usage(format!("{}: no usable file name", file.display())))?;
        let data = std::fs::read(file)
            .map_err(|e| Failure::Usage(format!("cannot read {}: {e}", file.display())))?;
        let outcome = client.set(key, &data, exptime).await?;
        applied &= output::write_outcome(key, &outcome, json);
    }
    Ok(exit::code(applied))
}

/// The type `set --type` stores a value as, encoded by the value format.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub(crate) enum ValueType {
    /// Text (UTF-8).
    String,
    /// Raw bytes.
    Bytes,
    /// A 32-bit integer (Java int).
    Int,
    /// A 64-bit integer (Java long, Python int).
    Long,
    /// true or false.
    Bool,
    /// A 64-bit float (Java double, Python float).
    Double,
}

impl ValueType {
    fn parse(self, data: &[u8]) -> Result<Value, Failure> {
        let text = || {
            String::from_utf8(data.to_vec())
                .map_err(|_| Failure::Usage(format!("{self:?} value is not UTF-8 text")))
        };
        let bad = |what: &str| {
            Failure::Usage(format!("{:?} is not {what}", String::from_utf8_lossy(data)))
        };
        Ok(match self {
            ValueType::String => Value::String(text()?),
            ValueType::Bytes => data.to_value(),
            ValueType::Int => Value::Int(text()?.trim().parse().map_err(|_| bad("an int"))?),
            ValueType::Long => Value::Long(text()?.trim().parse().map_err(|_| bad("a long"))?),
            ValueType::Bool => {
                Value::Bool(text()?.trim().parse().map_err(|_| bad("true or false"))?)
            }
            ValueType::Double => {
                Value::Double(text()?.trim().parse().map_err(|_| bad("a number"))?)
            }
        })
    }
}

pub(crate) async fn delete(
    client: &Client,
    keys: &[String],
    json: bool,
) -> Result<ExitCode, Failure> {
    let mut applied = true;
    for key in keys {
        let outcome = client.delete(key).await?;
        applied &= output::write_outcome(key, &outcome, json);
    }
    Ok(exit::code(applied))
}

pub(crate) async fn touch(
    client: &Client,
    key: &str,
    exptime: u32,
    json: bool,
) -> Result<ExitCode, Failure> {
    let outcome = client.touch(key, exptime).await?;
    Ok(exit::code(output::write_outcome(key, &outcome, json)))
}

pub(crate) async fn arith(
    client: &Client,
    key: &str,
    delta: u64,
    incr: bool,
    json: bool,
) -> Result<ExitCode, Failure> {
    let value = if incr {
        client.incr(key, delta).await?
    } else {
        client.decr(key, delta).await?
    };
    match value {
        Some(v) if json => output::json(&json!({"key": key, "value": v})),
        Some(v) => outln!("{v}"),
        None => {
            if json {
                output::json(&json!({"key": key, "value": null}));
            }
            eprintln!("memgroup: {key}: not found");
            return Ok(ExitCode::from(1));
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub(crate) async fn flush(
    client: &Client,
    group: &str,
    yes: bool,
    json: bool,
) -> Result<ExitCode, Failure> {
    if client.topology().group_by_name(group).is_none() {
        return Err(Failure::Usage(format!("unknown group {group:?}")));
    }
    if !yes {
        return Err(Failure::Usage(format!(
            "flushing {group:?} invalidates all its items; add --yes to confirm"
        )));
    }
    client.flush_all(Some(group)).await?;
    if json {
        output::json(&json!({"group": group, "flushed": true}));
    } else {
        output::info(&format!("flushed {group}"));
    }
    Ok(ExitCode::SUCCESS)
}

fn num(stats: &std::collections::HashMap<String, String>, name: &str) -> u64 {
    stats.get(name).and_then(|v| v.parse().ok()).unwrap_or(0)
}

pub(crate) async fn stats(
    client: &Client,
    group: Option<&str>,
    json: bool,
) -> Result<ExitCode, Failure> {
    if let Some(g) = group {
        if client.topology().group_by_name(g).is_none() {
            return Err(Failure::Usage(format!("unknown group {g:?}")));
        }
    }
    let all = client.stats(None).await?;
    let mut report = Report::new(&[
        "GROUP",
        "SERVER",
        "VERSION",
        "UPTIME",
        "ITEMS",
        "HIT RATIO",
        "BYTES",
        "CONNS",
        "EVICTIONS",
        "CMD_SET",
        "GET_HITS",
    ]);
    let mut totals: Vec<(String, [u64; 7], usize)> = Vec::new();
    let mut unreachable = 0;
    for s in all.iter().filter(|s| group.is_none_or(|g| g == s.group)) {
        match &s.stats {
            Ok(st) => {
                let (hits, misses) = (num(st, "get_hits"), num(st, "get_misses"));
                // Counters come from the server: absurd ones must not overflow.
                let ratio = match hits.checked_add(misses) {
                    Some(0) => 0.0,
                    Some(sum) => hits as f64 / sum as f64,
                    None => hits as f64 / (hits as f64 + misses as f64),
                };
                let values = [
                    num(st, "uptime"),
                    num(st, "curr_items"),
                    num(st, "bytes"),
                    num(st, "curr_connections"),
                    num(st, "evictions"),
                    num(st, "cmd_set"),
                    hits,
                ];
                report.row(vec![
                    s.group.clone(),
                    s.server.clone(),
                    st.get("version").cloned().unwrap_or_default(),
                    values[0].to_string(),
                    values[1].to_string(),
                    format!("{:.1}%", ratio * 100.0),
                    values[2].to_string(),
                    values[3].to_string(),
                    values[4].to_string(),
                    values[5].to_string(),
                    values[6].to_string(),
                ]);
                report.record(json!({"group": s.group, "server": s.server, "version": st.get("version"), "uptime": values[0],
                    "curr_items": values[1], "get_hit_ratio": ratio, "bytes": values[2], "curr_connections": values[3],
                    "evictions": values[4], "cmd_set": values[5], "get_hits": hits, "get_misses": misses}));
                let entry = match totals.iter_mut().find(|t| t.0 == s.group) {
                    Some(e) => e,
                    None => {
                        totals.push((s.group.clone(), [0; 7], 0));
                        totals.last_mut().expect("just pushed")
                    }
                };
                for (t, v) in entry.1.iter_mut().zip(values) {
                    *t = t.saturating_add(v);
                }
                entry.2 += 1;
            }
            Err(e) => {
                unreachable += 1;
                report.row(vec![
                    s.group.clone(),
                    s.server.clone(),
                    format!("error: {}", e.chain()),
                ]);
                report.record(json!({"group": s.group, "server": s.server, "error": e.chain()}));
            }
        }
    }
    report.print(json);
    if !json {
        outln!();
        let total_rows: Vec<Vec<String>> = totals
            .iter()
            .map(|(g, v, n)| {
                vec![
                    g.clone(),
                    n.to_string(),
                    v[1].to_string(),
                    v[2].to_string(),
                    v[4].to_string(),
                    v[5].to_string(),
                    v[6].to_string(),
                ]
            })
            .collect();
        output::table(
            &[
                "GROUP",
                "SERVERS",
                "ITEMS",
                "BYTES",
                "EVICTIONS",
                "CMD_SET",
                "GET_HITS",
            ],
            &total_rows,
        );
    }
    Ok(exit::code(unreachable == 0))
}

pub(crate) async fn load(
    client: &Client,
    count: usize,
    prefix: &str,
    value_size: usize,
    concurrency: usize,
    json: bool,
) -> Result<ExitCode, Failure> {
    let started = Instant::now();
    let value: std::sync::Arc<[u8]> = vec![b'v'; value_size].into();
    let next = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..concurrency.max(1) {
        let (client, next, value, prefix) = (
            client.clone(),
            next.clone(),
            value.clone(),
            prefix.to_string(),
        );
        workers.spawn(async move {
            let mut errors = 0usize;
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= count {
                    return errors;
                }
                if client
                    .set(format!("{prefix}{i}"), &value[..], 0)
                    .await
                    .is_err()
                {
                    errors += 1;
                }
            }
        });
    }
    let mut errors = 0;
    while let Some(e) = workers.join_next().await {
        errors += e.map_err(|e| Failure::Op(format!("worker failed: {e}")))?;
    }
    let secs = started.elapsed().as_secs_f64();
    if json {
        output::json(
            &json!({"keys": count, "errors": errors, "seconds": secs, "keys_per_second": count as f64 / secs}),
        );
    } else {
        outln!(
            "loaded {count} keys ({errors} errors) in {secs:.2} s: {:.0} keys/s",
            count as f64 / secs
        );
    }
    Ok(exit::code(errors == 0))
}
