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
