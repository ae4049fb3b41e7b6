//! The application read-rate meter.
//!
//! Measures what the application actually takes out of the connection: every
//! `read_message` that returns a message adds its payload bytes. The rate is the bytes
//! read in a sliding window of `BUCKETS × BUCKET` = 1 s, kept as ten 100 ms buckets (so
//! memory is fixed however often the application reads), times 8, in bits per second.
//! Until a full window has elapsed since the first read, the elapsed time is used instead
//! of 1 s so the first report is not biased low.

use std::time::Duration;

use crate::time::Instant;

const BUCKETS: usize = 10;
const BUCKET_US: u64 = 100_000;
/// The meter's window.
pub const WINDOW: Duration = Duration::from_micros(BUCKETS as u64 * BUCKET_US);

/// Bytes read per 100 ms over the last second.
#[derive(Debug, Clone, Default)]
pub struct ReadRateMeter {
    buckets: [u64; BUCKETS],
    /// Index (time / 100 ms) of the newest bucket.
    head: u64,
    first: Option<Instant>,
    now: Instant,
}

impl ReadRateMeter {
    /// A meter that has seen nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// Moves the window to `now`, dropping buckets that fell out of it.
    pub fn advance(&mut self, now: Instant) {
        if now < self.now {
            return;
        }
        self.now = now;
        let idx = now.as_micros() / BUCKET_US;
        if idx <= self.head {
            return;
        }
        let steps = (idx - self.head).min(BUCKETS as u64);
        for k in 1..=steps {
            let slot = ((self.head + k) % BUCKETS as u64) as usize;
            if let Some(b) = self.buckets.get_mut(slot) {
                *b = 0;
            }
        }
        self.head = idx;
    }

    /// The application read `bytes` at `now`.
    pub fn record(&mut self, now: Instant, bytes: u64) {
        self.advance(now);
        if self.first.is_none() {
            self.first = Some(now);
        }
        let slot = (self.head % BUCKETS as u64) as usize;
        if let Some(b) = self.buckets.get_mut(slot) {
            *b = b.saturating_add(bytes);
        }
    }

    /// Bits per second over the window ending at the last `advance`/`record`.
    pub fn rate_bps(&self) -> f64 {
        let Some(first) = self.first else { return 0.0 };
        let total: u64 = self.buckets.iter().sum();
        // The window covers the current bucket up to `now` plus nine full buckets.
        let span_us = (self.now - first).as_micros() as u64 + BUCKET_US;
        let span = span_us.min(BUCKETS as u64 * BUCKET_US) as f64 / 1e6;
        total as f64 * 8.0 / span
    }

    /// Whether anything was read within the window.
    pub fn active(&self) -> bool {
        self.buckets.iter().any(|&b| b > 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steady_reads_measure_their_rate() {
        let mut m = ReadRateMeter::new();
        // 1250 bytes every 10 ms = 1 Mbit/s.
        for i in 0..300u64 {
            m.record(Instant::from_micros(i * 10_000), 1250);
        }
        let r = m.rate_bps();
        assert!((r - 1e6).abs() < 0.05e6, "{r}");
    }

    #[test]
    fn rate_decays_to_zero_after_reads_stop() {
        let mut m = ReadRateMeter::new();
        m.record(Instant::from_micros(0), 10_000);
        assert!(m.rate_bps() > 0.0);
        m.advance(Instant::from_micros(1_100_000));
        assert_eq!(m.rate_bps(), 0.0);
        assert!(!m.active());
    }
}
