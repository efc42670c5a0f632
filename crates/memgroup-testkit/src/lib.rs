//! # memgroup-testkit: real memcached processes for tests, benches and demos
//!
//! One place that starts `memcached` for the integration tests, the criterion
//! benches, `cargo xtask demo|cluster` and `bench-compare`: on a free loopback
//! port, waiting until it accepts, killed (SIGKILL) when dropped. Fault tests
//! stop (SIGSTOP), resume and restart it on the same port.
//!
//! Not published. Needs `memcached` on `PATH` (`cargo xtask test` installs
//! the Debian package when it can). With feature `tls`, `Pki` makes test
//! certificates at run time and `Memcached::spawn_tls` serves TLS with them.
//!
//! ```no_run
//! use memgroup_testkit::Memcached;
//!
//! let server = Memcached::spawn();
//! let addr = server.addr_string(); // "127.0.0.1:<port>"
//! # let _ = addr;
//! // SIGKILLed here.
//! ```
//!
//! [`Twemproxy`] starts Debian's `nutcracker` in front of them: a proxy
//! without memcached's meta commands.
//!
//! [`alloc`] holds the counting global allocator that the allocation tests of
//! `memgroup-hash`, `memgroup-topology` and the integration tests install.

// Denied, not forbidden: `alloc` implements the unsafe `GlobalAlloc` trait
// (and allows it there only).
#![deny(unsafe_code)]

pub mod alloc;
mod twemproxy;

pub use twemproxy::Twemproxy;

#[cfg(feature = "tls")]
mod pki;
#[cfg(feature = "tls")]
pub use pki::Pki;

use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// How long a new process gets to accept connections.
const START_TIMEOUT: Duration = Duration::from_secs(5);

/// One `memcached` process on a loopback port, killed (SIGKILL) when dropped.
#[derive(Debug)]
pub struct Memcached {
    child: Option<Child>,
    port: u16,
    extra: Vec<String>,
}

impl Memcached {
    /// Spawns `memcached -l 127.0.0.1 -p <free port> -U 0` and waits until it
    /// accepts. Panics if it cannot (meant for tests).
    pub fn spawn() -> Memcached {
        Memcached::spawn_with(&[])
    }

    /// As [`Memcached::spawn`], with extra command-line arguments.
    pub fn spawn_with(extra: &[&str]) -> Memcached {
        Memcached::try_spawn_with(extra, |_| {}).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Spawns memcached serving TLS only (`-Z`) with `pki`'s server
    /// certificate; with `require_client_cert`, it refuses clients without a
    /// certificate signed by `pki`'s CA (`ssl_verify_mode=2`).
    #[cfg(feature = "tls")]
    pub fn spawn_tls(pki: &Pki, require_client_cert: bool, extra: &[&str]) -> Memcached {
        let options = pki.memcached_options(require_client_cert);
        let mut args = vec!["-Z", "-o", &options];
        args.extend_from_slice(extra);
        Memcached::spawn_with(&args)
    }

    /// Spawns with extra arguments; `configure` may adjust the command
    /// further (environment, a `pre_exec` hook) before each attempt.
    pub fn try_spawn_with(
        extra: &[&str],
        mut configure: impl FnMut(&mut Command),
    ) -> io::Result<Memcached> {
        // The port is free when we look and memcached binds it a moment later;
        // another process could take it in between, so retry with a new one.
        let mut last_error = None;
        for _ in 0..20 {
            let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
            let mut server = Memcached {
                child: None,
                port,
                extra: extra.iter().map(|s| (*s).to_string()).collect(),
            };
            match server.start(&mut configure) {
                Ok(()) => return Ok(server),
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(e),
                Err(e) => last_error = Some(e),
            }
        }
        Err(io::Error::other(format!(
            "could not start memcached: {last_error:?}"
        )))
    }

    fn start(&mut self, configure: &mut dyn FnMut(&mut Command)) -> io::Result<()> {
        let mut command = Command::new("memcached");
        command
            .args(["-l", "127.0.0.1", "-p", &self.port.to_string(), "-U", "0"])
            // memcached refuses to run as root without -u; as another user the flag is ignored.
            .args(["-u", "root"])
            .args(&self.extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        configure(&mut command);
        let mut child = command.spawn().map_err(|e| {
            io::Error::new(
                e.kind(),
                format!(
                    "spawning memcached (is it installed? `cargo xtask test` installs it): {e}"
                ),
            )
        })?;
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Some(status) = child.try_wait()? {
                return Err(io::Error::other(format!("memcached exited: {status}")));
            }
            if accepts(self.addr()) {
                self.child = Some(child);
                return Ok(());
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err(io::Error::other(format!(
                    "memcached did not accept within {START_TIMEOUT:?}"
                )));
            }
            thread::sleep(Duration::from_millis(10));
        }
    }

    /// The server's address.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// `127.0.0.1:<port>`.
    pub fn addr_string(&self) -> String {
        self.addr().to_string()
    }

    /// The process id, while running.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// SIGKILL, and reap.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGSTOP: the process keeps its sockets but stops answering. Returns
    /// once every thread of it is stopped (the signal is asynchronous: a
    /// worker thread could otherwise still answer a request or two).
    pub fn stop(&self) {
        self.signal("-STOP");
        let pid = self.pid().expect("running");
        let deadline = Instant::now() + START_TIMEOUT;
        while !all_threads_stopped(pid) {
            assert!(Instant::now() < deadline, "memcached {pid} did not stop");
            thread::sleep(Duration::from_millis(1));
        }
    }

    /// SIGCONT after [`Memcached::stop`].
    pub fn resume(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, sig: &str) {
        let pid = self.pid().expect("memcached is not running").to_string();
        let status = Command::new("kill").args([sig, &pid]).status().unwrap();
        assert!(status.success(), "kill {sig} {pid} failed");
    }

    /// Starts the server again on the same port (after [`Memcached::kill`]).
    pub fn restart(&mut self) {
        self.kill();
        let deadline = Instant::now() + Duration::from_secs(10);
        while let Err(e) = self.start(&mut |_| {}) {
            assert!(Instant::now() < deadline, "restart failed: {e}");
            thread::sleep(Duration::from_millis(50));
        }
    }

    /// Leaves the process running after this value is dropped; returns its pid.
    // The process outlives its parent on purpose (`cargo xtask cluster up`);
    // once the parent exits it is reparented to init, which reaps it.
    #[allow(clippy::zombie_processes)]
    pub fn detach(mut self) -> u32 {
        self.child.take().expect("running").id()
    }
}

impl Drop for Memcached {
    fn drop(&mut self) {
        if let Some(child) = &self.child {
            // A stopped process must be continued for SIGKILL to be reaped promptly.
            let _ = Command::new("kill")
                .args(["-CONT", &child.id().to_string()])
                .status();
        }
        self.kill();
    }
}

/// Whether a memcached listens at `addr` and has taken a connection in:
/// one connection that sends `version` and waits for anything back (a
/// reply, or the close of a TLS-only or login-only server that cannot read
/// it). Not a bare connect: the kernel completes a handshake into the
/// listen backlog before memcached accepts, and memcached counts a
/// connection (`total_connections`) only when a worker thread takes it, so a
/// probe that only connected could be counted later, in the middle of a
/// test comparing that counter.
///
/// Not a connection to itself either: a connect to a loopback port nobody
/// listens on yet can pick that very port as its own and connect to itself
/// (TCP simultaneous open), which a loop polling for a server to start makes
/// likely; the server then fails to bind, and the test finds its port
/// refusing connections.
fn accepts(addr: SocketAddr) -> bool {
    use std::io::{Read, Write};
    let Ok(mut stream) = TcpStream::connect(addr) else {
        return false;
    };
    if stream.local_addr().ok() == Some(addr) {
        return false;
    }
    if stream.set_read_timeout(Some(START_TIMEOUT)).is_err() {
        return false;
    }
    // A write refused means the server closed the connection: it took it.
    let _ = stream.write_all(b"version\r\n");
    let mut reply = [0u8; 64];
    match stream.read(&mut reply) {
        // Closed: a server that cannot read plain `version` took it in.
        Ok(0) => true,
        // The version line (or its start): served.
        Ok(_) => true,
        Err(e) => !matches!(
            e.kind(),
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
        ),
    }
}

/// Whether every thread of `pid` is in state `T` (stopped), per /proc.
fn all_threads_stopped(pid: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks.flatten().all(|task| {
        std::fs::read_to_string(task.path().join("stat")).is_ok_and(|stat| {
            // "tid (comm) S …": the state follows the last ')'.
            stat.rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().next())
                == Some("T")
        })
    })
}
