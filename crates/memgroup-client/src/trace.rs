//! Tracing spans (feature `tracing`): one span per operation (`get`,
//! `get_multi`, `set`, …) and, inside it, one per request sent, carrying the
//! group, the server, the attempt (first, failover within the group,
//! fallback to another group) and the outcome (hit, miss, stored, or the
//! error's kind). The key is recorded only when the user opts in
//! ([`ClientBuilder::trace_keys`](crate::ClientBuilder::trace_keys)).
//!
//! Without the feature every function here is an identity the compiler
//! removes: no cost.

use std::future::Future;

use memgroup_proto::{MetaStatus, Response};

use crate::client::Client;
use crate::error::Error;

/// Which try of a read this request is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Attempt {
    /// The key's first target (writes and per-server commands always are).
    First,
    /// Another server of the same group, after an I/O error.
    Failover,
    /// Another group, after a miss, an error, or a dead server.
    Fallback,
}

impl Attempt {
    #[cfg_attr(not(feature = "tracing"), allow(dead_code))]
    fn name(self) -> &'static str {
        match self {
            Attempt::First => "first",
            Attempt::Failover => "failover",
            Attempt::Fallback => "fallback",
        }
    }
}

/// A request's outcome in a word.
#[cfg_attr(not(feature = "tracing"), allow(dead_code))]
fn reply_outcome(result: &Result<Option<Response>, Error>) -> &'static str {
    match result {
        Err(e) => e.kind().name(),
        Ok(None) => "sent",
        Ok(Some(reply)) => match reply {
            Response::Values(v) if v.is_empty() => "miss",
            Response::Values(_) => "hit",
            Response::Stored => "stored",
            Response::NotStored => "not_stored",
            Response::Exists => "exists",
            Response::NotFound => "not_found",
            Response::Deleted => "deleted",
            Response::Touched => "touched",
            Response::Meta(m) if m.status == MetaStatus::En => "miss",
            Response::Meta(_) => "ok",
            _ => "ok",
        },
    }
}

/// Runs one request (`call`) inside its span.
#[cfg(feature = "tracing")]
pub(crate) async fn request<F>(
    group: &str,
    server: &str,
    command: &'static str,
    attempt: Attempt,
    call: F,
) -> Result<Option<Response>, Error>
where
    F: Future<Output = Result<Option<Response>, Error>>,
{
    use tracing::Instrument;
    let span = tracing::debug_span!(
        "memcached.request",
        command,
        group,
        server,
        attempt = attempt.name(),
        outcome = tracing::field::Empty,
    );
    let result = call.instrument(span.clone()).await;
    span.record("outcome", reply_outcome(&result));
    result
}

/// Runs one request (`call`); without tracing, just that.
#[cfg(not(feature = "tracing"))]
#[inline(always)]
pub(crate) fn request<F>(
    _group: &str,
    _server: &str,
    _command: &'static str,
    _attempt: Attempt,
    call: F,
) -> F
where
    F: Future<Output = Result<Option<Response>, Error>>,
{
    call
}

/// How an operation's result reads in its span.
pub(crate) trait Outcome {
    /// A word: `hit`, `miss`, `stored`, an error kind, ….
    #[cfg_attr(not(feature = "tracing"), allow(dead_code))]
    fn outcome(&self) -> &'static str;
}

impl<U> Outcome for Result<(crate::WriteOutcome, U), Error> {
    fn outcome(&self) -> &'static str {
        match self {
            Ok((outcome, _)) if outcome.applied() => "applied",
            Ok(_) => "not_applied",
            Err(e) => e.kind().name(),
        }
    }
}

impl<K, V> Outcome for Result<std::collections::HashMap<K, V>, Error> {
    fn outcome(&self) -> &'static str {
        match self {
            Ok(_) => "ok",
            Err(e) => e.kind().name(),
        }
    }
}

impl<T> Outcome for Result<Option<T>, Error> {
    fn outcome(&self) -> &'static str {
        match self {
            Ok(Some(_)) => "hit",
            Ok(None) => "miss",
            Err(e) => e.kind().name(),
        }
    }
}

/// Runs one operation (`op`) inside its span, recording the key if the
/// client was told to.
#[cfg(feature = "tracing")]
pub(crate) async fn operation<T: Outcome, F: Future<Output = T>>(
    client: &Client,
    name: &'static str,
    key: Option<&[u8]>,
    op: F,
) -> T {
    use tracing::Instrument;
    let span = tracing::info_span!(
        "memgroup",
        op = name,
        key = tracing::field::Empty,
        outcome = tracing::field::Empty,
    );
    if client.inner.trace_keys {
        if let Some(key) = key {
            span.record("key", String::from_utf8_lossy(key).as_ref());
        }
    }
    let result = op.instrument(span.clone()).await;
    span.record("outcome", result.outcome());
    result
}

/// Runs one operation (`op`); without tracing, just that.
#[cfg(not(feature = "tracing"))]
#[inline(always)]
pub(crate) fn operation<T: Outcome, F: Future<Output = T>>(
    _client: &Client,
    _name: &'static str,
    _key: Option<&[u8]>,
    op: F,
) -> F {
    op
}
