//! Per-path loss recovery: RTT and one-way-delay estimation, sent-packet tracking, loss
//! detection and the retransmission timeout.
//!
//! - RTT: RFC 6298 §2 \[source\] (SRTT/RTTVAR with α = 1/8, β = 1/4, RTO = SRTT +
//!   max(G, 4·RTTVAR), doubled per expiry), with the RTO floor taken from the config
//!   (default 200 ms, the Linux `TCP_RTO_MIN` \[recalled\], lower than RFC 6298's 1 s) and the
//!   peer's reported ACK delay subtracted from samples as in RFC 9002 §5.3 \[source\].
//! - Loss ([`LossDetection`], per path): by default RACK, RFC 8985 §6 \[source\]: a packet
//!   is lost once a packet sent after it was acknowledged and RACK.rtt + reo_wnd passed
//!   since it was sent, with a reordering window that grows when a loss proves spurious
//!   ([`Rack`]). The other mode is RFC 9002 §6.1 \[source\]: a packet is lost when a
//!   packet sent at least `PACKET_THRESHOLD` = 3 later was acknowledged, or when it was
//!   sent more than 9/8·max(SRTT, latest RTT) (at least 1 ms) before an acknowledged
//!   packet arrived.
//! - Spurious losses: a packet declared lost whose acknowledgement still comes (QUIC's
//!   equivalent of TCP's DSACK, RFC 8985 §6.2 step 4) is counted, and widens RACK's window.
//! - RTO: when the timer fires every packet in flight on the path is declared lost (TCP
//!   semantics, RFC 6298 §5), the backoff doubles, and the path is probed.

use std::collections::{BTreeMap, VecDeque};
use std::ops::Range;
use std::time::Duration;

use super::frame::AckFrame;
use crate::cc::DeliveryStamp;
use crate::path::PathId;
use crate::time::Instant;

/// RFC 9002 kPacketThreshold \[source\].
pub const PACKET_THRESHOLD: u64 = 3;
/// RFC 9002 kTimeThreshold = 9/8 \[source\], as numerator/denominator.
pub const TIME_THRESHOLD: (u32, u32) = (9, 8);
/// RFC 9002 kGranularity \[source\]; also RFC 6298's clock granularity G.
pub const GRANULARITY: Duration = Duration::from_millis(1);

/// Most packets declared lost a path remembers (by packet number, with their send
/// times), so a late acknowledgement of one is recognised as a spurious loss.
pub const RECENT_LOST: usize = 1024;

/// RFC 8985 §6.2 step 4 \[source\]: recoveries without a spurious loss after which the
/// reordering window's multiplier returns to 1 (RACK.reo_wnd_persist).
pub const REO_WND_PERSIST: u32 = 16;

/// Largest multiplier of the reordering window. RFC 8985 sets no bound; the window is
/// capped at SRTT anyway, so steps beyond 4·SRTT/min_RTT change nothing.
const REO_WND_MULT_MAX: u32 = 64;

/// How a path decides that a packet in flight is lost (besides the RTO, which declares
/// everything lost in either mode).
///
/// Neither mode adds a tail-loss probe: QUIC's probe timeout plays TLP's part (RFC 8985
/// §7 and RFC 9002 §6.2 \[source\]): here [`crate::proto::Connection`]'s per-path probe
/// timeout sends a probe on a path whose tail went unacknowledged, so a second probe
/// timer would only duplicate it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum LossDetection {
    /// RACK, RFC 8985 §6 \[source\], time based, with a per-path reordering window
    /// adapted to spurious losses ([`Rack`]). The default.
    #[default]
    Rack,
    /// RFC 9002 §6.1 \[source\]: a packet threshold of 3 and a time threshold of
    /// 9/8·max(SRTT, latest RTT). Kept for comparison.
    Rfc9002,
}

/// RACK's per-path state (RFC 8985 §6.1 \[source\]). Packet numbers of a path grow with
/// the send time, so "sent later" is "a larger packet number" and RACK.segment's end
/// sequence is its packet number.
///
/// The reordering window is reo_wnd = min(reo_wnd_mult · min_RTT / 4, SRTT) (§6.2 step 4)
/// from the first acknowledgement on: §6.2 step 4 allows a zero window while no reordering
/// was seen, which this implementation does not take. A multipath scheduler spreads one
/// stream over paths whose delays jitter, and a zero window would make the first reordered
/// packet of every path a spurious loss (a re-send, and a window reduction); the cost is
/// that a real loss is found at most min_RTT/4 later.
#[derive(Debug, Clone)]
pub struct Rack {
    /// RACK.segment: packet number and send time (RACK.xmit_ts) of the most recently
    /// sent packet that was acknowledged.
    segment: Option<(u64, Instant)>,
    /// RACK.rtt: the RTT measured with RACK.segment when its acknowledgement arrived.
    rtt: Duration,
    /// RACK.reo_wnd_mult, at least 1.
    reo_wnd_mult: u32,
    /// RACK.reo_wnd_persist: recoveries left before the multiplier returns to 1.
    reo_wnd_persist: u32,
    /// RACK.dsack_round: the window grows at most once per round trip; the round ends
    /// when a packet numbered this or above is acknowledged.
    spurious_round: Option<u64>,
    /// A loss recovery is under way until a packet numbered this or above is acknowledged.
    recovery_until: Option<u64>,
    /// RACK.reordering_seen: a packet was acknowledged after one sent later was (§6.2
    /// step 3). Reported only; the window does not depend on it (see above).
    reordering_seen: bool,
}

impl Default for Rack {
    fn default() -> Self {
        Rack {
            segment: None,
            rtt: Duration::ZERO,
            reo_wnd_mult: 1,
            reo_wnd_persist: 0,
            spurious_round: None,
            recovery_until: None,
            reordering_seen: false,
        }
    }
}

impl Rack {
    /// RACK.reo_wnd_mult.
    pub fn reo_wnd_mult(&self) -> u32 {
        self.reo_wnd_mult
    }

    /// RACK.rtt.
    pub fn rtt(&self) -> Duration {
        self.rtt
    }

    /// Whether reordering was seen on the path.
    pub fn reordering_seen(&self) -> bool {
        self.reordering_seen
    }

    /// RFC 8985 §6.2 step 4: reo_wnd = min(reo_wnd_mult · min_RTT / 4, SRTT), in whole
    /// microseconds (the resolution of `Instant`, so timer and check agree).
    pub fn reo_wnd(&self, rtt: &RttEstimator) -> Duration {
        let w = (rtt.min() / 4).saturating_mul(self.reo_wnd_mult).min(rtt.smoothed());
        Duration::from_micros(w.as_micros() as u64)
    }

    /// RFC 8985 §6.2 step 2: the acknowledged packet `pn`, sent at `sent`, becomes
    /// RACK.segment if it was sent after the current one.
    fn on_delivered(&mut self, now: Instant, pn: u64, sent: Instant) {
        if self.segment.is_none_or(|(s, _)| pn > s) {
            self.segment = Some((pn, sent));
            self.rtt = now.saturating_duration_since(sent);
        }
    }

    /// A loss proved spurious (the DSACK of RFC 8985 §6.2 step 4): the window grows by one
    /// step, at most once per round trip, and stays grown for the next 16 recoveries. The
    /// recovery under way, if any, is not one of them (its exit does not count down, as
    /// §6.2 step 4 does not when the exiting ACK carries a DSACK).
    /// `next_pn`: the path's next packet number (SND.NXT).
    fn on_spurious(&mut self, next_pn: u64) {
        self.reordering_seen = true;
        self.recovery_until = None;
        if self.spurious_round.is_none() {
            self.spurious_round = Some(next_pn);
            self.reo_wnd_mult = (self.reo_wnd_mult + 1).min(REO_WND_MULT_MAX);
            self.reo_wnd_persist = REO_WND_PERSIST;
        }
    }

    /// The largest acknowledged packet number is now `largest`: ends the spurious-loss
    /// round and the recovery they cover; at the end of a recovery the multiplier's
    /// persistence runs down, and at zero the multiplier returns to 1 (§6.2 step 4).
    fn on_largest_acked(&mut self, largest: u64) {
        if self.spurious_round.is_some_and(|r| largest >= r) {
            self.spurious_round = None;
        }
        if self.recovery_until.is_some_and(|r| largest >= r) {
            self.recovery_until = None;
            self.reo_wnd_persist = self.reo_wnd_persist.saturating_sub(1);
            if self.reo_wnd_persist == 0 {
                self.reo_wnd_mult = 1;
            }
        }
    }

    /// Packets were declared lost: a recovery starts unless one is under way; it ends when
    /// a packet sent from now on (`next_pn` and above) is acknowledged.
    fn on_loss(&mut self, next_pn: u64) {
        if self.recovery_until.is_none() {
            self.recovery_until = Some(next_pn);
        }
    }
}

/// RFC 6298 round-trip time estimator.
#[derive(Debug, Clone)]
pub struct RttEstimator {
    initial: Duration,
    smoothed: Option<Duration>,
    var: Duration,
    latest: Duration,
    min: Duration,
}

impl RttEstimator {
    /// An estimator that reports `initial` until the first sample.
    pub fn new(initial: Duration) -> Self {
        RttEstimator { initial, smoothed: None, var: initial / 2, latest: initial, min: initial }
    }

    /// Whether at least one sample was taken.
    pub fn has_sample(&self) -> bool {
        self.smoothed.is_some()
    }

    /// Feeds one sample (`ack_delay` as reported by the peer).
    pub fn update(&mut self, sample: Duration, ack_delay: Duration) {
        self.latest = sample;
        match self.smoothed {
            None => {
                // RFC 6298 §2.2: SRTT <- R, RTTVAR <- R/2.
                self.min = sample;
                self.smoothed = Some(sample);
                self.var = sample / 2;
            }
            Some(srtt) => {
                self.min = self.min.min(sample);
                // RFC 9002 §5.3: subtract the ACK delay unless that goes below min_rtt.
                let adjusted =
                    if sample >= self.min + ack_delay { sample - ack_delay } else { sample };
                // RFC 6298 §2.3: RTTVAR <- 3/4 RTTVAR + 1/4 |SRTT - R'|; SRTT <- 7/8 SRTT + 1/8 R'.
                let diff = srtt.abs_diff(adjusted);
                self.var = (self.var * 3 + diff) / 4;
                self.smoothed = Some((srtt * 7 + adjusted) / 8);
            }
        }
    }

    /// SRTT (the initial RTT before any sample).
    pub fn smoothed(&self) -> Duration {
        self.smoothed.unwrap_or(self.initial)
    }

    /// RTTVAR.
    pub fn var(&self) -> Duration {
        self.var
    }

    /// The latest sample (the initial RTT before any sample).
    pub fn latest(&self) -> Duration {
        self.latest
    }

    /// The smallest sample (the initial RTT before any sample).
    pub fn min(&self) -> Duration {
        self.min
    }

    /// RFC 6298 §2: RTO = SRTT + max(G, 4·RTTVAR), floored at `min_rto`, before backoff.
    pub fn rto(&self, min_rto: Duration) -> Duration {
        (self.smoothed() + GRANULARITY.max(self.var * 4)).max(min_rto)
    }

    /// The probe timeout of RFC 9002 §6.2.1 \[source\]: SRTT + max(4·RTTVAR, granularity)
    /// + `max_ack_delay`, with no floor and no back-off.
    pub fn pto(&self, max_ack_delay: Duration) -> Duration {
        self.smoothed() + GRANULARITY.max(self.var * 4) + max_ack_delay
    }

    /// The loss-detection time threshold: 9/8·max(SRTT, latest), at least 1 ms.
    pub fn loss_delay(&self) -> Duration {
        let base = self.smoothed().max(self.latest);
        let d = (base * TIME_THRESHOLD.0 / TIME_THRESHOLD.1).max(GRANULARITY);
        // Whole microseconds, the resolution of `Instant`, so timer and check agree.
        Duration::from_micros(d.as_micros() as u64)
    }
}

/// One-way delay mean and variance from receive timestamps.
///
/// An EWMA with the same gains as RFC 6298 \[approx\]: mean ← mean + (x − mean)/8,
/// var ← 3/4·var + 1/4·(x − mean)². The delay is `receiver clock − sender clock`, so with
/// unsynchronised clocks the mean carries the clock offset while the variance is exact.
#[derive(Debug, Clone, Default)]
pub struct OwdEstimator {
    mean_us: Option<f64>,
    var_us2: f64,
}

impl OwdEstimator {
    /// Feeds one sample in microseconds (may be negative with skewed clocks).
    pub fn update(&mut self, sample_us: f64) {
        match self.mean_us {
            None => self.mean_us = Some(sample_us),
            Some(m) => {
                let d = sample_us - m;
                self.var_us2 = 0.75 * self.var_us2 + 0.25 * d * d;
                self.mean_us = Some(m + d / 8.0);
            }
        }
    }

    /// The mean, clamped at zero.
    pub fn mean(&self) -> Duration {
        Duration::from_micros(self.mean_us.unwrap_or(0.0).max(0.0) as u64)
    }

    /// The mean, clamped at zero, once a sample exists.
    pub fn sampled_mean(&self) -> Option<Duration> {
        self.mean_us.map(|m| Duration::from_micros(m.max(0.0) as u64))
    }

    /// The variance in µs².
    pub fn var_us2(&self) -> f64 {
        self.var_us2
    }
}

/// The DATA frames of a sent packet as (message id, stream byte range): one or two in a
/// full packet, kept inline.
pub type SentData = smallvec::SmallVec<[(u64, Range<u64>); 2]>;

/// What a sent packet carried that must be re-sent if it is lost.
#[derive(Debug, Clone, Default)]
pub struct SentFrames {
    /// DATA frames as (message id, stream byte range).
    pub data: SentData,
    /// A MAX_DATA frame.
    pub max_data: bool,
    /// An ABANDON frame.
    pub abandon: bool,
    /// PATH_STATUS frames (for these paths).
    pub path_status: Vec<PathId>,
    /// A PATH_JOIN frame.
    pub path_join: bool,
    /// A PATH_RESPONSE frame.
    pub path_response: bool,
    /// PATH_NEW_CONNECTION_ID frames, as (path, sequence number).
    pub new_cids: Vec<(PathId, u64)>,
    /// RETIRE_CONNECTION_ID frames, as (path, sequence number).
    pub retired_cids: Vec<(PathId, u64)>,
    /// A MAX_PATH_ID frame.
    pub max_path_id: bool,
    /// A PATHS_BLOCKED frame.
    pub paths_blocked: bool,
    /// A READ_RATE frame.
    pub read_rate: bool,
    /// A HANDSHAKE_DONE frame.
    pub handshake_done: bool,
    /// A NEW_TOKEN frame.
    pub new_token: bool,
    /// RESET_STREAM frames as (message id, message length).
    pub resets: Vec<(u64, u64)>,
    /// A MAX_STREAMS frame.
    pub max_streams: bool,
    /// The streaming code's source id of the packet's DATA frames.
    pub fec_source: Option<u64>,
    /// A CODED frame covering source ids up to this one.
    pub fec_coded: Option<u64>,
    /// Its DATA was already queued again for the other paths when its path was found
    /// potentially failed: declaring the packet lost later re-sends nothing more.
    pub reinjected: bool,
}

/// A packet waiting for its acknowledgement.
#[derive(Debug, Clone)]
pub struct SentPacket {
    /// When it was sent.
    pub time_sent: Instant,
    /// Datagram size, bytes.
    pub size: usize,
    /// Whether it counts towards bytes in flight (it is ack-eliciting).
    pub in_flight: bool,
    /// What to re-send if lost.
    pub frames: SentFrames,
    /// The path's delivery state when it was sent (delivery-rate estimation).
    pub delivery: DeliveryStamp,
}

/// The result of processing one ACK frame.
#[derive(Debug, Default)]
pub struct AckOutcome {
    /// Newly acknowledged packets, by packet number.
    pub acked: Vec<(u64, SentPacket)>,
    /// RTT sample from the largest acknowledged packet, if it was newly acknowledged.
    pub rtt_sample: Option<Duration>,
    /// Send time of the largest newly acknowledged packet.
    pub largest_sent: Option<(u64, Instant)>,
    /// Packets declared lost before that this ACK acknowledges (spurious losses), with
    /// their send times, ascending.
    pub spurious: Vec<(u64, Instant)>,
}

/// Sent packets of one path and the loss-detection state around them.
///
/// The packets wait in a ring indexed by packet number (a path numbers its packets one by
/// one, and only ack-eliciting packets are tracked, so the ring has a hole for each
/// ACK-only packet): slot `i` holds packet `base + i`. Leading empty slots are dropped as
/// packets leave, so the ring spans the oldest tracked packet to the newest.
///
/// Work per ACK stays proportional to what the ACK changes, not to the window: the packets
/// above the largest acknowledged one are visited once, when an ACK first covers them,
/// and those it leaves unacknowledged are listed in `holes` (every tracked packet below
/// the largest acknowledged one is there, oldest first), which later ACKs and loss
/// detection walk instead of the ring.
#[derive(Debug, Clone, Default)]
pub struct LossState {
    sent: VecDeque<Option<SentPacket>>,
    /// Packet number of `sent[0]`.
    base: u64,
    /// Packets tracked (the `Some` slots).
    tracked: usize,
    /// Tracked packets at or below `largest_acked`, ascending (may name packets that left
    /// since; they are skipped and dropped when walked).
    holes: VecDeque<u64>,
    largest_acked: Option<u64>,
    in_flight: u64,
    ack_eliciting_in_flight: usize,
    /// When an ACK last acknowledged something new (RFC 6298 §5.3 restarts the timer then).
    last_progress: Option<Instant>,
    loss_time: Option<Instant>,
    /// Consecutive RTO expiries without an acknowledgement.
    pub rto_count: u32,
    /// Send time of the packet whose loss last reduced the window (loss-event folding).
    pub recovery_start: Option<Instant>,
    /// How losses are detected.
    mode: LossDetection,
    /// RACK's state (kept in either mode, used in [`LossDetection::Rack`]).
    rack: Rack,
    /// Packets recently declared lost: send time, and whether the RTO declared them (at
    /// most [`RECENT_LOST`]).
    lost: BTreeMap<u64, (Instant, bool)>,
    /// One past the largest packet number sent.
    next_pn: u64,
    /// Packets declared lost and then acknowledged.
    spurious_losses: u64,
}

impl LossState {
    /// An empty state detecting losses with `mode`.
    pub fn new(mode: LossDetection) -> Self {
        LossState { mode, ..LossState::default() }
    }

    /// How losses are detected.
    pub fn mode(&self) -> LossDetection {
        self.mode
    }

    /// RACK's state.
    pub fn rack(&self) -> &Rack {
        &self.rack
    }

    /// Packets declared lost and then acknowledged (spurious losses), in either mode.
    pub fn spurious_losses(&self) -> u64 {
        self.spurious_losses
    }

    /// Bytes in flight.
    pub fn in_flight(&self) -> u64 {
        self.in_flight
    }

    /// Number of tracked packets.
    pub fn tracked(&self) -> usize {
        self.tracked
    }

    /// The largest packet number acknowledged so far.
    pub fn largest_acked(&self) -> Option<u64> {
        self.largest_acked
    }

    /// The ring slot of `pn`, if inside the ring.
    fn slot(&self, pn: u64) -> Option<usize> {
        let i = usize::try_from(pn.checked_sub(self.base)?).ok()?;
        (i < self.sent.len()).then_some(i)
    }

    /// One past the newest slot's packet number.
    fn end(&self) -> u64 {
        self.base + self.sent.len() as u64
    }

    /// Records a sent packet. Packet numbers of one path only grow; a number at or below
    /// one recorded before is ignored.
    pub fn on_sent(&mut self, pn: u64, p: SentPacket) {
        if self.sent.is_empty() {
            self.base = pn;
        } else if pn < self.end() {
            return;
        } else {
            // ACK-only packets in between leave empty slots.
            let gap = usize::try_from(pn - self.end()).unwrap_or(usize::MAX);
            self.sent.extend(std::iter::repeat_n(None, gap));
        }
        if p.in_flight {
            self.in_flight += p.size as u64;
            self.ack_eliciting_in_flight += 1;
        }
        if self.largest_acked.is_some_and(|l| pn <= l) {
            self.holes.push_back(pn);
        }
        self.tracked += 1;
        self.next_pn = self.next_pn.max(pn + 1);
        self.sent.push_back(Some(p));
    }

    /// Remembers packets just declared lost (`by_rto`: by the RTO) for
    /// [`AckOutcome::spurious`].
    fn remember_lost(&mut self, lost: &[(u64, SentPacket)], by_rto: bool) {
        for (pn, p) in lost {
            if self.lost.len() >= RECENT_LOST {
                self.lost.pop_first();
            }
            self.lost.insert(*pn, (p.time_sent, by_rto));
        }
        if !lost.is_empty() {
            self.rack.on_loss(self.next_pn);
        }
    }

    /// The packets declared lost that `ack` acknowledges: spurious losses (RFC 8985 §6.2
    /// step 4's DSACK). A loss the RTO declared is counted, but does not widen RACK's
    /// window (a silence longer than the RTO is no reordering).
    fn take_spurious(&mut self, ack: &AckFrame) -> Vec<(u64, Instant)> {
        let mut out = Vec::new();
        if self.lost.is_empty() {
            return out;
        }
        let mut reordered = false;
        for &(lo, hi) in ack.ranges.iter().rev() {
            if hi < lo {
                continue;
            }
            let pns: Vec<u64> = self.lost.range(lo..=hi).map(|(pn, _)| *pn).collect();
            for pn in pns {
                if let Some((sent, by_rto)) = self.lost.remove(&pn) {
                    reordered |= !by_rto;
                    out.push((pn, sent));
                }
            }
        }
        self.spurious_losses += out.len() as u64;
        if reordered {
            self.rack.on_spurious(self.next_pn);
        }
        out
    }

    fn take(&mut self, pn: u64) -> Option<SentPacket> {
        let i = self.slot(pn)?;
        let p = self.sent.get_mut(i)?.take()?;
        self.tracked -= 1;
        if p.in_flight {
            self.in_flight = self.in_flight.saturating_sub(p.size as u64);
            self.ack_eliciting_in_flight = self.ack_eliciting_in_flight.saturating_sub(1);
        }
        while let Some(None) = self.sent.front() {
            self.sent.pop_front();
            self.base += 1;
        }
        if self.sent.is_empty() {
            self.holes.clear();
        }
        Some(p)
    }

    fn get(&self, pn: u64) -> Option<&SentPacket> {
        self.sent.get(self.slot(pn)?)?.as_ref()
    }

    /// The tracked packets above the largest acknowledged one, up to `largest`: those
    /// `ranges` (inclusive, descending) cover, and those they do not.
    fn scan_above(&self, largest: u64, ranges: &[(u64, u64)]) -> (Vec<u64>, Vec<u64>) {
        let (mut acked, mut holes) = (Vec::new(), Vec::new());
        let from = self.largest_acked.map_or(0, |l| l + 1).max(self.base);
        let to = largest.saturating_add(1).min(self.end());
        let mut ranges = ranges.iter().rev().peekable();
        for pn in from..to {
            if self.get(pn).is_none() {
                continue;
            }
            while ranges.peek().is_some_and(|&&(_, hi)| hi < pn) {
                ranges.next();
            }
            if ranges.peek().is_some_and(|&&(lo, _)| lo <= pn) {
                acked.push(pn);
            } else {
                holes.push(pn);
            }
        }
        (acked, holes)
    }

    /// Removes the packets `ack` acknowledges. `now` is the arrival time.
    pub fn on_ack(&mut self, now: Instant, ack: &AckFrame) -> AckOutcome {
        let mut out = AckOutcome::default();
        let largest = ack.largest();
        // Holes (below the previous largest) this ACK covers: a merge of the ascending
        // holes with the ranges, walked ascending.
        let mut acked_holes = Vec::new();
        if !self.holes.is_empty() {
            let mut ranges = ack.ranges.iter().rev().peekable();
            let (sent, base) = (&self.sent, self.base);
            self.holes.retain(|&pn| {
                let tracked = pn
                    .checked_sub(base)
                    .and_then(|i| usize::try_from(i).ok())
                    .and_then(|i| sent.get(i))
                    .is_some_and(Option::is_some);
                if !tracked {
                    return false;
                }
                while ranges.peek().is_some_and(|&&(_, hi)| hi < pn) {
                    ranges.next();
                }
                if ranges.peek().is_some_and(|&&(lo, _)| lo <= pn) {
                    acked_holes.push(pn);
                    return false;
                }
                true
            });
        }
        let (fresh, new_holes) = if self.largest_acked.is_none_or(|l| largest > l) {
            self.scan_above(largest, &ack.ranges)
        } else {
            (Vec::new(), Vec::new())
        };
        for pn in acked_holes.into_iter().chain(fresh) {
            if let Some(p) = self.take(pn) {
                out.acked.push((pn, p));
            }
        }
        if let Some((pn, p)) = out.acked.last() {
            if *pn == largest && p.in_flight {
                out.rtt_sample = Some(now - p.time_sent);
            }
            out.largest_sent = Some((*pn, p.time_sent));
        }
        out.spurious = self.take_spurious(ack);
        // RFC 8985 §6.2 step 3: a packet acknowledged below the largest acknowledged before
        // was overtaken by one sent after it.
        if let Some(l) = self.largest_acked
            && (out.acked.first().is_some_and(|(pn, _)| *pn < l)
                || out.spurious.first().is_some_and(|(pn, _)| *pn < l))
        {
            self.rack.reordering_seen = true;
        }
        // RFC 8985 §6.2 step 2: the most recently sent packet delivered, a packet declared
        // lost included (its own delivery, as a DSACKed segment's).
        let newest = out.acked.last().map(|(pn, p)| (*pn, p.time_sent));
        let newest = newest.max(out.spurious.last().copied());
        if let Some((pn, sent)) = newest {
            self.rack.on_delivered(now, pn, sent);
        }
        if !out.acked.is_empty() {
            if self.largest_acked.is_none_or(|l| largest > l) {
                self.largest_acked = Some(largest);
                self.holes.extend(new_holes);
            }
            self.last_progress = Some(now);
        }
        if let Some(l) = self.largest_acked {
            self.rack.on_largest_acked(l);
        }
        out
    }

    /// An ACK named `largest`, newer than anything acknowledged before, though none of the
    /// packets it covers is tracked (all were declared lost): the path made progress.
    pub fn on_late_ack(&mut self, now: Instant, largest: u64) {
        if self.largest_acked.is_none_or(|l| largest > l) {
            let (_, holes) = self.scan_above(largest, &[]);
            self.largest_acked = Some(largest);
            self.holes.extend(holes);
            self.last_progress = Some(now);
        }
    }

    /// When the newest packet still counted in flight was sent.
    pub fn newest_in_flight_sent(&self) -> Option<Instant> {
        self.sent.iter().rev().flatten().find(|p| p.in_flight).map(|p| p.time_sent)
    }

    /// Loss detection in the path's [`LossDetection`] mode. Returns the packets declared
    /// lost and arms [`LossState::loss_time`] for the earliest packet not lost yet.
    pub fn detect_lost(&mut self, now: Instant, rtt: &RttEstimator) -> Vec<(u64, SentPacket)> {
        let lost = match self.mode {
            LossDetection::Rack => self.detect_lost_rack(now, rtt),
            LossDetection::Rfc9002 => self.detect_lost_rfc9002(now, rtt),
        };
        self.remember_lost(&lost, false);
        lost
    }

    /// RFC 8985 §6.2 step 5 \[source\]: a packet sent before RACK.segment is lost once
    /// now ≥ its send time + RACK.rtt + reo_wnd; the earliest such deadline of the others
    /// arms the timer (§6.3's reordering timer).
    fn detect_lost_rack(&mut self, now: Instant, rtt: &RttEstimator) -> Vec<(u64, SentPacket)> {
        self.loss_time = None;
        let Some((rack_pn, _)) = self.rack.segment else {
            return Vec::new();
        };
        let wait = self.rack.rtt + self.rack.reo_wnd(rtt);
        let mut lost = Vec::new();
        let mut kept = 0;
        for k in 0..self.holes.len() {
            let Some(&pn) = self.holes.get(k) else { break };
            let Some(p) = self.get(pn) else {
                continue;
            };
            if pn >= rack_pn {
                // Not sent before RACK.segment (a late ACK moved the largest beyond it).
                self.holes[kept] = pn;
                kept += 1;
                continue;
            }
            let deadline = p.time_sent + wait;
            if now >= deadline {
                lost.push(pn);
            } else {
                self.loss_time = Some(self.loss_time.map_or(deadline, |l| l.min(deadline)));
                self.holes[kept] = pn;
                kept += 1;
            }
        }
        self.holes.truncate(kept);
        lost.into_iter().filter_map(|pn| self.take(pn).map(|p| (pn, p))).collect()
    }

    /// RFC 9002 §6.1 loss detection.
    fn detect_lost_rfc9002(&mut self, now: Instant, rtt: &RttEstimator) -> Vec<(u64, SentPacket)> {
        self.loss_time = None;
        let Some(largest) = self.largest_acked else {
            return Vec::new();
        };
        let delay = rtt.loss_delay();
        let mut lost = Vec::new();
        let mut kept = 0;
        for k in 0..self.holes.len() {
            let Some(&pn) = self.holes.get(k) else { break };
            let Some(p) = self.get(pn) else {
                continue;
            };
            if pn >= largest {
                // The largest itself, tracked after a late ACK: not below it.
                self.holes[kept] = pn;
                kept += 1;
                continue;
            }
            if now.saturating_duration_since(p.time_sent) >= delay
                || largest >= pn + PACKET_THRESHOLD
            {
                lost.push(pn);
            } else {
                let t = p.time_sent + delay;
                self.loss_time = Some(self.loss_time.map_or(t, |l| l.min(t)));
                self.holes[kept] = pn;
                kept += 1;
            }
        }
        self.holes.truncate(kept);
        lost.into_iter().filter_map(|pn| self.take(pn).map(|p| (pn, p))).collect()
    }

    /// When the time-threshold loss timer fires.
    pub fn loss_time(&self) -> Option<Instant> {
        self.loss_time
    }

    /// When the oldest packet still counted in flight was sent.
    pub fn oldest_in_flight_sent(&self) -> Option<Instant> {
        self.sent.iter().flatten().find(|p| p.in_flight).map(|p| p.time_sent)
    }

    /// How long the oldest packet in flight has waited for its acknowledgement at `now`,
    /// counted from the later of its sending and the last acknowledgement of anything new
    /// (zero when nothing is in flight).
    pub fn unacked_for(&self, now: Instant) -> Duration {
        self.timer_anchor().map_or(Duration::ZERO, |t| now.saturating_duration_since(t))
    }

    /// The instant the retransmission timer runs from: as RFC 6298 §5.1/§5.3 \[source\],
    /// it starts when a packet is sent while none is in flight and restarts when an ACK
    /// acknowledges new data — it is not pushed back by every new packet, so a path that
    /// keeps sending but hears nothing times out.
    pub fn timer_anchor(&self) -> Option<Instant> {
        let oldest = self.oldest_in_flight_sent()?;
        Some(self.last_progress.map_or(oldest, |p| p.max(oldest)))
    }

    /// When an ACK last acknowledged something new.
    pub fn last_progress(&self) -> Option<Instant> {
        self.last_progress
    }

    /// Whether an ack-eliciting packet is in flight.
    pub fn ack_eliciting_in_flight(&self) -> bool {
        self.ack_eliciting_in_flight > 0
    }

    /// Every packet still in flight, oldest first, with its packet number.
    pub fn in_flight_packets(&self) -> impl Iterator<Item = (u64, &SentPacket)> {
        let base = self.base;
        self.sent
            .iter()
            .enumerate()
            .filter_map(move |(i, p)| p.as_ref().map(|p| (base + i as u64, p)))
            .filter(|(_, p)| p.in_flight)
    }

    /// The stream data of every packet still in flight not handed over before, for
    /// re-injection on other paths. The packets stay tracked here, marked
    /// [`SentFrames::reinjected`].
    pub fn take_for_reinjection(&mut self) -> Vec<(u64, std::ops::Range<u64>)> {
        let mut data = Vec::new();
        for p in self.sent.iter_mut().flatten().filter(|p| p.in_flight && !p.frames.reinjected) {
            p.frames.reinjected = true;
            data.extend(p.frames.data.iter().cloned());
        }
        data
    }

    /// When the retransmission timer fires, given the current (un-backed-off) RTO.
    pub fn rto_deadline(&self, rto: Duration, max_rto: Duration) -> Option<Instant> {
        if self.ack_eliciting_in_flight == 0 {
            return None;
        }
        let backoff = rto.saturating_mul(1u32 << self.rto_count.min(16)).min(max_rto);
        self.timer_anchor().map(|t| t + backoff)
    }

    /// The RTO fired: every tracked packet is lost.
    pub fn on_rto(&mut self) -> Vec<(u64, SentPacket)> {
        self.rto_count = self.rto_count.saturating_add(1);
        self.loss_time = None;
        let lost = self.drain();
        self.remember_lost(&lost, true);
        lost
    }

    /// The path is gone: returns every tracked packet.
    pub fn drain(&mut self) -> Vec<(u64, SentPacket)> {
        let base = self.base;
        let out: Vec<(u64, SentPacket)> = self
            .sent
            .drain(..)
            .enumerate()
            .filter_map(|(i, p)| p.map(|p| (base + i as u64, p)))
            .collect();
        self.holes.clear();
        self.tracked = 0;
        self.in_flight = 0;
        self.ack_eliciting_in_flight = 0;
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    fn pkt(t: u64) -> SentPacket {
        SentPacket {
            time_sent: Instant::from_micros(t * 1000),
            size: 1000,
            in_flight: true,
            frames: SentFrames::default(),
            delivery: crate::cc::DeliveryRate::new(Instant::ZERO).on_sent(Instant::ZERO, 0),
        }
    }

    fn ack(path: u32, ranges: &[(u64, u64)]) -> AckFrame {
        AckFrame {
            path: PathId(path),
            ranges: ranges.iter().copied().collect(),
            delay_us: 0,
            timestamps: Default::default(),
        }
    }

    #[test]
    fn rfc6298_first_and_second_sample() {
        let mut r = RttEstimator::new(ms(333));
        assert_eq!(r.smoothed(), ms(333));
        r.update(ms(100), Duration::ZERO);
        assert_eq!(r.smoothed(), ms(100));
        assert_eq!(r.var(), ms(50));
        assert_eq!(r.rto(ms(200)), ms(300));
        r.update(ms(200), Duration::ZERO);
        // var = 3/4·50 + 1/4·100 = 62.5; srtt = 7/8·100 + 1/8·200 = 112.5
        assert_eq!(r.var(), Duration::from_micros(62_500));
        assert_eq!(r.smoothed(), Duration::from_micros(112_500));
    }

    #[test]
    fn rto_has_a_floor() {
        let mut r = RttEstimator::new(ms(333));
        r.update(ms(10), Duration::ZERO);
        assert_eq!(r.rto(ms(200)), ms(200));
    }

    #[test]
    fn packet_threshold_declares_loss() {
        let mut l = LossState::new(LossDetection::Rfc9002);
        for pn in 0..5 {
            l.on_sent(pn, pkt(pn));
        }
        let now = Instant::from_micros(10_000);
        let out = l.on_ack(now, &ack(0, &[(3, 4)]));
        assert_eq!(out.acked.len(), 2);
        let rtt = RttEstimator::new(ms(100));
        let lost: Vec<u64> = l.detect_lost(now, &rtt).into_iter().map(|(pn, _)| pn).collect();
        // 4 − 3 ≥ 0 + 3 → packet 0 and 1 lost; 2 waits for the time threshold.
        assert_eq!(lost, vec![0, 1]);
        assert!(l.loss_time().is_some());
        assert_eq!(l.in_flight(), 1000);
    }

    #[test]
    fn time_threshold_declares_loss() {
        let mut l = LossState::new(LossDetection::Rfc9002);
        l.on_sent(0, pkt(0));
        l.on_sent(1, pkt(1));
        let rtt = RttEstimator::new(ms(100));
        let _ = l.on_ack(Instant::from_micros(100_000), &ack(0, &[(1, 1)]));
        assert!(l.detect_lost(Instant::from_micros(100_000), &rtt).is_empty());
        let t = l.loss_time().unwrap_or(Instant::ZERO);
        assert_eq!(t, Instant::from_micros(112_500));
        assert_eq!(l.detect_lost(t, &rtt).len(), 1);
    }

    /// An estimator with one 100-ms sample: min_RTT = SRTT = 100 ms, so RACK's initial
    /// window is 25 ms.
    fn rtt_100ms() -> RttEstimator {
        let mut r = RttEstimator::new(ms(100));
        r.update(ms(100), Duration::ZERO);
        r
    }

    fn pns<T>(v: &[(u64, T)]) -> Vec<u64> {
        v.iter().map(|(pn, _)| *pn).collect()
    }

    /// Packet 0 is overtaken by the nine packets sent after it and arrives 15 ms after them:
    /// within RACK.rtt + reo_wnd = 125 ms of its sending, so RACK waits (its timer set for
    /// that moment) and the late ACK finds it still in flight. RFC 9002's packet threshold
    /// declares it lost at once (9 ≥ 0 + 3).
    #[test]
    fn rack_does_not_declare_loss_for_reordering_within_the_window() {
        let rtt = rtt_100ms();
        let mut lost_by_mode = Vec::new();
        for mode in [LossDetection::Rack, LossDetection::Rfc9002] {
            let mut l = LossState::new(mode);
            for pn in 0..10 {
                l.on_sent(pn, pkt(pn));
            }
            let t = Instant::from_micros(109_000);
            let out = l.on_ack(t, &ack(0, &[(1, 9)]));
            assert_eq!(out.acked.len(), 9);
            let mut lost = pns(&l.detect_lost(t, &rtt));
            if mode == LossDetection::Rack {
                assert_eq!(l.rack().rtt(), ms(100));
                assert_eq!(l.loss_time(), Some(Instant::from_micros(125_000)));
            }
            let t = Instant::from_micros(115_000);
            let out = l.on_ack(t, &ack(0, &[(0, 9)]));
            lost.extend(pns(&l.detect_lost(t, &rtt)));
            if mode == LossDetection::Rack {
                assert_eq!(pns(&out.acked), vec![0]);
                assert!(out.spurious.is_empty());
                assert!(l.rack().reordering_seen());
            } else {
                assert_eq!(pns(&out.spurious), vec![0]);
            }
            lost_by_mode.push((mode, lost, l.spurious_losses()));
        }
        assert_eq!(
            lost_by_mode,
            vec![(LossDetection::Rack, vec![], 0), (LossDetection::Rfc9002, vec![0], 1)]
        );
    }

    /// A loss that proves spurious (the packet's ACK comes after all) raises
    /// reo_wnd_mult to 2 (the window to 50 ms), once per round trip; 16 recoveries without
    /// one bring it back to 1 (RFC 8985 §6.2 step 4).
    #[test]
    fn rack_window_grows_on_a_spurious_loss_and_resets_after_16_recoveries() {
        let rtt = rtt_100ms();
        let mut l = LossState::new(LossDetection::Rack);
        for pn in 0..5 {
            l.on_sent(pn, pkt(pn));
        }
        let _ = l.on_ack(Instant::from_micros(104_000), &ack(0, &[(1, 4)]));
        let t = Instant::from_micros(130_000);
        assert_eq!(pns(&l.detect_lost(t, &rtt)), vec![0]);
        assert_eq!(l.rack().reo_wnd(&rtt), ms(25));
        // Packet 0 was only late.
        let out = l.on_ack(Instant::from_micros(131_000), &ack(0, &[(0, 4)]));
        assert_eq!(pns(&out.spurious), vec![0]);
        assert_eq!(l.spurious_losses(), 1);
        assert_eq!(l.rack().reo_wnd_mult(), 2);
        assert_eq!(l.rack().reo_wnd(&rtt), ms(50));
        // 16 recoveries, each a real loss: packet n lost, n + 1 acknowledged, then a
        // packet sent after the loss acknowledged (the recovery ends).
        let mut pn = 5;
        let mut t_ms = 200;
        for round in 0..REO_WND_PERSIST {
            assert_eq!(l.rack().reo_wnd_mult(), 2, "round {round}");
            l.on_sent(pn, pkt(t_ms));
            l.on_sent(pn + 1, pkt(t_ms));
            let _ =
                l.on_ack(Instant::from_micros((t_ms + 100) * 1000), &ack(0, &[(pn + 1, pn + 1)]));
            let lost = l.detect_lost(Instant::from_micros((t_ms + 200) * 1000), &rtt);
            assert_eq!(pns(&lost), vec![pn]);
            l.on_sent(pn + 2, pkt(t_ms + 200));
            let _ =
                l.on_ack(Instant::from_micros((t_ms + 300) * 1000), &ack(0, &[(pn + 1, pn + 2)]));
            assert!(l.detect_lost(Instant::from_micros((t_ms + 300) * 1000), &rtt).is_empty());
            pn += 3;
            t_ms += 400;
        }
        assert_eq!(l.rack().reo_wnd_mult(), 1);
        assert_eq!(l.rack().reo_wnd(&rtt), ms(25));
        assert_eq!(l.spurious_losses(), 1);
    }

    /// A packet that never arrives is declared lost RACK.rtt + reo_wnd after it was sent:
    /// the timer is armed for that moment, so detection does not wait for another ACK.
    #[test]
    fn rack_declares_a_real_loss_after_rtt_plus_window() {
        let rtt = rtt_100ms();
        let mut l = LossState::new(LossDetection::Rack);
        l.on_sent(0, pkt(0));
        l.on_sent(1, pkt(1));
        let t = Instant::from_micros(101_000);
        let _ = l.on_ack(t, &ack(0, &[(1, 1)]));
        assert!(l.detect_lost(t, &rtt).is_empty());
        let at = l.loss_time();
        assert_eq!(at, Some(Instant::from_micros(125_000)));
        let before = Instant::from_micros(124_999);
        assert!(l.detect_lost(before, &rtt).is_empty());
        let at = l.loss_time().unwrap_or(Instant::ZERO);
        assert_eq!(pns(&l.detect_lost(at, &rtt)), vec![0]);
        assert_eq!(l.loss_time(), None);
        assert_eq!(l.in_flight(), 0);
    }

    /// A packet the RTO declared lost and that is acknowledged later counts as a spurious
    /// loss but leaves the reordering window alone.
    #[test]
    fn a_spurious_rto_is_counted_without_growing_the_window() {
        let mut l = LossState::new(LossDetection::Rack);
        l.on_sent(0, pkt(0));
        assert_eq!(pns(&l.on_rto()), vec![0]);
        let out = l.on_ack(Instant::from_micros(300_000), &ack(0, &[(0, 0)]));
        assert_eq!(pns(&out.spurious), vec![0]);
        assert_eq!(l.spurious_losses(), 1);
        assert_eq!(l.rack().reo_wnd_mult(), 1);
    }

    #[test]
    fn rto_backs_off_and_declares_everything_lost() {
        let mut l = LossState::default();
        l.on_sent(0, pkt(0));
        assert_eq!(l.rto_deadline(ms(200), ms(60_000)), Some(Instant::from_micros(200_000)));
        assert_eq!(l.on_rto().len(), 1);
        assert_eq!(l.rto_deadline(ms(200), ms(60_000)), None);
        l.on_sent(1, pkt(300));
        assert_eq!(l.rto_deadline(ms(200), ms(60_000)), Some(Instant::from_micros(700_000)));
    }

    #[test]
    fn owd_tracks_mean_and_variance() {
        let mut o = OwdEstimator::default();
        for _ in 0..100 {
            o.update(10_000.0);
        }
        assert_eq!(o.mean(), ms(10));
        assert!(o.var_us2() < 1.0);
        o.update(20_000.0);
        assert!(o.var_us2() > 1.0e6);
    }

    /// The ring's answers match a plain ordered map of the sent packets, the structure
    /// RFC 9002's pseudo-code keeps (sent_packets), for any interleaving of sends, ACKs
    /// (reordered, repeated, with holes), loss detection, late ACKs and RTOs.
    mod model {
        use super::*;
        use proptest::prelude::*;
        use std::collections::BTreeMap;

        #[derive(Default)]
        struct Model {
            sent: BTreeMap<u64, u64>,
            largest: Option<u64>,
        }

        impl Model {
            fn on_ack(&mut self, ranges: &[(u64, u64)]) -> Vec<u64> {
                let acked: Vec<u64> = self
                    .sent
                    .keys()
                    .copied()
                    .filter(|pn| ranges.iter().any(|&(lo, hi)| lo <= *pn && *pn <= hi))
                    .collect();
                for pn in &acked {
                    self.sent.remove(pn);
                }
                if !acked.is_empty() {
                    let l = ranges[0].1;
                    self.largest = Some(self.largest.map_or(l, |x| x.max(l)));
                }
                acked
            }

            fn detect_lost(&mut self, now_ms: u64, delay_ms: u64) -> (Vec<u64>, Option<u64>) {
                let Some(largest) = self.largest else { return (Vec::new(), None) };
                let mut lost = Vec::new();
                let mut at = None;
                for (&pn, &t) in self.sent.range(..largest) {
                    if now_ms.saturating_sub(t) >= delay_ms || largest >= pn + PACKET_THRESHOLD {
                        lost.push(pn);
                    } else {
                        at = Some(at.map_or(t + delay_ms, |a: u64| a.min(t + delay_ms)));
                    }
                }
                for pn in &lost {
                    self.sent.remove(pn);
                }
                (lost, at)
            }
        }

        #[derive(Debug, Clone)]
        enum Op {
            Send { skip: u64 },
            Ack { back: u64, ranges: Vec<(u64, u64)> },
            Late { back: u64 },
            Detect,
            Rto,
        }

        fn op() -> impl Strategy<Value = Op> {
            prop_oneof![
                4 => (0u64..3).prop_map(|skip| Op::Send { skip }),
                3 => (0u64..12, proptest::collection::vec((0u64..4, 0u64..4), 1..5))
                    .prop_map(|(back, ranges)| Op::Ack { back, ranges }),
                1 => (0u64..6).prop_map(|back| Op::Late { back }),
                1 => Just(Op::Detect),
                1 => Just(Op::Rto),
            ]
        }

        proptest! {
            #[test]
            fn the_ring_matches_an_ordered_map(ops in proptest::collection::vec(op(), 1..120)) {
                let mut l = LossState::new(LossDetection::Rfc9002);
                let mut m = Model::default();
                let mut next = 0u64;
                let mut now = 0u64;
                let rtt = RttEstimator::new(ms(8));
                let delay = rtt.loss_delay();
                let delay_ms = delay.as_millis() as u64;
                for op in ops {
                    now += 1;
                    let at = Instant::from_micros(now * 1000);
                    match op {
                        Op::Send { skip } => {
                            next += skip;
                            l.on_sent(next, pkt(now));
                            m.sent.insert(next, now);
                            next += 1;
                        }
                        Op::Ack { back, ranges } => {
                            let Some(top) = next.checked_sub(1 + back.min(next.saturating_sub(1))) else { continue };
                            // Descending, disjoint, non-adjacent ranges from `top` down.
                            let mut rs = Vec::new();
                            let mut hi = top;
                            for (gap, len) in ranges {
                                let lo = hi.saturating_sub(len);
                                rs.push((lo, hi));
                                match lo.checked_sub(gap + 2) {
                                    Some(h) => hi = h,
                                    None => break,
                                }
                            }
                            let ack = AckFrame { path: PathId(0), ranges: rs.iter().copied().collect(), delay_us: 0, timestamps: Default::default() };
                            let got: Vec<u64> = l.on_ack(at, &ack).acked.iter().map(|(pn, _)| *pn).collect();
                            prop_assert_eq!(got, m.on_ack(&rs));
                        }
                        Op::Late { back } => {
                            let Some(top) = next.checked_sub(1 + back.min(next.saturating_sub(1))) else { continue };
                            if m.largest.is_none_or(|x| top > x) {
                                m.largest = Some(top);
                            }
                            l.on_late_ack(at, top);
                        }
                        Op::Detect => {
                            let (lost, t) = m.detect_lost(now, delay_ms);
                            let got: Vec<u64> = l.detect_lost(at, &rtt).iter().map(|(pn, _)| *pn).collect();
                            prop_assert_eq!(got, lost);
                            prop_assert_eq!(l.loss_time(), t.map(|t| Instant::from_micros(t * 1000)));
                        }
                        Op::Rto => {
                            let got: Vec<u64> = l.on_rto().iter().map(|(pn, _)| *pn).collect();
                            let want: Vec<u64> = m.sent.keys().copied().collect();
                            m.sent.clear();
                            prop_assert_eq!(got, want);
                        }
                    }
                    prop_assert_eq!(l.largest_acked(), m.largest);
                    prop_assert_eq!(l.tracked(), m.sent.len());
                    prop_assert_eq!(l.in_flight(), 1000 * m.sent.len() as u64);
                    let pns: Vec<u64> = l.in_flight_packets().map(|(pn, _)| pn).collect();
                    prop_assert_eq!(pns, m.sent.keys().copied().collect::<Vec<_>>());
                }
            }
        }
    }
}
