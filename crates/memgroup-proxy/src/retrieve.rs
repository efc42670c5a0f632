//! `get`, `gets`, `gat`, `gats`: the hits in the order of the keys, each
//! duplicate again; a key whose servers failed is a miss, counted.

use bytes::{BufMut, Bytes, BytesMut};
use memgroup_client::{Client, Error, ErrorKind, Expiry, Item};
use memgroup_proto::MetaFlag;
use memgroup_proto::server::{Retrieval, encode_value};

use crate::Shared;
use crate::answer::{count, error_reply};
use crate::binary::is_binary;

pub(crate) async fn retrieve(shared: &Shared, command: Retrieval, keys: &[Bytes]) -> Bytes {
    let stats = &shared.stats;
    count(&stats.cmd_get, keys.len() as u64);
    let client = &shared.client;
    let mut out = BytesMut::new();
    let hit = |out: &mut BytesMut, key: &[u8], found: Result<Option<Item>, Error>| match found {
        Ok(Some(item)) => {
            count(&stats.get_hits, 1);
            let cas = command.returns_cas().then(|| item.cas.unwrap_or(0));
            encode_value(out, key, item.flags, &item.value, cas);
            Ok(())
        }
        Ok(None) => {
            count(&stats.get_misses, 1);
            Ok(())
        }
        // A key memcached would refuse too: the whole reply is the error.
        Err(e) if e.kind() == ErrorKind::InvalidKey => Err(error_reply(&e)),
        Err(_) => {
            count(&stats.get_misses, 1);
            count(&stats.get_errors, 1);
            Ok(())
        }
    };
    if let ([key], Retrieval::Get) = (keys, command)
        && !is_binary(client, key)
    {
        // One key: the client's single get (merged with other callers' on
        // the connection, no per-call table).
        if let Err(reply) = hit(&mut out, key, client.get(key).await) {
            return reply;
        }
        out.put_slice(b"END\r\n");
        return out.freeze();
    }
    let binary: Vec<bool> = keys.iter().map(|k| is_binary(client, k)).collect();
    if command == Retrieval::Get && !binary.contains(&true) {
        // One multi-get: merged per server, split and reassembled in order.
        match client.get_multi(keys).await {
            Ok(found) => {
                for (key, outcome) in found.iter() {
                    if let Err(reply) = hit(&mut out, key, outcome.clone()) {
                        return reply;
                    }
                }
            }
            Err(e) => return error_reply(&e),
        }
    } else {
        // A read per key, all at once on this connection's task (a read
        // dropped with its connection ends there: nothing of it, a read
        // repair included, runs on after the proxy drains and closes the
        // client), answered in order.
        let reads = keys
            .iter()
            .zip(&binary)
            .map(|(key, &binary)| fetch(client, key, command, binary));
        for (key, found) in keys.iter().zip(futures_util::future::join_all(reads).await) {
            if let Err(reply) = hit(&mut out, key, found) {
                return reply;
            }
        }
    }
    out.put_slice(b"END\r\n");
    out.freeze()
}

/// One key's read: the client's own for the command, or a meta get (`b`
/// for a key only memcached takes, `gats` for the CAS of a touching read).
async fn fetch(
    client: &Client,
    key: &[u8],
    command: Retrieval,
    binary: bool,
) -> Result<Option<Item>, Error> {
    let touch = match command {
        Retrieval::Gat(exptime) | Retrieval::Gats(exptime) => {
            Some(Expiry::Exptime(exptime).exptime()?)
        }
        _ => None,
    };
    if !binary {
        match command {
            Retrieval::Get => return client.get(key).await,
            Retrieval::Gets => return client.gets(key).await,
            Retrieval::Gat(exptime) => {
                return client.get_and_touch(key, Expiry::Exptime(exptime)).await;
            }
            Retrieval::Gats(_) => {}
        }
    }
    let mut flags = vec![MetaFlag::ReturnValue, MetaFlag::ReturnFlags];
    if binary {
        flags.push(MetaFlag::Base64Key);
    }
    if command.returns_cas() {
        flags.push(MetaFlag::ReturnCas);
    }
    if let Some(ttl) = touch {
        flags.push(MetaFlag::Ttl(ttl));
    }
    let read = client.meta_get(key, &flags);
    let found = match command {
        // The read (at the arbiter: it returns the CAS) touches its copy;
        // every group's copy gets the new expiry too, as `gat` does.
        Retrieval::Gats(exptime) if client.topology().groups().len() > 1 => {
            let (found, _touched) = tokio::join!(read, client.touch(key, Expiry::Exptime(exptime)));
            found
        }
        _ => read.await,
    };
    Ok(found?.map(|m| {
        let mut item = Item::new(m.value.clone().unwrap_or_default(), 0);
        item.flags = m
            .flag_u64(b'f')
            .and_then(|f| u32::try_from(f).ok())
            .unwrap_or(0);
        item.cas = m.flag_u64(b'c');
        item
    }))
}
