//! The driver on loopback sockets.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::UdpSocket;
use tokio::task::JoinHandle;

use braid_transport::cc::RenoConfig;
use braid_transport::path::{PathId, PathRole};
use braid_transport::proto::{Config, Delivery, Reliability};
use braid_transport::sched::MinRttConfig;

use super::handle::Command;
use super::*;

const LOOPBACK: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

/// One self-signed identity for the tests of this module.
fn identity() -> &'static crate::tls::ServerIdentity {
    static ID: std::sync::OnceLock<crate::tls::ServerIdentity> = std::sync::OnceLock::new();
    ID.get_or_init(|| crate::tls::self_signed().expect("a self-signed certificate"))
}

fn config() -> Arc<Config> {
    let mut c = Config::new(Arc::new(RenoConfig::default()), Arc::new(MinRttConfig::default()));
    c.idle_timeout = Duration::from_secs(3);
    c.keep_alive = Some(Duration::from_millis(200));
    Arc::new(c)
}

fn local_path(remote: SocketAddr) -> PathSpec {
    PathSpec { local: SocketAddr::new(LOOPBACK, 0), iface: None, remote, role: PathRole::Wired }
}

fn message(i: u64) -> Bytes {
    Bytes::from(
        (0..4096u64).map(|k| (i.wrapping_mul(31).wrapping_add(k) % 251) as u8).collect::<Vec<u8>>(),
    )
}

/// Server sends `n` messages on the first accepted connection.
fn serve(ep: Arc<Endpoint>, n: u64) -> JoinHandle<Arc<ConnectionHandle>> {
    tokio::spawn(async move {
        let conn = Arc::new(ep.accept().await.expect("a connection"));
        for i in 0..n {
            conn.send_message(message(i), Reliability::Reliable).await.expect("send");
        }
        conn
    })
}

async fn read_all(client: &ConnectionHandle, n: u64) {
    for i in 0..n {
        let d = tokio::time::timeout(Duration::from_secs(10), client.read_message())
            .await
            .expect("message in time")
            .expect("open connection");
        match d {
            Delivery::Message { id, data } => {
                assert_eq!(id, i);
                assert_eq!(data, message(i), "message {i} corrupt");
            }
            Delivery::Gap { id } => panic!("gap {id}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_cross_two_loopback_paths_intact_and_in_order() {
    let ep = Arc::new(
        listen(SocketAddr::new(LOOPBACK, 0), config(), identity().crypto.clone()).await.unwrap(),
    );
    let addr = ep.local_addr();
    let server = serve(Arc::clone(&ep), 2000);
    let client =
        connect(config(), identity().pinned_client(), vec![local_path(addr), local_path(addr)])
            .await
            .unwrap();
    read_all(&client, 2000).await;
    let stats = client.stats().await.unwrap();
    assert_eq!(stats.bytes_delivered, 2000 * 4096);
    assert_eq!(stats.paths.len(), 2);
    assert!(stats.paths.iter().all(|p| p.validated), "{stats:?}");
    assert_eq!(
        client.paths().iter().map(|p| p.id).collect::<Vec<_>>(),
        vec![Some(PathId(0)), Some(PathId(1))]
    );
    let server = server.await.unwrap();
    client.close(0, b"done").await;
    // The server learns it.
    let end = tokio::time::timeout(Duration::from_secs(2), server.read_message()).await.unwrap();
    assert_eq!(end, Err(DriverError::PeerClosed { code: 0, reason: "done".into() }));
    assert_eq!(ep.stats().accepted, 1);
}

#[tokio::test]
async fn connecting_to_a_closed_port_is_refused_quickly() {
    let probe = std::net::UdpSocket::bind((LOOPBACK, 0)).unwrap();
    let addr = probe.local_addr().unwrap();
    drop(probe);
    let t0 = tokio::time::Instant::now();
    let err =
        connect(config(), identity().pinned_client(), vec![local_path(addr)]).await.unwrap_err();
    assert_eq!(err, DriverError::Refused { remote: addr });
    assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
}

#[tokio::test]
async fn a_silent_server_is_a_handshake_timeout() {
    let silent = std::net::UdpSocket::bind((LOOPBACK, 0)).unwrap();
    let addr = silent.local_addr().unwrap();
    let opts = ConnectOptions {
        handshake_timeout: Duration::from_millis(400),
        ..ConnectOptions::default()
    };
    let err = connect_with(config(), identity().pinned_client(), vec![local_path(addr)], opts)
        .await
        .unwrap_err();
    assert_eq!(
        err,
        DriverError::HandshakeTimeout { remote: addr, after: Duration::from_millis(400) }
    );
    assert!(err.to_string().contains("no answer from"), "{err}");
}

#[tokio::test]
async fn connect_without_paths_is_an_error() {
    assert_eq!(
        connect(config(), identity().pinned_client(), Vec::new()).await.unwrap_err(),
        DriverError::NoPaths
    );
}

#[tokio::test]
async fn binding_to_a_missing_interface_is_a_clear_error() {
    let mut p = local_path(SocketAddr::new(LOOPBACK, 9));
    p.iface = Some("braid-no-such-if0".into());
    match connect(config(), identity().pinned_client(), vec![p]).await.unwrap_err() {
        DriverError::BindDevice { iface, .. } => assert_eq!(iface, "braid-no-such-if0"),
        e => panic!("{e}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_at_the_server_port_is_dropped_and_the_transfer_is_intact() {
    let ep = Arc::new(
        listen(SocketAddr::new(LOOPBACK, 0), config(), identity().crypto.clone()).await.unwrap(),
    );
    let addr = ep.local_addr();
    let server = serve(Arc::clone(&ep), 1000);
    let spray = tokio::spawn(async move {
        let s = UdpSocket::bind((LOOPBACK, 0)).await.unwrap();
        let mut x = 88172645463325252u64;
        for i in 0..3000u32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let mut d = x.to_le_bytes().repeat(1 + (i % 100) as usize);
            if i % 3 == 0 {
                d[0] = 1;
            }
            let _ = s.send_to(&d, addr).await;
            if i % 50 == 0 {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
    });
    let client =
        connect(config(), identity().pinned_client(), vec![local_path(addr)]).await.unwrap();
    read_all(&client, 1000).await;
    spray.await.unwrap();
    let _ = server.await.unwrap();
    assert!(ep.stats().dropped_unknown > 1000, "{:?}", ep.stats());
    assert_eq!(ep.stats().accepted, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_path_whose_socket_fails_is_removed_and_the_others_carry_on() {
    let ep = Arc::new(
        listen(SocketAddr::new(LOOPBACK, 0), config(), identity().crypto.clone()).await.unwrap(),
    );
    let addr = ep.local_addr();
    let server = serve(Arc::clone(&ep), 3000);
    let client =
        connect(config(), identity().pinned_client(), vec![local_path(addr), local_path(addr)])
            .await
            .unwrap();
    read_all(&client, 200).await;
    client.commands.send(Command::BreakPath(0)).unwrap();
    for i in 200..3000 {
        match client.read_message().await.unwrap() {
            Delivery::Message { id, data } => {
                assert_eq!(id, i);
                assert_eq!(data, message(i));
            }
            Delivery::Gap { id } => panic!("gap {id}"),
        }
    }
    let info = client.paths();
    assert!(info[0].error.as_deref().is_some_and(|e| e.contains("no such device")), "{info:?}");
    assert!(info[1].error.is_none());
    let _ = server.await.unwrap();
    // Breaking the last path ends the connection (unless the server, done sending, closed
    // it first and the task is already gone).
    let _ = client.commands.send(Command::BreakPath(1));
    let err = tokio::time::timeout(Duration::from_secs(2), async {
        loop {
            if let Err(e) = client.read_message().await {
                return e;
            }
        }
    })
    .await
    .unwrap();
    // The server may close first (it is done sending): either way the connection ends.
    assert!(
        matches!(err, DriverError::AllPathsFailed { .. } | DriverError::PeerClosed { .. }),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vanished_server_fails_the_pending_read() {
    let ep =
        listen(SocketAddr::new(LOOPBACK, 0), config(), identity().crypto.clone()).await.unwrap();
    let addr = ep.local_addr();
    let accept = tokio::spawn(async move {
        let c = ep.accept().await.unwrap();
        (ep, c)
    });
    let client =
        connect(config(), identity().pinned_client(), vec![local_path(addr)]).await.unwrap();
    let (ep, server_conn) = accept.await.unwrap();
    // The server disappears without a word: its task stops, its socket closes.
    let task = server_conn.take_task();
    if let Some(t) = task {
        t.abort();
        let _ = t.await;
    }
    drop(ep);
    drop(server_conn);
    tokio::time::sleep(Duration::from_millis(50)).await;
    let t0 = tokio::time::Instant::now();
    let err = tokio::time::timeout(Duration::from_secs(5), client.read_message())
        .await
        .unwrap()
        .unwrap_err();
    // A datagram that reached the endpoint between the task's end and the socket's gets a
    // stateless reset; otherwise the port is unreachable.
    assert!(
        matches!(
            err,
            DriverError::PeerUnreachable { .. }
                | DriverError::IdleTimeout { .. }
                | DriverError::StatelessReset
        ),
        "{err}"
    );
    assert!(t0.elapsed() < Duration::from_secs(4), "{:?}", t0.elapsed());
}

/// The streaming code over real sockets and the relay emulator: `mptcp` with the code at
/// τ = 4, 10 % loss on one path's data direction; every message arrives intact and in
/// order, CODED packets travel and repair losses.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_streaming_code_repairs_loss_through_the_relay_emulator() {
    use braid_transport::profile::{Clock, ConfigParams, Side};
    let s = braid_netem::scenario::Scenario::parse(
        r#"
name = "fec"
duration_s = 30
[[path]]
name = "wifi"
role = "wifi"
down = { rate = "20mbit", delay_ms = 10, loss = 0.1 }
up = { rate = "20mbit", delay_ms = 10 }
[[path]]
name = "lte"
role = "lte"
down = { rate = "20mbit", delay_ms = 15 }
up = { rate = "20mbit", delay_ms = 15 }
"#,
        "fec.toml",
        std::path::Path::new("."),
    )
    .unwrap();
    let profile = braid_transport::profile::lookup("mptcp").unwrap().with_fec(4);
    let cfg = |side| {
        let mut c = profile.connection_config(ConfigParams::new(side, Clock::Real));
        c.idle_timeout = Duration::from_secs(3);
        Arc::new(c)
    };
    let ep = Arc::new(
        listen(SocketAddr::new(LOOPBACK, 0), cfg(Side::Server), identity().crypto.clone())
            .await
            .unwrap(),
    );
    let relay = crate::relay::start(&s, ep.local_addr(), LOOPBACK, None, 3).await.unwrap();
    let paths: Vec<PathSpec> = relay
        .paths()
        .iter()
        .zip([PathRole::Wifi, PathRole::Lte])
        .map(|(p, role)| PathSpec {
            local: SocketAddr::new(LOOPBACK, 0),
            iface: None,
            remote: p.listen,
            role,
        })
        .collect();
    let n = 800;
    let server = serve(Arc::clone(&ep), n);
    let client = connect(cfg(Side::Client), identity().pinned_client(), paths).await.unwrap();
    read_all(&client, n).await;
    let cs = client.stats().await.expect("client stats");
    let conn = server.await.unwrap();
    let ss = conn.stats().await.expect("server stats");
    let (cf, sf) = (cs.fec.expect("client runs the code"), ss.fec.expect("server runs the code"));
    eprintln!("client {cf:?}\nserver {sf:?}\nretransmitted {} B", ss.retransmitted_bytes);
    assert!(sf.coded_packets > 0 && ss.redundant_bytes == sf.coded_bytes, "{sf:?}");
    assert!(cf.coded_bytes_received > 0, "{cf:?}");
    assert!(cf.recovered > 0, "{cf:?}");
    assert_eq!(cf.dropped, 0, "{cf:?}");
    relay.stop().await;
}

/// A client's first datagram (its ClientHello) for connection `seed`, from a connection
/// that is then thrown away.
fn hello(seed: u64, to: SocketAddr) -> Vec<u8> {
    let mut c = braid_transport::proto::Connection::connect(
        config(),
        &identity().pinned_client(),
        braid_transport::Instant::ZERO,
        seed,
        SocketAddr::new(LOOPBACK, 9),
        to,
        PathRole::Wired,
    )
    .expect("a client connection");
    let mut buf = Vec::new();
    c.poll_transmit(braid_transport::Instant::ZERO, &mut buf).expect("a hello");
    buf
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_hellos_holds_few_half_open_connections_and_they_expire() {
    // Connections idle out only after 30 s: what frees the flood's is the half-open limit.
    let mut cfg = (*config()).clone();
    cfg.idle_timeout = Duration::from_secs(30);
    let ep = Arc::new(
        listen(SocketAddr::new(LOOPBACK, 0), Arc::new(cfg), identity().crypto.clone())
            .await
            .unwrap(),
    );
    let addr = ep.local_addr();
    // Serve every connection accepted (the flood's too) with 50 messages.
    let acceptor = {
        let ep = Arc::clone(&ep);
        tokio::spawn(async move {
            while let Some(conn) = ep.accept().await {
                tokio::spawn(async move {
                    for i in 0..50 {
                        if conn.send_message(message(i), Reliability::Reliable).await.is_err() {
                            return;
                        }
                    }
                    tokio::time::sleep(Duration::from_secs(5)).await;
                });
            }
        })
    };
    // From 20 sockets (one source address holds at most two half-open connections).
    for s in 0..20 {
        let flood = UdpSocket::bind(SocketAddr::new(LOOPBACK, 0)).await.unwrap();
        for k in 0..10 {
            flood.send_to(&hello(1000 + 10 * s + k, addr), addr).await.unwrap();
        }
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let st = ep.stats();
    // Before the half-open limit all 200 were accepted (up to 256 connections). Now at
    // most RETRY_HALF_OPEN are: past that each hello gets a Retry (and the flood's source
    // never comes back with the token), or is refused when its address already holds two.
    assert_eq!(st.accepted, server::RETRY_HALF_OPEN as u64, "{st:?}");
    assert!(st.retries_sent > 0, "{st:?}");
    assert_eq!(st.accepted + st.retries_sent + st.refused_half_open, 200, "{st:?}");
    // Once they expire a real client gets in and receives everything.
    tokio::time::sleep(server::HALF_OPEN_TIMEOUT + Duration::from_millis(200)).await;
    let client =
        connect(config(), identity().pinned_client(), vec![local_path(addr)]).await.unwrap();
    read_all(&client, 50).await;
    let st = ep.stats();
    assert_eq!(st.expired_half_open, server::RETRY_HALF_OPEN as u64, "{st:?}");
    client.close(0, b"done").await;
    acceptor.abort();
}

/// A server whose connection state is gone (its task ended without a word, as in a crash)
/// answers the client's next packets with a stateless reset, and the client ends at once
/// with that reason instead of at its 30-s idle timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_lost_a_connection_resets_it_and_the_client_ends_at_once() {
    let mut c = Config::new(Arc::new(RenoConfig::default()), Arc::new(MinRttConfig::default()));
    c.idle_timeout = Duration::from_secs(30);
    c.keep_alive = Some(Duration::from_millis(100));
    let c = Arc::new(c);
    let ep = Arc::new(
        listen(SocketAddr::new(LOOPBACK, 0), Arc::clone(&c), identity().crypto.clone())
            .await
            .unwrap(),
    );
    let server = serve(Arc::clone(&ep), 50);
    let client =
        connect(Arc::clone(&c), identity().pinned_client(), vec![local_path(ep.local_addr())])
            .await
            .unwrap();
    read_all(&client, 50).await;
    let server = server.await.unwrap();
    // The server's state goes without a CLOSE.
    server.take_task().expect("a running task").abort();
    let t0 = tokio::time::Instant::now();
    let end = tokio::time::timeout(Duration::from_secs(10), client.read_message())
        .await
        .expect("the client ended within 10 s");
    assert_eq!(end, Err(DriverError::StatelessReset));
    assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
    let s = ep.stats();
    assert!(s.resets_sent >= 1 && s.resets_limited == 0, "{s:?}");
}

/// A client that refuses the server's certificate tells the server (CONNECTION_CLOSE with
/// the TLS alert): the server's half-open connection ends at once instead of holding its
/// slot until it expires.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_refusing_the_certificate_tells_the_server_at_once() {
    let ep = Arc::new(
        listen(SocketAddr::new(LOOPBACK, 0), config(), identity().crypto.clone()).await.unwrap(),
    );
    let addr = ep.local_addr();
    let accepted = {
        let ep = Arc::clone(&ep);
        tokio::spawn(async move { ep.accept().await.expect("the hello is accepted") })
    };
    let wrong = crate::tls::pinned([0x5a; 32]);
    let err = connect(config(), wrong, vec![local_path(addr)]).await.unwrap_err();
    assert!(matches!(err, DriverError::Handshake(_)), "{err:?}");
    let server = tokio::time::timeout(Duration::from_secs(2), accepted).await.unwrap().unwrap();
    let t0 = tokio::time::Instant::now();
    let end = tokio::time::timeout(Duration::from_secs(2), server.read_message())
        .await
        .expect("the server learns within 2 s (its half-open limit is 3 s, its idle timeout 3 s)");
    match end {
        Err(DriverError::PeerClosed { code, .. }) => {
            assert!((0x100..0x200).contains(&code), "CRYPTO_ERROR expected, got {code:#x}")
        }
        other => panic!("{other:?}"),
    }
    assert!(t0.elapsed() < Duration::from_secs(1), "{:?}", t0.elapsed());
}
