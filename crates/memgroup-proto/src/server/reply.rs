//! Replies written as memcached writes them.

use bytes::{BufMut, BytesMut};

use crate::response::{MetaResponse, MetaStatus};

/// Appends one item of a retrieval reply:
/// `VALUE <key> <flags> <bytes>[ <cas>]\r\n<data>\r\n`.
///
/// ```
/// use memgroup_proto::{BytesMut, server::encode_value};
/// let mut out = BytesMut::new();
/// encode_value(&mut out, b"k", 5, b"hi", Some(7));
/// assert_eq!(&out[..], b"VALUE k 5 2 7\r\nhi\r\n");
/// ```
pub fn encode_value(out: &mut BytesMut, key: &[u8], flags: u32, data: &[u8], cas: Option<u64>) {
    out.reserve(key.len() + data.len() + 40);
    out.put_slice(b"VALUE ");
    out.put_slice(key);
    put_number(out, u64::from(flags));
    put_number(out, data.len() as u64);
    if let Some(cas) = cas {
        put_number(out, cas);
    }
    out.put_slice(b"\r\n");
    out.put_slice(data);
    out.put_slice(b"\r\n");
}

/// A space and `n` in decimal (the request encoder's digits).
fn put_number(out: &mut BytesMut, n: u64) {
    out.put_u8(b' ');
    crate::request::put_u64(out, n);
}

/// Appends a meta reply (status, `VA`'s length, return flags, value), each
/// return flag as `flag` maps it: `Some(token)` writes the token (a letter
/// and its value), `None` leaves the flag out. A proxy uses it to put the
/// client's opaque back in place of its own, to write the key the client
/// sent where the server echoed the stored one, and to drop flags it asked
/// for itself. An `ME` reply's first token (the key) goes through `flag`
/// too, as `k<key>`.
///
/// ```
/// use memgroup_proto::{Bytes, BytesMut, MetaResponse, MetaStatus, server::encode_meta_reply};
/// let reply = MetaResponse {
///     status: MetaStatus::Va,
///     flags: Bytes::from_static(b"O0 kp:k c9"),
///     value: Some(Bytes::from_static(b"hi")),
/// };
/// let mut out = BytesMut::new();
/// encode_meta_reply(&mut out, &reply, |t: &[u8]| match t[0] {
///     b'O' => Some(b"Oabc".to_vec()),
///     b'k' => Some(b"kk".to_vec()),
///     _ => Some(t.to_vec()),
/// });
/// assert_eq!(&out[..], b"VA 2 Oabc kk c9\r\nhi\r\n");
/// ```
pub fn encode_meta_reply(
    out: &mut BytesMut,
    reply: &MetaResponse,
    mut flag: impl FnMut(&[u8]) -> Option<Vec<u8>>,
) {
    out.put_slice(reply.status.code().as_bytes());
    let value = reply
        .value
        .as_deref()
        .filter(|_| reply.status == MetaStatus::Va);
    if let Some(value) = value {
        put_number(out, value.len() as u64);
    }
    let mut tokens = reply.flags.split(|&b| b == b' ').filter(|t| !t.is_empty());
    if reply.status == MetaStatus::Me {
        if let Some(key) = tokens.next() {
            let mut token = Vec::with_capacity(key.len() + 1);
            token.push(b'k');
            token.extend_from_slice(key);
            let key = flag(&token).map_or_else(|| key.to_vec(), |t| t[1..].to_vec());
            out.put_u8(b' ');
            out.put_slice(&key);
        }
        for token in tokens {
            out.put_u8(b' ');
            out.put_slice(token);
        }
    } else {
        for token in tokens {
            if let Some(token) = flag(token) {
                out.put_u8(b' ');
                out.put_slice(&token);
            }
        }
    }
    out.put_slice(b"\r\n");
    if let Some(value) = value {
        out.put_slice(value);
        out.put_slice(b"\r\n");
    }
}
