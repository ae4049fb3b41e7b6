//! Pacing at the controller's rate ([`crate::cc::Controller::pacing_rate`]). Only packets
//! that carry data are paced: each one pushes the path's next send time out by its size at
//! the rate; a rate change re-computes the wait from the last paced packet.
//!
//! A path that waited for its pacing deadline and was woken late (a real timer's
//! granularity: tokio's wakes up to a millisecond or more after the deadline) sends from
//! the deadline, not from the wake-up, making up at most [`CATCH_UP`] of lateness: without
//! it, every late wake-up lowers the rate (at 8 Mbit/s a 1 200-byte datagram is due every
//! 1.2 ms, and a wake-up 1 ms late stretches that to 2.2 ms), and a controller that
//! measures the delivery rate it paces at (BBR) follows its own pacer down. The simulator
//! wakes exactly at the deadline, so there nothing changes. The same idea as a pacer's burst
//! allowance (quinn's token bucket allows about 2 ms of sending at once; RFC 9002 §7.7
//! leaves the burst to the implementation).

use std::time::Duration;

use super::Connection;
use super::paths::Path;
use crate::path::PathId;
use crate::time::Instant;

/// The most lateness of a wake-up that a paced path makes up for by sending sooner.
const CATCH_UP: Duration = Duration::from_millis(2);

/// How long `size` bytes take at `rate` bytes per second (`rate` > 0).
fn gap(size: u64, rate: u64) -> Duration {
    Duration::from_micros(size.saturating_mul(1_000_000) / rate)
}

impl Path {
    /// A packet of `size` bytes with data went out at `now`, paced at `rate` (> 0).
    pub(super) fn pace(&mut self, now: Instant, size: u64, rate: u64) {
        let base = match self.next_send_time {
            // It waited for this deadline and the wake-up came late: go on from the
            // deadline, making up at most `CATCH_UP` of the lateness.
            Some(t) if self.pacing_wake && t <= now => t.max(now.saturating_sub(CATCH_UP)),
            Some(t) => t.max(now),
            None => now,
        };
        let next = base + gap(size, rate);
        self.last_paced = Some((base, size));
        self.next_send_time = Some(next);
    }

    /// The instant after `now` before which the path may not send data, if any.
    pub(super) fn pacing_wait(&self, now: Instant) -> Option<Instant> {
        self.next_send_time.filter(|&t| t > now)
    }

    /// When the connection wants its driver to wake for this path's pacing: its deadline,
    /// while data waits to be sent ([`Connection::poll_timeout`]).
    pub(super) fn pacing_wake_at(&self, now: Instant, wants_data: bool) -> Option<Instant> {
        self.pacing_wait(now).filter(|_| wants_data)
    }
}

impl Connection {
    /// The connection has nothing more to send at `now` and its driver goes to sleep:
    /// remember which paths it asks to be woken for (data waits for their pacing
    /// deadline, [`Connection::poll_timeout`]). Those, and only those, make up for a late
    /// wake-up; a deadline that passed while the path waited for its window or for data
    /// gives no credit.
    pub(super) fn note_pacing_wakes(&mut self, now: Instant) {
        let wants_data = self.send.has_data();
        for p in self.paths.values_mut() {
            p.pacing_wake = p.pacing_wake_at(now, wants_data).is_some();
        }
    }

    /// The pacing deadline of `pid` recomputed with the controller's current rate (a rate
    /// that rose after the last packet, e.g. on the first RTT sample or on feedback, must
    /// not leave the path waiting out a gap computed at the old rate).
    pub(super) fn repace(&mut self, pid: PathId) {
        let rate = self.controller.pacing_rate(pid).filter(|&r| r > 0);
        if let Some(p) = self.paths.get_mut(&pid)
            && let (Some((base, size)), Some(rate)) = (p.last_paced, rate)
        {
            p.next_send_time = Some(base + gap(size, rate));
            // The deadline moved (into the past when the rate rose): nobody missed it, so it
            // gives no catch-up credit until the connection next asks to be woken for it.
            p.pacing_wake = false;
        }
    }
}
