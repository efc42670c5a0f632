//! Test certificates, made at run time: a CA, a server certificate for
//! `localhost` and `127.0.0.1` signed by it, a client certificate signed by
//! it, and a second, unrelated CA (to show a certificate from the wrong
//! authority is refused). Written as PEM files into a temporary directory
//! removed on drop.

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};

/// A throw-away public-key infrastructure in a temporary directory.
#[derive(Debug)]
pub struct Pki {
    dir: PathBuf,
}

impl Pki {
    /// Makes the certificates. Panics on failure (meant for tests).
    pub fn new() -> Pki {
        let dir =
            std::env::temp_dir().join(format!("memgroup-pki-{}-{}", std::process::id(), unique()));
        std::fs::create_dir_all(&dir).expect("create the PKI directory");
        let pki = Pki { dir };
        let ca = authority("memgroup test CA");
        pki.write("ca.pem", &ca.pem());
        let other = authority("an unrelated CA");
        pki.write("other-ca.pem", &other.pem());

        let names = vec!["localhost".to_string(), "127.0.0.1".to_string()];
        let server = ExtendedKeyUsagePurpose::ServerAuth;
        pki.issue("server", names, "memcached test server", server, &ca);
        let client = ExtendedKeyUsagePurpose::ClientAuth;
        pki.issue("client", Vec::new(), "memgroup test client", client, &ca);
        pki
    }

    /// Writes `<file>.pem` and `<file>.key`: a certificate for `names`
    /// signed by `ca`.
    fn issue(
        &self,
        file: &str,
        names: Vec<String>,
        common_name: &str,
        usage: ExtendedKeyUsagePurpose,
        ca: &CertifiedIssuer<'static, KeyPair>,
    ) {
        let key = KeyPair::generate().expect("key");
        let mut params = CertificateParams::new(names).expect("params");
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        params.extended_key_usages = vec![usage];
        let cert = params.signed_by(&key, ca).expect("sign");
        self.write(&format!("{file}.pem"), &cert.pem());
        self.write(&format!("{file}.key"), &key.serialize_pem());
    }

    fn write(&self, name: &str, pem: &str) {
        std::fs::write(self.dir.join(name), pem).expect("write a PEM file");
    }

    /// The directory holding the files.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The CA certificate (PEM file) that signed the server and client.
    pub fn ca(&self) -> PathBuf {
        self.dir.join("ca.pem")
    }

    /// The server certificate (PEM file, for `localhost` and `127.0.0.1`).
    pub fn server_cert(&self) -> PathBuf {
        self.dir.join("server.pem")
    }

    /// The server's private key (PEM file).
    pub fn server_key(&self) -> PathBuf {
        self.dir.join("server.key")
    }

    /// A CA certificate that signed nothing here.
    pub fn other_ca(&self) -> PathBuf {
        self.dir.join("other-ca.pem")
    }

    /// The client certificate (PEM file).
    pub fn client_cert(&self) -> PathBuf {
        self.dir.join("client.pem")
    }

    /// The client's private key (PEM file).
    pub fn client_key(&self) -> PathBuf {
        self.dir.join("client.key")
    }

    /// memcached's `-o` options serving TLS with the server certificate.
    pub fn memcached_options(&self, require_client_cert: bool) -> String {
        let file = |name: &str| self.dir.join(name).display().to_string();
        let mut options = format!(
            "ssl_chain_cert={},ssl_key={}",
            file("server.pem"),
            file("server.key")
        );
        if require_client_cert {
            options.push_str(&format!(
                ",ssl_verify_mode=2,ssl_ca_cert={}",
                file("ca.pem")
            ));
        }
        options
    }
}

impl Default for Pki {
    fn default() -> Self {
        Pki::new()
    }
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A self-signed certificate authority.
fn authority(name: &str) -> CertifiedIssuer<'static, KeyPair> {
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    CertifiedIssuer::self_signed(params, KeyPair::generate().expect("key")).expect("self-sign")
}

/// A number unique within this process.
fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}
