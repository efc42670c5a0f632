//! The Whalin/Danga Java client's (`MemCachedClient` 2.0.x and 3.0.x) native
//! type markers; also what the `Raw` format uses for typed values.
//!
//! | Rust / [`Value`] | Java | flags | bytes |
//! |---|---|---|---|
//! | `Byte` (`i8`, `u8`) | `Byte` | 1 (`0x1`) | one byte |
//! | `Int` (`i32`) | `Integer` | 4 (`0x4`) | 4, big-endian |
//! | `Char` | `Character` | 16 (`0x10`) | the UTF-16 unit as a 4-byte big-endian int |
//! | `String` | `String` | 32 (`0x20`) | UTF-8 |
//! | `Float` (`f32`) | `Float` | 128 (`0x80`) | 4, big-endian IEEE-754 bits |
//! | `Short` (`i16`) | `Short` | 256 (`0x100`) | 4, big-endian, sign-extended |
//! | `Double` (`f64`) | `Double` | 512 (`0x200`) | 8, big-endian IEEE-754 bits |
//! | `Date` | `Date` | 1024 (`0x400`) | 8, big-endian epoch milliseconds |
//! | `Bytes` | `byte[]` | 4096 (`0x1000`) | raw |
//! | `Bool` | `Boolean` | 8192 (`0x2000`) | one byte, `1` or `0` |
//! | `Long` (`i64`) | `Long` | 16384 (`0x4000`) | 8, big-endian |
//!
//! `StringBuffer` (64) and `StringBuilder` (2048) read as `String`. Reading
//! follows Java's decoder: the type bits are tested in its fixed order and the
//! first match wins. Flags 0 (other clients, counters from `incr`) read as
//! bytes, which `get_as` turns into text or a number. `0x2` marks a
//! gzip-compressed value (the Java client compresses over 30 KiB), `0x8` a
//! serialized Java object. Derived from the Java client's `NativeHandler` and
//! `MemcachedClient` (gwhalin/Memcached-Java-Client).

use bytes::{BufMut, Bytes, BytesMut};

use super::compress::{self, Codec};
use super::{DecodeError, Serialization, Value, inflate, utf8};
use crate::error::{Error, ErrorKind};
use crate::item::Item;

/// `java.lang.Byte`.
pub const FLAG_BYTE: u32 = 0x1;
/// gzip-compressed (the Java client's `F_COMPRESSED`).
pub const FLAG_COMPRESSED: u32 = 0x2;
/// `java.lang.Integer`.
pub const FLAG_INTEGER: u32 = 0x4;
/// A serialized Java object (`F_SERIALIZED`).
pub const FLAG_SERIALIZED: u32 = 0x8;
/// `java.lang.Character`.
pub const FLAG_CHARACTER: u32 = 0x10;
/// `java.lang.String`.
pub const FLAG_STRING: u32 = 0x20;
/// `java.lang.StringBuffer`.
pub const FLAG_STRING_BUFFER: u32 = 0x40;
/// `java.lang.Float`.
pub const FLAG_FLOAT: u32 = 0x80;
/// `java.lang.Short`.
pub const FLAG_SHORT: u32 = 0x100;
/// `java.lang.Double`.
pub const FLAG_DOUBLE: u32 = 0x200;
/// `java.util.Date`.
pub const FLAG_DATE: u32 = 0x400;
/// `java.lang.StringBuilder`.
pub const FLAG_STRING_BUILDER: u32 = 0x800;
/// `byte[]`.
pub const FLAG_BYTE_ARRAY: u32 = 0x1000;
/// `java.lang.Boolean`.
pub const FLAG_BOOLEAN: u32 = 0x2000;
/// `java.lang.Long`.
pub const FLAG_LONG: u32 = 0x4000;

/// Java's decoder tests the type bits in this order; the first match wins.
const DECODE_ORDER: [u32; 13] = [
    FLAG_BYTE,
    FLAG_BOOLEAN,
    FLAG_INTEGER,
    FLAG_LONG,
    FLAG_CHARACTER,
    FLAG_STRING,
    FLAG_STRING_BUFFER,
    FLAG_FLOAT,
    FLAG_SHORT,
    FLAG_DOUBLE,
    FLAG_DATE,
    FLAG_STRING_BUILDER,
    FLAG_BYTE_ARRAY,
];

/// The Java type marker of `flags` (the first type bit in Java's order),
/// `0` for none (compression and serialization bits aside).
pub fn java_type(flags: u32) -> u32 {
    DECODE_ORDER
        .into_iter()
        .find(|&m| flags & m == m)
        .unwrap_or(0)
}

fn fixed<const N: usize>(data: &[u8], what: &str) -> Result<[u8; N], DecodeError> {
    data.get(..N)
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| {
            DecodeError::Corrupt(format!(
                "{what} needs {N} bytes, the value has {}",
                data.len()
            ))
        })
}

/// Decodes an item; `limit` bounds decompression, `None` (the `Raw` format)
/// refuses compressed values.
pub(crate) fn decode(item: &Item, limit: Option<usize>) -> Result<Value, DecodeError> {
    let mut flags = item.flags;
    // Borrowed unless inflated (see `spy::decode`).
    let inflated;
    let mut data = &item.value;
    if flags & FLAG_COMPRESSED != 0 {
        let Some(limit) = limit else {
            return Err(DecodeError::Unknown(
                "gzip-compressed (flag 0x2); read it with a value format (whalin, spymemcached, …)"
                    .to_string(),
            ));
        };
        inflated = inflate(Codec::Gzip, data, limit)?;
        data = &inflated;
        flags &= !FLAG_COMPRESSED;
    }
    if flags & FLAG_SERIALIZED != 0 && java_type(flags) == 0 {
        return Ok(Value::Serialized {
            kind: Serialization::Java,
            data: data.clone(),
        });
    }
    Ok(match java_type(flags) {
        0 | FLAG_BYTE_ARRAY => Value::Bytes(data.clone()),
        FLAG_STRING | FLAG_STRING_BUFFER | FLAG_STRING_BUILDER => Value::String(utf8(data)?),
        FLAG_BYTE => Value::Byte(fixed::<1>(data, "a Byte")?[0] as i8),
        FLAG_BOOLEAN => Value::Bool(fixed::<1>(data, "a Boolean")?[0] == 1),
        FLAG_INTEGER => Value::Int(i32::from_be_bytes(fixed(data, "an Integer")?)),
        FLAG_LONG => Value::Long(i64::from_be_bytes(fixed(data, "a Long")?)),
        FLAG_DATE => Value::Date(i64::from_be_bytes(fixed(data, "a Date")?)),
        FLAG_SHORT => Value::Short(i32::from_be_bytes(fixed(data, "a Short")?) as i16),
        FLAG_FLOAT => Value::Float(f32::from_bits(u32::from_be_bytes(fixed(data, "a Float")?))),
        FLAG_DOUBLE => Value::Double(f64::from_bits(u64::from_be_bytes(fixed(data, "a Double")?))),
        FLAG_CHARACTER => {
            let unit = i32::from_be_bytes(fixed(data, "a Character")?) as u16;
            Value::Char(char::from_u32(u32::from(unit)).ok_or_else(|| {
                DecodeError::Corrupt("a Character that is a lone UTF-16 surrogate".to_string())
            })?)
        }
        other => return Err(DecodeError::Unknown(format!("type flag 0x{other:x}"))),
    })
}

/// Encodes a value with the Java client's markers; `threshold`, when set,
/// gzips values strictly longer than it when that makes them smaller.
pub(crate) fn encode(value: &Value, threshold: Option<usize>) -> Result<(Bytes, u32), Error> {
    let mut out = BytesMut::new();
    let flags = match value {
        Value::Bytes(b) => return Ok(compressed(b.clone(), FLAG_BYTE_ARRAY, threshold)),
        Value::String(s) | Value::BigInt(s) => {
            return Ok(compressed(Bytes::from(s.clone()), FLAG_STRING, threshold));
        }
        Value::Serialized {
            kind: Serialization::Java,
            data,
        } => return Ok(compressed(data.clone(), FLAG_SERIALIZED, threshold)),
        Value::Serialized { .. } => {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                "a pickle cannot be stored in a Java client's format",
            ));
        }
        Value::Byte(b) => {
            out.put_i8(*b);
            FLAG_BYTE
        }
        Value::Bool(b) => {
            out.put_u8(u8::from(*b));
            FLAG_BOOLEAN
        }
        Value::Int(n) => {
            out.put_i32(*n);
            FLAG_INTEGER
        }
        Value::Short(n) => {
            // Java writes a Short as a 4-byte int.
            out.put_i32(i32::from(*n));
            FLAG_SHORT
        }
        Value::Long(n) => {
            out.put_i64(*n);
            FLAG_LONG
        }
        Value::Date(ms) => {
            out.put_i64(*ms);
            FLAG_DATE
        }
        Value::Float(f) => {
            out.put_u32(f.to_bits());
            FLAG_FLOAT
        }
        Value::Double(f) => {
            out.put_u64(f.to_bits());
            FLAG_DOUBLE
        }
        Value::Char(c) => {
            // A Java char is one UTF-16 unit; characters outside the BMP have none.
            let unit = u16::try_from(u32::from(*c)).unwrap_or(0xFFFD);
            out.put_i32(i32::from(unit));
            FLAG_CHARACTER
        }
    };
    Ok((out.freeze(), flags))
}

/// Gzips `data` when it is over the threshold and that makes it smaller.
fn compressed(data: Bytes, flags: u32, threshold: Option<usize>) -> (Bytes, u32) {
    match threshold {
        Some(t) if data.len() > t => match compress::compress(Codec::Gzip, &data) {
            Some(packed) => (packed, flags | FLAG_COMPRESSED),
            None => (data, flags),
        },
        _ => (data, flags),
    }
}
