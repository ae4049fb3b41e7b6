//! Packet protection: off-path forgeries, bit flips, replays, key updates, amplification.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use super::harness::*;
use crate::path::{PathId, PathRole, PathStatus};
use crate::proto::frame::Frame;
use crate::proto::{Connection, Delivery, Event, Reliability, crypto, packet};
use crate::time::Instant;

/// Every input drop counter summed.
fn drops(c: &Connection) -> u64 {
    let d = c.stats().dropped;
    d.malformed
        + d.unknown_connection
        + d.unvalidated_address
        + d.out_of_window
        + d.duplicate
        + d.unauthenticated
        + d.no_keys
}

/// An off-path attacker sees the connection id and the addresses but holds no key: its
/// CLOSE, ABANDON, PATH_STATUS and PATH_ABANDON (plain, or sealed with keys of its own connection) are
/// dropped as unauthenticated and change nothing. (Before packet protection, each of them
/// acted: CLOSE closed the connection.)
#[test]
fn off_path_close_abandon_and_path_status_are_ignored() {
    let mut p = established_pair();
    let mut attacker = Pair::new(config(), config(), vec![Link::new(10, 10, 0.0)], 77);
    attacker.connect();
    // Each side's handshake id, the one its peer sends to.
    let (ccid, scid) = (p.client.connection_id(), p.server().connection_id());
    let now = p.now;
    let forged = [
        Frame::Close { code: 1, reason: Bytes::from_static(b"forged"), application: true },
        Frame::Abandon { offset: 1 << 20, next_message: 1000 },
        Frame::PathStatus { path: PathId(0), seq: 1 << 30, status: PathStatus::Backup },
        Frame::PathAbandon { path: PathId(0), error: crate::proto::frame::PATH_UNSTABLE_OR_POOR },
    ];
    for (n, f) in forged.iter().enumerate() {
        let pn = 10_000 + n as u64;
        // Sealed with the attacker's own 1-RTT keys, toward either end.
        let to_client = attacker.server().seal_frames(ccid, PathId(0), pn, std::slice::from_ref(f));
        let to_server = attacker.client.seal_frames(scid, PathId(0), pn, std::slice::from_ref(f));
        // In clear, with a made-up tag.
        let plain = |cid: u64| {
            let mut plain = Vec::new();
            let at = crypto::write_header(&mut plain, crypto::Level::OneRtt, &cid.to_be_bytes(), 4);
            plain[at..at + 4].copy_from_slice(&(pn as u32).to_be_bytes());
            packet::encode_frames(std::slice::from_ref(f), &mut plain);
            plain.extend_from_slice(&[0u8; crypto::TAG_LEN]);
            plain
        };
        for d in [&to_client, &plain(ccid)] {
            p.client.handle_datagram(now, client_addr(0), server_addr(0), d);
        }
        for d in [&to_server, &plain(scid)] {
            p.server().handle_datagram(now, server_addr(0), client_addr(0), d);
        }
    }
    assert_eq!(p.client.stats().dropped.unauthenticated, 8, "{:?}", p.client.stats().dropped);
    assert_eq!(p.server().stats().dropped.unauthenticated, 8);
    for c in [&mut p.client, p.server.as_mut().unwrap()] {
        assert!(c.is_established());
        while let Some(e) = c.poll_event() {
            assert!(
                !matches!(e, Event::Closed { .. } | Event::PeerPathStatus { .. }),
                "forged input acted on: {e:?}"
            );
        }
    }
    // The stream is intact: no message was abandoned.
    bulk(&mut p, 200_000, 10_000, Duration::from_secs(20), |_| {});
    assert_eq!(p.client.stats().messages_abandoned, 0);
}

/// An off-path attacker who saw the connection id tries to join a path from its own
/// address (plain, or sealed with keys of its own connection): the server opens no path,
/// challenges no one and sends nothing to that address. (Before packet protection the
/// join was taken, the attacker answered the challenge and received part of the stream.)
#[test]
fn a_spoofed_path_join_from_off_path_opens_no_path() {
    let mut p = established_pair();
    let mut attacker = Pair::new(config(), config(), vec![Link::new(10, 10, 0.0)], 78);
    attacker.connect();
    let cid = p.server().connection_id();
    let stranger = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(203, 0, 113, 9)), 4000);
    let join = Frame::PathJoin { token: 42, role: PathRole::Lte };
    let sealed = attacker.client.seal_frames(cid, PathId(1), 0, std::slice::from_ref(&join));
    let mut plain = Vec::new();
    let at = crypto::write_header(&mut plain, crypto::Level::OneRtt, &cid.to_be_bytes(), 4);
    plain[at..at + 4].copy_from_slice(&0u32.to_be_bytes());
    packet::encode_frames(std::slice::from_ref(&join), &mut plain);
    plain.extend_from_slice(&[0u8; crypto::TAG_LEN]);
    let paths_before = p.server().stats().paths.len();
    let now = p.now;
    for d in [&sealed, &plain] {
        p.server().handle_datagram(now, server_addr(0), stranger, d);
    }
    assert_eq!(p.server().stats().paths.len(), paths_before, "a path was opened");
    assert_eq!(p.server().stats().dropped.unauthenticated, 2);
    let mut buf = Vec::new();
    let now = p.now;
    while let Some(t) = p.server().poll_transmit(now, &mut buf) {
        assert_ne!(t.remote, stranger, "the server answered the spoofed join");
    }
}

/// 1-RTT headers are RFC 9000 §17.3.1's: the first byte, the 8-byte destination id and a
/// packet number of as few bytes as §A.2 allows (the path follows from the id). Over a
/// transfer whose acknowledgments keep up, every packet number takes one or two bytes.
#[test]
fn packet_numbers_take_as_few_bytes_as_the_acknowledgments_allow() {
    let mut p = established_pair();
    p.keep_trace = true;
    bulk(&mut p, 300_000, 1000, Duration::from_secs(20), |_| {});
    let mut lens = [0usize; 5];
    for (_, to_server, d) in &p.trace {
        if *to_server || d.first().is_none_or(|b| b & 0x80 != 0) {
            continue;
        }
        let n = p.client.open_pn_len(d).expect("the server's packet opens");
        lens[n] += 1;
    }
    assert!(lens[1] > 100, "{lens:?}");
    assert_eq!(lens[3] + lens[4], 0, "{lens:?}");
}

/// A packet that authenticates with a reserved header bit set is a PROTOCOL_VIOLATION
/// (RFC 9000 §17.3.1): the connection closes with it. The same packet without the bit is
/// taken.
#[test]
fn an_authentic_packet_with_a_reserved_bit_set_closes_the_connection() {
    use crate::proto::{CloseReason, PROTOCOL_VIOLATION};
    let mut p = established_pair();
    let cid = p.client.connection_id();
    let now = p.now;
    let pn = p.server().take_packet_number(PathId(0));
    let clean = p.server().seal_frames(cid, PathId(0), pn, &[Frame::Ping]);
    p.client.handle_datagram(now, client_addr(0), server_addr(0), &clean);
    assert!(p.client.is_established());
    let pn = p.server().take_packet_number(PathId(0));
    let bad = p.server().seal_frames_with(cid, PathId(0), pn, &[Frame::Ping], 0x10);
    p.client.handle_datagram(now, client_addr(0), server_addr(0), &bad);
    let mut closed = None;
    while let Some(e) = p.client.poll_event() {
        if let Event::Closed { reason } = e {
            closed = Some(reason);
        }
    }
    assert!(
        matches!(closed, Some(CloseReason::ProtocolError { code, .. }) if code == PROTOCOL_VIOLATION),
        "{closed:?}"
    );
}

/// A captured server → client packet with one bit flipped, for each byte position in
/// turn: every copy is dropped and counted, none is acted on.
#[test]
fn a_bit_flipped_in_any_byte_of_a_captured_packet_is_dropped_and_counted() {
    let mut p = established_pair();
    p.keep_trace = true;
    let now = p.now;
    p.server().send_message(now, message(0, 900), Reliability::Reliable).unwrap();
    p.run_until(Duration::from_millis(200), |_| false);
    let (_, _, captured) = p
        .trace
        .iter()
        .find(|(_, to_server, d)| !*to_server && d.len() > 900)
        .cloned()
        .expect("a data packet to the client");
    assert_eq!(
        p.client.read_message(p.now),
        Some(Delivery::Message { id: 0, data: message(0, 900) })
    );
    let (before, delivered) = (drops(&p.client), p.client.stats().bytes_delivered);
    let now = p.now;
    for i in 0..captured.len() {
        let mut bad = captured.clone();
        bad[i] ^= 1 << (i % 8);
        p.client.handle_datagram(now, client_addr(0), server_addr(0), &bad);
    }
    assert_eq!(drops(&p.client) - before, captured.len() as u64, "{:?}", p.client.stats().dropped);
    assert!(p.client.stats().dropped.unauthenticated > captured.len() as u64 - 12);
    assert_eq!(p.client.stats().bytes_delivered, delivered);
    assert_eq!(p.client.read_message(now), None);
    assert!(p.client.is_established());
}

/// A captured packet replayed (from the same address, and from another) is dropped and
/// counted: nothing is delivered twice and nothing else changes.
#[test]
fn a_replayed_packet_has_no_effect() {
    let mut p = established_pair();
    p.keep_trace = true;
    let now = p.now;
    p.server().send_message(now, message(0, 900), Reliability::Reliable).unwrap();
    p.run_until(Duration::from_millis(200), |_| false);
    let (_, _, captured) = p
        .trace
        .iter()
        .find(|(_, to_server, d)| !*to_server && d.len() > 900)
        .cloned()
        .expect("a data packet to the client");
    assert!(p.client.read_message(p.now).is_some());
    let before = p.client.stats();
    let now = p.now;
    let stranger = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 7)), 4433);
    for _ in 0..10 {
        p.client.handle_datagram(now, client_addr(0), server_addr(0), &captured);
        p.client.handle_datagram(now, client_addr(0), stranger, &captured);
    }
    let after = p.client.stats();
    assert_eq!(after.dropped.duplicate - before.dropped.duplicate, 10);
    assert_eq!(after.dropped.unvalidated_address - before.dropped.unvalidated_address, 10);
    assert_eq!(after.bytes_delivered, before.bytes_delivered);
    assert_eq!(p.client.read_message(now), None);
    assert_eq!(p.client.recv_buffered(), 0);
}

/// Before the client's address is validated the server sends at most three times what it
/// received from it, and the client's first datagram is full size.
#[test]
fn the_server_sends_at_most_three_times_what_it_received_before_validation() {
    let (cc, sc) = crypto::deterministic::pair(5);
    let now = Instant::ZERO;
    let mut client = Connection::connect(
        Arc::new(config()),
        &cc,
        now,
        5,
        client_addr(0),
        server_addr(0),
        PathRole::Wifi,
    )
    .unwrap();
    let mut buf = Vec::new();
    let t = client.poll_transmit(now, &mut buf).expect("the ClientHello");
    assert!(t.len >= crypto::MIN_INITIAL_DATAGRAM, "{}", t.len);
    let first = buf.clone();
    // The copy arrives from a spoofed address: the server can only answer there.
    let victim = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 9)), 53);
    let mut server =
        Connection::accept(Arc::new(config()), &sc, now, 9, server_addr(0), victim, &first)
            .unwrap();
    let mut sent = 0;
    let mut t = now;
    // Run its timers for a minute: retransmissions stay within the budget.
    for _ in 0..200 {
        while let Some(tx) = server.poll_transmit(t, &mut buf) {
            assert_eq!(tx.remote, victim);
            sent += tx.len;
        }
        match server.poll_timeout() {
            Some(next) if next < Instant::from_micros(60_000_000) => {
                t = next;
                server.handle_timeout(t);
            }
            _ => break,
        }
    }
    assert!(sent > 0 && sent <= 3 * first.len(), "sent {sent} for {}", first.len());
    // Short datagrams start nothing.
    assert!(
        Connection::accept(Arc::new(config()), &sc, now, 9, server_addr(0), victim, &first[..600])
            .is_err()
    );
}

/// Keys are updated every `key_update_packets` packets, both ends follow, and a long
/// transfer over two lossy paths stays intact across the updates.
#[test]
fn keys_update_during_a_transfer_and_nothing_is_lost() {
    let mut cfg = config();
    cfg.key_update_packets = 64;
    let mut p =
        Pair::new(cfg.clone(), cfg, vec![Link::new(20, 10, 0.02), Link::new(30, 10, 0.02)], 3);
    p.connect();
    p.add_path(1, PathRole::Lte);
    bulk(&mut p, 2_000_000, 10_000, Duration::from_secs(60), |_| {});
    let (c, s) = (p.client.stats().key_updates, p.server().stats().key_updates);
    assert!(c >= 5 && s >= 5, "key updates: client {c}, server {s}");
    assert!(c.abs_diff(s) <= 1, "client {c}, server {s}");
    assert!(p.client.stats().dropped.unauthenticated <= 5, "{:?}", p.client.stats().dropped);
}

/// A packet of `level` (Initial, or Handshake: an attacker who took no part in the
/// handshake has only the Initial keys) to `dcid` from `scid`, sealed with the Initial keys
/// of `cid` (the client's first destination id, which anyone who saw it can derive them
/// from, RFC 9001 §5.2), carrying `junk` as TLS bytes at `offset`, toward `to`.
fn forged_long(
    level: crypto::Level,
    (cid, dcid, scid): (u64, u64, u64),
    to: rustls::Side,
    offset: u64,
    junk: &[u8],
) -> Vec<u8> {
    // The keys the *sender* of such a packet would seal with.
    let sender = match to {
        rustls::Side::Client => rustls::Side::Server,
        rustls::Side::Server => rustls::Side::Client,
    };
    let keys = crypto::initial_suite().keys(&cid.to_be_bytes(), sender, rustls::quic::Version::V1);
    let local: crypto::DirectionKeys = keys.local.into();
    let mut buf = Vec::new();
    let (to, from) = (dcid.to_be_bytes(), scid.to_be_bytes());
    let at = crypto::write_long_header(&mut buf, level, &to, &from, &[]);
    crypto::HandshakeChunk::Crypto { offset, data: junk }.encode(&mut buf);
    buf.resize(1200 - crypto::TAG_LEN, 0);
    crypto::seal(&local, level, PathId(0), 1 << 20, at, &mut buf, false).expect("sealing works");
    buf
}

/// Forges `n` packets of `level` toward each end of an established pair, at every offset
/// their TLS stream could be at, under the Initial keys anyone derives from the visible id
/// (the ids a real one would carry: to the server's or to the first id, from the client's;
/// to the client's, from the server's). Each must be dropped as `no_keys`, and a transfer
/// must go on after them.
fn forged_packets_change_nothing(level: crypto::Level, n: u64) {
    let mut p = established_pair();
    // The server's first 1-RTT packet confirms the handshake at the client.
    p.run_until(Duration::from_millis(200), |_| false);
    let (ccid, scid) = (p.client.connection_id(), p.server().connection_id());
    let now = p.now;
    let junk = [0x16u8; 64];
    let (c0, s0) = (p.client.stats().dropped.no_keys, p.server().stats().dropped.no_keys);
    for offset in 0..n {
        let dcid = if offset % 2 == 0 { scid } else { ccid };
        let to_server = forged_long(level, (ccid, dcid, ccid), rustls::Side::Server, offset, &junk);
        p.server().handle_datagram(now, server_addr(0), client_addr(0), &to_server);
        let to_client = forged_long(level, (ccid, ccid, scid), rustls::Side::Client, offset, &junk);
        p.client.handle_datagram(now, client_addr(0), server_addr(0), &to_client);
    }
    assert!(!p.client.is_closed() && !p.server().is_closed());
    assert_eq!(p.client.stats().dropped.no_keys - c0, n);
    assert_eq!(p.server().stats().dropped.no_keys - s0, n);
    bulk(&mut p, 200_000, 1000, Duration::from_secs(30), |_| {});
}

/// A forged Initial packet after the handshake, toward either end and at every offset its
/// TLS stream could be at, changes nothing: both ends discarded their Initial (and
/// Handshake) keys as RFC 9001 §4.9 says, so it is dropped as `no_keys`. Before, the one
/// at the stream's next offset went to rustls, which failed the connection (a server
/// went silent 3 s into a stream, its client closed with "TLS handshake failed").
#[test]
fn a_forged_initial_packet_after_the_handshake_changes_nothing() {
    forged_packets_change_nothing(crypto::Level::Initial, 2000);
}

/// The same with Handshake packets: an attacker has no Handshake keys (they come from the
/// TLS exchange), so it seals with the Initial keys it can derive; after the handshake
/// both ends hold no Handshake keys any more (RFC 9001 §4.9.2) and drop each as
/// `no_keys`, and the transfer goes on.
#[test]
fn a_forged_handshake_packet_after_the_handshake_changes_nothing() {
    forged_packets_change_nothing(crypto::Level::Handshake, 500);
}

/// RFC 9001 §6.6's AEAD limits. Integrity: forged packets (the right header, a broken
/// tag) are dropped and counted, and at the limit the connection closes with
/// AEAD_LIMIT_REACHED, telling the peer. Confidentiality: keys are updated by half the
/// limit, so a transfer far longer than the limit completes; a limit too small for the
/// peer to take up the update in time closes the connection instead of sealing on.
#[test]
fn the_aead_limits_are_enforced() {
    use crate::proto::{AEAD_LIMIT_REACHED, AeadLimits, CloseReason, Event};
    let closed_with = |events: &[Event], code: u64| {
        events.iter().any(|e| {
            matches!(e, Event::Closed { reason: CloseReason::ProtocolError { code: c, .. } }
                | Event::Closed { reason: CloseReason::Peer { code: c, .. } } if *c == code)
        })
    };

    // Integrity: 50 forged packets allowed.
    let mut sc = config();
    sc.aead_limits = Some(AeadLimits { confidentiality: u64::MAX, integrity: 50 });
    let mut p = Pair::new(config(), sc, vec![Link::new(10, 10, 0.0)], 7);
    p.connect();
    let cid = p.server().connection_id();
    for i in 0..50u64 {
        assert!(!p.server().is_closed(), "closed after {i} forged packets");
        let mut pkt = raw_packet(&p.client, cid, 0, 1_000 + i, vec![Frame::Ping]);
        if let Some(last) = pkt.last_mut() {
            *last ^= 1;
        }
        let now = p.now;
        p.server().handle_datagram(now, server_addr(0), client_addr(0), &pkt);
    }
    assert_eq!(p.server().stats().dropped.unauthenticated, 50);
    assert!(p.server().is_closed(), "the 50th forged packet reaches the integrity limit");
    p.run_until(Duration::from_secs(1), |p| p.client.is_closed());
    assert!(closed_with(&p.server_events, AEAD_LIMIT_REACHED), "{:?}", p.server_events);
    assert!(closed_with(&p.client_events, AEAD_LIMIT_REACHED), "{:?}", p.client_events);

    // Confidentiality: 2 000 packets per key, updates asked for only after 2^40.
    let cfg = |limit: u64| {
        let mut c = config();
        c.key_update_packets = 1 << 40;
        c.aead_limits = Some(AeadLimits { confidentiality: limit, integrity: u64::MAX });
        c
    };
    let mut p = Pair::new(cfg(2_000), cfg(2_000), vec![Link::new(10, 10, 0.0)], 7);
    p.connect();
    bulk(&mut p, 4_000_000, 10_000, Duration::from_secs(60), |_| {});
    let s = p.server().stats();
    assert!(
        s.key_updates >= 3,
        "{} key updates for {} packets",
        s.key_updates,
        s.paths[0].packets_sent
    );
    assert!(!p.server().is_closed());

    // 40 packets per key on a 20-ms round trip: the server updates at 20, keeps sending
    // at 10 Mbit/s and reaches 24 (40 less the close margin) before the client's first
    // packet in the new phase can arrive, so it stops.
    let mut p = Pair::new(cfg(40), cfg(40), vec![Link::new(10, 10, 0.0)], 7);
    p.connect();
    let now = p.now;
    for i in 0..400 {
        let _ = p.server().send_message(now, message(i, 1000), crate::proto::Reliability::Reliable);
    }
    p.run_until(Duration::from_secs(5), |p| p.server().is_closed() && p.client.is_closed());
    assert!(closed_with(&p.server_events, AEAD_LIMIT_REACHED), "{:?}", p.server_events);
    assert!(closed_with(&p.client_events, AEAD_LIMIT_REACHED), "{:?}", p.client_events);
}
