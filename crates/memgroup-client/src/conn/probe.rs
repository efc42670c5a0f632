//! Whether a server speaks memcached 1.6's meta protocol, asked once when a
//! connection to it first opens: `mn` answered `MN` says yes; `ERROR` (or
//! another error line: memcached 1.4 and 1.5, mcrouter) says no, and so
//! does a close without a reply (twemproxy closes the connection on a
//! command it does not know; the connection is then opened again, without
//! the question). A server that stays silent fails the connect like one
//! that does not accept it. The answer is kept per server for the client's
//! life ([`ServerCounters::meta`](crate::counters::ServerCounters)), so
//! later connections skip the round trip.
//!
//! On a connection to a server without it, a meta request goes as the
//! classic command that does the same ([`memgroup_proto::Classic`]), and one
//! with no classic form fails with [`ErrorKind::Unsupported`] naming the
//! server and what it lacks, without being sent; it does not count as a
//! failure of the server.

use std::time::Duration;

use bytes::BytesMut;
use memgroup_proto::{Decoder, Expect, Response};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use memgroup_proto::{Classic, Request};

use super::{ConnSettings, Connection, Stream, open};
use crate::counters::ServerCounters;
use crate::error::{Error, ErrorKind};

/// Whether the client may send the servers meta commands (`mg`, `ms`, `md`,
/// `ma`, `me`, `mn`), set with
/// [`ClientBuilder::meta_protocol`](crate::ClientBuilder::meta_protocol)
/// (`meta_protocol` in `cluster.toml`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MetaProtocol {
    /// Ask each server once, with `mn`, when the first connection to it
    /// opens (one round trip); the default.
    #[default]
    Detect,
    /// Every server speaks it (memcached 1.6 and later): no question asked.
    Always,
    /// No server speaks it (memcached 1.4/1.5, twemproxy, mcrouter in
    /// front): classic commands only, no question asked.
    Never,
}

impl MetaProtocol {
    /// The setting's name in `cluster.toml` (`detect`, `always`, `never`).
    pub fn name(self) -> &'static str {
        match self {
            MetaProtocol::Detect => "detect",
            MetaProtocol::Always => "always",
            MetaProtocol::Never => "never",
        }
    }
}

impl std::str::FromStr for MetaProtocol {
    type Err = Error;

    fn from_str(s: &str) -> Result<MetaProtocol, Error> {
        match s {
            "detect" => Ok(MetaProtocol::Detect),
            "always" => Ok(MetaProtocol::Always),
            "never" => Ok(MetaProtocol::Never),
            other => Err(Error::new(
                ErrorKind::Config,
                format!("meta_protocol {other:?}: expected detect, always or never"),
            )),
        }
    }
}

/// Asks the server on a freshly opened (and logged-in) stream whether it
/// speaks the meta protocol, within `timeout`: `Ok(None)` when it closed the
/// connection instead of answering (no, and the stream is spent).
pub(crate) async fn speaks_meta<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    server: &str,
    timeout: Duration,
) -> Result<Option<bool>, Error> {
    let ask = async {
        let closed = |e: &std::io::Error| {
            matches!(
                e.kind(),
                std::io::ErrorKind::ConnectionReset
                    | std::io::ErrorKind::BrokenPipe
                    | std::io::ErrorKind::UnexpectedEof
            )
        };
        let io = |e: std::io::Error| {
            // A TLS alert after the handshake (a refused client
            // certificate, under TLS 1.3) comes with this first read.
            #[cfg(feature = "tls")]
            if let Some(tls) = e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>()) {
                return crate::conn::transport::tls_error("TLS error from the server", tls);
            }
            Error::new(ErrorKind::Connection, "asking for the meta protocol failed").with_source(e)
        };
        match stream.write_all(b"mn\r\n").await {
            Err(e) if closed(&e) => return Ok(None),
            other => other.map_err(io)?,
        }
        let mut decoder = Decoder::default();
        let mut buf = BytesMut::with_capacity(64);
        loop {
            match decoder.decode(&mut buf, Expect::Single) {
                Ok(Some(reply)) => return Ok(Some(reply)),
                Ok(None) => {}
                Err(e) => {
                    return Err(
                        Error::new(ErrorKind::Protocol, "malformed reply to mn").with_source(e)
                    );
                }
            }
            match stream.read_buf(&mut buf).await {
                Ok(0) => return Ok(None),
                Ok(_) => {}
                Err(e) if closed(&e) => return Ok(None),
                Err(e) => return Err(io(e)),
            }
        }
    };
    let reply = match tokio::time::timeout(timeout, ask).await {
        Ok(reply) => reply.map_err(|e| e.at(server))?,
        Err(_) => {
            return Err(Error::new(
                ErrorKind::Timeout,
                format!(
                    "the server accepted a connection but did not answer mn within {timeout:?}"
                ),
            )
            .at(server));
        }
    };
    match reply {
        None => Ok(None),
        Some(Response::Meta(m)) if m.status == memgroup_proto::MetaStatus::Mn => Ok(Some(true)),
        Some(Response::Error | Response::ClientError(_) | Response::ServerError(_)) => {
            Ok(Some(false))
        }
        Some(other) => Err(Error::new(
            ErrorKind::Protocol,
            format!("unexpected reply to mn: {other:?}"),
        )
        .at(server)),
    }
}

/// The error of a meta request a server without the meta protocol cannot
/// be sent: `lacking` names the feature.
pub(crate) fn unsupported(server: &str, lacking: &str) -> Error {
    Error::new(
        ErrorKind::Unsupported,
        format!(
            "the server does not speak memcached's meta protocol, and {lacking} has no classic form"
        ),
    )
    .at(server)
    .unsent()
}

/// Opens a stream to `server` and learns whether it speaks the meta
/// protocol: as the settings declare, as a connection found before
/// (`counters`), or by asking ([`speaks_meta`]; a server that closed
/// the connection instead of answering is connected to again).
pub(super) async fn open_asking(
    server: &str,
    settings: &ConnSettings,
    counters: &ServerCounters,
) -> Result<(Stream, bool), Error> {
    let known = match settings.meta {
        MetaProtocol::Always => Some(true),
        MetaProtocol::Never => Some(false),
        MetaProtocol::Detect => counters.meta(),
    };
    if let Some(meta) = known {
        counters.set_meta(meta);
        return Ok((open(server, settings).await?, meta));
    }
    let mut stream = open(server, settings).await?;
    // One connection asks; those opened meanwhile wait for its answer.
    let _asking = counters.asking().await;
    if let Some(meta) = counters.meta() {
        return Ok((stream, meta));
    }
    let meta = match speaks_meta(&mut stream, server, settings.connect_timeout).await? {
        Some(meta) => meta,
        None => {
            stream = open(server, settings).await?;
            false
        }
    };
    #[cfg(feature = "tracing")]
    if !meta {
        tracing::info!(
            server,
            "the server does not speak the meta protocol: classic commands only"
        );
    }
    counters.set_meta(meta);
    Ok((stream, meta))
}

impl Connection {
    /// [`Connection::call`] of a meta request on a server without the meta
    /// protocol.
    pub(super) async fn call_classic(
        &self,
        request: &Request<'_>,
        deadline: std::time::Instant,
    ) -> Result<Option<Response>, Error> {
        let shared = &self.inner.shared;
        let lacks = |lacking| unsupported(&shared.server, lacking);
        if let Request::MetaBatch { commands } = request {
            return self.batch_classic(commands, deadline).await;
        }
        let classic = Classic::of(request).map_err(lacks)?;
        let reply = self.send(&classic.request(), deadline).await?;
        Ok(reply.map(|r| classic.answer(r).unwrap_or_else(|r| r)))
    }

    /// A quiet meta batch on a server without the meta protocol: each
    /// command as its classic form, all pipelined, and their replies as the
    /// batch's (each meta reply with its command's opaque, `O<index>`).
    async fn batch_classic(
        &self,
        commands: &[memgroup_proto::MetaCommand<'_>],
        deadline: std::time::Instant,
    ) -> Result<Option<Response>, Error> {
        let server = &self.inner.shared.server;
        let classics = commands
            .iter()
            .map(|c| Classic::of_command(c).map_err(|lacking| unsupported(server, lacking)))
            .collect::<Result<Vec<_>, _>>()?;
        let sends: Vec<crate::join::BoxFuture<'_, _>> = classics
            .iter()
            .map(|c| {
                Box::pin(async move { self.send(&c.request(), deadline).await })
                    as crate::join::BoxFuture<'_, _>
            })
            .collect();
        let mut replies = Vec::with_capacity(commands.len());
        for (i, (classic, reply)) in classics
            .iter()
            .zip(crate::join::join_all(sends).await)
            .enumerate()
        {
            let Some(reply) = reply? else { continue };
            replies.push(match classic.answer(reply) {
                Ok(Response::Meta(mut meta)) => {
                    let mut flags = bytes::BytesMut::from(&meta.flags[..]);
                    if !flags.is_empty() {
                        flags.extend_from_slice(b" ");
                    }
                    flags.extend_from_slice(format!("O{i}").as_bytes());
                    meta.flags = flags.freeze();
                    Response::Meta(meta)
                }
                Ok(other) | Err(other) => other,
            });
        }
        Ok(Some(Response::MetaBatch(replies)))
    }
}
