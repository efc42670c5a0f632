//! The text forms of a cluster — libmemcached server lists, EVCache node
//! lists and `memcache://` URLs (with credentials and a value format) —
//! parse to a spec or a typed error, never a panic; a parsed spec builds a
//! topology or fails cleanly.
#![no_main]

use libfuzzer_sys::fuzz_target;
use memgroup_client::ClientUrl;
use memgroup_topology::{ClusterSpec, Topology};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    for spec in [
        ClusterSpec::parse_server_list(text).ok(),
        ClusterSpec::parse_evcache(text).ok(),
        ClusterSpec::parse_url(&format!("memcache://{text}")).ok(),
        ClientUrl::parse(&format!("memcache://{text}")).ok().map(|u| u.spec),
    ]
    .into_iter()
    .flatten()
    {
        // Keep huge weights from building giant rings: not what this target probes.
        if spec.groups.iter().flat_map(|g| &g.servers).all(|s| s.weight <= 100) {
            let _ = Topology::new(spec);
        }
    }
});
