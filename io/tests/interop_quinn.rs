//! Interoperation with an independent QUIC v1 stack (quinn 0.11), both ways, on real
//! loopback sockets: the handshake completes on QUIC version 1 (Initial keys from the
//! client's first destination id, whatever its length; transport parameters; Handshake and
//! 1-RTT keys from rustls); both sides then exchange 1-RTT packets with v1's frames only
//! (ACK, NEW_CONNECTION_ID, HANDSHAKE_DONE from the server, PING, and the stream frames
//! messages travel in) because the peer announced neither multipath nor Braid's frames; an
//! application close reaches the other side with its code and reason. quinn's statistics
//! count the frames it received, so a frame it could not read (it closes the connection on
//! any unknown type) would show here. The interop runner's cases are in `interop_hq.rs`.

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

/// Message `i` of a test: `len` bytes that name it.
fn message(i: u64, len: usize) -> bytes::Bytes {
    (0..len).map(|k| (i as usize * 31 + k * 7) as u8).collect()
}

/// Lengths of the messages each test sends: one empty, a datagram's worth, several
/// datagrams, and 200 kB (more than quinn's default connection window of 1.25 MB ÷ 8).
const LENGTHS: [usize; 6] = [0, 900, 1200, 16_000, 200_000, 3];

/// Reads `LENGTHS.len()` unidirectional streams from `conn` in order of their ids, each to
/// its end, checking each is the message of its index; returns the stream ids.
async fn quinn_reads_messages(conn: &quinn::Connection) -> Vec<u64> {
    let mut ids = Vec::new();
    for (i, &len) in LENGTHS.iter().enumerate() {
        let mut s = conn.accept_uni().await.expect("a unidirectional stream");
        ids.push(u64::from(s.id()));
        let data = s.read_to_end(1 << 20).await.expect("the stream to its FIN");
        assert_eq!(data, message(i as u64, len), "message {i}");
    }
    ids
}

/// Sends `LENGTHS.len()` messages from quinn, each on a unidirectional stream of its own.
async fn quinn_sends_messages(conn: &quinn::Connection) {
    for (i, &len) in LENGTHS.iter().enumerate() {
        let mut s = conn.open_uni().await.expect("a unidirectional stream");
        s.write_all(&message(100 + i as u64, len)).await.expect("written");
        s.finish().expect("finished");
    }
}

/// Reads `LENGTHS.len()` messages from a Braid connection, checking them.
async fn braid_reads_messages(conn: &driver::ConnectionHandle) {
    for (i, &len) in LENGTHS.iter().enumerate() {
        let d = tokio::time::timeout(Duration::from_secs(10), conn.read_message())
            .await
            .expect("a message within 10 s")
            .expect("the connection lives");
        let want = braid_transport::proto::Delivery::Message {
            id: i as u64,
            data: message(100 + i as u64, len),
        };
        assert!(d == want, "message {i}: {:?}", d);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_travel_both_ways_between_our_server_and_a_quinn_client_on_v1_streams() {
    // quinn did not announce Braid's frames: each message goes on a unidirectional stream
    // of its own, in order (server streams 3, 7, 11 …), with FIN at its end; quinn's
    // streams come back as messages in the order of their ids.
    let identity = braid_io::tls::self_signed().expect("a self-signed identity");
    let ep = driver::listen(SocketAddr::new(LOOPBACK, 0), config(), identity.crypto.clone())
        .await
        .expect("listening");
    let client = quinn_client(identity.fingerprint);
    let conn = client
        .connect(ep.local_addr(), "localhost")
        .expect("connecting")
        .await
        .expect("the handshake");
    let server = ep.accept().await.expect("a connection");
    for (i, &len) in LENGTHS.iter().enumerate() {
        let rel = braid_transport::proto::Reliability::Reliable;
        let id = server.send_message(message(i as u64, len), rel).await.expect("queued");
        assert_eq!(id, i as u64);
    }
    let reading = tokio::time::timeout(Duration::from_secs(10), quinn_reads_messages(&conn));
    let (ids, ()) = tokio::join!(
        async { reading.await.expect("quinn reads every message within 10 s") },
        async {
            quinn_sends_messages(&conn).await;
            braid_reads_messages(&server).await;
        }
    );
    assert_eq!(ids, [3, 7, 11, 15, 19, 23], "server-initiated unidirectional stream ids");
    let s = server.stats().await.expect("server statistics");
    assert_eq!(s.dropped.malformed, 0, "{:?}", s.dropped);
    assert!(conn.close_reason().is_none(), "quinn closed: {:?}", conn.close_reason());
    conn.close(0u32.into(), b"done");
    client.wait_idle().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_travel_both_ways_between_our_client_and_a_quinn_server_on_v1_streams() {
    let (server, fingerprint) = quinn_server();
    let addr = server.local_addr().expect("its address");
    let accepting = accept_one(server);
    let ours =
        driver::connect(config(), braid_io::tls::pinned(fingerprint), vec![loopback_path(addr)])
            .await
            .expect("the handshake completes");
    let (server, conn) = accepting.await.expect("the accepting task");
    for (i, &len) in LENGTHS.iter().enumerate() {
        let rel = braid_transport::proto::Reliability::Reliable;
        ours.send_message(message(i as u64, len), rel).await.expect("queued");
    }
    let reading = tokio::time::timeout(Duration::from_secs(10), quinn_reads_messages(&conn));
    let (ids, ()) = tokio::join!(
        async { reading.await.expect("quinn reads every message within 10 s") },
        async {
            quinn_sends_messages(&conn).await;
            braid_reads_messages(&ours).await;
        }
    );
    assert_eq!(ids, [2, 6, 10, 14, 18, 22], "client-initiated unidirectional stream ids");
    assert!(conn.close_reason().is_none(), "quinn closed: {:?}", conn.close_reason());
    ours.close(0, b"done").await;
    server.wait_idle().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_larger_than_quinns_stream_window_arrives_as_quinn_raises_it() {
    // quinn grants 1.25 MB per stream at first: a 5 MB message is sent up to the limit
    // and goes on as quinn's MAX_STREAM_DATA frames raise it while it reads.
    let identity = braid_io::tls::self_signed().expect("a self-signed identity");
    let mut cfg = (*config()).clone();
    cfg.send_buffer_bytes = 16 << 20;
    let ep = driver::listen(SocketAddr::new(LOOPBACK, 0), Arc::new(cfg), identity.crypto.clone())
        .await
        .expect("listening");
    let client = quinn_client(identity.fingerprint);
    let conn = client
        .connect(ep.local_addr(), "localhost")
        .expect("connecting")
        .await
        .expect("a handshake");
    let server = ep.accept().await.expect("a connection");
    let big = message(9, 5_000_000);
    server
        .send_message(big.clone(), braid_transport::proto::Reliability::Reliable)
        .await
        .expect("queued");
    let read = async {
        let mut s = conn.accept_uni().await.expect("a stream");
        s.read_to_end(8 << 20).await.expect("the message to its FIN")
    };
    let got = tokio::time::timeout(Duration::from_secs(20), read).await.expect("within 20 s");
    assert!(got == big, "{} bytes arrived", got.len());
    assert!(conn.stats().frame_tx.max_stream_data >= 1, "{:?}", conn.stats().frame_tx);
    conn.close(0u32.into(), b"");
    client.wait_idle().await;
}
