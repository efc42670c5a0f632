//! `memgroup`: the operator's tool for memcached clusters with server groups.
//!
//! Exit codes: 0 success; 1 the operation failed (a miss, a refused write,
//! servers unreachable, verification found missing keys); 2 usage or
//! configuration error; 3 partly done (a write applied by its policy while
//! some group missed it, a multi-key read some of whose keys went
//! unanswered); 4 outcome unknown (a conditional write its arbiter did not
//! answer). The table is in [`exit`].
//!
//! [`Cli`] is the command line as clap parses it, [`flags`] its cluster
//! flags; [`cluster`] resolves
//! its cluster flags; [`commands`] has one module per command family, each
//! with its `Args` and `run`; [`output`], [`dump`] and [`exit`] are what
//! several commands share.

mod cluster;
mod commands;
mod dump;
mod exit;
mod expiry;
mod flags;
mod output;
mod sources;

use std::process::ExitCode;

use clap::{CommandFactory, Parser};

use crate::commands::Command;
use crate::flags::ClusterFlags;

/// Route keys, read and write, inspect and warm memcached server groups.
/// Shown after `--help`: what the exit codes mean, and a few examples.
const AFTER_HELP: &str = "\
Exit codes:
  0  done everywhere
  1  failed, a miss, or refused by its condition (add of a present key, a stale
     cas, replace of a missing one); a write that missed its policy; keys
     missing after `warm --verify`; a value that cannot be decoded
  2  usage or configuration error, reported on one line naming the bad token
  3  partly done: a write applied by its policy while some group missed it or
     did not answer, or whose repairs were not done when it ended (incr, decr,
     ma); a multi-key read where some keys got no answer (named on stderr)
  4  outcome unknown: a conditional write (add, cas, incr, ...) sent to the
     arbiter group and not answered, so it may have been applied; the other
     groups' copies were cleared

Examples:
  memgroup --servers 10.0.0.1:11211,10.0.0.2:11211 --hash new-compat route user:42
  memgroup --groups 'sg1=10.0.0.1:11211;sg2=10.0.1.1:11211' --zone sg1 get user:42
  memgroup --servers memcache://app:secret@10.0.0.1:11211?value_format=evcache get user:42
  echo -n payload | memgroup --servers 10.0.0.1:11211 set blob -
  memgroup --config cluster.toml warm --from sg1 --to sg3 --verify
  memgroup --config cluster.toml bench --concurrency 32 --duration 10
  memgroup completions bash > /etc/bash_completion.d/memgroup";

/// The whole command line.
#[derive(Debug, Parser)]
#[command(name = "memgroup", version, about, propagate_version = true, after_help = AFTER_HELP)]
struct Cli {
    /// Where the cluster is and how to talk to it: listed under their own
    /// heading, after each command's own options.
    #[command(flatten, next_help_heading = "Cluster options")]
    cluster: ClusterFlags,
    /// Machine-readable output: one JSON array of records on stdout per run
    /// (per round with `--watch`, one a line), for every command; errors and
    /// each key's problems as JSON objects on stderr, one a line.
    #[arg(long, global = true, help_heading = "Output options")]
    json: bool,
    /// No informational output (per-group write reports, confirmations,
    /// `warm`'s summary); values, JSON and errors still print, and `keys`
    /// prints the keys alone, one a line (for `xargs`).
    #[arg(short, long, global = true, help_heading = "Output options")]
    quiet: bool,
    /// Log what the client does to stderr: -v servers down and up, missed
    /// write policies, topology changes; -vv every operation and request
    /// (spans with group, server, attempt, outcome). RUST_LOG, when set,
    /// chooses instead (e.g. RUST_LOG=memgroup_client=debug).
    #[arg(short, long, global = true, action = clap::ArgAction::Count, help_heading = "Output options")]
    verbose: u8,
    /// What to do.
    #[command(subcommand)]
    command: Command,
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error(&e),
    };
    init_logging(cli.verbose);
    output::set_quiet(cli.quiet);
    output::set_json(cli.json);
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if let Some(threads) = cli.command.worker_threads() {
        builder.worker_threads(threads);
    }
    let runtime = match builder.enable_all().build() {
        Ok(rt) => rt,
        Err(e) => return output::fail(&format!("cannot start the runtime: {e}"), 1),
    };
    let writes = cli.command.writes();
    // A proxy is a long-lived writer: repairs journaled at exit are kept,
    // only lost ones make its exit partial.
    let proxy = matches!(cli.command, Command::Proxy(_));
    let drain = std::time::Duration::try_from_secs_f64(cli.cluster.drain.max(0.0))
        .unwrap_or(std::time::Duration::from_secs(5));
    let run = async {
        let result = cli.command.run(&cli.cluster, Cli::command).await;
        // A repair's confirming delete comes a second after its first.
        let (owed, lost) = cluster::close_clients(drain).await;
        // A write done everywhere it could be, with repairs still owed
        // (journaled, or lost): partly done.
        let partly = (writes && owed > 0) || (proxy && lost > 0);
        match result {
            Ok(code) if partly && code == ExitCode::SUCCESS => Ok(ExitCode::from(exit::PARTIAL)),
            other => other,
        }
    };
    match runtime.block_on(run) {
        Ok(code) => code,
        Err(failure) => failure.report(),
    }
}

/// A command line clap refused. `--help` and `--version` print as clap
/// prints them; any refusal is a usage error like any other: one line, exit
/// 2 (`memgroup: MESSAGE`, or with `--json` anywhere on the line the JSON
/// error object). A bad flag value is named with its valid values; clap's
/// tips join the line (`unexpected argument '--grups' found; tip: a similar
/// argument exists: '--groups'`), its `Usage:` and "For more information"
/// paragraphs are left out.
fn usage_error(e: &clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    let json = std::env::args_os()
        .skip(1)
        .take_while(|arg| arg != "--")
        .any(|arg| arg == "--json");
    let one_line = matches!(
        e.kind(),
        ErrorKind::InvalidValue | ErrorKind::ValueValidation
    );
    if !e.use_stderr() {
        e.exit();
    }
    // No command at all: the help, as clap shows it.
    if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand && !json {
        eprint!("{e}");
        return ExitCode::from(2);
    }
    output::set_json(json);
    let text = e.to_string();
    let text = text.strip_prefix("error: ").unwrap_or(&text);
    // The message: a bad value's first line (the list follows); else each
    // paragraph but the usage and the pointer to --help, its lines joined.
    let mut message = if one_line {
        text.lines().next().unwrap_or_default().to_string()
    } else {
        text.split("\n\n")
            .filter(|p| !p.starts_with("Usage:") && !p.starts_with("For more information"))
            .map(|p| p.lines().map(str::trim).collect::<Vec<_>>().join(" "))
            .filter(|p| !p.is_empty())
            .collect::<Vec<_>>()
            .join("; ")
    };
    // A value outside a fixed list: the list, and the likely one, on the
    // same line.
    use clap::error::{ContextKind, ContextValue};
    if let Some(ContextValue::Strings(valid)) = e.get(ContextKind::ValidValue) {
        message.push_str(&format!(" (one of: {})", valid.join(", ")));
    }
    if let Some(ContextValue::String(like)) = e.get(ContextKind::SuggestedValue) {
        message.push_str(&format!("; did you mean {like:?}?"));
    }
    output::fail(&message, 2)
}

/// Sends the client's tracing output to stderr: RUST_LOG if set, else by
/// `-v` count (none: nothing).
fn init_logging(verbose: u8) {
    use tracing_subscriber::EnvFilter;
    use tracing_subscriber::fmt::format::FmtSpan;

    let filter = match std::env::var("RUST_LOG") {
        Ok(spec) if !spec.is_empty() => EnvFilter::new(spec),
        _ => match verbose {
            0 => return,
            1 => EnvFilter::new("memgroup_client=info"),
            _ => EnvFilter::new("memgroup_client=debug"),
        },
    };
    // At -vv a span is printed when it closes, with its fields and timing.
    let spans = if verbose >= 2 {
        FmtSpan::CLOSE
    } else {
        FmtSpan::NONE
    };
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_span_events(spans)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .try_init();
}
