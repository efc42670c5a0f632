//! The fields of reply lines: the searches for a line's end and a field's,
//! the numbers, and the `VALUE`, `STAT` and `VA` headers' fields.

use std::ops::Range;

use bytes::{Bytes, BytesMut};
use nom::bytes::complete::tag;
use nom::combinator::{all_consuming, opt, rest};
use nom::sequence::preceded;
use nom::{IResult, Parser};

/// The offset of the first `\n`, eight bytes at a time: this search runs
/// over every reply byte that is not value data.
pub(crate) fn find_newline(hay: &[u8]) -> Option<usize> {
    find_byte(hay, b'\n')
}

/// The offset of the first `needle` in `hay`, eight bytes at a time.
pub(crate) fn find_byte(hay: &[u8], needle: u8) -> Option<usize> {
    const LO: u64 = 0x0101_0101_0101_0101;
    const HI: u64 = 0x8080_8080_8080_8080;
    let pattern: u64 = LO * u64::from(needle);
    let mut chunks = hay.chunks_exact(8);
    let mut base = 0;
    for chunk in &mut chunks {
        let word = u64::from_le_bytes(chunk.try_into().expect("8-byte chunk"));
        let x = word ^ pattern;
        // The classic "has zero byte" test; its lowest set bit marks the
        // first match exactly (false positives only occur above a real one).
        let found = x.wrapping_sub(LO) & !x & HI;
        if found != 0 {
            return Some(base + (found.trailing_zeros() / 8) as usize);
        }
        base += 8;
    }
    chunks
        .remainder()
        .iter()
        .position(|&b| b == needle)
        .map(|i| base + i)
}

/// Takes the line and its `\r\n` off the buffer; returns the line without them.
pub(crate) fn split_line(buf: &mut BytesMut, line_len: usize) -> Bytes {
    let mut line = buf.split_to(line_len + 2).freeze();
    line.truncate(line_len);
    line
}

pub(crate) fn offset(line: &[u8], part: &[u8]) -> Range<usize> {
    let start = part.as_ptr() as usize - line.as_ptr() as usize;
    start..start + part.len()
}

pub(crate) type In<'a> = &'a [u8];

/// A space-delimited field. Reply lines never hold CR or LF, so the field
/// simply runs to the next space (searched a word at a time: keys are the
/// longest fields of the hottest line).
pub(crate) fn token(i: In<'_>) -> IResult<In<'_>, In<'_>> {
    let end = find_byte(i, b' ').unwrap_or(i.len());
    if end == 0 {
        return Err(nom::Err::Error(nom::error::Error::new(
            i,
            nom::error::ErrorKind::TakeWhile1,
        )));
    }
    Ok((&i[end..], &i[..end]))
}

pub(crate) fn sp(i: &[u8]) -> IResult<&[u8], &[u8]> {
    tag(&b" "[..]).parse(i)
}

/// A decimal `u64` of at most 20 digits, rejecting overflow. Hand-rolled
/// rather than nom's generic number parser because header numbers are on the
/// hottest path: one pass, each digit checked and added as it is met.
pub(crate) fn dec_u64(i: In<'_>) -> IResult<In<'_>, u64> {
    match digits(i) {
        Ok((n, rest)) => Ok((rest, n)),
        Err(kind) => Err(nom::Err::Error(nom::error::Error::new(i, kind))),
    }
}

/// [`dec_u64`] without nom's error: the number and what follows it, or
/// why there is none (no digit, over 20 digits, or an overflow).
#[inline]
pub(crate) fn digits(i: In<'_>) -> Result<(u64, In<'_>), nom::error::ErrorKind> {
    let mut n: u64 = 0;
    let mut count = 0;
    for &b in i {
        let d = b.wrapping_sub(b'0');
        if d > 9 {
            break;
        }
        if count == 20 {
            return Err(nom::error::ErrorKind::Digit);
        }
        n = n
            .checked_mul(10)
            .and_then(|n| n.checked_add(u64::from(d)))
            .ok_or(nom::error::ErrorKind::TooLarge)?;
        count += 1;
    }
    if count == 0 {
        return Err(nom::error::ErrorKind::Digit);
    }
    Ok((n, &i[count..]))
}

/// A decimal `u32` ([`dec_u64`] in range): the grammar the tests hold
/// [`value_fields`] to.
#[cfg(test)]
pub(crate) fn dec_u32(i: In<'_>) -> IResult<In<'_>, u32> {
    let (rest, n) = dec_u64(i)?;
    match u32::try_from(n) {
        Ok(n) => Ok((rest, n)),
        Err(_) => Err(nom::Err::Error(nom::error::Error::new(
            i,
            nom::error::ErrorKind::TooLarge,
        ))),
    }
}

/// `VALUE <key> <flags> <bytes> [<cas>]`, after the `VALUE ` prefix: the
/// key (up to the first space), then the numbers, one space before each, and
/// nothing after. The line every hit arrives on, so its fields are taken one
/// after the other without a combinator chain (which cost about twice the
/// instructions per value).
#[inline]
pub(crate) fn value_fields(i: In<'_>) -> Option<(In<'_>, u32, u64, Option<u64>)> {
    // One pass, no parser state: the key to the first space, then each
    // number after exactly one space.
    let end = find_byte(i, b' ')?;
    let (key, rest) = (&i[..end], &i[end + 1..]);
    if key.is_empty() {
        return None;
    }
    let (flags, rest) = digits(rest).ok()?;
    let flags = u32::try_from(flags).ok()?;
    let (len, rest) = digits(rest.strip_prefix(b" ")?).ok()?;
    let cas = match rest {
        [] => None,
        [b' ', cas @ ..] => match digits(cas).ok()? {
            (cas, []) => Some(cas),
            _ => return None,
        },
        _ => return None,
    };
    Some((key, flags, len, cas))
}

/// `STAT <name> <value>`, after the `STAT ` prefix; the value may hold spaces.
pub(crate) fn stat_fields(i: In<'_>) -> IResult<In<'_>, (In<'_>, Option<In<'_>>)> {
    (token, opt(preceded(sp, rest))).parse(i)
}

/// `VA <size> <flags>*`, after the `VA ` prefix.
pub(crate) fn va_fields(i: &[u8]) -> IResult<&[u8], (u64, Option<&[u8]>)> {
    all_consuming((dec_u64, opt(preceded(sp, rest)))).parse(i)
}
