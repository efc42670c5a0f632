//! Migration mode: changing a fleet's layout (servers added or removed,
//! weights changed, modulo hashing replaced by ketama) without a cold cache.
//! mcrouter does this as a proxy (WarmUpRoute); here the client does it.
//!
//! A client built with the new cluster and
//! [`ClientBuilder::migrate_from`](crate::ClientBuilder::migrate_from) the
//! old one:
//! - **reads** the new placement; on a miss it reads the old placement
//!   (`mg <key> v f t`: value, flags and the remaining time to live), returns
//!   a hit from there, and backfills it into the new placement with `add`
//!   carrying the remaining TTL (an item without expiry stays without; `add`
//!   so a newer value written meanwhile is never overwritten). `get_multi`
//!   does the same per missing key; `gets` re-reads the new placement after
//!   the backfill, so its CAS unique is the new copy's.
//! - **writes** go to the new placement only;
//! - **deletes** go to both, so the old placement cannot bring a deleted key
//!   back; a failure to delete from the old placement fails the delete.
//!
//! A running client starts or ends a migration with
//! [`Client::set_migration`] (what a reloaded `cluster.toml` with or without
//! `migrate_from` does), operations already running finishing as they
//! began. [`Client::health`] counts what the old placement served
//! (`migration`).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use memgroup_proto::MetaFlag;
use memgroup_topology::ClusterSpec;

use crate::client::Client;
use crate::error::Error;
use crate::item::Item;
use crate::options::{Expiry, WriteOptions};

/// The old placement and what it served.
#[derive(Debug)]
pub(crate) struct Migration {
    /// A client of the old cluster (same settings as the new one's).
    pub(crate) old: Client,
    /// The old layout as it was given.
    given: ClusterSpec,
    counters: MigrationCounters,
}

#[derive(Debug, Default)]
struct MigrationCounters {
    old_hits: AtomicU64,
    old_misses: AtomicU64,
    old_errors: AtomicU64,
    backfills: AtomicU64,
    backfill_skipped: AtomicU64,
    backfill_failed: AtomicU64,
}

/// What migration mode did since the client started (see [`Client::health`]).
///
/// Migration mode: changing a fleet's layout (servers added or removed,
/// weights changed, modulo hashing replaced by ketama) without a cold cache.
/// mcrouter does this as a proxy (WarmUpRoute); here the client does it.
///
/// A client built with the new cluster and
/// [`ClientBuilder::migrate_from`](crate::ClientBuilder::migrate_from) the
/// old one:
/// - **reads** the new placement; on a miss it reads the old placement
///   (`mg <key> v f t`: value, flags and the remaining time to live), returns
///   a hit from there, and backfills it into the new placement with `add`
///   carrying the remaining TTL (an item without expiry stays without; `add`
///   so a newer value written meanwhile is never overwritten). `get_multi`
///   does the same per missing key; `gets` re-reads the new placement after
///   the backfill, so its CAS unique is the new copy's.
/// - **writes** go to the new placement only;
/// - **deletes** go to both, so the old placement cannot bring a deleted key
///   back; a failure to delete from the old placement fails the delete.
///
/// A running client starts or ends a migration with
/// [`Client::set_migration`]. [`Client::health`] counts what the old
/// placement served (`migration`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct MigrationStatus {
    /// Keys the new placement missed and the old one held.
    pub old_hits: u64,
    /// Keys missed by both.
    pub old_misses: u64,
    /// Reads of the old placement that failed (the read was then a miss).
    pub old_errors: u64,
    /// Hits from the old placement copied into the new one (`add` applied).
    pub backfills: u64,
    /// Backfills not applied: the new placement had the key by then (a newer
    /// write won), or the item was about to expire.
    pub backfill_skipped: u64,
    /// Backfills that failed (the read still returned the value).
    pub backfill_failed: u64,
}

impl Migration {
    pub(crate) fn new(old: Client, given: ClusterSpec) -> Migration {
        Migration {
            old,
            given,
            counters: MigrationCounters::default(),
        }
    }

    pub(crate) fn status(&self) -> MigrationStatus {
        let c = &self.counters;
        MigrationStatus {
            old_hits: c.old_hits.load(Relaxed),
            old_misses: c.old_misses.load(Relaxed),
            old_errors: c.old_errors.load(Relaxed),
            backfills: c.backfills.load(Relaxed),
            backfill_skipped: c.backfill_skipped.load(Relaxed),
            backfill_failed: c.backfill_failed.load(Relaxed),
        }
    }

    /// After the new placement missed `key`: reads the old placement and,
    /// on a hit, backfills the new one through `new`. Returns the item (a
    /// miss when the old placement misses or fails).
    pub(crate) async fn fill(&self, new: &Client, key: &[u8]) -> Option<Item> {
        let flags = [
            MetaFlag::ReturnValue,
            MetaFlag::ReturnFlags,
            MetaFlag::ReturnTtl,
        ];
        let Ok(found) = self.old.meta_get(key, &flags).await else {
            self.counters.old_errors.fetch_add(1, Relaxed);
            return None;
        };
        let Some(meta) = found else {
            self.counters.old_misses.fetch_add(1, Relaxed);
            return None;
        };
        self.counters.old_hits.fetch_add(1, Relaxed);
        let item = Item {
            value: meta.value.clone().unwrap_or_default(),
            flags: meta
                .flag_u64(b'f')
                .and_then(|f| u32::try_from(f).ok())
                .unwrap_or(0),
            cas: None,
        };
        match expiry(meta.ttl()) {
            None => {
                self.counters.backfill_skipped.fetch_add(1, Relaxed);
            }
            Some(expiry) => {
                let options = WriteOptions::new().expiry(expiry).flags(item.flags);
                let added = new.backfill(key, &item.value, options).await;
                let counter = match added {
                    Ok(outcome) if outcome.applied() => &self.counters.backfills,
                    Ok(_) => &self.counters.backfill_skipped,
                    Err(_) => &self.counters.backfill_failed,
                };
                counter.fetch_add(1, Relaxed);
            }
        }
        Some(item)
    }
}

/// The expiry carrying a remaining TTL (`t` of `mg`: -1 for no expiry):
/// `None` when the item is about to expire (nothing worth copying). Over 30
/// days it goes on the wire as a Unix time ([`Expiry::exptime`]).
fn expiry(ttl: Option<i64>) -> Option<Expiry> {
    match ttl {
        None | Some(-1) => Some(Expiry::Never),
        Some(t) if t <= 0 => None,
        Some(t) => Some(Expiry::secs(t.unsigned_abs())),
    }
}

impl Client {
    /// Starts migration mode on a running client (`Some(old)`: the layout
    /// the cache was filled under, as [`ClientBuilder::migrate_from`](crate::ClientBuilder::migrate_from)
    /// takes it), moves it to another old layout, or ends it (`None`).
    /// Operations already running finish as they began; new ones read
    /// through to the old placement from now on. The old placement follows
    /// the client's current layout for its key prefix and its settings
    /// (timeouts, TLS, logins). Giving the layout already in use changes
    /// nothing (its connections and counters stay). What a reloaded
    /// `cluster.toml` with `migrate_from` added, changed or removed does.
    pub fn set_migration(&self, old: Option<ClusterSpec>) -> Result<(), Error> {
        let Some(old) = old else {
            *self.inner.migration.write() = None;
            return Ok(());
        };
        if self.migration().is_some_and(|m| m.given == old) {
            return Ok(());
        }
        let current = self.topology().spec().clone();
        let client = self
            .inner
            .recipe
            .old_client_of(current, old.clone(), self.timeout())?;
        *self.inner.migration.write() = Some(Arc::new(Migration::new(client, old)));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn remaining_ttls_become_expiries() {
        assert_eq!(
            expiry(Some(-1)),
            Some(Expiry::Never),
            "no expiry stays none"
        );
        assert_eq!(expiry(None), Some(Expiry::Never));
        assert_eq!(expiry(Some(0)), None, "about to expire: not copied");
        assert_eq!(
            expiry(Some(40 * 86_400)),
            Some(Expiry::After(Duration::from_secs(40 * 86_400)))
        );
    }
}
