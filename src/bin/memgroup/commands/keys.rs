//! `keys`: the keys a group's servers hold, as the LRU crawler lists them
//! (`metadump hash`), each server's listing checked against its own
//! `curr_items`: a listing still short after a second dump is named on
//! stderr and the command exits 1. With a key prefix (`--key-prefix`, or
//! the cluster's), the keys behind it, shown without it: as the other
//! commands take them.

use std::process::ExitCode;

use memgroup::client::value::Value;
use serde_json::json;

use crate::cluster::Cluster;
use crate::dump;
use crate::exit::{self, Failure};
use crate::flags::ClusterFlags;
use crate::output::{self, Report};

/// Which keys to list.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Only this group (default: every group).
    #[arg(long)]
    group: Option<String>,
    /// Only keys starting with this (after the key prefix, with one).
    #[arg(long)]
    prefix: Option<String>,
    /// At most this many keys.
    #[arg(long)]
    limit: Option<usize>,
}

/// `keys`: every key of a group's servers, listed by the LRU crawler
/// (`lru_crawler metadump`), with size and expiry; like memdump / `mc keys`.
pub(crate) async fn run(args: &Args, flags: &ClusterFlags) -> Result<ExitCode, Failure> {
    let json = crate::output::json();
    let (group, prefix, limit) = (args.group.as_deref(), args.prefix.as_deref(), args.limit);
    let cluster = Cluster::from_flags(flags)?;
    let client = cluster.client()?;
    let topology = client.topology();
    // The key prefix as it goes on the wire (sanitised, when keys are).
    let behind = topology
        .wire_key(memgroup::topology::GroupId(0), b"")
        .into_owned();
    let bounds = dump::Bounds::of(&client).await?;
    let groups: Vec<&memgroup::topology::Group> = match group {
        Some(name) => vec![topology.group(Failure::group_in(&topology, name)?)],
        None => topology.groups().iter().collect(),
    };
    let mut report = Report::new(&["GROUP", "SERVER", "KEY", "SIZE", "EXPIRES"]);
    // `-q`: the keys alone, one a line (for `xargs`).
    let keys_only = output::quiet() && !json;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mut listed = 0usize;
    let mut short = 0usize;
    let full = |listed: usize| limit.is_some_and(|l| listed >= l);
    'groups: for g in groups {
        for &server in g.servers() {
            let addr = topology.servers()[server.0].to_string();
            let listing = bounds
                .list(&client, &addr, cluster.settings.timeout)
                .await?;
            if !listing.is_complete() {
                // Listed again and still short: keys the server holds are
                // not in this list.
                short += 1;
                output::warn(None, &dump::Checked::of(&listing).shortfall());
            }
            for mut entry in listing.entries {
                if !entry.key.starts_with(&behind) {
                    continue;
                }
                // Shown as given: without the key prefix.
                entry.key.drain(..behind.len());
                if prefix.is_some_and(|p| !entry.key.starts_with(p.as_bytes())) {
                    continue;
                }
                if full(listed) {
                    break 'groups;
                }
                listed += 1;
                let key = output::show(&entry.key);
                // The time left, as people read it; the Unix time in JSON.
                let ttl = entry
                    .exp
                    .map(|at| u64::try_from(at).unwrap_or(0).saturating_sub(now));
                let expires = match ttl {
                    None => "never".to_string(),
                    Some(0) => "now".to_string(),
                    Some(left) => format!("in {}", span(left)),
                };
                let mut record = json!({"group": g.name(), "server": addr,
                    "size": entry.size, "expires_at": entry.exp, "ttl_s": ttl});
                // Binary-safe: a key that is not UTF-8 goes base64, with
                // "key_encoding": "base64".
                let mut key_field = json!({});
                output::json_value(&mut key_field, &Value::Bytes(entry.key.clone().into()));
                record["key"] = key_field["value"].take();
                if let Some(encoding) = key_field.get("encoding") {
                    record["key_encoding"] = encoding.clone();
                }
                if keys_only {
                    output::write_line(&key);
                    continue;
                }
                report.record(record);
                report.row(vec![
                    g.name().to_string(),
                    addr.clone(),
                    key,
                    entry.size.to_string(),
                    expires,
                ]);
            }
        }
    }
    if !keys_only {
        report.print();
    }
    Ok(exit::code(short == 0))
}

/// `seconds` as the largest two units: `45s`, `9m58s`, `2h5m`, `40d3h`.
fn span(seconds: u64) -> String {
    let (d, h, m, s) = (
        seconds / 86_400,
        seconds / 3600 % 24,
        seconds / 60 % 60,
        seconds % 60,
    );
    match (d, h, m) {
        (0, 0, 0) => format!("{s}s"),
        (0, 0, _) => format!("{m}m{s}s"),
        (0, _, _) => format!("{h}h{m}m"),
        _ => format!("{d}d{h}h"),
    }
}

#[cfg(test)]
mod tests {
    /// The time left in its two largest units.
    #[test]
    fn spans_read_as_people_say_them() {
        assert_eq!(super::span(45), "45s");
        assert_eq!(super::span(598), "9m58s");
        assert_eq!(super::span(7500), "2h5m");
        assert_eq!(super::span(40 * 86_400 + 3 * 3600 + 7), "40d3h");
    }
}
