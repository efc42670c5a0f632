//! Opening a connection: TCP within the connect timeout, then the TLS
//! handshake and the login, as the connection's settings say. Shared by the
//! pool's connections and the crawler's dedicated ones.

use std::sync::Arc;
use std::time::Duration;

use memgroup_proto::Limits;
use tokio::net::TcpStream;

use super::login::{Credentials, authenticate};
use super::transport::Stream;
use crate::error::{Error, ErrorKind};

/// Settings of one connection.
#[derive(Debug, Clone)]
pub(crate) struct ConnSettings {
    pub(crate) connect_timeout: Duration,
    /// Timeouts in a row that mark the server down (0: never).
    pub(crate) timeouts_until_down: u32,
    pub(crate) nodelay: bool,
    pub(crate) max_in_flight: usize,
    /// Written batches allowed without their last reply before requests wait.
    pub(crate) max_batches: usize,
    /// Whether queued single-key retrievals join into one command.
    pub(crate) merge_gets: bool,
    pub(crate) limits: Limits,
    /// Every new connection logs in with these first.
    pub(crate) credentials: Option<Arc<Credentials>>,
    /// Whether the servers speak the meta protocol, or to ask them.
    pub(crate) meta: super::probe::MetaProtocol,
    /// Every new connection runs a TLS handshake with this first.
    #[cfg(feature = "tls")]
    pub(crate) tls: Option<crate::conn::tls::TlsConnector>,
}

impl Default for ConnSettings {
    fn default() -> Self {
        ConnSettings {
            connect_timeout: Duration::from_secs(1),
            timeouts_until_down: 3,
            nodelay: true,
            max_in_flight: 1024,
            max_batches: 4,
            merge_gets: true,
            limits: Limits::default(),
            credentials: None,
            meta: super::probe::MetaProtocol::Detect,
            #[cfg(feature = "tls")]
            tls: None,
        }
    }
}

/// Opens a stream to `server` (`host:port`): connects within the connect
/// timeout, runs the TLS handshake and logs in, as configured.
pub(crate) async fn open(server: &str, settings: &ConnSettings) -> Result<Stream, Error> {
    let stream =
        match tokio::time::timeout(settings.connect_timeout, TcpStream::connect(server)).await {
            Ok(Ok(stream)) => stream,
            Ok(Err(e)) => {
                return Err(Error::new(ErrorKind::Connection, "connect failed")
                    .at(server)
                    .with_source(e));
            }
            Err(_) => {
                return Err(Error::new(
                    ErrorKind::Timeout,
                    format!("connect timed out after {:?}", settings.connect_timeout),
                )
                .at(server));
            }
        };
    stream.set_nodelay(settings.nodelay).map_err(|e| {
        Error::new(ErrorKind::Connection, "setsockopt")
            .at(server)
            .with_source(e)
    })?;
    #[cfg(feature = "tls")]
    let mut stream = match &settings.tls {
        Some(tls) => Stream::Tls(Box::new(
            tls.handshake(stream, server, settings.connect_timeout)
                .await?,
        )),
        None => Stream::Plain(stream),
    };
    #[cfg(not(feature = "tls"))]
    let mut stream = Stream::Plain(stream);
    if let Some(credentials) = &settings.credentials {
        authenticate(&mut stream, credentials, server, settings.connect_timeout).await?;
    }
    crate::metrics::connection_opened(server);
    Ok(stream)
}
