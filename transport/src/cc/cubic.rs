//! CUBIC (RFC 9438), uncoupled: each path runs its own CUBIC window.
//!
//! Units: windows in bytes (see [`window`](super::window)); the RFC's formulas are in
//! segments, so the cubic term is scaled by the path's MSS. Slow start, the recovery
//! period (one reduction per loss event), growth only while the window limits sending,
//! and the window limits are those of [`PathWindow`].
//!
//! - Window growth (RFC 9438 §4.2): `W_cubic(t) = C·(t − K)³ + W_max` with C = 0.4
//!   segments/s³, `t` the time since the current congestion-avoidance stage began and
//!   `K = ∛((W_max − cwnd_epoch)/C)` (= `∛(W_max·(1 − β)/C)` right after a reduction). Per
//!   ACK the window moves toward `target = clamp(W_cubic(t + RTT), cwnd, 1.5·cwnd)` by
//!   `(target − cwnd)·acked/cwnd` (§4.4 concave, §4.5 convex region).
//! - Reno-friendly region (§4.3): `W_est` starts at `cwnd_epoch` and grows by
//!   `α·acked/cwnd` segments per ACK, `α = 3·(1 − β)/(1 + β)` until `W_est` reaches the
//!   window before the last reduction (`cwnd_prior`), then 1; while `W_cubic(t) < W_est` the
//!   window is `W_est`.
//! - Multiplicative decrease (§4.6): `ssthresh = cwnd = β·cwnd_prior`, β = 0.7, floored at
//!   the minimum window; the window before the reduction stands for the flight size.
//! - Fast convergence (§4.7): a loss below the previous `W_max` sets
//!   `W_max = cwnd·(1 + β)/2`, otherwise `W_max = cwnd`.
//! - Timeout (§4.8): `ssthresh = β·cwnd`, the window collapses to the minimum window
//!   (2 segments, as for every controller here: RFC 9002's kMinimumWindow; RFC 5681's loss
//!   window is 1) and a new congestion-avoidance stage starts after slow start.
//! - Application-limited and idle periods (§5.8): no growth while the window does not limit
//!   sending ([`PathWindow`]), and the time a path spent with nothing in flight does not
//!   count in `t` (the epoch start moves forward by the idle time, as Linux's
//!   `bictcp_cwnd_event` on `CA_EVENT_TX_START` \[recalled\]).
//! - Slow start is standard (RFC 5681); HyStart++ (RFC 9406), which §4.10 allows, is not
//!   used (docs/ALGORITHMS.md).
//! - Optional, off by default ([`CubicConfig::slow_start_exit_beta`]; on in the `mptcp-qoe`
//!   profiles): a loss that ends slow start while the smoothed RTT stands above the minimum
//!   by more than HyStart++'s delay threshold (RFC 9406 §4.2: a queue built up, so the
//!   window overshot) reduces by its own factor instead of β. A deviation from §4.6,
//!   documented with its ablation (`mptcp-qoe+cubic`) in docs/ALGORITHMS.md ("QoE-driven
//!   re-injection"): slow start ends up to one doubling past the path's capacity, 0.7 of
//!   that keeps the bottleneck queue full, and the fast retransmissions of the lost data
//!   are dropped a second time.

use std::collections::BTreeMap;
use std::time::Duration;

use super::window::{AckPhase, PathWindow, WindowConfig};
use super::{Controller, ControllerFactory, RttSample};
use crate::path::PathId;
use crate::time::Instant;

/// RFC 9438 §5.1 C = 0.4 \[source\], segments per second³.
pub const C: f64 = 0.4;
/// RFC 9438 §4.6 β_cubic = 0.7 \[source\].
pub const BETA: f64 = 0.7;

/// Configuration of [`Cubic`]; its own [`ControllerFactory`].
#[derive(Clone, Debug, PartialEq)]
pub struct CubicConfig {
    /// Initial, minimum and maximum window, growth rule.
    pub window: WindowConfig,
    /// Fast convergence (RFC 9438 §4.7). Default on.
    pub fast_convergence: bool,
    /// The multiplicative-decrease factor of a congestion event that ends slow start with a
    /// queue built up (smoothed RTT above the minimum by HyStart++'s delay threshold;
    /// `None`: β, as RFC 9438 §4.6). Default `None`; the `mptcp-qoe` profiles use
    /// [`SLOW_START_EXIT_BETA`] (a deviation, see the module documentation).
    pub slow_start_exit_beta: Option<f64>,
}

/// The factor the `mptcp-qoe` profiles use for the reduction that ends slow start: Reno's
/// 0.5 (RFC 5681), which brings a window that overshot by up to one doubling back to about
/// the path's capacity.
pub const SLOW_START_EXIT_BETA: f64 = 0.5;

impl Default for CubicConfig {
    fn default() -> Self {
        CubicConfig {
            window: WindowConfig::default(),
            fast_convergence: true,
            slow_start_exit_beta: None,
        }
    }
}

impl ControllerFactory for CubicConfig {
    fn build(&self) -> Box<dyn Controller> {
        Box::new(Cubic::new(self.clone()))
    }
}

/// One path's CUBIC state.
#[derive(Clone, Debug)]
pub struct CubicPath {
    window: PathWindow,
    /// W_max, bytes (0 before the first loss event).
    w_max: f64,
    /// The window just before the last reduction, bytes.
    cwnd_prior: f64,
    /// Start of the current congestion-avoidance stage.
    epoch_start: Option<Instant>,
    /// K, seconds.
    k: f64,
    /// W_est, bytes.
    w_est: f64,
    /// When the path last sent.
    last_sent: Option<Instant>,
    /// The latest ACK's RTT sample (the slow-start exit rule reads its smoothed and
    /// minimum RTT).
    rtt: Option<RttSample>,
}

impl CubicPath {
    /// The shared window state.
    pub fn window(&self) -> &PathWindow {
        &self.window
    }

    /// W_max in bytes (0 before the first loss event).
    pub fn w_max(&self) -> f64 {
        self.w_max
    }

    /// K in seconds of the current congestion-avoidance stage (0 before one began).
    pub fn k(&self) -> f64 {
        self.k
    }

    /// W_est in bytes, the Reno-friendly estimate (RFC 9438 §4.3).
    pub fn w_est(&self) -> f64 {
        self.w_est
    }

    /// `W_cubic(t)` in bytes, `t` seconds into the stage (RFC 9438 eq. 1).
    fn w_cubic(&self, t: f64) -> f64 {
        let d = t - self.k;
        self.window.mss() as f64 * C * d * d * d + self.w_max
    }

    /// Whether the smoothed RTT stands above the minimum by more than HyStart++'s delay
    /// threshold, `clamp(min/8, 4 ms, 16 ms)` (RFC 9406 §4.2 \[source\]): a queue built up.
    fn queue_built(&self) -> bool {
        self.rtt.is_some_and(|r| {
            let thresh = (r.min / 8).clamp(Duration::from_millis(4), Duration::from_millis(16));
            r.smoothed > r.min + thresh
        })
    }

    fn on_ack(&mut self, now: Instant, sent: Instant, bytes: usize, rtt: &RttSample) {
        self.rtt = Some(*rtt);
        if self.window.on_ack(now, sent, bytes, rtt.smoothed) != AckPhase::CongestionAvoidance {
            return;
        }
        let mss = self.window.mss() as f64;
        let cwnd = self.window.cwnd();
        let epoch = match self.epoch_start {
            Some(e) => e,
            None => {
                // §4.2: a new stage; K from W_max and the window it starts with.
                self.epoch_start = Some(now);
                if self.w_max > cwnd {
                    self.k = ((self.w_max - cwnd) / mss / C).cbrt();
                } else {
                    self.k = 0.0;
                    self.w_max = cwnd;
                }
                self.w_est = cwnd;
                now
            }
        };
        let t = now.saturating_duration_since(epoch).as_secs_f64();
        // §4.3: the Reno-friendly estimate.
        let alpha =
            if self.w_est >= self.cwnd_prior { 1.0 } else { 3.0 * (1.0 - BETA) / (1.0 + BETA) };
        self.w_est += alpha * mss * bytes as f64 / cwnd;
        if self.w_cubic(t) < self.w_est {
            self.window.add((self.w_est - cwnd).max(0.0));
            return;
        }
        // §4.4/§4.5: toward W_cubic one RTT ahead, at most 1.5·cwnd.
        let target = self.w_cubic(t + rtt.smoothed.as_secs_f64()).clamp(cwnd, 1.5 * cwnd);
        self.window.add((target - cwnd) * bytes as f64 / cwnd);
    }

    fn on_congestion_event(
        &mut self,
        now: Instant,
        sent: Instant,
        persistent: bool,
        fast_convergence: bool,
        slow_start_exit_beta: Option<f64>,
    ) {
        let already = self.window.in_recovery(sent);
        if already && !persistent {
            return;
        }
        let prior = self.window.cwnd();
        let beta = match slow_start_exit_beta {
            Some(b) if !persistent && self.window.in_slow_start() && self.queue_built() => b,
            _ => BETA,
        };
        self.window.on_congestion_event(now, sent, persistent);
        self.epoch_start = None;
        if already {
            // An RTO inside a recovery period: the reduction already happened.
            self.window.set_window(0, None);
            return;
        }
        // §4.7 fast convergence, §4.6 multiplicative decrease.
        self.w_max =
            if fast_convergence && prior < self.w_max { prior * (1.0 + BETA) / 2.0 } else { prior };
        self.cwnd_prior = prior;
        let ssthresh = (prior * beta) as u64;
        let cwnd = if persistent { 0 } else { ssthresh };
        self.window.set_window(cwnd, Some(ssthresh));
    }

    fn on_sent(&mut self, now: Instant, bytes: usize, in_flight: u64) {
        if in_flight <= bytes as u64
            && let (Some(e), Some(last)) = (self.epoch_start, self.last_sent)
        {
            // §5.8: the idle time does not count in t.
            let idle = now.saturating_duration_since(last);
            self.epoch_start = Some((e + idle).min(now));
        }
        self.last_sent = Some(now);
        self.window.on_sent(in_flight);
    }
}

/// Uncoupled CUBIC on every path of a connection.
#[derive(Clone, Debug)]
pub struct Cubic {
    config: CubicConfig,
    paths: BTreeMap<PathId, CubicPath>,
}

impl Cubic {
    /// A controller with no paths.
    pub fn new(config: CubicConfig) -> Self {
        Cubic { config, paths: BTreeMap::new() }
    }

    /// The state of `path`, if known.
    pub fn path(&self, path: PathId) -> Option<&CubicPath> {
        self.paths.get(&path)
    }

    /// The window state of `path`, if known.
    pub fn path_window(&self, path: PathId) -> Option<&PathWindow> {
        self.paths.get(&path).map(CubicPath::window)
    }
}

impl Controller for Cubic {
    fn on_path_added(&mut self, now: Instant, path: PathId, mss: usize) {
        let window = PathWindow::new(now, mss, &self.config.window);
        self.paths.insert(
            path,
            CubicPath {
                window,
                w_max: 0.0,
                cwnd_prior: 0.0,
                epoch_start: None,
                k: 0.0,
                w_est: 0.0,
                last_sent: None,
                rtt: None,
            },
        );
    }

    fn on_path_removed(&mut self, path: PathId) {
        self.paths.remove(&path);
    }

    fn on_datagram_size(&mut self, path: PathId, mss: usize) {
        if let Some(p) = self.paths.get_mut(&path) {
            p.window.set_mss(mss);
        }
    }

    fn on_sent(&mut self, now: Instant, path: PathId, bytes: usize, in_flight: u64) {
        if let Some(p) = self.paths.get_mut(&path) {
            p.on_sent(now, bytes, in_flight);
        }
    }

    fn on_ack(&mut self, now: Instant, path: PathId, sent: Instant, bytes: usize, rtt: &RttSample) {
        if let Some(p) = self.paths.get_mut(&path) {
            p.on_ack(now, sent, bytes, rtt);
        }
    }

    fn on_congestion_event(&mut self, now: Instant, path: PathId, sent: Instant, persistent: bool) {
        let (fc, ss_beta) = (self.config.fast_convergence, self.config.slow_start_exit_beta);
        if let Some(p) = self.paths.get_mut(&path) {
            p.on_congestion_event(now, sent, persistent, fc, ss_beta);
        }
    }

    /// Bytes allowed in flight; 0 for a path never added.
    fn window(&self, path: PathId) -> u64 {
        self.paths.get(&path).map_or(0, |p| p.window.window())
    }

    fn name(&self) -> &'static str {
        "cubic"
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use proptest::prelude::*;

    use super::*;
    use crate::cc::reno::reno_increase;
    use crate::cc::window::testkit::{Bottleneck, Sim};

    const MSS: usize = 1200;

    fn t(ms: u64) -> Instant {
        Instant::from_micros(ms * 1000)
    }

    #[test]
    fn loss_reduces_by_beta_and_sets_k() {
        let mut sim = Sim::new(&CubicConfig::default(), &[(0, 50)], MSS);
        for _ in 0..3 {
            sim.round(0);
        }
        assert_eq!(sim.window(0), 96_000);
        sim.lose_oldest(0);
        assert_eq!(sim.window(0), 67_200, "β = 0.7");
        let mut c = Cubic::new(CubicConfig::default());
        c.on_path_added(t(0), PathId(0), MSS);
        for i in 0..3u64 {
            c.on_sent(t(i), PathId(0), MSS, 12_000);
        }
        c.on_congestion_event(t(10), PathId(0), t(1), false);
        assert_eq!(c.window(PathId(0)), 8_400);
        let rtt = RttSample {
            latest: Duration::from_millis(50),
            smoothed: Duration::from_millis(50),
            min: Duration::from_millis(50),
        };
        for i in 0..7u64 {
            c.on_sent(t(11 + i), PathId(0), MSS, (i + 1) * MSS as u64);
        }
        c.on_ack(t(60), PathId(0), t(11), MSS, &rtt);
        let p = c.path(PathId(0)).expect("path");
        assert!((p.k() - (10.0 * 0.3 / 0.4f64).cbrt()).abs() < 1e-9, "K = {}", p.k());
        assert!((p.w_max() - 12_000.0).abs() < 1e-9);
    }

    #[test]
    fn the_slow_start_exit_factor_applies_only_to_a_loss_ending_slow_start_over_a_queue() {
        let cfg = CubicConfig { slow_start_exit_beta: Some(0.5), ..CubicConfig::default() };
        let ms = Duration::from_millis;
        // Ten segments sent and acknowledged in slow start with `smoothed` against a 40-ms
        // minimum, then a loss (optionally a timeout): the new ssthresh.
        let run = |smoothed: u64, persistent: bool, ss_exit: bool| {
            let mut c = Cubic::new(cfg.clone());
            c.on_path_added(t(0), PathId(0), MSS);
            let rtt = RttSample { latest: ms(smoothed), smoothed: ms(smoothed), min: ms(40) };
            for i in 0..10u64 {
                c.on_sent(t(i), PathId(0), MSS, (i + 1) * MSS as u64);
            }
            for i in 0..10u64 {
                c.on_ack(t(100 + i), PathId(0), t(i), MSS, &rtt);
            }
            if !ss_exit {
                // A first loss ends slow start; the next one is in congestion avoidance.
                c.on_congestion_event(t(200), PathId(0), t(5), false);
                for i in 0..10u64 {
                    c.on_sent(t(300 + i), PathId(0), MSS, (i + 1) * MSS as u64);
                }
                c.on_ack(t(400), PathId(0), t(300), MSS, &rtt);
            }
            let before = c.path(PathId(0)).map_or(0.0, |p| p.window().cwnd());
            c.on_congestion_event(t(500), PathId(0), t(450), persistent);
            let ss = c.path(PathId(0)).and_then(|p| p.window().ssthresh()).unwrap_or(0);
            (before, ss)
        };
        // 20 segments after ten acknowledged in slow start.
        let (w, ss) = run(100, false, true);
        assert_eq!((w, ss), (24_000.0, 12_000), "a queue of 60 ms: halved");
        let (w, ss) = run(42, false, true);
        assert_eq!((w, ss), (24_000.0, 16_800), "2 ms above the minimum (< 5 ms): beta");
        let (w, ss) = run(100, true, true);
        assert_eq!(ss, (w * BETA) as u64, "a timeout: beta (section 4.8)");
        let (w, ss) = run(100, false, false);
        assert_eq!(ss, (w * BETA) as u64, "in congestion avoidance: beta");
    }

    #[test]
    fn window_follows_the_cubic_curve_and_regains_w_max_after_k() {
        // 100 ms RTT, one loss at a 120-segment window; after about K seconds the window is
        // back at W_max (the plateau), then grows convexly past it.
        let mut sim = Sim::new(&CubicConfig::default(), &[(0, 100)], MSS);
        while sim.window(0) < 120 * MSS as u64 {
            sim.round(0);
        }
        let w_max = sim.window(0) as f64;
        sim.lose_oldest(0);
        let start = sim.now;
        let k = (w_max / MSS as f64 * (1.0 - BETA) / C).cbrt();
        sim.run_until(start + Duration::from_secs_f64(k));
        let at_k = sim.window(0) as f64;
        assert!((at_k - w_max).abs() < 0.1 * w_max, "at K: {at_k} vs W_max {w_max}");
        sim.run_until(start + Duration::from_secs_f64(k + 3.0));
        let later = sim.window(0) as f64;
        // Convex: C·3³ = 10.8 segments above W_max after 3 s more, at least.
        assert!(later > w_max + 8.0 * MSS as f64, "past K: {later}");
    }

    #[test]
    fn fast_convergence_lowers_w_max_on_a_loss_below_it() {
        let mut c = Cubic::new(CubicConfig::default());
        c.on_path_added(t(0), PathId(0), MSS);
        c.on_congestion_event(t(10), PathId(0), t(5), false); // W_max 12 000, cwnd 8 400
        c.on_congestion_event(t(20), PathId(0), t(15), false); // below W_max
        let p = c.path(PathId(0)).expect("path");
        assert!((p.w_max() - 8_400.0 * 1.7 / 2.0).abs() < 1e-6, "W_max {}", p.w_max());
        let mut off = Cubic::new(CubicConfig { fast_convergence: false, ..Default::default() });
        off.on_path_added(t(0), PathId(0), MSS);
        off.on_congestion_event(t(10), PathId(0), t(5), false);
        off.on_congestion_event(t(20), PathId(0), t(15), false);
        assert!((off.path(PathId(0)).expect("path").w_max() - 8_400.0).abs() < 1e-6);
    }

    #[test]
    fn timeout_collapses_to_the_minimum_window_with_beta_ssthresh() {
        let mut c = Cubic::new(CubicConfig::default());
        c.on_path_added(t(0), PathId(0), MSS);
        c.on_congestion_event(t(10), PathId(0), t(5), true);
        assert_eq!(c.window(PathId(0)), 2 * MSS as u64);
        let w = c.path_window(PathId(0)).expect("path");
        assert_eq!(w.ssthresh(), Some(8_400));
        assert_eq!(c.name(), "cubic");
    }

    #[test]
    fn idle_time_does_not_count_in_the_epoch() {
        let mut c = Cubic::new(CubicConfig::default());
        c.on_path_added(t(0), PathId(0), MSS);
        c.on_sent(t(0), PathId(0), MSS, MSS as u64);
        c.on_congestion_event(t(10), PathId(0), t(0), false);
        let rtt = RttSample {
            latest: Duration::from_millis(10),
            smoothed: Duration::from_millis(10),
            min: Duration::from_millis(10),
        };
        for i in 0..7u64 {
            c.on_sent(t(11), PathId(0), MSS, (i + 1) * MSS as u64);
        }
        c.on_ack(t(21), PathId(0), t(11), MSS, &rtt); // the stage starts at 21 ms
        let start = c.path(PathId(0)).and_then(|p| p.epoch_start);
        // Everything acknowledged, then 10 s idle, then a send.
        c.on_sent(t(10_021), PathId(0), MSS, MSS as u64);
        let moved = c.path(PathId(0)).and_then(|p| p.epoch_start);
        assert_eq!(start, Some(t(21)));
        assert_eq!(moved, Some(t(10_021)));
    }

    #[test]
    fn cubic_takes_a_fair_share_against_itself() {
        let mut b = Bottleneck::new(10_000_000, 60_000, 40, MSS, 7);
        b.add_flow(&CubicConfig::default(), 1);
        b.add_flow(&CubicConfig::default(), 1);
        b.run(t(60_000), t(10_000));
        let (x, y) = (b.delivered(0) as f64, b.delivered(1) as f64);
        let total = x + y;
        assert!(total > 0.8 * 10e6 / 8.0 * 50.0, "uses the link: {total}");
        assert!((x / total - 0.5).abs() < 0.15, "shares {x} / {y}");
    }

    #[derive(Clone, Debug)]
    enum Ev {
        Send(usize, u8),
        Ack(usize),
        Lose(usize),
        Persistent(usize),
        Advance(u16),
    }

    fn scenario() -> impl Strategy<Value = (Vec<(usize, u64)>, Vec<Ev>)> {
        prop::collection::vec((500usize..=1500, 1u64..400), 1..=3).prop_flat_map(|specs| {
            let n = specs.len();
            let ev = prop_oneof![
                4 => (0..n, 1u8..40).prop_map(|(p, k)| Ev::Send(p, k)),
                8 => (0..n).prop_map(Ev::Ack),
                1 => (0..n).prop_map(Ev::Lose),
                1 => (0..n).prop_map(Ev::Persistent),
                3 => (0u16..2000).prop_map(Ev::Advance),
            ];
            (Just(specs), prop::collection::vec(ev, 1..400))
        })
    }

    /// Runs the events against a fresh CUBIC, checking after each one: the window stays in
    /// [2·MSS, max]; an ACK grows it by at most acked/2 (the target
    /// is at most 1.5·cwnd) or to W_est, which grows no faster than Reno; a loss event leaves
    /// max(β·prior, 2·MSS); paths are independent. Returns the final windows.
    fn run(specs: &[(usize, u64)], events: &[Ev]) -> Result<Vec<u64>, TestCaseError> {
        let mut c = Cubic::new(CubicConfig::default());
        let mut now = Instant::ZERO;
        let mut queues: Vec<std::collections::VecDeque<Instant>> = vec![Default::default(); 3];
        let mut in_flight = [0u64; 3];
        for (i, &(mss, _)) in specs.iter().enumerate() {
            c.on_path_added(now, PathId(i as u32), mss);
        }
        for e in events {
            let before: Vec<u64> = (0..specs.len()).map(|i| c.window(PathId(i as u32))).collect();
            let touched = match *e {
                Ev::Send(p, n) => {
                    for _ in 0..n {
                        let mss = specs[p].0;
                        if in_flight[p] + mss as u64 > c.window(PathId(p as u32)) {
                            break;
                        }
                        in_flight[p] += mss as u64;
                        queues[p].push_back(now);
                        c.on_sent(now, PathId(p as u32), mss, in_flight[p]);
                    }
                    Some(p)
                }
                Ev::Ack(p) => {
                    let Some(sent) = queues[p].pop_front() else { continue };
                    let mss = specs[p].0;
                    in_flight[p] -= mss as u64;
                    let srtt = Duration::from_millis(specs[p].1);
                    let rtt = RttSample { latest: now - sent, smoothed: srtt, min: srtt };
                    let id = PathId(p as u32);
                    let cwnd = c.path_window(id).map_or(0.0, PathWindow::cwnd);
                    let slow = c.path_window(id).is_some_and(PathWindow::in_slow_start);
                    let est = c.path(id).map_or(0.0, CubicPath::w_est);
                    c.on_ack(now, id, sent, mss, &rtt);
                    let after = c.path_window(id).map_or(0.0, PathWindow::cwnd);
                    let est_after = c.path(id).map_or(0.0, CubicPath::w_est);
                    let reno = reno_increase(mss as u64, cwnd, mss);
                    // W_est grows at most like Reno (α ≤ 1), or starts a new stage at cwnd.
                    prop_assert!(
                        est_after <= est + reno + 1e-6 || (est_after - cwnd).abs() < reno + 1e-6,
                        "W_est {est} → {est_after}"
                    );
                    // Slow start: + acked; otherwise toward a target ≤ 1.5·cwnd, or W_est.
                    let bound = if slow {
                        cwnd + mss as f64
                    } else {
                        (cwnd + mss as f64 / 2.0).max(est_after)
                    };
                    prop_assert!(after <= bound + 1e-6, "ACK grew {cwnd} to {after}");
                    Some(p)
                }
                Ev::Lose(p) => {
                    let Some(sent) = queues[p].pop_front() else { continue };
                    in_flight[p] -= specs[p].0 as u64;
                    let prior = c.window(PathId(p as u32));
                    let reduced =
                        !c.path_window(PathId(p as u32)).is_some_and(|w| w.in_recovery(sent));
                    c.on_congestion_event(now, PathId(p as u32), sent, false);
                    let w = c.window(PathId(p as u32));
                    if reduced {
                        let want = ((prior as f64 * BETA) as u64).max(2 * specs[p].0 as u64);
                        prop_assert!(w.abs_diff(want) <= 1, "loss: {prior} → {w}, want {want}");
                    } else {
                        prop_assert_eq!(w, prior, "one reduction per recovery period");
                    }
                    Some(p)
                }
                Ev::Persistent(p) => {
                    let sent = queues[p].back().copied().unwrap_or(now);
                    queues[p].clear();
                    in_flight[p] = 0;
                    c.on_congestion_event(now, PathId(p as u32), sent, true);
                    prop_assert_eq!(c.window(PathId(p as u32)), 2 * specs[p].0 as u64);
                    Some(p)
                }
                Ev::Advance(ms) => {
                    now += Duration::from_millis(ms as u64);
                    None
                }
            };
            for (i, &(mss, _)) in specs.iter().enumerate() {
                let w = c.window(PathId(i as u32));
                prop_assert!(w >= 2 * mss as u64 && w <= 1 << 30, "path {i}: {w}");
                if touched != Some(i) {
                    prop_assert_eq!(w, before[i], "path {} changed by another path's event", i);
                }
            }
        }
        Ok((0..specs.len()).map(|i| c.window(PathId(i as u32))).collect())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn cubic_keeps_its_invariants((specs, events) in scenario()) {
            let a = run(&specs, &events)?;
            let b = run(&specs, &events)?;
            prop_assert_eq!(a, b, "same events, same windows");
        }
    }
}
