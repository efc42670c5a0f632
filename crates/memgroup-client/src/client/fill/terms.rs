//! What `get_or_fill` takes and gives: the fill's terms ([`Fill`]) and
//! the value with its freshness ([`Filled`]).

use std::time::Duration;

use crate::item::Item;
use crate::options::Expiry;

/// How [`Client::get_or_fill`](crate::Client::get_or_fill) fills: the value's expiry and the lease's
/// terms. `From` an expiry (`300`, a [`Duration`], an [`Expiry`]) with the
/// defaults for the rest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Fill {
    /// The filled value's expiry.
    pub ttl: Expiry,
    /// How long a won lease lives (default 30 s): a filler that dies holds
    /// the key that long at most before another caller may win.
    pub lease: Duration,
    /// How long a caller that lost the lease waits for the winner's value
    /// (default 10 s), after which it fails with [`ErrorKind::Timeout`](crate::ErrorKind::Timeout).
    pub wait: Duration,
    /// Refresh early (default off): a value whose remaining TTL fell below
    /// this is refilled by one caller, the others served it meanwhile.
    pub refresh_before: Option<Duration>,
    /// Serve a stale value while another caller refills it (default on);
    /// off, callers wait for the new value.
    pub stale_ok: bool,
}

impl Fill {
    /// A fill whose value expires as `ttl` says, with the default lease.
    pub fn new(ttl: impl Into<Expiry>) -> Fill {
        Fill {
            ttl: ttl.into(),
            lease: Duration::from_secs(30),
            wait: Duration::from_secs(10),
            refresh_before: None,
            stale_ok: true,
        }
    }

    /// Sets [`Fill::lease`].
    pub fn lease(mut self, lease: Duration) -> Fill {
        self.lease = lease;
        self
    }

    /// Sets [`Fill::wait`].
    pub fn wait(mut self, wait: Duration) -> Fill {
        self.wait = wait;
        self
    }

    /// Sets [`Fill::refresh_before`].
    pub fn refresh_before(mut self, before: Duration) -> Fill {
        self.refresh_before = Some(before);
        self
    }

    /// Sets [`Fill::stale_ok`].
    pub fn stale_ok(mut self, ok: bool) -> Fill {
        self.stale_ok = ok;
        self
    }
}

impl<E: Into<Expiry>> From<E> for Fill {
    fn from(ttl: E) -> Fill {
        Fill::new(ttl)
    }
}

/// What [`Client::get_or_fill`](crate::Client::get_or_fill) returned, and how fresh it is.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Filled {
    /// The value (client flags as stored; a filled value has flags 0).
    pub item: Item,
    /// Where it came from.
    pub freshness: Freshness,
}

/// Where a [`Filled`] value came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Freshness {
    /// Read from the cache, as fresh as the cache is.
    Cached,
    /// This call ran the fill.
    Filled,
    /// Another caller's fill (in this process or another), read once done.
    Waited,
    /// A stale value (invalidated, or due for refresh), served while
    /// another caller refills it.
    Stale,
}
