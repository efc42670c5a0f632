//! The builder's key schemes: memgroup's long keys, EVCache's hashed keys,
//! cluster-wide or per group.

use memgroup_hash::evcache::EvcacheKeys;
use memgroup_topology::Topology;

use super::ClientBuilder;
use crate::error::{Error, ErrorKind};
use crate::longkey::{KeyScheme, LongKeys};

impl ClientBuilder {
    /// Store keys longer than the limit (memcached's 250 bytes by default)
    /// under a digest key, the value in an envelope holding the key, checked
    /// on every read ([`LongKeys`](crate::LongKeys)). Off by default; cluster-wide.
    pub fn long_keys(mut self, long_keys: LongKeys) -> Self {
        self.key_schemes.cluster = Some(KeyScheme::Memgroup(long_keys));
        self
    }

    /// EVCache's hashed keys (`<app>.hash.key`, or `<app>.auto.hash.keys`
    /// for keys over `max.key.length`): such a key is stored under its
    /// digest alone (what ketama routes on), its value in the Java-serialized
    /// `EVCacheValue` envelope EVCache writes (memcached flags 1) and reads
    /// (a key that differs, a collision, is a miss), so the Java EVCache
    /// clients of the fleet read what this client writes and the reverse.
    /// The canonical key hashed is the key prefix (`app:`) and the key.
    /// `delete`, `touch`, `incr` and `decr` use the hashed key without an
    /// envelope, as EVCache does; `append` and `prepend` are refused. In
    /// place of [`long_keys`](Self::long_keys) (the last given applies);
    /// for every group without its own
    /// ([`group_evcache_keys`](Self::group_evcache_keys)). Not with
    /// [`sanitize_keys`](Self::sanitize_keys) (`build` says so): EVCache
    /// hashes keys as given.
    pub fn evcache_keys(mut self, keys: EvcacheKeys) -> Self {
        self.key_schemes.cluster = Some(KeyScheme::Evcache(keys));
        self
    }

    /// `group`'s own EVCache key settings (`<app>.<group>.hash.key`,
    /// `.hash.algo`, `.auto.hash.keys`, … in EVCache's properties), in
    /// place of the cluster's [`evcache_keys`](Self::evcache_keys) there;
    /// `None`: `group` stores keys as given. Each group is then read and
    /// written under its own key and envelope, what EVCache's clients of
    /// that group do: reads, writes, counters, leases, repairs and the
    /// convergence check. Two things work on raw copies and so leave such a
    /// key alone: read repair copies nothing of it, and
    /// [`Client::get_consistent`](crate::Client::get_consistent) refuses it
    /// ([`ErrorKind::Unsupported`]).
    pub fn group_evcache_keys(mut self, group: &str, keys: Option<EvcacheKeys>) -> Self {
        let scheme = keys.map(KeyScheme::Evcache);
        let groups = &mut self.key_schemes.groups;
        match groups.iter_mut().find(|(name, _)| name == group) {
            Some((_, own)) => *own = scheme,
            None => groups.push((group.to_string(), scheme)),
        }
        self
    }

    /// Refuses key schemes `build` cannot honour: a group's own for a group
    /// the cluster has not, EVCache's hashed keys behind sanitized keys.
    pub(super) fn check_key_schemes(&self, topology: &Topology) -> Result<(), Error> {
        for (group, _) in &self.key_schemes.groups {
            if !topology.groups().iter().any(|g| g.name() == group) {
                return Err(Error::new(
                    ErrorKind::Config,
                    format!("group_evcache_keys for group {group:?}, which the cluster has not"),
                ));
            }
        }
        if topology.sanitizes_keys() && self.key_schemes.evcache() {
            // EVCache hashes the key as given: a URL-encoded one would give
            // another digest, and short keys would differ from EVCache's.
            return Err(Error::new(
                ErrorKind::Config,
                "sanitize_keys and evcache_keys together: EVCache hashes and stores keys as given, not URL-encoded; turn sanitize_keys off",
            ));
        }
        Ok(())
    }
}
