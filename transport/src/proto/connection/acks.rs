//! ACKs this side sends. Received packet numbers are recorded per path; an ACK becomes
//! due after [`Config::ack_eliciting_threshold`] ack-eliciting packets, after
//! [`Config::max_ack_delay`], or at once (handshake and validation frames, duplicates,
//! a reported transmit failure). Each path's ACK frame carries its newest ranges, the ACK
//! delay and the receive time of the largest packet; [`Config::ack_path`] routes it to a
//! path. Due ACKs get a packet of their own; pending ones ride on any packet routed to
//! their path.

use super::Connection;
use super::config::Config;
use super::packetize::{Builder, Transmit};
use super::paths::Path;
use crate::path::PathId;
use crate::proto::frame::{AckFrame, AckRanges, Frame};
use crate::sched::PathView;
use crate::time::Instant;

/// Path ids gathered while the paths are borrowed (no allocation for a few paths).
type PathIds = smallvec::SmallVec<[PathId; 8]>;

/// Most packet-number ranges a path remembers (and reports in one ACK frame).
pub(super) const MAX_ACK_RANGES: usize = 32;

/// Most arrivals a path remembers for the receive timestamps of its next ACK.
pub(super) const MAX_RECENT: usize = 64;

/// How far beyond the largest packet number received on a path a new one may be. A
/// number further ahead is dropped and counted ([`super::DropCounters::packet_number`]):
/// an honest sender numbers its packets one by one, so such a jump is an attack (a number
/// near 2^62 would otherwise poison the ACK ranges and the TFRC loss history). 2^20
/// packets is more than a whole window of losses at any rate the transport reaches.
pub(super) const PN_WINDOW: u64 = 1 << 20;

/// Frames whose packet is acknowledged at once (they move a path validation along).
pub(super) fn acks_at_once(frame: &Frame) -> bool {
    matches!(frame, Frame::PathJoin { .. } | Frame::PathResponse { .. })
}

impl Path {
    /// Ack-eliciting packets arrived that no sent ACK covers yet.
    pub(super) fn ack_pending(&self) -> bool {
        self.unacked_eliciting > 0
    }

    /// The pending ACK should go out now.
    pub(super) fn ack_due(&self, now: Instant) -> bool {
        self.ack_pending() && (self.ack_immediate || self.ack_deadline.is_some_and(|d| d <= now))
    }

    /// Packet `pn` was received before (or is older than what the path remembers).
    pub(super) fn is_duplicate(&self, pn: u64) -> bool {
        pn < self.recv_floor || self.received.contains(pn)
    }

    /// Packet `pn` is too far ahead of the largest received on this path ([`PN_WINDOW`];
    /// the first packet of a path counts from 0).
    pub(super) fn outside_pn_window(&self, pn: u64) -> bool {
        let base = self.largest_received.map_or(0, |(l, _)| l);
        pn > base.saturating_add(PN_WINDOW)
    }

    /// Records a new packet number, keeping at most [`MAX_ACK_RANGES`] ranges.
    pub(super) fn record_received(&mut self, pn: u64, now: Instant) {
        self.received.insert(pn..pn + 1);
        while self.received.len() > MAX_ACK_RANGES {
            if let Some(r) = self.received.pop_first() {
                self.recv_floor = r.end;
            }
        }
        if self.largest_received.is_none_or(|(l, _)| pn > l) {
            self.largest_received = Some((pn, now));
        }
        if self.recent_rx.len() >= MAX_RECENT {
            self.recent_rx.remove(0);
        }
        self.recent_rx.push((pn, now));
    }

    /// Makes an ACK due at once.
    pub(super) fn ack_now(&mut self) {
        self.unacked_eliciting = self.unacked_eliciting.max(1);
        self.ack_immediate = true;
    }

    /// An ack-eliciting packet was processed: the ACK is due at once (`immediate`, or the
    /// threshold reached) or within the ACK delay.
    pub(super) fn on_eliciting_received(&mut self, now: Instant, immediate: bool, config: &Config) {
        self.unacked_eliciting += 1;
        if immediate || self.unacked_eliciting >= config.ack_eliciting_threshold {
            self.ack_immediate = true;
        } else if self.ack_deadline.is_none() {
            self.ack_deadline = Some(now + config.max_ack_delay);
        }
    }

    /// The ACK-delay timer: once passed, the pending ACK is due.
    pub(super) fn on_ack_timer(&mut self, now: Instant) {
        if self.ack_deadline.is_some_and(|d| d <= now) {
            self.ack_deadline = None;
            self.ack_immediate = true;
        }
    }

    /// The pending ACK went out in a packet on path `on`.
    pub(super) fn ack_sent(&mut self, on: PathId) {
        self.ack_carried_on = Some(on);
        self.recent_rx.clear();
        self.unacked_eliciting = 0;
        self.ack_deadline = None;
        self.ack_immediate = false;
    }

    /// The path's ACK frame: its newest ranges, the delay since the largest arrived, that
    /// arrival time and, up to `stamps` timestamps in all, the arrival times of the other
    /// packets received since the last ACK (newest first).
    pub(super) fn ack_frame(&self, now: Instant, stamps: usize) -> Option<AckFrame> {
        let (largest, at) = self.largest_received?;
        let ranges: AckRanges =
            self.received.iter_rev().take(MAX_ACK_RANGES).map(|r| (r.start, r.end - 1)).collect();
        if ranges.first().map(|r| r.1) != Some(largest) {
            return None;
        }
        Some(AckFrame {
            path: self.id,
            ranges,
            delay_us: (now - at).as_micros() as u64,
            timestamps: std::iter::once((largest, at.as_micros()))
                .chain(
                    self.recent_rx
                        .iter()
                        .rev()
                        .filter(|&&(pn, _)| pn != largest)
                        .map(|&(pn, t)| (pn, t.as_micros())),
                )
                .take(stamps)
                .collect(),
        })
    }
}

impl Connection {
    /// The link reported that a datagram this side sent on `path` was not delivered (a
    /// transmit failure, as 802.11's dot11FailedCount or nl80211's tx_failed report it).
    /// What a receiver sends is mostly ACKs, so every path whose latest ACK went out on
    /// `path` gets an immediate ACK queued (weSACK's ACK repeat: the lost datagram most
    /// likely carried it); the repeat's route follows [`Config::ack_path`], so under
    /// weSACK it goes on the cheapest usable radio again. ACKs carried on other paths are
    /// left alone.
    pub fn on_transmit_failure(&mut self, now: Instant, path: PathId) {
        self.now = self.now.max(now);
        for p in self.paths.values_mut() {
            if !p.removed && p.largest_received.is_some() && p.ack_carried_on == Some(path) {
                p.ack_now();
            }
        }
    }

    /// The path that carries the ACK of packets received on `id` ([`Config::ack_path`]);
    /// `None` for a closed path.
    ///
    /// When the policy has no path (every path failed), the ACK goes back on the path the
    /// packets came on, if this side may send there: packets just arrived on it, so it is
    /// the likeliest to work, and a probe's ACK that waited for this side's own next probe
    /// (up to [`Config::failed_probe_interval`] later) would reach the peer after the
    /// peer's probe timer had already declared the probe lost — both sides would keep the
    /// returned paths failed forever.
    ///
    /// A policy's route other than the path itself is not taken while that route has
    /// received nothing for longer than its probe timeout (or half the RTO floor) although the path being
    /// acknowledged received since (the route is likely cut, and the peer, hearing no ACKs
    /// for a live path, would time it out too): the ACK goes back on its own path then.
    fn ack_route(&self, id: PathId, views: &[PathView]) -> Option<PathId> {
        let p = self.paths.get(&id)?;
        if p.removed {
            // A closed path's late packets are acknowledged on a path still open: the
            // policy's choice if it gives one, else the first usable (RFC 10069 lets a
            // PATH_ACK travel on any path).
            if !p.lingering(self.now) {
                return None;
            }
            return match self.config.ack_path.ack_path(id, views) {
                Some(r) if r != id => Some(r),
                _ => views.iter().find(|v| v.usable).or(views.first()).map(|v| v.id),
            };
        }
        match self.config.ack_path.ack_path(id, views) {
            Some(r) if r != id && p.sendable() && self.receive_silent(r, id) => Some(id),
            Some(r) => Some(r),
            None => p.sendable().then_some(id),
        }
    }

    /// Path `route` received its newest packet longer than its probe timeout ago (at most
    /// half the RTO floor: this side's estimate of a path it seldom sends on may be the
    /// initial RTT, and the peer's RTO, never below the floor, must not fire first), and
    /// path `id` received something after it.
    fn receive_silent(&self, route: PathId, id: PathId) -> bool {
        let (Some(r), Some(p)) = (self.paths.get(&route), self.paths.get(&id)) else {
            return false;
        };
        let (Some((_, heard)), Some((_, recent))) = (r.largest_received, p.largest_received) else {
            return false;
        };
        let limit = r.rtt.pto(self.config.max_ack_delay).min(self.config.min_rto / 2);
        recent > heard && self.now.saturating_duration_since(heard) > limit
    }

    /// Adds ACK frames for every path whose ACKs the policy routes to `b.path`
    /// (`only_due`: just the ones that are due).
    pub(super) fn add_acks(
        &mut self,
        now: Instant,
        b: &mut Builder,
        buf: &mut Vec<u8>,
        only_due: bool,
        views: &[PathView],
    ) {
        self.add_fec_ack(b, buf);
        let ids: PathIds = self.paths.keys().copied().collect();
        for id in ids {
            let Some(p) = self.paths.get(&id) else {
                continue;
            };
            if !p.ack_pending() || (only_due && !p.ack_due(now)) {
                continue;
            }
            let route = self.ack_route(id, views);
            if route != Some(b.path) && id != b.path {
                continue;
            }
            // Receive timestamps are Braid's extension (PATH_ACK_TIMESTAMPS).
            // (At least the largest's, which the one-way delay estimate needs.)
            let stamps = if self.braid_frames { self.config.ack_timestamps.max(1) } else { 0 };
            let Some(f) = p.ack_frame(now, stamps) else {
                continue;
            };
            if b.push(buf, &Frame::Ack(f))
                && let Some(p) = self.paths.get_mut(&id)
            {
                p.ack_sent(b.path);
            }
        }
    }

    /// A packet for due ACKs, on the path the policy routes the first of them to, with
    /// every other due ACK for that path and whatever control frames fit.
    pub(super) fn poll_due_acks(
        &mut self,
        now: Instant,
        buf: &mut Vec<u8>,
        views: &[PathView],
    ) -> Option<Transmit> {
        let due: PathIds = self.paths.values().filter(|p| p.ack_due(now)).map(|p| p.id).collect();
        for id in due {
            let route = self.ack_route(id, views);
            let Some(route) = route.filter(|r| self.paths.get(r).is_some_and(Path::sendable))
            else {
                continue;
            };
            let mut b = self.start(route, buf)?;
            self.add_acks(now, &mut b, buf, true, views);
            // Small control frames ride along; all but PLAYOUT make the packet ack-eliciting.
            self.add_control(&mut b, buf);
            if b.is_empty(buf) {
                self.unstart(&b);
                buf.clear();
                continue;
            }
            return self.finish(now, b, buf, true);
        }
        None
    }
}
