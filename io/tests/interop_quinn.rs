//! Interoperation with an independent QUIC v1 stack (quinn 0.11), both ways, on real
//! loopback sockets: the handshake completes on QUIC version 1 (Initial keys from the
//! client's first destination id, whatever its length; transport parameters; Handshake and
//! 1-RTT keys from rustls), both sides then exchange 1-RTT packets with v1's frames only
//! (ACK, NEW_CONNECTION_ID, HANDSHAKE_DONE from the server, PING) because the peer announced
//! neither multipath nor Braid's frames, and an application close reaches the other side
//! with its code and reason. quinn's statistics count the frames it received, so a frame
//! it could not read (it closes the connection on any unknown type) would show here.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use braid_io::driver::{self, DriverError, PathSpec};
use braid_transport::path::PathRole;

mod interop_common;
use interop_common::{LOOPBACK, client_tls, config, path_from, server_tls};

/// quinn's client, trusting exactly the certificate with `fingerprint`.
fn quinn_client(fingerprint: [u8; 32]) -> quinn::Endpoint {
    let quic = quinn::crypto::rustls::QuicClientConfig::try_from(client_tls(fingerprint))
        .expect("a QUIC config");
    let mut client =
        quinn::Endpoint::client(SocketAddr::new(LOOPBACK, 0)).expect("a quinn endpoint");
    client.set_default_client_config(quinn::ClientConfig::new(Arc::new(quic)));
    client
}

/// quinn's server with a fresh certificate; and the certificate's fingerprint.
fn quinn_server() -> (quinn::Endpoint, [u8; 32]) {
    let (tls, fingerprint) = server_tls();
    let quic = quinn::crypto::rustls::QuicServerConfig::try_from(tls).expect("a QUIC config");
    let server_config = quinn::ServerConfig::with_crypto(Arc::new(quic));
    let server = quinn::Endpoint::server(server_config, SocketAddr::new(LOOPBACK, 0))
        .expect("a quinn server");
    (server, fingerprint)
}

/// One path from loopback to `remote`.
fn loopback_path(remote: SocketAddr) -> PathSpec {
    path_from(LOOPBACK, remote, PathRole::Wired)
}

/// Accepts one connection on `server` in a task of its own.
fn accept_one(
    server: quinn::Endpoint,
) -> tokio::task::JoinHandle<(quinn::Endpoint, quinn::Connection)> {
    tokio::spawn(async move {
        let incoming = server.accept().await.expect("an incoming connection");
        let conn = incoming.await.expect("quinn completes the handshake");
        (server, conn)
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quinn_client_completes_a_quic_v1_handshake_with_our_server() {
    let identity = braid_io::tls::self_signed().expect("a self-signed identity");
    let ep = driver::listen(SocketAddr::new(LOOPBACK, 0), config(), identity.crypto.clone())
        .await
        .expect("listening");
    let client = quinn_client(identity.fingerprint);
    // quinn's first Initial goes to a 20-byte destination id (its default): the Initial
    // keys and original_destination_connection_id come from all 20 bytes.
    let conn = tokio::time::timeout(
        Duration::from_secs(10),
        client.connect(ep.local_addr(), "localhost").expect("connecting"),
    )
    .await
    .expect("the handshake ends within 10 s")
    .expect("quinn accepts our handshake and transport parameters");
    let server = tokio::time::timeout(Duration::from_secs(5), ep.accept())
        .await
        .expect("the server accepts within 5 s")
        .expect("a connection");
    // Some round trips of 1-RTT packets: quinn reads all of ours or closes.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(conn.close_reason().is_none(), "quinn closed: {:?}", conn.close_reason());
    let rx = conn.stats().frame_rx;
    assert!(rx.handshake_done >= 1, "HANDSHAKE_DONE from the server: {rx:?}");
    assert!(rx.new_connection_id >= 1, "our id for path 0 as NEW_CONNECTION_ID: {rx:?}");
    assert!(rx.acks >= 1, "ACK frames: {rx:?}");
    let s = server.stats().await.expect("server statistics");
    assert_eq!(s.dropped.malformed, 0, "{:?}", s.dropped);

    conn.close(7u32.into(), b"done");
    match tokio::time::timeout(Duration::from_secs(5), server.read_message()).await {
        Ok(Err(DriverError::PeerClosed { code, reason })) => {
            assert_eq!((code, reason.as_str()), (7, "done"));
        }
        other => panic!("the server did not see quinn's close: {other:?}"),
    }
    client.wait_idle().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_client_completes_a_quic_v1_handshake_with_a_quinn_server() {
    let (server, fingerprint) = quinn_server();
    let addr = server.local_addr().expect("its address");
    let accepting = accept_one(server);
    let ours = tokio::time::timeout(
        Duration::from_secs(10),
        driver::connect(config(), braid_io::tls::pinned(fingerprint), vec![loopback_path(addr)]),
    )
    .await
    .expect("the handshake ends within 10 s")
    .expect("our client accepts quinn's handshake and transport parameters");
    let (server, conn) = tokio::time::timeout(Duration::from_secs(5), accepting)
        .await
        .expect("quinn accepts within 5 s")
        .expect("the accepting task");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(conn.close_reason().is_none(), "quinn closed: {:?}", conn.close_reason());
    let rx = conn.stats().frame_rx;
    assert!(rx.new_connection_id >= 1, "our id for path 0 as NEW_CONNECTION_ID: {rx:?}");
    assert!(rx.acks >= 1, "ACK frames: {rx:?}");
    let s = ours.stats().await.expect("client statistics");
    assert_eq!(s.dropped.malformed, 0, "{:?}", s.dropped);
    ours.close(9, b"bye").await;
    let reason = tokio::time::timeout(Duration::from_secs(5), conn.closed())
        .await
        .expect("quinn sees the close within 5 s");
    match reason {
        quinn::ConnectionError::ApplicationClosed(c) => {
            assert_eq!((c.error_code.into_inner(), &c.reason[..]), (9, &b"bye"[..]));
        }
        other => panic!("{other:?}"),
    }
    server.wait_idle().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_to_a_quinn_server_ends_the_connection_with_a_clear_error() {
    // Messages travel in Braid's DATA frame, which quinn did not announce: the driver
    // closes the connection and says why, instead of dropping the message and waiting.
    let (server, fingerprint) = quinn_server();
    let addr = server.local_addr().expect("its address");
    let accepting = accept_one(server);
    let ours =
        driver::connect(config(), braid_io::tls::pinned(fingerprint), vec![loopback_path(addr)])
            .await
            .expect("the handshake completes");
    let (server, conn) = accepting.await.expect("the accepting task");
    let message = bytes::Bytes::from_static(b"GET /clip");
    ours.send_message(message, braid_transport::proto::Reliability::Reliable)
        .await
        .expect("queued for the connection's task");
    match tokio::time::timeout(Duration::from_secs(5), ours.read_message()).await {
        Ok(Err(DriverError::NoMessageFrames)) => {}
        other => panic!("{other:?}"),
    }
    let reason = tokio::time::timeout(Duration::from_secs(5), conn.closed())
        .await
        .expect("quinn sees the close within 5 s");
    assert!(matches!(reason, quinn::ConnectionError::ApplicationClosed(_)), "{reason:?}");
    server.wait_idle().await;
}
