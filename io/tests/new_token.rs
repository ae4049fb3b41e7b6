//! NEW_TOKEN (RFC 9000 §8.1.3) between Braid's client and server drivers on loopback: a
//! server that asks every client for address validation (`--retry`) sends a token once the
//! handshake completed; the client's next connection carries it and is accepted without a
//! Retry, its address validated; the same token again is not honoured (one use) and costs
//! that connection a Retry, never the connection itself.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use braid_io::driver::{self, ConnectOptions, ConnectionHandle, PathSpec};
use braid_io::tls::ServerIdentity;
use braid_transport::path::PathRole;
use braid_transport::profile;
use braid_transport::proto::Config;

const LOOPBACK: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

fn config() -> Arc<Config> {
    let p = profile::lookup("mptcp").expect("mptcp is registered");
    Arc::new(Config::new(Arc::clone(&p.controller), Arc::clone(&p.scheduler)))
}

/// A server on loopback that asks every client for address validation (`--retry`).
async fn retry_server(identity: &ServerIdentity) -> driver::Endpoint {
    let local = SocketAddr::new(LOOPBACK, 0);
    let crypto = identity.crypto.clone();
    driver::listen_with(local, config(), crypto, driver::RetryPolicy::Always).await.expect("server")
}

/// Connects to `server` with `token` in the first Initial (if any).
async fn connect(
    server: SocketAddr,
    identity: &ServerIdentity,
    token: Option<Vec<u8>>,
) -> ConnectionHandle {
    let options = ConnectOptions { token, ..ConnectOptions::default() };
    tokio::time::timeout(
        Duration::from_secs(5),
        driver::connect_with(
            config(),
            identity.pinned_client(),
            vec![PathSpec::to(server, PathRole::Wifi)],
            options,
        ),
    )
    .await
    .expect("connected in time")
    .expect("connect")
}

/// The token the server sends on `conn`, within 2 s.
async fn token_of(conn: &ConnectionHandle) -> Vec<u8> {
    for _ in 0..200 {
        if let Some(t) = conn.take_new_token() {
            return t;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("no NEW_TOKEN within 2 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_token_spares_the_next_connection_its_retry_once() {
    let identity = braid_io::tls::self_signed().expect("a self-signed certificate");
    let ep = Arc::new(retry_server(&identity).await);
    let server = ep.local_addr();
    let acceptor = {
        let ep = Arc::clone(&ep);
        tokio::spawn(async move {
            let mut held = Vec::new();
            while let Some(c) = ep.accept().await {
                held.push(c);
            }
        })
    };

    // The first connection takes a Retry and gets a token.
    let first = connect(server, &identity, None).await;
    let token = token_of(&first).await;
    assert_eq!(first.take_new_token(), None, "taken once");
    let s = ep.stats();
    assert_eq!((s.accepted, s.retries_sent, s.new_tokens_accepted), (1, 1, 0), "{s:?}");

    // The next one, with the token: no Retry, its address validated by the token.
    let second = connect(server, &identity, Some(token.clone())).await;
    let s = ep.stats();
    assert_eq!((s.accepted, s.retries_sent, s.new_tokens_accepted), (2, 1, 1), "{s:?}");
    assert_eq!(s.validated, 2, "{s:?}");

    // The same token once more: not honoured, so a Retry, and the connection still opens.
    let third = connect(server, &identity, Some(token)).await;
    let s = ep.stats();
    assert_eq!((s.accepted, s.retries_sent, s.new_tokens_refused), (3, 2, 1), "{s:?}");

    // A token of no kind this server issues: as none (a Retry), not dropped.
    let fourth = connect(server, &identity, Some(b"a token from some other server".to_vec())).await;
    let s = ep.stats();
    assert_eq!((s.accepted, s.retries_sent, s.new_tokens_refused), (4, 3, 2), "{s:?}");
    assert_eq!(s.invalid_tokens, 0, "{s:?}");

    drop((first, second, third, fourth));
    acceptor.abort();
}

/// Hostile: ClientHellos carrying forged NEW_TOKEN tokens (the right kind byte and length,
/// random bytes) to a `--retry` server. None authenticates, so each is as no token: a Retry
/// and no state (the replay log records only tokens that open, `proto::retry`'s tests).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_new_tokens_get_retries_and_hold_nothing() {
    use braid_transport::path::PathRole;
    use braid_transport::proto;
    use braid_transport::time::Instant;
    let identity = braid_io::tls::self_signed().expect("a self-signed certificate");
    let ep = retry_server(&identity).await;
    let server = ep.local_addr();
    let sock = tokio::net::UdpSocket::bind((LOOPBACK, 0)).await.expect("bind");
    let me = sock.local_addr().expect("address");
    let crypto = identity.pinned_client();
    const HELLOS: u64 = 200;
    for seed in 0..HELLOS {
        let mut c = proto::Connection::connect(
            config(),
            &crypto,
            Instant::ZERO,
            seed,
            me,
            server,
            PathRole::Wifi,
        )
        .expect("a client");
        // 'N', a nonce and a sealed stamp: 37 bytes that look like one of the server's.
        let mut forged = vec![0x4e];
        forged.extend((0..36u64).map(|i| (seed.wrapping_mul(131).wrapping_add(i * 7)) as u8));
        c.set_initial_token(forged);
        let mut buf = Vec::new();
        let t = c.poll_transmit(Instant::ZERO, &mut buf).expect("a ClientHello");
        sock.send_to(&buf[..t.len], server).await.expect("send");
        if seed % 20 == 0 {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let s = ep.stats();
    assert_eq!(s.accepted, 0, "{s:?}");
    assert_eq!(s.new_tokens_accepted, 0, "{s:?}");
    // Every hello was read as one without a token (a few may be lost on a busy loopback).
    assert!(s.new_tokens_refused >= HELLOS * 9 / 10, "{s:?}");
    assert_eq!(s.retries_sent, s.new_tokens_refused, "{s:?}");
}
