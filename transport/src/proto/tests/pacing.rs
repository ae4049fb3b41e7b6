//! Pacing at the controller's rate, with exact and with late timers.

use std::sync::Arc;
use std::time::Duration;

use super::harness::*;
use crate::proto::{Config, Reliability};

#[test]
fn pacing_spreads_packets_at_the_controller_rate() {
    paced_rate_with_timers_late_by(Duration::ZERO);
}

/// A driver whose timers fire late (tokio's by up to a millisecond or more) still sends at
/// the pacing rate: the path goes on from its deadline, not from the late wake-up. Without
/// that (the catch-up set to 0), this pair sent 119 900 B/s.
#[test]
fn late_timers_do_not_lower_the_paced_rate() {
    paced_rate_with_timers_late_by(Duration::from_micros(1_500));
}

fn paced_rate_with_timers_late_by(late: Duration) {
    // 125 000 B/s = 1 Mbit/s, with a window far above the bandwidth-delay product.
    let scfg = Config::new(Arc::new(Paced), Arc::new(LowestRtt));
    let mut p = Pair::new(config(), scfg, vec![Link::new(10, 100, 0.0)], 6);
    p.connect();
    p.timer_late = late;
    let start = p.now;
    let now = p.now;
    for i in 0..100 {
        p.server().send_message(now, message(i, 10_000), Reliability::Reliable).unwrap();
    }
    p.run_until(Duration::from_secs(2), |p| {
        while p.client.read_message(p.now).is_some() {}
        false
    });
    let sent = p.server().stats().paths[0].bytes_sent;
    let secs = (p.now - start).as_secs_f64();
    let rate = sent as f64 / secs;
    assert!((rate - 125_000.0).abs() < 4_000.0, "{rate} B/s with timers {late:?} late");
}
