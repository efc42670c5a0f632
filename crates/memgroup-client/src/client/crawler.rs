//! Key enumeration with memcached's LRU crawler (`lru_crawler metadump`),
//! the first step of warming a new server group, checked against the
//! server's own count.
//!
//! The reply format and its decoder live in `memgroup-proto`
//! ([`MetadumpDecoder`]); this module only moves the bytes. memcached refuses
//! commands pipelined behind the dump, so each dump gets a connection of its
//! own.
//!
//! `metadump all` walks the LRUs and misses items that move between them
//! while it walks: on a server serving reads (a warm's source always is) it
//! listed 401 of 500 keys, 2,800 of 3,000. `metadump hash` (memcached
//! 1.6.9 and later) walks the hash table instead, where items do not move;
//! it is used wherever the server accepts it, and `all` where it answers
//! `BADCLASS`. Either can still list a key twice; callers de-duplicate.
//!
//! [`Client::list_keys`] checks each listing: it asks the crawler to
//! reclaim expired items first (`lru_crawler crawl all`), reads
//! `curr_items` just before and just after the dump, and calls a listing
//! short when it names fewer distinct keys than the lower of the two. A
//! short listing is listed again once; if still short, the [`Listing`] says
//! so and the caller reports it.

use std::collections::HashSet;
use std::time::Duration;

use bytes::BytesMut;
use memgroup_proto::{DumpLine, MetadumpDecoder};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::client::Client;
use crate::clock::now;
use crate::conn::{self, ConnSettings, Stream};
use crate::error::{Error, ErrorKind};

pub use memgroup_proto::DumpEntry;

/// How long to wait before asking again while another crawl runs.
const BUSY_RETRY: Duration = Duration::from_millis(50);

/// How a listing walked the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ListMethod {
    /// `lru_crawler metadump hash`: the hash table (memcached ≥ 1.6.9).
    Hash,
    /// `lru_crawler metadump all`: the LRUs (older servers).
    All,
}

impl ListMethod {
    /// The argument of `lru_crawler metadump`.
    pub fn name(self) -> &'static str {
        match self {
            ListMethod::Hash => "hash",
            ListMethod::All => "all",
        }
    }
}

/// One server's keys, and how far the listing can be trusted.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Listing {
    /// The server (`host:port`).
    pub server: String,
    /// Every key listed, once each, in the server's order.
    pub entries: Vec<DumpEntry>,
    /// How the server was walked.
    pub method: ListMethod,
    /// The server's `curr_items` just before and just after the last dump.
    pub curr_items: (u64, u64),
    /// Dumps taken (2 when the first was short).
    pub attempts: u32,
}

impl Listing {
    /// The fewest keys a complete listing names: the lower `curr_items`.
    pub fn expected(&self) -> u64 {
        self.curr_items.0.min(self.curr_items.1)
    }

    /// Whether the listing names at least [`expected`](Listing::expected)
    /// keys. A short one missed keys the server holds.
    pub fn is_complete(&self) -> bool {
        self.entries.len() as u64 >= self.expected()
    }
}

impl Client {
    /// Lists every key of `server` (`host:port`, one of the cluster's) with
    /// `lru_crawler metadump hash` (`all` where the server lacks it), on a
    /// connection of its own opened as the client's connections to that
    /// server are (TLS, login). At most `max_keys` entries: a server that
    /// keeps listing keys (a hostile or broken one) fails the dump instead
    /// of growing memory without bound. `timeout` bounds each wait for
    /// progress (connecting, logging in, each read of the dump, and
    /// retrying while another crawl runs, `BUSY`), not the whole dump, which
    /// on a large server takes as long as it takes. Unchecked; see [`Client::list_keys`].
    pub async fn metadump(
        &self,
        server: &str,
        timeout: Duration,
        max_keys: usize,
    ) -> Result<Vec<DumpEntry>, Error> {
        let snap = self.snapshot();
        let id = snap.server_by_name(server)?;
        Ok(dump(server, snap.settings(id), timeout, max_keys).await?.0)
    }

    /// Lists every key of `server` and checks the listing against the
    /// server's own count (see the [module docs](self)): expired items are
    /// reclaimed first, a short listing is taken again once, and the
    /// [`Listing`] says whether the last one is complete. At most
    /// `max_keys` entries per dump.
    pub async fn list_keys(
        &self,
        server: &str,
        timeout: Duration,
        max_keys: usize,
    ) -> Result<Listing, Error> {
        let snap = self.snapshot();
        let id = snap.server_by_name(server)?;
        let settings = ConnSettings {
            connect_timeout: timeout,
            ..snap.settings(id).clone()
        };
        // Reclaim expired items, so curr_items counts only live ones; the
        // dump below waits (BUSY) until that crawl is done. Its connection
        // is its own: whatever the server answers, the counts are read apart.
        Control::open(server, &settings, timeout)
            .await?
            .line(b"lru_crawler crawl all\r\n")
            .await?;
        // One connection beside the dumps for the counts before and after.
        let mut counts = Control::open(server, &settings, timeout).await?;
        let mut attempts = 0;
        loop {
            attempts += 1;
            let before = counts.curr_items().await?;
            let (entries, method) = dump(server, &settings, timeout, max_keys).await?;
            let after = counts.curr_items().await?;
            let listing = Listing {
                server: server.to_string(),
                entries: distinct(entries),
                method,
                curr_items: (before, after),
                attempts,
            };
            if listing.is_complete() || attempts >= 2 {
                return Ok(listing);
            }
        }
    }
}

/// The entries with repeated keys dropped (the crawler can list one twice).
fn distinct(entries: Vec<DumpEntry>) -> Vec<DumpEntry> {
    let mut seen = HashSet::with_capacity(entries.len());
    entries
        .into_iter()
        .filter(|e| seen.insert(e.key.clone()))
        .collect()
}

/// The crawler's connection beside the dumps: `lru_crawler crawl` and
/// `stats`, one command at a time.
struct Control<'a> {
    stream: Stream,
    buf: BytesMut,
    server: &'a str,
    timeout: Duration,
}

impl<'a> Control<'a> {
    async fn open(
        server: &'a str,
        settings: &ConnSettings,
        timeout: Duration,
    ) -> Result<Control<'a>, Error> {
        Ok(Control {
            stream: conn::open(server, settings).await?,
            buf: BytesMut::with_capacity(8 * 1024),
            server,
            timeout,
        })
    }

    async fn write(&mut self, line: &[u8]) -> Result<(), Error> {
        let stream = &mut self.stream;
        within(self.timeout, "writing the command", async {
            stream
                .write_all(line)
                .await
                .map_err(io_error("write failed"))
        })
        .await
    }

    /// More of the reply into the buffer.
    async fn read_more(&mut self, what: &str) -> Result<(), Error> {
        let (stream, buf) = (&mut self.stream, &mut self.buf);
        let n = within(self.timeout, what, async {
            stream.read_buf(buf).await.map_err(io_error("read failed"))
        })
        .await?;
        if n == 0 {
            return Err(Error::new(ErrorKind::Connection, "connection closed").at(self.server));
        }
        Ok(())
    }

    /// Sends `line` and returns the first line of its reply (`OK`, or
    /// `BUSY …` while a crawl runs).
    async fn line(&mut self, line: &[u8]) -> Result<String, Error> {
        self.write(line).await?;
        loop {
            if let Some(end) = self.buf.iter().position(|&b| b == b'\n') {
                let reply = self.buf.split_to(end + 1);
                return Ok(String::from_utf8_lossy(&reply).trim_end().to_string());
            }
            if self.buf.len() > 1024 {
                return Err(Error::new(ErrorKind::Protocol, "reply line too long").at(self.server));
            }
            self.read_more("waiting for the reply").await?;
        }
    }

    /// The server's `curr_items` (`stats`).
    async fn curr_items(&mut self) -> Result<u64, Error> {
        self.write(b"stats\r\n").await?;
        let mut decoder = memgroup_proto::Decoder::default();
        loop {
            let reply = decoder
                .decode(&mut self.buf, memgroup_proto::Expect::Stats)
                .map_err(|e| {
                    Error::new(ErrorKind::Protocol, "bad stats reply")
                        .with_source(e)
                        .at(self.server)
                })?;
            if let Some(reply) = reply {
                let memgroup_proto::Response::Stats(stats) = reply else {
                    return Err(Error::new(ErrorKind::Protocol, "stats refused").at(self.server));
                };
                return stats
                    .iter()
                    .find(|s| s.name_str() == "curr_items")
                    .and_then(|s| s.value_str().parse().ok())
                    .ok_or_else(|| {
                        Error::new(ErrorKind::Protocol, "stats without curr_items").at(self.server)
                    });
            }
            self.read_more("waiting for stats").await?;
        }
    }
}

fn io_error(what: &'static str) -> impl Fn(std::io::Error) -> Error {
    move |e| Error::new(ErrorKind::Connection, what).with_source(e)
}

/// A dump by hash where the server accepts it, else by LRU, retrying while
/// the crawler is busy.
async fn dump(
    server: &str,
    settings: &ConnSettings,
    timeout: Duration,
    max_keys: usize,
) -> Result<(Vec<DumpEntry>, ListMethod), Error> {
    let settings = ConnSettings {
        connect_timeout: timeout,
        ..settings.clone()
    };
    let mut method = ListMethod::Hash;
    let busy_until = now() + timeout;
    loop {
        match dump_once(server, &settings, timeout, max_keys, method).await {
            Ok(Dumped::Keys(keys)) => return Ok((keys, method)),
            // Before 1.6.9 `hash` is not a class memcached knows.
            Ok(Dumped::BadClass) if method == ListMethod::Hash => method = ListMethod::All,
            Ok(Dumped::BadClass) => {
                return Err(Error::new(ErrorKind::Server, "metadump refused: BADCLASS").at(server));
            }
            Ok(Dumped::Busy) if now() < busy_until => {
                tokio::time::sleep(BUSY_RETRY).await;
            }
            Ok(Dumped::Busy) => {
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

/// What one dump got.
enum Dumped {
    Keys(Vec<DumpEntry>),
    /// Another crawl is running.
    Busy,
    /// The server does not know the class asked for.
    BadClass,
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

/// One dump by `method`.
async fn dump_once(
    server: &str,
    settings: &ConnSettings,
    timeout: Duration,
    max_keys: usize,
    method: ListMethod,
) -> Result<Dumped, Error> {
    let io = io_error;
    let mut stream = conn::open(server, settings).await?;
    let line = format!("lru_crawler metadump {}\r\n", method.name());
    within(timeout, "writing the command", async {
        stream
            .write_all(line.as_bytes())
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
            Some(DumpLine::End) => return Ok(Dumped::Keys(keys)),
            Some(DumpLine::Busy(_)) => return Ok(Dumped::Busy),
            Some(DumpLine::Refused(text)) if text.starts_with("BADCLASS") => {
                return Ok(Dumped::BadClass);
            }
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
