//! What is generated from the clap definition itself: shell completions
//! (`completions`) and man pages (hidden `man`, used by `cargo xtask man`).

use std::path::PathBuf;
use std::process::ExitCode;

use crate::exit::Failure;
use crate::output;

/// The shell to complete for.
#[derive(Debug, clap::Args)]
pub(crate) struct CompletionsArgs {
    /// The shell.
    shell: clap_complete::Shell,
}

/// Where to write the man pages.
#[derive(Debug, clap::Args)]
pub(crate) struct ManArgs {
    /// The directory.
    dir: PathBuf,
}

/// `completions SHELL`: the completion script on stdout.
pub(crate) fn completions(args: &CompletionsArgs, mut cli: clap::Command) -> ExitCode {
    // Into a buffer first: clap_complete panics on a closed pipe.
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut cli, "memgroup", &mut script);
    output::write_line(String::from_utf8_lossy(&script).trim_end());
    ExitCode::SUCCESS
}

/// `man DIR`: memgroup.1 and one page per subcommand, written into DIR.
pub(crate) fn man(args: &ManArgs, cli: clap::Command) -> Result<ExitCode, Failure> {
    let dir = &args.dir;
    std::fs::create_dir_all(dir).map_err(|e| Failure::Op(format!("{}: {e}", dir.display())))?;
    clap_mangen::generate_to(cli, dir)
        .map_err(|e| Failure::Op(format!("writing man pages: {e}")))?;
    Ok(ExitCode::SUCCESS)
}
