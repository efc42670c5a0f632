//! Where the tool journals the repairs a run could not finish.

use crate::flags::ClusterFlags;

/// The repair journal's directory: `--repair-journal`, else
/// `MEMGROUP_REPAIR_JOURNAL`, else the file's `repair_journal`, else
/// `$XDG_STATE_HOME/memgroup/repairs` or `~/.local/state/memgroup/repairs`
/// (with neither, a warning and none). `off` at any of them: none.
pub(super) fn dir(
    flags: &ClusterFlags,
    env: &impl Fn(&str) -> Option<String>,
    file: Option<&memgroup::config::RepairJournal>,
    warnings: &mut Vec<String>,
) -> Option<std::path::PathBuf> {
    use memgroup::config::RepairJournal;
    let given = flags
        .repair_journal
        .clone()
        .or_else(|| env("MEMGROUP_REPAIR_JOURNAL").filter(|d| !d.is_empty()));
    match (given.as_deref(), file) {
        (Some("off"), _) => None,
        (Some(dir), _) => Some(dir.into()),
        (None, Some(RepairJournal::Off)) => None,
        (None, Some(RepairJournal::Dir(dir))) => Some(dir.clone()),
        (None, None) => {
            let state = env("XDG_STATE_HOME")
                .filter(|d| d.starts_with('/'))
                .map(std::path::PathBuf::from)
                .or_else(|| {
                    env("HOME")
                        .filter(|h| !h.is_empty())
                        .map(|h| std::path::Path::new(&h).join(".local/state"))
                });
            if state.is_none() {
                warnings.push(
                    "no XDG_STATE_HOME or HOME: repairs this run cannot finish are not journaled (--repair-journal DIR)"
                        .to_string(),
                );
            }
            state.map(|s| s.join("memgroup").join("repairs"))
        }
    }
}
