//! memcached's ASCII authentication in front ([`ProxyConfig::logins`](crate::ProxyConfig::logins)):
//! a client's first `set` carries `user password` as its value. Until it
//! succeeds every request is answered memcached's `CLIENT_ERROR
//! unauthenticated` and nothing reaches the servers.

use std::path::Path;

use bytes::Bytes;
use memgroup_proto::StoreCommand;
use memgroup_proto::server::ClientRequest;

/// The users and passwords a client may log in with, in memcached's `-Y`
/// file format: one `user:password` per line.
#[derive(Clone)]
pub struct Logins {
    entries: Vec<(Vec<u8>, Vec<u8>)>,
}

impl std::fmt::Debug for Logins {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Logins({} users)", self.entries.len())
    }
}

impl Logins {
    /// From the text of a `-Y` file. Empty lines are skipped.
    ///
    /// # Errors
    ///
    /// `InvalidData` naming the first line without a `:`, or a file with
    /// no login at all.
    pub fn parse(text: &str) -> Result<Logins, std::io::Error> {
        let mut entries = Vec::new();
        for (number, line) in text.lines().enumerate() {
            if line.is_empty() {
                continue;
            }
            let (user, password) = line.split_once(':').ok_or_else(|| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("line {}: not user:password", number + 1),
                )
            })?;
            entries.push((user.as_bytes().to_vec(), password.as_bytes().to_vec()));
        }
        if entries.is_empty() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "no user:password line",
            ));
        }
        Ok(Logins { entries })
    }

    /// [`Logins::parse`] of a file.
    ///
    /// # Errors
    ///
    /// A file that cannot be read, or what `parse` refuses (the path named).
    pub fn read(path: &Path) -> Result<Logins, std::io::Error> {
        let named =
            |e: std::io::Error| std::io::Error::new(e.kind(), format!("{}: {e}", path.display()));
        Logins::parse(&std::fs::read_to_string(path).map_err(named)?).map_err(named)
    }

    /// Whether `token` (`user password`) is one of the logins: compared in
    /// whole (memcached 1.6.18 accepts a password the stored one begins
    /// with; the proxy does not), in time independent of where it differs.
    fn admits(&self, user: &[u8], password: &[u8]) -> bool {
        self.entries.iter().fold(false, |found, (u, p)| {
            found | (same(u, user) & same(p, password))
        })
    }
}

/// Equal bytes, compared without stopping at the first difference.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

/// The answer to `request` on a connection not logged in yet, and whether
/// it logged in, as memcached answers: a `set` is the login (`STORED`, even
/// with `noreply`), anything else is refused.
pub(crate) fn attempt(logins: &Logins, request: &ClientRequest) -> (Bytes, bool) {
    let ClientRequest::Store {
        command: StoreCommand::Set,
        data,
        ..
    } = request
    else {
        return (
            Bytes::from_static(b"CLIENT_ERROR unauthenticated\r\n"),
            false,
        );
    };
    match data.iter().position(|&b| b == b' ') {
        None => (
            Bytes::from_static(b"CLIENT_ERROR bad authentication token format\r\n"),
            false,
        ),
        Some(space) if logins.admits(&data[..space], &data[space + 1..]) => {
            (Bytes::from_static(b"STORED\r\n"), true)
        }
        Some(_) => (
            Bytes::from_static(b"CLIENT_ERROR authentication failure\r\n"),
            false,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_login_must_match_in_whole() {
        let logins = Logins::parse("app:secret\n\nother:pw:with:colons\n").unwrap();
        assert!(logins.admits(b"app", b"secret"));
        assert!(logins.admits(b"other", b"pw:with:colons"));
        assert!(!logins.admits(b"app", b"secret junk"));
        assert!(!logins.admits(b"app", b"secre"));
        assert!(!logins.admits(b"ap", b"secret"));
        assert!(!logins.admits(b"other", b"secret"));
        assert!(Logins::parse("no colon here\n").is_err());
        assert!(Logins::parse("\n").is_err());
    }
}
