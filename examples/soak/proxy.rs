//! `--proxy`: the load sent through a memgroup proxy (in this process, so
//! the memory and descriptor verdicts cover it) serving the soak's client,
//! by text-protocol clients speaking to it as to one memcached
//! ([`crate::text`]): each load task with connections of its own, and
//! open-loop readers beside them. What the proxy acknowledges is what its
//! client acknowledged under the same policy, so the same verdicts apply.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::Duration;

use memgroup::client::Client;
use memgroup::proxy::{Drained, Proxy, ProxyConfig};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::TASKS;
use crate::text::{Conns, OpenLoop, open_loop};

/// Connections each load task uses in turn.
const CONNS_PER_TASK: usize = 4;
/// Open-loop reader connections, and the gets each sends a second.
const READERS: usize = 8;
const READ_RATE: u64 = 100;

/// A running proxy and its open-loop readers, stopped by [`Running::stop`].
pub(crate) struct Running {
    addr: SocketAddr,
    /// A text client's timeout: longer than the proxy's client's own (a
    /// request through it may wait out one server and fall back to another).
    timeout: Duration,
    stop: oneshot::Sender<()>,
    serving: JoinHandle<Drained>,
    readers: Vec<JoinHandle<()>>,
    open: Arc<OpenLoop>,
}

/// Starts a proxy for `client` on a free loopback port, and its open-loop
/// readers until `stop`.
pub(crate) async fn start(client: &Client, timeout: Duration, stop: Arc<AtomicBool>) -> Running {
    let config = ProxyConfig::listen(["127.0.0.1:0".parse().expect("address")]);
    let proxy = Proxy::bind(client.clone(), config)
        .await
        .expect("bind the proxy");
    let addr = proxy.local_addrs()[0];
    let (stop_serving, stopped) = oneshot::channel::<()>();
    let serving = tokio::spawn(proxy.serve_until(
        async {
            let _ = stopped.await;
        },
        Duration::from_secs(10),
    ));
    let (open, readers) = open_loop(addr, READERS, READ_RATE, &stop);
    Running {
        addr,
        timeout,
        stop: stop_serving,
        serving,
        readers,
        open,
    }
}

/// What the proxy's clients saw, and its drain.
pub(crate) struct Report {
    drained: Drained,
    open: Arc<OpenLoop>,
}

impl Running {
    /// A load task's text connections to the proxy.
    pub(crate) fn conns(&self) -> Conns {
        Conns::new(self.addr, CONNS_PER_TASK, self.timeout)
    }

    /// Once the load stopped: the readers' last replies, then the proxy's
    /// drain (what it answered while draining, the connections it cut).
    pub(crate) async fn stop(self) -> Report {
        for reader in self.readers {
            let _ = reader.await;
        }
        let _ = self.stop.send(());
        let drained = self.serving.await.expect("the proxy's task");
        Report {
            drained,
            open: self.open,
        }
    }
}

impl Report {
    /// Its rows of the soak's table.
    pub(crate) fn print(&self) {
        let open = &self.open;
        println!(
            "| through the proxy | {} text connections ({CONNS_PER_TASK} a load task); drained {} connections at the end, {} cut |",
            TASKS * CONNS_PER_TASK,
            self.drained.connections,
            self.drained.cut
        );
        println!(
            "| open-loop readers | {} connections x {}/s: {} gets sent, {} answered ({} hits), **{}** for another key, {} errors or lost with their connection; from the schedule p50 {:?}, p99 {:?}, p99.9 {:?} |",
            open.connections,
            open.rate,
            open.sent.load(Relaxed),
            open.answered.load(Relaxed),
            open.hits.load(Relaxed),
            open.wrong_key.load(Relaxed),
            open.errors.load(Relaxed),
            open.latency.quantile(0.5),
            open.latency.quantile(0.99),
            open.latency.quantile(0.999),
        );
    }

    /// What breaks a promise.
    pub(crate) fn violations(&self, violations: &mut Vec<String>) {
        if self.drained.cut > 0 {
            violations.push("the proxy cut connections with requests unanswered".into());
        }
        let wrong = self.open.wrong_key.load(Relaxed);
        if wrong > 0 {
            violations.push(format!("{wrong} open-loop replies for another key"));
        }
        if self.open.answered.load(Relaxed) == 0 {
            violations.push("the open-loop readers got no reply".into());
        }
    }
}
