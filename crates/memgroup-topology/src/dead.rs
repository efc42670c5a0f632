//! Dead-host tracking with Whalin's doubling backoff, on caller-supplied time.

use std::time::{Duration, Instant};

use crate::{ServerId, Topology};

/// Which servers are dead, and until when.
///
/// Whalin's `SockIOPool` rules: a connect or I/O failure marks the server dead for the
/// backoff; the backoff starts at [`Settings::backoff_initial`](crate::Settings) (1 s) and
/// doubles with each consecutive failure up to
/// [`Settings::backoff_max`](crate::Settings) (10 minutes); a success resets it. While
/// dead a server is skipped by every selection. At `dead_until` it becomes eligible again,
/// and the next failure doubles the backoff.
///
/// Failures reported while the server is already dead (the other requests that were in
/// flight on the same broken connections) do not escalate the backoff: as in Whalin, one
/// outage observed once per eligibility window counts once.
///
/// Nothing here reads the clock: every method takes `now`, and
/// [`DeadHosts::next_deadline`] says when the next server becomes eligible again.
///
/// A `DeadHosts` belongs to one [`Topology`] (made by [`DeadHosts::new`] or
/// [`DeadHosts::carry_over`]); its [`ServerId`]s are that topology's. Used with another
/// topology its answers are meaningless but nothing panics: a caller racing a topology
/// swap gets at worst one stale answer.
///
/// ```
/// use std::time::{Duration, Instant};
/// use memgroup_topology::{ClusterSpec, DeadHosts, ServerId, Topology};
/// let topology = Topology::new(ClusterSpec::parse_server_list("h1:1,h2:1")?)?;
/// let mut dead = DeadHosts::new(&topology);
/// let t0 = Instant::now(); // the caller's clock; tests use a simulated one
/// let s = ServerId(0);
/// assert_eq!(dead.record_failure(s, t0), t0 + Duration::from_secs(1));
/// assert!(dead.is_dead(s, t0 + Duration::from_millis(999)));
/// assert_eq!(dead.next_deadline(t0), Some(t0 + Duration::from_secs(1)));
/// let t1 = t0 + Duration::from_secs(1); // eligible again; the retry fails too
/// assert_eq!(dead.record_failure(s, t1), t1 + Duration::from_secs(2));
/// dead.record_success(s);
/// assert!(!dead.is_dead(s, t1));
/// # Ok::<(), memgroup_topology::TopologyError>(())
/// ```
#[derive(Debug, Clone)]
pub struct DeadHosts {
    hosts: Box<[HostState]>,
    initial: Duration,
    max: Duration,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct HostState {
    /// Consecutive failures since the last success.
    failures: u32,
    /// End of the current (or last) dead period.
    dead_until: Option<Instant>,
}

impl DeadHosts {
    /// Every server of `topology` alive, with its backoff settings.
    #[must_use]
    pub fn new(topology: &Topology) -> DeadHosts {
        let settings = topology.settings();
        DeadHosts {
            hosts: vec![HostState::default(); topology.servers().len()].into(),
            initial: settings.backoff_initial,
            max: settings.backoff_max,
        }
    }

    /// The number of servers tracked (that of the topology it was made for).
    #[must_use]
    pub fn len(&self) -> usize {
        self.hosts.len()
    }

    /// Whether no server is tracked (never, for a valid topology).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.hosts.is_empty()
    }

    /// Whether every server is alive with no failure on record (as
    /// [`DeadHosts::new`] made them): any such record answers every query
    /// alike.
    #[must_use]
    pub fn is_clear(&self) -> bool {
        self.hosts.iter().all(|h| *h == HostState::default())
    }

    /// Whether `server` is dead at `now` (`now < dead_until`). Unknown servers are alive.
    #[must_use]
    #[inline]
    pub fn is_dead(&self, server: ServerId, now: Instant) -> bool {
        self.hosts
            .get(server.0)
            .and_then(|h| h.dead_until)
            .is_some_and(|until| now < until)
    }

    /// The end of `server`'s current or last dead period, if it failed since its last
    /// success.
    #[must_use]
    pub fn dead_until(&self, server: ServerId) -> Option<Instant> {
        self.hosts.get(server.0).and_then(|h| h.dead_until)
    }

    /// `server`'s consecutive failures since its last success.
    #[must_use]
    pub fn failures(&self, server: ServerId) -> u32 {
        self.hosts.get(server.0).map_or(0, |h| h.failures)
    }

    /// The backoff after `failures` consecutive failures: `initial · 2^(failures−1)`,
    /// capped at the maximum (zero for zero failures).
    #[must_use]
    pub fn backoff(&self, failures: u32) -> Duration {
        if failures == 0 {
            return Duration::ZERO;
        }
        let factor = 1u32.checked_shl(failures - 1).unwrap_or(u32::MAX);
        self.initial.saturating_mul(factor).min(self.max)
    }

    /// Records a connect or I/O failure of `server` at `now` and returns the end of its
    /// dead period. A failure while already dead changes nothing. An id beyond this state's
    /// servers (one from a topology that was just replaced) is ignored and `now` returned.
    pub fn record_failure(&mut self, server: ServerId, now: Instant) -> Instant {
        let Some(host) = self.hosts.get(server.0).copied() else {
            return now;
        };
        if let Some(until) = host.dead_until.filter(|&until| now < until) {
            return until;
        }
        let failures = host.failures.saturating_add(1);
        let until = add_saturating(now, self.backoff(failures));
        self.hosts[server.0] = HostState {
            failures,
            dead_until: Some(until),
        };
        until
    }

    /// Records a success of `server`: alive, backoff reset. Unknown ids are ignored.
    pub fn record_success(&mut self, server: ServerId) {
        if let Some(host) = self.hosts.get_mut(server.0) {
            *host = HostState::default();
        }
    }

    /// When the caller next needs to look: the earliest `dead_until` after `now`, i.e. when
    /// a dead server becomes eligible again. `None` when no server is dead.
    #[must_use]
    pub fn next_deadline(&self, now: Instant) -> Option<Instant> {
        self.hosts
            .iter()
            .filter_map(|h| h.dead_until)
            .filter(|&until| until > now)
            .min()
    }

    /// The servers dead at `now`.
    pub fn dead_servers(&self, now: Instant) -> impl Iterator<Item = ServerId> + '_ {
        (0..self.hosts.len())
            .map(ServerId)
            .filter(move |&s| self.is_dead(s, now))
    }

    /// The state for `new`, a topology replacing `old` (for which `self` was kept): servers
    /// present in both (by address) keep their state, new ones start alive, and the backoff
    /// settings are `new`'s.
    #[must_use]
    pub fn carry_over(&self, old: &Topology, new: &Topology) -> DeadHosts {
        let mut next = DeadHosts::new(new);
        for (state, addr) in next.hosts.iter_mut().zip(new.servers()) {
            if let Some(previous) = old.server_id(addr).and_then(|id| self.hosts.get(id.0)) {
                *state = *previous;
            }
        }
        next
    }
}

/// `now + d`, shortened until it fits the platform's `Instant`.
fn add_saturating(now: Instant, mut d: Duration) -> Instant {
    loop {
        if let Some(t) = now.checked_add(d) {
            return t;
        }
        d /= 2;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ClusterSpec;

    #[test]
    fn a_failure_marks_a_server_dead_until_its_backoff_ends() {
        let topology =
            Topology::new(ClusterSpec::parse_server_list("a:1,b:1,c:1").unwrap()).unwrap();
        let mut dead = DeadHosts::new(&topology);
        assert_eq!(dead.len(), 3);
        assert!(!dead.is_empty());
        let (s, now) = (ServerId(1), Instant::now());
        assert_eq!((dead.dead_until(s), dead.failures(s)), (None, 0));
        let until = dead.record_failure(s, now);
        assert_eq!(until, now + dead.backoff(1));
        assert_eq!((dead.dead_until(s), dead.failures(s)), (Some(until), 1));
        assert!(dead.is_dead(s, now) && !dead.is_dead(s, until));
        assert_eq!(dead.next_deadline(now), Some(until));
        assert_eq!(dead.dead_servers(now).collect::<Vec<_>>(), [s]);
        // A failure while dead changes nothing; after the backoff it doubles.
        assert_eq!(dead.record_failure(s, now), until);
        let again = dead.record_failure(s, until);
        assert_eq!(again, until + dead.backoff(2));
        assert_eq!(dead.failures(s), 2);
        dead.record_success(s);
        assert_eq!((dead.dead_until(s), dead.failures(s)), (None, 0));
        // Unknown ids are ignored.
        assert_eq!(dead.record_failure(ServerId(9), now), now);
        assert_eq!(dead.dead_until(ServerId(9)), None);
    }

    #[test]
    fn a_backoff_past_the_clocks_end_is_shortened_not_a_panic() {
        let mut spec = ClusterSpec::parse_server_list("a:1").unwrap();
        spec.settings.backoff_initial = Duration::MAX;
        spec.settings.backoff_max = Duration::MAX;
        let mut dead = DeadHosts::new(&Topology::new(spec).unwrap());
        let now = Instant::now();
        let until = dead.record_failure(ServerId(0), now);
        assert!(until > now + Duration::from_secs(3600 * 24 * 365));
        assert!(dead.is_dead(ServerId(0), now));
    }

    #[test]
    fn a_locator_error_keeps_its_cause() {
        // Whalin's consistent ring refuses weights its int arithmetic overflows.
        let spec = ClusterSpec::parse_server_list("a:1:30000000,b:1")
            .unwrap()
            .with_hash(memgroup_hash::HashStrategy::Consistent);
        let error = Topology::new(spec).unwrap_err();
        assert!(
            matches!(error, crate::TopologyError::Locator(_)),
            "{error:?}"
        );
        assert!(std::error::Error::source(&error).is_some(), "{error:?}");
        let plain = crate::TopologyError::NoGroups;
        assert!(std::error::Error::source(&plain).is_none());
    }
}
