//! The message streams. Outgoing: [`Connection::send_message`] queues a message in the
//! send stream, DATA frames carry its chunks, ABANDON tells the peer what this side gave
//! up. Incoming: DATA and ABANDON frames go to the reassembly buffer, and
//! [`Connection::read_message`] hands out messages and gaps in id order.

use bytes::Bytes;

use super::Connection;
use super::State;
use super::packetize::Builder;
use crate::path::PathId;
use crate::proto::assembly::{Accept, Delivery};
use crate::proto::frame::{DataFrame, Frame, StreamData};
use crate::proto::send::{Chunk, Reliability};
use crate::proto::wire::varint_len;
use crate::time::Instant;

/// Why [`Connection::send_message`] refused a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SendError {
    /// The message does not fit the peer's flow-control credit now (see
    /// [`Connection::send_capacity`]). A message larger than the peer's whole receive
    /// buffer never fits.
    #[error("blocked by flow control")]
    Blocked,
    /// The connection is closed.
    #[error("connection closed")]
    Closed,
}

/// The DATA frame that carries `c`.
pub(super) fn data_frame(c: &Chunk) -> Frame {
    Frame::Data(DataFrame {
        message_id: c.message_id,
        message_start: c.message_start,
        message_len: c.message_len,
        offset: c.offset,
        fin: false,
        data: c.data.clone(),
    })
}

impl Connection {
    /// Queues one message. Its id is returned (0, 1, 2, …).
    ///
    /// `Err(SendError::Blocked)` when it does not fit the peer's flow-control credit
    /// ([`Connection::send_capacity`]); `Err(SendError::Closed)` after close;
    /// Toward a peer without Braid's frames a message travels on a v1 stream
    /// ([`crate::proto::mapping`]): bytes beyond the stream's limit wait for the peer's
    /// MAX_STREAM_DATA.
    pub fn send_message(
        &mut self,
        now: Instant,
        data: Bytes,
        reliability: Reliability,
    ) -> Result<u64, SendError> {
        self.now = self.now.max(now);
        if self.is_closed() {
            return Err(SendError::Closed);
        }
        if data.len() as u64 > self.send.capacity() {
            return Err(SendError::Blocked);
        }
        Ok(self.send.push(data, reliability))
    }

    /// The application wanted to read at `now` (at a rate of its own) and
    /// [`Connection::read_message`] had nothing: until its next read, the read-rate meter
    /// leaves that time out ([`crate::proto::rate`]), so [`Connection::read_rate_bps`]
    /// is the rate the application reads at while it has data, not what arrived.
    pub fn reader_starved(&mut self, now: Instant) {
        self.now = self.now.max(now);
        self.read_meter.starve(self.now);
    }

    /// The next in-order message or gap, if any. What this returns is what the read-rate
    /// meter measures.
    pub fn read_message(&mut self, now: Instant) -> Option<Delivery> {
        self.now = self.now.max(now);
        self.read_meter.advance(self.now);
        let d = self.recv.poll()?;
        match &d {
            Delivery::Message { id, data } => {
                self.on_message_read(*id, self.now);
                self.stats_delivered_bytes += data.len() as u64;
                self.stats_delivered_messages += 1;
                self.on_read(data.len() as u64);
            }
            Delivery::Gap { id } => {
                self.arrivals.take(*id);
                self.stats_gaps += 1;
            }
        }
        self.check_window_update();
        self.check_stream_grant();
        Some(d)
    }

    /// A DATA frame arrived on `pid`.
    pub(super) fn on_data_frame(&mut self, pid: PathId, d: &DataFrame) {
        if self.store_data(pid, d) == Accept::New
            && let Some(p) = self.paths.get_mut(&pid)
        {
            p.counters.on_data_received(d.data.len() as u64);
        }
    }

    /// Hands a message's bytes to the receive stream (`pid`: the path they came on).
    pub(super) fn store_data(&mut self, pid: PathId, d: &DataFrame) -> Accept {
        let next = self.recv.next_id();
        let verdict = self.recv.on_data(d);
        match verdict {
            Accept::New => {
                self.arrivals.on_chunk(d.message_id, next, self.now, pid);
                let recv = &self.recv;
                self.arrivals.advance(next, self.now, |id| recv.is_ready(id));
            }
            Accept::Duplicate => {}
            Accept::OutOfWindow => self.dropped.out_of_window += 1,
            Accept::Invalid => self.dropped.malformed += 1,
        }
        verdict
    }

    /// An ABANDON frame arrived: the receiver stops waiting below it.
    pub(super) fn on_abandon_frame(&mut self, offset: u64, next_message: u64) {
        match self.recv.on_abandon(offset, next_message) {
            Accept::OutOfWindow => self.dropped.out_of_window += 1,
            Accept::Invalid => self.dropped.malformed += 1,
            Accept::New => {
                let recv = &self.recv;
                self.arrivals.advance(recv.next_id(), self.now, |id| recv.is_ready(id));
            }
            Accept::Duplicate => {}
        }
    }

    /// Adds the pending ABANDON (re-sent when lost).
    pub(super) fn add_abandon(&mut self, b: &mut Builder, buf: &mut Vec<u8>) {
        if let Some((offset, next_message)) = self.send.pending_abandon()
            && b.push(buf, &Frame::Abandon { offset, next_message })
        {
            self.send.abandon_sent(next_message);
            b.frames.abandon = true;
        }
    }

    /// Fills the rest of the packet with DATA frames from the send stream (retransmissions
    /// first, as the stream orders them). With `ahead` > 0 and nothing to retransmit, the
    /// new bytes start after the first `ahead` unsent bytes (the scheduler assigned those
    /// to other paths: [`crate::sched::Scheduler::ahead_bytes`]).
    pub(super) fn add_data(&mut self, b: &mut Builder, buf: &mut Vec<u8>, ahead: u64) {
        if self.state != State::Established {
            return;
        }
        loop {
            let space = b.limit.saturating_sub(buf.len());
            // Upper bound of a DATA frame's overhead: every id and offset is at most the
            // next ones the stream will assign.
            let id_len = varint_len(self.send.next_id_hint());
            let off_len = varint_len(self.send.next_offset_hint());
            let overhead = if self.on_streams() {
                // A STREAM frame: type, stream id (4n + 3 at most), offset, length.
                let sid = varint_len(self.send.next_id_hint().saturating_mul(4) + 3);
                1 + sid + off_len + varint_len(space as u64)
            } else {
                DataFrame::type_len() + id_len + 3 * off_len + varint_len(space as u64)
            };
            if space <= overhead {
                return;
            }
            let chunk = if ahead > 0 && !self.send.has_retransmissions() {
                // Falls back to the in-order walk when the backlog shrank below `ahead`.
                self.send
                    .next_chunk_ahead(ahead, space - overhead)
                    .or_else(|| self.send.next_chunk(space - overhead))
            } else {
                self.send.next_chunk(space - overhead)
            };
            let Some(chunk) = chunk else {
                return;
            };
            if self.on_streams() {
                let offset = chunk.offset - chunk.message_start;
                StreamData::encode_parts(
                    buf,
                    self.stream_of(chunk.message_id),
                    offset,
                    offset + chunk.data.len() as u64 == chunk.message_len,
                    &chunk.data,
                );
            } else {
                DataFrame::encode_parts(
                    buf,
                    chunk.message_id,
                    chunk.message_start,
                    chunk.message_len,
                    chunk.offset,
                    false,
                    &chunk.data,
                );
            }
            b.ack_eliciting = true;
            let n = chunk.data.len() as u64;
            b.data_bytes += n;
            if chunk.retransmission {
                b.retransmitted += n;
            }
            b.frames.data.push((chunk.message_id, chunk.range()));
            b.chunks.push(chunk);
        }
    }
}
