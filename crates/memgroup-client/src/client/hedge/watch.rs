//! The stall watch: one task per client, while requests wait, looks at
//! every server once per hedge delay and wakes the reads waiting on one
//! that looks stalled (see the [module docs](super)).

use std::future::{Future, poll_fn};
use std::pin::{Pin, pin};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::task::Poll;
use std::time::Duration;

use crate::client::Client;
use crate::clock::now;
use crate::counters::ServerCounters;
use crate::pool::Snapshot;

impl Client {
    /// Starts the stall watch, unless it runs.
    pub(super) fn watch_stalls(&self) {
        let watching = &self.inner.hedging.watching;
        if !watching.load(Ordering::SeqCst) && !watching.swap(true, Ordering::SeqCst) {
            tokio::spawn(stall_watch(
                Arc::downgrade(&self.inner),
                self.inner.hedging.hedge.delay,
            ));
        }
    }
}

/// `reply`'s output, or `None` when the stall watch finds `counters`'
/// server stalled first.
pub(super) async fn unless_stalled<F: Future + ?Sized>(
    mut reply: Pin<&mut F>,
    counters: &ServerCounters,
) -> Option<F::Output> {
    let mut stall = pin!(counters.stall_seen());
    poll_fn(|cx| match reply.as_mut().poll(cx) {
        Poll::Ready(answer) => Poll::Ready(Some(answer)),
        Poll::Pending => stall.as_mut().poll(cx).map(|()| None),
    })
    .await
}

/// The stall watch: every hedge delay while requests wait, it wakes the
/// `get`s waiting on a server that looks stalled (a request has waited the
/// delay with nothing answered), which then hedge as they would have had
/// it looked so when they were sent. It ends when nothing waits (the next
/// waiting `get` starts it again) or the client is gone.
async fn stall_watch(inner: Weak<crate::client::Inner>, delay: Duration) {
    let waiting = |snap: &Snapshot| snap.all_counters().iter().any(|c| c.outstanding_now() > 0);
    loop {
        tokio::time::sleep(delay).await;
        let Some(inner) = inner.upgrade() else {
            return;
        };
        let snap = inner.pool.snapshot();
        let at = crate::clock::nanos(now());
        for counters in snap.all_counters() {
            if counters.outstanding_now() > 0 && counters.looks_stalled(at, delay) {
                counters.tell_stalled();
            }
        }
        if !waiting(&snap) {
            // A get that starts waiting after this check either finds the
            // watch stopped (and starts one) or is seen waiting here.
            let watching = &inner.hedging.watching;
            watching.store(false, Ordering::SeqCst);
            if !waiting(&snap) || watching.swap(true, Ordering::SeqCst) {
                return;
            }
        }
    }
}
