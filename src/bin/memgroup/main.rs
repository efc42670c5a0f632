//! `memgroup`: the operator's tool for memcached clusters with server groups.
//!
//! Exit codes: 0 success; 1 the operation failed (a miss, a refused write,
//! servers unreachable, verification found missing keys); 2 usage or
//! configuration error.
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

use std::process::ExitCode;

use clap::Parser;

use crate::flags::Cli;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // A bad flag value is a usage error like any other: one line naming
        // the value, exit 2 (clap's own rendering adds a hint paragraph).
        Err(e)
            if matches!(
                e.kind(),
                clap::error::ErrorKind::InvalidValue | clap::error::ErrorKind::ValueValidation
            ) =>
        {
            let text = e.to_string();
            let line = text.lines().next().unwrap_or_default();
            eprintln!("memgroup: {}", line.strip_prefix("error: ").unwrap_or(line));
            return ExitCode::from(2);
        }
        Err(e) => e.exit(),
    };
    init_logging(cli.verbose);
    output::set_quiet(cli.quiet);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("memgroup: cannot start the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(cli.command.run(&cli.cluster, cli.json)) {
        Ok(code) => code,
        Err(failure) => failure.report(),
    }
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
