//! `repair`: the repair journal's owed repairs done now, or listed.
//! Repairs a run could not finish (a group's server down past its end) are
//! journaled; any later run takes them in the background, and this command
//! does them in front: it takes every segment no living process holds,
//! waits up to `--wait` for the servers to answer, and journals again what
//! is left. Exit 0 when nothing is left, 3 when some is (each named).
//! `--forget SERVER` drops what is owed to a server gone for good.

use std::process::ExitCode;
use std::time::Duration;

use serde_json::json;

use crate::cluster::Cluster;
use crate::exit::{self, Done, Failure};
use crate::flags::ClusterFlags;
use crate::output::{self, outln};

/// What to do with the journal.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// List what is journaled (every segment, held by a living process or
    /// not) and do nothing.
    #[arg(long)]
    list: bool,
    /// How long to wait for the servers to answer, in seconds.
    #[arg(long, value_name = "SECS", default_value_t = 30.0)]
    wait: f64,
    /// Drop the repairs owed to this server (`host:port`), gone for good
    /// (whose address another memcached may take), from the segments no
    /// running process holds; do nothing else. Repeatable.
    #[arg(long, value_name = "SERVER", conflicts_with = "list")]
    forget: Vec<String>,
}

/// `repair`: do (or `--list`) the journal's repairs.
pub(crate) async fn run(args: &Args, flags: &ClusterFlags) -> Result<ExitCode, Failure> {
    let json = crate::output::json();
    let cluster = Cluster::from_flags(flags)?;
    let Some(dir) = cluster.settings.repair_journal.clone() else {
        return Err(Failure::Usage(
            "the repair journal is off (--repair-journal off, MEMGROUP_REPAIR_JOURNAL or the file's repair_journal)".to_string(),
        ));
    };
    if !args.forget.is_empty() {
        let mut records = Vec::new();
        for server in &args.forget {
            let dropped = memgroup::client::forget_repairs(&dir, server)
                .map_err(|e| Failure::Op(format!("{}: {e}", dir.display())))?;
            records.push(json!({"server": server, "forgotten": dropped}));
            if !json {
                output::info(&format!("forgot {dropped} repairs owed to {server}"));
            }
        }
        if json {
            output::records(&records);
        }
        return Ok(exit::code(true));
    }
    if args.list {
        let entries = memgroup::client::list_repair_journal(&dir);
        if json {
            let records: Vec<_> = entries
                .iter()
                .map(|e| {
                    json!({
                        "server": e.repair.server,
                        "group": e.repair.group,
                        "key": output::show(&e.repair.key),
                        "may_land": e.repair.may_land,
                        "segment": e.segment.display().to_string(),
                        "held": e.held,
                    })
                })
                .collect();
            output::records(&records);
        } else {
            for e in &entries {
                outln!(
                    "{} {} {}{}{}",
                    output::show(&e.repair.key),
                    e.repair.group,
                    e.repair.server,
                    if e.repair.may_land { " (may land)" } else { "" },
                    if e.held {
                        " (held by a running process)"
                    } else {
                        ""
                    },
                );
            }
            output::info(&format!(
                "{} repairs journaled in {}",
                entries.len(),
                dir.display()
            ));
        }
        return Ok(exit::code(true));
    }
    let wait = Duration::try_from_secs_f64(args.wait.max(0.0))
        .map_err(|e| Failure::Usage(format!("--wait {}: {e}", args.wait)))?;
    // Building the client takes the segments no living process holds.
    let client = cluster.client()?;
    let taken = client.health().repairs.pending;
    let closed = client.close(wait).await;
    let owed = client.owed_repairs();
    let repaired = client.health().repairs.repaired;
    if json {
        let left: Vec<_> = owed
            .iter()
            .map(|r| json!({"server": r.server, "group": r.group, "key": output::show(&r.key)}))
            .collect();
        output::record(json!({"taken": taken, "repaired": repaired, "left": left}));
    } else {
        outln!(
            "took {taken} repairs from {}; {repaired} done, {} left",
            dir.display(),
            owed.len()
        );
        if let Err(e) = &closed {
            output::warn(None, &e.to_string());
        }
        for r in &owed {
            output::warn(
                Some(&output::show(&r.key)),
                &format!("not yet repaired in group {} ({})", r.group, r.server),
            );
        }
    }
    Ok(if owed.is_empty() {
        exit::code(true)
    } else {
        Done::Partly.code()
    })
}
