//! Bad input: malformed, truncated, misaddressed, out-of-window and duplicate packets.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

use bytes::Bytes;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::harness::*;
use crate::path::PathRole;
use crate::proto::frame::{DataFrame, Frame};
use crate::proto::{Connection, crypto};

#[test]
fn random_bytes_are_dropped_as_malformed() {
    let mut p = established_pair();
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let now = p.now;
    for _ in 0..2000 {
        let len = rng.random_range(0..1500usize);
        let mut d = vec![0u8; len];
        for b in d.iter_mut() {
            *b = rng.random();
        }
        p.client.handle_datagram(now, client_addr(0), server_addr(0), &d);
    }
    let dropped = p.client.stats().dropped;
    assert_eq!(dropped.malformed + dropped.unknown_connection, 2000, "{dropped:?}");
    assert!(p.client.is_established());
    let (_, sc) = crypto::deterministic::pair(1);
    for d in [&[0xff; 40][..], &[0xc3; 1300][..]] {
        assert!(
            Connection::accept(Arc::new(config()), &sc, now, 1, server_addr(0), client_addr(0), d)
                .is_err()
        );
    }
}

#[test]
fn truncated_packets_are_dropped() {
    let mut p = established_pair();
    let cid = p.client.connection_id();
    let data = Frame::Data(DataFrame {
        message_id: 0,
        message_start: 0,
        message_len: 100,
        offset: 0,
        fin: false,
        data: Bytes::from(vec![1u8; 100]),
    });
    let pkt = raw_packet(p.server(), cid, 0, 1000, vec![Frame::Ping, data]);
    let now = p.now;
    for cut in 0..pkt.len() - 1 {
        p.client.handle_datagram(now, client_addr(0), server_addr(0), &pkt[..cut]);
    }
    // A cut header does not parse; any other cut fails authentication.
    let d = p.client.stats().dropped;
    assert_eq!(d.malformed + d.unauthenticated, (pkt.len() - 1) as u64, "{d:?}");
    assert!(d.unauthenticated > 100, "{d:?}");
    assert_eq!(p.client.recv_buffered(), 0);
}

#[test]
fn unknown_connection_ids_are_dropped() {
    let mut p = established_pair();
    let cid = p.client.connection_id().wrapping_add(1);
    let now = p.now;
    let pkt = raw_packet(p.server(), cid, 0, 500, vec![Frame::Ping]);
    p.client.handle_datagram(now, client_addr(0), server_addr(0), &pkt);
    assert_eq!(p.client.stats().dropped.unknown_connection, 1);
}

#[test]
fn datagrams_from_unvalidated_addresses_are_dropped() {
    let mut p = established_pair();
    // Both sides' ids for the paths ahead delivered (the server answers on a path only
    // with the id the client issued for it).
    p.run_until(std::time::Duration::from_millis(200), |_| false);
    let now = p.now;
    let stranger = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1)), 9);
    // (A validated path's packet from a new address is a migration: see `migration`.)
    // Unknown path without a PATH_JOIN.
    let data = Frame::Data(DataFrame {
        message_id: 0,
        message_start: 0,
        message_len: 1,
        offset: 0,
        fin: false,
        data: Bytes::from_static(b"x"),
    });
    let cid3 = p.server().issued_cid(crate::path::PathId(3)).expect("an id for path 3");
    let cid4 = p.server().issued_cid(crate::path::PathId(4)).expect("an id for path 4");
    let pkt = raw_packet(&p.client, cid3, 3, 0, vec![data.clone()]);
    p.server().handle_datagram(now, server_addr(3), stranger, &pkt);
    // A joining but unvalidated path carrying data.
    let join = vec![Frame::PathJoin { token: 1, role: PathRole::Lte }];
    let pkt = raw_packet(&p.client, cid4, 4, 0, join);
    p.server().handle_datagram(now, server_addr(4), stranger, &pkt);
    let second = raw_packet(&p.client, cid4, 4, 1, vec![data]);
    p.server().handle_datagram(now, server_addr(4), stranger, &second);
    let s = p.server().stats();
    assert_eq!(s.dropped.unvalidated_address, 2, "{:?}", s.dropped);
    assert_eq!(p.server().recv_buffered(), 0);
    // The server answers the join with one challenge only; nothing else goes there.
    let mut buf = Vec::new();
    let mut to_stranger = 0;
    while let Some(t) = p.server().poll_transmit(now, &mut buf) {
        if t.remote == stranger {
            to_stranger += 1;
            let frames = p.client.open_frames(&buf).unwrap();
            assert!(matches!(frames[0], Frame::PathChallenge { echo: 1, .. }));
        }
    }
    assert_eq!(to_stranger, 1);
}

#[test]
fn data_beyond_the_advertised_window_is_dropped_without_buffering() {
    let mut cc = config();
    cc.recv_buffer_bytes = 10_000;
    let mut p = Pair::new(cc, config(), vec![Link::new(10, 10, 0.0)], 2);
    p.connect();
    let cid = p.client.connection_id();
    let now = p.now;
    for i in 0..50u64 {
        let f = Frame::Data(DataFrame {
            message_id: i,
            message_start: 10_000 + i * 1000,
            message_len: 1000,
            offset: 10_000 + i * 1000,
            fin: false,
            data: Bytes::from(vec![0u8; 1000]),
        });
        let pkt = raw_packet(p.server(), cid, 0, 1000 + i, vec![f]);
        p.client.handle_datagram(now, client_addr(0), server_addr(0), &pkt);
    }
    assert_eq!(p.client.stats().dropped.out_of_window, 50);
    assert_eq!(p.client.recv_buffered(), 0);
}

#[test]
fn duplicate_packets_are_counted_once() {
    let mut p = established_pair();
    let cid = p.client.connection_id();
    let now = p.now;
    let pkt = raw_packet(p.server(), cid, 0, 777, vec![Frame::Ping]);
    p.client.handle_datagram(now, client_addr(0), server_addr(0), &pkt);
    p.client.handle_datagram(now, client_addr(0), server_addr(0), &pkt);
    assert_eq!(p.client.stats().dropped.duplicate, 1);
}
