//! memcached's ASCII authentication in front of `memgroup proxy`: the same
//! script gets the same bytes from a `memcached -Y` and from the proxy
//! given that file; nothing a client sends before it logs in reaches the
//! servers; memgroup's own client logs in to it as to a memcached.

use memgroup::client::{Client, Credentials};
use memgroup::proxy::Logins;

use crate::proxy::{free_port, proxy_with};
use crate::proxy_limits::client_of;
use crate::support::tempdir::Dir;
use crate::support::{Memcached, raw};

/// Sends each step on one connection and reads its reply (to `END` after a
/// `get`, else one line) before the next.
async fn one_at_a_time(addr: std::net::SocketAddr, steps: &[&[u8]]) -> Vec<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut replies = Vec::new();
    for step in steps {
        stream.write_all(step).await.unwrap();
        let end: &[u8] = if step.starts_with(b"get ") && replies.len() > 1 {
            b"END\r\n"
        } else {
            b"\r\n"
        };
        let mut reply = Vec::new();
        let mut byte = [0u8; 1];
        while !reply.ends_with(end) {
            assert_eq!(stream.read(&mut byte).await.unwrap(), 1, "closed");
            reply.push(byte[0]);
        }
        replies.push(String::from_utf8_lossy(&reply).into_owned());
    }
    replies
}

/// A proxy for `server` requiring the logins of `file`.
async fn login_proxy(server: &Memcached, file: &std::path::Path) -> std::net::SocketAddr {
    let mut config = free_port();
    config.logins = Some(Logins::read(file).unwrap());
    proxy_with(client_of(server), config).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logins_in_front_answer_as_memcached_and_keep_the_servers_untouched() {
    let dir = Dir::new("proxy-login");
    let file = dir.path().join("auth");
    std::fs::write(&file, "app:secret\nother:pw2\n").unwrap();
    let memcached = Memcached::spawn_with(&["-Y", file.to_str().unwrap()]);
    let behind = Memcached::spawn();
    let proxied = login_proxy(&behind, &file).await;
    // Before the login: refused (quit too, as memcached does), a token
    // without a space, a wrong password, a login by add; then the login
    // (noreply answered all the same) and ordinary commands. One step at a
    // time, as a client logs in (memcached drops replies to a pipelined
    // batch sent before its login).
    let steps: [&[u8]; 10] = [
        b"get k\r\n",
        b"mn\r\n",
        b"quit\r\n",
        b"set k 0 0 3\r\nabc\r\n",
        b"set x 0 0 9\r\napp wrong\r\n",
        b"add x 0 0 10\r\napp secret\r\n",
        b"set x 0 0 10 noreply\r\napp secret\r\n",
        b"set k 0 0 1\r\nv\r\n",
        b"get k\r\n",
        b"mn\r\n",
    ];
    let from_memcached = one_at_a_time(memcached.addr(), &steps).await;
    let from_proxy = one_at_a_time(proxied, &steps).await;
    assert_eq!(from_proxy, from_memcached);
    assert_eq!(
        from_proxy.concat(),
        "CLIENT_ERROR unauthenticated\r\nCLIENT_ERROR unauthenticated\r\n\
         CLIENT_ERROR unauthenticated\r\nCLIENT_ERROR bad authentication token format\r\n\
         CLIENT_ERROR authentication failure\r\nCLIENT_ERROR unauthenticated\r\nSTORED\r\n\
         STORED\r\nVALUE k 0 1\r\nv\r\nEND\r\nMN\r\n"
    );
    // The server behind saw the set and the get after the login, nothing
    // before it: not the login's `set x`.
    assert_eq!(raw::stat(behind.addr(), "cmd_set"), 1);
    assert_eq!(raw::get(behind.addr(), b"x"), None);
    // memcached accepts a password the stored one begins; the proxy does not.
    let longer: &[u8] = b"set x 0 0 15\r\napp secret junk\r\n";
    assert_eq!(
        one_at_a_time(memcached.addr(), &[longer]).await,
        ["STORED\r\n"]
    );
    assert_eq!(
        one_at_a_time(proxied, &[longer]).await,
        ["CLIENT_ERROR authentication failure\r\n"]
    );
}

/// memgroup's client logs in to the proxy as to a `memcached -Y`; without
/// credentials it is refused with memcached's words.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memgroups_client_logs_in_through_the_proxy() {
    let dir = Dir::new("proxy-login-client");
    let file = dir.path().join("auth");
    std::fs::write(&file, "app:secret\n").unwrap();
    let behind = Memcached::spawn();
    let proxied = login_proxy(&behind, &file).await;
    let with = Client::builder()
        .servers(&proxied.to_string())
        .credentials(Credentials::new("app", "secret").unwrap())
        .build()
        .unwrap();
    with.set("k", "v", 0).await.unwrap();
    assert_eq!(&with.get("k").await.unwrap().unwrap().value[..], b"v");
    assert_eq!(raw::get(behind.addr(), b"k").as_deref(), Some(&b"v"[..]));
    let without = Client::builder()
        .servers(&proxied.to_string())
        .build()
        .unwrap();
    let error = without.get("k").await.expect_err("not logged in");
    assert!(error.to_string().contains("unauthenticated"), "{error}");
}
