//! The server side of the protocol: what a client sends, decoded as
//! memcached 1.6.18 reads it, and the replies written as it writes them.
//!
//! memgroup's own requests are built from validated [`Key`](crate::Key)s;
//! a client of a proxy sends whatever it likes, so this side takes keys as
//! raw tokens (any bytes but space and newline, at most 250), numbers as
//! memcached parses them, and turns every malformed request into the reply
//! memcached gives it ([`ClientRequest::Error`]) or a close
//! ([`CloseReason`]). The rules were found by sending the same bytes to a
//! memcached 1.6.18 (the proxy's differential tests keep them true):
//! - a line is read up to `\n` (a `\r` before it is dropped); tokens are
//!   separated by spaces, several spaces counting as one;
//! - a line of more than 2,048 bytes with no `\n` yet closes the connection,
//!   unless it is a `get`/`gets` (multi-gets are long), which may grow to
//!   [`ServerLimits::max_get_line`];
//! - a storage command whose line is malformed is refused without reading
//!   its data block (the data line is then read as a command: `ERROR`); one
//!   whose value is too large, or a meta set with a bad flag, has its data
//!   block read and dropped ("swallowed");
//! - a data block not ended by `\r\n` is `CLIENT_ERROR bad data chunk`,
//!   and what follows its declared length is read as the next command;
//! - `noreply` silences a classic command's error replies too;
//! - a first byte 0x80 (the binary protocol) or a line whose last token
//!   starts with `HTTP/` closes the connection.

mod decode;
mod meta;
mod reply;
#[cfg(test)]
mod tests;

pub use decode::{CloseReason, RequestDecoder, ServerLimits};
pub use meta::{MetaKind, MetaRequest};
pub use reply::{encode_meta_reply, encode_value};

use bytes::Bytes;

use crate::request::StoreCommand;

/// The retrieval commands (`get`, `gets`, `gat`, `gats`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retrieval {
    /// `get <key>*`.
    Get,
    /// `gets <key>*`: with CAS uniques.
    Gets,
    /// `gat <exptime> <key>*`: get and touch.
    Gat(i32),
    /// `gats <exptime> <key>*`: get and touch, with CAS uniques.
    Gats(i32),
}

impl Retrieval {
    /// Whether the reply carries CAS uniques.
    pub fn returns_cas(self) -> bool {
        matches!(self, Retrieval::Gets | Retrieval::Gats(_))
    }
}

/// One request a client sent, decoded by [`RequestDecoder`]. Keys are the
/// raw tokens the client sent (for meta commands with `b`, decoded from
/// base64); payloads are slices of the read buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientRequest {
    /// `get`, `gets`, `gat`, `gats`: keys in the order sent, duplicates kept.
    Retrieve {
        /// Which command.
        command: Retrieval,
        /// The keys.
        keys: Vec<Bytes>,
    },
    /// `set`, `add`, `replace`, `append`, `prepend`, `cas`.
    Store {
        /// Which command (`cas` with its unique).
        command: StoreCommand,
        /// The key.
        key: Bytes,
        /// The client flags (memcached keeps the low 32 bits of a larger number).
        flags: u32,
        /// The exptime as sent: seconds, a Unix time past 30 days, negative
        /// for "already expired".
        exptime: i32,
        /// The data block, without its `\r\n`.
        data: Bytes,
        /// `noreply`.
        noreply: bool,
    },
    /// `delete <key> [0] [noreply]`.
    Delete {
        /// The key.
        key: Bytes,
        /// `noreply`.
        noreply: bool,
    },
    /// `incr`/`decr <key> <delta> [noreply]`.
    Arith {
        /// `incr` (else `decr`).
        increment: bool,
        /// The key.
        key: Bytes,
        /// The delta.
        delta: u64,
        /// `noreply`.
        noreply: bool,
    },
    /// `touch <key> <exptime> [noreply]`.
    Touch {
        /// The key.
        key: Bytes,
        /// The new exptime.
        exptime: i32,
        /// `noreply`.
        noreply: bool,
    },
    /// `flush_all [delay] [noreply]`.
    FlushAll {
        /// The delay in seconds (0: now).
        delay: i32,
        /// `noreply`.
        noreply: bool,
    },
    /// `cache_memlimit <megabytes> [noreply]`.
    CacheMemlimit {
        /// The limit asked for, as memcached reads it (the low 32 bits).
        megabytes: u32,
        /// `noreply`.
        noreply: bool,
    },
    /// `version`.
    Version,
    /// `verbosity <level> [noreply]`.
    Verbosity {
        /// `noreply`.
        noreply: bool,
    },
    /// `stats [args]`.
    Stats {
        /// The arguments (`reset`, `items`, …), none for plain `stats`.
        args: Vec<Bytes>,
    },
    /// `quit`: close after answering what came before.
    Quit,
    /// A meta command (`mg`, `ms`, `md`, `ma`, `me`).
    Meta(MetaRequest),
    /// `mn`: answered `MN` once everything before it is answered.
    MetaNoop,
    /// A command memcached knows that a proxy does not serve (`shutdown`,
    /// `slabs`, `lru_crawler`, `watch`, …): its name.
    NotServed(Bytes),
    /// A malformed request: the reply memcached writes for it (a whole line
    /// with its `\r\n`), in order with the others.
    Error(&'static [u8]),
}

impl ClientRequest {
    /// The keys the request names (none for the commands without a key).
    pub fn keys(&self) -> &[Bytes] {
        match self {
            ClientRequest::Retrieve { keys, .. } => keys,
            ClientRequest::Store { key, .. }
            | ClientRequest::Delete { key, .. }
            | ClientRequest::Arith { key, .. }
            | ClientRequest::Touch { key, .. } => std::slice::from_ref(key),
            ClientRequest::Meta(meta) => std::slice::from_ref(&meta.key),
            _ => &[],
        }
    }

    /// Whether the request changes what the cache holds (so a later request
    /// of one of its keys must wait for it).
    pub fn writes(&self) -> bool {
        match self {
            ClientRequest::Store { .. }
            | ClientRequest::Delete { .. }
            | ClientRequest::Arith { .. }
            | ClientRequest::Touch { .. }
            | ClientRequest::FlushAll { .. } => true,
            ClientRequest::Retrieve { command, .. } => {
                matches!(command, Retrieval::Gat(_) | Retrieval::Gats(_))
            }
            ClientRequest::Meta(meta) => meta.writes(),
            _ => false,
        }
    }

    /// Whether no reply is written for it when it succeeds (`noreply`,
    /// meta quiet mode): a later request waits for it, so a read after
    /// `set … noreply` sees the value.
    pub fn is_quiet(&self) -> bool {
        match self {
            ClientRequest::Store { noreply, .. }
            | ClientRequest::Delete { noreply, .. }
            | ClientRequest::Arith { noreply, .. }
            | ClientRequest::Touch { noreply, .. }
            | ClientRequest::FlushAll { noreply, .. }
            | ClientRequest::CacheMemlimit { noreply, .. }
            | ClientRequest::Verbosity { noreply } => *noreply,
            ClientRequest::Meta(meta) => meta.quiet,
            _ => false,
        }
    }

    /// Whether the request waits for every earlier one of its connection
    /// (`mn`, `flush_all`, `quit`) and every later one waits for it.
    pub fn is_barrier(&self) -> bool {
        matches!(
            self,
            ClientRequest::MetaNoop | ClientRequest::FlushAll { .. } | ClientRequest::Quit
        )
    }
}
