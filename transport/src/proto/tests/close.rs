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
