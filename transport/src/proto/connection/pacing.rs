//! Pacing at the controller's rate ([`crate::cc::Controller::pacing_rate`]). Only packets
//! that carry data are paced: each one pushes the path's next send time out by its size at
//! the rate; a rate change re-computes the wait from the last paced packet.

use std::time::Duration;

use super::Connection;
use super::paths::Path;
use crate::path::PathId;
use crate::time::Instant;

/// How long `size` bytes take at `rate` bytes per second (`rate` > 0).
fn gap(size: u64, rate: u64) -> Duration {
    Duration::from_micros(size.saturating_mul(1_000_000) / rate)
}

impl Path {
    /// A packet of `size` bytes with data went out at `now`, paced at `rate` (> 0).
    pub(super) fn pace(&mut self, now: Instant, size: u64, rate: u64) {
        let base = self.next_send_time.map_or(now, |t| t.max(now));
        self.last_paced = Some((base, size));
        self.next_send_time = Some(base + gap(size, rate));
    }

    /// The instant after `now` before which the path may not send data, if any.
    pub(super) fn pacing_wait(&self, now: Instant) -> Option<Instant> {
        self.next_send_time.filter(|&t| t > now)
    }
}

impl Connection {
    /// The pacing deadline of `pid` recomputed with the controller's current rate (a rate
    /// that rose after the last packet, e.g. on the first RTT sample or on feedback, must
    /// not leave the path waiting out a gap computed at the old rate).
    pub(super) fn repace(&mut self, pid: PathId) {
        let rate = self.controller.pacing_rate(pid).filter(|&r| r > 0);
        if let Some(p) = self.paths.get_mut(&pid)
            && let (Some((base, size)), Some(rate)) = (p.last_paced, rate)
        {
            p.next_send_time = Some(base + gap(size, rate));
        }
    }
}
