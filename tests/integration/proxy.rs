//! `memgroup proxy` against real memcached: the same scripts sent straight
//! to a memcached and through the proxy get the same bytes back; writes
//! through it land once in every group; a dead server's keys read as misses;
//! a real Python client works through it.

use std::net::SocketAddr;
use std::time::Duration;

use memgroup::client::Client;
use memgroup::proxy::{Proxy, ProxyConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::{Memcached, raw, two_zones};

/// What ends a script's reply: the marker's miss (`mg __end__ k` answers
/// `EN k__end__`), or the connection closing.
const MARKER: &[u8] = b"mg __end__ k\r\n";
const MARKER_REPLY: &[u8] = b"EN k__end__\r\n";

/// Starts a proxy for `client` on a free port.
pub(crate) async fn proxy(client: Client) -> SocketAddr {
    proxy_with(client, free_port()).await
}

/// Listening on a free loopback port, the default settings.
pub(crate) fn free_port() -> ProxyConfig {
    ProxyConfig::listen(["127.0.0.1:0".parse().unwrap()])
}

/// Starts a proxy for `client` with `config`; where it listens.
pub(crate) async fn proxy_with(client: Client, config: ProxyConfig) -> SocketAddr {
    let proxy = Proxy::bind(client, config).await.unwrap();
    let addr = proxy.local_addrs()[0];
    tokio::spawn(proxy.serve());
    addr
}

/// Sends `script` and the marker, and reads until the marker's reply or
/// the close (`<CLOSED>` appended). A script of one line without a newline
/// gets no marker: the line would end with it.
pub(crate) async fn exchange(addr: SocketAddr, script: &[u8]) -> Vec<u8> {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let mut sent = script.to_vec();
    if script.contains(&b'\n') {
        sent.extend_from_slice(MARKER);
    }
    // Written beside the reading: a large script must not wait for its
    // replies to be read.
    let (mut reader, mut writer) = stream.split();
    let write = async {
        let _ = writer.write_all(&sent).await;
    };
    let read = async {
        let mut reply = Vec::new();
        let mut buf = vec![0u8; 1 << 16];
        loop {
            match reader.read(&mut buf).await {
                Ok(0) | Err(_) => {
                    reply.extend_from_slice(b"<CLOSED>");
                    return reply;
                }
                Ok(n) => reply.extend_from_slice(&buf[..n]),
            }
            if reply.ends_with(MARKER_REPLY) {
                reply.truncate(reply.len() - MARKER_REPLY.len());
                return reply;
            }
        }
    };
    let ((), reply) =
        tokio::time::timeout(Duration::from_secs(10), async { tokio::join!(write, read) })
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "no reply to {:?}",
                    String::from_utf8_lossy(&script[..script.len().min(80)])
                )
            });
    reply
}

/// The reply with what differs by server masked: CAS uniques (`VALUE`'s
/// fifth field, `c…` flags, `cas=`) and `la=`.
fn masked(reply: &[u8]) -> String {
    let text = String::from_utf8_lossy(reply);
    let mut out = Vec::new();
    for line in text.split("\r\n") {
        let mut fields: Vec<String> = line.split(' ').map(str::to_string).collect();
        if fields.first().is_some_and(|f| f == "VALUE") && fields.len() == 5 {
            fields[4] = "CAS".into();
        }
        let meta = fields
            .first()
            .is_some_and(|f| ["HD", "VA", "EN", "NF", "NS", "EX", "ME"].contains(&f.as_str()));
        if meta {
            for field in fields.iter_mut().skip(1) {
                if field.starts_with('c') && field[1..].bytes().all(|b| b.is_ascii_digit()) {
                    *field = "cCAS".into();
                } else if field.starts_with("cas=") {
                    *field = "cas=CAS".into();
                } else if field.starts_with("la=") {
                    *field = "la=N".into();
                }
            }
        }
        out.push(fields.join(" "));
    }
    out.join("\r\n")
}

/// Every script: classic and meta commands, their flags, noreply and quiet
/// mode, malformed lines, values too large, bad data chunks, binary keys.
fn scripts() -> Vec<Vec<u8>> {
    let long = "k".repeat(251);
    let big = |head: &str| {
        let mut s = head.as_bytes().to_vec();
        s.extend(std::iter::repeat_n(b'x', 2_000_000));
        s.extend_from_slice(b"\r\nget big\r\n");
        s
    };
    let texts = [
        "set a 0 0 1\r\nx\r\nget a\r\ngets a\r\nget a b a\r\n".to_string(),
        "mg foo v\r\nmg foo v q\r\nmg foo k O123 v t\r\nmg foo q k Oabc\r\nmn\r\n".into(),
        "ms foo 2 T0 F5 O1 k c\r\nhi\r\nmg foo O9 k v f t s c\r\nmg foo s v O999999999999999999999999999999999\r\n".into(),
        "md foo q\r\nmd foo q\r\nmd foo\r\nmn\r\n".into(),
        "ma cnt q\r\nma cnt N0 J5\r\nma cnt q\r\nma cnt v\r\nmn\r\n".into(),
        "set a 0 0 1 noreply\r\nx\r\nset a 0 0 abc noreply\r\nx\r\nget a\r\n".into(),
        "set a 4294967296 0 1\r\nx\r\ngets a\r\nset a -1 0 1\r\nx\r\nset a 1 -1 1\r\ny\r\nget a\r\n".into(),
        format!("get {long}\r\nget a  a   a\r\n"),
        "GET a\r\nget\r\ngets\r\nmg\r\nms foo\r\nmd\r\nmx foo\r\nm\r\n\r\nx\r\n".into(),
        "set a 0 0 1\r\nx\r\ntouch a 10\r\ntouch nope 10\r\ngat 10 a nope a\r\ngats 10 a\r\ngat a\r\n".into(),
        "incr nope 1\r\nset n 0 0 2\r\n10\r\nincr n 5\r\ndecr n 100\r\nincr n 18446744073709551615\r\nincr n -1\r\nincr n abc\r\nset s 0 0 2\r\nab\r\nincr s 1\r\n".into(),
        "verbosity 1\r\nverbosity\r\nverbosity 1 noreply\r\nflush_all 0\r\nflush_all noreply\r\nflush_all abc\r\nquit\r\nversion\r\n".into(),
        "x".repeat(3000),
        "ms k 2 zz\r\nhi\r\nms k 2 T1 T2\r\nhi\r\nms k abc\r\nhi\r\nms k -1\r\nhi\r\nms k 2 MX\r\nhi\r\n".into(),
        "mg k v zz\r\nmg k v v\r\nmg k vv\r\nmg k O\r\nmg k Tabc v\r\nmg k b\r\nmg Zm9v b v k\r\nmg !!! b\r\n".into(),
        "ms Zm9v 2 b k c\r\nhi\r\nmg foo v\r\nmg Zm9v b k v\r\nmd Zm9v b k q\r\nmg foo v\r\n".into(),
        "mg k x\r\nmd k x\r\nmd k zz\r\nma k zz\r\nma k D\r\nma k Dabc\r\nma k MX\r\nme k\r\n".into(),
        "ms k 2\r\nhix\r\nmn\r\nset k 0 0 2\r\nhix\r\nmn\r\nset k 0 0 1 noreply\r\nxyz\r\nmn\r\n".into(),
        format!("mg {long} v\r\nms {long} 2\r\nhi\r\nmn\r\n"),
        "ms k 2 I\r\nhi\r\nmd k I T30\r\nmg k v c\r\nmg k v c\r\nms k 2 I\r\nhi\r\nmg k v\r\n".into(),
        "mg nokey v N30 t\r\nmg nokey v N30 t\r\nmg nokey v s\r\n".into(),
        "ms k 2 q\r\nhi\r\nms k 2 q MR\r\nhi\r\nms k 2 q MP C1\r\nhi\r\nmn\r\n".into(),
        "me nothere\r\nms k 1 T0\r\nx\r\nme k\r\n".into(),
        "mg k v k O1 O2\r\nmg k s s\r\nmg k t T5 t\r\n".into(),
        "set k 0 4294967296 1\r\nx\r\nset k 0 +5 1\r\nx\r\nset k +5 0 1\r\nx\r\nset k -0 0 1\r\nx\r\nset k 0 0 +1\r\nx\r\nincr k +1\r\nset k 0 0 1 foo\r\nx\r\nset k 0 0 1 noreply foo\r\nx\r\n".into(),
        format!("set k 0 0 1\r\nx\r\ngat 10\r\ngat\r\ngats 10 k k\r\nget k {long} k\r\n"),
        "set k 0 0 1\r\nx\r\ndelete k 0\r\ndelete k 0 noreply\r\ndelete k noreply\r\ndelete k 1\r\ndelete k x noreply\r\ndelete\r\n".into(),
        "touch k\r\ntouch k abc\r\ntouch k abc noreply\r\nincr k\r\nincr k 1 noreply\r\nincr k x noreply\r\nverbosity a\r\nverbosity 1 2 3\r\n".into(),
        "mg\r\nms\r\nmd\r\nma\r\nme\r\nmn foo\r\nmg k\r\nmg  k  v\r\n".into(),
        "set k 0 0 1\r\nx\r\ncas k 0 0 1\r\nx\r\ncas k 0 0 1 abc\r\nx\r\ncas k 0 0 1 99 noreply\r\nx\r\ncas nope 0 0 1 1\r\nx\r\ncas k 0 0 1 1\r\ny\r\n".into(),
        "GET / HTTP/1.1\r\n".into(),
        "add a 0 0 1\r\nx\r\nadd a 0 0 1\r\ny\r\nreplace a 0 0 1\r\nz\r\nreplace b 0 0 1\r\nz\r\nappend a 0 0 2\r\n12\r\nprepend a 0 0 2\r\n00\r\nappend nope 0 0 1\r\nx\r\nget a\r\n".into(),
        "set a 5 0 3\r\nabc\r\nmg a s v f t k O5 c h l\r\nmg a\r\nmg a k\r\nmg a q\r\nmn\r\n".into(),
        "set a 0 0 1\nx\r\nget a\nmg a v\n".into(),
        "stats cachedump\r\nstats cachedump 1\r\nstats cachedump x y\r\nstats cachedump 63 1\r\nstats cachedump 64 1\r\nstats cachedump 100000000000 1\r\nstats cachedump 1 -1\r\nstats cachedump 4294967296 0 9\r\n".into(),
        "stats detail\r\nstats detail on\r\nstats detail foo\r\nstats detail dump\r\nstats detail off\r\nstats reset x\r\nstats RESET\r\nstats foo\r\nstats  reset\r\n".into(),
        // 64 megabytes: the limit both memcacheds started with.
        "cache_memlimit\r\ncache_memlimit abc\r\ncache_memlimit -1\r\ncache_memlimit 5\r\ncache_memlimit 5 noreply\r\ncache_memlimit 2000000000\r\ncache_memlimit 4294967296\r\ncache_memlimit 64 noreply x\r\ncache_memlimit 64 x\r\ncache_memlimit +64\r\ncache_memlimit 64 noreply\r\ncache_memlimit 64\r\n".into(),
    ];
    let mut scripts: Vec<Vec<u8>> = texts.into_iter().map(String::into_bytes).collect();
    // Keys memcached takes and memgroup's `Key` refuses (control bytes,
    // DEL): forwarded in base64.
    scripts.extend([
        &b"set a\x01b 3 0 1\r\nx\r\nget a\x01b c a\x01b\r\ngets a\x01b\r\nappend a\x01b 0 0 1\r\ny\r\nprepend a\x01b 0 0 1\r\nw\r\nget a\x01b\r\nadd a\x01b 0 0 1\r\nz\r\nreplace a\x7fb 0 0 1\r\nz\r\ndelete a\x01b\r\ndelete a\x01b\r\n"[..],
        b"set t\tb 0 0 2\r\n10\r\nincr t\tb 5\r\ndecr t\tb 100\r\ntouch t\tb 10\r\ntouch t\x02 10\r\ngat 10 t\tb\r\ngats 10 t\tb\r\nincr nope\x01 1\r\nmg t\tb v\r\n",
        b"set x\x01 0 0 1\r\nx\r\ngets x\x01\r\ncas x\x01 0 0 1 1\r\ny\r\ncas nope\x01 0 0 1 1\r\ny\r\n",
        b"ms t\x01 2 k c T0\r\nhi\r\nmg t\x01 k v O5\r\nmg t\x02 k v O5\r\nma t\x01 q\r\nma c\x01 N0 J3 v k\r\nmd t\x01 k q\r\nmg t\x01 v\r\nmn\r\n",
        // A `\r` inside a key: kept by memcached, sent base64 by the proxy.
        b"set a\rb 0 0 1\r\nx\r\nget a\rb\r\nmg a\rb v k\r\ndelete a\rb\r\nget a\rb\r\n",
    ].map(<[u8]>::to_vec));
    scripts.push(big("set big 0 0 2000000\r\n"));
    scripts.push(big("set big 0 0 2000000 noreply\r\n"));
    scripts.push(big("ms big 2000000 T0\r\n"));
    scripts
}

/// The differential test: each script to a memcached and through the proxy
/// (one group of one other memcached), both flushed first: the same bytes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_script_gets_the_bytes_memcached_gives() {
    let (direct, behind) = (Memcached::spawn(), Memcached::spawn());
    let client = Client::builder()
        .servers(&behind.addr_string())
        .build()
        .unwrap();
    let proxied = proxy(client).await;
    let mut differences = Vec::new();
    let scripts = scripts();
    for script in &scripts {
        exchange(direct.addr(), b"flush_all\r\n").await;
        exchange(proxied, b"flush_all\r\n").await;
        let expected = masked(&exchange(direct.addr(), script).await);
        let got = masked(&exchange(proxied, script).await);
        if expected != got {
            let shown = String::from_utf8_lossy(&script[..script.len().min(120)]).into_owned();
            differences.push(format!(
                "{shown:?}\n  memcached: {expected:?}\n  proxy:     {got:?}"
            ));
        }
    }
    assert!(
        differences.is_empty(),
        "{} of {} scripts differ:\n{}",
        differences.len(),
        scripts.len(),
        differences.join("\n")
    );
}

/// Two zones behind the proxy: each write reaches each group once (the
/// servers' own `cmd_set`), a `gets` then `cas` through the proxy is decided
/// at the arbiter, and a read after `set … noreply` on the same connection
/// sees the new value.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_through_the_proxy_land_once_in_every_group() {
    let (sg1, sg2, client) = two_zones(|b| b);
    let proxied = proxy(client).await;
    let mut script = Vec::new();
    for i in 0..50 {
        script.extend_from_slice(format!("set key{i} 3 0 6\r\nvalue{}\r\n", i % 10).as_bytes());
    }
    let reply = exchange(proxied, &script).await;
    assert_eq!(
        reply,
        b"STORED\r\n".repeat(50),
        "{}",
        String::from_utf8_lossy(&reply)
    );
    for server in [&sg1, &sg2] {
        for i in 0..50 {
            let copy = raw::copy(server.addr(), format!("key{i}").as_bytes());
            let (value, flags, _) = copy.unwrap_or_else(|| panic!("key{i} missing"));
            assert_eq!((value, flags), (format!("value{}", i % 10).into_bytes(), 3));
        }
    }
    // A write's background parts (the convergence check reads, never sets).
    crate::support::eventually("every group's sets counted", || {
        raw::stat(sg1.addr(), "cmd_set") == 50 && raw::stat(sg2.addr(), "cmd_set") == 50
    })
    .await;
    // gets → cas: the CAS unique is the arbiter's, so the cas applies.
    let reply = exchange(proxied, b"gets key1\r\n").await;
    let text = String::from_utf8_lossy(&reply).into_owned();
    let unique = text
        .split("\r\n")
        .next()
        .unwrap()
        .split(' ')
        .nth(4)
        .unwrap()
        .to_string();
    let cas = format!("cas key1 0 0 3 {unique}\r\nnew\r\n");
    assert_eq!(exchange(proxied, cas.as_bytes()).await, b"STORED\r\n");
    assert_eq!(exchange(proxied, cas.as_bytes()).await, b"EXISTS\r\n");
    for server in [&sg1, &sg2] {
        let copy = raw::copy(server.addr(), b"key1");
        assert!(
            copy.as_ref().is_none_or(|(v, _, _)| v == b"new"),
            "{copy:?}"
        );
    }
    // noreply then read, on one connection.
    let reply = exchange(proxied, b"set fresh 0 0 3 noreply\r\nnew\r\nget fresh\r\n").await;
    assert_eq!(reply, b"VALUE fresh 0 3\r\nnew\r\nEND\r\n");
}

/// One group of two servers, one killed: a multi-get through the proxy
/// answers the live server's hits and `END`, the dead one's keys misses.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multiget_reads_a_dead_servers_keys_as_misses() {
    let (a, mut b) = (Memcached::spawn(), Memcached::spawn());
    let client = Client::builder()
        .servers(&format!("{},{}", a.addr_string(), b.addr_string()))
        .timeout(Duration::from_millis(500))
        .build()
        .unwrap();
    let route = client.clone();
    let proxied = proxy(client).await;
    let keys: Vec<String> = (0..40).map(|i| format!("k{i}")).collect();
    let mut script = Vec::new();
    for key in &keys {
        script.extend_from_slice(format!("set {key} 0 0 1\r\nx\r\n").as_bytes());
    }
    exchange(proxied, &script).await;
    b.kill();
    let on_a: Vec<&String> = keys
        .iter()
        .filter(|k| raw::get(a.addr(), k.as_bytes()).is_some())
        .collect();
    assert!(
        !on_a.is_empty() && on_a.len() < keys.len(),
        "both servers hold keys"
    );
    let line = format!("get {}\r\n", keys.join(" "));
    let reply = exchange(proxied, line.as_bytes()).await;
    let expected: Vec<u8> = on_a
        .iter()
        .flat_map(|k| format!("VALUE {k} 0 1\r\nx\r\n").into_bytes())
        .chain(b"END\r\n".iter().copied())
        .collect();
    assert_eq!(
        String::from_utf8_lossy(&reply),
        String::from_utf8_lossy(&expected)
    );
    drop(route);
}

/// python-memcached through the proxy in front of two zones: what it
/// writes is in both groups, and it reads it back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_memcached_works_through_the_proxy() {
    let (sg1, sg2, client) = two_zones(|b| b);
    let proxied = proxy(client).await;
    let script = format!(
        "import memcache\n\
         mc = memcache.Client(['{proxied}'])\n\
         for i in range(20):\n    assert mc.set('py:%d' % i, 'value %d' % i)\n\
         assert mc.get('py:7') == 'value 7'\n\
         got = mc.get_multi(['py:%d' % i for i in range(20)] + ['nope'])\n\
         assert len(got) == 20, got\n\
         assert mc.add('py:1', 'again') == 0\n\
         assert mc.incr('nope') is None\n\
         mc.set('n', 5)\n\
         assert mc.incr('n', 3) == 8\n\
         assert mc.delete('py:19')\n\
         print('ok')\n"
    );
    let python = crate::interop::python();
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(python)
            .args(["-c", &script])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(
        out.status.success() && out.stdout == b"ok\n",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    crate::support::eventually("both groups hold python's writes", || {
        [&sg1, &sg2].iter().all(|server| {
            (0..19).all(|i| {
                raw::get(server.addr(), format!("py:{i}").as_bytes())
                    == Some(format!("value {i}").into_bytes())
            }) && raw::get(server.addr(), b"py:19").is_none()
        })
    })
    .await;
}

/// Two zones, the meta commands: a plain `ms` answers `HD` alone (the
/// client's own CAS receipt stays out of the reply), `mg … c` reads the
/// arbiter's CAS so a `ms … C` with it applies, and `gat` and `gats` set the
/// expiry of every group's copy, not only the copy read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn meta_cas_and_gat_hold_across_two_zones() {
    // Reads from sg2; the arbiter is sg1 (the first by name).
    let (sg1, sg2, client) = two_zones(|b| b.zone("sg2"));
    // The servers' CAS counters apart, so a copy's CAS names its server.
    for _ in 0..3 {
        raw::set(sg1.addr(), b"elsewhere", b"x");
    }
    let proxied = proxy(client).await;
    assert_eq!(exchange(proxied, b"ms k 2 T0\r\nhi\r\n").await, b"HD\r\n");
    let reply = String::from_utf8(exchange(proxied, b"mg k c v\r\n").await).unwrap();
    let cas = reply
        .split([' ', '\r'])
        .find_map(|t| t.strip_prefix('c'))
        .unwrap_or_else(|| panic!("{reply:?}"))
        .to_string();
    let set = format!("ms k 2 C{cas}\r\nho\r\n");
    assert_eq!(exchange(proxied, set.as_bytes()).await, b"HD\r\n");
    assert_eq!(exchange(proxied, set.as_bytes()).await, b"EX\r\n");
    let reply = exchange(proxied, b"set g 0 0 1\r\nx\r\ngat 5000 g\r\n").await;
    assert_eq!(reply, b"STORED\r\nVALUE g 0 1\r\nx\r\nEND\r\n");
    let reply = exchange(proxied, b"set h 0 0 1\r\nx\r\ngats 7000 h\r\n").await;
    assert!(reply.starts_with(b"STORED\r\nVALUE h 0 1 "), "{reply:?}");
    crate::support::eventually("both copies touched", || {
        [&sg1, &sg2].iter().all(|server| {
            let ttl = |key: &[u8], around: i64| {
                raw::copy(server.addr(), key)
                    .is_some_and(|(_, _, ttl)| (around - 10..=around).contains(&ttl))
            };
            ttl(b"g", 5000) && ttl(b"h", 7000)
        })
    })
    .await;
}

/// Keys with control bytes (memcaslap's start with eight 0x10) go through
/// the proxy raw and land on the server the ketama ring names for their raw
/// bytes, as a classic client sending them would place them; none is
/// stored under another form.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_byte_keys_land_where_their_raw_bytes_hash() {
    let servers = [Memcached::spawn(), Memcached::spawn(), Memcached::spawn()];
    let list: Vec<String> = servers.iter().map(Memcached::addr_string).collect();
    let client = Client::builder()
        .servers(&list.join(","))
        .hash(memgroup::client::HashStrategy::Ketama)
        .build()
        .unwrap();
    let topology = client.topology();
    let proxied = proxy(client).await;
    let keys: Vec<Vec<u8>> = (0..60)
        .map(|i| {
            let mut key = vec![0x10; 8];
            key.extend_from_slice(format!("key\x01{i}\x7f").as_bytes());
            key
        })
        .collect();
    let mut script = Vec::new();
    for key in &keys {
        script.extend_from_slice(b"set ");
        script.extend_from_slice(key);
        script.extend_from_slice(b" 0 0 1\r\nx\r\n");
    }
    assert_eq!(exchange(proxied, &script).await, b"STORED\r\n".repeat(60));
    let group = topology.group(topology.groups()[0].id());
    let mut placed = [0usize; 3];
    for key in &keys {
        let named = topology.servers()[group.server_for(key).0].to_string();
        for (i, server) in servers.iter().enumerate() {
            let mut get = b"get ".to_vec();
            get.extend_from_slice(key);
            get.extend_from_slice(b"\r\n");
            let held = exchange(server.addr(), &get).await != b"END\r\n";
            assert_eq!(
                held,
                server.addr_string() == named,
                "{key:?} on {}",
                server.addr_string()
            );
            placed[i] += usize::from(held);
        }
    }
    assert!(
        placed.iter().all(|&n| n > 0),
        "every server holds some: {placed:?}"
    );
}

/// Two zones of two servers, one server of the local zone SIGKILLed under
/// way: every set through the proxy is still `STORED` (its other zone's
/// copy, the dead one's repaired later) and every get a hit (fallback to
/// the other zone): no error reaches the proxy's client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_server_costs_the_proxys_clients_no_error() {
    let mut sg1 = [Memcached::spawn(), Memcached::spawn()];
    let sg2 = [Memcached::spawn(), Memcached::spawn()];
    let list = |g: &[Memcached]| {
        g.iter()
            .map(Memcached::addr_string)
            .collect::<Vec<_>>()
            .join(",")
    };
    let client = Client::builder()
        .evcache_groups(&format!("sg1={};sg2={}", list(&sg1), list(&sg2)))
        .zone("sg1")
        .build()
        .unwrap();
    let proxied = proxy(client).await;
    let batch = |from: usize| {
        let mut script = Vec::new();
        for i in from..from + 100 {
            script.extend_from_slice(format!("set k{i} 0 0 2\r\nv{}\r\n", i % 10).as_bytes());
        }
        script
    };
    assert_eq!(
        exchange(proxied, &batch(0)).await,
        b"STORED\r\n".repeat(100)
    );
    sg1[0].kill();
    assert_eq!(
        exchange(proxied, &batch(100)).await,
        b"STORED\r\n".repeat(100)
    );
    let mut gets = Vec::new();
    let mut expected = Vec::new();
    for i in 0..200 {
        gets.extend_from_slice(format!("get k{i}\r\n").as_bytes());
        expected.extend_from_slice(format!("VALUE k{i} 0 2\r\nv{}\r\nEND\r\n", i % 10).as_bytes());
    }
    let reply = exchange(proxied, &gets).await;
    assert_eq!(
        String::from_utf8_lossy(&reply),
        String::from_utf8_lossy(&expected)
    );
}

/// A client that sends requests and never reads the replies is cut off once
/// a reply has waited `write_timeout` for it (clock held, moved by the
/// test), while another client is served meanwhile.
#[tokio::test(start_paused = true)]
async fn a_client_that_stops_reading_is_disconnected() {
    let server = Memcached::spawn();
    let value = vec![b'v'; 500_000];
    raw::set(server.addr(), b"big", &value);
    let _clock = crate::support::HeldClock::hold();
    let mut config = free_port();
    config.write_timeout = Duration::from_secs(10);
    let addr = proxy_with(crate::proxy_limits::client_of(&server), config).await;
    let asked = 60;
    let mut hog = TcpStream::connect(addr).await.unwrap();
    hog.write_all(&b"get big\r\n".repeat(asked)).await.unwrap();
    for _ in 0..20 {
        crate::support::let_io_happen().await;
    }
    // Another client is served while the hog's replies wait.
    assert_eq!(
        exchange(addr, b"version\r\n").await.len(),
        b"VERSION 1.6.18-memgroup-0.1.0\r\n".len()
    );
    tokio::time::advance(Duration::from_secs(11)).await;
    for _ in 0..5 {
        crate::support::let_io_happen().await;
    }
    // Closed: what the socket buffers held, then the end, short of all.
    let mut got = Vec::new();
    hog.read_to_end(&mut got).await.unwrap();
    let full = asked * (value.len() + "VALUE big 0 500000\r\n\r\nEND\r\n".len());
    assert!(
        got.len() < full,
        "{} of {full} bytes: not cut off",
        got.len()
    );
}

/// `stats` counts what the proxy served under memcached's names; `stats
/// reset` zeroes them; a connection closed for the binary protocol is
/// counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stats_count_what_the_proxy_served() {
    let server = Memcached::spawn();
    let client = Client::builder()
        .servers(&server.addr_string())
        .build()
        .unwrap();
    let proxied = proxy(client).await;
    exchange(proxied, b"set a 0 0 1\r\nx\r\nget a b a\r\nmg c v\r\n").await;
    assert_eq!(exchange(proxied, b"\x80\x00\x00\x00").await, b"<CLOSED>");
    let reply = exchange(proxied, b"stats\r\n").await;
    assert!(
        reply.ends_with(b"END\r\n"),
        "{}",
        String::from_utf8_lossy(&reply)
    );
    assert_eq!(stat(&reply, "cmd_set"), 1);
    // Each exchange's end marker (`mg __end__ k`) is a get too: a miss.
    assert_eq!(stat(&reply, "cmd_get"), 5);
    assert_eq!(stat(&reply, "get_hits"), 2);
    assert_eq!(stat(&reply, "get_misses"), 3);
    assert_eq!(stat(&reply, "protocol_closes"), 1);
    assert!(stat(&reply, "curr_connections") >= 1);
    assert_eq!(exchange(proxied, b"stats reset\r\n").await, b"RESET\r\n");
    // Only the reset exchange's marker since.
    assert_eq!(stat(&exchange(proxied, b"stats\r\n").await, "cmd_get"), 1);
    // memcached's sections answered as by a memcached holding nothing.
    assert_eq!(exchange(proxied, b"stats items\r\n").await, b"END\r\n");
    assert_eq!(
        exchange(proxied, b"stats slabs\r\n").await,
        b"STAT active_slabs 0\r\nSTAT total_malloced 0\r\nEND\r\n"
    );
    assert_eq!(exchange(proxied, b"stats settings\r\n").await, b"ERROR\r\n");
}

/// `cache_memlimit` reaches every server of every group (their own
/// `limit_maxbytes`); a proxy told to refuse it leaves them alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_memlimit_reaches_every_server() {
    let servers = [Memcached::spawn(), Memcached::spawn(), Memcached::spawn()];
    let [a, b, c] = servers.each_ref().map(Memcached::addr_string);
    let client = || {
        Client::builder()
            .evcache_groups(&format!("zone-a={a},{b};zone-b={c}"))
            .build()
            .unwrap()
    };
    async fn maxbytes(server: &Memcached) -> String {
        let reply = exchange(server.addr(), b"stats\r\n").await;
        String::from_utf8_lossy(&reply)
            .lines()
            .find_map(|l| l.strip_prefix("STAT limit_maxbytes ").map(str::to_string))
            .unwrap()
    }
    let proxied = proxy(client()).await;
    assert_eq!(
        exchange(proxied, b"cache_memlimit 100\r\n").await,
        b"OK\r\n"
    );
    for server in &servers {
        assert_eq!(maxbytes(server).await, (100u64 << 20).to_string());
    }
    let mut config = ProxyConfig::listen(["127.0.0.1:0".parse().unwrap()]);
    config.allow_cache_memlimit = false;
    let refusing = Proxy::bind(client(), config).await.unwrap();
    let addr = refusing.local_addrs()[0];
    tokio::spawn(refusing.serve());
    assert_eq!(
        exchange(addr, b"cache_memlimit 200\r\n").await,
        b"SERVER_ERROR cache_memlimit is disabled on this proxy\r\n"
    );
    for server in &servers {
        assert_eq!(maxbytes(server).await, (100u64 << 20).to_string());
    }
}

/// A key prefix stays the proxy's: the servers hold `app:k`, the client
/// sees `k` in `VALUE` lines and meta `k` flags.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_prefix_is_added_on_the_way_in_and_gone_on_the_way_out() {
    let server = Memcached::spawn();
    let client = Client::builder()
        .servers(&server.addr_string())
        .key_prefix("app:")
        .build()
        .unwrap();
    let proxied = proxy(client).await;
    let reply = exchange(
        proxied,
        b"set k 0 0 1\r\nx\r\nget k\r\nmg k k v\r\nms j 1 k\r\ny\r\n",
    )
    .await;
    assert_eq!(
        String::from_utf8_lossy(&reply),
        "STORED\r\nVALUE k 0 1\r\nx\r\nEND\r\nVA 1 kk\r\nx\r\nHD kj\r\n"
    );
    assert_eq!(
        raw::get(server.addr(), b"app:k").as_deref(),
        Some(&b"x"[..])
    );
    assert_eq!(
        raw::get(server.addr(), b"app:j").as_deref(),
        Some(&b"y"[..])
    );
    assert_eq!(raw::get(server.addr(), b"k"), None);
}

/// A write that misses its policy (`all`, a group's only server killed) is
/// `SERVER_ERROR` and the reason; the same write with `noreply` says nothing
/// and is counted in `stats` (`noreply_failures`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_that_misses_its_policy_is_a_server_error() {
    let (sg1, mut sg2, client) = two_zones(|b| b.write_policy(memgroup::client::WritePolicy::All));
    let proxied = proxy(client).await;
    assert_eq!(
        exchange(proxied, b"set k 0 0 1\r\nx\r\n").await,
        b"STORED\r\n"
    );
    sg2.kill();
    let reply = String::from_utf8(exchange(proxied, b"set k 0 0 1\r\ny\r\n").await).unwrap();
    assert!(
        reply.starts_with("SERVER_ERROR ")
            && reply.ends_with("\r\n")
            && reply.matches("\r\n").count() == 1,
        "{reply:?}"
    );
    let reply = exchange(proxied, b"set k 0 0 1 noreply\r\nz\r\nstats\r\n").await;
    let text = String::from_utf8_lossy(&reply);
    assert!(text.starts_with("STAT "), "nothing before stats: {text:?}");
    assert!(text.contains("STAT noreply_failures 1\r\n"), "{text}");
    drop(sg1);
}

/// The number a `stats` reply gives `name`.
pub(crate) fn stat(reply: &[u8], name: &str) -> u64 {
    String::from_utf8_lossy(reply)
        .lines()
        .find_map(|l| l.strip_prefix(&format!("STAT {name} ")).map(str::to_string))
        .unwrap_or_else(|| panic!("no {name}"))
        .parse()
        .unwrap()
}
