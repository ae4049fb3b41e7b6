//! abCWND, MPTCP-QE's available-bandwidth-aware window restart (ALGORITHMS.md §4
//! \[approx, Westwood form\]), on top of LIA (RFC 6356, [`super::lia`]).
//!
//! Every path keeps a Westwood-style bandwidth estimate (BWE): the bytes acknowledged per
//! sampling interval (at least one smoothed RTT, at least 50 ms) while the window limits
//! sending, smoothed with `BWE ← 7/8·BWE + 1/8·sample` \[approx\]. When a path sends again after being idle
//! (nothing in flight) for longer than its RTO, it restarts from that estimate:
//!
//! ```text
//! cwnd = ssthresh = max(BWE · RTT_min / MSS, 2) · MSS
//! ```
//!
//! instead of whatever its window was (or a slow start; a path with no estimate yet
//! restarts as LIA does, RFC 2861 §3, [`super::lia`]). The paper's second step then
//! caps the estimate at the cheap path's current window (an LTE window larger than
//! WiFi's would have LTE carry more than WiFi, the energy the mode switch is there to
//! save): `cwnd = min(cwnd, max cwnd of the other paths still active)`, where a path is
//! active when it sent or was acknowledged within its RTO. With no other active path
//! the estimate stands. The RTO is RFC 6298's `SRTT + 4·RTTVAR` with a 200 ms floor,
//! from the RTT samples the connection reports.
//! Everything else — slow start, the coupled increase, loss response — is LIA's, computed
//! with the same public building blocks ([`lia_alpha`], [`lia_increase`], [`PathWindow`]).

use std::collections::BTreeMap;
use std::time::Duration;

use super::lia::{idle_restart, lia_alpha, lia_increase};
use super::reno::reno_increase;
use super::window::{AckPhase, PathWindow, WindowConfig};
use super::{Controller, ControllerFactory, RttSample};
use crate::path::PathId;
use crate::time::Instant;

/// RTO floor used for the idle test (the connection's default minimum RTO).
const MIN_RTO: Duration = Duration::from_millis(200);
/// Shortest BWE sampling interval.
const MIN_SAMPLE: Duration = Duration::from_millis(50);

/// Configuration of [`AbCwnd`]; its own [`ControllerFactory`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AbCwndConfig {
    /// Window parameters (as LIA's).
    pub window: WindowConfig,
}

impl ControllerFactory for AbCwndConfig {
    fn build(&self) -> Box<dyn Controller> {
        Box::new(AbCwnd::new(self.clone()))
    }
    fn kind(&self) -> super::Kind {
        super::Kind::Coupled
    }
}

#[derive(Clone, Debug)]
struct PathState {
    w: PathWindow,
    last_activity: Option<Instant>,
    in_flight: u64,
    bwe_bps: f64,
    sample_start: Option<Instant>,
    sample_bytes: u64,
    min_rtt: Option<Duration>,
    srtt: Option<Duration>,
    rttvar: Duration,
    restarts: u32,
}

impl PathState {
    fn rto(&self) -> Duration {
        match self.srtt {
            Some(s) => (s + 4 * self.rttvar).max(MIN_RTO),
            None => Duration::from_secs(1),
        }
    }
}

/// LIA with abCWND's restart after idle. See the [module docs](self).
#[derive(Clone, Debug)]
pub struct AbCwnd {
    config: AbCwndConfig,
    paths: BTreeMap<PathId, PathState>,
}

impl AbCwnd {
    /// A controller with no paths.
    pub fn new(config: AbCwndConfig) -> AbCwnd {
        AbCwnd { config, paths: BTreeMap::new() }
    }

    /// The window state of `path`, if known.
    pub fn path(&self, path: PathId) -> Option<&PathWindow> {
        self.paths.get(&path).map(|s| &s.w)
    }

    /// The bandwidth estimate of `path`, bytes/s (0 before any sample).
    pub fn bwe_bytes_per_s(&self, path: PathId) -> f64 {
        self.paths.get(&path).map_or(0.0, |s| s.bwe_bps)
    }

    #[cfg(test)]
    fn path_window_for_test(&mut self, path: PathId, cwnd: u64) {
        if let Some(s) = self.paths.get_mut(&path) {
            s.w.set_window(cwnd, Some(cwnd));
        }
    }

    /// How many times `path` restarted from its estimate.
    pub fn restarts(&self, path: PathId) -> u32 {
        self.paths.get(&path).map_or(0, |s| s.restarts)
    }

    fn weighed(&self) -> impl Iterator<Item = (f64, f64)> + '_ {
        self.paths.values().filter_map(|s| s.w.srtt_secs().map(|rtt| (s.w.cwnd(), rtt)))
    }
}

impl Controller for AbCwnd {
    fn on_path_added(&mut self, now: Instant, path: PathId, mss: usize) {
        let w = PathWindow::new(now, mss, &self.config.window);
        self.paths.insert(
            path,
            PathState {
                w,
                last_activity: None,
                in_flight: 0,
                bwe_bps: 0.0,
                sample_start: None,
                sample_bytes: 0,
                min_rtt: None,
                srtt: None,
                rttvar: Duration::ZERO,
                restarts: 0,
            },
        );
    }

    fn on_path_removed(&mut self, path: PathId) {
        self.paths.remove(&path);
    }

    fn on_datagram_size(&mut self, path: PathId, mss: usize) {
        if let Some(s) = self.paths.get_mut(&path) {
            s.w.set_mss(mss);
        }
    }

    fn on_sent(&mut self, now: Instant, path: PathId, bytes: usize, in_flight: u64) {
        // The paper's second step: the other paths' windows, those still active.
        let others_cap = self
            .paths
            .iter()
            .filter(|(id, o)| {
                **id != path
                    && o.last_activity.is_some_and(|t| now.saturating_duration_since(t) <= o.rto())
            })
            .map(|(_, o)| o.w.window())
            .max();
        let Some(s) = self.paths.get_mut(&path) else { return };
        let was_idle = in_flight <= bytes as u64
            && s.last_activity.is_some_and(|t| now.saturating_duration_since(t) > s.rto());
        let idle_for = now.saturating_duration_since(s.last_activity.unwrap_or(now));
        if was_idle
            && s.bwe_bps > 0.0
            && let Some(rtt_min) = s.min_rtt
        {
            // abCWND: cwnd = ssthresh = max(BWE·RTT_min/MSS, 2)·MSS.
            let mss = s.w.mss();
            let packets = (s.bwe_bps * rtt_min.as_secs_f64() / mss as f64).max(2.0);
            let estimate = (packets * mss as f64) as u64;
            let cwnd = others_cap.map_or(estimate, |cap| estimate.min(cap.max(2 * mss)));
            s.w.set_window(cwnd, Some(cwnd));
            s.restarts += 1;
            // A fresh bandwidth sample starts with the new burst.
            s.sample_start = None;
            s.sample_bytes = 0;
        } else if was_idle {
            // No estimate (the path never filled its window): LIA's restart after idle,
            // RFC 2861 §3.
            let iw = PathWindow::new(now, s.w.mss() as usize, &self.config.window).window();
            let (cwnd, ss) = idle_restart(s.w.window(), s.w.ssthresh(), iw, idle_for, s.rto());
            s.w.set_window(cwnd, ss);
        }
        s.in_flight = in_flight;
        s.last_activity = Some(now);
        s.w.on_sent(in_flight);
    }

    fn on_ack(&mut self, now: Instant, path: PathId, sent: Instant, bytes: usize, rtt: &RttSample) {
        let Some(s) = self.paths.get_mut(&path) else { return };
        s.last_activity = Some(now);
        s.in_flight = s.in_flight.saturating_sub(bytes as u64);
        // RFC 6298 §2.3 variance from the latest sample against the smoothed RTT.
        let dev = rtt.smoothed.abs_diff(rtt.latest);
        s.rttvar = if s.srtt.is_none() { rtt.latest / 2 } else { (s.rttvar * 3 + dev) / 4 };
        s.srtt = Some(rtt.smoothed);
        s.min_rtt = Some(s.min_rtt.map_or(rtt.min, |m| m.min(rtt.min)));
        // Westwood bandwidth sample: bytes acknowledged over at least one smoothed RTT,
        // taken only while the window limited sending — an application-limited path (say
        // LTE carrying only eMTCP's shortfall) would otherwise "measure" its own demand
        // and restart far below what the path can carry.
        if !s.w.is_cwnd_limited() {
            s.sample_start = None;
            s.sample_bytes = 0;
        }
        match s.sample_start {
            None => {
                s.sample_start = Some(now);
                s.sample_bytes = 0;
            }
            Some(start) => {
                s.sample_bytes += bytes as u64;
                let span = now.saturating_duration_since(start);
                if span >= rtt.smoothed.max(MIN_SAMPLE) {
                    let sample = s.sample_bytes as f64 / span.as_secs_f64();
                    s.bwe_bps =
                        if s.bwe_bps > 0.0 { 0.875 * s.bwe_bps + 0.125 * sample } else { sample };
                    s.sample_start = Some(now);
                    s.sample_bytes = 0;
                }
            }
        }
        if s.w.on_ack(now, sent, bytes, rtt.smoothed) != AckPhase::CongestionAvoidance {
            return;
        }
        let (cwnd, mss) = (s.w.cwnd(), s.w.mss());
        let cwnd_total: f64 = self.weighed().map(|(c, _)| c).sum();
        let inc = match lia_alpha(self.weighed()) {
            Some(alpha) => lia_increase(alpha, cwnd_total, cwnd, mss, bytes),
            None => reno_increase(mss, cwnd, bytes),
        };
        if let Some(s) = self.paths.get_mut(&path) {
            s.w.add(inc);
        }
    }

    fn on_congestion_event(&mut self, now: Instant, path: PathId, sent: Instant, persistent: bool) {
        if let Some(s) = self.paths.get_mut(&path) {
            s.w.on_congestion_event(now, sent, persistent);
        }
    }

    fn window(&self, path: PathId) -> u64 {
        self.paths.get(&path).map_or(0, |s| s.w.window())
    }

    fn name(&self) -> &'static str {
        "abcwnd"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: usize = 1200;

    fn ms(v: u64) -> Instant {
        Instant::from_micros(v * 1000)
    }

    fn rtt(ms_: u64) -> RttSample {
        let d = Duration::from_millis(ms_);
        RttSample { latest: d, smoothed: d, min: d }
    }

    /// Sends and acknowledges `per_rtt` packets every 100 ms RTT for `rounds` rounds.
    fn steady(c: &mut AbCwnd, p: PathId, from_ms: u64, rounds: u64, per_rtt: u64) -> u64 {
        let mut t = from_ms;
        for _ in 0..rounds {
            for k in 0..per_rtt {
                c.on_sent(ms(t), p, MSS, (k + 1) * MSS as u64);
            }
            for k in 0..per_rtt {
                c.on_ack(ms(t + 100 + k), p, ms(t), MSS, &rtt(100));
            }
            t += 100;
        }
        t
    }

    #[test]
    fn a_path_idle_longer_than_its_rto_restarts_from_its_bandwidth_estimate() {
        let mut c = AbCwnd::new(AbCwndConfig::default());
        let p = PathId(1);
        c.on_path_added(ms(0), p, MSS);
        // 20 packets per 100 ms = 240 000 bytes/s.
        let t = steady(&mut c, p, 0, 30, 20);
        let bwe = c.bwe_bytes_per_s(p);
        assert!((bwe - 240_000.0).abs() < 30_000.0, "bwe {bwe}");
        // Idle for 5 s (RTO ≈ 200–300 ms), then one packet: cwnd = BWE·RTT_min.
        c.on_sent(ms(t + 5000), p, MSS, MSS as u64);
        assert_eq!(c.restarts(p), 1);
        let w = c.path(p).map(|w| (w.window(), w.ssthresh())).unwrap_or_default();
        let expected = (bwe * 0.1 / MSS as f64).max(2.0) * MSS as f64;
        assert!((w.0 as f64 - expected).abs() <= MSS as f64, "{w:?} vs {expected}");
        assert_eq!(w.1, Some(w.0));
    }

    #[test]
    fn a_short_pause_does_not_restart() {
        let mut c = AbCwnd::new(AbCwndConfig::default());
        let p = PathId(0);
        c.on_path_added(ms(0), p, MSS);
        let t = steady(&mut c, p, 0, 10, 10);
        let before = c.window(p);
        c.on_sent(ms(t + 150), p, MSS, MSS as u64);
        assert_eq!(c.restarts(p), 0);
        assert_eq!(c.window(p), before);
    }

    #[test]
    fn an_application_limited_path_has_no_estimate_and_restarts_as_lia_does() {
        let mut c = AbCwnd::new(AbCwndConfig::default());
        let p = PathId(0);
        c.on_path_added(ms(0), p, MSS);
        // One packet per RTT under a 10-packet window: never window-limited.
        let t = steady(&mut c, p, 0, 20, 1);
        assert_eq!(c.bwe_bytes_per_s(p), 0.0);
        let before = c.window(p);
        c.on_sent(ms(t + 10_000), p, MSS, MSS as u64);
        assert_eq!(c.restarts(p), 0);
        // The window was never above the initial one, so the restart window keeps it.
        assert_eq!(c.window(p), before);
    }

    #[test]
    fn the_restart_is_capped_at_the_active_cheap_paths_window() {
        let mut c = AbCwnd::new(AbCwndConfig::default());
        let (wifi, lte) = (PathId(0), PathId(1));
        c.on_path_added(ms(0), wifi, MSS);
        c.on_path_added(ms(0), lte, MSS);
        // LTE: 20 packets per RTT (estimate ≈ 24 000 bytes per 100 ms), then idle.
        let t = steady(&mut c, lte, 0, 30, 20);
        assert!(c.bwe_bytes_per_s(lte) > 200_000.0);
        // WiFi busy with a 5-packet window when LTE wakes 5 s later.
        c.path_window_for_test(wifi, 5 * MSS as u64);
        c.on_sent(ms(t + 4990), wifi, MSS, MSS as u64);
        c.on_sent(ms(t + 5000), lte, MSS, MSS as u64);
        assert_eq!(c.restarts(lte), 1);
        assert_eq!(c.window(lte), 5 * MSS as u64);
    }
}
