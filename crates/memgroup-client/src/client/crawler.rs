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

use crate::client::Client;
use crate::clock::now;
use crate::conn::{self, ConnSettings};
use crate::error::{Error, ErrorKind};

pub use memgroup_proto::DumpEntry;

/// How long to wait before asking again while another crawl runs.
const BUSY_RETRY: Duration = Duration::from_millis(50);

/// Lists every key of one server, over plain TCP without a login (for a
/// server of a client's cluster, [`Client::metadump`] uses the client's TLS
/// and credentials). `timeout` bounds every wait for the server to make
/// progress (connecting, logging in, each read of the dump, and retrying
/// while another crawl runs, `BUSY`), not the whole dump, which on a large
/// server takes as long as it takes: a server that stops talking fails
/// within `timeout`.
pub async fn metadump(server: &str, timeout: Duration) -> Result<Vec<DumpEntry>, Error> {
    dump(server, &ConnSettings::default(), timeout, usize::MAX).await
}

impl Client {
    /// Lists every key of `server` (`host:port`, one of the cluster's) with
    /// `lru_crawler metadump all`, on a connection of its own opened as the
    /// client's connections to that server are (TLS, login). At most
    /// `max_keys` entries: a server that keeps listing keys (a hostile or
    /// broken one) fails the dump instead of growing memory without bound;
    /// the warmer derives the bound from the server's own `curr_items`.
    /// `timeout` bounds each wait for progress, as for [`metadump`].
    pub async fn metadump(
        &self,
        server: &str,
        timeout: Duration,
        max_keys: usize,
    ) -> Result<Vec<DumpEntry>, Error> {
        let snap = self.snapshot();
        let id = snap.server_by_name(server)?;
        dump(server, snap.settings(id), timeout, max_keys).await
    }
}

async fn dump(
    server: &str,
    settings: &ConnSettings,
    timeout: Duration,
    max_keys: usize,
) -> Result<Vec<DumpEntry>, Error> {
    let settings = ConnSettings {
        connect_timeout: timeout,
        ..settings.clone()
    };
    let busy_until = now() + timeout;
    loop {
        match dump_once(server, &settings, timeout, max_keys).await {
            Ok(Some(keys)) => return Ok(keys),
            Ok(None) if now() < busy_until => {
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
    settings: &ConnSettings,
    timeout: Duration,
    max_keys: usize,
) -> Result<Option<Vec<DumpEntry>>, Error> {
    let io = |what: &'static str| {
        move |e: std::io::Error| Error::new(ErrorKind::Connection, what).with_source(e)
    };
    let mut stream = conn::open(server, settings).await?;
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
