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

/// What [`relay`] saw of each short-header datagram: the client address it came from or
/// went to, whether it went to the server, and the destination connection id it carried
/// (8 bytes, as every stack here uses).
// Not every interop test binary uses the relay.
#[allow(dead_code)]
pub type Sightings = Vec<(SocketAddr, bool, Vec<u8>)>;

/// A relay in front of `server` on loopback, as a NAT that gives each client address a
/// mapping of its own (an outside socket): a client that moves to a new port reaches the
/// server from a new address. It records the destination id of every short-header
/// datagram both ways; the task ends after a second without traffic and returns them.
#[allow(dead_code)]
pub async fn relay(server: SocketAddr) -> (SocketAddr, tokio::task::JoinHandle<Sightings>) {
    use std::collections::BTreeMap;
    use std::sync::Mutex;
    use tokio::net::UdpSocket;
    fn record(seen: &Mutex<Sightings>, client: SocketAddr, to_server: bool, d: &[u8]) {
        if d.len() > 9 && d[0] & 0x80 == 0 {
            let mut s = seen.lock().unwrap_or_else(|e| e.into_inner());
            s.push((client, to_server, d[1..9].to_vec()));
        }
    }
    let front = Arc::new(UdpSocket::bind((LOOPBACK, 0)).await.expect("the relay's front"));
    let addr = front.local_addr().expect("its address");
    let task = tokio::spawn(async move {
        let seen = Arc::new(Mutex::new(Sightings::new()));
        let (back_tx, mut back_rx) = tokio::sync::mpsc::unbounded_channel::<()>();
        let mut outside: BTreeMap<SocketAddr, Arc<UdpSocket>> = BTreeMap::new();
        let mut buf = vec![0u8; 65_536];
        loop {
            tokio::select! {
                r = front.recv_from(&mut buf) => {
                    let Ok((n, from)) = r else { continue };
                    let d = &buf[..n];
                    record(&seen, from, true, d);
                    let sock = match outside.get(&from) {
                        Some(s) => Arc::clone(s),
                        None => {
                            let s = Arc::new(
                                UdpSocket::bind((LOOPBACK, 0)).await.expect("an outside socket"),
                            );
                            s.connect(server).await.expect("the server's address");
                            // Answers to this mapping go back to `from`.
                            let (s2, front2) = (Arc::clone(&s), Arc::clone(&front));
                            let (seen2, tx) = (Arc::clone(&seen), back_tx.clone());
                            tokio::spawn(async move {
                                let mut b = vec![0u8; 65_536];
                                while let Ok(n) = s2.recv(&mut b).await {
                                    record(&seen2, from, false, &b[..n]);
                                    let _ = front2.send_to(&b[..n], from).await;
                                    let _ = tx.send(());
                                }
                            });
                            outside.insert(from, Arc::clone(&s));
                            s
                        }
                    };
                    let _ = sock.send(d).await;
                }
                _ = back_rx.recv() => {}
                () = tokio::time::sleep(std::time::Duration::from_secs(1)) => {
                    return std::mem::take(&mut *seen.lock().unwrap_or_else(|e| e.into_inner()));
                }
            }
        }
    });
    (addr, task)
}

/// Checks an active migration in `seen`: the client sent from two addresses, and no
/// destination id used from (or to) the first address appears from (or to) the second, in
/// either direction (RFC 9000 §9.5; the interop runner checks the client's direction).
#[allow(dead_code)]
pub fn assert_migrated_with_new_ids(seen: &Sightings) {
    use std::collections::BTreeSet;
    let mut sources: Vec<SocketAddr> = Vec::new();
    for (from, to_server, _) in seen {
        if *to_server && !sources.contains(from) {
            sources.push(*from);
        }
    }
    assert_eq!(sources.len(), 2, "the client sent from {sources:?}");
    for dir in [true, false] {
        let ids = |s: SocketAddr| -> BTreeSet<&Vec<u8>> {
            seen.iter().filter(|(f, d, _)| *f == s && *d == dir).map(|(_, _, id)| id).collect()
        };
        let (before, after) = (ids(sources[0]), ids(sources[1]));
        assert!(!after.is_empty(), "to server {dir}: nothing at the new address");
        assert!(
            before.is_disjoint(&after),
            "to server {dir}: an id used at both addresses: {before:x?} {after:x?}"
        );
    }
}
