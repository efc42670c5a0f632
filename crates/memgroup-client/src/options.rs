//! What every write takes: an [`Expiry`] and [`WriteOptions`], and the one
//! conversion of an expiry to memcached's `exptime` on the wire.
//!
//! memcached reads an `exptime` of at most 30 days (2,592,000 s) as seconds
//! from now and anything larger as a Unix time, so a relative "40 days" sent
//! as `3456000` would mean 1970-02-10: already expired. [`Expiry`] says what
//! is meant and [`Expiry::exptime`] writes it: a relative expiry over 30
//! days becomes the absolute time it ends at, read from the local wall
//! clock. A client whose clock runs ahead or behind the servers' by `s`
//! seconds makes those long expiries end `s` seconds early or late; short
//! ones (30 days or less) are relative and unaffected.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::clock::unix_now;
use crate::error::{Error, ErrorKind};

/// The longest `exptime` memcached reads as relative seconds.
pub const MAX_RELATIVE_EXPTIME: u32 = 30 * 24 * 60 * 60;

/// When an item expires.
///
/// memcached reads an `exptime` over 30 days as a Unix time, so a relative
/// expiry longer than that is sent as the time it ends at, by the local
/// wall clock: a client clock `s` seconds ahead of the servers' makes those
/// items expire `s` seconds early (behind, late). Shorter expiries are sent
/// relative and do not depend on the clock.
///
/// A bare number of seconds converts to [`Expiry::After`] (`0` to
/// [`Expiry::Never`], as memcached reads it), a [`Duration`] to `After`, a
/// [`SystemTime`] to [`Expiry::At`].
///
/// ```
/// use std::time::Duration;
/// use memgroup_client::Expiry;
///
/// assert_eq!(Expiry::from(300), Expiry::After(Duration::from_secs(300)));
/// assert_eq!(Expiry::from(0), Expiry::Never);
/// // 40 days is sent as the Unix time it ends at, not as 3456000.
/// let exptime = Expiry::After(Duration::from_secs(40 * 86_400)).exptime().unwrap();
/// assert!(exptime > 1_700_000_000);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Expiry {
    /// Never expires (it may still be evicted).
    #[default]
    Never,
    /// Expires this long from now; rounded up to whole seconds, and never to
    /// 0 (which would mean "never").
    After(Duration),
    /// Expires at this time (by the local clock); a time not in the future
    /// is refused with [`ErrorKind::InvalidArgument`].
    At(SystemTime),
    /// memcached's `exptime` as a client of the protocol sends it: seconds
    /// up to 30 days, a Unix time beyond, 0 for never; a negative one means
    /// "already expired" (sent as memcached treats it: a time long past).
    /// What a proxy forwards.
    Exptime(i32),
}

impl Expiry {
    /// Seconds from now.
    pub fn secs(seconds: u64) -> Expiry {
        if seconds == 0 {
            Expiry::Never
        } else {
            Expiry::After(Duration::from_secs(seconds))
        }
    }

    /// The `exptime` memcached reads as meant, at the current wall-clock
    /// time (see [`Expiry`] on clock skew).
    pub fn exptime(self) -> Result<u32, Error> {
        self.exptime_with(unix_now)
    }

    /// The `exptime` when the Unix time is `now` (seconds).
    #[cfg(test)]
    pub(crate) fn exptime_at(self, now: u64) -> Result<u32, Error> {
        self.exptime_with(|| now)
    }

    /// The `exptime`, asking `now` for the Unix time (seconds) only when it
    /// is absolute: a relative one (the usual case) reads no clock.
    fn exptime_with(self, now: impl FnOnce() -> u64) -> Result<u32, Error> {
        // memcached parses exptime as a signed 32-bit number.
        let absolute = |at: u64| {
            i32::try_from(at).map(|at| at as u32).map_err(|_| {
                Error::new(
                    ErrorKind::InvalidArgument,
                    format!("expiry at Unix time {at} is past what memcached can hold (2038)"),
                )
            })
        };
        match self {
            Expiry::Never => Ok(0),
            // memcached reads a negative exptime as 30 days and a second: a
            // Unix time in 1970, already past.
            Expiry::Exptime(n) if n < 0 => Ok(MAX_RELATIVE_EXPTIME + 1),
            Expiry::Exptime(n) => Ok(n as u32),
            Expiry::After(after) => {
                // Round up: 1.2 s lives 2 s, 1 ms lives 1 s, never "0 = never".
                let seconds = after
                    .as_secs()
                    .saturating_add(u64::from(after.subsec_nanos() > 0))
                    .max(1);
                if seconds <= u64::from(MAX_RELATIVE_EXPTIME) {
                    Ok(seconds as u32)
                } else {
                    absolute(now().saturating_add(seconds))
                }
            }
            Expiry::At(at) => {
                let now = now();
                let since = at.duration_since(UNIX_EPOCH).unwrap_or_default();
                let seconds = since
                    .as_secs()
                    .saturating_add(u64::from(since.subsec_nanos() > 0));
                if seconds <= now {
                    return Err(Error::new(
                        ErrorKind::InvalidArgument,
                        format!("expiry at Unix time {seconds} is not in the future (now {now})"),
                    ));
                }
                absolute(seconds)
            }
        }
    }
}

impl From<u32> for Expiry {
    fn from(seconds: u32) -> Expiry {
        Expiry::secs(u64::from(seconds))
    }
}

impl From<Duration> for Expiry {
    fn from(after: Duration) -> Expiry {
        Expiry::After(after)
    }
}

impl From<SystemTime> for Expiry {
    fn from(at: SystemTime) -> Expiry {
        Expiry::At(at)
    }
}

/// What a write carries besides its key and value: the expiry and the
/// 32-bit client flags. Anything that converts to an [`Expiry`] converts to
/// options with that expiry and flags 0, so `client.set(k, v, 300)` reads
/// as it always has.
///
/// ```
/// use std::time::Duration;
/// use memgroup_client::{Expiry, WriteOptions};
///
/// let options = WriteOptions::new().expiry(Duration::from_secs(600)).flags(2);
/// assert_eq!(options.flags, 2);
/// assert_eq!(WriteOptions::from(60).expiry, Expiry::After(Duration::from_secs(60)));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct WriteOptions {
    /// When the item expires.
    pub expiry: Expiry,
    /// The client flags stored with the value.
    pub flags: u32,
}

impl WriteOptions {
    /// No expiry, flags 0.
    pub fn new() -> WriteOptions {
        WriteOptions::default()
    }

    /// With this expiry.
    pub fn expiry(mut self, expiry: impl Into<Expiry>) -> WriteOptions {
        self.expiry = expiry.into();
        self
    }

    /// With these client flags.
    pub fn flags(mut self, flags: u32) -> WriteOptions {
        self.flags = flags;
        self
    }
}

impl<E: Into<Expiry>> From<E> for WriteOptions {
    fn from(expiry: E) -> WriteOptions {
        WriteOptions::new().expiry(expiry)
    }
}

/// What the cache warmer's write does with a copy already in a target group
/// ([`Client::add_or_set`](crate::Client::add_or_set)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IfPresent {
    /// Leave it (`add`): a newer value written meanwhile is never replaced.
    Keep,
    /// Replace it (`set`).
    Overwrite,
}

/// When a write replicated to several groups returns
/// ([`ClientBuilder::write_wait`](crate::ClientBuilder::write_wait)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum WriteWait {
    /// Once the write policy is decided: met (with the local zone's
    /// read-write groups and the arbiter among the groups that answered, so
    /// a `set` then a local `get`, or a `gets`/`cas`/`add` the arbiter
    /// decides, sees the new value), or out of reach. The other groups
    /// finish in the background within the timeout; a group that misses
    /// queues a repair, and [`WriteOutcome::pending`](crate::WriteOutcome::pending)
    /// names the groups still outstanding at return. While 4,096 writes are
    /// already finishing in the background (a group slow but not down), a
    /// write waits for every group instead, so their memory stays bounded.
    #[default]
    Policy,
    /// Once every group has answered or timed out (the tool, whose exit code
    /// reports every group).
    AllGroups,
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_800_000_000;

    #[test]
    fn relative_expiries_round_up_and_never_reach_zero() {
        let after = |d: Duration| Expiry::After(d).exptime_at(NOW).unwrap();
        assert_eq!(after(Duration::from_millis(1)), 1);
        assert_eq!(after(Duration::ZERO), 1, "0 would mean never");
        assert_eq!(after(Duration::from_millis(1200)), 2);
        assert_eq!(after(Duration::from_secs(300)), 300);
        assert_eq!(Expiry::Never.exptime_at(NOW).unwrap(), 0);
        assert_eq!(Expiry::from(0).exptime_at(NOW).unwrap(), 0);
    }

    #[test]
    fn over_thirty_days_is_sent_as_a_unix_time() {
        let exactly = Duration::from_secs(u64::from(MAX_RELATIVE_EXPTIME));
        assert_eq!(
            Expiry::After(exactly).exptime_at(NOW).unwrap(),
            MAX_RELATIVE_EXPTIME
        );
        let forty_days = Expiry::After(Duration::from_secs(40 * 86_400));
        assert_eq!(
            forty_days.exptime_at(NOW).unwrap(),
            (NOW + 40 * 86_400) as u32
        );
        assert_eq!(
            Expiry::from(MAX_RELATIVE_EXPTIME + 1)
                .exptime_at(NOW)
                .unwrap(),
            (NOW + u64::from(MAX_RELATIVE_EXPTIME) + 1) as u32
        );
        let too_far = Expiry::After(Duration::from_secs(i32::MAX as u64));
        assert!(too_far.exptime_at(NOW).unwrap_err().kind() == ErrorKind::InvalidArgument);
    }

    #[test]
    fn an_absolute_expiry_must_be_in_the_future() {
        let at = |secs: u64| Expiry::At(UNIX_EPOCH + Duration::from_secs(secs)).exptime_at(NOW);
        assert_eq!(at(NOW + 10).unwrap(), (NOW + 10) as u32);
        let past = at(NOW).unwrap_err();
        assert!(past.kind() == ErrorKind::InvalidArgument, "{past}");
        assert!(past.to_string().contains("not in the future"), "{past}");
        assert!(at(NOW - 100).is_err());
        assert!(Expiry::At(UNIX_EPOCH).exptime_at(NOW).is_err());
    }
}
