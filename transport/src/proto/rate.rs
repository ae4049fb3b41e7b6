//! The application read-rate meter.
//!
//! Measures what the application actually takes out of the connection: every
//! `read_message` that returns a message adds its payload bytes. The rate is the bytes
//! read in a sliding window of `BUCKETS × BUCKET` = 1 s, kept as ten 100 ms buckets (so
//! memory is fixed however often the application reads), times 8, in bits per second.
//! Until a full window has elapsed since the first read, the elapsed time is used instead
//! of 1 s so the first report is not biased low.
//!
//! An application that reads at a rate of its own (the MPTCP-QE paper's reader, at 1 and
//! 3 Mbit/s per RTT) can say when it wanted data and found none
//! ([`ReadRateMeter::starve`]); until its next read that time is left out of the window,
//! so the rate is the application's read rate while it had something to read — what it
//! drains, not what the network supplied. Without such calls (a player that reads all
//! that arrives) the meter measures what was read.

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
    /// Microseconds of each bucket the application spent starved.
    starved: [u64; BUCKETS],
    /// Starved since then, until the next read.
    starved_since: Option<Instant>,
    /// The latest rate over at least one bucket of unstarved time.
    last_rate: f64,
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
        // Close the starved time up to the old head's end before its bucket is reused.
        if let Some(since) = self.starved_since {
            let end = Instant::from_micros((self.head + 1) * BUCKET_US).min(now);
            self.add_starved(since, end);
            self.starved_since = Some(end.max(since));
        }
        let steps = (idx - self.head).min(BUCKETS as u64);
        for k in 1..=steps {
            let slot = ((self.head + k) % BUCKETS as u64) as usize;
            if let Some(b) = self.buckets.get_mut(slot) {
                *b = 0;
            }
            if let Some(b) = self.starved.get_mut(slot) {
                *b = 0;
            }
        }
        self.head = idx;
        if let Some(since) = self.starved_since {
            // Whole buckets skipped while starved, then the current one up to `now`.
            let from = since
                .max(Instant::from_micros((idx + 1).saturating_sub(BUCKETS as u64) * BUCKET_US));
            self.add_starved(from, now);
            self.starved_since = Some(now);
        }
    }

    /// Adds `[from, to)` to the starved time of the buckets it covers (within the window).
    fn add_starved(&mut self, from: Instant, to: Instant) {
        let (mut a, b) = (from.as_micros(), to.as_micros());
        let oldest = (self.head + 1).saturating_sub(BUCKETS as u64) * BUCKET_US;
        a = a.max(oldest);
        while a < b {
            let idx = a / BUCKET_US;
            if idx > self.head {
                break;
            }
            let end = ((idx + 1) * BUCKET_US).min(b);
            if let Some(s) = self.starved.get_mut((idx % BUCKETS as u64) as usize) {
                *s = (*s + (end - a)).min(BUCKET_US);
            }
            a = end;
        }
    }

    /// The application wanted to read at `now` and nothing was there; it counts as starved
    /// until its next [`ReadRateMeter::record`].
    pub fn starve(&mut self, now: Instant) {
        self.advance(now);
        if self.first.is_some() && self.starved_since.is_none() {
            self.starved_since = Some(now.max(self.now));
        }
    }

    /// The application read `bytes` at `now`.
    pub fn record(&mut self, now: Instant, bytes: u64) {
        self.advance(now);
        if let Some(since) = self.starved_since.take() {
            self.add_starved(since, self.now);
        }
        if self.first.is_none() {
            self.first = Some(now);
        }
        let slot = (self.head % BUCKETS as u64) as usize;
        if let Some(b) = self.buckets.get_mut(slot) {
            *b = b.saturating_add(bytes);
        }
        self.last_rate = self.rate_bps();
    }

    /// Bits per second over the window ending at the last `advance`/`record`, the starved
    /// time left out; when less than two buckets' time of the window was unstarved, the
    /// latest rate measured over more.
    pub fn rate_bps(&self) -> f64 {
        let Some(first) = self.first else { return 0.0 };
        let total: u64 = self.buckets.iter().sum();
        // The window covers the current bucket up to `now` plus nine full buckets.
        let span_us = (self.now - first).as_micros() as u64 + BUCKET_US;
        let span_us = span_us.min(BUCKETS as u64 * BUCKET_US);
        let ongoing = self.starved_since.map_or(0, |t| (self.now - t).as_micros() as u64);
        let starved: u64 = self.starved.iter().sum::<u64>() + ongoing.min(BUCKET_US);
        if starved == 0 {
            return total as f64 * 8.0 / (span_us as f64 / 1e6);
        }
        let fed = span_us.saturating_sub(starved);
        if fed < 2 * BUCKET_US {
            return self.last_rate;
        }
        total as f64 * 8.0 / (fed as f64 / 1e6)
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
    fn starved_time_is_left_out_of_the_rate() {
        let mut m = ReadRateMeter::new();
        // 2 Mbit/s (2500 bytes per 10 ms) for 500 ms, then starved 500 ms: still about
        // 2 Mbit/s (the window's edges are a bucket coarse, as for the plain meter), where
        // the plain meter halves.
        for i in 0..50u64 {
            m.record(Instant::from_micros(i * 10_000), 2500);
        }
        m.starve(Instant::from_micros(500_000));
        m.advance(Instant::from_micros(1_000_000));
        let r = m.rate_bps();
        assert!((r - 2e6).abs() < 0.45e6, "{r}");
        m.record(Instant::from_micros(1_000_000), 2500);
        let r = m.rate_bps();
        assert!((r - 2e6).abs() < 0.45e6, "{r}");
        // Starved for 2 s: the latest rate measured over enough fed time.
        m.starve(Instant::from_micros(1_000_001));
        m.advance(Instant::from_micros(3_000_000));
        assert!((m.rate_bps() - r).abs() < 1.0, "{}", m.rate_bps());
        // Without starve calls the meter is the plain one.
        let mut plain = ReadRateMeter::new();
        for i in 0..50u64 {
            plain.record(Instant::from_micros(i * 10_000), 2500);
        }
        plain.advance(Instant::from_micros(1_000_000));
        assert!(plain.rate_bps() < 1.2e6, "{}", plain.rate_bps());
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
