//! OLIA, the Opportunistic Linked Increases Algorithm (Khalili, Gast, Popovic, Le Boudec,
//! CoNEXT 2012) \[source: multipath-tcp/mptcp `net/mptcp/mptcp_olia.c`\].
//!
//! In packets, per ACK of one packet on path r in congestion avoidance:
//! ```text
//! w_r += (w_r / rtt_r²) / (Σ_p w_p / rtt_p)²  +  α_r / w_r
//! α_r = +1 / (|P|·|B\M|)   if r ∈ B\M
//!       −1 / (|P|·|M|)     if r ∈ M and B\M ≠ ∅
//!        0                 otherwise
//! M = paths with the largest window
//! B = paths with the largest l_r / rtt_r²,  l_r = max(bytes acknowledged since the last
//!     loss, bytes acknowledged between the last two losses)
//! ```
//! The first term couples the paths (the aggregate grows like one TCP flow on the best
//! path); the α term moves window from the paths that have the most to the paths that
//! look best but are not yet used fully, and sums to zero over the paths.
//!
//! **Units.** Windows are kept in bytes ([`PathWindow`]); OLIA's `w_p` is that divided by
//! the path's MSS (fractional packets); `rtt_p` is the smoothed RTT in seconds. An ACK of
//! `acked` bytes is `acked/MSS_r` packets, each worth the bracket above in packets, i.e.
//! `acked × bracket` **bytes** — with one path this is exactly Reno's `MSS·acked/cwnd`.
//! `l_r` is in bytes and compared with `rtt_r` in microseconds using exact integer
//! arithmetic, as the Linux code does, so ties (which decide the sets) are exact. As in
//! Linux, the window compared for M is the whole number of packets, and only paths with an
//! RTT sample take part (`mptcp_olia_sk_can_send`); the inter-loss counters advance on loss
//! events other than persistent congestion (Linux skips RTO retransmissions).
//!
//! A negative α can shrink a window; it never goes below the minimum window. Slow start,
//! the loss response (halving) and the limits are Reno's ([`PathWindow`]).

use std::collections::BTreeMap;

use super::window::{AckPhase, PathWindow, WindowConfig};
use super::{Controller, ControllerFactory, RttSample};
use crate::path::PathId;
use crate::time::Instant;

/// Configuration of [`Olia`]; its own [`ControllerFactory`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OliaConfig {
    /// Initial, minimum and maximum window, growth rule (per path).
    pub window: WindowConfig,
}

impl ControllerFactory for OliaConfig {
    fn build(&self) -> Box<dyn Controller> {
        Box::new(Olia::new(self.clone()))
    }
    fn kind(&self) -> super::Kind {
        super::Kind::Coupled
    }
}

#[derive(Clone, Debug)]
struct OliaPath {
    w: PathWindow,
    /// Acknowledged-byte counts at the second-to-last loss, the last loss, and now
    /// (Linux `mptcp_loss1..3`, which hold `snd_una`).
    loss1: u64,
    loss2: u64,
    loss3: u64,
}

impl OliaPath {
    /// `l_r`: bytes between losses, bytes.
    fn inter_loss_bytes(&self) -> u64 {
        self.loss3.saturating_sub(self.loss2).max(self.loss2.saturating_sub(self.loss1))
    }
}

/// One path as OLIA's set computation sees it (input of [`olia_alphas`]).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct OliaPathInfo {
    /// The window in whole packets (for the set M).
    pub window_packets: u64,
    /// `l_r`, bytes between losses.
    pub inter_loss_bytes: u64,
    /// Smoothed RTT, microseconds (0 counts as 1).
    pub rtt_micros: u64,
}

/// OLIA's `α_r` for every path (same order as `paths`), from the sets M and B.
pub fn olia_alphas(paths: &[OliaPathInfo]) -> Vec<f64> {
    (0..paths.len()).map(|i| olia_alpha(paths, i)).collect()
}

/// OLIA's `α` of `paths[index]` (0 when `index` is out of range).
pub fn olia_alpha(paths: &[OliaPathInfo], index: usize) -> f64 {
    let Some(me) = paths.get(index) else { return 0.0 };
    // rtt² in µs², with rtt capped at u32::MAX µs (71 min) so l·rtt² fits in u128.
    let rtt2 = |p: &OliaPathInfo| {
        let r = p.rtt_micros.clamp(1, u32::MAX as u64) as u128;
        r * r
    };
    let max_window = paths.iter().map(|p| p.window_packets).max().unwrap_or(0);
    // Best l/rtt², compared by cross-multiplication (Linux mptcp_get_epsilon).
    let (mut best_l, mut best_rtt2) = (0u128, 1u128);
    for p in paths {
        let (l, r2) = (p.inter_loss_bytes as u128, rtt2(p));
        if l * best_rtt2 >= best_l * r2 {
            best_l = l;
            best_rtt2 = r2;
        }
    }
    let in_b = |p: &OliaPathInfo| p.inter_loss_bytes as u128 * best_rtt2 == best_l * rtt2(p);
    let in_m = |p: &OliaPathInfo| p.window_packets == max_window;
    let b_not_m = paths.iter().filter(|p| in_b(p) && !in_m(p)).count();
    let n = paths.len() as f64;
    if b_not_m == 0 {
        0.0
    } else if in_b(me) && !in_m(me) {
        1.0 / (n * b_not_m as f64)
    } else if in_m(me) {
        let m = paths.iter().filter(|p| in_m(p)).count();
        -1.0 / (n * m as f64)
    } else {
        0.0
    }
}

/// OLIA coupled congestion control over every path of a connection.
#[derive(Clone, Debug)]
pub struct Olia {
    config: OliaConfig,
    paths: BTreeMap<PathId, OliaPath>,
    /// Reused for the set computation on every ACK.
    scratch: Vec<OliaPathInfo>,
}

impl Olia {
    /// A controller with no paths.
    pub fn new(config: OliaConfig) -> Self {
        Olia { config, paths: BTreeMap::new(), scratch: Vec::new() }
    }

    /// The window state of `path`, if known.
    pub fn path(&self, path: PathId) -> Option<&PathWindow> {
        self.paths.get(&path).map(|p| &p.w)
    }

    /// `l_r` of `path` in bytes, if known.
    pub fn inter_loss_bytes(&self, path: PathId) -> Option<u64> {
        self.paths.get(&path).map(OliaPath::inter_loss_bytes)
    }

    /// Fills `infos` with the paths that have an RTT sample, in path order; returns the
    /// index of `path` among them.
    fn fill_infos(&self, infos: &mut Vec<OliaPathInfo>, path: Option<PathId>) -> Option<usize> {
        infos.clear();
        let mut index = None;
        for (&id, p) in &self.paths {
            let Some(srtt) = p.w.srtt() else { continue };
            if Some(id) == path {
                index = Some(infos.len());
            }
            infos.push(OliaPathInfo {
                window_packets: p.w.window_packets(),
                inter_loss_bytes: p.inter_loss_bytes(),
                rtt_micros: u64::try_from(srtt.as_micros()).unwrap_or(u64::MAX),
            });
        }
        index
    }

    /// The congestion-avoidance increase in bytes for `acked` bytes on `path`.
    fn increase(&mut self, path: PathId, acked: usize) -> Option<f64> {
        let mut infos = std::mem::take(&mut self.scratch);
        let alpha = self.fill_infos(&mut infos, Some(path)).map_or(0.0, |i| olia_alpha(&infos, i));
        self.scratch = infos;
        let me = self.paths.get(&path)?;
        let mss = me.w.mss() as f64;
        let w_r = me.w.cwnd() / mss;
        let rtt_r = me.w.srtt_secs()?;
        let sum: f64 = self
            .paths
            .values()
            .filter_map(|p| p.w.srtt_secs().map(|rtt| p.w.cwnd() / p.w.mss() as f64 / rtt))
            .sum();
        let per_packet = (w_r / (rtt_r * rtt_r)) / (sum * sum) + alpha / w_r;
        let inc = acked as f64 * per_packet;
        inc.is_finite().then_some(inc)
    }
}

impl Controller for Olia {
    fn on_path_added(&mut self, now: Instant, path: PathId, mss: usize) {
        let w = PathWindow::new(now, mss, &self.config.window);
        self.paths.insert(path, OliaPath { w, loss1: 0, loss2: 0, loss3: 0 });
    }

    fn on_path_removed(&mut self, path: PathId) {
        self.paths.remove(&path);
    }

    fn on_datagram_size(&mut self, path: PathId, mss: usize) {
        if let Some(p) = self.paths.get_mut(&path) {
            p.w.set_mss(mss);
        }
    }

    fn on_sent(&mut self, _now: Instant, path: PathId, _bytes: usize, in_flight: u64) {
        if let Some(p) = self.paths.get_mut(&path) {
            p.w.on_sent(in_flight);
        }
    }

    fn on_ack(&mut self, now: Instant, path: PathId, sent: Instant, bytes: usize, rtt: &RttSample) {
        let Some(p) = self.paths.get_mut(&path) else { return };
        let phase = p.w.on_ack(now, sent, bytes, rtt.smoothed);
        p.loss3 = p.w.acked_bytes();
        if phase != AckPhase::CongestionAvoidance {
            return;
        }
        if let Some(inc) = self.increase(path, bytes)
            && let Some(p) = self.paths.get_mut(&path)
        {
            p.w.add(inc);
        }
    }

    fn on_congestion_event(&mut self, now: Instant, path: PathId, sent: Instant, persistent: bool) {
        let Some(p) = self.paths.get_mut(&path) else { return };
        let reduced = p.w.on_congestion_event(now, sent, persistent);
        // mptcp_olia_set_state: a new loss interval begins (not on RTO-style collapse).
        if reduced && !persistent && p.loss3 != p.loss2 {
            p.loss1 = p.loss2;
            p.loss2 = p.loss3;
        }
    }

    /// Bytes allowed in flight; 0 for a path never added.
    fn window(&self, path: PathId) -> u64 {
        self.paths.get(&path).map_or(0, |p| p.w.window())
    }

    fn name(&self) -> &'static str {
        "olia"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::reno::RenoConfig;
    use crate::cc::window::testkit::Sim;
    use std::time::Duration;

    const MSS: usize = 1200;

    fn info(window_packets: u64, inter_loss_bytes: u64, rtt_ms: u64) -> OliaPathInfo {
        OliaPathInfo { window_packets, inter_loss_bytes, rtt_micros: rtt_ms * 1000 }
    }

    #[test]
    fn alpha_rewards_the_best_path_that_is_not_the_largest() {
        // M = {A} (largest window), B = {B} (largest l/rtt²), C neither. |P| = 3.
        let a = olia_alphas(&[info(20, 100_000, 10), info(10, 200_000, 10), info(5, 10_000, 10)]);
        assert_eq!(a, vec![-1.0 / 3.0, 1.0 / 3.0, 0.0]);
        assert_eq!(a.iter().sum::<f64>(), 0.0);
    }

    #[test]
    fn alpha_is_zero_when_the_best_path_has_the_largest_window() {
        let a = olia_alphas(&[info(20, 300_000, 10), info(10, 200_000, 10)]);
        assert_eq!(a, vec![0.0, 0.0]);
    }

    #[test]
    fn alpha_weighs_inter_loss_distance_by_rtt_squared() {
        // l/rtt²: A = 400 000/20² = 1000, B = 100 000/10² = 1000: a tie, both in B.
        // M = {B, C} (10 packets each). B\M = {A}.
        let a = olia_alphas(&[info(8, 400_000, 20), info(10, 100_000, 10), info(10, 1_000, 10)]);
        assert_eq!(a, vec![1.0 / 3.0, -1.0 / 6.0, -1.0 / 6.0]);
    }

    #[test]
    fn alpha_splits_among_several_best_paths() {
        // No losses yet and equal bytes acked: every path is in B. M = {A}, B\M = {B, C}.
        let a = olia_alphas(&[info(12, 5_000, 10), info(10, 5_000, 10), info(10, 5_000, 10)]);
        assert_eq!(a, vec![-1.0 / 3.0, 1.0 / 6.0, 1.0 / 6.0]);
        assert_eq!(olia_alphas(&[]), Vec::<f64>::new());
        assert_eq!(olia_alphas(&[info(3, 0, 0)]), vec![0.0]);
    }

    #[test]
    fn inter_loss_distance_tracks_the_last_two_loss_intervals() {
        let mut olia = Olia::new(OliaConfig::default());
        let p = PathId(0);
        olia.on_path_added(Instant::ZERO, p, MSS);
        let rtt = RttSample {
            latest: Duration::from_millis(10),
            smoothed: Duration::from_millis(10),
            min: Duration::from_millis(10),
        };
        let mut now = 0;
        let mut ack = |olia: &mut Olia, n: usize| {
            for _ in 0..n {
                now += 1000;
                olia.on_ack(Instant::from_micros(now), p, Instant::from_micros(now - 1), MSS, &rtt);
            }
        };
        ack(&mut olia, 10);
        assert_eq!(olia.inter_loss_bytes(p), Some(12_000));
        olia.on_congestion_event(
            Instant::from_micros(20_000),
            p,
            Instant::from_micros(19_000),
            false,
        );
        ack(&mut olia, 3); // since the last loss: 3 packets; between losses: 10 packets
        assert_eq!(olia.inter_loss_bytes(p), Some(12_000));
        olia.on_congestion_event(
            Instant::from_micros(40_000),
            p,
            Instant::from_micros(39_000),
            false,
        );
        ack(&mut olia, 1);
        assert_eq!(olia.inter_loss_bytes(p), Some(3 * 1200));
        // Persistent congestion does not start a new interval.
        olia.on_congestion_event(
            Instant::from_micros(90_000),
            p,
            Instant::from_micros(89_000),
            true,
        );
        assert_eq!(olia.inter_loss_bytes(p), Some(3 * 1200));
    }

    #[test]
    fn with_one_path_olia_behaves_as_reno() {
        let mut olia = Sim::new(&OliaConfig::default(), &[(0, 40)], MSS);
        let mut reno = Sim::new(&RenoConfig::default(), &[(0, 40)], MSS);
        for sim in [&mut olia, &mut reno] {
            for _ in 0..3 {
                sim.round(0);
            }
            for k in 0..40 {
                sim.round(0);
                if k % 9 == 0 {
                    sim.lose_oldest(0);
                }
            }
        }
        let (o, r) = (olia.window(0) as f64, reno.window(0) as f64);
        assert!((o - r).abs() <= 2.0, "olia {o} reno {r}");
    }

    #[test]
    fn aggregate_grows_no_faster_than_one_reno_flow() {
        // Two paths with different RTTs; fluid bound: Σ_r w_r·(w_r/rtt_r²)/(Σ w/rtt)² ≤ 1
        // and the α terms cancel, so at most one MSS per round trip of the faster path.
        let mut sim = Sim::new(&OliaConfig::default(), &[(0, 20), (1, 60)], MSS);
        for _ in 0..3 {
            sim.round(0);
            sim.round(1);
        }
        sim.lose_oldest(0);
        sim.lose_oldest(1);
        for _ in 0..3 {
            sim.round(0);
            sim.round(1);
        }
        let start = sim.total_window();
        let t0 = sim.now;
        sim.run_until(t0 + Duration::from_millis(60 * 10));
        let grew = sim.total_window().saturating_sub(start) as f64;
        // 600 ms is 30 round trips of the fast path.
        assert!(grew <= 30.0 * MSS as f64, "grew {grew} bytes");
        assert!(grew > 0.0);
    }

    #[test]
    fn traffic_shifts_toward_the_less_congested_path() {
        // Same RTT; path 1 loses a packet every 5 round trips, path 0 never.
        let mut sim = Sim::new(&OliaConfig::default(), &[(0, 30), (1, 30)], MSS);
        for _ in 0..3 {
            sim.round(0);
            sim.round(1);
        }
        // Leave slow start on both paths.
        sim.lose_oldest(0);
        sim.lose_oldest(1);
        for k in 0..100 {
            sim.round(0);
            sim.round(1);
            if k % 5 == 4 {
                sim.lose_oldest(1);
            }
        }
        assert!(sim.window(0) > 3 * sim.window(1), "{} vs {}", sim.window(0), sim.window(1));
    }

    #[test]
    fn negative_alpha_never_pushes_a_window_below_the_minimum() {
        let mut olia = Olia::new(OliaConfig::default());
        let rtt = RttSample {
            latest: Duration::from_millis(10),
            smoothed: Duration::from_millis(10),
            min: Duration::from_millis(10),
        };
        for id in 0..3 {
            olia.on_path_added(Instant::ZERO, PathId(id), MSS);
        }
        let mut now = 1000u64;
        for _ in 0..2000 {
            for id in 0..3 {
                now += 10;
                olia.on_sent(Instant::from_micros(now), PathId(id), MSS, u64::MAX / 4);
                olia.on_ack(
                    Instant::from_micros(now),
                    PathId(id),
                    Instant::from_micros(now - 5),
                    MSS,
                    &rtt,
                );
                if id == 2 && now.is_multiple_of(7) {
                    olia.on_congestion_event(
                        Instant::from_micros(now),
                        PathId(id),
                        Instant::from_micros(now),
                        false,
                    );
                }
                assert!(olia.window(PathId(id)) >= 2 * MSS as u64);
            }
        }
        assert_eq!(olia.name(), "olia");
    }
}
