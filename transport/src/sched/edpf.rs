//! Earliest Delivery Path First (EDPF; Chebrolu & Rao, IEEE TMC 2006 \[recalled\]) and its
//! stochastic form S-EDPF (Garcia-Saavedra, Karzand, Leith: "Low delay random linear coding
//! and scheduling over multiple interfaces", IEEE TMC; eq. 9) \[source: ALGORITHMS.md §2\].
//!
//! Both model each path j by its one-way delay D_j (the measured mean, or srtt/2 before a
//! sample), its delivery rate B_j (the pacing rate, else window/srtt) and A_j, the expected
//! arrival of the last packet assigned to it:
//!
//! ```text
//! d_j = max(now + D_j, A_j) + L/B_j          the expected arrival of a packet of L bytes
//! ```
//!
//! EDPF assigns each packet, in stream order, to argmin d_j and sets A_j = d_j. S-EDPF
//! treats the arrival on j as a_j ~ N(d_j, σ_j²) (σ_j² the measured one-way-delay
//! variance) and assigns the packet to the path minimising the expected **in-order**
//! delivery time E[max(Y, a_j)], where Y is the delivery time of the packets before it:
//! the maximum over the other paths of N(A_p, σ_p²), folded pairwise by Clark's rule
//! ([`super::clark`]). On one path packets arrive in order (the paper's Assumption 1), so
//! the path's own previous packet is not in Y when the path itself is scored.
//!
//! Per-path queues in a window-based transport: in the papers every path has its own
//! sender queue, so a packet assigned to a slow path leaves at once while the packets
//! before it still wait for the fast path. Here the connection asks whenever a path may
//! send. The scheduler then plans the backlog (up to [`LOOKAHEAD`] packets) as the papers'
//! rule would assign it, from the paths' current state: packets assigned to paths that
//! cannot send now only advance those paths' A_j. The first packet that lands on a path
//! that can send now is sent there, skipping the packets planned for the others
//! ([`Scheduler::ahead_bytes`]); they leave later, in order, when their paths' windows
//! open. When the plan puts every backlog packet on paths that cannot send, nothing is
//! sent now. Nothing is kept of a plan but the A_j of packets actually sent.

use super::clark::{Gaussian, max_all, max2};
use super::minrtt::{can_send_now, serving_status};
use super::{PathView, Scheduler, SchedulerFactory, SendState};
use crate::path::{PathId, PathStatus};
use crate::time::Instant;
use std::collections::BTreeMap;

/// The smallest RTT used in rate estimates (guards window/srtt against a zero srtt).
const MIN_RTT_S: f64 = 1e-3;

/// How many backlog packets a plan looks at.
pub const LOOKAHEAD: usize = 1024;

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

/// How a plan chooses among the paths for one packet.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Rule {
    /// Earliest expected arrival.
    Edpf,
    /// Earliest expected in-order delivery.
    Sedpf,
}

/// One path in a plan.
#[derive(Clone, Copy, Debug)]
struct Lane {
    id: PathId,
    ready: bool,
    /// Earliest time the path's next packet can arrive without queueing, s from now.
    free: f64,
    /// Seconds per byte.
    per_byte: f64,
    /// Arrival variance, s².
    var: f64,
    /// Expected arrival of the last packet on the path, s from now (sent or planned).
    last: Option<f64>,
}

/// The shared path model of EDPF and S-EDPF.
#[derive(Clone, Debug, Default)]
struct Model {
    /// Expected arrival (s since the clock's zero) of the last packet sent on each path.
    last_arrival: BTreeMap<PathId, f64>,
    /// The path and the bytes the plan charged for the packet chosen last (a full
    /// datagram), until [`Scheduler::on_sent`] says what it carried.
    charged: Option<(PathId, u64, f64)>,
    send: SendState,
    /// Bytes the last chosen packet skips.
    ahead: u64,
    /// Keep the scores of the first round of a plan (tracing).
    explain: bool,
    /// The scores compared in the first round of the last plan, when explaining.
    estimates: Vec<(PathId, f64)>,
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

    fn lanes(&self, now: Instant, paths: &[PathView], bytes: usize) -> Vec<Lane> {
        let t = secs(now);
        let status = serving_status(paths);
        paths
            .iter()
            .filter(|p| p.usable && p.status == status && p.status != PathStatus::Closed)
            .map(|p| {
                let pace = p.next_send_time.map_or(0.0, |n| (secs(n) - t).max(0.0));
                Lane {
                    id: p.id,
                    ready: can_send_now(p, now, bytes),
                    free: pace + one_way_delay(p),
                    per_byte: 1.0 / delivery_rate(p),
                    var: p.owd_var_us2.max(0.0) / 1e12,
                    last: self.last(p, t).map(|a| a - t),
                }
            })
            .collect()
    }

    /// Plans the backlog; sends on the first ready path a packet lands on.
    fn select(
        &mut self,
        rule: Rule,
        now: Instant,
        paths: &[PathView],
        bytes: usize,
        out: &mut Vec<PathId>,
    ) {
        self.ahead = 0;
        self.estimates.clear();
        let mut lanes = self.lanes(now, paths, bytes);
        if !lanes.iter().any(|l| l.ready) {
            return;
        }
        let len = bytes.max(1) as f64;
        let backlog = self.send.unsent_bytes.max(bytes as u64).div_ceil(bytes.max(1) as u64);
        let n = usize::try_from(backlog).unwrap_or(LOOKAHEAD).clamp(1, LOOKAHEAD);
        for k in 0..n {
            let arrival = |l: &Lane| l.free.max(l.last.unwrap_or(0.0)) + len * l.per_byte;
            let score = |i: usize, l: &Lane| match rule {
                Rule::Edpf => arrival(l),
                Rule::Sedpf => {
                    // Y over the other paths; a packet delivered before now cannot delay
                    // this one, so Y starts at now (0).
                    let others = lanes
                        .iter()
                        .enumerate()
                        .filter(|&(j, _)| j != i)
                        .filter_map(|(_, o)| o.last.map(|a| Gaussian::new(a, o.var)));
                    let y = max_all(std::iter::once(Gaussian::point(0.0)).chain(others))
                        .unwrap_or(Gaussian::point(0.0));
                    max2(y, Gaussian::new(arrival(l), l.var)).mean
                }
            };
            if self.explain && k == 0 {
                self.estimates =
                    lanes.iter().enumerate().map(|(i, l)| (l.id, score(i, l))).collect();
            }
            let Some((best, _)) = lanes
                .iter()
                .enumerate()
                .map(|(i, l)| (i, score(i, l)))
                .min_by(|(i, a), (j, b)| a.total_cmp(b).then(lanes[*i].id.cmp(&lanes[*j].id)))
            else {
                return;
            };
            let a = arrival(&lanes[best]);
            if lanes[best].ready {
                self.last_arrival.insert(lanes[best].id, secs(now) + a);
                self.charged = Some((lanes[best].id, bytes as u64, lanes[best].per_byte));
                self.ahead = k as u64 * bytes as u64;
                out.push(lanes[best].id);
                return;
            }
            lanes[best].last = Some(a);
        }
    }
}

impl Model {
    /// The packet chosen last carried `data_bytes`: the plan charged its path for a full
    /// datagram, so the expected arrival of its last packet moves back by the difference
    /// (a message's short tail is not a full packet's transmission time).
    fn on_sent(&mut self, path: PathId, data_bytes: u64) {
        let Some((p, charged, per_byte)) = self.charged.take() else { return };
        if p != path {
            return;
        }
        if let Some(a) = self.last_arrival.get_mut(&path) {
            *a -= charged.saturating_sub(data_bytes) as f64 * per_byte;
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
    fn wants_one_way_delays(&self) -> bool {
        true
    }
}

/// Earliest Delivery Path First: the path with the earliest expected arrival.
#[derive(Clone, Debug, Default)]
pub struct Edpf {
    model: Model,
}

impl Scheduler for Edpf {
    fn select(&mut self, now: Instant, paths: &[PathView], bytes: usize, out: &mut Vec<PathId>) {
        self.model.select(Rule::Edpf, now, paths, bytes, out);
    }

    fn on_send_state(&mut self, state: SendState) {
        self.model.send = state;
    }

    fn ahead_bytes(&self) -> u64 {
        self.model.ahead
    }

    fn on_sent(&mut self, _now: Instant, path: PathId, data_bytes: u64) {
        self.model.on_sent(path, data_bytes);
    }

    fn name(&self) -> &'static str {
        "edpf"
    }

    fn set_explain(&mut self, on: bool) {
        self.model.explain = on;
    }

    fn estimates(&self) -> &[(PathId, f64)] {
        &self.model.estimates
    }
}

/// Configuration of [`Sedpf`]; its own [`SchedulerFactory`]. Y is recomputed for every
/// packet (the paper refreshes its Z_p on a 250–500 ms timer, Theorem 1, to save work; the
/// fold is O(P) and cheap at the path counts Braid runs).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SedpfConfig {}

impl SchedulerFactory for SedpfConfig {
    fn build(&self) -> Box<dyn Scheduler> {
        Box::new(Sedpf::default())
    }
    fn wants_one_way_delays(&self) -> bool {
        true
    }
}

/// Stochastic EDPF: the path minimising the expected in-order delivery time.
#[derive(Clone, Debug, Default)]
pub struct Sedpf {
    model: Model,
}

impl Scheduler for Sedpf {
    fn select(&mut self, now: Instant, paths: &[PathView], bytes: usize, out: &mut Vec<PathId>) {
        self.model.select(Rule::Sedpf, now, paths, bytes, out);
    }

    fn on_send_state(&mut self, state: SendState) {
        self.model.send = state;
    }

    fn ahead_bytes(&self) -> u64 {
        self.model.ahead
    }

    fn on_sent(&mut self, _now: Instant, path: PathId, data_bytes: u64) {
        self.model.on_sent(path, data_bytes);
    }

    fn name(&self) -> &'static str {
        "sedpf"
    }

    fn set_explain(&mut self, on: bool) {
        self.model.explain = on;
    }

    fn estimates(&self) -> &[(PathId, f64)] {
        &self.model.estimates
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
    fn edpf_sends_ahead_on_the_slow_path_once_the_backlog_covers_the_gap() {
        // Fast path full (6 MB/s, 10 ms), slow path 30 ms with room: EDPF plans the first
        // 100 packets (0.2 ms each) on the fast path; with fewer queued it waits, with
        // more the slow path takes packet ~100 now.
        let mut fast = path(0, 10, 0.0, 120_000);
        fast.in_flight = fast.cwnd;
        let slow = path(1, 30, 0.0, 120_000);
        let mut e = EdpfConfig::default().build();
        assert_eq!(run(e.as_mut(), &[fast.clone(), slow.clone()], 1200), vec![]);
        assert_eq!(e.ahead_bytes(), 0);
        assert_eq!(run(e.as_mut(), &[fast.clone(), slow.clone()], 50 * 1200), vec![]);
        assert_eq!(run(e.as_mut(), &[fast, slow], 2_000_000), vec![PathId(1)]);
        let skipped = e.ahead_bytes() / 1200;
        assert!((95..=105).contains(&skipped), "skipped {skipped} packets");
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
    fn a_short_packet_charges_its_path_for_its_own_bytes_only() {
        // Two 1200-byte slots per ms on path 0 (1.2 MB/s); after a 100-byte packet the next
        // one is expected 1100 bytes' time (~0.92 ms) earlier than after a full one.
        let mut p0 = path(0, 50, 0.0, 120_000);
        p0.in_flight = 1200;
        let next_arrival = |short: bool| {
            let mut e = Edpf::default();
            let mut out = Vec::new();
            e.on_send_state(SendState { unsent_bytes: 1200, window_bytes: 1 << 30 });
            e.select(NOW, std::slice::from_ref(&p0), 1200, &mut out);
            e.on_sent(NOW, PathId(0), if short { 100 } else { 1200 });
            e.model.last_arrival[&PathId(0)]
        };
        let saved = next_arrival(false) - next_arrival(true);
        assert!((saved - 1100.0 / 1.2e6).abs() < 1e-6, "{saved}");
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
