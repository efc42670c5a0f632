//! Building a client that connects now, and the cluster discovery that
//! happens then ([`crate::discover`]).

use std::time::Duration;

use super::ClientBuilder;
use crate::client::Client;
use crate::conn::ConnSettings;
use crate::error::Error;
use crate::events::Event;

impl ClientBuilder {
    /// The cluster's one group is found at a configuration endpoint
    /// (`host:port` of ElastiCache's configuration endpoint or
    /// Memorystore's discovery endpoint), and followed as it changes. With
    /// [`ClientBuilder::servers`] too, those are the fallback when the
    /// endpoint cannot be asked at start. Discovery runs in
    /// [`ClientBuilder::connect`]; see [`crate::discover`] for
    /// versions, node names and precedence.
    pub fn discover(self, endpoint: &str) -> Self {
        self.group_discover(memgroup_topology::DEFAULT_GROUP_NAME, endpoint)
    }

    /// Group `group`'s servers are found at `endpoint` (a cluster of
    /// several groups: one endpoint per group, e.g. per zone). The group's
    /// settings (zone, hashing, pool size) come from the cluster
    /// description; its servers there, if any, are the fallback at start.
    pub fn group_discover(mut self, group: &str, endpoint: &str) -> Self {
        self.discovery.groups.retain(|(g, _)| g != group);
        self.discovery
            .groups
            .push((group.to_string(), endpoint.trim().to_string()));
        self
    }

    /// How often discovery asks its endpoints again (default
    /// [`DEFAULT_DISCOVER_EVERY`](crate::discover::DEFAULT_DISCOVER_EVERY), 60 s; at
    /// least 10 ms, so a zero never makes it spin).
    pub fn discover_every(mut self, every: Duration) -> Self {
        self.discovery.every = every.max(Duration::from_millis(10));
        self
    }

    /// Builds the client and opens every connection now, failing if no
    /// server at all can be reached. With discovery
    /// ([`ClientBuilder::discover`]) it first asks each endpoint for its
    /// group's servers, and then follows the lists on a task of the client.
    pub async fn connect(mut self) -> Result<Client, Error> {
        use crate::client::discover;
        if let Some(error) = self.error.take() {
            return Err(error);
        }
        let discovery = std::mem::take(&mut self.discovery);
        let mut versions = Vec::with_capacity(discovery.groups.len());
        let mut failures = Vec::new();
        let mut applied = Vec::new();
        let settings = self.conn_settings()?;
        if !discovery.groups.is_empty() {
            let timeout = discover::discovery_timeout(self.op_timeout);
            for (group, endpoint) in &discovery.groups {
                let fallback = self
                    .spec
                    .groups
                    .iter()
                    .any(|g| g.name == *group && !g.servers.is_empty());
                // A list that cannot be applied counts as a failed fetch.
                let fetched = discover::fetch(endpoint, &settings, timeout)
                    .await
                    .and_then(|config| {
                        let spec = discover::with_nodes(self.spec.clone(), group, &config)?;
                        memgroup_topology::Topology::new(spec.clone())?;
                        Ok((config, spec))
                    });
                match fetched {
                    Ok((config, spec)) => {
                        self.spec = spec;
                        versions.push(config.version);
                        applied.push((group.clone(), config.version, config.nodes.len()));
                    }
                    Err(error) if fallback => {
                        versions.push(0);
                        failures.push((group.clone(), endpoint.clone(), error));
                    }
                    // What kept discovery from answering (an endpoint
                    // down, a timeout, a reply that is no configuration),
                    // not a mistake in the settings.
                    Err(error) => {
                        return Err(Error::new(
                            error.kind(),
                            format!("group {group}: no servers: discovery at {endpoint} failed"),
                        )
                        .with_source(error));
                    }
                }
            }
        }
        let client = self.build_now()?;
        for (group, version, servers) in applied {
            client.inner.pool.events().emit(|| Event::Discovered {
                group,
                version,
                previous: 0,
                servers,
            });
        }
        for (group, endpoint, error) in failures {
            client.inner.pool.events().emit(|| Event::DiscoveryFailed {
                group,
                endpoint,
                error,
            });
        }
        client.connect_all().await?;
        if !discovery.groups.is_empty() {
            discover::follow(&client, discovery, versions, settings);
        }
        Ok(client)
    }

    /// The cluster's connection settings, TLS ready (what `build` gives
    /// the pool).
    fn conn_settings(&self) -> Result<ConnSettings, Error> {
        #[allow(unused_mut)]
        let mut conn = self.conn.clone();
        #[cfg(feature = "tls")]
        if let Some(tls) = &self.tls {
            conn.tls = Some(tls.connector()?);
        }
        Ok(conn)
    }
}
