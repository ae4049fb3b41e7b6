//! Connection ids per path and direction: what an observer of the wire sees, and what a
//! receiver accepts.

use std::collections::BTreeMap;
use std::time::Duration;

use super::harness::*;
use crate::path::{PathId, PathRole};
use crate::proto::crypto::{Level, PlainHeader};
use crate::proto::frame::Frame;
use crate::proto::wire::LongCid;
use crate::proto::{CidEvent, MAX_CIDS};

/// Where each connection id of the 1-RTT packets in `trace` was seen: (path, to_server).
fn sightings(p: &Pair) -> BTreeMap<u64, Vec<(PathId, bool)>> {
    let mut seen: BTreeMap<u64, Vec<(PathId, bool)>> = BTreeMap::new();
    for ((_, to_server, data), &path) in p.trace.iter().zip(&p.trace_paths) {
        let h = PlainHeader::parse(data).expect("the pair sends well-formed packets");
        if h.level != Level::OneRtt {
            continue;
        }
        let at = seen.entry(h.connection_id).or_default();
        if !at.contains(&(path, *to_server)) {
            at.push((path, *to_server));
        }
    }
    seen
}

/// A two-path transfer, with a third path opened after the second was closed: every
/// connection id but the handshake's is seen on one path in one direction only, and the
/// handshake's only on path 0 (its first 1-RTT packets, before the peer's id for path 0
/// arrived).
#[test]
fn no_connection_id_is_seen_on_two_paths_or_in_both_directions() {
    let mut p = Pair::default_pair(vec![
        Link::new(10, 20, 0.0),
        Link::new(30, 20, 0.0),
        Link::new(20, 20, 0.0),
    ]);
    p.keep_trace = true;
    p.connect();
    let lte = p.add_path(1, PathRole::Lte);
    let mut sent = 0;
    p.run_until(Duration::from_secs(1), |p| {
        keep_busy(p, &mut sent);
        false
    });
    let now = p.now;
    p.client.remove_path(now, lte);
    p.run_until(Duration::from_millis(300), |_| false);
    let third = p.add_path(2, PathRole::Lte);
    assert_eq!(third, PathId(2), "a new path gets a new id");
    p.run_until(Duration::from_secs(1), |p| {
        keep_busy(p, &mut sent);
        false
    });
    let s = p.server().stats();
    assert!(s.paths.iter().all(|path| path.data_bytes_sent > 100_000), "{:?}", s.paths);
    // Each side's handshake id: the peer sends to it (RFC 9000 §7.2), one direction each.
    let handshake = [p.client.connection_id(), p.server().connection_id()];
    assert_ne!(handshake[0], handshake[1], "each side draws its own id");
    let seen = sightings(&p);
    let paths: Vec<PathId> = seen
        .values()
        .flatten()
        .map(|&(path, _)| path)
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    assert_eq!(paths, vec![PathId(0), PathId(1), PathId(2)], "{seen:?}");
    for (cid, at) in &seen {
        assert_eq!(at.len(), 1, "id {cid:#x} seen on {at:?}");
        if handshake.contains(cid) {
            assert_eq!(at[0].0, PathId(0), "handshake id: {at:?}");
        }
    }
    // Each path and direction has its own id, apart from the handshake's early packets.
    assert!(seen.len() >= 6, "{seen:?}");
    let handshake_packets = p
        .trace
        .iter()
        .filter(|(_, _, d)| {
            PlainHeader::parse(d)
                .is_ok_and(|h| h.level == Level::OneRtt && handshake.contains(&h.connection_id))
        })
        .count();
    assert!(handshake_packets <= 6, "{handshake_packets} 1-RTT packets with the handshake's id");
}

/// The header does not name the path: the id does. A packet sealed for path 1 (its
/// nonce) with the id issued for path 0 is refused, as it does not authenticate on path
/// 0; an id this side never issued is refused as unknown; the same packet for path 0 is
/// taken.
#[test]
fn a_packets_path_is_the_one_its_id_was_issued_for() {
    let mut p = Pair::default_pair(vec![Link::new(10, 20, 0.0), Link::new(10, 20, 0.0)]);
    p.connect();
    p.add_path(1, PathRole::Lte);
    p.run_until(Duration::from_millis(200), |_| false);
    let mut issued = Vec::new();
    while let Some(e) = p.server().poll_cid_event() {
        issued.push(e);
    }
    let Some(CidEvent::Issued(first)) = issued.first().copied() else {
        panic!("the server issued no ids: {issued:?}");
    };
    // The server's first id is for path 0 (ids are issued in path order).
    let before = p.server().stats().dropped;
    p.inject_to_server(first, 1, vec![Frame::Ping]);
    let after = p.server().stats().dropped;
    assert_eq!(after.unauthenticated, before.unauthenticated + 1, "{after:?}");
    // An id the server never issued (not through `inject_to_server`, which refuses one).
    let pn = p.client.take_packet_number(PathId(0));
    let stray = raw_packet(&p.client, first ^ 1, 0, pn, vec![Frame::Ping]);
    let now = p.now;
    p.server().handle_datagram(now, server_addr(0), client_addr(0), &stray);
    let after = p.server().stats().dropped;
    assert_eq!(after.unknown_connection, before.unknown_connection + 1, "{after:?}");
    // The same packet on path 0 is taken.
    p.inject_to_server(first, 0, vec![Frame::Ping]);
    assert_eq!(p.server().stats().dropped, after);
}

/// A peer that announces ever more ids within this side's maximum path id keeps one per
/// path (the others are refused and counted) and gets at most one per path back; the
/// connection goes on. One path id above the maximum breaks RFC 10069: the connection
/// closes with PROTOCOL_VIOLATION.
#[test]
fn a_flood_of_path_ids_is_bounded() {
    let mut p = established_pair();
    let before = p.server().stats();
    let max = p.server().local_max_path_id;
    assert_eq!(max, 7, "max_paths 8: path ids 0 to 7");
    let new_cid = |path: u32, k: u64| Frame::PathNewCid {
        path: PathId(path),
        seq: 0,
        retire_prior_to: 0,
        cid: LongCid::from_u64(0xdead_0000 + k),
        reset_token: [k as u8; 16],
    };
    for k in 0..1000u64 {
        let to = p.server().connection_id();
        p.inject_to_server(to, 0, vec![new_cid(1 + (k % u64::from(max)) as u32, k)]);
    }
    let mut issued = 0;
    while let Some(e) = p.server().poll_cid_event() {
        if matches!(e, CidEvent::Issued(_)) {
            issued += 1;
        }
    }
    assert!(issued <= MAX_CIDS, "{issued} ids issued");
    let after = p.server().stats();
    assert_eq!(after.dropped, before.dropped, "the frames were taken, not the packets dropped");
    assert!(after.cids_refused >= 1000 - u64::from(max), "{}", after.cids_refused);
    // Still working.
    bulk(&mut p, 100_000, 10_000, Duration::from_secs(10), |_| {});
    assert!(!p.server().is_closed());
    let to = p.server().connection_id();
    p.inject_to_server(to, 0, vec![new_cid(max + 1, 5000)]);
    assert!(p.server().is_closed());
    let events: Vec<_> = std::iter::from_fn(|| p.server().poll_event()).collect();
    assert!(
        events.iter().any(|e| matches!(
            e,
            crate::proto::Event::Closed {
                reason: crate::proto::CloseReason::ProtocolError {
                    code: crate::proto::PROTOCOL_VIOLATION,
                    ..
                }
            }
        )),
        "{events:?}"
    );
}

/// RFC 9000 §5.1.2 and §19.15: a Retire Prior To makes the receiver retire every id of the
/// sender's numbered below it (the handshake's included), with RETIRE_CONNECTION_ID, and
/// send with the new one; ids past the `active_connection_id_limit` this side announced
/// close the connection with CONNECTION_ID_LIMIT_ERROR (§5.1.1).
#[test]
fn retire_prior_to_is_honoured_and_the_limit_enforced() {
    let mut p = established_pair();
    p.run_until(Duration::from_millis(500), |_| false);
    let path0 = PathId(0);
    let old = p.client.sending_cid(path0).expect("the server's id for path 0");
    let new_cid = |seq: u64| Frame::PathNewCid {
        path: path0,
        seq,
        retire_prior_to: 10,
        cid: LongCid::from_u64(0xabc0 + seq),
        reset_token: [seq as u8; 16],
    };
    let ccid = p.client.connection_id();
    p.inject_to_client(ccid, 0, vec![new_cid(10)]);
    assert_eq!(p.client.sending_cid(path0), Some(0xabc0 + 10));
    assert_ne!(old, 0xabc0 + 10);
    // (The injected id is not one the server routes, so the server cannot open what the
    // client sends with it: the client's counter tells.)
    let now = p.now;
    let mut buf = Vec::new();
    while p.client.poll_transmit(now, &mut buf).is_some() {}
    // The handshake's id and the three the server issued.
    assert_eq!(p.client.stats().cids_retired, 4);
    // Three more fit the limit of four; a fifth does not.
    for seq in 11..14 {
        p.inject_to_client(ccid, 0, vec![new_cid(seq)]);
        assert!(!p.client.is_closed(), "{seq}");
    }
    p.inject_to_client(ccid, 0, vec![new_cid(14)]);
    assert!(p.client.is_closed());
    let events: Vec<_> = std::iter::from_fn(|| p.client.poll_event()).collect();
    assert!(
        events.iter().any(|e| matches!(
            e,
            crate::proto::Event::Closed {
                reason: crate::proto::CloseReason::ProtocolError {
                    code: crate::proto::CONNECTION_ID_LIMIT_ERROR,
                    ..
                }
            }
        )),
        "{events:?}"
    );
}
