//! The bytes under a connection: a TCP socket, optionally with TLS on it.
//!
//! Both are driven the same way, by readiness: a reader waits until the
//! socket is readable and then [`fill`](Transport::fill)s its buffer without
//! blocking; a writer [`try_write`](Transport::try_write)s without blocking or
//! [`send`](Transport::send)s a whole chunk, waiting for room. TLS goes
//! through rustls's sans-IO connection (after tokio-rustls ran the
//! handshake): raw records move through the socket's non-blocking calls, and
//! the rustls state (shared by both directions) sits behind a lock held only
//! to encrypt or decrypt. So a TLS connection keeps the plaintext one's shape:
//! a lone caller reads its own reply without a task switch.
//!
//! Over TLS a caller writes directly too: its chunk is encrypted and the
//! records go out as far as the socket takes them. Records the socket did
//! not take stay inside rustls; [`Transport::try_write`] says so, and the
//! state then hands the writer role to the writer task, which owes them to
//! the socket (an empty send flushes them).

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};

use crate::error::{Error, ErrorKind};

/// Plaintext read per [`Transport::fill`] call at most over TLS before it
/// returns (the socket stays readable, so the reader comes back): a peer that
/// keeps sending cannot keep one call busy.
#[cfg(feature = "tls")]
const TLS_FILL_MAX: usize = 256 * 1024;

/// What one non-blocking read brought.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Filled {
    /// This many bytes of plaintext (over TLS possibly 0: only handshake
    /// messages such as session tickets arrived).
    Bytes(usize),
    /// The server closed the connection.
    Eof,
    /// Nothing to read now.
    Blocked,
}

/// A connected stream, before it becomes a [`Transport`]: logins and
/// one-off commands (the crawler's dump) use it as an ordinary async stream.
#[derive(Debug)]
pub(crate) enum Stream {
    /// Plain TCP.
    Plain(TcpStream),
    /// TLS over TCP, the handshake done.
    #[cfg(feature = "tls")]
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

impl Stream {
    /// The stream as the pipelined connection's transport.
    pub(crate) fn into_transport(self) -> Transport {
        match self {
            Stream::Plain(stream) => Transport::plain(stream),
            #[cfg(feature = "tls")]
            Stream::Tls(stream) => Transport::tls(*stream),
        }
    }
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            #[cfg(feature = "tls")]
            Stream::Tls(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            #[cfg(feature = "tls")]
            Stream::Tls(s) => Pin::new(s).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            #[cfg(feature = "tls")]
            Stream::Tls(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            #[cfg(feature = "tls")]
            Stream::Tls(s) => Pin::new(s).poll_shutdown(cx),
        }
    }
}

/// A connected socket, split into its two directions, with TLS state when
/// the connection is encrypted.
#[derive(Debug)]
pub(crate) struct Transport {
    read: OwnedReadHalf,
    write: OwnedWriteHalf,
    #[cfg(feature = "tls")]
    tls: Option<parking_lot::Mutex<rustls::ClientConnection>>,
}

impl Transport {
    /// A plaintext connection.
    pub(crate) fn plain(stream: TcpStream) -> Transport {
        let (read, write) = stream.into_split();
        Transport {
            read,
            write,
            #[cfg(feature = "tls")]
            tls: None,
        }
    }

    /// A connection whose TLS handshake is done.
    #[cfg(feature = "tls")]
    pub(crate) fn tls(stream: tokio_rustls::client::TlsStream<TcpStream>) -> Transport {
        let (stream, mut session) = stream.into_inner();
        // Batches are bounded by the connection's state; rustls must take a
        // whole large value without a limit of its own.
        session.set_buffer_limit(None);
        let (read, write) = stream.into_split();
        Transport {
            read,
            write,
            tls: Some(parking_lot::Mutex::new(session)),
        }
    }

    /// Whether the bytes are encrypted.
    pub(crate) fn is_tls(&self) -> bool {
        #[cfg(feature = "tls")]
        return self.tls.is_some();
        #[cfg(not(feature = "tls"))]
        false
    }

    /// Waits until the socket has something to read (or an error).
    pub(crate) async fn readable(&self) -> std::io::Result<()> {
        self.read.readable().await
    }

    /// [`Transport::readable`] as a poll, for the one caller reading its own
    /// reply (the socket keeps one waker for it, apart from the reader
    /// task's). Counts against the task's cooperative budget.
    pub(crate) fn poll_readable(
        &self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        self.read.as_ref().poll_read_ready(cx)
    }

    /// Whether the socket is readable right now, without waiting.
    pub(crate) fn is_readable_now(&self) -> bool {
        // `try_io` looks at the readiness tokio last saw (an atomic load: no
        // lock, no waker registered) and runs the closure only when it is
        // set; a closure that does not fail with `WouldBlock` leaves it set.
        self.read
            .as_ref()
            .try_io(Interest::READABLE, || Ok(()))
            .is_ok()
    }

    /// Reads what the socket has, without blocking, appending plaintext to
    /// `buf` (which must have spare room).
    pub(crate) fn fill(&self, buf: &mut BytesMut) -> Result<Filled, Error> {
        #[cfg(feature = "tls")]
        if let Some(tls) = &self.tls {
            return fill_tls(&mut tls.lock(), &self.read, &self.write, buf);
        }
        let room = buf.capacity() - buf.len();
        match read_once(&self.read, room, || self.read.try_read_buf(buf)) {
            Ok(0) => Ok(Filled::Eof),
            Ok(n) => Ok(Filled::Bytes(n)),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Ok(Filled::Blocked),
            Err(e) => Err(Error::new(ErrorKind::Connection, "read failed").with_source(e)),
        }
    }

    /// Writes what the socket takes now without blocking: the bytes of
    /// `data` taken, and whether encrypted records are left inside rustls
    /// (over TLS all of `data` is taken and encrypted; the records the
    /// socket did not take are owed by whoever [`send`](Transport::send)s
    /// next).
    pub(crate) fn try_write(&self, data: &[u8]) -> std::io::Result<(usize, bool)> {
        #[cfg(feature = "tls")]
        if let Some(tls) = &self.tls {
            return try_write_tls(&mut tls.lock(), &self.write, data);
        }
        Ok((self.write.try_write(data)?, false))
    }

    /// Sends all of `chunk`, waiting for room in the socket; `stop` is asked
    /// before each write whether the connection failed meanwhile.
    pub(crate) async fn send(
        &self,
        chunk: &mut BytesMut,
        stop: impl Fn() -> bool,
    ) -> Result<(), Error> {
        #[cfg(feature = "tls")]
        if let Some(tls) = &self.tls {
            return send_tls(tls, &self.write, chunk, stop).await;
        }
        while !chunk.is_empty() {
            let written = match self.write.writable().await {
                Ok(()) if stop() => return Ok(()),
                Ok(()) => self.write.try_write(chunk),
                Err(e) => Err(e),
            };
            match written {
                Ok(0) => return Err(write_zero()),
                Ok(n) => chunk.advance(n),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(write_failed(e)),
            }
        }
        Ok(())
    }
}

/// One non-blocking read from `socket` by `read`, into at most `room` bytes.
///
/// A read that leaves room took all the socket had: its readiness is cleared
/// then, as tokio's own `poll_read` does, so the next wait parks instead of
/// returning at once into a `recv` that fails with `EAGAIN` (`try_read`
/// alone clears it only on `EAGAIN`: one wasted system call per reply at
/// light load). The clear goes through `try_io`, whose readiness snapshot is
/// taken before the read: bytes arriving after it raise a new readiness event
/// that the clear leaves alone.
fn read_once(
    socket: &OwnedReadHalf,
    room: usize,
    read: impl FnOnce() -> std::io::Result<usize>,
) -> std::io::Result<usize> {
    let mut short = 0;
    let result = socket
        .as_ref()
        .try_io(Interest::READABLE, || match read()? {
            n if n > 0 && n < room => {
                short = n;
                Err(std::io::ErrorKind::WouldBlock.into())
            }
            n => Ok(n),
        });
    match result {
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock && short > 0 => Ok(short),
        other => other,
    }
}

/// The socket accepted a write of no bytes.
pub(crate) fn write_zero() -> Error {
    Error::new(ErrorKind::Connection, "the socket accepted no bytes")
}

/// A write to the socket failed.
pub(crate) fn write_failed(e: std::io::Error) -> Error {
    Error::new(ErrorKind::Connection, "write failed").with_source(e)
}

/// The socket's non-blocking read as `std::io::Read`, for rustls; notes
/// when a read took all the socket had ([`read_once`]).
#[cfg(feature = "tls")]
struct TryRead<'a> {
    socket: &'a OwnedReadHalf,
    drained: bool,
}

#[cfg(feature = "tls")]
impl std::io::Read for TryRead<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = read_once(self.socket, buf.len(), || self.socket.try_read(buf))?;
        self.drained = n > 0 && n < buf.len();
        Ok(n)
    }
}

/// The socket's non-blocking write as `std::io::Write`, for rustls.
#[cfg(feature = "tls")]
struct TryWrite<'a>(&'a OwnedWriteHalf);

#[cfg(feature = "tls")]
impl std::io::Write for TryWrite<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.try_write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// An error of the TLS layer, as the client's error.
#[cfg(feature = "tls")]
pub(crate) fn tls_error(what: &str, error: &rustls::Error) -> Error {
    Error::new(ErrorKind::Tls, format!("{what}: {error}"))
}

/// Reads records from the socket, decrypts them and appends the plaintext.
#[cfg(feature = "tls")]
fn fill_tls(
    session: &mut rustls::ClientConnection,
    read: &OwnedReadHalf,
    write: &OwnedWriteHalf,
    buf: &mut BytesMut,
) -> Result<Filled, Error> {
    use std::io::Read;

    let mut got = 0;
    let mut eof = false;
    let mut blocked = false;
    while got < TLS_FILL_MAX {
        let mut socket = TryRead {
            socket: read,
            drained: false,
        };
        match session.read_tls(&mut socket) {
            Ok(0) => eof = true,
            // All the socket had: no second read to learn it is empty.
            Ok(_) if socket.drained => blocked = true,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => blocked = true,
            Err(e) => {
                return Err(Error::new(ErrorKind::Connection, "read failed").with_source(e));
            }
        }
        let state = session.process_new_packets().map_err(|e| {
            // Tell the server why (an alert), if the socket takes it now.
            let _ = session.write_tls(&mut TryWrite(write));
            tls_error("TLS error from the server's data", &e)
        })?;
        let plaintext = state.plaintext_bytes_to_read();
        if plaintext > 0 {
            buf.reserve(plaintext);
            let start = buf.len();
            buf.resize(start + plaintext, 0);
            let n = session
                .reader()
                .read(&mut buf[start..])
                .map_err(|e| Error::new(ErrorKind::Connection, "read failed").with_source(e))?;
            buf.truncate(start + n);
            got += n;
        }
        if state.peer_has_closed() {
            eof = true;
        }
        if eof || blocked {
            break;
        }
    }
    // Anything rustls wants to say (a key update's answer) goes out now if
    // the socket takes it; otherwise with the next write.
    if session.wants_write() {
        let _ = session.write_tls(&mut TryWrite(write));
    }
    Ok(match (got, eof, blocked) {
        (0, true, _) => Filled::Eof,
        (0, false, true) => Filled::Blocked,
        (n, _, _) => Filled::Bytes(n),
    })
}

/// Encrypts `data` and writes the records the socket takes now: the bytes
/// of `data` taken (all of them), and whether records are left in rustls.
#[cfg(feature = "tls")]
fn try_write_tls(
    session: &mut rustls::ClientConnection,
    write: &OwnedWriteHalf,
    data: &[u8],
) -> std::io::Result<(usize, bool)> {
    use std::io::Write;

    let taken = session.writer().write(data)?;
    while session.wants_write() {
        match session.write_tls(&mut TryWrite(write)) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
            Err(e) => return Err(e),
        }
    }
    Ok((taken, session.wants_write()))
}

/// Encrypts `chunk` and writes the records, waiting for room as needed.
#[cfg(feature = "tls")]
async fn send_tls(
    tls: &parking_lot::Mutex<rustls::ClientConnection>,
    write: &OwnedWriteHalf,
    chunk: &mut BytesMut,
    stop: impl Fn() -> bool,
) -> Result<(), Error> {
    use std::io::Write;

    loop {
        let pending = {
            let mut session = tls.lock();
            if !chunk.is_empty() {
                let n = session
                    .writer()
                    .write(chunk)
                    .map_err(|e| Error::new(ErrorKind::Connection, "encrypt").with_source(e))?;
                chunk.advance(n);
            }
            while session.wants_write() {
                match session.write_tls(&mut TryWrite(write)) {
                    Ok(0) => return Err(write_zero()),
                    Ok(_) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                    Err(e) => return Err(write_failed(e)),
                }
            }
            session.wants_write()
        };
        if !pending && chunk.is_empty() {
            return Ok(());
        }
        write.writable().await.map_err(write_failed)?;
        if stop() {
            return Ok(());
        }
    }
}
