//! TLS in front (feature `tls`): the proxy's certificate and key, and the
//! authorities whose client certificates it requires (mutual TLS), served
//! with rustls. Each client connection is handshaked before it is read;
//! a handshake that fails or takes longer than [`HANDSHAKE`] closes it.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls::RootCertStore;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;

/// How long a client may take to finish its handshake.
pub const HANDSHAKE: Duration = Duration::from_secs(10);

/// The proxy's side of TLS: what it presents and whom it accepts
/// ([`ProxyConfig::tls`](crate::ProxyConfig::tls)).
#[derive(Clone)]
pub struct ServerTls {
    pub(crate) acceptor: tokio_rustls::TlsAcceptor,
}

impl std::fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ServerTls")
    }
}

fn invalid(message: String) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, message)
}

impl ServerTls {
    /// From PEM: the certificate chain (the proxy's first), its private
    /// key, and with `client_ca` the authorities a client's certificate
    /// must come from (clients without one are refused in the handshake).
    ///
    /// # Errors
    ///
    /// `InvalidData` naming what is missing or does not fit.
    pub fn from_pem(
        chain: &[u8],
        key: &[u8],
        client_ca: Option<&[u8]>,
    ) -> Result<ServerTls, std::io::Error> {
        let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(chain)
            .collect::<Result<_, _>>()
            .map_err(|e| invalid(format!("the certificate chain: {e}")))?;
        if chain.is_empty() {
            return Err(invalid("the certificate file holds no certificate".into()));
        }
        let key = PrivateKeyDer::from_pem_slice(key)
            .map_err(|e| invalid(format!("the private key: {e}")))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| invalid(format!("TLS configuration: {e}")))?;
        let builder = match client_ca {
            None => builder.with_no_client_auth(),
            Some(pem) => {
                let mut roots = RootCertStore::empty();
                for cert in CertificateDer::pem_slice_iter(pem) {
                    let cert = cert.map_err(|e| invalid(format!("the client CA: {e}")))?;
                    roots
                        .add(cert)
                        .map_err(|e| invalid(format!("the client CA: {e}")))?;
                }
                if roots.is_empty() {
                    return Err(invalid("the client CA file holds no certificate".into()));
                }
                let verifier = WebPkiClientVerifier::builder_with_provider(roots.into(), provider)
                    .build()
                    .map_err(|e| invalid(format!("the client CA: {e}")))?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let config = builder
            .with_single_cert(chain, key)
            .map_err(|e| invalid(format!("the key does not fit the certificate: {e}")))?;
        Ok(ServerTls {
            acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(config)),
        })
    }

    /// [`ServerTls::from_pem`] from files.
    ///
    /// # Errors
    ///
    /// A file that cannot be read (its path named), or what `from_pem`
    /// refuses.
    pub fn from_files(
        cert: &Path,
        key: &Path,
        client_ca: Option<&Path>,
    ) -> Result<ServerTls, std::io::Error> {
        let read = |path: &Path| {
            std::fs::read(path)
                .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", path.display())))
        };
        let ca = client_ca.map(read).transpose()?;
        ServerTls::from_pem(&read(cert)?, &read(key)?, ca.as_deref())
    }
}
