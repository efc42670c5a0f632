//! A TCP relay in front of a real memcached that can hold one connection's
//! requests: a fault injector for one client's path to a server stalling
//! while another client's goes through (a stalled socket, not a stand-in
//! for memcached: every byte is served by the real server).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;

/// The relay: `addr` to give a client; the first connection accepted is
/// the one [`Relay::release`] lets through while it was held.
pub struct Relay {
    addr: String,
    held: Arc<(Mutex<bool>, Condvar)>,
}

impl Relay {
    /// A relay to `to` whose first connection's requests are held (read
    /// from the client, not forwarded) until [`Relay::release`].
    pub fn holding_first(to: SocketAddr) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let held = Arc::new((Mutex::new(true), Condvar::new()));
        let gate = held.clone();
        thread::spawn(move || {
            for (i, client) in listener.incoming().enumerate() {
                let Ok(client) = client else { return };
                let Ok(server) = TcpStream::connect(to) else {
                    return;
                };
                let gate = (i == 0).then(|| gate.clone());
                let (client_in, server_out) =
                    (client.try_clone().unwrap(), server.try_clone().unwrap());
                thread::spawn(move || pipe(client_in, server_out, gate.as_deref()));
                thread::spawn(move || pipe(server, client, None));
            }
        });
        Relay { addr, held }
    }

    /// `host:port` to connect to.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Lets the held connection's requests through, in the order sent.
    pub fn release(&self) {
        *self.held.0.lock().unwrap() = false;
        self.held.1.notify_all();
    }
}

/// Copies `from` to `to`, waiting at `gate` while it is held.
fn pipe(mut from: TcpStream, mut to: TcpStream, gate: Option<&(Mutex<bool>, Condvar)>) {
    let mut buf = [0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if let Some(gate) = gate {
            let mut held = gate.0.lock().unwrap();
            while *held {
                held = gate.1.wait(held).unwrap();
            }
        }
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = to.shutdown(std::net::Shutdown::Write);
}

/// A relay to a real memcached that can be switched off: while off, its
/// port refuses connections and the ones it carried are closed, so one
/// client finds the server unreachable (nothing it sends gets through)
/// while others reach it straight.
pub struct Switch {
    addr: SocketAddr,
    to: SocketAddr,
    state: Arc<Mutex<SwitchState>>,
    accepting: Option<thread::JoinHandle<()>>,
}

#[derive(Default)]
struct SwitchState {
    off: bool,
    carried: Vec<TcpStream>,
}

impl Switch {
    /// A relay to `to`, on.
    pub fn to(to: SocketAddr) -> Switch {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(Mutex::new(SwitchState::default()));
        let accepting = Some(accept(listener, to, state.clone()));
        Switch {
            addr,
            to,
            state,
            accepting,
        }
    }

    /// `host:port` to connect to.
    pub fn addr(&self) -> String {
        self.addr.to_string()
    }

    /// Refuses new connections and closes the ones carried.
    pub fn off(&mut self) {
        self.state.lock().unwrap().off = true;
        // Wakes the accept loop, which sees the switch off and closes the
        // listener.
        let _ = TcpStream::connect(self.addr);
        if let Some(accepting) = self.accepting.take() {
            accepting.join().unwrap();
        }
        for stream in self.state.lock().unwrap().carried.drain(..) {
            let _ = stream.shutdown(std::net::Shutdown::Both);
        }
    }

    /// Accepts connections again, on the same port.
    pub fn on(&mut self) {
        self.state.lock().unwrap().off = false;
        // (std sets SO_REUSEADDR: the port is free again at once.)
        let listener = TcpListener::bind(self.addr).unwrap();
        self.accepting = Some(accept(listener, self.to, self.state.clone()));
    }
}

/// Relays each connection `listener` accepts to `to`, until the switch is
/// off.
fn accept(
    listener: TcpListener,
    to: SocketAddr,
    state: Arc<Mutex<SwitchState>>,
) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        for client in listener.incoming() {
            let Ok(client) = client else { return };
            let mut state = state.lock().unwrap();
            if state.off {
                return;
            }
            let Ok(server) = TcpStream::connect(to) else {
                return;
            };
            state.carried.push(client.try_clone().unwrap());
            state.carried.push(server.try_clone().unwrap());
            let (client_in, server_out) =
                (client.try_clone().unwrap(), server.try_clone().unwrap());
            thread::spawn(move || pipe(client_in, server_out, None));
            thread::spawn(move || pipe(server, client, None));
        }
    })
}
