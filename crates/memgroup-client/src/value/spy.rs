//! spymemcached's `SerializingTranscoder` layout, which EVCache's
//! `EVCacheTranscoder` shares.
//!
//! Flag bit `0x1` marks a Java-serialized object, `0x2` gzip compression;
//! bits 8–15 a special type. Numbers are big-endian with leading zero bytes
//! stripped (`TranscoderUtils` "packs zeros": int 0 is empty, 42 one byte, -1
//! four), float and double as their raw bits the same way.
//!
//! | [`Value`] | Java | flags | bytes |
//! |---|---|---|---|
//! | `String` | `String` | 0 | UTF-8 |
//! | `Bool` | `Boolean` | `1<<8` | ASCII `1` or `0` |
//! | `Int` | `Integer` | `2<<8` | packed int |
//! | `Long` | `Long` | `3<<8` | packed long |
//! | `Date` | `Date` | `4<<8` | packed epoch milliseconds |
//! | `Byte` | `Byte` | `5<<8` | one byte |
//! | `Float` | `Float` | `6<<8` | packed raw bits |
//! | `Double` | `Double` | `7<<8` | packed raw bits |
//! | `Bytes` | `byte[]` | `8<<8` | raw |
//! | `Serialized` (Java) | anything else | `0x1` | `ObjectOutputStream` bytes |
//!
//! A `Char` or `Short` is a serialized `java.lang.Character`/`Short` there,
//! which memgroup does not write. Values strictly longer than the threshold
//! are gzipped when that makes them smaller — except, in spymemcached (2.12.3,
//! `StringUtils.isJsonObject`), strings starting with `{` or `[`, equal to
//! `true`/`false`/`null`, or matching `-?\d+`, which are stored as they are.
//! Read from the Debian `libspymemcached-java` jar (2.12.3) and
//! Netflix/EVCache's `EVCacheSerializingTranscoder`.

use bytes::Bytes;

use super::compress::{self, Codec};
use super::{DecodeError, Serialization, Value, inflate, utf8};
use crate::error::{Error, ErrorKind};
use crate::item::Item;

const SERIALIZED: u32 = 1;
const COMPRESSED: u32 = 2;
const SPECIAL_MASK: u32 = 0xff00;
const BOOLEAN: u32 = 1 << 8;
const INT: u32 = 2 << 8;
const LONG: u32 = 3 << 8;
const DATE: u32 = 4 << 8;
const BYTE: u32 = 5 << 8;
const FLOAT: u32 = 6 << 8;
const DOUBLE: u32 = 7 << 8;
const BYTE_ARRAY: u32 = 8 << 8;

/// `TranscoderUtils.encodeLong` with zero packing: big-endian, leading zero
/// bytes dropped.
fn pack(n: u64) -> Bytes {
    let bytes = n.to_be_bytes();
    let skip = bytes.iter().take_while(|&&b| b == 0).count();
    Bytes::copy_from_slice(&bytes[skip..])
}

/// `TranscoderUtils.decodeLong`: the bytes accumulated big-endian. More than
/// `max` bytes cannot have come from the encoder.
fn unpack(data: &[u8], max: usize, what: &str) -> Result<u64, DecodeError> {
    if data.len() > max {
        return Err(DecodeError::Corrupt(format!(
            "{what} of {} bytes (at most {max})",
            data.len()
        )));
    }
    Ok(data.iter().fold(0u64, |n, &b| (n << 8) | u64::from(b)))
}

pub(crate) fn decode(item: &Item, limit: usize) -> Result<Value, DecodeError> {
    let flags = item.flags;
    // Borrowed unless inflated: a string or a number copies out of it, and
    // only the variants holding bytes take a handle on the reply's buffer
    // (a reference count that the reader's thread shares).
    let inflated;
    let data = if flags & COMPRESSED != 0 {
        inflated = inflate(Codec::Gzip, &item.value, limit)?;
        &inflated
    } else {
        &item.value
    };
    if flags & SERIALIZED != 0 {
        return Ok(Value::Serialized {
            kind: Serialization::Java,
            data: data.clone(),
        });
    }
    Ok(match flags & SPECIAL_MASK {
        // Java decodes any bytes as a (garbled) string; bytes that are not
        // UTF-8 most likely came from another client and stay bytes here.
        0 => match utf8(data) {
            Ok(s) => Value::String(s),
            Err(_) => Value::Bytes(data.clone()),
        },
        BOOLEAN => match &data[..] {
            [b] => Value::Bool(*b == b'1'),
            _ => {
                return Err(DecodeError::Corrupt(
                    "a Boolean of other than 1 byte".into(),
                ));
            }
        },
        // Java narrows the accumulated long to an int.
        INT => Value::Int(unpack(data, 4, "an Integer")? as u32 as i32),
        LONG => Value::Long(unpack(data, 8, "a Long")? as i64),
        DATE => Value::Date(unpack(data, 8, "a Date")? as i64),
        BYTE => match &data[..] {
            [b] => Value::Byte(*b as i8),
            _ => return Err(DecodeError::Corrupt("a Byte of other than 1 byte".into())),
        },
        FLOAT => Value::Float(f32::from_bits(unpack(data, 4, "a Float")? as u32)),
        DOUBLE => Value::Double(f64::from_bits(unpack(data, 8, "a Double")?)),
        BYTE_ARRAY => Value::Bytes(data.clone()),
        other => return Err(DecodeError::Unknown(format!("special type 0x{other:x}"))),
    })
}

/// `StringUtils.isJsonObject` of spymemcached 2.12.3.
fn looks_like_json(s: &str) -> bool {
    let digits = s.strip_prefix('-').unwrap_or(s);
    s.starts_with('{')
        || s.starts_with('[')
        || matches!(s, "true" | "false" | "null")
        || (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
}

pub(crate) fn encode(
    value: &Value,
    threshold: usize,
    skip_json: bool,
) -> Result<(Bytes, u32), Error> {
    let (data, flags) = match value {
        Value::String(s) | Value::BigInt(s) => {
            let data = Bytes::from(s.clone());
            if skip_json && looks_like_json(s) {
                return Ok((data, 0));
            }
            (data, 0)
        }
        Value::Bool(b) => (Bytes::from_static(if *b { b"1" } else { b"0" }), BOOLEAN),
        Value::Int(n) => (pack(u64::from(*n as u32)), INT),
        Value::Long(n) => (pack(*n as u64), LONG),
        Value::Date(ms) => (pack(*ms as u64), DATE),
        Value::Byte(b) => (Bytes::copy_from_slice(&[*b as u8]), BYTE),
        Value::Float(f) => (pack(u64::from(f.to_bits())), FLOAT),
        Value::Double(f) => (pack(f.to_bits()), DOUBLE),
        Value::Bytes(b) => (b.clone(), BYTE_ARRAY),
        Value::Serialized {
            kind: Serialization::Java,
            data,
        } => (data.clone(), SERIALIZED),
        Value::Serialized { .. } => {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                "a pickle cannot be stored in spymemcached's format",
            ));
        }
        Value::Char(_) | Value::Short(_) => {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!(
                    "spymemcached stores a Java {} as a serialized object, which memgroup does not write; store it as an int or a string",
                    value.type_name()
                ),
            ));
        }
    };
    if data.len() > threshold
        && let Some(packed) = compress::compress(Codec::Gzip, &data)
    {
        return Ok((packed, flags | COMPRESSED));
    }
    Ok((data, flags))
}
