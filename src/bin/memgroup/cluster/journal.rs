//! Where the tool journals the repairs a run could not finish.

use crate::flags::ClusterFlags;

/// The repair journal's directory: `--repair-journal`, else
/// `MEMGROUP_REPAIR_JOURNAL`, else the file's `repair_journal`, else
/// `$XDG_STATE_HOME/memgroup/repairs` or `~/.local/state/memgroup/repairs`
/// (with neither, a warning and none). `off` at any of them: none.
/// With the directory, where it came from (for `memgroup config`).
pub(super) fn dir(
    flags: &ClusterFlags,
    env: &impl Fn(&str) -> Option<String>,
    file: Option<&memgroup::config::RepairJournal>,
    config: Option<&crate::sources::ConfigFile>,
    warnings: &mut Vec<String>,
) -> (Option<std::path::PathBuf>, String) {
    use memgroup::config::RepairJournal;
    let (given, origin) = match (&flags.repair_journal, env("MEMGROUP_REPAIR_JOURNAL")) {
        (Some(dir), _) => (Some(dir.clone()), "flag --repair-journal".to_string()),
        (None, Some(dir)) if !dir.is_empty() => {
            (Some(dir), "environment MEMGROUP_REPAIR_JOURNAL".to_string())
        }
        _ => (None, String::new()),
    };
    let in_file = || config.map_or("file".to_string(), |c| format!("file ({})", c.name));
    let dir = match (given.as_deref(), file) {
        (Some("off"), _) => None,
        (Some(dir), _) => Some(dir.into()),
        (None, Some(RepairJournal::Off)) => return (None, in_file()),
        (None, Some(RepairJournal::Dir(dir))) => return (Some(dir.clone()), in_file()),
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
            return (
                state.map(|s| s.join("memgroup").join("repairs")),
                "default".to_string(),
            );
        }
    };
    (dir, origin)
}
