//! Runs a handful of futures concurrently on the current task (one per
//! server group or per server), without spawning and without extra crates.

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

/// A boxed future borrowing from the caller.
pub(crate) type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Polls every future until all are done; results come back in input order.
pub(crate) async fn join_all<T>(mut futures: Vec<BoxFuture<'_, T>>) -> Vec<T> {
    let mut results: Vec<Option<T>> = futures.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (future, slot) in futures.iter_mut().zip(results.iter_mut()) {
            if slot.is_none() {
                match future.as_mut().poll(cx) {
                    Poll::Ready(value) => *slot = Some(value),
                    Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
    results
        .into_iter()
        .map(|r| r.expect("every future completed"))
        .collect()
}

/// Futures polled together whose results are taken as they finish, each
/// under a tag (what it runs for); what is left can move to another task
/// (the futures own what they use). The tags are added first and their
/// futures started after, in one allocation for both.
pub(crate) struct Unordered<K, T> {
    entries: Vec<(K, Run<T>)>,
}

/// Where one of [`Unordered`]'s futures is.
enum Run<T> {
    /// Tagged, not started yet.
    Waiting,
    Running(BoxFuture<'static, T>),
    Finished,
}

impl<K: Copy, T> Unordered<K, T> {
    /// None yet, with room for `n`.
    pub(crate) fn with_capacity(n: usize) -> Unordered<K, T> {
        Unordered {
            entries: Vec::with_capacity(n),
        }
    }

    /// Starts a future for every tag not started yet, in the order added.
    pub(crate) fn start(&mut self, mut future: impl FnMut(K) -> BoxFuture<'static, T>) {
        for (tag, run) in &mut self.entries {
            if matches!(run, Run::Waiting) {
                *run = Run::Running(future(*tag));
            }
        }
    }

    /// The tag at `at` (counted from 0, in the order added).
    pub(crate) fn tag(&self, at: usize) -> K {
        self.entries[at].0
    }

    /// How many tags there are, finished or not.
    pub(crate) fn tags(&self) -> usize {
        self.entries.len()
    }

    /// How many have not finished.
    pub(crate) fn len(&self) -> usize {
        self.pending().count()
    }

    /// The places of those that have not finished, in the order added.
    pub(crate) fn pending(&self) -> impl Iterator<Item = usize> + Clone + '_ {
        self.entries
            .iter()
            .enumerate()
            .filter_map(|(at, (_, run))| matches!(run, Run::Running(_)).then_some(at))
    }

    /// The next result to finish, `None` once all have.
    pub(crate) async fn next(&mut self) -> Option<T> {
        std::future::poll_fn(|cx| {
            let mut pending = false;
            for (_, run) in &mut self.entries {
                if let Run::Running(future) = run {
                    if let Poll::Ready(value) = future.as_mut().poll(cx) {
                        *run = Run::Finished;
                        return Poll::Ready(Some(value));
                    }
                    pending = true;
                }
            }
            if pending {
                Poll::Pending
            } else {
                Poll::Ready(None)
            }
        })
        .await
    }
}

impl<K, T> Extend<K> for Unordered<K, T> {
    /// Adds tags, their futures not started.
    fn extend<I: IntoIterator<Item = K>>(&mut self, tags: I) {
        self.entries
            .extend(tags.into_iter().map(|tag| (tag, Run::Waiting)));
    }
}
