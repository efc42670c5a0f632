//! `memgroup config`'s view: every setting in effect, its value and where
//! it came from.

use super::Cluster;

impl Cluster {
    /// Every setting in effect, its value and where it came from (`memgroup
    /// config`): per group where groups differ.
    pub(crate) fn effective(&self) -> Vec<(&'static str, String, String)> {
        let groups = &self.spec.groups;
        // One value, or each group's where they differ.
        let per_group = |f: &dyn Fn(&memgroup::topology::GroupSpec) -> String| {
            let values: Vec<String> = groups.iter().map(f).collect();
            if values.windows(2).all(|w| w[0] == w[1]) {
                values.first().cloned().unwrap_or_default()
            } else {
                groups
                    .iter()
                    .zip(&values)
                    .map(|(g, v)| format!("{}={v}", g.name))
                    .collect::<Vec<_>>()
                    .join(" ")
            }
        };
        let settings = &self.spec.settings;
        let s = &self.settings;
        let value = |name: &str| -> String {
            match name {
                "servers" => groups
                    .iter()
                    .map(|g| {
                        let servers: Vec<String> =
                            g.servers.iter().map(|s| s.addr.to_string()).collect();
                        // A discovered group's servers are the endpoint's to say.
                        match s.discovery.iter().find(|(group, _)| *group == g.name) {
                            Some((_, endpoint)) if servers.is_empty() => {
                                format!("{}=(discovered from {endpoint})", g.name)
                            }
                            _ => format!("{}={}", g.name, servers.join(",")),
                        }
                    })
                    .collect::<Vec<_>>()
                    .join(";"),
                "hash" => per_group(&|g| g.locator.strategy.to_string()),
                "node_naming" => per_group(&|g| g.locator.node_naming.to_string()),
                "sanitize" => per_group(&|g| g.locator.sanitize_keys.to_string()),
                "pool_size" => per_group(&|g| g.pool_size.to_string()),
                "key_prefix" => settings
                    .key_prefix
                    .clone()
                    .filter(|p| !p.is_empty())
                    .unwrap_or_else(|| "-".into()),
                "zone" => settings.local_zone.clone().unwrap_or_else(|| "-".into()),
                // Named, or the first read-write group by name (as the
                // topology picks it, which a discovered group without its
                // servers yet cannot build).
                "arbiter" => settings.arbiter.clone().unwrap_or_else(|| {
                    let readable = groups.iter().filter(|g| !g.write_only);
                    readable.map(|g| g.name.clone()).min().unwrap_or_default()
                }),
                "read_fallback" => settings.read_fallback.to_string(),
                "write_policy" => settings.write_policy.to_string(),
                "failover" => settings
                    .failover
                    .map_or("auto (on for one group)".into(), |f| f.to_string()),
                "timeout" => format!("{} ms", s.timeout.as_millis()),
                "connect_timeout" => format!("{} ms", s.connect_timeout.as_millis()),
                "value_format" => s.values.name().to_string(),
                "login" => s
                    .credentials
                    .as_ref()
                    .map_or("-".into(), |c| c.username().to_string()),
                "tls" => if s.tls.is_some() { "on" } else { "off" }.to_string(),
                "long_keys" => {
                    let cluster = match (&s.evcache_keys, &s.long_keys) {
                        (Some(keys), _) => format!("EVCache: {keys}"),
                        (None, long) => long.as_ref().map_or("off".into(), ToString::to_string),
                    };
                    // Then each group's own.
                    s.group_keys.iter().fold(cluster, |shown, (group, keys)| {
                        let own = keys.map_or("keys as given".into(), |k| format!("EVCache: {k}"));
                        format!("{shown}; {group}: {own}")
                    })
                }
                "meta_protocol" => s.meta_protocol.name().to_string(),
                "read_repair" => if s.read_repair { "on" } else { "off" }.to_string(),
                "repair_journal" => s
                    .repair_journal
                    .as_ref()
                    .map_or("off".into(), |d| d.display().to_string()),
                "migrate_from" => if s.migrate_from.is_some() {
                    "on"
                } else {
                    "off"
                }
                .to_string(),
                _ => String::new(),
            }
        };
        self.origins
            .iter()
            .map(|(name, origin)| (*name, value(name), origin.clone()))
            .collect()
    }
}
