//! TFRC feedback (with [`super::Config::rate_feedback`], RFC 5348 \[source\]). The data
//! receiver keeps the loss-event history of each path and sends RATE_FEEDBACK (X_recv, p,
//! t_delay): at the first data packet, then once per RTT while data arrives, and at once
//! when p rises. The data sender hands a report to
//! [`crate::cc::Controller::on_rate_feedback`] and re-paces the path.

use std::time::Duration;

use super::Connection;
use super::packetize::Builder;
use super::paths::Path;
use crate::cc::tfrc::{RateFeedback, TfrcReceiver};
use crate::proto::frame::{Frame, RateFeedbackFrame};
use crate::time::Instant;
use crate::trace::TraceEvent;

impl Path {
    /// TFRC receiver side (RFC 5348 §6 \[source\]): every packet of the path feeds the
    /// loss history (packet numbers are per path, so any gap is a loss on it); packets with
    /// data schedule a report: the first at once, then one per RTT while data arrives, and
    /// at once when the loss event rate rose (a new loss event, §6.1).
    pub(super) fn on_tfrc_packet(&mut self, now: Instant, pn: u64, bytes: usize, has_data: bool) {
        let rtt = self.rtt.smoothed();
        let Some(rx) = self.tfrc_rx.as_mut() else {
            return;
        };
        rx.set_rtt(rtt);
        rx.on_packet(now, pn, bytes);
        if !has_data {
            return;
        }
        self.data_since_feedback = true;
        if self.last_feedback_at.is_none() || rx.loss_event_rate() > self.last_feedback_p {
            self.feedback_pending = true;
        } else if self.next_feedback.is_none() && !self.feedback_pending {
            let due = self.last_feedback_at.map_or(now, |t| t + rtt).max(now);
            self.next_feedback = Some(due);
        }
    }

    /// The once-per-RTT report timer: once passed, a report is due if data arrived since
    /// the last one.
    pub(super) fn on_feedback_timer(&mut self, now: Instant) {
        if self.next_feedback.is_some_and(|d| d <= now) {
            self.next_feedback = None;
            self.feedback_pending |= self.data_since_feedback;
        }
    }
}

impl Connection {
    /// Adds the due RATE_FEEDBACK reports of live paths that fit; the next report of a
    /// path is then due one RTT later.
    pub(super) fn add_rate_feedback(&mut self, b: &mut Builder, buf: &mut Vec<u8>) {
        let ids: smallvec::SmallVec<[crate::path::PathId; 8]> =
            self.paths.values().filter(|p| p.feedback_pending).map(|p| p.id).collect();
        for id in ids {
            let now = self.now;
            let Some(p) = self.paths.get_mut(&id) else {
                continue;
            };
            if !p.feedback_pending || p.removed {
                continue;
            }
            let Some(rx) = p.tfrc_rx.as_mut() else {
                p.feedback_pending = false;
                continue;
            };
            // Sizes are fixed but for the varints; a report that does not fit waits.
            let probe = RateFeedbackFrame::from_feedback(
                id,
                &RateFeedback { x_recv: 1e12, p: 1.0, t_delay: Duration::from_secs(3600) },
            );
            if !b.fits(buf, Frame::RateFeedback(probe).encoded_len()) {
                continue;
            }
            let fb = rx.feedback(now);
            let rtt = p.rtt.smoothed();
            b.push(buf, &Frame::RateFeedback(RateFeedbackFrame::from_feedback(id, &fb)));
            p.feedback_pending = false;
            p.data_since_feedback = false;
            p.last_feedback_p = fb.p;
            p.last_feedback_at = Some(now);
            p.next_feedback = Some(now + rtt);
        }
    }

    /// The peer paces by RATE_FEEDBACK (its transport parameters said so): every path keeps
    /// the TFRC receiver statistics and reports, as if this side's profile asked for it.
    pub(super) fn on_feedback_wanted(&mut self) {
        if self.peer_wants_feedback {
            return;
        }
        self.peer_wants_feedback = true;
        let s = self.config.max_datagram_size;
        for p in self.paths.values_mut() {
            if p.tfrc_rx.is_none() {
                p.tfrc_rx = Some(TfrcReceiver::new(s));
            }
        }
    }

    /// Whether this side sends RATE_FEEDBACK: its own profile asks for it, or the peer's.
    pub(super) fn sends_rate_feedback(&self) -> bool {
        self.config.rate_feedback || self.peer_wants_feedback
    }

    /// Data sender: a RATE_FEEDBACK report arrived for `f.path`.
    pub(super) fn on_rate_feedback(&mut self, now: Instant, f: &RateFeedbackFrame) {
        let fb = f.to_feedback();
        self.controller.on_rate_feedback(now, f.path, &fb);
        if self.trace.is_some()
            && let Some(state) = self.controller.rate_control_state(f.path)
        {
            self.emit(|_| TraceEvent::RateControl {
                path: f.path,
                x_recv: fb.x_recv,
                p: fb.p,
                state,
            });
        }
        self.repace(f.path);
    }
}
