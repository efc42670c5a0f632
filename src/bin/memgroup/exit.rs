//! How the tool ends, the same for every command:
//!
//! | code | meaning |
//! |---|---|
//! | 0 | done everywhere |
//! | 1 | failed, a miss, or refused by its condition (add of a present key, a stale cas) |
//! | 2 | usage or configuration error, reported on one line |
//! | 3 | partly done: a write applied by its policy while some group missed it or may not have it; a multi-key read where some keys got no answer |
//! | 4 | outcome unknown: a conditional write sent to the arbiter group and not answered (it may have been applied) |

use std::process::ExitCode;

use memgroup::topology::{ClusterSpec, Group, GroupId, Topology};

use crate::output;

/// Why the tool stops: bad usage/configuration (exit 2) or a failed operation (exit 1).
#[derive(Debug)]
pub(crate) enum Failure {
    Usage(String),
    Op(String),
    /// A conditional write whose arbiter did not answer (exit 4).
    Unknown(String),
}

impl Failure {
    /// A group name the cluster does not have, with the names it has.
    fn unknown_group<S: AsRef<str>>(name: &str, known: impl IntoIterator<Item = S>) -> Failure {
        let known: Vec<S> = known.into_iter().collect();
        let known: Vec<&str> = known.iter().map(AsRef::as_ref).collect();
        Failure::Usage(format!(
            "unknown group {name:?} (the cluster's groups: {})",
            known.join(", ")
        ))
    }

    /// The group of `topology` named `name`, or the usage error naming the
    /// groups it has.
    pub(crate) fn group_in(topology: &Topology, name: &str) -> Result<GroupId, Failure> {
        topology
            .group_by_name(name)
            .ok_or_else(|| Failure::unknown_group(name, topology.groups().iter().map(Group::name)))
    }

    /// That `spec` has a group named `name`, or the usage error naming the
    /// groups it has.
    pub(crate) fn group_in_spec(spec: &ClusterSpec, name: &str) -> Result<(), Failure> {
        match spec.groups.iter().any(|g| g.name == name) {
            true => Ok(()),
            false => Err(Failure::unknown_group(
                name,
                spec.groups.iter().map(|g| g.name.as_str()),
            )),
        }
    }

    /// Prints the message on stderr ([`output::fail`]: a JSON object with
    /// `--json`) and gives the exit code: 2 for usage, 1 for a failed
    /// operation.
    pub(crate) fn report(self) -> ExitCode {
        let (message, code) = match self {
            Failure::Usage(message) => (message, 2),
            Failure::Op(message) => (message, 1),
            Failure::Unknown(message) => (message, UNKNOWN),
        };
        output::fail(&message, code)
    }
}

impl From<memgroup::client::Error> for Failure {
    fn from(e: memgroup::client::Error) -> Self {
        use memgroup::client::ErrorKind;
        match e.kind() {
            ErrorKind::Config | ErrorKind::InvalidArgument | ErrorKind::InvalidKey => {
                Failure::Usage(e.chain())
            }
            ErrorKind::OutcomeUnknown => Failure::Unknown(e.chain()),
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

/// Exit 3: partly done.
pub(crate) const PARTIAL: u8 = 3;

/// Exit 4: a conditional write's outcome is unknown.
pub(crate) const UNKNOWN: u8 = 4;

/// How far an operation got, from best to worst; several combine to the
/// worst of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Done {
    /// Everywhere it was meant to go.
    Everywhere,
    /// By its policy, while some group missed it.
    Partly,
    /// Not at all, or refused by its condition.
    Failed,
}

impl Done {
    /// A replicated write: refused or not applied anywhere is a failure,
    /// applied with some group failed or pending is partly done.
    pub(crate) fn of_write(outcome: &memgroup::client::WriteOutcome) -> Done {
        if !outcome.applied() {
            Done::Failed
        } else if outcome.is_complete() {
            Done::Everywhere
        } else {
            Done::Partly
        }
    }

    /// The exit code: 0, 3 or 1.
    pub(crate) fn code(self) -> ExitCode {
        match self {
            Done::Everywhere => ExitCode::SUCCESS,
            Done::Partly => ExitCode::from(PARTIAL),
            Done::Failed => ExitCode::from(1),
        }
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
