//! Earliest Delivery Path First (EDPF; Chebrolu & Rao, IEEE TMC 2006 \[recalled\]) and its
//! stochastic form S-EDPF (Garcia-Saavedra, Karzand, Leith: "Low delay random linear coding
//! and scheduling over multiple interfaces", IEEE TMC; eq. 9) \[source: ALGORITHMS.md §2\].
//!
//! Both model each path j by its one-way delay D_j (the measured mean, or srtt/2 before a
//! sample), its delivery rate B_j (the pacing rate, else window/srtt) and A_j, the expected
//! arrival of the last packet the scheduler put on it:
//!
//! ```text
//! d_j = max(now + D_j, A_j) + L/B_j          the expected arrival of a packet of L bytes
//! ```
//!
//! EDPF sends on argmin d_j and sets A_j = d_j. S-EDPF treats the arrival on j as
//! a_j ~ N(d_j, σ_j²) (σ_j² the measured one-way-delay variance) and picks the path that
//! minimises the expected **in-order** delivery time E[max(Y, a_j)], where Y is the
//! delivery time of the packets already sent: the maximum over the other paths with data in
//! flight of N(A_p, σ_p²), folded pairwise by Clark's rule ([`super::clark`]). On one path
//! packets arrive in order (the paper's Assumption 1), so the path's own last packet is
//! not in Y when the path itself is scored.
//!
//! Windows: the papers' model has a sender queue per path; a window-based transport asks
//! for one packet at a time and only a path with window room can take it. A path without
//! room is still a candidate: the head packet would leave once the window opens and the
//! backlog queued before it has drained, so its expected arrival is
//! `max(now + D_j, A_j) + backlog/B_j`. If such a path wins, nothing is sent (the
//! connection waits for its ACKs), as ECF and BLEST wait for the fast path. This is a
//! deviation from the papers, recorded in docs/ALGORITHMS.md with its reason.

use super::clark::{Gaussian, max_all, max2};
use super::minrtt::{can_send_now, serving_status};
use super::{PathView, Scheduler, SchedulerFactory, SendState};
use crate::path::{PathId, PathStatus};
use crate::time::Instant;
use std::collections::BTreeMap;

/// The smallest RTT used in rate estimates (guards window/srtt against a zero srtt).
const MIN_RTT_S: f64 = 1e-3;

/// The delivery rate of a path, bytes/s: the pacing rate of a rate-based controller, else
/// the window over the smoothed RTT.
pub fn delivery_rate(p: &PathView) -> f64 {
    if let Some(r) = p.pacing_rate {
        return (r as f64).max(1.0);
    }
    p.cwnd.max(1) as f64 / p.srtt.as_secs_f64().max(MIN_RTT_S)
}

/// The one-way delay of a path, s: the measured mean, or half the smoothed RTT before the
/// first sample.
pub fn one_way_delay(p: &PathView) -> f64 {
    p.owd.map_or(p.srtt.as_secs_f64() / 2.0, |d| d.as_secs_f64())
}

fn secs(t: Instant) -> f64 {
    t.as_micros() as f64 / 1e6
}

/// The shared path model of EDPF and S-EDPF.
#[derive(Clone, Debug, Default)]
struct Model {
    /// Expected arrival (s since the clock's zero) of the last packet sent on each path.
    last_arrival: BTreeMap<PathId, f64>,
    send: SendState,
}

/// One candidate path as the model sees it.
#[derive(Clone, Copy, Debug)]
struct Candidate {
    id: PathId,
    /// Expected arrival of the packet on this path, s.
    arrival: f64,
    /// Variance of the arrival, s².
    var: f64,
    /// Whether the path can take the packet now.
    ready: bool,
}

impl Model {
    /// The expected arrival of the last packet in flight on `p` (clamped to what its
    /// in-flight bytes can still take, so an underestimated rate does not push it away).
    fn last(&self, p: &PathView, now: f64) -> Option<f64> {
        if p.in_flight == 0 {
            return None;
        }
        let a = *self.last_arrival.get(&p.id)?;
        let cap = now + one_way_delay(p) + p.in_flight as f64 / delivery_rate(p);
        Some(a.min(cap))
    }

    fn candidates(&self, now: Instant, paths: &[PathView], bytes: usize) -> Vec<Candidate> {
        let t = secs(now);
        let status = serving_status(paths);
        let backlog = self.send.unsent_bytes.max(bytes as u64) as f64;
        paths
            .iter()
            .filter(|p| p.usable && p.status == status && p.status != PathStatus::Closed)
            .map(|p| {
                let ready = can_send_now(p, now, bytes);
                let rate = delivery_rate(p);
                let pace = p.next_send_time.map_or(0.0, |n| (secs(n) - t).max(0.0));
                let free = (t + pace + one_way_delay(p)).max(self.last(p, t).unwrap_or(0.0));
                let serve = if ready { bytes as f64 } else { backlog };
                Candidate {
                    id: p.id,
                    arrival: free + serve / rate,
                    var: p.owd_var_us2.max(0.0) / 1e12,
                    ready,
                }
            })
            .collect()
    }

    /// Sends on `best` if it is ready, recording its expected arrival.
    fn commit(&mut self, best: Option<Candidate>, out: &mut Vec<PathId>) {
        if let Some(c) = best.filter(|c| c.ready) {
            self.last_arrival.insert(c.id, c.arrival);
            out.push(c.id);
        }
    }
}

/// Configuration of [`Edpf`]; its own [`SchedulerFactory`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EdpfConfig {}

impl SchedulerFactory for EdpfConfig {
    fn build(&self) -> Box<dyn Scheduler> {
        Box::new(Edpf::default())
    }
}

/// Earliest Delivery Path First: the path with the earliest expected arrival.
#[derive(Clone, Debug, Default)]
pub struct Edpf {
    model: Model,
}

impl Scheduler for Edpf {
    fn select(&mut self, now: Instant, paths: &[PathView], bytes: usize, out: &mut Vec<PathId>) {
        let best = self
            .model
            .candidates(now, paths, bytes)
            .into_iter()
            .min_by(|a, b| a.arrival.total_cmp(&b.arrival).then(a.id.cmp(&b.id)));
        self.model.commit(best, out);
    }

    fn on_send_state(&mut self, state: SendState) {
        self.model.send = state;
    }

    fn name(&self) -> &'static str {
        "edpf"
    }
}

/// Configuration of [`Sedpf`]; its own [`SchedulerFactory`]. Y is recomputed for every
/// packet (the paper refreshes its Z_p on a 250–500 ms timer, Theorem 1, to save work; the
/// fold is O(P) and cheap at the path counts Braid runs).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SedpfConfig {}

impl SchedulerFactory for SedpfConfig {
    fn build(&self) -> Box<dyn Scheduler> {
        Box::new(Sedpf { model: Model::default() })
    }
}

/// Stochastic EDPF: the path minimising the expected in-order delivery time.
#[derive(Clone, Debug, Default)]
pub struct Sedpf {
    model: Model,
}

impl Sedpf {
    /// E[max(Y, a_q)] for each candidate q, in candidate order (s).
    fn scores(&self, now: Instant, paths: &[PathView], cands: &[Candidate]) -> Vec<f64> {
        let t = secs(now);
        // The previous packets' arrivals per path (relative to now, for precision).
        let prev: Vec<(PathId, Gaussian)> = paths
            .iter()
            .filter_map(|p| {
                let a = self.model.last(p, t)?;
                Some((p.id, Gaussian::new(a - t, p.owd_var_us2.max(0.0) / 1e12)))
            })
            .collect();
        cands
            .iter()
            .map(|c| {
                // Y over the other paths; a packet delivered before now cannot delay this
                // one, so Y starts at now (0).
                let y = max_all(
                    std::iter::once(Gaussian::point(0.0))
                        .chain(prev.iter().filter(|(id, _)| *id != c.id).map(|(_, g)| *g)),
                )
                .unwrap_or(Gaussian::point(0.0));
                max2(y, Gaussian::new(c.arrival - t, c.var)).mean
            })
            .collect()
    }
}

impl Scheduler for Sedpf {
    fn select(&mut self, now: Instant, paths: &[PathView], bytes: usize, out: &mut Vec<PathId>) {
        let cands = self.model.candidates(now, paths, bytes);
        let scores = self.scores(now, paths, &cands);
        let best = cands
            .iter()
            .zip(&scores)
            .min_by(|(a, sa), (b, sb)| sa.total_cmp(sb).then(a.id.cmp(&b.id)))
            .map(|(c, _)| *c);
        self.model.commit(best, out);
    }

    fn on_send_state(&mut self, state: SendState) {
        self.model.send = state;
    }

    fn name(&self) -> &'static str {
        "sedpf"
    }
}

#[cfg(test)]
mod tests {
    use super::super::minrtt::testkit::*;
    use super::*;
    use std::time::Duration;

    const NOW: Instant = Instant::from_micros(1_000_000);

    /// A path with a one-way delay (ms), its sd (ms), a window and nothing in flight.
    fn path(id: u32, owd_ms: u64, sd_ms: f64, cwnd: u64) -> PathView {
        let mut v = view(id, 2 * owd_ms);
        v.owd = Some(Duration::from_millis(owd_ms));
        v.owd_var_us2 = (sd_ms * 1000.0).powi(2);
        v.cwnd = cwnd;
        v
    }

    fn run(s: &mut dyn Scheduler, paths: &[PathView], unsent: u64) -> Vec<PathId> {
        s.on_send_state(SendState { unsent_bytes: unsent, window_bytes: 1 << 30 });
        let mut out = Vec::new();
        s.select(NOW, paths, 1200, &mut out);
        out
    }

    #[test]
    fn edpf_picks_the_earliest_arrival_not_the_lowest_rtt() {
        // Path 0: 20 ms but 12 kB per 40 ms (300 kB/s): 1200 B take 4 ms → 24 ms.
        // Path 1: 22 ms, 1.2 MB per 44 ms: 1200 B take 0.04 ms → 22.04 ms.
        let paths = [path(0, 20, 0.0, 12_000), path(1, 22, 0.0, 1_200_000)];
        let mut e = EdpfConfig::default().build();
        assert_eq!(run(e.as_mut(), &paths, 1200), vec![PathId(1)]);
        assert_eq!(e.name(), "edpf");
    }

    #[test]
    fn edpf_spreads_a_burst_as_the_fast_path_queues() {
        // Two equal-rate paths 10 ms apart: the first packets go on the faster one until
        // its expected arrival passes the slower one's.
        let mut paths = [path(0, 50, 0.0, 125_000), path(1, 60, 0.0, 125_000)];
        let mut e = EdpfConfig::default().build();
        let mut on = [0u32; 2];
        for _ in 0..40 {
            let out = run(e.as_mut(), &paths, 1200);
            let id = out[0].0 as usize;
            on[id] += 1;
            paths[id].in_flight += 1200;
        }
        // 1200 B per 0.96 ms at 1.25 MB/s: ~10 packets fill the 10 ms gap.
        assert!(on[0] >= 10 && on[1] >= 10, "{on:?}");
        assert!(on[0] > on[1], "{on:?}");
    }

    #[test]
    fn edpf_waits_for_a_full_fast_path_with_a_small_backlog_only() {
        let mut fast = path(0, 10, 0.0, 120_000);
        fast.in_flight = fast.cwnd;
        let slow = path(1, 100, 0.0, 120_000);
        let mut e = EdpfConfig::default().build();
        // One packet queued: it arrives sooner by waiting for the fast path's window.
        assert_eq!(run(e.as_mut(), &[fast.clone(), slow.clone()], 1200), vec![]);
        // A backlog that takes longer to drain through the fast path than the slow path's
        // delay: use the slow path now.
        assert_eq!(run(e.as_mut(), &[fast, slow], 2_000_000), vec![PathId(1)]);
    }

    #[test]
    fn edpf_never_picks_unusable_or_closed_paths() {
        let mut e = EdpfConfig::default().build();
        let paths = [unusable(path(0, 5, 0.0, 120_000)), path(1, 50, 0.0, 120_000)];
        assert_eq!(run(e.as_mut(), &paths, 1200), vec![PathId(1)]);
        let mut closed = path(0, 5, 0.0, 120_000);
        closed.status = PathStatus::Closed;
        assert_eq!(run(e.as_mut(), &[closed], 1200), vec![]);
        assert_eq!(run(e.as_mut(), &[], 1200), vec![]);
    }

    #[test]
    fn sedpf_avoids_the_variable_path_that_edpf_takes() {
        // Path 1 is 5 ms faster on average but has σ = 100 ms; path 0 is deterministic.
        let paths = [path(0, 50, 0.0, 125_000), path(1, 45, 100.0, 125_000)];
        let mut e = EdpfConfig::default().build();
        let mut s = SedpfConfig::default().build();
        assert_eq!(run(e.as_mut(), &paths, 1200), vec![PathId(1)]);
        assert_eq!(run(s.as_mut(), &paths, 1200), vec![PathId(0)]);
        assert_eq!(s.name(), "sedpf");
    }

    #[test]
    fn sedpf_uses_the_variable_path_once_the_other_queues_enough() {
        // The deterministic path's queue grows with every packet; eventually the expected
        // in-order delivery via the variable path is earlier.
        let mut paths = [path(0, 50, 0.0, 125_000), path(1, 50, 30.0, 125_000)];
        let mut s = SedpfConfig::default().build();
        let mut order = Vec::new();
        for _ in 0..200 {
            let out = run(s.as_mut(), &paths, 1200);
            let id = out[0].0 as usize;
            order.push(id);
            paths[id].in_flight += 1200;
        }
        // Equal means: EDPF would alternate from the start; S-EDPF queues ~11 ms on the
        // deterministic path first (where E[max(Y, a_1)] of the variable path overtakes).
        assert!(order[..10].iter().all(|&i| i == 0), "{order:?}");
        assert!(order.contains(&1), "never used the variable path: {order:?}");
    }
}
