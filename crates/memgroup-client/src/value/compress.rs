//! gzip (Java clients) and zlib (python-memcached) for stored values, with a
//! bound on what decompression may produce: a small corrupt or hostile value
//! must not expand into gigabytes.

use bytes::Bytes;

/// How a value is compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Codec {
    /// gzip (RFC 1952): spymemcached, EVCache, Whalin.
    Gzip,
    /// zlib (RFC 1950): python-memcached.
    Zlib,
}

/// Why a value could not be decompressed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(not(feature = "compression"), allow(dead_code))]
pub(crate) enum Failure {
    /// The data is not valid for the codec.
    Corrupt(String),
    /// The output would exceed the limit.
    TooLarge { limit: usize },
    /// The value is zstd-compressed (EVCache's newer option).
    Zstd,
    /// Built without the `compression` feature.
    #[cfg_attr(feature = "compression", allow(dead_code))]
    Unsupported,
}

/// zstd's frame magic, little-endian `0xFD2FB528`.
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

/// Decompresses `data`, refusing output over `limit` bytes.
#[cfg(feature = "compression")]
pub(crate) fn decompress(codec: Codec, data: &[u8], limit: usize) -> Result<Bytes, Failure> {
    use std::io::Read;
    if data.starts_with(&ZSTD_MAGIC) {
        return Err(Failure::Zstd);
    }
    let mut out = Vec::with_capacity((data.len() * 4).min(limit).min(1 << 20));
    // One byte past the limit tells "too large" from "exactly at the limit".
    let cap = limit as u64 + 1;
    let result = match codec {
        Codec::Gzip => flate2::read::GzDecoder::new(data)
            .take(cap)
            .read_to_end(&mut out),
        Codec::Zlib => flate2::read::ZlibDecoder::new(data)
            .take(cap)
            .read_to_end(&mut out),
    };
    match result {
        Err(e) => Err(Failure::Corrupt(e.to_string())),
        Ok(_) if out.len() > limit => Err(Failure::TooLarge { limit }),
        Ok(_) => Ok(Bytes::from(out)),
    }
}

/// Without the `compression` feature nothing can be decompressed.
#[cfg(not(feature = "compression"))]
pub(crate) fn decompress(_codec: Codec, data: &[u8], _limit: usize) -> Result<Bytes, Failure> {
    if data.starts_with(&ZSTD_MAGIC) {
        return Err(Failure::Zstd);
    }
    Err(Failure::Unsupported)
}

/// Compresses `data`; `None` when the result is not smaller (or compression
/// is not built in), so the caller stores the value as it is.
#[cfg(feature = "compression")]
pub(crate) fn compress(codec: Codec, data: &[u8]) -> Option<Bytes> {
    use std::io::Write;
    let level = flate2::Compression::default();
    let out = match codec {
        Codec::Gzip => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), level);
            e.write_all(data).ok()?;
            e.finish().ok()?
        }
        Codec::Zlib => {
            let mut e = flate2::write::ZlibEncoder::new(Vec::new(), level);
            e.write_all(data).ok()?;
            e.finish().ok()?
        }
    };
    (out.len() < data.len()).then(|| Bytes::from(out))
}

/// Without the `compression` feature values are stored uncompressed.
#[cfg(not(feature = "compression"))]
pub(crate) fn compress(_codec: Codec, _data: &[u8]) -> Option<Bytes> {
    None
}

#[cfg(all(test, feature = "compression"))]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_bounds() {
        let data = vec![b'a'; 100_000];
        for codec in [Codec::Gzip, Codec::Zlib] {
            let packed = compress(codec, &data).expect("smaller");
            assert!(packed.len() < 1000);
            assert_eq!(decompress(codec, &packed, 100_000).unwrap(), data);
            assert_eq!(
                decompress(codec, &packed, 99_999),
                Err(Failure::TooLarge { limit: 99_999 })
            );
            assert!(matches!(
                decompress(codec, &packed[..packed.len() / 2], 1 << 20),
                Err(Failure::Corrupt(_))
            ));
            assert!(compress(codec, b"xy").is_none(), "not smaller");
        }
        assert_eq!(
            decompress(Codec::Gzip, &[0x28, 0xb5, 0x2f, 0xfd, 0], 10),
            Err(Failure::Zstd)
        );
        assert!(matches!(
            decompress(Codec::Gzip, b"garbage", 10),
            Err(Failure::Corrupt(_))
        ));
    }
}
