//! How the tool ends: 0 success; 1 the operation failed; 2 usage or
//! configuration error, reported on one line.

use std::process::ExitCode;

use crate::output;

/// Why the tool stops: bad usage/configuration (exit 2) or a failed operation (exit 1).
#[derive(Debug)]
pub(crate) enum Failure {
    Usage(String),
    Op(String),
}

impl Failure {
    /// Prints the message on stderr and gives the exit code: 2 for usage, 1
    /// for a failed operation.
    pub(crate) fn report(self) -> ExitCode {
        let (message, code) = match self {
            Failure::Usage(message) => (message, 2),
            Failure::Op(message) => (message, 1),
        };
        eprintln!("memgroup: {}", output::clean(&message));
        ExitCode::from(code)
    }
}

impl From<memgroup::client::Error> for Failure {
    fn from(e: memgroup::client::Error) -> Self {
        use memgroup::client::ErrorKind;
        match e.kind() {
            ErrorKind::Config | ErrorKind::InvalidArgument | ErrorKind::InvalidKey => {
                Failure::Usage(e.chain())
            }
            _ => Failure::Op(e.chain()),
        }
    }
}

/// A layout the topology refuses is a usage error.
impl From<memgroup::topology::TopologyError> for Failure {
    fn from(e: memgroup::topology::TopologyError) -> Self {
        Failure::Usage(e.to_string())
    }
}

/// Exit 0 if `ok`, else 1 (the operation failed: a miss, a refused write, an
/// unreachable server).
pub(crate) fn code(ok: bool) -> ExitCode {
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
