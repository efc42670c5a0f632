//! Local memcached clusters for the demo and for `cargo xtask cluster up|down`.

use std::fs;
use std::path::PathBuf;
use std::process::Command;

use crate::{Result, root};

/// A memcached process on a loopback port, killed on drop unless detached.
pub(crate) use memgroup_testkit::Memcached as Server;

/// Starts one memcached for a demo or play cluster.
pub(crate) fn spawn() -> Result<Server> {
    Server::try_spawn_with(&["-m", "256"], |_| {}).map_err(|e| e.to_string())
}

/// `sg1=h:p,…;sg2=…`
pub(crate) fn groups_spec(groups: &[(&str, &[Server])]) -> String {
    groups
        .iter()
        .map(|(name, servers)| {
            let list: Vec<String> = servers.iter().map(Server::addr_string).collect();
            format!("{name}={}", list.join(","))
        })
        .collect::<Vec<_>>()
        .join(";")
}

fn state_file() -> PathBuf {
    root().join("target").join("memgroup-cluster.env")
}

/// `cargo xtask cluster up|down`.
pub(crate) fn cluster(action: Option<&str>) -> Result<()> {
    match action {
        Some("up") => {
            crate::ensure_memcached()?;
            if state_file().exists() {
                return Err(format!(
                    "a cluster is already up ({}); run `cargo xtask cluster down` first",
                    state_file().display()
                ));
            }
            let sg1: Vec<Server> = (0..3).map(|_| spawn()).collect::<Result<_>>()?;
            let sg2: Vec<Server> = (0..3).map(|_| spawn()).collect::<Result<_>>()?;
            let spec = groups_spec(&[("sg1", &sg1), ("sg2", &sg2)]);
            let pids: Vec<String> = sg1
                .into_iter()
                .chain(sg2)
                .map(|s| s.detach().to_string())
                .collect();
            fs::create_dir_all(root().join("target")).map_err(|e| e.to_string())?;
            fs::write(
                state_file(),
                format!(
                    "MEMGROUP_GROUPS='{spec}'\nMEMGROUP_PIDS='{}'\n",
                    pids.join(" ")
                ),
            )
            .map_err(|e| e.to_string())?;
            println!("cluster up: two server groups x three memcached on loopback");
            println!();
            println!("  cargo build --bin memgroup");
            println!("  ./target/debug/memgroup --groups '{spec}' stats");
            println!("  ./target/debug/memgroup --groups '{spec}' --zone sg1 set hello world");
            println!();
            println!(
                "stop it with: cargo xtask cluster down   (state in {})",
                state_file().display()
            );
            Ok(())
        }
        Some("down") => {
            let text =
                fs::read_to_string(state_file()).map_err(|_| "no cluster is up".to_string())?;
            let pids = text
                .lines()
                .find_map(|l| l.strip_prefix("MEMGROUP_PIDS='"))
                .map(|l| l.trim_end_matches('\''))
                .unwrap_or("");
            for pid in pids.split_whitespace() {
                let _ = Command::new("kill").args(["-9", pid]).status();
            }
            fs::remove_file(state_file()).map_err(|e| e.to_string())?;
            println!("cluster down");
            Ok(())
        }
        _ => Err("usage: cargo xtask cluster up|down".into()),
    }
}
