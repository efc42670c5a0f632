//! Typed reads and writes: values decoded and encoded by the handle's
//! [`ValueFormat`](crate::value::ValueFormat), or by a wrapper such as
//! `Json` (feature `serde`) that does its own bytes and
//! flags ([`FromItem`], [`ToItem`]), on top of the byte-level operations. Decoding is lazy: `get` and `get_multi` hand back bytes and
//! flags untouched, and cost nothing more for the formats existing.

use crate::client::Client;
use crate::error::Error;
use crate::item::{Item, WriteOutcome};
use crate::options::WriteOptions;
use bytes::Bytes;

use crate::value::{FromValue, ToValue, ValueFormat};
use memgroup_proto::StoreCommand;

impl Client {
    /// A handle to the same client whose typed operations use `format`.
    ///
    /// ```no_run
    /// # async fn demo(client: memgroup_client::Client) -> Result<(), memgroup_client::Error> {
    /// use memgroup_client::value::ValueFormat;
    /// // This one key was written by a Python service.
    /// let py = client.with_value_format(ValueFormat::python_memcached());
    /// let score: Option<i64> = py.get_as("score:7").await?;
    /// # let _ = score;
    /// # Ok(()) }
    /// ```
    pub fn with_value_format(&self, format: ValueFormat) -> Client {
        let mut client = self.clone();
        client.values.format = format;
        client
    }

    /// The value format of this handle's typed operations.
    pub fn value_format(&self) -> ValueFormat {
        self.values.format
    }

    /// Decodes an item read with [`Client::get`] or [`Client::get_multi`]
    /// as [`Client::get_as`] would: `decode_as::<Value>` by this handle's
    /// value format, or any [`FromItem`] type; `key` names it in errors.
    pub fn decode_as<T: FromItem>(&self, key: impl AsRef<[u8]>, item: &Item) -> Result<T, Error> {
        T::from_item(self, key.as_ref(), item)
    }

    /// Reads a key as a Rust type: a [`FromValue`](crate::value::FromValue)
    /// type decoded by the value format (see [`crate::value`];
    /// `get_as::<Value>` for whatever type it holds), or a serde type inside
    /// `Json` or `Postcard` (feature
    /// `serde`). `Ok(None)` on a miss; a value of another type is an
    /// [`ErrorKind::Type`](crate::ErrorKind::Type) error naming the key.
    ///
    /// ```no_run
    /// # async fn demo(client: memgroup_client::Client) -> Result<(), memgroup_client::Error> {
    /// client.set_as("visits", &41i64, 0).await?;
    /// let visits: Option<i64> = client.get_as("visits").await?;
    /// assert_eq!(visits, Some(41));
    /// # Ok(()) }
    /// ```
    pub async fn get_as<T: FromItem>(&self, key: impl AsRef<[u8]>) -> Result<Option<T>, Error> {
        let key = key.as_ref();
        match self.get(key).await? {
            Some(item) => T::from_item(self, key, &item).map(Some),
            None => Ok(None),
        }
    }

    /// Stores a Rust value (a [`ToValue`](crate::value::ToValue) type with
    /// the flags and encoding of the value format, or a serde type inside
    /// `Json` or `Postcard`) in every
    /// group, like [`Client::set`]: the options' expiry applies, their flags
    /// are the encoding's.
    pub async fn set_as<T: ToItem + ?Sized>(
        &self,
        key: impl AsRef<[u8]>,
        value: &T,
        options: impl Into<WriteOptions>,
    ) -> Result<WriteOutcome, Error> {
        let key = key.as_ref();
        let (bytes, flags) = value.to_item(self, key)?;
        let options = options.into().flags(flags);
        self.store(StoreCommand::Set, key, &bytes, options).await
    }
}

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
        let value = client.values.decode(key, item)?;
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
