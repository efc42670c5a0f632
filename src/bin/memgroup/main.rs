//! `memgroup`: the operator's tool for memcached clusters with server groups.
//!
//! Exit codes: 0 success; 1 the operation failed (a miss, a refused write,
//! servers unreachable, verification found missing keys); 2 usage or
//! configuration error; 3 partly done (a write applied by its policy while
//! some group missed it, a multi-key read some of whose keys went
//! unanswered).
//!
//! [`flags`] is the command line as clap parses it; [`cluster`] resolves
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

use clap::Parser;

use crate::flags::Cli;

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
    let proxy = matches!(cli.command, commands::Command::Proxy(_));
    let drain = std::time::Duration::try_from_secs_f64(cli.cluster.drain.max(0.0))
        .unwrap_or(std::time::Duration::from_secs(5));
    let run = async {
        let result = cli.command.run(&cli.cluster, cli.json).await;
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
/// prints them; a bad flag value is a usage error like any other: one line
/// naming the value, exit 2 (clap's own rendering adds a hint paragraph).
/// Other refusals print clap's message and tips without its `Usage:` line.
/// With `--json` anywhere on the line, every refusal is the JSON error
/// object instead of clap's text.
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
    if !(json || one_line) {
        // clap's text without its `Usage:` paragraph: that line lists the
        // flags typed so far as if the command required them.
        let text = e.to_string();
        let kept: Vec<&str> = text
            .split("\n\n")
            .filter(|paragraph| !paragraph.starts_with("Usage:"))
            .collect();
        eprint!("{}", kept.join("\n\n"));
        return ExitCode::from(2);
    }
    output::set_json(json);
    let text = e.to_string();
    let text = text.strip_prefix("error: ").unwrap_or(&text);
    // The message, without clap's tips and usage paragraphs.
    let message: Vec<&str> = if one_line {
        text.lines().take(1).collect()
    } else {
        text.lines()
            .take_while(|line| !line.is_empty() && !line.starts_with("Usage:"))
            .map(str::trim)
            .collect()
    };
    let mut message = message.join(" ");
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
