//! The meta commands as an operator types them — `mg KEY FLAG…`, `ms KEY
//! VALUE FLAG…`, `md KEY FLAG…`, `ma KEY FLAG…` with memcached's own flag
//! tokens — printing the typed reply, and `invalidate`.

use std::process::ExitCode;

use memgroup::client::{MetaFlag, MetaResponse};
use serde_json::json;

use super::common::{ValueArg, each_key, write_report};
use crate::cluster::Cluster;
use crate::exit::{self, Failure};
use crate::flags::ClusterFlags;
use crate::output::{self, Refused, Report};

/// A key and meta flags.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The key.
    key: String,
    /// Flags as `protocol.txt` writes them: `v` (value), `f` (client
    /// flags), `t` (TTL), `c` (CAS), `h`, `l`, `s`, `k`, `N30` (vivify on a
    /// miss), `R30`, `T60`, `C<cas>`, `I`, `MI`/`MD` (`ma`), `D<delta>`,
    /// `J<initial>`.
    #[arg(allow_hyphen_values = true)]
    flags: Vec<String>,
}

/// A key, a value and meta flags.
#[derive(Debug, clap::Args)]
pub(crate) struct SetArgs {
    /// The key.
    key: String,
    #[command(flatten)]
    value: ValueArg,
    /// Flags as `protocol.txt` writes them: `T60`, `F5`, `C<cas>`, `I`,
    /// `ME` (add), `MR` (replace), `MA` (append), `MP` (prepend).
    flags: Vec<String>,
}

/// Keys to mark stale.
#[derive(Debug, clap::Args)]
pub(crate) struct InvalidateArgs {
    /// The keys.
    #[arg(required = true)]
    keys: Vec<String>,
    /// How long the stale value may still be served: seconds, or with a
    /// unit as `--exptime` takes it (`90s`, `10m`, `2h`).
    #[arg(long, default_value = "30", value_name = "TTL", value_parser = crate::expiry::parse_ttl)]
    stale_for: memgroup::client::Expiry,
}

fn parse(command: &str, tokens: &[String]) -> Result<Vec<MetaFlag>, Failure> {
    tokens
        .iter()
        .map(|t| MetaFlag::parse(command, t).map_err(Failure::Usage))
        .collect()
}

/// Prints a meta reply field by field: the status, what the lease flags
/// say, and every return flag named.
fn print_reply(key: &str, reply: &MetaResponse) {
    let json = crate::output::json();
    let number = |letter| reply.flag_u64(letter);
    if json {
        let mut record = json!({
            "key": key,
            "status": reply.status.code(),
            "won": reply.won(),
            "stale": reply.is_stale(),
            "win_sent": reply.win_sent(),
        });
        for (name, letter) in [
            ("flags", b'f'),
            ("cas", b'c'),
            ("size", b's'),
            ("last_access", b'l'),
            ("opaque", b'O'),
        ] {
            if let Some(n) = number(letter) {
                record[name] = n.into();
            }
        }
        if let Some(ttl) = reply.ttl() {
            record["ttl"] = ttl.into();
        }
        if let Some(hit) = reply.flag(b'h') {
            record["hit_before"] = (hit == b"1").into();
        }
        if let Some(value) = &reply.value {
            output::json_value(
                &mut record,
                &memgroup::client::value::Value::Bytes(value.clone()),
            );
        }
        output::record(record);
        return;
    }
    let mut report = Report::new(&["field", "value"]);
    let yes = |b: bool| if b { "yes" } else { "no" }.to_string();
    report.row(vec!["status".into(), reply.status.code().into()]);
    report.row(vec!["won (W)".into(), yes(reply.won())]);
    report.row(vec!["stale (X)".into(), yes(reply.is_stale())]);
    report.row(vec!["win sent (Z)".into(), yes(reply.win_sent())]);
    for (name, letter) in [
        ("flags (f)", b'f'),
        ("cas (c)", b'c'),
        ("ttl (t)", b't'),
        ("size (s)", b's'),
        ("hit before (h)", b'h'),
        ("last access (l)", b'l'),
        ("opaque (O)", b'O'),
        ("key (k)", b'k'),
    ] {
        if let Some(token) = reply.flag(letter) {
            report.row(vec![name.into(), output::show(token)]);
        }
    }
    if let Some(value) = &reply.value {
        report.row(vec!["value".into(), output::show(value)]);
    }
    report.print_table();
}

/// `mg`: a meta get (local group first, fallback per the read policy).
pub(crate) async fn get(args: &Args, flags: &ClusterFlags) -> Result<ExitCode, Failure> {
    let meta = parse("mg", &args.flags)?;
    let client = Cluster::from_flags(flags)?.client()?;
    let reply = client.meta_get(&args.key, &meta).await?;
    Ok(report(&args.key, reply.as_ref(), ("EN", "not found (EN)")))
}

/// Prints `reply`, or (`None`) what was not found: `missing` is its status
/// and the warning's text. Exit 1 when not found.
fn report(key: &str, reply: Option<&MetaResponse>, missing: (&str, &str)) -> ExitCode {
    let json = crate::output::json();
    let Some(reply) = reply else {
        if json {
            output::record(json!({"key": key, "status": missing.0}));
        } else {
            output::warn(Some(key), missing.1);
        }
        return exit::code(false);
    };
    print_reply(key, reply);
    ExitCode::SUCCESS
}

/// `ms`: a meta set, replicated (through the arbiter for a mode other
/// than set, a CAS or an invalidation).
pub(crate) async fn set(args: &SetArgs, flags: &ClusterFlags) -> Result<ExitCode, Failure> {
    let meta = parse("ms", &args.flags)?;
    let value = args.value.read()?;
    let client = Cluster::from_flags(flags)?.client()?;
    let outcome = client.meta_set(&args.key, value, &meta).await?;
    Ok(write_report(&args.key, &outcome, Refused::NotStored))
}

/// `md`: a meta delete in every group (`I` marks stale instead).
pub(crate) async fn delete(args: &Args, flags: &ClusterFlags) -> Result<ExitCode, Failure> {
    let meta = parse("md", &args.flags)?;
    let client = Cluster::from_flags(flags)?.client()?;
    let outcome = client.meta_delete(&args.key, &meta).await?;
    Ok(write_report(&args.key, &outcome, Refused::NotDeleted))
}

/// `ma`: meta arithmetic, decided by the arbiter.
pub(crate) async fn arith(args: &Args, flags: &ClusterFlags) -> Result<ExitCode, Failure> {
    let meta = parse("ma", &args.flags)?;
    let client = Cluster::from_flags(flags)?.client()?;
    let reply = client.meta_arith(&args.key, &meta).await?;
    Ok(report(
        &args.key,
        reply.as_ref(),
        ("NF", "not found (NF; N<ttl> creates it)"),
    ))
}

/// `invalidate`: mark values stale in every group (`md … I T<secs>`).
pub(crate) async fn invalidate(
    args: &InvalidateArgs,
    flags: &ClusterFlags,
) -> Result<ExitCode, Failure> {
    let client = Cluster::from_flags(flags)?.client()?;
    each_key(&client, &args.keys, Refused::NotFound, |key| {
        client.invalidate(key, args.stale_for)
    })
    .await
}
