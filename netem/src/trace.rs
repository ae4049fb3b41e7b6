//! mahimahi packet-delivery traces.
//!
//! Format (as mahimahi's `mm-link` reads it): one integer per line, a timestamp in
//! milliseconds; each line is one opportunity to deliver [`OPPORTUNITY_BYTES`] bytes.
//! Several opportunities in one millisecond repeat the timestamp. The trace loops with a
//! period equal to its last timestamp: opportunity `i` of loop `L` happens at
//! `L·period + t_i` ms.

use std::sync::Arc;

/// Bytes of delivery capacity per trace line.
pub const OPPORTUNITY_BYTES: u64 = 1500;

/// A parsed mahimahi trace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Trace {
    ts_ms: Vec<u64>,
}

/// A malformed trace.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TraceError {
    /// A line that is not a non-negative integer.
    #[error("line {line}: not a millisecond timestamp: `{text}`")]
    BadLine {
        /// 1-based line number.
        line: usize,
        /// The offending text (truncated).
        text: String,
    },
    /// A timestamp smaller than the one before it.
    #[error("line {line}: timestamp {ts} is earlier than the previous one")]
    NotSorted {
        /// 1-based line number.
        line: usize,
        /// The timestamp.
        ts: u64,
    },
    /// No lines, or a last timestamp of 0 (the loop period would be zero).
    #[error("trace is empty or its last timestamp is 0 (zero loop period)")]
    Empty,
}

impl Trace {
    /// Parses mahimahi text. Blank lines are ignored.
    pub fn parse(text: &str) -> Result<Trace, TraceError> {
        let mut ts_ms = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() {
                continue;
            }
            let ts: u64 = line.parse().map_err(|_| TraceError::BadLine {
                line: i + 1,
                text: line.chars().take(40).collect(),
            })?;
            if ts_ms.last().is_some_and(|&prev| ts < prev) {
                return Err(TraceError::NotSorted { line: i + 1, ts });
            }
            ts_ms.push(ts);
        }
        Trace::from_millis(ts_ms)
    }

    /// A trace from sorted millisecond timestamps.
    pub fn from_millis(ts_ms: Vec<u64>) -> Result<Trace, TraceError> {
        if ts_ms.windows(2).any(|w| w[1] < w[0]) {
            let line = ts_ms.windows(2).position(|w| w[1] < w[0]).map_or(0, |p| p + 2);
            return Err(TraceError::NotSorted {
                line,
                ts: ts_ms.get(line.saturating_sub(1)).copied().unwrap_or(0),
            });
        }
        match ts_ms.last() {
            Some(&last) if last > 0 => Ok(Trace { ts_ms }),
            _ => Err(TraceError::Empty),
        }
    }

    /// Wraps in an [`Arc`] for sharing between links.
    pub fn shared(self) -> Arc<Trace> {
        Arc::new(self)
    }

    /// Number of delivery opportunities per loop.
    pub fn opportunities(&self) -> usize {
        self.ts_ms.len()
    }

    /// The opportunities of one loop, milliseconds, sorted.
    pub fn timestamps_ms(&self) -> &[u64] {
        &self.ts_ms
    }

    /// Loop period in milliseconds (the last timestamp).
    pub fn period_ms(&self) -> u64 {
        self.ts_ms.last().copied().unwrap_or(1).max(1)
    }

    /// Mean capacity over one loop, bits per second.
    pub fn mean_rate_bps(&self) -> f64 {
        self.ts_ms.len() as f64 * OPPORTUNITY_BYTES as f64 * 8.0
            / (self.period_ms() as f64 / 1000.0)
    }

    /// Time of global opportunity `k` (loop `k / n`, line `k % n`) in milliseconds, or
    /// `None` when `once` and `k` is past the end.
    pub(crate) fn time_ms(&self, k: u64, once: bool) -> Option<u64> {
        let n = self.ts_ms.len() as u64;
        if n == 0 || (once && k >= n) {
            return None;
        }
        let lp = k / n;
        let i = usize::try_from(k % n).ok()?;
        let t = self.ts_ms.get(i)?;
        lp.checked_mul(self.period_ms())?.checked_add(*t)
    }

    /// The smallest global opportunity index whose time is ≥ `t_ms`.
    pub(crate) fn first_at_or_after(&self, t_ms: u64, once: bool) -> Option<u64> {
        let n = self.ts_ms.len() as u64;
        let period = self.period_ms();
        let l0 = if once { 0 } else { (t_ms / period).saturating_sub(1) };
        let loops = if once { 1 } else { 3 };
        for lp in l0..l0 + loops {
            let base = lp * period;
            let i = self.ts_ms.partition_point(|&t| base + t < t_ms) as u64;
            if i < n {
                return Some(lp * n + i);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_line_one_is_a_12_mbit_link() {
        let t = Trace::parse("1\n").unwrap();
        assert_eq!(t.period_ms(), 1);
        assert!((t.mean_rate_bps() - 12e6).abs() < 1.0);
        assert_eq!(t.time_ms(0, false), Some(1));
        assert_eq!(t.time_ms(5, false), Some(6));
        assert_eq!(t.first_at_or_after(1, false), Some(0));
        assert_eq!(t.first_at_or_after(2, false), Some(1));
    }

    #[test]
    fn loop_boundaries_keep_every_opportunity() {
        // Period 10: opportunities at 0, 5, 10 | 10, 15, 20 | 20, 25, 30 ...
        let t = Trace::parse("0\n5\n10\n").unwrap();
        let times: Vec<u64> = (0..7).map(|k| t.time_ms(k, false).unwrap()).collect();
        assert_eq!(times, vec![0, 5, 10, 10, 15, 20, 20]);
        assert_eq!(t.first_at_or_after(10, false), Some(2));
        assert_eq!(t.first_at_or_after(11, false), Some(4));
        assert_eq!(t.first_at_or_after(11, true), None);
    }

    #[test]
    fn malformed_traces_are_rejected_with_line_numbers() {
        assert_eq!(Trace::parse("1\nx\n"), Err(TraceError::BadLine { line: 2, text: "x".into() }));
        assert_eq!(Trace::parse("5\n3\n"), Err(TraceError::NotSorted { line: 2, ts: 3 }));
        assert_eq!(Trace::parse(""), Err(TraceError::Empty));
        assert_eq!(Trace::parse("0\n0\n"), Err(TraceError::Empty));
    }
}
