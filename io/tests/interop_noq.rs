//! Interoperation with n0's noq 1.4 (a quinn fork speaking RFC 10069's multipath QUIC),
//! both ways, with multipath enabled on both sides, on real loopback sockets: the
//! handshake completes on QUIC v1, multipath is negotiated (`initial_max_path_id` from
//! both), and both sides then run path 0 on RFC 10069's frames (PATH_ACK,
//! PATH_NEW_CONNECTION_ID for path 0 and the path ids ahead) without either closing on a
//! frame it cannot read; an application close reaches the other side with its code and
//! reason. Braid's extension frames are not sent (noq does not announce them), so no media
//! flows yet: messages are Braid's DATA frames, not v1 STREAM frames.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use braid_io::driver::{self, DriverError};
use braid_transport::path::PathRole;

mod interop_common;
use interop_common::{LOOPBACK, client_tls, config, path_from, server_tls};

/// noq's transport settings: multipath on, four paths at most.
fn multipath() -> Arc<noq::TransportConfig> {
    let mut t = noq::TransportConfig::default();
    t.max_concurrent_multipath_paths(4);
    Arc::new(t)
}

/// noq's client, multipath on, trusting exactly the certificate with `fingerprint`, its
/// socket bound to `bind` (port 0).
fn noq_client(fingerprint: [u8; 32], bind: IpAddr) -> noq::Endpoint {
    let quic = noq::crypto::rustls::QuicClientConfig::try_from(client_tls(fingerprint))
        .expect("a QUIC config");
    let mut config = noq::ClientConfig::new(Arc::new(quic));
    config.transport_config(multipath());
    let client = noq::Endpoint::client(SocketAddr::new(bind, 0)).expect("a noq endpoint");
    client.set_default_client_config(config);
    client
}

/// Accepts one connection on `server` in a task of its own.
fn accept_one(server: noq::Endpoint) -> tokio::task::JoinHandle<(noq::Endpoint, noq::Connection)> {
    tokio::spawn(async move {
        let incoming = server.accept().await.expect("an incoming connection");
        let conn = incoming.await.expect("noq completes the handshake");
        (server, conn)
    })
}

fn noq_server() -> (noq::Endpoint, [u8; 32]) {
    let (tls, fingerprint) = server_tls();
    let quic = noq::crypto::rustls::QuicServerConfig::try_from(tls).expect("a QUIC config");
    let mut config = noq::ServerConfig::with_crypto(Arc::new(quic));
    config.transport_config(multipath());
    let server = noq::Endpoint::server(config, SocketAddr::new(LOOPBACK, 0)).expect("a noq server");
    (server, fingerprint)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_noq_client_with_multipath_completes_a_handshake_with_our_server() {
    let identity = braid_io::tls::self_signed().expect("a self-signed identity");
    let ep = driver::listen(SocketAddr::new(LOOPBACK, 0), config(), identity.crypto.clone())
        .await
        .expect("listening");
    let client = noq_client(identity.fingerprint, LOOPBACK);
    let conn = tokio::time::timeout(
        Duration::from_secs(10),
        client.connect(ep.local_addr(), "localhost").expect("connecting"),
    )
    .await
    .expect("the handshake ends within 10 s")
    .expect("noq accepts our handshake and transport parameters");
    let server = tokio::time::timeout(Duration::from_secs(5), ep.accept())
        .await
        .expect("the server accepts within 5 s")
        .expect("a connection");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(conn.close_reason().is_none(), "noq closed: {:?}", conn.close_reason());
    let rx = conn.stats().frame_rx;
    assert!(rx.handshake_done >= 1, "HANDSHAKE_DONE: {rx:?}");
    assert!(rx.path_new_connection_id >= 1, "PATH_NEW_CONNECTION_ID: {rx:?}");
    assert!(rx.path_acks >= 1, "PATH_ACK: {rx:?}");
    let s = server.stats().await.expect("server statistics");
    assert_eq!(s.dropped.malformed, 0, "{:?}", s.dropped);

    conn.close(7u32.into(), b"done");
    match tokio::time::timeout(Duration::from_secs(5), server.read_message()).await {
        Ok(Err(DriverError::PeerClosed { code, reason })) => {
            assert_eq!((code, reason.as_str()), (7, "done"));
        }
        other => panic!("the server did not see noq's close: {other:?}"),
    }
    client.wait_idle().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_client_completes_a_handshake_with_a_noq_server_with_multipath() {
    let (server, fingerprint) = noq_server();
    let addr = server.local_addr().expect("its address");
    let accepting = accept_one(server);
    let path = path_from(LOOPBACK, addr, PathRole::Wired);
    let ours = tokio::time::timeout(
        Duration::from_secs(10),
        driver::connect(config(), braid_io::tls::pinned(fingerprint), vec![path]),
    )
    .await
    .expect("the handshake ends within 10 s")
    .expect("our client accepts noq's handshake and transport parameters");
    let (server, conn) = tokio::time::timeout(Duration::from_secs(5), accepting)
        .await
        .expect("noq accepts within 5 s")
        .expect("the accepting task");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(conn.close_reason().is_none(), "noq closed: {:?}", conn.close_reason());
    let rx = conn.stats().frame_rx;
    assert!(rx.path_new_connection_id >= 1, "PATH_NEW_CONNECTION_ID: {rx:?}");
    assert!(rx.path_acks >= 1, "PATH_ACK: {rx:?}");
    let s = ours.stats().await.expect("client statistics");
    assert_eq!(s.dropped.malformed, 0, "{:?}", s.dropped);

    ours.close(9, b"bye").await;
    let reason = tokio::time::timeout(Duration::from_secs(5), conn.closed())
        .await
        .expect("noq sees the close within 5 s");
    match reason {
        noq::ConnectionError::ApplicationClosed(c) => {
            assert_eq!((c.error_code.into_inner(), &c.reason[..]), (9, &b"bye"[..]));
        }
        other => panic!("{other:?}"),
    }
    server.wait_idle().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_noq_client_opens_a_second_path_to_our_server_the_rfc_10069_way() {
    // noq opens path 1 from another local address with a PATH_CHALLENGE on the new path id
    // (no Braid PATH_JOIN): the server admits it, answers the challenge on that path,
    // challenges the new address in turn, and the path is validated at both ends.
    let identity = braid_io::tls::self_signed().expect("a self-signed identity");
    let ep = driver::listen(SocketAddr::new(LOOPBACK, 0), config(), identity.crypto.clone())
        .await
        .expect("listening");
    // Bound to the unspecified address, so that each path may send from its own.
    let client = noq_client(identity.fingerprint, IpAddr::V4(Ipv4Addr::UNSPECIFIED));
    let conn = client
        .connect(ep.local_addr(), "localhost")
        .expect("connecting")
        .await
        .expect("the handshake completes");
    let server = tokio::time::timeout(Duration::from_secs(5), ep.accept())
        .await
        .expect("the server accepts within 5 s")
        .expect("a connection");
    let second =
        noq::FourTuple::new(ep.local_addr(), Some(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2))));
    let mut opened = None;
    for _ in 0..40 {
        match tokio::time::timeout(
            Duration::from_secs(5),
            conn.open_path(second, noq::PathStatus::Available),
        )
        .await
        {
            Ok(Ok(path)) => {
                opened = Some(path.id());
                break;
            }
            // The server's ids for path 1 may not have arrived yet.
            Ok(Err(noq::PathError::RemoteCidsExhausted | noq::PathError::MaxPathIdReached)) => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            other => panic!("noq could not open the path: {other:?}"),
        }
    }
    let id = opened.expect("path 1 opened within 2 s");
    assert_ne!(id, noq::PathId::ZERO);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(conn.close_reason().is_none(), "noq closed: {:?}", conn.close_reason());
    let s = server.stats().await.expect("server statistics");
    let validated: Vec<bool> = s.paths.iter().map(|p| p.validated).collect();
    assert_eq!(validated, [true, true], "{:?}", s.paths);
    conn.close(0u32.into(), b"");
    client.wait_idle().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_client_opens_a_second_path_to_a_noq_server_the_rfc_10069_way() {
    // Toward a peer without Braid's frames the client opens path 1 with a PATH_CHALLENGE on
    // the new path id (no PATH_JOIN); noq answers, challenges back, and the path is
    // validated at both ends.
    let (server, fingerprint) = noq_server();
    let addr = server.local_addr().expect("its address");
    let accepting = accept_one(server);
    let paths = vec![
        path_from(LOOPBACK, addr, PathRole::Wifi),
        path_from(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2)), addr, PathRole::Lte),
    ];
    let ours = driver::connect(config(), braid_io::tls::pinned(fingerprint), paths)
        .await
        .expect("the handshake completes");
    let (server, conn) = accepting.await.expect("the accepting task");
    let mut both = false;
    for _ in 0..50 {
        let s = ours.stats().await.expect("client statistics");
        if s.paths.len() == 2 && s.paths.iter().all(|p| p.validated) {
            both = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let s = ours.stats().await.expect("client statistics");
    assert!(both, "path 1 not validated within 5 s: {:?}", s.paths);
    assert!(conn.close_reason().is_none(), "noq closed: {:?}", conn.close_reason());
    let rx = conn.stats().frame_rx;
    assert!(rx.path_challenge >= 1 && rx.path_response >= 1, "{rx:?}");
    ours.close(0, b"").await;
    server.wait_idle().await;
}
