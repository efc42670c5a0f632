//! Typed values with the Whalin Java client's flag conventions.
//!
//! memcached stores bytes and a 32-bit `flags` word it never looks at. The
//! Whalin/Danga Java client (`MemCachedClient` 2.0.x and 3.0.x) uses the flags
//! to mark the Java type of natively encoded values, so a value one client
//! writes the other can read:
//!
//! | Rust | Java | flags | bytes |
//! |---|---|---|---|
//! | `u8` | `Byte` | 1 (`0x1`) | one byte |
//! | `i32` | `Integer` | 4 (`0x4`) | 4, big-endian |
//! | `char` | `Character` | 16 (`0x10`) | the UTF-16 unit as a 4-byte big-endian int |
//! | `String`, `&str` | `String` | 32 (`0x20`) | UTF-8 |
//! | `f32` | `Float` | 128 (`0x80`) | 4, big-endian IEEE-754 bits |
//! | `i16` | `Short` | 256 (`0x100`) | 4, big-endian, sign-extended |
//! | `f64` | `Double` | 512 (`0x200`) | 8, big-endian IEEE-754 bits |
//! | `Vec<u8>`, `Bytes` | `byte[]` | 4096 (`0x1000`) | raw |
//! | `bool` | `Boolean` | 8192 (`0x2000`) | one byte, `1` or `0` |
//! | `i64` | `Long` | 16384 (`0x4000`) | 8, big-endian |
//!
//! `StringBuffer` (64) and `StringBuilder` (2048) read as `String`, `Date`
//! (1024, 8-byte big-endian epoch milliseconds) reads as `i64`. Reading
//! follows Java's decoder: the type bits are tested in its fixed order and
//! the first match wins. Values with flags 0 (other clients, and counters
//! from `incr`) read as text: a `String` as is, integers parsed from decimal
//! (memcached pads a shrunk counter with spaces, which are ignored).
//!
//! Not supported: bit 2 (`0x2`, gzip-compressed — Whalin 2.0 compresses
//! values over 30 KiB by default; set `compressEnable=false` there) and
//! bit 8 (`0x8`, Java serialization). Such values come back as
//! [`ErrorKind::Type`] errors, never as garbage.
//!
//! Counters are written as decimal text with flags 32, which both Java
//! client lines read with `getCounter` and memcached's `incr` accepts.

use bytes::Bytes;

use crate::error::{Error, ErrorKind};
use crate::item::Item;

/// `Byte`
pub const FLAG_BYTE: u32 = 0x1;
/// gzip-compressed payload (not supported here).
pub const FLAG_COMPRESSED: u32 = 0x2;
/// `Integer`
pub const FLAG_INTEGER: u32 = 0x4;
/// Java-serialized object (not supported here).
pub const FLAG_SERIALIZED: u32 = 0x8;
/// `Character`
pub const FLAG_CHARACTER: u32 = 0x10;
/// `String`
pub const FLAG_STRING: u32 = 0x20;
/// `StringBuffer`
pub const FLAG_STRING_BUFFER: u32 = 0x40;
/// `Float`
pub const FLAG_FLOAT: u32 = 0x80;
/// `Short`
pub const FLAG_SHORT: u32 = 0x100;
/// `Double`
pub const FLAG_DOUBLE: u32 = 0x200;
/// `Date`
pub const FLAG_DATE: u32 = 0x400;
/// `StringBuilder`
pub const FLAG_STRING_BUILDER: u32 = 0x800;
/// `byte[]`
pub const FLAG_BYTE_ARRAY: u32 = 0x1000;
/// `Boolean`
pub const FLAG_BOOLEAN: u32 = 0x2000;
/// `Long`
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

/// A value that can be stored: its bytes and flags.
pub trait ToValue {
    /// The encoded bytes and the flags to store with them.
    fn to_value(&self) -> (Bytes, u32);
}

/// A value that can be read back from an [`Item`].
pub trait FromValue: Sized {
    /// Decodes the item, or fails with an [`ErrorKind::Type`] error.
    fn from_item(item: &Item) -> Result<Self, Error>;
}

/// The Java type marker of `flags` (the first type bit in Java's order),
/// `0` for none. Fails on compressed or serialized values.
pub fn java_type(flags: u32) -> Result<u32, Error> {
    if flags & FLAG_COMPRESSED != 0 {
        return Err(type_error(
            "the value is gzip-compressed (flag 0x2), which memgroup does not decode",
        ));
    }
    if flags & FLAG_SERIALIZED != 0 && flags & !FLAG_SERIALIZED == 0 {
        return Err(type_error(
            "the value is a serialized Java object (flag 0x8)",
        ));
    }
    Ok(DECODE_ORDER
        .into_iter()
        .find(|&m| flags & m == m)
        .unwrap_or(0))
}

fn type_error(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::Type, message)
}

fn fixed<const N: usize>(item: &Item, what: &str) -> Result<[u8; N], Error> {
    item.value
        .get(..N)
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| {
            type_error(format!(
                "{what} needs {N} bytes, the value has {}",
                item.value.len()
            ))
        })
}

fn text(item: &Item) -> Result<&str, Error> {
    std::str::from_utf8(&item.value).map_err(|_| type_error("the value is not UTF-8 text"))
}

fn decimal<T: std::str::FromStr>(item: &Item) -> Result<T, Error> {
    text(item)?
        .trim_end_matches(' ')
        .parse()
        .map_err(|_| type_error("the value is not a decimal number"))
}

fn mismatch<T>(marker: u32, wanted: &str) -> Result<T, Error> {
    Err(type_error(format!(
        "stored with type flag 0x{marker:x}, not {wanted}"
    )))
}

impl ToValue for str {
    fn to_value(&self) -> (Bytes, u32) {
        (Bytes::copy_from_slice(self.as_bytes()), FLAG_STRING)
    }
}

impl ToValue for String {
    fn to_value(&self) -> (Bytes, u32) {
        self.as_str().to_value()
    }
}

impl FromValue for String {
    fn from_item(item: &Item) -> Result<Self, Error> {
        match java_type(item.flags)? {
            0 | FLAG_STRING | FLAG_STRING_BUFFER | FLAG_STRING_BUILDER => {
                Ok(text(item)?.to_string())
            }
            m => mismatch(m, "a string"),
        }
    }
}

impl ToValue for [u8] {
    fn to_value(&self) -> (Bytes, u32) {
        (Bytes::copy_from_slice(self), FLAG_BYTE_ARRAY)
    }
}

impl ToValue for Vec<u8> {
    fn to_value(&self) -> (Bytes, u32) {
        self.as_slice().to_value()
    }
}

impl ToValue for Bytes {
    fn to_value(&self) -> (Bytes, u32) {
        (self.clone(), FLAG_BYTE_ARRAY)
    }
}

impl FromValue for Bytes {
    /// Any value's raw bytes (the flags are not checked).
    fn from_item(item: &Item) -> Result<Self, Error> {
        Ok(item.value.clone())
    }
}

impl FromValue for Vec<u8> {
    /// Any value's raw bytes (the flags are not checked).
    fn from_item(item: &Item) -> Result<Self, Error> {
        Ok(item.value.to_vec())
    }
}

impl ToValue for bool {
    fn to_value(&self) -> (Bytes, u32) {
        (Bytes::copy_from_slice(&[u8::from(*self)]), FLAG_BOOLEAN)
    }
}

impl FromValue for bool {
    fn from_item(item: &Item) -> Result<Self, Error> {
        match java_type(item.flags)? {
            FLAG_BOOLEAN => Ok(fixed::<1>(item, "a Boolean")?[0] == 1),
            0 | FLAG_STRING => match text(item)?.trim_end_matches(' ') {
                "true" => Ok(true),
                "false" => Ok(false),
                _ => Err(type_error("the value is not true/false")),
            },
            m => mismatch(m, "a Boolean"),
        }
    }
}

impl ToValue for u8 {
    fn to_value(&self) -> (Bytes, u32) {
        (Bytes::copy_from_slice(&[*self]), FLAG_BYTE)
    }
}

impl FromValue for u8 {
    fn from_item(item: &Item) -> Result<Self, Error> {
        match java_type(item.flags)? {
            FLAG_BYTE => Ok(fixed::<1>(item, "a Byte")?[0]),
            m => mismatch(m, "a Byte"),
        }
    }
}

impl ToValue for char {
    fn to_value(&self) -> (Bytes, u32) {
        // A Java char is one UTF-16 unit; characters outside the BMP have none.
        let unit = u16::try_from(u32::from(*self)).unwrap_or(0xFFFD);
        (
            Bytes::copy_from_slice(&i32::from(unit).to_be_bytes()),
            FLAG_CHARACTER,
        )
    }
}

impl FromValue for char {
    fn from_item(item: &Item) -> Result<Self, Error> {
        match java_type(item.flags)? {
            FLAG_CHARACTER => {
                let unit = i32::from_be_bytes(fixed::<4>(item, "a Character")?) as u16;
                char::from_u32(u32::from(unit)).ok_or_else(|| type_error("a lone UTF-16 surrogate"))
            }
            m => mismatch(m, "a Character"),
        }
    }
}

/// Integers: the Java type's width on write; on read, the Java types that
/// fit, or decimal text (flags 0 or `String`, e.g. counters).
macro_rules! integer {
    ($t:ty, $flag:expr, $n:literal, $java:literal, $($alt:ident => $alt_t:ty),*) => {
        impl ToValue for $t {
            fn to_value(&self) -> (Bytes, u32) {
                (Bytes::copy_from_slice(&self.to_be_bytes()), $flag)
            }
        }

        impl FromValue for $t {
            fn from_item(item: &Item) -> Result<Self, Error> {
                match java_type(item.flags)? {
                    0 | FLAG_STRING => decimal(item),
                    m if m == $flag => Ok(<$t>::from_be_bytes(fixed::<$n>(item, $java)?)),
                    $(m if m == $alt => Ok(<$t>::from(<$alt_t>::from_be_bytes(fixed::<4>(item, $java)?) as i16)),)*
                    m => mismatch(m, $java),
                }
            }
        }
    };
}

integer!(i32, FLAG_INTEGER, 4, "an Integer",);
integer!(i64, FLAG_LONG, 8, "a Long",);

impl ToValue for i16 {
    fn to_value(&self) -> (Bytes, u32) {
        // Java writes a Short as a 4-byte int.
        (
            Bytes::copy_from_slice(&i32::from(*self).to_be_bytes()),
            FLAG_SHORT,
        )
    }
}

impl FromValue for i16 {
    fn from_item(item: &Item) -> Result<Self, Error> {
        match java_type(item.flags)? {
            0 | FLAG_STRING => decimal(item),
            FLAG_SHORT => Ok(i32::from_be_bytes(fixed::<4>(item, "a Short")?) as i16),
            m => mismatch(m, "a Short"),
        }
    }
}

impl ToValue for u64 {
    /// Unsigned counters are stored as decimal text (flags 32), the form
    /// memcached's `incr`/`decr` and the Java clients' `getCounter` read.
    fn to_value(&self) -> (Bytes, u32) {
        (Bytes::from(self.to_string()), FLAG_STRING)
    }
}

impl FromValue for u64 {
    fn from_item(item: &Item) -> Result<Self, Error> {
        match java_type(item.flags)? {
            0 | FLAG_STRING => decimal(item),
            FLAG_LONG | FLAG_DATE => u64::try_from(i64::from_be_bytes(fixed::<8>(item, "a Long")?))
                .map_err(|_| type_error("a negative Long")),
            FLAG_INTEGER => u64::try_from(i32::from_be_bytes(fixed::<4>(item, "an Integer")?))
                .map_err(|_| type_error("a negative Integer")),
            m => mismatch(m, "an unsigned number"),
        }
    }
}

impl ToValue for f32 {
    fn to_value(&self) -> (Bytes, u32) {
        (
            Bytes::copy_from_slice(&self.to_bits().to_be_bytes()),
            FLAG_FLOAT,
        )
    }
}

impl FromValue for f32 {
    fn from_item(item: &Item) -> Result<Self, Error> {
        match java_type(item.flags)? {
            FLAG_FLOAT => Ok(f32::from_bits(u32::from_be_bytes(fixed::<4>(
                item, "a Float",
            )?))),
            0 | FLAG_STRING => decimal(item),
            m => mismatch(m, "a Float"),
        }
    }
}

impl ToValue for f64 {
    fn to_value(&self) -> (Bytes, u32) {
        (
            Bytes::copy_from_slice(&self.to_bits().to_be_bytes()),
            FLAG_DOUBLE,
        )
    }
}

impl FromValue for f64 {
    fn from_item(item: &Item) -> Result<Self, Error> {
        match java_type(item.flags)? {
            FLAG_DOUBLE => Ok(f64::from_bits(u64::from_be_bytes(fixed::<8>(
                item, "a Double",
            )?))),
            0 | FLAG_STRING => decimal(item),
            m => mismatch(m, "a Double"),
        }
    }
}

impl<T: ToValue + ?Sized> ToValue for &T {
    fn to_value(&self) -> (Bytes, u32) {
        (**self).to_value()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(value: &[u8], flags: u32) -> Item {
        Item {
            value: Bytes::copy_from_slice(value),
            flags,
            cas: None,
        }
    }

    fn round_trip<T: ToValue + FromValue + PartialEq + std::fmt::Debug>(v: &T) {
        let (bytes, flags) = v.to_value();
        assert_eq!(&T::from_item(&item(&bytes, flags)).unwrap(), v);
    }

    #[test]
    fn java_encodings() {
        assert_eq!(42i32.to_value(), (Bytes::from_static(&[0, 0, 0, 42]), 4));
        assert_eq!((-1i16).to_value(), (Bytes::from_static(&[0xff; 4]), 256));
        assert_eq!('A'.to_value(), (Bytes::from_static(&[0, 0, 0, 0x41]), 16));
        assert_eq!(true.to_value(), (Bytes::from_static(&[1]), 8192));
        assert_eq!(
            7i64.to_value(),
            (Bytes::from_static(&[0, 0, 0, 0, 0, 0, 0, 7]), 16384)
        );
        assert_eq!("hé".to_value(), (Bytes::from_static("hé".as_bytes()), 32));
        assert_eq!(1.5f64.to_value().1, 512);
        assert_eq!(12u64.to_value(), (Bytes::from_static(b"12"), 32));
        round_trip(&-123_456i32);
        round_trip(&i64::MIN);
        round_trip(&-5i16);
        round_trip(&'é');
        round_trip(&false);
        round_trip(&2.25f32);
        round_trip(&-0.125f64);
        round_trip(&String::from("text"));
        round_trip(&200u8);
        round_trip(&u64::MAX);
    }

    #[test]
    fn reading_other_forms() {
        // A counter after decr: decimal text padded with spaces, flags 0.
        assert_eq!(i64::from_item(&item(b"9 ", 0)).unwrap(), 9);
        assert_eq!(u64::from_item(&item(b"15", 32)).unwrap(), 15);
        assert_eq!(String::from_item(&item(b"x", 0x800)).unwrap(), "x");
        // Java's order: Boolean (8192) is tested before Long (16384).
        assert_eq!(java_type(0x2000 | 0x4000).unwrap(), 0x2000);
        let compressed = String::from_item(&item(b"\x1f\x8b", 34)).unwrap_err();
        assert_eq!(compressed.kind(), ErrorKind::Type);
        assert!(i32::from_item(&item(&[0, 1], 4)).is_err());
        assert!(i32::from_item(&item(b"x", 32)).is_err());
        assert!(bool::from_item(&item(&[1], 4)).is_err());
    }
}
