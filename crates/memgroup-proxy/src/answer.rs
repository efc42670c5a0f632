//! Each request's reply: the ones the proxy makes itself at once, the
//! others through the client.

use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;

use bytes::{BufMut, Bytes, BytesMut};
use memgroup_client::{Error, ErrorKind, Expiry, WriteOptions, WriteOutcome};
use memgroup_proto::server::{ClientRequest, MetaKind, MetaRequest, encode_meta_reply};
use memgroup_proto::{MetaFlag, MetaResponse, MetaStatus, Response, StoreCommand, base64_encode};

use crate::Shared;

/// What `version` answers: the protocol the proxy speaks, and what it is.
pub(crate) const VERSION: &str = concat!("1.6.18-memgroup-", env!("CARGO_PKG_VERSION"));

pub(crate) fn count(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Relaxed);
}

/// The reply of a request the proxy answers itself, without the servers
/// (`None`: it goes through the client, or is `quit`).
pub(crate) fn immediate(shared: &Shared, request: &ClientRequest) -> Option<Bytes> {
    Some(match request {
        ClientRequest::Error(reply) => Bytes::from_static(reply),
        ClientRequest::Version => Bytes::from(format!("VERSION {VERSION}\r\n")),
        ClientRequest::Verbosity { noreply: true } => Bytes::new(),
        ClientRequest::Verbosity { noreply: false } => Bytes::from_static(b"OK\r\n"),
        ClientRequest::MetaNoop => Bytes::from_static(b"MN\r\n"),
        ClientRequest::NotServed(name) if &name[..] == b"shutdown" => {
            Bytes::from_static(b"ERROR: shutdown not enabled\r\n")
        }
        ClientRequest::NotServed(_) => Bytes::from_static(b"ERROR\r\n"),
        ClientRequest::Stats { args } if args.is_empty() => {
            let mut out = BytesMut::new();
            shared.stats.encode(&shared.client.health(), &mut out);
            out.freeze()
        }
        ClientRequest::Stats { args } if &args[0][..] == b"reset" => {
            shared.stats.reset();
            shared.latency.reset();
            Bytes::from_static(b"RESET\r\n")
        }
        ClientRequest::Stats { args } => crate::stats::section(shared, args),
        ClientRequest::FlushAll { .. } if !shared.config.allow_flush_all => {
            Bytes::from_static(b"SERVER_ERROR flush_all is disabled on this proxy\r\n")
        }
        ClientRequest::CacheMemlimit { megabytes, noreply } => {
            // memcached's own refusals, without asking the servers.
            let refusal: &'static [u8] = if !shared.config.allow_cache_memlimit {
                b"SERVER_ERROR cache_memlimit is disabled on this proxy\r\n"
            } else if *megabytes < 8 {
                b"MEMLIMIT_TOO_SMALL cannot set maxbytes to less than 8m\r\n"
            } else if *megabytes > 1_000_000_000 {
                b"MEMLIMIT_ADJUST_FAILED input value is megabytes not bytes\r\n"
            } else {
                return None;
            };
            Bytes::from_static(if *noreply { b"" } else { refusal })
        }
        _ => return None,
    })
}

/// An error as a reply line: what the server said when it refused the
/// request, else `SERVER_ERROR` and the reason on one line.
pub(crate) fn error_reply(error: &Error) -> Bytes {
    if let Some(line) = error.server_reply() {
        return Bytes::from(format!("{}\r\n", line.replace(['\r', '\n'], " ")));
    }
    let text = error.to_string().replace(['\r', '\n'], " ");
    match error.kind() {
        ErrorKind::ValueTooLarge => {
            Bytes::from_static(b"SERVER_ERROR object too large for cache\r\n")
        }
        ErrorKind::InvalidKey | ErrorKind::Client => {
            Bytes::from(format!("CLIENT_ERROR {text}\r\n"))
        }
        _ => Bytes::from(format!("SERVER_ERROR {text}\r\n")),
    }
}

/// The reply to a request that goes through the client.
pub(crate) async fn answer(shared: &Shared, request: ClientRequest) -> Bytes {
    let quiet = request.is_quiet();
    let meta = matches!(request, ClientRequest::Meta(_));
    let reply = match request {
        ClientRequest::Retrieve { command, keys } => {
            crate::retrieve::retrieve(shared, command, &keys).await
        }
        ClientRequest::Store { ref key, .. }
        | ClientRequest::Delete { ref key, .. }
        | ClientRequest::Touch { ref key, .. }
        | ClientRequest::Arith { ref key, .. }
            if crate::binary::is_binary(&shared.client, key) =>
        {
            Box::pin(crate::binary::write(shared, request)).await
        }
        ClientRequest::Store {
            command,
            key,
            flags,
            exptime,
            data,
            ..
        } => {
            count(&shared.stats.cmd_set, 1);
            let options = WriteOptions::new()
                .expiry(Expiry::Exptime(exptime))
                .flags(flags);
            let client = &shared.client;
            let outcome = match command {
                StoreCommand::Set => client.set(&key, &data, options).await,
                StoreCommand::Add => Box::pin(client.add(&key, &data, options)).await,
                StoreCommand::Replace => Box::pin(client.replace(&key, &data, options)).await,
                StoreCommand::Append => Box::pin(client.append(&key, &data)).await,
                StoreCommand::Prepend => Box::pin(client.prepend(&key, &data)).await,
                StoreCommand::Cas(unique) => {
                    Box::pin(client.cas(&key, &data, unique, options)).await
                }
            };
            written(shared, outcome, b"STORED\r\n")
        }
        ClientRequest::Delete { key, .. } => {
            count(&shared.stats.cmd_delete, 1);
            written(
                shared,
                Box::pin(shared.client.delete(&key)).await,
                b"DELETED\r\n",
            )
        }
        ClientRequest::Touch { key, exptime, .. } => {
            count(&shared.stats.cmd_touch, 1);
            let outcome = Box::pin(shared.client.touch(&key, Expiry::Exptime(exptime))).await;
            written(shared, outcome, b"TOUCHED\r\n")
        }
        ClientRequest::Arith {
            increment,
            key,
            delta,
            ..
        } => {
            count(&shared.stats.cmd_arith, 1);
            let result = if increment {
                shared.client.incr(&key, delta).await
            } else {
                shared.client.decr(&key, delta).await
            };
            match result {
                Ok(Some(n)) => Bytes::from(format!("{n}\r\n")),
                Ok(None) => Bytes::from_static(b"NOT_FOUND\r\n"),
                Err(e) => failed(shared, &e),
            }
        }
        ClientRequest::FlushAll { delay, .. } => {
            count(&shared.stats.cmd_flush, 1);
            if delay != 0 {
                Bytes::from_static(b"SERVER_ERROR flush_all with a delay is not forwarded\r\n")
            } else {
                match shared.client.flush_all(None).await {
                    Ok(()) => Bytes::from_static(b"OK\r\n"),
                    Err(e) => failed(shared, &e),
                }
            }
        }
        ClientRequest::CacheMemlimit { megabytes, .. } => {
            match shared.client.cache_memlimit(megabytes).await {
                Ok(()) => Bytes::from_static(b"OK\r\n"),
                Err(e) => failed(shared, &e),
            }
        }
        // Boxed, as the rarer paths: every request's future is the size of its
        // largest arm.
        ClientRequest::Meta(meta) => Box::pin(meta_command(shared, meta)).await,
        // Answered by `immediate`.
        _ => Bytes::new(),
    };
    let error = reply.starts_with(b"SERVER_ERROR") || reply.starts_with(b"CLIENT_ERROR");
    if quiet && error {
        count(&shared.stats.noreply_failures, 1);
    }
    // A classic `noreply` says nothing, errors included (as memcached); a
    // quiet meta command's reply is already what quiet mode leaves.
    if quiet && !meta {
        return Bytes::new();
    }
    reply
}

pub(crate) fn failed(shared: &Shared, error: &Error) -> Bytes {
    count(&shared.stats.write_errors, 1);
    error_reply(error)
}

/// A write's reply: `applied` when every group that answered took it, else
/// the deciding group's refusal (`NOT_STORED`, `EXISTS`, `NOT_FOUND`).
pub(crate) fn written(
    shared: &Shared,
    outcome: Result<WriteOutcome, Error>,
    applied: &'static [u8],
) -> Bytes {
    let outcome = match outcome {
        Ok(outcome) => outcome,
        Err(e) => return failed(shared, &e),
    };
    if outcome.applied() {
        return Bytes::from_static(applied);
    }
    // The refusing group's reply, classic or meta (a meta write of a key
    // only memcached takes answers in the classic words too).
    let refusal = outcome
        .groups
        .iter()
        .find_map(|g| match (&g.result, &g.reply) {
            (Ok(false), Some(reply)) => Some(reply),
            _ => None,
        });
    Bytes::from_static(match refusal {
        Some(Response::NotStored) => b"NOT_STORED\r\n",
        Some(Response::Meta(m)) if m.status == MetaStatus::Ns => b"NOT_STORED\r\n",
        Some(Response::Exists) => b"EXISTS\r\n",
        Some(Response::Meta(m)) if m.status == MetaStatus::Ex => b"EXISTS\r\n",
        _ => b"NOT_FOUND\r\n",
    })
}

/// A meta command through the client, its reply written back with the
/// client's own key and opaque, and only the flags it asked for.
async fn meta_command(shared: &Shared, meta: MetaRequest) -> Bytes {
    let client = &shared.client;
    // A key memcached takes raw and the client refuses goes in base64.
    let forwarded: Vec<MetaFlag>;
    let flags = if !meta.base64() && crate::binary::is_binary(client, &meta.key) {
        forwarded = meta
            .flags
            .iter()
            .copied()
            .chain([MetaFlag::Base64Key])
            .collect();
        &forwarded[..]
    } else {
        &meta.flags[..]
    };
    let result: Result<Option<MetaResponse>, Bytes> = match meta.kind {
        MetaKind::Get => {
            count(&shared.stats.cmd_get, 1);
            let found = client
                .meta_get(&meta.key, flags)
                .await
                .map_err(|e| error_reply(&e));
            match &found {
                Ok(Some(_)) => count(&shared.stats.get_hits, 1),
                _ => count(&shared.stats.get_misses, 1),
            }
            found
        }
        MetaKind::Set => {
            count(&shared.stats.cmd_set, 1);
            let data = meta.data.clone().unwrap_or_default();
            deciding(client, client.meta_set(&meta.key, &data, flags).await)
        }
        MetaKind::Delete => {
            count(&shared.stats.cmd_delete, 1);
            deciding(client, client.meta_delete(&meta.key, flags).await)
        }
        MetaKind::Arith => {
            count(&shared.stats.cmd_arith, 1);
            client
                .meta_arith(&meta.key, flags)
                .await
                .map_err(|e| error_reply(&e))
        }
        MetaKind::Debug if meta.base64() => {
            return Bytes::from_static(b"CLIENT_ERROR me with a base64 key is not served\r\n");
        }
        MetaKind::Debug => client
            .meta_debug(&meta.key)
            .await
            .map_err(|e| error_reply(&e)),
    };
    let reply = match result {
        Ok(reply) => reply,
        Err(reply) => {
            count(&shared.stats.write_errors, 1);
            return reply;
        }
    };
    let mut out = BytesMut::new();
    let key_token = || {
        let mut token = vec![b'k'];
        if meta.base64() {
            base64_encode(&meta.key, &mut token);
        } else {
            token.extend_from_slice(&meta.key);
        }
        token
    };
    let opaque_token = || {
        let mut token = vec![b'O'];
        token.extend_from_slice(meta.opaque.as_deref().unwrap_or_default());
        token
    };
    let Some(reply) = reply else {
        // A miss (`EN`, `NF`): memcached returns the opaque and the key when
        // asked, in the order asked.
        if meta.quiet && meta.kind == MetaKind::Get {
            return Bytes::new();
        }
        out.put_slice(match meta.kind {
            MetaKind::Get | MetaKind::Debug => b"EN",
            _ => b"NF",
        });
        for flag in &meta.flags {
            match flag {
                MetaFlag::Opaque(_) => {
                    out.put_u8(b' ');
                    out.put_slice(&opaque_token());
                }
                MetaFlag::ReturnKey => {
                    out.put_u8(b' ');
                    out.put_slice(&key_token());
                    if meta.base64() {
                        out.put_slice(b" b");
                    }
                }
                _ => {}
            }
        }
        out.put_slice(b"\r\n");
        return out.freeze();
    };
    let hidden = match meta.kind {
        MetaKind::Get => reply.status == MetaStatus::En,
        _ => reply.status == MetaStatus::Hd,
    };
    if meta.quiet && hidden {
        return Bytes::new();
    }
    // The letters asked for (a request flag's letter is its reply token's).
    let asked: Vec<u8> = meta.flags.iter().map(|f| f.letter()).collect();
    encode_meta_reply(&mut out, &reply, |token| match token[0] {
        b'O' => Some(opaque_token()),
        b'k' => Some(key_token()),
        b'W' | b'Z' | b'X' => Some(token.to_vec()),
        b'b' if meta.base64() => Some(token.to_vec()),
        letter if asked.contains(&letter) => Some(token.to_vec()),
        _ => None,
    });
    out.freeze()
}

/// A meta write's reply: the arbiter group's (it decides conditional
/// writes, and its CAS is the one a later `C` is checked against), else the
/// first group that answered.
fn deciding(
    client: &memgroup_client::Client,
    outcome: Result<WriteOutcome, Error>,
) -> Result<Option<MetaResponse>, Bytes> {
    let outcome = outcome.map_err(|e| error_reply(&e))?;
    let topology = client.topology();
    let arbiter = topology.arbiters().first().copied();
    let replies = || outcome.groups.iter().filter(|g| !g.cleared);
    let chosen = replies()
        .find(|g| Some(g.id) == arbiter && g.reply.is_some())
        .or_else(|| replies().find(|g| g.reply.is_some()));
    match chosen.and_then(|g| g.reply.clone()) {
        Some(Response::Meta(m)) => Ok(Some(m)),
        Some(other) => Err(Bytes::from(format!(
            "SERVER_ERROR unexpected reply {other:?}\r\n"
        ))),
        None => Err(match outcome.failed().next() {
            Some((_, e)) => error_reply(e),
            None => Bytes::from_static(b"SERVER_ERROR no group answered\r\n"),
        }),
    }
}
