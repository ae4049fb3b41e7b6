//! A fixed window per path, the bandwidth-delay product: the S-EDPF paper's controlled
//! experiments "fix the congestion window of each subflow to the bandwidth-delay product of
//! each link (i.e. highest rate without causing congestion)" \[source: S-EDPF paper, §
//! evaluation\], which takes congestion control out of a scheduler comparison.
//!
//! The window is `capacity × base RTT`. Given per path ([`FixedBdpConfig::windows`], in
//! the order paths join; a scenario knows its links), it is used from the first packet and
//! never changes. Without it (the `fixed-bdp` controller name by itself) the product is
//! measured: the window grows as in slow start (by the bytes acknowledged) while the
//! delivery rate, sampled once per smallest RTT, keeps rising by at least a quarter within
//! three samples (BBR's full-pipe test); then it is fixed at the largest delivery rate
//! seen × the smallest RTT seen. Losses never change a fixed window.

use std::collections::BTreeMap;
use std::time::Duration;

use super::{Controller, ControllerFactory, RttSample};
use crate::path::PathId;
use crate::time::Instant;

/// Initial window while measuring, in datagrams (RFC 6928's ten segments).
pub const INITIAL_WINDOW_PACKETS: u64 = 10;
/// The smallest window, in datagrams.
pub const MIN_WINDOW_PACKETS: u64 = 4;

/// Configuration of [`FixedBdp`]; its own [`ControllerFactory`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FixedBdpConfig {
    /// The window of each path in bytes, in the order the paths join; paths beyond the
    /// list (or with an empty list, all paths) measure their product.
    pub windows: Vec<u64>,
}

impl FixedBdpConfig {
    /// Windows of `capacity_bps × base_rtt` for each path, in path order.
    pub fn from_paths(paths: &[(u64, Duration)]) -> FixedBdpConfig {
        FixedBdpConfig {
            windows: paths
                .iter()
                .map(|&(bps, rtt)| (bps as f64 / 8.0 * rtt.as_secs_f64()).round() as u64)
                .collect(),
        }
    }
}

impl ControllerFactory for FixedBdpConfig {
    fn build(&self) -> Box<dyn Controller> {
        Box::new(FixedBdp { config: self.clone(), paths: BTreeMap::new(), added: 0 })
    }
}

#[derive(Clone, Debug)]
struct PathState {
    mss: u64,
    window: u64,
    /// Fixed (given, or measured to the end).
    fixed: bool,
    min_rtt: Option<Duration>,
    max_rate: f64,
    /// Start of the current delivery-rate sample and the bytes acked in it.
    sample_start: Option<Instant>,
    sample_bytes: u64,
    /// The best rate when the last full-pipe check passed, and samples since.
    plateau_rate: f64,
    plateau_samples: u32,
}

/// Fixed bandwidth-delay-product windows.
#[derive(Clone, Debug)]
pub struct FixedBdp {
    config: FixedBdpConfig,
    paths: BTreeMap<PathId, PathState>,
    added: usize,
}

impl PathState {
    fn fix_measured(&mut self) {
        let rtt = self.min_rtt.map_or(0.0, |d| d.as_secs_f64());
        self.window = ((self.max_rate * rtt) as u64).max(MIN_WINDOW_PACKETS * self.mss);
        self.fixed = true;
    }
}

impl Controller for FixedBdp {
    fn on_path_added(&mut self, _now: Instant, path: PathId, mss: usize) {
        let mss = mss.max(1) as u64;
        let given = self.config.windows.get(self.added).copied();
        self.added += 1;
        self.paths.insert(
            path,
            PathState {
                mss,
                window: given
                    .map_or(INITIAL_WINDOW_PACKETS * mss, |w| w.max(MIN_WINDOW_PACKETS * mss)),
                fixed: given.is_some(),
                min_rtt: None,
                max_rate: 0.0,
                sample_start: None,
                sample_bytes: 0,
                plateau_rate: 0.0,
                plateau_samples: 0,
            },
        );
    }

    fn on_path_removed(&mut self, path: PathId) {
        self.paths.remove(&path);
    }

    fn on_sent(&mut self, _now: Instant, _path: PathId, _bytes: usize, _in_flight: u64) {}

    fn on_ack(
        &mut self,
        now: Instant,
        path: PathId,
        _sent: Instant,
        bytes: usize,
        rtt: &RttSample,
    ) {
        let Some(p) = self.paths.get_mut(&path) else { return };
        if p.fixed {
            return;
        }
        p.min_rtt = Some(p.min_rtt.map_or(rtt.min, |m| m.min(rtt.min)));
        p.window += bytes as u64;
        p.sample_bytes += bytes as u64;
        let start = *p.sample_start.get_or_insert(now);
        let span = now.saturating_duration_since(start);
        if span >= p.min_rtt.unwrap_or(rtt.min) && !span.is_zero() {
            let rate = p.sample_bytes as f64 / span.as_secs_f64();
            p.max_rate = p.max_rate.max(rate);
            p.sample_start = Some(now);
            p.sample_bytes = 0;
            if p.max_rate >= 1.25 * p.plateau_rate {
                p.plateau_rate = p.max_rate;
                p.plateau_samples = 0;
            } else {
                p.plateau_samples += 1;
                if p.plateau_samples >= 3 {
                    p.fix_measured();
                }
            }
        }
    }

    fn on_congestion_event(
        &mut self,
        _now: Instant,
        path: PathId,
        _sent: Instant,
        _persistent: bool,
    ) {
        // While measuring, a loss means the pipe is full.
        if let Some(p) = self.paths.get_mut(&path)
            && !p.fixed
            && p.max_rate > 0.0
        {
            p.fix_measured();
        }
    }

    fn window(&self, path: PathId) -> u64 {
        self.paths.get(&path).map_or(0, |p| p.window)
    }

    fn name(&self) -> &'static str {
        "fixed-bdp"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: Instant = Instant::from_micros(0);

    fn sample(ms: u64) -> RttSample {
        let d = Duration::from_millis(ms);
        RttSample { latest: d, smoothed: d, min: d }
    }

    #[test]
    fn given_windows_are_the_bdp_and_never_change() {
        // 10 Mbit/s × 100 ms = 125 000 bytes.
        let cfg = FixedBdpConfig::from_paths(&[
            (10_000_000, Duration::from_millis(100)),
            (2_000_000, Duration::from_millis(40)),
        ]);
        assert_eq!(cfg.windows, vec![125_000, 10_000]);
        let mut c = cfg.build();
        c.on_path_added(T0, PathId(3), 1200);
        c.on_path_added(T0, PathId(5), 1200);
        assert_eq!((c.window(PathId(3)), c.window(PathId(5))), (125_000, 10_000));
        c.on_congestion_event(T0, PathId(3), T0, true);
        c.on_ack(T0 + Duration::from_millis(100), PathId(3), T0, 1200, &sample(100));
        assert_eq!(c.window(PathId(3)), 125_000);
        assert_eq!(c.name(), "fixed-bdp");
    }

    #[test]
    fn without_windows_the_product_is_measured_then_fixed() {
        // An ack clock at 1.25 MB/s (10 Mbit/s) with a 100 ms RTT.
        let mut c = FixedBdpConfig::default().build();
        c.on_path_added(T0, PathId(0), 1250);
        assert_eq!(c.window(PathId(0)), 12_500);
        for i in 1..=4000u64 {
            c.on_ack(T0 + Duration::from_millis(i), PathId(0), T0, 1250, &sample(100));
        }
        let w = c.window(PathId(0));
        assert!((120_000..=130_000).contains(&w), "window {w}");
        c.on_congestion_event(T0, PathId(0), T0, false);
        c.on_ack(T0 + Duration::from_secs(5), PathId(0), T0, 1250, &sample(100));
        assert_eq!(c.window(PathId(0)), w);
    }
}
