//! The client's playout buffer: a sans-IO state machine
//! `Buffering → Playing ⇄ Rebuffering → Ended`.
//!
//! The driver reports frame arrivals and abandonments ([`Playout::on_arrival`],
//! [`Playout::on_abandoned`]) and advances time ([`Playout::poll`]); the machine decides
//! when playback starts, when a frame is shown, lost or late, and when it stalls. Time is
//! in microseconds on the driver's clock; no clock is read here.
//!
//! Definitions (docs/REFERENCE.md):
//! - **start-up delay**: from the first packet the client sent ([`Playout::new`]'s `now`)
//!   to the first frame displayed. Initial buffering is not a stall.
//! - **stall**: after playback started, the frame due next has neither arrived nor been
//!   abandoned: the media clock stops until the policy's resume threshold is met.
//! - **lost frame**: its data was abandoned; the previous frame stays on screen, the clock
//!   keeps running.
//!
//! Timing convention, shared with [`crate::schedule`]: the decoder consumes frame k at the
//! end of its display interval, media time `pts_k + Δ` (one frame of decoder latency), so a
//! playback started at `t_s` shows frame k at `t_s + pts_k + Δ`. With this convention the
//! oracle policy starting at exactly w* never stalls and starting one slot earlier does.
//! A threshold policy (fixed, media3, adaptive) shows the first frame at the moment its
//! threshold is met, as a resume shows the missing frame at the moment it resumes: its
//! clock started one frame interval before that moment.

use std::collections::VecDeque;

use crate::schedule::{Capacity, PlayoutCurve, end_to_end};

/// Media to buffer before starting, ExoPlayer 2.x's default ([`PlayoutPolicy::fixed`]).
pub const FIXED_START_S: f64 = 2.5;
/// Media to buffer before resuming after a stall, ExoPlayer 2.x's default.
pub const FIXED_RESUME_S: f64 = 5.0;
/// Media to buffer before starting, Media3's `DefaultLoadControl.DEFAULT_BUFFER_FOR_PLAYBACK_MS`.
pub const MEDIA3_START_S: f64 = 1.0;
/// Media to buffer before resuming after a stall, Media3's
/// `DefaultLoadControl.DEFAULT_BUFFER_FOR_PLAYBACK_AFTER_REBUFFER_MS`.
pub const MEDIA3_RESUME_S: f64 = 2.0;

/// When playback starts and resumes.
#[derive(Clone, Debug, PartialEq)]
pub enum PlayoutPolicy {
    /// Fixed thresholds in media seconds ([`PlayoutPolicy::fixed`]: ExoPlayer 2.x's
    /// defaults, 2.5 s to start, 5 s to resume).
    Fixed {
        /// Media buffered before the first frame.
        start_s: f64,
        /// Media buffered before resuming after a stall.
        resume_s: f64,
    },
    /// Media3's fixed thresholds ([`MEDIA3_START_S`], [`MEDIA3_RESUME_S`]).
    Media3,
    /// Thresholds from a forecast of the arrival rate and the w* computation.
    ///
    /// **Rule.** Before starting, and while stalled, at every arrival and poll:
    /// 1. *Forecast* a rate `R`: the smallest mean arrival rate over the rule's look-back
    ///    windows, each cut to the time since the first frame came (the first frame's own
    ///    bytes are left out: its time includes the connection's set-up); with only the
    ///    first frame, its bytes over the time since the first packet.
    /// 2. *Size the buffer*: `T = w* + Δ`, where w* is the minimum start-up delay
    ///    ([`crate::schedule::end_to_end`]) of the next `horizon_s` of media beyond the
    ///    buffered frames, with their announced sizes, over a constant `margin · R`; Δ is
    ///    one frame interval, since the first frame is shown at once. `T` is capped at
    ///    `max_s`.
    /// 3. Start (resume) once the next frame is here and the buffered media is at least
    ///    `T`, or everything is here.
    ///
    /// The start rule ([`AdaptiveConfig::start`]) looks 1 s ahead and assumes half the
    /// forecast (the smallest over 0.25, 1, 4 and 16 s), capped at `fixed`'s 2.5 s; the
    /// resume rule ([`AdaptiveConfig::resume`]) looks 30 s ahead at 0.8 of the last 4 s,
    /// capped at `fixed`'s 5 s: so it never starts or resumes later than `fixed`.
    ///
    /// **Sources.** Step 2 is the proxy paper's w* (ALGORITHMS.md §7) turned forward with a
    /// forecast instead of a known capacity; it is the same idea as BBA-1's dynamic
    /// reservoir (Huang et al., SIGCOMM 2014: the buffer needed to absorb the sizes of the
    /// coming chunks at the current capacity estimate \[recalled\]), with frames for chunks. The caps
    /// keep the policy buffer-bounded whatever the forecast says, as the buffer-based rules
    /// of BBA and BOLA (Spiteri et al., INFOCOM 2016) are: it never waits for more media
    /// than ExoPlayer 2.x's thresholds before starting or resuming. The conservative forecast,
    /// a minimum over several time scales discounted by a margin, follows the robust
    /// throughput predictors of FESTIVE (harmonic mean; Jiang et al., CoNEXT 2012) and
    /// robust MPC (discounted by the recent error; Yin et al., SIGCOMM 2015) \[recalled\];
    /// the asymmetry between start (short look-ahead, so that a fast link starts on its
    /// first frames) and resume (long look-ahead: a stall shows the forecast was wrong, and
    /// one long stall is better than several short ones, as stall frequency weighs more
    /// than stall length in QoE studies such as Hoßfeld et al., QoMEX 2012 \[recalled\]) is
    /// this policy's own. The start rule's numbers (horizon, margin, windows, cap) were
    /// chosen on Markov-modulated traces of other seeds than the bundled ones
    /// (`braid_netem::markov`, seeds 11–18 of its LTE, LTE-driving and UMTS
    /// models), by the number of traces meeting every goal of the playout evaluation
    /// (BENCHMARKS.md, "Playout policies"). The resume rule's were then set so that a link
    /// persistently below the media rate resumes no sooner than `fixed` would (8 s at 0.9,
    /// capped at 4 s, resumed on a forecast that had just failed and stalled more often
    /// than `fixed`); ALGORITHMS.md ("Playout") has the comparison.
    Adaptive(AdaptiveConfig),
    /// Starts exactly `startup_us` after the first packet, whatever is buffered (w* from
    /// the run's own arrival curve, with hindsight); after a stall (which w* rules out for
    /// the curve it was computed from) resumes once 5 s of media are buffered.
    Oracle {
        /// Start-up delay in µs.
        startup_us: i64,
    },
}

impl PlayoutPolicy {
    /// ExoPlayer-like defaults.
    pub fn fixed() -> PlayoutPolicy {
        PlayoutPolicy::Fixed { start_s: FIXED_START_S, resume_s: FIXED_RESUME_S }
    }

    /// Media3's defaults (1 s to start, 2 s to resume).
    pub fn media3() -> PlayoutPolicy {
        PlayoutPolicy::Media3
    }

    /// The adaptive policy with default settings.
    pub fn adaptive() -> PlayoutPolicy {
        PlayoutPolicy::Adaptive(AdaptiveConfig::default())
    }

    /// The policy's name as in scenario files and reports.
    pub fn name(&self) -> &'static str {
        match self {
            PlayoutPolicy::Fixed { .. } => "fixed",
            PlayoutPolicy::Media3 => "media3",
            PlayoutPolicy::Adaptive(_) => "adaptive",
            PlayoutPolicy::Oracle { .. } => "oracle",
        }
    }
}

/// One threshold rule of the adaptive policy (see [`PlayoutPolicy::Adaptive`]).
#[derive(Clone, Debug, PartialEq)]
pub struct ThresholdRule {
    /// Look-back windows of the rate forecast, µs: the forecast is the smallest mean
    /// arrival rate over them.
    pub windows_us: Vec<i64>,
    /// Fraction of the forecast the buffer is sized for.
    pub margin: f64,
    /// Media seconds beyond the buffered frames the buffer must carry through.
    pub horizon_s: f64,
    /// Never wait for more than this much media.
    pub max_s: f64,
}

/// Settings of the adaptive policy (see [`PlayoutPolicy::Adaptive`]).
#[derive(Clone, Debug, PartialEq)]
pub struct AdaptiveConfig {
    /// Before the first frame.
    pub start: ThresholdRule,
    /// After a stall.
    pub resume: ThresholdRule,
}

impl Default for AdaptiveConfig {
    fn default() -> Self {
        AdaptiveConfig {
            start: ThresholdRule {
                windows_us: vec![250_000, 1_000_000, 4_000_000, 16_000_000],
                margin: 0.5,
                horizon_s: 1.0,
                max_s: FIXED_START_S,
            },
            resume: ThresholdRule {
                windows_us: vec![4_000_000],
                margin: 0.8,
                horizon_s: 30.0,
                max_s: FIXED_RESUME_S,
            },
        }
    }
}

/// The buffer's state.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum PlayoutState {
    /// Before the first frame.
    Buffering,
    /// The media clock runs.
    Playing,
    /// Stalled after playback started.
    Rebuffering,
    /// Every frame has been shown or lost.
    Ended,
}

/// What happened, in order, as [`Playout::poll`] advanced time.
#[derive(Clone, Debug, PartialEq)]
pub enum PlayoutEvent {
    /// Playback started (first frame shown at `at_us`).
    Started {
        /// Driver time.
        at_us: i64,
    },
    /// Frame `index` was shown.
    Shown {
        /// Frame index (presentation order).
        index: usize,
        /// Driver time.
        at_us: i64,
    },
    /// Frame `index` was due but abandoned: the previous frame stays on screen.
    Lost {
        /// Frame index.
        index: usize,
        /// Driver time.
        at_us: i64,
    },
    /// A stall began: frame `index` was due and missing.
    StallStarted {
        /// The missing frame.
        index: usize,
        /// Driver time.
        at_us: i64,
    },
    /// The stall ended.
    StallEnded {
        /// Driver time.
        at_us: i64,
        /// How long it lasted, µs.
        duration_us: i64,
    },
    /// The last frame was consumed.
    Ended {
        /// Driver time.
        at_us: i64,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Slot {
    Pending,
    Arrived,
    Abandoned,
}

#[derive(Clone, Copy, Debug)]
struct FrameInfo {
    pts_us: i64,
    bytes: u64,
    slot: Slot,
}

/// Frame slots behind the next frame due that are kept (a late arrival of one of them is
/// still recorded); older ones are dropped so a long stream keeps a bounded window.
const KEEP_BEHIND: usize = 1024;
/// Default of [`Playout::set_max_ahead`]: how far beyond the next frame due a slot may be
/// created.
const DEFAULT_MAX_AHEAD: usize = 1 << 20;

/// The frame slots by absolute index: those from `base` on are kept; the sizes of the
/// dropped ones stay in a running sum, so the mean frame size is that of every frame seen.
#[derive(Debug, Default)]
struct Frames {
    base: usize,
    slots: VecDeque<FrameInfo>,
    dropped_bytes: u64,
    dropped_known: u64,
}

impl Frames {
    /// One past the highest index with a slot (dropped ones included).
    fn len(&self) -> usize {
        self.base + self.slots.len()
    }

    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn get(&self, i: usize) -> Option<&FrameInfo> {
        self.slots.get(i.checked_sub(self.base)?)
    }

    fn get_mut(&mut self, i: usize) -> Option<&mut FrameInfo> {
        self.slots.get_mut(i.checked_sub(self.base)?)
    }

    fn push(&mut self, f: FrameInfo) {
        self.slots.push_back(f);
    }

    fn last(&self) -> Option<&FrameInfo> {
        self.slots.back()
    }

    /// Mean size of the frames whose size is known (dropped ones included).
    fn mean_known_bytes(&self) -> u64 {
        let (sum, n) = self
            .slots
            .iter()
            .filter(|f| f.bytes > 0)
            .fold((self.dropped_bytes, self.dropped_known), |(s, n), f| (s + f.bytes, n + 1));
        sum.checked_div(n).unwrap_or(0)
    }

    /// Drops the slots before `index`.
    fn drop_before(&mut self, index: usize) {
        while self.base < index {
            let Some(f) = self.slots.pop_front() else {
                self.base = index;
                break;
            };
            if f.bytes > 0 {
                self.dropped_bytes += f.bytes;
                self.dropped_known += 1;
            }
            self.base += 1;
        }
    }
}

/// Counters a report needs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PlayoutStats {
    /// First packet → first frame shown, µs.
    pub startup_delay_us: Option<i64>,
    /// Rebuffering events.
    pub stalls: u32,
    /// Their total duration, µs.
    pub stall_time_us: i64,
    /// Frames shown.
    pub frames_shown: usize,
    /// Frames abandoned when due.
    pub frames_lost: usize,
}

/// The playout buffer.
#[derive(Debug)]
pub struct Playout {
    policy: PlayoutPolicy,
    state: PlayoutState,
    frame_interval_us: i64,
    frames: Frames,
    /// Slots are created at most this far beyond the next frame due.
    max_ahead: usize,
    /// Arrivals and abandonments refused: of an index already dropped or too far ahead.
    refused: u64,
    total_frames: Option<usize>,
    first_packet_us: i64,
    /// Next frame to consume.
    next: usize,
    /// Media position when the clock last (re)started, and the driver time it did.
    clock_media_us: i64,
    clock_wall_us: i64,
    stall_since_us: Option<i64>,
    stats: PlayoutStats,
    events: VecDeque<PlayoutEvent>,
    // adaptive state: (arrival time, bytes) of every frame, in arrival order
    arrival_log: Vec<(i64, u64)>,
    buffered_bytes: u64,
    max_threshold_s: f64,
}

impl Playout {
    /// A buffer for frames of nominal interval `frame_interval_us`; `now` is when the
    /// client sent its first packet.
    pub fn new(policy: PlayoutPolicy, frame_interval_us: i64, now_us: i64) -> Playout {
        Playout {
            policy,
            state: PlayoutState::Buffering,
            frame_interval_us: frame_interval_us.max(1),
            frames: Frames::default(),
            max_ahead: DEFAULT_MAX_AHEAD,
            refused: 0,
            total_frames: None,
            first_packet_us: now_us,
            next: 0,
            clock_media_us: 0,
            clock_wall_us: now_us,
            stall_since_us: None,
            stats: PlayoutStats::default(),
            events: VecDeque::new(),
            arrival_log: Vec::new(),
            buffered_bytes: 0,
            max_threshold_s: f64::INFINITY,
        }
    }

    /// Caps every start and resume threshold (a threshold above the buffer's capacity
    /// would never be reached).
    pub fn set_max_threshold_s(&mut self, cap: f64) {
        if cap.is_finite() && cap > 0.0 {
            self.max_threshold_s = cap;
        }
    }

    /// Counters as of `now`, with a stall still in progress counted up to `now`.
    pub fn stats_at(&self, now_us: i64) -> PlayoutStats {
        let mut s = self.stats.clone();
        if let Some(since) = self.stall_since_us {
            s.stall_time_us += (now_us - since).max(0);
        }
        s
    }

    /// Announces frames to come: `(pts_us, bytes)` for frames `first..` in presentation
    /// order (the stream's plan, e.g. sent by the server up front). Optional; the adaptive
    /// policy uses it for an exact w*, otherwise it assumes the frames seen so far are
    /// typical. Does not fix the stream's length (see [`Playout::set_total_frames`]).
    pub fn set_plan(&mut self, first: usize, plan: &[(i64, u64)]) {
        for (i, &(pts_us, bytes)) in plan.iter().enumerate() {
            if self.frames.get(first + i).is_none_or(|f| f.slot == Slot::Pending) {
                self.ensure(first + i, pts_us, bytes);
            }
        }
    }

    /// The stream has `total` frames (end of stream known).
    pub fn set_total_frames(&mut self, total: usize) {
        self.total_frames = Some(total);
    }

    /// Slots are created at most `frames` beyond the next frame due (default 2^20): an
    /// index further ahead (from a peer, e.g. 0xFFFFFFFF) is refused and counted
    /// ([`Playout::refused`]) instead of allocating every slot up to it.
    pub fn set_max_ahead(&mut self, frames: usize) {
        self.max_ahead = frames.max(1);
    }

    /// Arrivals and abandonments refused: their index was too far ahead of the next frame
    /// due, or so far behind that its slot was already dropped.
    pub fn refused(&self) -> u64 {
        self.refused
    }

    /// The index of the next frame due.
    pub fn next_index(&self) -> usize {
        self.next
    }

    /// Frame slots held (the next ones due, and at most 1024 behind them).
    pub fn retained_frames(&self) -> usize {
        self.frames.slots.len()
    }

    /// The slot of `index`, created (with the slots before it) if needed; `false` if the
    /// index is refused.
    fn ensure(&mut self, index: usize, pts_us: i64, bytes: u64) -> bool {
        if index < self.frames.base
            || (index >= self.frames.len() && index.saturating_sub(self.next) >= self.max_ahead)
        {
            self.refused += 1;
            return false;
        }
        while self.frames.len() <= index {
            let k = self.frames.len() as i64;
            self.frames.push(FrameInfo {
                pts_us: k * self.frame_interval_us,
                bytes: 0,
                slot: Slot::Pending,
            });
        }
        let Some(f) = self.frames.get_mut(index) else { return false };
        f.pts_us = pts_us;
        if bytes > 0 {
            f.bytes = bytes;
        }
        true
    }

    /// Frame `index` (presentation order, media time `pts_us` from the clip start) has
    /// fully arrived with `bytes` bytes.
    pub fn on_arrival(&mut self, now_us: i64, index: usize, pts_us: i64, bytes: u64) {
        if !self.ensure(index, pts_us, bytes) {
            if index < self.frames.base {
                // Long consumed: its slot is gone, but its bytes did arrive.
                self.log_arrival(now_us, bytes);
            }
            return;
        }
        if let Some(f) = self.frames.get_mut(index)
            && f.slot == Slot::Pending
        {
            f.slot = Slot::Arrived;
            if index >= self.next {
                self.buffered_bytes += bytes;
            }
        }
        self.log_arrival(now_us, bytes);
    }

    /// Frame `index` will never arrive (its data was abandoned).
    pub fn on_abandoned(&mut self, _now_us: i64, index: usize, pts_us: i64) {
        if !self.ensure(index, pts_us, 0) {
            return;
        }
        if let Some(f) = self.frames.get_mut(index)
            && f.slot == Slot::Pending
        {
            f.slot = Slot::Abandoned;
        }
    }

    fn log_arrival(&mut self, now_us: i64, bytes: u64) {
        if matches!(self.policy, PlayoutPolicy::Adaptive(_)) {
            self.arrival_log.push((now_us, bytes));
        }
    }

    /// The rate forecast at `now`, bit/s: the smallest mean arrival rate over the
    /// configured look-back windows, each cut to the time since the first frame came
    /// (whose own bytes are not counted: they include the connection's set-up). With a
    /// single frame so far, its bytes over the time since the first packet.
    fn forecast_bps(&self, windows: &[i64], now_us: i64) -> Option<f64> {
        let &(t0, b0) = self.arrival_log.first()?;
        if now_us <= t0 {
            let elapsed = (t0 - self.first_packet_us).max(1);
            return Some(b0 as f64 * 8.0 / (elapsed as f64 / 1e6));
        }
        let mut best: Option<f64> = None;
        for &w in windows {
            let from = (now_us - w).max(t0);
            let span = now_us - from;
            if span <= 0 {
                continue;
            }
            // Frames that came in (from, now].
            let start = self.arrival_log.partition_point(|&(t, _)| t <= from);
            let bytes: u64 = self.arrival_log[start..]
                .iter()
                .take_while(|&&(t, _)| t <= now_us)
                .map(|&(_, b)| b)
                .sum();
            let r = bytes as f64 * 8.0 / (span as f64 / 1e6);
            best = Some(best.map_or(r, |b: f64| b.min(r)));
        }
        best
    }

    /// The current state.
    pub fn state(&self) -> PlayoutState {
        self.state
    }

    /// Counters so far.
    pub fn stats(&self) -> &PlayoutStats {
        &self.stats
    }

    /// The policy.
    pub fn policy(&self) -> &PlayoutPolicy {
        &self.policy
    }

    /// Media position (µs of media consumed) at `now`.
    pub fn position_us(&self, now_us: i64) -> i64 {
        match self.state {
            PlayoutState::Playing => self.clock_media_us + (now_us - self.clock_wall_us).max(0),
            _ => self.clock_media_us,
        }
    }

    /// The media time up to which frames are here (arrived or abandoned), contiguously
    /// from the next frame due.
    fn contiguous_end_us(&self) -> i64 {
        let mut k = self.next;
        while self.frames.get(k).is_some_and(|f| f.slot != Slot::Pending) {
            k += 1;
        }
        if k == self.next {
            self.frames.get(k).map(|f| f.pts_us).unwrap_or(self.clock_media_us)
        } else {
            self.frames.get(k - 1).map_or(self.clock_media_us, |f| f.pts_us)
                + self.frame_interval_us
        }
    }

    /// Media seconds buffered ahead of the playout position.
    pub fn buffered_s(&self, now_us: i64) -> f64 {
        let pos = self.position_us(now_us).max(self.next_pts().unwrap_or(0));
        ((self.contiguous_end_us() - pos).max(0)) as f64 / 1e6
    }

    /// Bytes received and not yet consumed.
    pub fn buffered_bytes(&self) -> u64 {
        self.buffered_bytes
    }

    fn next_pts(&self) -> Option<i64> {
        self.frames.get(self.next).map(|f| f.pts_us)
    }

    fn all_here(&self) -> bool {
        match self.total_frames {
            Some(n) => {
                self.frames.len() >= n
                    && (self.next..n.min(self.frames.len()))
                        .all(|i| self.frames.get(i).is_none_or(|f| f.slot != Slot::Pending))
            }
            None => false,
        }
    }

    /// Media seconds the policy wants buffered before starting (or resuming) now.
    pub fn threshold_s(&self, now_us: i64, resuming: bool) -> f64 {
        match &self.policy {
            PlayoutPolicy::Fixed { start_s, resume_s } => {
                if resuming {
                    *resume_s
                } else {
                    *start_s
                }
            }
            PlayoutPolicy::Media3 => {
                if resuming {
                    MEDIA3_RESUME_S
                } else {
                    MEDIA3_START_S
                }
            }
            PlayoutPolicy::Oracle { .. } => self.max_threshold_s.min(5.0),
            PlayoutPolicy::Adaptive(cfg) => {
                self.adaptive_threshold(if resuming { &cfg.resume } else { &cfg.start }, now_us)
            }
        }
        .min(self.max_threshold_s)
    }

    /// The adaptive policy's threshold (see [`PlayoutPolicy::Adaptive`]): w* + Δ of the
    /// next `horizon_s` of media beyond the buffered frames over `margin` × the forecast.
    fn adaptive_threshold(&self, rule: &ThresholdRule, now_us: i64) -> f64 {
        let Some(rate) = self.forecast_bps(&rule.windows_us, now_us).filter(|r| *r > 0.0) else {
            return rule.max_s;
        };
        let rate = rate * rule.margin;
        // The frames beyond what is already here, as a playout curve whose media time
        // starts at the buffered end.
        let here_end = self.contiguous_end_us();
        let mut k = self.next;
        while self.frames.get(k).is_some_and(|f| f.slot != Slot::Pending) {
            k += 1;
        }
        let mean_bytes = self.frames.mean_known_bytes();
        let ahead = (rule.horizon_s * 1e6 / self.frame_interval_us as f64).ceil() as usize;
        let horizon = match self.total_frames {
            Some(n) => n.saturating_sub(k).min(ahead),
            None => ahead,
        };
        let interval_s = self.frame_interval_us as f64 / 1e6;
        if horizon == 0 || mean_bytes == 0 {
            return interval_s.min(rule.max_s);
        }
        // Frames not announced (beyond the plan) are taken to be of the mean size and to
        // follow at the nominal interval.
        let units: Vec<(i64, u64)> = (0..horizon)
            .map(|i| {
                let f = self.frames.get(k + i);
                let pts = f.map(|f| f.pts_us).unwrap_or((k + i) as i64 * self.frame_interval_us);
                let bytes = f.map(|f| f.bytes).filter(|&b| b > 0).unwrap_or(mean_bytes);
                ((pts - here_end).max(0), bytes)
            })
            .collect();
        let slot = crate::schedule::DEFAULT_SLOT_US.max(self.frame_interval_us / 4);
        let w = PlayoutCurve::from_units(&units, self.frame_interval_us, slot)
            .and_then(|d| end_to_end(&d, &Capacity::constant(rate, slot, 1)))
            .map(|s| s.startup_delay_s)
            .unwrap_or(rule.max_s);
        // Starting (or resuming) now shows the next frame at once, so the buffered media
        // lasts `buffered_s` and the rest is consumed from `buffered_s − Δ` on in the
        // schedule's convention: it has `buffered_s − Δ` as its start-up delay, and
        // buffering w* + Δ makes it feasible at the assumed rate.
        (w + interval_s).min(rule.max_s)
    }

    /// The next time [`Playout::poll`] must be called even without new arrivals.
    pub fn poll_timeout(&self) -> Option<i64> {
        match self.state {
            PlayoutState::Playing => {
                let f = self.frames.get(self.next)?;
                Some(self.clock_wall_us + (f.pts_us + self.frame_interval_us - self.clock_media_us))
            }
            PlayoutState::Buffering => match self.policy {
                PlayoutPolicy::Oracle { startup_us } => Some(self.first_packet_us + startup_us),
                _ => None,
            },
            _ => None,
        }
    }

    /// Advances to `now` and returns what happened, in order.
    pub fn poll(&mut self, now_us: i64) -> Vec<PlayoutEvent> {
        self.step(now_us);
        self.frames.drop_before(self.next.saturating_sub(KEEP_BEHIND));
        self.events.drain(..).collect()
    }

    fn step(&mut self, now_us: i64) {
        loop {
            match self.state {
                PlayoutState::Ended => return,
                PlayoutState::Buffering => {
                    let go = match self.policy {
                        PlayoutPolicy::Oracle { startup_us } => {
                            now_us >= self.first_packet_us + startup_us
                        }
                        _ => {
                            self.frames.get(self.next).is_some_and(|f| f.slot != Slot::Pending)
                                && (self.all_here()
                                    || self.buffered_s(now_us) >= self.threshold_s(now_us, false))
                        }
                    };
                    if !go || self.frames.is_empty() && self.total_frames != Some(0) {
                        if self.total_frames == Some(0) {
                            self.end(now_us);
                        }
                        return;
                    }
                    // The oracle's clock starts at its start-up delay and shows the first
                    // frame one interval later; a threshold policy shows the first frame
                    // now, as a resume shows the missing frame at once, so its clock
                    // started one interval ago (see the module's timing convention).
                    let start_at = match self.policy {
                        PlayoutPolicy::Oracle { startup_us } => self.first_packet_us + startup_us,
                        _ => now_us - self.frame_interval_us,
                    };
                    self.clock_media_us =
                        self.frames.get(0).map_or(self.clock_media_us, |f| f.pts_us);
                    self.clock_wall_us = start_at;
                    self.state = PlayoutState::Playing;
                }
                PlayoutState::Rebuffering => {
                    let ready = match self.frames.get(self.next) {
                        Some(f) if f.slot != Slot::Pending => {
                            self.all_here()
                                || self.buffered_s(now_us) >= self.threshold_s(now_us, true)
                        }
                        _ => false,
                    };
                    if !ready {
                        return;
                    }
                    let since = self.stall_since_us.take().unwrap_or(now_us);
                    let duration_us = now_us - since;
                    self.stats.stall_time_us += duration_us;
                    self.events.push_back(PlayoutEvent::StallEnded { at_us: now_us, duration_us });
                    // The clock resumes at the frame it stopped on.
                    self.clock_wall_us = now_us;
                    self.state = PlayoutState::Playing;
                }
                PlayoutState::Playing => {
                    if self.total_frames.is_some_and(|n| self.next >= n) {
                        self.end(now_us);
                        return;
                    }
                    let Some(f) = self.frames.get(self.next).copied() else {
                        // Nothing known about the next frame yet: it is due one interval
                        // after the previous one.
                        let due_media = self
                            .frames
                            .last()
                            .map(|l| l.pts_us + 2 * self.frame_interval_us)
                            .unwrap_or(0);
                        let due_wall = self.clock_wall_us + (due_media - self.clock_media_us);
                        if now_us >= due_wall {
                            self.ensure(self.next, due_media - self.frame_interval_us, 0);
                            continue;
                        }
                        return;
                    };
                    let due_wall = self.clock_wall_us
                        + (f.pts_us + self.frame_interval_us - self.clock_media_us);
                    if now_us < due_wall {
                        return;
                    }
                    match f.slot {
                        Slot::Arrived => {
                            if self.stats.startup_delay_us.is_none() {
                                self.stats.startup_delay_us = Some(due_wall - self.first_packet_us);
                                self.events.push_back(PlayoutEvent::Started { at_us: due_wall });
                            }
                            self.stats.frames_shown += 1;
                            self.buffered_bytes = self.buffered_bytes.saturating_sub(f.bytes);
                            self.events.push_back(PlayoutEvent::Shown {
                                index: self.next,
                                at_us: due_wall,
                            });
                            self.next += 1;
                        }
                        Slot::Abandoned => {
                            self.stats.frames_lost += 1;
                            self.events.push_back(PlayoutEvent::Lost {
                                index: self.next,
                                at_us: due_wall,
                            });
                            self.next += 1;
                        }
                        Slot::Pending => {
                            // Stall: the clock stops at the missing frame.
                            self.clock_media_us = f.pts_us + self.frame_interval_us;
                            self.clock_wall_us = due_wall;
                            self.state = PlayoutState::Rebuffering;
                            self.stall_since_us = Some(due_wall);
                            self.stats.stalls += 1;
                            self.events.push_back(PlayoutEvent::StallStarted {
                                index: self.next,
                                at_us: due_wall,
                            });
                            continue;
                        }
                    }
                }
            }
        }
    }

    fn end(&mut self, now_us: i64) {
        self.state = PlayoutState::Ended;
        self.events.push_back(PlayoutEvent::Ended { at_us: now_us });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DT: i64 = 40_000; // 25 fps

    /// Drives a playout over arrivals `(time_us, index)` of `n` frames of `bytes` each,
    /// polling every millisecond until the end. Returns the final stats.
    fn drive(
        mut p: Playout,
        n: usize,
        bytes: u64,
        arrivals: &[(i64, usize)],
    ) -> (PlayoutStats, Vec<PlayoutEvent>) {
        p.set_total_frames(n);
        let mut events = Vec::new();
        let mut a = 0;
        let mut t = 0i64;
        while p.state() != PlayoutState::Ended && t < 600_000_000 {
            while a < arrivals.len() && arrivals[a].0 <= t {
                let k = arrivals[a].1;
                p.on_arrival(arrivals[a].0, k, k as i64 * DT, bytes);
                a += 1;
            }
            events.extend(p.poll(t));
            t += 1_000;
        }
        (p.stats().clone(), events)
    }

    /// Frame k arrives at k·spacing + offset.
    fn arrivals(n: usize, spacing: i64, offset: i64) -> Vec<(i64, usize)> {
        (0..n).map(|k| (k as i64 * spacing + offset, k)).collect()
    }

    #[test]
    fn fixed_policy_starts_after_two_and_a_half_seconds_of_media() {
        let (s, ev) = drive(
            Playout::new(PlayoutPolicy::fixed(), DT, 0),
            250,
            1000,
            &arrivals(250, 10_000, 10_000),
        );
        // 2.5 s of media = 63 frames (pts + Δ ≥ 2.5 s), arriving every 10 ms.
        let start = s.startup_delay_us.unwrap();
        assert!((620_000..=720_000).contains(&start), "{start}");
        assert_eq!(s.stalls, 0);
        assert_eq!(s.frames_shown, 250);
        assert!(matches!(ev.last(), Some(PlayoutEvent::Ended { .. })));
    }

    #[test]
    fn arrivals_slower_than_real_time_stall_and_resume() {
        // Frames arrive every 60 ms but play every 40 ms.
        let (s, ev) = drive(
            Playout::new(PlayoutPolicy::fixed(), DT, 0),
            250,
            1000,
            &arrivals(250, 60_000, 60_000),
        );
        assert!(s.stalls >= 1, "{s:?}");
        assert!(s.stall_time_us > 0);
        assert_eq!(s.frames_shown, 250);
        let starts = ev.iter().filter(|e| matches!(e, PlayoutEvent::StallStarted { .. })).count();
        let ends = ev.iter().filter(|e| matches!(e, PlayoutEvent::StallEnded { .. })).count();
        assert_eq!(starts, ends);
    }

    #[test]
    fn abandoned_frames_are_lost_without_stalling() {
        let mut p = Playout::new(PlayoutPolicy::Fixed { start_s: 0.2, resume_s: 0.2 }, DT, 0);
        p.set_total_frames(50);
        for k in 0..50 {
            if k % 10 == 5 {
                p.on_abandoned(0, k, k as i64 * DT);
            } else {
                p.on_arrival(0, k, k as i64 * DT, 500);
            }
        }
        let mut t = 0;
        while p.state() != PlayoutState::Ended {
            p.poll(t);
            t += 5_000;
        }
        assert_eq!(p.stats().frames_lost, 5);
        assert_eq!(p.stats().frames_shown, 45);
        assert_eq!(p.stats().stalls, 0);
    }

    #[test]
    fn oracle_at_w_star_never_stalls_and_one_slot_earlier_does() {
        // CBR clip of 1000-byte frames at 200 kbit/s over a 100 kbit/s link: arrivals every 80 ms.
        let n = 100;
        let arr = arrivals(n, 80_000, 80_000);
        let units: Vec<(i64, u64)> = (0..n).map(|k| (k as i64 * DT, 1000)).collect();
        let d = PlayoutCurve::from_units(&units, DT, 10_000).unwrap();
        // The arrival curve as capacity: 1000 bytes every 80 ms.
        let cap = Capacity::from_events(
            (0..n).map(|k| ((k as i64 + 1) * 80_000, 1000)),
            (n as i64 + 1) * 80_000,
            10_000,
        );
        let w = end_to_end(&d, &cap).unwrap();
        let w_us = w.w_slots as i64 * 10_000;
        let (s, _) =
            drive(Playout::new(PlayoutPolicy::Oracle { startup_us: w_us }, DT, 0), n, 1000, &arr);
        assert_eq!(s.stalls, 0, "oracle at w* = {w_us} µs stalled");
        let (s, _) = drive(
            Playout::new(PlayoutPolicy::Oracle { startup_us: w_us - 10_000 }, DT, 0),
            n,
            1000,
            &arr,
        );
        assert!(s.stalls >= 1, "one slot earlier than w* must stall");
    }

    #[test]
    fn adaptive_starts_sooner_than_fixed_when_the_link_is_fast() {
        let arr = arrivals(250, 5_000, 5_000);
        let (fixed, _) = drive(Playout::new(PlayoutPolicy::fixed(), DT, 0), 250, 1000, &arr);
        let (adaptive, _) = drive(Playout::new(PlayoutPolicy::adaptive(), DT, 0), 250, 1000, &arr);
        assert_eq!(adaptive.stalls, 0);
        assert!(adaptive.startup_delay_us < fixed.startup_delay_us, "{adaptive:?} vs {fixed:?}");
    }

    #[test]
    fn adaptive_stalls_no_more_than_fixed_on_a_slow_link() {
        let arr = arrivals(250, 55_000, 55_000);
        let (fixed, _) = drive(Playout::new(PlayoutPolicy::fixed(), DT, 0), 250, 1000, &arr);
        let (adaptive, _) = drive(Playout::new(PlayoutPolicy::adaptive(), DT, 0), 250, 1000, &arr);
        assert!(
            adaptive.stalls < fixed.stalls
                || (adaptive.stalls == fixed.stalls
                    && adaptive.startup_delay_us <= fixed.startup_delay_us),
            "adaptive {adaptive:?} vs fixed {fixed:?}"
        );
    }

    #[test]
    fn an_index_of_0xffffffff_is_refused_without_allocating_its_slots() {
        let mut p = Playout::new(PlayoutPolicy::fixed(), DT, 0);
        p.on_arrival(0, 0, 0, 1000);
        // Before the bound this pushed 2^32 slots (~100 GB).
        p.on_arrival(1, 0xFFFF_FFFF, 0, 1000);
        p.on_abandoned(1, 0xFFFF_FFFE, 0);
        assert_eq!(p.refused(), 2);
        assert_eq!(p.retained_frames(), 1);
        assert_eq!(p.buffered_bytes(), 1000);
    }

    #[test]
    fn a_long_stream_keeps_a_bounded_window_of_slots() {
        let n = 60_000; // 40 minutes at 25 fps
        let mut p = Playout::new(PlayoutPolicy::fixed(), DT, 0);
        p.set_total_frames(n);
        let mut most = 0;
        let mut t = 0i64;
        let mut next_arrival = 0usize;
        while p.state() != PlayoutState::Ended {
            // Frames arrive 3 s ahead of real time.
            while next_arrival < n && (next_arrival as i64 * DT) <= t + 3_000_000 {
                p.on_arrival(t, next_arrival, next_arrival as i64 * DT, 1000);
                next_arrival += 1;
            }
            p.poll(t);
            most = most.max(p.retained_frames());
            t += DT;
        }
        assert_eq!(p.stats().frames_shown, n);
        assert!(most <= KEEP_BEHIND + 200, "{most} slots retained");
    }

    #[test]
    fn a_threshold_policy_shows_the_first_frame_when_its_threshold_is_met() {
        // Five frames (0.2 s of media) arrive together at 100 ms.
        let arr: Vec<(i64, usize)> = (0..5).map(|k| (100_000, k)).collect();
        let p = Playout::new(PlayoutPolicy::Fixed { start_s: 0.2, resume_s: 0.2 }, DT, 0);
        let (s, ev) = drive(p, 5, 1000, &arr);
        assert_eq!(s.startup_delay_us, Some(100_000));
        assert!(ev.contains(&PlayoutEvent::Shown { index: 0, at_us: 100_000 }), "{ev:?}");
        assert!(ev.contains(&PlayoutEvent::Shown { index: 4, at_us: 260_000 }), "{ev:?}");
        assert_eq!(s.stalls, 0);
    }

    #[test]
    fn media3_starts_at_one_second_of_media_and_resumes_at_two() {
        // 30 frames every 10 ms, then a 3 s gap, then the rest every 10 ms.
        let n = 200;
        let arr: Vec<(i64, usize)> = (0..n)
            .map(|k| {
                let t = (k as i64 + 1) * 10_000;
                (if k < 30 { t } else { t + 3_000_000 }, k)
            })
            .collect();
        let (s, ev) = drive(Playout::new(PlayoutPolicy::media3(), DT, 0), n, 1000, &arr);
        // 1 s of media = 25 frames, here at 250 ms.
        assert_eq!(s.startup_delay_us, Some(250_000));
        assert_eq!(s.stalls, 1);
        // Frame 30 is due at 250 ms + 30·40 ms = 1.45 s and comes at 3.31 s. The stalled
        // clock stands at the end of frame 30's interval, so 2 s of media beyond it take
        // frames up to 80, here at 3.81 s.
        let ended = ev.iter().find_map(|e| match e {
            PlayoutEvent::StallEnded { at_us, .. } => Some(*at_us),
            _ => None,
        });
        assert_eq!(ended, Some(3_810_000), "{ev:?}");
        assert_eq!(PlayoutPolicy::media3().name(), "media3");
        assert_eq!(s.frames_shown, n);
    }

    #[test]
    fn adaptive_starts_on_the_first_frames_of_a_link_far_faster_than_the_media() {
        // 1000-byte frames (200 kbit/s) every 2 ms: ten times the media rate.
        let arr = arrivals(250, 2_000, 2_000);
        let (s, _) = drive(Playout::new(PlayoutPolicy::adaptive(), DT, 0), 250, 1000, &arr);
        assert_eq!(s.stalls, 0);
        // The first frame alone (1000 bytes in 2 ms: 4 Mbit/s, half of it still ten times
        // the media rate) is enough.
        assert_eq!(s.startup_delay_us, Some(2_000));
    }

    #[test]
    fn adaptive_buffers_the_coming_deficit_of_a_link_near_the_media_rate() {
        // Frames every 36 ms: 1.11× the media rate. At half of that, the next second of
        // media takes 1.8 s to come: w* ≈ 0.8 s, so about 0.84 s of media (21 frames, here
        // at 0.76 s) is buffered first.
        let arr = arrivals(250, 36_000, 36_000);
        let (s, _) = drive(Playout::new(PlayoutPolicy::adaptive(), DT, 0), 250, 1000, &arr);
        let start = s.startup_delay_us.unwrap();
        assert!((720_000..=850_000).contains(&start), "{start}");
        assert_eq!(s.stalls, 0);
        let (fixed, _) = drive(Playout::new(PlayoutPolicy::fixed(), DT, 0), 250, 1000, &arr);
        assert!(s.startup_delay_us < fixed.startup_delay_us);
    }

    #[test]
    fn adaptive_never_waits_for_more_than_its_caps() {
        // Half the media rate: the forecast deficit is far above the caps.
        let arr = arrivals(250, 80_000, 80_000);
        let mut p = Playout::new(PlayoutPolicy::adaptive(), DT, 0);
        p.set_total_frames(250);
        for &(t, k) in &arr[..40] {
            p.on_arrival(t, k, k as i64 * DT, 1000);
        }
        let now = arr[39].0;
        assert_eq!(p.threshold_s(now, false), 2.5);
        assert_eq!(p.threshold_s(now, true), 5.0);
    }

    #[test]
    fn the_forecast_is_the_slowest_of_its_windows() {
        let cfg = AdaptiveConfig::default();
        let mut p = Playout::new(PlayoutPolicy::Adaptive(cfg.clone()), DT, 0);
        // 10 kB every 10 ms for 2 s (8 Mbit/s), then every 40 ms for 1 s (2 Mbit/s).
        let mut t = 0;
        let mut k = 0;
        while t < 3_000_000 {
            t += if t < 2_000_000 { 10_000 } else { 40_000 };
            p.on_arrival(t, k, k as i64 * DT, 10_000);
            k += 1;
        }
        let r = p.forecast_bps(&cfg.start.windows_us, t).unwrap();
        assert!((r - 2e6).abs() < 0.1e6, "{r}");
        // The 4-s window alone spans both: 6 + 1 s worth of bytes, i.e. ≈ 6 Mbit/s.
        let r = p.forecast_bps(&[4_000_000], t).unwrap();
        assert!((r - 6e6).abs() < 0.2e6, "{r}");
    }
}
