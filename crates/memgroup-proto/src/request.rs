//! Requests: every command encodes itself into a caller-owned `BytesMut`.

use bytes::{BufMut, BytesMut};

use crate::decode::Expect;
use crate::key::Key;

/// The storage commands that share the `<cmd> <key> <flags> <exptime> <bytes>` form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StoreCommand {
    /// `set`: store unconditionally.
    Set,
    /// `add`: store only if the key is absent.
    Add,
    /// `replace`: store only if the key is present.
    Replace,
    /// `append`: add the data after the existing value (flags and exptime ignored).
    Append,
    /// `prepend`: add the data before the existing value (flags and exptime ignored).
    Prepend,
    /// `cas`: store only if the item's CAS value is still this one.
    Cas(u64),
}

impl StoreCommand {
    fn name(self) -> &'static [u8] {
        match self {
            StoreCommand::Set => b"set ",
            StoreCommand::Add => b"add ",
            StoreCommand::Replace => b"replace ",
            StoreCommand::Append => b"append ",
            StoreCommand::Prepend => b"prepend ",
            StoreCommand::Cas(_) => b"cas ",
        }
    }
}

/// The mode switch of `ms` (`M<token>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SetMode {
    /// `ME`: like `add`.
    Add,
    /// `MA`: like `append`.
    Append,
    /// `MP`: like `prepend`.
    Prepend,
    /// `MR`: like `replace`.
    Replace,
    /// `MS`: like `set` (the default).
    Set,
}

/// The mode switch of `ma` (`M<token>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ArithMode {
    /// `MI`: increment (the default).
    Increment,
    /// `MD`: decrement, stopping at zero.
    Decrement,
}

/// A flag of a meta command (`mg`, `ms`, `md`, `ma`).
///
/// Flags are written in the order given, separated by spaces; return flags come
/// back in the same order. Flags meaningless for a command are ignored by the
/// server, as `protocol.txt` specifies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MetaFlag {
    /// `b`: the key is base64 encoded (see [`base64_encode`](crate::base64_encode)).
    Base64Key,
    /// `c`: return the item's CAS value.
    ReturnCas,
    /// `f`: return the client flags.
    ReturnFlags,
    /// `h`: return whether the item was hit before (0 or 1).
    ReturnHit,
    /// `k`: return the key.
    ReturnKey,
    /// `l`: return seconds since last access.
    ReturnLastAccess,
    /// `O<opaque>`: an opaque number echoed back, to pair replies.
    Opaque(u32),
    /// `q`: quiet mode — suppress the common replies: `EN` of `mg`, `HD` of
    /// `ms`/`md`/`ma` (memcached 1.6 still sends `NF`, `NS`, `EX` and errors).
    Quiet,
    /// `s`: return the item size.
    ReturnSize,
    /// `t`: return the remaining TTL in seconds (-1 for none).
    ReturnTtl,
    /// `u`: do not bump the item in the LRU.
    NoLruBump,
    /// `v`: return the value.
    ReturnValue,
    /// `N<ttl>`: vivify on miss, creating a stub item with this TTL.
    Vivify(u32),
    /// `R<ttl>`: win a recache if the remaining TTL is below this.
    Recache(u32),
    /// `T<ttl>`: set the TTL (also "touch" on `mg`).
    Ttl(u32),
    /// `C<cas>`: compare this CAS value before acting.
    CompareCas(u64),
    /// `E<cas>`: use this value as the item's new CAS.
    ExplicitCas(u64),
    /// `F<flags>`: set the client flags (`ms`).
    SetFlags(u32),
    /// `I`: invalidate — mark stale instead of deleting (`md`), or store only if stale (`ms`).
    Invalidate,
    /// `M<mode>` for `ms`.
    SetMode(SetMode),
    /// `M<mode>` for `ma`.
    ArithMode(ArithMode),
    /// `D<delta>`: the delta of `ma` (default 1).
    Delta(u64),
    /// `J<initial>`: the initial value when `ma` auto-creates (with `N`).
    Initial(u64),
}

impl MetaFlag {
    fn encode(self, buf: &mut BytesMut) {
        buf.put_u8(b' ');
        buf.put_u8(self.letter());
        let number: u64 = match self {
            MetaFlag::Opaque(n)
            | MetaFlag::Vivify(n)
            | MetaFlag::Recache(n)
            | MetaFlag::Ttl(n)
            | MetaFlag::SetFlags(n) => u64::from(n),
            MetaFlag::CompareCas(n)
            | MetaFlag::ExplicitCas(n)
            | MetaFlag::Delta(n)
            | MetaFlag::Initial(n) => n,
            MetaFlag::SetMode(m) => {
                buf.put_u8(match m {
                    SetMode::Add => b'E',
                    SetMode::Append => b'A',
                    SetMode::Prepend => b'P',
                    SetMode::Replace => b'R',
                    SetMode::Set => b'S',
                });
                return;
            }
            MetaFlag::ArithMode(m) => {
                buf.put_u8(match m {
                    ArithMode::Increment => b'I',
                    ArithMode::Decrement => b'D',
                });
                return;
            }
            _ => return,
        };
        put_u64(buf, number);
    }

    /// The flag's letter on the wire (`v`, `T`, `M`, …): for a return flag,
    /// the letter its value comes back under in the reply.
    ///
    /// ```
    /// use memgroup_proto::MetaFlag;
    /// assert_eq!(MetaFlag::ReturnCas.letter(), b'c');
    /// assert_eq!(MetaFlag::Ttl(30).letter(), b'T');
    /// ```
    pub fn letter(self) -> u8 {
        match self {
            MetaFlag::Base64Key => b'b',
            MetaFlag::ReturnCas => b'c',
            MetaFlag::ReturnFlags => b'f',
            MetaFlag::ReturnHit => b'h',
            MetaFlag::ReturnKey => b'k',
            MetaFlag::ReturnLastAccess => b'l',
            MetaFlag::Opaque(_) => b'O',
            MetaFlag::Quiet => b'q',
            MetaFlag::ReturnSize => b's',
            MetaFlag::ReturnTtl => b't',
            MetaFlag::NoLruBump => b'u',
            MetaFlag::ReturnValue => b'v',
            MetaFlag::Vivify(_) => b'N',
            MetaFlag::Recache(_) => b'R',
            MetaFlag::Ttl(_) => b'T',
            MetaFlag::CompareCas(_) => b'C',
            MetaFlag::ExplicitCas(_) => b'E',
            MetaFlag::SetFlags(_) => b'F',
            MetaFlag::Invalidate => b'I',
            MetaFlag::SetMode(_) | MetaFlag::ArithMode(_) => b'M',
            MetaFlag::Delta(_) => b'D',
            MetaFlag::Initial(_) => b'J',
        }
    }

    /// Whether this flag is `q`, which makes the server skip some replies.
    pub fn is_quiet(self) -> bool {
        self == MetaFlag::Quiet
    }

    /// Parses one flag as `protocol.txt` writes it (`v`, `T30`, `N30`,
    /// `C12`, `MA`, …) for meta command `command` (`mg`, `ms`, `md`, `ma`):
    /// a mode (`M…`) is a set mode for `ms`, an arithmetic one for `ma`.
    /// The error says what is wrong with the token.
    ///
    /// ```
    /// use memgroup_proto::{MetaFlag, SetMode};
    /// assert_eq!(MetaFlag::parse("mg", "N30"), Ok(MetaFlag::Vivify(30)));
    /// assert_eq!(MetaFlag::parse("ms", "ME"), Ok(MetaFlag::SetMode(SetMode::Add)));
    /// assert!(MetaFlag::parse("mg", "T").is_err());
    /// ```
    pub fn parse(command: &str, token: &str) -> Result<MetaFlag, String> {
        let mut chars = token.chars();
        let letter = chars.next().ok_or("an empty flag")?;
        let rest = chars.as_str();
        let number = || -> Result<u64, String> {
            rest.parse()
                .map_err(|_| format!("flag {letter} needs a number: {token:?}"))
        };
        let small = || -> Result<u32, String> {
            u32::try_from(number()?).map_err(|_| format!("flag {letter}'s number is too large"))
        };
        let bare = |flag: MetaFlag| {
            if rest.is_empty() {
                Ok(flag)
            } else {
                Err(format!("flag {letter} takes no value: {token:?}"))
            }
        };
        match letter {
            'b' => bare(MetaFlag::Base64Key),
            'c' => bare(MetaFlag::ReturnCas),
            'f' => bare(MetaFlag::ReturnFlags),
            'h' => bare(MetaFlag::ReturnHit),
            'k' => bare(MetaFlag::ReturnKey),
            'l' => bare(MetaFlag::ReturnLastAccess),
            'q' => bare(MetaFlag::Quiet),
            's' => bare(MetaFlag::ReturnSize),
            't' => bare(MetaFlag::ReturnTtl),
            'u' => bare(MetaFlag::NoLruBump),
            'v' => bare(MetaFlag::ReturnValue),
            'I' => bare(MetaFlag::Invalidate),
            'O' => small().map(MetaFlag::Opaque),
            'N' => small().map(MetaFlag::Vivify),
            'R' => small().map(MetaFlag::Recache),
            'T' => small().map(MetaFlag::Ttl),
            'F' => small().map(MetaFlag::SetFlags),
            'C' => number().map(MetaFlag::CompareCas),
            'E' => number().map(MetaFlag::ExplicitCas),
            'D' => number().map(MetaFlag::Delta),
            'J' => number().map(MetaFlag::Initial),
            'M' => match (command, rest) {
                ("ms", "E" | "e") => Ok(MetaFlag::SetMode(SetMode::Add)),
                ("ms", "A" | "a") => Ok(MetaFlag::SetMode(SetMode::Append)),
                ("ms", "P" | "p") => Ok(MetaFlag::SetMode(SetMode::Prepend)),
                ("ms", "R" | "r") => Ok(MetaFlag::SetMode(SetMode::Replace)),
                ("ms", "S" | "s") => Ok(MetaFlag::SetMode(SetMode::Set)),
                ("ma", "I" | "i" | "+") => Ok(MetaFlag::ArithMode(ArithMode::Increment)),
                ("ma", "D" | "d" | "-") => Ok(MetaFlag::ArithMode(ArithMode::Decrement)),
                _ => Err(format!("no mode {token:?} for {command}")),
            },
            _ => Err(format!("unknown meta flag {token:?}")),
        }
    }
}

/// One memcached command, ready to encode.
///
/// Keys are [`Key`]s, so they were validated when they were made; data blocks
/// are raw bytes whose length goes on the command line. Encoding never fails
/// and allocates nothing beyond growing the caller's buffer. Check a value's
/// size against the server's limit before encoding a storage command: memcached
/// answers an oversized value with `SERVER_ERROR object too large for cache`.
///
/// ```
/// use bytes::BytesMut;
/// use memgroup_proto::{Key, Request, StoreCommand};
///
/// let key = Key::new(b"greeting").unwrap();
/// let mut buf = BytesMut::new();
/// Request::Store {
///     command: StoreCommand::Set,
///     key,
///     flags: 0,
///     exptime: 60,
///     data: b"hello",
///     noreply: false,
/// }
/// .encode(&mut buf);
/// assert_eq!(&buf[..], b"set greeting 0 60 5\r\nhello\r\n");
/// ```
#[derive(Debug, Clone, Copy)]
pub enum Request<'a> {
    /// ```text
    /// get <key>*\r\n
    /// ```
    Get {
        /// The keys to fetch (at least one).
        keys: &'a [Key<'a>],
    },
    /// ```text
    /// gets <key>*\r\n
    /// ```
    Gets {
        /// The keys to fetch, with their CAS values.
        keys: &'a [Key<'a>],
    },
    /// ```text
    /// gat <exptime> <key>*\r\n
    /// ```
    Gat {
        /// The new expiration time.
        exptime: u32,
        /// The keys to fetch and touch.
        keys: &'a [Key<'a>],
    },
    /// ```text
    /// gats <exptime> <key>*\r\n
    /// ```
    Gats {
        /// The new expiration time.
        exptime: u32,
        /// The keys to fetch (with CAS) and touch.
        keys: &'a [Key<'a>],
    },
    /// ```text
    /// <cmd> <key> <flags> <exptime> <bytes> [<cas>] [noreply]\r\n<data>\r\n
    /// ```
    Store {
        /// Which storage command.
        command: StoreCommand,
        /// The key.
        key: Key<'a>,
        /// The 32-bit client flags stored with the value.
        flags: u32,
        /// Expiration: 0 never, up to 30 days relative seconds, else a Unix time.
        exptime: u32,
        /// The value.
        data: &'a [u8],
        /// Ask the server not to reply.
        noreply: bool,
    },
    /// ```text
    /// delete <key> [noreply]\r\n
    /// ```
    Delete {
        /// The key.
        key: Key<'a>,
        /// Ask the server not to reply.
        noreply: bool,
    },
    /// ```text
    /// incr|decr <key> <value> [noreply]\r\n
    /// ```
    Arith {
        /// Increment (`true`) or decrement (`false`).
        increment: bool,
        /// The key.
        key: Key<'a>,
        /// The amount.
        delta: u64,
        /// Ask the server not to reply.
        noreply: bool,
    },
    /// ```text
    /// touch <key> <exptime> [noreply]\r\n
    /// ```
    Touch {
        /// The key.
        key: Key<'a>,
        /// The new expiration time.
        exptime: u32,
        /// Ask the server not to reply.
        noreply: bool,
    },
    /// ```text
    /// flush_all [delay] [noreply]\r\n
    /// ```
    FlushAll {
        /// Invalidate after this many seconds instead of now.
        delay: Option<u32>,
        /// Ask the server not to reply.
        noreply: bool,
    },
    /// ```text
    /// cache_memlimit <megabytes> [noreply]\r\n
    /// ```
    /// Sets the server's memory limit. Under 8 it answers
    /// `MEMLIMIT_TOO_SMALL …`, over 1,000,000,000 (bytes mistaken for
    /// megabytes) `MEMLIMIT_ADJUST_FAILED …`: both decode as
    /// [`Response::ServerError`](crate::Response::ServerError) holding the
    /// whole line.
    CacheMemlimit {
        /// The new limit, in megabytes.
        megabytes: u32,
        /// Ask the server not to reply.
        noreply: bool,
    },
    /// ```text
    /// version\r\n
    /// ```
    Version,
    /// ```text
    /// config get <key>\r\n
    /// ```
    /// The configuration endpoint's cluster list (`config get cluster`,
    /// ElastiCache and Memorystore; stock memcached answers `ERROR`). The
    /// reply's data parses with [`ClusterConfig::parse`](crate::ClusterConfig::parse).
    ConfigGet {
        /// The configuration's name (`cluster`).
        key: Key<'a>,
    },
    /// ```text
    /// stats [<arg>]\r\n
    /// ```
    Stats {
        /// A statistics group (`items`, `slabs`, `settings`, `conns`, …),
        /// validated like a key so it cannot inject anything.
        arg: Option<Key<'a>>,
    },
    /// ```text
    /// verbosity <level> [noreply]\r\n
    /// ```
    Verbosity {
        /// The logging level.
        level: u32,
        /// Ask the server not to reply.
        noreply: bool,
    },
    /// ```text
    /// quit\r\n
    /// ```
    /// The server closes the connection; there is no reply.
    Quit,
    /// ```text
    /// mg <key> <flag>*\r\n
    /// ```
    MetaGet {
        /// The key.
        key: Key<'a>,
        /// Flags (`v`, `f`, `c`, `t`, `k`, `q`, `T…`, `N…`, …).
        flags: &'a [MetaFlag],
    },
    /// ```text
    /// ms <key> <datalen> <flag>*\r\n<data>\r\n
    /// ```
    MetaSet {
        /// The key.
        key: Key<'a>,
        /// The value.
        data: &'a [u8],
        /// Flags (`F…`, `T…`, `C…`, `I`, `q`, mode switch, …).
        flags: &'a [MetaFlag],
    },
    /// ```text
    /// md <key> <flag>*\r\n
    /// ```
    MetaDelete {
        /// The key.
        key: Key<'a>,
        /// Flags (`q`, `C…`, `I`, `T…`, …).
        flags: &'a [MetaFlag],
    },
    /// ```text
    /// ma <key> <flag>*\r\n
    /// ```
    MetaArith {
        /// The key.
        key: Key<'a>,
        /// Flags (`D…`, `J…`, `N…`, mode switch, `v`, `q`, …).
        flags: &'a [MetaFlag],
    },
    /// ```text
    /// mn\r\n
    /// ```
    MetaNoop,
    /// ```text
    /// me <key>\r\n
    /// ```
    MetaDebug {
        /// The key.
        key: Key<'a>,
    },
    /// A quiet batch: every command sent with `q` and `O<index>` added to
    /// its flags, then `mn`. The server answers only what is worth an
    /// answer — a hit (`VA`), a refusal (`NS`, `EX`, `NF`), an error — and
    /// then `MN`; the replies' opaques say which command each belongs to, and
    /// a command with no reply had the common outcome (`EN` for `mg`, `HD`
    /// otherwise). In memcached 1.6.18 a quiet `mg` hit without `v` still
    /// answers `HD`, and a quiet `ma` that succeeds answers nothing even
    /// with `v`: batch counters only when their values are not needed. One request and one reply ([`Response::MetaBatch`](crate::Response::MetaBatch)) to
    /// the connection, so the replies stay paired.
    ///
    /// ```text
    /// ms a 1 T60 q O0\r\nx\r\nms b 1 T60 q O1\r\ny\r\nmn\r\n
    /// ```
    MetaBatch {
        /// The commands, at most [`u32::MAX`].
        commands: &'a [MetaCommand<'a>],
    },
}

/// One command of a [`Request::MetaBatch`].
#[derive(Debug, Clone, Copy)]
pub enum MetaCommand<'a> {
    /// `mg <key> <flags>*`.
    Get {
        /// The key.
        key: Key<'a>,
        /// Its flags (without `q` or `O`: the batch adds them).
        flags: &'a [MetaFlag],
    },
    /// `ms <key> <datalen> <flags>*` and the data.
    Set {
        /// The key.
        key: Key<'a>,
        /// The value.
        data: &'a [u8],
        /// Its flags (without `q` or `O`).
        flags: &'a [MetaFlag],
    },
    /// `md <key> <flags>*`.
    Delete {
        /// The key.
        key: Key<'a>,
        /// Its flags (without `q` or `O`).
        flags: &'a [MetaFlag],
    },
    /// `ma <key> <flags>*`.
    Arith {
        /// The key.
        key: Key<'a>,
        /// Its flags (without `q` or `O`).
        flags: &'a [MetaFlag],
    },
}

impl Request<'_> {
    /// Whether this is a meta command (`mg`, `ms`, `md`, `ma`, `mn`, `me`,
    /// a quiet meta batch): memcached 1.6's protocol, which older servers
    /// and some proxies do not speak (see [`Classic`](crate::Classic)).
    pub fn is_meta(&self) -> bool {
        matches!(
            self,
            Request::MetaGet { .. }
                | Request::MetaSet { .. }
                | Request::MetaDelete { .. }
                | Request::MetaArith { .. }
                | Request::MetaNoop
                | Request::MetaDebug { .. }
                | Request::MetaBatch { .. }
        )
    }

    /// The command's name as on the wire (`"get"`, `"set"`, `"mg"`, …): for
    /// logs, spans and metrics.
    pub fn command(&self) -> &'static str {
        match self {
            Request::Get { .. } => "get",
            Request::Gets { .. } => "gets",
            Request::Gat { .. } => "gat",
            Request::Gats { .. } => "gats",
            Request::Store { command, .. } => match command {
                StoreCommand::Set => "set",
                StoreCommand::Add => "add",
                StoreCommand::Replace => "replace",
                StoreCommand::Append => "append",
                StoreCommand::Prepend => "prepend",
                StoreCommand::Cas(_) => "cas",
            },
            Request::Delete { .. } => "delete",
            Request::Arith {
                increment: true, ..
            } => "incr",
            Request::Arith { .. } => "decr",
            Request::Touch { .. } => "touch",
            Request::FlushAll { .. } => "flush_all",
            Request::CacheMemlimit { .. } => "cache_memlimit",
            Request::Version => "version",
            Request::ConfigGet { .. } => "config get",
            Request::Stats { .. } => "stats",
            Request::Verbosity { .. } => "verbosity",
            Request::Quit => "quit",
            Request::MetaGet { .. } => "mg",
            Request::MetaSet { .. } => "ms",
            Request::MetaDelete { .. } => "md",
            Request::MetaArith { .. } => "ma",
            Request::MetaNoop => "mn",
            Request::MetaDebug { .. } => "me",
            Request::MetaBatch { .. } => "mn",
        }
    }

    /// Appends the command's wire form to `buf`.
    pub fn encode(&self, buf: &mut BytesMut) {
        match *self {
            Request::Get { keys } => encode_retrieval(buf, b"get", None, keys),
            Request::Gets { keys } => encode_retrieval(buf, b"gets", None, keys),
            Request::Gat { exptime, keys } => encode_retrieval(buf, b"gat", Some(exptime), keys),
            Request::Gats { exptime, keys } => {
                encode_retrieval(buf, b"gats", Some(exptime), keys);
            }
            Request::Store {
                command,
                key,
                flags,
                exptime,
                data,
                noreply,
            } => {
                buf.reserve(command.name().len() + key.len() + 48 + data.len());
                buf.put_slice(command.name());
                buf.put_slice(key.as_bytes());
                buf.put_u8(b' ');
                put_u64(buf, u64::from(flags));
                buf.put_u8(b' ');
                put_u64(buf, u64::from(exptime));
                buf.put_u8(b' ');
                put_u64(buf, data.len() as u64);
                if let StoreCommand::Cas(cas) = command {
                    buf.put_u8(b' ');
                    put_u64(buf, cas);
                }
                end_line(buf, noreply);
                buf.put_slice(data);
                buf.put_slice(b"\r\n");
            }
            Request::Delete { key, noreply } => {
                buf.put_slice(b"delete ");
                buf.put_slice(key.as_bytes());
                end_line(buf, noreply);
            }
            Request::Arith {
                increment,
                key,
                delta,
                noreply,
            } => {
                buf.put_slice(if increment { b"incr " } else { b"decr " });
                buf.put_slice(key.as_bytes());
                buf.put_u8(b' ');
                put_u64(buf, delta);
                end_line(buf, noreply);
            }
            Request::Touch {
                key,
                exptime,
                noreply,
            } => {
                buf.put_slice(b"touch ");
                buf.put_slice(key.as_bytes());
                buf.put_u8(b' ');
                put_u64(buf, u64::from(exptime));
                end_line(buf, noreply);
            }
            Request::FlushAll { delay, noreply } => {
                buf.put_slice(b"flush_all");
                if let Some(delay) = delay {
                    buf.put_u8(b' ');
                    put_u64(buf, u64::from(delay));
                }
                end_line(buf, noreply);
            }
            Request::CacheMemlimit { megabytes, noreply } => {
                buf.put_slice(b"cache_memlimit ");
                put_u64(buf, u64::from(megabytes));
                end_line(buf, noreply);
            }
            Request::Version => buf.put_slice(b"version\r\n"),
            Request::ConfigGet { key } => {
                buf.reserve(12 + key.len());
                buf.put_slice(b"config get ");
                buf.put_slice(key.as_bytes());
                buf.put_slice(b"\r\n");
            }
            Request::Stats { arg } => {
                buf.put_slice(b"stats");
                if let Some(arg) = arg {
                    buf.put_u8(b' ');
                    buf.put_slice(arg.as_bytes());
                }
                buf.put_slice(b"\r\n");
            }
            Request::Verbosity { level, noreply } => {
                buf.put_slice(b"verbosity ");
                put_u64(buf, u64::from(level));
                end_line(buf, noreply);
            }
            Request::Quit => buf.put_slice(b"quit\r\n"),
            Request::MetaGet { key, flags } => encode_meta(buf, b"mg ", key, None, flags),
            Request::MetaSet { key, data, flags } => {
                buf.reserve(key.len() + 24 + flags.len() * 8 + data.len());
                encode_meta(buf, b"ms ", key, Some(data.len()), flags);
                buf.put_slice(data);
                buf.put_slice(b"\r\n");
            }
            Request::MetaDelete { key, flags } => encode_meta(buf, b"md ", key, None, flags),
            Request::MetaArith { key, flags } => encode_meta(buf, b"ma ", key, None, flags),
            Request::MetaNoop => buf.put_slice(b"mn\r\n"),
            Request::MetaDebug { key } => encode_meta(buf, b"me ", key, None, &[]),
            Request::MetaBatch { commands } => {
                for (i, command) in commands.iter().enumerate() {
                    let opaque = Some(u32::try_from(i).unwrap_or(u32::MAX));
                    match *command {
                        MetaCommand::Get { key, flags } => {
                            encode_meta_with(buf, b"mg ", key, None, flags, opaque);
                        }
                        MetaCommand::Set { key, data, flags } => {
                            buf.reserve(key.len() + 32 + flags.len() * 8 + data.len());
                            encode_meta_with(buf, b"ms ", key, Some(data.len()), flags, opaque);
                            buf.put_slice(data);
                            buf.put_slice(b"\r\n");
                        }
                        MetaCommand::Delete { key, flags } => {
                            encode_meta_with(buf, b"md ", key, None, flags, opaque);
                        }
                        MetaCommand::Arith { key, flags } => {
                            encode_meta_with(buf, b"ma ", key, None, flags, opaque);
                        }
                    }
                }
                buf.put_slice(b"mn\r\n");
            }
        }
    }

    /// What reply the server sends to this request, or `None` when it sends
    /// none at all (`noreply`, `quit`).
    ///
    /// A meta command with the `q` flag may or may not be answered (a miss is
    /// silent, a hit or an error is not); it reports [`Expect::Single`] and the
    /// caller pairs replies by following it with [`Request::MetaNoop`], whose
    /// `MN` marks the end of the quiet batch.
    pub fn expect(&self) -> Option<Expect> {
        match *self {
            Request::Get { keys }
            | Request::Gets { keys }
            | Request::Gat { keys, .. }
            | Request::Gats { keys, .. } => Some(Expect::values(keys.len())),
            Request::Stats { .. } => Some(Expect::Stats),
            Request::ConfigGet { .. } => Some(Expect::Config),
            Request::Quit => None,
            Request::Store { noreply, .. }
            | Request::Delete { noreply, .. }
            | Request::Arith { noreply, .. }
            | Request::Touch { noreply, .. }
            | Request::FlushAll { noreply, .. }
            | Request::CacheMemlimit { noreply, .. }
            | Request::Verbosity { noreply, .. } => (!noreply).then_some(Expect::Single),
            Request::Version
            | Request::MetaGet { .. }
            | Request::MetaSet { .. }
            | Request::MetaDelete { .. }
            | Request::MetaArith { .. }
            | Request::MetaNoop
            | Request::MetaDebug { .. } => Some(Expect::Single),
            Request::MetaBatch { commands } => Some(Expect::MetaBatch {
                max_replies: commands.len(),
            }),
        }
    }
}

fn encode_retrieval(buf: &mut BytesMut, name: &[u8], exptime: Option<u32>, keys: &[Key<'_>]) {
    let len: usize = keys.iter().map(|k| k.len() + 1).sum();
    buf.reserve(name.len() + 12 + len + 2);
    buf.put_slice(name);
    if let Some(exptime) = exptime {
        buf.put_u8(b' ');
        put_u64(buf, u64::from(exptime));
    }
    for key in keys {
        buf.put_u8(b' ');
        buf.put_slice(key.as_bytes());
    }
    buf.put_slice(b"\r\n");
}

fn encode_meta(
    buf: &mut BytesMut,
    name: &[u8],
    key: Key<'_>,
    datalen: Option<usize>,
    flags: &[MetaFlag],
) {
    encode_meta_with(buf, name, key, datalen, flags, None);
}

/// A meta command's line; with `quiet`, `q O<quiet>` after its flags.
fn encode_meta_with(
    buf: &mut BytesMut,
    name: &[u8],
    key: Key<'_>,
    datalen: Option<usize>,
    flags: &[MetaFlag],
    quiet: Option<u32>,
) {
    buf.put_slice(name);
    buf.put_slice(key.as_bytes());
    if let Some(len) = datalen {
        buf.put_u8(b' ');
        put_u64(buf, len as u64);
    }
    for flag in flags {
        flag.encode(buf);
    }
    if let Some(opaque) = quiet {
        buf.put_slice(b" q O");
        put_u64(buf, u64::from(opaque));
    }
    buf.put_slice(b"\r\n");
}

fn end_line(buf: &mut BytesMut, noreply: bool) {
    if noreply {
        buf.put_slice(b" noreply\r\n");
    } else {
        buf.put_slice(b"\r\n");
    }
}

/// Writes `n` in decimal without going through `fmt` (which is several times
/// slower and this sits on the hot path of every request).
pub(crate) fn put_u64(buf: &mut BytesMut, mut n: u64) {
    let mut tmp = [0u8; 20];
    let mut i = tmp.len();
    loop {
        i -= 1;
        tmp[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    buf.put_slice(&tmp[i..]);
}
