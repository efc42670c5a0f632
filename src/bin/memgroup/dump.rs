//! Listing the keys a server holds (`lru_crawler metadump`), at most a bound
//! taken from the server's own item count: for `keys`, `route --compare
//! --from-cluster` and `warm`.

use std::collections::HashMap;
use std::time::Duration;

use memgroup::client::Client;
use memgroup::client::crawler::{DumpEntry, Listing};
use memgroup::topology::ClusterSpec;

use crate::exit::Failure;

/// `spec` for keys as a dump lists them, already wire keys: sanitising
/// them again would double-encode, and the key prefix would go in front
/// twice, so they are placed and sent as they are (`warm`, `route
/// --compare --from-cluster`).
pub(crate) fn as_dumped(mut spec: ClusterSpec) -> ClusterSpec {
    spec.settings.key_prefix = None;
    spec.with_sanitize_keys(false)
}

/// The most keys a metadump of a server may list: a dump cannot list far
/// more keys than the server says it holds (`curr_items`; the crawler can
/// list an item twice); one that does (a hostile or broken server) is
/// refused instead of filling memory.
pub(crate) fn bound(curr_items: Option<i64>) -> usize {
    let items = usize::try_from(curr_items.unwrap_or(0).max(0)).unwrap_or(usize::MAX);
    items.saturating_mul(2).saturating_add(10_000)
}

/// The dump bound of every server of a client, from its `stats`.
#[derive(Debug)]
pub(crate) struct Bounds(HashMap<String, usize>);

impl Bounds {
    /// Every server's bound, from one `stats` of each.
    pub(crate) async fn of(client: &Client) -> Result<Bounds, Failure> {
        Ok(Bounds(
            client
                .server_stats(None)
                .await?
                .into_iter()
                .map(|s| {
                    let items = s
                        .stats
                        .ok()
                        .and_then(|st| st.get("curr_items").and_then(|v| v.parse().ok()));
                    (s.server, bound(items))
                })
                .collect(),
        ))
    }

    /// The keys of `server` (`host:port`, one of `client`'s), at most its
    /// bound, waiting `timeout` but at least a second.
    pub(crate) async fn dump(
        &self,
        client: &Client,
        server: &str,
        timeout: Duration,
    ) -> Result<Vec<DumpEntry>, Failure> {
        let (max_keys, timeout) = self.limits(server, timeout);
        Ok(client.metadump(server, timeout, max_keys).await?)
    }

    /// The keys of `server` as [`dump`](Bounds::dump) lists them, checked
    /// against the server's count (`Client::list_keys`).
    pub(crate) async fn list(
        &self,
        client: &Client,
        server: &str,
        timeout: Duration,
    ) -> Result<Listing, Failure> {
        let (max_keys, timeout) = self.limits(server, timeout);
        Ok(client.list_keys(server, timeout, max_keys).await?)
    }

    fn limits(&self, server: &str, timeout: Duration) -> (usize, Duration) {
        let max_keys = self.0.get(server).copied().unwrap_or(bound(None));
        (max_keys, timeout.max(Duration::from_secs(1)))
    }
}

/// What a server's listing showed, without its keys.
#[derive(Debug, Clone)]
pub(crate) struct Checked {
    pub(crate) server: String,
    pub(crate) listed: usize,
    pub(crate) expected: u64,
    pub(crate) curr_items: (u64, u64),
    pub(crate) attempts: u32,
    pub(crate) method: &'static str,
    pub(crate) complete: bool,
}

impl Checked {
    pub(crate) fn of(listing: &Listing) -> Checked {
        Checked {
            server: listing.server.clone(),
            listed: listing.entries.len(),
            expected: listing.expected(),
            curr_items: listing.curr_items,
            attempts: listing.attempts,
            method: listing.method.name(),
            complete: listing.is_complete(),
        }
    }

    /// What a short listing missed, on one line.
    pub(crate) fn shortfall(&self) -> String {
        format!(
            "the listing of {} is short: {} keys listed, the server holds at least {} \
             (curr_items {} before, {} after; {} dumps by {})",
            self.server,
            self.listed,
            self.expected,
            self.curr_items.0,
            self.curr_items.1,
            self.attempts,
            self.method
        )
    }
}
