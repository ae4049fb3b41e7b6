//! TFRC: TCP-Friendly Rate Control, RFC 5348 [source].
//!
//! Three sans-IO pieces:
//! - [`throughput_bps`] / [`loss_rate_for`]: the TCP throughput equation (§3.1) and its
//!   inverse (used to seed the first loss interval, §6.3.1);
//! - [`TfrcReceiver`]: the receiver's loss-event history (§5) and receive-rate meter, which
//!   produce the [`RateFeedback`] sent at least once per RTT;
//! - [`TfrcSender`]: the sender's rate rules (§4): slow start, the equation-based rate,
//!   the receive limit, and the no-feedback timer.
//!
//! [`TfrcConfig`] wraps the sender as a [`Controller`] for every path of a connection:
//! rate based, so it answers [`Controller::pacing_rate`] and keeps the window only as a
//! safety cap.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::cc::{Controller, ControllerFactory, RttSample};
use crate::path::PathId;
use crate::time::Instant;

/// The TCP throughput equation of RFC 5348 §3.1 with b = 1 and t_RTO = 4R, in bytes/s:
/// `X = s / (R·sqrt(2p/3) + 12·R·sqrt(3p/8)·p·(1 + 32p²))`. `p = 0` gives +∞.
pub fn throughput_bps(s: f64, rtt: Duration, p: f64) -> f64 {
    let r = rtt.as_secs_f64().max(1e-6);
    if p <= 0.0 {
        return f64::INFINITY;
    }
    let p = p.min(1.0);
    s / (r * (2.0 * p / 3.0).sqrt() + 12.0 * r * (3.0 * p / 8.0).sqrt() * p * (1.0 + 32.0 * p * p))
}

/// The loss event rate at which the equation gives `x_bps` (bytes/s): the inverse used to
/// seed the first loss interval (RFC 5348 §6.3.1). Solved by bisection; the equation is
/// monotonically decreasing in p.
pub fn loss_rate_for(s: f64, rtt: Duration, x_bps: f64) -> f64 {
    if !(x_bps.is_finite() && x_bps > 0.0) {
        return 1.0;
    }
    let (mut lo, mut hi) = (1e-9f64, 1.0f64);
    if throughput_bps(s, rtt, lo) <= x_bps {
        return lo;
    }
    if throughput_bps(s, rtt, hi) >= x_bps {
        return hi;
    }
    for _ in 0..100 {
        let mid = (lo * hi).sqrt();
        if throughput_bps(s, rtt, mid) > x_bps {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    (lo * hi).sqrt()
}

/// What a TFRC receiver reports (RFC 5348 §6.2), at least once per RTT.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RateFeedback {
    /// Receive rate over the last RTT, bytes/s.
    pub x_recv: f64,
    /// Loss event rate.
    pub p: f64,
    /// Time between receiving the last data packet and sending this report.
    pub t_delay: Duration,
}

/// Loss-interval weights for n = 8 (RFC 5348 §5.4).
const WEIGHTS: [f64; 8] = [1.0, 1.0, 1.0, 1.0, 0.8, 0.6, 0.4, 0.2];
/// A packet is lost once this many later packets have arrived (§5.1).
const NDUPACK: u64 = 3;
/// Arrival times kept for loss detection and interpolation.
const MAX_ARRIVALS: usize = 256;
/// Longest gap in the sequence numbers scanned packet by packet for losses; a longer one
/// is one loss event (the connection already drops numbers far ahead of the largest, see
/// `proto::connection`'s packet-number window, so this only bounds the work per packet).
const MAX_GAP_SCAN: u64 = 4096;

/// The receiver side: loss history and receive rate for one path.
#[derive(Clone, Debug)]
pub struct TfrcReceiver {
    s: f64,
    /// Highest sequence number seen, and the arrival times of recent packets (for
    /// interpolating a lost packet's nominal arrival).
    highest: Option<u64>,
    /// Recent arrivals, seq → time, pruned to a window.
    arrivals: BTreeMap<u64, Instant>,
    /// Sequence number where the current (open) loss interval starts, and its time.
    current_event: Option<(u64, Instant)>,
    /// Closed loss intervals, newest first (at most 8 kept).
    intervals: Vec<f64>,
    /// Bytes received since `rate_since`.
    rate_bytes: u64,
    rate_since: Option<Instant>,
    /// The last completed receive-rate measurement.
    x_recv: f64,
    last_data: Option<Instant>,
    rtt: Duration,
}

impl TfrcReceiver {
    /// A receiver for packets of nominal size `s` bytes.
    pub fn new(s: usize) -> TfrcReceiver {
        TfrcReceiver {
            s: s.max(1) as f64,
            highest: None,
            arrivals: BTreeMap::new(),
            current_event: None,
            intervals: Vec::new(),
            rate_bytes: 0,
            rate_since: None,
            x_recv: 0.0,
            last_data: None,
            rtt: Duration::from_millis(100),
        }
    }

    /// The receiver's RTT estimate (used to group losses into events and to time feedback).
    pub fn set_rtt(&mut self, rtt: Duration) {
        if !rtt.is_zero() {
            self.rtt = rtt;
        }
    }

    /// A data packet with per-path sequence number `seq` and `bytes` bytes arrived.
    pub fn on_packet(&mut self, now: Instant, seq: u64, bytes: usize) {
        self.last_data = Some(now);
        self.rate_bytes += bytes as u64;
        self.rate_since.get_or_insert(now);
        if self.arrivals.contains_key(&seq) {
            return;
        }
        self.arrivals.insert(seq, now);
        let prev_high = self.highest;
        self.highest = Some(self.highest.map_or(seq, |h| h.max(seq)));
        let Some(high) = self.highest else { return };
        // Packets that now have NDUPACK later arrivals and never arrived are lost.
        if let Some(prev) = prev_high {
            let check_to = high.saturating_sub(NDUPACK);
            let check_from = prev.saturating_sub(NDUPACK) + 1;
            if check_to >= check_from && check_to - check_from >= MAX_GAP_SCAN {
                // A jump this long cannot be scanned packet by packet: the whole gap is
                // one loss event starting at its first packet (each lost packet of it
                // would get the same interpolated arrival within one RTT anyway when the
                // jump arrives at once).
                if !self.arrivals.contains_key(&check_from) {
                    self.on_loss(check_from);
                }
                self.prune();
                return;
            }
            for lost in check_from..=check_to {
                if lost < check_from || self.arrivals.contains_key(&lost) {
                    continue;
                }
                if self.arrivals.range(..lost).next_back().is_none() && lost < self.first_seq() {
                    continue;
                }
                self.on_loss(lost);
            }
        }
        self.prune();
    }

    /// Keeps the history bounded: what loss detection and interpolation still need.
    fn prune(&mut self) {
        while self.arrivals.len() > MAX_ARRIVALS {
            if self.arrivals.pop_first().is_none() {
                break;
            }
        }
    }

    /// Arrival times kept for loss detection and interpolation (at most 256).
    pub fn arrivals_kept(&self) -> usize {
        self.arrivals.len()
    }

    fn first_seq(&self) -> u64 {
        self.arrivals.keys().next().copied().unwrap_or(0)
    }

    /// Interpolated nominal arrival time of a lost packet (§5.2).
    fn nominal_arrival(&self, seq: u64) -> Option<Instant> {
        let before = self.arrivals.range(..seq).next_back();
        let after = self.arrivals.range(seq + 1..).next();
        match (before, after) {
            (Some((&sb, &tb)), Some((&sa, &ta))) => {
                let frac = (seq - sb) as f64 / (sa - sb) as f64;
                let d = ta.saturating_duration_since(tb).as_secs_f64() * frac;
                Some(tb + Duration::from_secs_f64(d))
            }
            (None, Some((_, &ta))) => Some(ta),
            (Some((_, &tb)), None) => Some(tb),
            (None, None) => None,
        }
    }

    fn on_loss(&mut self, seq: u64) {
        let t_loss = self.nominal_arrival(seq).unwrap_or(Instant::ZERO);
        match self.current_event {
            Some((start_seq, start_t)) => {
                // Within one RTT of the current event's start: the same loss event.
                if t_loss <= start_t + self.rtt {
                    return;
                }
                let interval = seq.saturating_sub(start_seq) as f64;
                self.intervals.insert(0, interval.max(1.0));
                self.intervals.truncate(WEIGHTS.len());
                self.current_event = Some((seq, t_loss));
            }
            None => {
                // First loss event: seed the history with the interval that would give the
                // receive rate (§6.3.1): the last complete measurement, about one RTT long.
                // The measurement still running counts only once it spans an RTT, or when
                // there is no complete one yet: a few packets just after a report would
                // read as a rate far above the link's and seed a loss event rate near 0.
                let running = self
                    .rate_since
                    .is_some_and(|since| t_loss.saturating_duration_since(since) >= self.rtt);
                let x = if self.x_recv > 0.0 && !running {
                    self.x_recv
                } else {
                    self.receive_rate_now(t_loss).max(self.x_recv)
                }
                .max(self.s);
                let p = loss_rate_for(self.s, self.rtt, x);
                self.intervals.insert(0, (1.0 / p).max(1.0));
                self.current_event = Some((seq, t_loss));
            }
        }
    }

    fn receive_rate_now(&self, now: Instant) -> f64 {
        match self.rate_since {
            Some(since) => {
                let secs = now.saturating_duration_since(since).as_secs_f64();
                if secs > 0.0 { self.rate_bytes as f64 / secs } else { 0.0 }
            }
            None => 0.0,
        }
    }

    /// The loss event rate p (§5.4): 1 / I_mean, with I_mean the larger of the weighted
    /// means with and without the open interval. 0 before any loss.
    pub fn loss_event_rate(&self) -> f64 {
        if self.intervals.is_empty() {
            return 0.0;
        }
        let open = match (self.current_event, self.highest) {
            (Some((start, _)), Some(high)) => (high.saturating_sub(start) + 1) as f64,
            _ => 0.0,
        };
        // I_0 is the open interval, I_1.. the closed ones (newest first).
        let k = self.intervals.len();
        let mut all = Vec::with_capacity(k + 1);
        all.push(open);
        all.extend_from_slice(&self.intervals);
        let n = k.min(WEIGHTS.len());
        let w_tot: f64 = WEIGHTS[..n].iter().sum();
        let i_tot0: f64 = (0..n).map(|i| all[i] * WEIGHTS[i]).sum();
        let i_tot1: f64 = (1..=n).map(|i| all[i] * WEIGHTS[i - 1]).sum();
        let i_mean = i_tot0.max(i_tot1) / w_tot;
        if i_mean > 0.0 { (1.0 / i_mean).min(1.0) } else { 1.0 }
    }

    /// Builds the feedback report at `now` and starts a new receive-rate measurement.
    pub fn feedback(&mut self, now: Instant) -> RateFeedback {
        let x = self.receive_rate_now(now);
        if self.rate_since.is_some_and(|s| now > s) {
            self.x_recv = x;
        }
        self.rate_bytes = 0;
        self.rate_since = Some(now);
        RateFeedback {
            x_recv: self.x_recv,
            p: self.loss_event_rate(),
            t_delay: self.last_data.map_or(Duration::ZERO, |t| now.saturating_duration_since(t)),
        }
    }

    /// Closed loss intervals, newest first.
    pub fn intervals(&self) -> &[f64] {
        &self.intervals
    }
}

/// Settings of the TFRC sender.
#[derive(Clone, Debug, PartialEq)]
pub struct TfrcConfig {
    /// Segment size s, bytes.
    pub segment_size: usize,
    /// t_mbi, the longest interval between packets (64 s in RFC 5348).
    pub t_mbi: Duration,
}

impl Default for TfrcConfig {
    fn default() -> Self {
        TfrcConfig { segment_size: 1200, t_mbi: Duration::from_secs(64) }
    }
}

/// The sender's state for one path (RFC 5348 §4).
#[derive(Clone, Debug)]
pub struct TfrcSender {
    s: f64,
    t_mbi: f64,
    /// Allowed sending rate, bytes/s.
    x: f64,
    /// Smoothed RTT R (None until the first sample).
    r: Option<f64>,
    p: f64,
    /// Receive rates reported over the last 2 RTTs, with their arrival times.
    x_recv_set: Vec<(Instant, f64)>,
    /// Time of the last doubling in slow start.
    tld: Option<Instant>,
    /// When the no-feedback timer fires.
    nofeedback_at: Instant,
    feedback_seen: bool,
    /// Bytes sent since the last feedback, and when that feedback came (for the
    /// data-limited test of §4.3 step 4 / §8.2.1).
    sent_since_feedback: f64,
    last_feedback_at: Option<Instant>,
}

/// An interval counts as data-limited when the sender sent less than this share of what
/// its allowed rate permitted over it \[approx: RFC 5348 §8.2.1 leaves the test to the
/// implementation\].
const DATA_LIMITED_SHARE: f64 = 0.8;

impl TfrcSender {
    /// A sender starting at `now` (one packet per second until the first RTT sample, §4.2).
    pub fn new(cfg: &TfrcConfig, now: Instant) -> TfrcSender {
        let s = cfg.segment_size.max(1) as f64;
        TfrcSender {
            s,
            t_mbi: cfg.t_mbi.as_secs_f64().max(1.0),
            x: s,
            r: None,
            p: 0.0,
            x_recv_set: Vec::new(),
            tld: None,
            nofeedback_at: now + Duration::from_secs(2),
            feedback_seen: false,
            sent_since_feedback: 0.0,
            last_feedback_at: None,
        }
    }

    /// A packet of `bytes` was sent.
    pub fn on_sent(&mut self, bytes: usize) {
        self.sent_since_feedback += bytes as f64;
    }

    /// W_init / R of RFC 5348 §4.2 (RFC 3390's initial window).
    fn initial_rate(&self, r: f64) -> f64 {
        let w_init = (4.0 * self.s).min((2.0 * self.s).max(4380.0));
        w_init / r
    }

    /// The allowed sending rate, bytes/s.
    pub fn rate(&self) -> f64 {
        self.x
    }

    /// The smoothed RTT, when known.
    pub fn rtt(&self) -> Option<Duration> {
        self.r.map(Duration::from_secs_f64)
    }

    /// The loss event rate last reported.
    pub fn loss_event_rate(&self) -> f64 {
        self.p
    }

    /// An RTT sample (R = 0.9·R + 0.1·sample, §4.3 step 2).
    pub fn on_rtt_sample(&mut self, now: Instant, sample: Duration) {
        let s = sample.as_secs_f64().max(1e-6);
        let first = self.r.is_none();
        self.r = Some(match self.r {
            None => s,
            Some(r) => 0.9 * r + 0.1 * s,
        });
        if first {
            // §4.2: once the first RTT is known, start from the initial window per RTT.
            self.x = self.x.max(self.initial_rate(s));
            self.tld = Some(now);
        }
    }

    fn recv_limit(&self, now: Instant) -> f64 {
        let r = self.r.unwrap_or(1.0);
        let window = Duration::from_secs_f64(2.0 * r);
        let max = self
            .x_recv_set
            .iter()
            .filter(|(t, _)| now.saturating_duration_since(*t) <= window)
            .map(|&(_, x)| x)
            .fold(0.0, f64::max);
        2.0 * max
    }

    /// A feedback report arrived (§4.3, with step 4's data-limited rules).
    pub fn on_feedback(&mut self, now: Instant, fb: &RateFeedback) {
        self.feedback_seen = true;
        let r = self.r.unwrap_or(0.1);
        // Was the whole interval since the last feedback data-limited (§8.2.1)?
        let data_limited = self.last_feedback_at.is_some_and(|t| {
            let allowed = self.x * now.saturating_duration_since(t).as_secs_f64();
            allowed > 0.0 && self.sent_since_feedback < DATA_LIMITED_SHARE * allowed
        });
        self.sent_since_feedback = 0.0;
        self.last_feedback_at = Some(now);
        let p_new = fb.p.clamp(0.0, 1.0);
        let recv_limit = if data_limited {
            let mut x_recv = fb.x_recv;
            let loss_grew = p_new > self.p;
            if loss_grew {
                // A new loss event or a higher p while data-limited: halve the entries of
                // X_recv_set and take 0.85 of the new X_recv.
                for e in &mut self.x_recv_set {
                    e.1 /= 2.0;
                }
                x_recv *= 0.85;
            }
            // Maximize X_recv_set: one entry, the largest, stamped now.
            let max = self.x_recv_set.iter().map(|&(_, x)| x).fold(x_recv, f64::max);
            self.x_recv_set = vec![(now, max)];
            if loss_grew { max } else { 2.0 * max }
        } else {
            // Update X_recv_set: add X_recv, drop entries older than two RTTs.
            self.x_recv_set.push((now, fb.x_recv));
            let keep = Duration::from_secs_f64(2.0 * r);
            self.x_recv_set.retain(|(t, _)| now.saturating_duration_since(*t) <= keep);
            if self.x_recv_set.is_empty() {
                self.x_recv_set.push((now, fb.x_recv));
            }
            self.recv_limit(now)
        };
        self.p = p_new;
        self.update_rate(now, recv_limit);
        self.restart_timer(now);
    }

    fn update_rate(&mut self, now: Instant, recv_limit: f64) {
        let r = self.r.unwrap_or(0.1);
        let floor = self.s / self.t_mbi;
        if self.p > 0.0 {
            let x_bps = throughput_bps(self.s, Duration::from_secs_f64(r), self.p);
            self.x = x_bps.min(recv_limit).max(floor);
        } else if self.tld.is_none_or(|t| now.saturating_duration_since(t).as_secs_f64() >= r) {
            // Slow start: double once per RTT, limited by the receive limit.
            self.x = (2.0 * self.x).min(recv_limit).max(self.initial_rate(r));
            self.tld = Some(now);
        }
    }

    fn restart_timer(&mut self, now: Instant) {
        let r = self.r.unwrap_or(0.5);
        let t = (4.0 * r).max(2.0 * self.s / self.x.max(1e-9));
        self.nofeedback_at = now + Duration::from_secs_f64(t.min(3600.0));
    }

    /// When the no-feedback timer fires.
    pub fn timeout(&self) -> Instant {
        self.nofeedback_at
    }

    /// The no-feedback timer fired (§4.4): halve the allowed rate.
    pub fn on_timeout(&mut self, now: Instant) {
        if now < self.nofeedback_at {
            return;
        }
        let floor = self.s / self.t_mbi;
        if !self.feedback_seen || self.p == 0.0 {
            // No feedback yet, or slow start: X = max(X/2, s/t_mbi).
            self.x = (self.x / 2.0).max(floor);
        } else {
            let x_recv = self.x_recv_set.iter().map(|&(_, x)| x).fold(0.0, f64::max);
            let x_bps =
                throughput_bps(self.s, Duration::from_secs_f64(self.r.unwrap_or(1.0)), self.p);
            let limit = if x_bps > 2.0 * x_recv { x_recv } else { x_bps / 2.0 };
            let limit = limit.max(floor);
            // update_limits: replace X_recv_set by timer_limit / 2, then recompute.
            self.x_recv_set = vec![(now, limit / 2.0)];
            self.x = x_bps.min(2.0 * (limit / 2.0)).max(floor);
        }
        self.restart_timer(now);
    }
}

/// TFRC as a [`Controller`] for every path of a connection.
#[derive(Debug)]
pub struct Tfrc {
    cfg: TfrcConfig,
    paths: BTreeMap<PathId, TfrcSender>,
}

impl Tfrc {
    /// The sender state of a path.
    pub fn sender(&self, path: PathId) -> Option<&TfrcSender> {
        self.paths.get(&path)
    }
}

impl ControllerFactory for TfrcConfig {
    fn build(&self) -> Box<dyn Controller> {
        Box::new(Tfrc { cfg: self.clone(), paths: BTreeMap::new() })
    }
    fn kind(&self) -> super::Kind {
        super::Kind::RateFeedback
    }
}

impl Controller for Tfrc {
    fn on_path_added(&mut self, now: Instant, path: PathId, mss: usize) {
        let cfg = TfrcConfig { segment_size: mss, ..self.cfg.clone() };
        self.paths.insert(path, TfrcSender::new(&cfg, now));
    }

    fn on_path_removed(&mut self, path: PathId) {
        self.paths.remove(&path);
    }

    fn on_sent(&mut self, now: Instant, path: PathId, bytes: usize, _in_flight: u64) {
        if let Some(s) = self.paths.get_mut(&path) {
            s.on_sent(bytes);
            s.on_timeout(now);
        }
    }

    fn on_ack(
        &mut self,
        now: Instant,
        path: PathId,
        _sent: Instant,
        _bytes: usize,
        rtt: &RttSample,
    ) {
        if let Some(s) = self.paths.get_mut(&path) {
            s.on_rtt_sample(now, rtt.latest);
            s.on_timeout(now);
        }
    }

    fn on_congestion_event(
        &mut self,
        _now: Instant,
        _path: PathId,
        _sent: Instant,
        _persistent: bool,
    ) {
        // TFRC reacts to the receiver's loss event rate, not to individual losses.
    }

    fn on_rate_feedback(&mut self, now: Instant, path: PathId, fb: &RateFeedback) {
        if let Some(s) = self.paths.get_mut(&path) {
            s.on_feedback(now, fb);
        }
    }

    fn window(&self, path: PathId) -> u64 {
        // Rate based: the window only caps what may be in flight (two RTTs at the rate).
        self.paths.get(&path).map_or(0, |s| {
            let r = s.rtt().map_or(1.0, |r| r.as_secs_f64());
            (2.0 * s.rate() * r).max(4.0 * s.s) as u64
        })
    }

    fn pacing_rate(&self, path: PathId) -> Option<u64> {
        self.paths.get(&path).map(|s| s.rate().max(1.0) as u64)
    }

    fn name(&self) -> &'static str {
        "tfrc"
    }

    fn rate_control_state(&self, path: PathId) -> Option<crate::cc::RateControlState> {
        self.paths.get(&path).map(|s| crate::cc::RateControlState {
            allowed: s.rate(),
            tfrc: s.rate(),
            tokens: None,
            w_send: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(ms: u64) -> Instant {
        Instant::from_micros(ms * 1000)
    }

    #[test]
    fn a_data_limited_sender_keeps_its_receive_limit_and_halves_it_on_new_loss() {
        let cfg = TfrcConfig { segment_size: 1000, ..TfrcConfig::default() };
        let mut s = TfrcSender::new(&cfg, t(0));
        s.on_rtt_sample(t(0), Duration::from_millis(100));
        let fb = |x_recv: f64, p: f64| RateFeedback { x_recv, p, t_delay: Duration::ZERO };
        // Fully busy interval: 2 × X_recv.
        s.on_feedback(t(100), &fb(50_000.0, 0.0));
        s.on_sent(1_000_000);
        s.on_feedback(t(200), &fb(50_000.0, 0.001));
        let busy = s.rate();
        assert!(busy <= 100_000.0 + 1.0, "{busy}");
        // Data-limited (sent nothing for 1 s) and the receive rate fell: the limit keeps
        // the largest rate seen (Maximize X_recv_set), not twice the low one.
        s.on_feedback(t(1200), &fb(5_000.0, 0.001));
        assert!(s.rate() >= busy.min(2.0 * 50_000.0) * 0.99, "{} vs {busy}", s.rate());
        // Data-limited with a higher loss rate: X_recv_set halved, limit = its maximum.
        s.on_feedback(t(2200), &fb(5_000.0, 0.01));
        assert!(s.rate() <= 25_000.0 + 1.0, "{}", s.rate());
    }

    #[test]
    fn a_jump_to_packet_number_2_62_is_one_loss_event_not_an_endless_scan() {
        let mut rx = TfrcReceiver::new(1200);
        for k in 0..20u64 {
            rx.on_packet(t(k * 10), k, 1200);
        }
        // Before the scan was bounded this call walked 2^62 sequence numbers.
        rx.on_packet(t(200), 1 << 62, 1200);
        rx.on_packet(t(210), (1 << 62) + 1, 1200);
        assert!(rx.loss_event_rate() > 0.0);
        assert!(rx.intervals().len() <= WEIGHTS.len());
        assert!(rx.arrivals_kept() <= MAX_ARRIVALS);
        // A long ordinary gap (below the scan limit) is still scanned packet by packet:
        // its losses, interpolated over 5 s, are several loss events of 100 ms each.
        let mut rx = TfrcReceiver::new(1200);
        for k in 0..10u64 {
            rx.on_packet(t(k), k, 1200);
        }
        rx.on_packet(t(5000), 1000, 1200);
        assert!(rx.intervals().len() > 1, "{:?}", rx.intervals());
    }

    #[test]
    fn equation_matches_the_rfc_formula_evaluated_by_hand() {
        // s = 1000 B, R = 100 ms, p = 0.01:
        // R·sqrt(2p/3) = 0.1·0.0816497 = 0.00816497
        // 12R·sqrt(3p/8)·p·(1+32p²) = 1.2·0.0612372·0.01·1.0032 = 0.000737202
        let x = throughput_bps(1000.0, Duration::from_millis(100), 0.01);
        let expected =
            1000.0 / (0.1 * (0.02f64 / 3.0).sqrt() + 1.2 * (0.03f64 / 8.0).sqrt() * 0.01 * 1.0032);
        assert!((x - expected).abs() < 1e-9);
        // = 1000 / 0.00890217 ≈ 112 332 B/s
        assert!((x - 112_332.2).abs() < 0.5, "{x}");
        assert!(throughput_bps(1000.0, Duration::from_millis(100), 0.0).is_infinite());
        // Monotone in p.
        let mut last = f64::INFINITY;
        for k in 1..100 {
            let v = throughput_bps(1460.0, Duration::from_millis(50), k as f64 / 100.0);
            assert!(v < last);
            last = v;
        }
    }

    #[test]
    fn inverse_recovers_p() {
        for p in [1e-5, 1e-3, 0.01, 0.1, 0.5] {
            let x = throughput_bps(1200.0, Duration::from_millis(80), p);
            let back = loss_rate_for(1200.0, Duration::from_millis(80), x);
            assert!((back - p).abs() / p < 1e-6, "{p} → {back}");
        }
    }

    #[test]
    fn loss_intervals_use_the_eight_weights() {
        let mut r = TfrcReceiver::new(1000);
        r.set_rtt(Duration::from_millis(10));
        // Deliver 1000 packets 1 ms apart, losing every 100th (events far apart in time).
        for seq in 0..1000u64 {
            if seq % 100 == 50 {
                continue;
            }
            r.on_packet(t(seq), seq, 1000);
        }
        // Closed intervals after the seeded first one are exactly 100 packets.
        assert!(r.intervals().len() >= 8);
        assert!(r.intervals()[..7].iter().all(|&i| i == 100.0), "{:?}", r.intervals());
        let p = r.loss_event_rate();
        assert!((p - 0.01).abs() < 0.001, "{p}");
    }

    #[test]
    fn the_first_interval_is_seeded_from_the_last_receive_rate_not_a_burst_after_a_report() {
        // 1 000-byte packets every 100 ms (80 kbit/s), RTT 500 ms, a report at 2 s; three
        // packets arrive within 9 ms of it and the next one is lost (seen lost once
        // NDUPACK later packets are here). The seed must come from the report's X_recv,
        // not from 3 000 bytes over 9 ms (2.7 Mbit/s), which would make p near 0.
        let mut r = TfrcReceiver::new(1000);
        r.set_rtt(Duration::from_millis(500));
        let mut seq = 0u64;
        for k in 0..20u64 {
            r.on_packet(t(k * 100), seq, 1000);
            seq += 1;
        }
        let fb = r.feedback(t(2_000));
        assert!((fb.x_recv - 10_000.0).abs() < 600.0, "X_recv {} B/s", fb.x_recv);
        for ms in [2_001u64, 2_005, 2_009] {
            r.on_packet(t(ms), seq, 1000);
            seq += 1;
        }
        seq += 1; // lost
        for k in 0..4u64 {
            r.on_packet(t(2_100 + k * 100), seq, 1000);
            seq += 1;
        }
        let p = r.loss_event_rate();
        let expected = loss_rate_for(1000.0, Duration::from_millis(500), fb.x_recv);
        assert!(p > 0.5 * expected && p > 1e-3, "p {p}, from X_recv {expected}");
    }

    #[test]
    fn losses_within_one_rtt_are_one_event() {
        let mut r = TfrcReceiver::new(1000);
        r.set_rtt(Duration::from_millis(100));
        for seq in 0..400u64 {
            // A burst of 5 losses 1 ms apart at 200, then nothing.
            if (200..205).contains(&seq) {
                continue;
            }
            r.on_packet(t(seq), seq, 1000);
        }
        assert_eq!(r.intervals().len(), 1, "one seeded interval, no second event");
    }

    #[test]
    fn sender_slow_starts_then_follows_the_equation() {
        let cfg = TfrcConfig { segment_size: 1000, ..TfrcConfig::default() };
        let mut s = TfrcSender::new(&cfg, t(0));
        assert_eq!(s.rate(), 1000.0, "one packet per second before the first RTT");
        s.on_rtt_sample(t(100), Duration::from_millis(100));
        let init = s.rate();
        assert!((init - 4000.0 / 0.1).abs() < 1e-6, "W_init/R = 4·s/R: {init}");
        // Feedback with a large receive rate and no loss: doubles once per RTT.
        s.on_feedback(t(200), &RateFeedback { x_recv: 1e9, p: 0.0, t_delay: Duration::ZERO });
        assert!((s.rate() - 2.0 * init).abs() < 1e-6);
        s.on_feedback(t(250), &RateFeedback { x_recv: 1e9, p: 0.0, t_delay: Duration::ZERO });
        assert!((s.rate() - 2.0 * init).abs() < 1e-6, "not twice within one RTT");
        // Slow start is capped by twice the receive rate.
        s.on_feedback(t(400), &RateFeedback { x_recv: 10_000.0, p: 0.0, t_delay: Duration::ZERO });
        assert!(s.rate() <= 2.0 * 1e9);
        // With loss: the equation, capped by the receive limit.
        s.on_feedback(t(500), &RateFeedback { x_recv: 1e9, p: 0.01, t_delay: Duration::ZERO });
        let eq = throughput_bps(1000.0, s.rtt().unwrap(), 0.01);
        assert!((s.rate() - eq).abs() < 1e-6, "{} vs {eq}", s.rate());
        s.on_feedback(t(600), &RateFeedback { x_recv: 1000.0, p: 0.01, t_delay: Duration::ZERO });
        assert!(s.rate() <= 2.0 * 1e9);
    }

    #[test]
    fn no_feedback_halves_the_rate_but_not_below_one_packet_per_t_mbi() {
        let cfg = TfrcConfig { segment_size: 1000, ..TfrcConfig::default() };
        let mut s = TfrcSender::new(&cfg, t(0));
        s.on_rtt_sample(t(10), Duration::from_millis(100));
        let before = s.rate();
        let at = s.timeout();
        s.on_timeout(at);
        assert!((s.rate() - before / 2.0).abs() < 1e-9);
        for _ in 0..200 {
            let at = s.timeout();
            s.on_timeout(at);
        }
        assert!((s.rate() - 1000.0 / 64.0).abs() < 1e-9, "{}", s.rate());
    }

    #[test]
    fn no_feedback_with_losses_falls_to_the_receive_rate() {
        let cfg = TfrcConfig { segment_size: 1000, ..TfrcConfig::default() };
        let mut s = TfrcSender::new(&cfg, t(0));
        s.on_rtt_sample(t(10), Duration::from_millis(100));
        s.on_feedback(
            t(100),
            &RateFeedback { x_recv: 20_000.0, p: 0.001, t_delay: Duration::ZERO },
        );
        let at = s.timeout();
        s.on_timeout(at);
        // X_Bps(0.001) ≫ 2·X_recv, so the limit is X_recv.
        assert!(s.rate() <= 20_000.0 + 1e-9, "{}", s.rate());
    }
}
