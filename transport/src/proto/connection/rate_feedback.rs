//! TFRC feedback (with [`super::Config::rate_feedback`], RFC 5348 \[source\]). The data
//! receiver keeps the loss-event history of each path and sends RATE_FEEDBACK (X_recv, p,
//! t_delay): at the first data packet, then once per RTT while data arrives, and at once
//! when p rises. The data sender hands a report to
//! [`crate::cc::Controller::on_rate_feedback`] and re-paces the path.

use std::time::Duration;

use super::Connection;
use super::packetize::Builder;
use crate::cc::tfrc::{RateFeedback, TfrcReceiver};
use crate::proto::frame::{Frame, RateFeedbackFrame};
use crate::time::Instant;
use crate::trace::TraceEvent;

/// A path's TFRC receiver side: the loss history (when this side reports) and when its
/// next RATE_FEEDBACK is due. Its state changes only through these methods.
#[derive(Debug, Clone, Default)]
pub(super) struct FeedbackRx {
    /// The loss history; `None` while this side sends no reports.
    rx: Option<TfrcReceiver>,
    /// Data arrived since the last report.
    data_since: bool,
    /// A report is due now.
    pending: bool,
    /// The once-per-RTT report timer.
    next: Option<Instant>,
    /// The loss event rate the last report carried.
    last_p: f64,
    /// When the last report went out.
    last_at: Option<Instant>,
}

impl FeedbackRx {
    /// Starts keeping the loss history (reports from now on).
    pub(super) fn enable(&mut self, max_datagram_size: usize) {
        if self.rx.is_none() {
            self.rx = Some(TfrcReceiver::new(max_datagram_size));
        }
    }

    /// TFRC receiver side (RFC 5348 §6 \[source\]): every packet of the path feeds the
    /// loss history (packet numbers are per path, so any gap is a loss on it); packets with
    /// data schedule a report: the first at once, then one per RTT while data arrives, and
    /// at once when the loss event rate rose (a new loss event, §6.1).
    pub(super) fn on_packet(
        &mut self,
        now: Instant,
        rtt: Duration,
        pn: u64,
        bytes: usize,
        has_data: bool,
    ) {
        let Some(rx) = self.rx.as_mut() else {
            return;
        };
        rx.set_rtt(rtt);
        rx.on_packet(now, pn, bytes);
        if !has_data {
            return;
        }
        self.data_since = true;
        if self.last_at.is_none() || rx.loss_event_rate() > self.last_p {
            self.pending = true;
        } else if self.next.is_none() && !self.pending {
            let due = self.last_at.map_or(now, |t| t + rtt).max(now);
            self.next = Some(due);
        }
    }

    /// The once-per-RTT report timer: once passed, a report is due if data arrived since
    /// the last one.
    pub(super) fn on_timer(&mut self, now: Instant) {
        if self.next.is_some_and(|d| d <= now) {
            self.next = None;
            self.pending |= self.data_since;
        }
    }

    /// A report is due.
    pub(super) fn pending(&self) -> bool {
        self.pending
    }

    /// When the report timer fires, if it runs.
    pub(super) fn deadline(&self) -> Option<Instant> {
        self.next
    }

    /// The report due now, if one is and the loss history is kept (a report due without
    /// one is dropped); the next is then due one RTT later.
    pub(super) fn take_report(&mut self, now: Instant, rtt: Duration) -> Option<RateFeedback> {
        if !self.pending {
            return None;
        }
        let Some(rx) = self.rx.as_mut() else {
            self.pending = false;
            return None;
        };
        let fb = rx.feedback(now);
        self.pending = false;
        self.data_since = false;
        self.last_p = fb.p;
        self.last_at = Some(now);
        self.next = Some(now + rtt);
        Some(fb)
    }

    /// Whether the loss history is kept.
    pub(super) fn enabled(&self) -> bool {
        self.rx.is_some()
    }
}

/// The bytes a path had sent when each of the last two RATE_FEEDBACK reports arrived.
///
/// A report's X_recv is what the receiver got over about its last RTT, which this side
/// sent over about the RTT before the report left. The bound taken is generous: the bytes
/// sent over the last two report intervals divided by the last interval alone, about twice
/// the sending rate when reports come once per RTT. An honest report stays below it (a
/// queue draining may compress arrivals, not double them); one inflated to speed the
/// sender up is cut down to it.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct SentMarks {
    older: Option<(Instant, u64)>,
    newer: Option<(Instant, u64)>,
}

impl SentMarks {
    /// The highest receive rate (bytes/s) a report arriving at `now` may claim, `sent` being
    /// the path's bytes sent so far; `None` before two reports gave a reference. Records
    /// this report's mark.
    pub(super) fn cap(&mut self, now: Instant, sent: u64) -> Option<f64> {
        let cap = match (self.older, self.newer) {
            (Some((_, b0)), Some((t1, _))) if now > t1 => {
                let interval = now.saturating_duration_since(t1).as_secs_f64();
                Some(sent.saturating_sub(b0) as f64 / interval)
            }
            _ => None,
        };
        self.older = self.newer;
        self.newer = Some((now, sent));
        cap
    }
}

impl Connection {
    /// Adds the due RATE_FEEDBACK reports of live paths that fit; the next report of a
    /// path is then due one RTT later.
    pub(super) fn add_rate_feedback(&mut self, b: &mut Builder, buf: &mut Vec<u8>) {
        let ids: smallvec::SmallVec<[crate::path::PathId; 8]> =
            self.paths.values().filter(|p| p.feedback.pending()).map(|p| p.id).collect();
        for id in ids {
            let now = self.now;
            let Some(p) = self.paths.get_mut(&id) else {
                continue;
            };
            if !p.feedback.pending() || p.removed {
                continue;
            }
            if !p.feedback.enabled() {
                // Due without a loss history: nothing to report.
                let _ = p.feedback.take_report(now, p.rtt.smoothed());
                continue;
            }
            // Sizes are fixed but for the varints; a report that does not fit waits.
            let probe = RateFeedbackFrame::from_feedback(
                id,
                &RateFeedback { x_recv: 1e12, p: 1.0, t_delay: Duration::from_secs(3600) },
            );
            if !b.fits(buf, Frame::RateFeedback(probe).encoded_len()) {
                continue;
            }
            let rtt = p.rtt.smoothed();
            if let Some(fb) = p.feedback.take_report(now, rtt) {
                b.push(buf, &Frame::RateFeedback(RateFeedbackFrame::from_feedback(id, &fb)));
            }
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
            p.feedback.enable(s);
        }
    }

    /// Whether this side sends RATE_FEEDBACK: its own profile asks for it, or the peer's.
    pub(super) fn sends_rate_feedback(&self) -> bool {
        self.config.rate_feedback || self.peer_wants_feedback
    }

    /// Data sender: a RATE_FEEDBACK report arrived for `f.path`. Its receive rate is held
    /// to what this side sent ([`SentMarks::cap`]): a receiver claiming more would make
    /// TFRC (X ≤ 2·X_recv) send faster than the path carries.
    pub(super) fn on_rate_feedback(&mut self, now: Instant, f: &RateFeedbackFrame) {
        let mut fb = f.to_feedback();
        if let Some(p) = self.paths.get_mut(&f.path)
            && let Some(cap) = p.sent_marks.cap(now, p.counters.bytes_sent())
            && fb.x_recv > cap
        {
            fb.x_recv = cap;
            self.rate_feedback_capped += 1;
        }
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

#[cfg(test)]
mod tests {
    use super::SentMarks;
    use crate::time::Instant;

    #[test]
    fn the_bound_is_two_intervals_of_sending_over_the_last_interval() {
        let mut m = SentMarks::default();
        let at = |ms: u64| Instant::from_micros(ms * 1000);
        assert_eq!(m.cap(at(100), 10_000), None, "no reference yet");
        assert_eq!(m.cap(at(200), 20_000), None, "one mark is not enough");
        // 30 000 bytes since the report at 100 ms, over the 100 ms since the last one.
        assert_eq!(m.cap(at(300), 40_000), Some(300_000.0));
        // Two reports at one instant: no interval, no bound.
        assert_eq!(m.cap(at(300), 40_000), None);
    }
}
