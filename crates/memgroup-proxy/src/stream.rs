//! A client's connection, plain TCP or TLS over it (feature `tls`), split
//! into the halves one connection task reads and writes. Plain reads wait
//! for readiness before taking a buffer, so an idle connection holds none.

use std::io;
use std::task::Poll;
use std::time::Duration;

use bytes::BytesMut;
#[cfg(feature = "tls")]
use tokio::io::AsyncReadExt;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};

#[cfg(feature = "tls")]
type TlsStream = tokio_rustls::server::TlsStream<TcpStream>;

/// How many bytes a read asks the socket for at once.
const READ_SIZE: usize = 4096;

/// A client connection, handshaked.
pub(crate) enum Stream {
    Plain(TcpStream),
    #[cfg(feature = "tls")]
    Tls(Box<TlsStream>),
}

pub(crate) enum Reader {
    Plain(OwnedReadHalf),
    #[cfg(feature = "tls")]
    Tls(tokio::io::ReadHalf<Box<TlsStream>>),
}

pub(crate) enum Writer {
    Plain(OwnedWriteHalf),
    #[cfg(feature = "tls")]
    Tls(tokio::io::WriteHalf<Box<TlsStream>>),
}

impl Stream {
    pub(crate) fn split(self) -> (Reader, Writer) {
        match self {
            Stream::Plain(stream) => {
                let (r, w) = stream.into_split();
                (Reader::Plain(r), Writer::Plain(w))
            }
            #[cfg(feature = "tls")]
            Stream::Tls(stream) => {
                let (r, w) = tokio::io::split(stream);
                (Reader::Tls(r), Writer::Tls(w))
            }
        }
    }
}

/// Room for one read at the end of `buf`.
fn room(buf: &mut BytesMut) {
    if buf.capacity() - buf.len() < READ_SIZE {
        buf.reserve(READ_SIZE);
    }
}

impl Reader {
    /// Appends what the client sent to `buf`: 0 at its end. Cancel-safe
    /// (nothing is read when the future is dropped before it is ready).
    /// Plaintext takes room in `buf` only once the socket is readable;
    /// TLS needs it for the read itself (rustls holds its own buffers).
    pub(crate) async fn read(&mut self, buf: &mut BytesMut) -> io::Result<usize> {
        match self {
            Reader::Plain(reader) => loop {
                reader.readable().await?;
                room(buf);
                match reader.try_read_buf(buf) {
                    // Readiness is only cleared by this: nothing came after
                    // all. An idle connection waits holding no buffer.
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        if buf.is_empty() {
                            *buf = BytesMut::new();
                        }
                    }
                    read => return read,
                }
            },
            #[cfg(feature = "tls")]
            Reader::Tls(reader) => {
                room(buf);
                reader.read_buf(buf).await
            }
        }
    }
}

impl Writer {
    /// Writes `out` (then cleared): at once when the socket takes it all (the
    /// usual case: no timer), else waiting up to `timeout` for the client to
    /// take the rest.
    pub(crate) async fn write(&mut self, out: &mut BytesMut, timeout: Duration) -> Wrote {
        let wrote = match self {
            Writer::Plain(writer) => match writer.try_write(out) {
                Ok(n) if n == out.len() => Wrote::AtOnce,
                Ok(n) => within(timeout, writer.write_all(&out[n..])).await,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    within(timeout, writer.write_all(out)).await
                }
                Err(_) => Wrote::Failed,
            },
            // rustls takes the whole write into its own buffer: whether the
            // client keeps up shows in the flush.
            #[cfg(feature = "tls")]
            Writer::Tls(writer) => {
                within(timeout, async {
                    writer.write_all(out).await?;
                    writer.flush().await
                })
                .await
            }
        };
        out.clear();
        wrote
    }

    /// Ends the connection's sending side (a TLS close_notify first).
    pub(crate) async fn shutdown(&mut self) {
        let _ = match self {
            Writer::Plain(writer) => writer.shutdown().await,
            #[cfg(feature = "tls")]
            Writer::Tls(writer) => writer.shutdown().await,
        };
    }
}

/// How a batch of replies went out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wrote {
    /// The socket took it all at once: the client keeps up.
    AtOnce,
    /// The client made it wait, then took it.
    AfterWaiting,
    /// The client is gone, or did not take it in time.
    Failed,
}

/// Runs `write`: done at its first poll is [`Wrote::AtOnce`], later but
/// within `timeout` [`Wrote::AfterWaiting`].
async fn within(timeout: Duration, write: impl Future<Output = io::Result<()>>) -> Wrote {
    let mut write = std::pin::pin!(write);
    let first = std::future::poll_fn(|cx| Poll::Ready(write.as_mut().poll(cx))).await;
    match first {
        Poll::Ready(Ok(())) => return Wrote::AtOnce,
        Poll::Ready(Err(_)) => return Wrote::Failed,
        Poll::Pending => {}
    }
    match tokio::time::timeout(timeout, write).await {
        Ok(Ok(())) => Wrote::AfterWaiting,
        _ => Wrote::Failed,
    }
}
