//! `config`: the settings in effect and where each came from, like `git
//! config --show-origin` — the flags, the environment, the URL, the file and
//! the defaults resolved by the one rule of [`crate::sources`].

use std::process::ExitCode;

use serde_json::json;

use crate::cluster::Cluster;
use crate::exit::Failure;
use crate::flags::ClusterFlags;
use crate::output::Report;

/// `config`: one row per setting, `SETTING VALUE ORIGIN`; exit 2 when the
/// cluster they describe is one the other commands refuse.
pub(crate) fn run(flags: &ClusterFlags) -> Result<ExitCode, Failure> {
    let cluster = Cluster::from_flags(flags)?;
    let mut report = Report::new(&["SETTING", "VALUE", "ORIGIN"]);
    for (name, value, origin) in cluster.effective() {
        report.record(json!({"setting": name, "value": value, "origin": origin}));
        report.row(vec![name.to_string(), value, origin]);
    }
    report.print();
    // Shown as resolved, and refused as every other command refuses it.
    cluster.check()?;
    Ok(ExitCode::SUCCESS)
}
