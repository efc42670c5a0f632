use bytes::{Bytes, BytesMut};

use super::*;
use crate::response::Value;
use crate::{Decoder, Expect};

fn key() -> Key<'static> {
    Key::new(b"k1").unwrap()
}

/// The classic form of `request` as it goes on the wire.
fn wire(request: Request<'_>) -> String {
    let classic = Classic::of(&request).unwrap();
    let mut out = BytesMut::new();
    classic.request().encode(&mut out);
    String::from_utf8(out.to_vec()).unwrap()
}

fn mg(flags: &[MetaFlag]) -> Classic<'_> {
    Classic::of(&Request::MetaGet { key: key(), flags }).unwrap()
}

fn hit(cas: Option<u64>) -> Response {
    let value = Value {
        key: Bytes::from_static(b"k1"),
        flags: 30,
        cas,
        data: Bytes::from_static(b"hello"),
    };
    Response::Values(vec![value].into())
}

fn meta(reply: Response) -> MetaResponse {
    match reply {
        Response::Meta(m) => m,
        other => panic!("not a meta reply: {other:?}"),
    }
}

#[test]
fn meta_gets_become_gets_gats_or_touch() {
    use MetaFlag::*;
    let get = |flags: &[MetaFlag]| wire(Request::MetaGet { key: key(), flags });
    assert_eq!(get(&[ReturnValue, ReturnFlags]), "get k1\r\n");
    assert_eq!(get(&[ReturnValue, ReturnCas, ReturnKey]), "gets k1\r\n");
    assert_eq!(get(&[ReturnValue, Ttl(60)]), "gat 60 k1\r\n");
    assert_eq!(get(&[ReturnCas, Ttl(60)]), "gats 60 k1\r\n");
    assert_eq!(get(&[Ttl(60), Opaque(7)]), "touch k1 60\r\n");
    assert_eq!(get(&[]), "get k1\r\n", "an existence check");
}

#[test]
fn meta_stores_become_the_storage_commands() {
    use MetaFlag::*;
    let set = |flags: &[MetaFlag]| {
        wire(Request::MetaSet {
            key: key(),
            data: b"v",
            flags,
        })
    };
    assert_eq!(
        set(&[SetFlags(3), Ttl(60), ReturnCas]),
        "set k1 3 60 1\r\nv\r\n"
    );
    assert_eq!(
        set(&[SetMode(crate::SetMode::Add)]),
        "add k1 0 0 1\r\nv\r\n"
    );
    assert_eq!(
        set(&[SetMode(crate::SetMode::Append)]),
        "append k1 0 0 1\r\nv\r\n"
    );
    assert_eq!(
        set(&[SetMode(crate::SetMode::Prepend)]),
        "prepend k1 0 0 1\r\nv\r\n"
    );
    assert_eq!(
        set(&[SetMode(crate::SetMode::Replace)]),
        "replace k1 0 0 1\r\nv\r\n"
    );
    assert_eq!(set(&[CompareCas(42), Ttl(5)]), "cas k1 0 5 1 42\r\nv\r\n");
    let delete = wire(Request::MetaDelete {
        key: key(),
        flags: &[ReturnKey],
    });
    assert_eq!(delete, "delete k1\r\n");
    let decr = wire(Request::MetaArith {
        key: key(),
        flags: &[
            ArithMode(crate::ArithMode::Decrement),
            Delta(5),
            ReturnValue,
        ],
    });
    assert_eq!(decr, "decr k1 5\r\n");
    let incr = wire(Request::MetaArith {
        key: key(),
        flags: &[],
    });
    assert_eq!(incr, "incr k1 1\r\n");
}

#[test]
fn what_has_no_classic_form_is_named() {
    use MetaFlag::*;
    let lacks = |request: Request<'_>| Classic::of(&request).unwrap_err();
    let get = |flags| Request::MetaGet { key: key(), flags };
    assert_eq!(
        lacks(get(&[ReturnValue, ReturnTtl])),
        "mg … t (remaining TTL)"
    );
    assert!(lacks(get(&[ReturnValue, Vivify(30)])).contains("leases"));
    assert!(lacks(get(&[ReturnValue, Recache(30)])).contains("leases"));
    assert_eq!(lacks(get(&[ReturnValue, Quiet])), "mg … q (quiet)");
    assert_eq!(lacks(get(&[Base64Key])), "base64 keys (b)");
    let delete = |flags| Request::MetaDelete { key: key(), flags };
    assert!(lacks(delete(&[CompareCas(1)])).contains("C"));
    assert!(lacks(delete(&[Invalidate, Ttl(30)])).contains("stale"));
    let set = |flags| Request::MetaSet {
        key: key(),
        data: b"v",
        flags,
    };
    assert!(lacks(set(&[Invalidate])).contains("stale"));
    assert!(lacks(set(&[ExplicitCas(9)])).contains("E"));
    assert!(lacks(set(&[CompareCas(1), SetMode(crate::SetMode::Add)])).contains("C"));
    let arith = Request::MetaArith {
        key: key(),
        flags: &[Vivify(0), Initial(10)],
    };
    assert!(lacks(arith).contains("create"));
    assert_eq!(lacks(Request::MetaNoop), "mn (meta no-op)");
    assert_eq!(lacks(Request::MetaDebug { key: key() }), "me (meta debug)");
    assert!(lacks(Request::Version).contains("classic already"));
}

#[test]
fn a_value_answers_with_the_flags_asked_for_in_their_order() {
    use MetaFlag::*;
    let flags = [
        Opaque(9),
        ReturnCas,
        ReturnValue,
        ReturnFlags,
        ReturnSize,
        ReturnKey,
    ];
    let m = meta(mg(&flags).answer(hit(Some(77))).unwrap());
    assert_eq!(m.status, MetaStatus::Va);
    assert_eq!(&m.flags[..], b"O9 c77 f30 s5 kk1");
    assert_eq!(m.value.as_deref(), Some(&b"hello"[..]));
    // Without `v`: a hit is `HD`, no value.
    let m = meta(mg(&[ReturnFlags]).answer(hit(None)).unwrap());
    assert_eq!(
        (m.status, &m.flags[..], m.value),
        (MetaStatus::Hd, &b"f30"[..], None)
    );
    // A miss: `EN`, with the opaque.
    let miss = Response::Values(Vec::new().into());
    let m = meta(mg(&[ReturnValue, Opaque(3)]).answer(miss).unwrap());
    assert_eq!((m.status, &m.flags[..]), (MetaStatus::En, &b"O3"[..]));
}

#[test]
fn store_delete_and_arith_replies_become_meta_statuses() {
    use MetaFlag::*;
    let set = Classic::of(&Request::MetaSet {
        key: key(),
        data: b"v",
        flags: &[ReturnCas, ReturnKey],
    })
    .unwrap();
    let status = |c: &Classic<'_>, r| meta(c.answer(r).unwrap()).status;
    assert_eq!(status(&set, Response::Stored), MetaStatus::Hd);
    assert_eq!(
        &meta(set.answer(Response::Stored).unwrap()).flags[..],
        b"kk1",
        "no CAS receipt: a classic store has none"
    );
    assert_eq!(status(&set, Response::NotStored), MetaStatus::Ns);
    assert_eq!(status(&set, Response::Exists), MetaStatus::Ex);
    assert_eq!(status(&set, Response::NotFound), MetaStatus::Nf);
    let delete = Classic::of(&Request::MetaDelete {
        key: key(),
        flags: &[],
    })
    .unwrap();
    assert_eq!(status(&delete, Response::Deleted), MetaStatus::Hd);
    assert_eq!(status(&delete, Response::NotFound), MetaStatus::Nf);
    let incr = Classic::of(&Request::MetaArith {
        key: key(),
        flags: &[ReturnValue],
    })
    .unwrap();
    let m = meta(incr.answer(Response::Number(12)).unwrap());
    assert_eq!(
        (m.status, m.value.as_deref()),
        (MetaStatus::Va, Some(&b"12"[..]))
    );
    // Errors, and replies the command cannot have, come back as they are.
    let error = Response::ServerError(Bytes::from_static(b"out of memory"));
    assert!(matches!(set.answer(error), Err(Response::ServerError(_))));
    assert!(matches!(
        delete.answer(Response::Stored),
        Err(Response::Stored)
    ));
}

#[test]
fn a_translated_reply_reads_like_the_servers_own() {
    // `VA` as memcached 1.6 would send it for `mg k1 v f c`, decoded, and the
    // translation of the classic reply: the same flags and value.
    let mut buf = BytesMut::from(&b"VA 5 f30 c77\r\nhello\r\n"[..]);
    let Some(Response::Meta(real)) = Decoder::default().decode(&mut buf, Expect::Single).unwrap()
    else {
        panic!("not decoded");
    };
    use MetaFlag::*;
    let ours = meta(
        mg(&[ReturnValue, ReturnFlags, ReturnCas])
            .answer(hit(Some(77)))
            .unwrap(),
    );
    assert_eq!(
        (ours.status, &ours.flags, &ours.value),
        (real.status, &real.flags, &real.value)
    );
}
