//! Flow control and the reader: the receive window and the reported read rate.

use std::time::Duration;

use super::harness::*;
use crate::proto::{Reliability, SendError};

#[test]
fn reader_that_never_reads_stalls_the_sender_at_the_window() {
    let mut cc = config();
    cc.recv_buffer_bytes = 64 * 1024;
    let mut p = Pair::new(cc, config(), vec![Link::new(10, 10, 0.0)], 3);
    p.connect();
    let mut sent = 0u64;
    let mut blocked = false;
    p.run_until(Duration::from_secs(3), |p| {
        let now = p.now;
        loop {
            match p.server().send_message(now, message(sent, 1000), Reliability::Reliable) {
                Ok(_) => sent += 1,
                Err(SendError::Blocked) => {
                    blocked = true;
                    break;
                }
                Err(e) => panic!("{e}"),
            }
        }
        assert!(p.client.recv_buffered() <= 64 * 1024);
        false
    });
    assert!(blocked);
    assert_eq!(sent, 65); // 65 × 1000 ≤ 65536 < 66 × 1000
    assert_eq!(p.server().send_capacity(), 536);
    assert!(p.client.recv_buffered() <= 64 * 1024);
    assert_eq!(p.client.stats().dropped.out_of_window, 0);
    // The reader wakes up: the window reopens and the sender continues.
    let mut read = 0;
    assert!(
        p.run_until(Duration::from_secs(5), |p| {
            while p.client.read_message(p.now).is_some() {
                read += 1;
            }
            read == 65 && p.server().send_capacity() > 60_000
        }),
        "{} {}\n{}\n{}",
        read,
        p.server().send_capacity(),
        p.client.debug_timers(),
        p.server().debug_timers()
    );
}

#[test]
fn read_rate_is_measured_and_reported_to_the_peer() {
    let mut p = Pair::default_pair(vec![Link::new(10, 10, 0.0)]);
    p.connect();
    let mut next_read = p.now;
    let mut sent = 0u64;
    p.run_until(Duration::from_secs(3), |p| {
        let now = p.now;
        while p.server().send_capacity() > 500_000 {
            p.server().send_message(now, message(sent, 1250), Reliability::Reliable).unwrap();
            sent += 1;
        }
        // 1250 bytes every 10 ms = 1 Mbit/s.
        while now >= next_read {
            if p.client.read_message(now).is_some() {
                next_read += Duration::from_millis(10);
            } else {
                break;
            }
        }
        false
    });
    let local = p.client.read_rate_bps();
    let reported = p.server().peer_read_rate_bps().expect("READ_RATE received");
    assert!((local - 1e6).abs() < 0.1e6, "measured {local}");
    assert!((reported - 1e6).abs() < 0.1e6, "reported {reported}");
}
