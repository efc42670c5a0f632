//! Rust values through serde (feature `serde`): JSON (serde_json) or
//! postcard, the compact binary codec, with client flags that name the
//! codec so a value is never read with the wrong one.
//!
//! The flags use the upper 16 bits only, which no value format of the
//! Java and Python clients gives a meaning to (Whalin's markers and
//! spymemcached's special types live in the lower 16, python-memcached's in
//! the lowest 5): [`SERDE_JSON_FLAGS`] (`0x4A53_0000`, "JS") and
//! [`SERDE_POSTCARD_FLAGS`] (`0x5043_0000`, "PC"). What other clients of a
//! mixed fleet make of them, by their own flag rules: spymemcached and
//! EVCache read a JSON value as a string (none of their bits is set);
//! python-memcached refuses both as unknown flags.

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::client::Client;
use crate::error::{Error, ErrorKind};
use crate::item::WriteOutcome;
use crate::options::{Expiry, WriteOptions};
use memgroup_proto::StoreCommand;

/// The client flags of a value stored as JSON.
pub const SERDE_JSON_FLAGS: u32 = 0x4A53_0000;
/// The client flags of a value stored as postcard.
pub const SERDE_POSTCARD_FLAGS: u32 = 0x5043_0000;

/// How [`Client::set_serde`] encodes a value (and [`Client::get_serde`]
/// expects it to be encoded).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SerdeCodec {
    /// JSON text (serde_json): readable by every other program.
    Json,
    /// postcard: compact binary, for Rust readers.
    Postcard,
}

impl SerdeCodec {
    /// The client flags marking values of this codec.
    pub fn flags(self) -> u32 {
        match self {
            SerdeCodec::Json => SERDE_JSON_FLAGS,
            SerdeCodec::Postcard => SERDE_POSTCARD_FLAGS,
        }
    }

    fn name(self) -> &'static str {
        match self {
            SerdeCodec::Json => "JSON",
            SerdeCodec::Postcard => "postcard",
        }
    }

    fn of_flags(flags: u32) -> Option<SerdeCodec> {
        match flags {
            SERDE_JSON_FLAGS => Some(SerdeCodec::Json),
            SERDE_POSTCARD_FLAGS => Some(SerdeCodec::Postcard),
            _ => None,
        }
    }
}

/// `key` as an error shows it.
fn shown(key: &[u8]) -> String {
    String::from_utf8_lossy(key).escape_debug().to_string()
}

impl Client {
    /// Stores `value` encoded by `codec` in every group, with the codec's
    /// flags ([`SerdeCodec::flags`]).
    ///
    /// ```no_run
    /// # async fn demo(client: memgroup_client::Client) -> Result<(), memgroup_client::Error> {
    /// use memgroup_client::SerdeCodec;
    /// client.set_serde("user:42", &vec!["Ada", "Lovelace"], SerdeCodec::Json, 300).await?;
    /// let name: Option<Vec<String>> = client.get_serde("user:42", SerdeCodec::Json).await?;
    /// # Ok(()) }
    /// ```
    pub async fn set_serde<T: Serialize + ?Sized>(
        &self,
        key: impl AsRef<[u8]>,
        value: &T,
        codec: SerdeCodec,
        expiry: impl Into<Expiry>,
    ) -> Result<WriteOutcome, Error> {
        let key = key.as_ref();
        let bytes = match codec {
            SerdeCodec::Json => serde_json::to_vec(value).map_err(|e| {
                Error::new(ErrorKind::Type, format!("key \"{}\": not JSON", shown(key)))
                    .with_source(e)
            })?,
            SerdeCodec::Postcard => postcard::to_stdvec(value).map_err(|e| {
                Error::new(
                    ErrorKind::Type,
                    format!("key \"{}\": not postcard", shown(key)),
                )
                .with_source(e)
            })?,
        };
        let options = WriteOptions::new().expiry(expiry).flags(codec.flags());
        self.store(StoreCommand::Set, key, &bytes, options).await
    }

    /// Reads a key stored by [`Client::set_serde`] with `codec`. `Ok(None)`
    /// on a miss. A value stored with the other codec, by another client
    /// (other flags), or that does not decode as `T` is an
    /// [`ErrorKind::Type`] error naming the key.
    pub async fn get_serde<T: DeserializeOwned>(
        &self,
        key: impl AsRef<[u8]>,
        codec: SerdeCodec,
    ) -> Result<Option<T>, Error> {
        let key = key.as_ref();
        let Some(item) = self.get(key).await? else {
            return Ok(None);
        };
        let type_error =
            |what: String| Error::new(ErrorKind::Type, format!("key \"{}\": {what}", shown(key)));
        match SerdeCodec::of_flags(item.flags) {
            Some(stored) if stored == codec => {}
            Some(stored) => {
                return Err(type_error(format!(
                    "stored as {}, read as {}",
                    stored.name(),
                    codec.name()
                )));
            }
            None => {
                return Err(type_error(format!(
                    "flags 0x{:x} are not a serde codec's (stored by another client?)",
                    item.flags
                )));
            }
        }
        let decoded = match codec {
            SerdeCodec::Json => serde_json::from_slice(&item.value)
                .map_err(|e| type_error(format!("not this type's JSON: {e}"))),
            SerdeCodec::Postcard => postcard::from_bytes(&item.value)
                .map_err(|e| type_error(format!("not this type's postcard: {e}"))),
        };
        decoded.map(Some)
    }
}
