//! Rust values through serde (feature `serde`): [`Json`] (serde_json) or
//! [`Postcard`], the compact binary codec, wrappers read and written by
//! [`Client::get_as`](crate::Client::get_as) and
//! [`Client::set_as`](crate::Client::set_as), with client flags that name the
//! codec so a value is never read with the wrong one.
//!
//! ```no_run
//! # async fn demo(client: memgroup_client::Client) -> Result<(), memgroup_client::Error> {
//! use memgroup_client::Json;
//! client.set_as("user:42", &Json(["Ada", "Lovelace"]), 300).await?;
//! let name: Option<Json<Vec<String>>> = client.get_as("user:42").await?;
//! # Ok(()) }
//! ```
//!
//! The flags use the upper 16 bits only, which no value format of the
//! Java and Python clients gives a meaning to (Whalin's markers and
//! spymemcached's special types live in the lower 16, python-memcached's in
//! the lowest 5): [`SERDE_JSON_FLAGS`] (`0x4A53_0000`, "JS") and
//! [`SERDE_POSTCARD_FLAGS`] (`0x5043_0000`, "PC"). What other clients of a
//! mixed fleet make of them, by their own flag rules: spymemcached and
//! EVCache read a JSON value as a string (none of their bits is set);
//! python-memcached refuses both as unknown flags.

use bytes::Bytes;
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::typed::{FromItem, ToItem, shown};
use crate::client::Client;
use crate::error::{Error, ErrorKind};
use crate::item::Item;

/// The client flags of a value stored as [`Json`].
pub const SERDE_JSON_FLAGS: u32 = 0x4A53_0000;
/// The client flags of a value stored as [`Postcard`].
pub const SERDE_POSTCARD_FLAGS: u32 = 0x5043_0000;

/// A value stored as JSON text (serde_json), readable by every other
/// program, under [`SERDE_JSON_FLAGS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Json<T>(pub T);

/// A value stored as postcard, compact binary for Rust readers, under
/// [`SERDE_POSTCARD_FLAGS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Postcard<T>(pub T);

impl<T> Json<T> {
    /// The value inside.
    pub fn into_inner(self) -> T {
        self.0
    }
}

impl<T> Postcard<T> {
    /// The value inside.
    pub fn into_inner(self) -> T {
        self.0
    }
}

fn type_error(key: &[u8], what: impl std::fmt::Display) -> Error {
    Error::new(ErrorKind::Type, format!("key \"{}\": {what}", shown(key)))
}

/// The codec a value's flags name, if any.
fn codec_of(flags: u32) -> Option<&'static str> {
    match flags {
        SERDE_JSON_FLAGS => Some("JSON"),
        SERDE_POSTCARD_FLAGS => Some("postcard"),
        _ => None,
    }
}

/// Checks that `item` was stored by `codec` (whose flags are `flags`).
fn check(key: &[u8], item: &Item, codec: &str, flags: u32) -> Result<(), Error> {
    match codec_of(item.flags) {
        _ if item.flags == flags => Ok(()),
        Some(stored) => Err(type_error(
            key,
            format!("stored as {stored}, read as {codec}"),
        )),
        None => Err(type_error(
            key,
            format!(
                "flags 0x{:x} are not a serde codec's (stored by another client?)",
                item.flags
            ),
        )),
    }
}

impl<T: DeserializeOwned> FromItem for Json<T> {
    fn from_item(_client: &Client, key: &[u8], item: &Item) -> Result<Self, Error> {
        check(key, item, "JSON", SERDE_JSON_FLAGS)?;
        serde_json::from_slice(&item.value)
            .map(Json)
            .map_err(|e| type_error(key, format!("not this type's JSON: {e}")))
    }
}

impl<T: Serialize> ToItem for Json<T> {
    fn to_item(&self, _client: &Client, key: &[u8]) -> Result<(Bytes, u32), Error> {
        serde_json::to_vec(&self.0)
            .map(|bytes| (Bytes::from(bytes), SERDE_JSON_FLAGS))
            .map_err(|e| type_error(key, "not JSON").with_source(e))
    }
}

impl<T: DeserializeOwned> FromItem for Postcard<T> {
    fn from_item(_client: &Client, key: &[u8], item: &Item) -> Result<Self, Error> {
        check(key, item, "postcard", SERDE_POSTCARD_FLAGS)?;
        postcard::from_bytes(&item.value)
            .map(Postcard)
            .map_err(|e| type_error(key, format!("not this type's postcard: {e}")))
    }
}

impl<T: Serialize> ToItem for Postcard<T> {
    fn to_item(&self, _client: &Client, key: &[u8]) -> Result<(Bytes, u32), Error> {
        postcard::to_stdvec(&self.0)
            .map(|bytes| (Bytes::from(bytes), SERDE_POSTCARD_FLAGS))
            .map_err(|e| type_error(key, "not postcard").with_source(e))
    }
}
