//! The builder's servers: groups given as specs, server lists or EVCache
//! node lists; a list that does not parse is kept as the error `build` and
//! `connect` return, so the chain reads as one expression.

use memgroup_topology::{ClusterSpec, GroupSpec};

use super::ClientBuilder;
use crate::error::Error;

impl ClientBuilder {
    /// Adds a server group.
    pub fn group(mut self, group: GroupSpec) -> Self {
        self.spec.groups.push(group);
        self
    }

    /// Adds the groups and settings of a parsed cluster description.
    pub fn cluster(mut self, spec: ClusterSpec) -> Self {
        self.spec.groups.extend(spec.groups);
        self.spec.settings = spec.settings;
        self
    }

    /// Adds one group from a libmemcached-style list, `host:port[:weight],…`;
    /// a list that does not parse is the error of [`build`](Self::build).
    pub fn servers(self, list: &str) -> Self {
        match ClusterSpec::parse_server_list(list) {
            Ok(spec) => self.cluster_groups(spec),
            Err(e) => self.failed(e.into()),
        }
    }

    /// Adds groups from EVCache's node list, `sg1=host:port,…;sg2=…`; one
    /// that does not parse is the error of [`build`](Self::build).
    pub fn evcache_groups(self, list: &str) -> Self {
        match ClusterSpec::parse_evcache(list) {
            Ok(spec) => self.cluster_groups(spec),
            Err(e) => self.failed(e.into()),
        }
    }

    /// Keeps the first error of the chain for `build`/`connect`.
    pub(crate) fn failed(mut self, error: Error) -> Self {
        self.error.get_or_insert(error);
        self
    }

    pub(super) fn cluster_groups(mut self, spec: ClusterSpec) -> Self {
        self.spec.groups.extend(spec.groups);
        self
    }
}
