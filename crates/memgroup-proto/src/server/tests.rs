//! The server side against the client side: what memgroup's encoder writes
//! decodes to the same request here, whatever the chunking; what
//! `encode_value` and `encode_meta_reply` write, the client's decoder reads
//! back. And the decoder holds its bounds on any input.

use bytes::{Bytes, BytesMut};
use proptest::prelude::*;

use super::{
    ClientRequest, MetaKind, RequestDecoder, Retrieval, ServerLimits, encode_meta_reply,
    encode_value,
};
use crate::{
    Decoder, Expect, Key, MetaFlag, MetaResponse, MetaStatus, Request, Response, StoreCommand,
};

fn key() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(0x21u8..0x7f, 1..=250)
}

/// Every request in `bytes`, fed in pieces of `chunk` bytes.
fn decode_all(bytes: &[u8], chunk: usize) -> Vec<ClientRequest> {
    let mut decoder = RequestDecoder::default();
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    for piece in bytes.chunks(chunk.max(1)) {
        buf.extend_from_slice(piece);
        while let Some(request) = decoder.decode(&mut buf).expect("a valid stream") {
            out.push(request);
        }
    }
    assert!(buf.is_empty(), "left over: {buf:?}");
    out
}

fn store_command() -> impl Strategy<Value = StoreCommand> {
    prop_oneof![
        Just(StoreCommand::Set),
        Just(StoreCommand::Add),
        Just(StoreCommand::Replace),
        Just(StoreCommand::Append),
        Just(StoreCommand::Prepend),
        any::<u64>().prop_map(StoreCommand::Cas),
    ]
}

proptest! {
    #[test]
    fn what_the_client_encodes_the_server_decodes(
        keys in proptest::collection::vec(key(), 1..6),
        command in store_command(),
        flags in any::<u32>(),
        exptime in 0u32..=i32::MAX as u32,
        data in proptest::collection::vec(any::<u8>(), 0..300),
        noreply in any::<bool>(),
        delta in any::<u64>(),
        chunk in 1usize..64,
    ) {
        let keys: Vec<Key<'_>> = keys.iter().map(|k| Key::new(k).unwrap()).collect();
        let mut out = BytesMut::new();
        Request::Get { keys: &keys }.encode(&mut out);
        Request::Gats { exptime, keys: &keys }.encode(&mut out);
        Request::Store { command, key: keys[0], flags, exptime, data: &data, noreply }.encode(&mut out);
        Request::Arith { increment: false, key: keys[0], delta, noreply }.encode(&mut out);
        Request::Delete { key: keys[0], noreply }.encode(&mut out);
        let meta_flags = [MetaFlag::ReturnCas, MetaFlag::Ttl(exptime), MetaFlag::SetFlags(flags), MetaFlag::Opaque(7)];
        Request::MetaSet { key: keys[0], data: &data, flags: &meta_flags }.encode(&mut out);
        let decoded = decode_all(&out, chunk);
        let raw: Vec<Bytes> = keys.iter().map(|k| Bytes::copy_from_slice(k.as_bytes())).collect();
        let first = raw[0].clone();
        prop_assert_eq!(decoded.len(), 6);
        prop_assert_eq!(&decoded[0], &ClientRequest::Retrieve { command: Retrieval::Get, keys: raw.clone() });
        prop_assert_eq!(&decoded[1], &ClientRequest::Retrieve { command: Retrieval::Gats(exptime as i32), keys: raw });
        prop_assert_eq!(&decoded[2], &ClientRequest::Store {
            command, key: first.clone(), flags, exptime: exptime as i32, data: Bytes::from(data.clone()), noreply,
        });
        prop_assert_eq!(&decoded[3], &ClientRequest::Arith { increment: false, key: first.clone(), delta, noreply });
        prop_assert_eq!(&decoded[4], &ClientRequest::Delete { key: first.clone(), noreply });
        let ClientRequest::Meta(meta) = &decoded[5] else { panic!("{:?}", decoded[5]) };
        prop_assert_eq!(meta.kind, MetaKind::Set);
        prop_assert_eq!(&meta.key, &first);
        prop_assert_eq!(meta.data.as_deref(), Some(&data[..]));
        prop_assert_eq!(meta.opaque.as_deref(), Some(&b"7"[..]));
        prop_assert_eq!(&meta.flags[..], &[MetaFlag::ReturnCas, MetaFlag::Ttl(exptime), MetaFlag::SetFlags(flags), MetaFlag::Opaque(0)][..]);
    }

    #[test]
    fn what_the_server_encodes_the_client_decodes(
        items in proptest::collection::vec((key(), any::<u32>(), proptest::collection::vec(any::<u8>(), 0..200), any::<u64>()), 0..6),
        cas in any::<bool>(),
        opaque in proptest::collection::vec(0x21u8..0x7f, 0..=32),
    ) {
        let mut out = BytesMut::new();
        for (key, flags, data, unique) in &items {
            encode_value(&mut out, key, *flags, data, cas.then_some(*unique));
        }
        out.extend_from_slice(b"END\r\n");
        let reply = MetaResponse {
            status: MetaStatus::Va,
            flags: Bytes::from_static(b"O0 c5"),
            value: Some(Bytes::from_static(b"hi")),
        };
        let mut token = b"O".to_vec();
        token.extend_from_slice(&opaque);
        encode_meta_reply(&mut out, &reply, |t| Some(if t[0] == b'O' { token.clone() } else { t.to_vec() }));
        let mut decoder = Decoder::default();
        let Some(Response::Values(values)) = decoder.decode(&mut out, Expect::values(items.len().max(1))).unwrap() else {
            panic!("no values")
        };
        prop_assert_eq!(values.len(), items.len());
        for (value, (key, flags, data, unique)) in values.iter().zip(&items) {
            prop_assert_eq!(&value.key[..], &key[..]);
            prop_assert_eq!(value.flags, *flags);
            prop_assert_eq!(&value.data[..], &data[..]);
            prop_assert_eq!(value.cas, cas.then_some(*unique));
        }
        let Some(Response::Meta(meta)) = decoder.decode(&mut out, Expect::Single).unwrap() else {
            panic!("no meta reply")
        };
        prop_assert_eq!(meta.flag(b'O'), Some(&opaque[..]));
        prop_assert_eq!(meta.flag_u64(b'c'), Some(5));
        prop_assert_eq!(meta.value.as_deref(), Some(&b"hi"[..]));
    }

    /// Any bytes, in any pieces: no panic, and what the decoder keeps
    /// buffered stays within its limits (a line, a `get` line, a value).
    #[test]
    fn any_input_is_decoded_within_bounds(
        input in proptest::collection::vec(prop_oneof![
            Just(b' '), Just(b'\r'), Just(b'\n'), Just(b'0'), Just(b'9'),
            Just(b'm'), Just(b's'), Just(b'g'), any::<u8>(),
        ], 0..1000),
        prefix in prop_oneof![
            Just(&b""[..]), Just(&b"set k 0 0 "[..]), Just(&b"get "[..]),
            Just(&b"ms k "[..]), Just(&b"mg k "[..]), Just(&b"cas k 1 2 3 "[..]),
        ],
        chunk in 1usize..200,
    ) {
        let limits = ServerLimits { max_line: 64, max_get_line: 512, max_value: 256 };
        let mut decoder = RequestDecoder::new(limits);
        let mut buf = BytesMut::new();
        let mut bytes = prefix.to_vec();
        bytes.extend_from_slice(&input);
        for piece in bytes.chunks(chunk) {
            buf.extend_from_slice(piece);
            loop {
                match decoder.decode(&mut buf) {
                    Ok(Some(_)) => continue,
                    Ok(None) => break,
                    Err(_) => return Ok(()),
                }
            }
            prop_assert!(buf.len() <= 512 + 256 + 2 + chunk, "{} bytes held", buf.len());
        }
    }
}

#[test]
fn a_binary_request_and_an_http_request_close() {
    let mut decoder = RequestDecoder::default();
    let mut buf = BytesMut::from(&b"\x80\x01\x00\x00"[..]);
    assert_eq!(decoder.decode(&mut buf), Err(super::CloseReason::Binary));
    let mut buf = BytesMut::from(&b"GET / HTTP/1.1\r\n"[..]);
    assert_eq!(
        RequestDecoder::default().decode(&mut buf),
        Err(super::CloseReason::Http)
    );
}
