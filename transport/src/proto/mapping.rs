//! Messages on QUIC v1 streams: how they travel toward a peer that did not announce
//! Braid's frames (another QUIC stack).
//!
//! Two mappings (docs/ARCHITECTURE.md, "Messages on the v1 wire"; [`Mapping`]):
//!
//! - **One unidirectional stream per message** (the default): message `n` of one direction
//!   travels alone on that direction's `n`-th unidirectional stream (RFC 9000 §2.1: id
//!   `4n + 2` from a client, `4n + 3` from a server).
//! - **Requests and responses** (`Config::request_streams`): the client's message
//!   `n` opens bidirectional stream `4n`, and the server's message `n` is the answer on the
//!   same stream, as HTTP/0.9 over QUIC (`hq-interop`) does. The server sends message `n`
//!   only once the client opened stream `4n`.
//!
//! Either way a message starts at stream offset 0 and ends with FIN at its last byte. A
//! message abandoned before it was fully acknowledged is reset (RESET_STREAM with
//! [`ABANDONED`] and the message's length as final size), so the connection-level credit
//! each message uses is exactly its length, as with Braid's DATA frames: MAX_DATA keeps its
//! meaning (the absolute offset of the message stream). Limits: at most the peer's
//! per-stream credit per message and stream ids below its MAX_STREAMS.
//!
//! [`StreamRecv`] is the receive side's front stage. It checks each STREAM and RESET_STREAM
//! frame against what this side announced (stream count, per-stream and connection
//! credit, final sizes: RFC 9000 §4.5, §4.6), holds the bytes of messages not yet
//! complete, and hands complete messages, in id order, to the message stream's
//! [`super::assembly::Assembler`] as the DATA frame Braid's own wire would have carried
//! (the message's place in the stream is the sum of the earlier messages' lengths), and a
//! reset one as an abandonment. Memory is bounded by the announced credit: the bytes held
//! here and in the assembler never exceed the receive window, and at most
//! [`MAX_STREAMS_WINDOW`] streams are open.

use std::collections::BTreeMap;

use bytes::Bytes;

use super::frame::{DataFrame, StreamData};
use super::ranges::RangeSet;
use super::{FINAL_SIZE_ERROR, FLOW_CONTROL_ERROR, STREAM_LIMIT_ERROR, STREAM_STATE_ERROR};

/// Unidirectional streams the peer may have open beyond the last message the application
/// read (`initial_max_streams_uni`, and what MAX_STREAMS keeps granting).
pub const MAX_STREAMS_WINDOW: u64 = 256;

/// RESET_STREAM's application error code for an abandoned message: its deadline passed,
/// or its retransmissions ran out ("BRAID" in ASCII, low bytes).
pub const ABANDONED: u64 = 0x0042_5241_4944;

/// The stream id of message `n` sent by a client (`from_client`) or a server, one
/// unidirectional stream per message.
pub fn stream_id(n: u64, from_client: bool) -> u64 {
    4 * n + if from_client { 2 } else { 3 }
}

/// How messages map onto QUIC v1 streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mapping {
    /// Message `n` of a direction on that direction's `n`-th unidirectional stream.
    Unidirectional,
    /// The client's message `n` opens bidirectional stream `4n`; the server's message `n`
    /// answers on it.
    Requests,
}

impl Mapping {
    /// The mapping a connection configuration asks for (its `request_streams`).
    pub fn new(request_streams: bool) -> Mapping {
        if request_streams { Mapping::Requests } else { Mapping::Unidirectional }
    }

    /// The stream that carries message `n` sent by a client (`from_client`) or a server.
    pub fn stream_id(self, n: u64, from_client: bool) -> u64 {
        match self {
            Mapping::Unidirectional => stream_id(n, from_client),
            Mapping::Requests => 4 * n,
        }
    }

    /// The MAX_STREAMS frame type a client (`client`) or a server sends to grant the peer
    /// more messages (RFC 9000 §19.11), if it grants any: the peer opens the streams it
    /// sends on, except a server's answers. What a side receives is the other side's:
    /// `max_streams_type(!client)`.
    pub fn max_streams_type(self, client: bool) -> Option<u64> {
        match (self, client) {
            (Mapping::Unidirectional, _) => Some(0x13),
            (Mapping::Requests, false) => Some(0x12),
            (Mapping::Requests, true) => None,
        }
    }
}

/// The stream limits a side announces in its transport parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Announced {
    /// `initial_max_stream_data_bidi_local`.
    pub max_stream_data_bidi_local: u64,
    /// `initial_max_stream_data_bidi_remote`.
    pub max_stream_data_bidi_remote: u64,
    /// `initial_max_streams_bidi`.
    pub max_streams_bidi: u64,
    /// `initial_max_stream_data_uni`.
    pub max_stream_data_uni: u64,
    /// `initial_max_streams_uni`.
    pub max_streams_uni: u64,
}

/// What a client (`client`) or a server with `mapping` and a receive buffer of `buf` bytes
/// announces: the peer may open [`MAX_STREAMS_WINDOW`] streams of the kind it sends
/// messages on, each up to the receive buffer; with requests, the server's answers on the
/// client's streams too.
pub fn announced(mapping: Mapping, buf: u64, client: bool) -> Announced {
    match mapping {
        Mapping::Unidirectional => Announced {
            max_stream_data_bidi_local: 0,
            max_stream_data_bidi_remote: 0,
            max_streams_bidi: 0,
            max_stream_data_uni: buf,
            max_streams_uni: MAX_STREAMS_WINDOW,
        },
        Mapping::Requests => Announced {
            max_stream_data_bidi_local: if client { buf } else { 0 },
            max_stream_data_bidi_remote: if client { 0 } else { buf },
            max_streams_bidi: if client { 0 } else { MAX_STREAMS_WINDOW },
            max_stream_data_uni: 0,
            max_streams_uni: 0,
        },
    }
}

/// What this side may send, from the peer's transport parameters: `(streams, bytes per
/// stream)` — how many messages may be sent before a MAX_STREAMS (a server answering
/// requests: none until the client opens them), and how long each may be.
pub fn peer_limits(
    mapping: Mapping,
    client: bool,
    tp: &super::crypto::TransportParams,
) -> (u64, u64) {
    match (mapping, client) {
        (Mapping::Unidirectional, _) => (tp.max_streams_uni, tp.max_stream_data_uni),
        (Mapping::Requests, true) => (tp.max_streams_bidi, tp.max_stream_data_bidi_remote),
        (Mapping::Requests, false) => (0, tp.max_stream_data_bidi_local),
    }
}

/// A stream frame's violation of RFC 9000: the transport error code the connection closes
/// with, and why.
pub type StreamError = (u64, &'static str);

/// What [`StreamRecv::pop`] hands to the assembler.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ready {
    /// Message `message_id`, complete, as one DATA frame.
    Message(DataFrame),
    /// The message was reset: messages below `next_message` are settled, the stream's
    /// bytes below `offset` skipped.
    Reset {
        /// One past the reset message's last byte in the message stream.
        offset: u64,
        /// The id after the reset message.
        next_message: u64,
    },
}

#[derive(Debug, Clone, Default)]
struct InStream {
    /// The bytes up to the furthest received (holes zero until filled).
    buf: Vec<u8>,
    got: RangeSet,
    /// The largest offset received (or the final size): the credit the stream used.
    high: u64,
    final_size: Option<u64>,
    reset: bool,
}

impl InStream {
    fn complete(&self) -> bool {
        self.reset || self.final_size.is_some_and(|f| self.got.contains_range(0..f))
    }
}

/// The receive side's front stage for messages on unidirectional streams.
#[derive(Debug, Clone)]
pub struct StreamRecv {
    mapping: Mapping,
    /// Whether the peer is the client or the server.
    peer_is_client: bool,
    /// Messages the peer's streams so far make room for (with requests, at a server: the
    /// answers that may be sent).
    peer_opened: u64,
    /// Bytes allowed per stream (`initial_max_stream_data_uni` as announced).
    stream_limit: u64,
    /// Streams the peer may open: ids of messages below this.
    granted: u64,
    /// The last MAX_STREAMS value sent (or the transport parameter).
    advertised: u64,
    /// The next message to hand on, and its offset in the message stream.
    next: u64,
    start: u64,
    /// Credit the streams from `next` on used (their `high`s together).
    used: u64,
    streams: BTreeMap<u64, InStream>,
}

impl StreamRecv {
    /// The front stage of a side whose peer is the client (`peer_is_client`) or the
    /// server, that announced `stream_limit` bytes per stream and [`MAX_STREAMS_WINDOW`]
    /// streams ([`announced`]).
    pub fn new(mapping: Mapping, peer_is_client: bool, stream_limit: u64) -> StreamRecv {
        StreamRecv {
            mapping,
            peer_is_client,
            peer_opened: 0,
            stream_limit,
            granted: MAX_STREAMS_WINDOW,
            advertised: MAX_STREAMS_WINDOW,
            next: 0,
            start: 0,
            used: 0,
            streams: BTreeMap::new(),
        }
    }

    /// The message stream `id` carries toward this side (`own_opened`: the messages this
    /// side sent so far, which with requests opened the client's streams), or the error a
    /// frame about it is: a kind of stream this side allows none of (the peer's:
    /// STREAM_LIMIT_ERROR) or never opened (its own: STREAM_STATE_ERROR), or one beyond the
    /// limits.
    fn message_of(&self, id: u64, own_opened: u64) -> Result<u64, StreamError> {
        let by_peer = (id & 1 == 0) == self.peer_is_client;
        let uni = id & 2 != 0;
        let allowed = match self.mapping {
            Mapping::Unidirectional => uni && by_peer,
            Mapping::Requests => !uni && id & 1 == 0,
        };
        if !allowed {
            return Err(match (self.mapping, by_peer, uni) {
                (_, true, _) => (STREAM_LIMIT_ERROR, "a kind of stream this side allows none of"),
                (Mapping::Unidirectional, false, true) => {
                    (STREAM_STATE_ERROR, "a frame for this side's send-only stream")
                }
                _ => (STREAM_STATE_ERROR, "a stream this side never opened"),
            });
        }
        let n = id / 4;
        if by_peer && n >= self.granted {
            return Err((STREAM_LIMIT_ERROR, "a stream beyond MAX_STREAMS"));
        }
        if !by_peer && n >= own_opened {
            return Err((STREAM_STATE_ERROR, "a stream this side never opened"));
        }
        Ok(n)
    }

    /// The message stream `id` carries toward this side, or the error a frame about its
    /// sending part is ([`StreamRecv::on_stream`]'s rules; `own_opened` as there).
    pub fn peer_stream(&self, id: u64, own_opened: u64) -> Result<u64, StreamError> {
        self.message_of(id, own_opened)
    }

    /// The mapping this side's messages follow.
    pub fn mapping(&self) -> Mapping {
        self.mapping
    }

    /// Messages the peer's streams so far make room for: with requests, the answers a
    /// server may send (one per stream the client opened).
    pub fn peer_opened(&self) -> u64 {
        self.peer_opened
    }

    /// Raises stream `n`'s credit use to `high`, checking it against the stream's limit
    /// and the connection's (`max_data`: the message stream's advertised limit).
    fn charge(&mut self, n: u64, high: u64, max_data: u64) -> Result<(), StreamError> {
        if high > self.stream_limit {
            return Err((FLOW_CONTROL_ERROR, "beyond the stream's data limit"));
        }
        let s = self.streams.entry(n).or_default();
        if high > s.high {
            let more = high - s.high;
            if self.start.saturating_add(self.used).saturating_add(more) > max_data {
                return Err((FLOW_CONTROL_ERROR, "beyond the connection's data limit"));
            }
            s.high = high;
            self.used += more;
        }
        Ok(())
    }

    /// A STREAM frame arrived; `max_data` is the limit this side advertised for the
    /// message stream. `Ok(n)`: it carried `n` new bytes.
    pub fn on_stream(
        &mut self,
        f: &StreamData,
        max_data: u64,
        own_opened: u64,
    ) -> Result<u64, StreamError> {
        let n = self.message_of(f.id, own_opened)?;
        self.peer_opened = self.peer_opened.max(n + 1);
        if n < self.next {
            return Ok(0);
        }
        let end = f.offset.saturating_add(f.data.len() as u64);
        if let Some(s) = self.streams.get(&n) {
            match s.final_size {
                Some(size) if end > size || (f.fin && end != size) => {
                    return Err((FINAL_SIZE_ERROR, "a stream's final size changed"));
                }
                None if f.fin && end < s.high => {
                    return Err((FINAL_SIZE_ERROR, "a final size below data received"));
                }
                _ => {}
            }
        }
        self.charge(n, end, max_data)?;
        let Some(s) = self.streams.get_mut(&n) else {
            return Ok(0);
        };
        if f.fin {
            s.final_size = Some(end);
        }
        if s.reset {
            return Ok(0);
        }
        let mut new = 0;
        for r in s.got.missing_in(f.offset..end) {
            let (Ok(a), Ok(b)) = (usize::try_from(r.start), usize::try_from(r.end)) else {
                break;
            };
            let rel = (r.start - f.offset) as usize..(r.end - f.offset) as usize;
            let Some(piece) = f.data.get(rel) else {
                break;
            };
            if s.buf.len() < b {
                s.buf.resize(b, 0);
            }
            s.buf[a..b].copy_from_slice(piece);
            new += r.end - r.start;
            s.got.insert(r);
        }
        Ok(new)
    }

    /// A RESET_STREAM frame arrived (`max_data` as for [`StreamRecv::on_stream`]).
    pub fn on_reset(
        &mut self,
        id: u64,
        final_size: u64,
        max_data: u64,
        own_opened: u64,
    ) -> Result<(), StreamError> {
        let n = self.message_of(id, own_opened)?;
        self.peer_opened = self.peer_opened.max(n + 1);
        if n < self.next {
            return Ok(());
        }
        if let Some(s) = self.streams.get(&n)
            && (s.final_size.is_some_and(|f| f != final_size) || final_size < s.high)
        {
            return Err((FINAL_SIZE_ERROR, "a reset changes the stream's final size"));
        }
        self.charge(n, final_size, max_data)?;
        if let Some(s) = self.streams.get_mut(&n) {
            s.final_size = Some(final_size);
            if !s.complete() {
                // All bytes arrived before the reset: the message is delivered anyway
                // (RFC 9000 §3.2 leaves the choice to the receiver).
                s.reset = true;
                s.buf = Vec::new();
            }
        }
        Ok(())
    }

    /// Whether this side may be sent a frame about the sending part of stream `id`
    /// (STOP_SENDING, MAX_STREAM_DATA): `Ok(Some(n))` for the stream of message `n`, which
    /// `sent` (the messages this side sent) says was opened; `Ok(None)` for none of this
    /// side's; an error for a stream whose sending part is the peer's, or one never opened.
    pub fn own_stream(&self, id: u64, sent: u64) -> Result<Option<u64>, StreamError> {
        match self.mapping {
            Mapping::Requests => {
                let n = self.message_of(id, sent)?;
                // A server answers only on streams the client opened.
                if !self.peer_is_client || n < self.peer_opened {
                    Ok(Some(n))
                } else {
                    Err((STREAM_STATE_ERROR, "a stream never opened"))
                }
            }
            Mapping::Unidirectional => {
                let own_bit = if self.peer_is_client { 1 } else { 0 };
                if id & 2 == 0 {
                    return self.message_of(id, sent).map(|_| None);
                }
                if id & 1 != own_bit {
                    // The peer's own send stream: MAX_STREAM_DATA or STOP_SENDING on it is
                    // a STREAM_STATE_ERROR (§19.5, §19.10).
                    return Err((STREAM_STATE_ERROR, "a frame for the peer's send stream"));
                }
                let n = id / 4;
                if n >= sent {
                    return Err((STREAM_STATE_ERROR, "a frame for a stream never opened"));
                }
                Ok(Some(n))
            }
        }
    }

    /// The next message ready for the assembler, in id order.
    pub fn pop(&mut self) -> Option<Ready> {
        let n = self.next;
        if !self.streams.get(&n).is_some_and(InStream::complete) {
            return None;
        }
        let s = self.streams.remove(&n)?;
        let len = s.final_size.unwrap_or(s.high);
        let start = self.start;
        self.next += 1;
        self.start = start.saturating_add(len);
        self.used = self.used.saturating_sub(s.high);
        Some(if s.reset {
            Ready::Reset { offset: self.start, next_message: self.next }
        } else {
            Ready::Message(DataFrame {
                message_id: n,
                message_start: start,
                message_len: len,
                offset: start,
                fin: false,
                data: Bytes::from(s.buf),
            })
        })
    }

    /// A new MAX_STREAMS value worth sending once the application has read the messages
    /// below `read` (half a window grown since the last), marking it sent.
    pub fn grant(&mut self, read: u64) -> Option<u64> {
        let g = read.saturating_add(MAX_STREAMS_WINDOW);
        self.granted = self.granted.max(g);
        if self.granted >= self.advertised + MAX_STREAMS_WINDOW / 2 {
            self.advertised = self.granted;
            Some(self.granted)
        } else {
            None
        }
    }

    /// The MAX_STREAMS value last granted (what a lost one is re-sent with).
    pub fn granted(&self) -> u64 {
        self.granted
    }

    /// Bytes held here (received, not yet handed on).
    pub fn buffered(&self) -> u64 {
        self.streams.values().map(|s| s.buf.len() as u64).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(n: u64, offset: u64, data: &[u8], fin: bool) -> StreamData {
        StreamData { id: stream_id(n, true), offset, fin, data: Bytes::copy_from_slice(data) }
    }

    #[test]
    fn messages_are_handed_on_in_order_with_their_place_in_the_stream() {
        let mut r = StreamRecv::new(Mapping::Unidirectional, true, 100);
        assert_eq!(r.on_stream(&frame(1, 0, b"xyz", true), 1000, 0), Ok(3));
        assert_eq!(r.pop(), None, "message 0 first");
        assert_eq!(r.on_stream(&frame(0, 2, b"cd", true), 1000, 0), Ok(2));
        assert_eq!(r.on_stream(&frame(0, 1, b"bc", false), 1000, 0), Ok(1), "one byte new");
        assert_eq!(r.on_stream(&frame(0, 0, b"ab", false), 1000, 0), Ok(1));
        assert_eq!(r.on_stream(&frame(0, 0, b"ab", false), 1000, 0), Ok(0), "a duplicate");
        let Some(Ready::Message(m)) = r.pop() else { panic!("message 0") };
        assert_eq!((m.message_id, m.message_start, m.message_len), (0, 0, 4));
        assert_eq!(&m.data[..], b"abcd");
        let Some(Ready::Message(m)) = r.pop() else { panic!("message 1") };
        assert_eq!((m.message_id, m.message_start, &m.data[..]), (1, 4, &b"xyz"[..]));
        assert_eq!(r.on_stream(&frame(0, 0, b"ab", false), 1000, 0), Ok(0), "handed on");
        assert_eq!(r.buffered(), 0);
    }

    #[test]
    fn a_reset_message_is_a_gap_of_its_final_size() {
        let mut r = StreamRecv::new(Mapping::Unidirectional, true, 100);
        r.on_stream(&frame(0, 0, b"ab", false), 1000, 0).unwrap();
        r.on_reset(stream_id(0, true), 10, 1000, 0).unwrap();
        assert_eq!(r.pop(), Some(Ready::Reset { offset: 10, next_message: 1 }));
        // A complete message is delivered even when a reset follows.
        r.on_stream(&frame(1, 0, b"ok", true), 1000, 0).unwrap();
        r.on_reset(stream_id(1, true), 2, 1000, 0).unwrap();
        assert!(matches!(r.pop(), Some(Ready::Message(m)) if m.message_start == 10));
    }

    #[test]
    fn frames_against_the_rules_are_the_errors_rfc_9000_names() {
        let code = |r: Result<u64, StreamError>| r.err().map(|e| e.0);
        let mut r = StreamRecv::new(Mapping::Unidirectional, true, 100);
        // Beyond the stream's limit, and beyond the connection's.
        assert_eq!(code(r.on_stream(&frame(0, 95, &[0; 6], false), 1000, 0)), Some(0x03));
        assert_eq!(code(r.on_stream(&frame(0, 0, &[0; 60], false), 1000, 0)), None);
        assert_eq!(code(r.on_stream(&frame(1, 0, &[0; 50], false), 100, 0)), Some(0x03));
        // A final size that moves.
        r.on_stream(&frame(2, 0, &[0; 5], true), 1000, 0).unwrap();
        assert_eq!(code(r.on_stream(&frame(2, 3, &[0; 5], false), 1000, 0)), Some(0x06));
        assert_eq!(r.on_reset(stream_id(2, true), 4, 1000, 0).map_err(|e| e.0), Err(0x06));
        assert_eq!(code(r.on_stream(&frame(0, 0, &[0; 10], true), 1000, 0)), Some(0x06));
        // Stream ids: beyond the limit, bidirectional, the server's own.
        let beyond =
            StreamData { id: stream_id(MAX_STREAMS_WINDOW, true), ..frame(0, 0, b"", true) };
        assert_eq!(code(r.on_stream(&beyond, 1000, 0)), Some(0x04));
        let bidi = StreamData { id: 0, ..frame(0, 0, b"", true) };
        assert_eq!(code(r.on_stream(&bidi, 1000, 0)), Some(0x04));
        let own = StreamData { id: stream_id(0, false), ..frame(0, 0, b"", true) };
        assert_eq!(code(r.on_stream(&own, 1000, 0)), Some(0x05));
        assert_eq!(r.own_stream(stream_id(0, false), 1), Ok(Some(0)));
        assert_eq!(r.own_stream(stream_id(1, false), 1).map_err(|e| e.0), Err(0x05));
        assert_eq!(r.own_stream(stream_id(0, true), 1).map_err(|e| e.0), Err(0x05));
    }

    #[test]
    fn with_requests_the_clients_bidirectional_streams_carry_both_ways() {
        let code = |r: Result<u64, StreamError>| r.err().map(|e| e.0);
        let req = |id, fin| StreamData { id, offset: 0, fin, data: Bytes::from_static(b"GET /a") };
        // At the server: the client's bidirectional streams 0, 4, 8 … are requests 0, 1, 2 …
        let mut server = StreamRecv::new(Mapping::Requests, true, 100);
        assert_eq!(server.on_stream(&req(4, true), 1000, 0), Ok(6));
        assert_eq!(server.peer_opened(), 2, "answers 0 and 1 may go");
        assert_eq!(code(server.on_stream(&req(2, true), 1000, 0)), Some(0x04), "a uni stream");
        assert_eq!(code(server.on_stream(&req(1, true), 1000, 0)), Some(0x05), "its own bidi");
        assert_eq!(server.own_stream(4, 0), Ok(Some(1)), "STOP_SENDING of answer 1");
        assert_eq!(server.own_stream(8, 0).map_err(|e| e.0), Err(0x05), "not opened");
        // At the client: answers on the streams it opened, and only those.
        let mut client = StreamRecv::new(Mapping::Requests, false, 100);
        assert_eq!(client.on_stream(&req(0, true), 1000, 1), Ok(6));
        assert_eq!(code(client.on_stream(&req(4, true), 1000, 1)), Some(0x05), "not opened");
        assert_eq!(code(client.on_stream(&req(1, true), 1000, 1)), Some(0x04), "server's bidi");
        assert!(matches!(client.pop(), Some(Ready::Message(m)) if &m.data[..] == b"GET /a"));
        assert_eq!(Mapping::Requests.stream_id(3, true), 12);
        assert_eq!(Mapping::Requests.stream_id(3, false), 12);
    }

    #[test]
    fn max_streams_follows_what_was_read() {
        let mut r = StreamRecv::new(Mapping::Unidirectional, true, 100);
        assert_eq!(r.grant(10), None, "less than half a window");
        assert_eq!(r.grant(MAX_STREAMS_WINDOW / 2), Some(MAX_STREAMS_WINDOW * 3 / 2));
        assert_eq!(r.granted(), MAX_STREAMS_WINDOW * 3 / 2);
    }

    proptest::proptest! {
        /// Whatever stream and reset frames arrive, in any order: no panic, the bytes held
        /// stay within the credit, and what is handed on is in id order, each message
        /// starting where the one before ended.
        #[test]
        fn any_frames_keep_the_bounds_and_the_order(
            frames in proptest::collection::vec(
                (0u64..12, 0u64..3000, 0usize..1500, proptest::bool::ANY, 0u8..8),
                0..200,
            ),
            requests in proptest::bool::ANY,
        ) {
            let mapping = if requests { Mapping::Requests } else { Mapping::Unidirectional };
            let mut r = StreamRecv::new(mapping, true, 4000);
            let max_data = 20_000;
            let (mut next_id, mut next_start) = (0, 0);
            for (n, offset, len, fin, kind) in frames {
                let id = mapping.stream_id(n, true) ^ u64::from(kind == 7);
                let outcome = if kind == 6 {
                    r.on_reset(id, offset, max_data, 0).map(|()| 0)
                } else {
                    let data = Bytes::from(vec![n as u8; len]);
                    r.on_stream(&StreamData { id, offset, fin, data }, max_data, 0)
                };
                if outcome.is_err() {
                    continue;
                }
                proptest::prop_assert!(r.buffered() <= max_data);
                while let Some(ready) = r.pop() {
                    let (id, start, end) = match ready {
                        Ready::Message(m) => (m.message_id, m.message_start, m.message_start + m.message_len),
                        Ready::Reset { offset, next_message } => (next_message - 1, next_start, offset),
                    };
                    proptest::prop_assert_eq!((id, start), (next_id, next_start));
                    next_id += 1;
                    next_start = end;
                }
            }
        }
    }
}
