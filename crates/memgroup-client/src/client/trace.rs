//! Tracing spans (feature `tracing`): one span per operation (`get`,
//! `get_multi`, `set`, …) and, inside it, one per request sent, carrying the
//! group, the server, the attempt (first, failover within the group,
//! fallback to another group) and the outcome (hit, miss, stored, or the
//! error's kind). The key is recorded only when the user opts in
//! ([`ClientBuilder::trace_keys`](crate::ClientBuilder::trace_keys)).
//!
//! The spans follow OpenTelemetry's database client conventions, in the
//! field names `tracing-opentelemetry` exports as attributes:
//! - the operation span is the CLIENT span (`otel.kind = "client"`), named
//!   by its `db.operation.name` (`otel.name`; memcached has no collection or
//!   namespace, and the operation may span servers): the memcached command
//!   (`get`, `set`, `incr`, …; a multi-key `get` is `get`, one command with
//!   many keys being no batch), or `BATCH set` / `BATCH delete` with
//!   `db.operation.batch.size` for the batch writes of two keys or more. It
//!   carries `db.system.name = "memcached"` and, when it failed,
//!   `error.type` (the [`ErrorKind`](crate::ErrorKind) name). It covers the
//!   retries, failovers and fallbacks inside it.
//! - each request span is its child, with `server.address` and
//!   `server.port` (a replicated write has one per group), `error.type` when
//!   it failed, and memgroup's own `group`, `attempt`, `command`, `outcome`.
//!
//! Without the feature every function here is an identity the compiler
//! removes: no cost.

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
    /// A queued repair's delete ([`crate::client::repair`]).
    Repair,
    /// A hedge: another group asked while the first was slow ([`crate::client::hedge`]).
    Hedge,
}

impl Attempt {
    #[cfg_attr(not(feature = "tracing"), allow(dead_code))]
    fn name(self) -> &'static str {
        match self {
            Attempt::First => "first",
            Attempt::Failover => "failover",
            Attempt::Fallback => "fallback",
            Attempt::Repair => "repair",
            Attempt::Hedge => "hedge",
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

/// A span, or nothing without the feature (zero-sized: no cost).
#[cfg(feature = "tracing")]
pub(crate) type Span = tracing::Span;
/// A span, or nothing without the feature (zero-sized: no cost).
#[cfg(not(feature = "tracing"))]
#[derive(Debug, Clone, Copy)]
pub(crate) struct Span;

/// Awaits a future inside a span (`tracing::Instrument`) when a subscriber
/// wants the span, else awaits it as it is. Measured with no subscriber
/// (`cargo xtask compare --tracing`): wrapping every future moved it once
/// more (a memcpy of its whole state), +11 % CPU per operation; keeping both
/// an instrumented and a plain copy in the caller's state made every
/// enclosing future larger, +6 %. So a disabled span awaits the future as
/// it is, and an enabled one boxes the instrumented future (an allocation
/// only while someone collects spans). Without the feature, just `.await`.
#[cfg(feature = "tracing")]
macro_rules! await_in_span {
    ($span:expr, $future:expr) => {{
        let future = $future;
        if $span.is_disabled() {
            future.await
        } else {
            Box::pin(tracing::Instrument::instrument(future, $span.clone())).await
        }
    }};
}
/// Awaits a future (a span only with the feature `tracing`).
#[cfg(not(feature = "tracing"))]
macro_rules! await_in_span {
    ($span:expr, $future:expr) => {{
        let _: &$crate::client::trace::Span = &$span;
        $future.await
    }};
}
pub(crate) use await_in_span;

/// The span of one request.
#[cfg_attr(not(feature = "tracing"), allow(unused_variables))]
#[inline(always)]
pub(crate) fn request_span(
    group: &str,
    server: &str,
    command: &'static str,
    attempt: Attempt,
) -> Span {
    #[cfg(feature = "tracing")]
    return {
        let (address, port) = memgroup_topology::ServerAddr::split(server);
        tracing::debug_span!(
            "memcached.request",
            command,
            group,
            server,
            server.address = address,
            // Every server name has a port; numbers export as numbers.
            server.port = i64::from(port.unwrap_or(0)),
            attempt = attempt.name(),
            outcome = tracing::field::Empty,
            error.type = tracing::field::Empty,
        )
    };
    #[cfg(not(feature = "tracing"))]
    Span
}

/// Records a request's outcome in its span.
#[cfg_attr(not(feature = "tracing"), allow(unused_variables))]
#[inline(always)]
pub(crate) fn request_done(span: &Span, result: &Result<Option<Response>, Error>) {
    #[cfg(feature = "tracing")]
    if !span.is_disabled() {
        span.record("outcome", reply_outcome(result));
        if let Err(e) = result {
            span.record("error.type", e.kind().name());
        }
    }
}

/// How an operation's result reads in its span.
pub(crate) trait Outcome {
    /// A word: `hit`, `miss`, `stored`, an error kind, ….
    #[cfg_attr(not(feature = "tracing"), allow(dead_code))]
    fn outcome(&self) -> &'static str;

    /// The kind of the error the operation failed with (`error.type`), if
    /// it failed.
    #[cfg_attr(not(feature = "tracing"), allow(dead_code))]
    fn error_type(&self) -> Option<&'static str> {
        None
    }
}

impl<U> Outcome for Result<(crate::WriteOutcome, U), Error> {
    fn outcome(&self) -> &'static str {
        match self {
            Ok((outcome, _)) if outcome.applied() => "applied",
            Ok(_) => "not_applied",
            Err(e) => e.kind().name(),
        }
    }

    fn error_type(&self) -> Option<&'static str> {
        self.as_ref().err().map(|e| e.kind().name())
    }
}

impl Outcome for crate::MultiWrite {
    fn outcome(&self) -> &'static str {
        if self.is_complete() { "ok" } else { "partial" }
    }
}

impl Outcome for crate::MultiGet {
    fn outcome(&self) -> &'static str {
        match self.errors().next() {
            None => "ok",
            // Some keys answered: the call did part of its job.
            Some(_) if self.errors().count() < self.iter().count() => "partial",
            Some((_, e)) => e.kind().name(),
        }
    }

    fn error_type(&self) -> Option<&'static str> {
        // Failed only if no key got an answer.
        match self.errors().next() {
            Some((_, e)) if self.errors().count() == self.iter().count() => Some(e.kind().name()),
            _ => None,
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

    fn error_type(&self) -> Option<&'static str> {
        self.as_ref().err().map(|e| e.kind().name())
    }
}

/// The span of one operation, with the key if the client was told to
/// record keys.
#[cfg_attr(not(feature = "tracing"), allow(unused_variables))]
#[inline(always)]
pub(crate) fn operation_span<'a>(
    client: &'a Client,
    name: &'static str,
    key: Option<&[u8]>,
) -> Op<'a> {
    let operation = match name {
        "get_multi" => "get",
        // A batch of one is no batch: its command.
        "set_multi" => "set",
        "delete_multi" => "delete",
        name => name,
    };
    named_span(client, name, operation, key, None)
}

/// An operation's span, and when it started (for its duration metric,
/// feature `metrics`). Derefs to its span.
pub(crate) struct Op<'a> {
    span: Span,
    started: crate::metrics::Started<'a>,
    operation: &'static str,
}

impl std::ops::Deref for Op<'_> {
    type Target = Span;

    fn deref(&self) -> &Span {
        &self.span
    }
}

/// The span of a batch write of `size` keys (`set_multi`,
/// `delete_multi`): `BATCH <command>` with its size from two keys on.
#[cfg_attr(not(feature = "tracing"), allow(unused_variables))]
#[inline(always)]
pub(crate) fn batch_span<'a>(client: &'a Client, name: &'static str, size: usize) -> Op<'a> {
    if size < 2 {
        return operation_span(client, name, None);
    }
    let operation = match name {
        "set_multi" => "BATCH set",
        "delete_multi" => "BATCH delete",
        _ => "BATCH",
    };
    named_span(client, name, operation, None, Some(size))
}

#[cfg_attr(not(feature = "tracing"), allow(unused_variables))]
#[inline(always)]
fn named_span<'a>(
    client: &'a Client,
    name: &'static str,
    operation: &'static str,
    key: Option<&[u8]>,
    batch: Option<usize>,
) -> Op<'a> {
    Op {
        span: span_of(client, name, operation, key, batch),
        started: crate::metrics::start(&client.inner.durations),
        operation,
    }
}

#[cfg_attr(not(feature = "tracing"), allow(unused_variables))]
#[inline(always)]
fn span_of(
    client: &Client,
    name: &'static str,
    operation: &'static str,
    key: Option<&[u8]>,
    batch: Option<usize>,
) -> Span {
    #[cfg(feature = "tracing")]
    {
        let span = tracing::info_span!(
            "memgroup",
            otel.name = operation,
            otel.kind = "client",
            db.system.name = "memcached",
            db.operation.name = operation,
            db.operation.batch.size = tracing::field::Empty,
            error.type = tracing::field::Empty,
            op = name,
            key = tracing::field::Empty,
            outcome = tracing::field::Empty,
        );
        if let (Some(size), false) = (batch, span.is_disabled()) {
            span.record(
                "db.operation.batch.size",
                i64::try_from(size).unwrap_or(i64::MAX),
            );
        }
        if client.inner.trace_keys
            && !span.is_disabled()
            && let Some(key) = key
        {
            span.record("key", String::from_utf8_lossy(key).as_ref());
        }
        span
    }
    #[cfg(not(feature = "tracing"))]
    Span
}

/// Records an operation's outcome in its span.
#[cfg_attr(not(feature = "tracing"), allow(unused_variables))]
#[inline(always)]
pub(crate) fn operation_done(op: &Op<'_>, result: &impl Outcome) {
    crate::metrics::operation(op.started, op.operation, result.error_type());
    #[cfg(feature = "tracing")]
    if !op.span.is_disabled() {
        let span = &op.span;
        span.record("outcome", result.outcome());
        if let Some(kind) = result.error_type() {
            span.record("error.type", kind);
        }
    }
}
