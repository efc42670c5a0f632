//! # memgroup-proto: the memcached text protocol, sans-IO
//!
//! This crate turns memcached commands into bytes and bytes into replies, and
//! does nothing else: no sockets, no runtime, no clock. It follows memcached's
//! `doc/protocol.txt` for the classic text commands and the meta commands
//! (`mg`, `ms`, `md`, `ma`, `mn`, `me`).
//!
//! A short tour:
//! - [`Key`] validates a key (1–250 bytes, no space, no control character, no
//!   DEL). It is the injection guard: nothing can be encoded with a key that
//!   would end the command line early.
//! - [`Request`] is one command; [`Request::encode`] appends it to a `BytesMut`
//!   and [`Request::expect`] tells what reply it gets.
//! - [`Decoder`] reads replies incrementally from a `BytesMut`, handing out keys
//!   and values as `Bytes` split off the read buffer (zero copy). Peer-controlled
//!   sizes are capped by [`Limits`].
//! - [`GrowingRetrieval`] grows a `get` line in place as more keys join it
//!   (merging queued single-key reads), and [`MetadumpDecoder`] reads the
//!   `lru_crawler metadump` listing of a server's keys.
//!
//! ```
//! use bytes::BytesMut;
//! use memgroup_proto::{Decoder, Key, Request, Response};
//!
//! // What a client writes…
//! let keys = [Key::new(b"a").unwrap(), Key::new(b"b").unwrap()];
//! let request = Request::Get { keys: &keys };
//! let mut out = BytesMut::new();
//! request.encode(&mut out);
//! assert_eq!(&out[..], b"get a b\r\n");
//!
//! // …and what it reads back (here, as memcached would answer).
//! let mut input = BytesMut::from(&b"VALUE b 0 3\r\nbee\r\nEND\r\n"[..]);
//! let mut decoder = Decoder::default();
//! let reply = decoder.decode(&mut input, request.expect().unwrap()).unwrap();
//! let Some(Response::Values(values)) = reply else { panic!() };
//! assert_eq!(&values[0].data[..], b"bee");
//! ```

#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod classic;
mod decode;
mod discovery;
mod key;
mod metadump;
mod multiget;
mod request;
mod response;
pub mod server;

#[cfg(test)]
mod tests;

/// The buffers the codec reads and writes (the `bytes` crate's), so a user
/// of this crate alone needs no dependency of their own to call it.
pub use bytes::{Bytes, BytesMut};
pub use classic::{Classic, Lacking};
pub use decode::{Decoder, Expect, ITEM_OVERHEAD, Limits, MAX_ITEM_SIZE, ProtoError};
pub use discovery::{ClusterConfig, ConfigError, ConfigNode, LEGACY_CONFIG_KEY, MAX_CONFIG_NODES};
pub use key::{Key, KeyError, MAX_KEY_LEN, base64_decode, base64_encode};
pub use metadump::{DEFAULT_MAX_DUMP_LINE, DumpEntry, DumpLine, MetadumpDecoder, percent_decode};
pub use multiget::{GrowingRetrieval, MAX_GROWN_KEYS, MAX_GROWN_LINE};
pub use request::{ArithMode, MetaCommand, MetaFlag, Request, SetMode, StoreCommand};
pub use response::{
    MetaFields, MetaResponse, MetaStatus, MetaTtl, Response, Stat, Value, Values, ValuesIntoIter,
};
