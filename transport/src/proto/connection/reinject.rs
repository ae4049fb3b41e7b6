//! QoE-driven re-injection, on when [`super::Config::reinject`] is set (profiles
//! `mptcp-qoe`, `mptcp-qe-qoe`, `sedpf-fec4-qoe`). It works beside any scheduler.
//!
//! The rules follow XLINK (Zheng et al., "XLINK: QoE-Driven Multi-Path QUIC Transport in
//! Large-scale Video Services", SIGCOMM 2021 \[source\]): the client reports its playout
//! state (the PLAYOUT frame: buffered media, time until the first missing frame is due,
//! stalled, started), and the data sender copies unacknowledged data onto another path
//! when the playout is at risk. [`gate`] decides, in this order:
//! 1. before playback started (or before any report): what
//!    [`ReinjectConfig::first_frame_copies`] allows, out of
//!    [`ReinjectConfig::first_frame_budget_bytes`]; by default nothing (XLINK's
//!    *first-frame acceleration*, copies of the data in flight on the other paths, delayed
//!    the start on two of three measured pairs; it is the `mptcp-qoe-dup` ablation);
//! 2. buffer below [`ReinjectConfig::low`] (or stalled): re-inject;
//! 3. the first missing frame is due within one smoothed RTT of the path that carries the
//!    oldest unacknowledged data: re-inject that path's data elsewhere;
//! 4. buffer at or above [`ReinjectConfig::high`]: stop;
//! 5. in between: re-inject while the buffer is shorter than the expected time to download
//!    what is queued and in flight (at the paths' summed cwnd/srtt rate).
//!
//! What is copied: DATA of packets in flight on a path other than the target, oldest
//! stream offset first; after playback started only if the copy would arrive earlier
//! (now + srtt_target/2 before
//! sent + srtt_source/2) or the packet is overdue (sent more than srtt + 4·rttvar ago);
//! each byte range is copied once. The target is the lowest-RTT usable path whose window
//! and pacing allow a packet now. With the streaming code on, the copy is a CODED packet
//! instead (on the lossiest allowed path), while fewer are in flight than unacknowledged
//! symbols; before playback starts, plain copies are used either way.
//!
//! Energy: a path in backup status (MPTCP-QE's Partial mode keeps LTE as backup) may be
//! woken by re-injection only while the buffer is below [`ReinjectConfig::low`].
//!
//! Budget: copies after the start are limited to [`ReinjectConfig::budget_fraction`] of
//! the data bytes sent; the first-frame copies to their own byte budget. Copies count in
//! [`super::ConnectionStats::redundant_bytes`] and per path in
//! [`super::PathStats::redundant_bytes_sent`].

use std::collections::BTreeMap;
use std::time::Duration;

use super::Connection;
use super::packetize::Transmit;
use crate::path::{PathId, PathStatus};
use crate::proto::frame::{Frame, PlayoutFeedback};
use crate::proto::send::Chunk;
use crate::sched::PathView;
use crate::time::Instant;

/// The re-injection settings (all tunable; defaults documented per field and in
/// docs/ALGORITHMS.md "QoE-driven re-injection").
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReinjectConfig {
    /// Below this much buffered media the sender re-injects. Default 1.5 s.
    pub low: Duration,
    /// At or above this much buffered media it stops. Default 5 s.
    pub high: Duration,
    /// Copies after playback started, as a fraction of the data bytes sent. Default 0.02.
    pub budget_fraction: f64,
    /// Bytes of first-frame copies before playback starts. Default 150 000 (about 1 % of
    /// a minute of the 2 Mbit/s CIF clip, half its first GOP).
    pub first_frame_budget_bytes: u64,
    /// Which in-flight data is copied before playback starts. Default [`CopyRule::None`]:
    /// XLINK's duplication of the first frames on every path ([`CopyRule::All`]) delayed
    /// the start on two of the three measured pairs and copies of overdue data only
    /// ([`CopyRule::Overdue`]) on two of three, never gaining more than they cost
    /// (docs/ALGORITHMS.md, BENCHMARKS.md "QoE-driven re-injection").
    pub first_frame_copies: CopyRule,
    /// The client reports its playout state (PLAYOUT) with its ACKs at most this often
    /// unless it changed, and on its own after 2.5 intervals or when the stalled or started
    /// flag changed. Default 100 ms.
    pub feedback_interval: Duration,
}

/// Which data of packets in flight on another path may be copied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CopyRule {
    /// Any unacknowledged data.
    All,
    /// Data whose copy would arrive earlier than the original (now + srtt_target/2 before
    /// sent + srtt_source/2), or whose packet is overdue.
    EarlierOrOverdue,
    /// Data of overdue packets only (sent more than srtt + 4·rttvar ago: likely lost).
    Overdue,
    /// Nothing.
    None,
}

impl ReinjectConfig {
    /// The defaults (see each field).
    pub const DEFAULT: ReinjectConfig = ReinjectConfig {
        low: Duration::from_millis(1500),
        high: Duration::from_secs(5),
        budget_fraction: 0.02,
        first_frame_budget_bytes: 150_000,
        first_frame_copies: CopyRule::None,
        feedback_interval: Duration::from_millis(100),
    };
}

impl Default for ReinjectConfig {
    fn default() -> Self {
        ReinjectConfig::DEFAULT
    }
}

/// Why the gate is open (or that it is shut).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Gate {
    /// No re-injection.
    Off,
    /// Playback has not started: first-frame acceleration.
    FirstFrames,
    /// The buffer is below the low threshold, or playback stalled.
    LowBuffer,
    /// The first missing frame is due within one RTT of the path carrying the oldest
    /// unacknowledged data.
    Deadline,
    /// Between the thresholds, with the buffer shorter than the expected remaining download.
    Behind,
}

/// What [`gate`] looks at.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GateInput {
    /// The latest playout report, if any.
    pub feedback: Option<PlayoutFeedback>,
    /// Time since it arrived.
    pub age: Duration,
    /// Expected time to download what is queued and in flight (`None`: no estimate).
    pub remaining_download: Option<Duration>,
    /// Smoothed RTT of the path carrying the oldest unacknowledged data.
    pub hol_srtt: Option<Duration>,
}

/// The media buffered at the client now, as far as the sender can tell: the reported
/// buffer, drained by the time since the report while the clock runs; zero without a
/// report.
pub fn buffer_now(feedback: Option<&PlayoutFeedback>, age: Duration) -> Duration {
    match feedback {
        None => Duration::ZERO,
        Some(f) => {
            let b = Duration::from_millis(f.buffer_ms);
            if f.started && !f.stalled { b.saturating_sub(age) } else { b }
        }
    }
}

/// The re-injection decision (the rules in the [module documentation](self), in order).
pub fn gate(cfg: &ReinjectConfig, input: &GateInput) -> Gate {
    let Some(fb) = input.feedback else { return Gate::FirstFrames };
    if !fb.started {
        return Gate::FirstFrames;
    }
    let buffer = buffer_now(Some(&fb), input.age);
    if fb.stalled || buffer < cfg.low {
        return Gate::LowBuffer;
    }
    if let (Some(d), Some(rtt)) = (fb.next_deadline_ms, input.hol_srtt)
        && Duration::from_millis(d).saturating_sub(input.age) <= rtt
    {
        return Gate::Deadline;
    }
    if buffer >= cfg.high {
        return Gate::Off;
    }
    match input.remaining_download {
        Some(t) if buffer < t => Gate::Behind,
        _ => Gate::Off,
    }
}

/// Whether re-injection may use (and so wake) a path of `status` with `buffer` buffered:
/// backup paths only below the low threshold.
pub fn may_use(cfg: &ReinjectConfig, status: PathStatus, buffer: Duration) -> bool {
    match status {
        PathStatus::Active => true,
        PathStatus::Backup => buffer < cfg.low,
        PathStatus::Closed => false,
    }
}

/// What re-injection did on one connection.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReinjectStats {
    /// Packets of copied DATA sent.
    pub packets: u64,
    /// DATA payload bytes copied (first-frame copies included).
    pub bytes: u64,
    /// Of those, copied before playback started.
    pub first_frame_bytes: u64,
    /// CODED packets sent because the gate was open (their bytes are in the code's
    /// counters).
    pub coded_packets: u64,
    /// CODED frame bytes of those.
    pub coded_bytes: u64,
    /// Packets sent on a backup path (woken by re-injection).
    pub backup_packets: u64,
    /// PLAYOUT frames received.
    pub feedback_received: u64,
    /// PLAYOUT frames sent.
    pub feedback_sent: u64,
}

/// Per-connection state.
#[derive(Debug, Default)]
pub(super) struct QoeState {
    /// Data sender: the latest report and when it arrived.
    peer: Option<(PlayoutFeedback, Instant)>,
    /// Client: the state to report, whether it is new, whether it must go out now.
    local: Option<PlayoutFeedback>,
    pending: bool,
    urgent: bool,
    last_sent: Option<(PlayoutFeedback, Instant)>,
    /// Stream ranges copied so far: start → (end, message id).
    copied: BTreeMap<u64, (u64, u64)>,
    pub(super) stats: ReinjectStats,
}

/// Most ranges remembered as copied before settled ones are pruned.
const MAX_COPIED: usize = 4096;
/// In-flight packets per path looked at for copies (oldest first).
const MAX_SCAN: usize = 512;
/// Candidate ranges kept per packet built (a packet holds one or a few).
const MAX_CANDIDATES: usize = 16;
/// A copy shorter than this is not worth a frame unless it is a whole range.
const MIN_COPY: usize = 64;

impl Connection {
    /// Client: the application's playout state now. With re-injection configured it is
    /// reported to the peer in a PLAYOUT frame riding with ACKs and control frames when it
    /// changed or [`ReinjectConfig::feedback_interval`] passed since the last report; in a
    /// packet of its own when 2.5 intervals passed or the stalled or started flag changed.
    /// Without re-injection configured, nothing is sent.
    pub fn set_playout_feedback(&mut self, now: Instant, feedback: PlayoutFeedback) {
        self.now = self.now.max(now);
        if self.is_closed() {
            return;
        }
        // Kept with or without re-injection: the receiver's mode switch reads it.
        self.qoe.local = Some(feedback);
        let Some(cfg) = self.config.reinject else { return };
        let q = &mut self.qoe;
        match q.last_sent {
            None => {
                q.pending = true;
                q.urgent = true;
            }
            Some((last, at)) => {
                // A report ages at the sender (its buffer drains), so the same state is
                // reported again every interval.
                if last != feedback || self.now >= at + cfg.feedback_interval {
                    q.pending = true;
                }
                let flags = last.stalled != feedback.stalled || last.started != feedback.started;
                if flags || self.now >= at + cfg.feedback_interval * 5 / 2 {
                    q.urgent = q.pending;
                }
            }
        }
    }

    /// Client: the application's latest playout state ([`Connection::set_playout_feedback`]),
    /// whether or not it is reported to the peer.
    pub fn local_playout(&self) -> Option<PlayoutFeedback> {
        self.qoe.local
    }

    /// Data sender: the peer's latest playout report and when it arrived.
    pub fn peer_playout(&self) -> Option<(PlayoutFeedback, Instant)> {
        self.qoe.peer
    }

    /// Re-injection's counters.
    pub fn reinject_stats(&self) -> ReinjectStats {
        self.qoe.stats
    }

    /// A PLAYOUT frame arrived.
    pub(super) fn on_playout(&mut self, now: Instant, f: PlayoutFeedback) {
        self.qoe.peer = Some((f, now));
        self.qoe.stats.feedback_received += 1;
    }

    /// Whether a PLAYOUT frame must go out even without other frames.
    pub(super) fn playout_urgent(&self) -> bool {
        self.qoe.urgent
    }

    /// Adds the pending PLAYOUT frame.
    pub(super) fn add_playout(&mut self, b: &mut super::packetize::Builder, buf: &mut Vec<u8>) {
        if !self.qoe.pending {
            return;
        }
        let Some(f) = self.qoe.local else { return };
        if b.push(buf, &Frame::Playout(f)) {
            self.qoe.pending = false;
            self.qoe.urgent = false;
            self.qoe.last_sent = Some((f, self.now));
            self.qoe.stats.feedback_sent += 1;
        }
    }

    /// The gate's inputs now.
    fn gate_input(&self, now: Instant, views: &[PathView]) -> GateInput {
        let (feedback, age) = match self.qoe.peer {
            Some((f, at)) => (Some(f), now - at),
            None => (None, Duration::ZERO),
        };
        // The path carrying the oldest unacknowledged data (lowest stream offset).
        let mut hol: Option<(u64, Duration)> = None;
        for p in self.paths.values() {
            for (_, sp) in p.loss.in_flight_packets() {
                let first = sp
                    .frames
                    .data
                    .iter()
                    .filter(|(m, r)| !r.is_empty() && !self.send.is_settled(*m, r.clone()))
                    .map(|(_, r)| r.start)
                    .min();
                if let Some(off) = first {
                    if hol.is_none_or(|(o, _)| off < o) {
                        hol = Some((off, p.rtt.smoothed()));
                    }
                    break;
                }
            }
        }
        let pending: u64 =
            self.send.unsent_bytes() + self.paths.values().map(|p| p.loss.in_flight()).sum::<u64>();
        let rate: f64 = views
            .iter()
            .filter(|v| v.usable && v.status == PathStatus::Active)
            .map(|v| v.cwnd as f64 / v.srtt.as_secs_f64().max(1e-3))
            .sum();
        let remaining_download =
            (rate > 0.0).then(|| Duration::from_secs_f64((pending as f64 / rate).min(3600.0)));
        GateInput { feedback, age, remaining_download, hol_srtt: hol.map(|h| h.1) }
    }

    /// A re-injected packet when the gate is open and the budget allows one.
    pub(super) fn poll_reinject(
        &mut self,
        now: Instant,
        buf: &mut Vec<u8>,
        views: &[PathView],
    ) -> Option<Transmit> {
        let cfg = self.config.reinject?;
        // The media sender re-injects, on its peer's playout reports; the client's own
        // messages (its playout reports) are not media.
        if self.side != super::Side::Server || self.paths.values().all(|p| p.loss.in_flight() == 0)
        {
            return None;
        }
        let data_sent: u64 = self.paths.values().map(|p| p.counters.data_bytes_sent()).sum();
        let st = self.qoe.stats;
        let ff_left = cfg.first_frame_budget_bytes.saturating_sub(st.first_frame_bytes);
        let after_start = st.bytes - st.first_frame_bytes + st.coded_bytes;
        let allowance = (cfg.budget_fraction.max(0.0) * data_sent as f64) as u64;
        let qoe_left = allowance.saturating_sub(after_start);
        if ff_left == 0 && qoe_left == 0 {
            return None;
        }
        let input = self.gate_input(now, views);
        let g = gate(&cfg, &input);
        let left = match g {
            Gate::Off => return None,
            Gate::FirstFrames if cfg.first_frame_copies == CopyRule::None => return None,
            Gate::FirstFrames => ff_left,
            _ => qoe_left,
        };
        if left == 0 {
            return None;
        }
        let buffer = buffer_now(input.feedback.as_ref(), input.age);
        let size = self.config.max_datagram_size;
        let allowed: Vec<PathView> = views
            .iter()
            .filter(|v| v.usable && v.has_room(size) && may_use(&cfg, v.status, buffer))
            .filter(|v| v.next_send_time.is_none_or(|t| t <= now))
            .cloned()
            .collect();
        if allowed.is_empty() {
            return None;
        }
        if g != Gate::FirstFrames
            && let Some(fec) = self.fec.as_mut()
        {
            if fec.coded_in_flight_count() >= fec.unacked_symbols() {
                return None;
            }
            fec.force_repair();
            let before = self.fec_stats().map_or(0, |f| f.coded_bytes);
            let t = self.poll_coded(now, buf, &allowed, false)?;
            let bytes = self.fec_stats().map_or(0, |f| f.coded_bytes).saturating_sub(before);
            self.qoe.stats.coded_packets += 1;
            self.qoe.stats.coded_bytes += bytes;
            return Some(t);
        }
        let mut targets = allowed;
        targets.sort_by_key(|v| (v.srtt, v.id));
        for target in targets.iter().take(2) {
            let rule = match g {
                Gate::FirstFrames => cfg.first_frame_copies,
                _ => CopyRule::EarlierOrOverdue,
            };
            let cands = self.copy_candidates(now, target, rule);
            if cands.is_empty() {
                continue;
            }
            let mut b = self.start(target.id, buf)?;
            let mut copied = 0u64;
            for (m, r) in cands {
                let Some(c) = self.send.copy_of(m, r) else { continue };
                // Trim the copy to the room left in the packet and in the budget.
                let overhead = self.chunk_frame(&c).encoded_len() - c.data.len();
                let room = b.limit.saturating_sub(buf.len()).saturating_sub(overhead);
                let fit = room.min(usize::try_from(left - copied).unwrap_or(usize::MAX));
                if fit < MIN_COPY.min(c.data.len()) {
                    break;
                }
                let c =
                    if c.data.len() > fit { Chunk { data: c.data.slice(..fit), ..c } } else { c };
                if !b.push(buf, &self.chunk_frame(&c)) {
                    break;
                }
                let len = c.data.len() as u64;
                copied += len;
                b.data_bytes += len;
                b.frames.data.push((c.message_id, c.range()));
                self.qoe.copied.insert(c.offset, (c.offset + len, c.message_id));
            }
            if copied == 0 {
                self.unstart(&b);
                buf.clear();
                continue;
            }
            self.add_acks(now, &mut b, buf, false, views);
            let t = self.finish(now, b, buf, true)?;
            let s = &mut self.qoe.stats;
            s.packets += 1;
            s.bytes += copied;
            if g == Gate::FirstFrames {
                s.first_frame_bytes += copied;
            }
            if target.status == PathStatus::Backup {
                s.backup_packets += 1;
            }
            self.note_redundant_sent(t.path, t.len as u64);
            self.prune_copied();
            return Some(t);
        }
        None
    }

    /// The part of `r` not copied yet (ranges are copied from their start on, so only a
    /// copied range reaching into `r` from below or at its start matters).
    fn not_copied(&self, r: std::ops::Range<u64>) -> std::ops::Range<u64> {
        let mut start = r.start;
        while let Some((_, &(end, _))) = self.qoe.copied.range(..=start).next_back() {
            if end <= start {
                break;
            }
            start = end;
        }
        start.min(r.end)..r.end
    }

    /// Stream ranges to copy onto `target`, oldest stream offset first: unacknowledged DATA
    /// of packets in flight on the other paths, not copied before, that `rule` admits.
    fn copy_candidates(
        &self,
        now: Instant,
        target: &PathView,
        rule: CopyRule,
    ) -> Vec<(u64, std::ops::Range<u64>)> {
        let mut cands: Vec<(u64, std::ops::Range<u64>)> = Vec::new();
        for p in self.paths.values().filter(|p| p.id != target.id) {
            let srtt = p.rtt.smoothed();
            let overdue_after = srtt + 4 * p.rtt.var();
            for (_, sp) in p.loss.in_flight_packets().take(MAX_SCAN) {
                let overdue = now >= sp.time_sent + overdue_after;
                let earlier = now + target.srtt / 2 < sp.time_sent + srtt / 2;
                let take = match rule {
                    CopyRule::All => true,
                    CopyRule::EarlierOrOverdue => earlier || overdue,
                    CopyRule::Overdue => overdue,
                    CopyRule::None => false,
                };
                if !take {
                    continue;
                }
                for (m, r) in &sp.frames.data {
                    let r = self.not_copied(r.clone());
                    if r.is_empty() || self.send.is_settled(*m, r.clone()) {
                        continue;
                    }
                    cands.push((*m, r));
                }
            }
        }
        cands.sort_by_key(|c| c.1.start);
        cands.truncate(MAX_CANDIDATES);
        cands
    }

    /// Counts `bytes` of a datagram sent on purpose as redundancy on `pid`.
    pub(super) fn note_redundant_sent(&mut self, pid: PathId, bytes: u64) {
        if let Some(p) = self.paths.get_mut(&pid) {
            p.counters.on_redundant_sent(bytes);
        }
    }

    /// Forgets copied ranges whose data is settled once there are many.
    fn prune_copied(&mut self) {
        if self.qoe.copied.len() > MAX_COPIED {
            let send = &self.send;
            self.qoe.copied.retain(|&s, &mut (e, m)| !send.is_settled(m, s..e));
            if self.qoe.copied.len() > MAX_COPIED {
                self.qoe.copied.clear();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fb(buffer_ms: u64, stalled: bool, started: bool) -> Option<PlayoutFeedback> {
        let next_deadline_ms = (started && !stalled).then_some(buffer_ms);
        Some(PlayoutFeedback { buffer_ms, next_deadline_ms, stalled, started })
    }

    fn input(feedback: Option<PlayoutFeedback>) -> GateInput {
        GateInput {
            feedback,
            age: Duration::ZERO,
            remaining_download: Some(Duration::from_millis(500)),
            hol_srtt: Some(Duration::from_millis(100)),
        }
    }

    #[test]
    fn first_frames_until_playback_starts() {
        let cfg = ReinjectConfig::default();
        assert_eq!(gate(&cfg, &input(None)), Gate::FirstFrames);
        assert_eq!(gate(&cfg, &input(fb(800, false, false))), Gate::FirstFrames);
        assert_ne!(gate(&cfg, &input(fb(8000, false, true))), Gate::FirstFrames);
    }

    #[test]
    fn below_the_low_threshold_or_stalled_reinjects() {
        let cfg = ReinjectConfig::default();
        assert_eq!(gate(&cfg, &input(fb(1499, false, true))), Gate::LowBuffer);
        assert_eq!(gate(&cfg, &input(fb(9000, true, true))), Gate::LowBuffer);
        // The buffer drains while the report ages.
        let mut i = input(fb(2000, false, true));
        i.remaining_download = None;
        assert_eq!(gate(&cfg, &i), Gate::Off);
        i.age = Duration::from_millis(600);
        assert_eq!(gate(&cfg, &i), Gate::LowBuffer);
    }

    #[test]
    fn above_the_high_threshold_stops() {
        let cfg = ReinjectConfig::default();
        let mut i = input(fb(5000, false, true));
        i.remaining_download = Some(Duration::from_secs(60));
        assert_eq!(gate(&cfg, &i), Gate::Off);
        i.feedback = fb(4999, false, true);
        assert_eq!(gate(&cfg, &i), Gate::Behind);
    }

    #[test]
    fn between_thresholds_only_when_behind_the_download() {
        let cfg = ReinjectConfig::default();
        let mut i = input(fb(3000, false, true));
        i.remaining_download = Some(Duration::from_millis(2999));
        assert_eq!(gate(&cfg, &i), Gate::Off);
        i.remaining_download = Some(Duration::from_millis(3001));
        assert_eq!(gate(&cfg, &i), Gate::Behind);
        i.remaining_download = None;
        assert_eq!(gate(&cfg, &i), Gate::Off);
    }

    #[test]
    fn a_deadline_within_one_rtt_of_its_path_reinjects() {
        let cfg = ReinjectConfig { low: Duration::from_millis(100), ..ReinjectConfig::default() };
        let mut i = input(fb(400, false, true));
        i.remaining_download = None;
        i.hol_srtt = Some(Duration::from_millis(399));
        assert_eq!(gate(&cfg, &i), Gate::Off);
        i.hol_srtt = Some(Duration::from_millis(400));
        assert_eq!(gate(&cfg, &i), Gate::Deadline);
        // The deadline comes closer as the report ages.
        i.hol_srtt = Some(Duration::from_millis(300));
        i.age = Duration::from_millis(100);
        assert_eq!(gate(&cfg, &i), Gate::Deadline);
        i.hol_srtt = None;
        assert_eq!(gate(&cfg, &i), Gate::Off);
    }

    #[test]
    fn backup_paths_are_woken_only_below_the_low_threshold() {
        let cfg = ReinjectConfig::default();
        assert!(may_use(&cfg, PathStatus::Backup, Duration::from_millis(1499)));
        assert!(!may_use(&cfg, PathStatus::Backup, Duration::from_millis(1500)));
        assert!(may_use(&cfg, PathStatus::Active, Duration::from_secs(9)));
        assert!(!may_use(&cfg, PathStatus::Closed, Duration::ZERO));
    }
}
