//! Keys memcached takes that no text command can carry again: a `\r` inside
//! a key (memcached keeps it; written back before the line's end it would
//! be read as the end). Control bytes and DEL go raw (the proxy's client
//! takes raw keys); these go in base64 through the meta commands (`b`),
//! routed by that form, stored under the raw bytes as memcached stores them.

use bytes::Bytes;
use memgroup_client::{Client, ErrorKind};
use memgroup_proto::server::ClientRequest;
use memgroup_proto::{ArithMode, MAX_KEY_LEN, MetaFlag, SetMode, StoreCommand};

use crate::Shared;
use crate::answer::{count, failed, written};

/// Whether `key` is one memcached takes that the client refuses for its
/// bytes (not its length): it goes through the meta commands in base64.
pub(crate) fn is_binary(client: &Client, key: &[u8]) -> bool {
    key.len() <= MAX_KEY_LEN
        && key.iter().any(|&b| b <= 0x20 || b == 0x7f)
        && client
            .check_key(key)
            .is_err_and(|e| e.kind() == ErrorKind::InvalidKey)
}

/// A classic write of a binary key, as its meta command.
pub(crate) async fn write(shared: &Shared, request: ClientRequest) -> Bytes {
    let client = &shared.client;
    let stats = &shared.stats;
    let b = MetaFlag::Base64Key;
    let reply = match request {
        ClientRequest::Store {
            command,
            key,
            flags,
            exptime,
            data,
            ..
        } => {
            count(&stats.cmd_set, 1);
            let ttl = memgroup_client::Expiry::Exptime(exptime)
                .exptime()
                .unwrap_or(0);
            let mut meta = vec![b, MetaFlag::SetFlags(flags), MetaFlag::Ttl(ttl)];
            meta.push(match command {
                StoreCommand::Set => MetaFlag::SetMode(SetMode::Set),
                StoreCommand::Add => MetaFlag::SetMode(SetMode::Add),
                StoreCommand::Replace => MetaFlag::SetMode(SetMode::Replace),
                StoreCommand::Append => MetaFlag::SetMode(SetMode::Append),
                StoreCommand::Prepend => MetaFlag::SetMode(SetMode::Prepend),
                StoreCommand::Cas(unique) => MetaFlag::CompareCas(unique),
            });
            Ok(written(
                shared,
                client.meta_set(&key, &data, &meta).await,
                b"STORED\r\n",
            ))
        }
        ClientRequest::Delete { key, .. } => {
            count(&stats.cmd_delete, 1);
            Ok(written(
                shared,
                client.meta_delete(&key, &[b]).await,
                b"DELETED\r\n",
            ))
        }
        ClientRequest::Touch { key, exptime, .. } => {
            count(&stats.cmd_touch, 1);
            let ttl = memgroup_client::Expiry::Exptime(exptime)
                .exptime()
                .unwrap_or(0);
            match client.meta_get(&key, &[b, MetaFlag::Ttl(ttl)]).await {
                Ok(Some(_)) => Ok(Bytes::from_static(b"TOUCHED\r\n")),
                Ok(None) => Ok(Bytes::from_static(b"NOT_FOUND\r\n")),
                Err(e) => Err(e),
            }
        }
        ClientRequest::Arith {
            increment,
            key,
            delta,
            ..
        } => {
            count(&stats.cmd_arith, 1);
            let mode = if increment {
                ArithMode::Increment
            } else {
                ArithMode::Decrement
            };
            let flags = [
                b,
                MetaFlag::ArithMode(mode),
                MetaFlag::Delta(delta),
                MetaFlag::ReturnValue,
            ];
            match client.meta_arith(&key, &flags).await {
                Ok(Some(m)) => {
                    let mut line = m.value.map(|v| v.to_vec()).unwrap_or_default();
                    line.extend_from_slice(b"\r\n");
                    Ok(Bytes::from(line))
                }
                Ok(None) => Ok(Bytes::from_static(b"NOT_FOUND\r\n")),
                Err(e) => Err(e),
            }
        }
        _ => Ok(Bytes::from_static(b"ERROR\r\n")),
    };
    reply.unwrap_or_else(|e| failed(shared, &e))
}
