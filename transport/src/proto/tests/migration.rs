//! NAT rebinding and migration (RFC 9000 §9): the server follows a validated path's peer
//! to a new address once it answers a PATH_CHALLENGE there, and not an attacker's copies.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use super::harness::*;
use crate::path::{PathId, PathRole};
use crate::time::Instant;

fn rebound(link: u8, port: u16) -> SocketAddr {
    SocketAddr::new(client_addr(link).ip(), port)
}

/// Moves `link`'s client behind a new NAT mapping once `at` has passed.
fn rebind_at(p: &mut Pair, at: Instant, link: u8, outside: SocketAddr) {
    if p.now >= at && p.nat.is_empty() {
        p.nat.push((client_addr(link), outside));
    }
}

/// Path 0's NAT mapping changes to a new source port mid-transfer: the old port is gone
/// (what the server sends there is lost), the server validates the new one and the
/// transfer completes. Before, every packet from the new port was dropped as coming from
/// an unvalidated address and the stream died at the idle timeout.
#[test]
fn a_nat_rebinding_on_path_0_mid_transfer_loses_nothing() {
    let mut p = established_pair();
    let at = p.now + Duration::from_millis(300);
    bulk(&mut p, 1_000_000, 1000, Duration::from_secs(30), |p| {
        rebind_at(p, at, 0, rebound(0, 40_001))
    });
    let s = p.server().stats();
    assert_eq!((s.migrations, s.migrations_failed), (1, 0));
}

/// The same on the second path of two, while both carry data.
#[test]
fn a_nat_rebinding_on_path_1_mid_transfer_loses_nothing() {
    let mut p = Pair::default_pair(vec![Link::new(10, 10, 0.0), Link::new(30, 10, 0.0)]);
    p.connect();
    p.add_path(1, PathRole::Lte);
    let at = p.now + Duration::from_millis(300);
    bulk(&mut p, 1_500_000, 1000, Duration::from_secs(30), |p| {
        rebind_at(p, at, 1, rebound(1, 40_002))
    });
    let s = p.server().stats();
    assert_eq!((s.migrations, s.migrations_failed), (1, 0));
    assert_eq!(s.paths.len(), 2);
}

/// A new IP address, not only a new port: validated as well, and the path's controller and
/// RTT estimator start over (RFC 9000 §9.4).
#[test]
fn a_new_client_ip_address_is_validated_and_the_transfer_goes_on() {
    let mut p = established_pair();
    let at = p.now + Duration::from_millis(300);
    let outside = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 77)), 5000);
    bulk(&mut p, 1_000_000, 1000, Duration::from_secs(30), |p| rebind_at(p, at, 0, outside));
    let s = p.server().stats();
    assert_eq!((s.migrations, s.migrations_failed), (1, 0));
}

/// An on-path attacker races copies of the client's packets to the server from its own
/// address (RFC 9000 §9.3.3). A copy that arrives first moves the path for a moment; the
/// client's next packet, from its real address, moves it back at once, and the address
/// that never answers a challenge is never validated. The transfer completes.
#[test]
fn copies_raced_from_another_address_do_not_take_the_path_away() {
    let mut p = established_pair();
    let attacker = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 66)), 666);
    let mut raced = 0;
    bulk(&mut p, 1_000_000, 1000, Duration::from_secs(30), |p| {
        // Every 50th datagram in flight to the server gets a copy delivered first, from
        // the attacker.
        let copies: Vec<Vec<u8>> = p
            .queue
            .values()
            .filter(|d| d.to_server)
            .map(|d| d.data.clone())
            .filter(|_| {
                raced += 1;
                raced % 50 == 0
            })
            .collect();
        let now = p.now;
        for d in copies {
            if let Some(s) = p.server.as_mut() {
                s.handle_datagram(now, server_addr(0), attacker, &d);
            }
        }
    });
    assert!(raced >= 50, "no copy was raced");
    let s = p.server().stats();
    assert_eq!(s.migrations, 0, "the attacker's address was validated");
}

/// A PATH_PROBE from the server (it timed path 1 out) makes the client send a PING on
/// path 1, so that the server hears from the path's current address: the way a NAT
/// rebinding on a path the client only receives on is found (`io/tests/rebinding.rs`
/// shows it on real sockets).
#[test]
fn a_path_probe_request_gets_a_ping_on_that_path() {
    use crate::path::PathId;
    use crate::proto::frame::Frame;
    let mut p = Pair::default_pair(vec![Link::new(10, 10, 0.0), Link::new(30, 10, 0.0)]);
    p.connect();
    p.add_path(1, PathRole::Lte);
    p.run_until(Duration::from_millis(500), |_| false);
    let sent_before = p.client.stats().paths[1].packets_sent;
    let cid = p.client.connection_id();
    p.inject_to_client(cid, 0, vec![Frame::PathProbe { path: PathId(1) }]);
    let now = p.now;
    let mut buf = Vec::new();
    let mut on_path_1 = 0;
    while let Some(t) = p.client.poll_transmit(now, &mut buf) {
        if t.path == PathId(1) {
            on_path_1 += 1;
        }
    }
    assert_eq!(on_path_1, 1, "one PING on path 1");
    assert_eq!(p.client.stats().paths[1].packets_sent, sent_before + 1);
    // A request for a path the client does not have costs nothing.
    p.inject_to_client(cid, 0, vec![Frame::PathProbe { path: PathId(9) }]);
    while p.client.poll_transmit(now, &mut buf).is_some() {}
    assert_eq!(p.client.stats().paths[1].packets_sent, sent_before + 1);
}

/// The destination id of a short-header datagram.
fn short_dcid(d: &[u8]) -> Option<u64> {
    let id: [u8; 8] = d.get(1..9)?.try_into().ok()?;
    (d.first()? & 0x80 == 0).then(|| u64::from_be_bytes(id))
}

/// The client moves path 0 to a new port mid-transfer, on purpose (RFC 9000 §9.2, the
/// interop runner's connectionmigration): its packets from the new port carry an id of the
/// server's never sent from the old one (§9.5), the ids it used are retired, the server
/// validates the new address and moves there with an id of the client's it never sent to
/// the old address, and the transfer completes.
#[test]
fn an_active_migration_uses_new_ids_both_ways_and_loses_nothing() {
    let mut p = established_pair();
    p.keep_trace = true;
    let at = p.now + Duration::from_millis(300);
    let moved = rebound(0, 40_003);
    // The trace's length when the client moved: what it holds before was sent before.
    let mut migrated_at = None;
    bulk(&mut p, 1_000_000, 1000, Duration::from_secs(30), |p| {
        if p.now >= at && migrated_at.is_none() {
            let now = p.now;
            p.client.migrate(now, PathId(0), moved).expect("a spare id to migrate with");
            migrated_at = Some(p.trace.len());
        }
    });
    let t = migrated_at.expect("migrated");
    let c = p.client.stats();
    let s = p.server().stats();
    assert_eq!(c.migrated, 1);
    assert_eq!((s.migrations, s.migrations_failed), (1, 0));
    assert!(c.cids_retired >= 1, "the ids used at the old port are retired");
    assert!(s.cids_retired >= 1, "the server retires the ids it sent to the old port");
    let ids = |to_server: bool, after: bool| -> std::collections::BTreeSet<u64> {
        p.trace
            .iter()
            .enumerate()
            .filter(|(i, (_, dir, _))| *dir == to_server && (*i >= t) == after)
            .filter_map(|(_, (_, _, d))| short_dcid(d))
            .collect()
    };
    let (up_before, up_after) = (ids(true, false), ids(true, true));
    assert!(!up_after.is_empty());
    assert!(up_before.is_disjoint(&up_after), "{up_before:x?} / {up_after:x?}");
    // The server's last datagrams, to the new address, carry an id it never used before.
    let down_before = ids(false, false);
    let last = p.trace.iter().rev().find(|(_, dir, _)| !dir).and_then(|(_, _, d)| short_dcid(d));
    let last = last.expect("a datagram to the client");
    assert!(!down_before.contains(&last), "{last:x} was sent to the old address");
}

/// Migration is a client's, after the handshake is confirmed, and needs a spare id.
#[test]
fn migration_is_refused_without_what_it_needs() {
    use crate::proto::MigrateError;
    let mut p = established_pair();
    let now = p.now;
    assert_eq!(p.client.migrate(now, PathId(0), rebound(0, 1)), Err(MigrateError::NotConfirmed));
    // HANDSHAKE_DONE arrives.
    p.run_until(Duration::from_millis(500), |_| false);
    let now = p.now;
    assert_eq!(p.server().migrate(now, PathId(0), server_addr(0)), Err(MigrateError::NotClient));
    assert_eq!(p.client.migrate(now, PathId(5), rebound(0, 1)), Err(MigrateError::UnknownPath));
    // The server issued three ids for path 0 besides the handshake's, and the client
    // sends with the first: two migrations in a row (no time for replacements to arrive)
    // use the other two up.
    for port in 1..=2 {
        assert_eq!(p.client.migrate(now, PathId(0), rebound(0, port)), Ok(()), "{port}");
        let mut buf = Vec::new();
        while p.client.poll_transmit(now, &mut buf).is_some() {}
    }
    assert_eq!(p.client.migrate(now, PathId(0), rebound(0, 3)), Err(MigrateError::NoSpareId));
}
