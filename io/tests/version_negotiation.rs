//! Version negotiation against an independent QUIC stack (quinn 0.11), both ways, on a
//! version Braid does not speak (draft-29, 0xff00001d; Braid speaks QUIC v1): a quinn client
//! offering it to a Braid server is told version 1 by return and fails with "no compatible
//! version"; a Braid client of a quinn server that speaks only draft-29 gets that server's
//! Version Negotiation and ends its attempt naming 0xff00001d. Neither waits for a timeout.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use braid_io::driver::{self, DriverError, PathSpec};
use braid_transport::path::PathRole;
use braid_transport::profile;
use braid_transport::proto::Config;

const LOOPBACK: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);
/// QUIC draft-29's version, which quinn still speaks and Braid does not.
const DRAFT_29: u32 = 0xff00_001d;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_draft_29_client_is_told_our_version_at_once() {
    let p = profile::lookup("mptcp").expect("mptcp is registered");
    let config = Arc::new(Config::new(Arc::clone(&p.controller), Arc::clone(&p.scheduler)));
    let identity = braid_io::tls::self_signed().expect("a self-signed identity");
    let ep = driver::listen(SocketAddr::new(LOOPBACK, 0), config, identity.crypto.clone())
        .await
        .expect("listening");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .expect("TLS 1.3")
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_no_client_auth();
    let quic = quinn::crypto::rustls::QuicClientConfig::try_from(tls).expect("a QUIC config");
    let mut client =
        quinn::Endpoint::client(SocketAddr::new(LOOPBACK, 0)).expect("a quinn endpoint");
    let mut client_config = quinn::ClientConfig::new(Arc::new(quic));
    client_config.version(DRAFT_29);
    client.set_default_client_config(client_config);
    let t0 = std::time::Instant::now();
    let connecting = client.connect(ep.local_addr(), "localhost").expect("connecting");
    let err = tokio::time::timeout(Duration::from_secs(10), connecting)
        .await
        .expect("quinn ends its attempt within 10 s")
        .expect_err("no connection");
    assert!(matches!(err, quinn::ConnectionError::VersionMismatch), "{err:?}");
    assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
    let stats = ep.stats();
    assert!(stats.version_negotiations >= 1 && stats.accepted == 0, "{stats:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_client_of_a_draft_29_server_ends_at_its_version_negotiation() {
    let id = rcgen::generate_simple_self_signed(vec!["localhost".into()]).expect("a certificate");
    let key = rustls::pki_types::PrivatePkcs8KeyDer::from(id.signing_key.serialize_der());
    let server_config =
        quinn::ServerConfig::with_single_cert(vec![id.cert.der().clone()], key.into())
            .expect("a quinn server configuration");
    let mut endpoint_config = quinn::EndpointConfig::default();
    endpoint_config.supported_versions(vec![DRAFT_29]);
    let socket = std::net::UdpSocket::bind(SocketAddr::new(LOOPBACK, 0)).expect("a socket");
    let server = quinn::Endpoint::new(
        endpoint_config,
        Some(server_config),
        socket,
        Arc::new(quinn::TokioRuntime),
    )
    .expect("a quinn server");
    let addr = server.local_addr().expect("its address");
    let p = profile::lookup("mptcp").expect("mptcp is registered");
    let config = Arc::new(Config::new(Arc::clone(&p.controller), Arc::clone(&p.scheduler)));
    let path = PathSpec {
        local: SocketAddr::new(LOOPBACK, 0),
        iface: None,
        remote: addr,
        role: PathRole::Wired,
    };
    let t0 = std::time::Instant::now();
    let err = tokio::time::timeout(
        Duration::from_secs(10),
        driver::connect(config, braid_io::tls::pinned([0x11; 32]), vec![path]),
    )
    .await
    .expect("the attempt ends within 10 s")
    .expect_err("no connection");
    match &err {
        DriverError::Handshake(m) => assert!(m.contains("0xff00001d"), "{m}"),
        other => panic!("{other}"),
    }
    assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
    server.close(0u32.into(), b"");
}
