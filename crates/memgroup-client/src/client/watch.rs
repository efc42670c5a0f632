//! Live membership: applying a changed cluster description without a
//! restart. [`Client::watch_file`] re-reads a file (a `cluster.toml`, a
//! server list, …) every interval and applies it when its text changes;
//! [`Client::watch_dns`] re-resolves the servers' host names and reconnects
//! to a server whose addresses changed.
//!
//! Applying a topology keeps what can be kept: connections to servers that
//! stay are reused, their dead-host state carries over; a removed server's
//! connections finish the requests in flight (operations hold the snapshot
//! they started with) and close when the last one is done.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use memgroup_topology::ClusterSpec;
use tokio::task::JoinHandle;

use crate::client::Client;
use crate::error::{Error, ErrorKind};
use crate::events::Event;

/// A running watcher; it stops when dropped.
#[derive(Debug)]
pub struct Watcher {
    task: JoinHandle<()>,
    /// Wakes a file watcher before its interval ([`Watcher::reload_now`]).
    now: Arc<tokio::sync::Notify>,
}

impl Watcher {
    /// Re-reads at once instead of at the end of the interval (what an
    /// operator's SIGHUP asks for). Calls while a read is pending are one
    /// read, and a text already applied is not applied again, so a signal
    /// and the interval's own read of the same change apply it once. A DNS
    /// watcher ignores it.
    pub fn reload_now(&self) {
        self.now.notify_one();
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Client {
    /// Re-reads `path` every `interval` and, when its text changed, parses
    /// it with `parse` and applies the result ([`Client::set_topology`]). A
    /// file that cannot be read or parsed leaves the topology as it is and
    /// is reported as [`Event::TopologyRejected`] (with `parse`'s error). The
    /// topology crate's parsers fit `parse` (`ClusterSpec::parse_server_list`,
    /// `parse_evcache`, `parse_url`); the `memgroup` tool passes its
    /// `cluster.toml` reader.
    /// The first read happens after one interval (or
    /// [`Watcher::reload_now`]): build the client from the file's current
    /// text.
    ///
    /// Must be called within a tokio runtime.
    pub fn watch_file<E: std::fmt::Display>(
        &self,
        path: impl Into<PathBuf>,
        interval: Duration,
        parse: impl Fn(&str) -> Result<ClusterSpec, E> + Send + 'static,
    ) -> Watcher {
        let (client, path) = (self.clone(), path.into());
        let now = Arc::new(tokio::sync::Notify::new());
        let woken = now.clone();
        // Read now, not when the task first runs: a change made between
        // this call and then would otherwise pass for the text applied.
        let mut applied = std::fs::read_to_string(&path).ok();
        let task = tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = tokio::time::sleep(interval) => {}
                    () = woken.notified() => {}
                }
                let read = {
                    let path = path.clone();
                    tokio::task::spawn_blocking(move || std::fs::read_to_string(path)).await
                };
                let text = match read {
                    Ok(Ok(text)) => text,
                    Ok(Err(e)) => {
                        let error = Error::new(
                            ErrorKind::Config,
                            format!("cannot read {}", path.display()),
                        )
                        .with_source(e);
                        client.reject(error);
                        continue;
                    }
                    Err(_) => continue,
                };
                if applied.as_deref() == Some(&text) {
                    continue;
                }
                let applying = parse(&text)
                    .map_err(|e| Error::new(ErrorKind::Config, format!("{}: {e}", path.display())));
                if let Err(error) = applying.and_then(|spec| client.set_topology(spec)) {
                    client.reject(error);
                }
                // A bad text is reported once, not every interval.
                applied = Some(text);
            }
        });
        Watcher { task, now }
    }

    /// Resolves the servers' host names every `interval`; when a server's
    /// addresses change (a replaced host behind the same name), its
    /// connections are let go, so the next request connects to the new
    /// address. Routing is unchanged: it hashes the names, not the
    /// addresses.
    ///
    /// Must be called within a tokio runtime.
    pub fn watch_dns(&self, interval: Duration) -> Watcher {
        let client = self.clone();
        let task = tokio::spawn(async move {
            let mut known: Vec<(Arc<str>, BTreeSet<std::net::SocketAddr>)> = Vec::new();
            loop {
                let snap = client.snapshot();
                for i in 0..snap.server_count() {
                    let id = memgroup_topology::ServerId(i);
                    let name = snap.name(id).clone();
                    let Ok(found) = tokio::net::lookup_host(&*name).await else {
                        continue;
                    };
                    let now: BTreeSet<_> = found.collect();
                    match known.iter_mut().find(|(n, _)| *n == name) {
                        Some((_, before)) if *before != now => {
                            *before = now;
                            client.inner.pool.release_server(&snap, id);
                            #[cfg(feature = "tracing")]
                            tracing::info!(server = %name, "address changed; reconnecting");
                        }
                        Some(_) => {}
                        None => known.push((name, now)),
                    }
                }
                tokio::time::sleep(interval).await;
            }
        });
        Watcher {
            task,
            now: Arc::default(),
        }
    }

    /// Lets go of every connection to `server` (`host:port`, one of the
    /// cluster's): requests in flight finish on them, the next request
    /// connects anew (resolving the name again). What [`Client::watch_dns`]
    /// does when a name's addresses change; also for an operator who moved
    /// a server behind its name.
    pub fn reconnect(&self, server: &str) -> Result<(), Error> {
        let snap = self.snapshot();
        let id = snap.server_by_name(server)?;
        self.inner.pool.release_server(&snap, id);
        Ok(())
    }

    fn reject(&self, error: Error) {
        self.inner
            .pool
            .events()
            .emit(|| Event::TopologyRejected { error });
    }
}
