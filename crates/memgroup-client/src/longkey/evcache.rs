//! EVCache's envelope of a value under a hashed key: a Java-serialized
//! `com.netflix.evcache.pool.EVCacheValue` (fields `String key`, `byte[]
//! value`, `int flags`, `long ttl`, `long createTime`; default
//! serialization), stored with memcached flags 1 and never compressed. The
//! key inside is the canonical key, which a reader compares with its own: a
//! digest collision reads as a miss. Written as `ObjectOutputStream` writes
//! it on a fresh stream; read by a small parser of the same grammar (so a
//! back-reference, a long string or fields in another order still read).
//! Newer EVCache releases can also write a binary form (first byte `0x0C`):
//! read too, never written, as older Java readers cannot read it.

/// The envelope's memcached flags (spymemcached's `SERIALIZED`).
pub(crate) const ENVELOPE_FLAGS: u32 = 1;

const CLASS: &str = "com.netflix.evcache.pool.EVCacheValue";
const SUID: u64 = 3_182_483_105_524_224_448;
/// `byte[]`'s serialVersionUID.
const BYTES_SUID: u64 = 0xACF3_17F8_0608_54E0;

const TC_NULL: u8 = 0x70;
const TC_REFERENCE: u8 = 0x71;
const TC_CLASSDESC: u8 = 0x72;
const TC_OBJECT: u8 = 0x73;
const TC_STRING: u8 = 0x74;
const TC_ARRAY: u8 = 0x75;
const TC_ENDBLOCKDATA: u8 = 0x78;
const TC_LONGSTRING: u8 = 0x7C;
const BASE_HANDLE: u32 = 0x7E_0000;
const BINARY_MAGIC: u8 = 0x0C;
/// The most fields a class descriptor read here may have.
const MAX_FIELDS: u16 = 32;

/// What an envelope holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Envelope {
    /// The canonical key it was stored for.
    pub(crate) key: String,
    /// The value as the writer's transcoder encoded it.
    pub(crate) value: Vec<u8>,
    /// That transcoder's flags.
    pub(crate) flags: u32,
    /// The expiry given to the write.
    pub(crate) ttl: i64,
    /// When it was written, milliseconds since the Unix epoch.
    pub(crate) create_time: i64,
}

/// Java's modified UTF-8 of `text`: UTF-16 code units, NUL as two bytes,
/// a character outside the BMP as its two surrogates of three bytes each.
fn modified_utf8(text: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    for unit in text.encode_utf16() {
        match unit {
            0x0001..=0x007F => out.push(unit as u8),
            0x0000..=0x07FF => {
                out.push(0xC0 | (unit >> 6) as u8);
                out.push(0x80 | (unit & 0x3F) as u8);
            }
            _ => {
                out.push(0xE0 | (unit >> 12) as u8);
                out.push(0x80 | ((unit >> 6) & 0x3F) as u8);
                out.push(0x80 | (unit & 0x3F) as u8);
            }
        }
    }
    out
}

/// The text of modified UTF-8 bytes; `None` if they are not.
fn from_modified_utf8(bytes: &[u8]) -> Option<String> {
    let mut units = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        let cont = |j: usize| {
            bytes
                .get(j)
                .filter(|&&c| c & 0xC0 == 0x80)
                .map(|&c| u16::from(c & 0x3F))
        };
        match b {
            0x01..=0x7F => {
                units.push(u16::from(b));
                i += 1;
            }
            0xC0..=0xDF => {
                units.push(u16::from(b & 0x1F) << 6 | cont(i + 1)?);
                i += 2;
            }
            0xE0..=0xEF => {
                units.push(u16::from(b & 0x0F) << 12 | cont(i + 1)? << 6 | cont(i + 2)?);
                i += 3;
            }
            _ => return None,
        }
    }
    Some(String::from_utf16_lossy(&units))
}

/// A string as `writeUTF` or a long string writes it, tagged.
fn put_string(out: &mut Vec<u8>, text: &str) {
    let bytes = modified_utf8(text);
    match u16::try_from(bytes.len()) {
        Ok(len) => {
            out.push(TC_STRING);
            out.extend_from_slice(&len.to_be_bytes());
        }
        Err(_) => {
            out.push(TC_LONGSTRING);
            out.extend_from_slice(&(bytes.len() as u64).to_be_bytes());
        }
    }
    out.extend_from_slice(&bytes);
}

fn put_utf(out: &mut Vec<u8>, text: &str) {
    out.extend_from_slice(&(text.len() as u16).to_be_bytes());
    out.extend_from_slice(text.as_bytes());
}

/// The Java-serialized `EVCacheValue` of `envelope`, as EVCache writes it.
pub(crate) fn encode(envelope: &Envelope) -> Vec<u8> {
    let mut out = Vec::with_capacity(171 + envelope.key.len() * 3 + envelope.value.len());
    out.extend_from_slice(&[0xAC, 0xED, 0x00, 0x05, TC_OBJECT, TC_CLASSDESC]);
    put_utf(&mut out, CLASS);
    out.extend_from_slice(&SUID.to_be_bytes());
    out.extend_from_slice(&[0x02, 0x00, 0x05]); // SC_SERIALIZABLE, 5 fields
    // Primitives first, then objects, each by name: as Java orders them.
    for (code, name) in [(b'J', "createTime"), (b'I', "flags"), (b'J', "ttl")] {
        out.push(code);
        put_utf(&mut out, name);
    }
    out.push(b'L');
    put_utf(&mut out, "key");
    put_string(&mut out, "Ljava/lang/String;");
    out.push(b'[');
    put_utf(&mut out, "value");
    put_string(&mut out, "[B");
    out.extend_from_slice(&[TC_ENDBLOCKDATA, TC_NULL]);
    out.extend_from_slice(&envelope.create_time.to_be_bytes());
    out.extend_from_slice(&envelope.flags.to_be_bytes());
    out.extend_from_slice(&envelope.ttl.to_be_bytes());
    put_string(&mut out, &envelope.key);
    out.extend_from_slice(&[TC_ARRAY, TC_CLASSDESC]);
    put_utf(&mut out, "[B");
    out.extend_from_slice(&BYTES_SUID.to_be_bytes());
    out.extend_from_slice(&[0x02, 0x00, 0x00, TC_ENDBLOCKDATA, TC_NULL]);
    out.extend_from_slice(&(envelope.value.len() as u32).to_be_bytes());
    out.extend_from_slice(&envelope.value);
    out
}

/// An envelope read back, Java-serialized or binary; `None` for anything
/// else (another class, a truncated or corrupt stream, a plain value).
pub(crate) fn decode(stored: &[u8]) -> Option<Envelope> {
    match stored.first()? {
        &BINARY_MAGIC => decode_binary(stored),
        0xAC => Reader::new(stored).envelope(),
        _ => None,
    }
}

/// The binary form: `0C`, a reserved byte, then big-endian lengths and
/// fields; what follows them (a newer writer's extensions) is ignored.
fn decode_binary(stored: &[u8]) -> Option<Envelope> {
    let mut r = Reader::new(stored.get(2..)?);
    let key_len = usize::try_from(r.i32()?).ok()?;
    let key = String::from_utf8(r.take(key_len)?.to_vec()).ok()?;
    let value_len = usize::try_from(r.i32()?).ok()?;
    let value = r.take(value_len)?.to_vec();
    Some(Envelope {
        key,
        value,
        flags: r.i32()? as u32,
        ttl: r.i64()?,
        create_time: r.i64()?,
    })
}

/// A class's fields: each type code and name.
type Fields = Vec<(u8, String)>;

/// What a handle of the stream stands for.
#[derive(Debug, Clone)]
enum Handle {
    Text(String),
    Class {
        name: String,
        suid: u64,
        fields: Fields,
    },
    Other,
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
    handles: Vec<Handle>,
}

impl<'a> Reader<'a> {
    fn new(bytes: &'a [u8]) -> Reader<'a> {
        Reader {
            bytes,
            at: 0,
            handles: Vec::new(),
        }
    }

    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.at.checked_add(n)?;
        let taken = self.bytes.get(self.at..end)?;
        self.at = end;
        Some(taken)
    }

    fn u8(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }

    fn u16(&mut self) -> Option<u16> {
        Some(u16::from_be_bytes(self.take(2)?.try_into().ok()?))
    }

    fn i32(&mut self) -> Option<i32> {
        Some(i32::from_be_bytes(self.take(4)?.try_into().ok()?))
    }

    fn i64(&mut self) -> Option<i64> {
        Some(i64::from_be_bytes(self.take(8)?.try_into().ok()?))
    }

    fn utf(&mut self) -> Option<String> {
        let len = usize::from(self.u16()?);
        from_modified_utf8(self.take(len)?)
    }

    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_be_bytes(self.take(8)?.try_into().ok()?))
    }

    /// A back-reference's handle number read, and the object it names.
    fn reference(&mut self) -> Option<&Handle> {
        let n = self.i32()? as u32;
        self.handles
            .get(usize::try_from(n.checked_sub(BASE_HANDLE)?).ok()?)
    }

    /// A string, a long string, a reference to one, or null (`Some(None)`).
    fn string(&mut self) -> Option<Option<String>> {
        let text = match self.u8()? {
            TC_NULL => return Some(None),
            TC_STRING => self.utf()?,
            TC_LONGSTRING => {
                let len = usize::try_from(self.u64()?).ok()?;
                from_modified_utf8(self.take(len)?)?
            }
            TC_REFERENCE => {
                return match self.reference()? {
                    Handle::Text(text) => Some(Some(text.clone())),
                    _ => None,
                };
            }
            _ => return None,
        };
        self.handles.push(Handle::Text(text.clone()));
        Some(Some(text))
    }

    /// A field's type name: a string, or a reference to one (not copied).
    fn type_name(&mut self) -> Option<()> {
        if self.bytes.get(self.at) == Some(&TC_REFERENCE) {
            self.at += 1;
            return matches!(self.reference()?, Handle::Text(_)).then_some(());
        }
        self.string()?.map(drop)
    }

    /// A class descriptor (or a reference to one) with no superclass:
    /// its name and fields.
    fn class(&mut self) -> Option<(String, u64, Fields)> {
        match self.u8()? {
            TC_REFERENCE => match self.reference()? {
                Handle::Class { name, suid, fields } => Some((name.clone(), *suid, fields.clone())),
                _ => None,
            },
            TC_CLASSDESC => {
                let name = self.utf()?;
                let suid = self.u64()?;
                let index = self.handles.len();
                self.handles.push(Handle::Other);
                let flags = self.u8()?;
                if flags & 0x02 == 0 || flags & 0x01 != 0 {
                    return None; // not Serializable, or a writeObject of its own
                }
                // EVCacheValue has five; a stream claiming many more (each a
                // reference to a long string) is not one.
                let count = self.u16()?;
                if count > MAX_FIELDS {
                    return None;
                }
                let mut fields = Vec::with_capacity(usize::from(count));
                for _ in 0..count {
                    let code = self.u8()?;
                    let field = self.utf()?;
                    if matches!(code, b'L' | b'[') {
                        self.type_name()?;
                    }
                    fields.push((code, field));
                }
                // No annotations, no serializable superclass.
                if self.u8()? != TC_ENDBLOCKDATA || self.u8()? != TC_NULL {
                    return None;
                }
                self.handles[index] = Handle::Class {
                    name: name.clone(),
                    suid,
                    fields: fields.clone(),
                };
                Some((name, suid, fields))
            }
            _ => None,
        }
    }

    /// A `byte[]`, or null (`Some(None)`).
    fn bytes_array(&mut self) -> Option<Option<Vec<u8>>> {
        match self.u8()? {
            TC_NULL => Some(None),
            TC_ARRAY => {
                let (name, _, _) = self.class()?;
                if name != "[B" {
                    return None;
                }
                self.handles.push(Handle::Other);
                let len = usize::try_from(self.i32()?).ok()?;
                Some(Some(self.take(len)?.to_vec()))
            }
            _ => None,
        }
    }

    fn envelope(mut self) -> Option<Envelope> {
        if self.take(4)? != [0xAC, 0xED, 0x00, 0x05] || self.u8()? != TC_OBJECT {
            return None;
        }
        let (name, suid, fields) = self.class()?;
        // The class's own serialVersionUID, as Java checks it.
        if name != CLASS || suid != SUID {
            return None;
        }
        self.handles.push(Handle::Other);
        let (mut key, mut value, mut flags, mut ttl, mut create_time) = (None, None, 0, 0, 0);
        // Primitives in the descriptor's order, then the objects.
        for (code, field) in fields.iter().filter(|(c, _)| !matches!(c, b'L' | b'[')) {
            let n = match code {
                b'B' | b'Z' => i64::from(self.u8()? as i8),
                b'C' | b'S' => i64::from(self.u16()? as i16),
                b'I' | b'F' => i64::from(self.i32()?),
                b'J' | b'D' => self.i64()?,
                _ => return None,
            };
            match (field.as_str(), code) {
                ("flags", b'I') => flags = n as u32,
                ("ttl", b'J') => ttl = n,
                ("createTime", b'J') => create_time = n,
                _ => {}
            }
        }
        for (code, field) in fields.iter().filter(|(c, _)| matches!(c, b'L' | b'[')) {
            match (field.as_str(), code) {
                ("key", b'L') => key = self.string()?,
                ("value", b'[') => value = self.bytes_array()?,
                _ => return None, // a field EVCacheValue does not have
            }
        }
        Some(Envelope {
            key: key?,
            value: value?,
            flags,
            ttl,
            create_time,
        })
    }
}

#[cfg(test)]
mod tests;
