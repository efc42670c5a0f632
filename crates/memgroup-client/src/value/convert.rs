//! Rust types to and from [`Value`]: what `set_as` and `get_as` use, the
//! format doing the bytes.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;

use super::Value;
use crate::error::{Error, ErrorKind};

/// A Rust value that can be stored: its [`Value`].
pub trait ToValue {
    /// The value to encode.
    fn to_value(&self) -> Value;
}

/// A Rust value that can be read back from a [`Value`].
pub trait FromValue: Sized {
    /// Converts, or fails with an [`ErrorKind::Type`] error. Numbers convert
    /// between widths when they fit, and from decimal text (counters written
    /// by `incr`, Python ints, strings of digits).
    fn from_value(value: Value) -> Result<Self, Error>;
}

fn type_error(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::Type, message)
}

fn mismatch<T>(value: &Value, wanted: &str) -> Result<T, Error> {
    Err(type_error(format!(
        "the stored value is a {}, not {wanted}",
        value.type_name()
    )))
}

/// Decimal text, as memcached's counters and Python ints store it; memcached
/// pads a shrunk counter with spaces.
fn decimal<T: std::str::FromStr>(text: &[u8], wanted: &str) -> Result<T, Error> {
    std::str::from_utf8(text)
        .ok()
        .and_then(|t| t.trim_end_matches(' ').parse().ok())
        .ok_or_else(|| type_error(format!("the stored text is not {wanted}")))
}

impl ToValue for Value {
    fn to_value(&self) -> Value {
        self.clone()
    }
}

impl FromValue for Value {
    fn from_value(value: Value) -> Result<Self, Error> {
        Ok(value)
    }
}

impl<T: ToValue + ?Sized> ToValue for &T {
    fn to_value(&self) -> Value {
        (**self).to_value()
    }
}

impl ToValue for str {
    fn to_value(&self) -> Value {
        Value::String(self.to_string())
    }
}

impl ToValue for String {
    fn to_value(&self) -> Value {
        Value::String(self.clone())
    }
}

impl FromValue for String {
    fn from_value(value: Value) -> Result<Self, Error> {
        match value {
            Value::String(s) | Value::BigInt(s) => Ok(s),
            Value::Bytes(b) => String::from_utf8(b.to_vec())
                .map_err(|_| type_error("the stored bytes are not UTF-8 text")),
            Value::Char(c) => Ok(c.to_string()),
            other => mismatch(&other, "a string"),
        }
    }
}

impl ToValue for [u8] {
    fn to_value(&self) -> Value {
        Value::Bytes(Bytes::copy_from_slice(self))
    }
}

impl ToValue for Vec<u8> {
    fn to_value(&self) -> Value {
        self.as_slice().to_value()
    }
}

impl ToValue for Bytes {
    fn to_value(&self) -> Value {
        Value::Bytes(self.clone())
    }
}

/// The stored bytes of a value that has them as such: bytes, text, or a
/// serialized object's bytes.
fn bytes_of(value: Value) -> Result<Bytes, Error> {
    match value {
        Value::Bytes(b) | Value::Serialized { data: b, .. } => Ok(b),
        Value::String(s) | Value::BigInt(s) => Ok(Bytes::from(s)),
        other => mismatch(&other, "bytes"),
    }
}

impl FromValue for Bytes {
    fn from_value(value: Value) -> Result<Self, Error> {
        bytes_of(value)
    }
}

impl FromValue for Vec<u8> {
    fn from_value(value: Value) -> Result<Self, Error> {
        bytes_of(value).map(|b| b.to_vec())
    }
}

impl ToValue for bool {
    fn to_value(&self) -> Value {
        Value::Bool(*self)
    }
}

impl FromValue for bool {
    fn from_value(value: Value) -> Result<Self, Error> {
        match value {
            Value::Bool(b) => Ok(b),
            Value::String(s) => match s.trim_end_matches(' ') {
                "true" => Ok(true),
                "false" => Ok(false),
                _ => Err(type_error("the stored text is not true/false")),
            },
            other => mismatch(&other, "a bool"),
        }
    }
}

impl ToValue for char {
    fn to_value(&self) -> Value {
        Value::Char(*self)
    }
}

impl FromValue for char {
    fn from_value(value: Value) -> Result<Self, Error> {
        match value {
            Value::Char(c) => Ok(c),
            Value::String(s) if s.chars().count() == 1 => Ok(s.chars().next().unwrap_or('\0')),
            other => mismatch(&other, "a char"),
        }
    }
}

/// The integer a value holds, as `i128` (wide enough for every integer
/// variant), or `None` if it is not an integer.
fn integer(value: &Value, wanted: &str) -> Result<i128, Error> {
    match value {
        Value::Byte(n) => Ok(i128::from(*n)),
        Value::Short(n) => Ok(i128::from(*n)),
        Value::Int(n) => Ok(i128::from(*n)),
        Value::Long(n) | Value::Date(n) => Ok(i128::from(*n)),
        Value::String(s) | Value::BigInt(s) => decimal(s.as_bytes(), wanted),
        Value::Bytes(b) => decimal(b, wanted),
        other => mismatch(other, wanted),
    }
}

macro_rules! integers {
    ($($t:ty => $variant:ident, $name:literal;)*) => {$(
        impl FromValue for $t {
            fn from_value(value: Value) -> Result<Self, Error> {
                let n = integer(&value, $name)?;
                <$t>::try_from(n).map_err(|_| {
                    type_error(format!("the stored number {n} does not fit {}", $name))
                })
            }
        }

        impl ToValue for $t {
            fn to_value(&self) -> Value {
                Value::$variant((*self).into())
            }
        }
    )*};
}

integers! {
    i8 => Byte, "an i8";
    i16 => Short, "an i16";
    i32 => Int, "an i32";
    i64 => Long, "an i64";
}

impl ToValue for u8 {
    /// A Java `byte` with the same bits.
    fn to_value(&self) -> Value {
        Value::Byte(*self as i8)
    }
}

impl FromValue for u8 {
    /// A Java `byte` read with its bits (so `-1` is 255); other integers when
    /// they fit.
    fn from_value(value: Value) -> Result<Self, Error> {
        match value {
            Value::Byte(b) => Ok(b as u8),
            other => {
                let n = integer(&other, "a u8")?;
                u8::try_from(n).map_err(|_| type_error(format!("{n} does not fit a u8")))
            }
        }
    }
}

impl ToValue for u64 {
    /// Unsigned counters are stored as decimal text, the form memcached's
    /// `incr`/`decr` and every client's counter reads understand.
    fn to_value(&self) -> Value {
        Value::String(self.to_string())
    }
}

impl FromValue for u64 {
    fn from_value(value: Value) -> Result<Self, Error> {
        let n = integer(&value, "a u64")?;
        u64::try_from(n).map_err(|_| type_error(format!("{n} does not fit a u64")))
    }
}

impl ToValue for f32 {
    fn to_value(&self) -> Value {
        Value::Float(*self)
    }
}

impl FromValue for f32 {
    fn from_value(value: Value) -> Result<Self, Error> {
        match value {
            Value::Float(f) => Ok(f),
            Value::String(s) => decimal(s.as_bytes(), "a number"),
            other => mismatch(&other, "an f32"),
        }
    }
}

impl ToValue for f64 {
    fn to_value(&self) -> Value {
        Value::Double(*self)
    }
}

impl FromValue for f64 {
    fn from_value(value: Value) -> Result<Self, Error> {
        match value {
            Value::Double(f) => Ok(f),
            Value::Float(f) => Ok(f64::from(f)),
            Value::String(s) => decimal(s.as_bytes(), "a number"),
            other => mismatch(&other, "an f64"),
        }
    }
}

impl ToValue for SystemTime {
    /// A Java `Date`: milliseconds since the epoch.
    fn to_value(&self) -> Value {
        let ms = match self.duration_since(UNIX_EPOCH) {
            Ok(d) => i64::try_from(d.as_millis()).unwrap_or(i64::MAX),
            Err(e) => -i64::try_from(e.duration().as_millis()).unwrap_or(i64::MAX),
        };
        Value::Date(ms)
    }
}

impl FromValue for SystemTime {
    fn from_value(value: Value) -> Result<Self, Error> {
        match value {
            Value::Date(ms) | Value::Long(ms) => {
                let d = Duration::from_millis(ms.unsigned_abs());
                Ok(if ms >= 0 {
                    UNIX_EPOCH + d
                } else {
                    UNIX_EPOCH - d
                })
            }
            other => mismatch(&other, "a date"),
        }
    }
}
