//! BLocking ESTimation (Ferlin, Alay, Mehani, Boreli, IFIP Networking 2016), as in the
//! Linux out-of-tree MPTCP `mptcp_blest.c` \[source: ALGORITHMS.md §2\].
//!
//! minRTT picks a path; when that is not the fastest path, BLEST estimates how many bytes
//! the fast path would send during the slow path's "linger time" and skips the slow path
//! if those bytes would not fit in the peer's window next to the slow path's in-flight
//! bytes plus this packet:
//!
//! ```text
//! linger_s   = max(srtt_s, in_flight_s + 1 pkt ≥ cwnd_s ? max_srtt_s
//!                          : min_srtt_s + (max_srtt_s − min_srtt_s)·inflight_pkts/cwnd_pkts)
//! n          = linger_s / avg_rtt_f + 1,  avg_rtt_f = (min_srtt_f + max_srtt_f)/2
//! fast_bytes = λ · mss · (cwnd_pkts_f + (n − 1)/2) · n     (congestion avoidance growth)
//! skip the slow path if fast_bytes > window − (bytes + in_flight_s)
//! ```
//!
//! λ adapts between 1.0 and 1.3 (start 1.2) once per fast-path min-RTT: +0.04 after a
//! retransmission in the last interval, −0.01 otherwise. Deviations (docs/ALGORITHMS.md):
//! the kernel's slow-start branch (packets = cwnd·(2ⁿ − 1)) needs the controller's
//! ssthresh, which schedulers do not see, so the congestion-avoidance estimate is used
//! throughout; and the retransmission signal is the kernel's opportunistic
//! retransmission, which Braid does not perform, so λ is raised when a packet the
//! scheduler sent on the slow path is followed by a full-window wait instead.

use std::collections::BTreeMap;
use std::time::Duration;

use super::ecf::fastest;
use super::minrtt::eligible;
use super::{PathView, Scheduler, SchedulerFactory, SendState};
use crate::path::PathId;
use crate::time::Instant;

/// λ bounds and steps, ×1000 (`min_lambda`, `max_lambda`, `lambda`, `dyn_lambda_good`,
/// `dyn_lambda_bad` of `mptcp_blest.c`, which counts in tenths and thousandths).
const LAMBDA_MIN: i32 = 1000;
const LAMBDA_MAX: i32 = 1300;
const LAMBDA_START: i32 = 1200;
const LAMBDA_GOOD: i32 = 10;
const LAMBDA_BAD: i32 = 40;

/// Configuration of [`Blest`]; its own [`SchedulerFactory`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BlestConfig {}

impl SchedulerFactory for BlestConfig {
    fn build(&self) -> Box<dyn Scheduler> {
        Box::new(Blest {
            lambda_1000: LAMBDA_START,
            last_update: None,
            bad: false,
            srtt_range: BTreeMap::new(),
            send: SendState::default(),
            sent_slow: false,
        })
    }
}

/// The BLEST scheduler.
#[derive(Clone, Debug)]
pub struct Blest {
    lambda_1000: i32,
    last_update: Option<Instant>,
    /// A blocking event since the last λ update.
    bad: bool,
    /// Smallest and largest srtt seen per path.
    srtt_range: BTreeMap<PathId, (Duration, Duration)>,
    send: SendState,
    /// The previous decision sent on a slower path.
    sent_slow: bool,
}

impl Blest {
    /// λ as a factor.
    pub fn lambda(&self) -> f64 {
        f64::from(self.lambda_1000) / 1000.0
    }

    fn range(&self, p: &PathView) -> (f64, f64) {
        let (lo, hi) = self.srtt_range.get(&p.id).copied().unwrap_or((p.srtt, p.srtt));
        (lo.as_secs_f64(), hi.as_secs_f64())
    }

    fn update_lambda(&mut self, now: Instant, fast_min_srtt: Duration) {
        if self.last_update.is_some_and(|t| now.saturating_duration_since(t) < fast_min_srtt) {
            return;
        }
        self.lambda_1000 += if self.bad { LAMBDA_BAD } else { -LAMBDA_GOOD };
        self.lambda_1000 = self.lambda_1000.clamp(LAMBDA_MIN, LAMBDA_MAX);
        self.bad = false;
        self.last_update = Some(now);
    }
}

impl Scheduler for Blest {
    fn select(&mut self, now: Instant, paths: &[PathView], bytes: usize, out: &mut Vec<PathId>) {
        for p in paths.iter().filter(|p| p.usable) {
            let e = self.srtt_range.entry(p.id).or_insert((p.srtt, p.srtt));
            e.0 = e.0.min(p.srtt);
            e.1 = e.1.max(p.srtt);
        }
        let Some(best) = eligible(paths, now, bytes).min_by_key(|p| (p.srtt, p.id)) else {
            if self.sent_slow {
                // The packet on the slow path was followed by a full window everywhere.
                self.bad = true;
                self.sent_slow = false;
            }
            return;
        };
        let mut slow = false;
        if let Some(fast) = fastest(paths)
            && fast.id != best.id
        {
            let fast_min = self.srtt_range.get(&fast.id).map_or(fast.srtt, |r| r.0);
            self.update_lambda(now, fast_min);
            let mss = bytes.max(1) as f64;
            // Linger time of the slow path.
            let (min_s, max_s) = self.range(best);
            let inflight = best.in_flight as f64 / mss + 1.0;
            let cwnd = (best.cwnd as f64 / mss).max(1.0);
            let est =
                if inflight >= cwnd { max_s } else { min_s + (max_s - min_s) * inflight / cwnd };
            let linger = best.srtt.as_secs_f64().max(est);
            // Bytes the fast path sends meanwhile.
            let (min_f, max_f) = self.range(fast);
            let avg = (min_f + max_f) / 2.0;
            let n = if avg > 0.0 { (linger / avg).floor() + 1.0 } else { 1.0 };
            let cwnd_f = (fast.cwnd as f64 / mss).max(1.0).floor();
            let packets = (cwnd_f + ((n - 1.0) / 2.0).floor()) * n;
            let fast_bytes = packets * mss * self.lambda();
            let slow_bytes = (bytes as u64).saturating_add(best.in_flight);
            let avail = self.send.window_bytes.saturating_sub(slow_bytes) as f64;
            if fast_bytes > avail {
                return;
            }
            slow = true;
        }
        self.sent_slow = slow;
        out.push(best.id);
    }

    fn on_send_state(&mut self, state: SendState) {
        self.send = state;
    }

    fn name(&self) -> &'static str {
        "blest"
    }
}

#[cfg(test)]
mod tests {
    use super::super::minrtt::testkit::*;
    use super::*;

    const NOW: Instant = Instant::from_micros(1_000_000);

    fn run(s: &mut dyn Scheduler, paths: &[PathView], window: u64) -> Vec<PathId> {
        s.on_send_state(SendState { unsent_bytes: 1 << 20, window_bytes: window });
        let mut out = Vec::new();
        s.select(NOW, paths, 1200, &mut out);
        out
    }

    #[test]
    fn uses_the_fast_path_while_it_has_room() {
        let mut b = BlestConfig::default().build();
        assert_eq!(run(b.as_mut(), &[view(0, 100), view(1, 10)], 100_000), vec![PathId(1)]);
        assert_eq!(b.name(), "blest");
    }

    #[test]
    fn skips_the_slow_path_when_the_window_could_block_the_fast_one() {
        // Fast 10 ms, 10-packet window; slow 200 ms: in the slow path's linger time the
        // fast path sends (10 + 10)·21 packets ≈ 300 kB > a 100 kB window.
        let mut b = BlestConfig::default().build();
        assert_eq!(run(b.as_mut(), &[full(view(0, 10)), view(1, 200)], 100_000), vec![]);
    }

    #[test]
    fn uses_the_slow_path_when_the_window_is_large() {
        let mut b = BlestConfig::default().build();
        assert_eq!(
            run(b.as_mut(), &[full(view(0, 10)), view(1, 200)], 100_000_000),
            vec![PathId(1)]
        );
    }

    #[test]
    fn lambda_decays_without_blocking_and_rises_after_it() {
        let cfg = BlestConfig::default();
        let mut b = Blest {
            lambda_1000: LAMBDA_START,
            last_update: None,
            bad: false,
            srtt_range: BTreeMap::new(),
            send: SendState::default(),
            sent_slow: false,
        };
        let _ = cfg;
        b.update_lambda(NOW, Duration::from_millis(10));
        assert_eq!(b.lambda_1000, LAMBDA_START - LAMBDA_GOOD);
        // Within one fast-path RTT nothing changes.
        b.bad = true;
        b.update_lambda(NOW + Duration::from_millis(5), Duration::from_millis(10));
        assert_eq!(b.lambda_1000, LAMBDA_START - LAMBDA_GOOD);
        for i in 1..20 {
            b.bad = true;
            b.update_lambda(NOW + Duration::from_millis(20 * i), Duration::from_millis(10));
        }
        assert_eq!(b.lambda_1000, LAMBDA_MAX);
        for i in 20..100 {
            b.update_lambda(NOW + Duration::from_millis(20 * i), Duration::from_millis(10));
        }
        assert_eq!(b.lambda_1000, LAMBDA_MIN);
    }
}
