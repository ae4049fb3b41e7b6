//! Path management: joining, validating, removing, backup status, the bounded path table.

use std::time::Duration;

use super::harness::*;
use crate::path::{PathId, PathRole, PathStatus};
use crate::proto::{Event, PathError};

#[test]
fn removed_path_moves_its_data_to_the_other_path() {
    let mut p = transfer_closing_path_one(|_| {});
    assert!(
        p.server_events
            .contains(&Event::PeerPathStatus { path: PathId(1), status: PathStatus::Closed })
    );
    assert_eq!(p.client.paths(), vec![PathId(0)]);
    assert_eq!(p.server().paths(), vec![PathId(0)]);
    assert_eq!(p.server().stats().paths[1].status, PathStatus::Closed);
}

#[test]
fn backup_status_is_announced_to_the_peer() {
    let mut p = Pair::default_pair(vec![Link::new(20, 10, 0.0), Link::new(20, 10, 0.0)]);
    p.connect();
    p.add_path(1, PathRole::Lte);
    let now = p.now;
    p.client.set_path_status(now, PathId(1), PathStatus::Backup);
    assert!(p.run_until(Duration::from_secs(2), |p| {
        p.server_events
            .contains(&Event::PeerPathStatus { path: PathId(1), status: PathStatus::Backup })
    }));
    // The lowest-RTT test scheduler keeps backup paths idle while the active one works.
    bulk(&mut p, 300_000, 10_000, Duration::from_secs(30), |_| {});
    let s = p.server().stats();
    assert_eq!(s.paths[1].status, PathStatus::Backup);
    assert_eq!(s.paths[1].data_bytes_sent, 0);
}

#[test]
fn control_frames_stay_off_a_backup_path_with_a_lower_rtt() {
    // WiFi (path 0) 40 ms, LTE (path 1) 5 ms: by RTT alone the client's control frames
    // (MAX_DATA, READ_RATE) would go on LTE.
    let mut p = Pair::default_pair(vec![Link::new(40, 10, 0.0), Link::new(5, 10, 0.0)]);
    p.connect();
    p.add_path(1, PathRole::Lte);
    let now = p.now;
    p.client.set_path_status(now, PathId(1), PathStatus::Backup);
    assert!(p.run_until(Duration::from_secs(2), |p| {
        p.server_events
            .contains(&Event::PeerPathStatus { path: PathId(1), status: PathStatus::Backup })
    }));
    let before = p.client.stats().paths[1].packets_sent;
    // Reading a bulk transfer makes the client send MAX_DATA and READ_RATE all along.
    let got = bulk(&mut p, 2_000_000, 10_000, Duration::from_secs(30), |_| {});
    assert_eq!(got.len(), 200);
    let s = p.client.stats();
    assert!(s.paths[0].packets_sent > 100, "{:?}", s.paths[0]);
    assert_eq!(s.paths[1].packets_sent, before, "the backup path carried client packets");
}

#[test]
fn adding_paths_is_bounded_and_client_only() {
    let mut p = established_pair();
    let now = p.now;
    assert_eq!(
        p.server().add_path(now, server_addr(1), client_addr(1), PathRole::Lte),
        Err(PathError::NotClient)
    );
    assert_eq!(
        p.client.add_path(now, client_addr(0), server_addr(0), PathRole::Lte),
        Err(PathError::Duplicate)
    );
    for k in 1..8u8 {
        assert!(p.client.add_path(now, client_addr(k), server_addr(k), PathRole::Lte).is_ok());
    }
    assert_eq!(
        p.client.add_path(now, client_addr(9), server_addr(9), PathRole::Lte),
        Err(PathError::TooMany)
    );
}

#[test]
fn joining_and_closing_paths_forever_keeps_the_path_table_bounded() {
    let mut p = Pair::default_pair(vec![Link::new(5, 10, 0.0); 4]);
    p.connect();
    for round in 0..40u32 {
        let link = (round % 3 + 1) as u8;
        let id = p.add_path(link, PathRole::Lte);
        let now = p.now;
        p.client.remove_path(now, id);
        assert!(p.run_until(Duration::from_secs(2), |p| p.server().paths() == vec![PathId(0)]));
    }
    assert!(p.server().stats().paths.len() <= 32);
    assert!(p.client.stats().paths.len() <= 32);
    assert!(p.client.is_established());
}

/// A case the delivery-contract property found (seed 663 372, 8 % loss on both links): the
/// server's first two PATH_CHALLENGEs on the LTE link are lost, the third goes out 3 ms
/// before the server's validation timeout (3 s after the first join) would have forgotten
/// the path, and the client's PATH_RESPONSEs then went to a server that dropped them, for
/// ever. The timeout now runs from the last join, and a lost response re-sends the join.
#[test]
fn a_path_whose_first_challenges_are_lost_still_validates() {
    let loss = 0.079_764_724_573_131_55;
    let mut p = Pair::new(
        config(),
        config(),
        vec![Link::new(15, 10, loss), Link::new(35, 4, loss)],
        663_372,
    );
    p.connect();
    let t0 = p.now;
    let id = p.client.add_path(t0, client_addr(1), server_addr(1), PathRole::Lte).expect("path");
    let ok = p.run_until(Duration::from_secs(30), |p| {
        p.client_events.contains(&Event::PathValidated(id))
            && p.server_events.contains(&Event::PathValidated(id))
    });
    assert!(ok, "not validated {:?} after the join", p.now - t0);
}

/// RFC 10069's path id limits. A server that keeps two paths (ids 0 and 1) announces
/// `initial_max_path_id` 1: the client's third path is refused at once and PATHS_BLOCKED
/// tells the server; once path 1 is closed (PATH_ABANDON both ways) the server allows path
/// id 2 with MAX_PATH_ID, and the new path joins under that new id (ids only increase)
/// and carries data.
#[test]
fn the_peers_maximum_path_id_limits_new_paths_until_one_closes() {
    let mut server = config();
    server.max_paths = 2;
    let links = vec![Link::new(20, 10, 0.0), Link::new(20, 10, 0.0), Link::new(20, 10, 0.0)];
    let mut p = Pair::new(config(), server, links, 3);
    p.connect();
    assert_eq!(p.client.remote_max_path_id, Some(1));
    assert_eq!(p.server().remote_max_path_id, Some(7));
    p.add_path(1, PathRole::Lte);
    let now = p.now;
    let third = p.client.add_path(now, client_addr(2), server_addr(2), PathRole::Lte);
    assert_eq!(third, Err(PathError::Blocked));
    // The server hears PATHS_BLOCKED; with both its paths open it allows nothing more.
    p.run_until(Duration::from_millis(200), |_| false);
    assert_eq!(p.server().local_max_path_id, 1);
    let now = p.now;
    p.client.remove_path(now, PathId(1));
    assert!(p.run_until(Duration::from_secs(2), |p| p.client.remote_max_path_id == Some(2)));
    let id = p.add_path(2, PathRole::Lte);
    assert_eq!(id, PathId(2));
    bulk(&mut p, 300_000, 10_000, Duration::from_secs(30), |_| {});
    assert!(p.server().stats().paths.iter().any(|s| s.id == PathId(2) && s.bytes_received > 0));
}

/// A peer stopped at this side's maximum while fewer than `max_paths` paths are open here
/// (its joins were lost, or the paths were forgotten unvalidated) gets one more id for its
/// PATHS_BLOCKED; a PATHS_BLOCKED above the maximum closes the connection.
#[test]
fn paths_blocked_below_the_path_budget_raises_the_maximum() {
    use crate::proto::frame::Frame;
    let mut p = Pair::default_pair(vec![Link::new(20, 10, 0.0)]);
    p.connect();
    let to = p.server().connection_id();
    p.inject_to_server(to, 0, vec![Frame::PathsBlocked { max: PathId(7) }]);
    assert_eq!(p.server().local_max_path_id, 8);
    assert!(!p.server().is_closed());
    let to = p.server().connection_id();
    p.inject_to_server(to, 0, vec![Frame::PathsBlocked { max: PathId(9) }]);
    assert!(p.server().is_closed());
}

/// RFC 10069's path closure: packets the peer sent on a path before it heard of the
/// PATH_ABANDON are still taken for three of the path's PTOs, and acknowledged on a path
/// still open; after that they are dropped and counted.
#[test]
fn a_closed_paths_late_packets_are_taken_for_three_ptos_then_dropped() {
    use crate::proto::frame::Frame;
    let mut p = Pair::default_pair(vec![Link::new(20, 10, 0.0), Link::new(20, 10, 0.0)]);
    p.connect();
    p.add_path(1, PathRole::Lte);
    p.run_until(Duration::from_millis(300), |_| false);
    let cid = p.client.issued_cid(PathId(1)).expect("the client's id for path 1");
    let now = p.now;
    p.client.remove_path(now, PathId(1));
    // A packet the server sealed on path 1 before the abandon reached it.
    let before = p.client.stats();
    p.inject_to_client(cid, 1, vec![Frame::Ping]);
    let after = p.client.stats();
    assert_eq!(after.dropped, before.dropped, "a late packet on the closed path was dropped");
    assert!(after.paths[1].bytes_received > before.paths[1].bytes_received);
    // Its ACK goes out on path 0, the only path open.
    assert!(p.client.ack_pending_on(PathId(1)));
    let sent = p.client.stats().paths[0].packets_sent;
    assert!(p.run_until(Duration::from_millis(100), |p| !p.client.ack_pending_on(PathId(1))));
    assert!(p.client.stats().paths[0].packets_sent > sent);
    assert_eq!(p.client.stats().paths[1].packets_sent, after.paths[1].packets_sent);
    // Three PTOs later (20-ms links: well under a second) the path's packets are refused.
    p.run_until(Duration::from_secs(2), |_| false);
    let before = p.client.stats().dropped;
    p.inject_to_client(cid, 1, vec![Frame::Ping]);
    let after = p.client.stats().dropped;
    assert_eq!(after.closed_path, before.closed_path + 1, "{after:?}");
}

/// A path closed while it owed the peer a PATH_RESPONSE (a v1 PATH_CHALLENGE arrived on it
/// and nothing went out there since) drops the answer: nothing is sent on a closed path,
/// and an answer left pending would keep a control frame waiting for ever.
#[test]
fn a_path_closed_with_a_challenge_unanswered_leaves_nothing_pending() {
    use crate::proto::frame::Frame;
    let mut p = Pair::default_pair(vec![Link::new(20, 10, 0.0), Link::new(20, 10, 0.0)]);
    p.connect();
    p.add_path(1, PathRole::Lte);
    p.run_until(Duration::from_millis(300), |_| false);
    let cid = p.client.issued_cid(PathId(1)).expect("the client's id for path 1");
    p.inject_to_client(cid, 1, vec![Frame::PeerChallenge { token: 0x1234_5678 }]);
    assert!(p.client.control_pending(), "the answer waits");
    let now = p.now;
    p.client.remove_path(now, PathId(1));
    // The PATH_ABANDON goes out on path 0; after that nothing waits.
    assert!(p.run_until(Duration::from_millis(200), |p| !p.client.control_pending()));
}
