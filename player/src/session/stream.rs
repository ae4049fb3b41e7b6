//! The media session over a transport connection, sans-IO: [`MediaSender`] on the server,
//! [`MediaClient`] on the client. Both are driven with `now` and a `&mut Connection`, so
//! the same code runs in the simulator ([`SimStream`]) and on real sockets.
//!
//! Message ids: 0 is the stream header, frame `g` (counting across loops of the clip) is
//! message `g + 1`, so a gap names the frame it lost. After the last frame the server sends
//! an end message. The client reports its playout position every 100 ms, and with deadline
//! profiles each frame's deadline is derived from the latest report, so deadlines follow
//! stalls (frames already queued keep the deadline they were sent with).

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use braid_media::decode::FfmpegDecoder;
use braid_media::framing::{self, MediaMessage, StreamHeader};
use braid_media::playout::{Playout, PlayoutEvent, PlayoutPolicy, PlayoutState};
use braid_media::quality::{Frame, FreezeComparator, cap_psnr, mos_from_psnr, psnr_eq13_estimate};
use braid_media::{AccessUnit, Clip};
use braid_sim::report::MAX_STALL_STARTS;
use braid_sim::{DeliveryCheck, StreamReport, Workload, WorkloadStats};
use braid_transport::Instant;
use braid_transport::profile::MediaReliability;
use braid_transport::proto::{Connection, Delivery, Reliability, SendError};
use bytes::Bytes;

use super::shown::ShownMeter;

/// How often the client reports its playout position.
const REPORT_INTERVAL: Duration = Duration::from_millis(100);

fn us(t: Instant) -> i64 {
    t.as_micros() as i64
}

/// Frame `g` of a possibly looped clip: the access unit with loop-adjusted times.
fn frame_unit(clip: &Clip, g: u64) -> Option<AccessUnit> {
    let n = clip.units.len() as u64;
    if n == 0 {
        return None;
    }
    let au = clip.units.get((g % n) as usize)?;
    let loop_us = clip_duration_us(clip) * (g / n) as i64;
    Some(AccessUnit {
        index: g as usize,
        pts_us: au.pts_us + loop_us,
        dts_us: au.dts_us + loop_us,
        keyframe: au.keyframe,
        data: au.data.clone(),
    })
}

fn clip_duration_us(clip: &Clip) -> i64 {
    (clip.info.duration_s * 1e6).round() as i64
}

fn frame_interval_us(fps: f64) -> i64 {
    if fps > 0.0 { (1e6 / fps).round() as i64 } else { 40_000 }
}

/// The server side: sends the header, then access units as far ahead as flow control
/// allows, then the end message.
pub struct MediaSender {
    clip: Arc<Clip>,
    media: MediaReliability,
    /// Frames to send in all.
    frames: u64,
    next: u64,
    header_sent: bool,
    end_sent: bool,
    pending: Option<Bytes>,
    report: Option<(Instant, bool, i64)>,
    sent_at: BTreeMap<u64, Instant>,
    srtt: Duration,
}

impl MediaSender {
    /// Streams `clip`; with `loop_for` it repeats the clip for that long.
    pub fn new(
        clip: Arc<Clip>,
        media: MediaReliability,
        loop_for: Option<Duration>,
    ) -> MediaSender {
        let n = clip.units.len() as u64;
        let frames = match loop_for {
            Some(d) => {
                let fi = frame_interval_us(clip.info.fps).max(1) as u128;
                ((d.as_micros() / fi) as u64).max(n)
            }
            None => n,
        };
        MediaSender {
            clip,
            media,
            frames,
            next: 0,
            header_sent: false,
            end_sent: false,
            pending: None,
            report: None,
            sent_at: BTreeMap::new(),
            srtt: Duration::from_millis(100),
        }
    }

    /// When each message was sent (message id → time), for delay statistics; entries
    /// are removed by [`MediaSender::take_sent_at`].
    pub fn take_sent_at(&mut self, id: u64) -> Option<Instant> {
        self.sent_at.remove(&id)
    }

    fn reliability(&self, now: Instant, pts_us: i64) -> Reliability {
        match self.media {
            MediaReliability::Reliable => Reliability::Reliable,
            MediaReliability::Deadline { max_retransmissions } => {
                let max = max_retransmissions.unwrap_or(u32::MAX);
                let fi = frame_interval_us(self.clip.info.fps);
                let at = match self.report {
                    // Due at the client at report + (pts + Δ − position); it must leave
                    // about one RTT earlier to arrive in time.
                    Some((at, true, pos)) => {
                        let due = us(at) + (pts_us + fi - pos) - self.srtt.as_micros() as i64;
                        Instant::from_micros(due.max(0) as u64)
                    }
                    // Not playing yet (or stalled): nothing is late.
                    _ => now + Duration::from_secs(3600),
                };
                Reliability::Deadline { at, max_retransmissions: max }
            }
        }
    }

    /// A message from the client (its playout reports).
    pub fn on_control(&mut self, now: Instant, d: Delivery) {
        if let Delivery::Message { data, .. } = d
            && let Ok(MediaMessage::Playout { playing, position_us }) = framing::decode(&data)
        {
            self.report = Some((now, playing, position_us));
        }
    }

    /// The smoothed RTT deadlines are computed with.
    pub fn set_srtt(&mut self, srtt: Duration) {
        if !srtt.is_zero() {
            self.srtt = srtt;
        }
    }

    /// Whether a deadline profile needs RTT updates.
    pub fn uses_deadlines(&self) -> bool {
        matches!(self.media, MediaReliability::Deadline { .. })
    }

    /// The next message to send (header, frame, end), or `None` when everything was sent.
    /// Call [`MediaSender::sent`] once it was accepted; until then the same message is
    /// returned again.
    pub fn next_message(&mut self, now: Instant) -> Option<(Bytes, Reliability)> {
        if !self.header_sent {
            let header = StreamHeader::new(&self.clip.info, &self.clip.units);
            return Some((Bytes::from(framing::encode_header(&header)), Reliability::Reliable));
        }
        if self.next < self.frames {
            let au = frame_unit(&self.clip, self.next)?;
            let bytes = match &self.pending {
                Some(b) => b.clone(),
                None => {
                    let b = Bytes::from(framing::encode_unit(&au, &[]));
                    self.pending = Some(b.clone());
                    b
                }
            };
            return Some((bytes, self.reliability(now, au.pts_us)));
        }
        if !self.end_sent {
            return Some((
                Bytes::from(framing::encode_end(self.frames as u32)),
                Reliability::Reliable,
            ));
        }
        None
    }

    /// The message [`MediaSender::next_message`] returned was accepted as message `id`.
    pub fn sent(&mut self, id: u64, now: Instant) {
        self.sent_at.insert(id, now);
        if !self.header_sent {
            self.header_sent = true;
        } else if self.next < self.frames {
            self.next += 1;
            self.pending = None;
        } else {
            self.end_sent = true;
        }
    }

    /// Simulator adapter: reads the client's reports and sends what flow control allows.
    pub fn pump(&mut self, now: Instant, conn: &mut Connection) {
        while let Some(d) = conn.read_message(now) {
            self.on_control(now, d);
        }
        if self.uses_deadlines()
            && let Some(p) =
                conn.stats().paths.iter().filter(|p| !p.srtt.is_zero()).map(|p| p.srtt).min()
        {
            self.set_srtt(p);
        }
        while let Some((bytes, reliability)) = self.next_message(now) {
            if conn.send_capacity() < bytes.len() as u64 {
                return;
            }
            match conn.send_message(now, bytes, reliability) {
                Ok(id) => self.sent(id, now),
                Err(SendError::Blocked | SendError::Closed) => return,
            }
        }
    }
}

/// Settings of the client.
#[derive(Clone, Debug)]
pub struct ClientConfig {
    /// When playback starts and resumes.
    pub policy: PlayoutPolicy,
    /// Buffer capacity in media seconds.
    pub buffer_s: f64,
    /// Buffer capacity in bytes.
    pub buffer_bytes: u64,
    /// Keep every frame's access unit, arrival and due time for the whole session (for
    /// [`MediaClient::write_displayed`], plots and the oracle's arrival curve). Without
    /// it the client measures PSNR as frames come due and keeps only the frames not yet
    /// displayed, so its memory stays flat in a long stream.
    pub keep_history: bool,
}

impl ClientConfig {
    /// The oracle reads everything as it arrives and reports no playout position: its
    /// arrivals then do not depend on its playout, so they are exactly those of the run
    /// that measured w*.
    fn is_oracle(&self) -> bool {
        matches!(self.policy, PlayoutPolicy::Oracle { .. })
    }
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            policy: PlayoutPolicy::adaptive(),
            buffer_s: 30.0,
            buffer_bytes: 8_000_000,
            keep_history: false,
        }
    }
}

/// One sample of the client's state over time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ClientSample {
    /// Seconds since the session started.
    pub t_s: f64,
    /// Media seconds buffered.
    pub buffer_s: f64,
    /// Whether the clock runs.
    pub playing: bool,
}

/// Frames that came due and were not yet taken with [`MediaClient::take_due`], at most,
/// without [`ClientConfig::keep_history`] (older ones are dropped untaken).
const DUE_QUEUE: usize = 4096;

/// What a client without [`ClientConfig::keep_history`] keeps instead of its history.
#[derive(Debug, Default)]
struct Running {
    /// The reference to measure against ([`MediaClient::with_reference`]).
    reference: Option<Arc<Vec<Frame>>>,
    /// Started with the stream header when there is a reference.
    meter: Option<ShownMeter>,
    frames_due: u64,
    shown_bits: u64,
    /// Frames due and not yet taken.
    untaken: VecDeque<(u64, bool)>,
    /// The first frame the last [`MediaClient::take_due`] returned: its access units stay
    /// until the next call.
    taken_from: Option<u64>,
}

/// Counts of what a client holds, for checking that a long stream stays bounded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(not(test), allow(dead_code))] // read by the long-stream tests and benchmark
pub struct Retained {
    /// Access units held.
    pub units: usize,
    /// Their bytes.
    pub unit_bytes: u64,
    /// Due-frame records (history, or those not yet taken).
    pub due: usize,
    /// Arrival records.
    pub arrivals: usize,
    /// Buffer samples.
    pub samples: usize,
    /// Frame slots of the playout buffer.
    pub playout_frames: usize,
}

/// The client side: reads while its buffer has room, plays out, reports its position.
pub struct MediaClient {
    cfg: ClientConfig,
    start: Instant,
    header: Option<StreamHeader>,
    playout: Option<Playout>,
    received: BTreeMap<u64, AccessUnit>,
    /// Frame → shown (true) or lost (false), in due order, with the time it was due.
    due: Vec<(u64, bool)>,
    due_at: Vec<Instant>,
    due_taken: usize,
    arrivals: Vec<(u64, Instant, u64)>,
    bytes_read: u64,
    messages: u64,
    check: DeliveryCheck,
    next_id: u64,
    next_report: Instant,
    bad_messages: u64,
    /// The sender's End message arrived: everything it will send was received.
    end_received: bool,
    samples: Vec<ClientSample>,
    next_sample: Instant,
    last_read: Option<Instant>,
    first_read: Option<Instant>,
    /// `None` with [`ClientConfig::keep_history`].
    running: Option<Running>,
    /// Playout events for the connection's trace, when tracing ([`MediaClient::set_tracing`]).
    trace_out: Option<Vec<braid_transport::trace::TraceEvent>>,
    /// When each stall began (the first [`MAX_STALL_STARTS`]).
    stall_starts: Vec<Instant>,
}

impl MediaClient {
    /// A client whose first packet went out at `start`.
    pub fn new(cfg: ClientConfig, start: Instant) -> MediaClient {
        let running = (!cfg.keep_history).then(Running::default);
        MediaClient {
            running,
            cfg,
            start,
            stall_starts: Vec::new(),
            header: None,
            playout: None,
            received: BTreeMap::new(),
            due: Vec::new(),
            due_at: Vec::new(),
            due_taken: 0,
            arrivals: Vec::new(),
            bytes_read: 0,
            messages: 0,
            check: DeliveryCheck::default(),
            next_id: 0,
            next_report: start,
            bad_messages: 0,
            end_received: false,
            samples: Vec::new(),
            next_sample: start,
            last_read: None,
            first_read: None,
            trace_out: None,
        }
    }

    /// Keeps playout events (start, stall, resume, frame lost) for the connection's
    /// trace; [`MediaClient::take_trace_events`] hands them over.
    pub fn set_tracing(&mut self, on: bool) {
        match (on, self.trace_out.is_some()) {
            (true, false) => self.trace_out = Some(Vec::new()),
            (false, true) => self.trace_out = None,
            _ => {}
        }
    }

    /// The playout events kept since the last call.
    pub fn take_trace_events(&mut self) -> Vec<braid_transport::trace::TraceEvent> {
        self.trace_out.as_mut().map(std::mem::take).unwrap_or_default()
    }

    /// Measures PSNR against `reference` as frames come due (without
    /// [`ClientConfig::keep_history`]; with it, the report decodes the history instead).
    pub fn with_reference(mut self, reference: Arc<Vec<Frame>>) -> MediaClient {
        if let Some(r) = self.running.as_mut() {
            r.reference = Some(reference);
        }
        self
    }

    /// What the client holds now.
    #[cfg_attr(not(test), allow(dead_code))] // read by the long-stream tests and benchmark
    pub fn retained(&self) -> Retained {
        Retained {
            units: self.received.len(),
            unit_bytes: self.received.values().map(|u| u.data.len() as u64).sum(),
            due: self.due.len() + self.running.as_ref().map_or(0, |r| r.untaken.len()),
            arrivals: self.arrivals.len(),
            samples: self.samples.len(),
            playout_frames: self.playout.as_ref().map_or(0, |p| p.retained_frames()),
        }
    }

    /// Messages that did not decode or contradicted the stream (counted and ignored).
    #[cfg_attr(not(test), allow(dead_code))] // read by the hostile-peer tests
    pub fn bad_messages(&self) -> u64 {
        self.bad_messages
    }

    fn pts_of(&self, g: u64) -> i64 {
        let Some(h) = &self.header else { return 0 };
        let n = h.plan.len() as u64;
        if n == 0 {
            return 0;
        }
        let fi = frame_interval_us(h.fps);
        let loop_us = n as i64 * fi * (g / n) as i64;
        h.plan.get((g % n) as usize).map_or(0, |p| p.0) + loop_us
    }

    fn buffer_full(&self, now: Instant) -> bool {
        if self.cfg.is_oracle() {
            return false;
        }
        self.playout.as_ref().is_some_and(|p| {
            p.buffered_s(us(now)) >= self.cfg.buffer_s
                || p.buffered_bytes() >= self.cfg.buffer_bytes
        })
    }

    /// Whether the client wants to read now: its buffer has room.
    pub fn wants_read(&self, now: Instant) -> bool {
        !self.buffer_full(now)
    }

    /// One delivery from the transport. Returns the message id when a message was read.
    pub fn on_delivery(&mut self, now: Instant, d: Delivery) -> Option<u64> {
        self.first_read.get_or_insert(now);
        self.last_read = Some(now);
        let id = match &d {
            Delivery::Message { id, .. } | Delivery::Gap { id } => *id,
        };
        if id != self.next_id {
            self.check.out_of_order += 1;
        }
        self.next_id = id + 1;
        match d {
            Delivery::Message { id, data } => {
                self.bytes_read += data.len() as u64;
                self.messages += 1;
                self.on_message(now, id, &data);
                Some(id)
            }
            Delivery::Gap { id } => {
                self.check.gaps += 1;
                if id > 0 {
                    let g = id - 1;
                    let pts = self.pts_of(g);
                    if let Some(p) = self.playout.as_mut() {
                        p.on_abandoned(us(now), g as usize, pts);
                    }
                }
                None
            }
        }
    }

    /// The playout report to send now, if one is due (every 100 ms once the stream
    /// started; never for the oracle).
    pub fn take_report(&mut self, now: Instant) -> Option<Bytes> {
        if now < self.next_report || self.cfg.is_oracle() {
            return None;
        }
        self.next_report = now + REPORT_INTERVAL;
        let p = self.playout.as_ref()?;
        let playing = p.state() == PlayoutState::Playing;
        Some(Bytes::from(framing::encode_playout(playing, p.position_us(us(now)))))
    }

    /// The playout state to report to the sender (re-injection gates on it): buffered
    /// media, time until the first missing frame is due (while the clock runs), stalled,
    /// started. `None` before the header arrived and for the oracle.
    pub fn playout_feedback(
        &self,
        now: Instant,
    ) -> Option<braid_transport::proto::PlayoutFeedback> {
        if self.cfg.is_oracle() {
            return None;
        }
        let p = self.playout.as_ref()?;
        let state = p.state();
        let buffer_ms = (p.buffered_s(us(now)) * 1000.0).max(0.0) as u64;
        let started = matches!(state, PlayoutState::Playing | PlayoutState::Rebuffering);
        let stalled = state == PlayoutState::Rebuffering;
        Some(braid_transport::proto::PlayoutFeedback {
            buffer_ms,
            next_deadline_ms: (state == PlayoutState::Playing).then_some(buffer_ms),
            stalled,
            started,
        })
    }

    /// Simulator adapter: reads what the buffer has room for, advances playout and reports
    /// the position. Returns the ids of the messages read (for delay statistics).
    pub fn on_readable(&mut self, now: Instant, conn: &mut Connection) -> Vec<u64> {
        let mut read = Vec::new();
        self.set_tracing(conn.is_traced());
        while self.wants_read(now) {
            let Some(d) = conn.read_message(now) else { break };
            read.extend(self.on_delivery(now, d));
        }
        self.advance(now);
        for ev in self.take_trace_events() {
            conn.trace_event(now, &ev);
        }
        if let Some(fb) = self.playout_feedback(now) {
            conn.set_playout_feedback(now, fb);
        }
        if let Some(msg) = self.take_report(now) {
            let _ = conn.send_message(now, msg, Reliability::Reliable);
        }
        read
    }

    fn on_message(&mut self, now: Instant, id: u64, data: &[u8]) {
        match framing::decode(data) {
            Ok(MediaMessage::Header(h)) if id == 0 && self.header.is_none() => {
                let fi = frame_interval_us(h.fps);
                let mut p = Playout::new(self.cfg.policy.clone(), fi, us(self.start));
                // A threshold above the buffer's capacity would never be reached.
                p.set_max_threshold_s((self.cfg.buffer_s * 0.9).max(0.1));
                let plan: Vec<(i64, u64)> =
                    h.plan.iter().map(|&(pts, b)| (pts, u64::from(b))).collect();
                p.set_plan(0, &plan);
                self.playout = Some(p);
                if let Some(r) = self.running.as_mut()
                    && let Some(reference) = r.reference.clone()
                {
                    r.meter = Some(ShownMeter::start(h.codec, reference));
                }
                self.header = Some(h);
            }
            // Frame g is message g + 1 (the transport delivers in order): a unit claiming
            // another index, or arriving before the header, is refused.
            Ok(MediaMessage::Unit(au))
                if self.header.is_some() && (au.index as u64).checked_add(1) == Some(id) =>
            {
                let g = au.index as u64;
                let bytes = au.data.len() as u64;
                if let Some(p) = self.playout.as_mut() {
                    // Plan the next loop's frame sizes as they come due.
                    p.on_arrival(us(now), au.index, au.pts_us, bytes);
                }
                if self.running.is_none() {
                    self.arrivals.push((g, now, bytes));
                }
                self.received.insert(g, au);
            }
            Ok(MediaMessage::End { frames }) => {
                self.end_received = true;
                if let Some(p) = self.playout.as_mut() {
                    p.set_total_frames(frames as usize);
                }
            }
            Ok(MediaMessage::Playout { .. }) => {}
            Ok(MediaMessage::Header(_) | MediaMessage::Unit(_)) | Err(_) => self.bad_messages += 1,
        }
    }

    /// Advances playout to `now` (also called on timers).
    pub fn advance(&mut self, now: Instant) {
        let Some(p) = self.playout.as_mut() else { return };
        for ev in p.poll(us(now)) {
            if let PlayoutEvent::StallStarted { at_us, .. } = ev
                && self.stall_starts.len() < MAX_STALL_STARTS
            {
                self.stall_starts.push(Instant::from_micros(at_us.max(0) as u64));
            }
            if let Some(out) = self.trace_out.as_mut() {
                use braid_transport::trace::TraceEvent::Playout;
                let buffer_s = Some(p.buffered_s(us(now)));
                match &ev {
                    PlayoutEvent::Started { .. } => {
                        out.push(Playout { event: "start", frame: None, buffer_s })
                    }
                    PlayoutEvent::StallStarted { index, .. } => {
                        out.push(Playout { event: "stall", frame: Some(*index as u64), buffer_s })
                    }
                    PlayoutEvent::StallEnded { .. } => {
                        out.push(Playout { event: "resume", frame: None, buffer_s })
                    }
                    PlayoutEvent::Lost { index, .. } => out.push(Playout {
                        event: "frame_lost",
                        frame: Some(*index as u64),
                        buffer_s,
                    }),
                    _ => {}
                }
            }
            let (g, shown, at_us) = match ev {
                PlayoutEvent::Shown { index, at_us } => (index as u64, true, at_us),
                PlayoutEvent::Lost { index, at_us } => (index as u64, false, at_us),
                _ => continue,
            };
            match self.running.as_mut() {
                None => {
                    self.due.push((g, shown));
                    self.due_at.push(Instant::from_micros(at_us.max(0) as u64));
                }
                Some(r) => {
                    r.frames_due += 1;
                    let unit = self.received.get(&g).filter(|_| shown);
                    if let Some(au) = unit {
                        r.shown_bits += au.data.len() as u64 * 8;
                    }
                    if let Some(m) = r.meter.as_ref() {
                        m.due(g, shown, unit.cloned());
                    }
                    r.untaken.push_back((g, shown));
                    if r.untaken.len() > DUE_QUEUE {
                        r.untaken.pop_front();
                    }
                }
            }
        }
        if self.running.is_some() {
            self.prune();
            // Samples are part of the history; only the latest matters here.
            self.next_sample = self.next_sample.max(now);
            return;
        }
        while self.next_sample <= now {
            let t = self.next_sample;
            self.samples.push(ClientSample {
                t_s: (t - self.start).as_secs_f64(),
                buffer_s: p.buffered_s(us(t)),
                playing: p.state() == PlayoutState::Playing,
            });
            self.next_sample += Duration::from_millis(100);
        }
    }

    /// The next time the client must run without input.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let playout = self
            .playout
            .as_ref()
            .and_then(|p| p.poll_timeout())
            .map(|t| Instant::from_micros(t.max(0) as u64));
        let report =
            self.playout.as_ref().filter(|_| !self.cfg.is_oracle()).map(|_| self.next_report);
        match (playout, report) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Whether the sender's End message arrived (nothing more will come).
    pub fn received_end(&self) -> bool {
        self.end_received
    }

    /// Whether playback ended.
    pub fn ended(&self) -> bool {
        self.playout.as_ref().is_some_and(|p| p.state() == PlayoutState::Ended)
    }

    /// Buffer samples every 100 ms.
    pub fn samples(&self) -> &[ClientSample] {
        &self.samples
    }

    /// `(frame, arrival time, bytes)` of every frame that arrived.
    pub fn arrivals(&self) -> &[(u64, Instant, u64)] {
        &self.arrivals
    }

    /// The session's stream figures; decodes what arrived in time (EvalVid style) against
    /// `clip`'s reference decode for PSNR.
    /// Without a reference (`None`) PSNR cannot be measured: `psnr_avg_db`, `psnr_sd_db`
    /// and `mos` are then 0 (not measured) and only the eq. 13 estimate is given.
    pub fn report(
        &self,
        clip_name: &str,
        reference: Option<&[Frame]>,
        now: Instant,
    ) -> StreamReport {
        let stats = self.playout.as_ref().map(|p| p.stats_at(us(now))).unwrap_or_default();
        let (fps, bitrate) = self.header_rates();
        let (psnr, undecodable, sd) = match reference {
            Some(r) => self.psnr(r),
            None => (f64::NAN, 0, 0.0),
        };
        let duration = match (self.first_read, self.last_read) {
            (Some(a), Some(b)) if b > a => (b - a).as_secs_f64(),
            _ => 0.0,
        };
        let read_rate = if duration > 0.0 { self.bytes_read as f64 * 8.0 / duration } else { 0.0 };
        let (frames_total, shown_bits) = match &self.running {
            Some(r) => (r.frames_due, r.shown_bits),
            None => (
                self.due.len() as u64,
                // Eq. 13's "current throughput": the media rate actually shown over the
                // time it was due (the clip's own rate when nothing was lost).
                self.due
                    .iter()
                    .filter(|(_, shown)| *shown)
                    .filter_map(|(g, _)| self.received.get(g))
                    .map(|au| au.data.len() as u64 * 8)
                    .sum(),
            ),
        };
        let due_s = frames_total as f64 / fps.max(1e-9);
        let shown_rate = if due_s > 0.0 { shown_bits as f64 / due_s } else { 0.0 };
        StreamReport {
            clip: clip_name.to_string(),
            playout_policy: self.cfg.policy.name().to_string(),
            startup_delay_s: stats.startup_delay_us.map_or(0.0, |u| u as f64 / 1e6),
            stalls: u64::from(stats.stalls),
            stall_time_s: stats.stall_time_us as f64 / 1e6,
            frames_total,
            frames_lost: stats.frames_lost as u64 + undecodable,
            psnr_avg_db: if psnr.is_nan() { 0.0 } else { cap_psnr(psnr) },
            psnr_sd_db: sd,
            mos: if psnr.is_nan() { 0 } else { u32::from(mos_from_psnr(psnr)) },
            psnr_eq13_db: psnr_eq13_estimate(bitrate, bitrate, shown_rate),
            read_rate_bps: read_rate,
            stall_starts_s: self
                .stall_starts
                .iter()
                .map(|t| t.saturating_duration_since(self.start).as_secs_f64())
                .collect(),
        }
    }

    /// PSNR of what was displayed: shown frames decoded in order, lost or undecodable ones
    /// frozen. Returns (average, undecodable frames, sd).
    fn psnr(&self, reference: &[Frame]) -> (f64, u64, f64) {
        if let Some(r) = &self.running {
            // Measured as the frames came due (against the reference given at the start).
            return match r.meter.as_ref().map(ShownMeter::finish) {
                Some(m) => (m.psnr_avg_db, m.undecodable, m.psnr_sd_db),
                None => (0.0, 0, 0.0),
            };
        }
        let (avg, undecodable, sd, _) = self.psnr_trace(reference);
        (avg, undecodable, sd)
    }

    /// The stream's frame rate and mean bit rate, from its header.
    pub fn header_rates(&self) -> (f64, f64) {
        let Some(h) = &self.header else { return (25.0, 0.0) };
        let n = h.plan.len().max(1) as f64;
        let bytes: u64 = h.plan.iter().map(|p| u64::from(p.1)).sum();
        (h.fps, bytes as f64 * 8.0 / (n / h.fps.max(1e-9)))
    }

    /// The stream header, once received.
    pub fn header(&self) -> Option<&StreamHeader> {
        self.header.as_ref()
    }

    /// The access unit of frame `g`, if it arrived.
    pub fn unit(&self, g: u64) -> Option<&AccessUnit> {
        self.received.get(&g)
    }

    /// Drops the access units of frames that came due and were taken (or dropped
    /// untaken), without [`ClientConfig::keep_history`].
    fn prune(&mut self) {
        let Some(r) = self.running.as_ref() else { return };
        let Some(next) = self.playout.as_ref().map(|p| p.next_index() as u64) else { return };
        let floor = r.untaken.front().map_or(next, |&(g, _)| g.min(next));
        let floor = r.taken_from.map_or(floor, |g| g.min(floor));
        if self.received.first_key_value().is_some_and(|(&g, _)| g < floor) {
            self.received = self.received.split_off(&floor);
        }
    }

    /// Frames that came due since the last call: `(frame, shown)`. Without
    /// [`ClientConfig::keep_history`] at most the latest 4096 are kept between calls, and
    /// a frame's access unit ([`MediaClient::unit`]) is dropped at the next call.
    pub fn take_due(&mut self) -> Vec<(u64, bool)> {
        if let Some(r) = self.running.as_mut() {
            let out: Vec<_> = r.untaken.drain(..).collect();
            r.taken_from = out.first().map(|&(g, _)| g);
            self.prune();
            return out;
        }
        let from = self.due_taken.min(self.due.len());
        self.due_taken = self.due.len();
        self.due[from..].to_vec()
    }

    /// Current playout figures at `now`.
    pub fn playout_stats(
        &self,
        now: Instant,
    ) -> Option<(braid_media::playout::PlayoutStats, f64, PlayoutState)> {
        self.playout.as_ref().map(|p| (p.stats_at(us(now)), p.buffered_s(us(now)), p.state()))
    }

    /// The frames that were shown, decoded in order (EvalVid style) by ffmpeg, keyed by
    /// frame number; `None` before the stream header arrived.
    fn decode_shown(&self) -> Option<BTreeMap<u64, Frame>> {
        let codec = self.header.as_ref().map(|h| h.codec)?;
        let mut dec = FfmpegDecoder::new(codec).ok()?;
        let mut decoded: BTreeMap<u64, Frame> = BTreeMap::new();
        let mut out = Vec::new();
        for &(g, shown) in &self.due {
            if !shown {
                continue;
            }
            if let Some(au) = self.received.get(&g) {
                let tagged = AccessUnit { pts_us: g as i64, dts_us: g as i64, ..au.clone() };
                if dec.decode(&tagged, &mut out).is_ok() {
                    for f in out.drain(..) {
                        if let Some(p) = f.pts_us {
                            decoded.insert(p as u64, f);
                        }
                    }
                }
            }
        }
        let _ = dec.finish(&mut out);
        for f in out.drain(..) {
            if let Some(p) = f.pts_us {
                decoded.insert(p as u64, f);
            }
        }
        Some(decoded)
    }

    /// Writes what the viewer saw, one picture per frame slot that came due, to a `.y4m`
    /// file: each shown frame as decoded, a lost or undecodable one as the picture left on
    /// screen (black before the first). `braid psnr FILE REFERENCE` on it gives the
    /// report's PSNR. Returns the pictures written.
    pub fn write_displayed(&self, path: &std::path::Path) -> braid_media::Result<u64> {
        if self.running.is_some() {
            return Err(braid_media::MediaError::Framing(
                "the displayed frames were not kept (the client ran without its history)".into(),
            ));
        }
        let (width, height, fps) = match &self.header {
            Some(h) => (h.width, h.height, h.fps),
            None => {
                return Err(braid_media::MediaError::Framing(
                    "no stream header arrived: nothing was displayed".into(),
                ));
            }
        };
        let mut decoded = self.decode_shown().unwrap_or_default();
        let mut w = braid_media::yuv4mpeg::Y4mWriter::create(path, width, height, fps)?;
        let mut on_screen = braid_media::quality::black_frame(width, height);
        for &(g, shown) in &self.due {
            if let Some(f) = decoded.remove(&g).filter(|_| shown) {
                on_screen = f;
            }
            w.write(&on_screen)?;
        }
        let n = w.frames();
        w.finish()?;
        Ok(n)
    }

    /// As [`MediaClient::psnr`], plus each displayed frame's (time s, capped PSNR dB).
    pub fn psnr_trace(&self, reference: &[Frame]) -> (f64, u64, f64, Vec<(f64, f64)>) {
        if self.running.is_some() {
            // No per-frame trace without the history.
            let (avg, undecodable, sd) = self.psnr(reference);
            return (avg, undecodable, sd, Vec::new());
        }
        if self.due.is_empty() || reference.is_empty() {
            return (0.0, 0, 0.0, Vec::new());
        }
        let Some(mut decoded) = self.decode_shown() else { return (0.0, 0, 0.0, Vec::new()) };
        let mut cmp = FreezeComparator::default();
        let mut undecodable = 0;
        let mut per_frame = Vec::with_capacity(self.due.len());
        let n = reference.len() as u64;
        for (&(g, shown), &at) in self.due.iter().zip(&self.due_at) {
            let shown_frame = if shown { decoded.remove(&g) } else { None };
            if shown && shown_frame.is_none() {
                undecodable += 1;
            }
            if let Some(r) = reference.get((g % n) as usize)
                && let Ok(e) = cmp.push(r, shown_frame)
            {
                per_frame.push(((at - self.start).as_secs_f64(), cap_psnr(e.psnr_avg())));
            }
        }
        (cmp.stats.psnr_avg(), undecodable, cmp.stats.psnr_sd(), per_frame)
    }

    /// Bytes and messages read, and the delivery check.
    pub fn read_totals(&self) -> (u64, u64, DeliveryCheck) {
        (self.bytes_read, self.messages, self.check)
    }
}

/// What a client saw over time, for plots.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClientTrace {
    /// Buffer samples every 100 ms.
    pub samples: Vec<ClientSample>,
    /// (time s, PSNR dB) of every frame due.
    pub psnr: Vec<(f64, f64)>,
}

/// Where a finished simulation leaves the client's trace.
pub type TraceSink = std::rc::Rc<std::cell::RefCell<Option<ClientTrace>>>;

/// The media session as a simulator workload.
pub struct SimStream {
    trace: Option<TraceSink>,
    end_at: Option<Instant>,
    clip_name: String,
    reference: Arc<Vec<Frame>>,
    sender: MediaSender,
    client: Option<MediaClient>,
    client_cfg: ClientConfig,
    delays_us: Vec<u64>,
    done_at: Option<Instant>,
}

impl SimStream {
    /// A session streaming `clip` (whose reference decode is `reference`).
    pub fn new(
        clip: Arc<Clip>,
        clip_name: String,
        reference: Arc<Vec<Frame>>,
        media: MediaReliability,
        loop_for: Option<Duration>,
        client_cfg: ClientConfig,
    ) -> SimStream {
        let sender = MediaSender::new(clip, media, loop_for);
        SimStream {
            trace: None,
            end_at: None,
            clip_name,
            reference,
            sender,
            client: None,
            client_cfg,
            delays_us: Vec::new(),
            done_at: None,
        }
    }

    /// The simulation ends at `t`: a stall still open then counts up to it.
    pub fn ending_at(mut self, t: Instant) -> SimStream {
        self.end_at = Some(t);
        self
    }

    /// Leaves the client's trace in `sink` when the report is made.
    pub fn with_trace(mut self, sink: TraceSink) -> SimStream {
        self.trace = Some(sink);
        self
    }

    /// The client, once the session started.
    pub fn client(&self) -> Option<&MediaClient> {
        self.client.as_ref()
    }
}

impl Workload for SimStream {
    fn on_server(&mut self, now: Instant, conn: &mut Connection) {
        self.sender.pump(now, conn);
    }

    fn on_client(&mut self, now: Instant, conn: &mut Connection) {
        let cfg = self.client_cfg.clone();
        // The client's first packet went out at the simulation's start.
        let reference = Arc::clone(&self.reference);
        let client = self
            .client
            .get_or_insert_with(|| MediaClient::new(cfg, Instant::ZERO).with_reference(reference));
        for id in client.on_readable(now, conn) {
            if let Some(sent) = self.sender.take_sent_at(id) {
                self.delays_us.push((now - sent).as_micros() as u64);
            }
        }
        if !self.client_cfg.keep_history {
            // Nothing is displayed here: what came due is measured, then let go.
            client.take_due();
        }
        if client.ended() && self.done_at.is_none() {
            self.done_at = Some(now);
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.client.as_ref().and_then(|c| c.poll_timeout())
    }

    fn is_done(&self) -> bool {
        self.done_at.is_some()
    }

    fn stats(&self) -> WorkloadStats {
        let (bytes, messages, check) =
            self.client.as_ref().map(|c| c.read_totals()).unwrap_or_default();
        WorkloadStats {
            bytes_delivered: bytes,
            messages,
            delays_us: self.delays_us.clone(),
            check,
            done_at: self.done_at,
        }
    }

    fn stream_report(&self) -> Option<StreamReport> {
        let c = self.client.as_ref()?;
        if let Some(sink) = &self.trace {
            let (_, _, _, psnr) = c.psnr_trace(&self.reference);
            *sink.borrow_mut() = Some(ClientTrace { samples: c.samples().to_vec(), psnr });
        }
        let end = self.end_at.or(self.done_at).unwrap_or(Instant::ZERO);
        Some(c.report(&self.clip_name, Some(&self.reference), end))
    }

    fn on_stopped(&mut self, now: Instant) -> bool {
        // Once the sender's End arrived the player only plays out its buffer: an idle
        // connection then cuts nothing short.
        if self.client.as_ref().is_some_and(MediaClient::received_end) {
            return false;
        }
        self.end_at = Some(self.end_at.map_or(now, |t| t.min(now)));
        true
    }
}
