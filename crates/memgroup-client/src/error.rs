//! The client's one error type: opaque, with a kind and predicates.

use std::fmt;
use std::sync::Arc;

/// What went wrong, broadly. Match on it, or use the `is_*` predicates of
/// [`Error`], which keep working when kinds are added.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The operation (or connecting) did not finish within its timeout.
    Timeout,
    /// Connecting failed, or the connection broke (closed, reset, I/O error).
    Connection,
    /// The server that owns the key is marked dead and failover is off (or
    /// found no live server).
    ServerDead,
    /// The server answered `SERVER_ERROR` (out of memory, object too large, …).
    Server,
    /// The server answered `CLIENT_ERROR` or `ERROR`: it did not accept the request.
    Client,
    /// The server sent something that is not a valid reply; the connection was closed.
    Protocol,
    /// The key is not a valid memcached key; nothing was sent.
    InvalidKey,
    /// The value is larger than the configured maximum; nothing was sent.
    ValueTooLarge,
    /// A replicated write did not reach as many server groups as the write
    /// policy requires.
    WritePolicy,
    /// A stored value could not be converted to the requested type, or its
    /// flags name a type or encoding the value format does not know.
    Type,
    /// A stored value is corrupt for its flags: bad compressed data, a
    /// decompressed size over the limit, bytes that do not fit the type.
    Corrupt,
    /// The client or cluster configuration is invalid.
    Config,
    /// An argument of the call is invalid (an unknown group name, …).
    InvalidArgument,
    /// The server refused the client's credentials, or wants some and none
    /// were configured (`CLIENT_ERROR unauthenticated`).
    Auth,
    /// The TLS handshake failed (a certificate the client does not trust or
    /// that does not name the server, a refused or missing client
    /// certificate, a peer that does not speak TLS), or TLS data was bad.
    Tls,
    /// The server has more requests outstanding than the read queue bound
    /// ([`ClientBuilder::max_read_queue`](crate::ClientBuilder::max_read_queue)):
    /// a read passes it over for the next group instead of queueing behind
    /// a server that is not answering.
    Overloaded,
    /// The fill of [`Client::get_or_fill`](crate::Client::get_or_fill)
    /// failed; its error is the [`source`](std::error::Error::source). The
    /// lease was released, so another caller may fill.
    Fill,
    /// A conditional write (`add`, `cas`, `incr`, …) was sent to the group
    /// that decides it (the arbiter) and not answered: it may have been
    /// applied or not. It is not sent to another arbiter (two could both
    /// grant one `add`); the other groups' copies were cleared. Read the
    /// key to learn what it holds.
    OutcomeUnknown,
    /// The server lacks the meta protocol ([`MetaProtocol`](crate::MetaProtocol))
    /// and the request has no classic form (a lease, …): not sent, not a server failure.
    Unsupported,
}

impl ErrorKind {
    /// Every kind, in declaration order.
    pub const ALL: [ErrorKind; 19] = [
        ErrorKind::Timeout,
        ErrorKind::Connection,
        ErrorKind::ServerDead,
        ErrorKind::Server,
        ErrorKind::Client,
        ErrorKind::Protocol,
        ErrorKind::InvalidKey,
        ErrorKind::ValueTooLarge,
        ErrorKind::WritePolicy,
        ErrorKind::Type,
        ErrorKind::Corrupt,
        ErrorKind::Config,
        ErrorKind::InvalidArgument,
        ErrorKind::Auth,
        ErrorKind::Tls,
        ErrorKind::Overloaded,
        ErrorKind::Fill,
        ErrorKind::OutcomeUnknown,
        ErrorKind::Unsupported,
    ];

    /// The kind's position in [`ErrorKind::ALL`].
    pub(crate) fn index(self) -> usize {
        self as usize
    }

    /// A short lowercase name (`"timeout"`, `"connection"`, …) for logs,
    /// spans and metrics.
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::Timeout => "timeout",
            ErrorKind::Connection => "connection",
            ErrorKind::ServerDead => "server_dead",
            ErrorKind::Server => "server",
            ErrorKind::Client => "client",
            ErrorKind::Protocol => "protocol",
            ErrorKind::InvalidKey => "invalid_key",
            ErrorKind::ValueTooLarge => "value_too_large",
            ErrorKind::WritePolicy => "write_policy",
            ErrorKind::Type => "type",
            ErrorKind::Corrupt => "corrupt",
            ErrorKind::Config => "config",
            ErrorKind::InvalidArgument => "invalid_argument",
            ErrorKind::Auth => "auth",
            ErrorKind::Tls => "tls",
            ErrorKind::Overloaded => "overloaded",
            ErrorKind::Fill => "fill",
            ErrorKind::OutcomeUnknown => "outcome_unknown",
            ErrorKind::Unsupported => "unsupported",
        }
    }
}

/// An error of the memgroup client.
///
/// A cache miss is not an error: reads return `Ok(None)`.
#[derive(Clone)]
pub struct Error {
    kind: ErrorKind,
    message: Arc<str>,
    server: Option<Arc<str>>,
    source: Option<Arc<dyn std::error::Error + Send + Sync>>,
    /// Whether the failed request may have reached its server.
    delivery: Delivery,
}

/// Whether a failed request may have reached its server: what tells a
/// missed write (known not applied) from one whose outcome is unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Delivery {
    /// Not said: an error of no request (a bad key, a configuration).
    Unmarked,
    /// Never sent: no connection to its server could be opened, or the
    /// server was passed over. Sending it elsewhere cannot apply it twice.
    Unsent,
    /// Handed to a connection and not answered: its bytes may be in the
    /// server's socket (a stalled server applies them when it resumes), so
    /// it may have been applied, or may be applied later.
    Handed,
}

impl Error {
    pub(crate) fn new(kind: ErrorKind, message: impl Into<String>) -> Error {
        Error {
            kind,
            message: message.into().into(),
            server: None,
            source: None,
            delivery: Delivery::Unmarked,
        }
    }

    /// Marks the error of a request never sent (see [`Error::is_unsent`]).
    pub(crate) fn unsent(mut self) -> Error {
        self.delivery = Delivery::Unsent;
        self
    }

    /// Whether the request failed before any of it was sent (its server's
    /// connection could not be opened), so another server may take it.
    pub(crate) fn is_unsent(&self) -> bool {
        self.delivery == Delivery::Unsent
    }

    /// Marks the error of a request handed to a connection and not
    /// answered (see [`Error::may_have_applied`]).
    pub(crate) fn handed(mut self) -> Error {
        if self.delivery == Delivery::Unmarked {
            self.delivery = Delivery::Handed;
        }
        self
    }

    /// Whether the failed request may have been applied all the same: it
    /// was handed to a connection and no answer came (a timeout, a
    /// connection that broke, a server marked down while it waited). A
    /// stalled server applies such a request when it resumes, possibly
    /// after later ones sent on another connection; a write that failed
    /// this way has an unknown outcome, not a known miss.
    pub fn may_have_applied(&self) -> bool {
        self.delivery == Delivery::Handed
    }

    /// A configuration error found outside this crate (a cluster file a
    /// service reads, a setting of its own): of kind [`ErrorKind::Config`],
    /// shown as `message: cause`, `cause` its
    /// [`source`](std::error::Error::source).
    ///
    /// ```
    /// use memgroup_client::{Error, ErrorKind};
    ///
    /// let cause = std::io::Error::other("no such setting");
    /// let error = Error::config("invalid service configuration", cause);
    /// assert_eq!(error.kind(), ErrorKind::Config);
    /// assert_eq!(error.to_string(), "invalid service configuration: no such setting");
    /// ```
    pub fn config(
        message: impl Into<String>,
        cause: impl std::error::Error + Send + Sync + 'static,
    ) -> Error {
        Error::new(ErrorKind::Config, message).with_source(cause)
    }

    pub(crate) fn with_source(
        mut self,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Error {
        self.source = Some(Arc::new(source));
        self
    }

    /// With a cause given boxed (a caller's error).
    pub(crate) fn with_boxed_source(
        mut self,
        source: Box<dyn std::error::Error + Send + Sync>,
    ) -> Error {
        self.source = Some(Arc::from(source));
        self
    }

    /// The error of a request not sent: `server`, the key's own, is
    /// marked dead (in its backoff).
    pub(crate) fn passed_over(server: &str) -> Error {
        Error::new(ErrorKind::ServerDead, "server is marked dead").at(server)
    }

    pub(crate) fn at(mut self, server: &str) -> Error {
        self.server = Some(server.into());
        self
    }

    /// The message alone (no server, no cause).
    pub(crate) fn message(&self) -> &str {
        &self.message
    }

    /// The error line a server answered, when one refused the request
    /// (`CLIENT_ERROR …` or `SERVER_ERROR …`, here or in a cause): what a
    /// proxy relays to its client.
    pub fn server_reply(&self) -> Option<&str> {
        let mut current = Some(self);
        while let Some(e) = current {
            let refused =
                e.message.starts_with("CLIENT_ERROR ") || e.message.starts_with("SERVER_ERROR ");
            if matches!(e.kind, ErrorKind::Client | ErrorKind::Server) && refused {
                return Some(&e.message);
            }
            current = e.source.as_deref().and_then(|s| s.downcast_ref::<Error>());
        }
        None
    }

    /// The kind of failure.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The server (`host:port`) involved, when there is one.
    pub fn server(&self) -> Option<&str> {
        self.server.as_deref()
    }

    /// Whether the operation timed out.
    pub fn is_timeout(&self) -> bool {
        self.kind == ErrorKind::Timeout
    }

    /// Whether connecting failed or the connection broke.
    pub fn is_connection(&self) -> bool {
        self.kind == ErrorKind::Connection
    }

    /// Whether the key's server is marked dead (and failover could not help).
    pub fn is_server_dead(&self) -> bool {
        self.kind == ErrorKind::ServerDead
    }

    /// Whether the server answered `SERVER_ERROR`.
    pub fn is_server_error(&self) -> bool {
        self.kind == ErrorKind::Server
    }

    /// Whether the server refused the request (`CLIENT_ERROR`/`ERROR`).
    pub fn is_client_error(&self) -> bool {
        self.kind == ErrorKind::Client
    }

    /// Whether the server's reply was not valid protocol.
    pub fn is_protocol(&self) -> bool {
        self.kind == ErrorKind::Protocol
    }

    /// Whether the key was invalid (nothing was sent).
    pub fn is_invalid_key(&self) -> bool {
        self.kind == ErrorKind::InvalidKey
    }

    /// Whether the value was too large (nothing was sent).
    pub fn is_value_too_large(&self) -> bool {
        self.kind == ErrorKind::ValueTooLarge
    }

    /// Whether the server refused to authenticate the client.
    pub fn is_auth(&self) -> bool {
        self.kind == ErrorKind::Auth
    }

    /// Whether TLS failed: the handshake (certificates, a refused client
    /// certificate, a peer without TLS) or the encrypted data.
    pub fn is_tls(&self) -> bool {
        self.kind == ErrorKind::Tls
    }

    /// A refusal to let the client in (a login or a TLS handshake): kept as
    /// the reason a server is backed off, never hidden by failover.
    pub(crate) fn is_refusal(&self) -> bool {
        matches!(self.kind, ErrorKind::Auth | ErrorKind::Tls)
    }

    /// Whether a stored value could not be decoded because it is corrupt.
    pub fn is_corrupt(&self) -> bool {
        self.kind == ErrorKind::Corrupt
    }

    /// Whether a replicated write missed its write policy.
    pub fn is_write_policy(&self) -> bool {
        self.kind == ErrorKind::WritePolicy
    }

    /// The error and its causes on one line, `message (server …): cause:
    /// cause`: the same text as `Display`.
    ///
    /// ```
    /// # fn show(e: &memgroup_client::Error) {
    /// eprintln!("memgroup: {}", e.chain());
    /// # }
    /// ```
    pub fn chain(&self) -> String {
        self.to_string()
    }

    /// An invalid key, named (escaped, at most 80 bytes shown) with why.
    /// Given to a client with a key `prefix` (empty: none), the message
    /// names the prefix too, as the length `why` gives counts it.
    pub(crate) fn invalid_key(key: &[u8], prefix: &[u8], why: memgroup_proto::KeyError) -> Error {
        let shown = |bytes: &[u8]| -> String {
            let text: String = bytes
                .iter()
                .take(80)
                .flat_map(|b| b.escape_ascii())
                .map(char::from)
                .collect();
            let more = if bytes.len() > 80 { "…" } else { "" };
            format!("\"{text}{more}\"")
        };
        let message = if prefix.is_empty() {
            format!("invalid key {}", shown(key))
        } else {
            format!(
                "invalid key {} behind the key prefix {}",
                shown(key),
                shown(prefix)
            )
        };
        Error::new(ErrorKind::InvalidKey, message).with_source(why)
    }

    /// Whether retrying the same operation later may succeed (timeouts,
    /// broken connections, dead servers, server-side failures).
    pub fn is_transient(&self) -> bool {
        matches!(
            self.kind,
            ErrorKind::Timeout
                | ErrorKind::Connection
                | ErrorKind::ServerDead
                | ErrorKind::Server
                | ErrorKind::WritePolicy
        )
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Error");
        d.field("kind", &self.kind).field("message", &self.message);
        if let Some(server) = &self.server {
            d.field("server", server);
        }
        if let Some(source) = &self.source {
            d.field("source", source);
        }
        d.finish()
    }
}

/// The message, the server and every cause on one line —
/// `connect failed (server h:1): Connection refused` — so a log line or a
/// `?` in `main` says why, as redis-rs and fred print theirs. The cause is
/// also [`source`](std::error::Error::source), for code that inspects it.
impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)?;
        if let Some(server) = &self.server {
            write!(f, " (server {server})")?;
        }
        let mut cause = std::error::Error::source(self);
        while let Some(e) = cause {
            write!(f, ": {e}")?;
            // One of ours already printed the rest of the chain.
            if e.downcast_ref::<Error>().is_some() {
                break;
            }
            cause = e.source();
        }
        Ok(())
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

impl From<memgroup_proto::KeyError> for Error {
    fn from(e: memgroup_proto::KeyError) -> Error {
        Error::new(ErrorKind::InvalidKey, "invalid key").with_source(e)
    }
}

/// What a cluster description the topology refused is, before its cause.
pub(crate) const INVALID_CLUSTER: &str = "invalid cluster configuration";

impl From<memgroup_topology::TopologyError> for Error {
    fn from(e: memgroup_topology::TopologyError) -> Error {
        Error::new(ErrorKind::Config, INVALID_CLUSTER).with_source(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_failures_of_the_moment_are_transient() {
        use ErrorKind::*;
        for kind in ErrorKind::ALL {
            let transient = matches!(
                kind,
                Timeout | Connection | ServerDead | Server | WritePolicy
            );
            assert_eq!(Error::new(kind, "x").is_transient(), transient, "{kind:?}");
        }
    }

    #[test]
    fn every_kind_is_listed_once_at_its_index() {
        for (i, kind) in ErrorKind::ALL.iter().enumerate() {
            assert_eq!(kind.index(), i, "{kind:?}");
        }
        let mut names: Vec<&str> = ErrorKind::ALL.iter().map(|k| k.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ErrorKind::ALL.len());
    }

    #[test]
    fn display_carries_each_cause_once_on_one_line() {
        let e = Error::from(memgroup_proto::Key::new(b"").unwrap_err());
        assert_eq!(e.to_string(), "invalid key: the key is empty");
        let named = Error::invalid_key(
            b"a b\r\n",
            b"",
            memgroup_proto::Key::new(b"a b").unwrap_err(),
        );
        assert_eq!(
            named.to_string(),
            "invalid key \"a b\\r\\n\": the key has byte 0x20 at offset 1 \
             (spaces and control characters are not allowed)"
        );
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        let e = Error::new(ErrorKind::Connection, "connect failed")
            .at("h:1")
            .with_source(io);
        assert_eq!(e.to_string(), "connect failed (server h:1): refused");
        assert_eq!(e.chain(), e.to_string());
    }
}
