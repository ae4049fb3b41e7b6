//! What the application does on each end of a simulated connection.
//!
//! The simulator calls [`Workload::on_server`] / [`Workload::on_client`] every time the
//! respective connection has taken input (a datagram, a timer, its own wake-up), so a
//! workload only has to send what it can and read what there is. [`Bulk`] is the bulk
//! transfer; the media stream of the player plugs in through the same trait (pass it to
//! [`super::run_with_workload`]).

use std::collections::VecDeque;

use braid_media::playout;
use bytes::Bytes;

use super::report::StreamReport;
pub use braid_transport::bulk::DeliveryCheck;
use braid_transport::bulk::{self, BulkSource, BulkVerifier};
use braid_transport::profile::MediaReliability;
use braid_transport::proto::{Connection, Delivery, Reliability, SendError};
use braid_transport::time::Instant;

/// The application on both ends of one simulated connection.
pub trait Workload {
    /// The server side may send (called after every input to the server connection; the
    /// first call comes right after it accepted the client).
    fn on_server(&mut self, now: Instant, conn: &mut Connection);
    /// The client side may read (called after every input to the client connection).
    fn on_client(&mut self, now: Instant, conn: &mut Connection);
    /// When the workload wants to be called again without any input (media pacing, a
    /// scripted reader); `None`: only on input.
    fn poll_timeout(&self) -> Option<Instant> {
        None
    }
    /// The transfer is complete (the simulation still runs to the scenario's end).
    fn is_done(&self) -> bool {
        false
    }
    /// What was delivered so far.
    fn stats(&self) -> WorkloadStats;
    /// Stream figures for the report (stream workloads only).
    fn stream_report(&self) -> Option<StreamReport> {
        None
    }
    /// The client's connection closed at `now` before the workload was done. Returns
    /// whether that cut the session short (see [`super::SimResult::stopped`]): its
    /// figures then end there. `false`: everything was already received (a stream that
    /// only plays out its buffer).
    fn on_stopped(&mut self, now: Instant) -> bool {
        let _ = now;
        true
    }
    /// Whether the last call left work for the other leg of a `[[node]]` (the simulator
    /// then gives the node's endpoint on that leg a turn); clears the request. Only the
    /// node's relay halves ([`super::node`]) ever answer `true`.
    fn take_linked_wake(&mut self) -> bool {
        false
    }
}

/// What a workload delivered.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WorkloadStats {
    /// Message payload bytes the client application read.
    pub bytes_delivered: u64,
    /// Messages read.
    pub messages: u64,
    /// In-order delivery delay per message (send_message → read_message), µs.
    pub delays_us: Vec<u64>,
    /// Integrity of what was read.
    pub check: DeliveryCheck,
    /// When the transfer completed, if it did.
    pub done_at: Option<Instant>,
}

/// Bulk transfer: the server queues messages as fast as flow control allows, the client
/// reads everything at once. The messages and their check are those of [`braid_transport::bulk`].
#[derive(Debug)]
pub struct Bulk {
    source: BulkSource,
    verifier: BulkVerifier,
    sent_count: u64,
    sent_at: VecDeque<(u64, Instant)>,
    verify: bool,
    stop_sending: bool,
    stats: WorkloadStats,
}

impl Bulk {
    /// Default message size.
    pub const MESSAGE_BYTES: usize = bulk::MESSAGE_BYTES;

    /// `total` bytes (`None`: unlimited) in messages of [`Bulk::MESSAGE_BYTES`]. With
    /// `verify`, the client checks every message's bytes and records its delay (ids and
    /// gaps are always checked).
    pub fn new(total: Option<u64>, verify: bool) -> Bulk {
        let source = BulkSource::new(Bulk::MESSAGE_BYTES, total);
        Bulk {
            verifier: BulkVerifier::new(source.clone(), verify),
            source,
            sent_count: 0,
            sent_at: VecDeque::new(),
            verify,
            stop_sending: false,
            stats: WorkloadStats::default(),
        }
    }

    /// Stops queueing new messages (what is queued still goes out).
    pub fn stop(&mut self) {
        self.stop_sending = true;
    }
}

impl Workload for Bulk {
    fn on_server(&mut self, now: Instant, conn: &mut Connection) {
        while !self.stop_sending {
            // The connection numbers messages 0, 1, 2, … in send order.
            let id = self.sent_count;
            let Some(payload) = self.source.message(id) else { break };
            if conn.send_capacity() < payload.len() as u64 {
                break;
            }
            match conn.send_message(now, payload, Reliability::Reliable) {
                Ok(assigned) => {
                    self.sent_count = assigned + 1;
                    self.sent_at.push_back((assigned, now));
                }
                Err(SendError::Blocked | SendError::Closed) => break,
            }
        }
    }

    fn on_client(&mut self, now: Instant, conn: &mut Connection) {
        while let Some(d) = conn.read_message(now) {
            match d {
                Delivery::Message { id, data } => {
                    self.stats.messages += 1;
                    self.stats.bytes_delivered += data.len() as u64;
                    self.verifier.on_message(id, &data);
                    while self.sent_at.front().is_some_and(|f| f.0 < id) {
                        self.sent_at.pop_front();
                    }
                    if let Some(&(sid, at)) = self.sent_at.front()
                        && sid == id
                    {
                        self.sent_at.pop_front();
                        if self.verify {
                            self.stats.delays_us.push((now - at).as_micros() as u64);
                        }
                    }
                }
                Delivery::Gap { id } => {
                    self.verifier.on_gap(id);
                }
            }
        }
        self.stats.check = self.verifier.check();
        if self.stats.done_at.is_none()
            && self.source.total().is_some_and(|t| self.stats.bytes_delivered >= t)
        {
            self.stats.done_at = Some(now);
        }
    }

    fn is_done(&self) -> bool {
        self.stats.done_at.is_some()
    }

    fn stats(&self) -> WorkloadStats {
        self.stats.clone()
    }
}

/// How a [`CbrStream`] client reads.
#[derive(Clone, Debug, PartialEq)]
pub enum ReadPattern {
    /// Everything, as soon as it is in order.
    All,
    /// At scripted rates (bit/s), each held for `period`, cycling; unread data stays in
    /// the receive buffer (and so throttles the sender through flow control).
    Rates {
        /// Read rates, bit/s.
        rates_bps: Vec<u64>,
        /// How long each rate lasts.
        period: std::time::Duration,
    },
}

/// A constant-rate message stream with no media behind it: from the moment the server
/// accepts the client it queues one `message_bytes` message every
/// `message_bytes·8/rate_bps` seconds (falling behind while flow control blocks it and
/// catching up afterwards); the client reads per its [`ReadPattern`]. Messages are
/// reliable unless [`CbrStream::with_media`] says otherwise. The player's media session
/// replaces this with real frames.
///
/// **Playout accounting** (for the `stream` report; docs/REFERENCE.md's stall definition):
/// each message stands for one frame of `interval = message_bytes·8/rate_bps` seconds.
/// Playback starts once the playout rule's start threshold of media arrived in order
/// ([`CbrPlayoutRule`]; default `fixed`, [`CbrStream::START_S`]); message *i* is
/// then due at `start + i·interval + (time stalled so far)`. When the message due has
/// neither been read nor abandoned, the clock stops (a stall) until the resume threshold
/// (default [`CbrStream::RESUME_S`]) of media from it on have arrived; a stall still open
/// at the end counts up to the end. Abandoned messages are lost frames; the clock keeps
/// running. Thresholds never exceed the client buffer ([`CbrStream::with_buffer`]), which
/// the reader stops at. There is no video: PSNR and MOS are reported as 0.
#[derive(Debug)]
pub struct CbrStream {
    rate_bps: u64,
    message_bytes: usize,
    pattern: ReadPattern,
    start: Option<Instant>,
    sent: u64,
    sent_at: VecDeque<(u64, Instant)>,
    payload: Bytes,
    budget_bits: f64,
    budget_at: Option<Instant>,
    reader_wake: Option<Instant>,
    next_expected: u64,
    stats: WorkloadStats,
    media: MediaReliability,
    /// Client side: when each message was read or its gap seen (in id order), and
    /// whether it was a gap.
    arrivals: Vec<(Instant, bool)>,
    /// `gaps_before[i]`: gaps among `arrivals[..i]` (one longer than `arrivals`).
    gaps_before: Vec<u32>,
    first_client_call: Option<Instant>,
    last_client_call: Option<Instant>,
    end: Option<Instant>,
    rule: CbrPlayoutRule,
    /// The adaptive rule's parameters: the player's ([`playout::AdaptiveConfig`]), so the
    /// simulator keeps no copy of them.
    adaptive: playout::AdaptiveConfig,
    /// Client buffer capacity (`buffer_s`, `buffer_bytes`): the reader stops while the
    /// media read but not yet played reaches either (`None`: no limit).
    buffer_s: Option<f64>,
    buffer_bytes: Option<u64>,
    /// The playout clock as far as it is decided (see [`CbrStream::playout`]).
    clock: PlayoutClock,
    /// The server is behind and flow control stops it: it waits for input, not a timer.
    blocked: bool,
}

/// When a [`CbrStream`]'s playback starts and resumes: the scenario's `playout` key.
#[derive(Clone, Debug, PartialEq)]
pub enum CbrPlayoutRule {
    /// Fixed thresholds in media seconds (`fixed`: 2.5 s / 5 s; `media3`: 1 s / 2 s).
    Fixed {
        /// The policy's name in the report.
        name: &'static str,
        /// Media in order before the first message plays.
        start_s: f64,
        /// Media in order from the stalled message on before playback resumes.
        resume_s: f64,
    },
    /// The player's adaptive rule (`braid_media::playout::PlayoutPolicy::Adaptive`)
    /// specialised to constant-size messages at a constant interval: forecast `R`, the
    /// smallest mean arrival rate over the look-back windows (each cut to the time since
    /// the first arrival); the threshold is w* + one interval, where w* of `horizon_s` of
    /// media at the stream's rate `r` over a constant `margin·R` is
    /// `horizon_s·(1 − margin·R/r)` when that is positive, else 0 (a constant-rate source
    /// over a constant-rate channel), capped at `max_s`. Start: windows 0.25, 1, 4, 16 s,
    /// margin 0.5, horizon 1 s, cap 2.5 s; resume: window 4 s, margin 0.8, horizon 30 s,
    /// cap 5 s (the player's defaults).
    Adaptive,
}

impl CbrPlayoutRule {
    /// ExoPlayer 2.x's thresholds (2.5 s / 5 s).
    pub const FIXED: CbrPlayoutRule = CbrPlayoutRule::Fixed {
        name: "fixed",
        start_s: playout::FIXED_START_S,
        resume_s: playout::FIXED_RESUME_S,
    };
    /// Media3's DefaultLoadControl thresholds (1 s / 2 s).
    pub const MEDIA3: CbrPlayoutRule = CbrPlayoutRule::Fixed {
        name: "media3",
        start_s: playout::MEDIA3_START_S,
        resume_s: playout::MEDIA3_RESUME_S,
    };

    /// The policy's name as in scenario files.
    pub fn name(&self) -> &'static str {
        match self {
            CbrPlayoutRule::Fixed { name, .. } => name,
            CbrPlayoutRule::Adaptive => "adaptive",
        }
    }
}

/// The playout clock of a [`CbrStream`], advanced only over what is decided.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct PlayoutClock {
    state: ClockState,
    /// When message 0 played, s.
    play_start: f64,
    /// Stall time so far, s.
    stalled: f64,
    /// The next message to play.
    next: usize,
    /// While buffering or stalled: the next arrival to examine (earlier ones did not
    /// meet the threshold at their time, and never will).
    scan: usize,
    out: CbrPlayout,
}

#[derive(Clone, Copy, Debug, Default, PartialEq)]
enum ClockState {
    #[default]
    Buffering,
    Playing,
    /// Stalled at `next` since `due` (s).
    Stalled {
        due: f64,
    },
    /// A stall open at the end: nothing more is decided.
    Over,
}

/// Playout figures of a [`CbrStream`] (see its docs).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CbrPlayout {
    /// From the client's first activity to the first message played, s (0 if never).
    pub startup_delay_s: f64,
    /// Rebuffering events after playback started.
    pub stalls: u64,
    /// Their total duration, s.
    pub stall_time_s: f64,
    /// Messages due by the end (or played).
    pub frames_total: u64,
    /// Messages abandoned.
    pub frames_lost: u64,
}

impl CbrStream {
    /// Media buffered before playback starts, s (ExoPlayer's default, as the player's
    /// fixed policy).
    pub const START_S: f64 = 2.5;
    /// Media buffered before playback resumes after a stall, s (ExoPlayer's default).
    pub const RESUME_S: f64 = 5.0;

    /// A stream of `rate_bps` in messages of `message_bytes`, read per `pattern`.
    pub fn new(rate_bps: u64, message_bytes: usize, pattern: ReadPattern) -> CbrStream {
        let message_bytes = message_bytes.max(1);
        CbrStream {
            rate_bps: rate_bps.max(1),
            message_bytes,
            pattern,
            start: None,
            sent: 0,
            sent_at: VecDeque::new(),
            payload: Bytes::from(vec![0x5a; message_bytes]),
            budget_bits: 0.0,
            budget_at: None,
            reader_wake: None,
            next_expected: 0,
            stats: WorkloadStats::default(),
            media: MediaReliability::Reliable,
            arrivals: Vec::new(),
            gaps_before: vec![0],
            first_client_call: None,
            last_client_call: None,
            end: None,
            rule: CbrPlayoutRule::FIXED,
            adaptive: playout::AdaptiveConfig::default(),
            buffer_s: None,
            buffer_bytes: None,
            clock: PlayoutClock::default(),
            blocked: false,
        }
    }

    /// Delivers messages as a profile says: with [`MediaReliability::Deadline`] each message
    /// may be retransmitted at most `max_retransmissions` times before it is abandoned
    /// (there is no playout clock at the sender, so no time deadline is set).
    pub fn with_media(mut self, media: MediaReliability) -> CbrStream {
        self.media = media;
        self
    }

    /// The playout rule (the scenario's `playout` key; default [`CbrPlayoutRule::FIXED`]).
    pub fn with_rule(mut self, rule: CbrPlayoutRule) -> CbrStream {
        self.rule = rule;
        self
    }

    /// The client buffer (the scenario's `buffer_s` and `buffer_bytes`): a
    /// [`ReadPattern::All`] reader reads only while the media read but not yet played is
    /// below both, a scripted reader also stops there; the playout thresholds are capped
    /// at the buffer. `None`: no limit (the default).
    pub fn with_buffer(mut self, buffer_s: Option<f64>, buffer_bytes: Option<u64>) -> CbrStream {
        self.buffer_s = buffer_s.filter(|s| s.is_finite() && *s > 0.0);
        self.buffer_bytes = buffer_bytes.filter(|b| *b > 0);
        self
    }

    /// The run ends at `end` (stalls still open then count up to it).
    pub fn ending_at(mut self, end: Instant) -> CbrStream {
        self.end = Some(end);
        self
    }

    fn reliability(&self, now: Instant) -> Reliability {
        match self.media {
            MediaReliability::Reliable => Reliability::Reliable,
            MediaReliability::Deadline { max_retransmissions } => Reliability::Deadline {
                at: now + std::time::Duration::from_secs(1 << 30),
                max_retransmissions: max_retransmissions.unwrap_or(u32::MAX),
            },
        }
    }

    /// The playout figures from what the client read so far (see the type's docs).
    pub fn playout(&self) -> CbrPlayout {
        let Some(first) = self.first_client_call else { return CbrPlayout::default() };
        let end = self.end.or(self.last_client_call).unwrap_or(first);
        let mut clock = self.clock;
        self.advance_clock(&mut clock, end.as_secs_f64(), true);
        let mut out = clock.out;
        out.stall_time_s = clock.stalled
            + match clock.state {
                ClockState::Stalled { due } => (end.as_secs_f64() - due).max(0.0),
                _ => 0.0,
            };
        out
    }

    /// The media seconds the rule wants in order before playing at `t` (s).
    fn threshold_s(&self, t: f64, resuming: bool) -> f64 {
        match &self.rule {
            CbrPlayoutRule::Fixed { start_s, resume_s, .. } => {
                if resuming {
                    *resume_s
                } else {
                    *start_s
                }
            }
            CbrPlayoutRule::Adaptive => {
                let rule = if resuming { &self.adaptive.resume } else { &self.adaptive.start };
                let (windows, margin, horizon_s, max_s) =
                    (&rule.windows_us[..], rule.margin, rule.horizon_s, rule.max_s);
                let interval = self.interval_us() / 1e6;
                match self.forecast_bps(windows, t) {
                    Some(r) if r > 0.0 => {
                        let w = horizon_s * (1.0 - margin * r / self.rate_bps as f64);
                        (w.max(0.0) + interval).min(max_s)
                    }
                    _ => max_s,
                }
            }
        }
    }

    /// The smallest mean arrival rate (bit/s) over `windows` (µs) ending at `t` (s), each
    /// cut to the time since the first arrival; `None` before anything arrived.
    fn forecast_bps(&self, windows: &[i64], t: f64) -> Option<f64> {
        let &(t0, _) = self.arrivals.first()?;
        let t0 = t0.as_secs_f64();
        let upto = self.arrivals.partition_point(|a| a.0.as_secs_f64() <= t);
        let bits = self.message_bytes as f64 * 8.0;
        windows
            .iter()
            .map(|&w| {
                let span = (w as f64 / 1e6).min(t - t0);
                if span <= 0.0 {
                    return f64::INFINITY;
                }
                let from = self.arrivals.partition_point(|a| a.0.as_secs_f64() < t - span);
                let gaps = |i: usize| self.gaps_before.get(i).copied().unwrap_or(0) as usize;
                let n = (upto - from).saturating_sub(gaps(upto).saturating_sub(gaps(from)));
                n as f64 * bits / span
            })
            .reduce(f64::min)
            .filter(|r| r.is_finite())
    }

    /// Messages needed in order for `s` media seconds (at least one).
    fn count_for(&self, s: f64) -> usize {
        ((s / (self.interval_us() / 1e6)).ceil() as usize).max(1)
    }

    /// Advances `clock` over what is decided by `now` (s): with `inclusive`, messages due
    /// exactly at `now` too (the report, once nothing more arrives at `now`).
    fn advance_clock(&self, clock: &mut PlayoutClock, now: f64, inclusive: bool) {
        let interval = self.interval_us() / 1e6;
        let at = |i: usize| self.arrivals.get(i).map(|&(t, _)| t.as_secs_f64());
        loop {
            match clock.state {
                ClockState::Over => return,
                ClockState::Buffering => {
                    // The first time `start_n` messages are in, for the threshold then.
                    let mut started = None;
                    let mut k = clock.scan;
                    while let Some(t) = at(k) {
                        if k + 1 >= self.count_for(self.threshold_s(t, false))
                            || self.holds_full(k + 1)
                        {
                            started = Some(t);
                            break;
                        }
                        k += 1;
                    }
                    let Some(t) = started else {
                        clock.scan = k;
                        return;
                    };
                    clock.play_start = t;
                    clock.out.startup_delay_s =
                        self.first_client_call.map_or(0.0, |f| (t - f.as_secs_f64()).max(0.0));
                    clock.state = ClockState::Playing;
                }
                ClockState::Playing => {
                    let due = clock.play_start + clock.next as f64 * interval + clock.stalled;
                    if due > now || (!inclusive && due >= now) {
                        return;
                    }
                    clock.out.frames_total += 1;
                    match self.arrivals.get(clock.next) {
                        Some(&(t, gap)) if t.as_secs_f64() <= due => {
                            clock.out.frames_lost += u64::from(gap);
                            clock.next += 1;
                        }
                        _ => {
                            clock.out.stalls += 1;
                            clock.scan = clock.next;
                            clock.state = ClockState::Stalled { due };
                        }
                    }
                }
                ClockState::Stalled { due } => {
                    // Resume once the threshold's messages from the stalled one on are in.
                    let i = clock.next;
                    let mut resumed = None;
                    let mut k = clock.scan.max(i);
                    while let Some(t) = at(k) {
                        let n = k + 1 - i;
                        if n >= self.count_for(self.threshold_s(t, true)) || self.holds_full(n) {
                            resumed = Some(t);
                            break;
                        }
                        k += 1;
                    }
                    let Some(t) = resumed else {
                        clock.scan = k;
                        return;
                    };
                    if t >= now {
                        if inclusive {
                            // Resumed only at the end: the stall counts up to it.
                            clock.state = ClockState::Over;
                            clock.stalled += (now - due).max(0.0);
                        }
                        return;
                    }
                    clock.stalled += (t - due).max(0.0);
                    clock.out.frames_lost += u64::from(self.arrivals.get(i).is_some_and(|a| a.1));
                    clock.next += 1;
                    clock.state = ClockState::Playing;
                }
            }
        }
    }

    fn record_arrival(&mut self, at: Instant, gap: bool) {
        self.arrivals.push((at, gap));
        let before = self.gaps_before.last().copied().unwrap_or(0);
        self.gaps_before.push(before + u32::from(gap));
    }

    /// Whether `held` messages fill the client buffer.
    fn holds_full(&self, held: usize) -> bool {
        let secs = held as f64 * self.interval_us() / 1e6;
        let bytes = held as u64 * self.message_bytes as u64;
        self.buffer_s.is_some_and(|c| secs >= c) || self.buffer_bytes.is_some_and(|c| bytes >= c)
    }

    /// Whether the client buffer is full now (the reader waits for the clock).
    fn buffer_full(&self) -> bool {
        self.holds_full(self.arrivals.len().saturating_sub(self.clock.next))
    }

    fn advance_live(&mut self, now: Instant) {
        let mut clock = self.clock;
        self.advance_clock(&mut clock, now.as_secs_f64(), false);
        self.clock = clock;
    }

    /// When the next message plays (the buffer gets room), if the clock runs.
    fn next_play(&self) -> Option<Instant> {
        if self.clock.state != ClockState::Playing {
            return None;
        }
        let due = self.clock.play_start
            + self.clock.next as f64 * self.interval_us() / 1e6
            + self.clock.stalled;
        Some(Instant::from_micros((due * 1e6).ceil() as u64 + 1))
    }

    fn interval_us(&self) -> f64 {
        self.message_bytes as f64 * 8.0 / self.rate_bps as f64 * 1e6
    }

    /// Messages due by `now`.
    fn due(&self, now: Instant) -> u64 {
        match self.start {
            Some(s) => ((now - s).as_micros() as f64 / self.interval_us()).floor() as u64 + 1,
            None => 0,
        }
    }

    /// The read rate in effect at `now` and when it next changes.
    fn read_rate(&self, now: Instant) -> Option<(f64, Instant)> {
        let ReadPattern::Rates { rates_bps, period } = &self.pattern else { return None };
        let start = self.start?;
        let p = period.as_micros().max(1) as u64;
        let k = (now - start).as_micros() as u64 / p;
        let idx = usize::try_from(k % rates_bps.len().max(1) as u64).ok()?;
        let rate = *rates_bps.get(idx)? as f64;
        Some((rate, start + std::time::Duration::from_micros((k + 1) * p)))
    }
}

impl Workload for CbrStream {
    fn on_server(&mut self, now: Instant, conn: &mut Connection) {
        self.start.get_or_insert(now);
        let due = self.due(now);
        while self.sent < due && conn.send_capacity() >= self.message_bytes as u64 {
            match conn.send_message(now, self.payload.clone(), self.reliability(now)) {
                Ok(id) => {
                    // Delay counts from when the message was due, so sender-side backlog shows.
                    let due_at = self.start.map_or(now, |s| {
                        s + std::time::Duration::from_micros(
                            (self.sent as f64 * self.interval_us()) as u64,
                        )
                    });
                    self.sent_at.push_back((id, due_at));
                    self.sent = id + 1;
                }
                Err(_) => break,
            }
        }
        // Behind schedule with no room: the next input (a MAX_DATA, an ACK) calls again;
        // a timer in the past would wake the workload at this instant forever.
        self.blocked = self.sent < due;
    }

    fn on_client(&mut self, now: Instant, conn: &mut Connection) {
        self.first_client_call.get_or_insert(now);
        self.last_client_call = Some(now);
        self.reader_wake = None;
        self.advance_live(now);
        loop {
            if self.buffer_full() {
                self.advance_live(now);
                if self.buffer_full() {
                    self.reader_wake = self.next_play();
                    return;
                }
            }
            if let Some((rate, change)) = self.read_rate(now) {
                let since = self.budget_at.unwrap_or(now);
                self.budget_at = Some(now);
                // Budget accrues at the current rate, capped at one message: the reader
                // reads at the pattern's rate and does not catch up on time it spent
                // without data (the paper's ⟨1, 3⟩ Mbit/s per RTT pattern is what the
                // application drains, whatever arrived).
                let cap = self.message_bytes as f64 * 8.0;
                self.budget_bits = (self.budget_bits + rate * (now - since).as_secs_f64()).min(cap);
                if self.budget_bits <= 0.0 {
                    let wait_s = if rate > 0.0 { -self.budget_bits / rate } else { f64::INFINITY };
                    let at = now
                        + std::time::Duration::from_secs_f64(wait_s.min(3600.0))
                        + std::time::Duration::from_micros(1);
                    self.reader_wake = Some(at.min(change));
                    return;
                }
            }
            let Some(d) = conn.read_message(now) else {
                if self.read_rate(now).is_some() {
                    // Wanted to read at the pattern's rate, nothing there: starved until
                    // data arrives. The player's reader takes whatever arrives while its
                    // buffer has room and is not starved (see `rate.rs`).
                    conn.reader_starved(now);
                }
                self.advance_live(now);
                return;
            };
            let (id, len) = match d {
                Delivery::Message { id, data } => (id, data.len()),
                Delivery::Gap { id } => {
                    self.stats.check.gaps += 1;
                    self.next_expected = self.next_expected.max(id + 1);
                    self.record_arrival(now, true);
                    continue;
                }
            };
            self.record_arrival(now, false);
            self.budget_bits -= len as f64 * 8.0;
            self.stats.messages += 1;
            self.stats.bytes_delivered += len as u64;
            if id != self.next_expected {
                self.stats.check.out_of_order += 1;
                if id < self.next_expected {
                    self.stats.check.duplicates += 1;
                }
            }
            self.next_expected = self.next_expected.max(id + 1);
            while self.sent_at.front().is_some_and(|f| f.0 < id) {
                self.sent_at.pop_front();
            }
            if let Some(&(sid, at)) = self.sent_at.front()
                && sid == id
            {
                self.sent_at.pop_front();
                self.stats.delays_us.push((now - at).as_micros() as u64);
            }
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        let next_send = self.start.filter(|_| !self.blocked).map(|s| {
            let t = s + std::time::Duration::from_micros(
                (self.sent as f64 * self.interval_us()).ceil() as u64,
            );
            // `due` divides where this multiplies: when rounding makes the message not yet
            // due at `t` (intervals that are not whole microseconds), wake a microsecond
            // later instead of at `t` forever.
            if self.due(t) <= self.sent { t + std::time::Duration::from_micros(1) } else { t }
        });
        match (next_send, self.reader_wake) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn stats(&self) -> WorkloadStats {
        self.stats.clone()
    }

    fn stream_report(&self) -> Option<StreamReport> {
        let p = self.playout();
        let secs = self
            .last_client_call
            .zip(self.first_client_call)
            .map_or(0.0, |(l, f)| l.saturating_duration_since(f).as_secs_f64());
        Some(StreamReport {
            clip: format!("cbr:{}bit", self.rate_bps),
            playout_policy: self.rule.name().to_string(),
            startup_delay_s: p.startup_delay_s,
            stalls: p.stalls,
            stall_time_s: p.stall_time_s,
            frames_total: p.frames_total,
            frames_lost: p.frames_lost,
            psnr_avg_db: 0.0,
            psnr_sd_db: 0.0,
            mos: 0,
            psnr_eq13_db: 0.0,
            read_rate_bps: if secs > 0.0 {
                self.stats.bytes_delivered as f64 * 8.0 / secs
            } else {
                0.0
            },
            stall_starts_s: Vec::new(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 10 messages per second (1000 B at 80 kbit/s), read at the given times (ms).
    fn stream_read_at(times_ms: &[u64], end_ms: u64) -> CbrStream {
        let mut s = CbrStream::new(80_000, 1000, ReadPattern::All)
            .ending_at(Instant::from_micros(end_ms * 1000));
        s.first_client_call = Some(Instant::ZERO);
        for &t in times_ms {
            s.record_arrival(Instant::from_micros(t * 1000), false);
        }
        s
    }

    #[test]
    fn arrivals_at_the_data_rate_never_stall() {
        let times: Vec<u64> = (0..300).map(|i| 100 + i * 100).collect();
        let p = stream_read_at(&times, 30_000).playout();
        // 2.5 s = 25 messages: playback starts when message 24 arrives (2.5 s).
        assert!((p.startup_delay_s - 2.5).abs() < 1e-9, "{p:?}");
        assert_eq!((p.stalls, p.stall_time_s), (0, 0.0));
        assert_eq!(p.frames_lost, 0);
    }

    #[test]
    fn an_outage_drains_the_buffer_and_stalls_until_the_resume_threshold() {
        // At rate until message 99 (t = 10 s), then nothing for 10 s, then 10 per second.
        let mut times: Vec<u64> = (0..100).map(|i| 100 + i * 100).collect();
        times.extend((0..200).map(|i| 20_000 + i * 100));
        let p = stream_read_at(&times, 40_000).playout();
        // Playback starts at 2.5 s; message 100 is due at 2.5 + 10 = 12.5 s: a stall.
        // Resume needs 50 messages from 100 on: message 149 arrives at 20 + 4.9 = 24.9 s.
        assert_eq!(p.stalls, 1, "{p:?}");
        assert!((p.stall_time_s - 12.4).abs() < 1e-6, "{p:?}");
    }

    #[test]
    fn a_stall_open_at_the_end_counts_up_to_the_end() {
        let times: Vec<u64> = (0..50).map(|i| 100 + i * 100).collect();
        let p = stream_read_at(&times, 20_000).playout();
        // Due at 2.5 + 5 = 7.5 s; nothing more arrives: stalled until 20 s.
        assert_eq!(p.stalls, 1);
        assert!((p.stall_time_s - 12.5).abs() < 1e-6, "{p:?}");
    }

    #[test]
    fn abandoned_messages_are_lost_frames_not_stalls() {
        let mut s = stream_read_at(&(0..300).map(|i| 100 + i * 100).collect::<Vec<_>>(), 30_000);
        if let Some(a) = s.arrivals.get_mut(100) {
            a.1 = true;
        }
        let p = s.playout();
        assert_eq!((p.stalls, p.frames_lost), (0, 1));
    }
}
