//! Whalin's key sanitising (`sanitizeKeys = true`): `URLEncoder.encode(key, "UTF-8")`.

use std::borrow::Cow;

/// Bytes `java.net.URLEncoder` leaves alone.
#[inline]
fn is_unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'*' | b'_')
}

/// Encodes a key the way the Whalin Java client does before hashing and sending it when
/// `sanitizeKeys` is on (the default of `MemCachedClient` 2.x and of `AscIIClient` 3.0):
/// `java.net.URLEncoder.encode(key, "UTF-8")`.
///
/// * `a-z A-Z 0-9 . - * _` are kept,
/// * a space becomes `+`,
/// * every other byte becomes `%XX` with uppercase hex.
///
/// This is a *key transform*, not a hashing detail: the Java client stores the item under the
/// encoded key, so a compatible client must both hash **and send** the returned bytes.
/// [`Locator::wire_key`](crate::Locator::wire_key) applies it when the locator's configuration
/// asks for it. The result can be up to three times longer than the input and so may exceed
/// memcached's 250-byte key limit; validating that is the caller's job.
///
/// Keys are escaped byte by byte. For valid UTF-8 this is exactly what Java produces (it
/// escapes the UTF-8 bytes of each character). For invalid UTF-8 the raw bytes are escaped,
/// whereas a JVM would have decoded them to U+FFFD first and produced `%EF%BF%BD`; a Java
/// application cannot hand such bytes to its client, so there is nothing to be compatible
/// with, and keeping the bytes keeps distinct keys distinct.
///
/// Returns the input unchanged (borrowed) when nothing needs escaping.
///
/// ```
/// use memgroup_hash::sanitize_key;
/// assert_eq!(&*sanitize_key(b"user:5118636"), b"user%3A5118636");
/// assert_eq!(&*sanitize_key("café".as_bytes()), b"caf%C3%A9");
/// assert_eq!(&*sanitize_key(b"a b~"), b"a+b%7E");
/// assert!(matches!(sanitize_key(b"plain_key-1.0*"), std::borrow::Cow::Borrowed(_)));
/// ```
#[must_use]
pub fn sanitize_key(key: &[u8]) -> Cow<'_, [u8]> {
    let escaped = key
        .iter()
        .filter(|&&b| !is_unreserved(b) && b != b' ')
        .count();
    if escaped == 0 && !key.contains(&b' ') {
        return Cow::Borrowed(key);
    }
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut out = Vec::with_capacity(key.len() + 2 * escaped);
    for &b in key {
        if is_unreserved(b) {
            out.push(b);
        } else if b == b' ' {
            out.push(b'+');
        } else {
            out.extend_from_slice(&[b'%', HEX[usize::from(b >> 4)], HEX[usize::from(b & 0xf)]]);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readme_examples() {
        assert_eq!(&*sanitize_key("😀".as_bytes()), b"%F0%9F%98%80");
        assert_eq!(&*sanitize_key(b"a b"), b"a+b");
        assert_eq!(&*sanitize_key(b"100%"), b"100%25");
        assert_eq!(&*sanitize_key(b""), b"");
    }
}
