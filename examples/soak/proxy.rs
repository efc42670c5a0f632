//! `--proxy`: the load sent through a memgroup proxy (in this process, so
//! the memory and descriptor verdicts cover it) serving the soak's client,
//! by clients of the proxy's own speaking memcached's protocol to it as to
//! one memcached. What the proxy acknowledges is what its client
//! acknowledged under the same policy, so the same verdicts apply.

use std::time::Duration;

use memgroup::client::Client;
use memgroup::proxy::{Drained, Proxy, ProxyConfig};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// A running proxy, stopped by [`Running::stop`].
pub(crate) struct Running {
    stop: oneshot::Sender<()>,
    serving: JoinHandle<Drained>,
}

/// Starts a proxy for `client` on a free loopback port, and a client of it
/// with `connections` connections and `timeout` (longer than the proxy's
/// client's own: a request through it may wait out one server and fall
/// back to another).
pub(crate) async fn start(
    client: &Client,
    connections: usize,
    timeout: Duration,
) -> (Client, Running) {
    let config = ProxyConfig::listen(["127.0.0.1:0".parse().expect("address")]);
    let proxy = Proxy::bind(client.clone(), config)
        .await
        .expect("bind the proxy");
    let addr = proxy.local_addrs()[0];
    let (stop, stopped) = oneshot::channel::<()>();
    let serving = tokio::spawn(proxy.serve_until(
        async {
            let _ = stopped.await;
        },
        Duration::from_secs(10),
    ));
    let front = Client::builder()
        .servers(&addr.to_string())
        .expect("the proxy's address")
        .pool_size(connections)
        .timeout(timeout)
        // One server: never skip it for long after a failure.
        .backoff(Duration::from_millis(1), Duration::from_millis(10))
        .build()
        .expect("the proxy's client");
    (front, Running { stop, serving })
}

impl Running {
    /// Drains the proxy: what it answered while draining, and the
    /// connections it had to cut.
    pub(crate) async fn stop(self) -> Drained {
        let _ = self.stop.send(());
        self.serving.await.expect("the proxy's task")
    }
}
