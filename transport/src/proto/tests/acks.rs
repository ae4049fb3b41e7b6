//! Acknowledgements: the ACK path policy, the ACK delay, repeated ACKs.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use super::harness::*;
use crate::path::{PathId, PathRole};
use crate::proto::frame::Frame;
use crate::proto::{AckPathPolicy, Config, Reliability};
use crate::sched::PathView;

/// ACK routing that never has a path (every path failed, as the policies see it).
#[derive(Debug, Clone, Copy)]
struct NoAckPath;

impl AckPathPolicy for NoAckPath {
    fn ack_path(&self, _received_on: PathId, _paths: &[PathView]) -> Option<PathId> {
        None
    }
}

/// When the ACK policy has no path (with every path failed it has none), a due ACK goes
/// back on the path its packets came on after the ACK delay, instead of waiting for some
/// later packet of this side to carry it.
#[test]
fn an_ack_the_policy_has_no_path_for_goes_back_on_its_own_path() {
    let mut cc = config();
    cc.ack_path = Arc::new(NoAckPath);
    let mut p = Pair::new(cc, config(), vec![Link::new(10, 100, 0.0)], 1);
    p.connect();
    p.run_until(Duration::from_millis(100), |_| false);
    let now = p.now;
    p.server().send_message(now, message(0, 100), Reliability::Reliable).unwrap();
    p.keep_trace = true;
    p.run_until(Duration::from_millis(200), |_| false);
    let server = p.server.as_ref().expect("server accepted");
    let ack_at = p
        .trace
        .iter()
        .find(|(_, to_server, d)| {
            *to_server
                && server
                    .open_frames(d)
                    .is_some_and(|fs| fs.iter().any(|f| matches!(f, Frame::Ack(_))))
        })
        .map(|t| t.0)
        .expect("an ACK");
    let wait = ack_at - now;
    assert!(wait >= Duration::from_millis(35) && wait < Duration::from_millis(37), "{wait:?}");
}

/// ACKs routed to one path (as weSACK routes them to WiFi) leave it once it has been
/// silent for longer than its probe timeout while the acknowledged path still delivers:
/// the ACKs of the live path go back on it, so the sender never times the live path out.
#[test]
fn acks_leave_a_route_that_went_silent_for_their_own_path() {
    let mut cc = Config::new(Arc::new(TestReno), Arc::new(Alternate::default()));
    cc.ack_path = Arc::new(AcksOnPathZero);
    let sc = Config::new(Arc::new(TestReno), Arc::new(Alternate::default()));
    let mut p = Pair::new(cc, sc, vec![Link::new(10, 10, 0.0), Link::new(40, 10, 0.0)], 6);
    p.connect();
    p.add_path(1, PathRole::Lte);
    let start = p.now;
    let mut got = 0u64;
    let n = 300u64;
    for i in 0..n {
        let now = p.now;
        p.server().send_message(now, message(i, 1000), Reliability::Reliable).expect("send");
        p.run_until(Duration::from_millis(10), |p| {
            if p.now >= start + Duration::from_secs(1) {
                p.links[0].up = false;
            }
            let now = p.now;
            while p.client.read_message(now).is_some() {
                got += 1;
            }
            false
        });
    }
    p.run_until(Duration::from_secs(3), |p| {
        let now = p.now;
        while p.client.read_message(now).is_some() {
            got += 1;
        }
        false
    });
    assert_eq!(got, n);
    let s = p.server().stats();
    assert!(s.paths[0].failures >= 1, "the cut was found: {s:?}");
    assert_eq!(s.paths[1].failures, 0, "the live path was timed out: {s:?}");
}

#[test]
fn acks_follow_the_ack_path_policy() {
    let mut cc = config();
    cc.ack_path = Arc::new(AcksOnPathZero);
    // Path 0 the faster, so that the lowest-RTT scheduler keeps sending on it to the end:
    // a path that hears nothing for a probe timeout no longer carries the other's ACKs
    // (`receive_silent`), which is not what this test is about.
    let mut p = Pair::new(cc, config(), vec![Link::new(10, 10, 0.0), Link::new(20, 10, 0.0)], 5);
    p.connect();
    p.add_path(1, PathRole::Lte);
    let before = p.client.stats().paths[1].packets_sent;
    bulk(&mut p, 1_000_000, 10_000, Duration::from_secs(30), |_| {});
    let c = p.client.stats();
    let s = p.server().stats();
    assert!(s.paths[1].data_bytes_sent > 200_000);
    // The client sent (almost) nothing on path 1: its ACKs went on path 0, but for the
    // transfer's tail, when path 0 has gone quiet first and the last few ACKs of path 1
    // travel on path 1 (5 packets in this run).
    assert!(c.paths[1].packets_sent - before < 10, "{}", c.paths[1].packets_sent - before);
}

/// Where the client's packets sent at this instant go (link index of each remote).
fn client_transmit_links(p: &mut Pair) -> Vec<u8> {
    let mut buf = Vec::new();
    let mut links = Vec::new();
    while let Some(t) = p.client.poll_transmit(p.now, &mut buf) {
        if let IpAddr::V4(v4) = t.remote.ip() {
            links.push(v4.octets()[2]);
        }
    }
    links
}

#[test]
fn ack_repeat_re_arms_only_the_acks_the_failed_path_carried() {
    let mut p =
        Pair::new(config(), config(), vec![Link::new(20, 10, 0.0), Link::new(20, 10, 0.0)], 5);
    p.connect();
    let lte = p.add_path(1, PathRole::Lte);
    bulk(&mut p, 400_000, 10_000, Duration::from_secs(30), |_| {});
    // Let every pending ACK go out (the ACK delay passes), then nothing is due.
    let settle = p.now + Duration::from_millis(200);
    while p.now < settle {
        p.step_until(settle);
    }
    p.flush();
    assert!(client_transmit_links(&mut p).is_empty());
    // Each path's ACKs ride on that path (the default ACK path): a datagram lost on the
    // LTE path carried LTE's ACKs only, so only LTE's ACK is repeated, on LTE.
    p.client.on_transmit_failure(p.now, lte);
    assert_eq!(client_transmit_links(&mut p), vec![1]);
    p.client.on_transmit_failure(p.now, PathId(0));
    assert_eq!(client_transmit_links(&mut p), vec![0]);
}

#[test]
fn a_lone_packet_is_acknowledged_after_the_max_ack_delay() {
    let mut p = Pair::default_pair(vec![Link::new(10, 100, 0.0)]);
    p.connect();
    p.run_until(Duration::from_millis(100), |_| false);
    let now = p.now;
    p.server().send_message(now, message(0, 100), Reliability::Reliable).unwrap();
    p.keep_trace = true;
    p.run_until(Duration::from_millis(200), |_| false);
    let server = p.server.as_ref().expect("server accepted");
    let ack_at = p
        .trace
        .iter()
        .find(|(_, to_server, d)| {
            *to_server
                && server
                    .open_frames(d)
                    .is_some_and(|fs| fs.iter().any(|f| matches!(f, Frame::Ack(_))))
        })
        .map(|t| t.0)
        .expect("an ACK");
    // Data arrives 10 ms after sending; the ACK waits the 25 ms max ACK delay.
    let wait = ack_at - now;
    assert!(wait >= Duration::from_millis(35) && wait < Duration::from_millis(37), "{wait:?}");
}

/// Both sides learn the other's `ack_delay_exponent` from its transport parameters (0 for
/// Braid, so ACK Delay fields count µs); before the handshake a peer's is taken as RFC
/// 9000's default, 3.
#[test]
fn each_side_reads_ack_delays_with_the_exponent_the_peer_announced() {
    let mut p = Pair::default_pair(vec![Link::new(20, 10, 0.0)]);
    assert_eq!(p.client.peer_ack_delay_exponent, 3);
    p.connect();
    assert_eq!(p.client.peer_ack_delay_exponent, crate::proto::crypto::ACK_DELAY_EXPONENT);
    assert_eq!(p.server().peer_ack_delay_exponent, crate::proto::crypto::ACK_DELAY_EXPONENT);
}
