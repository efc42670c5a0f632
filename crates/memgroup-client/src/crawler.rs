//! Key enumeration with memcached's LRU crawler (`lru_crawler metadump all`),
//! the first step of warming a new server group.
//!
//! memcached answers the dump with one line per item,
//! `key=<url-encoded key> exp=<unix time or -1> la=<…> cas=<…> fetch=<…> cls=<…> size=<…>`,
//! ended by `\n` alone, then `END\r\n`. It refuses commands pipelined behind
//! the dump, so each dump gets a connection of its own. The crawler skips
//! items a concurrent request holds locked and can list a key twice when an
//! item moves between LRUs: callers must de-duplicate, and dump again to
//! catch what one pass missed (the `warm` command does both).

use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use crate::error::{Error, ErrorKind};

/// One item listed by the crawler.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DumpedKey {
    /// The key, URL-decoded: the bytes to request it with.
    pub key: Vec<u8>,
    /// Absolute expiry as a Unix time in the server's clock; `None` for never.
    pub exp: Option<i64>,
    /// The item's size in memory (key, value and overhead).
    pub size: u64,
}

/// The longest dump line accepted (a 250-byte key encodes to at most 750).
const MAX_LINE: usize = 4096;

/// Lists every key of one server. Retries while another crawl is running
/// (`BUSY`), within `timeout` overall.
pub async fn metadump(server: &str, timeout: Duration) -> Result<Vec<DumpedKey>, Error> {
    let deadline = Instant::now() + timeout;
    loop {
        let attempt = tokio::time::timeout_at(deadline.into(), dump_once(server)).await;
        match attempt {
            Err(_) => {
                return Err(
                    Error::new(ErrorKind::Timeout, "lru_crawler metadump timed out").at(server),
                );
            }
            Ok(Err(Busy)) => tokio::time::sleep(Duration::from_millis(50)).await,
            Ok(Ok(result)) => return result,
        }
    }
}

struct Busy;

async fn dump_once(server: &str) -> Result<Result<Vec<DumpedKey>, Error>, Busy> {
    let stream = match TcpStream::connect(server).await {
        Ok(s) => s,
        Err(e) => {
            return Ok(Err(Error::new(ErrorKind::Connection, "connect failed")
                .at(server)
                .with_source(e)));
        }
    };
    let mut stream = BufReader::new(stream);
    if let Err(e) = stream
        .get_mut()
        .write_all(b"lru_crawler metadump all\r\n")
        .await
    {
        return Ok(Err(Error::new(ErrorKind::Connection, "write failed")
            .at(server)
            .with_source(e)));
    }
    let mut keys = Vec::new();
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = match (&mut stream)
            .take(MAX_LINE as u64 + 1)
            .read_until(b'\n', &mut line)
            .await
        {
            Ok(n) => n,
            Err(e) => {
                return Ok(Err(Error::new(ErrorKind::Connection, "read failed")
                    .at(server)
                    .with_source(e)));
            }
        };
        if n == 0 {
            return Ok(Err(Error::new(
                ErrorKind::Connection,
                "connection closed during metadump",
            )
            .at(server)));
        }
        if line.last() != Some(&b'\n') {
            return Ok(Err(Error::new(
                ErrorKind::Protocol,
                "metadump line too long",
            )
            .at(server)));
        }
        let text = line.strip_suffix(b"\n").unwrap_or(&line);
        let text = text.strip_suffix(b"\r").unwrap_or(text);
        match text {
            b"END" => return Ok(Ok(keys)),
            t if t.starts_with(b"BUSY") => return Err(Busy),
            t if t.starts_with(b"key=") => match parse_line(t) {
                Some(k) => keys.push(k),
                None => {
                    let shown = String::from_utf8_lossy(t).into_owned();
                    return Ok(Err(Error::new(
                        ErrorKind::Protocol,
                        format!("bad metadump line {shown:?}"),
                    )
                    .at(server)));
                }
            },
            t => {
                let shown = String::from_utf8_lossy(t).into_owned();
                return Ok(Err(Error::new(
                    ErrorKind::Server,
                    format!("metadump refused: {shown}"),
                )
                .at(server)));
            }
        }
    }
}

/// Parses `key=… exp=… … size=…`.
fn parse_line(line: &[u8]) -> Option<DumpedKey> {
    let mut key = None;
    let mut exp = None;
    let mut size = 0;
    for field in line.split(|&b| b == b' ') {
        let text = std::str::from_utf8(field).ok()?;
        let (name, value) = text.split_once('=')?;
        match name {
            "key" => key = Some(url_decode(value.as_bytes())?),
            "exp" => exp = Some(value.parse::<i64>().ok()?),
            "size" => size = value.parse().ok()?,
            _ => {}
        }
    }
    Some(DumpedKey {
        key: key?,
        exp: exp.filter(|&e| e >= 0),
        size,
    })
}

/// Decodes `%XX` escapes (memcached's URI encoding of keys).
pub fn url_decode(text: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(text.len());
    let mut i = 0;
    while i < text.len() {
        if text[i] == b'%' {
            let hex = text.get(i + 1..i + 3)?;
            let hex = std::str::from_utf8(hex).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(text[i]);
            i += 1;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_dump_lines() {
        let k =
            parse_line(b"key=a%3Ab%25c exp=-1 la=1796065939 cas=1 fetch=no cls=1 size=69").unwrap();
        assert_eq!(
            k,
            DumpedKey {
                key: b"a:b%c".to_vec(),
                exp: None,
                size: 69
            }
        );
        let k = parse_line(b"key=ttl exp=1796066039 la=1 cas=2 fetch=no cls=1 size=68").unwrap();
        assert_eq!(k.exp, Some(1_796_066_039));
        assert_eq!(parse_line(b"key=%zz exp=1"), None);
        assert_eq!(parse_line(b"exp=1 size=2"), None);
        assert_eq!(url_decode(b"%C3%A9"), Some("é".as_bytes().to_vec()));
        assert_eq!(url_decode(b"%4"), None);
    }
}
