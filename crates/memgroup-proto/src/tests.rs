//! Fixtures captured from memcached 1.6.18, and property tests of the decoder.

use bytes::{BufMut, Bytes, BytesMut};
use proptest::prelude::*;

use crate::*;

/// A retrieval of any number of keys.
const ANY_VALUES: Expect = Expect::Values {
    max_items: usize::MAX,
};

fn b(s: &'static [u8]) -> Bytes {
    Bytes::from_static(s)
}

fn meta(status: MetaStatus, flags: &'static [u8], value: Option<&'static [u8]>) -> Response {
    Response::Meta(MetaResponse {
        status,
        flags: b(flags),
        value: value.map(b),
    })
}

fn value(key: &'static [u8], flags: u32, cas: Option<u64>, data: &'static [u8]) -> Value {
    Value {
        key: b(key),
        flags,
        cas,
        data: b(data),
    }
}

fn values(v: Vec<Value>) -> Response {
    Response::Values(v.into())
}

/// Decodes `wire` completely with one expectation per reply.
fn decode_all(wire: &[u8], expects: &[Expect]) -> Result<Vec<Response>, ProtoError> {
    let mut dec = Decoder::default();
    let mut buf = BytesMut::from(wire);
    let mut out = Vec::new();
    for &e in expects {
        match dec.decode(&mut buf, e)? {
            Some(r) => out.push(r),
            None => panic!("incomplete input after {} replies", out.len()),
        }
    }
    assert!(buf.is_empty(), "bytes left over: {buf:?}");
    Ok(out)
}

/// The one data-driven check: `wire` (as memcached sent it) decodes to `expected`.
fn check(wire: &[u8], expect: Expect, expected: Response) {
    assert_eq!(
        decode_all(wire, &[expect]).unwrap(),
        vec![expected],
        "{wire:?}"
    );
}

#[test]
fn fixtures_from_memcached_1_6() {
    use Expect::*;
    check(b"STORED\r\n", Single, Response::Stored);
    check(b"NOT_STORED\r\n", Single, Response::NotStored);
    check(b"EXISTS\r\n", Single, Response::Exists);
    check(b"NOT_FOUND\r\n", Single, Response::NotFound);
    check(b"DELETED\r\n", Single, Response::Deleted);
    check(b"TOUCHED\r\n", Single, Response::Touched);
    check(b"OK\r\n", Single, Response::Ok);
    check(
        b"MEMLIMIT_TOO_SMALL cannot set maxbytes to less than 8m\r\n",
        Single,
        Response::ServerError(Bytes::from_static(
            b"MEMLIMIT_TOO_SMALL cannot set maxbytes to less than 8m",
        )),
    );
    check(b"15\r\n", Single, Response::Number(15));
    check(b"0\r\n", Single, Response::Number(0));
    check(
        b"18446744073709551615\r\n",
        Single,
        Response::Number(u64::MAX),
    );
    check(
        b"VERSION 1.6.18\r\n",
        Single,
        Response::Version(b(b"1.6.18")),
    );
    check(b"ERROR\r\n", Single, Response::Error);
    check(
        b"CLIENT_ERROR bad command line format\r\n",
        Single,
        Response::ClientError(b(b"bad command line format")),
    );
    check(
        b"SERVER_ERROR object too large for cache\r\n",
        Single,
        Response::ServerError(b(b"object too large for cache")),
    );
    check(
        b"VALUE foo 5 3\r\nbar\r\nEND\r\n",
        ANY_VALUES,
        values(vec![value(b"foo", 5, None, b"bar")]),
    );
    check(
        b"VALUE foo 5 3 1\r\nbar\r\nEND\r\n",
        ANY_VALUES,
        values(vec![value(b"foo", 5, Some(1), b"bar")]),
    );
    // decr keeps the item's length, so the value has a trailing space.
    check(
        b"VALUE n 0 2 4\r\n0 \r\nEND\r\n",
        ANY_VALUES,
        values(vec![value(b"n", 0, Some(4), b"0 ")]),
    );
    check(b"END\r\n", ANY_VALUES, values(vec![]));
    check(
        b"VALUE a 0 1\r\n1\r\nVALUE b 4294967295 0\r\n\r\nEND\r\n",
        ANY_VALUES,
        values(vec![
            value(b"a", 0, None, b"1"),
            value(b"b", u32::MAX, None, b""),
        ]),
    );
    check(
        b"STAT maxbytes 67108864\r\nSTAT inter 127.0.0.1\r\nSTAT evictions on\r\nEND\r\n",
        Stats,
        Response::Stats(vec![
            Stat {
                name: b(b"maxbytes"),
                value: b(b"67108864"),
            },
            Stat {
                name: b(b"inter"),
                value: b(b"127.0.0.1"),
            },
            Stat {
                name: b(b"evictions"),
                value: b(b"on"),
            },
        ]),
    );
    check(b"END\r\n", Stats, Response::Stats(vec![]));
    check(
        b"VA 2 f7 t60 c6 kmk s2\r\nhi\r\n",
        Single,
        meta(MetaStatus::Va, b"f7 t60 c6 kmk s2", Some(b"hi")),
    );
    check(
        b"VA 1\r\n5\r\n",
        Single,
        meta(MetaStatus::Va, b"", Some(b"5")),
    );
    check(b"HD\r\n", Single, meta(MetaStatus::Hd, b"", None));
    check(
        b"HD O123 kmk\r\n",
        Single,
        meta(MetaStatus::Hd, b"O123 kmk", None),
    );
    check(b"EN\r\n", Single, meta(MetaStatus::En, b"", None));
    check(b"NF\r\n", Single, meta(MetaStatus::Nf, b"", None));
    check(b"NS\r\n", Single, meta(MetaStatus::Ns, b"", None));
    check(b"EX\r\n", Single, meta(MetaStatus::Ex, b"", None));
    check(b"MN\r\n", Single, meta(MetaStatus::Mn, b"", None));
    check(
        b"ME mk exp=-1 la=0 cas=10 fetch=no cls=1 size=63\r\n",
        Single,
        meta(
            MetaStatus::Me,
            b"mk exp=-1 la=0 cas=10 fetch=no cls=1 size=63",
            None,
        ),
    );
    // An error ends a retrieval or a stats reply.
    check(
        b"SERVER_ERROR out of memory\r\n",
        ANY_VALUES,
        Response::ServerError(b(b"out of memory")),
    );
    check(b"ERROR\r\n", Stats, Response::Error);
    // `stats reset` answers `RESET`.
    check(b"RESET\r\n", Stats, Response::Ok);
}

#[test]
fn an_absurd_value_length_is_refused_whatever_the_limit() {
    let mut dec = Decoder::new(Limits {
        max_line: 8 * 1024,
        max_value: usize::MAX,
        ..Limits::default()
    });
    for header in [
        &b"VALUE k 0 18446744073709551615\r\n"[..],
        b"VALUE k 0 4611686018427387904\r\n",
        b"VA 1073741825 f0\r\n",
    ] {
        let mut buf = BytesMut::from(header);
        let expect = if header.starts_with(b"VA") {
            Expect::Single
        } else {
            Expect::values(usize::MAX)
        };
        // Too large, or (past u64) not a number: an error either way, and
        // nothing reserved for it.
        assert!(
            dec.decode(&mut buf, expect).is_err(),
            "{}",
            String::from_utf8_lossy(header)
        );
        assert!(buf.capacity() < 1024, "reserved {} bytes", buf.capacity());
        dec = Decoder::new(Limits {
            max_line: 8 * 1024,
            max_value: usize::MAX,
            ..Limits::default()
        });
    }
}

#[test]
fn reset_is_only_a_stats_reply() {
    for expect in [Expect::Single, Expect::values(usize::MAX)] {
        let mut buf = BytesMut::from(&b"RESET\r\n"[..]);
        assert!(
            Decoder::new(Limits::default())
                .decode(&mut buf, expect)
                .is_err()
        );
    }
    // Not in the middle of STAT lines either.
    let mut buf = BytesMut::from(&b"STAT pid 1\r\nRESET\r\n"[..]);
    assert!(
        Decoder::new(Limits::default())
            .decode(&mut buf, Expect::Stats)
            .is_err()
    );
}

#[test]
fn meta_flag_accessors() {
    let Response::Meta(m) = meta(MetaStatus::Va, b"f7 t-1 c6 kmk s2", Some(b"hi")) else {
        unreachable!()
    };
    assert_eq!(m.flag_u64(b'f'), Some(7));
    assert_eq!(m.ttl(), Some(-1));
    assert_eq!(m.flag(b'k'), Some(&b"mk"[..]));
    assert_eq!(m.flag(b'O'), None);
}

#[test]
fn meta_fields_are_typed() {
    // As memcached 1.6.18 answers `mg <b64> b k v f t c s h l O9 N30` for a
    // vivified miss, with an unknown later flag in the middle.
    let Response::Meta(m) = meta(
        MetaStatus::Va,
        b"f7 t29 c6 E5 s0 h0 l2 O9 kAGJpbg== W b",
        Some(b""),
    ) else {
        unreachable!()
    };
    let f = m.fields();
    assert_eq!(f.client_flags, Some(7));
    assert_eq!(f.ttl, Some(MetaTtl::Seconds(29)));
    assert_eq!(f.cas, Some(6));
    assert_eq!(f.size, Some(0));
    assert_eq!(f.hit_before, Some(false));
    assert_eq!(f.last_access, Some(2));
    assert_eq!(f.opaque, Some(9));
    assert_eq!(f.key.as_deref(), Some(&b"\x00bin"[..]));
    assert!(f.base64_key && f.won && !f.win_sent && !f.stale);

    let Response::Meta(m) = meta(MetaStatus::Hd, b"t-1 h1 Z X kplain fnope", None) else {
        unreachable!()
    };
    let f = m.fields();
    assert_eq!(f.ttl, Some(MetaTtl::Never));
    assert_eq!(f.hit_before, Some(true));
    assert_eq!(f.key.as_deref(), Some(&b"plain"[..]));
    assert_eq!(
        f.client_flags, None,
        "a token that does not parse is absent"
    );
    assert!(f.win_sent && f.stale && !f.won && !f.base64_key);
}

#[test]
fn encodes_every_command() {
    let k = Key::new(b"k").unwrap();
    let k2 = Key::new(b"k2").unwrap();
    let keys = [k, k2];
    let store = |command, noreply| Request::Store {
        command,
        key: k,
        flags: 7,
        exptime: 60,
        data: b"v",
        noreply,
    };
    let cases: Vec<(Request<'_>, &[u8])> = vec![
        (Request::Get { keys: &keys }, b"get k k2\r\n"),
        (Request::Gets { keys: &keys }, b"gets k k2\r\n"),
        (
            Request::Gat {
                exptime: 9,
                keys: &keys,
            },
            b"gat 9 k k2\r\n",
        ),
        (
            Request::Gats {
                exptime: 9,
                keys: &keys[..1],
            },
            b"gats 9 k\r\n",
        ),
        (store(StoreCommand::Set, false), b"set k 7 60 1\r\nv\r\n"),
        (
            store(StoreCommand::Add, true),
            b"add k 7 60 1 noreply\r\nv\r\n",
        ),
        (
            store(StoreCommand::Replace, false),
            b"replace k 7 60 1\r\nv\r\n",
        ),
        (
            store(StoreCommand::Append, false),
            b"append k 7 60 1\r\nv\r\n",
        ),
        (
            store(StoreCommand::Prepend, false),
            b"prepend k 7 60 1\r\nv\r\n",
        ),
        (
            store(StoreCommand::Cas(42), true),
            b"cas k 7 60 1 42 noreply\r\nv\r\n",
        ),
        (
            Request::Delete {
                key: k,
                noreply: false,
            },
            b"delete k\r\n",
        ),
        (
            Request::Arith {
                increment: true,
                key: k,
                delta: u64::MAX,
                noreply: false,
            },
            b"incr k 18446744073709551615\r\n",
        ),
        (
            Request::Arith {
                increment: false,
                key: k,
                delta: 3,
                noreply: true,
            },
            b"decr k 3 noreply\r\n",
        ),
        (
            Request::Touch {
                key: k,
                exptime: 5,
                noreply: false,
            },
            b"touch k 5\r\n",
        ),
        (
            Request::FlushAll {
                delay: None,
                noreply: false,
            },
            b"flush_all\r\n",
        ),
        (
            Request::FlushAll {
                delay: Some(10),
                noreply: true,
            },
            b"flush_all 10 noreply\r\n",
        ),
        (
            Request::CacheMemlimit {
                megabytes: 64,
                noreply: true,
            },
            b"cache_memlimit 64 noreply\r\n",
        ),
        (Request::Version, b"version\r\n"),
        (Request::Stats { arg: None }, b"stats\r\n"),
        (
            Request::Stats {
                arg: Some(Key::new(b"slabs").unwrap()),
            },
            b"stats slabs\r\n",
        ),
        (
            Request::Verbosity {
                level: 1,
                noreply: false,
            },
            b"verbosity 1\r\n",
        ),
        (Request::Quit, b"quit\r\n"),
        (
            Request::MetaGet {
                key: k,
                flags: &[
                    MetaFlag::ReturnValue,
                    MetaFlag::ReturnFlags,
                    MetaFlag::ReturnTtl,
                    MetaFlag::ReturnCas,
                    MetaFlag::ReturnKey,
                    MetaFlag::Opaque(77),
                    MetaFlag::Quiet,
                    MetaFlag::Ttl(30),
                    MetaFlag::Vivify(15),
                ],
            },
            b"mg k v f t c k O77 q T30 N15\r\n",
        ),
        (
            Request::MetaSet {
                key: k,
                data: b"hi",
                flags: &[
                    MetaFlag::SetFlags(7),
                    MetaFlag::Ttl(60),
                    MetaFlag::SetMode(SetMode::Add),
                    MetaFlag::CompareCas(9),
                    MetaFlag::Invalidate,
                ],
            },
            b"ms k 2 F7 T60 ME C9 I\r\nhi\r\n",
        ),
        (
            Request::MetaDelete {
                key: k,
                flags: &[MetaFlag::Quiet, MetaFlag::ExplicitCas(5)],
            },
            b"md k q E5\r\n",
        ),
        (
            Request::MetaArith {
                key: k,
                flags: &[
                    MetaFlag::ArithMode(ArithMode::Decrement),
                    MetaFlag::Delta(100),
                    MetaFlag::Initial(5),
                    MetaFlag::ReturnValue,
                ],
            },
            b"ma k MD D100 J5 v\r\n",
        ),
        (Request::MetaNoop, b"mn\r\n"),
        (Request::MetaDebug { key: k }, b"me k\r\n"),
    ];
    for (request, wire) in cases {
        let mut buf = BytesMut::new();
        request.encode(&mut buf);
        assert_eq!(&buf[..], wire, "{request:?}");
        // The command's name is the wire form's first word.
        let first = wire.split(|&b| b == b' ' || b == b'\r').next().unwrap();
        assert_eq!(request.command().as_bytes(), first, "{request:?}");
        // A reply is expected unless the request says noreply (or quits).
        let silent = wire.windows(9).any(|w| w == b" noreply\r") || first == b"quit";
        assert_eq!(request.expect().is_none(), silent, "{request:?}");
    }
}

/// Encoding reserves the request's size up front, once: no regrowth, and
/// little room left over, whatever the key and value sizes.
#[test]
fn a_request_is_encoded_into_one_allocation_of_about_its_size() {
    let long = vec![b'k'; 200];
    let key = Key::new(&long).unwrap();
    let keys = vec![key; 20];
    let data = vec![b'v'; 5000];
    let flags = [
        MetaFlag::ReturnValue,
        MetaFlag::CompareCas(7),
        MetaFlag::Quiet,
    ];
    let cases: Vec<(Request<'_>, usize)> = vec![
        (
            Request::Store {
                command: StoreCommand::Set,
                key,
                flags: 1,
                exptime: 2,
                data: &data,
                noreply: false,
            },
            48,
        ),
        (Request::Get { keys: &keys }, 14),
        (
            Request::Gat {
                exptime: u32::MAX,
                keys: &keys,
            },
            14,
        ),
        (
            Request::MetaSet {
                key,
                data: &data,
                flags: &flags,
            },
            24 + 8 * flags.len(),
        ),
    ];
    for (request, headroom) in cases {
        let mut buf = BytesMut::new();
        request.encode(&mut buf);
        assert!(
            buf.capacity() - buf.len() <= headroom,
            "{}: {} bytes reserved for {}",
            request.command(),
            buf.capacity(),
            buf.len()
        );
    }
}

#[test]
fn only_q_is_quiet() {
    assert!(MetaFlag::Quiet.is_quiet());
    for flag in [
        MetaFlag::ReturnValue,
        MetaFlag::Base64Key,
        MetaFlag::CompareCas(1),
    ] {
        assert!(!flag.is_quiet(), "{flag:?}");
    }
}

#[test]
fn malformed_replies_are_errors() {
    use Expect::*;
    let bad: &[(&[u8], Expect)] = &[
        (b"STORED\n", Single),
        // A bare \n whose line would be valid without its last byte.
        (b"STORED!\n", Single),
        (b"END \n", ANY_VALUES),
        (b"\n", Single),
        (b"WHAT\r\n", Single),
        (b"VALUE k x 1\r\na\r\nEND\r\n", ANY_VALUES),
        (b"VALUE k 0 1\r\nabc\r\nEND\r\n", ANY_VALUES),
        (b"VALUE k 0 99999999999999999999\r\n", ANY_VALUES),
        (b"VALUE k 0 2000000\r\n", ANY_VALUES),
        (b"VA x\r\n", Single),
        (b"12ab\r\n", Single),
        (b"99999999999999999999\r\n", Single),
        (b"STORED\r\n", ANY_VALUES),
        (b"VALUE k 0 1\r\na\r\nEND\r\n", Single),
        (b"END\r\n", Single),
        (b"STAT a b\r\n", ANY_VALUES),
        (b"5\r\n", ANY_VALUES),
        (b"VERSION 1\r\n", Stats),
        (b"HD\r\n", ANY_VALUES),
        (b"XY\r\n", Single),
        // Short lines, and empty or zero-padded numbers.
        (b"X\r\n", Single),
        (b"\r\n", Single),
        (b"VALUE k  1\r\na\r\nEND\r\n", ANY_VALUES),
        (b"VALUE k 0 \r\n\r\nEND\r\n", ANY_VALUES),
        (
            b"VALUE k 0 0000000000000000000001\r\na\r\nEND\r\n",
            ANY_VALUES,
        ),
    ];
    for &(wire, expect) in bad {
        let mut buf = BytesMut::from(wire);
        let got = Decoder::default().decode(&mut buf, expect);
        assert!(
            got.is_err(),
            "{:?} -> {got:?}",
            String::from_utf8_lossy(wire)
        );
    }
}

#[test]
fn bare_error_lines_carry_no_text() {
    check(
        b"SERVER_ERROR\r\n",
        Expect::Single,
        Response::ServerError(b(b"")),
    );
    check(
        b"CLIENT_ERROR\r\n",
        Expect::values(usize::MAX),
        Response::ClientError(b(b"")),
    );
}

#[test]
fn a_line_of_exactly_max_line_bytes_is_read_one_more_is_not() {
    let limits = Limits {
        max_line: 16,
        ..Limits::default()
    };
    let mut buf = BytesMut::from(&b"SERVER_ERROR abc\r\n"[..]);
    let got = Decoder::new(limits).decode(&mut buf, Expect::Single);
    assert_eq!(got, Ok(Some(Response::ServerError(b(b"abc")))));
    let mut buf = BytesMut::from(&b"SERVER_ERROR abcd\r\n"[..]);
    let got = Decoder::new(limits).decode(&mut buf, Expect::Single);
    assert_eq!(got, Err(ProtoError::LineTooLong { limit: 16 }));
}

#[test]
fn a_retrieval_takes_one_item_per_key_asked_and_no_more() {
    // `get a a` is answered twice; a third item is refused at its header,
    // before its data is read or held.
    let two = b"VALUE a 0 1\r\n1\r\nVALUE a 0 1\r\n1\r\nEND\r\n";
    let got = Decoder::default().decode(&mut BytesMut::from(&two[..]), Expect::values(2));
    assert!(matches!(got, Ok(Some(Response::Values(v))) if v.len() == 2));
    let mut endless = BytesMut::from(&b"VALUE k 0 1\r\n1\r\nVALUE x 0 1000000\r\n"[..]);
    let got = Decoder::default().decode(&mut endless, Expect::values(1));
    assert_eq!(got, Err(ProtoError::TooManyItems { asked: 1 }));
    assert!(
        ProtoError::TooManyItems { asked: 1 }
            .to_string()
            .contains("1 keys")
    );
}

#[test]
fn a_stats_reply_has_a_limit_of_its_own() {
    let limits = Limits {
        max_stats: 3 * (12 + ITEM_OVERHEAD),
        ..Limits::default()
    };
    // "STAT pid 10\r\n" is 13 bytes: two fit, a third does not.
    let mut buf = BytesMut::from(&b"STAT pid 10\r\nSTAT pid 11\r\n"[..]);
    let mut dec = Decoder::new(limits);
    assert_eq!(dec.decode(&mut buf, Expect::Stats), Ok(None));
    buf.put_slice(b"STAT pid 12\r\nSTAT pid 13\r\n");
    assert_eq!(
        dec.decode(&mut buf, Expect::Stats),
        Err(ProtoError::ReplyTooLarge {
            limit: limits.max_stats
        })
    );
    // Values keep the larger limit.
    assert!(Limits::default().max_stats < Limits::default().max_reply);
}

#[test]
fn reset_then_the_next_reply_decodes() {
    let out = decode_all(b"RESET\r\nSTORED\r\n", &[Expect::Stats, Expect::Single]).unwrap();
    assert_eq!(out, vec![Response::Ok, Response::Stored]);
}

#[test]
fn mid_reply_state_and_limits_are_reported() {
    let limits = Limits {
        max_line: 100,
        max_value: 10,
        max_reply: 1000,
        max_stats: 500,
    };
    let mut dec = Decoder::new(limits);
    assert_eq!(dec.limits(), limits);
    assert!(!dec.is_mid_reply());
    // A header waiting for its data.
    let mut buf = BytesMut::from(&b"VALUE k 0 3\r\nab"[..]);
    assert_eq!(dec.decode(&mut buf, Expect::values(usize::MAX)), Ok(None));
    assert!(dec.is_mid_reply());
    // A finished item, no END yet.
    buf.put_slice(b"c\r\n");
    assert_eq!(dec.decode(&mut buf, Expect::values(usize::MAX)), Ok(None));
    assert!(dec.is_mid_reply());
    buf.put_slice(b"END\r\n");
    assert!(
        dec.decode(&mut buf, Expect::values(usize::MAX))
            .unwrap()
            .is_some()
    );
    assert!(!dec.is_mid_reply());
    // STAT lines without END.
    let mut buf = BytesMut::from(&b"STAT pid 1\r\n"[..]);
    assert_eq!(dec.decode(&mut buf, Expect::Stats), Ok(None));
    assert!(dec.is_mid_reply());
}

#[test]
fn a_reply_of_exactly_max_reply_bytes_is_accepted_one_more_is_not() {
    // One item: "VALUE k 0 1\r\n" (13) + "x\r\n" (3) = 16 bytes, and its entry.
    let item = b"VALUE k 0 1\r\nx\r\n";
    let two = 2 * (16 + ITEM_OVERHEAD);
    for (limit, ok) in [(two, true), (two - 1, false)] {
        let mut dec = Decoder::new(Limits {
            max_reply: limit,
            ..Limits::default()
        });
        let mut buf = BytesMut::new();
        buf.put_slice(item);
        buf.put_slice(item);
        buf.put_slice(b"END\r\n");
        let got = dec.decode(&mut buf, Expect::values(usize::MAX));
        match got {
            Ok(Some(Response::Values(v))) => assert!(ok && v.len() == 2, "limit {limit}"),
            Err(ProtoError::ReplyTooLarge { .. }) => assert!(!ok, "limit {limit}"),
            other => panic!("limit {limit}: {other:?}"),
        }
    }
    // The same for STAT lines: "STAT pid 1\r\n" is 12 bytes.
    let two = 2 * (12 + ITEM_OVERHEAD);
    for (limit, ok) in [(two, true), (two - 1, false)] {
        let mut dec = Decoder::new(Limits {
            max_stats: limit,
            ..Limits::default()
        });
        let mut buf = BytesMut::from(&b"STAT pid 1\r\nSTAT pid 1\r\nEND\r\n"[..]);
        let got = dec.decode(&mut buf, Expect::Stats);
        match got {
            Ok(Some(Response::Stats(s))) => assert!(ok && s.len() == 2, "limit {limit}"),
            Err(ProtoError::ReplyTooLarge { .. }) => assert!(!ok, "limit {limit}"),
            other => panic!("limit {limit}: {other:?}"),
        }
    }
}

/// A flood of empty values is refused before the entries holding them (and
/// the list's room to double) outgrow the limit.
#[test]
fn a_flood_of_empty_values_is_held_within_the_limit() {
    let limit = 100_000;
    let mut dec = Decoder::new(Limits {
        max_reply: limit,
        ..Limits::default()
    });
    let mut buf = BytesMut::new();
    let mut items = 0;
    // Bounded: a limit never enforced fails here instead of hanging.
    while items < limit {
        buf.put_slice(b"VALUE k 0 0\r\n\r\n");
        match dec.decode(&mut buf, Expect::values(usize::MAX)) {
            Ok(None) => items += 1,
            Err(ProtoError::ReplyTooLarge { .. }) => break,
            other => panic!("{other:?}"),
        }
    }
    let held = items * 2 * std::mem::size_of::<Value>();
    assert!(held <= limit, "{items} items: {held} bytes of entries");
    assert!(held > limit / 2, "refused too early: {items} items");
}

#[test]
fn a_waiting_value_reserves_its_frame_once_not_more() {
    // The header and a quarter of a 64 KiB value have arrived: the buffer is
    // grown to hold exactly the rest of the frame, so the value lands
    // contiguous, and no more than that.
    let len = 64 * 1024;
    let header = format!("VALUE k 0 {len}\r\n");
    let total = header.len() + len + 2;
    let mut wire = header.into_bytes();
    wire.extend(std::iter::repeat_n(b'x', len / 4));
    let mut buf = BytesMut::from(&wire[..]);
    let mut dec = Decoder::default();
    assert_eq!(dec.decode(&mut buf, Expect::values(usize::MAX)), Ok(None));
    assert!(buf.capacity() >= total, "{} < {total}", buf.capacity());
    assert!(
        buf.capacity() < total + len / 8,
        "{} for {total}",
        buf.capacity()
    );
}

#[test]
fn errors_read_as_sentences() {
    for (e, says) in [
        (ProtoError::LineTooLong { limit: 9 }, "longer than 9 bytes"),
        (
            ProtoError::ValueTooLarge { len: 5, limit: 4 },
            "5 bytes exceeds the 4-byte limit",
        ),
        (ProtoError::BadDataTerminator, ""),
        (ProtoError::ReplyTooLarge { limit: 7 }, "7"),
    ] {
        let text = e.to_string();
        assert!(!text.is_empty() && text.contains(says), "{e:?}: {text}");
    }
}

/// A data block longer than its header says: where its `\r\n` should be
/// there is data. (The fixed cases of `truncated_or_lying_frames_fail_or_wait`,
/// including the one random data almost never hits.)
#[test]
fn a_data_block_longer_than_announced_is_an_error() {
    let decode = |wire: &[u8]| {
        Decoder::default().decode(&mut BytesMut::from(wire), Expect::values(usize::MAX))
    };
    assert_eq!(
        decode(b"VALUE k 0 3\r\nabcd\r\nEND\r\n"),
        Err(ProtoError::BadDataTerminator)
    );
    // The data holds `\r\n` just there: a two-byte value, then the rest of
    // the data is read as a line, which is no line of a retrieval reply.
    assert_eq!(
        decode(b"VALUE k 0 2\r\nab\r\nOK\r\nEND\r\n"),
        Err(ProtoError::Unexpected {
            expected: Expect::values(usize::MAX),
            line: "OK".into()
        })
    );
    assert_eq!(
        decode(b"VALUE k 0 2\r\nab\r\n\r\nEND\r\n"),
        Err(ProtoError::Malformed {
            reason: "unknown reply",
            line: String::new()
        })
    );
}

#[test]
fn limits_are_enforced_without_allocating() {
    let mut dec = Decoder::new(Limits {
        max_line: 16,
        max_value: 8,
        ..Limits::default()
    });
    let mut buf = BytesMut::from(&b"VALUE k 0 9\r\n"[..]);
    assert_eq!(
        dec.decode(&mut buf, Expect::values(usize::MAX)),
        Err(ProtoError::ValueTooLarge { len: 9, limit: 8 })
    );
    let mut dec = Decoder::new(Limits {
        max_line: 16,
        max_value: 8,
        ..Limits::default()
    });
    let mut buf = BytesMut::from(&[b'A'; 17][..]);
    assert_eq!(dec.decode(&mut buf, Expect::Single), Ok(None));
    buf.put_slice(b"AA");
    assert_eq!(
        dec.decode(&mut buf, Expect::Single),
        Err(ProtoError::LineTooLong { limit: 16 })
    );
}

#[test]
fn values_are_zero_copy() {
    let mut buf = BytesMut::with_capacity(64);
    buf.put_slice(b"VALUE key 0 5\r\nhello\r\nEND\r\n");
    let base = buf.as_ptr() as usize;
    let Some(Response::Values(v)) = Decoder::default()
        .decode(&mut buf, Expect::values(usize::MAX))
        .unwrap()
    else {
        panic!()
    };
    // The value points into the buffer the bytes were read into.
    assert_eq!(v[0].data.as_ptr() as usize, base + 15);
    assert_eq!(v[0].key.as_ptr() as usize, base + 6);
}

// ---- server-side encoding and property tests ------------------------------

/// Writes `response` exactly as memcached would.
fn server_encode(response: &Response, out: &mut Vec<u8>) {
    if let Response::MetaBatch(replies) = response {
        for r in replies {
            server_encode(r, out);
        }
        out.extend_from_slice(b"MN\r\n");
        return;
    }
    let mut line = |parts: &[&[u8]]| {
        for p in parts {
            out.extend_from_slice(p);
        }
        out.extend_from_slice(b"\r\n");
    };
    match response {
        Response::Values(values) => {
            for v in values {
                let mut head = format!(
                    "VALUE {} {} {}",
                    String::from_utf8_lossy(&v.key),
                    v.flags,
                    v.data.len()
                );
                if let Some(cas) = v.cas {
                    head += &format!(" {cas}");
                }
                line(&[head.as_bytes()]);
                line(&[&v.data]);
            }
            line(&[b"END"]);
        }
        Response::Stats(stats) => {
            for s in stats {
                line(&[b"STAT ", &s.name, b" ", &s.value]);
            }
            line(&[b"END"]);
        }
        Response::Stored => line(&[b"STORED"]),
        Response::NotStored => line(&[b"NOT_STORED"]),
        Response::Exists => line(&[b"EXISTS"]),
        Response::NotFound => line(&[b"NOT_FOUND"]),
        Response::Deleted => line(&[b"DELETED"]),
        Response::Touched => line(&[b"TOUCHED"]),
        Response::Ok => line(&[b"OK"]),
        Response::Number(n) => line(&[n.to_string().as_bytes()]),
        Response::Version(v) => line(&[b"VERSION ", v]),
        Response::Error => line(&[b"ERROR"]),
        Response::ClientError(m) => line(&[b"CLIENT_ERROR ", m]),
        Response::ServerError(m) => line(&[b"SERVER_ERROR ", m]),
        Response::Meta(m) => {
            let sep: &[u8] = if m.flags.is_empty() { b"" } else { b" " };
            match &m.value {
                Some(v) => {
                    line(&[b"VA ", v.len().to_string().as_bytes(), sep, &m.flags]);
                    line(&[v]);
                }
                None => line(&[m.status.code().as_bytes(), sep, &m.flags]),
            }
        }
        Response::MetaBatch(_) => unreachable!("encoded above"),
    }
}

fn expect_of(r: &Response) -> Expect {
    match r {
        Response::Values(_) => Expect::values(usize::MAX),
        Response::Stats(_) => Expect::Stats,
        Response::MetaBatch(replies) => Expect::MetaBatch {
            max_replies: replies.len() + 2,
        },
        _ => Expect::Single,
    }
}

fn token() -> impl Strategy<Value = Bytes> {
    proptest::collection::vec(0x21u8..0x7f, 1..20).prop_map(Bytes::from)
}

fn text() -> impl Strategy<Value = Bytes> {
    // Free text after a status word: anything but CR/LF, not starting with a space.
    (token(), proptest::collection::vec(0x20u8..0x7f, 0..20))
        .prop_map(|(t, rest)| Bytes::from([&t[..], &rest[..]].concat()))
}

fn data() -> impl Strategy<Value = Bytes> {
    // Data blocks are arbitrary bytes, CR and LF included.
    proptest::collection::vec(any::<u8>(), 0..64).prop_map(Bytes::from)
}

fn meta_flags() -> impl Strategy<Value = Bytes> {
    proptest::collection::vec(token(), 0..4).prop_map(|ts| Bytes::from(ts.join(&b' ')))
}

/// A reply a quiet batch may hold: a meta reply other than `MN`, or an error.
fn batched() -> impl Strategy<Value = Response> {
    let status = prop_oneof![
        Just(MetaStatus::Hd),
        Just(MetaStatus::En),
        Just(MetaStatus::Nf),
        Just(MetaStatus::Ns),
        Just(MetaStatus::Ex),
    ];
    prop_oneof![
        (status, meta_flags()).prop_map(|(status, flags)| Response::Meta(MetaResponse {
            status,
            flags,
            value: None
        })),
        (meta_flags(), data()).prop_map(|(flags, v)| Response::Meta(MetaResponse {
            status: MetaStatus::Va,
            flags,
            value: Some(v)
        })),
        Just(Response::Error),
        text().prop_map(Response::ClientError),
        text().prop_map(Response::ServerError),
    ]
}

fn response() -> impl Strategy<Value = Response> {
    prop_oneof![
        9 => single_response(),
        1 => proptest::collection::vec(batched(), 0..5).prop_map(Response::MetaBatch),
    ]
}

fn single_response() -> impl Strategy<Value = Response> {
    let status = prop_oneof![
        Just(MetaStatus::Hd),
        Just(MetaStatus::En),
        Just(MetaStatus::Nf),
        Just(MetaStatus::Ns),
        Just(MetaStatus::Ex),
        Just(MetaStatus::Mn),
        Just(MetaStatus::Me),
    ];
    prop_oneof![
        proptest::collection::vec(
            (
                token(),
                any::<u32>(),
                proptest::option::of(any::<u64>()),
                data()
            )
                .prop_map(|(key, flags, cas, data)| Value {
                    key,
                    flags,
                    cas,
                    data
                }),
            0..4
        )
        .prop_map(|v| Response::Values(v.into())),
        proptest::collection::vec(
            (token(), text()).prop_map(|(name, value)| Stat { name, value }),
            0..4
        )
        .prop_map(Response::Stats),
        Just(Response::Stored),
        Just(Response::NotStored),
        Just(Response::Exists),
        Just(Response::NotFound),
        Just(Response::Deleted),
        Just(Response::Touched),
        Just(Response::Ok),
        Just(Response::Error),
        any::<u64>().prop_map(Response::Number),
        text().prop_map(Response::Version),
        text().prop_map(Response::ClientError),
        text().prop_map(Response::ServerError),
        (status, meta_flags()).prop_map(|(status, flags)| Response::Meta(MetaResponse {
            status,
            flags,
            value: None
        })),
        (meta_flags(), data()).prop_map(|(flags, v)| Response::Meta(MetaResponse {
            status: MetaStatus::Va,
            flags,
            value: Some(v)
        })),
    ]
}

/// Feeds `wire` to a decoder in the given chunk sizes, collecting replies.
fn decode_chunked(
    wire: &[u8],
    expects: &[Expect],
    chunks: &mut dyn Iterator<Item = usize>,
) -> Result<Vec<Response>, ProtoError> {
    let mut dec = Decoder::default();
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    let mut fed = 0;
    while out.len() < expects.len() {
        match dec.decode(&mut buf, expects[out.len()])? {
            Some(r) => out.push(r),
            None => {
                assert!(fed < wire.len(), "decoder wants more than the whole input");
                let n = chunks
                    .next()
                    .unwrap_or(usize::MAX)
                    .max(1)
                    .min(wire.len() - fed);
                buf.extend_from_slice(&wire[fed..fed + n]);
                fed += n;
            }
        }
    }
    assert_eq!(fed, wire.len());
    assert!(buf.is_empty() && !dec.is_mid_reply());
    Ok(out)
}

/// Header numbers at their limits: the largest `u64` and one past it, and
/// 20 digits against 21.
#[test]
fn header_numbers_at_their_limits() {
    use crate::decode::dec_u64;
    let read = |s: &str| dec_u64(s.as_bytes()).ok().map(|(rest, n)| (rest.len(), n));
    assert_eq!(read("18446744073709551615"), Some((0, u64::MAX)));
    assert_eq!(read("18446744073709551616"), None);
    assert_eq!(read("00000000000000000001 x"), Some((2, 1)));
    assert_eq!(read("000000000000000000001"), None);
    assert_eq!(read("0"), Some((0, 0)));
    assert_eq!(read(" 1"), None);
    assert_eq!(read(""), None);
}

/// A `VALUE` header's fields after the prefix, by the grammar written as a
/// nom chain: the reference the decoder's hand-split reading must match.
fn value_fields_by_grammar(i: &[u8]) -> Option<(&[u8], u32, u64, Option<u64>)> {
    use crate::decode::{dec_u32, dec_u64, sp, token};
    use nom::Parser;
    use nom::combinator::{all_consuming, opt};
    use nom::sequence::preceded;
    all_consuming((
        token,
        preceded(sp, dec_u32),
        preceded(sp, dec_u64),
        opt(preceded(sp, dec_u64)),
    ))
    .parse(i)
    .ok()
    .map(|(_, fields)| fields)
}

/// `VALUE` headers (after the prefix), well and badly formed: each field
/// and separator drawn from its edge cases.
fn value_header() -> impl Strategy<Value = String> {
    let pick = |v: &[&'static str]| prop::sample::select(v.to_vec());
    let key = pick(&["k", "key:1", "", "x\t"]);
    let sep = pick(&[" ", " ", " ", "  ", "", "\t"]);
    let num = pick(&[
        "0",
        "7",
        "00",
        "4294967295",
        "4294967296",
        "18446744073709551615",
        "18446744073709551616",
        "99999999999999999999",
        "-1",
        "7x",
        "",
    ]);
    let tail = pick(&["", "", " ", "x"]);
    (
        key,
        sep.clone(),
        num.clone(),
        sep.clone(),
        num.clone(),
        prop::option::of((sep, num)),
        tail,
    )
        .prop_map(|(key, s1, n1, s2, n2, cas, tail)| {
            let cas = cas.map_or(String::new(), |(s, n)| format!("{s}{n}"));
            format!("{key}{s1}{n1}{s2}{n2}{cas}{tail}")
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn header_numbers_read_as_decimal(digits in "[0-9]{0,24}", tail in "|[ a-z]") {
        let text = format!("{digits}{tail}");
        let by_std = (1..=20).contains(&digits.len()).then(|| digits.parse::<u64>().ok()).flatten();
        let got = crate::decode::dec_u64(text.as_bytes()).ok();
        prop_assert_eq!(got.map(|(rest, n)| (rest.len(), n)), by_std.map(|n| (tail.len(), n)));
    }

    #[test]
    fn value_header_reads_as_its_grammar(line in value_header()) {
        prop_assert_eq!(
            crate::decode::value_fields(line.as_bytes()),
            value_fields_by_grammar(line.as_bytes()),
            "{:?}", line
        );
    }

    #[test]
    fn decodes_any_split(
        responses in proptest::collection::vec(response(), 1..8),
        chunk_sizes in proptest::collection::vec(1usize..40, 0..400),
    ) {
        let mut wire = Vec::new();
        for r in &responses {
            server_encode(r, &mut wire);
        }
        let expects: Vec<Expect> = responses.iter().map(expect_of).collect();
        let got = decode_chunked(&wire, &expects, &mut chunk_sizes.into_iter())?;
        prop_assert_eq!(&got, &responses);
        // And split at every single boundary, one reply stream in two parts.
        for cut in 0..=wire.len() {
            let mut parts = [cut, usize::MAX].into_iter();
            let got = decode_chunked(&wire, &expects, &mut parts)?;
            prop_assert_eq!(&got, &responses);
        }
    }

    #[test]
    fn garbage_never_panics(
        bytes in proptest::collection::vec(any::<u8>(), 0..300),
        expect in prop_oneof![Just(Expect::values(usize::MAX)), Just(Expect::Stats), Just(Expect::Single), Just(Expect::MetaBatch { max_replies: 8 })],
    ) {
        let mut dec = Decoder::new(Limits { max_line: 64, max_value: 128, ..Limits::default() });
        let mut buf = BytesMut::from(&bytes[..]);
        // Every call either consumes bytes, waits, or fails: it cannot spin.
        for _ in 0..=bytes.len() {
            match dec.decode(&mut buf, expect) {
                Ok(Some(_)) => continue,
                Ok(None) | Err(_) => break,
            }
        }
        // The decoder never reserves beyond one bounded frame.
        prop_assert!(buf.capacity() <= bytes.len().max(64 + 128 + 8) + 64);
    }

    #[test]
    fn truncated_or_lying_frames_fail_or_wait(
        r in response(),
        cut in any::<prop::sample::Index>(),
        lie in 1usize..5,
    ) {
        let mut wire = Vec::new();
        server_encode(&r, &mut wire);
        // A truncated reply is never returned: the decoder waits for more.
        let cut = cut.index(wire.len());
        let mut buf = BytesMut::from(&wire[..cut]);
        let mut dec = Decoder::default();
        prop_assert_eq!(dec.decode(&mut buf, expect_of(&r)), Ok(None));
        // A data block whose announced length is shorter than the data: the
        // bytes where its `\r\n` should be are data, so it is an error.
        if let Response::Values(values) = &r
            && let Some(v) = values.first().filter(|v| v.data.len() >= lie) {
                let head = format!("VALUE {} {} {}\r\n", String::from_utf8_lossy(&v.key), v.flags, v.data.len() - lie);
                let mut wire = head.into_bytes();
                let announced_end = wire.len() + v.data.len() - lie;
                wire.extend_from_slice(&v.data);
                wire.extend_from_slice(b"\r\nEND\r\n");
                let got = Decoder::default().decode(&mut BytesMut::from(&wire[..]), Expect::values(usize::MAX));
                if &wire[announced_end..announced_end + 2] == b"\r\n" {
                    // The data happens to hold `\r\n` there: a shorter value,
                    // then its last `lie - 2` bytes read as a reply line, which
                    // at two bytes or fewer is no line of a retrieval reply.
                    prop_assert!(
                        matches!(got, Err(ProtoError::Malformed { .. } | ProtoError::Unexpected { .. })),
                        "{:?}", got
                    );
                } else {
                    prop_assert_eq!(got, Err(ProtoError::BadDataTerminator));
                }
            }
    }
}

#[test]
fn an_endless_multi_item_reply_is_refused_at_the_reply_limit() {
    let limits = Limits {
        max_reply: 10_000,
        max_stats: 10_000,
        ..Limits::default()
    };
    for (expect, item) in [
        (
            Expect::values(usize::MAX),
            &b"VALUE k 0 10\r\n0123456789\r\n"[..],
        ),
        (Expect::Stats, &b"STAT pid 12345678901234\r\n"[..]),
    ] {
        let mut dec = Decoder::new(limits);
        let mut buf = BytesMut::new();
        let mut result = Ok(None);
        // A server that never sends END: well before 10x the limit it fails.
        for _ in 0..(10 * 10_000 / item.len()) {
            buf.extend_from_slice(item);
            result = dec.decode(&mut buf, expect);
            if result.is_err() {
                break;
            }
            assert_eq!(result, Ok(None));
        }
        assert_eq!(result, Err(ProtoError::ReplyTooLarge { limit: 10_000 }));
        // Under the limit (wire bytes and entries), a long reply is fine.
        let mut dec = Decoder::new(limits);
        let mut buf = BytesMut::new();
        for _ in 0..(10_000 / (item.len() + ITEM_OVERHEAD)) {
            buf.extend_from_slice(item);
        }
        buf.extend_from_slice(b"END\r\n");
        assert!(matches!(dec.decode(&mut buf, expect), Ok(Some(_))));
    }
}

/// Every meta flag parses back from the token it encodes to, for the
/// commands it belongs to.
#[test]
fn meta_flags_parse_back_from_their_tokens() {
    use crate::{ArithMode, MetaFlag, SetMode};
    let flags = [
        ("mg", MetaFlag::Base64Key),
        ("mg", MetaFlag::ReturnCas),
        ("mg", MetaFlag::ReturnFlags),
        ("mg", MetaFlag::ReturnHit),
        ("mg", MetaFlag::ReturnKey),
        ("mg", MetaFlag::ReturnLastAccess),
        ("mg", MetaFlag::Opaque(7)),
        ("mg", MetaFlag::Quiet),
        ("mg", MetaFlag::ReturnSize),
        ("mg", MetaFlag::ReturnTtl),
        ("mg", MetaFlag::NoLruBump),
        ("mg", MetaFlag::ReturnValue),
        ("mg", MetaFlag::Vivify(30)),
        ("mg", MetaFlag::Recache(5)),
        ("mg", MetaFlag::Ttl(60)),
        ("ms", MetaFlag::CompareCas(u64::MAX)),
        ("ms", MetaFlag::ExplicitCas(9)),
        ("ms", MetaFlag::SetFlags(u32::MAX)),
        ("md", MetaFlag::Invalidate),
        ("ms", MetaFlag::SetMode(SetMode::Add)),
        ("ms", MetaFlag::SetMode(SetMode::Append)),
        ("ms", MetaFlag::SetMode(SetMode::Prepend)),
        ("ms", MetaFlag::SetMode(SetMode::Replace)),
        ("ms", MetaFlag::SetMode(SetMode::Set)),
        ("ma", MetaFlag::ArithMode(ArithMode::Increment)),
        ("ma", MetaFlag::ArithMode(ArithMode::Decrement)),
        ("ma", MetaFlag::Delta(3)),
        ("ma", MetaFlag::Initial(5)),
    ];
    for (command, flag) in flags {
        let mut buf = bytes::BytesMut::new();
        crate::Request::MetaGet {
            key: crate::Key::new(b"k").unwrap(),
            flags: &[flag],
        }
        .encode(&mut buf);
        let line = std::str::from_utf8(&buf).unwrap();
        let token = line.trim_end().rsplit(' ').next().unwrap();
        assert_eq!(MetaFlag::parse(command, token), Ok(flag), "{line:?}");
    }
    assert!(MetaFlag::parse("mg", "MA").is_err(), "no mode for mg");
    assert!(MetaFlag::parse("mg", "vx").is_err());
    assert!(MetaFlag::parse("mg", "N99999999999").is_err());
    assert!(MetaFlag::parse("mg", "Y").is_err());
}

/// A quiet batch encodes `q O<i>` on every command and ends with `mn`; its
/// reply is read up to `MN`, and a batch answering more than once per
/// command is refused.
#[test]
fn a_quiet_batch_is_one_request_and_one_reply() {
    let (a, b) = (Key::new(b"a").unwrap(), Key::new(b"b").unwrap());
    let ttl = [MetaFlag::Ttl(60)];
    let commands = [
        MetaCommand::Set {
            key: a,
            data: b"x",
            flags: &ttl,
        },
        MetaCommand::Get {
            key: b,
            flags: &[MetaFlag::ReturnValue],
        },
        MetaCommand::Delete { key: a, flags: &[] },
        MetaCommand::Arith { key: b, flags: &[] },
    ];
    let request = Request::MetaBatch {
        commands: &commands,
    };
    let mut buf = BytesMut::new();
    request.encode(&mut buf);
    assert_eq!(
        &buf[..],
        &b"ms a 1 T60 q O0\r\nx\r\nmg b v q O1\r\nmd a q O2\r\nma b q O3\r\nmn\r\n"[..]
    );
    assert_eq!(request.expect(), Some(Expect::MetaBatch { max_replies: 4 }));
    let mut dec = Decoder::default();
    let mut wire = BytesMut::from(&b"VA 2 O1\r\nhi\r\nNF O3\r\nSERVER_ERROR busy\r\nMN\r\n"[..]);
    let Some(Response::MetaBatch(replies)) =
        dec.decode(&mut wire, request.expect().unwrap()).unwrap()
    else {
        panic!("one batch reply");
    };
    assert_eq!(replies.len(), 3);
    assert!(
        matches!(&replies[0], Response::Meta(m) if m.flag_u64(b'O') == Some(1) && m.value.as_deref() == Some(&b"hi"[..]))
    );
    assert!(matches!(&replies[1], Response::Meta(m) if m.status == MetaStatus::Nf));
    assert!(matches!(&replies[2], Response::ServerError(_)));
    assert!(wire.is_empty() && !dec.is_mid_reply());
    let mut lying = BytesMut::from(&b"NF O0\r\nNF O0\r\nMN\r\n"[..]);
    let refused = Decoder::default().decode(&mut lying, Expect::MetaBatch { max_replies: 1 });
    assert_eq!(refused, Err(ProtoError::TooManyItems { asked: 1 }));
}

/// A configuration endpoint's reply, as the AWS documentation shows it:
/// the node line ends `\n` inside the block, then the block's `\r\n`.
const CONFIG_REPLY: &[u8] =
    b"CONFIG cluster 0 43\r\n7\nh1|10.0.0.1|11211 h2||11212 h3|::1|11213\n\r\nEND\r\n";

#[test]
fn a_config_reply_decodes_split_anywhere_and_parses() {
    let data = &CONFIG_REPLY[21..64];
    assert_eq!(data.last(), Some(&b'\n'));
    let want = values(vec![Value {
        key: b(b"cluster"),
        flags: 0,
        cas: None,
        data: Bytes::copy_from_slice(data),
    }]);
    check(CONFIG_REPLY, Expect::Config, want.clone());
    for split in 1..CONFIG_REPLY.len() {
        let mut sizes = [split, CONFIG_REPLY.len()].into_iter();
        let got = decode_chunked(CONFIG_REPLY, &[Expect::Config], &mut sizes).unwrap();
        assert_eq!(got, vec![want.clone()], "split at {split}");
    }
    let Response::Values(v) = want else {
        unreachable!()
    };
    let config = ClusterConfig::parse(&v[0].data).unwrap();
    assert_eq!(config.version, 7);
    let addrs: Vec<String> = config.nodes.iter().map(ConfigNode::address).collect();
    assert_eq!(addrs, ["10.0.0.1:11211", "h2:11212", "[::1]:11213"]);
    // Stock memcached does not know the command: its ERROR is a reply.
    check(b"ERROR\r\n", Expect::Config, Response::Error);
    // The legacy key is an ordinary item.
    let encoded = Request::ConfigGet {
        key: Key::new(b"cluster").unwrap(),
    };
    let mut buf = BytesMut::new();
    encoded.encode(&mut buf);
    assert_eq!(&buf[..], b"config get cluster\r\n");
    assert_eq!(encoded.expect(), Some(Expect::Config));
}

#[test]
fn a_config_reply_that_lies_is_an_error() {
    // Two blocks where one is due.
    let two = b"CONFIG cluster 0 1\r\nx\r\nCONFIG cluster 0 1\r\ny\r\nEND\r\n";
    assert_eq!(
        decode_all(two, &[Expect::Config]),
        Err(ProtoError::TooManyItems { asked: 1 })
    );
    // A CONFIG block is no answer to a get, nor a VALUE to config get.
    assert!(decode_all(b"CONFIG cluster 0 1\r\nx\r\nEND\r\n", &[Expect::values(1)]).is_err());
    assert!(decode_all(b"VALUE cluster 0 1\r\nx\r\nEND\r\n", &[Expect::Config]).is_err());
    // A block longer than announced, and a CAS on a config header.
    assert!(decode_all(b"CONFIG cluster 0 1\r\nxy\r\nEND\r\n", &[Expect::Config]).is_err());
    assert!(decode_all(b"CONFIG cluster 0 1 5\r\nx\r\nEND\r\n", &[Expect::Config]).is_err());
}
