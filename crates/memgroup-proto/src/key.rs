//! Validated keys: the injection guard of the text protocol.

use std::fmt;

/// The longest key memcached accepts, in bytes.
pub const MAX_KEY_LEN: usize = 250;

/// A key that is safe to put on the wire of the text protocol.
///
/// A key is 1..=250 bytes with no ASCII control character (0x00–0x1F), no space
/// and no DEL (0x7F). Bytes ≥ 0x80 are allowed: memcached treats keys as opaque
/// bytes, so UTF-8 keys work. Because no byte of a valid key can be a space,
/// `\r` or `\n`, a key can never end a command line early or inject a second
/// command — this is checked here, before any byte is encoded.
///
/// `Key` borrows the caller's bytes; building one allocates nothing.
///
/// ```
/// use memgroup_proto::{Key, KeyError};
///
/// let key = Key::new(b"user:42").unwrap();
/// assert_eq!(key.as_bytes(), b"user:42");
///
/// // A key that would smuggle a second command is refused.
/// assert_eq!(
///     Key::new(b"a\r\nflush_all").unwrap_err(),
///     KeyError::InvalidByte { byte: b'\r', position: 1 },
/// );
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key<'a>(&'a [u8]);

impl<'a> Key<'a> {
    /// Validates `bytes` as a memcached key.
    pub fn new(bytes: &'a [u8]) -> Result<Self, KeyError> {
        validate_token(bytes, MAX_KEY_LEN)?;
        Ok(Key(bytes))
    }

    /// Validates `bytes` as a key the way memcached's text protocol carries
    /// it, laxer than [`Key::new`]: 1..=250 bytes of anything but the four
    /// bytes that would end or cut the command line (space, `\r`, `\n`,
    /// NUL), so control bytes and DEL pass. What a proxy forwards for a
    /// client that sends such keys, and hashes as that client would.
    ///
    /// ```
    /// use memgroup_proto::{Key, KeyError};
    /// assert!(Key::new(b"\x10key").is_err());
    /// assert_eq!(Key::new_raw(b"\x10key").unwrap().as_bytes(), b"\x10key");
    /// assert!(matches!(Key::new_raw(b"a b"), Err(KeyError::InvalidByte { byte: b' ', .. })));
    /// ```
    pub fn new_raw(bytes: &'a [u8]) -> Result<Self, KeyError> {
        if bytes.is_empty() {
            return Err(KeyError::Empty);
        }
        if bytes.len() > MAX_KEY_LEN {
            return Err(KeyError::TooLong {
                len: bytes.len(),
                max: MAX_KEY_LEN,
            });
        }
        match bytes
            .iter()
            .position(|&b| matches!(b, b' ' | b'\r' | b'\n' | 0))
        {
            None => Ok(Key(bytes)),
            Some(position) => Err(KeyError::InvalidByte {
                byte: bytes[position],
                position,
            }),
        }
    }

    /// The key's bytes, exactly as they go on the wire.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.0
    }

    /// The key's length in bytes.
    #[allow(clippy::len_without_is_empty)] // a key is never empty
    pub fn len(&self) -> usize {
        self.0.len()
    }
}

impl fmt::Debug for Key<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Key({:?})", String::from_utf8_lossy(self.0))
    }
}

impl fmt::Display for Key<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&String::from_utf8_lossy(self.0))
    }
}

/// Why a byte string is not a valid key (or protocol token).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeyError {
    /// The key has no bytes.
    Empty,
    /// The key is longer than the limit (250 bytes for keys).
    TooLong {
        /// The key's length.
        len: usize,
        /// The limit it exceeded.
        max: usize,
    },
    /// The key holds a control character, a space or DEL.
    InvalidByte {
        /// The offending byte.
        byte: u8,
        /// Its offset in the key.
        position: usize,
    },
}

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            KeyError::Empty => f.write_str("the key is empty"),
            KeyError::TooLong { len, max } => {
                write!(f, "the key is {len} bytes long, the limit is {max}")
            }
            KeyError::InvalidByte { byte, position } => write!(
                f,
                "the key has byte 0x{byte:02x} at offset {position} (spaces and control characters are not allowed)"
            ),
        }
    }
}

impl std::error::Error for KeyError {}

/// Checks a token that goes on a command line: non-empty, at most `max` bytes,
/// no byte ≤ 0x20 and no 0x7F.
pub(crate) fn validate_token(bytes: &[u8], max: usize) -> Result<(), KeyError> {
    if bytes.is_empty() {
        return Err(KeyError::Empty);
    }
    if bytes.len() > max {
        return Err(KeyError::TooLong {
            len: bytes.len(),
            max,
        });
    }
    let invalid = |b: u8| b <= b' ' || b == 0x7f;
    // Every byte looked at without a branch (the compiler vectorises it);
    // where the first bad byte is, only for the error.
    if !bytes.iter().fold(false, |bad, &b| bad | invalid(b)) {
        return Ok(());
    }
    let position = bytes.iter().position(|&b| invalid(b)).unwrap_or(0);
    Err(KeyError::InvalidByte {
        byte: bytes[position],
        position,
    })
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Appends the standard (padded) base64 encoding of `raw` to `out`.
///
/// Meta commands accept binary keys in this form together with the `b` flag
/// ([`MetaFlag::Base64Key`](crate::MetaFlag::Base64Key)): encode the key, make
/// a [`Key`] of the result and send it with that flag. The encoded form must
/// itself fit in 250 bytes, so a binary key can be at most 187 bytes.
///
/// ```
/// use memgroup_proto::{base64_encode, Key};
///
/// let mut encoded = Vec::new();
/// base64_encode(b"\x00bin\r\nkey", &mut encoded);
/// assert_eq!(encoded, b"AGJpbg0Ka2V5");
/// assert!(Key::new(&encoded).is_ok());
/// ```
pub fn base64_encode(raw: &[u8], out: &mut Vec<u8>) {
    out.reserve(raw.len().div_ceil(3) * 4);
    for chunk in raw.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        out.push(B64[(n >> 18) as usize & 63]);
        out.push(B64[(n >> 12) as usize & 63]);
        out.push(if chunk.len() > 1 {
            B64[(n >> 6) as usize & 63]
        } else {
            b'='
        });
        out.push(if chunk.len() > 2 {
            B64[n as usize & 63]
        } else {
            b'='
        });
    }
}

/// Decodes standard padded base64 (as memcached returns base64 keys), or
/// `None` when `text` is not valid base64.
pub fn base64_decode(text: &[u8]) -> Option<Vec<u8>> {
    fn sextet(c: u8) -> Option<u32> {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        };
        Some(u32::from(v))
    }
    if !text.len().is_multiple_of(4) {
        return None;
    }
    let mut out = Vec::with_capacity(text.len() / 4 * 3);
    let chunks = text.len() / 4;
    for (i, c) in text.chunks(4).enumerate() {
        let pad = c.iter().rev().take_while(|&&b| b == b'=').count();
        if pad > 2 || (pad > 0 && i + 1 != chunks) {
            return None;
        }
        let mut n = 0u32;
        for &b in &c[..4 - pad] {
            n = (n << 6) | sextet(b)?;
        }
        n <<= 6 * pad as u32;
        let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&bytes[..3 - pad]);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_key_errors_print() {
        let key = Key::new(b"user:42").unwrap();
        assert_eq!(key.to_string(), "user:42");
        assert_eq!(format!("{key:?}"), "Key(\"user:42\")");
        for (e, says) in [
            (KeyError::Empty, "the key is empty"),
            (
                KeyError::TooLong { len: 300, max: 250 },
                "300 bytes long, the limit is 250",
            ),
            (
                KeyError::InvalidByte {
                    byte: b' ',
                    position: 3,
                },
                "byte 0x20 at offset 3",
            ),
        ] {
            assert!(e.to_string().contains(says), "{e:?}");
        }
    }

    #[test]
    fn key_rules() {
        assert!(Key::new(b"a").is_ok());
        assert!(Key::new(&[b'k'; 250]).is_ok());
        assert!(Key::new("café".as_bytes()).is_ok());
        assert_eq!(Key::new(b""), Err(KeyError::Empty));
        assert_eq!(
            Key::new(&[b'k'; 251]),
            Err(KeyError::TooLong { len: 251, max: 250 })
        );
        for bad in [0u8, b'\t', b'\n', b'\r', b' ', 0x1f, 0x7f] {
            let key = [b'a', bad, b'b'];
            assert_eq!(
                Key::new(&key),
                Err(KeyError::InvalidByte {
                    byte: bad,
                    position: 1
                })
            );
        }
    }

    #[test]
    fn base64_round_trip() {
        for len in 0..40usize {
            let raw: Vec<u8> = (0..len).map(|i| (i * 37 + 11) as u8).collect();
            let mut enc = Vec::new();
            base64_encode(&raw, &mut enc);
            assert_eq!(base64_decode(&enc).as_deref(), Some(&raw[..]));
        }
        assert_eq!(base64_decode(b"a==="), None);
        assert_eq!(base64_decode(b"ab=c"), None);
        assert_eq!(base64_decode(b"abc"), None);
        // The encoding is sized up front: one allocation, exactly.
        for n in [6, 7, 8, 299, 300] {
            let mut out = Vec::new();
            base64_encode(&vec![7; n], &mut out);
            assert_eq!(out.capacity(), out.len(), "{n} bytes");
        }
        // Padding only at the very end.
        assert_eq!(base64_decode(b"QQ==QUJD"), None);
        assert_eq!(base64_decode(b"QQ==").as_deref(), Some(&b"A"[..]));
    }
}
