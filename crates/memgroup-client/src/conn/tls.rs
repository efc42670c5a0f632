//! TLS settings (feature `tls`): which certificate authorities to trust, an
//! optional client certificate (mutual TLS) and the name to verify.
//!
//! memcached 1.6 serves TLS with `-Z -o ssl_chain_cert=…,ssl_key=…` and can
//! require client certificates (`ssl_verify_mode=2`, `ssl_ca_cert=…`). Under
//! TLS 1.3 a server that wants a client certificate and got none refuses with
//! an alert on the first read after the handshake: the connection fails then
//! with an [`ErrorKind::Tls`] error.

use std::fmt;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls::RootCertStore;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::net::TcpStream;

use crate::conn::transport::tls_error;
use crate::error::{Error, ErrorKind};

/// How to connect over TLS: set cluster-wide with
/// [`ClientBuilder::tls`](crate::ClientBuilder::tls), per group with
/// [`ClientBuilder::group_tls`](crate::ClientBuilder::group_tls).
///
/// ```no_run
/// use memgroup_client::{Client, TlsConfig};
/// # async fn demo() -> Result<(), memgroup_client::Error> {
/// let tls = TlsConfig::ca_file("/etc/memcached/ca.pem")?
///     .client_cert_files("/etc/app/client.pem", "/etc/app/client.key")?
///     .server_name("cache.internal");
/// let client = Client::builder().servers("10.0.0.1:11211").tls(tls).build()?;
/// # Ok(()) }
/// ```
///
/// `Debug` never shows the private key.
#[derive(Clone)]
pub struct TlsConfig {
    roots: Arc<RootCertStore>,
    /// Where the trusted roots came from, for `Debug`.
    roots_from: &'static str,
    client: Option<(Vec<CertificateDer<'static>>, Arc<PrivateKeyDer<'static>>)>,
    /// As given: checked when the client is built ([`TlsConfig::connector`]).
    server_name: Option<String>,
}

impl fmt::Debug for TlsConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsConfig")
            .field(
                "roots",
                &format_args!("{} ({})", self.roots_from, self.roots.len()),
            )
            .field(
                "client_cert",
                &self.client.as_ref().map(|(chain, _)| chain.len()),
            )
            .field("server_name", &self.server_name)
            .finish()
    }
}

fn config_error(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::Config, message)
}

impl TlsConfig {
    /// Trusts the certificate authorities in `pem` (one or more PEM
    /// certificates).
    pub fn ca_pem(pem: &[u8]) -> Result<TlsConfig, Error> {
        let mut roots = RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(pem) {
            let cert = cert.map_err(|e| config_error(format!("bad CA certificate PEM: {e}")))?;
            roots
                .add(cert)
                .map_err(|e| config_error(format!("bad CA certificate: {e}")))?;
        }
        if roots.is_empty() {
            return Err(config_error("no certificate in the CA bundle"));
        }
        Ok(TlsConfig::with_roots(roots, "CA bundle"))
    }

    /// Trusts the certificate authorities in the PEM file at `path`.
    pub fn ca_file(path: impl AsRef<Path>) -> Result<TlsConfig, Error> {
        TlsConfig::ca_pem(&read(path.as_ref(), "CA bundle")?)
    }

    /// Trusts the platform's certificate authorities (the system's store).
    pub fn platform_roots() -> Result<TlsConfig, Error> {
        let found = rustls_native_certs::load_native_certs();
        let mut roots = RootCertStore::empty();
        let (added, _ignored) = roots.add_parsable_certificates(found.certs);
        if added == 0 {
            return Err(config_error(format!(
                "no usable certificate in the platform's store{}",
                found
                    .errors
                    .first()
                    .map(|e| format!(": {e}"))
                    .unwrap_or_default()
            )));
        }
        Ok(TlsConfig::with_roots(roots, "platform"))
    }

    fn with_roots(roots: RootCertStore, from: &'static str) -> TlsConfig {
        TlsConfig {
            roots: Arc::new(roots),
            roots_from: from,
            client: None,
            server_name: None,
        }
    }

    /// Presents this client certificate chain and key (PEM) to servers that
    /// ask for one (mutual TLS).
    pub fn client_cert_pem(mut self, chain: &[u8], key: &[u8]) -> Result<TlsConfig, Error> {
        let chain = CertificateDer::pem_slice_iter(chain)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| config_error(format!("bad client certificate PEM: {e}")))?;
        if chain.is_empty() {
            return Err(config_error("no certificate in the client certificate PEM"));
        }
        let key = PrivateKeyDer::from_pem_slice(key)
            .map_err(|e| config_error(format!("bad client key PEM: {e}")))?;
        self.client = Some((chain, Arc::new(key)));
        // Checks now that the key fits the certificate's algorithm.
        self.client_config()?;
        Ok(self)
    }

    /// As [`TlsConfig::client_cert_pem`], from files.
    pub fn client_cert_files(
        self,
        chain: impl AsRef<Path>,
        key: impl AsRef<Path>,
    ) -> Result<TlsConfig, Error> {
        let chain = read(chain.as_ref(), "client certificate")?;
        let key = read(key.as_ref(), "client key")?;
        self.client_cert_pem(&chain, &key)
    }

    /// Verifies the servers' certificates for this name instead of each
    /// server's host (useful when servers are listed by address but their
    /// certificates name a service). An IP address is checked against the
    /// certificate's IP SANs. A name that is neither a DNS name nor an IP
    /// address is refused when the client is built
    /// ([`ErrorKind::Config`](crate::ErrorKind::Config), naming it).
    pub fn server_name(mut self, name: &str) -> TlsConfig {
        self.server_name = Some(name.to_string());
        self
    }

    fn client_config(&self) -> Result<rustls::ClientConfig, Error> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| tls_error("TLS configuration", &e))?
            .with_root_certificates(self.roots.clone());
        match &self.client {
            None => Ok(builder.with_no_client_auth()),
            Some((chain, key)) => builder
                .with_client_auth_cert(chain.clone(), key.clone_key())
                .map_err(|e| config_error(format!("the client key does not fit: {e}"))),
        }
    }

    /// The connector the client's connections use.
    pub(crate) fn connector(&self) -> Result<TlsConnector, Error> {
        let server_name = match &self.server_name {
            None => None,
            Some(name) => Some(parse_name(name).ok_or_else(|| {
                config_error(format!(
                    "invalid TLS server name {name:?} (a DNS name or an IP address)"
                ))
            })?),
        };
        Ok(TlsConnector {
            inner: tokio_rustls::TlsConnector::from(Arc::new(self.client_config()?)),
            server_name,
        })
    }
}

fn read(path: &Path, what: &str) -> Result<Vec<u8>, Error> {
    std::fs::read(path).map_err(|e| {
        config_error(format!("cannot read the {what} {}: {e}", path.display())).with_source(e)
    })
}

fn parse_name(name: &str) -> Option<ServerName<'static>> {
    ServerName::try_from(name.to_string()).ok()
}

/// Runs TLS handshakes for new connections.
#[derive(Clone)]
pub(crate) struct TlsConnector {
    inner: tokio_rustls::TlsConnector,
    server_name: Option<ServerName<'static>>,
}

impl fmt::Debug for TlsConnector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsConnector")
            .field("server_name", &self.server_name)
            .finish_non_exhaustive()
    }
}

impl TlsConnector {
    /// Runs the handshake on `stream` to `server` (`host:port`) within
    /// `timeout`.
    pub(crate) async fn handshake(
        &self,
        stream: TcpStream,
        server: &str,
        timeout: Duration,
    ) -> Result<tokio_rustls::client::TlsStream<TcpStream>, Error> {
        let name = match &self.server_name {
            Some(name) => name.clone(),
            None => {
                let host = server.rsplit_once(':').map_or(server, |(host, _)| host);
                let host = host.trim_start_matches('[').trim_end_matches(']');
                parse_name(host).ok_or_else(|| {
                    config_error(format!("{host:?} is not a name TLS can verify")).at(server)
                })?
            }
        };
        match tokio::time::timeout(timeout, self.inner.connect(name, stream)).await {
            Ok(Ok(stream)) => Ok(stream),
            Ok(Err(e)) => Err(handshake_error(e).at(server)),
            Err(_) => Err(Error::new(
                ErrorKind::Timeout,
                format!("TLS handshake timed out after {timeout:?}"),
            )
            .at(server)),
        }
    }
}

/// A failed handshake: a certificate the client does not trust, a refusal
/// by the server, or a peer that does not speak TLS.
fn handshake_error(e: std::io::Error) -> Error {
    let detail = match e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
    {
        Some(rustls) => rustls.to_string(),
        None if e.kind() == std::io::ErrorKind::UnexpectedEof => {
            "the server closed the connection (does it serve TLS?)".to_string()
        }
        None => e.to_string(),
    };
    Error::new(ErrorKind::Tls, format!("TLS handshake failed: {detail}")).with_source(e)
}
