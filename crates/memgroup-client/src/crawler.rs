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

/// Lists every key of one server. Retries while another crawl is running
/// (`BUSY`), within `timeout` overall.
pub async fn metadump(server: &str, timeout: Duration) -> Result<Vec<DumpEntry>, Error> {
    metadump_with(server, timeout, None).await
}

/// [`metadump`] on a server that wants a login first.
pub async fn metadump_with(
    server: &str,
    timeout: Duration,
    credentials: Option<&Credentials>,
) -> Result<Vec<DumpEntry>, Error> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        match tokio::time::timeout_at(deadline, dump_once(server, credentials, timeout)).await {
            Err(_) => {
                return Err(
                    Error::new(ErrorKind::Timeout, "lru_crawler metadump timed out").at(server),
                );
            }
            Ok(Ok(Some(keys))) => return Ok(keys),
            Ok(Ok(None)) => tokio::time::sleep(BUSY_RETRY).await,
            Ok(Err(e)) => return Err(e.at(server)),
        }
    }
}

/// One dump; `Ok(None)` when the crawler is busy.
async fn dump_once(
    server: &str,
    credentials: Option<&Credentials>,
    timeout: Duration,
) -> Result<Option<Vec<DumpEntry>>, Error> {
    let io = |what: &'static str| {
        move |e: std::io::Error| Error::new(ErrorKind::Connection, what).with_source(e)
    };
    let mut stream = TcpStream::connect(server)
        .await
        .map_err(io("connect failed"))?;
    if let Some(credentials) = credentials {
        authenticate(&mut stream, credentials, server, timeout).await?;
    }
    stream
        .write_all(b"lru_crawler metadump all\r\n")
        .await
        .map_err(io("write failed"))?;
    let mut decoder = MetadumpDecoder::default();
    // Room for many dump lines per read (each is ~100 bytes).
    let mut buf = BytesMut::with_capacity(64 * 1024);
    let mut keys = Vec::new();
    loop {
        let line = decoder
            .decode(&mut buf)
            .map_err(|e| Error::new(ErrorKind::Protocol, "bad metadump reply").with_source(e))?;
        match line {
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
                if stream.read_buf(&mut buf).await.map_err(io("read failed"))? == 0 {
                    return Err(Error::new(
                        ErrorKind::Connection,
                        "connection closed during metadump",
                    ));
                }
            }
        }
    }
}
