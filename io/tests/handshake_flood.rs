//! A handshake flood from one socket: 300 genuine ClientHellos under fresh connection ids,
//! each followed by a junk datagram carrying the same id, re-sent in three rounds 3 s
//! apart. Before, the junk datagram cleared
//! the connection's half-open mark, the flood took all 256 connection slots, and a real
//! client could not connect. Now a connection is half-open until its handshake completes,
//! and one source address holds at most two half-open connections.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::UdpSocket;

use braid_io::driver::{self, MAX_HALF_OPEN_PER_ADDRESS, PathSpec};
use braid_io::tls::ServerIdentity;
use braid_transport::path::PathRole;
use braid_transport::profile;
use braid_transport::proto::{self, ClientCrypto, Config};
use braid_transport::time::Instant;

const LOOPBACK: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

fn config() -> Arc<Config> {
    let p = profile::lookup("mptcp").expect("mptcp is registered");
    Arc::new(Config::new(Arc::clone(&p.controller), Arc::clone(&p.scheduler)))
}

/// A genuine ClientHello datagram from `me` to `server` under the connection id `seed` gives.
fn client_hello(crypto: &ClientCrypto, seed: u64, me: SocketAddr, server: SocketAddr) -> Vec<u8> {
    let mut c = proto::Connection::connect(
        config(),
        crypto,
        Instant::ZERO,
        seed,
        me,
        server,
        PathRole::Wifi,
    )
    .expect("a client");
    let mut buf = Vec::new();
    let t = c.poll_transmit(Instant::ZERO, &mut buf).expect("a ClientHello");
    buf.truncate(t.len);
    buf
}

/// Takes every connection `ep` accepts and holds it, as a server application would.
fn hold_accepted(ep: Arc<driver::Endpoint>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut conns = Vec::new();
        while let Some(c) = ep.accept().await {
            conns.push(c);
        }
    })
}

/// A real client connects to `server` within 5 s (`why` otherwise).
async fn a_real_client_connects(server: SocketAddr, identity: &ServerIdentity, why: &str) {
    let client = tokio::time::timeout(
        Duration::from_secs(5),
        driver::connect(
            config(),
            identity.pinned_client(),
            vec![PathSpec::to(server, PathRole::Wifi)],
        ),
    )
    .await
    .expect(why)
    .expect("connect");
    drop(client);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hello_flood_from_one_socket_leaves_room_for_a_real_client() {
    let identity = braid_io::tls::self_signed().expect("a self-signed certificate");
    let ep = driver::listen(SocketAddr::new(LOOPBACK, 0), config(), identity.crypto.clone())
        .await
        .expect("server");
    let server = ep.local_addr();
    let attacker = UdpSocket::bind((LOOPBACK, 0)).await.expect("bind");
    let me = attacker.local_addr().expect("address");
    let crypto = identity.pinned_client();
    // Three rounds 3 s apart, as the attack re-sent its flood: each round's hellos (fresh
    // ids) find the two half-open places of the address again once the last round's
    // expired, and never more.
    let ep = Arc::new(ep);
    let accept = hold_accepted(Arc::clone(&ep));
    for round in 0..3u64 {
        for seed in round * 1000..round * 1000 + 300 {
            let hello = client_hello(&crypto, seed, me, server);
            attacker.send_to(&hello, server).await.expect("send");
            // The same header, the rest junk: it fails authentication.
            let mut junk = hello;
            for b in junk.iter_mut().skip(40) {
                *b ^= 0xa5;
            }
            attacker.send_to(&junk, server).await.expect("send");
            if seed % 20 == 0 {
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        let s = ep.stats();
        let most = MAX_HALF_OPEN_PER_ADDRESS as u64 * (round + 1);
        assert!(s.accepted <= most + round, "round {round}: {s:?}");
        assert!(s.refused_half_open >= (300 - MAX_HALF_OPEN_PER_ADDRESS as u64) * (round + 1));
        // The flood's connections wait in the accept queue too; the real one follows them.
        a_real_client_connects(server, &identity, "the real client was kept out").await;
        tokio::time::sleep(Duration::from_secs(3)).await;
    }
    accept.abort();
}

/// This process's resident set, bytes (Linux `/proc/self/status`).
fn resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// A flood from 200 source addresses (10 genuine ClientHellos each, under fresh ids) and
/// 10 000 junk datagrams: the server's memory stays within 64 MB of what it held before,
/// and a real client still connects. The server runs in this test's process, beside this
/// file's other flood test, so the process's resident set bounds the server's from above.
/// Measured: 6 MB before, 9 MB at the peak (+2.9 MB).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_from_many_addresses_and_junk_stay_within_a_memory_budget() {
    const BUDGET: u64 = 64 << 20;
    let identity = braid_io::tls::self_signed().expect("a self-signed certificate");
    let ep = driver::listen(SocketAddr::new(LOOPBACK, 0), config(), identity.crypto.clone())
        .await
        .expect("server");
    let server = ep.local_addr();
    // Take the accepted ones as a server application would (they hold their state).
    let accept = hold_accepted(Arc::new(ep));
    tokio::time::sleep(Duration::from_millis(100)).await;
    let Some(before) = resident_bytes() else {
        eprintln!("no /proc/self/status: memory not measured");
        return;
    };
    let crypto = identity.pinned_client();
    let mut peak = before;
    for s in 0..200u64 {
        let attacker = UdpSocket::bind((LOOPBACK, 0)).await.expect("bind");
        let me = attacker.local_addr().expect("address");
        for k in 0..10u64 {
            let hello = client_hello(&crypto, s * 100 + k, me, server);
            attacker.send_to(&hello, server).await.expect("send");
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
        peak = peak.max(resident_bytes().unwrap_or(0));
    }
    let junk_socket = UdpSocket::bind((LOOPBACK, 0)).await.expect("bind");
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    for i in 0..10_000u32 {
        let len = 1 + (i as usize * 37) % 1400;
        let junk: Vec<u8> = (0..len)
            .map(|_| {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                rng as u8
            })
            .collect();
        junk_socket.send_to(&junk, server).await.expect("send");
        if i % 200 == 0 {
            tokio::time::sleep(Duration::from_millis(1)).await;
            peak = peak.max(resident_bytes().unwrap_or(0));
        }
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    peak = peak.max(resident_bytes().unwrap_or(0));
    let grew = peak.saturating_sub(before);
    eprintln!(
        "resident set {} MB before, peak {} MB (+{} KB)",
        before >> 20,
        peak >> 20,
        grew >> 10
    );
    assert!(grew <= BUDGET, "the server grew by {} MB under the flood", grew >> 20);
    a_real_client_connects(server, &identity, "the real client was kept out").await;
    accept.abort();
}

/// Retry (RFC 9000 §8.1.2) with `RetryPolicy::Always` (`braid serve --retry`): a
/// ClientHello without a token gets a Retry and costs no state; the Initial sent again with
/// the token is accepted from the address the token was issued to, with the address
/// validated, and dropped when replayed from another address; a real client connects
/// through the Retry; a flood of hellos holds nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_validates_addresses_and_a_token_from_another_address_is_refused() {
    let identity = braid_io::tls::self_signed().expect("a self-signed certificate");
    let ep = driver::listen_with(
        SocketAddr::new(LOOPBACK, 0),
        config(),
        identity.crypto.clone(),
        driver::RetryPolicy::Always,
    )
    .await
    .expect("server");
    let server = ep.local_addr();
    let a = UdpSocket::bind((LOOPBACK, 0)).await.expect("bind");
    let b = UdpSocket::bind((LOOPBACK, 0)).await.expect("bind");
    let me = a.local_addr().expect("address");
    let crypto = identity.pinned_client();
    let mut c =
        proto::Connection::connect(config(), &crypto, Instant::ZERO, 1, me, server, PathRole::Wifi)
            .expect("a client");
    let mut buf = Vec::new();
    let t = c.poll_transmit(Instant::ZERO, &mut buf).expect("a ClientHello");
    a.send_to(&buf[..t.len], server).await.expect("send");
    let mut rx = vec![0u8; 2048];
    let (n, from) = tokio::time::timeout(Duration::from_secs(2), a.recv_from(&mut rx))
        .await
        .expect("a Retry in time")
        .expect("recv");
    assert_eq!(from, server);
    let retry = proto::retry::parse(&rx[..n]).expect("a Retry");
    assert!(
        retry.verify(&braid_transport::proto::wire::LongCid::from_u64(c.connection_id())),
        "a Retry whose integrity tag does not verify"
    );
    assert_eq!(ep.stats().accepted, 0, "a hello without a token held state");
    c.handle_datagram(Instant::ZERO, me, server, &rx[..n]);
    assert!(c.took_retry());
    let t = c.poll_transmit(Instant::ZERO, &mut buf).expect("the Initial again");
    let with_token = buf[..t.len].to_vec();
    // Replayed from another address: refused.
    b.send_to(&with_token, server).await.expect("send");
    tokio::time::sleep(Duration::from_millis(100)).await;
    let s = ep.stats();
    assert_eq!((s.accepted, s.invalid_tokens), (0, 1), "{s:?}");
    // From the address it was issued to: a connection, its address validated.
    a.send_to(&with_token, server).await.expect("send");
    tokio::time::sleep(Duration::from_millis(100)).await;
    let s = ep.stats();
    assert_eq!((s.accepted, s.validated), (1, 1), "{s:?}");

    // A flood of hellos without tokens: Retries only.
    for seed in 100..400u64 {
        a.send_to(&client_hello(&crypto, seed, me, server), server).await.expect("send");
        if seed % 20 == 0 {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let s = ep.stats();
    assert_eq!(s.accepted, 1, "{s:?}");
    assert!(s.retries_sent >= 290, "{s:?}");

    // A real client goes through the Retry.
    let accept = hold_accepted(Arc::new(ep));
    a_real_client_connects(server, &identity, "the real client did not get through the Retry")
        .await;
    accept.abort();
}
