//! A retrieval command that grows in place: `get a\r\n` becomes `get a b\r\n`
//! as more single-key retrievals join it (spymemcached's get optimisation,
//! which the client applies to `get`s queued on one connection).
//!
//! The command is the last thing in an output buffer; it is edited there, so
//! joining a key costs no re-encoding. Whoever holds a [`GrowingRetrieval`]
//! must drop it as soon as anything else is appended to that buffer or the
//! buffer is taken for writing.

use bytes::{BufMut, BytesMut};

use crate::Key;

/// Most keys one grown command carries.
pub const MAX_GROWN_KEYS: usize = 64;

/// Longest command line a command may grow to, `\r\n` included (memcached
/// reads lines this long without its large-multiget path).
pub const MAX_GROWN_LINE: usize = 8 * 1024;

/// A `get`/`gets` command line at the end of a buffer that more keys may join.
///
/// ```
/// use bytes::BytesMut;
/// use memgroup_proto::{GrowingRetrieval, Key};
///
/// let mut out = BytesMut::from(&b"set x 0 0 1\r\n1\r\n"[..]);
/// let mut get = GrowingRetrieval::start(&mut out, false, Key::new(b"a").unwrap());
/// assert!(get.push(&mut out, Key::new(b"b").unwrap()));
/// assert_eq!(&out[..], b"set x 0 0 1\r\n1\r\nget a b\r\n");
/// assert_eq!(get.first_key(&out), b"a");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GrowingRetrieval {
    /// Where the line starts in the buffer.
    start: usize,
    /// The line's length, `\r\n` included.
    len: usize,
    keys: usize,
    cas: bool,
}

impl GrowingRetrieval {
    /// Encodes `get <key>\r\n` (`gets` when `cas`) at the end of `buf`.
    pub fn start(buf: &mut BytesMut, cas: bool, key: Key<'_>) -> GrowingRetrieval {
        let start = buf.len();
        buf.put_slice(Self::verb(cas));
        buf.put_u8(b' ');
        buf.put_slice(key.as_bytes());
        buf.put_slice(b"\r\n");
        GrowingRetrieval {
            start,
            len: buf.len() - start,
            keys: 1,
            cas,
        }
    }

    fn verb(cas: bool) -> &'static [u8] {
        if cas { b"gets" } else { b"get" }
    }

    /// Whether the command is a `gets` (values carry their CAS unique).
    pub fn is_cas(&self) -> bool {
        self.cas
    }

    /// How many keys the line carries.
    pub fn keys(&self) -> usize {
        self.keys
    }

    /// The command's first key, read from `buf` (the buffer it was started in).
    pub fn first_key<'b>(&self, buf: &'b [u8]) -> &'b [u8] {
        let line = &buf[self.start..self.start + self.len];
        let from = Self::verb(self.cas).len() + 1;
        let to = line[from..]
            .iter()
            .position(|&b| b == b' ' || b == b'\r')
            .map_or(line.len(), |p| from + p);
        &line[from..to]
    }

    /// Appends `key` to the line, if the command has room for it
    /// ([`MAX_GROWN_KEYS`], [`MAX_GROWN_LINE`]); returns whether it did.
    /// `buf` must still end with this command.
    pub fn push(&mut self, buf: &mut BytesMut, key: Key<'_>) -> bool {
        assert_eq!(
            buf.len(),
            self.start + self.len,
            "the growing command is not at the end of the buffer"
        );
        if self.keys >= MAX_GROWN_KEYS || self.len + 1 + key.len() > MAX_GROWN_LINE {
            return false;
        }
        buf.truncate(buf.len() - 2);
        buf.put_u8(b' ');
        buf.put_slice(key.as_bytes());
        buf.put_slice(b"\r\n");
        self.len += 1 + key.len();
        self.keys += 1;
        true
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::Request;

    fn key_strategy() -> impl Strategy<Value = Vec<u8>> {
        proptest::collection::vec(0x21u8..0x7f, 1..=250)
    }

    /// A full batch of 120-byte keys (7.7 KB) fits one line: memcached reads
    /// lines of up to 8 KiB without its large-multiget path.
    #[test]
    fn sixty_four_long_keys_share_one_line() {
        let keys: Vec<Vec<u8>> = (0..MAX_GROWN_KEYS)
            .map(|i| format!("{i:0>120}").into_bytes())
            .collect();
        let mut buf = BytesMut::new();
        let mut get = GrowingRetrieval::start(&mut buf, false, Key::new(&keys[0]).unwrap());
        for k in &keys[1..] {
            assert!(
                get.push(&mut buf, Key::new(k).unwrap()),
                "{} keys",
                get.keys()
            );
        }
        assert!(!get.push(&mut buf, Key::new(b"one-more").unwrap()));
        assert_eq!(get.keys(), 64);
    }

    proptest! {
        /// A grown command is byte for byte the multi-key command the encoder
        /// writes for the keys it took, and refuses keys past its limits.
        #[test]
        fn grows_into_the_encoded_multi_key_command(
            prefix in proptest::collection::vec(any::<u8>(), 0..40),
            cas in any::<bool>(),
            keys in proptest::collection::vec(key_strategy(), 1..120),
        ) {
            let mut buf = BytesMut::from(&prefix[..]);
            let first = Key::new(&keys[0]).unwrap();
            let mut get = GrowingRetrieval::start(&mut buf, cas, first);
            let mut taken = vec![first];
            for k in &keys[1..] {
                let key = Key::new(k).unwrap();
                let before = buf.len();
                if get.push(&mut buf, key) {
                    taken.push(key);
                } else {
                    prop_assert_eq!(buf.len(), before);
                    prop_assert!(taken.len() == MAX_GROWN_KEYS
                        || buf.len() - prefix.len() + 1 + k.len() > MAX_GROWN_LINE);
                }
            }
            prop_assert!(buf.len() - prefix.len() <= MAX_GROWN_LINE);
            prop_assert_eq!(get.keys(), taken.len());
            prop_assert_eq!(get.is_cas(), cas);
            prop_assert_eq!(get.first_key(&buf), &keys[0][..]);
            let mut want = BytesMut::from(&prefix[..]);
            let request = if cas {
                Request::Gets { keys: &taken }
            } else {
                Request::Get { keys: &taken }
            };
            request.encode(&mut want);
            prop_assert_eq!(&buf[..], &want[..]);
        }
    }
}
