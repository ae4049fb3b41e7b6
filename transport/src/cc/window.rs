//! Per-path window state shared by the window-based controllers ([`Reno`](super::reno::Reno),
//! [`Lia`](super::lia::Lia), [`Olia`](super::olia::Olia)).
//!
//! **Units.** Windows and thresholds are **bytes**. They are kept as `f64` so that the
//! fractional per-ACK increases of congestion avoidance (`MSS·acked/cwnd`, a few bytes each)
//! accumulate without per-ACK rounding; [`PathWindow::window`] rounds down to whole bytes.
//! Only `+ − × ÷` are used, which IEEE 754 defines exactly, so results are deterministic.
//! Every update is clamped to `[min_window, max_window]`, and a non-finite increase is
//! ignored, so the window is never NaN, never infinite and never below the minimum.
//!
//! What is shared (RFC 5681 / RFC 6582 NewReno, as used by RFC 6356 and OLIA):
//! - initial window per RFC 6928;
//! - slow start (`cwnd += acked` while `cwnd < ssthresh`);
//! - one reduction per loss event (`ssthresh = max(cwnd/2, min_window)`, `cwnd = ssthresh`),
//!   ACKs of packets sent before the reduction do not grow the window (recovery), and later
//!   congestion events for such packets are folded into the same event;
//! - persistent congestion (RTO-style collapse): `cwnd = min_window`;
//! - growth only while the window limits sending (RFC 7661, RFC 9002 §7.8), so an
//!   application-limited stream does not inflate its window without bound.
//!
//! The congestion-avoidance increase is the controller's business: [`PathWindow::on_ack`]
//! returns [`AckPhase::CongestionAvoidance`] and the controller calls
//! [`PathWindow::add`] with the amount its algorithm gives.

use std::time::Duration;

use crate::time::Instant;

/// Window parameters common to Reno, LIA and OLIA.
#[derive(Clone, Debug, PartialEq)]
pub struct WindowConfig {
    /// Initial window in packets of the path's MSS. RFC 6928: 10 \[source\].
    pub initial_window_packets: u32,
    /// RFC 6928's byte cap: `IW = min(n·MSS, max(2·MSS, cap))` with cap = 14 600 bytes
    /// \[source\]. `None`: `IW = n·MSS`.
    pub initial_window_cap_bytes: Option<u64>,
    /// The smallest window, in packets: the floor of a loss reduction and the window after
    /// persistent congestion. 2 = RFC 5681 §3.1 eq. (4) `max(FlightSize/2, 2·SMSS)` and
    /// RFC 9002 `kMinimumWindow` \[source\]. (RFC 5681's loss window after an RTO is 1 MSS;
    /// set 1 here for that.) Values below 1 count as 1.
    pub min_window_packets: u32,
    /// The largest window, bytes (keeps arithmetic far from overflow).
    pub max_window_bytes: u64,
    /// Grow the window only while it limits sending (RFC 7661; RFC 9002 §7.8; Linux
    /// `tcp_is_cwnd_limited`). Needs the connection's `in_flight` in
    /// [`Controller::on_sent`](super::Controller::on_sent).
    pub require_cwnd_limited: bool,
}

impl WindowConfig {
    /// The defaults: IW 10 packets capped at 14 600 bytes, minimum 2 packets, maximum 1 GiB,
    /// growth only when window-limited.
    pub const DEFAULT: WindowConfig = WindowConfig {
        initial_window_packets: 10,
        initial_window_cap_bytes: Some(14_600),
        min_window_packets: 2,
        max_window_bytes: 1 << 30,
        require_cwnd_limited: true,
    };
}

impl Default for WindowConfig {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// What an ACK did to a path's window, as reported by [`PathWindow::on_ack`].
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum AckPhase {
    /// The packet was sent before the last reduction (recovery): no growth.
    Recovery,
    /// The window did not limit sending lately: no growth.
    NotWindowLimited,
    /// Slow start: the window already grew by the acknowledged bytes.
    SlowStart,
    /// Congestion avoidance: the controller decides the increase.
    CongestionAvoidance,
}

/// The smoothed RTT floor used in rate terms such as `cwnd/rtt` (avoids division by zero).
pub const MIN_RTT_FOR_RATES: Duration = Duration::from_micros(1);

/// One path's window state. See the [module docs](self) for the rules and units.
#[derive(Clone, Debug)]
pub struct PathWindow {
    mss: u64,
    /// Congestion window, bytes.
    cwnd: f64,
    /// Slow-start threshold, bytes; infinite until the first loss event.
    ssthresh: f64,
    min_window: f64,
    max_window: f64,
    require_cwnd_limited: bool,
    /// When the last reduction happened: packets sent at or before it are "in recovery".
    recovery_start: Option<Instant>,
    /// ACKs of packets sent at or after this instant close the current round trip.
    round_start: Instant,
    /// Largest `in_flight` reported by `on_sent` in the current and the previous round trip.
    peak_in_flight: u64,
    prev_peak_in_flight: u64,
    /// Smoothed RTT from the latest ACK.
    srtt: Option<Duration>,
    /// Bytes newly acknowledged since the path was added (saturating).
    acked_bytes: u64,
}

impl PathWindow {
    /// A fresh path with the initial window. `mss` is in bytes (0 counts as 1).
    pub fn new(now: Instant, mss: usize, config: &WindowConfig) -> Self {
        let mss = (mss as u64).max(1);
        let min_window = (config.min_window_packets.max(1) as u64).saturating_mul(mss);
        let max_window = config.max_window_bytes.max(min_window);
        let mut iw = (config.initial_window_packets as u64).saturating_mul(mss);
        if let Some(cap) = config.initial_window_cap_bytes {
            // RFC 6928 §2: IW = min(10·MSS, max(2·MSS, 14600)).
            iw = iw.min(mss.saturating_mul(2).max(cap));
        }
        let cwnd = iw.clamp(min_window, max_window);
        PathWindow {
            mss,
            cwnd: cwnd as f64,
            ssthresh: f64::INFINITY,
            min_window: min_window as f64,
            max_window: max_window as f64,
            require_cwnd_limited: config.require_cwnd_limited,
            recovery_start: None,
            round_start: now,
            peak_in_flight: 0,
            prev_peak_in_flight: 0,
            srtt: None,
            acked_bytes: 0,
        }
    }

    /// The datagram size changed (path MTU discovery): growth per acknowledged byte and the
    /// minimum window follow the new size; the window itself is kept (at least the new
    /// minimum).
    pub fn set_mss(&mut self, mss: usize) {
        let mss = (mss as u64).max(1);
        let packets = self.min_window / self.mss as f64;
        self.min_window = (packets * mss as f64).min(self.max_window);
        self.mss = mss;
        self.cwnd = self.cwnd.max(self.min_window);
    }

    /// The path's MSS, bytes.
    pub fn mss(&self) -> u64 {
        self.mss
    }

    /// The congestion window, bytes, with its fractional part.
    pub fn cwnd(&self) -> f64 {
        self.cwnd
    }

    /// The congestion window in whole bytes (what the connection may have in flight).
    pub fn window(&self) -> u64 {
        // `cwnd` is finite and within [min_window, max_window] ⊂ u64.
        self.cwnd as u64
    }

    /// The congestion window in whole packets (rounded down).
    pub fn window_packets(&self) -> u64 {
        self.window() / self.mss
    }

    /// The minimum window, bytes.
    pub fn min_window(&self) -> u64 {
        self.min_window as u64
    }

    /// The slow-start threshold in bytes, `None` before the first loss event.
    pub fn ssthresh(&self) -> Option<u64> {
        self.ssthresh.is_finite().then_some(self.ssthresh as u64)
    }

    /// Whether the path is in slow start (`cwnd < ssthresh`).
    pub fn in_slow_start(&self) -> bool {
        self.cwnd < self.ssthresh
    }

    /// Whether a packet sent at `sent` belongs to the current recovery period.
    pub fn in_recovery(&self, sent: Instant) -> bool {
        self.recovery_start.is_some_and(|start| sent <= start)
    }

    /// The smoothed RTT of the latest ACK, `None` before the first.
    pub fn srtt(&self) -> Option<Duration> {
        self.srtt
    }

    /// The smoothed RTT in seconds for rate terms, at least [`MIN_RTT_FOR_RATES`].
    pub fn srtt_secs(&self) -> Option<f64> {
        self.srtt.map(|d| d.max(MIN_RTT_FOR_RATES).as_secs_f64())
    }

    /// Bytes newly acknowledged on the path since it was added (saturating).
    pub fn acked_bytes(&self) -> u64 {
        self.acked_bytes
    }

    /// Whether the window limited sending over the last round trip (see
    /// [`WindowConfig::require_cwnd_limited`]). In slow start: the peak in flight was at
    /// least half the window (Linux `tcp_is_cwnd_limited`); in congestion avoidance: less
    /// than one MSS of the window stayed unused.
    pub fn is_cwnd_limited(&self) -> bool {
        if !self.require_cwnd_limited {
            return true;
        }
        let peak = self.peak_in_flight.max(self.prev_peak_in_flight) as f64;
        if self.in_slow_start() {
            2.0 * peak >= self.cwnd
        } else {
            peak + self.mss as f64 >= self.cwnd
        }
    }

    /// A packet was sent; `in_flight` is the path's bytes in flight after the send.
    pub fn on_sent(&mut self, in_flight: u64) {
        self.peak_in_flight = self.peak_in_flight.max(in_flight);
    }

    /// `bytes` sent at `sent` were newly acknowledged. Records the RTT, grows the window in
    /// slow start, and says which rule applies.
    pub fn on_ack(
        &mut self,
        now: Instant,
        sent: Instant,
        bytes: usize,
        smoothed_rtt: Duration,
    ) -> AckPhase {
        self.srtt = Some(smoothed_rtt);
        self.acked_bytes = self.acked_bytes.saturating_add(bytes as u64);
        if sent >= self.round_start {
            // A packet sent after the previous round began is acknowledged: one round trip.
            self.prev_peak_in_flight = self.peak_in_flight;
            self.peak_in_flight = 0;
            self.round_start = now;
        }
        if self.in_recovery(sent) {
            return AckPhase::Recovery;
        }
        if !self.is_cwnd_limited() {
            return AckPhase::NotWindowLimited;
        }
        if self.in_slow_start() {
            // RFC 5681 §3.1 (byte counting, RFC 3465): cwnd += acked while cwnd < ssthresh.
            self.add(bytes as f64);
            AckPhase::SlowStart
        } else {
            AckPhase::CongestionAvoidance
        }
    }

    /// Changes the window by `delta` bytes (negative shrinks), clamped to
    /// `[min_window, max_window]`. A non-finite `delta` is ignored.
    pub fn add(&mut self, delta: f64) {
        if delta.is_finite() {
            self.cwnd = (self.cwnd + delta).clamp(self.min_window, self.max_window);
        }
    }

    /// A loss event for a packet sent at `sent`. Returns whether the window was reduced
    /// (`false` when the packet was sent before the current recovery period began and the
    /// event is not persistent congestion).
    pub fn on_congestion_event(&mut self, now: Instant, sent: Instant, persistent: bool) -> bool {
        let already_reduced = self.in_recovery(sent);
        if already_reduced && !persistent {
            return false;
        }
        if !already_reduced {
            // RFC 5681 §3.1 eq. (4) with cwnd for FlightSize (as Linux tcp_reno_ssthresh and
            // RFC 9002 §7.3.2): halve, floor 2·MSS.
            self.ssthresh = (self.cwnd / 2.0).clamp(self.min_window, self.max_window);
            self.cwnd = self.ssthresh;
        }
        if persistent {
            // RFC 9002 §7.6.2: collapse to the minimum window, then slow start to ssthresh.
            self.cwnd = self.min_window;
        }
        self.recovery_start = Some(now);
        true
    }

    /// Sets the window (and, when given, ssthresh), both bytes, clamped to the limits. For
    /// controllers that restore a window from an estimate instead of slow-starting.
    pub fn set_window(&mut self, cwnd: u64, ssthresh: Option<u64>) {
        self.cwnd = (cwnd as f64).clamp(self.min_window, self.max_window);
        if let Some(s) = ssthresh {
            self.ssthresh = (s as f64).clamp(self.min_window, self.max_window);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: usize = 1200;

    fn t(ms: u64) -> Instant {
        Instant::from_micros(ms * 1000)
    }

    #[test]
    fn initial_window_follows_rfc6928() {
        let c = WindowConfig::default();
        assert_eq!(PathWindow::new(t(0), 1200, &c).window(), 12_000);
        assert_eq!(PathWindow::new(t(0), 1460, &c).window(), 14_600);
        assert_eq!(PathWindow::new(t(0), 1500, &c).window(), 14_600);
        // Jumbo frames: max(2·MSS, 14600) = 18000.
        assert_eq!(PathWindow::new(t(0), 9000, &c).window(), 18_000);
        let uncapped = WindowConfig { initial_window_cap_bytes: None, ..c };
        assert_eq!(PathWindow::new(t(0), 1500, &uncapped).window(), 15_000);
    }

    #[test]
    fn a_new_datagram_size_moves_the_minimum_and_keeps_the_window() {
        let c = WindowConfig::default();
        let mut w = PathWindow::new(t(0), 1200, &c);
        w.set_mss(1452);
        assert_eq!((w.mss(), w.window()), (1452, 12_000));
        // The minimum is two datagrams of the new size.
        w.on_congestion_event(t(10), t(5), true);
        assert_eq!(w.window(), 2 * 1452);
        w.set_mss(0);
        assert_eq!(w.mss(), 1);
    }

    #[test]
    fn zero_mss_and_zero_minimum_are_clamped_to_one() {
        let c = WindowConfig {
            min_window_packets: 0,
            initial_window_packets: 0,
            ..WindowConfig::default()
        };
        let w = PathWindow::new(t(0), 0, &c);
        assert_eq!(w.mss(), 1);
        assert_eq!(w.window(), 1);
    }

    #[test]
    fn repeated_events_in_one_recovery_period_reduce_once() {
        let mut w = PathWindow::new(t(0), MSS, &WindowConfig::default());
        assert!(w.on_congestion_event(t(100), t(50), false));
        assert_eq!(w.window(), 6_000);
        assert!(!w.on_congestion_event(t(101), t(60), false));
        assert_eq!(w.window(), 6_000);
        // A packet sent after the reduction starts a new event.
        assert!(w.on_congestion_event(t(200), t(150), false));
        assert_eq!(w.window(), 3_000);
    }

    #[test]
    fn non_finite_increase_is_ignored() {
        let mut w = PathWindow::new(t(0), MSS, &WindowConfig::default());
        w.add(f64::NAN);
        w.add(f64::INFINITY);
        assert_eq!(w.window(), 12_000);
        w.add(-1e300);
        assert_eq!(w.window(), 2_400);
        w.add(1e300);
        assert_eq!(w.window(), 1 << 30);
    }

    #[test]
    fn application_limited_path_does_not_grow() {
        let mut w = PathWindow::new(t(0), MSS, &WindowConfig::default());
        // Only one packet ever in flight: far below half the window.
        for i in 0..20 {
            w.on_sent(MSS as u64);
            let phase = w.on_ack(t(10 * i + 10), t(10 * i), MSS, Duration::from_millis(10));
            assert_eq!(phase, AckPhase::NotWindowLimited);
        }
        assert_eq!(w.window(), 12_000);
    }

    #[test]
    fn set_window_clamps_to_limits() {
        let mut w = PathWindow::new(t(0), MSS, &WindowConfig::default());
        w.set_window(1, Some(5_000));
        assert_eq!(w.window(), 2_400);
        assert_eq!(w.ssthresh(), Some(5_000));
        assert!(w.in_slow_start());
    }
}

/// A tiny packet-level driver for controller tests: paths with fixed RTTs and a sender that
/// always fills the window; packets are acknowledged one RTT after they were sent.
#[cfg(test)]
pub(crate) mod testkit {
    use std::collections::VecDeque;
    use std::time::Duration;

    use crate::cc::{Controller, ControllerFactory, RttSample};
    use crate::path::PathId;
    use crate::time::Instant;

    pub(crate) struct SimPath {
        pub id: PathId,
        pub rtt: Duration,
        pub mss: usize,
        /// Send times of the packets in flight, oldest first.
        pub queue: VecDeque<Instant>,
        pub in_flight: u64,
        pub acked: u64,
    }

    pub(crate) struct Sim {
        pub ctrl: Box<dyn Controller>,
        pub now: Instant,
        pub paths: Vec<SimPath>,
    }

    impl Sim {
        /// Paths `(id, rtt in ms)`, all with `mss`.
        pub fn new(factory: &dyn ControllerFactory, paths: &[(u32, u64)], mss: usize) -> Sim {
            let mut ctrl = factory.build();
            let now = Instant::ZERO;
            let paths = paths
                .iter()
                .map(|&(id, rtt)| {
                    ctrl.on_path_added(now, PathId(id), mss);
                    SimPath {
                        id: PathId(id),
                        rtt: Duration::from_millis(rtt),
                        mss,
                        queue: VecDeque::new(),
                        in_flight: 0,
                        acked: 0,
                    }
                })
                .collect();
            let mut sim = Sim { ctrl, now, paths };
            for i in 0..sim.paths.len() {
                sim.fill(i);
            }
            sim
        }

        pub fn window(&self, i: usize) -> u64 {
            self.ctrl.window(self.paths[i].id)
        }

        pub fn total_window(&self) -> u64 {
            (0..self.paths.len()).map(|i| self.window(i)).sum()
        }

        /// Sends on path `i` while a full packet fits.
        pub fn fill(&mut self, i: usize) {
            loop {
                let p = &mut self.paths[i];
                if p.in_flight + p.mss as u64 > self.ctrl.window(p.id) {
                    break;
                }
                p.in_flight += p.mss as u64;
                p.queue.push_back(self.now);
                self.ctrl.on_sent(self.now, p.id, p.mss, p.in_flight);
            }
        }

        fn earliest(&self) -> Option<(usize, Instant)> {
            self.paths
                .iter()
                .enumerate()
                .filter_map(|(i, p)| p.queue.front().map(|&s| (i, s + p.rtt)))
                .min_by_key(|&(i, due)| (due, i))
        }

        /// Acknowledges the next packet due (any path) and refills its path.
        pub fn step(&mut self) -> bool {
            let Some((i, due)) = self.earliest() else { return false };
            self.now = self.now.max(due);
            let p = &mut self.paths[i];
            let Some(sent) = p.queue.pop_front() else { return false };
            p.in_flight -= p.mss as u64;
            p.acked += p.mss as u64;
            let rtt = RttSample { latest: p.rtt, smoothed: p.rtt, min: p.rtt };
            let (id, mss) = (p.id, p.mss);
            self.ctrl.on_ack(self.now, id, sent, mss, &rtt);
            self.fill(i);
            true
        }

        /// Runs until virtual time reaches `end`.
        pub fn run_until(&mut self, end: Instant) {
            while let Some((_, due)) = self.earliest() {
                if due > end {
                    break;
                }
                self.step();
            }
            self.now = self.now.max(end);
        }

        /// Acknowledges exactly the packets now in flight on path `i` (one round trip of a
        /// single path), refilling after each ACK.
        pub fn round(&mut self, i: usize) {
            let n = self.paths[i].queue.len();
            for _ in 0..n {
                let p = &mut self.paths[i];
                let Some(sent) = p.queue.pop_front() else { return };
                self.now = self.now.max(sent + p.rtt);
                p.in_flight -= p.mss as u64;
                p.acked += p.mss as u64;
                let rtt = RttSample { latest: p.rtt, smoothed: p.rtt, min: p.rtt };
                let (id, mss) = (p.id, p.mss);
                self.ctrl.on_ack(self.now, id, sent, mss, &rtt);
                self.fill(i);
            }
        }

        /// The oldest packet in flight on path `i` is lost (detected one RTT after sending).
        pub fn lose_oldest(&mut self, i: usize) {
            let p = &mut self.paths[i];
            let Some(sent) = p.queue.pop_front() else { return };
            self.now = self.now.max(sent + p.rtt);
            p.in_flight -= p.mss as u64;
            let id = p.id;
            self.ctrl.on_congestion_event(self.now, id, sent, false);
            self.fill(i);
        }
    }

    /// Several flows (each a controller with one or more subflows) through one drop-tail
    /// bottleneck of `rate_bps` bits/s and `queue` bytes, every subflow with the same base
    /// RTT. Each packet reaches the queue after a random 0–2 ms access delay (seeded
    /// xorshift), which keeps drops from locking onto one flow's phase (with exact timing,
    /// the flow whose window grows is always the one dropped). A dropped packet is reported
    /// lost when it would have been acknowledged (the later packets' ACKs reveal it).
    pub(crate) struct Bottleneck {
        pub flows: Vec<(Box<dyn Controller>, Vec<Sub>)>,
        pub now: Instant,
        rate: f64,
        queue: u64,
        base_rtt: Duration,
        busy_until: Instant,
        events: std::collections::BTreeMap<(Instant, u64), Event>,
        seq: u64,
        mss: usize,
        jitter: Duration,
        rng: u64,
    }

    pub(crate) struct Sub {
        pub id: PathId,
        pub in_flight: u64,
        pub delivered: u64,
        srtt: Option<Duration>,
        min_rtt: Duration,
    }

    enum Event {
        Arrive { flow: usize, sub: usize, sent: Instant },
        Ack { flow: usize, sub: usize, sent: Instant },
        Loss { flow: usize, sub: usize, sent: Instant },
    }

    impl Bottleneck {
        pub fn new(rate_bps: u64, queue: u64, base_rtt_ms: u64, mss: usize, seed: u64) -> Self {
            Bottleneck {
                flows: Vec::new(),
                now: Instant::ZERO,
                rate: rate_bps as f64 / 8.0,
                queue,
                base_rtt: Duration::from_millis(base_rtt_ms),
                busy_until: Instant::ZERO,
                events: std::collections::BTreeMap::new(),
                seq: 0,
                mss,
                jitter: Duration::from_millis(2),
                rng: seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1,
            }
        }

        /// Adds a flow with `subflows` paths, all crossing the bottleneck.
        pub fn add_flow(&mut self, factory: &dyn ControllerFactory, subflows: u32) {
            let mut ctrl = factory.build();
            let subs = (0..subflows)
                .map(|i| {
                    ctrl.on_path_added(self.now, PathId(i), self.mss);
                    Sub {
                        id: PathId(i),
                        in_flight: 0,
                        delivered: 0,
                        srtt: None,
                        min_rtt: Duration::MAX,
                    }
                })
                .collect();
            self.flows.push((ctrl, subs));
        }

        fn push(&mut self, at: Instant, e: Event) {
            self.seq += 1;
            self.events.insert((at, self.seq), e);
        }

        fn fill(&mut self, flow: usize, sub: usize) {
            loop {
                let (ctrl, subs) = &mut self.flows[flow];
                let s = &mut subs[sub];
                if s.in_flight + self.mss as u64 > ctrl.window(s.id) {
                    return;
                }
                s.in_flight += self.mss as u64;
                ctrl.on_sent(self.now, s.id, self.mss, s.in_flight);
                // Random access delay before the bottleneck (breaks drop-tail phase effects).
                self.rng ^= self.rng << 13;
                self.rng ^= self.rng >> 7;
                self.rng ^= self.rng << 17;
                let jitter = Duration::from_micros(self.rng % (self.jitter.as_micros() as u64 + 1));
                let sent = self.now;
                self.push(sent + jitter, Event::Arrive { flow, sub, sent });
            }
        }

        fn arrive(&mut self, flow: usize, sub: usize, sent: Instant) {
            let start = self.busy_until.max(self.now);
            let backlog = (start - self.now).as_secs_f64() * self.rate;
            let service = Duration::from_secs_f64(self.mss as f64 / self.rate);
            if backlog + self.mss as f64 > self.queue as f64 {
                let at = start + self.base_rtt;
                self.push(at, Event::Loss { flow, sub, sent });
            } else {
                self.busy_until = start + service;
                let at = self.busy_until + self.base_rtt;
                self.push(at, Event::Ack { flow, sub, sent });
            }
        }

        /// Runs until `end`; counts delivered bytes only after `measure_from`.
        pub fn run(&mut self, end: Instant, measure_from: Instant) {
            for f in 0..self.flows.len() {
                for s in 0..self.flows[f].1.len() {
                    self.fill(f, s);
                }
            }
            while let Some(entry) = self.events.first_entry() {
                if entry.key().0 > end {
                    break;
                }
                let ((at, _), e) = entry.remove_entry();
                self.now = at;
                let mss = self.mss;
                let (flow, sub) = match e {
                    Event::Arrive { flow, sub, sent } => {
                        self.arrive(flow, sub, sent);
                        continue;
                    }
                    Event::Ack { flow, sub, sent } => {
                        let (ctrl, subs) = &mut self.flows[flow];
                        let s = &mut subs[sub];
                        s.in_flight -= mss as u64;
                        if at >= measure_from {
                            s.delivered += mss as u64;
                        }
                        let latest = at - sent;
                        s.min_rtt = s.min_rtt.min(latest);
                        let srtt = s.srtt.map_or(latest, |old| (old * 7 + latest) / 8);
                        s.srtt = Some(srtt);
                        ctrl.on_ack(
                            at,
                            s.id,
                            sent,
                            mss,
                            &RttSample { latest, smoothed: srtt, min: s.min_rtt },
                        );
                        (flow, sub)
                    }
                    Event::Loss { flow, sub, sent } => {
                        let (ctrl, subs) = &mut self.flows[flow];
                        let s = &mut subs[sub];
                        s.in_flight -= mss as u64;
                        ctrl.on_congestion_event(at, s.id, sent, false);
                        (flow, sub)
                    }
                };
                self.fill(flow, sub);
            }
        }

        /// Bytes delivered by flow `f` (all subflows) in the measured period.
        pub fn delivered(&self, f: usize) -> u64 {
            self.flows[f].1.iter().map(|s| s.delivered).sum()
        }
    }
}

/// Model-based property tests: random sequences of sent / acknowledged / lost / time events
/// over 1–3 paths, against the invariants every window-based controller must keep.
#[cfg(test)]
mod model_tests {
    use std::collections::VecDeque;
    use std::time::Duration;

    use proptest::prelude::*;

    use super::{AckPhase, PathWindow};
    use crate::cc::lia::{Lia, LiaConfig};
    use crate::cc::olia::{Olia, OliaConfig};
    use crate::cc::reno::{Reno, RenoConfig, reno_increase};
    use crate::cc::{Controller, RttSample};
    use crate::path::PathId;
    use crate::time::Instant;

    #[derive(Clone, Debug)]
    enum Ev {
        /// Send up to `n` packets of full size on a path (as many as fit).
        Send(usize, u8),
        /// Send one packet of a given size (application-limited tails).
        SendSmall(usize, u16),
        Ack(usize),
        Lose(usize),
        Persistent(usize),
        Advance(u16),
        RemoveAndReadd(usize),
    }

    fn ev(paths: usize) -> impl Strategy<Value = Ev> {
        let p = 0..paths;
        prop_oneof![
            4 => (p.clone(), 1u8..40).prop_map(|(p, n)| Ev::Send(p, n)),
            1 => (p.clone(), 1u16..1500).prop_map(|(p, b)| Ev::SendSmall(p, b)),
            8 => p.clone().prop_map(Ev::Ack),
            1 => p.clone().prop_map(Ev::Lose),
            1 => p.clone().prop_map(Ev::Persistent),
            3 => (0u16..500).prop_map(Ev::Advance),
            1 => p.prop_map(Ev::RemoveAndReadd),
        ]
    }

    #[derive(Clone, Debug)]
    struct PathSpec {
        mss: usize,
        rtt_ms: u64,
    }

    fn scenario() -> impl Strategy<Value = (Vec<PathSpec>, Vec<Ev>)> {
        prop::collection::vec(
            (500usize..=1500, 1u64..400).prop_map(|(mss, rtt_ms)| PathSpec { mss, rtt_ms }),
            1..=3,
        )
        .prop_flat_map(|specs| {
            let n = specs.len();
            (Just(specs), prop::collection::vec(ev(n), 1..400))
        })
    }

    /// How much more than Reno a controller may add on one ACK in congestion avoidance,
    /// as a multiple of Reno's increase.
    #[derive(Copy, Clone)]
    enum Bound {
        /// At most Reno's increase (Reno itself, LIA).
        Reno,
        /// At most `1 + 1/2` Reno's: OLIA's first term is ≤ Reno's and |α_r| ≤ 1/2.
        RenoTimes(f64),
    }

    /// Runs `events` against controller `c`, checking the invariants after every event.
    /// Returns the final windows.
    fn run<C: Controller>(
        mut c: C,
        view: fn(&C, PathId) -> Option<&PathWindow>,
        specs: &[PathSpec],
        events: &[Ev],
        bound: Bound,
    ) -> Result<Vec<u64>, TestCaseError> {
        let mut now = Instant::ZERO;
        let mut queues: Vec<VecDeque<(Instant, usize)>> = vec![VecDeque::new(); specs.len()];
        let mut in_flight = vec![0u64; specs.len()];
        for (i, s) in specs.iter().enumerate() {
            c.on_path_added(now, PathId(i as u32), s.mss);
        }
        for e in events {
            match *e {
                Ev::Send(p, n) => {
                    for _ in 0..n {
                        let size = specs[p].mss;
                        if in_flight[p] + size as u64 > c.window(PathId(p as u32)) {
                            break;
                        }
                        in_flight[p] += size as u64;
                        queues[p].push_back((now, size));
                        c.on_sent(now, PathId(p as u32), size, in_flight[p]);
                    }
                }
                Ev::SendSmall(p, b) => {
                    let size = b as usize;
                    if in_flight[p] + size as u64 <= c.window(PathId(p as u32)) {
                        in_flight[p] += size as u64;
                        queues[p].push_back((now, size));
                        c.on_sent(now, PathId(p as u32), size, in_flight[p]);
                    }
                }
                Ev::Ack(p) => {
                    let Some((sent, size)) = queues[p].pop_front() else { continue };
                    in_flight[p] -= size as u64;
                    let id = PathId(p as u32);
                    let srtt = Duration::from_millis(specs[p].rtt_ms);
                    let rtt = RttSample { latest: now - sent, smoothed: srtt, min: srtt };
                    // What Reno would do from the same state.
                    let before = view(&c, id).cloned();
                    c.on_ack(now, id, sent, size, &rtt);
                    if let (Some(mut shadow), Some(after)) = (before, view(&c, id)) {
                        let base = shadow.cwnd();
                        let mut limit = base;
                        if shadow.on_ack(now, sent, size, srtt) == AckPhase::CongestionAvoidance {
                            let inc = reno_increase(shadow.mss(), shadow.cwnd(), size);
                            limit = match bound {
                                Bound::Reno => base + inc,
                                Bound::RenoTimes(k) => base + k * inc,
                            };
                        } else {
                            limit = limit.max(shadow.cwnd());
                        }
                        prop_assert!(
                            after.cwnd() <= limit.min(shadow.max_window) + 1e-6,
                            "path {p}: {} grew past {limit}",
                            after.cwnd()
                        );
                    }
                }
                Ev::Lose(p) => {
                    let Some((sent, size)) = queues[p].pop_front() else { continue };
                    in_flight[p] -= size as u64;
                    c.on_congestion_event(now, PathId(p as u32), sent, false);
                }
                Ev::Persistent(p) => {
                    let sent = queues[p].back().map_or(now, |&(s, _)| s);
                    // Every packet in flight is declared lost.
                    queues[p].clear();
                    in_flight[p] = 0;
                    c.on_congestion_event(now, PathId(p as u32), sent, true);
                    prop_assert_eq!(c.window(PathId(p as u32)), 2 * specs[p].mss as u64);
                }
                Ev::Advance(ms) => now += Duration::from_millis(ms as u64),
                Ev::RemoveAndReadd(p) => {
                    c.on_path_removed(PathId(p as u32));
                    prop_assert_eq!(c.window(PathId(p as u32)), 0);
                    queues[p].clear();
                    in_flight[p] = 0;
                    c.on_path_added(now, PathId(p as u32), specs[p].mss);
                }
            }
            for (i, s) in specs.iter().enumerate() {
                let id = PathId(i as u32);
                let w = c.window(id);
                prop_assert!(w >= 2 * s.mss as u64, "path {i}: window {w} below 2·MSS");
                prop_assert!(w <= 1 << 30, "path {i}: window {w} above the maximum");
                let Some(pw) = view(&c, id) else {
                    return Err(TestCaseError::fail(format!("path {i} lost its state")));
                };
                prop_assert!(pw.cwnd().is_finite());
            }
        }
        Ok((0..specs.len()).map(|i| c.window(PathId(i as u32))).collect())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn reno_keeps_its_invariants((specs, events) in scenario()) {
            let a = run(Reno::new(RenoConfig::default()), Reno::path, &specs, &events, Bound::Reno)?;
            let b = run(Reno::new(RenoConfig::default()), Reno::path, &specs, &events, Bound::Reno)?;
            prop_assert_eq!(a, b, "same events, same windows");
        }

        #[test]
        fn lia_never_grows_faster_than_uncoupled_reno((specs, events) in scenario()) {
            let a = run(Lia::new(LiaConfig::default()), Lia::path, &specs, &events, Bound::Reno)?;
            let b = run(Lia::new(LiaConfig::default()), Lia::path, &specs, &events, Bound::Reno)?;
            prop_assert_eq!(a, b, "same events, same windows");
        }

        #[test]
        fn olia_keeps_its_invariants((specs, events) in scenario()) {
            let a = run(Olia::new(OliaConfig::default()), Olia::path, &specs, &events, Bound::RenoTimes(1.5))?;
            let b = run(Olia::new(OliaConfig::default()), Olia::path, &specs, &events, Bound::RenoTimes(1.5))?;
            prop_assert_eq!(a, b, "same events, same windows");
        }
    }
}
