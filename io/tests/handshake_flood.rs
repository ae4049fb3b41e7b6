//! A handshake flood from one socket: 300 genuine ClientHellos under fresh connection ids,
//! each followed by a junk datagram carrying the same id. Before, the junk datagram cleared
//! the connection's half-open mark, the flood took all 256 connection slots, and a real
//! client could not connect. Now a connection is half-open until its handshake completes,
//! and one source address holds at most two half-open connections.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::UdpSocket;

use braid_io::driver::{self, MAX_HALF_OPEN_PER_ADDRESS, PathSpec};
use braid_transport::path::PathRole;
use braid_transport::profile;
use braid_transport::proto::{self, Config};
use braid_transport::time::Instant;

const LOOPBACK: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

fn config() -> Arc<Config> {
    let p = profile::lookup("mptcp").expect("mptcp is registered");
    Arc::new(Config::new(Arc::clone(&p.controller), Arc::clone(&p.scheduler)))
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
    let mut buf = Vec::new();
    for seed in 0..300u64 {
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
        let t = c.poll_transmit(Instant::ZERO, &mut buf).expect("a ClientHello");
        attacker.send_to(&buf[..t.len], server).await.expect("send");
        // The same header, the rest junk: it fails authentication.
        let mut junk = buf[..t.len].to_vec();
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
    assert!(s.accepted <= MAX_HALF_OPEN_PER_ADDRESS as u64, "{s:?}");
    assert!(s.refused_half_open >= 300 - MAX_HALF_OPEN_PER_ADDRESS as u64, "{s:?}");
    // The flood's connections wait in the accept queue too; the real one follows them.
    let accept = tokio::spawn(async move {
        let mut conns = Vec::new();
        while let Some(c) = ep.accept().await {
            conns.push(c);
        }
    });
    let client = tokio::time::timeout(
        Duration::from_secs(5),
        driver::connect(
            config(),
            identity.pinned_client(),
            vec![PathSpec::to(server, PathRole::Wifi)],
        ),
    )
    .await
    .expect("the real client was kept out")
    .expect("connect");
    drop(client);
    accept.abort();
}
