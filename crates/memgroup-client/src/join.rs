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

/// Futures polled together whose results are taken as they finish; what is
/// left can move to another task (the futures own what they use).
pub(crate) struct Unordered<T> {
    futures: Vec<Option<BoxFuture<'static, T>>>,
}

impl<T> Unordered<T> {
    /// None yet, with room for `n`.
    pub(crate) fn with_capacity(n: usize) -> Unordered<T> {
        Unordered {
            futures: Vec::with_capacity(n),
        }
    }

    /// Adds a future; its place (counted from 0, in the order added) is
    /// what [`Unordered::pending`] names it by.
    pub(crate) fn push(&mut self, future: BoxFuture<'static, T>) {
        self.futures.push(Some(future));
    }

    /// How many have not finished.
    pub(crate) fn len(&self) -> usize {
        self.futures.iter().filter(|f| f.is_some()).count()
    }

    /// The places of those that have not finished, in the order added.
    pub(crate) fn pending(&self) -> impl Iterator<Item = usize> + Clone + '_ {
        self.futures
            .iter()
            .enumerate()
            .filter_map(|(at, f)| f.is_some().then_some(at))
    }

    /// The next result to finish, `None` once all have.
    pub(crate) async fn next(&mut self) -> Option<T> {
        std::future::poll_fn(|cx| {
            let mut pending = false;
            for slot in &mut self.futures {
                if let Some(future) = slot {
                    if let Poll::Ready(value) = future.as_mut().poll(cx) {
                        *slot = None;
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
