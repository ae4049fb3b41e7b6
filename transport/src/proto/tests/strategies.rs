//! Controllers and schedulers under the connection: the crate's own, copies, loss events.

use std::sync::Arc;
use std::time::Duration;

use super::harness::*;
use crate::cc::{Controller, ControllerFactory, RttSample};
use crate::path::{PathId, PathRole};
use crate::proto::{Config, Reliability};
use crate::sched::SchedulerFactory;
use crate::time::Instant;

#[test]
fn redundant_scheduling_sends_copies_and_delivers_once() {
    let scfg = Config::new(Arc::new(FixedWindow(40_000)), Arc::new(AllPaths));
    let mut p =
        Pair::new(config(), scfg, vec![Link::new(20, 10, 0.01), Link::new(25, 10, 0.01)], 9);
    p.connect();
    p.add_path(1, PathRole::Lte);
    bulk(&mut p, 500_000, 5_000, Duration::from_secs(30), |_| {});
    let s = p.server().stats();
    let (a, b) = (s.paths[0].data_bytes_sent, s.paths[1].data_bytes_sent);
    assert!(a > 450_000 && b > 450_000, "{a} {b}");
    assert!(p.client.stats().dropped.duplicate == 0);
}

fn goodput_mbps(
    controller: Arc<dyn ControllerFactory>,
    scheduler: Arc<dyn SchedulerFactory>,
    links: Vec<Link>,
    total: usize,
) -> f64 {
    let cfg = || Config::new(controller.clone(), scheduler.clone());
    let n = links.len();
    let mut p = Pair::new(cfg(), cfg(), links, 11);
    p.connect();
    for k in 1..n {
        p.add_path(k as u8, PathRole::Lte);
    }
    let start = p.now;
    bulk(&mut p, total, 10_000, Duration::from_secs(120), |_| {});
    total as f64 * 8.0 / (p.now - start).as_secs_f64() / 1e6
}

#[test]
fn lia_and_minrtt_aggregate_two_paths() {
    let g = goodput_mbps(
        Arc::new(crate::cc::lia::LiaConfig::default()),
        Arc::new(crate::sched::minrtt::MinRttConfig {}),
        vec![Link::new(20, 2, 0.0), Link::new(20, 8, 0.0)],
        5_000_000,
    );
    eprintln!("lia + minrtt over 2 + 8 Mbit/s: {g:.2} Mbit/s goodput");
    assert!(g > 8.5, "{g}");
}

#[test]
fn reno_over_one_path_fills_it() {
    let g = goodput_mbps(
        Arc::new(crate::cc::reno::RenoConfig::default()),
        Arc::new(crate::sched::minrtt::MinRttConfig {}),
        vec![Link::new(20, 8, 0.0)],
        4_000_000,
    );
    eprintln!("reno over 8 Mbit/s: {g:.2} Mbit/s goodput");
    assert!(g > 7.0, "{g}");
}

/// Counts controller calls (on top of a large fixed window).
#[derive(Debug, Clone, Default)]
struct Counting(Arc<std::sync::Mutex<(u64, u64, u64)>>); // (acks, loss events, persistent)

impl ControllerFactory for Counting {
    fn build(&self) -> Box<dyn Controller> {
        Box::new(self.clone())
    }
}

impl Controller for Counting {
    fn on_path_added(&mut self, _: Instant, _: PathId, _: usize) {}
    fn on_path_removed(&mut self, _: PathId) {}
    fn on_sent(&mut self, _: Instant, _: PathId, _: usize, _: u64) {}
    fn on_ack(&mut self, _: Instant, _: PathId, _: Instant, _: usize, _: &RttSample) {
        if let Ok(mut c) = self.0.lock() {
            c.0 += 1;
        }
    }
    fn on_congestion_event(&mut self, _: Instant, _: PathId, _: Instant, persistent: bool) {
        if let Ok(mut c) = self.0.lock() {
            c.1 += 1;
            c.2 += u64::from(persistent);
        }
    }
    fn window(&self, _: PathId) -> u64 {
        60_000
    }
    fn name(&self) -> &'static str {
        "counting"
    }
}

#[test]
fn a_burst_of_losses_is_one_congestion_event() {
    let counting = Counting::default();
    let scfg = Config::new(Arc::new(counting.clone()), Arc::new(LowestRtt));
    let mut p = Pair::new(config(), scfg, vec![Link::new(20, 100, 0.0)], 8);
    p.connect();
    // Let the server's acknowledgement of the client's Finished arrive first: dropped with
    // the flight, the client would send its Finished again and the server answer with a
    // PING, whose ACK would find the flight lost before the RTO does.
    p.run_until(Duration::from_millis(100), |_| false);
    let now = p.now;
    for i in 0..40 {
        p.server().send_message(now, message(i, 1000), Reliability::Reliable).unwrap();
    }
    // Drop a window's worth of consecutive packets, then let everything through.
    p.flush();
    p.queue.clear();
    let mut got = 0;
    assert!(p.run_until(Duration::from_secs(5), |p| {
        while p.client.read_message(p.now).is_some() {
            got += 1;
        }
        got == 40
    }));
    p.run_until(Duration::from_millis(500), |_| false);
    let (acks, events, persistent) = *counting.0.lock().unwrap();
    assert!(acks >= 34, "{acks}");
    assert_eq!((events, persistent), (1, 1), "the whole flight was lost: one RTO collapse");
    let lost = p.server().stats().lost_packets;
    assert!(lost >= 30, "{lost}");

    // A few scattered losses inside one flight: one (non-persistent) event.
    let now = p.now;
    for i in 40..80 {
        p.server().send_message(now, message(i, 1000), Reliability::Reliable).unwrap();
    }
    p.flush();
    let keys: Vec<_> = p.queue.keys().copied().collect();
    for k in keys.iter().skip(3).step_by(9).take(3) {
        p.queue.remove(k);
    }
    assert!(p.run_until(Duration::from_secs(5), |p| {
        while p.client.read_message(p.now).is_some() {
            got += 1;
        }
        got == 80
    }));
    p.run_until(Duration::from_millis(500), |_| false);
    let (_, events, persistent) = *counting.0.lock().unwrap();
    assert_eq!((events, persistent), (2, 1));
}
