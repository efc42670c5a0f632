//! The client's only clock. Every instant the pure topology is given comes
//! from [`now`] (tokio's clock, so tests under `tokio::time::pause` drive
//! backoffs and timeouts without sleeping); the wall clock is read only to
//! write an absolute memcached exptime.

/// The current time on tokio's clock, as the `std` instant the pure topology
/// takes. Under `tokio::time::pause` it moves only when the test moves it.
pub(crate) fn now() -> std::time::Instant {
    tokio::time::Instant::now().into_std()
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
