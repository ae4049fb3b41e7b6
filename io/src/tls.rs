//! Real-time TLS identities and trust: the server's certificate (PEM files, or a
//! self-signed one made at start), the client's trust (a CA file, or a pinned SHA-256
//! fingerprint), and the OS randomness that seeds real-time connections.
//!
//! Everything here uses rustls's ring provider as it is: keys, nonces and TLS randoms come
//! from the OS. (The simulator uses
//! [`braid_transport::proto::crypto::deterministic`] instead.)

use std::path::{Path, PathBuf};
use std::sync::Arc;

use braid_transport::proto::crypto::{ALPN, PinnedCertVerifier, cert_fingerprint, to_hex};
use braid_transport::proto::{ClientCrypto, ServerCrypto};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// What went wrong with a certificate, key, CA file or fingerprint.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// `--cert` was given without `--key` (or the other way round).
    #[error("--cert and --key must be given together")]
    CertWithoutKey,
    /// A PEM file could not be read or holds nothing usable.
    #[error("{what} {path}: {message}")]
    Pem {
        /// Which argument.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// The private key does not belong to the certificate.
    #[error("--key {path} does not match the certificate in --cert")]
    KeyMismatch {
        /// The key file.
        path: PathBuf,
    },
    /// `--server-cert-sha256` is not 64 hex digits.
    #[error("--server-cert-sha256 must be 64 hex digits (a SHA-256 fingerprint), got `{0}`")]
    BadFingerprint(String),
    /// rustls refused the configuration.
    #[error("TLS configuration: {0}")]
    Config(String),
    /// The OS random source failed.
    #[error("the OS random source failed: {0}")]
    Random(String),
}

/// A server's identity and the fingerprint clients pin.
#[derive(Debug, Clone)]
pub struct ServerIdentity {
    /// The rustls configuration.
    pub crypto: ServerCrypto,
    /// SHA-256 of the end-entity certificate.
    pub fingerprint: [u8; 32],
}

impl ServerIdentity {
    /// The fingerprint in lower-case hex (what `certificate sha256 HEX` prints).
    pub fn fingerprint_hex(&self) -> String {
        to_hex(&self.fingerprint)
    }

    /// A client configuration that pins this identity (in-process runs).
    pub fn pinned_client(&self) -> ClientCrypto {
        pinned(self.fingerprint)
    }
}

static KEY_LOG: std::sync::OnceLock<Arc<dyn rustls::KeyLog>> = std::sync::OnceLock::new();

/// Writes the TLS secrets of every connection this process makes from now on to `path`
/// in the NSS key-log format (appending; the file is created if missing). Without it the
/// `SSLKEYLOGFILE` environment variable decides, as in browsers. Returns false if a key
/// log was set already.
pub fn set_key_log_file(path: &Path) -> std::io::Result<bool> {
    let file = std::fs::OpenOptions::new().create(true).append(true).open(path)?;
    Ok(KEY_LOG.set(Arc::new(NssKeyLog(std::sync::Mutex::new(file)))).is_ok())
}

/// The key log of new TLS configurations: the file of [`set_key_log_file`], else
/// rustls's `SSLKEYLOGFILE` writer (which does nothing when the variable is unset).
pub fn key_log() -> Arc<dyn rustls::KeyLog> {
    KEY_LOG.get().cloned().unwrap_or_else(|| Arc::new(rustls::KeyLogFile::new()))
}

/// NSS key-log lines (`LABEL CLIENT_RANDOM SECRET`, hex) appended to a file.
#[derive(Debug)]
struct NssKeyLog(std::sync::Mutex<std::fs::File>);

impl rustls::KeyLog for NssKeyLog {
    fn log(&self, label: &str, client_random: &[u8], secret: &[u8]) {
        use std::io::Write as _;
        let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
        let line = format!("{label} {} {}\n", hex(client_random), hex(secret));
        let mut f = self.0.lock().unwrap_or_else(|e| e.into_inner());
        // A key log is a debugging aid: a failed write must not break the connection.
        let _ = f.write_all(line.as_bytes());
    }
}

/// The TLS 1.3 cipher suite a client offers (the server follows the client's order).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Suites {
    /// All three, AES-256-GCM first, then AES-128-GCM and ChaCha20-Poly1305 (ring's order):
    /// two Braid endpoints agree on AES-256-GCM.
    #[default]
    All,
    /// TLS_AES_128_GCM_SHA256 only (what quinn's perf tool prefers: a like-for-like
    /// comparison).
    Aes128Gcm,
    /// TLS_AES_256_GCM_SHA384 only.
    Aes256Gcm,
    /// TLS_CHACHA20_POLY1305_SHA256 only.
    Chacha20,
}

impl Suites {
    /// ring's provider, offering these suites.
    pub(crate) fn provider(self) -> Arc<rustls::crypto::CryptoProvider> {
        use rustls::crypto::ring::cipher_suite as cs;
        let mut p = rustls::crypto::ring::default_provider();
        match self {
            Suites::All => {}
            Suites::Aes128Gcm => p.cipher_suites = vec![cs::TLS13_AES_128_GCM_SHA256],
            Suites::Aes256Gcm => p.cipher_suites = vec![cs::TLS13_AES_256_GCM_SHA384],
            Suites::Chacha20 => p.cipher_suites = vec![cs::TLS13_CHACHA20_POLY1305_SHA256],
        }
        Arc::new(p)
    }
}

/// The server configuration for `chain` and `key`; its stateless reset key is derived
/// from the private key, so a server restarted with the same key files can still reset
/// the connections of its earlier run (RFC 9000 §10.3).
fn server_config(
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
) -> Result<ServerCrypto, rustls::Error> {
    let reset = braid_transport::proto::reset::ResetKey::derive(key.secret_der());
    let mut config = rustls::ServerConfig::builder_with_provider(Suites::All.provider())
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .with_no_client_auth()
        .with_single_cert(chain, key)?;
    config.alpn_protocols = vec![ALPN.to_vec()];
    config.key_log = key_log();
    config.send_tls13_tickets = 0;
    Ok(ServerCrypto { config: Arc::new(config), reset })
}

/// A self-signed certificate (ECDSA P-256, names `braid`, `localhost`, 127.0.0.1 and ::1)
/// made now from OS randomness.
pub fn self_signed() -> Result<ServerIdentity, TlsError> {
    let names = ["braid", "localhost", "127.0.0.1", "::1"].map(String::from).to_vec();
    let key = rcgen::KeyPair::generate().map_err(|e| TlsError::Config(e.to_string()))?;
    let cert = rcgen::CertificateParams::new(names)
        .and_then(|p| p.self_signed(&key))
        .map_err(|e| TlsError::Config(e.to_string()))?;
    let der = cert.der().clone();
    let fingerprint = cert_fingerprint(der.as_ref());
    let key =
        PrivateKeyDer::try_from(key.serialize_der()).map_err(|e| TlsError::Config(e.into()))?;
    let crypto = server_config(vec![der], key).map_err(|e| TlsError::Config(e.to_string()))?;
    Ok(ServerIdentity { crypto, fingerprint })
}

/// The identity in PEM files: `cert` holds the chain (end entity first), `key` its
/// private key. A key that does not match the certificate is refused.
pub fn from_pem_files(cert: &Path, key: &Path) -> Result<ServerIdentity, TlsError> {
    let pem_err = |what, path: &Path, e: &dyn std::fmt::Display| TlsError::Pem {
        what,
        path: path.to_path_buf(),
        message: e.to_string(),
    };
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .map_err(|e| pem_err("--cert", cert, &e))?
        .collect::<Result<_, _>>()
        .map_err(|e| pem_err("--cert", cert, &e))?;
    let Some(first) = chain.first() else {
        return Err(pem_err("--cert", cert, &"no certificate in the file"));
    };
    let fingerprint = cert_fingerprint(first.as_ref());
    let key_der = PrivateKeyDer::from_pem_file(key).map_err(|e| pem_err("--key", key, &e))?;
    let crypto = server_config(chain, key_der).map_err(|e| match e {
        rustls::Error::InconsistentKeys(_) => TlsError::KeyMismatch { path: key.to_path_buf() },
        other => pem_err("--key", key, &other),
    })?;
    Ok(ServerIdentity { crypto, fingerprint })
}

/// The server identity the command line asks for: both files, or a fresh self-signed
/// certificate when neither is given.
pub fn server_identity(
    cert: Option<&Path>,
    key: Option<&Path>,
) -> Result<ServerIdentity, TlsError> {
    match (cert, key) {
        (Some(c), Some(k)) => from_pem_files(c, k),
        (None, None) => self_signed(),
        _ => Err(TlsError::CertWithoutKey),
    }
}

/// Parses a SHA-256 fingerprint: 64 hex digits (colons allowed between bytes).
pub fn parse_fingerprint(hex: &str) -> Result<[u8; 32], TlsError> {
    let digits: String = hex.chars().filter(|c| *c != ':').collect();
    let bad = || TlsError::BadFingerprint(hex.to_owned());
    if digits.len() != 64 || !digits.is_ascii() {
        return Err(bad());
    }
    let mut out = [0u8; 32];
    for (i, b) in out.iter_mut().enumerate() {
        *b = u8::from_str_radix(&digits[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
    }
    Ok(out)
}

/// A client that accepts exactly the certificate with this fingerprint.
pub fn pinned(fingerprint: [u8; 32]) -> ClientCrypto {
    pinned_offering(fingerprint, Suites::All)
}

/// [`pinned`], offering `suites`.
pub fn pinned_offering(fingerprint: [u8; 32], suites: Suites) -> ClientCrypto {
    let p = suites.provider();
    let verifier =
        Arc::new(PinnedCertVerifier::new(fingerprint, p.signature_verification_algorithms));
    let mut config = rustls::ClientConfig::builder_with_provider(p)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .expect("the ring provider supports TLS 1.3")
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    config.alpn_protocols = vec![ALPN.to_vec()];
    config.key_log = key_log();
    config.resumption = rustls::client::Resumption::disabled();
    ClientCrypto {
        config: Arc::new(config),
        server_name: Some(rustls::pki_types::ServerName::try_from("braid").expect("valid")),
    }
}

/// A client that trusts the CA certificates in a PEM file; the server's certificate must
/// name the address the client connects to.
pub fn with_ca_file(ca: &Path) -> Result<ClientCrypto, TlsError> {
    with_ca_file_offering(ca, Suites::All)
}

/// [`with_ca_file`], offering `suites`.
pub fn with_ca_file_offering(ca: &Path, suites: Suites) -> Result<ClientCrypto, TlsError> {
    let pem_err = |e: &dyn std::fmt::Display| TlsError::Pem {
        what: "--ca",
        path: ca.to_path_buf(),
        message: e.to_string(),
    };
    let mut roots = rustls::RootCertStore::empty();
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(ca)
        .map_err(|e| pem_err(&e))?
        .collect::<Result<_, _>>()
        .map_err(|e| pem_err(&e))?;
    if certs.is_empty() {
        return Err(pem_err(&"no certificate in the file"));
    }
    for c in certs {
        roots.add(c).map_err(|e| pem_err(&e))?;
    }
    let mut config = rustls::ClientConfig::builder_with_provider(suites.provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| TlsError::Config(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![ALPN.to_vec()];
    config.key_log = key_log();
    config.resumption = rustls::client::Resumption::disabled();
    Ok(ClientCrypto { config: Arc::new(config), server_name: None })
}

/// The client trust the command line asks for: a CA file or a pin (exactly one).
pub fn client_trust(ca: Option<&Path>, pin: Option<&str>) -> Result<ClientCrypto, TlsError> {
    client_trust_offering(ca, pin, Suites::All)
}

/// [`client_trust`], offering `suites`.
pub fn client_trust_offering(
    ca: Option<&Path>,
    pin: Option<&str>,
    suites: Suites,
) -> Result<ClientCrypto, TlsError> {
    match (ca, pin) {
        (Some(ca), None) => with_ca_file_offering(ca, suites),
        (None, Some(pin)) => Ok(pinned_offering(parse_fingerprint(pin)?, suites)),
        (Some(_), Some(_)) => {
            Err(TlsError::Config("give either --ca or --server-cert-sha256, not both".into()))
        }
        (None, None) => Err(TlsError::Config(
            "the server is not authenticated: give --server-cert-sha256 HEX (printed by \
             `braid serve`) or --ca FILE"
                .into(),
        )),
    }
}

/// A connection seed from the OS random source.
pub fn os_seed() -> Result<u64, TlsError> {
    let mut b = [0u8; 8];
    getrandom::fill(&mut b).map_err(|e| TlsError::Random(e.to_string()))?;
    Ok(u64::from_le_bytes(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_offers_the_suites_it_is_given() {
        use rustls::CipherSuite as C;
        let offered = |s: Suites| -> Vec<C> {
            let c = pinned_offering([1; 32], s);
            c.config.crypto_provider().cipher_suites.iter().map(|s| s.suite()).collect()
        };
        assert_eq!(
            offered(Suites::All)[..3],
            [
                C::TLS13_AES_256_GCM_SHA384,
                C::TLS13_AES_128_GCM_SHA256,
                C::TLS13_CHACHA20_POLY1305_SHA256
            ]
        );
        assert_eq!(offered(Suites::Aes128Gcm), [C::TLS13_AES_128_GCM_SHA256]);
        assert_eq!(offered(Suites::Aes256Gcm), [C::TLS13_AES_256_GCM_SHA384]);
        assert_eq!(offered(Suites::Chacha20), [C::TLS13_CHACHA20_POLY1305_SHA256]);
    }

    #[test]
    fn fingerprints_parse_and_bad_ones_are_named() {
        let hex = "ab".repeat(32);
        assert_eq!(parse_fingerprint(&hex).unwrap(), [0xab; 32]);
        for bad in ["", "abc", &"zz".repeat(32), &"ab".repeat(33)] {
            let e = parse_fingerprint(bad).unwrap_err().to_string();
            assert!(e.contains("--server-cert-sha256"), "{e}");
        }
    }

    #[test]
    fn self_signed_identities_differ_and_print_64_hex_digits() {
        let a = self_signed().unwrap();
        let b = self_signed().unwrap();
        assert_ne!(a.fingerprint, b.fingerprint);
        let hex = a.fingerprint_hex();
        assert_eq!(hex.len(), 64);
        assert!(hex.chars().all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c)));
    }

    #[test]
    fn a_key_of_another_certificate_is_refused() {
        let dir = std::env::temp_dir().join(format!("braid-tls-{}", os_seed().unwrap()));
        std::fs::create_dir_all(&dir).unwrap();
        let make = |name: &str| {
            let key = rcgen::KeyPair::generate().unwrap();
            let cert = rcgen::CertificateParams::new(vec!["braid".into()])
                .unwrap()
                .self_signed(&key)
                .unwrap();
            let (c, k) = (dir.join(format!("{name}.crt")), dir.join(format!("{name}.key")));
            std::fs::write(&c, cert.pem()).unwrap();
            std::fs::write(&k, key.serialize_pem()).unwrap();
            (c, k)
        };
        let (c1, k1) = make("a");
        let (_, k2) = make("b");
        assert!(from_pem_files(&c1, &k1).is_ok());
        let e = from_pem_files(&c1, &k2).unwrap_err();
        assert!(matches!(e, TlsError::KeyMismatch { .. }), "{e}");
        assert!(matches!(server_identity(Some(&c1), None), Err(TlsError::CertWithoutKey)));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
