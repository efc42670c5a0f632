//! The two traits of the typed path ([`Client::get_as`], [`Client::set_as`]):
//! every [`FromValue`]/[`ToValue`] type goes through the handle's
//! [`ValueFormat`](super::ValueFormat); a wrapper such as
//! [`Json`](super::Json) (feature `serde`) does its own bytes and flags.

use bytes::Bytes;

use super::{FromValue, ToValue};
use crate::client::Client;
use crate::error::Error;
use crate::item::Item;

/// What [`Client::get_as`] reads a key as.
pub trait FromItem: Sized {
    /// Decodes `item`, read under `key` by `client` (whose value format the
    /// [`FromValue`] types use). Errors name the key.
    fn from_item(client: &Client, key: &[u8], item: &Item) -> Result<Self, Error>;
}

/// What [`Client::set_as`] stores.
pub trait ToItem {
    /// The bytes and client flags to store under `key` through `client`.
    fn to_item(&self, client: &Client, key: &[u8]) -> Result<(Bytes, u32), Error>;
}

/// `key` as an error shows it.
pub(crate) fn shown(key: &[u8]) -> String {
    String::from_utf8_lossy(key).escape_debug().to_string()
}

impl<T: FromValue> FromItem for T {
    fn from_item(client: &Client, key: &[u8], item: &Item) -> Result<Self, Error> {
        let value = client.decode(key, item)?;
        // A type error names the key it was read from.
        T::from_value(value)
            .map_err(|e| Error::new(e.kind(), format!("key \"{}\"", shown(key))).with_source(e))
    }
}

impl<T: ToValue + ?Sized> ToItem for T {
    fn to_item(&self, client: &Client, _key: &[u8]) -> Result<(Bytes, u32), Error> {
        client.value_format().encode(&self.to_value())
    }
}
