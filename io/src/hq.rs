//! HTTP/0.9 over QUIC (`hq-interop`), as the QUIC interop runner's endpoints speak it: the
//! client sends `GET /NAME\r\n` on a bidirectional stream of its own and finishes it; the
//! server answers on the same stream with the file's bytes and FIN. This is how independent
//! QUIC stacks test each other (`braid interop server|client`).
//!
//! Braid carries it on its message mapping for requests
//! ([`braid_transport::proto::mapping::Mapping::Requests`]): request `n` is the client's
//! message `n` (stream `4n`), the answer is the server's message `n` on the same stream.
//! Answers go in the order of the requests. HTTP/0.9 has no status: a request the server
//! cannot answer (a name outside its root, a missing file, a malformed line) is answered
//! with an empty stream and counted, and the client reports an empty file as missing.

use std::net::SocketAddr;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use braid_transport::proto::crypto::PinnedCertVerifier;
use braid_transport::proto::{ClientCrypto, Config, Delivery, Reliability, ServerCrypto};
use bytes::Bytes;

use crate::driver::{self, ConnectionHandle, DriverError};
use crate::tls::{Suites, TlsError, key_log};

/// The interop runner's ALPN.
pub const ALPN: &[u8] = b"hq-interop";

/// The longest request line accepted, bytes (`GET /` and a name).
pub const MAX_REQUEST: usize = 4096;

/// The largest file served or fetched, 64 MiB: messages are held whole, so a server holds
/// at most about twice this per connection (the answer queued and the next one read).
pub const MAX_FILE: u64 = 64 << 20;

/// Why a fetch failed.
#[derive(Debug, thiserror::Error)]
pub enum HqError {
    /// A URL is not `https://HOST:PORT/NAME`.
    #[error("`{0}` is not an https://HOST:PORT/NAME URL")]
    BadUrl(String),
    /// The URLs name more than one server.
    #[error("the URLs name more than one server: {0} and {1}")]
    ManyServers(String, String),
    /// The host does not resolve.
    #[error("{host}: {message}")]
    Resolve {
        /// The host as written.
        host: String,
        /// Why.
        message: String,
    },
    /// The connection failed.
    #[error(transparent)]
    Driver(#[from] DriverError),
    /// TLS could not be configured.
    #[error(transparent)]
    Tls(#[from] TlsError),
    /// A file arrived empty or not at all (the server answered nothing, or gave it up).
    #[error("{0} did not arrive")]
    Missing(String),
    /// Writing a file failed.
    #[error("writing {path}: {message}")]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        message: String,
    },
}

/// How the client authenticates the server.
#[derive(Debug, Clone)]
pub enum Trust {
    /// Exactly the certificate with this SHA-256 fingerprint.
    Pinned([u8; 32]),
    /// A certificate chaining to a CA in this PEM file.
    Ca(PathBuf),
    /// Any certificate (the handshake's signature is still checked): the interop runner's
    /// servers present certificates no client can verify.
    Insecure,
}

/// A certificate verifier that accepts any server certificate but still checks that the
/// server holds its key (the TLS 1.3 CertificateVerify signature).
#[derive(Debug)]
struct AnyCertificate(rustls::crypto::WebPkiSupportedAlgorithms);

impl rustls::client::danger::ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &rustls::pki_types::CertificateDer<'_>,
        _intermediates: &[rustls::pki_types::CertificateDer<'_>],
        _server_name: &rustls::pki_types::ServerName<'_>,
        _ocsp: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        _message: &[u8],
        _cert: &rustls::pki_types::CertificateDer<'_>,
        _dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        Err(rustls::Error::General("TLS 1.2 is not used with QUIC".into()))
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.supported_schemes()
    }
}

/// The client's TLS for `hq-interop`: `trust` as given, TLS 1.3, and with `chacha20` only
/// the ChaCha20-Poly1305 suite offered (the runner's `chacha20` case).
pub fn client_crypto(trust: &Trust, chacha20: bool) -> Result<ClientCrypto, TlsError> {
    let suites = if chacha20 { Suites::Chacha20 } else { Suites::All };
    let provider = suites.provider();
    let algorithms = provider.signature_verification_algorithms;
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| TlsError::Config(e.to_string()))?;
    let (mut config, server_name) = match trust {
        Trust::Pinned(fp) => {
            let verifier = Arc::new(PinnedCertVerifier::new(*fp, algorithms));
            let c = builder.dangerous().with_custom_certificate_verifier(verifier);
            let name = rustls::pki_types::ServerName::try_from("braid").ok();
            (c.with_no_client_auth(), name)
        }
        Trust::Insecure => {
            let c = builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AnyCertificate(algorithms)));
            (c.with_no_client_auth(), None)
        }
        Trust::Ca(path) => {
            (builder.with_root_certificates(ca_roots(path)?).with_no_client_auth(), None)
        }
    };
    config.alpn_protocols = vec![ALPN.to_vec()];
    config.key_log = key_log();
    config.resumption = rustls::client::Resumption::disabled();
    Ok(ClientCrypto { config: Arc::new(config), server_name })
}

fn ca_roots(path: &Path) -> Result<rustls::RootCertStore, TlsError> {
    use rustls::pki_types::pem::PemObject as _;
    let err = |e: &dyn std::fmt::Display| TlsError::Pem {
        what: "--ca",
        path: path.to_path_buf(),
        message: e.to_string(),
    };
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls::pki_types::CertificateDer::pem_file_iter(path).map_err(|e| err(&e))? {
        roots.add(c.map_err(|e| err(&e))?).map_err(|e| err(&e))?;
    }
    if roots.is_empty() {
        return Err(err(&"no certificate in the file"));
    }
    Ok(roots)
}

/// The server's TLS for `hq-interop`: `crypto` with the runner's ALPN.
pub fn server_crypto(crypto: &ServerCrypto) -> ServerCrypto {
    let mut config = (*crypto.config).clone();
    config.alpn_protocols = vec![ALPN.to_vec()];
    ServerCrypto { config: Arc::new(config), reset: crypto.reset.clone() }
}

/// `base` for `hq-interop`: requests and answers on bidirectional streams, buffers that
/// hold a whole file, and with `key_update` a key update every 100 packets sent (the
/// runner's `keyupdate` case asks for one early in the transfer; a client mostly sends
/// acknowledgements).
pub fn config(base: &Config, key_update: bool) -> Config {
    let mut c = base.clone();
    c.request_streams = true;
    c.recv_buffer_bytes = MAX_FILE;
    c.send_buffer_bytes = MAX_FILE;
    if key_update {
        c.key_update_packets = 100;
    }
    c
}

/// The file a request line asks for under `root`, or why it is refused: the line must be
/// `GET /NAME` (a CR LF or LF after it), NAME relative, without `..`.
pub fn requested(root: &Path, line: &[u8]) -> Result<PathBuf, &'static str> {
    if line.len() > MAX_REQUEST {
        return Err("request too long");
    }
    let text = std::str::from_utf8(line).map_err(|_| "request not UTF-8")?;
    let text = text.strip_suffix('\n').unwrap_or(text);
    let text = text.strip_suffix('\r').unwrap_or(text);
    let name = text.strip_prefix("GET /").ok_or("not a GET request")?;
    let rel = Path::new(name);
    if name.is_empty() || !rel.components().all(|c| matches!(c, Component::Normal(_))) {
        return Err("a name outside the root");
    }
    Ok(root.join(rel))
}

/// What the server did with a connection's requests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Served {
    /// Files sent.
    pub files: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Requests answered with an empty stream (refused, missing, given up by the client).
    pub refused: u64,
}

/// Answers `conn`'s requests with files under `root` until the client closes.
pub async fn serve_connection(conn: &ConnectionHandle, root: &Path) -> Served {
    let mut served = Served::default();
    loop {
        let answer = match conn.read_message().await {
            Ok(Delivery::Message { data, .. }) => match requested(root, &data) {
                Ok(path) => match read_file(&path).await {
                    Ok(bytes) => {
                        served.files += 1;
                        served.bytes += bytes.len() as u64;
                        bytes
                    }
                    Err(e) => {
                        eprintln!("{}: {}", path.display(), e);
                        served.refused += 1;
                        Bytes::new()
                    }
                },
                Err(why) => {
                    eprintln!("request refused: {why}");
                    served.refused += 1;
                    Bytes::new()
                }
            },
            // The answer keeps its place: answer n goes on request n's stream.
            Ok(Delivery::Gap { .. }) => {
                served.refused += 1;
                Bytes::new()
            }
            Err(_) => return served,
        };
        if conn.send_message(answer, Reliability::Reliable).await.is_err() {
            return served;
        }
    }
}

/// Runs file I/O off the async threads.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> std::io::Result<T> + Send + 'static,
) -> std::io::Result<T> {
    tokio::task::spawn_blocking(f).await.map_err(std::io::Error::other)?
}

async fn read_file(path: &Path) -> std::io::Result<Bytes> {
    let path = path.to_path_buf();
    blocking(move || {
        let meta = std::fs::metadata(&path)?;
        if !meta.is_file() || meta.len() > MAX_FILE {
            return Err(std::io::Error::other("not a file of at most 64 MiB"));
        }
        std::fs::read(&path).map(Bytes::from)
    })
    .await
}

/// Serves `root` on the endpoint `ep` (owned, or shared to read its statistics) with
/// `hq-interop` until the task is dropped: every connection is answered in a task of its
/// own.
pub async fn serve(ep: impl std::borrow::Borrow<driver::Endpoint>, root: PathBuf) {
    let root = Arc::new(root);
    while let Some(conn) = ep.borrow().accept().await {
        let root = Arc::clone(&root);
        tokio::spawn(async move {
            let remote = conn.remote();
            let s = serve_connection(&conn, &root).await;
            eprintln!(
                "{remote}: {} files, {} bytes, {} requests refused",
                s.files, s.bytes, s.refused
            );
        });
    }
}

/// A URL's server and file name.
pub fn parse_url(url: &str) -> Result<(String, String), HqError> {
    let bad = || HqError::BadUrl(url.to_string());
    let rest = url.strip_prefix("https://").ok_or_else(bad)?;
    let (authority, name) = rest.split_once('/').ok_or_else(bad)?;
    if authority.is_empty() || name.is_empty() || !authority.contains(':') {
        return Err(bad());
    }
    Ok((authority.to_string(), name.to_string()))
}

/// The server all `urls` name, resolved, and their file names in order.
pub async fn server_of(urls: &[String]) -> Result<(SocketAddr, Vec<String>), HqError> {
    let mut authority: Option<String> = None;
    let mut names = Vec::new();
    for u in urls {
        let (a, n) = parse_url(u)?;
        match &authority {
            Some(first) if *first != a => return Err(HqError::ManyServers(first.clone(), a)),
            _ => authority = Some(a),
        }
        names.push(n);
    }
    let Some(host) = authority else { return Err(HqError::BadUrl(String::new())) };
    let resolve = |message: String| HqError::Resolve { host: host.clone(), message };
    let addr = tokio::net::lookup_host(host.as_str())
        .await
        .map_err(|e| resolve(e.to_string()))?
        .next()
        .ok_or_else(|| resolve("no address".into()))?;
    Ok((addr, names))
}

/// Requests every name in `names` on `conn` at once and writes each answer to
/// `output/NAME` (its last path component); returns the bytes written.
pub async fn fetch(
    conn: &ConnectionHandle,
    names: &[String],
    output: &Path,
) -> Result<u64, HqError> {
    for name in names {
        let line = Bytes::from(format!("GET /{name}\r\n"));
        conn.send_message(line, Reliability::Reliable).await?;
    }
    let mut total = 0;
    for name in names {
        let data = match conn.read_message().await? {
            Delivery::Message { data, .. } if !data.is_empty() => data,
            _ => return Err(HqError::Missing(name.clone())),
        };
        let file = Path::new(name).file_name().map_or_else(|| name.into(), PathBuf::from);
        let path = output.join(file);
        let (to, bytes) = (path.clone(), data.clone());
        blocking(move || std::fs::write(&to, &bytes))
            .await
            .map_err(|e| HqError::Write { path, message: e.to_string() })?;
        total += data.len() as u64;
    }
    Ok(total)
}

/// Bytes received before `braid interop client --migrate` moves its path (the runner's
/// `connectionmigration` case: an active migration while the transfer runs).
pub const MIGRATE_AFTER_BYTES: u64 = 64 * 1024;

/// Waits until `conn` received `after` bytes, then moves its first path to a new socket
/// ([`ConnectionHandle::migrate`]); the new local address.
pub async fn migrate_after(conn: &ConnectionHandle, after: u64) -> Result<SocketAddr, HqError> {
    loop {
        let stats = conn.stats().await.ok_or(DriverError::TaskGone)?;
        if stats.paths.iter().map(|p| p.bytes_received).sum::<u64>() >= after {
            return Ok(conn.migrate(0).await?);
        }
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_name_files_under_the_root_only() {
        let root = Path::new("/srv");
        assert_eq!(requested(root, b"GET /a.bin\r\n"), Ok(PathBuf::from("/srv/a.bin")));
        assert_eq!(requested(root, b"GET /d/b\n"), Ok(PathBuf::from("/srv/d/b")));
        assert_eq!(requested(root, b"GET /c"), Ok(PathBuf::from("/srv/c")));
        for bad in [&b"GET /../etc/passwd\r\n"[..], b"GET //etc", b"PUT /a", b"GET /", b"\xff"] {
            assert!(requested(root, bad).is_err(), "{bad:?}");
        }
        assert!(requested(root, &[b'a'; MAX_REQUEST + 1]).is_err());
    }

    #[test]
    fn urls_name_one_server_and_files() {
        let (server, name) = parse_url("https://server:443/file1").expect("a URL");
        assert_eq!((server.as_str(), name.as_str()), ("server:443", "file1"));
        assert!(parse_url("http://server:443/a").is_err());
        assert!(parse_url("https://server/a").is_err(), "no port");
        assert!(parse_url("https://server:443/").is_err(), "no name");
    }
}
