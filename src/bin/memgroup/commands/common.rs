//! What several command families share: the value argument (inline or
//! `-` for stdin), a write per key with its report.

use std::io::Read;
use std::process::ExitCode;

use crate::exit::{Done, Failure};
use crate::output::{self, Refused};

/// A value argument: the text itself, or stdin for `-` (unless
/// `--literal`).
#[derive(Debug, clap::Args)]
pub(crate) struct ValueArg {
    /// The value, or `-` for stdin.
    value: String,
    /// Store VALUE as it is, even a lone `-` (which otherwise reads stdin).
    #[arg(long)]
    literal: bool,
}

impl ValueArg {
    /// The value's bytes: the argument's, or what stdin holds.
    pub(crate) fn read(&self) -> Result<Vec<u8>, Failure> {
        if self.literal || self.value != "-" {
            return Ok(self.value.as_bytes().to_vec());
        }
        let mut buf = Vec::new();
        std::io::stdin()
            .read_to_end(&mut buf)
            .map_err(|e| Failure::Op(format!("reading stdin: {e}")))?;
        Ok(buf)
    }
}

/// `write` of every key (several at once, [`super::concurrently`]), every
/// outcome reported in the keys' order (with `--json` as one array). A key
/// whose write failed (its server down, say) is named on stderr with why
/// (with `--json`, a record with `error`) and counts as failed; the other keys
/// are still written, as `rm` goes on past a file it cannot remove. The
/// keys are all checked first: an invalid one stops the run before any
/// write.
pub(crate) async fn each_key<'k, F, Fut>(
    client: &memgroup::client::Client,
    keys: &'k [String],
    refused: Refused,
    mut write: F,
) -> Result<ExitCode, Failure>
where
    F: FnMut(&'k str) -> Fut,
    Fut: std::future::Future<
            Output = Result<memgroup::client::WriteOutcome, memgroup::client::Error>,
        >,
{
    let json = crate::output::json();
    super::check_keys(client, keys)?;
    let mut done = Done::Everywhere;
    let mut records = Vec::new();
    let outcomes = super::concurrently(keys, &mut write).await;
    for (key, outcome) in keys.iter().zip(outcomes) {
        let outcome = match outcome {
            Ok(outcome) => outcome,
            Err(e) => {
                output::key_failed(key, &e, &mut records);
                done = done.max(Done::Failed);
                continue;
            }
        };
        output::write_outcome(key, &outcome, refused, &mut records);
        done = done.max(Done::of_write(&outcome));
    }
    if json {
        output::records(&records);
    }
    Ok(done.code())
}

/// One key's write reported ([`output::write_outcome`]; with `--json` as an
/// array of one record), and its exit code.
pub(crate) fn write_report(
    key: &str,
    outcome: &memgroup::client::WriteOutcome,
    refused: Refused,
) -> ExitCode {
    let json = crate::output::json();
    let mut records = Vec::new();
    output::write_outcome(key, outcome, refused, &mut records);
    let done = Done::of_write(outcome);
    if json {
        output::records(&records);
    }
    done.code()
}
