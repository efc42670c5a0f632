//! Listing the keys a server holds (`lru_crawler metadump`), at most a bound
//! taken from the server's own item count: for `keys`, `route --compare
//! --from-cluster` and `warm`.

use std::collections::HashMap;
use std::time::Duration;

use memgroup::client::Client;
use memgroup::client::crawler::DumpEntry;

use crate::exit::Failure;

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
                .stats(None)
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
        let max_keys = self.0.get(server).copied().unwrap_or(bound(None));
        let timeout = timeout.max(Duration::from_secs(1));
        Ok(client.metadump(server, timeout, max_keys).await?)
    }
}
