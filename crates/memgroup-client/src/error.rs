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
    /// A stored value could not be converted to the requested type.
    Type,
    /// The client or cluster configuration is invalid.
    Config,
    /// An argument of the call is invalid (an unknown group name, …).
    InvalidArgument,
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
}

impl Error {
    pub(crate) fn new(kind: ErrorKind, message: impl Into<String>) -> Error {
        Error {
            kind,
            message: message.into().into(),
            server: None,
            source: None,
        }
    }

    pub(crate) fn with_source(
        mut self,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Error {
        self.source = Some(Arc::new(source));
        self
    }

    pub(crate) fn at(mut self, server: &str) -> Error {
        self.server = Some(server.into());
        self
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

    /// Whether a replicated write missed its write policy.
    pub fn is_write_policy(&self) -> bool {
        self.kind == ErrorKind::WritePolicy
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

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)?;
        if let Some(server) = &self.server {
            write!(f, " (server {server})")?;
        }
        if let Some(source) = &self.source {
            write!(f, ": {source}")?;
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

impl From<memgroup_topology::TopologyError> for Error {
    fn from(e: memgroup_topology::TopologyError) -> Error {
        Error::new(ErrorKind::Config, "invalid cluster configuration").with_source(e)
    }
}
