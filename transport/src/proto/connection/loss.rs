//! What the peer's ACKs and the loss timers tell the sender: RTT and one-way-delay
//! samples, newly acknowledged packets (to the controller and the send stream), packets
//! declared lost (RACK, RFC 8985, or RFC 9002's thresholds, per [`super::Config::loss_detection`];
//! their frames are re-queued and the controller sees one congestion event per loss event),
//! spurious losses (a packet declared lost and then acknowledged), the RTO with its probe,
//! and a path's failure after repeated RTOs and its recovery at the next ACK.

use std::time::Duration;

use super::Connection;
use super::Side;
use super::events::Event;
use super::packetize::Transmit;
use super::paths::Path;
use crate::cc::RttSample;
use crate::path::{PathId, PathStatus};
use crate::proto::frame::{AckFrame, Frame};
use crate::proto::recovery::{RttEstimator, SentPacket};
use crate::sched::PathView;
use crate::time::Instant;
use crate::trace::PathEvent;

/// A path failure being handed over to the other paths: from the failing path's last
/// sign of life to the acknowledgement, on another path, of the first data sent after the
/// failure was detected (lost data is re-sent before new data, so that is re-injected data).
#[derive(Clone, Copy, Debug)]
pub(super) struct Failover {
    /// The path found potentially failed.
    pub(super) path: PathId,
    /// Its last acknowledgement of anything new (or its oldest unacknowledged packet).
    pub(super) silent_since: Instant,
    /// When its retransmission timer fired.
    pub(super) detected: Instant,
}

/// The RTT state the controller sees with an ACK.
fn rtt_sample(p: &Path) -> RttSample {
    RttSample { latest: p.rtt.latest(), smoothed: p.rtt.smoothed(), min: p.rtt.min() }
}

impl Connection {
    /// An ACK frame arrived on path `via` for packets this side sent on `ack.path`.
    pub(super) fn on_ack(&mut self, now: Instant, ack: AckFrame, via: PathId) {
        // The server acknowledges 1-RTT packets: it has the client's Finished.
        self.confirm_at_client();
        let pid = ack.path;
        let max_ack_delay = self.config.max_ack_delay;
        // The ACK Delay field counts 2^exponent µs of the peer (RFC 9000 §19.3).
        let units = 1u64 << self.peer_ack_delay_exponent;
        let Some(p) = self.paths.get_mut(&pid) else {
            return;
        };
        // RFC 9000 §13.1 and §21.4: an ACK of a packet never sent (beyond the last one, or a
        // skipped number) is a PROTOCOL_VIOLATION; a peer acknowledging what it did not
        // receive would make the controller send faster than the path carries.
        if ack.largest() >= p.next_pn || p.skipped.iter().any(|&s| ack.contains(s)) {
            self.close_on_error(
                crate::proto::PROTOCOL_VIOLATION,
                "an ACK of a packet number that was never sent",
            );
            return;
        }
        // Whether this ACK shows the path working now: it came back on the path itself,
        // or it names a packet sent after the failure was detected. An ACK carried by
        // another path of packets sent before (delivered just before a cut, their ACKs
        // re-routed once the cut path went silent) proves nothing about the path now.
        let down = p.failed || p.potentially_failed;
        let answers = !down || via == pid || ack.largest() >= p.answer_floor;
        if let Some(size) = p.mtud.on_ack(|pn| ack.contains(pn)) {
            self.controller.on_datagram_size(pid, size);
        }
        self.tls.on_one_rtt_acked(pid, ack.largest());
        let Some(p) = self.paths.get_mut(&pid) else {
            return;
        };
        let outcome = p.loss.on_ack(now, &ack);
        self.stats_spurious += outcome.spurious.len() as u64;
        if outcome.acked.is_empty() {
            // A failing path's probes are declared lost at each backed-off RTO; an ACK
            // that names a packet newer than any acknowledged before still proves the
            // path carries packets again (a spurious RTO), though nothing it covers is
            // tracked any more: the path answers, without an RTT sample.
            let late = down && answers && p.loss.largest_acked().is_none_or(|l| ack.largest() > l);
            if !late {
                if !outcome.spurious.is_empty() {
                    // Packets declared lost were delivered after all: RACK.segment may have
                    // moved on (RFC 8985 §6.2 step 2), so detection runs again.
                    let lost = p.loss.detect_lost(now, &p.rtt);
                    self.on_lost(pid, lost, Some(false));
                }
                return;
            }
            p.loss.on_late_ack(now, ack.largest());
        }
        let timed_out = p.loss.rto_count > 0;
        if answers {
            p.loss.rto_count = 0;
        }
        let answered = p.potentially_failed && answers;
        if answered {
            p.potentially_failed = false;
            if timed_out {
                // It answers after its RTO: a fresh RTT estimate from this sample on (the
                // old one predates the silence). Its window restarted at the RTO, which the
                // controller saw as a persistent congestion event (slow start from the
                // minimum window). Found by the probe timeout alone, it keeps both.
                p.rtt = RttEstimator::new(self.config.initial_rtt);
            }
        }
        if p.failed && answers {
            p.failed = false;
            self.events.push_back(Event::PathRecovered(pid));
        }
        if let Some(sample) = outcome.rtt_sample.filter(|_| answers) {
            let delay =
                Duration::from_micros(ack.delay_us.saturating_mul(units)).min(max_ack_delay);
            p.rtt.update(sample, delay);
        }
        // One-way delay from the receive timestamps of newly acknowledged packets
        // (`acked` is in packet-number order).
        // A packet declared lost whose ACK comes late (reordering) still gives a sample:
        // leaving it out would keep only the packets that overtook others.
        for &(pn, t) in &ack.timestamps {
            if let Ok(i) = outcome.acked.binary_search_by_key(&pn, |(a, _)| *a)
                && let Some((_, sp)) = outcome.acked.get(i)
            {
                p.owd.update(t as f64 - sp.time_sent.as_micros() as f64);
            } else if let Ok(i) = outcome.spurious.binary_search_by_key(&pn, |(a, _)| *a)
                && let Some((_, sent)) = outcome.spurious.get(i)
            {
                p.owd.update(t as f64 - sent.as_micros() as f64);
            }
        }
        let sample = rtt_sample(p);
        let mut validated_now = false;
        for (_, sp) in &outcome.acked {
            if sp.in_flight {
                self.controller.on_ack(now, pid, sp.time_sent, sp.size, &sample);
                p.delivery.on_acked(now, sp.time_sent, sp.size as u64, sp.delivery);
            }
            // Client: the server got the PATH_RESPONSE, so the path is validated.
            if sp.frames.path_response && !p.validated && self.side == Side::Client && !p.removed {
                p.validated = true;
                p.response_pending = false;
                validated_now = true;
            }
        }
        let min_rtt = if p.rtt.has_sample() { p.rtt.min() } else { Duration::ZERO };
        if let Some(s) = p.delivery.finish(now, min_rtt, p.loss.in_flight()) {
            self.controller.on_delivery_sample(now, pid, &s);
        }
        if validated_now {
            self.events.push_back(Event::PathValidated(pid));
        }
        if answered {
            self.emit_path(pid, PathEvent::Answered);
            // It answered before another path's acknowledgement closed its failover
            // record: a spurious timeout (a tail loss, a queue outgrowing the timer), not
            // counted; found by the probe timeout alone, it is no failure either.
            let open = self.failover.len();
            self.failover.retain(|f| f.path != pid);
            if self.failover.len() < open
                && !timed_out
                && let Some(p) = self.paths.get_mut(&pid)
            {
                p.failures = p.failures.saturating_sub(1);
            }
        }
        if !self.failover.is_empty() {
            // The newest data this ACK covers ends every failover detected before it was
            // sent: on another path a hand-over; on the failed path itself a recovery
            // before any hand-over (a spurious timeout, not counted).
            let first_data = outcome
                .acked
                .iter()
                .filter(|(_, sp)| !sp.frames.data.is_empty())
                .map(|(_, sp)| sp.time_sent)
                .max();
            if let Some(sent) = first_data {
                let mut max = self.failover_max;
                self.failover.retain(|f| {
                    if sent < f.detected {
                        return true;
                    }
                    if f.path != pid {
                        let took = now.saturating_duration_since(f.silent_since);
                        max = Some(max.map_or(took, |m| m.max(took)));
                    }
                    false
                });
                self.failover_max = max;
            }
        }
        self.fec_on_acked(pid, &outcome.acked);
        for (_, sp) in outcome.acked {
            for (id, r) in sp.frames.data.iter().map(|(id, r)| (*id, r.clone())) {
                self.send.on_acked(id, r);
            }
        }
        self.repace(pid);
        self.emit_metrics(pid);
        let Some(p) = self.paths.get_mut(&pid) else {
            return;
        };
        let lost = p.loss.detect_lost(now, &p.rtt);
        self.on_lost(pid, lost, Some(false));
    }

    /// Re-queues what lost packets carried. `congestion`: `Some(persistent)` tells the
    /// controller about a loss event, `None` (path removed) does not.
    pub(super) fn on_lost(
        &mut self,
        pid: PathId,
        lost: Vec<(u64, SentPacket)>,
        congestion: Option<bool>,
    ) {
        if lost.is_empty() {
            return;
        }
        let now = self.now;
        let mut data = Vec::new();
        let mut latest_sent = None;
        for (pn, sp) in &lost {
            self.stats_lost += 1;
            self.emit(|_| crate::trace::TraceEvent::PacketLost {
                path: pid,
                pn: *pn,
                size: sp.size,
            });
            latest_sent = latest_sent.max(Some(sp.time_sent));
            // Re-injected data has its copy on a live path; if that copy is lost, its own
            // loss re-queues it. Queuing it again here would send a third copy and, for a
            // message with a retransmission budget, spend the budget a second time on one
            // loss and abandon a message whose copy is still on its way.
            if !self.fec_defers(pid, *pn, sp) && !sp.frames.reinjected {
                data.extend(sp.frames.data.iter().cloned());
            }
            let f = &sp.frames;
            if f.max_data {
                self.max_data_pending = true;
            }
            if f.handshake_done {
                self.handshake_done_pending = true;
            }
            if f.new_token {
                self.new_token_pending = true;
            }
            if f.max_streams {
                self.max_streams_pending = true;
            }
            for &(id, len) in &f.resets {
                self.send.reset_lost(id, len);
            }
            if f.abandon {
                self.send.on_abandon_lost();
            }
            self.on_cid_frames_lost(&f.new_cids, &f.retired_cids);
            self.on_path_limits_lost(f.max_path_id, f.paths_blocked);
            for ps in &f.path_status {
                if let Some(p) = self.paths.get_mut(ps) {
                    p.status_pending = true;
                }
            }
            if let Some(p) = self.paths.get_mut(&pid) {
                if f.path_join && !p.validated && p.challenge_token == 0 && !p.removed {
                    p.join_pending = true;
                }
                if f.path_response && !p.validated && !p.removed {
                    p.response_pending = true;
                    // The join goes again too: a server that forgot the unvalidated path
                    // (its validation timeout) drops a bare response, and admits the path
                    // again only on a join.
                    p.join_pending = true;
                }
            }
        }
        if let Some(p) = self.paths.get_mut(&pid) {
            p.counters.on_lost(lost.len() as u64);
        }
        self.send.on_lost(&data);
        self.fec_release();
        if let (Some(persistent), Some(sent)) = (congestion, latest_sent)
            && let Some(p) = self.paths.get_mut(&pid)
        {
            // One reduction per loss event: losses of packets sent before the last
            // reduction are folded into it (RFC 6582 / RFC 9002 §7.3.2 recovery period).
            let new_event = persistent || p.loss.recovery_start.is_none_or(|r| sent > r);
            if new_event {
                p.loss.recovery_start = Some(now);
                self.controller.on_congestion_event(now, pid, sent, persistent);
                self.emit_metrics(pid);
            }
        }
    }

    /// When the path's RTO fires (backed off; a failed path is probed at least every
    /// [`super::Config::failed_probe_interval`]).
    pub(super) fn rto_deadline(&self, p: &Path) -> Option<Instant> {
        let base = p.rtt.rto(self.config.min_rto);
        let max = if p.failed {
            self.config.failed_probe_interval.max(base)
        } else {
            self.config.max_rto
        };
        p.loss.rto_deadline(base, max)
    }

    /// When path `p`'s probe timeout fires, and whether it then finds the path potentially
    /// failed (`true`) or only sends a tail probe on it (`false`). The timeout runs from
    /// its oldest packet in flight (or its last acknowledgement of anything new, if later)
    /// for SRTT + max(4·RTTVAR, 1 ms) + max_ack_delay (the per-path PTO of
    /// draft-ietf-quic-multipath, RFC 9002 §6.2.1), while another healthy path is live:
    ///
    /// - it acknowledged new data since, or it is an active path whose own packets are not
    ///   overdue (idle, or in flight for less than its own probe timeout): the silence is
    ///   this path's, and the timeout finds it potentially failed;
    /// - the only such path is a backup (handover's LTE, mptcp-qe's in Partial mode): the
    ///   first timeout sends a PING on this path, as RFC 9002's tail-loss probe, and only
    ///   its answer's absence (one more probe timeout later) finds it potentially failed — a tail loss on WiFi must not wake a radio
    ///   kept idle to save energy.
    ///
    /// Without a live path (one path, or every other one overdue) only the RTO finds a
    /// failure.
    pub(super) fn failure_pto(&self, p: &Path) -> Option<(Instant, bool)> {
        if !p.validated || p.potentially_failed || p.failed || !p.loss.ack_eliciting_in_flight() {
            return None;
        }
        let anchor = p.loss.timer_anchor()?;
        let mad = self.config.max_ack_delay;
        let (mut confirmed, mut backup) = (false, false);
        for o in self.paths.values() {
            if o.id == p.id || o.removed || !o.healthy() {
                continue;
            }
            let progress = o.loss.last_progress().is_some_and(|t| t > anchor);
            let quiet = o.loss.timer_anchor().is_none_or(|a| self.now < a + o.rtt.pto(mad));
            if progress || (quiet && o.status() == PathStatus::Active) {
                confirmed = true;
            } else if quiet {
                backup = true;
            }
        }
        let pto = p.rtt.pto(mad);
        if confirmed {
            Some((anchor + pto, true))
        } else if backup {
            match p.tail_probe_for {
                // The probe went out at the first timeout; one more probe timeout (its
                // ACK may wait for the peer's ACK delay) without an answer is silence.
                Some(a) if a == anchor => Some((anchor + 2 * pto, true)),
                _ => Some((anchor + pto, false)),
            }
        } else {
            None
        }
    }

    /// When [`Connection::failure_pto`] fires next, if it is armed.
    pub(super) fn failure_pto_deadline(&self, p: &Path) -> Option<Instant> {
        self.failure_pto(p).map(|(t, _)| t)
    }

    /// The probe timeout found path `id` potentially failed: schedulers skip it, the data
    /// of its packets in flight is queued again for the live paths (the packets stay in
    /// flight: an ACK still counts, the controller sees no loss), and a probe goes out on
    /// it. Its RTO, if it comes, declares the packets lost and restarts the window, but
    /// re-sends none of their data again.
    fn on_failure_pto(&mut self, id: PathId, now: Instant) {
        let Some(p) = self.paths.get_mut(&id) else {
            return;
        };
        let silent_since = now.saturating_sub(p.loss.unacked_for(now));
        p.potentially_failed = true;
        if let Some(size) = p.mtud.on_black_hole(now) {
            self.controller.on_datagram_size(id, size);
        }
        p.answer_floor = p.next_pn;
        p.failures += 1;
        p.probe_pending = true;
        p.probe_request_pending = true;
        let data = p.loss.take_for_reinjection();
        if !self.failover.iter().any(|f| f.path == id) {
            self.failover.push(Failover { path: id, silent_since, detected: now });
        }
        self.send.on_lost(&data);
        self.emit_path(id, PathEvent::PotentiallyFailed);
    }

    /// The loss timers of path `id` at `now`: the time threshold declares packets lost;
    /// the RTO declares everything in flight lost, queues a probe and, after
    /// [`super::Config::path_failure_rtos`] in a row, marks the path failed.
    pub(super) fn on_loss_timers(&mut self, id: PathId, now: Instant) {
        let Some(p) = self.paths.get_mut(&id) else {
            return;
        };
        if p.loss.loss_time().is_some_and(|t| t <= now) {
            let lost = p.loss.detect_lost(now, &p.rtt);
            self.on_lost(id, lost, Some(false));
        }
        let Some(p) = self.paths.get(&id) else {
            return;
        };
        match self.failure_pto(p) {
            Some((t, true)) if t <= now => self.on_failure_pto(id, now),
            Some((t, false)) if t <= now => {
                if let Some(p) = self.paths.get_mut(&id) {
                    p.tail_probe_for = p.loss.timer_anchor();
                    p.probe_pending = true;
                }
            }
            _ => {}
        }
        let Some(p) = self.paths.get(&id) else {
            return;
        };
        if self.rto_deadline(p).is_some_and(|t| t <= now) {
            let Some(p) = self.paths.get_mut(&id) else {
                return;
            };
            // How long the path has been silent: since its last acknowledgement of
            // anything new or, without one, since its oldest packet in flight was sent.
            let silent_since = now.saturating_sub(p.loss.unacked_for(now));
            let lost = p.loss.on_rto();
            let rtos = p.loss.rto_count;
            let mut found = false;
            if p.validated {
                p.probe_pending = true;
                p.probe_request_pending = true;
                if !p.potentially_failed {
                    p.potentially_failed = true;
                    if let Some(size) = p.mtud.on_black_hole(now) {
                        self.controller.on_datagram_size(id, size);
                    }
                    p.answer_floor = p.next_pn;
                    p.failures += 1;
                    found = true;
                    if !self.failover.iter().any(|f| f.path == id) {
                        self.failover.push(Failover { path: id, silent_since, detected: now });
                    }
                }
            }
            if rtos >= self.config.path_failure_rtos && !p.failed && p.validated {
                p.failed = true;
                self.events.push_back(Event::PathFailed(id));
                self.redundant.drop_path(id);
            }
            self.on_lost(id, lost, Some(true));
            if found {
                self.emit_path(id, PathEvent::PotentiallyFailed);
            }
        }
    }

    /// A PING after an RTO on the path that timed out, or else the keep-alive PING (see
    /// `close`) on the lowest-RTT usable path, with the ACKs routed there.
    pub(super) fn poll_probe(
        &mut self,
        now: Instant,
        buf: &mut Vec<u8>,
        views: &[PathView],
    ) -> Option<Transmit> {
        let probe = self.paths.values().find(|p| p.probe_pending && p.sendable()).map(|p| p.id);
        let keep_alive = if self.ping_pending {
            views.iter().filter(|v| v.usable).min_by_key(|v| (v.srtt, v.id)).map(|v| v.id)
        } else {
            None
        };
        let id = probe.or(keep_alive)?;
        if probe.is_none() {
            self.ping_pending = false;
        }
        let mut b = self.start(id, buf)?;
        b.push(buf, &Frame::Ping);
        self.add_acks(now, &mut b, buf, false, views);
        if let Some(p) = self.paths.get_mut(&id) {
            p.probe_pending = false;
        }
        self.finish(now, b, buf, true)
    }
}
