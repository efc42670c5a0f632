//! The client's only clock. Every instant the pure topology is given comes
//! from [`now`] (tokio's clock, so tests under `tokio::time::pause` drive
//! backoffs and timeouts without sleeping); the wall clock is read only to
//! write an absolute memcached exptime.

/// The current time on tokio's clock, as the `std` instant the pure topology
/// takes. Under `tokio::time::pause` it moves only when the test moves it.
pub(crate) fn now() -> std::time::Instant {
    tokio::time::Instant::now().into_std()
}

/// When a request started at `start` with `timeout` must be answered: a
/// timeout too long to add (`Duration::MAX`, for "wait as long as it
/// takes") is about thirty years, as tokio's own timers take it.
pub(crate) fn deadline(
    start: std::time::Instant,
    timeout: std::time::Duration,
) -> std::time::Instant {
    const FAR: std::time::Duration = std::time::Duration::from_secs(86_400 * 365 * 30);
    start.checked_add(timeout.min(FAR)).unwrap_or(start)
}

/// `at` as nanoseconds since the first time this was asked (0 for anything
/// earlier): an instant an atomic can hold.
pub(crate) fn nanos(at: std::time::Instant) -> u64 {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    let start = *START.get_or_init(|| at);
    u64::try_from(at.saturating_duration_since(start).as_nanos()).unwrap_or(u64::MAX)
}

/// The wall clock as a Unix time in seconds: only to write an absolute
/// memcached exptime (a TTL beyond 30 days), never to measure time.
pub(crate) fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The wall clock in milliseconds since the Unix epoch: only to stamp what
/// a write stores (EVCache's envelope's `createTime`).
pub(crate) fn unix_millis() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    /// Any timeout makes a deadline: one too long to add is far away, not a
    /// panic.
    #[test]
    fn every_timeout_has_a_deadline() {
        let start = super::now();
        assert_eq!(
            super::deadline(start, Duration::from_millis(5)),
            start + Duration::from_millis(5)
        );
        let far = super::deadline(start, Duration::MAX);
        assert!(far > start + Duration::from_secs(86_400 * 365));
    }
}
