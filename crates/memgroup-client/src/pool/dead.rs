//! The dead-host record as target choices see it ([`Pool::dead_view`]).
//!
//! [`Pool::dead_view`]: super::Pool::dead_view

use std::time::Instant;

use memgroup_topology::DeadHosts;
use parking_lot::MutexGuard;

use crate::clock::now;

/// A dead-host record to choose targets by ([`Pool::dead_view`]).
pub(crate) enum DeadView<'a> {
    /// The record itself, locked: some server has failures on record.
    Locked(MutexGuard<'a, DeadHosts>),
    /// Nothing on record: a clear record, no lock, and the instant to judge
    /// it at (any instant: a clear record answers alike at all of them).
    Clear(&'a DeadHosts, Instant),
}

impl DeadView<'_> {
    /// The instant to judge the record at: the clock, read only while some
    /// server has a failure on record (a backoff's end is compared with it);
    /// with a clear record, no clock read.
    pub(crate) fn now(&self) -> Instant {
        match self {
            DeadView::Locked(_) => now(),
            DeadView::Clear(_, at) => *at,
        }
    }
}

impl std::ops::Deref for DeadView<'_> {
    type Target = DeadHosts;

    fn deref(&self) -> &DeadHosts {
        match self {
            DeadView::Locked(dead) => dead,
            DeadView::Clear(dead, _) => dead,
        }
    }
}
