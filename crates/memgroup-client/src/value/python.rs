//! python-memcached 1.62's flags (`_val_to_store_info` / `_recv_value`).
//!
//! | [`Value`] | Python | flags | bytes |
//! |---|---|---|---|
//! | `Bytes` | `bytes` | 0 | raw |
//! | `String` | `str` | 16 (`TEXT`) | UTF-8 |
//! | `Long`, `Int`, `Short`, `Byte`, `BigInt` | `int` | 2 (`INTEGER`) | decimal text, any size |
//! | `Bool`, `Double`, `Float` | `bool`, `float` | 1 (`PICKLE`) | pickle protocol 0: `I01\n.`, `F2.5\n.` |
//! | `Serialized` (pickle) | any other object | 1 (`PICKLE`) | the pickle |
//!
//! `LONG` (4) is read like `INTEGER` (Python 2 wrote it). `COMPRESSED` (8)
//! marks zlib; python-memcached compresses values strictly longer than
//! `min_compress_len` (default 0: never) when that makes them smaller, and
//! never integers. Pickled booleans and floats — protocol 0 as
//! python-memcached writes them, or the binary protocols — decode to `Bool`
//! and `Double`; any other pickle stays opaque.

use bytes::Bytes;

use super::compress::{self, Codec};
use super::{DecodeError, Serialization, Value, inflate, utf8};
use crate::error::{Error, ErrorKind};
use crate::item::Item;

const PICKLE: u32 = 1;
const INTEGER: u32 = 2;
const LONG: u32 = 4;
const COMPRESSED: u32 = 8;
const TEXT: u32 = 16;

pub(crate) fn decode(item: &Item, limit: usize) -> Result<Value, DecodeError> {
    let mut flags = item.flags;
    // Borrowed unless inflated (see `spy::decode`).
    let inflated;
    let mut data = &item.value;
    if flags & COMPRESSED != 0 {
        inflated = inflate(Codec::Zlib, data, limit)?;
        data = &inflated;
        flags &= !COMPRESSED;
    }
    // python-memcached tests the bits in this order.
    Ok(if flags == 0 {
        Value::Bytes(data.clone())
    } else if flags & TEXT != 0 {
        Value::String(utf8(data)?)
    } else if flags & (INTEGER | LONG) != 0 {
        integer(data)?
    } else if flags & PICKLE != 0 {
        unpickle_simple(data).unwrap_or_else(|| Value::Serialized {
            kind: Serialization::Pickle,
            data: data.clone(),
        })
    } else {
        return Err(DecodeError::Unknown(format!("flags 0x{flags:x}")));
    })
}

/// Python's `int(buf)`: decimal digits, optional sign and surrounding spaces.
fn integer(data: &[u8]) -> Result<Value, DecodeError> {
    let text = std::str::from_utf8(data)
        .ok()
        .map(str::trim)
        .filter(|t| {
            let digits = t.strip_prefix(['-', '+']).unwrap_or(t);
            !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
        })
        .ok_or_else(|| DecodeError::Corrupt("an INTEGER value that is not decimal".into()))?;
    Ok(match text.parse::<i64>() {
        Ok(n) => Value::Long(n),
        Err(_) => Value::BigInt(text.trim_start_matches('+').to_string()),
    })
}

/// A pickled `True`/`False`/float: protocol 0 (`I01\n.`, `I00\n.`,
/// `F<repr>\n.`) or a binary protocol (`\x80 p`, an optional frame, then
/// `\x88`, `\x89` or `G` + 8 bytes, then `.`). Anything else is `None`.
fn unpickle_simple(data: &[u8]) -> Option<Value> {
    match data {
        b"I01\n." => return Some(Value::Bool(true)),
        b"I00\n." => return Some(Value::Bool(false)),
        [b'F', rest @ ..] => {
            let text = std::str::from_utf8(rest.strip_suffix(b"\n.")?).ok()?;
            return text.parse().ok().map(Value::Double);
        }
        _ => {}
    }
    let mut rest = data.strip_prefix(&[0x80])?.get(1..)?;
    if let [0x95, tail @ ..] = rest {
        // FRAME: an 8-byte length, then the frame's opcodes.
        rest = tail.get(8..)?;
    }
    match rest {
        [0x88, b'.'] => Some(Value::Bool(true)),
        [0x89, b'.'] => Some(Value::Bool(false)),
        [b'G', bits @ .., b'.'] if bits.len() == 8 => Some(Value::Double(f64::from_bits(
            u64::from_be_bytes(bits.try_into().ok()?),
        ))),
        _ => None,
    }
}

/// A float as Python's `repr` would round-trip it (Rust's shortest
/// round-trip form; `float()` reads both spellings of exponents, `inf`, `nan`).
fn float_repr(f: f64) -> String {
    if f.is_nan() {
        "nan".to_string()
    } else if f.is_infinite() {
        if f > 0.0 { "inf" } else { "-inf" }.to_string()
    } else {
        format!("{f:?}")
    }
}

pub(crate) fn encode(value: &Value, min_compress_len: usize) -> Result<(Bytes, u32), Error> {
    let (data, flags) = match value {
        Value::Bytes(b) => (b.clone(), 0),
        Value::String(s) => (Bytes::from(s.clone()), TEXT),
        Value::Char(c) => (Bytes::from(c.to_string()), TEXT),
        // Integers: decimal text, never compressed.
        Value::Byte(n) => return Ok((Bytes::from(n.to_string()), INTEGER)),
        Value::Short(n) => return Ok((Bytes::from(n.to_string()), INTEGER)),
        Value::Int(n) => return Ok((Bytes::from(n.to_string()), INTEGER)),
        Value::Long(n) => return Ok((Bytes::from(n.to_string()), INTEGER)),
        Value::BigInt(s) => {
            integer(s.as_bytes()).map_err(|_| {
                Error::new(ErrorKind::InvalidArgument, "a BigInt that is not decimal")
            })?;
            return Ok((Bytes::from(s.clone()), INTEGER));
        }
        Value::Bool(b) => (
            Bytes::from_static(if *b { b"I01\n." } else { b"I00\n." }),
            PICKLE,
        ),
        Value::Double(f) => (Bytes::from(format!("F{}\n.", float_repr(*f))), PICKLE),
        Value::Float(f) => (
            Bytes::from(format!("F{}\n.", float_repr(f64::from(*f)))),
            PICKLE,
        ),
        Value::Serialized {
            kind: Serialization::Pickle,
            data,
        } => (data.clone(), PICKLE),
        Value::Serialized { .. } | Value::Date(_) => {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!(
                    "python-memcached has no form for a {} that memgroup writes",
                    value.type_name()
                ),
            ));
        }
    };
    if min_compress_len > 0
        && data.len() > min_compress_len
        && let Some(packed) = compress::compress(Codec::Zlib, &data)
    {
        return Ok((packed, flags | COMPRESSED));
    }
    Ok((data, flags))
}
