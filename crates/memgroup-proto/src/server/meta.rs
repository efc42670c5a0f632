//! Meta commands as a client sends them: flags checked as memcached 1.6.18
//! checks them, each error its reply.

use bytes::Bytes;

use super::decode::{parse_i32, parse_u64};
use crate::key::{MAX_KEY_LEN, base64_decode};
use crate::request::{ArithMode, MetaFlag, SetMode};

/// Which meta command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetaKind {
    /// `mg`.
    Get,
    /// `ms`.
    Set,
    /// `md`.
    Delete,
    /// `ma`.
    Arith,
    /// `me` (debug: the item's metadata).
    Debug,
}

/// A meta command a client sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetaRequest {
    /// Which command.
    pub kind: MetaKind,
    /// The key: with `b`, decoded from base64 (any bytes).
    pub key: Bytes,
    /// The flags to forward, in the order sent: without `q` (the proxy
    /// applies quiet mode itself) and the flags memcached 1.6.18 accepts and
    /// ignores (`L`, `P`, a mode on `mg`/`md`); `O` stands as `O0` in its
    /// place, its token in [`MetaRequest::opaque`], to go back in the same
    /// place of the reply.
    pub flags: Vec<MetaFlag>,
    /// The opaque token (`O…`, up to 32 bytes), echoed in the reply.
    pub opaque: Option<Bytes>,
    /// `q`: the common reply (`EN` of `mg`, `HD` of the others) is not written.
    pub quiet: bool,
    /// `ms`'s data block, without its `\r\n`.
    pub data: Option<Bytes>,
}

impl MetaRequest {
    /// Whether the key was sent in base64 (`b`).
    pub fn base64(&self) -> bool {
        self.flags.contains(&MetaFlag::Base64Key)
    }

    /// Whether it changes the item's state, so that requests of the same
    /// key must keep their order around it: every meta command but `me` (a
    /// meta get hands out win tokens and sets the item's fetched bit and
    /// last access, which a later `mg … h l` or `mg` of a stale item reads).
    pub fn writes(&self) -> bool {
        self.kind != MetaKind::Debug
    }
}

/// What a meta command line turned into.
pub(super) enum Parsed {
    /// Ready (everything but `ms`).
    Request(MetaRequest),
    /// An `ms` whose data block of `len` bytes comes next.
    Set { request: MetaRequest, len: usize },
    /// An `ms` refused after its length was read: its data is dropped.
    SetRefused { reply: &'static [u8], len: usize },
    /// A refusal (no data to drop).
    Error(&'static [u8]),
}

const BAD_FORMAT: &[u8] = b"CLIENT_ERROR bad command line format\r\n";

/// Parses `<cmd> <key> [<datalen>] <flag>*` (tokens include the command).
pub(super) fn parse(kind: MetaKind, tokens: &[Bytes]) -> Parsed {
    let Some(raw_key) = tokens.get(1) else {
        return Parsed::Error(if kind == MetaKind::Debug {
            BAD_FORMAT
        } else {
            b"ERROR\r\n"
        });
    };
    if raw_key.len() > MAX_KEY_LEN {
        return Parsed::Error(BAD_FORMAT);
    }
    if kind == MetaKind::Debug {
        let base64 = tokens[2..].iter().any(|t| t.first() == Some(&b'b'));
        let key = if base64 {
            match base64_decode(raw_key) {
                Some(k) if !k.is_empty() => Bytes::from(k),
                _ => return Parsed::Error(BAD_FORMAT),
            }
        } else {
            raw_key.clone()
        };
        let flags = if base64 {
            vec![MetaFlag::Base64Key]
        } else {
            Vec::new()
        };
        return Parsed::Request(MetaRequest {
            kind,
            key,
            flags,
            opaque: None,
            quiet: false,
            data: None,
        });
    }
    let (len, flag_tokens) = if kind == MetaKind::Set {
        let Some(len) = tokens.get(2).and_then(|t| parse_i32(t)) else {
            return Parsed::Error(BAD_FORMAT);
        };
        if !(0..=i32::MAX - 2).contains(&len) {
            return Parsed::Error(BAD_FORMAT);
        }
        (len as usize, &tokens[3..])
    } else {
        (0, &tokens[2..])
    };
    let refused = |reply: &'static [u8]| {
        // md and ma answer every flag error alike.
        let reply = match kind {
            MetaKind::Delete | MetaKind::Arith
                if !reply.starts_with(b"CLIENT_ERROR invalid mode") =>
            {
                &b"CLIENT_ERROR invalid or duplicate flag\r\n"[..]
            }
            _ => reply,
        };
        if kind == MetaKind::Set {
            Parsed::SetRefused { reply, len }
        } else {
            Parsed::Error(reply)
        }
    };
    let mut seen = [false; 128];
    let mut request = MetaRequest {
        kind,
        key: raw_key.clone(),
        flags: Vec::with_capacity(flag_tokens.len()),
        opaque: None,
        quiet: false,
        data: None,
    };
    for token in flag_tokens {
        let letter = token[0];
        let rest = &token[1..];
        let valid = matches!(
            letter,
            b'b' | b'c' | b'f' | b'h' | b'k' | b'l' | b'q' | b's' | b't' | b'u' | b'v'
        ) || matches!(
            letter,
            b'C' | b'D' | b'F' | b'I' | b'J' | b'L' | b'M' | b'N' | b'O' | b'P' | b'R' | b'T'
        );
        if !valid {
            return refused(b"CLIENT_ERROR invalid flag\r\n");
        }
        if std::mem::replace(&mut seen[usize::from(letter)], true) {
            return refused(b"CLIENT_ERROR duplicate flag\r\n");
        }
        let ttl = || parse_i32(rest).map(|n| n as u32);
        let flag = match letter {
            b'b' => MetaFlag::Base64Key,
            b'c' => MetaFlag::ReturnCas,
            b'f' => MetaFlag::ReturnFlags,
            b'h' => MetaFlag::ReturnHit,
            b'k' => MetaFlag::ReturnKey,
            b'l' => MetaFlag::ReturnLastAccess,
            b's' => MetaFlag::ReturnSize,
            b't' => MetaFlag::ReturnTtl,
            b'u' => MetaFlag::NoLruBump,
            b'v' => MetaFlag::ReturnValue,
            b'I' => MetaFlag::Invalidate,
            b'q' => {
                request.quiet = true;
                continue;
            }
            b'L' | b'P' => continue,
            b'O' => {
                if rest.len() > 32 {
                    return refused(b"CLIENT_ERROR opaque token too long\r\n");
                }
                request.opaque = Some(token.slice(1..));
                MetaFlag::Opaque(0)
            }
            b'N' | b'R' | b'T' => {
                let Some(n) = ttl() else {
                    return refused(b"CLIENT_ERROR bad token in command line format\r\n");
                };
                match letter {
                    b'N' => MetaFlag::Vivify(n),
                    b'R' => MetaFlag::Recache(n),
                    _ => MetaFlag::Ttl(n),
                }
            }
            b'C' => match parse_u64(rest) {
                Some(n) => MetaFlag::CompareCas(n),
                None => return refused(b"CLIENT_ERROR bad token in command line format\r\n"),
            },
            b'D' => match parse_u64(rest) {
                Some(n) => MetaFlag::Delta(n),
                None => return refused(b"CLIENT_ERROR invalid numeric delta value\r\n"),
            },
            b'J' => match parse_u64(rest) {
                Some(n) => MetaFlag::Initial(n),
                None => return refused(b"CLIENT_ERROR invalid numeric initial value\r\n"),
            },
            b'F' => match parse_u64(rest) {
                Some(n) => MetaFlag::SetFlags(n as u32),
                None => return refused(BAD_FORMAT),
            },
            _ => {
                // M: a mode of one letter.
                if rest.len() != 1 {
                    return refused(b"CLIENT_ERROR incorrect length for M token\r\n");
                }
                match (kind, rest[0]) {
                    (MetaKind::Set, b'E' | b'e') => MetaFlag::SetMode(SetMode::Add),
                    (MetaKind::Set, b'A' | b'a') => MetaFlag::SetMode(SetMode::Append),
                    (MetaKind::Set, b'P' | b'p') => MetaFlag::SetMode(SetMode::Prepend),
                    (MetaKind::Set, b'R' | b'r') => MetaFlag::SetMode(SetMode::Replace),
                    (MetaKind::Set, b'S' | b's') => MetaFlag::SetMode(SetMode::Set),
                    (MetaKind::Set, _) => {
                        return refused(b"CLIENT_ERROR invalid mode for ms M token\r\n");
                    }
                    (MetaKind::Arith, b'I' | b'i' | b'+') => {
                        MetaFlag::ArithMode(ArithMode::Increment)
                    }
                    (MetaKind::Arith, b'D' | b'd' | b'-') => {
                        MetaFlag::ArithMode(ArithMode::Decrement)
                    }
                    (MetaKind::Arith, _) => {
                        return refused(b"CLIENT_ERROR invalid mode for ma M token\r\n");
                    }
                    _ => continue,
                }
            }
        };
        request.flags.push(flag);
    }
    if request.base64() {
        match base64_decode(raw_key) {
            Some(k) if !k.is_empty() => request.key = Bytes::from(k),
            _ => return refused(b"CLIENT_ERROR error decoding key\r\n"),
        }
    }
    if kind == MetaKind::Set {
        Parsed::Set { request, len }
    } else {
        Parsed::Request(request)
    }
}
