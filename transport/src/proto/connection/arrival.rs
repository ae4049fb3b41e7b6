//! The receiver's estimate of each message's in-order delay, for reports of sessions whose
//! sender runs elsewhere (its send times are unknown here).
//!
//! For every message this side receives, the time its first chunk arrived and the path it
//! came on are kept — or, when a later message arrived first (this one was lost or went a
//! slower way; the sender sends in id order), that later message's arrival, so a repaired
//! loss counts from when the message would have arrived — and the time it became
//! deliverable in order (it and every message
//! before it complete or abandoned). When [`Connection::read_message`] hands the message
//! out, its delay is estimated as the wait between that first arrival and its becoming
//! deliverable (measured: reordering across paths, loss recovery, reassembly; not how
//! late the application reads), plus half of that path's minimum RTT as measured here
//! (estimated: the propagation the first chunk had; queueing inside the network and at
//! the sender is not seen). A sender in the same process can measure the delay exactly;
//! this estimate is for the others.
//!
//! Memory is bounded: at most [`MAX_PENDING`] messages are tracked (more are not timed,
//! and counted), and at most [`MAX_SAMPLES`] delays are kept: when full, every other one
//! is dropped and from then on only every second (fourth, …) is kept, so the samples
//! stay an even subsample of the whole session.

use std::collections::BTreeMap;
use std::time::Duration;

use super::Connection;
use crate::path::PathId;
use crate::time::Instant;

/// Messages whose arrival is tracked at once, at most.
pub const MAX_PENDING: usize = 8192;
/// Delay samples kept, at most.
pub const MAX_SAMPLES: usize = 8192;

/// Arrivals waiting to be read, and the delays of messages read.
#[derive(Debug, Default)]
pub(super) struct ArrivalLog {
    /// Message id → (first arrival, its path, when it became deliverable in order).
    pending: BTreeMap<u64, (Instant, PathId, Option<Instant>)>,
    /// Every message below this one is known to be deliverable (or was delivered).
    frontier: u64,
    /// Every message below this one has its arrival recorded (or was read).
    seen_upto: u64,
    samples_us: Vec<u64>,
    /// Keep one sample in `stride`.
    stride: u64,
    seen: u64,
    /// Messages not timed because `pending` was full.
    pub(super) untimed: u64,
}

impl ArrivalLog {
    /// A chunk of message `id` arrived at `now` on `pid`: the first arrival of `id` and
    /// of every message before it not seen yet.
    pub(super) fn on_chunk(&mut self, id: u64, next_to_read: u64, now: Instant, pid: PathId) {
        let from = self.seen_upto.max(next_to_read);
        if id < from {
            return;
        }
        self.seen_upto = id + 1;
        for i in from..=id {
            if self.pending.len() >= MAX_PENDING {
                self.untimed += id + 1 - i;
                return;
            }
            self.pending.insert(i, (now, pid, None));
        }
    }

    /// Marks the messages that became deliverable in order at `now` (`ready(id)`: the
    /// message is complete or abandoned), from the last frontier on.
    pub(super) fn advance(&mut self, next_to_read: u64, now: Instant, ready: impl Fn(u64) -> bool) {
        self.frontier = self.frontier.max(next_to_read);
        while ready(self.frontier) {
            if let Some(e) = self.pending.get_mut(&self.frontier) {
                e.2.get_or_insert(now);
            }
            self.frontier += 1;
        }
    }

    /// Message `id` (or a gap before `id`) was handed out: forgets everything below it
    /// and returns `id`'s arrival, path and when it became deliverable.
    pub(super) fn take(&mut self, id: u64) -> Option<(Instant, PathId, Option<Instant>)> {
        self.pending = self.pending.split_off(&id);
        self.pending.remove(&id)
    }

    /// Records one delay.
    pub(super) fn push(&mut self, us: u64) {
        self.stride = self.stride.max(1);
        if self.seen.is_multiple_of(self.stride) {
            if self.samples_us.len() >= MAX_SAMPLES {
                let mut i = 0;
                self.samples_us.retain(|_| {
                    i += 1;
                    i % 2 == 1
                });
                self.stride *= 2;
            }
            if self.seen.is_multiple_of(self.stride) {
                self.samples_us.push(us);
            }
        }
        self.seen += 1;
    }

    /// The samples, µs.
    pub(super) fn samples_us(&self) -> &[u64] {
        &self.samples_us
    }
}

impl Connection {
    /// One-way propagation estimate of `pid`: half its minimum RTT, once it has an RTT
    /// sample; else half the smallest minimum RTT of any sampled path; else zero.
    fn one_way_estimate(&self, pid: PathId) -> Duration {
        if let Some(p) = self.paths.get(&pid).filter(|p| p.rtt.has_sample()) {
            return p.rtt.min() / 2;
        }
        self.paths
            .values()
            .filter(|p| p.rtt.has_sample())
            .map(|p| p.rtt.min() / 2)
            .min()
            .unwrap_or(Duration::ZERO)
    }

    /// A message was read at `now`: records its estimated in-order delay.
    pub(super) fn on_message_read(&mut self, id: u64, now: Instant) {
        if let Some((at, pid, ready)) = self.arrivals.take(id) {
            let ready = ready.unwrap_or(now).min(now);
            let d = ready.saturating_duration_since(at) + self.one_way_estimate(pid);
            self.arrivals.push(d.as_micros() as u64);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_stay_bounded_and_even() {
        let mut a = ArrivalLog::default();
        for i in 0..(MAX_SAMPLES as u64 * 5) {
            a.push(i);
        }
        let s = a.samples_us();
        assert!(s.len() <= MAX_SAMPLES && s.len() > MAX_SAMPLES / 4, "{}", s.len());
        // An even subsample: the mean stays that of the whole run.
        let mean = s.iter().sum::<u64>() as f64 / s.len() as f64;
        let whole = (MAX_SAMPLES as f64 * 5.0 - 1.0) / 2.0;
        assert!((mean / whole - 1.0).abs() < 0.05, "{mean} vs {whole}");
    }

    #[test]
    fn arrivals_are_forgotten_below_what_was_read() {
        let mut a = ArrivalLog::default();
        let t = Instant::ZERO;
        for id in 0..10 {
            a.on_chunk(id, 0, t + Duration::from_millis(id), PathId(0));
        }
        // Message 12 before 10 and 11: they count from 12's arrival.
        a.on_chunk(12, 0, t + Duration::from_millis(50), PathId(1));
        a.on_chunk(10, 0, t + Duration::from_millis(90), PathId(0));
        assert_eq!(a.pending.get(&10), Some(&(t + Duration::from_millis(50), PathId(1), None)));
        // A later chunk of a message already seen keeps its first arrival.
        a.on_chunk(3, 0, t + Duration::from_secs(9), PathId(1));
        // Messages 0..=4 complete at 20 ms, 5 not yet.
        a.advance(0, t + Duration::from_millis(20), |id| id < 5);
        assert_eq!(a.frontier, 5);
        assert_eq!(
            a.take(3),
            Some((t + Duration::from_millis(3), PathId(0), Some(t + Duration::from_millis(20))))
        );
        assert_eq!(a.pending.get(&5).map(|e| e.2), Some(None));
        assert_eq!(a.pending.len(), 9, "{:?}", a.pending.keys().collect::<Vec<_>>());
        // Below what was read: ignored.
        a.on_chunk(2, 4, t, PathId(0));
        assert_eq!(a.take(2), None);
        for id in 100..(100 + MAX_PENDING as u64 + 5) {
            a.on_chunk(id, 4, t, PathId(0));
        }
        // 13..=99 are filled in before 100 (sent before it, not seen): 87 + 8197 ids for
        // the 8183 free places.
        assert_eq!(a.untimed, 87 + 8197 - (MAX_PENDING as u64 - 9));
    }
}
