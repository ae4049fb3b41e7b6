//! Send side of the message stream: queued messages, what is unsent, what must be
//! retransmitted, partial reliability and the peer's flow-control limit.
//!
//! Messages are consecutive byte ranges of one stream. A message leaves the queue once it
//! is fully acknowledged or abandoned *and* every earlier message has left too; the start
//! of the first remaining message is therefore the cumulative point an ABANDON frame
//! announces (everything below is acknowledged or abandoned).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::ops::Range;

use bytes::Bytes;

use super::ranges::{RangeSet, Ranges};
use crate::time::Instant;

/// Per-message delivery guarantee.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reliability {
    /// Retransmitted until acknowledged.
    Reliable,
    /// Abandoned (the receiver sees a [`super::Delivery::Gap`]) once `at` has passed or
    /// after `max_retransmissions` retransmissions were lost too. The proxy paper's "one
    /// retransmission" is `max_retransmissions = 1`.
    Deadline {
        /// The deadline.
        at: Instant,
        /// How many times lost bytes of the message are re-sent before giving up.
        max_retransmissions: u32,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum EmptyState {
    Unsent,
    Sent,
    Acked,
}

#[derive(Debug, Clone)]
struct OutMessage {
    id: u64,
    start: u64,
    data: Bytes,
    reliability: Reliability,
    retransmissions: u32,
    abandoned: bool,
    /// Only meaningful for zero-length messages, whose byte range cannot record progress.
    empty: EmptyState,
}

impl OutMessage {
    fn end(&self) -> u64 {
        self.start + self.data.len() as u64
    }

    /// Its bytes `start..end` (stream offsets within it) as a chunk to send; an empty
    /// range of an empty message is the message itself.
    fn chunk(&self, start: u64, end: u64, retransmission: bool) -> Chunk {
        let (a, b) = ((start - self.start) as usize, (end - self.start) as usize);
        Chunk {
            message_id: self.id,
            message_start: self.start,
            message_len: self.data.len() as u64,
            offset: start,
            data: self.data.slice(a..b),
            retransmission,
        }
    }
}

/// A piece of a message chosen for the next DATA frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    /// Message id.
    pub message_id: u64,
    /// Message start offset.
    pub message_start: u64,
    /// Message length.
    pub message_len: u64,
    /// Stream offset of the piece.
    pub offset: u64,
    /// The bytes.
    pub data: Bytes,
    /// Whether these bytes were sent before.
    pub retransmission: bool,
}

impl Chunk {
    /// The stream range the chunk covers.
    pub fn range(&self) -> Range<u64> {
        self.offset..self.offset + self.data.len() as u64
    }
}

/// The outgoing message stream.
#[derive(Debug, Clone)]
pub struct SendStream {
    messages: VecDeque<OutMessage>,
    next_id: u64,
    next_offset: u64,
    /// First message with bytes never sent, and the first such byte.
    unsent_id: u64,
    unsent: u64,
    retransmit: RangeSet,
    retransmit_empty: BTreeSet<u64>,
    /// New bytes sent ahead of `unsent` ([`SendStream::next_chunk_ahead`]); the in-order
    /// walk of new bytes skips them.
    ahead: RangeSet,
    acked: RangeSet,
    max_data: u64,
    /// This side's own limit on queued or unacknowledged bytes, whatever the peer allows.
    send_buffer: u64,
    deadlines: BTreeSet<(Instant, u64)>,
    max_abandoned: Option<u64>,
    abandon_sent_next: u64,
    abandon_force: bool,
    abandoned_count: u64,
    /// Messages with ids from here on wait (the peer's MAX_STREAMS, when messages travel
    /// on v1 streams: [`super::mapping`]); unlimited otherwise.
    max_messages: u64,
    /// When messages travel on v1 streams: abandoned messages whose RESET_STREAM is due,
    /// id → length (no ABANDON frame then).
    resets: Option<BTreeMap<u64, u64>>,
    /// Bytes the peer takes of each message (its per-stream limit when messages travel on
    /// v1 streams; unlimited otherwise), and the messages whose limit it raised.
    message_limit: u64,
    raised: BTreeMap<u64, u64>,
}

impl SendStream {
    /// An empty stream; the peer allows `max_data` bytes initially.
    pub fn new(max_data: u64) -> Self {
        SendStream {
            messages: VecDeque::new(),
            next_id: 0,
            next_offset: 0,
            unsent_id: 0,
            unsent: 0,
            retransmit: RangeSet::new(),
            retransmit_empty: BTreeSet::new(),
            ahead: RangeSet::new(),
            acked: RangeSet::new(),
            max_data,
            send_buffer: u64::MAX,
            deadlines: BTreeSet::new(),
            max_abandoned: None,
            abandon_sent_next: 0,
            abandon_force: false,
            abandoned_count: 0,
            max_messages: u64::MAX,
            resets: None,
            message_limit: u64::MAX,
            raised: BTreeMap::new(),
        }
    }

    /// Messages travel on QUIC v1 streams ([`super::mapping`]): at most `max_messages` of
    /// them are sent until [`SendStream::set_max_messages`] raises it, and an abandoned
    /// message is reset on its own ([`SendStream::next_reset`]) instead of announced with
    /// ABANDON.
    pub fn use_streams(&mut self, max_messages: u64, message_limit: u64) {
        self.max_messages = max_messages;
        self.message_limit = message_limit;
        self.resets.get_or_insert_with(BTreeMap::new);
    }

    /// The peer raised message `id`'s limit to `max` bytes (MAX_STREAM_DATA); a message
    /// longer than its limit is sent up to it and waits there.
    pub fn raise_message_limit(&mut self, id: u64, max: u64) {
        if self.resets.is_none() || max <= self.message_limit || id < self.front().1 {
            return;
        }
        let l = self.raised.entry(id).or_insert(max);
        *l = (*l).max(max);
    }

    /// One past the last stream offset of message `m` the peer takes now.
    fn cap(&self, m: &OutMessage) -> u64 {
        let limit = self.raised.get(&m.id).copied().unwrap_or(self.message_limit);
        m.start.saturating_add(limit)
    }

    /// Raises the number of messages that may be sent (the peer's MAX_STREAMS).
    pub fn set_max_messages(&mut self, max: u64) {
        if self.resets.is_some() {
            self.max_messages = self.max_messages.max(max);
        }
    }

    /// Messages with ids below this may be sent.
    pub fn max_messages(&self) -> u64 {
        self.max_messages
    }

    /// The next RESET_STREAM due, `(message id, message length)`, taken off the queue
    /// (streams the peer allows only).
    pub fn next_reset(&mut self) -> Option<(u64, u64)> {
        let resets = self.resets.as_mut()?;
        let (&id, _) = resets.first_key_value().filter(|(id, _)| **id < self.max_messages)?;
        resets.remove(&id).map(|len| (id, len))
    }

    /// A RESET_STREAM was lost: it is due again.
    pub fn reset_lost(&mut self, id: u64, len: u64) {
        if let Some(r) = self.resets.as_mut() {
            r.insert(id, len);
        }
    }

    /// Whether a RESET_STREAM is due.
    pub fn wants_reset(&self) -> bool {
        self.resets
            .as_ref()
            .and_then(|r| r.first_key_value())
            .is_some_and(|(id, _)| *id < self.max_messages)
    }

    /// The peer asked that message `id` be no longer sent (STOP_SENDING): it is abandoned
    /// unless it was already fully acknowledged.
    pub fn stop(&mut self, id: u64) {
        if let Some(i) = self.index_of_id(id)
            && self.messages.get(i).is_some_and(|m| !self.is_done(m))
        {
            self.abandon_index(i);
        }
    }

    /// Raises the peer's limit (MAX_DATA).
    pub fn set_max_data(&mut self, max: u64) {
        self.max_data = self.max_data.max(max);
    }

    /// The peer's limit.
    pub fn max_data(&self) -> u64 {
        self.max_data
    }

    /// Sets this side's send buffer: however large a window the peer advertises, at most
    /// this many bytes are queued or unacknowledged at once (so no message may be larger).
    pub fn set_send_buffer(&mut self, bytes: u64) {
        self.send_buffer = bytes.max(1);
    }

    /// Bytes queued or unacknowledged (from the first message not yet released).
    pub fn buffered(&self) -> u64 {
        self.next_offset - self.front().0
    }

    /// Bytes that may be queued now: the peer's window minus what is queued or
    /// unacknowledged, clamped by the send buffer ([`SendStream::set_send_buffer`]).
    pub fn capacity(&self) -> u64 {
        let peer = self.max_data.saturating_sub(self.next_offset);
        peer.min(self.send_buffer.saturating_sub(self.buffered()))
    }

    /// Messages abandoned so far.
    pub fn abandoned_count(&self) -> u64 {
        self.abandoned_count
    }

    /// Messages not yet released (unsent, in flight, or waiting for an earlier one).
    pub fn queued_messages(&self) -> usize {
        self.messages.len()
    }

    /// `(stream offset, message id)` of the first message not yet released.
    fn front(&self) -> (u64, u64) {
        self.messages.front().map_or((self.next_offset, self.next_id), |m| (m.start, m.id))
    }

    /// Queues a message; the caller checked [`SendStream::capacity`].
    pub fn push(&mut self, data: Bytes, reliability: Reliability) -> u64 {
        let id = self.next_id;
        let start = self.next_offset;
        self.next_id += 1;
        self.next_offset += data.len() as u64;
        if let Reliability::Deadline { at, .. } = reliability {
            self.deadlines.insert((at, id));
        }
        self.messages.push_back(OutMessage {
            id,
            start,
            data,
            reliability,
            retransmissions: 0,
            abandoned: false,
            empty: EmptyState::Unsent,
        });
        id
    }

    fn index_of_offset(&self, off: u64) -> Option<usize> {
        let i = self.messages.partition_point(|m| m.end() <= off);
        (i < self.messages.len()).then_some(i)
    }

    fn index_of_id(&self, id: u64) -> Option<usize> {
        let first = self.messages.front()?.id;
        let i = usize::try_from(id.checked_sub(first)?).ok()?;
        (i < self.messages.len()).then_some(i)
    }

    /// Whether anything may be waiting to be sent (lost bytes or new bytes).
    pub fn has_data(&self) -> bool {
        !self.retransmit.is_empty()
            || !self.retransmit_empty.is_empty()
            || (self.unsent_id < self.next_id.min(self.max_messages) && !self.at_message_limit())
    }

    /// Whether the next new bytes wait for the peer to raise their message's limit.
    fn at_message_limit(&self) -> bool {
        let (front_off, front_id) = self.front();
        let (id, off) = if self.unsent_id < front_id {
            (front_id, front_off)
        } else {
            (self.unsent_id, self.unsent)
        };
        self.index_of_id(id)
            .and_then(|i| self.messages.get(i))
            .is_some_and(|m| !m.abandoned && !m.data.is_empty() && off.max(m.start) >= self.cap(m))
    }

    /// New bytes queued but never sent (lost bytes waiting for retransmission not
    /// included): the backlog a scheduler weighs against waiting for a faster path.
    pub fn unsent_bytes(&self) -> u64 {
        let from = self.unsent.max(self.front().0);
        self.ahead.missing_in(from..self.next_offset).iter().map(|r| r.end - r.start).sum()
    }

    /// Takes a piece of new bytes out of order: at most `max_len` bytes of one message,
    /// starting after the first `skip` bytes that are still unsent (bytes already sent
    /// ahead do not count). The in-order walk of [`SendStream::next_chunk`] later skips
    /// what was taken here. `None` when fewer than `skip` + 1 unsent bytes exist, or the
    /// piece would fall in an abandoned or empty message. A scheduler that assigns packets
    /// to paths ahead of time (EDPF, S-EDPF) sends this way on a path whose turn comes
    /// before the packets ahead of it.
    pub fn next_chunk_ahead(&mut self, skip: u64, max_len: usize) -> Option<Chunk> {
        if max_len == 0 {
            return None;
        }
        let from = self.unsent.max(self.front().0);
        let mut left = skip;
        let mut at = None;
        for gap in self.ahead.missing_in(from..self.next_offset) {
            let len = gap.end - gap.start;
            if left < len {
                at = Some((gap.start + left, gap.end));
                break;
            }
            left -= len;
        }
        let (start, gap_end) = at?;
        let i = self.index_of_offset(start)?;
        let m = self.messages.get(i)?;
        let cap = self.cap(m);
        if m.abandoned
            || m.data.is_empty()
            || start < m.start
            || m.id >= self.max_messages
            || start >= cap
        {
            return None;
        }
        let end = m.end().min(gap_end).min(start + max_len as u64).min(cap);
        self.ahead.insert(start..end);
        Some(m.chunk(start, end, false))
    }

    /// The peer's window left from the oldest unreleased byte, bytes.
    pub fn window_bytes(&self) -> u64 {
        self.max_data.saturating_sub(self.front().0)
    }

    /// Whether lost bytes wait for retransmission.
    pub fn has_retransmissions(&self) -> bool {
        !self.retransmit.is_empty() || !self.retransmit_empty.is_empty()
    }

    /// Takes the next piece to send, at most `max_len` bytes of one message: lost bytes
    /// first, then new bytes.
    pub fn next_chunk(&mut self, max_len: usize) -> Option<Chunk> {
        while let Some(id) = self.retransmit_empty.pop_first() {
            if let Some(m) = self.index_of_id(id).and_then(|i| self.messages.get(i))
                && !m.abandoned
                && m.empty != EmptyState::Acked
            {
                return Some(m.chunk(m.start, m.start, true));
            }
        }
        while let Some(r) = self.retransmit.first() {
            let Some(m) = self.index_of_offset(r.start).and_then(|i| self.messages.get(i)) else {
                self.retransmit.pop_first();
                continue;
            };
            if m.abandoned || m.start > r.start {
                let end = if m.start > r.start { m.start } else { m.end() };
                self.retransmit.remove(r.start..end);
                continue;
            }
            let end = r.end.min(m.end()).min(r.start + max_len as u64);
            if end <= r.start {
                return None;
            }
            self.retransmit.remove(r.start..end);
            return Some(m.chunk(r.start, end, true));
        }
        loop {
            let (front_off, front_id) = self.front();
            if self.unsent_id < front_id {
                self.unsent_id = front_id;
                self.unsent = front_off;
            }
            if self.unsent_id >= self.max_messages {
                return None;
            }
            let i = self.index_of_id(self.unsent_id)?;
            let cap = self.messages.get(i).map(|m| self.cap(m))?;
            let m = self.messages.get_mut(i)?;
            let start = self.unsent.max(m.start);
            if m.abandoned || (start >= m.end() && !m.data.is_empty()) {
                self.unsent_id += 1;
                self.unsent = m.end();
                continue;
            }
            if m.data.is_empty() {
                m.empty = EmptyState::Sent;
                self.unsent_id += 1;
                return Some(m.chunk(m.start, m.start, false));
            }
            if max_len == 0 {
                return None;
            }
            if start >= cap {
                // The peer's limit for this message's stream: it waits for MAX_STREAM_DATA.
                return None;
            }
            // Skip what was sent ahead; stop before the next piece sent ahead.
            let mut end = m.end().min(start + max_len as u64).min(cap);
            if !self.ahead.is_empty() {
                let m_end = m.end();
                match self.ahead.missing_in(start..m_end).first() {
                    None => {
                        self.unsent = m_end;
                        self.unsent_id += 1;
                        continue;
                    }
                    Some(g) if g.start > start => {
                        self.unsent = g.start;
                        continue;
                    }
                    Some(g) => end = end.min(g.end),
                }
                self.ahead.remove(0..start);
            }
            self.unsent = end;
            if end == m.end() {
                self.unsent_id += 1;
            }
            return Some(m.chunk(start, end, false));
        }
    }

    /// A DATA frame (message `id`, stream `range`) was acknowledged.
    pub fn on_acked(&mut self, id: u64, range: Range<u64>) {
        if range.is_empty() {
            if let Some(i) = self.index_of_id(id)
                && let Some(m) = self.messages.get_mut(i)
            {
                m.empty = EmptyState::Acked;
            }
        } else {
            self.retransmit.remove(range.clone());
            self.acked.insert(range);
        }
        self.release();
    }

    /// DATA frames were declared lost. Each message whose bytes are lost counts one
    /// retransmission per call; a message out of retransmissions is abandoned instead.
    /// Returns the number of bytes queued for retransmission.
    pub fn on_lost(&mut self, frames: &[(u64, Range<u64>)]) -> u64 {
        let mut counted: Vec<u64> = Vec::new();
        let mut queued = 0;
        for (id, range) in frames {
            let Some(i) = self.index_of_id(*id) else {
                continue;
            };
            let Some(m) = self.messages.get_mut(i) else {
                continue;
            };
            if m.abandoned {
                continue;
            }
            let missing = if range.is_empty() {
                if m.empty == EmptyState::Acked {
                    Ranges::new()
                } else {
                    smallvec::smallvec![range.clone()]
                }
            } else {
                self.acked.missing_in(range.clone())
            };
            if missing.is_empty() {
                continue;
            }
            if !counted.contains(id) {
                counted.push(*id);
                if let Reliability::Deadline { max_retransmissions, .. } = m.reliability
                    && m.retransmissions >= max_retransmissions
                {
                    self.abandon_index(i);
                    continue;
                }
                m.retransmissions = m.retransmissions.saturating_add(1);
            }
            if range.is_empty() {
                self.retransmit_empty.insert(*id);
            }
            for r in missing {
                queued += r.end - r.start;
                self.retransmit.insert(r);
            }
        }
        queued
    }

    fn abandon_index(&mut self, i: usize) {
        let Some(m) = self.messages.get_mut(i) else {
            return;
        };
        if m.abandoned {
            return;
        }
        m.abandoned = true;
        self.abandoned_count += 1;
        if let Some(r) = self.resets.as_mut() {
            r.insert(m.id, m.data.len() as u64);
        }
        self.max_abandoned = Some(self.max_abandoned.map_or(m.id, |a| a.max(m.id)));
        let (start, end, id) = (m.start, m.end(), m.id);
        self.retransmit.remove(start..end);
        self.retransmit_empty.remove(&id);
        self.release();
    }

    /// Abandons every deadline message whose deadline is at or before `now` and that is
    /// not fully acknowledged. Returns how many were abandoned.
    pub fn expire(&mut self, now: Instant) -> u64 {
        let before = self.abandoned_count;
        while let Some(&(at, id)) = self.deadlines.first() {
            if at > now {
                break;
            }
            self.deadlines.pop_first();
            let Some(i) = self.index_of_id(id) else {
                continue;
            };
            // A message the peer already has in full is not abandoned.
            if self.messages.get(i).is_some_and(|m| !self.is_done(m)) {
                self.abandon_index(i);
            }
        }
        self.abandoned_count - before
    }

    /// The earliest pending deadline.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.deadlines.first().map(|d| d.0)
    }

    fn is_done(&self, m: &OutMessage) -> bool {
        m.abandoned
            || (self.acked.contains_range(m.start..m.end())
                && (!m.data.is_empty() || m.empty == EmptyState::Acked))
    }

    /// Releases finished messages from the front.
    fn release(&mut self) {
        let mut released = false;
        while let Some(m) = self.messages.front() {
            if !self.is_done(m) {
                break;
            }
            if let Reliability::Deadline { at, .. } = m.reliability {
                self.deadlines.remove(&(at, m.id));
            }
            self.messages.pop_front();
            released = true;
        }
        if released {
            let (off, id) = self.front();
            self.acked.remove(0..off);
            self.ahead.remove(0..off);
            self.raised = self.raised.split_off(&id);
        }
    }

    /// The ABANDON frame due, if any: `(offset, next message)` = the first message not
    /// yet released (everything below is acknowledged or abandoned).
    pub fn pending_abandon(&self) -> Option<(u64, u64)> {
        if self.resets.is_some() {
            return None;
        }
        let (off, id) = self.front();
        let uncovered = self.max_abandoned.is_some_and(|a| a >= self.abandon_sent_next)
            && id > self.abandon_sent_next;
        let resend = self.abandon_force && self.abandon_sent_next > 0;
        (uncovered || resend).then_some((off, id))
    }

    /// Whether an ABANDON frame is due.
    pub fn wants_abandon(&self) -> bool {
        self.pending_abandon().is_some()
    }

    /// Records that the ABANDON frame covering messages below `next_message` went out.
    pub fn abandon_sent(&mut self, next_message: u64) {
        self.abandon_force = false;
        self.abandon_sent_next = self.abandon_sent_next.max(next_message);
    }

    /// [`SendStream::pending_abandon`], marked sent.
    pub fn poll_abandon(&mut self) -> Option<(u64, u64)> {
        let v = self.pending_abandon()?;
        self.abandon_sent(v.1);
        Some(v)
    }

    /// Upper bound of every message id assigned so far.
    pub fn next_id_hint(&self) -> u64 {
        self.next_id
    }

    /// Upper bound of every stream offset assigned so far.
    pub fn next_offset_hint(&self) -> u64 {
        self.next_offset
    }

    /// Whether the bytes need no (re)sending: acknowledged, abandoned or released.
    pub fn is_settled(&self, id: u64, range: Range<u64>) -> bool {
        let Some(m) = self.index_of_id(id).and_then(|i| self.messages.get(i)) else {
            return true;
        };
        m.abandoned
            || (self.acked.contains_range(range.clone())
                && (!range.is_empty() || m.empty == EmptyState::Acked))
    }

    /// A copy of the bytes `range` of message `id` (clipped to the message), for sending
    /// them again on purpose; `None` when they need no sending (settled) or are empty.
    /// Changes nothing: the bytes stay where they are in the send order.
    pub fn copy_of(&self, id: u64, range: Range<u64>) -> Option<Chunk> {
        let m = self.index_of_id(id).and_then(|i| self.messages.get(i))?;
        let (start, end) = (range.start.max(m.start), range.end.min(m.end()));
        if m.abandoned || start >= end || self.acked.contains_range(start..end) {
            return None;
        }
        Some(m.chunk(start, end, false))
    }

    /// A packet carrying an ABANDON frame was lost: send the current one again.
    pub fn on_abandon_lost(&mut self) {
        self.abandon_force = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(n: usize) -> Bytes {
        Bytes::from(vec![7u8; n])
    }

    #[test]
    fn on_v1_streams_a_message_waits_at_its_streams_limit_and_the_count_of_streams() {
        let mut s = SendStream::new(100_000);
        s.use_streams(2, 1000);
        for len in [3000, 10, 10] {
            s.push(b(len), Reliability::Reliable);
        }
        let mut sent = Vec::new();
        while let Some(c) = s.next_chunk(600) {
            sent.push((c.message_id, c.range()));
        }
        assert_eq!(sent, [(0, 0..600), (0, 600..1000)], "message 0 up to its limit");
        assert!(!s.has_data(), "nothing to send until MAX_STREAM_DATA");
        assert!(s.next_chunk_ahead(0, 600).is_none());
        s.raise_message_limit(0, 2500);
        assert!(s.has_data());
        let c = s.next_chunk(5000).unwrap();
        assert_eq!(c.range(), 1000..2500);
        s.raise_message_limit(0, 3000);
        s.raise_message_limit(0, 2000);
        assert_eq!(s.next_chunk(5000).unwrap().range(), 2500..3000, "a lower limit is no limit");
        // Message 1 may go (2 streams), message 2 waits for MAX_STREAMS.
        assert_eq!(s.next_chunk(5000).unwrap().message_id, 1);
        assert!(s.next_chunk(5000).is_none() && !s.has_data());
        s.set_max_messages(3);
        assert_eq!(s.next_chunk(5000).unwrap().message_id, 2);
    }

    #[test]
    fn bytes_sent_ahead_are_skipped_by_the_in_order_walk() {
        let mut s = SendStream::new(1000);
        for _ in 0..4 {
            s.push(b(10), Reliability::Reliable);
        }
        assert_eq!(s.unsent_bytes(), 40);
        // Skip 25 unsent bytes: the piece starts in message 2 and ends at its boundary.
        let c = s.next_chunk_ahead(25, 100).unwrap();
        assert_eq!((c.message_id, c.range(), c.retransmission), (2, 25..30, false));
        assert_eq!(s.unsent_bytes(), 35);
        // Skip 25 again: bytes sent ahead do not count, so it continues after them.
        let c = s.next_chunk_ahead(25, 3).unwrap();
        assert_eq!((c.message_id, c.range()), (3, 30..33));
        assert!(s.next_chunk_ahead(40, 100).is_none(), "beyond the backlog");
        // In order: 0..25, then 33..40; nothing twice.
        let mut got = Vec::new();
        while let Some(c) = s.next_chunk(8) {
            got.push(c.range());
        }
        assert_eq!(got, [0..8, 8..10, 10..18, 18..20, 20..25, 33..40]);
        assert_eq!(s.unsent_bytes(), 0);
        assert!(!s.has_data());
    }

    #[test]
    fn a_message_sent_wholly_ahead_is_skipped() {
        let mut s = SendStream::new(1000);
        for _ in 0..3 {
            s.push(b(10), Reliability::Reliable);
        }
        let c = s.next_chunk_ahead(10, 100).unwrap();
        assert_eq!(c.range(), 10..20);
        let a = s.next_chunk(100).unwrap();
        let c = s.next_chunk(100).unwrap();
        assert_eq!((a.range(), c.range()), (0..10, 20..30));
        assert!(s.next_chunk(100).is_none());
        // Acknowledging everything releases every message.
        for (id, r) in [(0, 0..10), (1, 10..20), (2, 20..30)] {
            s.on_acked(id, r);
        }
        assert_eq!(s.queued_messages(), 0);
    }

    #[test]
    fn new_bytes_are_cut_at_message_boundaries() {
        let mut s = SendStream::new(1000);
        s.push(b(10), Reliability::Reliable);
        s.push(b(10), Reliability::Reliable);
        let c = s.next_chunk(15).unwrap();
        assert_eq!((c.message_id, c.range()), (0, 0..10));
        let c = s.next_chunk(4).unwrap();
        assert_eq!((c.message_id, c.range()), (1, 10..14));
        let c = s.next_chunk(100).unwrap();
        assert_eq!((c.message_id, c.range()), (1, 14..20));
        assert!(s.next_chunk(100).is_none());
        assert_eq!(s.capacity(), 980);
    }

    #[test]
    fn lost_bytes_come_back_first_and_acks_release_messages() {
        let mut s = SendStream::new(1000);
        s.push(b(10), Reliability::Reliable);
        s.push(b(10), Reliability::Reliable);
        let c0 = s.next_chunk(100).unwrap();
        let c1 = s.next_chunk(100).unwrap();
        s.on_acked(1, c1.range());
        assert_eq!(s.queued_messages(), 2);
        assert_eq!(s.on_lost(&[(0, c0.range())]), 10);
        let r = s.next_chunk(100).unwrap();
        assert!(r.retransmission);
        assert_eq!(r.range(), 0..10);
        s.on_acked(0, r.range());
        assert_eq!(s.queued_messages(), 0);
        assert!(!s.has_data());
    }

    #[test]
    fn deadline_messages_are_abandoned_and_announced() {
        let mut s = SendStream::new(1000);
        let at = Instant::from_micros(100);
        s.push(b(10), Reliability::Deadline { at, max_retransmissions: 5 });
        s.push(b(10), Reliability::Reliable);
        let c0 = s.next_chunk(100).unwrap();
        let c1 = s.next_chunk(100).unwrap();
        s.on_acked(1, c1.range());
        assert_eq!(s.next_deadline(), Some(at));
        assert_eq!(s.expire(Instant::from_micros(99)), 0);
        assert_eq!(s.expire(at), 1);
        assert_eq!(s.on_lost(&[(0, c0.range())]), 0);
        assert!(s.wants_abandon());
        assert_eq!(s.poll_abandon(), Some((20, 2)));
        assert!(!s.wants_abandon());
        s.on_abandon_lost();
        assert_eq!(s.poll_abandon(), Some((20, 2)));
    }

    #[test]
    fn acknowledged_messages_are_not_abandoned_at_their_deadline() {
        let mut s = SendStream::new(1000);
        let at = Instant::from_micros(100);
        s.push(b(10), Reliability::Reliable);
        s.push(b(10), Reliability::Deadline { at, max_retransmissions: 5 });
        let _c0 = s.next_chunk(100).unwrap();
        let c1 = s.next_chunk(100).unwrap();
        s.on_acked(1, c1.range());
        assert_eq!(s.expire(at), 0);
        assert!(!s.wants_abandon());
    }

    #[test]
    fn retransmission_budget_is_enforced() {
        let mut s = SendStream::new(1000);
        s.push(
            b(10),
            Reliability::Deadline { at: Instant::from_micros(u64::MAX), max_retransmissions: 1 },
        );
        let c = s.next_chunk(100).unwrap();
        assert_eq!(s.on_lost(&[(0, c.range())]), 10);
        let c = s.next_chunk(100).unwrap();
        assert_eq!(s.on_lost(&[(0, c.range())]), 0);
        assert_eq!(s.abandoned_count(), 1);
        assert_eq!(s.poll_abandon(), Some((10, 1)));
    }

    #[test]
    fn zero_length_messages_are_sent_and_released() {
        let mut s = SendStream::new(1000);
        s.push(Bytes::new(), Reliability::Reliable);
        let c = s.next_chunk(100).unwrap();
        assert_eq!((c.message_id, c.message_len), (0, 0));
        assert!(s.next_chunk(100).is_none());
        s.on_lost(&[(0, 0..0)]);
        let c = s.next_chunk(100).unwrap();
        assert!(c.retransmission);
        s.on_acked(0, 0..0);
        assert_eq!(s.queued_messages(), 0);
    }
}
