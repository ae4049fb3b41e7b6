//! Every timer in one place: [`Connection::handle_timeout`] fires the due ones (what
//! firing does lives with each job) and [`Connection::poll_timeout`] reports the earliest.
//!
//! | Timer | Owner |
//! |---|---|
//! | idle timeout, keep-alive | `close` |
//! | handshake retransmission | `handshake` |
//! | message deadlines | the send stream ([`crate::proto::send`]) |
//! | ACK delay | `acks` |
//! | RATE_FEEDBACK once per RTT | `rate_feedback` |
//! | loss time threshold, RTO | `loss` |
//! | READ_RATE report | `flow` |
//! | pacing (only while data waits) | `pacing` |

use super::Connection;
use crate::path::PathId;
use crate::time::Instant;

impl Connection {
    /// Fires the timers that are due at `now` (loss, RTO, ACK delay, deadlines, read-rate
    /// report, idle timeout).
    pub fn handle_timeout(&mut self, now: Instant) {
        self.now = self.now.max(now);
        let now = self.now;
        if self.is_closed() {
            return;
        }
        if self.idle_deadline().is_some_and(|t| now >= t) {
            self.enter_closed(super::CloseReason::IdleTimeout);
            return;
        }
        self.on_handshake_timer(now);
        self.read_meter.advance(now);
        if self.send.expire(now) > 0 {
            self.redundant.clear();
        }
        let ids: Vec<PathId> = self.paths.keys().copied().collect();
        for id in ids {
            let Some(p) = self.paths.get_mut(&id) else {
                continue;
            };
            if p.removed {
                if p.lingering(now) {
                    p.on_ack_timer(now);
                } else if p.linger_until.take().is_some() {
                    // Its late packets are no longer taken: none is acknowledged either.
                    p.unacked_eliciting = 0;
                    p.ack_deadline = None;
                    p.ack_immediate = false;
                }
                continue;
            }
            p.on_ack_timer(now);
            p.feedback.on_timer(now);
            self.on_loss_timers(id, now);
        }
        self.expire_unvalidated(now);
        self.on_migration_timers(now);
        self.on_keep_alive_timer(now);
        self.on_read_rate_timer(now);
    }

    /// The next instant [`Connection::handle_timeout`] must be called, if any.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.is_closed() {
            return None;
        }
        let mut t = self.idle_deadline();
        let mut add = |x: Option<Instant>| {
            if let Some(x) = x {
                t = Some(t.map_or(x, |t: Instant| t.min(x)));
            }
        };
        add(self.send.next_deadline());
        add(self.next_read_rate_report);
        add(self.keep_alive_deadline());
        add(self.tls.timer());
        add(self.migration_deadline());
        let wants_data = self.send.has_data();
        for p in self.paths.values().filter(|p| p.removed) {
            add(p.linger_until);
            if p.ack_pending() && !p.ack_immediate {
                add(p.ack_deadline);
            }
        }
        for p in self.paths.values().filter(|p| !p.removed) {
            if p.ack_pending() && !p.ack_immediate {
                add(p.ack_deadline);
            }
            add(p.loss.loss_time());
            add(self.rto_deadline(p));
            add(self.failure_pto_deadline(p));
            add(p.feedback.deadline());
            if self.side == super::Side::Server && !p.validated && p.id != PathId(0) {
                add(Some(p.created_at + self.config.path_validation_timeout));
            }
            add(p.pacing_wake_at(self.now, wants_data));
        }
        t
    }

    /// Every timer's state, for test failure messages.
    #[cfg(test)]
    pub(crate) fn debug_timers(&self) -> String {
        let mut out = format!(
            "now {:?} idle {:?} deadline {:?} rr {:?} has_data {} ctl {}\n",
            self.now,
            self.idle_deadline(),
            self.send.next_deadline(),
            self.next_read_rate_report,
            self.send.has_data(),
            self.has_control()
        );
        for p in self.paths.values() {
            out += &format!(
                "  {} ack_pending {} imm {} ackdl {:?} loss {:?} rto {:?} pace {:?} inflight {} cwnd {} valid {} failed {} removed {}\n",
                p.id,
                p.ack_pending(),
                p.ack_immediate,
                p.ack_deadline,
                p.loss.loss_time(),
                self.rto_deadline(p),
                p.next_send_time,
                p.loss.in_flight(),
                self.controller.window(p.id),
                p.validated,
                p.failed,
                p.removed
            );
        }
        out
    }
}
