//! The hash functions and encodings EVCache's keys need that no crate
//! here provides: SipHash-2-4, MurmurHash3 x64 128, Adler-32, base64
//! without padding, ascii85. Each checked against its reference vectors.

pub(super) fn siphash24(k0: u64, k1: u64, data: &[u8]) -> u64 {
    let mut v = [
        k0 ^ 0x736f_6d65_7073_6575,
        k1 ^ 0x646f_7261_6e64_6f6d,
        k0 ^ 0x6c79_6765_6e65_7261,
        k1 ^ 0x7465_6462_7974_6573,
    ];
    fn round(v: &mut [u64; 4]) {
        v[0] = v[0].wrapping_add(v[1]);
        v[1] = v[1].rotate_left(13) ^ v[0];
        v[0] = v[0].rotate_left(32);
        v[2] = v[2].wrapping_add(v[3]);
        v[3] = v[3].rotate_left(16) ^ v[2];
        v[0] = v[0].wrapping_add(v[3]);
        v[3] = v[3].rotate_left(21) ^ v[0];
        v[2] = v[2].wrapping_add(v[1]);
        v[1] = v[1].rotate_left(17) ^ v[2];
        v[2] = v[2].rotate_left(32);
    }
    // SipHash-2-4: two rounds a block, four to finish.
    let mut compress = |m: u64| {
        v[3] ^= m;
        round(&mut v);
        round(&mut v);
        v[0] ^= m;
    };
    let mut blocks = data.chunks_exact(8);
    for block in &mut blocks {
        compress(u64::from_le_bytes(block.try_into().unwrap()));
    }
    let mut last = (data.len() as u64) << 56;
    for (i, &byte) in blocks.remainder().iter().enumerate() {
        last |= u64::from(byte) << (8 * i);
    }
    compress(last);
    v[2] ^= 0xff;
    for _ in 0..4 {
        round(&mut v);
    }
    v[0] ^ v[1] ^ v[2] ^ v[3]
}

pub(super) fn murmur3_x64_128(data: &[u8]) -> Vec<u8> {
    const C1: u64 = 0x87c3_7b91_1142_53d5;
    const C2: u64 = 0x4cf5_ad43_2745_937f;
    fn mix1(k: u64) -> u64 {
        k.wrapping_mul(C1).rotate_left(31).wrapping_mul(C2)
    }
    fn mix2(k: u64) -> u64 {
        k.wrapping_mul(C2).rotate_left(33).wrapping_mul(C1)
    }
    fn fmix(mut k: u64) -> u64 {
        k ^= k >> 33;
        k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
        k ^= k >> 33;
        k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        k ^ (k >> 33)
    }
    let (mut h1, mut h2) = (0u64, 0u64);
    let mut blocks = data.chunks_exact(16);
    for block in &mut blocks {
        let k1 = u64::from_le_bytes(block[..8].try_into().unwrap());
        let k2 = u64::from_le_bytes(block[8..].try_into().unwrap());
        h1 ^= mix1(k1);
        h1 = h1
            .rotate_left(27)
            .wrapping_add(h2)
            .wrapping_mul(5)
            .wrapping_add(0x52dc_e729);
        h2 ^= mix2(k2);
        h2 = h2
            .rotate_left(31)
            .wrapping_add(h1)
            .wrapping_mul(5)
            .wrapping_add(0x3849_5ab5);
    }
    let tail = blocks.remainder();
    let (mut k1, mut k2) = (0u64, 0u64);
    for (i, &byte) in tail.iter().enumerate() {
        if i < 8 {
            k1 |= u64::from(byte) << (8 * i);
        } else {
            k2 |= u64::from(byte) << (8 * (i - 8));
        }
    }
    if tail.len() > 8 {
        h2 ^= mix2(k2);
    }
    if !tail.is_empty() {
        h1 ^= mix1(k1);
    }
    let len = data.len() as u64;
    h1 ^= len;
    h2 ^= len;
    h1 = h1.wrapping_add(h2);
    h2 = h2.wrapping_add(h1);
    h1 = fmix(h1);
    h2 = fmix(h2);
    h1 = h1.wrapping_add(h2);
    h2 = h2.wrapping_add(h1);
    let mut out = h1.to_le_bytes().to_vec();
    out.extend_from_slice(&h2.to_le_bytes());
    out
}

pub(super) fn adler32(data: &[u8]) -> u32 {
    let (mut a, mut b) = (1u32, 0u32);
    for &byte in data {
        a = (a + u32::from(byte)) % 65521;
        b = (b + a) % 65521;
    }
    (b << 16) | a
}

/// Standard base64 (`A–Z a–z 0–9 + /`) without `=` padding.
pub(super) fn base64_unpadded(data: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &b)| n | u32::from(b) << (16 - 8 * i));
        for i in 0..=chunk.len() {
            out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
        }
    }
    out
}

/// Ascii85 as the `ascii85` library EVCache uses writes it: groups of four
/// bytes big-endian, five digits from `!` each, `z` for four zero bytes, a
/// short last group padded with zeros and cut to its length plus one.
pub(super) fn ascii85(data: &[u8]) -> String {
    let mut out = String::new();
    for chunk in data.chunks(4) {
        let mut group = [0u8; 4];
        group[..chunk.len()].copy_from_slice(chunk);
        let mut n = u32::from_be_bytes(group);
        if chunk.len() == 4 && n == 0 {
            out.push('z');
            continue;
        }
        let mut digits = [0u8; 5];
        for digit in digits.iter_mut().rev() {
            *digit = b'!' + (n % 85) as u8;
            n /= 85;
        }
        out.extend(digits[..=chunk.len()].iter().map(|&d| d as char));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn the_functions_meet_their_reference_vectors() {
        // SipHash-2-4's paper: the empty input and 00..0e under key 00..0f.
        let k = (0x0706_0504_0302_0100, 0x0f0e_0d0c_0b0a_0908);
        assert_eq!(siphash24(k.0, k.1, b""), 0x726f_db47_dd0e_0e31);
        let input: Vec<u8> = (0..15).collect();
        assert_eq!(siphash24(k.0, k.1, &input), 0xa129_ca61_49be_45e5);
        // Guava's own Murmur3 test vector.
        assert_eq!(
            hex(&murmur3_x64_128(
                b"The quick brown fox jumps over the lazy dog"
            )),
            "6c1b07bc7bbc4be347939ac4a93c437a"
        );
        assert_eq!(adler32(b"Wikipedia"), 0x11e6_0398);
        assert_eq!(base64_unpadded(b"f"), "Zg");
        assert_eq!(base64_unpadded(b"fo"), "Zm8");
        assert_eq!(base64_unpadded(b"foo"), "Zm9v");
        assert_eq!(base64_unpadded(b"foob"), "Zm9vYg");
        // Python's base64.a85encode.
        assert_eq!(ascii85(b"Man "), "9jqo^");
        assert_eq!(ascii85(&[0, 0, 0, 0, 1]), "z!<");
        // A group with its top bit set, as unsigned arithmetic writes it
        // (Python's a85encode): 0xFFFFFFFF is "s8W-!".
        assert_eq!(ascii85(&[0xff; 4]), "s8W-!");
    }
}
