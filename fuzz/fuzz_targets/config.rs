//! `cluster.toml`: any text parses to a checked file or a typed error
//! naming what is wrong, never a panic; a parsed file's groups build a
//! topology or fail cleanly.
#![no_main]

use libfuzzer_sys::fuzz_target;
use memgroup::config::ClusterFile;
use memgroup::topology::Topology;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match ClusterFile::parse(text) {
        Ok(file) => {
            let Some(spec) = file.spec() else { return };
            // Keep huge weights from building giant rings (slow, bounded):
            // not what this target probes. Pool sizes are bounded by the
            // topology itself.
            if spec.groups.iter().all(|g| g.servers.iter().all(|s| s.weight <= 100)) {
                let _ = Topology::new(spec);
            }
        }
        Err(e) => {
            let m = e.message();
            assert!(!m.is_empty() && !m.contains('\n'), "{m:?} for {text:?}");
        }
    }
});
