//! Key enumeration with memcached's LRU crawler (`lru_crawler metadump all`),
//! the first step of warming a new server group.
//!
//! The reply format and its decoder live in `memgroup-proto`
//! ([`MetadumpDecoder`]); this module only moves the bytes. memcached refuses
//! commands pipelined behind the dump, so each dump gets a connection of its
//! own. The crawler skips items a concurrent request holds locked and can list
//! a key twice when an item moves between LRUs: callers must de-duplicate, and
//! dump again to catch what one pass missed (the `warm` command does both).

use std::time::Duration;

use bytes::BytesMut;
use memgroup_proto::{DumpLine, MetadumpDecoder};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::auth::{Credentials, authenticate};
use crate::error::{Error, ErrorKind};

pub use memgroup_proto::DumpEntry;

/// How long to wait before asking again while another crawl runs.
const BUSY_RETRY: Duration = Duration::from_millis(50);

/// Lists every key of one server. `timeout` bounds every wait for the
/// server to make progress (connecting, logging in, each read of the dump,
/// and retrying while another crawl runs, `BUSY`), not the whole dump, which
/// on a large server takes as long as it takes: a server that stops talking
/// fails within `timeout`.
pub async fn metadump(server: &str, timeout: Duration) -> Result<Vec<DumpEntry>, Error> {
    metadump_with(server, timeout, None, usize::MAX).await
}

/// [`metadump`] on a server that may want a login first, listing at most
/// `max_keys` entries: a server that keeps listing keys (a hostile or broken
/// one) fails the dump instead of growing memory without bound. The warmer
/// derives the bound from the server's own `curr_items`.
pub async fn metadump_with(
    server: &str,
    timeout: Duration,
    credentials: Option<&Credentials>,
    max_keys: usize,
) -> Result<Vec<DumpEntry>, Error> {
    let busy_until = tokio::time::Instant::now() + timeout;
    loop {
        match dump_once(server, credentials, timeout, max_keys).await {
            Ok(Some(keys)) => return Ok(keys),
            Ok(None) if tokio::time::Instant::now() < busy_until => {
                tokio::time::sleep(BUSY_RETRY).await;
            }
            Ok(None) => {
                return Err(Error::new(
                    ErrorKind::Timeout,
                    format!("lru_crawler stayed busy for {timeout:?}"),
                )
                .at(server));
            }
            Err(e) => return Err(e.at(server)),
        }
    }
}

/// `future` within `timeout`, or a timeout error saying what was awaited.
async fn within<T>(
    timeout: Duration,
    what: &str,
    future: impl std::future::Future<Output = Result<T, Error>>,
) -> Result<T, Error> {
    tokio::time::timeout(timeout, future)
        .await
        .unwrap_or_else(|_| {
            Err(Error::new(
                ErrorKind::Timeout,
                format!("metadump: {what} timed out after {timeout:?}"),
            ))
        })
}

/// One dump; `Ok(None)` when the crawler is busy.
async fn dump_once(
    server: &str,
    credentials: Option<&Credentials>,
    timeout: Duration,
    max_keys: usize,
) -> Result<Option<Vec<DumpEntry>>, Error> {
    let io = |what: &'static str| {
        move |e: std::io::Error| Error::new(ErrorKind::Connection, what).with_source(e)
    };
    let mut stream = within(timeout, "connecting", async {
        TcpStream::connect(server)
            .await
            .map_err(io("connect failed"))
    })
    .await?;
    if let Some(credentials) = credentials {
        authenticate(&mut stream, credentials, server, timeout).await?;
    }
    within(timeout, "writing the command", async {
        stream
            .write_all(b"lru_crawler metadump all\r\n")
            .await
            .map_err(io("write failed"))
    })
    .await?;
    let mut decoder = MetadumpDecoder::default();
    // Room for many dump lines per read (each is ~100 bytes).
    let mut buf = BytesMut::with_capacity(64 * 1024);
    let mut keys = Vec::new();
    loop {
        let line = decoder
            .decode(&mut buf)
            .map_err(|e| Error::new(ErrorKind::Protocol, "bad metadump reply").with_source(e))?;
        match line {
            Some(DumpLine::Entry(_)) if keys.len() >= max_keys => {
                return Err(Error::new(
                    ErrorKind::Protocol,
                    format!("metadump listed more than {max_keys} keys"),
                ));
            }
            Some(DumpLine::Entry(entry)) => keys.push(entry),
            Some(DumpLine::End) => return Ok(Some(keys)),
            Some(DumpLine::Busy(_)) => return Ok(None),
            Some(DumpLine::Refused(text)) => {
                return Err(Error::new(
                    ErrorKind::Server,
                    format!("metadump refused: {text}"),
                ));
            }
            None => {
                if buf.capacity() - buf.len() < 4096 {
                    buf.reserve(64 * 1024);
                }
                let read = within(timeout, "waiting for the dump", async {
                    stream.read_buf(&mut buf).await.map_err(io("read failed"))
                })
                .await?;
                if read == 0 {
                    return Err(Error::new(
                        ErrorKind::Connection,
                        "connection closed during metadump",
                    ));
                }
            }
        }
    }
}
