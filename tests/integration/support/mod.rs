//! Test support: real memcached processes on free loopback ports.

use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// One `memcached` process, killed (SIGKILL) when dropped.
#[derive(Debug)]
pub struct Memcached {
    child: Option<Child>,
    port: u16,
    extra: Vec<String>,
}

impl Memcached {
    /// Spawns `memcached -l 127.0.0.1 -p <free port> -U 0` and waits until it accepts.
    pub fn spawn() -> Memcached {
        Memcached::spawn_with(&[])
    }

    /// As [`Memcached::spawn`], with extra command-line arguments.
    pub fn spawn_with(extra: &[&str]) -> Memcached {
        // The port is free when we look and memcached binds it a moment later;
        // another process could take it in between, so retry with a new one.
        let mut last_error = None;
        for _ in 0..20 {
            let port = free_port();
            let mut server = Memcached {
                child: None,
                port,
                extra: extra.iter().map(|s| (*s).to_string()).collect(),
            };
            match server.start() {
                Ok(()) => return server,
                Err(e) => last_error = Some(e),
            }
        }
        panic!("could not start memcached: {last_error:?}");
    }

    fn start(&mut self) -> io::Result<()> {
        let mut child = Command::new("memcached")
            .args(["-l", "127.0.0.1", "-p", &self.port.to_string(), "-U", "0"])
            // memcached refuses to run as root without -u; as another user the flag is ignored.
            .args(["-u", "root"])
            .args(&self.extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!(
                        "spawning memcached (is it installed? `cargo xtask test` installs it): {e}"
                    ),
                )
            })?;
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            if let Some(status) = child.try_wait()? {
                return Err(io::Error::other(format!("memcached exited: {status}")));
            }
            if TcpStream::connect(self.addr()).is_ok() {
                self.child = Some(child);
                return Ok(());
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err(io::Error::other("memcached did not accept within 5 s"));
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
        let deadline = Instant::now() + Duration::from_secs(5);
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
        while let Err(e) = self.start() {
            assert!(Instant::now() < deadline, "restart failed: {e}");
            thread::sleep(Duration::from_millis(50));
        }
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

/// `127.0.0.1:p1,127.0.0.1:p2,…` — a libmemcached-style server list.
pub fn server_list(servers: &[Memcached]) -> String {
    servers
        .iter()
        .map(Memcached::addr_string)
        .collect::<Vec<_>>()
        .join(",")
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("no free loopback port")
}

/// Blocking one-shot access to a server, bypassing the client: used to check
/// where keys really are and what the server's counters say.
pub mod raw {
    use std::io::{Read, Write};
    use std::net::{SocketAddr, TcpStream};
    use std::time::Duration;

    use bytes::BytesMut;
    use memgroup::proto::{Decoder, Key, Request, Response};

    fn call(addr: SocketAddr, request: Request<'_>) -> Response {
        let mut stream = TcpStream::connect(addr).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let mut out = BytesMut::new();
        request.encode(&mut out);
        stream.write_all(&out).unwrap();
        let mut decoder = Decoder::default();
        let mut buf = BytesMut::new();
        loop {
            if let Some(r) = decoder.decode(&mut buf, request.expect().unwrap()).unwrap() {
                return r;
            }
            let mut chunk = [0u8; 65536];
            let n = stream.read(&mut chunk).unwrap();
            assert!(n > 0, "server closed");
            buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// Stores `value` under `key` (flags 0, no expiry).
    pub fn set(addr: SocketAddr, key: &[u8], value: &[u8]) {
        let request = Request::Store {
            command: memgroup::proto::StoreCommand::Set,
            key: Key::new(key).unwrap(),
            flags: 0,
            exptime: 0,
            data: value,
            noreply: false,
        };
        assert_eq!(call(addr, request), Response::Stored);
    }

    /// The value stored under `key`, if any.
    pub fn get(addr: SocketAddr, key: &[u8]) -> Option<Vec<u8>> {
        let keys = [Key::new(key).unwrap()];
        match call(addr, Request::Get { keys: &keys }) {
            Response::Values(mut v) => v.pop().map(|v| v.data.to_vec()),
            other => panic!("unexpected {other:?}"),
        }
    }

    /// One numeric `stats` counter (`cmd_set`, `cmd_get`, `curr_items`, …).
    pub fn stat(addr: SocketAddr, name: &str) -> u64 {
        match call(addr, Request::Stats { arg: None }) {
            Response::Stats(stats) => stats
                .iter()
                .find(|s| s.name_str() == name)
                .and_then(|s| s.value_str().parse().ok())
                .unwrap_or_else(|| panic!("no stat {name}")),
            other => panic!("unexpected {other:?}"),
        }
    }
}

/// Holds tokio's paused clock still while the test talks to real processes.
///
/// Under `#[tokio::test(start_paused = true)]` tokio moves the clock to the
/// next timer whenever the runtime has nothing to run — including while a
/// real memcached's reply is on its way, which would fire every operation
/// timeout at once. A running blocking task inhibits that auto-advance on a
/// current-thread runtime, so while this guard lives the clock moves only by
/// `tokio::time::advance`: backoffs and timeouts pass exactly when the test
/// says, without sleeping.
#[derive(Debug)]
pub struct HeldClock {
    _release: std::sync::mpsc::Sender<()>,
    _watchdog: Watchdog,
}

impl HeldClock {
    /// Holds the clock of the current (paused, current-thread) runtime. A
    /// test still running after 60 real seconds is ended as hung: tokio's
    /// own timeouts cannot fire while the clock is held.
    pub fn hold() -> HeldClock {
        let (release, wait) = std::sync::mpsc::channel::<()>();
        tokio::task::spawn_blocking(move || {
            // Returns when the sender is dropped.
            let _ = wait.recv();
        });
        HeldClock {
            _release: release,
            _watchdog: Watchdog::start(Duration::from_secs(60)),
        }
    }
}

/// Ends the whole test process if the test holding it runs past `limit` in
/// real time: a hang is a failure, not a stuck CI job.
#[derive(Debug)]
struct Watchdog(std::sync::Arc<std::sync::atomic::AtomicBool>);

impl Watchdog {
    fn start(limit: Duration) -> Watchdog {
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let seen = done.clone();
        let test = thread::current().name().unwrap_or("?").to_string();
        thread::spawn(move || {
            let deadline = Instant::now() + limit;
            while Instant::now() < deadline {
                if seen.load(std::sync::atomic::Ordering::Acquire) {
                    return;
                }
                thread::sleep(Duration::from_millis(50));
            }
            eprintln!("test {test} took more than {limit:?}: something hangs");
            std::process::exit(101);
        });
        Watchdog(done)
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::Release);
    }
}
