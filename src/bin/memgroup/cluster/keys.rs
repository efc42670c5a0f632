//! The cluster's key schemes: long keys, EVCache's hashed keys, and each
//! group's own, from the flags or the file.

use memgroup::client::LongKeys;
use memgroup::config::{ClusterFile, FileGroup};
use memgroup::hash::evcache::EvcacheKeys;

use super::Cluster;
use crate::flags::ClusterFlags;

/// Each group's own EVCache key settings (`Some(None)`: keys as given).
pub(crate) type GroupKeys = Vec<(String, Option<EvcacheKeys>)>;

/// The key scheme: a flag picks it over the file's (`--long-keys` keeps the
/// file's long-key settings; the two flags conflict) and the file's groups'
/// own, else the file's, with the own settings of its groups among
/// `file_groups` (those that are the servers).
pub(super) fn key_schemes(
    flags: &ClusterFlags,
    file: &ClusterFile,
    file_groups: &[FileGroup],
) -> (Option<LongKeys>, Option<EvcacheKeys>, GroupKeys) {
    match (flags.long_keys, flags.evcache_keys) {
        (true, _) => (
            Some(file.long_keys.clone().unwrap_or_default()),
            None,
            Vec::new(),
        ),
        (false, Some(keys)) => (None, Some(keys), Vec::new()),
        (false, None) => {
            let own = file_groups
                .iter()
                .filter_map(|g| Some((g.name.clone(), g.evcache_keys?)))
                .collect();
            (file.long_keys.clone(), file.evcache_keys, own)
        }
    }
}

impl Cluster {
    /// Long keys (`--long-keys`, `long_keys`) and EVCache's hashed keys
    /// (`--evcache-keys`, `[evcache_keys]`), each if on.
    pub(crate) fn short_keys(&self) -> (Option<&LongKeys>, Option<EvcacheKeys>) {
        (self.settings.long_keys.as_ref(), self.settings.evcache_keys)
    }

    /// `group`'s key settings: its own (the file's), else the cluster's
    /// EVCache ones (`None`: keys as given, or memgroup's long keys).
    pub(crate) fn key_settings_of(&self, group: &str) -> Option<EvcacheKeys> {
        match self.settings.group_keys.iter().find(|(g, _)| g == group) {
            Some((_, own)) => *own,
            None => self.settings.evcache_keys,
        }
    }

    /// Whether some group has key settings of its own (the file's).
    pub(crate) fn own_group_keys(&self) -> bool {
        !self.settings.group_keys.is_empty()
    }
}
