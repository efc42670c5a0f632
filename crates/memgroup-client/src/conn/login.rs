//! memcached's ASCII authentication (`memcached -Y authfile`): a new
//! connection sends `set <any key> 0 0 <len>\r\n<user> <password>\r\n` and
//! must get `STORED` before it carries a request. A wrong user or password
//! gets `CLIENT_ERROR authentication failure`; any command before logging in
//! gets `CLIENT_ERROR unauthenticated`. The login is counted in the server's
//! `auth_cmds`, not `cmd_set`, and stores nothing. A second such `set` on a
//! logged-in connection would store an item: authenticate once per connection.

use std::fmt;
use std::time::Duration;

use bytes::BytesMut;
use memgroup_proto::{Decoder, Expect, Key, Request, Response, StoreCommand};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::error::{Error, ErrorKind};

/// A user name and password for memcached's ASCII authentication.
///
/// `Debug` never shows the password.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    username: String,
    password: String,
}

impl Credentials {
    /// Credentials, or an `InvalidArgument` error when memcached could never
    /// accept them: it splits the login line at spaces (checked with 1.6.18:
    /// a password with a space always fails), so neither may hold a space or
    /// a line break, and the user name may not be empty.
    pub fn new(
        username: impl Into<String>,
        password: impl Into<String>,
    ) -> Result<Credentials, Error> {
        let (username, password) = (username.into(), password.into());
        let bad = |s: &str| s.contains([' ', '\t', '\r', '\n']);
        if username.is_empty() || bad(&username) || bad(&password) {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                "memcached user names and passwords cannot hold spaces or line breaks, and the user name may not be empty",
            ));
        }
        Ok(Credentials { username, password })
    }

    /// The user name.
    pub fn username(&self) -> &str {
        &self.username
    }
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .finish()
    }
}

/// Logs in on a freshly connected stream, within `timeout`.
pub(crate) async fn authenticate<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    credentials: &Credentials,
    server: &str,
    timeout: Duration,
) -> Result<(), Error> {
    let login = async {
        let mut data =
            Vec::with_capacity(credentials.username.len() + credentials.password.len() + 1);
        data.extend_from_slice(credentials.username.as_bytes());
        data.push(b' ');
        data.extend_from_slice(credentials.password.as_bytes());
        let request = Request::Store {
            command: StoreCommand::Set,
            key: Key::new(b"auth").expect("a valid key"),
            flags: 0,
            exptime: 0,
            data: &data,
            noreply: false,
        };
        let mut out = BytesMut::new();
        request.encode(&mut out);
        let io = |e: std::io::Error| {
            Error::new(ErrorKind::Connection, "authenticating failed").with_source(e)
        };
        stream.write_all(&out).await.map_err(io)?;
        let mut decoder = Decoder::default();
        let mut buf = BytesMut::with_capacity(256);
        loop {
            match decoder.decode(&mut buf, Expect::Single) {
                Ok(Some(reply)) => return Ok(reply),
                Ok(None) => {}
                Err(e) => {
                    return Err(
                        Error::new(ErrorKind::Protocol, "malformed reply to the login")
                            .with_source(e),
                    );
                }
            }
            if stream.read_buf(&mut buf).await.map_err(io)? == 0 {
                return Err(Error::new(
                    ErrorKind::Connection,
                    "connection closed by the server while authenticating",
                ));
            }
        }
    };
    let reply = match tokio::time::timeout(timeout, login).await {
        Ok(reply) => reply.map_err(|e| e.at(server))?,
        Err(_) => {
            return Err(Error::new(
                ErrorKind::Timeout,
                format!("authenticating timed out after {timeout:?}"),
            )
            .at(server));
        }
    };
    match reply {
        Response::Stored => Ok(()),
        Response::ClientError(message) => Err(Error::new(
            ErrorKind::Auth,
            format!(
                "authentication failed for user {:?}: CLIENT_ERROR {}",
                credentials.username,
                String::from_utf8_lossy(&message)
            ),
        )
        .at(server)),
        other => Err(Error::new(
            ErrorKind::Protocol,
            format!("unexpected reply to the login: {other:?}"),
        )
        .at(server)),
    }
}
