//! The incremental reply decoder.
//!
//! # Design: the caller says what it expects
//!
//! Text-protocol replies carry no request id, and one of them is ambiguous on
//! its own: a bare `END` ends both an empty retrieval and an empty `stats`
//! group. So the caller, which sent the requests and keeps them in a FIFO
//! queue, passes the [`Expect`] of the oldest unanswered request to every
//! [`Decoder::decode`] call (a [`Request`](crate::Request) tells it with
//! [`Request::expect`](crate::Request::expect)). A reply that cannot answer that
//! request — `STORED` where `VALUE`/`END` was due — is a desynchronised stream
//! and comes back as [`ProtoError::Unexpected`].
//!
//! # Buffer contract
//!
//! The caller appends bytes read from the socket to one `BytesMut` and calls
//! `decode` until it returns `Ok(None)` (more bytes needed). `decode` only ever
//! removes complete frames from the front of the buffer: a line with its
//! `\r\n`, or a `VALUE`/`VA` line together with its whole data block. The
//! items of a multi-item reply (`VALUE`s, `STAT`s) are taken off the buffer one
//! complete item at a time and held in the decoder until `END` arrives, so the
//! same `Expect` must be passed until that reply is returned. The decoder
//! remembers how far it has searched for a line end and the parsed header of a
//! data block it is waiting for, so no byte is searched twice however the
//! input is split. Any `Err` means the stream is corrupt: close the connection.

use std::fmt;
use std::ops::Range;

use bytes::{Buf, BytesMut};

use crate::response::{MetaResponse, MetaStatus, Response, Stat, Value, Values};

mod fields;
mod line;
pub(super) use fields::value_fields;
#[cfg(test)]
pub(super) use fields::{dec_u32, dec_u64, sp, token};
use fields::{find_newline, offset, split_line};
use line::{Line, classify};

/// Peer-controlled sizes the decoder accepts; beyond them it fails instead of
/// allocating.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The longest reply line, without its `\r\n` (default 8 KiB).
    pub max_line: usize,
    /// The largest value (data block) in bytes (default 1 MiB, memcached's `-I` default).
    /// Values over [`MAX_ITEM_SIZE`] are refused whatever this says.
    pub max_value: usize,
    /// The most bytes one multi-item reply (`VALUE` items up to `END`, `STAT`
    /// lines up to `END`) may hold (default 256 MiB): a server that keeps
    /// sending items without `END` is refused instead of growing memory.
    /// Each item counts its wire bytes plus its entry ([`ITEM_OVERHEAD`]), so
    /// that a flood of tiny items is bounded like a few large ones.
    pub max_reply: usize,
    /// The most bytes a `stats` reply may hold (default 4 MiB: `stats conns`
    /// of a server with ten thousand connections is about 2 MiB), counted
    /// like [`max_reply`](Limits::max_reply) and far below it: a server
    /// that keeps sending `STAT` lines is stopped early.
    pub max_stats: usize,
}

/// What one item of a multi-item reply counts toward [`Limits::max_reply`]
/// beyond its wire bytes: the entry that holds it (a [`Value`], or a smaller
/// [`Stat`]), doubled for the list's growth.
pub const ITEM_OVERHEAD: usize = 2 * size_of::<Value>();
const _: () = assert!(size_of::<Stat>() <= size_of::<Value>());

/// The largest item memcached can hold (`-I 1024m`): a longer data block is a
/// corrupt or hostile header, refused before anything is allocated for it.
pub const MAX_ITEM_SIZE: usize = 1 << 30;

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_line: 8 * 1024,
            max_value: 1024 * 1024,
            max_reply: 256 * 1024 * 1024,
            max_stats: 4 * 1024 * 1024,
        }
    }
}

/// What kind of reply the oldest outstanding request gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Expect {
    /// `VALUE` items up to `END` (`get`, `gets`, `gat`, `gats`): at most
    /// `max_items`, one per key asked for (repeats included: memcached
    /// answers `get a a` twice). A further item is a protocol error at once.
    Values {
        /// The keys asked for.
        max_items: usize,
    },
    /// `STAT` lines up to `END` (`stats`).
    Stats,
    /// One reply line, or a meta reply with its value (everything else).
    Single,
    /// The replies of a quiet batch ([`Request::MetaBatch`](crate::Request::MetaBatch))
    /// up to `MN`: at most `max_replies` of them, one per command.
    MetaBatch {
        /// The commands sent.
        max_replies: usize,
    },
    /// One `CONFIG <key> <flags> <bytes>` block, then `END` (`config get`,
    /// the cluster discovery of ElastiCache and Memorystore): decoded as
    /// [`Response::Values`] of at most one item, keyed by the config's name.
    Config,
}

/// The stream is corrupt or exceeded a limit; the connection must be closed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProtoError {
    /// A line went past [`Limits::max_line`] without ending.
    LineTooLong {
        /// The limit.
        limit: usize,
    },
    /// A `VALUE`/`VA` header announced a data block beyond [`Limits::max_value`].
    ValueTooLarge {
        /// The announced length.
        len: u64,
        /// The limit.
        limit: usize,
    },
    /// A line that is not a memcached reply, or a reply with bad fields.
    Malformed {
        /// What is wrong.
        reason: &'static str,
        /// The start of the offending line (lossy UTF-8, at most 80 bytes).
        line: String,
    },
    /// A valid reply that cannot answer the request at the head of the queue.
    Unexpected {
        /// What the request expected.
        expected: Expect,
        /// The start of the offending line (lossy UTF-8, at most 80 bytes).
        line: String,
    },
    /// A data block was not followed by `\r\n`: its announced length lied.
    BadDataTerminator,
    /// A multi-item reply went past [`Limits::max_reply`] (or, for `stats`,
    /// [`Limits::max_stats`]) without ending.
    ReplyTooLarge {
        /// The limit.
        limit: usize,
    },
    /// A retrieval's reply held more items than keys were asked for.
    TooManyItems {
        /// The keys asked for.
        asked: usize,
    },
}

impl Expect {
    /// A retrieval of `keys` keys: at most that many items.
    pub fn values(keys: usize) -> Expect {
        Expect::Values { max_items: keys }
    }
}

impl fmt::Display for ProtoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProtoError::LineTooLong { limit } => {
                write!(f, "reply line longer than {limit} bytes")
            }
            ProtoError::ValueTooLarge { len, limit } => {
                write!(
                    f,
                    "reply value of {len} bytes exceeds the {limit}-byte limit"
                )
            }
            ProtoError::Malformed { reason, line } => {
                write!(f, "malformed reply ({reason}): {line:?}")
            }
            ProtoError::Unexpected { expected, line } => {
                write!(f, "unexpected reply while expecting {expected:?}: {line:?}")
            }
            ProtoError::BadDataTerminator => {
                f.write_str("data block not terminated by \\r\\n (length mismatch)")
            }
            ProtoError::ReplyTooLarge { limit } => {
                write!(
                    f,
                    "multi-item reply larger than {limit} bytes without an END"
                )
            }
            ProtoError::TooManyItems { asked } => {
                write!(f, "more items in the reply than the {asked} keys asked for")
            }
        }
    }
}

impl std::error::Error for ProtoError {}

fn excerpt(line: &[u8]) -> String {
    String::from_utf8_lossy(&line[..line.len().min(80)]).into_owned()
}

pub(crate) fn malformed(reason: &'static str, line: &[u8]) -> ProtoError {
    ProtoError::Malformed {
        reason,
        line: excerpt(line),
    }
}

/// The incremental decoder of one connection's reply stream. See the module
/// docs for the contract.
///
/// ```
/// use bytes::BytesMut;
/// use memgroup_proto::{Decoder, Expect, Response};
///
/// let mut dec = Decoder::default();
/// let mut buf = BytesMut::from(&b"VALUE k 5 2\r\nhi\r\nEN"[..]);
/// // The reply is not complete yet.
/// assert_eq!(dec.decode(&mut buf, Expect::values(usize::MAX)).unwrap(), None);
/// buf.extend_from_slice(b"D\r\nSTORED\r\n");
/// let Some(Response::Values(values)) = dec.decode(&mut buf, Expect::values(usize::MAX)).unwrap() else {
///     panic!("expected values")
/// };
/// assert_eq!((&values[0].key[..], values[0].flags, &values[0].data[..]), (&b"k"[..], 5, &b"hi"[..]));
/// assert_eq!(dec.decode(&mut buf, Expect::Single).unwrap(), Some(Response::Stored));
/// ```
#[derive(Debug, Default)]
pub struct Decoder {
    limits: Limits,
    /// Bytes at the front of the buffer already searched for `\n` in vain.
    scanned: usize,
    /// A parsed `VALUE`/`VA` header whose data block has not fully arrived.
    pending: Option<Pending>,
    values: Values,
    stats: Vec<Stat>,
    /// Bytes of the multi-item reply in progress (see [`Limits::max_reply`]).
    reply_bytes: usize,
    /// The replies of a quiet batch so far.
    batch: Vec<Response>,
}

#[derive(Debug)]
struct Pending {
    /// Length of the header line without `\r\n`.
    line_len: usize,
    data_len: usize,
    head: Head,
}

#[derive(Debug)]
enum Head {
    Value {
        key: Range<usize>,
        flags: u32,
        cas: Option<u64>,
    },
    Meta {
        flags: Range<usize>,
    },
}

impl Decoder {
    /// A decoder with the given limits.
    pub fn new(limits: Limits) -> Self {
        Decoder {
            limits,
            ..Decoder::default()
        }
    }

    /// The limits in force.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Whether the decoder holds part of a reply (items of an unfinished
    /// retrieval or stats reply, or a header waiting for its data).
    pub fn is_mid_reply(&self) -> bool {
        self.pending.is_some()
            || !self.values.is_empty()
            || !self.stats.is_empty()
            || !self.batch.is_empty()
    }

    /// Decodes the next complete reply from the front of `buf`.
    ///
    /// `Ok(None)` means more bytes are needed; nothing returned so far is lost.
    /// `Err` means the stream is corrupt and the connection must be closed.
    pub fn decode(
        &mut self,
        buf: &mut BytesMut,
        expect: Expect,
    ) -> Result<Option<Response>, ProtoError> {
        loop {
            if let Some(p) = &self.pending {
                let total = frame_len(p.line_len, p.data_len);
                if buf.len() < total {
                    // Room for the whole frame, so the value lands contiguous
                    // and can be handed out without a copy.
                    buf.reserve(total - buf.len());
                    return Ok(None);
                }
                let Some(p) = self.pending.take() else {
                    unreachable!("checked above")
                };
                match p.head {
                    Head::Value { key, flags, cas } => {
                        self.push_value(buf, (p.line_len, p.data_len), key, flags, cas)?;
                        continue;
                    }
                    Head::Meta { flags } => {
                        let (flags, data) = take_frame(buf, p.line_len, p.data_len, flags)?;
                        let reply = Response::Meta(MetaResponse {
                            status: MetaStatus::Va,
                            flags,
                            value: Some(data),
                        });
                        if let Expect::MetaBatch { max_replies } = expect {
                            self.batched(reply, total, max_replies)?;
                            continue;
                        }
                        return Ok(Some(reply));
                    }
                }
            }

            if let Expect::Values { max_items } = expect
                && buf.starts_with(b"VALUE ")
            {
                // A hit, the line a retrieval's reply is made of: its
                // header parsed where it lies and, when its data block is
                // in too (the usual case), taken at once.
                let Some(line_len) = self.find_line(buf)? else {
                    return Ok(None);
                };
                let line = &buf[..line_len];
                let (key, flags, len, cas) = value_fields(&line[VALUE.len()..])
                    .ok_or_else(|| malformed("bad VALUE header", line))?;
                let key = offset(line, key);
                // One item per key asked: another is a lie, refused
                // before its data is read.
                if self.values.len() >= max_items {
                    return Err(ProtoError::TooManyItems { asked: max_items });
                }
                if self.values.is_empty() {
                    // Room for every key asked (bounded: a count the
                    // reply may not reach costs no more than this).
                    self.values.reserve(max_items.min(MAX_RESERVED_VALUES));
                }
                let data_len = self.check_len(len)?;
                if buf.len() >= frame_len(line_len, data_len) {
                    self.push_value(buf, (line_len, data_len), key, flags, cas)?;
                } else {
                    let head = Head::Value { key, flags, cas };
                    self.pending = Some(Pending {
                        line_len,
                        data_len,
                        head,
                    });
                }
                continue;
            }
            if matches!(expect, Expect::Values { .. } | Expect::Config)
                && buf.starts_with(b"END\r\n")
            {
                // The common end of a retrieval, recognised without a search.
                buf.advance(5);
                self.scanned = 0;
                self.reply_bytes = 0;
                return Ok(Some(Response::Values(std::mem::take(&mut self.values))));
            }
            let Some(line_len) = self.find_line(buf)? else {
                return Ok(None);
            };
            let parsed = classify(&buf[..line_len])?;
            let unexpected = |buf: &BytesMut| ProtoError::Unexpected {
                expected: expect,
                line: excerpt(&buf[..line_len]),
            };
            match (parsed, expect) {
                (Line::Meta { status, flags }, Expect::MetaBatch { max_replies }) => {
                    let line = split_line(buf, line_len);
                    if status == MetaStatus::Mn {
                        self.reply_bytes = 0;
                        return Ok(Some(Response::MetaBatch(std::mem::take(&mut self.batch))));
                    }
                    let reply = Response::Meta(MetaResponse {
                        status,
                        flags: line.slice(flags),
                        value: None,
                    });
                    self.batched(reply, line_len + 2, max_replies)?;
                }
                (Line::Plain(response), Expect::MetaBatch { max_replies })
                    if response.is_error() =>
                {
                    buf.advance(line_len + 2);
                    self.batched(response, line_len + 2, max_replies)?;
                }
                (Line::ClientError(r), Expect::MetaBatch { max_replies }) => {
                    let text = split_line(buf, line_len).slice(r);
                    self.batched(Response::ClientError(text), line_len + 2, max_replies)?;
                }
                (Line::ServerError(r), Expect::MetaBatch { max_replies }) => {
                    let text = split_line(buf, line_len).slice(r);
                    self.batched(Response::ServerError(text), line_len + 2, max_replies)?;
                }
                (Line::MetaValue { len, flags }, Expect::Single | Expect::MetaBatch { .. }) => {
                    let data_len = self.check_len(len)?;
                    self.pending = Some(Pending {
                        line_len,
                        data_len,
                        head: Head::Meta { flags },
                    });
                }
                (Line::Config { key, flags, len }, Expect::Config) => {
                    if !self.values.is_empty() {
                        return Err(ProtoError::TooManyItems { asked: 1 });
                    }
                    let data_len = self.check_len(len)?;
                    let head = Head::Value {
                        key,
                        flags,
                        cas: None,
                    };
                    self.pending = Some(Pending {
                        line_len,
                        data_len,
                        head,
                    });
                }
                (Line::End, Expect::Values { .. } | Expect::Config) => {
                    buf.advance(line_len + 2);
                    self.reply_bytes = 0;
                    return Ok(Some(Response::Values(std::mem::take(&mut self.values))));
                }
                (Line::End, Expect::Stats) => {
                    buf.advance(line_len + 2);
                    self.reply_bytes = 0;
                    return Ok(Some(Response::Stats(std::mem::take(&mut self.stats))));
                }
                (Line::Reset, Expect::Stats) if self.stats.is_empty() => {
                    buf.advance(line_len + 2);
                    return Ok(Some(Response::Ok));
                }
                (Line::Stat { name, value }, Expect::Stats) => {
                    self.count_reply(line_len + 2 + ITEM_OVERHEAD, self.limits.max_stats)?;
                    let line = split_line(buf, line_len);
                    self.stats.push(Stat {
                        name: line.slice(name),
                        value: line.slice(value),
                    });
                }
                (Line::Plain(response), _) if response.is_error() || expect == Expect::Single => {
                    buf.advance(line_len + 2);
                    return Ok(Some(self.finish(response)));
                }
                (Line::ClientError(r), _) => {
                    let text = split_line(buf, line_len).slice(r);
                    return Ok(Some(self.finish(Response::ClientError(text))));
                }
                (Line::ServerError(r), _) => {
                    let text = split_line(buf, line_len).slice(r);
                    return Ok(Some(self.finish(Response::ServerError(text))));
                }
                (Line::Version(r), Expect::Single) => {
                    let text = split_line(buf, line_len).slice(r);
                    return Ok(Some(Response::Version(text)));
                }
                (Line::Meta { status, flags }, Expect::Single) => {
                    let flags = split_line(buf, line_len).slice(flags);
                    return Ok(Some(Response::Meta(MetaResponse {
                        status,
                        flags,
                        value: None,
                    })));
                }
                _ => return Err(unexpected(buf)),
            }
        }
    }

    /// Takes the `VALUE` item at the front of `buf` (its header line of
    /// `line_len` bytes and its data block of `data_len`, both in `buf`):
    /// one more value of the retrieval in progress.
    #[inline]
    fn push_value(
        &mut self,
        buf: &mut BytesMut,
        (line_len, data_len): (usize, usize),
        key: Range<usize>,
        flags: u32,
        cas: Option<u64>,
    ) -> Result<(), ProtoError> {
        let total = frame_len(line_len, data_len);
        let (key, data) = take_frame(buf, line_len, data_len, key)?;
        self.count_reply(total + ITEM_OVERHEAD, self.limits.max_reply)?;
        self.values.push(Value {
            key,
            flags,
            cas,
            data,
        });
        Ok(())
    }

    /// One more reply of a quiet batch of `max_replies` commands: each
    /// command answers once at most (errors included), and the batch's
    /// bytes count against [`Limits::max_reply`].
    fn batched(
        &mut self,
        reply: Response,
        bytes: usize,
        max_replies: usize,
    ) -> Result<(), ProtoError> {
        if self.batch.len() >= max_replies {
            return Err(ProtoError::TooManyItems { asked: max_replies });
        }
        self.count_reply(bytes + ITEM_OVERHEAD, self.limits.max_reply)?;
        self.batch.push(reply);
        Ok(())
    }

    /// An error reply ends whatever multi-item reply was in progress.
    fn finish(&mut self, response: Response) -> Response {
        self.values = Values::new();
        self.stats.clear();
        self.reply_bytes = 0;
        response
    }

    /// Counts `bytes` more of the multi-item reply in progress, which may
    /// hold at most `limit`.
    fn count_reply(&mut self, bytes: usize, limit: usize) -> Result<(), ProtoError> {
        self.reply_bytes = self.reply_bytes.saturating_add(bytes);
        if self.reply_bytes > limit {
            return Err(ProtoError::ReplyTooLarge { limit });
        }
        Ok(())
    }

    fn check_len(&self, len: u64) -> Result<usize, ProtoError> {
        match usize::try_from(len) {
            Ok(n) if n <= self.limits.max_value.min(MAX_ITEM_SIZE) => Ok(n),
            _ => Err(ProtoError::ValueTooLarge {
                len,
                limit: self.limits.max_value.min(MAX_ITEM_SIZE),
            }),
        }
    }

    /// Finds the end of the line at the front of `buf`, searching only bytes
    /// not searched before. Returns the line's length without `\r\n`.
    #[inline]
    fn find_line(&mut self, buf: &BytesMut) -> Result<Option<usize>, ProtoError> {
        let start = self.scanned.min(buf.len());
        let Some(i) = find_newline(&buf[start..]) else {
            self.scanned = buf.len();
            if buf.len() > self.limits.max_line + 1 {
                return Err(ProtoError::LineTooLong {
                    limit: self.limits.max_line,
                });
            }
            return Ok(None);
        };
        let newline = start + i;
        // The line is consumed (now or, for a data block, once it is complete)
        // before the next search, which therefore starts at the front again.
        self.scanned = 0;
        if newline > self.limits.max_line + 1 {
            return Err(ProtoError::LineTooLong {
                limit: self.limits.max_line,
            });
        }
        if newline == 0 || buf[newline - 1] != b'\r' {
            return Err(malformed("line ends in a bare \\n", &buf[..newline]));
        }
        Ok(Some(newline - 1))
    }
}

/// The prefix of a hit's header line.
pub(super) const VALUE: &[u8] = b"VALUE ";

/// The bytes of a header line of `line_len` and its data block of
/// `data_len`, each with its `\r\n`.
fn frame_len(line_len: usize, data_len: usize) -> usize {
    line_len + 2 + data_len + 2
}

/// Takes a header line and its data block off the front of `buf` (both in
/// it): the `head` part of the line and the data. One split for header,
/// data and terminator: the frame itself becomes the value and the head is
/// a slice of it (each reference count operation is an atomic: keep them
/// few).
#[inline]
fn take_frame(
    buf: &mut BytesMut,
    line_len: usize,
    data_len: usize,
    head: Range<usize>,
) -> Result<(bytes::Bytes, bytes::Bytes), ProtoError> {
    let total = frame_len(line_len, data_len);
    let data_start = line_len + 2;
    let data_end = data_start + data_len;
    if &buf[data_end..total] != b"\r\n" {
        return Err(ProtoError::BadDataTerminator);
    }
    let mut data = buf.split_to(total).freeze();
    let head = data.slice(head);
    data.advance(data_start);
    data.truncate(data_len);
    Ok((head, data))
}

/// The most values a retrieval's reply makes room for before they arrive.
const MAX_RESERVED_VALUES: usize = 1024;
