//! NAT rebinding on real sockets: each of the client's two paths goes through a NAT of its
//! own that, mid-stream, moves the path's traffic to a new source port and forgets the old
//! mapping (what the server still sends there is lost). The server validates the new
//! address (RFC 9000 §9) and the stream arrives whole and in order. The NATs also record
//! the connection ids they carry: none but the handshake's is seen on both paths or in
//! both directions.
//!
//! Real time: its own test binary, so that it does not share the CPU with the library's
//! simulator tests.

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use tokio::net::UdpSocket;
use tokio::time::Instant;

use braid_io::driver::{self, PathSpec};
use braid_transport::path::PathRole;
use braid_transport::profile;
use braid_transport::proto::{self, Config, Delivery, Reliability};

const LOOPBACK: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);
const MESSAGES: u64 = 2000;
const SIZE: usize = 1000;

/// The connection ids of the datagrams a NAT carried, as (id, towards the server).
type Ids = Arc<Mutex<BTreeSet<(u64, bool)>>>;

/// A NAT between the client's socket and `server`: the client sends to the returned
/// address; its datagrams leave from an outside socket, which is replaced by a new one (a
/// new port) at `rebind_at`. Returns the front address, the task (its outside ports used)
/// and the ids it carried.
async fn nat(
    server: SocketAddr,
    rebind_at: Instant,
) -> (SocketAddr, tokio::task::JoinHandle<Vec<u16>>, Ids) {
    let front = UdpSocket::bind((LOOPBACK, 0)).await.expect("bind the NAT's front");
    let addr = front.local_addr().expect("front address");
    let ids: Ids = Arc::default();
    let carried = Arc::clone(&ids);
    let task = tokio::spawn(async move {
        let mut outside = UdpSocket::bind((LOOPBACK, 0)).await.expect("bind outside");
        let mut ports = vec![outside.local_addr().map_or(0, |a| a.port())];
        let mut client = None;
        let note = |data: &[u8], to_server: bool| {
            if let Some(id) = proto::peek_connection_id(data) {
                carried.lock().expect("ids").insert((id, to_server));
            }
        };
        let (mut a, mut b) = (vec![0u8; 2048], vec![0u8; 2048]);
        let end = rebind_at + Duration::from_secs(30);
        loop {
            tokio::select! {
                r = front.recv_from(&mut a) => {
                    let Ok((n, from)) = r else { continue };
                    client = Some(from);
                    note(&a[..n], true);
                    let _ = outside.send_to(&a[..n], server).await;
                }
                r = outside.recv_from(&mut b) => {
                    let Ok((n, _)) = r else { continue };
                    note(&b[..n], false);
                    if let Some(c) = client {
                        let _ = front.send_to(&b[..n], c).await;
                    }
                }
                _ = tokio::time::sleep_until(rebind_at), if ports.len() == 1 => {
                    outside = UdpSocket::bind((LOOPBACK, 0)).await.expect("bind outside");
                    ports.push(outside.local_addr().map_or(0, |a| a.port()));
                }
                _ = tokio::time::sleep_until(end) => return ports,
            }
        }
    });
    (addr, task, ids)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_survives_a_nat_rebinding_on_each_of_its_paths() {
    // Round robin: both paths carry data whatever their RTT estimates (minRTT may leave
    // loopback path 1 at its initial 333 ms and unused, and then nothing is rebound there).
    let p = profile::lookup("roundrobin").expect("roundrobin is registered");
    let mut c = Config::new(Arc::clone(&p.controller), Arc::clone(&p.scheduler));
    c.idle_timeout = Duration::from_secs(5);
    let config = Arc::new(c);
    let identity = braid_io::tls::self_signed().expect("a self-signed certificate");
    let ep =
        driver::listen(SocketAddr::new(LOOPBACK, 0), Arc::clone(&config), identity.crypto.clone())
            .await
            .expect("server");
    let t0 = Instant::now();
    let (wifi, nat0, wifi_ids) = nat(ep.local_addr(), t0 + Duration::from_millis(1500)).await;
    let (lte, nat1, lte_ids) = nat(ep.local_addr(), t0 + Duration::from_millis(2500)).await;
    // 4 Mbit/s of 1 000-byte messages for 4 s: both rebindings happen mid-stream.
    let server = tokio::spawn(async move {
        let conn = ep.accept().await.expect("a connection");
        let mut next = Instant::now();
        for i in 0..MESSAGES {
            let mut m = vec![0u8; SIZE];
            m[..8].copy_from_slice(&i.to_be_bytes());
            conn.send_message(Bytes::from(m), Reliability::Reliable).await.expect("send");
            next += Duration::from_millis(2);
            tokio::time::sleep_until(next).await;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
        conn.stats().await.expect("server stats")
    });
    let client = driver::connect(
        config,
        identity.pinned_client(),
        vec![PathSpec::to(wifi, PathRole::Wifi), PathSpec::to(lte, PathRole::Lte)],
    )
    .await
    .expect("connect");
    let mut next = 0u64;
    while next < MESSAGES {
        let d = tokio::time::timeout(Duration::from_secs(10), client.read_message())
            .await
            .expect("the stream stalled")
            .expect("the connection ended");
        match d {
            Delivery::Message { id, data } => {
                assert_eq!(id, next);
                assert_eq!(data[..8], next.to_be_bytes());
                next += 1;
            }
            Delivery::Gap { id } => panic!("message {id} lost"),
        }
    }
    let stats = server.await.expect("server task");
    assert_eq!((stats.migrations, stats.migrations_failed), (2, 0), "{stats:?}");
    for n in [nat0, nat1] {
        n.abort();
    }
    // Connection ids: the handshake's on the WiFi path only; every other id on one path
    // in one direction.
    let handshake = client.connection_id();
    let wifi_ids = wifi_ids.lock().expect("ids").clone();
    let lte_ids = lte_ids.lock().expect("ids").clone();
    assert!(lte_ids.iter().all(|&(id, _)| id != handshake), "{lte_ids:?}");
    let mut all: Vec<u64> =
        wifi_ids.iter().chain(&lte_ids).map(|&(id, _)| id).filter(|&id| id != handshake).collect();
    let count = all.len();
    all.sort_unstable();
    all.dedup();
    assert_eq!(
        all.len(),
        count,
        "an id on two paths or in both directions: {wifi_ids:?} {lte_ids:?}"
    );
    for ids in [&wifi_ids, &lte_ids] {
        assert!(ids.iter().any(|&(id, up)| up && id != handshake), "{ids:?}");
        assert!(ids.iter().any(|&(id, up)| !up && id != handshake), "{ids:?}");
    }
}
