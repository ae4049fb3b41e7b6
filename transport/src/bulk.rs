//! The bulk byte stream: what a bulk transfer sends, and how its receiver checks what it read.
//!
//! A bulk stream is cut into messages of `message_bytes` bytes, numbered 0, 1, 2, … in send
//! order (as a [`crate::proto::Connection`] numbers them); only the last message of a
//! stream of limited length may be shorter. Message `id` carries the stream's bytes from
//! `id·message_bytes` on, and byte `i` of the stream is `i mod` [`PATTERN_PERIOD`]. The
//! period is prime, so a message read in the place of another one differs from what was
//! sent there (unless the message size is a multiple of the period).
//!
//! [`BulkSource`] makes the messages; [`BulkVerifier`] checks what the receiving
//! application read and counts what was wrong in a [`DeliveryCheck`]. Both are plain
//! values: the simulator's bulk workload and the real-time throughput tool use them alike.

use bytes::Bytes;

/// Period of the byte pattern (prime).
pub const PATTERN_PERIOD: usize = 251;

/// The default message size, bytes.
pub const MESSAGE_BYTES: usize = 16 * 1024;

/// The messages of one bulk stream.
#[derive(Clone, Debug)]
pub struct BulkSource {
    message_bytes: usize,
    total: Option<u64>,
    /// The pattern, long enough to slice any message from.
    pattern: Bytes,
}

impl BulkSource {
    /// A stream of `total` bytes (`None`: unlimited) in messages of `message_bytes` bytes
    /// (at least 1).
    pub fn new(message_bytes: usize, total: Option<u64>) -> BulkSource {
        let message_bytes = message_bytes.max(1);
        let pattern: Vec<u8> =
            (0..message_bytes + PATTERN_PERIOD).map(|i| (i % PATTERN_PERIOD) as u8).collect();
        BulkSource { message_bytes, total, pattern: Bytes::from(pattern) }
    }

    /// The size of every message but a limited stream's last.
    pub fn message_bytes(&self) -> usize {
        self.message_bytes
    }

    /// The stream's length, bytes (`None`: unlimited).
    pub fn total(&self) -> Option<u64> {
        self.total
    }

    /// The length of message `id`; `None` when the stream ends before it.
    pub fn len_of(&self, id: u64) -> Option<usize> {
        let Some(total) = self.total else { return Some(self.message_bytes) };
        let start = id.checked_mul(self.message_bytes as u64)?;
        let left = total.checked_sub(start).filter(|&left| left > 0)?;
        Some(left.min(self.message_bytes as u64) as usize)
    }

    /// Where message `id` starts in the pattern.
    fn offset(&self, id: u64) -> usize {
        let period = PATTERN_PERIOD as u64;
        ((id % period) * (self.message_bytes as u64 % period) % period) as usize
    }

    /// Message `id`'s bytes (a view of the pattern, no copy); `None` when the stream ends
    /// before it.
    pub fn message(&self, id: u64) -> Option<Bytes> {
        let len = self.len_of(id)?;
        let off = self.offset(id);
        Some(self.pattern.slice(off..off + len))
    }

    /// Whether `data` is exactly message `id`.
    pub fn matches(&self, id: u64, data: &[u8]) -> bool {
        match self.len_of(id) {
            Some(len) if len == data.len() => {
                let off = self.offset(id);
                self.pattern.get(off..off + len).is_some_and(|p| p == data)
            }
            _ => false,
        }
    }
}

/// What the receiving application saw, checked against what the sender sent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeliveryCheck {
    /// Messages read with an id other than the next expected one (includes duplicates).
    pub out_of_order: u64,
    /// Messages read with an id already read.
    pub duplicates: u64,
    /// Messages whose bytes differ from what was sent.
    pub corrupt: u64,
    /// Gaps (abandoned messages) read.
    pub gaps: u64,
}

impl DeliveryCheck {
    /// Everything arrived intact, in order, once.
    pub fn is_clean(&self) -> bool {
        *self == DeliveryCheck::default()
    }
}

/// The first thing wrong with one read, in the order [`BulkVerifier`] checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The message expected next, with the bytes sent.
    Intact,
    /// Another message than the one expected next (a duplicate when `expected` is larger
    /// than the id read).
    OutOfOrder {
        /// The id expected.
        expected: u64,
    },
    /// The expected message, but its bytes differ from what was sent.
    Corrupt,
    /// A gap: the sender abandoned the message.
    Gap,
}

/// Checks, message by message, what a bulk stream's receiver reads.
#[derive(Clone, Debug)]
pub struct BulkVerifier {
    source: BulkSource,
    check_content: bool,
    next_expected: u64,
    check: DeliveryCheck,
}

impl BulkVerifier {
    /// A verifier for the stream `source` makes. Without `check_content` only the order is
    /// checked (ids and gaps), not the bytes.
    pub fn new(source: BulkSource, check_content: bool) -> BulkVerifier {
        BulkVerifier { source, check_content, next_expected: 0, check: DeliveryCheck::default() }
    }

    /// Message `id` was read with `data`: counts what is wrong with it and says what was
    /// wrong first (the order, then the bytes).
    pub fn on_message(&mut self, id: u64, data: &[u8]) -> Verdict {
        let mut verdict = Verdict::Intact;
        if id != self.next_expected {
            self.check.out_of_order += 1;
            if id < self.next_expected {
                self.check.duplicates += 1;
            }
            verdict = Verdict::OutOfOrder { expected: self.next_expected };
        }
        self.next_expected = self.next_expected.max(id.saturating_add(1));
        if self.check_content && !self.source.matches(id, data) {
            self.check.corrupt += 1;
            if verdict == Verdict::Intact {
                verdict = Verdict::Corrupt;
            }
        }
        verdict
    }

    /// A gap was read where message `id` was.
    pub fn on_gap(&mut self, id: u64) -> Verdict {
        self.check.gaps += 1;
        self.next_expected = self.next_expected.max(id.saturating_add(1));
        Verdict::Gap
    }

    /// The id expected next.
    pub fn next_expected(&self) -> u64 {
        self.next_expected
    }

    /// What was wrong so far.
    pub fn check(&self) -> DeliveryCheck {
        self.check
    }

    /// The stream checked against.
    pub fn source(&self) -> &BulkSource {
        &self.source
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_continue_one_byte_counter() {
        let s = BulkSource::new(1000, None);
        let mut stream = Vec::new();
        for id in 0..600 {
            stream.extend_from_slice(&s.message(id).unwrap());
        }
        assert!(stream.iter().enumerate().all(|(i, &b)| b as usize == i % PATTERN_PERIOD));
    }

    #[test]
    fn a_limited_stream_ends_with_a_short_message() {
        let s = BulkSource::new(100, Some(250));
        assert_eq!(
            (s.len_of(0), s.len_of(1), s.len_of(2), s.len_of(3)),
            (Some(100), Some(100), Some(50), None)
        );
        assert_eq!(s.message(2).unwrap().len(), 50);
        assert!(s.message(3).is_none());
        assert!(BulkSource::new(100, Some(0)).message(0).is_none());
        assert!(BulkSource::new(100, Some(200)).len_of(u64::MAX).is_none());
    }

    #[test]
    fn the_verifier_names_the_first_problem_and_counts_them_all() {
        let s = BulkSource::new(MESSAGE_BYTES, None);
        let mut v = BulkVerifier::new(s.clone(), true);
        assert_eq!(v.on_message(0, &s.message(0).unwrap()), Verdict::Intact);
        // A message in another's place: wrong id and wrong bytes.
        assert_eq!(v.on_message(2, &s.message(1).unwrap()), Verdict::OutOfOrder { expected: 1 });
        assert_eq!(v.check(), DeliveryCheck { out_of_order: 1, corrupt: 1, ..Default::default() });
        // A duplicate.
        assert_eq!(v.on_message(0, &s.message(0).unwrap()), Verdict::OutOfOrder { expected: 3 });
        assert_eq!(v.check().duplicates, 1);
        // The right id, truncated or changed.
        let m = s.message(3).unwrap();
        assert_eq!(v.on_message(3, &m[..m.len() - 1]), Verdict::Corrupt);
        let mut changed = s.message(4).unwrap().to_vec();
        changed[7] ^= 1;
        assert_eq!(v.on_message(4, &changed), Verdict::Corrupt);
        assert_eq!(v.on_gap(5), Verdict::Gap);
        assert_eq!(v.next_expected(), 6);
        assert_eq!(
            v.check(),
            DeliveryCheck { out_of_order: 2, duplicates: 1, corrupt: 3, gaps: 1 }
        );
        assert!(!v.check().is_clean());
    }

    #[test]
    fn without_content_checks_only_the_order_counts() {
        let mut v = BulkVerifier::new(BulkSource::new(10, None), false);
        assert_eq!(v.on_message(0, b"anything"), Verdict::Intact);
        assert!(v.check().is_clean());
    }
}
