//! [`RequestDecoder`]: a client's bytes into [`ClientRequest`]s, incrementally.

use bytes::{Buf, Bytes, BytesMut};

use super::meta::{self, MetaKind};
use super::{ClientRequest, Retrieval};
use crate::key::MAX_KEY_LEN;
use crate::request::StoreCommand;

/// What the decoder holds a client to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerLimits {
    /// The longest command line without a `\n` before the connection is
    /// closed (memcached: 2,048 bytes), `get`/`gets` aside.
    pub max_line: usize,
    /// The longest `get`/`gets` line (memcached has no bound; default 1 MiB).
    pub max_get_line: usize,
    /// The largest value a storage command may carry (default 1 MiB,
    /// memcached's `-I`): larger ones are answered
    /// `SERVER_ERROR object too large for cache` and their data dropped as
    /// it arrives, never buffered.
    pub max_value: usize,
}

impl Default for ServerLimits {
    fn default() -> Self {
        ServerLimits {
            max_line: 2048,
            max_get_line: 1 << 20,
            max_value: 1 << 20,
        }
    }
}

/// Why the decoder gave up on a connection (memcached closes it too).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseReason {
    /// The first byte of a request was 0x80: the binary protocol, not served.
    Binary,
    /// A line longer than the limit without a `\n`.
    LineTooLong,
    /// An HTTP request line.
    Http,
}

impl std::fmt::Display for CloseReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CloseReason::Binary => "the binary protocol (first byte 0x80) is not served",
            CloseReason::LineTooLong => "a command line too long without a newline",
            CloseReason::Http => "an HTTP request",
        })
    }
}

impl std::error::Error for CloseReason {}

/// A storage command whose data block is still to come.
#[derive(Debug)]
enum Pending {
    Store {
        command: StoreCommand,
        key: Bytes,
        flags: u32,
        exptime: i32,
        len: usize,
        noreply: bool,
    },
    MetaSet {
        request: meta::MetaRequest,
        len: usize,
    },
}

impl Pending {
    /// The data block's length, without its `\r\n`.
    fn len(&self) -> usize {
        match self {
            Pending::Store { len, .. } | Pending::MetaSet { len, .. } => *len,
        }
    }
}

/// Decodes what a client sends, as memcached 1.6.18 reads it (see the
/// [module doc](super)). Call [`RequestDecoder::decode`] whenever bytes
/// arrive; it takes what it decodes out of the buffer.
///
/// ```
/// use memgroup_proto::{BytesMut, server::{ClientRequest, RequestDecoder}};
/// let mut decoder = RequestDecoder::default();
/// let mut input = BytesMut::from(&b"set k 0 0 2\r\nhi\r\nget k\r\n"[..]);
/// let Ok(Some(ClientRequest::Store { data, .. })) = decoder.decode(&mut input) else { panic!() };
/// assert_eq!(&data[..], b"hi");
/// assert!(matches!(decoder.decode(&mut input), Ok(Some(ClientRequest::Retrieve { .. }))));
/// assert_eq!(decoder.decode(&mut input), Ok(None));
/// ```
#[derive(Debug, Default)]
pub struct RequestDecoder {
    limits: ServerLimits,
    /// Bytes of a refused data block still to drop.
    swallow: usize,
    pending: Option<Pending>,
}

const BAD_FORMAT: &[u8] = b"CLIENT_ERROR bad command line format\r\n";
const BAD_CHUNK: &[u8] = b"CLIENT_ERROR bad data chunk\r\n";
const TOO_LARGE: &[u8] = b"SERVER_ERROR object too large for cache\r\n";
const ERROR: &[u8] = b"ERROR\r\n";
const BAD_EXPTIME: &[u8] = b"CLIENT_ERROR invalid exptime argument\r\n";
const BAD_DELTA: &[u8] = b"CLIENT_ERROR invalid numeric delta argument\r\n";
const DELETE_USAGE: &[u8] =
    b"CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]\r\n";

/// A number token as memcached's `strto*` read it: an optional sign, then
/// decimal digits to the token's end; whether it was negative, and its
/// magnitude (`None` past 64 bits, as `strtoull` reports `ERANGE`).
fn sign_and_magnitude(token: &[u8]) -> Option<(bool, u64)> {
    let (negative, digits) = match token.first() {
        Some(b'-') => (true, &token[1..]),
        Some(b'+') => (false, &token[1..]),
        _ => (false, token),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n = std::str::from_utf8(digits).ok()?.parse::<u64>().ok()?;
    Some((negative, n))
}

/// memcached's `safe_strtoul`/`safe_strtoull`: decimal, an optional sign,
/// the whole token; a `-` only for zero.
pub(super) fn parse_u64(token: &[u8]) -> Option<u64> {
    let (negative, n) = sign_and_magnitude(token)?;
    (!negative || n == 0).then_some(n)
}

/// memcached's `safe_strtol` into a 32-bit number: the token parsed as a
/// 64-bit one, then its low 32 bits (memcached stores a `long` into an
/// `int32_t`).
pub(super) fn parse_i32(token: &[u8]) -> Option<i32> {
    let (negative, n) = sign_and_magnitude(token)?;
    let n = i64::try_from(n).ok()?;
    Some((if negative { -n } else { n }) as i32)
}

/// The line's tokens, split on spaces (several count as one).
fn tokenize(line: &Bytes) -> Vec<Bytes> {
    let mut tokens = Vec::new();
    let mut start = 0;
    for (i, &b) in line.iter().enumerate() {
        if b == b' ' {
            if i > start {
                tokens.push(line.slice(start..i));
            }
            start = i + 1;
        }
    }
    if line.len() > start {
        tokens.push(line.slice(start..));
    }
    tokens
}

impl RequestDecoder {
    /// A decoder holding clients to `limits`.
    pub fn new(limits: ServerLimits) -> RequestDecoder {
        RequestDecoder {
            limits,
            ..RequestDecoder::default()
        }
    }

    /// The next request in `buf`, `Ok(None)` when more bytes are needed,
    /// `Err` when the connection is to be closed. What is decoded (and any
    /// swallowed data) leaves `buf`.
    pub fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<ClientRequest>, CloseReason> {
        loop {
            if self.swallow > 0 {
                let n = self.swallow.min(buf.len());
                buf.advance(n);
                self.swallow -= n;
                if self.swallow > 0 {
                    return Ok(None);
                }
            }
            if let Some(pending) = &self.pending {
                if buf.len() < pending.len() + 2 {
                    return Ok(None);
                }
                let pending = self.pending.take().expect("checked above");
                match Self::data_block(pending, buf) {
                    Some(request) => return Ok(Some(request)),
                    None => continue,
                }
            }
            let Some(end) = buf.iter().position(|&b| b == b'\n') else {
                return self.incomplete_line(buf).map(|()| None);
            };
            if buf.first() == Some(&0x80) {
                return Err(CloseReason::Binary);
            }
            let mut line = buf.split_to(end + 1).freeze();
            line.truncate(end);
            if line.last() == Some(&b'\r') {
                line.truncate(end - 1);
            }
            if let Some(request) = self.command(&line)? {
                return Ok(Some(request));
            }
        }
    }

    /// No `\n` yet: close on a line over the limit (a `get`/`gets` may grow).
    fn incomplete_line(&self, buf: &BytesMut) -> Result<(), CloseReason> {
        if buf.first() == Some(&0x80) {
            return Err(CloseReason::Binary);
        }
        if buf.len() <= self.limits.max_line {
            return Ok(());
        }
        let spaces = buf.iter().take_while(|&&b| b == b' ').count();
        let rest = &buf[spaces..];
        let multiget = spaces <= 100 && (rest.starts_with(b"get ") || rest.starts_with(b"gets "));
        if multiget && buf.len() <= self.limits.max_get_line {
            Ok(())
        } else {
            Err(CloseReason::LineTooLong)
        }
    }

    /// The data block of a storage command, all of it in `buf`. `None`: a
    /// refusal silenced by `noreply`.
    fn data_block(pending: Pending, buf: &mut BytesMut) -> Option<ClientRequest> {
        let len = pending.len();
        let block = buf.split_to(len + 2).freeze();
        let ends_well = &block[len..] == b"\r\n";
        let data = block.slice(..len);
        match pending {
            Pending::Store { noreply: true, .. } if !ends_well => None,
            Pending::MetaSet { .. } | Pending::Store { .. } if !ends_well => {
                Some(ClientRequest::Error(BAD_CHUNK))
            }
            Pending::Store {
                command,
                key,
                flags,
                exptime,
                noreply,
                ..
            } => Some(ClientRequest::Store {
                command,
                key,
                flags,
                exptime,
                data,
                noreply,
            }),
            Pending::MetaSet { mut request, .. } => {
                request.data = Some(data);
                Some(ClientRequest::Meta(request))
            }
        }
    }

    /// One command line. `Ok(None)`: nothing to answer (a silenced error),
    /// or a storage command now waiting for its data.
    fn command(&mut self, line: &Bytes) -> Result<Option<ClientRequest>, CloseReason> {
        let tokens = tokenize(line);
        let error = |reply: &'static [u8]| Ok(Some(ClientRequest::Error(reply)));
        let Some(name) = tokens.first() else {
            return error(ERROR);
        };
        if name.len() < 2 {
            return error(ERROR);
        }
        let n = tokens.len();
        let noreply = tokens.last().is_some_and(|t| &t[..] == b"noreply");
        // An error reply, silenced by `noreply`.
        let refuse = |reply: &'static [u8]| {
            Ok(if noreply {
                None
            } else {
                Some(ClientRequest::Error(reply))
            })
        };
        if name.len() == 2 && name[0] == b'm' {
            let kind = match name[1] {
                b'g' => MetaKind::Get,
                b's' => MetaKind::Set,
                b'd' => MetaKind::Delete,
                b'a' => MetaKind::Arith,
                b'e' => MetaKind::Debug,
                b'n' => return Ok(Some(ClientRequest::MetaNoop)),
                _ => return error(ERROR),
            };
            return Ok(self.meta(kind, &tokens));
        }
        match &name[..] {
            b"get" | b"gets" | b"gat" | b"gats" => {
                if n < 2 {
                    return error(ERROR);
                }
                let touch = name.starts_with(b"gat");
                let command = match (&name[..], touch) {
                    (b"get", _) => Retrieval::Get,
                    (b"gets", _) => Retrieval::Gets,
                    _ => {
                        let Some(exptime) = parse_i32(&tokens[1]) else {
                            return error(BAD_EXPTIME);
                        };
                        if &name[..] == b"gat" {
                            Retrieval::Gat(exptime)
                        } else {
                            Retrieval::Gats(exptime)
                        }
                    }
                };
                let keys = tokens[if touch { 2 } else { 1 }..].to_vec();
                if keys.iter().any(|k| k.len() > MAX_KEY_LEN) {
                    return error(BAD_FORMAT);
                }
                Ok(Some(ClientRequest::Retrieve { command, keys }))
            }
            b"set" | b"add" | b"replace" | b"append" | b"prepend" | b"cas" => {
                let cas = &name[..] == b"cas";
                let base = if cas { 6 } else { 5 };
                if n != base && n != base + 1 {
                    return error(ERROR);
                }
                let key = &tokens[1];
                let flags = parse_u64(&tokens[2]);
                let exptime = parse_i32(&tokens[3]);
                let len = parse_i32(&tokens[4]);
                let unique = if cas { parse_u64(&tokens[5]) } else { Some(0) };
                let (Some(flags), Some(exptime), Some(len), Some(unique)) =
                    (flags, exptime, len, unique)
                else {
                    return refuse(BAD_FORMAT);
                };
                if key.len() > MAX_KEY_LEN || !(0..=i32::MAX - 2).contains(&len) {
                    return refuse(BAD_FORMAT);
                }
                let len = len as usize;
                if len > self.limits.max_value {
                    self.swallow = len + 2;
                    return refuse(TOO_LARGE);
                }
                let command = match &name[..] {
                    b"set" => StoreCommand::Set,
                    b"add" => StoreCommand::Add,
                    b"replace" => StoreCommand::Replace,
                    b"append" => StoreCommand::Append,
                    b"prepend" => StoreCommand::Prepend,
                    _ => StoreCommand::Cas(unique),
                };
                self.pending = Some(Pending::Store {
                    command,
                    key: key.clone(),
                    flags: flags as u32,
                    exptime,
                    len,
                    noreply,
                });
                Ok(None)
            }
            b"delete" => {
                if !(2..=4).contains(&n) {
                    return error(ERROR);
                }
                let zero = n > 2 && &tokens[2][..] == b"0";
                let valid = n == 2 || (n == 3 && (zero || noreply)) || (n == 4 && zero && noreply);
                if tokens[1].len() > MAX_KEY_LEN {
                    return refuse(BAD_FORMAT);
                }
                if !valid {
                    return refuse(DELETE_USAGE);
                }
                Ok(Some(ClientRequest::Delete {
                    key: tokens[1].clone(),
                    noreply,
                }))
            }
            b"incr" | b"decr" => {
                if n != 3 && n != 4 {
                    return error(ERROR);
                }
                if tokens[1].len() > MAX_KEY_LEN {
                    return refuse(BAD_FORMAT);
                }
                let Some(delta) = parse_u64(&tokens[2]) else {
                    return refuse(BAD_DELTA);
                };
                Ok(Some(ClientRequest::Arith {
                    increment: &name[..] == b"incr",
                    key: tokens[1].clone(),
                    delta,
                    noreply,
                }))
            }
            b"touch" => {
                if n != 3 && n != 4 {
                    return error(ERROR);
                }
                if tokens[1].len() > MAX_KEY_LEN {
                    return refuse(BAD_FORMAT);
                }
                let Some(exptime) = parse_i32(&tokens[2]) else {
                    return refuse(BAD_EXPTIME);
                };
                Ok(Some(ClientRequest::Touch {
                    key: tokens[1].clone(),
                    exptime,
                    noreply,
                }))
            }
            b"flush_all" => {
                if n > 3 {
                    return error(ERROR);
                }
                let delay = if n == 1 + usize::from(noreply) {
                    0
                } else {
                    match parse_i32(&tokens[1]) {
                        Some(delay) => delay,
                        None => return refuse(BAD_EXPTIME),
                    }
                };
                Ok(Some(ClientRequest::FlushAll { delay, noreply }))
            }
            b"version" => Ok(Some(ClientRequest::Version)),
            b"quit" => Ok(Some(ClientRequest::Quit)),
            b"verbosity" => {
                if n != 2 && n != 3 {
                    return error(ERROR);
                }
                if parse_u64(&tokens[1]).is_none() {
                    return refuse(BAD_FORMAT);
                }
                Ok(Some(ClientRequest::Verbosity { noreply }))
            }
            b"stats" => Ok(Some(ClientRequest::Stats {
                args: tokens[1..].to_vec(),
            })),
            b"cache_memlimit" => {
                // memcached's `safe_strtoul` into a 32-bit number; any other
                // count of arguments, or no number, is `ERROR`.
                match tokens.get(1).and_then(|t| parse_u64(t)) {
                    Some(megabytes) if n <= 3 => Ok(Some(ClientRequest::CacheMemlimit {
                        megabytes: megabytes as u32,
                        noreply,
                    })),
                    _ => error(ERROR),
                }
            }
            b"shutdown" | b"slabs" | b"lru_crawler" | b"watch" | b"lru" | b"extstore"
            | b"misbehave" | b"debugtime" | b"debugitem" | b"bget" => {
                Ok(Some(ClientRequest::NotServed(name.clone())))
            }
            _ if tokens.last().is_some_and(|t| t.starts_with(b"HTTP/")) => Err(CloseReason::Http),
            _ => error(ERROR),
        }
    }

    /// A meta command's line: the request, an error reply, or `None` with
    /// a meta set now waiting for (or swallowing) its data.
    fn meta(&mut self, kind: MetaKind, tokens: &[Bytes]) -> Option<ClientRequest> {
        match meta::parse(kind, tokens) {
            meta::Parsed::Request(request) => Some(ClientRequest::Meta(request)),
            meta::Parsed::Error(reply) => Some(ClientRequest::Error(reply)),
            meta::Parsed::Set { request, len } if len > self.limits.max_value => {
                drop(request);
                self.swallow = len + 2;
                Some(ClientRequest::Error(TOO_LARGE))
            }
            meta::Parsed::Set { request, len } => {
                self.pending = Some(Pending::MetaSet { request, len });
                None
            }
            meta::Parsed::SetRefused { reply, len } => {
                self.swallow = len + 2;
                Some(ClientRequest::Error(reply))
            }
        }
    }
}
