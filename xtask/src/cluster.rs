//! Local memcached clusters for the demo and for `cargo xtask cluster up|down`.

use std::fs;
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::{Result, root};

/// A memcached process on a loopback port. Killed on drop unless detached.
#[derive(Debug)]
pub(crate) struct Server {
    pub(crate) port: u16,
    child: Option<Child>,
}

impl Server {
    pub(crate) fn spawn() -> Result<Server> {
        for _ in 0..20 {
            let port = TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .map_err(|e| format!("no free port: {e}"))?
                .port();
            let mut child = Command::new("memcached")
                .args([
                    "-l",
                    "127.0.0.1",
                    "-p",
                    &port.to_string(),
                    "-U",
                    "0",
                    "-u",
                    "root",
                    "-m",
                    "256",
                ])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .map_err(|e| format!("cannot start memcached: {e}"))?;
            let deadline = Instant::now() + Duration::from_secs(5);
            loop {
                if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    return Ok(Server {
                        port,
                        child: Some(child),
                    });
                }
                if child.try_wait().ok().flatten().is_some() || Instant::now() > deadline {
                    let _ = child.kill();
                    let _ = child.wait();
                    break;
                }
                thread::sleep(Duration::from_millis(10));
            }
        }
        Err("memcached would not start".into())
    }

    pub(crate) fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub(crate) fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// SIGKILL.
    pub(crate) fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Leaves the process running after this value is dropped.
    // The process outlives xtask on purpose (`cluster up`); once xtask exits
    // it is reparented to init, which reaps it, so no zombie remains.
    #[allow(clippy::zombie_processes)]
    fn detach(mut self) -> u32 {
        let child = self.child.take().expect("running");
        child.id()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

/// `sg1=h:p,…;sg2=…`
pub(crate) fn groups_spec(groups: &[(&str, &[Server])]) -> String {
    groups
        .iter()
        .map(|(name, servers)| {
            let list: Vec<String> = servers.iter().map(Server::addr).collect();
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
            let sg1: Vec<Server> = (0..3).map(|_| Server::spawn()).collect::<Result<_>>()?;
            let sg2: Vec<Server> = (0..3).map(|_| Server::spawn()).collect::<Result<_>>()?;
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
