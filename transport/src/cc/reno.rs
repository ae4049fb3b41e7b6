//! NewReno window control, uncoupled: each path runs its own Reno (RFC 5681, RFC 6582).
//!
//! Units: windows in bytes (see [`window`](super::window)). Per ACK in congestion avoidance
//! `cwnd += MSS·acked/cwnd` (RFC 5681 §3.1, the byte-counting form), which is about one MSS
//! per round trip; slow start, loss response and limits are those of
//! [`PathWindow`].
//!
//! With several paths this is the "uncoupled" baseline: each subflow is as aggressive as a
//! TCP flow, so n subflows through one bottleneck take about n shares.

use std::collections::BTreeMap;

use super::window::{AckPhase, PathWindow, WindowConfig};
use super::{Controller, ControllerFactory, RttSample};
use crate::path::PathId;
use crate::time::Instant;

/// Configuration of [`Reno`]; its own [`ControllerFactory`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RenoConfig {
    /// Initial, minimum and maximum window, growth rule.
    pub window: WindowConfig,
}

impl ControllerFactory for RenoConfig {
    fn build(&self) -> Box<dyn Controller> {
        Box::new(Reno::new(self.clone()))
    }
}

/// Uncoupled NewReno on every path of a connection.
#[derive(Clone, Debug)]
pub struct Reno {
    config: RenoConfig,
    paths: BTreeMap<PathId, PathWindow>,
}

impl Reno {
    /// A controller with no paths.
    pub fn new(config: RenoConfig) -> Self {
        Reno { config, paths: BTreeMap::new() }
    }

    /// The window state of `path`, if known.
    pub fn path(&self, path: PathId) -> Option<&PathWindow> {
        self.paths.get(&path)
    }
}

/// Reno's congestion-avoidance increase in bytes for `acked` bytes: `MSS·acked/cwnd`
/// (RFC 5681 §3.1).
pub fn reno_increase(mss: u64, cwnd: f64, acked: usize) -> f64 {
    mss as f64 * acked as f64 / cwnd
}

impl Controller for Reno {
    fn on_path_added(&mut self, now: Instant, path: PathId, mss: usize) {
        self.paths.insert(path, PathWindow::new(now, mss, &self.config.window));
    }

    fn on_path_removed(&mut self, path: PathId) {
        self.paths.remove(&path);
    }

    fn on_datagram_size(&mut self, path: PathId, mss: usize) {
        if let Some(w) = self.paths.get_mut(&path) {
            w.set_mss(mss);
        }
    }

    fn on_sent(&mut self, _now: Instant, path: PathId, _bytes: usize, in_flight: u64) {
        if let Some(w) = self.paths.get_mut(&path) {
            w.on_sent(in_flight);
        }
    }

    fn on_ack(&mut self, now: Instant, path: PathId, sent: Instant, bytes: usize, rtt: &RttSample) {
        let Some(w) = self.paths.get_mut(&path) else { return };
        if w.on_ack(now, sent, bytes, rtt.smoothed) == AckPhase::CongestionAvoidance {
            let inc = reno_increase(w.mss(), w.cwnd(), bytes);
            w.add(inc);
        }
    }

    fn on_congestion_event(&mut self, now: Instant, path: PathId, sent: Instant, persistent: bool) {
        if let Some(w) = self.paths.get_mut(&path) {
            w.on_congestion_event(now, sent, persistent);
        }
    }

    /// Bytes allowed in flight; 0 for a path never added.
    fn window(&self, path: PathId) -> u64 {
        self.paths.get(&path).map_or(0, PathWindow::window)
    }

    fn name(&self) -> &'static str {
        "reno"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::window::testkit::Sim;
    use std::time::Duration;

    const MSS: usize = 1200;

    fn t(ms: u64) -> Instant {
        Instant::from_micros(ms * 1000)
    }

    #[test]
    fn slow_start_doubles_the_window_every_round_trip() {
        let mut sim = Sim::new(&RenoConfig::default(), &[(0, 50)], MSS);
        assert_eq!(sim.window(0), 12_000);
        for k in 1..=5 {
            sim.round(0);
            assert_eq!(sim.window(0), 12_000 << k, "after {k} round trips");
        }
    }

    #[test]
    fn congestion_avoidance_grows_about_one_mss_per_round_trip() {
        let mut sim = Sim::new(&RenoConfig::default(), &[(0, 50)], MSS);
        for _ in 0..3 {
            sim.round(0);
        }
        sim.lose_oldest(0); // 96 000 → 48 000, ssthresh 48 000
        assert_eq!(sim.window(0), 48_000);
        // Recovery: packets sent up to the reduction (this driver sends at the very instant
        // of the reduction, so two rounds) do not grow the window.
        sim.round(0);
        sim.round(0);
        let start = sim.window(0);
        for _ in 0..10 {
            sim.round(0);
        }
        let per_rtt = (sim.window(0) - start) as f64 / 10.0;
        assert!((per_rtt - MSS as f64).abs() < 0.05 * MSS as f64, "grew {per_rtt} bytes per RTT");
    }

    #[test]
    fn loss_event_halves_the_window_and_sets_ssthresh() {
        let mut r = Reno::new(RenoConfig::default());
        r.on_path_added(t(0), PathId(0), MSS);
        r.on_congestion_event(t(10), PathId(0), t(5), false);
        assert_eq!(r.window(PathId(0)), 6_000);
        assert_eq!(r.path(PathId(0)).and_then(PathWindow::ssthresh), Some(6_000));
        assert!(!r.path(PathId(0)).is_some_and(PathWindow::in_slow_start));
    }

    #[test]
    fn halving_stops_at_two_mss() {
        let mut r = Reno::new(RenoConfig::default());
        r.on_path_added(t(0), PathId(0), MSS);
        for i in 1..20 {
            r.on_congestion_event(t(10 * i), PathId(0), t(10 * i - 1), false);
            assert!(r.window(PathId(0)) >= 2 * MSS as u64);
        }
        assert_eq!(r.window(PathId(0)), 2 * MSS as u64);
    }

    #[test]
    fn persistent_congestion_collapses_to_the_minimum_window_then_slow_starts() {
        let mut sim = Sim::new(&RenoConfig::default(), &[(0, 50)], MSS);
        sim.round(0);
        sim.round(0); // 48 000
        let now = sim.now;
        sim.ctrl.on_congestion_event(now, PathId(0), now, true);
        assert_eq!(sim.window(0), 2 * MSS as u64);
        // The lost packets are gone; ACK what is still in flight, then new data slow-starts.
        sim.paths[0].queue.clear();
        sim.paths[0].in_flight = 0;
        sim.now += Duration::from_millis(1);
        sim.fill(0);
        sim.round(0);
        assert_eq!(sim.window(0), 4 * MSS as u64);
    }

    #[test]
    fn acks_of_packets_sent_before_the_reduction_do_not_grow_the_window() {
        let mut sim = Sim::new(&RenoConfig::default(), &[(0, 50)], MSS);
        sim.lose_oldest(0);
        let after_loss = sim.window(0);
        // The other 9 packets of the first flight were sent before the reduction.
        for _ in 0..9 {
            sim.step();
        }
        assert_eq!(sim.window(0), after_loss);
    }

    #[test]
    fn paths_are_independent() {
        let mut sim = Sim::new(&RenoConfig::default(), &[(0, 20), (1, 80)], MSS);
        sim.lose_oldest(0);
        assert_eq!(sim.window(0), 6_000);
        assert_eq!(sim.window(1), 12_000);
    }

    #[test]
    fn unknown_and_removed_paths_have_no_window() {
        let mut r = Reno::new(RenoConfig::default());
        assert_eq!(r.window(PathId(7)), 0);
        r.on_path_added(t(0), PathId(7), MSS);
        r.on_path_removed(PathId(7));
        assert_eq!(r.window(PathId(7)), 0);
        // Events for unknown paths are ignored.
        let rtt = RttSample {
            latest: Duration::from_millis(1),
            smoothed: Duration::from_millis(1),
            min: Duration::from_millis(1),
        };
        r.on_ack(t(1), PathId(7), t(0), MSS, &rtt);
        r.on_congestion_event(t(1), PathId(7), t(0), true);
        assert_eq!(r.name(), "reno");
    }
}
