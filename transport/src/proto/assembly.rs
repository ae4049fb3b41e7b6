//! Receive side of the message stream: bounded in-order reassembly, message delivery with
//! gaps for abandoned messages, and the flow-control window.
//!
//! Stream bytes are kept only inside `[floor, floor + capacity)`, where `floor` is the
//! offset below which everything was read by the application or skipped. The advertised
//! limit ([`Assembler::max_data`]) is `floor + capacity`, so the window the sender sees
//! (limit minus what it has sent) is exactly the free buffer space: a slow reader slows
//! the sender. Bookkeeping is bounded too: at most `capacity / 64` stored fragments and
//! `max(1024, capacity / 64)` pending message descriptions (frames beyond those bounds are
//! rejected as out of window and retransmitted later by the sender).

use std::collections::BTreeMap;

use bytes::{Bytes, BytesMut};

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

/// Bounded reassembly of one direction's message stream.
#[derive(Debug, Clone)]
pub struct Assembler {
    capacity: u64,
    floor: u64,
    advertised: u64,
    chunks: BTreeMap<u64, Bytes>,
    have: RangeSet,
    buffered: u64,
    max_chunks: usize,
    messages: BTreeMap<u64, (u64, u64)>,
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
            chunks: BTreeMap::new(),
            have: RangeSet::new(),
            buffered: 0,
            max_chunks: usize::try_from((capacity / 64).max(16)).unwrap_or(usize::MAX),
            messages: BTreeMap::new(),
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

    /// Stores a DATA frame.
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
        let mut new = false;
        match self.messages.get(&f.message_id) {
            Some(&(s, l)) if (s, l) != (f.message_start, f.message_len) => return Accept::Invalid,
            Some(_) => {}
            None => {
                self.messages.insert(f.message_id, (f.message_start, f.message_len));
                new = true;
            }
        }
        if f.fin && self.fin_message.is_none() {
            self.fin_message = Some(f.message_id);
        }
        let end = f.end();
        // The contiguous prefix: data at or below its end always makes progress, so it is
        // accepted even when the fragment bound is reached (no deadlock on tiny pieces).
        let contiguous = match self.have.first() {
            Some(r) if r.start <= self.floor => r.end,
            _ => self.floor,
        };
        for r in self.have.missing_in(f.offset..end) {
            if self.chunks.len() >= self.max_chunks && r.start > contiguous {
                return if new { Accept::New } else { Accept::OutOfWindow };
            }
            let a = (r.start - f.offset) as usize;
            let b = (r.end - f.offset) as usize;
            let Some(piece) = f.data.get(a..b) else {
                return Accept::Invalid;
            };
            // A frame's data is an allocation of its own or a view of its datagram at most
            // four times its size (`Frame::decode_shared`), so keeping all of it costs at
            // most a bounded multiple of what is counted; a part of it is copied out, so a
            // few new bytes never keep a large frame alive.
            let piece = if piece.len() == f.data.len() {
                f.data.clone()
            } else {
                Bytes::copy_from_slice(piece)
            };
            self.buffered += piece.len() as u64;
            self.chunks.insert(r.start, piece);
            self.have.insert(r.clone());
            new = true;
        }
        if new { Accept::New } else { Accept::Duplicate }
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
        self.messages
            .get(&id)
            .is_some_and(|&(start, len)| self.have.contains_range(start..start + len))
    }

    /// The next in-order message or gap, if any.
    pub fn poll(&mut self) -> Option<Delivery> {
        let id = self.next_id;
        if let Some(&(start, len)) = self.messages.get(&id) {
            let end = start + len;
            if self.have.contains_range(start..end) {
                let data = self.take(start, end);
                self.messages.remove(&id);
                self.next_id += 1;
                self.advance_floor(end);
                self.skip_if_abandoned();
                return Some(Delivery::Message { id, data });
            }
        }
        if id < self.abandon_next {
            if let Some((start, len)) = self.messages.remove(&id) {
                self.advance_floor(start + len);
            }
            self.next_id += 1;
            self.skip_if_abandoned();
            return Some(Delivery::Gap { id });
        }
        None
    }

    fn skip_if_abandoned(&mut self) {
        if self.next_id >= self.abandon_next {
            self.advance_floor(self.abandon_offset);
        }
    }

    fn take(&mut self, start: u64, end: u64) -> Bytes {
        if let Some(c) = self.chunks.get(&start)
            && start + c.len() as u64 == end
        {
            let c = c.clone();
            self.chunks.remove(&start);
            self.buffered -= c.len() as u64;
            self.have.remove(start..end);
            return c;
        }
        let mut out = BytesMut::with_capacity((end - start) as usize);
        while let Some((&k, _)) = self.chunks.range(start..end).next() {
            let Some(c) = self.chunks.remove(&k) else {
                break;
            };
            self.buffered -= c.len() as u64;
            let c_end = k + c.len() as u64;
            if c_end > end {
                let split = (end - k) as usize;
                out.extend_from_slice(&c[..split]);
                let rest = c.slice(split..);
                self.buffered += rest.len() as u64;
                self.chunks.insert(end, rest);
            } else {
                out.extend_from_slice(&c);
            }
        }
        self.have.remove(start..end);
        out.freeze()
    }

    fn advance_floor(&mut self, to: u64) {
        if to <= self.floor {
            return;
        }
        self.floor = to;
        while let Some((&k, c)) = self.chunks.first_key_value() {
            if k >= to {
                break;
            }
            let c_end = k + c.len() as u64;
            let c = c.clone();
            self.chunks.remove(&k);
            self.buffered -= c.len() as u64;
            if c_end > to {
                let rest = c.slice((to - k) as usize..);
                self.buffered += rest.len() as u64;
                self.chunks.insert(to, rest);
            }
        }
        self.have.remove(0..to);
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
    fn a_few_new_bytes_do_not_keep_a_large_frame_alive() {
        let msg = vec![7u8; 60_000];
        let mut a = Assembler::new(1 << 20);
        // Everything but the first byte is here; then a frame of the whole message arrives.
        assert_eq!(a.on_data(&frag(0, 0, &msg, 1, 60_000)), Accept::New);
        let big = frag(0, 0, &msg, 0, 60_000);
        assert_eq!(a.on_data(&big), Accept::New);
        assert_eq!(a.buffered(), 60_000);
        // The one new byte was stored on its own, not as a view into the 60 kB frame
        // (which would retain 60 kB while counting 1 byte).
        let range = big.data.as_ptr() as usize..big.data.as_ptr() as usize + big.data.len();
        for c in a.chunks.values() {
            assert!(!range.contains(&(c.as_ptr() as usize)), "a chunk shares the frame");
        }
        assert_eq!(a.poll(), Some(Delivery::Message { id: 0, data: Bytes::from(msg) }));
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
