//! Earliest Completion First (Lim, Towsley, Nahum, Gibbens, CoNEXT 2017), as in the Linux
//! out-of-tree MPTCP `mptcp_ecf.c` \[source: ALGORITHMS.md §2\].
//!
//! minRTT picks a path; when that is not the fastest path (lowest srtt among the usable
//! ones, whose window is then full), ECF asks whether waiting for the fast path completes
//! the backlog sooner. With k = max(backlog, cwnd_f) bytes, δ = max(rttvar_f, rttvar_s),
//! β = 1/4 and `waiting` ∈ {0, 1} (hysteresis):
//!
//! ```text
//! wait if  srtt_f·(k + cwnd_f) < cwnd_f·(srtt_s + δ)·(1 + β·waiting)
//!     and  srtt_s·max(backlog, cwnd_s) ≥ cwnd_s·(2·srtt_f + δ)   (then waiting = 1)
//! else use the slow path                                           (waiting = 0 when the
//!                                                                   first test fails)
//! ```
//!
//! The backlog is the send stream's unsent bytes ([`SendState::unsent_bytes`]; the
//! kernel's meta send buffer minus what the subflows hold).

use super::minrtt::{eligible, serving_status};
use super::{PathView, Scheduler, SchedulerFactory, SendState};
use crate::path::{PathId, PathStatus};
use crate::time::Instant;

/// β of the hysteresis (`mptcp_ecf_r_beta` = 4, so β = 1/4).
pub const BETA: f64 = 0.25;

/// Configuration of [`Ecf`]; its own [`SchedulerFactory`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EcfConfig {}

impl SchedulerFactory for EcfConfig {
    fn build(&self) -> Box<dyn Scheduler> {
        Box::new(Ecf::default())
    }
}

/// The ECF scheduler.
#[derive(Clone, Debug, Default)]
pub struct Ecf {
    waiting: bool,
    send: SendState,
}

/// The usable path of the serving status with the lowest srtt, room or not.
pub(crate) fn fastest(paths: &[PathView]) -> Option<&PathView> {
    let status = serving_status(paths);
    paths
        .iter()
        .filter(|p| p.usable && p.status == status && p.status != PathStatus::Closed)
        .min_by_key(|p| (p.srtt, p.id))
}

impl Scheduler for Ecf {
    fn select(&mut self, now: Instant, paths: &[PathView], bytes: usize, out: &mut Vec<PathId>) {
        let Some(best) = eligible(paths, now, bytes).min_by_key(|p| (p.srtt, p.id)) else {
            return;
        };
        if let Some(fast) = fastest(paths)
            && fast.id != best.id
        {
            let backlog = self.send.unsent_bytes.max(bytes as u64) as f64;
            let (srtt_f, srtt_s) = (fast.srtt.as_secs_f64(), best.srtt.as_secs_f64());
            let delta = fast.rttvar.max(best.rttvar).as_secs_f64();
            let (cwnd_f, cwnd_s) = (fast.cwnd.max(1) as f64, best.cwnd.max(1) as f64);
            let x_f = backlog.max(cwnd_f);
            let lhs = srtt_f * (x_f + cwnd_f);
            let rhs = cwnd_f * (srtt_s + delta);
            let margin = if self.waiting { BETA } else { 0.0 };
            if lhs < rhs * (1.0 + margin) {
                let x_s = backlog.max(cwnd_s);
                if srtt_s * x_s >= cwnd_s * (2.0 * srtt_f + delta) {
                    self.waiting = true;
                    return;
                }
            } else {
                self.waiting = false;
            }
        }
        out.push(best.id);
    }

    fn on_send_state(&mut self, state: SendState) {
        self.send = state;
    }

    fn name(&self) -> &'static str {
        "ecf"
    }
}

#[cfg(test)]
mod tests {
    use super::super::minrtt::testkit::*;
    use super::*;

    const NOW: Instant = Instant::from_micros(1_000_000);

    fn run(s: &mut dyn Scheduler, paths: &[PathView], unsent: u64) -> Vec<PathId> {
        s.on_send_state(SendState { unsent_bytes: unsent, window_bytes: 1 << 30 });
        let mut out = Vec::new();
        s.select(NOW, paths, 1200, &mut out);
        out
    }

    #[test]
    fn uses_the_fast_path_while_it_has_room() {
        let mut e = EcfConfig::default().build();
        assert_eq!(run(e.as_mut(), &[view(0, 100), view(1, 10)], 1 << 20), vec![PathId(1)]);
        assert_eq!(e.name(), "ecf");
    }

    #[test]
    fn waits_for_a_full_fast_path_when_the_backlog_is_small() {
        // Fast 10 ms with a 12 kB window, slow 200 ms: one packet is better off waiting.
        let mut e = EcfConfig::default().build();
        let paths = [full(view(0, 10)), view(1, 200)];
        assert_eq!(run(e.as_mut(), &paths, 1200), vec![]);
    }

    #[test]
    fn uses_the_slow_path_when_the_backlog_would_take_longer_on_the_fast_one() {
        // 1 MB through a 12 kB / 10 ms window takes ~0.8 s, beyond the slow path's 200 ms.
        let mut e = EcfConfig::default().build();
        let paths = [full(view(0, 10)), view(1, 200)];
        assert_eq!(run(e.as_mut(), &paths, 1_000_000), vec![PathId(1)]);
    }

    #[test]
    fn similar_paths_are_both_used() {
        // Second condition fails: the slow path is not much slower than the fast one.
        let mut e = EcfConfig::default().build();
        let paths = [full(view(0, 20)), view(1, 25)];
        assert_eq!(run(e.as_mut(), &paths, 1200), vec![PathId(1)]);
    }

    #[test]
    fn hysteresis_keeps_waiting_a_little_longer() {
        // A backlog just past the switching point: without the margin the slow path is
        // used; after a wait decision the margin β keeps waiting.
        let paths = [full(view(0, 10)), view(1, 60)];
        // rhs = 12000·(0.06 + 0.03) = 1080; lhs = 0.01·(k + 12000): k = 100 000 → 1120.
        let mut fresh = EcfConfig::default().build();
        assert_eq!(run(fresh.as_mut(), &paths, 100_000), vec![PathId(1)]);
        let mut primed = EcfConfig::default().build();
        assert_eq!(run(primed.as_mut(), &paths, 1200), vec![]);
        assert_eq!(run(primed.as_mut(), &paths, 100_000), vec![]);
    }

    #[test]
    fn nothing_when_no_path_has_room() {
        let mut e = EcfConfig::default().build();
        assert_eq!(run(e.as_mut(), &[full(view(0, 10)), full(view(1, 50))], 1200), vec![]);
    }
}
