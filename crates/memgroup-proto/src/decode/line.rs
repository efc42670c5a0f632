//! Reply lines classified: the fixed replies, and the fields of the
//! others (`VALUE` where no retrieval is due, `CONFIG`, `STAT`, `VERSION`,
//! the errors, a number, the meta statuses).

use std::ops::Range;

use super::fields::{offset, stat_fields, va_fields, value_fields};
use super::{ProtoError, VALUE, malformed};
use crate::response::{MetaStatus, Response};

/// A classified reply line; ranges index into the line.
pub(super) enum Line {
    /// A well-formed `VALUE` header where no retrieval's reply is due (a
    /// retrieval's own are taken before lines are classified).
    Value,
    /// `CONFIG <key> <flags> <bytes>`: a configuration block.
    Config {
        key: Range<usize>,
        flags: u32,
        len: u64,
    },
    End,
    /// `RESET`, the reply to `stats reset`.
    Reset,
    Stat {
        name: Range<usize>,
        value: Range<usize>,
    },
    /// A reply without payload.
    Plain(Response),
    Version(Range<usize>),
    ClientError(Range<usize>),
    ServerError(Range<usize>),
    Meta {
        status: MetaStatus,
        flags: Range<usize>,
    },
    MetaValue {
        len: u64,
        flags: Range<usize>,
    },
}

pub(super) fn classify(line: &[u8]) -> Result<Line, ProtoError> {
    // The common fixed replies first: one comparison each.
    let plain = match line {
        b"END" => return Ok(Line::End),
        b"RESET" => return Ok(Line::Reset),
        b"STORED" => Response::Stored,
        b"NOT_STORED" => Response::NotStored,
        b"EXISTS" => Response::Exists,
        b"NOT_FOUND" => Response::NotFound,
        b"DELETED" => Response::Deleted,
        b"TOUCHED" => Response::Touched,
        b"OK" => Response::Ok,
        b"ERROR" => Response::Error,
        _ => return classify_fields(line),
    };
    Ok(Line::Plain(plain))
}

fn classify_fields(line: &[u8]) -> Result<Line, ProtoError> {
    if let Some(fields) = line.strip_prefix(VALUE) {
        value_fields(fields).ok_or_else(|| malformed("bad VALUE header", line))?;
        return Ok(Line::Value);
    }
    if let Some(fields) = line.strip_prefix(b"CONFIG ") {
        let (key, flags, len, cas) =
            value_fields(fields).ok_or_else(|| malformed("bad CONFIG header", line))?;
        if cas.is_some() {
            return Err(malformed("bad CONFIG header", line));
        }
        return Ok(Line::Config {
            key: offset(line, key),
            flags,
            len,
        });
    }
    if let Some(fields) = line.strip_prefix(b"STAT ") {
        let (_, (name, value)) =
            stat_fields(fields).map_err(|_| malformed("bad STAT line", line))?;
        let value = value.unwrap_or(&fields[fields.len()..]);
        return Ok(Line::Stat {
            name: offset(line, name),
            value: offset(line, value),
        });
    }
    if let Some(text) = line.strip_prefix(b"VERSION ") {
        return Ok(Line::Version(offset(line, text)));
    }
    // `cache_memlimit`'s refusals (`MEMLIMIT_TOO_SMALL …`,
    // `MEMLIMIT_ADJUST_FAILED …`): the server's error, the whole line.
    if line.starts_with(b"MEMLIMIT_") {
        return Ok(Line::ServerError(offset(line, line)));
    }
    for (prefix, server) in [(&b"CLIENT_ERROR"[..], false), (&b"SERVER_ERROR"[..], true)] {
        if let Some(tail) = line.strip_prefix(prefix) {
            let text = match tail {
                [] => tail,
                [b' ', text @ ..] => text,
                _ => continue,
            };
            let r = offset(line, text);
            return Ok(if server {
                Line::ServerError(r)
            } else {
                Line::ClientError(r)
            });
        }
    }
    if line.first().is_some_and(u8::is_ascii_digit) {
        // incr/decr reply. Old servers padded it with spaces; accept that.
        let digits = line.trim_ascii_end();
        let n = std::str::from_utf8(digits)
            .ok()
            .and_then(|s| s.parse::<u64>().ok())
            .ok_or_else(|| malformed("bad number", line))?;
        return Ok(Line::Plain(Response::Number(n)));
    }
    if line.len() >= 2 && (line.len() == 2 || line[2] == b' ') {
        let flags = &line[line.len().min(3)..];
        let status = match &line[..2] {
            b"VA" => {
                let (_, (len, flags)) =
                    va_fields(flags).map_err(|_| malformed("bad VA header", line))?;
                let flags = flags.unwrap_or(&line[line.len()..]);
                return Ok(Line::MetaValue {
                    len,
                    flags: offset(line, flags),
                });
            }
            b"HD" => MetaStatus::Hd,
            b"EN" => MetaStatus::En,
            b"NF" => MetaStatus::Nf,
            b"NS" => MetaStatus::Ns,
            b"EX" => MetaStatus::Ex,
            b"MN" => MetaStatus::Mn,
            b"ME" => MetaStatus::Me,
            _ => return Err(malformed("unknown reply", line)),
        };
        return Ok(Line::Meta {
            status,
            flags: offset(line, flags),
        });
    }
    Err(malformed("unknown reply", line))
}
