//! Message delivery: bulk transfers, deadlines, abandoned messages, the delivery contract.

use std::time::Duration;

use super::harness::*;
use crate::path::{PathId, PathRole};
use crate::proto::{Delivery, Reliability};

#[test]
fn bulk_transfer_over_one_lossy_path_delivers_every_byte_in_order() {
    let mut p = Pair::default_pair(vec![Link::new(20, 20, 0.02)]);
    p.connect();
    bulk(&mut p, 2_000_000, 10_000, Duration::from_secs(60), |_| {});
    let s = p.server().stats();
    assert!(s.lost_packets > 0 && s.retransmitted_bytes > 0);
    assert_eq!(p.client.stats().messages_abandoned, 0);
}

#[test]
fn bulk_transfer_over_two_lossy_paths_uses_both() {
    let mut p = Pair::default_pair(vec![Link::new(20, 10, 0.02), Link::new(30, 10, 0.02)]);
    p.connect();
    let id = p.add_path(1, PathRole::Lte);
    assert_eq!(id, PathId(1));
    bulk(&mut p, 2_000_000, 10_000, Duration::from_secs(60), |_| {});
    let s = p.server().stats();
    assert_eq!(s.paths.len(), 2);
    // The server learned the client's radios from the transport parameters and the PATH_JOIN.
    assert_eq!((s.paths[0].role, s.paths[1].role), (PathRole::Wifi, PathRole::Lte));
    for ps in &s.paths {
        assert!(ps.data_bytes_sent > 300_000, "path {} carried {}", ps.id, ps.data_bytes_sent);
        assert!(ps.packets_lost > 0);
    }
    let c = p.client.stats();
    assert!(c.dropped.duplicate < 200, "{:?}", c.dropped);
}

#[test]
fn deadline_message_that_cannot_arrive_is_a_gap_and_later_messages_still_arrive() {
    let mut p = Pair::default_pair(vec![Link::new(20, 10, 0.0)]);
    p.connect();
    // Exchange a little so RTT estimates exist.
    bulk(&mut p, 10_000, 1000, Duration::from_secs(5), |_| {});
    let base = p.server().stats().paths[0].packets_sent;
    assert!(base > 0);
    p.links[0].up = false;
    let now = p.now;
    let deadline = now + Duration::from_millis(150);
    let a = p.server().send_message(
        now,
        message(100, 3000),
        Reliability::Deadline { at: deadline, max_retransmissions: 5 },
    );
    let b = p.server().send_message(now, message(101, 3000), Reliability::Reliable);
    assert_eq!((a, b), (Ok(10), Ok(11)));
    p.run_until(Duration::from_millis(400), |_| false);
    p.links[0].up = true;
    let now = p.now;
    assert_eq!(p.server().send_message(now, message(102, 500), Reliability::Reliable), Ok(12));
    let mut got = Vec::new();
    assert!(p.run_until(Duration::from_secs(10), |p| {
        while let Some(d) = p.client.read_message(p.now) {
            got.push(d);
        }
        got.len() == 3
    }));
    assert_eq!(got[0], Delivery::Gap { id: 10 });
    assert_eq!(got[1], Delivery::Message { id: 11, data: message(101, 3000) });
    assert_eq!(got[2], Delivery::Message { id: 12, data: message(102, 500) });
    assert_eq!(p.client.stats().messages_abandoned, 1);
    assert_eq!(p.server().stats().messages_abandoned_sent, 1);
}

#[test]
fn retransmission_budget_zero_abandons_on_first_loss() {
    let mut p = Pair::default_pair(vec![Link::new(10, 10, 0.0)]);
    p.connect();
    bulk(&mut p, 5_000, 1000, Duration::from_secs(5), |_| {});
    p.links[0].up = false;
    let now = p.now;
    let far = now + Duration::from_secs(100);
    p.server()
        .send_message(
            now,
            message(0, 800),
            Reliability::Deadline { at: far, max_retransmissions: 0 },
        )
        .unwrap();
    p.flush();
    p.links[0].up = true;
    p.server().send_message(now, message(1, 800), Reliability::Reliable).unwrap();
    let mut got = Vec::new();
    assert!(p.run_until(Duration::from_secs(5), |p| {
        while let Some(d) = p.client.read_message(p.now) {
            got.push(d);
        }
        got.len() == 2
    }));
    assert_eq!(got[0], Delivery::Gap { id: 5 });
    assert!(matches!(got[1], Delivery::Message { id: 6, .. }));
}

#[test]
fn same_seed_gives_identical_datagrams() {
    let run = || {
        let mut p = Pair::new(
            config(),
            config(),
            vec![Link::new(20, 10, 0.02), Link::new(30, 5, 0.02)],
            42,
        );
        p.keep_trace = true;
        p.connect();
        p.add_path(1, PathRole::Lte);
        bulk(&mut p, 300_000, 7_000, Duration::from_secs(30), |_| {});
        p.trace
    };
    let a = run();
    let b = run();
    assert!(a.len() > 300);
    assert!(a == b);
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 16, .. Default::default() })]

    /// Any seed, loss rate and mix of reliable and deadline messages over one or two
    /// paths: the receiver sees every id once, in order; reliable messages always arrive
    /// intact; only deadline messages may become gaps.
    #[test]
    fn random_transfers_keep_the_delivery_contract(
        seed in 0u64..1_000_000,
        loss in 0.0f64..0.08,
        two_paths in proptest::bool::ANY,
        kinds in proptest::collection::vec(0u8..4, 50..150),
    ) {
        let mut links = vec![Link::new(15, 10, loss)];
        if two_paths {
            links.push(Link::new(35, 4, loss));
        }
        let mut p = Pair::new(patient(config()), patient(config()), links, seed);
        p.connect();
        if two_paths {
            p.add_path(1, PathRole::Lte);
        }
        random_transfer(&mut p, &kinds)?;
    }
}
