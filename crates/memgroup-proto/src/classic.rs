//! Meta commands said with the classic ones, for servers without the meta
//! protocol: memcached before 1.6, and proxies that close the connection
//! on a command they do not know (twemproxy does, on `mn`, `mg` and `gat`).
//!
//! [`Classic::of`] takes a meta request and gives the classic command that
//! does the same, or names what has no classic form: a lease (`N`, `R`),
//! a stale mark (`I`), a conditional delete (`md … C`), a quiet command,
//! a base64 key, the remaining TTL or hit flags of `mg` (`t`, `h`, `l`),
//! an explicit CAS (`E`), an auto-created counter (`ma … N`/`J`), `me` and
//! `mn`. [`Classic::answer`] turns the classic reply back into the meta
//! reply the request would have had: `VALUE` into `VA`/`HD` with the return
//! flags asked for (in their order), `END` into `EN`, `STORED` into `HD`,
//! `NOT_STORED` into `NS`, `EXISTS` into `EX`, `NOT_FOUND` into `NF`. Error
//! replies pass as they are.
//!
//! One return flag is dropped rather than refused: the CAS unique a store
//! stored (`ms … c`), which no classic store reports. Such a reply comes
//! back without `c`, as when the server gave none.

use bytes::{BufMut, Bytes, BytesMut};

use crate::Key;
use crate::request::{ArithMode, MetaCommand, MetaFlag, Request, SetMode, StoreCommand};
use crate::response::{MetaResponse, MetaStatus, Response};

/// A meta request as a classic command, and how to read its reply back.
#[derive(Debug, Clone)]
pub struct Classic<'a> {
    /// The key, held here so a retrieval can name it as a one-key slice.
    key: [Key<'a>; 1],
    command: Command<'a>,
    /// The return flags asked for, in their order (`f`, `c`, `s`, `k`, `O…`).
    returns: Vec<MetaFlag>,
}

#[derive(Debug, Clone, Copy)]
enum Command<'a> {
    Get {
        cas: bool,
        touch: Option<u32>,
        value: bool,
    },
    Touch {
        exptime: u32,
    },
    Store {
        command: StoreCommand,
        flags: u32,
        exptime: u32,
        data: &'a [u8],
    },
    Delete,
    Arith {
        increment: bool,
        delta: u64,
        value: bool,
    },
}

/// Why a meta request has no classic form: the meta feature it needs, as
/// an operator would look it up in `protocol.txt` (`"mg … t (remaining TTL)"`).
pub type Lacking = &'static str;

impl<'a> Classic<'a> {
    /// The classic form of `request`, or the meta feature it needs that no
    /// classic command has.
    pub fn of(request: &Request<'a>) -> Result<Classic<'a>, Lacking> {
        let (key, command, returns) = match *request {
            Request::MetaGet { key, flags } => {
                let (command, returns) = get(flags)?;
                (key, command, returns)
            }
            Request::MetaSet { key, data, flags } => {
                let (command, returns) = set(flags, data)?;
                (key, command, returns)
            }
            Request::MetaDelete { key, flags } => {
                let returns = echoes(flags, "md", |f| match f {
                    MetaFlag::CompareCas(_) => Err("md … C (delete only a given CAS)"),
                    MetaFlag::Invalidate => Err("md … I (mark stale)"),
                    MetaFlag::Ttl(_) => Err("md … T (mark stale with a TTL)"),
                    _ => Err("md with this flag"),
                })?;
                (key, Command::Delete, returns)
            }
            Request::MetaArith { key, flags } => {
                let (command, returns) = arith(flags)?;
                (key, command, returns)
            }
            Request::MetaNoop => return Err("mn (meta no-op)"),
            Request::MetaDebug { .. } => return Err("me (meta debug)"),
            Request::MetaBatch { .. } => return Err("quiet meta batches (ms/md … q, mn)"),
            _ => return Err("nothing: the request is classic already"),
        };
        Ok(Classic {
            key: [key],
            command,
            returns,
        })
    }

    /// The classic form of one command of a quiet batch
    /// ([`Request::MetaBatch`]), as if sent alone (no `q`, no `O`).
    pub fn of_command(command: &MetaCommand<'a>) -> Result<Classic<'a>, Lacking> {
        Classic::of(&match *command {
            MetaCommand::Get { key, flags } => Request::MetaGet { key, flags },
            MetaCommand::Set { key, data, flags } => Request::MetaSet { key, data, flags },
            MetaCommand::Delete { key, flags } => Request::MetaDelete { key, flags },
            MetaCommand::Arith { key, flags } => Request::MetaArith { key, flags },
        })
    }

    /// The classic request to send.
    pub fn request(&self) -> Request<'_> {
        let key = self.key[0];
        match self.command {
            Command::Get { cas, touch, .. } => match (cas, touch) {
                (false, None) => Request::Get { keys: &self.key },
                (true, None) => Request::Gets { keys: &self.key },
                (false, Some(exptime)) => Request::Gat {
                    exptime,
                    keys: &self.key,
                },
                (true, Some(exptime)) => Request::Gats {
                    exptime,
                    keys: &self.key,
                },
            },
            Command::Touch { exptime } => Request::Touch {
                key,
                exptime,
                noreply: false,
            },
            Command::Store {
                command,
                flags,
                exptime,
                data,
            } => Request::Store {
                command,
                key,
                flags,
                exptime,
                data,
                noreply: false,
            },
            Command::Delete => Request::Delete {
                key,
                noreply: false,
            },
            Command::Arith {
                increment, delta, ..
            } => Request::Arith {
                increment,
                key,
                delta,
                noreply: false,
            },
        }
    }

    /// The meta reply the request would have had, from the classic reply
    /// `reply`; an error reply, or one the command cannot give, is returned
    /// as it is (`Err`).
    pub fn answer(&self, reply: Response) -> Result<Response, Response> {
        let status = |status| Ok(self.meta(status, None, None, None));
        match (self.command, reply) {
            (Command::Get { value, .. }, Response::Values(values)) => {
                let Some(v) = values.into_iter().next() else {
                    return status(MetaStatus::En);
                };
                let size = v.data.len();
                let (status, data) = if value {
                    (MetaStatus::Va, Some(v.data))
                } else {
                    (MetaStatus::Hd, None)
                };
                Ok(self.meta(status, data, Some((v.flags, v.cas)), Some(size)))
            }
            (Command::Touch { .. }, Response::Touched) => status(MetaStatus::Hd),
            (Command::Store { .. }, Response::Stored) => status(MetaStatus::Hd),
            (Command::Store { .. }, Response::NotStored) => status(MetaStatus::Ns),
            (Command::Store { .. }, Response::Exists) => status(MetaStatus::Ex),
            (Command::Delete, Response::Deleted) => status(MetaStatus::Hd),
            (Command::Arith { value, .. }, Response::Number(n)) => {
                let (status, data) = if value {
                    let text = Bytes::from(n.to_string());
                    (MetaStatus::Va, Some(text))
                } else {
                    (MetaStatus::Hd, None)
                };
                Ok(self.meta(status, data, None, None))
            }
            (
                Command::Touch { .. }
                | Command::Store { .. }
                | Command::Delete
                | Command::Arith { .. },
                Response::NotFound,
            ) => status(MetaStatus::Nf),
            (_, other) => Err(other),
        }
    }

    /// A meta reply with the return flags asked for that this reply has.
    fn meta(
        &self,
        status: MetaStatus,
        value: Option<Bytes>,
        item: Option<(u32, Option<u64>)>,
        size: Option<usize>,
    ) -> Response {
        let mut out = BytesMut::new();
        for flag in &self.returns {
            let start = out.len();
            out.put_u8(flag.letter());
            let given = match (*flag, item) {
                (MetaFlag::ReturnFlags, Some((flags, _))) => {
                    out.put_slice(flags.to_string().as_bytes());
                    true
                }
                (MetaFlag::ReturnCas, Some((_, Some(cas)))) => {
                    out.put_slice(cas.to_string().as_bytes());
                    true
                }
                (MetaFlag::ReturnSize, _) => match size {
                    Some(size) => {
                        out.put_slice(size.to_string().as_bytes());
                        true
                    }
                    None => false,
                },
                (MetaFlag::ReturnKey, _) => {
                    out.put_slice(self.key[0].as_bytes());
                    true
                }
                (MetaFlag::Opaque(n), _) => {
                    out.put_slice(n.to_string().as_bytes());
                    true
                }
                _ => false,
            };
            if given {
                out.put_u8(b' ');
            } else {
                out.truncate(start);
            }
        }
        if out.last() == Some(&b' ') {
            out.truncate(out.len() - 1);
        }
        Response::Meta(MetaResponse {
            status,
            flags: out.freeze(),
            value,
        })
    }
}

/// The return flags every meta command echoes (`k`, `O`), kept; any other
/// flag is `other`'s to judge (`Ok(None)`: ignored, `Err`: no classic form).
fn echoes(
    flags: &[MetaFlag],
    command: &'static str,
    mut other: impl FnMut(MetaFlag) -> Result<Option<MetaFlag>, Lacking>,
) -> Result<Vec<MetaFlag>, Lacking> {
    let mut returns = Vec::new();
    for &flag in flags {
        match flag {
            MetaFlag::ReturnKey | MetaFlag::Opaque(_) => returns.push(flag),
            MetaFlag::Quiet => return Err(quiet(command)),
            MetaFlag::Base64Key => return Err("base64 keys (b)"),
            _ => returns.extend(other(flag)?),
        }
    }
    Ok(returns)
}

fn quiet(command: &str) -> Lacking {
    match command {
        "mg" => "mg … q (quiet)",
        "ms" => "ms … q (quiet)",
        "md" => "md … q (quiet)",
        _ => "ma … q (quiet)",
    }
}

/// `mg`: `get`, `gets` (`c`), `gat`/`gats` (`T` with `v`), `touch` (`T`
/// without `v`, `f` or `c`).
fn get(flags: &[MetaFlag]) -> Result<(Command<'static>, Vec<MetaFlag>), Lacking> {
    // A lease is what such a request is for: named before any other flag.
    if let Some(lease) = flags.iter().find_map(|f| match f {
        MetaFlag::Vivify(_) => Some("mg … N (leases: vivify on miss)"),
        MetaFlag::Recache(_) => Some("mg … R (leases: recache)"),
        _ => None,
    }) {
        return Err(lease);
    }
    let (mut cas, mut touch, mut value, mut item) = (false, None, false, false);
    let returns = echoes(flags, "mg", |flag| match flag {
        MetaFlag::ReturnValue => {
            value = true;
            Ok(None)
        }
        MetaFlag::ReturnCas => {
            cas = true;
            item = true;
            Ok(Some(flag))
        }
        MetaFlag::ReturnFlags | MetaFlag::ReturnSize => {
            item = true;
            Ok(Some(flag))
        }
        MetaFlag::Ttl(t) => {
            touch = Some(t);
            Ok(None)
        }
        MetaFlag::ReturnTtl => Err("mg … t (remaining TTL)"),
        MetaFlag::ReturnHit => Err("mg … h (hit before)"),
        MetaFlag::ReturnLastAccess => Err("mg … l (last access)"),
        MetaFlag::NoLruBump => Err("mg … u (no LRU bump)"),
        _ => Err("mg with this flag"),
    })?;
    let command = match touch {
        Some(exptime) if !value && !item => Command::Touch { exptime },
        touch => Command::Get { cas, touch, value },
    };
    Ok((command, returns))
}

/// `ms`: `set`, `add`, `replace`, `append`, `prepend`, or `cas` (`C`).
fn set<'a>(flags: &[MetaFlag], data: &'a [u8]) -> Result<(Command<'a>, Vec<MetaFlag>), Lacking> {
    let (mut mode, mut compare, mut client_flags, mut exptime) = (SetMode::Set, None, 0, 0);
    let returns = echoes(flags, "ms", |flag| {
        match flag {
            MetaFlag::SetMode(m) => mode = m,
            MetaFlag::CompareCas(c) => compare = Some(c),
            MetaFlag::SetFlags(f) => client_flags = f,
            MetaFlag::Ttl(t) => exptime = t,
            // The CAS the store stored: no classic store says it.
            MetaFlag::ReturnCas => {}
            MetaFlag::Invalidate => return Err("ms … I (store only over a stale value)"),
            MetaFlag::ExplicitCas(_) => return Err("ms … E (explicit CAS)"),
            _ => return Err("ms with this flag"),
        }
        Ok(None)
    })?;
    let command = match (compare, mode) {
        (Some(cas), SetMode::Set) => StoreCommand::Cas(cas),
        (Some(_), _) => return Err("ms … C with a mode other than set"),
        (None, SetMode::Set) => StoreCommand::Set,
        (None, SetMode::Add) => StoreCommand::Add,
        (None, SetMode::Replace) => StoreCommand::Replace,
        (None, SetMode::Append) => StoreCommand::Append,
        (None, SetMode::Prepend) => StoreCommand::Prepend,
    };
    let store = Command::Store {
        command,
        flags: client_flags,
        exptime,
        data,
    };
    Ok((store, returns))
}

/// `ma`: `incr` or `decr` of an existing counter.
fn arith(flags: &[MetaFlag]) -> Result<(Command<'static>, Vec<MetaFlag>), Lacking> {
    let (mut increment, mut delta, mut value) = (true, 1, false);
    let returns = echoes(flags, "ma", |flag| {
        match flag {
            MetaFlag::ArithMode(ArithMode::Increment) => increment = true,
            MetaFlag::ArithMode(ArithMode::Decrement) => increment = false,
            MetaFlag::Delta(d) => delta = d,
            MetaFlag::ReturnValue => value = true,
            MetaFlag::Vivify(_) | MetaFlag::Initial(_) => {
                return Err("ma … N/J (create a missing counter)");
            }
            MetaFlag::ReturnCas | MetaFlag::ReturnTtl => {
                return Err("ma … c/t (the counter's CAS or TTL)");
            }
            MetaFlag::Ttl(_) => return Err("ma … T (set the TTL)"),
            _ => return Err("ma with this flag"),
        }
        Ok(None)
    })?;
    Ok((
        Command::Arith {
            increment,
            delta,
            value,
        },
        returns,
    ))
}

#[cfg(test)]
mod tests;
