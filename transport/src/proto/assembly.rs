//! Receive side of the message stream: bounded in-order reassembly, message delivery with
//! gaps for abandoned messages, and the flow-control window.
//!
//! Each message being received has a buffer of its own, reserved at its first fragment
//! with the length the DATA frames announce; fragments are copied straight into it, and
//! a complete message is handed to the application as that buffer (no second copy, no
//! allocation or map entry per fragment). A received datagram is therefore never kept.
//!
//! The stream's bytes are accepted only inside `[floor, floor + capacity)`, where `floor`
//! is the offset below which everything was read by the application or skipped. The
//! advertised limit ([`Assembler::max_data`]) is `floor + capacity`, so the window the
//! sender sees (limit minus what it has sent) is exactly the free buffer space: a slow
//! reader slows the sender. Memory is bounded whatever the peer claims: the messages'
//! reserved buffers together never exceed `capacity` (an honest sender's messages are
//! disjoint and inside the window, so they never do), at most `capacity / 64` disjoint
//! fragments are tracked and at most `max(1024, capacity / 64)` messages are pending
//! (frames beyond those bounds are rejected as out of window and retransmitted later by
//! the sender).

use std::collections::BTreeMap;
use std::ops::Range;

use bytes::Bytes;

use super::frame::DataFrame;
use super::ranges::RangeSet;

/// What the application reads, strictly in message order (ids count 0, 1, 2, … per direction).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery {
    /// A complete message.
    Message {
        /// Its id.
        id: u64,
        /// Its bytes.
        data: Bytes,
    },
    /// The sender abandoned this message (deadline passed or retransmissions exhausted).
    Gap {
        /// Its id.
        id: u64,
    },
}

/// Verdict on an incoming DATA or ABANDON frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accept {
    /// New bytes or information were stored.
    New,
    /// Nothing new (already delivered or already buffered).
    Duplicate,
    /// Beyond the advertised window or the bookkeeping bounds.
    OutOfWindow,
    /// Contradicts what is known about the message.
    Invalid,
}

/// A message being received: its place in the stream and the bytes that arrived.
#[derive(Debug, Clone)]
struct Pending {
    start: u64,
    len: u64,
    /// The message's bytes up to the end of the furthest fragment received (holes are
    /// zero until filled); its capacity is `len`, reserved at the first fragment.
    buf: Vec<u8>,
    /// `[0, filled)` of the message arrived (the in-order case needs nothing else).
    filled: u64,
    /// Further received ranges beyond `filled`, relative to `start` (out-of-order arrival).
    rest: RangeSet,
    /// Bytes received (what `buf` holds that is not a hole).
    got: u64,
}

impl Pending {
    fn new(start: u64, len: u64) -> Pending {
        // `len` is at most the receive buffer's capacity (checked by the caller).
        let cap = usize::try_from(len).unwrap_or(0);
        Pending {
            start,
            len,
            buf: Vec::with_capacity(cap),
            filled: 0,
            rest: RangeSet::new(),
            got: 0,
        }
    }

    fn complete(&self) -> bool {
        self.filled >= self.len
    }

    /// Disjoint ranges tracked for this message.
    fn fragments(&self) -> usize {
        usize::from(self.filled > 0) + self.rest.len()
    }

    /// The parts of `r` (relative to the message) not received yet.
    fn missing(&self, r: Range<u64>) -> smallvec::SmallVec<[Range<u64>; 2]> {
        let r = r.start.max(self.filled)..r.end;
        if r.start >= r.end {
            return smallvec::SmallVec::new();
        }
        if self.rest.is_empty() {
            return smallvec::smallvec![r];
        }
        self.rest.missing_in(r)
    }

    /// Copies `piece`, the message's bytes at `at` (not received before), into place.
    fn store(&mut self, at: u64, piece: &[u8]) {
        let (a, b) = (at as usize, at as usize + piece.len());
        let cur = self.buf.len();
        if a >= cur {
            self.buf.resize(a, 0);
            self.buf.extend_from_slice(piece);
        } else if b <= cur {
            self.buf[a..b].copy_from_slice(piece);
        } else {
            let (inside, beyond) = piece.split_at(cur - a);
            self.buf[a..cur].copy_from_slice(inside);
            self.buf.extend_from_slice(beyond);
        }
        self.got += piece.len() as u64;
        let r = at..at + piece.len() as u64;
        if r.start <= self.filled {
            self.filled = self.filled.max(r.end);
            while let Some(next) = self.rest.first() {
                if next.start > self.filled {
                    break;
                }
                self.filled = self.filled.max(next.end);
                self.rest.remove(next);
            }
        } else {
            self.rest.insert(r);
        }
    }
}

/// Bounded reassembly of one direction's message stream.
#[derive(Debug, Clone)]
pub struct Assembler {
    capacity: u64,
    floor: u64,
    advertised: u64,
    /// Messages being received (not yet delivered or skipped), by id.
    messages: BTreeMap<u64, Pending>,
    /// Bytes received and not yet delivered.
    buffered: u64,
    /// The pending messages' lengths (their buffers' reserved capacity), at most `capacity`.
    reserved: u64,
    /// Disjoint received ranges over the pending messages, at most `max_fragments`.
    fragments: usize,
    max_fragments: usize,
    max_messages: u64,
    next_id: u64,
    abandon_offset: u64,
    abandon_next: u64,
    fin_message: Option<u64>,
}

impl Assembler {
    /// An empty stream with a receive buffer of `capacity` bytes.
    pub fn new(capacity: u64) -> Self {
        Assembler {
            capacity,
            floor: 0,
            advertised: capacity,
            messages: BTreeMap::new(),
            buffered: 0,
            reserved: 0,
            fragments: 0,
            max_fragments: usize::try_from((capacity / 64).max(16)).unwrap_or(usize::MAX),
            max_messages: (capacity / 64).max(1024),
            next_id: 0,
            abandon_offset: 0,
            abandon_next: 0,
            fin_message: None,
        }
    }

    /// The limit currently allowed to the sender (absolute stream offset).
    pub fn max_data(&self) -> u64 {
        self.floor.saturating_add(self.capacity)
    }

    /// Bytes held in the buffer.
    pub fn buffered(&self) -> u64 {
        self.buffered
    }

    /// The id of the next message to deliver.
    pub fn next_id(&self) -> u64 {
        self.next_id
    }

    /// Whether the sender marked the message before `next_id` as its last one.
    pub fn finished(&self) -> bool {
        self.fin_message.is_some_and(|m| m < self.next_id)
    }

    /// A new limit worth advertising (it grew by at least 1/8 of the buffer since the last
    /// advertisement), marking it advertised.
    pub fn window_update(&mut self) -> Option<u64> {
        let m = self.max_data();
        if m >= self.advertised.saturating_add((self.capacity / 8).max(1)) {
            self.advertised = m;
            Some(m)
        } else {
            None
        }
    }

    /// The limit last advertised (for retransmitting a lost MAX_DATA).
    pub fn advertised(&self) -> u64 {
        self.advertised
    }

    /// Stores a DATA frame, copying its new bytes into their message's buffer.
    pub fn on_data(&mut self, f: &DataFrame) -> Accept {
        if f.message_id < self.next_id {
            return Accept::Duplicate;
        }
        if f.message_id - self.next_id >= self.max_messages {
            return Accept::OutOfWindow;
        }
        let msg_end = f.message_start.saturating_add(f.message_len);
        if msg_end > self.max_data() {
            return Accept::OutOfWindow;
        }
        if f.message_start < self.floor {
            return if msg_end <= self.floor { Accept::Duplicate } else { Accept::Invalid };
        }
        // Relative to the message (the frame decoder checked that it lies inside it).
        let Some(rel) = f.offset.checked_sub(f.message_start) else {
            return Accept::Invalid;
        };
        let rel_end = rel.saturating_add(f.data.len() as u64);
        if rel_end > f.message_len {
            return Accept::Invalid;
        }
        let mut new = false;
        let (fragments, max_fragments, next_id) =
            (self.fragments, self.max_fragments, self.next_id);
        let m = match self.messages.get_mut(&f.message_id) {
            Some(m) if (m.start, m.len) != (f.message_start, f.message_len) => {
                return Accept::Invalid;
            }
            Some(m) => m,
            None => {
                // Only a peer whose messages overlap can reserve beyond the window.
                if self.reserved.saturating_add(f.message_len) > self.capacity {
                    return Accept::OutOfWindow;
                }
                self.reserved += f.message_len;
                new = true;
                self.messages
                    .entry(f.message_id)
                    .or_insert_with(|| Pending::new(f.message_start, f.message_len))
            }
        };
        if f.fin && self.fin_message.is_none() {
            self.fin_message = Some(f.message_id);
        }
        let before = m.fragments();
        for r in m.missing(rel..rel_end) {
            // The contiguous prefix of the next message to deliver always makes progress
            // (it extends a range instead of adding one), so it is accepted even when the
            // fragment bound is reached: no deadlock on tiny pieces.
            let extends_next = f.message_id == next_id && r.start <= m.filled;
            if fragments + m.fragments() >= max_fragments + before && !extends_next {
                break;
            }
            let Some(piece) = f.data.get((r.start - rel) as usize..(r.end - rel) as usize) else {
                break;
            };
            m.store(r.start, piece);
            self.buffered += piece.len() as u64;
            new = true;
        }
        self.fragments = self.fragments + m.fragments() - before;
        if new {
            Accept::New
        } else if m.missing(rel..rel_end).is_empty() {
            Accept::Duplicate
        } else {
            Accept::OutOfWindow
        }
    }

    /// Records an ABANDON frame: messages below `next_message` will never be completed.
    pub fn on_abandon(&mut self, offset: u64, next_message: u64) -> Accept {
        if offset > self.max_data() || next_message.saturating_sub(self.next_id) > self.max_messages
        {
            return Accept::OutOfWindow;
        }
        if next_message <= self.abandon_next {
            return Accept::Duplicate;
        }
        self.abandon_next = next_message;
        self.abandon_offset = self.abandon_offset.max(offset);
        Accept::New
    }

    /// Whether message `id` (not yet delivered) is complete or abandoned: it can be read
    /// once every message before it was.
    pub fn is_ready(&self, id: u64) -> bool {
        if id < self.next_id {
            return false;
        }
        if id < self.abandon_next {
            return true;
        }
        self.messages.get(&id).is_some_and(Pending::complete)
    }

    /// The next in-order message or gap, if any.
    pub fn poll(&mut self) -> Option<Delivery> {
        let id = self.next_id;
        if self.messages.get(&id).is_some_and(Pending::complete) {
            let m = self.forget(id)?;
            self.next_id += 1;
            self.advance_floor(m.start + m.len);
            self.skip_if_abandoned();
            return Some(Delivery::Message { id, data: Bytes::from(m.buf) });
        }
        if id < self.abandon_next {
            if let Some(m) = self.forget(id) {
                self.advance_floor(m.start + m.len);
            }
            self.next_id += 1;
            self.skip_if_abandoned();
            return Some(Delivery::Gap { id });
        }
        None
    }

    /// Removes pending message `id` and its accounting.
    fn forget(&mut self, id: u64) -> Option<Pending> {
        let m = self.messages.remove(&id)?;
        self.buffered -= m.got;
        self.reserved -= m.len;
        self.fragments -= m.fragments();
        Some(m)
    }

    fn skip_if_abandoned(&mut self) {
        if self.next_id >= self.abandon_next {
            self.advance_floor(self.abandon_offset);
        }
    }

    /// Everything below `to` was read or skipped. (A pending message starting below it
    /// overlaps one delivered: only a hostile peer sends those. It stays, within the
    /// bounds, until it is delivered or skipped.)
    fn advance_floor(&mut self, to: u64) {
        self.floor = self.floor.max(to);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn frag(id: u64, start: u64, msg: &[u8], from: usize, to: usize) -> DataFrame {
        DataFrame {
            message_id: id,
            message_start: start,
            message_len: msg.len() as u64,
            offset: start + from as u64,
            fin: false,
            data: Bytes::copy_from_slice(&msg[from..to]),
        }
    }

    #[test]
    fn fragments_are_copied_into_the_message_and_never_kept() {
        let msg: Vec<u8> = (0..60_000u32).map(|i| (i % 251) as u8).collect();
        let mut a = Assembler::new(1 << 20);
        // Everything but the first byte, in three out-of-order pieces; then the whole.
        let pieces = [(40_000, 60_000), (1, 20_000), (20_000, 40_000)];
        for (from, to) in pieces {
            let f = frag(0, 0, &msg, from, to);
            assert_eq!(a.on_data(&f), Accept::New);
            assert!(f.data.is_unique(), "the assembler kept a view of the frame");
        }
        assert!(!a.is_ready(0));
        assert_eq!(a.buffered(), 59_999);
        let big = frag(0, 0, &msg, 0, 60_000);
        assert_eq!(a.on_data(&big), Accept::New);
        assert!(big.data.is_unique());
        assert_eq!(a.buffered(), 60_000);
        assert_eq!(a.on_data(&big), Accept::Duplicate);
        assert!(a.is_ready(0));
        assert_eq!(a.poll(), Some(Delivery::Message { id: 0, data: Bytes::from(msg) }));
        assert_eq!((a.buffered(), a.reserved, a.fragments), (0, 0, 0));
    }

    #[test]
    fn overlapping_message_claims_cannot_reserve_beyond_the_buffer() {
        // A hostile peer claims the same 600 bytes of the stream for many messages: the
        // buffers reserved for them stay within the 1 000-byte receive buffer.
        let mut a = Assembler::new(1000);
        let claim = vec![1u8; 600];
        assert_eq!(a.on_data(&frag(0, 0, &claim, 0, 1)), Accept::New);
        for id in 1..100 {
            assert_eq!(a.on_data(&frag(id, 0, &claim, 0, 1)), Accept::OutOfWindow);
        }
        assert_eq!(a.reserved, 600);
        assert_eq!(a.messages.len(), 1);
        // An honest neighbour still fits.
        assert_eq!(a.on_data(&frag(1, 600, &[2u8; 400], 0, 400)), Accept::New);
    }

    #[test]
    fn the_fragment_bound_holds_and_the_next_message_still_progresses() {
        // capacity 1024: at most 16 disjoint fragments.
        let mut a = Assembler::new(1024);
        let second = vec![9u8; 512];
        // Every other byte of message 1: 16 fragments, then refused.
        for i in 0..20 {
            let v = a.on_data(&frag(1, 512, &second, 2 * i, 2 * i + 1));
            assert_eq!(v, if i < 16 { Accept::New } else { Accept::OutOfWindow }, "piece {i}");
        }
        assert_eq!(a.fragments, 16);
        // Message 0 (the next to deliver) still makes progress at its contiguous prefix,
        // in pieces, but scattered pieces of it are bounded like any others.
        let first = vec![3u8; 512];
        assert_eq!(a.on_data(&frag(0, 0, &first, 0, 100)), Accept::New);
        for i in 0..50 {
            let at = 200 + 2 * i;
            assert_eq!(a.on_data(&frag(0, 0, &first, at, at + 1)), Accept::OutOfWindow);
        }
        assert_eq!(a.fragments, 17);
        assert_eq!(a.on_data(&frag(0, 0, &first, 100, 200)), Accept::New);
        assert_eq!(a.on_data(&frag(0, 0, &first, 150, 512)), Accept::New);
        assert_eq!(a.poll(), Some(Delivery::Message { id: 0, data: Bytes::from(first) }));
        // Message 1's holes fill once there is room again.
        assert_eq!(a.on_data(&frag(1, 512, &second, 0, 512)), Accept::New);
        assert_eq!(a.poll(), Some(Delivery::Message { id: 1, data: Bytes::from(second) }));
        assert_eq!((a.buffered(), a.reserved, a.fragments), (0, 0, 0));
    }

    #[test]
    fn out_of_order_fragments_deliver_in_order() {
        let mut a = Assembler::new(1000);
        assert_eq!(a.on_data(&frag(1, 5, b"world", 0, 5)), Accept::New);
        assert_eq!(a.poll(), None);
        assert_eq!(a.on_data(&frag(0, 0, b"hello", 2, 5)), Accept::New);
        assert_eq!(a.on_data(&frag(0, 0, b"hello", 0, 3)), Accept::New);
        assert_eq!(a.on_data(&frag(0, 0, b"hello", 0, 3)), Accept::Duplicate);
        assert_eq!(a.poll(), Some(Delivery::Message { id: 0, data: Bytes::from_static(b"hello") }));
        assert_eq!(a.poll(), Some(Delivery::Message { id: 1, data: Bytes::from_static(b"world") }));
        assert_eq!(a.poll(), None);
        assert_eq!(a.buffered(), 0);
        assert_eq!(a.on_data(&frag(0, 0, b"hello", 0, 5)), Accept::Duplicate);
    }

    #[test]
    fn data_beyond_the_window_is_rejected() {
        let mut a = Assembler::new(8);
        assert_eq!(a.on_data(&frag(0, 0, b"0123456789", 0, 4)), Accept::OutOfWindow);
        assert_eq!(a.buffered(), 0);
        assert_eq!(a.on_data(&frag(0, 0, b"0123", 0, 4)), Accept::New);
        assert_eq!(a.on_data(&frag(1, 4, b"45678", 0, 5)), Accept::OutOfWindow);
    }

    #[test]
    fn abandoned_messages_become_gaps_and_later_ones_still_arrive() {
        let mut a = Assembler::new(1000);
        a.on_data(&frag(0, 0, b"aa", 0, 2));
        a.on_data(&frag(1, 2, b"bbbb", 0, 2)); // half of message 1
        a.on_data(&frag(3, 10, b"dd", 0, 2));
        a.on_data(&frag(2, 6, b"cccc", 0, 4));
        assert_eq!(a.poll(), Some(Delivery::Message { id: 0, data: Bytes::from_static(b"aa") }));
        assert_eq!(a.poll(), None);
        // Messages 1 and 2 are covered; 2 is complete and still delivered.
        assert_eq!(a.on_abandon(10, 3), Accept::New);
        assert_eq!(a.poll(), Some(Delivery::Gap { id: 1 }));
        assert_eq!(a.poll(), Some(Delivery::Message { id: 2, data: Bytes::from_static(b"cccc") }));
        assert_eq!(a.poll(), Some(Delivery::Message { id: 3, data: Bytes::from_static(b"dd") }));
        assert_eq!(a.buffered(), 0);
        assert_eq!(a.max_data(), 1012);
    }

    #[test]
    fn window_opens_as_the_application_reads() {
        let mut a = Assembler::new(80);
        for i in 0..8u64 {
            a.on_data(&frag(i, i * 10, &[i as u8; 10], 0, 10));
        }
        assert_eq!(a.window_update(), None);
        assert_eq!(a.on_data(&frag(8, 80, &[0; 10], 0, 10)), Accept::OutOfWindow);
        assert!(a.poll().is_some());
        assert_eq!(a.window_update(), Some(90));
        assert_eq!(a.on_data(&frag(8, 80, &[0; 10], 0, 10)), Accept::New);
    }

    #[test]
    fn contradicting_message_bounds_are_invalid() {
        let mut a = Assembler::new(100);
        a.on_data(&frag(0, 0, b"abcd", 0, 2));
        assert_eq!(a.on_data(&frag(0, 0, b"abcdef", 2, 4)), Accept::Invalid);
    }

    proptest! {
        #[test]
        fn any_fragment_order_reassembles_every_message(
            sizes in proptest::collection::vec(0usize..50, 1..12),
            cuts in proptest::collection::vec(1usize..20, 1..8),
            order in proptest::collection::vec(any::<u32>(), 0..200),
        ) {
            // Build messages and fragment them.
            let mut frames = Vec::new();
            let mut msgs = Vec::new();
            let mut off = 0u64;
            for (id, &s) in sizes.iter().enumerate() {
                let m: Vec<u8> = (0..s).map(|i| (i + id) as u8).collect();
                let mut from = 0;
                let mut k = 0;
                loop {
                    let to = (from + cuts[k % cuts.len()]).min(s);
                    frames.push(frag(id as u64, off, &m, from, to));
                    k += 1;
                    from = to;
                    if from >= s { break; }
                }
                off += s as u64;
                msgs.push(m);
            }
            // Deliver in a shuffled order with duplicates.
            let mut a = Assembler::new(10_000);
            for (i, o) in order.iter().enumerate() {
                let f = &frames[(*o as usize + i) % frames.len()];
                a.on_data(f);
            }
            for f in &frames { a.on_data(f); }
            for (id, m) in msgs.iter().enumerate() {
                prop_assert_eq!(a.poll(), Some(Delivery::Message { id: id as u64, data: Bytes::from(m.clone()) }));
            }
            prop_assert_eq!(a.poll(), None);
            prop_assert_eq!(a.buffered(), 0);
        }
    }
}
