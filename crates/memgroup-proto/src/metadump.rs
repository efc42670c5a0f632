//! The reply to `lru_crawler metadump`: one line per item, then `END`.
//!
//! ```text
//! key=user%3A42 exp=-1 la=1796065939 cas=7 fetch=no cls=1 size=69\n
//! key=ttl exp=1796066039 la=1796065940 cas=8 fetch=yes cls=1 size=68\n
//! END\r\n
//! ```
//!
//! Keys are URL-encoded (`%XX`); `exp` is an absolute Unix time in the
//! server's clock, `-1` for never; item lines end with a bare `\n`. A crawl
//! already running answers `BUSY …`, a refused command `ERROR …`,
//! `BADCLASS …` (a class it does not know) or `CLIENT_ERROR …`. Fields memgroup does not know are skipped, so a newer
//! memcached that adds one still parses.

use bytes::BytesMut;

use crate::decode::{ProtoError, malformed};

/// The longest metadump line accepted by default (a 250-byte key encodes to at
/// most 750 bytes; the other fields take under 150).
pub const DEFAULT_MAX_DUMP_LINE: usize = 4096;

/// One item listed by the crawler.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DumpEntry {
    /// The key, URL-decoded: the bytes to request it with. Not validated: a
    /// server can list keys no client could have stored.
    pub key: Vec<u8>,
    /// Absolute expiry as a Unix time in the server's clock; `None` for never.
    pub exp: Option<i64>,
    /// Last access, as a Unix time in the server's clock.
    pub last_access: u64,
    /// The CAS unique.
    pub cas: u64,
    /// Whether the item was fetched since it was stored.
    pub fetched: bool,
    /// The slab class.
    pub class: u32,
    /// The item's size in memory (key, value and overhead).
    pub size: u64,
}

/// One line of a metadump reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DumpLine {
    /// An item.
    Entry(DumpEntry),
    /// The end of the dump.
    End,
    /// Another crawl is running; try again later. Holds the server's text.
    Busy(String),
    /// The server refused the command (`ERROR`, `CLIENT_ERROR`, …). Holds its text.
    Refused(String),
}

/// The incremental decoder of a metadump reply. Like [`Decoder`](crate::Decoder),
/// `Ok(None)` means "more bytes", an `Err` means the stream is corrupt, and a
/// line longer than the limit is refused before it is buffered further.
///
/// ```
/// use bytes::BytesMut;
/// use memgroup_proto::{DumpLine, MetadumpDecoder};
///
/// let mut dec = MetadumpDecoder::default();
/// let mut buf = BytesMut::from(&b"key=a%20b exp=-1 la=5 cas=1 fetch=no cls=1 size=66\nEN"[..]);
/// let Some(DumpLine::Entry(entry)) = dec.decode(&mut buf).unwrap() else { panic!() };
/// assert_eq!(entry.key, b"a b");
/// assert_eq!(dec.decode(&mut buf).unwrap(), None);
/// buf.extend_from_slice(b"D\r\n");
/// assert_eq!(dec.decode(&mut buf).unwrap(), Some(DumpLine::End));
/// ```
#[derive(Debug, Clone)]
pub struct MetadumpDecoder {
    max_line: usize,
    /// How far the buffer has been searched for `\n` without finding one.
    scanned: usize,
}

impl Default for MetadumpDecoder {
    fn default() -> Self {
        MetadumpDecoder::new(DEFAULT_MAX_DUMP_LINE)
    }
}

impl MetadumpDecoder {
    /// A decoder refusing lines longer than `max_line` bytes.
    pub fn new(max_line: usize) -> Self {
        MetadumpDecoder {
            max_line,
            scanned: 0,
        }
    }

    /// Takes the next complete line off `buf`.
    pub fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<DumpLine>, ProtoError> {
        let Some(at) = buf[self.scanned..].iter().position(|&b| b == b'\n') else {
            self.scanned = buf.len();
            if buf.len() > self.max_line {
                return Err(ProtoError::LineTooLong {
                    limit: self.max_line,
                });
            }
            return Ok(None);
        };
        let end = self.scanned + at;
        self.scanned = 0;
        if end > self.max_line {
            return Err(ProtoError::LineTooLong {
                limit: self.max_line,
            });
        }
        let line = buf.split_to(end + 1);
        let line = &line[..end];
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        parse_line(line).map(Some)
    }
}

/// Parses one metadump line (without its line ending).
fn parse_line(line: &[u8]) -> Result<DumpLine, ProtoError> {
    if line == b"END" {
        return Ok(DumpLine::End);
    }
    let text = || String::from_utf8_lossy(line).into_owned();
    if line.starts_with(b"BUSY") {
        return Ok(DumpLine::Busy(text()));
    }
    if !line.starts_with(b"key=") {
        // BADCLASS: a class the server does not know (`hash` before 1.6.9).
        if line.starts_with(b"ERROR")
            || line.starts_with(b"CLIENT_ERROR")
            || line.starts_with(b"SERVER_ERROR")
            || line.starts_with(b"BADCLASS")
        {
            return Ok(DumpLine::Refused(text()));
        }
        return Err(malformed("not a metadump line", line));
    }
    parse_entry(line).map(DumpLine::Entry)
}

fn parse_entry(line: &[u8]) -> Result<DumpEntry, ProtoError> {
    fn number<T: std::str::FromStr>(value: &[u8], line: &[u8]) -> Result<T, ProtoError> {
        std::str::from_utf8(value)
            .ok()
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| malformed("bad number in metadump line", line))
    }
    let (mut key, mut exp, mut la, mut cas, mut fetch, mut cls, mut size) =
        (None, None, None, None, None, None, None);
    for field in line.split(|&b| b == b' ') {
        let Some(eq) = field.iter().position(|&b| b == b'=') else {
            return Err(malformed("metadump field without '='", line));
        };
        let (name, value) = (&field[..eq], &field[eq + 1..]);
        let slot_taken = match name {
            b"key" => key
                .replace(
                    percent_decode(value).ok_or_else(|| malformed("bad %-escape in key", line))?,
                )
                .is_some(),
            b"exp" => exp.replace(number::<i64>(value, line)?).is_some(),
            b"la" => la.replace(number::<u64>(value, line)?).is_some(),
            b"cas" => cas.replace(number::<u64>(value, line)?).is_some(),
            b"fetch" => fetch
                .replace(match value {
                    b"yes" => true,
                    b"no" => false,
                    _ => return Err(malformed("fetch is neither yes nor no", line)),
                })
                .is_some(),
            b"cls" => cls.replace(number::<u32>(value, line)?).is_some(),
            b"size" => size.replace(number::<u64>(value, line)?).is_some(),
            _ => false,
        };
        if slot_taken {
            return Err(malformed("metadump field repeated", line));
        }
    }
    match (key, exp, la, cas, fetch, cls, size) {
        (
            Some(key),
            Some(exp),
            Some(last_access),
            Some(cas),
            Some(fetched),
            Some(class),
            Some(size),
        ) => Ok(DumpEntry {
            key,
            exp: (exp >= 0).then_some(exp),
            last_access,
            cas,
            fetched,
            class,
            size,
        }),
        _ => Err(malformed("metadump line lacks a field", line)),
    }
}

/// Decodes `%XX` escapes (memcached's URI encoding of dumped keys, and the
/// userinfo of `memcache://` URLs); `None` on a truncated or non-hex escape.
///
/// ```
/// assert_eq!(memgroup_proto::percent_decode(b"a%3Ab%25"), Some(b"a:b%".to_vec()));
/// assert_eq!(memgroup_proto::percent_decode(b"%4"), None);
/// ```
pub fn percent_decode(text: &[u8]) -> Option<Vec<u8>> {
    fn hex(b: u8) -> Option<u8> {
        match b {
            b'0'..=b'9' => Some(b - b'0'),
            b'a'..=b'f' => Some(b - b'a' + 10),
            b'A'..=b'F' => Some(b - b'A' + 10),
            _ => None,
        }
    }
    let mut out = Vec::with_capacity(text.len());
    let mut i = 0;
    while i < text.len() {
        if text[i] == b'%' {
            let hi = hex(*text.get(i + 1)?)?;
            let lo = hex(*text.get(i + 2)?)?;
            out.push(hi << 4 | lo);
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
    use proptest::prelude::*;

    use super::*;

    fn entry(key: &[u8], exp: Option<i64>) -> DumpEntry {
        DumpEntry {
            key: key.to_vec(),
            exp,
            last_access: 1_796_065_939,
            cas: 7,
            fetched: false,
            class: 1,
            size: 69,
        }
    }

    /// memcached's encoding of a dumped key: every byte outside
    /// `[A-Za-z0-9._~-]` as `%XX` (1.6's `uriencode`).
    fn encode(key: &[u8]) -> String {
        key.iter()
            .map(|&b| {
                if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                    (b as char).to_string()
                } else {
                    format!("%{b:02X}")
                }
            })
            .collect()
    }

    fn line(e: &DumpEntry) -> String {
        format!(
            "key={} exp={} la={} cas={} fetch={} cls={} size={}\n",
            encode(&e.key),
            e.exp.unwrap_or(-1),
            e.last_access,
            e.cas,
            if e.fetched { "yes" } else { "no" },
            e.class,
            e.size
        )
    }

    #[test]
    fn parses_lines_captured_from_memcached_1_6() {
        let got = parse_line(b"key=a%3Ab%25c exp=-1 la=1796065939 cas=7 fetch=no cls=1 size=69");
        assert_eq!(got, Ok(DumpLine::Entry(entry(b"a:b%c", None))));
        let got = parse_line(b"key=ttl exp=1796066039 la=1796065939 cas=7 fetch=no cls=1 size=69");
        assert_eq!(got, Ok(DumpLine::Entry(entry(b"ttl", Some(1_796_066_039)))));
        assert_eq!(parse_line(b"END"), Ok(DumpLine::End));
        assert!(matches!(
            parse_line(b"BUSY currently processing crawler request"),
            Ok(DumpLine::Busy(_))
        ));
        assert!(matches!(parse_line(b"ERROR"), Ok(DumpLine::Refused(_))));
        assert!(matches!(
            parse_line(b"BADCLASS invalid class id"),
            Ok(DumpLine::Refused(t)) if t == "BADCLASS invalid class id"
        ));
        // A field from a newer server is skipped.
        let got = parse_line(b"key=k exp=-1 la=1796065939 cas=7 fetch=no cls=1 size=69 flags=3");
        assert_eq!(got, Ok(DumpLine::Entry(entry(b"k", None))));
    }

    #[test]
    fn malformed_lines_are_typed_errors_naming_the_line() {
        for bad in [
            &b"key=%zz exp=-1 la=1 cas=1 fetch=no cls=1 size=1"[..],
            b"key=%4 exp=-1 la=1 cas=1 fetch=no cls=1 size=1",
            b"key=k exp=x la=1 cas=1 fetch=no cls=1 size=1",
            b"key=k exp=-1 la=1 cas=1 fetch=maybe cls=1 size=1",
            b"key=k exp=-1 la=1 cas=1 fetch=no cls=1",
            b"key=k key=j exp=-1 la=1 cas=1 fetch=no cls=1 size=1",
            b"key=k exp=-1 la=1 cas=1 fetch=no cls=1 size=1 junk",
            b"hello",
        ] {
            match parse_line(bad) {
                Err(ProtoError::Malformed { line, .. }) => {
                    assert_eq!(line.as_bytes(), &bad[..bad.len().min(80)]);
                }
                other => panic!("{:?}: {other:?}", String::from_utf8_lossy(bad)),
            }
        }
    }

    #[test]
    fn a_line_of_exactly_the_limit_is_read_one_more_is_not() {
        let line = b"key=k exp=-1 la=1 cas=1 fetch=no cls=1 size=1";
        let n = line.len();
        // Waiting for the end of a line as long as the limit.
        let mut dec = MetadumpDecoder::new(n);
        let mut buf = BytesMut::from(&line[..]);
        assert_eq!(dec.decode(&mut buf), Ok(None));
        buf.extend_from_slice(b"\n");
        assert!(matches!(dec.decode(&mut buf), Ok(Some(DumpLine::Entry(_)))));
        // One byte over, with or without its end.
        let mut dec = MetadumpDecoder::new(n - 1);
        let mut buf = BytesMut::from(&line[..]);
        assert_eq!(
            dec.decode(&mut buf),
            Err(ProtoError::LineTooLong { limit: n - 1 })
        );
        let mut dec = MetadumpDecoder::new(n - 1);
        let mut buf = BytesMut::from(&line[..]);
        buf.extend_from_slice(b"\n");
        assert_eq!(
            dec.decode(&mut buf),
            Err(ProtoError::LineTooLong { limit: n - 1 })
        );
    }

    #[test]
    fn every_refusal_is_a_refused_line() {
        for line in [
            &b"ERROR"[..],
            b"CLIENT_ERROR bad command",
            b"SERVER_ERROR busy",
        ] {
            assert_eq!(
                parse_line(line),
                Ok(DumpLine::Refused(
                    String::from_utf8_lossy(line).into_owned()
                ))
            );
        }
    }

    #[test]
    fn percent_escapes_in_either_case() {
        for (text, raw) in [
            (&b"a%2fb%2Fc"[..], &b"a/b/c"[..]),
            (b"%e2%82%ac", "\u{20ac}".as_bytes()),
            (b"%00%7f%ff%FF%aA", b"\x00\x7f\xff\xff\xaa"),
        ] {
            assert_eq!(percent_decode(text).as_deref(), Some(raw), "{text:?}");
        }
    }

    #[test]
    fn a_line_over_the_limit_is_refused_without_buffering_more() {
        let mut dec = MetadumpDecoder::new(64);
        let mut buf = BytesMut::from(&[b'k'; 65][..]);
        assert_eq!(
            dec.decode(&mut buf),
            Err(ProtoError::LineTooLong { limit: 64 })
        );
        let mut dec = MetadumpDecoder::new(64);
        let mut buf = BytesMut::from(&[b'k'; 40][..]);
        assert_eq!(dec.decode(&mut buf), Ok(None));
        buf.extend_from_slice(&[b'k'; 40]);
        buf.extend_from_slice(b"\n");
        assert_eq!(
            dec.decode(&mut buf),
            Err(ProtoError::LineTooLong { limit: 64 })
        );
    }

    fn entry_strategy() -> impl Strategy<Value = DumpEntry> {
        (
            proptest::collection::vec(any::<u8>(), 1..=250),
            proptest::option::of(0i64..=i64::from(u32::MAX)),
            any::<u64>(),
            any::<u64>(),
            any::<bool>(),
            any::<u32>(),
            any::<u64>(),
        )
            .prop_map(
                |(key, exp, last_access, cas, fetched, class, size)| DumpEntry {
                    key,
                    exp,
                    last_access,
                    cas,
                    fetched,
                    class,
                    size,
                },
            )
    }

    proptest! {
        /// A dump decodes to the same lines however it is split into reads.
        #[test]
        fn decodes_any_split(
            entries in proptest::collection::vec(entry_strategy(), 0..20),
            cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..8),
        ) {
            let mut wire = String::new();
            for e in &entries {
                wire.push_str(&line(e));
            }
            wire.push_str("END\r\n");
            let wire = wire.into_bytes();
            let mut cuts: Vec<usize> = cuts.iter().map(|c| c.index(wire.len() + 1)).collect();
            cuts.push(wire.len());
            cuts.sort_unstable();
            let mut dec = MetadumpDecoder::default();
            let mut buf = BytesMut::new();
            let mut got = Vec::new();
            let mut from = 0;
            for cut in cuts {
                buf.extend_from_slice(&wire[from..cut]);
                from = cut;
                while let Some(line) = dec.decode(&mut buf).unwrap() {
                    got.push(line);
                }
            }
            let mut want: Vec<DumpLine> = entries.into_iter().map(DumpLine::Entry).collect();
            want.push(DumpLine::End);
            prop_assert_eq!(got, want);
            prop_assert!(buf.is_empty());
        }

        /// Garbage never panics, and the buffer never holds more than one
        /// line's limit of unterminated bytes.
        #[test]
        fn garbage_is_an_error_or_a_wait(
            input in proptest::collection::vec(any::<u8>(), 0..2000),
            chunk in 1usize..64,
        ) {
            let mut dec = MetadumpDecoder::new(128);
            let mut buf = BytesMut::new();
            'feed: for piece in input.chunks(chunk) {
                buf.extend_from_slice(piece);
                loop {
                    match dec.decode(&mut buf) {
                        Ok(Some(_)) => {}
                        Ok(None) => break,
                        Err(_) => break 'feed,
                    }
                }
                prop_assert!(buf.len() <= 128);
            }
        }
    }
}
