//! The codec against a real memcached, over a plain blocking `TcpStream`:
//! proves memcached accepts what we encode and we decode what it sends.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use bytes::BytesMut;
use memgroup::proto::{
    ArithMode, Decoder, Expect, Key, MetaFlag, MetaStatus, Request, Response, SetMode,
    StoreCommand, base64_encode,
};

use crate::support::Memcached;

struct Conn {
    stream: TcpStream,
    decoder: Decoder,
    buf: BytesMut,
}

impl Conn {
    fn open(server: &Memcached) -> Conn {
        let stream = TcpStream::connect(server.addr()).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        Conn {
            stream,
            decoder: Decoder::default(),
            buf: BytesMut::with_capacity(16 * 1024),
        }
    }

    fn send(&mut self, requests: &[Request<'_>]) {
        let mut out = BytesMut::new();
        for r in requests {
            r.encode(&mut out);
        }
        self.stream.write_all(&out).unwrap();
    }

    fn recv(&mut self, expect: Expect) -> Response {
        loop {
            if let Some(r) = self.decoder.decode(&mut self.buf, expect).unwrap() {
                return r;
            }
            let mut chunk = [0u8; 8192];
            let n = self.stream.read(&mut chunk).unwrap();
            assert!(n > 0, "server closed the connection");
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    fn call(&mut self, request: Request<'_>) -> Response {
        self.send(&[request]);
        self.recv(request.expect().expect("request has a reply"))
    }
}

fn key(s: &str) -> Key<'_> {
    Key::new(s.as_bytes()).unwrap()
}

fn set<'a>(k: &'a str, data: &'a [u8], flags: u32) -> Request<'a> {
    Request::Store {
        command: StoreCommand::Set,
        key: key(k),
        flags,
        exptime: 0,
        data,
        noreply: false,
    }
}

fn stat(conn: &mut Conn, name: &str) -> u64 {
    let Response::Stats(stats) = conn.call(Request::Stats { arg: None }) else {
        panic!("stats")
    };
    stats
        .iter()
        .find(|s| s.name_str() == name)
        .and_then(|s| s.value_str().parse().ok())
        .unwrap_or_else(|| panic!("no stat {name}"))
}

#[test]
fn classic_commands_round_trip() {
    let server = Memcached::spawn();
    let mut c = Conn::open(&server);

    assert_eq!(c.call(set("foo", b"bar", 5)), Response::Stored);
    let store = |command, data| Request::Store {
        command,
        key: key("foo"),
        flags: 0,
        exptime: 0,
        data,
        noreply: false,
    };
    assert_eq!(c.call(store(StoreCommand::Add, b"x")), Response::NotStored);
    assert_eq!(c.call(store(StoreCommand::Append, b">")), Response::Stored);
    assert_eq!(c.call(store(StoreCommand::Prepend, b"<")), Response::Stored);
    let keys = [key("foo"), key("missing")];
    let Response::Values(v) = c.call(Request::Get { keys: &keys }) else {
        panic!()
    };
    assert_eq!(v.len(), 1);
    assert_eq!(
        (&v[0].key[..], v[0].flags, &v[0].data[..]),
        (&b"foo"[..], 5, &b"<bar>"[..])
    );
    assert_eq!(v[0].cas, None);

    let Response::Values(v) = c.call(Request::Gets { keys: &keys[..1] }) else {
        panic!()
    };
    let cas = v[0].cas.expect("gets returns cas");
    assert_eq!(
        c.call(store(StoreCommand::Cas(cas + 1000), b"z")),
        Response::Exists
    );
    assert_eq!(
        c.call(store(StoreCommand::Cas(cas), b"z")),
        Response::Stored
    );
    assert_eq!(c.call(store(StoreCommand::Replace, b"r")), Response::Stored);
    let missing = Request::Store {
        command: StoreCommand::Replace,
        key: key("missing"),
        flags: 0,
        exptime: 0,
        data: b"r",
        noreply: false,
    };
    assert_eq!(c.call(missing), Response::NotStored);

    assert_eq!(c.call(set("n", b"10", 0)), Response::Stored);
    let arith = |increment, delta| Request::Arith {
        increment,
        key: key("n"),
        delta,
        noreply: false,
    };
    assert_eq!(c.call(arith(true, 5)), Response::Number(15));
    assert_eq!(c.call(arith(false, 100)), Response::Number(0));
    assert!(matches!(
        c.call(Request::Arith {
            increment: true,
            key: key("foo"),
            delta: 1,
            noreply: false
        }),
        Response::ClientError(_)
    ));
    let touch = |k| Request::Touch {
        key: key(k),
        exptime: 100,
        noreply: false,
    };
    assert_eq!(c.call(touch("n")), Response::Touched);
    assert_eq!(c.call(touch("missing")), Response::NotFound);

    let Response::Values(v) = c.call(Request::Gat {
        exptime: 100,
        keys: &[key("n")],
    }) else {
        panic!()
    };
    assert_eq!((v.len(), v[0].cas), (1, None));
    let Response::Values(v) = c.call(Request::Gats {
        exptime: 100,
        keys: &[key("n")],
    }) else {
        panic!()
    };
    assert!(v[0].cas.is_some());

    let delete = |k| Request::Delete {
        key: key(k),
        noreply: false,
    };
    assert_eq!(c.call(delete("n")), Response::Deleted);
    assert_eq!(c.call(delete("n")), Response::NotFound);

    let Response::Version(v) = c.call(Request::Version) else {
        panic!()
    };
    assert!(v.starts_with(b"1."), "{v:?}");
    assert_eq!(
        c.call(Request::Verbosity {
            level: 0,
            noreply: false
        }),
        Response::Ok
    );
    let Response::Stats(s) = c.call(Request::Stats {
        arg: Some(key("settings")),
    }) else {
        panic!()
    };
    assert!(s.iter().any(|s| s.name_str() == "maxbytes"));
    assert!(matches!(
        c.call(Request::Stats {
            arg: Some(key("items"))
        }),
        Response::Stats(_)
    ));
    // `stats reset` answers `RESET` and zeroes the counters.
    assert!(stat(&mut c, "cmd_get") > 0);
    assert_eq!(
        c.call(Request::Stats {
            arg: Some(key("reset"))
        }),
        Response::Ok
    );
    assert_eq!(stat(&mut c, "cmd_get"), 0);

    // noreply commands get no answer: the next reply belongs to the next request.
    c.send(&[
        Request::Store {
            command: StoreCommand::Set,
            key: key("q"),
            flags: 1,
            exptime: 0,
            data: b"1",
            noreply: true,
        },
        Request::Delete {
            key: key("nothing"),
            noreply: true,
        },
        Request::Version,
    ]);
    assert!(matches!(c.recv(Expect::Single), Response::Version(_)));

    assert_eq!(
        c.call(Request::FlushAll {
            delay: None,
            noreply: false
        }),
        Response::Ok
    );
    assert_eq!(
        c.call(Request::Get { keys: &keys }),
        Response::Values(Default::default())
    );
    assert_eq!(
        c.call(Request::FlushAll {
            delay: Some(0),
            noreply: false
        }),
        Response::Ok
    );

    // quit: the server closes the connection without a reply.
    c.send(&[Request::Quit]);
    let mut rest = Vec::new();
    assert_eq!(c.stream.read_to_end(&mut rest).unwrap(), 0);
}

#[test]
fn meta_commands_round_trip() {
    let server = Memcached::spawn();
    let mut c = Conn::open(&server);

    let ms = Request::MetaSet {
        key: key("mk"),
        data: b"hi",
        flags: &[MetaFlag::Ttl(60), MetaFlag::SetFlags(7)],
    };
    assert!(matches!(c.call(ms), Response::Meta(m) if m.status == MetaStatus::Hd));

    let mg = Request::MetaGet {
        key: key("mk"),
        flags: &[
            MetaFlag::ReturnValue,
            MetaFlag::ReturnFlags,
            MetaFlag::ReturnTtl,
            MetaFlag::ReturnCas,
            MetaFlag::ReturnKey,
            MetaFlag::ReturnSize,
            MetaFlag::Opaque(99),
        ],
    };
    let Response::Meta(m) = c.call(mg) else {
        panic!()
    };
    assert_eq!(m.status, MetaStatus::Va);
    assert_eq!(m.value.as_deref(), Some(&b"hi"[..]));
    assert_eq!(m.flag_u64(b'f'), Some(7));
    assert!((1..=60).contains(&m.ttl().unwrap()));
    assert_eq!(m.flag(b'k'), Some(&b"mk"[..]));
    assert_eq!(m.flag_u64(b's'), Some(2));
    assert_eq!(m.flag_u64(b'O'), Some(99));
    let cas = m.flag_u64(b'c').unwrap();

    let miss = Request::MetaGet {
        key: key("nope"),
        flags: &[MetaFlag::ReturnValue],
    };
    assert!(matches!(c.call(miss), Response::Meta(m) if m.status == MetaStatus::En));

    // Add mode on an existing key: NS; compare-and-swap with a wrong CAS: EX.
    let add = Request::MetaSet {
        key: key("mk"),
        data: b"x",
        flags: &[MetaFlag::SetMode(SetMode::Add)],
    };
    assert!(matches!(c.call(add), Response::Meta(m) if m.status == MetaStatus::Ns));
    let bad_cas = Request::MetaSet {
        key: key("mk"),
        data: b"x",
        flags: &[MetaFlag::CompareCas(cas + 1)],
    };
    assert!(matches!(c.call(bad_cas), Response::Meta(m) if m.status == MetaStatus::Ex));
    let good_cas = Request::MetaSet {
        key: key("mk"),
        data: b"xy",
        flags: &[MetaFlag::CompareCas(cas)],
    };
    assert!(matches!(c.call(good_cas), Response::Meta(m) if m.status == MetaStatus::Hd));

    let me = Request::MetaDebug { key: key("mk") };
    let Response::Meta(m) = c.call(me) else {
        panic!()
    };
    assert_eq!(m.status, MetaStatus::Me);
    assert!(m.flags.starts_with(b"mk "), "{:?}", m.flags);

    // Arithmetic: auto-create with J, then increment and decrement.
    let ma = |flags| Request::MetaArith {
        key: key("cnt"),
        flags,
    };
    let Response::Meta(m) = c.call(ma(&[
        MetaFlag::Vivify(0),
        MetaFlag::Initial(5),
        MetaFlag::ReturnValue,
    ])) else {
        panic!()
    };
    assert_eq!(m.value.as_deref(), Some(&b"5"[..]));
    let Response::Meta(m) = c.call(ma(&[MetaFlag::Delta(10), MetaFlag::ReturnValue])) else {
        panic!()
    };
    assert_eq!(m.value.as_deref(), Some(&b"15"[..]));
    let Response::Meta(m) = c.call(ma(&[
        MetaFlag::ArithMode(ArithMode::Decrement),
        MetaFlag::Delta(100),
        MetaFlag::ReturnValue,
    ])) else {
        panic!()
    };
    assert_eq!(m.value.as_deref(), Some(&b"0"[..]));

    // Quiet mode: a miss of mg and a successful md say nothing, a failed md
    // still answers NF; mn marks the end of the batch.
    assert!(matches!(c.call(set("qk", b"1", 0)), Response::Stored));
    c.send(&[
        Request::MetaGet {
            key: key("absent"),
            flags: &[MetaFlag::Quiet, MetaFlag::ReturnValue],
        },
        Request::MetaDelete {
            key: key("qk"),
            flags: &[MetaFlag::Quiet],
        },
        Request::MetaDelete {
            key: key("qk"),
            flags: &[MetaFlag::Quiet],
        },
        Request::MetaNoop,
    ]);
    assert!(matches!(c.recv(Expect::Single), Response::Meta(m) if m.status == MetaStatus::Nf));
    assert!(matches!(c.recv(Expect::Single), Response::Meta(m) if m.status == MetaStatus::Mn));
    let md = Request::MetaDelete {
        key: key("mk"),
        flags: &[],
    };
    assert!(matches!(c.call(md), Response::Meta(m) if m.status == MetaStatus::Hd));
    assert!(matches!(c.call(md), Response::Meta(m) if m.status == MetaStatus::Nf));

    // A binary key through base64 (b flag).
    let mut b64 = Vec::new();
    base64_encode(b"bin\r\nkey \x00", &mut b64);
    let bkey = Key::new(&b64).unwrap();
    let ms = Request::MetaSet {
        key: bkey,
        data: b"binary",
        flags: &[MetaFlag::Base64Key],
    };
    assert!(matches!(c.call(ms), Response::Meta(m) if m.status == MetaStatus::Hd));
    let mg = Request::MetaGet {
        key: bkey,
        flags: &[MetaFlag::Base64Key, MetaFlag::ReturnValue],
    };
    let Response::Meta(m) = c.call(mg) else {
        panic!()
    };
    assert_eq!(m.value.as_deref(), Some(&b"binary"[..]));
}

#[test]
fn pipelined_values_and_limits() {
    let server = Memcached::spawn();
    let mut c = Conn::open(&server);
    // 1000 sets and gets written in one go, replies paired in FIFO order.
    let keys: Vec<String> = (0..1000).map(|i| format!("pipe:{i}")).collect();
    let values: Vec<Vec<u8>> = (0..1000)
        .map(|i| vec![b'a' + (i % 26) as u8; i % 300])
        .collect();
    let requests: Vec<Request<'_>> = keys
        .iter()
        .zip(&values)
        .map(|(k, v)| set(k, v, 3))
        .collect();
    c.send(&requests);
    for _ in &requests {
        assert_eq!(c.recv(Expect::Single), Response::Stored);
    }
    let key_list: Vec<Key<'_>> = keys.iter().map(|k| key(k)).collect();
    c.send(&[Request::Get { keys: &key_list }]);
    let Response::Values(got) = c.recv(Expect::values(usize::MAX)) else {
        panic!()
    };
    assert_eq!(got.len(), 1000);
    for (i, v) in got.iter().enumerate() {
        assert_eq!(v.key, keys[i].as_bytes());
        assert_eq!(v.data, values[i]);
    }

    // A value of exactly 1 MiB minus overhead is stored and read back whole.
    let big = vec![7u8; 1000 * 1000];
    assert_eq!(c.call(set("big", &big, 0)), Response::Stored);
    let Response::Values(got) = c.call(Request::Get {
        keys: &[key("big")],
    }) else {
        panic!()
    };
    assert_eq!(got[0].data.len(), big.len());

    // Over the server's item size limit: the server says so and stays in sync.
    let too_big = vec![1u8; 2 * 1024 * 1024];
    assert!(matches!(
        c.call(set("huge", &too_big, 0)),
        Response::ServerError(_)
    ));
    assert!(matches!(c.call(Request::Version), Response::Version(_)));
    assert!(stat(&mut c, "cmd_set") >= 1001);
}
