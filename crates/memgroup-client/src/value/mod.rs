//! Typed values in the formats Java and Python services store.
//!
//! memcached keeps bytes and a 32-bit `flags` word it never looks at. Each
//! client family marks a value's type and compression in those flags and
//! encodes it its own way; a [`ValueFormat`] is one such convention:
//!
//! | format | who writes it | compression |
//! |---|---|---|
//! | [`Raw`](ValueFormat::Raw) (default) | memgroup as it always did: `get`/`set` bytes and flags untouched; typed values with the Whalin markers | none |
//! | [`Spymemcached`](ValueFormat::Spymemcached) | spymemcached's `SerializingTranscoder` | gzip over 16,384 bytes |
//! | [`evcache()`](ValueFormat::evcache) | EVCache's `EVCacheTranscoder` (spymemcached's layout) | gzip over 120 bytes |
//! | [`Whalin`](ValueFormat::Whalin) | the Whalin/Danga `MemcachedClient` (classic markers) | gzip over 30,720 bytes |
//! | [`PythonMemcached`](ValueFormat::PythonMemcached) | python-memcached 1.62 | zlib over `min_compress_len` (default never) |
//!
//! Reading decodes into a [`Value`] (or straight into a Rust type through
//! [`FromValue`]); writing encodes a [`Value`] (or a Rust type through
//! [`ToValue`]) with the format's flags, compressing when the format would
//! and the result is smaller. Java-serialized objects and pickles come back
//! as [`Value::Serialized`] with their bytes, never as an error or a miss.
//! Decompression is bounded ([`ClientBuilder::max_decompressed_size`](crate::ClientBuilder::max_decompressed_size));
//! corrupt data is an [`ErrorKind::Corrupt`] error naming the key.
//!
//! ```no_run
//! use memgroup_client::Client;
//! use memgroup_client::value::{Value, ValueFormat};
//!
//! # async fn demo() -> Result<(), memgroup_client::Error> {
//! // An EVCache fleet: nearly every value is gzip-compressed.
//! let client = Client::builder()
//!     .servers("10.0.0.1:11211")
//!     .value_format(ValueFormat::evcache())
//!     .build()?;
//! client.set_as("user:42:name", "Ada Lovelace", 300).await?;
//! let name: Option<String> = client.get_as("user:42:name").await?;
//! let visits: Option<i64> = client.get_as("user:42:visits").await?;
//! if let Some(Value::Serialized { .. }) = client.get_as::<Value>("user:42:profile").await? {
//!     // a Java object: its bytes are there, memgroup does not deserialize it
//! }
//! # let _ = (name, visits);
//! # Ok(()) }
//! ```

mod compress;
mod convert;
mod python;
mod spy;
mod whalin;

use std::fmt;
use std::str::FromStr;

use bytes::Bytes;

use crate::error::{Error, ErrorKind};
use crate::item::Item;

pub use convert::{FromValue, ToValue};
pub use whalin::{
    FLAG_BOOLEAN, FLAG_BYTE, FLAG_BYTE_ARRAY, FLAG_CHARACTER, FLAG_COMPRESSED, FLAG_DATE,
    FLAG_DOUBLE, FLAG_FLOAT, FLAG_INTEGER, FLAG_LONG, FLAG_SERIALIZED, FLAG_SHORT, FLAG_STRING,
    FLAG_STRING_BUFFER, FLAG_STRING_BUILDER, java_type,
};

/// A decoded value: what the storing client meant, across formats.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Value {
    /// Raw bytes (Java `byte[]`, Python `bytes`, or anything in `Raw`).
    Bytes(Bytes),
    /// Text.
    String(String),
    /// A boolean.
    Bool(bool),
    /// A Java `byte` (signed).
    Byte(i8),
    /// A Java `short`.
    Short(i16),
    /// A Java `int`.
    Int(i32),
    /// A Java `long`, or a Python `int` that fits.
    Long(i64),
    /// A Python `int` too large for 64 bits, as its decimal digits.
    BigInt(String),
    /// A Java `float`.
    Float(f32),
    /// A Java `double` or Python `float`.
    Double(f64),
    /// A Java `Date`: milliseconds since the Unix epoch.
    Date(i64),
    /// A Java `char` (one UTF-16 unit).
    Char(char),
    /// An object in a language's own serialization, which memgroup does not
    /// interpret: its bytes (decompressed) as stored.
    Serialized {
        /// Which serialization.
        kind: Serialization,
        /// The serialized bytes.
        data: Bytes,
    },
}

/// A language's object serialization.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Serialization {
    /// `java.io.ObjectOutputStream` (spymemcached, EVCache, Whalin).
    Java,
    /// Python's `pickle` (python-memcached).
    Pickle,
}

impl Value {
    /// The type's name, for messages and the tool's output.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Bytes(_) => "bytes",
            Value::String(_) => "string",
            Value::Bool(_) => "bool",
            Value::Byte(_) => "byte",
            Value::Short(_) => "short",
            Value::Int(_) => "int",
            Value::Long(_) => "long",
            Value::BigInt(_) => "bigint",
            Value::Float(_) => "float",
            Value::Double(_) => "double",
            Value::Date(_) => "date",
            Value::Char(_) => "char",
            Value::Serialized {
                kind: Serialization::Java,
                ..
            } => "java-serialized",
            Value::Serialized {
                kind: Serialization::Pickle,
                ..
            } => "pickle",
        }
    }
}

/// The other formats' conventions; see the [module docs](self).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum ValueFormat {
    /// Bytes and flags as stored; typed values use the Whalin markers
    /// without compression (memgroup's behaviour before formats existed).
    #[default]
    Raw,
    /// spymemcached's `SerializingTranscoder`; EVCache's layout too.
    Spymemcached {
        /// Values strictly longer than this are gzipped when that makes
        /// them smaller (16,384 in spymemcached, 120 in EVCache).
        compression_threshold: usize,
        /// spymemcached never compresses strings that look like JSON or a
        /// number (`{…`, `[…`, `true`, `false`, `null`, `-?\d+`); EVCache's
        /// transcoder has no such rule.
        skip_json: bool,
    },
    /// The Whalin/Danga `MemcachedClient` native markers (classic 2.0.x;
    /// 3.0.x's `NativeHandler` tests the same markers in the same order).
    Whalin {
        /// Values strictly longer than this are gzipped when that makes them
        /// smaller (30,720 in the Java client).
        compression_threshold: usize,
    },
    /// python-memcached 1.62.
    PythonMemcached {
        /// Values strictly longer than this are zlib-compressed when that
        /// makes them smaller; `0` never (python-memcached's default).
        /// Integers are never compressed.
        min_compress_len: usize,
    },
}

impl ValueFormat {
    /// spymemcached's defaults (gzip over 16,384 bytes).
    pub const fn spymemcached() -> ValueFormat {
        ValueFormat::Spymemcached {
            compression_threshold: 16_384,
            skip_json: true,
        }
    }

    /// EVCache's `EVCacheTranscoder` defaults (gzip over 120 bytes).
    pub const fn evcache() -> ValueFormat {
        ValueFormat::Spymemcached {
            compression_threshold: 120,
            skip_json: false,
        }
    }

    /// The Whalin client's defaults (gzip over 30,720 bytes).
    pub const fn whalin() -> ValueFormat {
        ValueFormat::Whalin {
            compression_threshold: 30_720,
        }
    }

    /// python-memcached's defaults (no compression).
    pub const fn python_memcached() -> ValueFormat {
        ValueFormat::PythonMemcached {
            min_compress_len: 0,
        }
    }

    /// The format's name as the tool and configuration spell it.
    pub fn name(self) -> &'static str {
        match self {
            ValueFormat::Raw => "raw",
            ValueFormat::Spymemcached {
                skip_json: false, ..
            } => "evcache",
            ValueFormat::Spymemcached { .. } => "spymemcached",
            ValueFormat::Whalin { .. } => "whalin",
            ValueFormat::PythonMemcached { .. } => "python-memcached",
        }
    }

    /// Encodes `value` into the bytes and flags this format stores.
    pub fn encode(self, value: &Value) -> Result<(Bytes, u32), Error> {
        Codec {
            format: self,
            max_decompressed: DEFAULT_MAX_DECOMPRESSED,
        }
        .encode(value)
    }

    /// Decodes a stored item (read without a client, say from a dump);
    /// decompression stops at `max_decompressed` bytes, and `key` names the
    /// item in errors.
    pub fn decode(self, key: &[u8], item: &Item, max_decompressed: usize) -> Result<Value, Error> {
        Codec {
            format: self,
            max_decompressed,
        }
        .decode(key, item)
    }

    /// The same format with another compression threshold (for
    /// python-memcached, `min_compress_len`); `Raw` is unchanged.
    pub fn with_compression_threshold(self, bytes: usize) -> ValueFormat {
        match self {
            ValueFormat::Raw => ValueFormat::Raw,
            ValueFormat::Spymemcached { skip_json, .. } => ValueFormat::Spymemcached {
                compression_threshold: bytes,
                skip_json,
            },
            ValueFormat::Whalin { .. } => ValueFormat::Whalin {
                compression_threshold: bytes,
            },
            ValueFormat::PythonMemcached { .. } => ValueFormat::PythonMemcached {
                min_compress_len: bytes,
            },
        }
    }
}

impl fmt::Display for ValueFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for ValueFormat {
    type Err = Error;

    fn from_str(s: &str) -> Result<ValueFormat, Error> {
        Ok(match s {
            "raw" => ValueFormat::Raw,
            "spymemcached" => ValueFormat::spymemcached(),
            "evcache" => ValueFormat::evcache(),
            "whalin" => ValueFormat::whalin(),
            "python-memcached" | "python_memcached" => ValueFormat::python_memcached(),
            other => {
                return Err(Error::new(
                    ErrorKind::Config,
                    format!(
                        "unknown value format {other:?} (raw, spymemcached, evcache, whalin, python-memcached)"
                    ),
                ));
            }
        })
    }
}

/// The default bound on a decompressed value: EVCache's maximum data size.
pub const DEFAULT_MAX_DECOMPRESSED: usize = 20 * 1024 * 1024;

/// A format together with the decompression bound: what encodes and decodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Codec {
    pub(crate) format: ValueFormat,
    pub(crate) max_decompressed: usize,
}

impl Default for Codec {
    /// Raw bytes, decompressing at most [`DEFAULT_MAX_DECOMPRESSED`].
    fn default() -> Codec {
        Codec {
            format: ValueFormat::Raw,
            max_decompressed: DEFAULT_MAX_DECOMPRESSED,
        }
    }
}

impl Codec {
    /// Encodes `value` into the bytes and flags to store.
    pub(crate) fn encode(&self, value: &Value) -> Result<(Bytes, u32), Error> {
        match self.format {
            ValueFormat::Raw => whalin::encode(value, None),
            ValueFormat::Whalin {
                compression_threshold,
            } => whalin::encode(value, Some(compression_threshold)),
            ValueFormat::Spymemcached {
                compression_threshold,
                skip_json,
            } => spy::encode(value, compression_threshold, skip_json),
            ValueFormat::PythonMemcached { min_compress_len } => {
                python::encode(value, min_compress_len)
            }
        }
    }

    /// Decodes a stored item; `key` names it in errors.
    pub(crate) fn decode(&self, key: &[u8], item: &Item) -> Result<Value, Error> {
        let result = match self.format {
            ValueFormat::Raw => whalin::decode(item, None),
            ValueFormat::Whalin { .. } => whalin::decode(item, Some(self.max_decompressed)),
            ValueFormat::Spymemcached { .. } => spy::decode(item, self.max_decompressed),
            ValueFormat::PythonMemcached { .. } => python::decode(item, self.max_decompressed),
        };
        result.map_err(|e| e.for_key(key))
    }
}

/// A decoding failure, before it is tied to a key.
#[derive(Debug)]
pub(crate) enum DecodeError {
    /// The bytes do not fit the flags (wrong length, not UTF-8, …) or the
    /// compression is corrupt or too large.
    Corrupt(String),
    /// The flags name a type or encoding this format does not know.
    Unknown(String),
}

impl DecodeError {
    fn for_key(self, key: &[u8]) -> Error {
        let (kind, what) = match self {
            DecodeError::Corrupt(what) => (ErrorKind::Corrupt, what),
            DecodeError::Unknown(what) => (ErrorKind::Type, what),
        };
        Error::new(
            kind,
            format!("value of key {} cannot be decoded: {what}", show_key(key)),
        )
    }
}

/// A key for a message: printable ASCII as is, other bytes escaped.
fn show_key(key: &[u8]) -> String {
    key.iter()
        .flat_map(|&b| std::ascii::escape_default(b))
        .map(char::from)
        .collect()
}

/// Decompresses for a format's decoder, mapping failures to `DecodeError`.
fn inflate(codec: compress::Codec, data: &[u8], limit: usize) -> Result<Bytes, DecodeError> {
    compress::decompress(codec, data, limit).map_err(|f| match f {
        compress::Failure::Corrupt(e) => DecodeError::Corrupt(format!(
            "corrupt {} data: {e}",
            match codec {
                compress::Codec::Gzip => "gzip",
                compress::Codec::Zlib => "zlib",
            }
        )),
        compress::Failure::TooLarge { limit } => {
            DecodeError::Corrupt(format!("decompresses to more than {limit} bytes"))
        }
        compress::Failure::Zstd => {
            DecodeError::Unknown("zstd-compressed, which memgroup does not decode".to_string())
        }
        compress::Failure::Unsupported => DecodeError::Unknown(
            "compressed, and memgroup was built without the `compression` feature".to_string(),
        ),
    })
}

/// Stored bytes as UTF-8 text.
fn utf8(data: &[u8]) -> Result<String, DecodeError> {
    std::str::from_utf8(data)
        .map(str::to_owned)
        .map_err(|_| DecodeError::Corrupt("a string that is not UTF-8".to_string()))
}

// The vectors include compressed values.
#[cfg(all(test, feature = "compression"))]
mod tests;
