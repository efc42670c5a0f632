//! Twitter's twemproxy (Debian `nutcracker`) in front of memcached
//! processes: a proxy that speaks the classic commands only and closes the
//! connection on any other (`mn`, `mg`, `gat`), as memcached 1.4/1.5 answer
//! `ERROR`. The tests of servers without the meta protocol go through it.

use std::io;
use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::Instant;

use crate::{Memcached, START_TIMEOUT, accepts};

/// One `nutcracker` process on a loopback port, forwarding to memcached
/// processes (ketama over MD5), killed when dropped.
#[derive(Debug)]
pub struct Twemproxy {
    child: Child,
    port: u16,
    stats: u16,
    dir: PathBuf,
}

impl Twemproxy {
    /// Starts `nutcracker` in front of `servers` and waits until it
    /// answers. Panics if it cannot (meant for tests; `nutcracker` must be
    /// on `PATH`, as `.ci/run` installs it).
    pub fn spawn(servers: &[&Memcached]) -> Twemproxy {
        Twemproxy::try_spawn(servers).unwrap_or_else(|e| panic!("{e}"))
    }

    /// As [`Twemproxy::spawn`], the error returned.
    pub fn try_spawn(servers: &[&Memcached]) -> io::Result<Twemproxy> {
        let free =
            || -> io::Result<u16> { Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port()) };
        let (port, stats) = (free()?, free()?);
        let dir =
            std::env::temp_dir().join(format!("memgroup-nutcracker-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let list: String = servers
            .iter()
            .map(|s| format!("   - {}:1\n", s.addr_string()))
            .collect();
        // server_failure_limit high: the proxy never ejects a server on its
        // own, so what a test sees is the client's doing.
        let config = format!(
            "pool:\n  listen: 127.0.0.1:{port}\n  hash: md5\n  distribution: ketama\n  timeout: 2000\n  auto_eject_hosts: false\n  servers:\n{list}"
        );
        let file = dir.join("nutcracker.yml");
        std::fs::write(&file, config)?;
        let mut child = Command::new("nutcracker")
            .arg("-c")
            .arg(&file)
            .args(["-a", "127.0.0.1", "-s", &stats.to_string()])
            // Its statistics every 100 ms (default 30 s), for `stat`.
            .args(["-i", "100"])
            .arg("-o")
            .arg(dir.join("nutcracker.log"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("spawning nutcracker (Debian package `nutcracker`): {e}"),
                )
            })?;
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Some(status) = child.try_wait()? {
                return Err(io::Error::other(format!("nutcracker exited: {status}")));
            }
            if accepts(addr) {
                return Ok(Twemproxy {
                    child,
                    port,
                    stats,
                    dir,
                });
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err(io::Error::other("nutcracker did not answer in time"));
            }
            thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    /// A counter of the proxy's statistics (its JSON on the stats port,
    /// aggregated every 100 ms): the first `"name": N` found, e.g.
    /// `client_err` (connections it closed on a client's bad request) or
    /// `client_connections`.
    pub fn stat(&self, name: &str) -> Option<u64> {
        use std::io::Read;
        let mut stream = std::net::TcpStream::connect(("127.0.0.1", self.stats)).ok()?;
        let mut text = String::new();
        stream.read_to_string(&mut text).ok()?;
        let at = text.find(&format!("\"{name}\":"))? + name.len() + 3;
        let digits: String = text[at..]
            .trim_start()
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        digits.parse().ok()
    }

    /// The process id (to read its CPU time).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `127.0.0.1:<port>`.
    pub fn addr_string(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

impl Drop for Twemproxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
