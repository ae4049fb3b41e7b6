//! The end of a connection: idle timeout, keep-alive and CLOSE.

use std::time::Duration;

use bytes::Bytes;

use super::harness::*;
use crate::path::PathRole;
use crate::proto::{CloseReason, Event, Reliability, SendError};
use crate::time::Instant;

#[test]
fn idle_connections_time_out_on_both_sides() {
    let mut p = Pair::default_pair(vec![Link::new(10, 10, 0.0)]);
    p.connect();
    assert!(
        p.run_until(Duration::from_secs(30), |p| p.client.is_closed() && p.server().is_closed())
    );
    assert!(p.client_events.contains(&Event::Closed { reason: CloseReason::IdleTimeout }));
    assert!(p.server_events.contains(&Event::Closed { reason: CloseReason::IdleTimeout }));
    assert!(
        p.now >= Instant::from_micros(10_000_000) && p.now < Instant::from_micros(10_200_000),
        "{:?}",
        p.now
    );
    assert_eq!(p.client.poll_timeout(), None);
}

/// RFC 9000 §10.1: each side announces its `max_idle_timeout` and both use the smaller;
/// neither closes before three probe timeouts have passed, however small the value.
#[test]
fn the_smaller_announced_idle_timeout_counts_at_both_ends_and_never_below_three_ptos() {
    let mut cc = config();
    cc.idle_timeout = Duration::from_secs(4);
    let mut sc = config();
    sc.idle_timeout = Duration::from_secs(30);
    let mut p = Pair::new(cc, sc, vec![Link::new(10, 10, 0.0)], 4);
    p.connect();
    assert_eq!(p.client.idle_timeout(), Duration::from_secs(4));
    assert_eq!(p.server().idle_timeout(), Duration::from_secs(4));
    let start = p.now;
    assert!(p.run_until(Duration::from_secs(30), |p| p.server().is_closed()));
    let after = p.now.saturating_duration_since(start);
    assert!(after <= Duration::from_millis(4_200), "the server waited {after:?}, not 4 s");
    assert!(p.server_events.contains(&Event::Closed { reason: CloseReason::IdleTimeout }));

    // One side without a timeout (0): the other's counts.
    let mut cc = config();
    cc.idle_timeout = Duration::ZERO;
    let mut sc = config();
    sc.idle_timeout = Duration::from_secs(6);
    let mut p = Pair::new(cc, sc, vec![Link::new(10, 10, 0.0)], 4);
    p.connect();
    assert_eq!(p.client.idle_timeout(), Duration::from_secs(6));

    // A 1-ms timeout on a path with a 200-ms RTT: three PTOs (over 600 ms) pass first.
    let mut cc = config();
    cc.idle_timeout = Duration::from_millis(1);
    let mut p = Pair::new(cc, config(), vec![Link::new(100, 10, 0.0)], 4);
    p.connect();
    let start = p.now;
    assert!(p.run_until(Duration::from_secs(30), |p| p.client.is_closed()));
    let after = p.now.saturating_duration_since(start);
    assert!(after >= Duration::from_millis(600), "closed after {after:?}");
}

#[test]
fn keep_alive_prevents_the_idle_timeout() {
    let mut cc = config();
    cc.keep_alive = Some(Duration::from_secs(3));
    let mut p = Pair::new(cc, config(), vec![Link::new(10, 10, 0.0)], 4);
    p.connect();
    p.run_until(Duration::from_secs(30), |p| p.client.is_closed());
    assert!(!p.client.is_closed() && !p.server().is_closed());
    assert!(p.client.stats().paths[0].packets_sent >= 10);
}

#[test]
fn close_reaches_the_peer_with_code_and_reason() {
    let mut p = Pair::default_pair(vec![Link::new(10, 10, 0.0), Link::new(10, 10, 0.0)]);
    p.connect();
    p.add_path(1, PathRole::Lte);
    let now = p.now;
    p.client.close(now, 7, b"bye");
    assert!(p.client.is_closed());
    assert_eq!(
        p.client.send_message(now, Bytes::from_static(b"x"), Reliability::Reliable),
        Err(SendError::Closed)
    );
    assert!(p.run_until(Duration::from_secs(1), |p| p.server().is_closed()));
    assert!(
        p.server_events.contains(&Event::Closed {
            reason: CloseReason::Peer { code: 7, reason: "bye".into() }
        })
    );
    assert!(p.client_events.contains(&Event::Closed { reason: CloseReason::Local }));
    // One CLOSE per path, then silence.
    p.flush();
    assert!(p.queue.is_empty());
}
