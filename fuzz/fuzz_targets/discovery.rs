//! A configuration endpoint's cluster list: any bytes parse to a list of
//! valid nodes or a typed error, never a panic; a parsed list is never
//! empty nor beyond its bound, and every node's address is one the server
//! list parser takes back.
#![no_main]

use libfuzzer_sys::fuzz_target;
use memgroup_proto::{ClusterConfig, MAX_CONFIG_NODES};

fuzz_target!(|data: &[u8]| {
    match ClusterConfig::parse(data) {
        Ok(config) => {
            assert!(!config.nodes.is_empty() && config.nodes.len() <= MAX_CONFIG_NODES);
            for node in &config.nodes {
                assert!(node.port != 0 && !node.host.is_empty());
                let address = node.address();
                assert!(!address.contains([' ', '\n', '\r', ',', ';']), "{address:?}");
            }
        }
        Err(e) => assert!(!e.to_string().contains('\n')),
    }
});
