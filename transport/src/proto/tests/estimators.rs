//! Estimators: RTT, one-way delay under reordering, the receiver's in-order delay.

use std::sync::Arc;
use std::time::Duration;

use super::harness::*;
use crate::path::PathRole;
use crate::proto::{Config, Delivery, LossDetection, Reliability};
use crate::time::Instant;

#[test]
fn rtt_and_one_way_delay_estimates_match_the_link() {
    let mut p = Pair::default_pair(vec![Link::new(20, 100, 0.0), Link::new(50, 100, 0.0)]);
    p.connect();
    p.add_path(1, PathRole::Lte);
    bulk(&mut p, 500_000, 5_000, Duration::from_secs(20), |_| {});
    let s = p.server().stats();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    // RTT = 2 × delay + serialisation (+ up to 25 ms ACK delay, which is subtracted).
    assert!((ms(s.paths[0].min_rtt) - 40.0).abs() < 2.0, "{:?}", s.paths[0].min_rtt);
    assert!((ms(s.paths[1].min_rtt) - 100.0).abs() < 2.0, "{:?}", s.paths[1].min_rtt);
    assert!(ms(s.paths[0].srtt) < 60.0 && ms(s.paths[1].srtt) < 130.0);
    // Both ends share the simulated clock, so the one-way delay is the link delay plus
    // serialisation and queueing.
    assert!((ms(s.paths[0].owd_mean) - 20.0).abs() < 10.0, "{:?}", s.paths[0].owd_mean);
    assert!((ms(s.paths[1].owd_mean) - 50.0).abs() < 10.0, "{:?}", s.paths[1].owd_mean);
}

/// One path of 20 ms on which every third server → client datagram takes 30 ms longer
/// (reordering within the path); the server's mean one-way delay estimate and variance,
/// ms and ms², with the client putting `stamps` receive timestamps in each ACK.
fn owd_under_reordering(stamps: usize) -> (f64, f64) {
    let cfg = || {
        let mut c = Config::new(Arc::new(FixedWindow(200_000)), Arc::new(LowestRtt));
        c.ack_timestamps = stamps;
        // RFC 9002's packet threshold declares the late packets lost, so this also covers
        // the one-way delay of a packet whose ACK comes after its loss was declared.
        c.loss_detection = LossDetection::Rfc9002;
        c
    };
    let mut p = Pair::new(cfg(), cfg(), vec![Link::new(20, 20, 0.0)], 9);
    p.connect();
    let mut seen = p.seq;
    for i in 0..2000 {
        let now = p.now;
        p.server().send_message(now, message(i, 1000), Reliability::Reliable).expect("send");
        p.flush();
        let late: Vec<(Instant, u64)> =
            p.queue.iter().filter(|(k, d)| k.1 > seen && !d.to_server).map(|(k, _)| *k).collect();
        seen = p.seq;
        for k in late.into_iter().filter(|k| k.1 % 3 == 0) {
            if let Some(d) = p.queue.remove(&k) {
                p.queue.insert((k.0 + Duration::from_millis(30), k.1), d);
            }
        }
        p.run_until(Duration::from_millis(1), |_| false);
    }
    let s = p.server().stats();
    (s.paths[0].owd_mean.as_secs_f64() * 1e3, s.paths[0].owd_var_us2 / 1e6)
}

#[test]
fn timestamps_of_every_packet_measure_a_reordering_path_without_bias() {
    // True one-way delay: 20 ms + 0.4 ms serialisation, +30 ms for one packet in three:
    // mean ~30 ms, sd ~14 ms. The largest packet of an ACK is almost never a late one, so
    // one timestamp per ACK sees ~20 ms and almost no spread; the timestamps of every
    // packet since the last ACK, and late ACKs of packets already declared lost, see both.
    let (one, one_var) = owd_under_reordering(1);
    let (all, all_var) = owd_under_reordering(8);
    assert!(one < 25.0, "one timestamp: {one:.1} ms");
    assert!((all - 30.4).abs() < 5.0 && all_var > 50.0, "all: {all:.1} ms, var {all_var:.0}");
    assert!(all_var > 4.0 * one_var, "variance {one_var:.0} vs {all_var:.0} ms²");
}

#[test]
fn the_receivers_delay_estimate_follows_the_measured_delay() {
    // The receiver knows no send times: its estimate (first arrival less half the path's
    // minimum RTT, to deliverable in order) against the delay measured from each send, on
    // the lossy 20 ms path of `lossy_stream_delays` (no queueing: the estimate's blind
    // spot is left out).
    let cfg = || Config::new(Arc::new(FixedWindow(200_000)), Arc::new(LowestRtt));
    let mut p = Pair::new(cfg(), cfg(), vec![Link::new(20, 20, 0.05)], 11);
    p.connect();
    let mut sent = Vec::new();
    let mut delays = Vec::new();
    for i in 0..500u64 {
        let now = p.now;
        p.server().send_message(now, message(i, 500), Reliability::Reliable).expect("send");
        sent.push(now);
        p.run_until(Duration::from_millis(4), |p| {
            let now = p.now;
            while let Some(d) = p.client.read_message(now) {
                if let Delivery::Message { id, .. } = d {
                    delays.push((now - sent[id as usize]).as_micros() as u64);
                }
            }
            false
        });
    }
    p.run_until(Duration::from_secs(3), |p| {
        let now = p.now;
        while let Some(d) = p.client.read_message(now) {
            if let Delivery::Message { id, .. } = d {
                delays.push((now - sent[id as usize]).as_micros() as u64);
            }
        }
        false
    });
    let est = p.client.stats().in_order_delay_us;
    assert_eq!(est.len(), delays.len());
    let mean = |v: &[u64]| v.iter().sum::<u64>() as f64 / v.len() as f64 / 1000.0;
    let (m_est, m_true) = (mean(&est), mean(&delays));
    eprintln!("estimate {m_est:.1} ms, measured {m_true:.1} ms");
    assert!(m_true > 25.0, "losses add delay: {m_true}");
    assert!((m_est - m_true).abs() < 3.0 + 0.1 * m_true, "{m_est} vs {m_true}");
}
