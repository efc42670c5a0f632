//! A serving proxy changed without a restart ([`ProxyControl`]): the
//! addresses it listens on, and the certificate new TLS handshakes present.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::Shared;

/// The proxy's listeners: bound, then accepting once it serves.
#[derive(Debug, Default)]
pub(crate) struct Listening {
    serving: bool,
    entries: Vec<Entry>,
}

/// One listener: the address it was asked for (port 0 included) and the
/// one it got.
#[derive(Debug)]
struct Entry {
    asked: SocketAddr,
    local: SocketAddr,
    state: State,
}

#[derive(Debug)]
enum State {
    Bound(TcpListener),
    /// The accept task, and how to tell it to stop (see [`crate::accept`]).
    Accepting(JoinHandle<()>, Arc<Notify>),
}

/// Starts accepting on `listener`.
fn accepting(listener: TcpListener, shared: &Arc<Shared>) -> State {
    let stop = Arc::new(Notify::new());
    let task = tokio::spawn(crate::accept(listener, shared.clone(), stop.clone()));
    State::Accepting(task, stop)
}

/// Binds `addr` (an error names it).
pub(crate) async fn bind(addr: SocketAddr) -> std::io::Result<(SocketAddr, TcpListener)> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|e| std::io::Error::new(e.kind(), format!("cannot listen on {addr}: {e}")))?;
    Ok((listener.local_addr()?, listener))
}

impl Listening {
    /// Listeners bound before the proxy serves.
    pub(crate) fn bound(listeners: Vec<(SocketAddr, SocketAddr, TcpListener)>) -> Listening {
        let entries = listeners
            .into_iter()
            .map(|(asked, local, listener)| Entry {
                asked,
                local,
                state: State::Bound(listener),
            })
            .collect();
        Listening {
            serving: false,
            entries,
        }
    }

    /// The addresses listened on.
    pub(crate) fn local_addrs(&self) -> Vec<SocketAddr> {
        self.entries.iter().map(|e| e.local).collect()
    }

    /// Starts accepting on every listener.
    pub(crate) fn serve(&mut self, shared: &Arc<Shared>) {
        self.serving = true;
        for entry in std::mem::take(&mut self.entries) {
            let state = match entry.state {
                State::Bound(listener) => accepting(listener, shared),
                running @ State::Accepting(..) => running,
            };
            self.entries.push(Entry { state, ..entry });
        }
    }

    /// Stops accepting everywhere: the accept tasks to await (their
    /// listeners close as they end).
    pub(crate) fn close(&mut self) -> Vec<JoinHandle<()>> {
        self.serving = false;
        self.entries
            .drain(..)
            .filter_map(|e| match e.state {
                State::Accepting(task, _) => {
                    task.abort();
                    Some(task)
                }
                State::Bound(_) => None,
            })
            .collect()
    }
}

/// Changes a proxy while it serves ([`Proxy::control`](crate::Proxy::control)):
/// cloned freely, each clone acting on the same proxy.
#[derive(Debug, Clone)]
pub struct ProxyControl {
    pub(crate) shared: Arc<Shared>,
}

impl ProxyControl {
    /// Listens on exactly `addrs` from now on: addresses not listened on
    /// yet open, the ones left out are closed by the time this returns
    /// (their connections stay and are served to the end), the others are
    /// untouched. Returns the
    /// addresses listened on (the ports chosen for port 0).
    ///
    /// # Errors
    ///
    /// The first address that cannot be bound, by name; then nothing
    /// changed.
    pub async fn listen(&self, addrs: &[SocketAddr]) -> std::io::Result<Vec<SocketAddr>> {
        let known: Vec<SocketAddr> = self
            .shared
            .listening
            .lock()
            .entries
            .iter()
            .map(|e| e.asked)
            .collect();
        let mut opened = Vec::new();
        for &addr in addrs.iter().filter(|a| !known.contains(a)) {
            let (local, listener) = bind(addr).await?;
            opened.push((addr, local, listener));
        }
        let (now, left) = {
            let mut listening = self.shared.listening.lock();
            let (kept, left): (Vec<Entry>, Vec<Entry>) = std::mem::take(&mut listening.entries)
                .into_iter()
                .partition(|entry| addrs.contains(&entry.asked));
            listening.entries = kept;
            let serving = listening.serving;
            for (asked, local, listener) in opened {
                let state = if serving {
                    accepting(listener, &self.shared)
                } else {
                    State::Bound(listener)
                };
                listening.entries.push(Entry {
                    asked,
                    local,
                    state,
                });
            }
            (listening.local_addrs(), left)
        };
        // Closed when this returns: their accept tasks (which own them)
        // took what the kernel had completed, and ended.
        for entry in left {
            if let State::Accepting(task, stop) = entry.state {
                stop.notify_one();
                let _ = task.await;
            }
        }
        Ok(now)
    }

    /// The addresses listened on.
    pub fn local_addrs(&self) -> Vec<SocketAddr> {
        self.shared.listening.lock().local_addrs()
    }

    /// New TLS handshakes present `tls` (connections already open keep
    /// theirs): a renewed certificate served without a restart. A proxy
    /// serving plaintext stays so: returns `false` and changes nothing.
    #[cfg(feature = "tls")]
    pub fn set_tls(&self, tls: crate::ServerTls) -> bool {
        let mut current = self.shared.tls.write();
        if current.is_none() {
            return false;
        }
        *current = Some(tls);
        true
    }

    /// Records the proxy's `stats` and its client's status through the
    /// `metrics` facade (feature `metrics`; see
    /// [`ProxyStats`](crate::ProxyStats) for the names): call it every few
    /// seconds, or before each scrape, for the exporter the process
    /// installed. The latency of each operation is the client's own
    /// `db.client.operation.duration`.
    #[cfg(feature = "metrics")]
    pub fn record_metrics(&self) {
        self.shared.stats.record(&self.shared.client.health());
    }
}
