//! The connection's timer: one task per connection watches the deadlines
//! of the requests waiting for a reply someone else reads, instead of one
//! timer per request (with 32 callers in flight a timer registered and
//! cancelled per request cost 14 % of the client's CPU per `get`). A lone
//! caller reading its own reply is woken through the waker it leaves in the
//! state (see `Shared::read_own`).

use std::future::{Future, poll_fn};
use std::pin::pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::Instant;

use super::Shared;
use crate::clock::now;
use crate::error::{Error, ErrorKind};

/// The error a request's callers get when its deadline passes first.
pub(super) fn timed_out() -> Error {
    Error::new(ErrorKind::Timeout, "no reply before the request's deadline")
}

impl Shared {
    /// Tells the callers of every request past its deadline at `now` that
    /// it timed out ([`State::expire`](super::state::State::expire)).
    pub(super) fn expire_late(&self, now: Instant) {
        let error = timed_out().at(&self.server);
        let reader = self.state.lock().expire(now, &error);
        if let Some(reader) = reader {
            reader.wake();
        }
    }
}

/// The timer task. It sleeps until the earliest deadline of the
/// requests waiting ([`State::armed`]), which a request sets only when it is
/// earlier than that or nothing was watched; then it tells the callers of
/// every request past its deadline that it timed out ([`State::expire`])
/// and sleeps until the next. Under steady traffic it wakes about once per
/// timeout period.
pub(super) async fn timer_loop(shared: Arc<Shared>) {
    loop {
        let armed = {
            let state = shared.state.lock();
            if state.closed().is_some() {
                return;
            }
            state.armed()
        };
        let Some(at) = armed else {
            shared.wake_timer.notified().await;
            continue;
        };
        tokio::select! {
            () = tokio::time::sleep_until(at.into()) => shared.expire_late(now()),
            () = shared.wake_timer.notified() => {}
        }
    }
}

/// Awaits `wait` (a request's reply), checking the request's `deadline`
/// each time it is polled again without its reply: a caller polled past its
/// deadline (by its own `select!`, or a spurious wake-up) times out then,
/// even if the timer task has not run yet. A wake-up that brings the reply
/// reads no clock.
pub(super) async fn watched<T>(
    shared: &Shared,
    deadline: Instant,
    wait: impl Future<Output = T>,
) -> T {
    let mut wait = pin!(wait);
    let mut again = false;
    poll_fn(|cx| {
        if let Poll::Ready(reply) = wait.as_mut().poll(cx) {
            return Poll::Ready(reply);
        }
        if std::mem::replace(&mut again, true) {
            let now = now();
            if now >= deadline {
                // Its callers are told now (through `wait`, polled again).
                shared.expire_late(now);
                return wait.as_mut().poll(cx);
            }
        }
        Poll::Pending
    })
    .await
}
