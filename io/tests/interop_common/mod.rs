//! What the interop tests with other QUIC stacks share: Braid's configuration, and the
//! rustls configurations (TLS 1.3, Braid's ALPN) their clients and servers are built from.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

use braid_io::driver::PathSpec;
use braid_transport::path::PathRole;
use braid_transport::profile;
use braid_transport::proto::Config;
use braid_transport::proto::crypto::{ALPN, PinnedCertVerifier, cert_fingerprint};

/// The loopback address every test binds to.
pub const LOOPBACK: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

/// Braid's `mptcp` configuration.
pub fn config() -> Arc<Config> {
    let p = profile::lookup("mptcp").expect("mptcp is registered");
    Arc::new(Config::new(Arc::clone(&p.controller), Arc::clone(&p.scheduler)))
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A client's TLS: trusts exactly the certificate with `fingerprint`, speaks Braid's ALPN.
pub fn client_tls(fingerprint: [u8; 32]) -> rustls::ClientConfig {
    let p = provider();
    let verifier =
        Arc::new(PinnedCertVerifier::new(fingerprint, p.signature_verification_algorithms));
    let mut tls = rustls::ClientConfig::builder_with_provider(p)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .expect("TLS 1.3")
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    tls.alpn_protocols = vec![ALPN.to_vec()];
    tls
}

/// A server's TLS with a fresh self-signed certificate, speaking Braid's ALPN; and the
/// certificate's fingerprint.
pub fn server_tls() -> (rustls::ServerConfig, [u8; 32]) {
    let id = rcgen::generate_simple_self_signed(vec!["localhost".into()]).expect("a certificate");
    let fingerprint = cert_fingerprint(id.cert.der());
    let key = rustls::pki_types::PrivatePkcs8KeyDer::from(id.signing_key.serialize_der());
    let mut tls = rustls::ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .expect("TLS 1.3")
        .with_no_client_auth()
        .with_single_cert(vec![id.cert.der().clone()], key.into())
        .expect("a server certificate");
    tls.alpn_protocols = vec![ALPN.to_vec()];
    (tls, fingerprint)
}

/// One path from `local` to `remote`.
#[allow(dead_code)] // not every interop test opens paths of its own
pub fn path_from(local: IpAddr, remote: SocketAddr, role: PathRole) -> PathSpec {
    PathSpec { local: SocketAddr::new(local, 0), iface: None, remote, role }
}
