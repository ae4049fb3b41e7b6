//! BBR **v1**, uncoupled: each path runs its own BBR, after
//! draft-cardwell-iccrg-bbr-congestion-control-00 \[source\] (cited below as "draft §…").
//!
//! The model (draft §4.1): the bottleneck bandwidth `BtlBw` is the windowed maximum of the
//! delivery-rate samples over the last 10 round trips (§4.1.1.2 `BtlBwFilterLen`); the
//! round-trip propagation time `RTprop` is the minimum RTT seen, which expires after 10 s
//! (§4.1.2.3 `RTpropFilterLen`). `BDP = BtlBw × RTprop`. Samples come from the connection's
//! delivery-rate estimator ([`super::delivery`]); an application-limited sample only counts
//! when it exceeds the current estimate (§4.1.1.5).
//!
//! Control: `pacing_rate = pacing_gain × BtlBw` (§4.2.1) and
//! `cwnd = cwnd_gain × BDP + 3·MSS` (§4.2.3.2, the quantization budget), at least 4 packets
//! (`BBRMinPipeCwnd`), grown by the acknowledged bytes toward that target (§4.2.3.6).
//!
//! States (§4.3): **Startup** with gains 2/ln 2 ≈ 2.885 until the pipe is full (BtlBw grew
//! less than 25 % in 3 rounds without app-limited samples, §4.3.2.2); **Drain** with pacing
//! gain 1/2.885 until in flight ≤ BDP; **ProbeBW** cycling pacing gains
//! `[5/4, 3/4, 1, 1, 1, 1, 1, 1]`, each phase at least one RTprop (the 5/4 phase lasts
//! until in flight reaches 5/4·BDP or a loss, the 3/4 phase ends early when in flight ≤
//! BDP), cwnd gain 2, starting at a phase drawn from the path id (the draft draws it at
//! random; a function of the id keeps runs deterministic without an RNG); **ProbeRTT** when
//! RTprop expired: cwnd 4 packets for max(200 ms, one round) once in flight fell to it,
//! then RTprop is re-measured and the previous cwnd restored (§4.3.4.4).
//!
//! Loss (§4.2.3.4–5): a loss event saves the window and holds `cwnd = max(in_flight +
//! acked, 4·MSS)` (packet conservation) for one round; then the saved window is restored.
//! A retransmission timeout (persistent congestion) sets the window to one packet. After an
//! idle period ProbeBW paces at gain 1 until the next ACK (§4.3.4.5, restart from idle).
//!
//! BBR paces by its own model: [`Controller::uses_rate_feedback`] is `false`.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use super::{Controller, ControllerFactory, DeliverySample, RttSample};
use crate::path::PathId;
use crate::time::Instant;

/// Startup's pacing and cwnd gain, 2/ln 2 (draft §4.3.1.1 `BBRHighGain`) \[source\].
pub const HIGH_GAIN: f64 = 2.885;
/// ProbeBW's pacing-gain cycle (draft §4.3.4.2) \[source\].
pub const PACING_GAIN_CYCLE: [f64; 8] = [1.25, 0.75, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0];
/// ProbeBW's cwnd gain (draft §4.3.4.2) \[source\].
pub const PROBE_BW_CWND_GAIN: f64 = 2.0;
/// BtlBw filter length in round trips (draft §4.1.1.2) \[source\].
pub const BTL_BW_FILTER_ROUNDS: u64 = 10;
/// RTprop filter length (draft §4.1.2.3) \[source\].
pub const RTPROP_FILTER_LEN: Duration = Duration::from_secs(10);
/// ProbeRTT's minimum duration (draft §4.3.4.4 `ProbeRTTDuration`) \[source\].
pub const PROBE_RTT_DURATION: Duration = Duration::from_millis(200);
/// The smallest window in packets (draft `BBRMinPipeCwnd`) \[source\].
pub const MIN_PIPE_CWND_PACKETS: u64 = 4;
/// The initial window in packets (RFC 6928) \[source\].
pub const INITIAL_CWND_PACKETS: u64 = 10;

/// Configuration of [`Bbr`]; its own [`ControllerFactory`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BbrConfig {
    /// The largest window, bytes (keeps arithmetic far from overflow).
    pub max_window_bytes: u64,
}

impl Default for BbrConfig {
    fn default() -> Self {
        BbrConfig { max_window_bytes: 1 << 30 }
    }
}

impl ControllerFactory for BbrConfig {
    fn build(&self) -> Box<dyn Controller> {
        Box::new(Bbr::new(self.clone()))
    }
    fn kind(&self) -> super::Kind {
        super::Kind::Model
    }
}

/// BBR's state machine (draft §4.3).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Exponential search for the bandwidth.
    Startup,
    /// Draining Startup's queue.
    Drain,
    /// Steady state: cycling the pacing gain around 1.
    ProbeBw,
    /// Re-measuring RTprop with a small window.
    ProbeRtt,
}

/// One path's BBR state.
#[derive(Clone, Debug)]
pub struct BbrPath {
    mss: u64,
    max_window: u64,
    mode: Mode,
    /// Per-round maxima of delivery rate, bytes/s, newest last (the windowed max filter).
    bw_rounds: VecDeque<(u64, f64)>,
    btl_bw: f64,
    rtprop: Option<Duration>,
    rtprop_stamp: Instant,
    rtprop_expired: bool,
    round_count: u64,
    next_round_delivered: u64,
    round_start: bool,
    pacing_gain: f64,
    cwnd_gain: f64,
    pacing_rate: f64,
    cwnd: u64,
    prior_cwnd: u64,
    // Full-pipe detection.
    filled_pipe: bool,
    full_bw: f64,
    full_bw_count: u32,
    // ProbeBW.
    cycle_index: usize,
    cycle_stamp: Instant,
    // ProbeRTT.
    probe_rtt_done: Option<Instant>,
    probe_rtt_round_done: bool,
    // Loss recovery.
    recovery_round: Option<u64>,
    loss_in_round: bool,
    idle_restart: bool,
    in_flight: u64,
    srtt: Option<Duration>,
}

impl BbrPath {
    fn new(now: Instant, id: PathId, mss: usize, config: &BbrConfig) -> Self {
        let mss = (mss as u64).max(1);
        let cwnd = INITIAL_CWND_PACKETS * mss;
        BbrPath {
            mss,
            max_window: config.max_window_bytes.max(MIN_PIPE_CWND_PACKETS * mss),
            mode: Mode::Startup,
            bw_rounds: VecDeque::new(),
            btl_bw: 0.0,
            rtprop: None,
            rtprop_stamp: now,
            rtprop_expired: false,
            round_count: 0,
            next_round_delivered: 0,
            round_start: false,
            pacing_gain: HIGH_GAIN,
            cwnd_gain: HIGH_GAIN,
            // §4.2.1 BBRInitPacingRate: InitialCwnd / (SRTT or 1 ms) × high gain.
            pacing_rate: HIGH_GAIN * cwnd as f64 / 0.001,
            cwnd,
            prior_cwnd: 0,
            filled_pipe: false,
            full_bw: 0.0,
            full_bw_count: 0,
            // The draft draws the start phase at random among all but the 3/4 phase.
            cycle_index: [0, 2, 3, 4, 5, 6, 7][id.0 as usize % 7],
            cycle_stamp: now,
            probe_rtt_done: None,
            probe_rtt_round_done: false,
            recovery_round: None,
            loss_in_round: false,
            idle_restart: false,
            in_flight: 0,
            srtt: None,
        }
    }

    /// The state machine's mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The bottleneck-bandwidth estimate, bytes/s (0 before a sample).
    pub fn btl_bw(&self) -> f64 {
        self.btl_bw
    }

    /// The propagation-RTT estimate, once measured.
    pub fn rtprop(&self) -> Option<Duration> {
        self.rtprop
    }

    /// The current pacing gain.
    pub fn pacing_gain(&self) -> f64 {
        self.pacing_gain
    }

    /// The pacing rate, bytes/s.
    pub fn pacing_rate(&self) -> f64 {
        self.pacing_rate
    }

    /// The congestion window, bytes.
    pub fn cwnd(&self) -> u64 {
        self.cwnd
    }

    /// Whether Startup found the pipe full.
    pub fn filled_pipe(&self) -> bool {
        self.filled_pipe
    }

    fn min_cwnd(&self) -> u64 {
        MIN_PIPE_CWND_PACKETS * self.mss
    }

    /// `gain × BDP + 3·MSS` in bytes (draft §4.2.3.2); the initial window before RTprop and
    /// BtlBw are known.
    fn inflight(&self, gain: f64) -> u64 {
        let Some(rtprop) = self.rtprop.filter(|_| self.btl_bw > 0.0) else {
            return INITIAL_CWND_PACKETS * self.mss;
        };
        let bdp = self.btl_bw * rtprop.as_secs_f64();
        let target = (gain * bdp) as u64 + 3 * self.mss;
        target.clamp(self.min_cwnd(), self.max_window)
    }

    fn on_sample(&mut self, now: Instant, s: &DeliverySample) {
        self.in_flight = s.in_flight;
        // §4.1.1.3 round counting.
        self.round_start = false;
        if s.prior_delivered >= self.next_round_delivered {
            self.next_round_delivered = s.total_delivered;
            self.round_count += 1;
            self.round_start = true;
            self.loss_in_round = false;
        }
        // §4.1.1.5 the BtlBw max filter.
        if let Some(rate) = s.rate()
            && (!s.app_limited || rate >= self.btl_bw)
        {
            match self.bw_rounds.back_mut() {
                Some((r, m)) if *r == self.round_count => *m = m.max(rate),
                _ => self.bw_rounds.push_back((self.round_count, rate)),
            }
        }
        while self
            .bw_rounds
            .front()
            .is_some_and(|&(r, _)| r + BTL_BW_FILTER_ROUNDS <= self.round_count)
        {
            self.bw_rounds.pop_front();
        }
        self.btl_bw = self.bw_rounds.iter().map(|&(_, m)| m).fold(0.0, f64::max);
        // §4.1.2.3 RTprop with expiry.
        self.rtprop_expired = now > self.rtprop_stamp + RTPROP_FILTER_LEN;
        if self.rtprop.is_none_or(|r| s.rtt <= r) || self.rtprop_expired {
            self.rtprop = Some(s.rtt);
            self.rtprop_stamp = now;
        }
        if s.newly_acked > 0 {
            self.idle_restart = false;
        }
        self.update_control(now, s);
    }

    fn enter_probe_bw(&mut self, now: Instant) {
        self.mode = Mode::ProbeBw;
        self.cwnd_gain = PROBE_BW_CWND_GAIN;
        self.cycle_stamp = now;
        self.pacing_gain = PACING_GAIN_CYCLE[self.cycle_index];
    }

    fn update_control(&mut self, now: Instant, s: &DeliverySample) {
        // §4.3.2.2 full pipe: BtlBw grew < 25 % for 3 non-app-limited rounds.
        if !self.filled_pipe && self.round_start && !s.app_limited {
            if self.btl_bw >= self.full_bw * 1.25 {
                self.full_bw = self.btl_bw;
                self.full_bw_count = 0;
            } else {
                self.full_bw_count += 1;
                if self.full_bw_count >= 3 {
                    self.filled_pipe = true;
                }
            }
        }
        // §4.3.3 Drain.
        if self.mode == Mode::Startup && self.filled_pipe {
            self.mode = Mode::Drain;
            self.pacing_gain = 1.0 / HIGH_GAIN;
            self.cwnd_gain = HIGH_GAIN;
        }
        if self.mode == Mode::Drain && s.in_flight <= self.inflight(1.0) {
            self.enter_probe_bw(now);
        }
        // §4.3.4.3 the gain cycle.
        if self.mode == Mode::ProbeBw {
            let rtprop = self.rtprop.unwrap_or(Duration::ZERO);
            let full_length = now.saturating_duration_since(self.cycle_stamp) > rtprop;
            let g = self.pacing_gain;
            let next = if g > 1.0 {
                full_length && (self.loss_in_round || s.in_flight >= self.inflight(g))
            } else if g < 1.0 {
                full_length || s.in_flight <= self.inflight(1.0)
            } else {
                full_length
            };
            if next {
                self.cycle_index = (self.cycle_index + 1) % PACING_GAIN_CYCLE.len();
                self.cycle_stamp = now;
                self.pacing_gain = PACING_GAIN_CYCLE[self.cycle_index];
            }
        }
        // §4.3.4.4 ProbeRTT.
        if self.mode != Mode::ProbeRtt && self.rtprop_expired && !self.idle_restart {
            self.mode = Mode::ProbeRtt;
            self.pacing_gain = 1.0;
            self.cwnd_gain = 1.0;
            self.save_cwnd();
            self.probe_rtt_done = None;
        }
        if self.mode == Mode::ProbeRtt {
            match self.probe_rtt_done {
                None if s.in_flight <= self.min_cwnd() => {
                    self.probe_rtt_done = Some(now + PROBE_RTT_DURATION);
                    self.probe_rtt_round_done = false;
                    self.next_round_delivered = s.total_delivered;
                }
                Some(done) => {
                    if self.round_start {
                        self.probe_rtt_round_done = true;
                    }
                    if self.probe_rtt_round_done && now >= done {
                        self.rtprop_stamp = now;
                        self.restore_cwnd();
                        if self.filled_pipe {
                            self.enter_probe_bw(now);
                        } else {
                            self.mode = Mode::Startup;
                            self.pacing_gain = HIGH_GAIN;
                            self.cwnd_gain = HIGH_GAIN;
                        }
                    }
                }
                None => {}
            }
        }
        // §4.2.1 pacing rate.
        let gain =
            if self.idle_restart && self.mode == Mode::ProbeBw { 1.0 } else { self.pacing_gain };
        if self.btl_bw > 0.0 {
            let rate = gain * self.btl_bw;
            if self.filled_pipe || rate > self.pacing_rate {
                self.pacing_rate = rate;
            }
        } else if let Some(srtt) = self.srtt.filter(|d| !d.is_zero()) {
            // Before the first rate sample: the initial window over the first RTT.
            self.pacing_rate = HIGH_GAIN * self.cwnd as f64 / srtt.as_secs_f64();
        }
        self.set_cwnd(s);
    }

    fn save_cwnd(&mut self) {
        self.prior_cwnd = if self.recovery_round.is_none() && self.mode != Mode::ProbeRtt {
            self.cwnd
        } else {
            self.prior_cwnd.max(self.cwnd)
        };
    }

    fn restore_cwnd(&mut self) {
        self.cwnd = self.cwnd.max(self.prior_cwnd);
    }

    /// §4.2.3: the window toward `cwnd_gain × BDP + 3·MSS`, conservation in recovery, the
    /// 4-packet cap in ProbeRTT.
    fn set_cwnd(&mut self, s: &DeliverySample) {
        let target = self.inflight(self.cwnd_gain);
        let acked = s.newly_acked;
        let mut cwnd = self.cwnd;
        match self.recovery_round {
            Some(r) if self.round_count <= r => {
                // The first round of recovery: packet conservation.
                cwnd = cwnd.max(s.in_flight + acked);
            }
            Some(_) => {
                self.recovery_round = None;
                cwnd = cwnd.max(self.prior_cwnd);
            }
            None => {}
        }
        if self.recovery_round.is_none() {
            if self.filled_pipe {
                cwnd = cwnd.saturating_add(acked).min(target);
            } else if cwnd < target || s.total_delivered < INITIAL_CWND_PACKETS * self.mss {
                cwnd = cwnd.saturating_add(acked);
            }
        }
        cwnd = cwnd.clamp(self.min_cwnd(), self.max_window);
        if self.mode == Mode::ProbeRtt {
            cwnd = cwnd.min(self.min_cwnd());
        }
        self.cwnd = cwnd;
    }

    fn on_congestion_event(&mut self, persistent: bool) {
        self.loss_in_round = true;
        if persistent {
            // §4.2.3.4: on a retransmission timeout the window becomes one packet.
            self.save_cwnd();
            self.cwnd = self.mss;
            self.recovery_round = Some(self.round_count);
            return;
        }
        if self.recovery_round.is_none() {
            self.save_cwnd();
            self.recovery_round = Some(self.round_count);
            self.cwnd = self.in_flight.max(self.min_cwnd()).min(self.cwnd);
        }
    }
}

/// Uncoupled BBR v1 on every path of a connection.
#[derive(Clone, Debug)]
pub struct Bbr {
    config: BbrConfig,
    paths: BTreeMap<PathId, BbrPath>,
}

impl Bbr {
    /// A controller with no paths.
    pub fn new(config: BbrConfig) -> Self {
        Bbr { config, paths: BTreeMap::new() }
    }

    /// The state of `path`, if known.
    pub fn path(&self, path: PathId) -> Option<&BbrPath> {
        self.paths.get(&path)
    }
}

impl Controller for Bbr {
    fn on_path_added(&mut self, now: Instant, path: PathId, mss: usize) {
        self.paths.insert(path, BbrPath::new(now, path, mss, &self.config));
    }

    fn on_path_removed(&mut self, path: PathId) {
        self.paths.remove(&path);
    }

    fn on_datagram_size(&mut self, path: PathId, mss: usize) {
        if let Some(p) = self.paths.get_mut(&path) {
            // Its quanta (minimum and initial windows, the target's headroom) are counted
            // in packets of the current size.
            p.mss = (mss as u64).max(1);
        }
    }

    fn on_sent(&mut self, _now: Instant, path: PathId, bytes: usize, in_flight: u64) {
        if let Some(p) = self.paths.get_mut(&path) {
            if in_flight <= bytes as u64 && p.mode == Mode::ProbeBw {
                // §4.3.4.5 restart from idle: pace at BtlBw until the next ACK.
                p.idle_restart = true;
                if p.btl_bw > 0.0 {
                    p.pacing_rate = p.btl_bw;
                }
            }
            p.in_flight = in_flight;
        }
    }

    fn on_ack(&mut self, _: Instant, path: PathId, _: Instant, _: usize, rtt: &RttSample) {
        if let Some(p) = self.paths.get_mut(&path) {
            p.srtt = Some(rtt.smoothed);
        }
    }

    fn on_delivery_sample(&mut self, now: Instant, path: PathId, sample: &DeliverySample) {
        if let Some(p) = self.paths.get_mut(&path) {
            p.on_sample(now, sample);
        }
    }

    fn on_congestion_event(&mut self, _: Instant, path: PathId, _: Instant, persistent: bool) {
        if let Some(p) = self.paths.get_mut(&path) {
            p.on_congestion_event(persistent);
        }
    }

    fn window(&self, path: PathId) -> u64 {
        self.paths.get(&path).map_or(0, |p| p.cwnd)
    }

    fn pacing_rate(&self, path: PathId) -> Option<u64> {
        let p = self.paths.get(&path)?;
        Some((p.pacing_rate.clamp(1.0, 1e12)) as u64)
    }

    fn uses_rate_feedback(&self) -> bool {
        false
    }

    fn name(&self) -> &'static str {
        "bbr"
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use proptest::prelude::*;

    use super::*;
    use crate::cc::DeliveryRate;

    const MSS: usize = 1200;

    /// One BBR path over a bottleneck of `rate` bytes/s, base RTT `rtt`, a drop-tail queue
    /// of `queue` bytes; the sender always has data and obeys window and pacing. Returns
    /// the controller, the bytes delivered after `measure_from` and the largest queueing
    /// delay seen after it.
    struct Link {
        bbr: Bbr,
        dr: DeliveryRate,
        now: Instant,
        rate: f64,
        rtt: Duration,
        queue: u64,
        busy_until: Instant,
        next_send: Instant,
        /// (ack time, sent, stamp, lost)
        flight: VecDeque<(Instant, Instant, crate::cc::DeliveryStamp, bool)>,
        in_flight: u64,
        delivered: u64,
        max_queue_delay: Duration,
    }

    impl Link {
        fn new(rate_bps: f64, rtt_ms: u64, queue: u64) -> Link {
            let mut bbr = Bbr::new(BbrConfig::default());
            bbr.on_path_added(Instant::ZERO, PathId(0), MSS);
            Link {
                bbr,
                dr: DeliveryRate::new(Instant::ZERO),
                now: Instant::ZERO,
                rate: rate_bps / 8.0,
                rtt: Duration::from_millis(rtt_ms),
                queue,
                busy_until: Instant::ZERO,
                next_send: Instant::ZERO,
                flight: VecDeque::new(),
                in_flight: 0,
                delivered: 0,
                max_queue_delay: Duration::ZERO,
            }
        }

        fn run(&mut self, end: Instant, measure_from: Instant) {
            let id = PathId(0);
            while self.now < end {
                // Send what window and pacing allow now.
                while self.in_flight + MSS as u64 <= self.bbr.window(id)
                    && self.next_send <= self.now
                {
                    let stamp = self.dr.on_sent(self.now, self.in_flight);
                    self.in_flight += MSS as u64;
                    self.bbr.on_sent(self.now, id, MSS, self.in_flight);
                    let rate = self.bbr.pacing_rate(id).unwrap_or(u64::MAX).max(1);
                    self.next_send = self.now.max(self.next_send)
                        + Duration::from_micros(MSS as u64 * 1_000_000 / rate);
                    let start = self.busy_until.max(self.now);
                    let backlog = (start - self.now).as_secs_f64() * self.rate;
                    let lost = backlog + MSS as f64 > self.queue as f64;
                    if !lost {
                        self.busy_until = start + Duration::from_secs_f64(MSS as f64 / self.rate);
                        if self.now >= measure_from {
                            self.max_queue_delay = self.max_queue_delay.max(start - self.now);
                        }
                    }
                    let ack = if lost { start + self.rtt } else { self.busy_until + self.rtt };
                    let pos =
                        self.flight.iter().position(|f| f.0 > ack).unwrap_or(self.flight.len());
                    self.flight.insert(pos, (ack, self.now, stamp, lost));
                }
                let next_ack = self.flight.front().map(|f| f.0);
                let wake = match next_ack {
                    Some(a) if self.in_flight + MSS as u64 > self.bbr.window(id) => a,
                    Some(a) => a.min(self.next_send),
                    None => self.next_send.max(self.now + Duration::from_micros(1)),
                };
                self.now = wake.max(self.now);
                while let Some(&(at, sent, stamp, lost)) = self.flight.front() {
                    if at > self.now {
                        break;
                    }
                    self.flight.pop_front();
                    self.in_flight -= MSS as u64;
                    if lost {
                        self.bbr.on_congestion_event(self.now, id, sent, false);
                        continue;
                    }
                    if self.now >= measure_from {
                        self.delivered += MSS as u64;
                    }
                    let r = self.now - sent;
                    let rtt = RttSample { latest: r, smoothed: r, min: self.rtt };
                    self.bbr.on_ack(self.now, id, sent, MSS, &rtt);
                    self.dr.on_acked(self.now, sent, MSS as u64, stamp);
                    if let Some(s) = self.dr.finish(self.now, self.rtt, self.in_flight) {
                        self.bbr.on_delivery_sample(self.now, id, &s);
                    }
                }
            }
        }
    }

    fn t(ms: u64) -> Instant {
        Instant::from_micros(ms * 1000)
    }

    #[test]
    fn fills_the_link_with_a_small_queue() {
        // 10 Mbit/s, 40 ms, a 1-BDP queue: BBR reaches ProbeBW, measures the bandwidth and
        // RTprop, uses over 90 % of the link and keeps the queue well under a BDP.
        let mut l = Link::new(10e6, 40, 50_000);
        l.run(t(20_000), t(5_000));
        let p = l.bbr.path(PathId(0)).expect("path");
        assert_eq!(p.mode(), Mode::ProbeBw);
        assert!(p.filled_pipe());
        assert!((p.btl_bw() / 1.25e6 - 1.0).abs() < 0.1, "BtlBw {}", p.btl_bw());
        assert!(
            p.rtprop()
                .is_some_and(|r| r >= Duration::from_millis(40) && r < Duration::from_millis(45))
        );
        let util = l.delivered as f64 / (1.25e6 * 15.0);
        assert!(util > 0.9, "utilisation {util}");
        assert!(l.max_queue_delay < Duration::from_millis(40), "queue {:?}", l.max_queue_delay);
    }

    #[test]
    fn probe_rtt_runs_after_rtprop_expires() {
        let mut l = Link::new(10e6, 40, 50_000);
        let mut seen = false;
        for k in 1..=150 {
            l.run(t(100 * k), t(0));
            seen |= l.bbr.path(PathId(0)).is_some_and(|p| p.mode() == Mode::ProbeRtt);
            if seen {
                assert!(l.bbr.window(PathId(0)) <= 4 * MSS as u64 + 3 * MSS as u64);
                break;
            }
        }
        assert!(seen, "ProbeRTT within 15 s");
        l.run(t(16_000), t(0));
        assert_eq!(l.bbr.path(PathId(0)).map(BbrPath::mode), Some(Mode::ProbeBw));
    }

    #[test]
    fn startup_then_drain_then_probe_bw_gains() {
        let mut l = Link::new(5e6, 20, 100_000);
        assert_eq!(l.bbr.path(PathId(0)).map(BbrPath::pacing_gain), Some(HIGH_GAIN));
        l.run(t(5_000), t(0));
        let p = l.bbr.path(PathId(0)).expect("path");
        assert_eq!(p.mode(), Mode::ProbeBw);
        assert!(PACING_GAIN_CYCLE.contains(&p.pacing_gain()));
        assert!(!l.bbr.uses_rate_feedback());
        assert_eq!(l.bbr.name(), "bbr");
    }

    #[test]
    fn timeout_drops_to_one_packet_and_unknown_paths_are_ignored() {
        let mut b = Bbr::new(BbrConfig::default());
        b.on_path_added(t(0), PathId(1), MSS);
        assert_eq!(b.window(PathId(1)), 10 * MSS as u64);
        b.on_congestion_event(t(1), PathId(1), t(0), true);
        assert_eq!(b.window(PathId(1)), MSS as u64);
        assert_eq!(b.window(PathId(9)), 0);
        assert_eq!(b.pacing_rate(PathId(9)), None);
        b.on_congestion_event(t(1), PathId(9), t(0), true);
        b.on_path_removed(PathId(1));
        assert_eq!(b.window(PathId(1)), 0);
    }

    #[derive(Clone, Debug)]
    enum Ev {
        /// A delivery sample: bytes, interval ms (0: invalid), rtt ms, app-limited, in flight.
        Sample(u32, u16, u16, bool, u32),
        Loss(bool),
        Sent(u32),
        Advance(u16),
    }

    fn ev() -> impl Strategy<Value = Ev> {
        prop_oneof![
            8 => (1u32..200_000, 0u16..500, 1u16..1000, any::<bool>(), 0u32..2_000_000)
                .prop_map(|(b, i, r, a, f)| Ev::Sample(b, i, r, a, f)),
            1 => any::<bool>().prop_map(Ev::Loss),
            2 => (0u32..2_000_000).prop_map(Ev::Sent),
            2 => (0u16..5000).prop_map(Ev::Advance),
        ]
    }

    /// Feeds random samples; after every event the window is within [1 packet, max], at
    /// least 4 packets unless a timeout came after the last sample, the pacing rate is
    /// positive, BtlBw is the largest valid sample of the last 10 rounds (a model of the
    /// filter), and the pacing rate never exceeds 2.885 × the largest BtlBw so far (or the
    /// initial rate).
    fn run(events: &[Ev]) -> Result<(u64, u64), TestCaseError> {
        let mut b = Bbr::new(BbrConfig::default());
        let id = PathId(0);
        let mut now = Instant::ZERO;
        b.on_path_added(now, id, MSS);
        let initial_rate = b.pacing_rate(id).unwrap_or(0);
        let mut total = 0u64;
        let mut round_samples: Vec<(u64, f64)> = Vec::new();
        let mut round = 0u64;
        let mut next_round = 0u64;
        let mut after_timeout = false;
        let mut max_bw = 0.0f64;
        for e in events {
            match *e {
                Ev::Sample(bytes, interval, rtt, app_limited, in_flight) => {
                    let prior = total;
                    total += bytes as u64;
                    let s = DeliverySample {
                        delivered: bytes as u64,
                        interval: (interval > 0).then(|| Duration::from_millis(interval as u64)),
                        prior_delivered: prior,
                        total_delivered: total,
                        app_limited,
                        newly_acked: bytes as u64,
                        rtt: Duration::from_millis(rtt as u64),
                        in_flight: in_flight as u64,
                    };
                    let before_bw = b.path(id).map_or(0.0, BbrPath::btl_bw);
                    if prior >= next_round {
                        next_round = total;
                        round += 1;
                    }
                    if let Some(r) = s.rate()
                        && (!app_limited || r >= before_bw)
                    {
                        round_samples.push((round, r));
                    }
                    b.on_delivery_sample(now, id, &s);
                    after_timeout = false;
                    max_bw = max_bw.max(b.path(id).map_or(0.0, BbrPath::btl_bw));
                    let want = round_samples
                        .iter()
                        .filter(|&&(r, _)| r + BTL_BW_FILTER_ROUNDS > round)
                        .map(|&(_, x)| x)
                        .fold(0.0, f64::max);
                    let got = b.path(id).map_or(0.0, BbrPath::btl_bw);
                    prop_assert!(
                        (got - want).abs() <= 1e-9 * want.max(1.0),
                        "BtlBw {got}, model {want}"
                    );
                }
                Ev::Loss(persistent) => {
                    after_timeout |= persistent;
                    b.on_congestion_event(now, id, now, persistent);
                }
                Ev::Sent(in_flight) => b.on_sent(now, id, MSS, in_flight as u64),
                Ev::Advance(ms) => now += Duration::from_millis(ms as u64),
            }
            let w = b.window(id);
            prop_assert!(w >= MSS as u64 && w <= 1 << 30, "window {w}");
            prop_assert!(after_timeout || w >= MSS as u64 * 4, "window {w} below 4 packets");
            let rate = b.pacing_rate(id).unwrap_or(0);
            prop_assert!(rate > 0);
            let cap = (HIGH_GAIN * max_bw).max(initial_rate as f64);
            prop_assert!(rate as f64 <= cap * (1.0 + 1e-9) + 1.0, "rate {rate} above {cap}");
        }
        Ok((b.window(id), b.pacing_rate(id).unwrap_or(0)))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn bbr_keeps_its_model_invariants(events in prop::collection::vec(ev(), 1..300)) {
            let a = run(&events)?;
            let b = run(&events)?;
            prop_assert_eq!(a, b, "same events, same window and rate");
        }
    }
}
