//! Frames: the typed payload units of a packet.
//!
//! Each frame starts with a varint type. [`Frame::decode`] reads one frame from untrusted
//! bytes; it never panics and validates every field so that a decoded [`Frame`] is always
//! well formed (smoltcp's `Repr` idea). [`Frame::encode`] writes the canonical encoding, and
//! `decode(encode(f)) == f` for every valid frame (property tested below).
//!
//! Frames QUIC v1 (RFC 9000 §19) or multipath QUIC (RFC 10069) define travel on their
//! codepoints and in their layouts:
//!
//! | type        | frame          | fields |
//! |-------------|----------------|--------|
//! | 0x01        | PING           | — |
//! | 0x02, 0x03  | ACK, ACK_ECN   | PATH_ACK's fields without the path id: path 0 (without multipath) |
//! | 0x04        | RESET_STREAM   | stream id, application error code, final size |
//! | 0x05        | STOP_SENDING   | stream id, application error code |
//! | 0x06        | CRYPTO         | offset, length, TLS bytes (in 1-RTT packets: after the handshake) |
//! | 0x07        | NEW_TOKEN      | read only: token length (≥ 1), token (dropped) |
//! | 0x08–0x0f   | STREAM         | stream id, [offset], [length], bytes (sent with LEN, with OFF when the offset is not 0) |
//! | 0x10        | MAX_DATA       | maximum data (one stream: the absolute stream offset limit) |
//! | 0x11, 0x15  | MAX_STREAM_DATA, STREAM_DATA_BLOCKED | stream id, value |
//! | 0x12–0x14, 0x16, 0x17 | MAX_STREAMS, DATA_BLOCKED, STREAMS_BLOCKED | value |
//! | 0x18        | NEW_CONNECTION_ID | PATH_NEW_CONNECTION_ID's fields without the path id (path 0) |
//! | 0x19        | RETIRE_CONNECTION_ID | sequence number (path 0) |
//! | 0x1a        | PATH_CHALLENGE | data (8 bytes) |
//! | 0x1b        | PATH_RESPONSE  | data (8 bytes) |
//! | 0x1c        | CONNECTION_CLOSE (transport) | error code, frame type, reason length, reason |
//! | 0x1d        | CONNECTION_CLOSE (application) | error code, reason length, reason |
//! | 0x1e        | HANDSHAKE_DONE | — |
//! | 0x3e        | PATH_ACK       | path id, largest, ack delay, range count, first range, (gap, range)… |
//! | 0x3f        | PATH_ACK_ECN   | as PATH_ACK, then three ECN counts (read, not used) |
//! | 0x3e75      | PATH_ABANDON   | path id, error code |
//! | 0x3e76      | PATH_STATUS_BACKUP | path id, status sequence number |
//! | 0x3e77      | PATH_STATUS_AVAILABLE | path id, status sequence number |
//! | 0x3e78      | PATH_NEW_CONNECTION_ID | path id, sequence number, retire prior to, length (8), id, reset token |
//! | 0x3e79      | PATH_RETIRE_CONNECTION_ID | path id, sequence number |
//! | 0x3e7a      | MAX_PATH_ID    | maximum path id |
//! | 0x3e7b      | PATHS_BLOCKED  | maximum path id |
//! | 0x3e7c      | PATH_CIDS_BLOCKED | path id, next sequence number |
//!
//! Without multipath ([`Frame::encode_for`]), an ACK, id or retirement of path 0 goes as
//! v1's frame. Braid's own frames are extensions on codepoints `0x62_72xx` (four-byte varints, in the
//! space RFC 9000 §22.4 leaves to first come, first served); their layouts are Braid's:
//!
//! | type        | frame          | fields |
//! |-------------|----------------|--------|
//! | 0x62_7201   | PATH_ACK_TIMESTAMPS | PATH_ACK's fields, then a count and (largest − packet number, receive time µs) pairs |
//! | 0x62_7208, 0x62_7209 | DATA (…09 = fin) | message id, message start, message length, offset in message, length, bytes |
//! | 0x62_7210   | ABANDON        | stream offset, next message id |
//! | 0x62_7212   | READ_RATE      | bits per second |
//! | 0x62_7215   | RATE_FEEDBACK  | path, receive rate (bytes/s), loss event rate (×10⁻⁹), t_delay (µs) |
//! | 0x62_7216   | PLAYOUT        | buffer (ms of media), next deadline (ms + 1, 0 = none), flags (1 = stalled, 2 = started) |
//! | 0x62_7221   | PATH_JOIN      | token, radio of the new path |
//! | 0x62_7222   | PATH_JOIN_CHALLENGE | echoed join token, challenge token |
//! | 0x62_7225   | PATH_PROBE     | path |
//! | 0x62_7230   | CODED          | first source id, source count, repair key (2 bytes), length, coded bytes |
//! | 0x62_7231   | FEC_SOURCE     | source id of the DATA frames before it in the packet |
//! | 0x62_7232   | FEC_ACK        | range count, then (first, length − 1) per range of recovered source ids |
//!
//! The ACK Delay of PATH_ACK is in units of 2^`ack_delay_exponent` µs of its sender (RFC
//! 9000 §18.2, §19.3); Braid announces an exponent of 0, and [`AckFrame::delay_us`] is the
//! field as it travels (the receiver scales it by the peer's exponent).
//!
//! The last three carry the streaming code ([`crate::fec`]); they are sent only when the
//! connection's configuration enables it. CODED follows RFC 8681's Repair FEC Payload ID
//! (first source symbol id, number of source symbols, repair key) with the ids as varints:
//! `first` and `first + count` at most 2^62 − 1, `1 ≤ count ≤ 4095`, the coded bytes at most
//! [`MAX_CODED_LEN`]. A packet's source symbol is the concatenated DATA frames that precede
//! its FEC_SOURCE, as encoded. FEC_ACK ranges are ascending, non-empty, non-overlapping and
//! at most [`MAX_FEC_ACK_RANGES`].

use bytes::Bytes;

use super::wire::{LongCid, MAX_CID_LEN, Reader, VARINT_MAX, WireError, put_varint, varint_len};
use crate::path::{PathId, PathRole, PathStatus};

/// Longest CLOSE reason accepted or sent, bytes.
pub const MAX_CLOSE_REASON: usize = 256;

/// Longest CODED payload accepted, bytes (larger than any datagram Braid sends).
pub const MAX_CODED_LEN: usize = 65_535;

/// Most ranges in one FEC_ACK frame.
pub const MAX_FEC_ACK_RANGES: usize = 64;

// QUIC v1 (RFC 9000 §19.2, §19.9, §19.18, §19.19).
const T_PING: u64 = 0x01;
const T_ACK: u64 = 0x02;
const T_ACK_ECN: u64 = 0x03;
const T_RESET_STREAM: u64 = 0x04;
const T_STOP_SENDING: u64 = 0x05;
const T_CRYPTO: u64 = 0x06;
const T_NEW_TOKEN: u64 = 0x07;
/// STREAM: 0x08 to 0x0f, the low three bits OFF, LEN and FIN (§19.8).
const T_STREAM: u64 = 0x08;
const T_STREAM_LAST: u64 = 0x0f;
const STREAM_OFF: u64 = 0x04;
const STREAM_LEN: u64 = 0x02;
const STREAM_FIN: u64 = 0x01;
const T_MAX_STREAM_DATA: u64 = 0x11;
const T_MAX_STREAMS_BIDI: u64 = 0x12;
const T_MAX_STREAMS_UNI: u64 = 0x13;
const T_DATA_BLOCKED: u64 = 0x14;
const T_STREAM_DATA_BLOCKED: u64 = 0x15;
const T_STREAMS_BLOCKED_BIDI: u64 = 0x16;
const T_STREAMS_BLOCKED_UNI: u64 = 0x17;
const T_NEW_CONNECTION_ID: u64 = 0x18;
const T_RETIRE_CONNECTION_ID: u64 = 0x19;
const T_V1_PATH_CHALLENGE: u64 = 0x1a;
const T_HANDSHAKE_DONE: u64 = 0x1e;
const T_MAX_DATA: u64 = 0x10;
const T_PATH_RESPONSE: u64 = 0x1b;
const T_TRANSPORT_CLOSE: u64 = 0x1c;
const T_APPLICATION_CLOSE: u64 = 0x1d;
// Multipath QUIC (RFC 10069; the codepoints noq 1.4 speaks).
const T_PATH_ACK: u64 = 0x3e;
const T_PATH_ACK_ECN: u64 = 0x3f;
const T_PATH_ABANDON: u64 = 0x3e75;
const T_PATH_STATUS_BACKUP: u64 = 0x3e76;
const T_PATH_STATUS_AVAILABLE: u64 = 0x3e77;
const T_PATH_NEW_CID: u64 = 0x3e78;
const T_PATH_RETIRE_CID: u64 = 0x3e79;
const T_MAX_PATH_ID: u64 = 0x3e7a;
const T_PATHS_BLOCKED: u64 = 0x3e7b;
const T_PATH_CIDS_BLOCKED: u64 = 0x3e7c;
// Braid's extensions.
const EXT: u64 = 0x0062_7200;
const T_PATH_ACK_TIMESTAMPS: u64 = EXT | 0x01;
const T_DATA: u64 = EXT | 0x08;
const T_DATA_FIN: u64 = EXT | 0x09;
const T_ABANDON: u64 = EXT | 0x10;
const T_READ_RATE: u64 = EXT | 0x12;
const T_RATE_FEEDBACK: u64 = EXT | 0x15;
const T_PLAYOUT: u64 = EXT | 0x16;
const T_PATH_JOIN: u64 = EXT | 0x21;
const T_PATH_CHALLENGE: u64 = EXT | 0x22;
const T_PATH_PROBE: u64 = EXT | 0x25;
const T_CODED: u64 = EXT | 0x30;
const T_FEC_SOURCE: u64 = EXT | 0x31;
const T_FEC_ACK: u64 = EXT | 0x32;

/// Largest buffer or deadline a PLAYOUT frame may carry, ms (one day; anything larger is
/// refused as malformed).
pub const MAX_PLAYOUT_MS: u64 = 86_400_000;

const PLAYOUT_STALLED: u8 = 1;
const PLAYOUT_STARTED: u8 = 2;

/// The receiver's playout state (the PLAYOUT frame, sent with READ_RATE when the profile
/// re-injects): what the sender's re-injection gates on ([`crate::proto::ReinjectConfig`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PlayoutFeedback {
    /// Media buffered ahead of the playout position, ms (at most [`MAX_PLAYOUT_MS`]).
    pub buffer_ms: u64,
    /// Time until the first frame not yet received is due on screen, ms; `None` while the
    /// media clock is stopped (before start, stalled). At most [`MAX_PLAYOUT_MS`].
    pub next_deadline_ms: Option<u64>,
    /// Playback started and is now stalled (rebuffering).
    pub stalled: bool,
    /// The first frame was shown.
    pub started: bool,
}

/// RFC 10069's PATH_ABANDON error codes (the codepoints noq 1.4 speaks): the application
/// (here: the mode switch or the user) closed the path.
pub const APPLICATION_ABANDON_PATH: u64 = 0x3e;
/// The path was abandoned because the transport ran out of resources for it.
pub const PATH_RESOURCE_LIMIT_REACHED: u64 = 0x3e75;
/// The path was abandoned because it is unstable or poor.
pub const PATH_UNSTABLE_OR_POOR: u64 = 0x3e76;
/// The path was abandoned because no connection id is left for it.
pub const NO_CID_AVAILABLE_FOR_PATH: u64 = 0x3e77;

/// ACK ranges, inclusive `(smallest, largest)`: a few inline (one without loss), more on
/// the heap.
pub type AckRanges = smallvec::SmallVec<[(u64, u64); 4]>;

/// Receive timestamps of an ACK frame, `(packet number, time)`: a sender puts one.
pub type AckTimestamps = smallvec::SmallVec<[(u64, u64); 1]>;

/// Acknowledgement of packets received on one path (the ACK frame may travel on another).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AckFrame {
    /// The path whose packet-number space is acknowledged.
    pub path: PathId,
    /// Acknowledged packet-number ranges, inclusive `(smallest, largest)`, in descending
    /// order, non-overlapping and separated by at least one missing packet. Never empty.
    pub ranges: AckRanges,
    /// Time between receiving the largest acknowledged packet and sending this ACK: the ACK
    /// Delay field as it travels, in units of 2^`ack_delay_exponent` µs of the sender
    /// (Braid's exponent is 0, so µs; the receiver scales a peer's).
    pub delay_us: u64,
    /// Receive times (µs on the receiver's clock) of some acknowledged packets, as
    /// `(packet number, time)`. The largest acknowledged packet comes first when present.
    pub timestamps: AckTimestamps,
}

impl AckFrame {
    /// The largest acknowledged packet number.
    pub fn largest(&self) -> u64 {
        self.ranges.first().map(|r| r.1).unwrap_or(0)
    }

    /// The frame type it travels as: PATH_ACK, or Braid's PATH_ACK_TIMESTAMPS when it
    /// carries receive timestamps.
    fn frame_type(&self) -> u64 {
        if self.timestamps.is_empty() { T_PATH_ACK } else { T_PATH_ACK_TIMESTAMPS }
    }

    /// Whether packet `pn` is acknowledged.
    pub fn contains(&self, pn: u64) -> bool {
        self.ranges.iter().any(|&(lo, hi)| lo <= pn && pn <= hi)
    }
}

/// A piece of one message of the ordered message stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataFrame {
    /// The message's id (0, 1, 2, … per direction).
    pub message_id: u64,
    /// Stream offset of the message's first byte (the message boundary).
    pub message_start: u64,
    /// The message's total length (the message boundary).
    pub message_len: u64,
    /// Stream offset of `data`'s first byte, within the message.
    pub offset: u64,
    /// The sender has no message after this one.
    pub fin: bool,
    /// The bytes.
    pub data: Bytes,
}

impl DataFrame {
    /// Encoded size of a DATA frame with these fields and `len` payload bytes.
    pub fn encoded_len(
        message_id: u64,
        message_start: u64,
        message_len: u64,
        offset_in_message: u64,
        len: usize,
    ) -> usize {
        DataFrame::type_len()
            + varint_len(message_id)
            + varint_len(message_start)
            + varint_len(message_len)
            + varint_len(offset_in_message)
            + varint_len(len as u64)
            + len
    }

    /// Bytes of the DATA frame's type (an extension codepoint: four).
    pub fn type_len() -> usize {
        varint_len(T_DATA)
    }

    /// Appends a DATA frame with these fields and `data` (what [`Frame::encode`] writes for
    /// [`Frame::Data`], without a [`DataFrame`] to hold the bytes).
    pub fn encode_parts(
        buf: &mut Vec<u8>,
        message_id: u64,
        message_start: u64,
        message_len: u64,
        offset: u64,
        fin: bool,
        data: &[u8],
    ) {
        put_varint(buf, if fin { T_DATA_FIN } else { T_DATA });
        put_varint(buf, message_id);
        put_varint(buf, message_start);
        put_varint(buf, message_len);
        put_varint(buf, offset.saturating_sub(message_start));
        put_varint(buf, data.len() as u64);
        buf.extend_from_slice(data);
    }

    /// Stream offset one past the last byte of `data`.
    pub fn end(&self) -> u64 {
        self.offset.saturating_add(self.data.len() as u64)
    }
}

/// A STREAM frame (RFC 9000 §19.8): bytes of one QUIC v1 stream. Toward a peer without
/// Braid's frames each message travels alone on a unidirectional stream of its own
/// ([`crate::proto::mapping`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamData {
    /// The stream id.
    pub id: u64,
    /// Offset of `data`'s first byte in the stream.
    pub offset: u64,
    /// The stream ends with `data` (its final size is `offset + data.len()`).
    pub fin: bool,
    /// The bytes.
    pub data: Bytes,
}

impl StreamData {
    /// Encoded size of a STREAM frame for `id` at `offset` with `len` bytes, as
    /// [`Frame::encode`] writes it.
    pub fn encoded_len(id: u64, offset: u64, len: usize) -> usize {
        let off = if offset > 0 { varint_len(offset) } else { 0 };
        1 + varint_len(id) + off + varint_len(len as u64) + len
    }

    /// Appends a STREAM frame (LEN always set, OFF when `offset` is not 0).
    pub fn encode_parts(buf: &mut Vec<u8>, id: u64, offset: u64, fin: bool, data: &[u8]) {
        let mut ty = T_STREAM | STREAM_LEN;
        if offset > 0 {
            ty |= STREAM_OFF;
        }
        if fin {
            ty |= STREAM_FIN;
        }
        put_varint(buf, ty);
        put_varint(buf, id);
        if offset > 0 {
            put_varint(buf, offset);
        }
        put_varint(buf, data.len() as u64);
        buf.extend_from_slice(data);
    }
}

/// Loss event rates travel as parts per 10⁹ (so the frame stays integral and `Eq`).
pub const LOSS_RATE_SCALE: f64 = 1e9;

/// A TFRC receiver report for one path (RFC 5348 §6.2 \[source\]): what the data
/// receiver measured on `path`, sent at least once per RTT while data arrives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateFeedbackFrame {
    /// The path the report is about (the frame may travel on another).
    pub path: PathId,
    /// X_recv: the rate data arrived at since the previous report, bytes/s.
    pub x_recv: u64,
    /// p: the loss event rate, in parts per 10⁹ (at most 10⁹).
    pub loss_ppb: u64,
    /// t_delay: time between the last data packet's arrival and this report, µs.
    pub t_delay_us: u64,
}

impl RateFeedbackFrame {
    /// The report as the rate controller consumes it.
    pub fn to_feedback(&self) -> crate::cc::tfrc::RateFeedback {
        crate::cc::tfrc::RateFeedback {
            x_recv: self.x_recv as f64,
            p: self.loss_ppb as f64 / LOSS_RATE_SCALE,
            t_delay: std::time::Duration::from_micros(self.t_delay_us),
        }
    }

    /// The frame carrying `fb` for `path` (rates clamped into range).
    pub fn from_feedback(path: PathId, fb: &crate::cc::tfrc::RateFeedback) -> RateFeedbackFrame {
        let x = if fb.x_recv.is_finite() { fb.x_recv.clamp(0.0, VARINT_MAX as f64) } else { 0.0 };
        let p = if fb.p.is_finite() { fb.p.clamp(0.0, 1.0) } else { 1.0 };
        RateFeedbackFrame {
            path,
            x_recv: x as u64,
            loss_ppb: (p * LOSS_RATE_SCALE).round() as u64,
            t_delay_us: (fb.t_delay.as_micros() as u64).min(VARINT_MAX),
        }
    }
}

/// One decoded frame. Only well-formed values are ever produced by [`Frame::decode`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// Asks for an acknowledgement; carries nothing.
    Ping,
    /// Acknowledges packets of one path.
    Ack(AckFrame),
    /// Message bytes.
    Data(DataFrame),
    /// Every message below `next_message` (and every stream byte below `offset`) is either
    /// acknowledged or abandoned: the receiver stops waiting for the missing ones
    /// (the PR-SCTP FORWARD-TSN analogue, RFC 3758).
    Abandon {
        /// Stream offset the receiver may skip to.
        offset: u64,
        /// First message id not covered.
        next_message: u64,
    },
    /// PATH_STATUS_AVAILABLE or PATH_STATUS_BACKUP (RFC 10069; the MP_PRIO
    /// analogue): the sender asks the peer to treat `path` as active or backup. A closed
    /// path is announced with [`Frame::PathAbandon`] (a `Closed` status is encoded as one).
    PathStatus {
        /// The path.
        path: PathId,
        /// Increases with every announcement so the latest wins.
        seq: u64,
        /// The new status: active or backup.
        status: PathStatus,
    },
    /// PATH_ABANDON (RFC 10069): the sender closes `path`.
    PathAbandon {
        /// The path.
        path: PathId,
        /// Why: [`APPLICATION_ABANDON_PATH`] and the others RFC 10069 defines.
        error: u64,
    },
    /// The application read rate measured by the sender of this frame, bits/s.
    ReadRate {
        /// Bits per second.
        bps: u64,
    },
    /// The playout state of the sender of this frame (the client).
    Playout(PlayoutFeedback),
    /// Flow control: the peer may send stream bytes below this offset.
    MaxData {
        /// Absolute stream offset limit.
        max: u64,
    },
    /// CONNECTION_CLOSE (RFC 9000 §19.19): the connection is closed.
    Close {
        /// The error code: a transport error code, or the application's.
        code: u64,
        /// Human-readable reason (at most [`MAX_CLOSE_REASON`] bytes).
        reason: Bytes,
        /// The application closed (type 0x1d) rather than the transport (0x1c, whose
        /// frame-type field is sent as 0, "unknown", and ignored when read).
        application: bool,
    },
    /// MAX_PATH_ID (RFC 10069): the peer may use path ids up to `max`.
    MaxPathId {
        /// The largest path id the sender accepts.
        max: PathId,
    },
    /// PATHS_BLOCKED (RFC 10069): the sender wants to open a path and the peer's maximum
    /// path id, `max`, stops it.
    PathsBlocked {
        /// The peer's maximum path id as the sender knows it.
        max: PathId,
    },
    /// PATH_CIDS_BLOCKED (RFC 10069): the sender has no unused id of the peer for `path`.
    PathCidsBlocked {
        /// The path.
        path: PathId,
        /// The sequence number of the next id the sender expects.
        next_seq: u64,
    },
    /// A TFRC receiver report (only sent when the connection's controller is rate based).
    RateFeedback(RateFeedbackFrame),
    /// The client opens the path this packet travels on.
    PathJoin {
        /// Token the server echoes.
        token: u64,
        /// The client's access network on this path (lets the server's policies see radios).
        role: PathRole,
    },
    /// The server's answer to a PATH_JOIN, or its challenge of a path's new address:
    /// proves it got the join, challenges the address (Braid's PATH_JOIN_CHALLENGE; v1's
    /// PATH_CHALLENGE has no echo).
    PathChallenge {
        /// The PATH_JOIN token.
        echo: u64,
        /// Token the client must return in a PATH_RESPONSE on the same path.
        token: u64,
    },
    /// PATH_RESPONSE (RFC 9000 §19.18): the client's answer to a challenge.
    PathResponse {
        /// The challenge token.
        token: u64,
    },
    /// The sender issues `cid` for packets the peer sends it on `path` (RFC 10069's
    /// PATH_NEW_CONNECTION_ID; RFC 9000's NEW_CONNECTION_ID on path 0 without multipath):
    /// ids per path and direction, so no connection id is seen on two paths or in both
    /// directions.
    PathNewCid {
        /// The path the id is for.
        path: PathId,
        /// The id's sequence number on its path (RFC 10069; path 0's handshake id is
        /// number 0 there).
        seq: u64,
        /// Retire Prior To: the receiver retires the sender's ids numbered below it
        /// (RFC 9000 §5.1.2). Braid sends 0: it never asks for its ids back.
        retire_prior_to: u64,
        /// The connection id: 8 bytes when Braid issues it, 1 to 20 from another stack
        /// (RFC 9000 §19.15).
        cid: LongCid,
        /// Its stateless reset token (RFC 9000 §10.3): a datagram ending in it, from the
        /// issuer, ends the connection.
        reset_token: [u8; crate::proto::reset::TOKEN_LEN],
    },
    /// The sender timed `path` out while another path works: the receiver sends a PING on
    /// it, so that a path whose peer moved (a NAT rebinding on a path the receiver only
    /// receives on) is heard from at its new address.
    PathProbe {
        /// The path.
        path: PathId,
    },
    /// HANDSHAKE_DONE (RFC 9000 §19.20): the server confirms the handshake.
    HandshakeDone,
    /// CRYPTO (RFC 9000 §19.6) in a 1-RTT packet: TLS messages after the handshake (a
    /// server's NewSessionTicket). Braid's servers send none.
    Crypto {
        /// Offset in the 1-RTT level's TLS stream.
        offset: u64,
        /// The bytes.
        data: Bytes,
    },
    /// NEW_TOKEN (RFC 9000 §19.7): a token for the Initial of a later connection to the
    /// same server (1 to [`crate::proto::retry::MAX_TOKEN_LEN`] bytes as Braid keeps them;
    /// a longer one decodes and is not kept).
    NewToken {
        /// The token.
        token: Bytes,
    },
    /// RETIRE_CONNECTION_ID (0x19, path 0) or RFC 10069's PATH_RETIRE_CONNECTION_ID
    /// (0x3e79): the sender no longer uses the id this side issued for `path` under `seq`.
    RetireCid {
        /// The path.
        path: PathId,
        /// The id's sequence number.
        seq: u64,
    },
    /// QUIC v1's PATH_CHALLENGE (0x1a, RFC 9000 §19.17): the receiver answers with a
    /// PATH_RESPONSE carrying `token` on the same path.
    PeerChallenge {
        /// The challenge data.
        token: u64,
    },
    /// STREAM (RFC 9000 §19.8).
    Stream(StreamData),
    /// RESET_STREAM (§19.4): the sender abandoned stream `id` at `final_size` bytes.
    ResetStream {
        /// The stream id.
        id: u64,
        /// The application's error code.
        code: u64,
        /// The stream's final size.
        final_size: u64,
    },
    /// STOP_SENDING (§19.5): the sender no longer reads stream `id`.
    StopSending {
        /// The stream id.
        id: u64,
        /// The application's error code.
        code: u64,
    },
    /// MAX_STREAM_DATA or STREAM_DATA_BLOCKED (`kind` its type, §19.10, §19.13): the
    /// stream's data limit, or the limit the sender is blocked at.
    StreamFrame {
        /// The frame type.
        kind: u64,
        /// The stream id.
        id: u64,
        /// The limit.
        value: u64,
    },
    /// MAX_STREAMS, DATA_BLOCKED or STREAMS_BLOCKED (`kind` the type) and its value
    /// (MAX_STREAMS for unidirectional streams raises the messages that may be sent toward
    /// a peer without Braid's frames; the others are read and ignored).
    StreamLimit {
        /// The frame type.
        kind: u64,
        /// Its value (for MAX_STREAMS and STREAMS_BLOCKED at most 2^60).
        value: u64,
    },
    /// A repair symbol of the streaming code.
    Coded(crate::fec::Repair),
    /// The DATA frames before this frame in the packet are source symbol `id`.
    FecSource {
        /// The source id.
        id: u64,
    },
    /// Source symbols the receiver recovered from repair symbols, as inclusive ascending
    /// `(first, last)` ranges.
    FecAck {
        /// The ranges.
        ranges: Vec<(u64, u64)>,
    },
}

/// The wire code of a path role.
pub(crate) fn role_code(r: PathRole) -> u8 {
    match r {
        PathRole::Wifi => 0,
        PathRole::Lte => 1,
        PathRole::ThreeG => 2,
        PathRole::Wired => 3,
    }
}

/// The path role of a wire code.
pub(crate) fn role_from(b: u8) -> Result<PathRole, WireError> {
    Ok(match b {
        0 => PathRole::Wifi,
        1 => PathRole::Lte,
        2 => PathRole::ThreeG,
        3 => PathRole::Wired,
        _ => return Err(WireError::Invalid("path role")),
    })
}

impl Frame {
    /// The frame type's name as traces and the Wireshark dissector spell it.
    pub fn type_name(&self) -> &'static str {
        match self {
            Frame::Ping => "ping",
            Frame::Ack(_) => "ack",
            Frame::Data(_) => "data",
            Frame::Abandon { .. } => "abandon",
            Frame::PathStatus { .. } => "path_status",
            Frame::PathAbandon { .. } => "path_abandon",
            Frame::MaxPathId { .. } => "max_path_id",
            Frame::PathsBlocked { .. } => "paths_blocked",
            Frame::PathCidsBlocked { .. } => "path_cids_blocked",
            Frame::ReadRate { .. } => "read_rate",
            Frame::Playout(_) => "playout",
            Frame::MaxData { .. } => "max_data",
            Frame::Close { .. } => "close",
            Frame::RateFeedback(_) => "rate_feedback",
            Frame::PathJoin { .. } => "path_join",
            Frame::PathChallenge { .. } => "path_challenge",
            Frame::PathResponse { .. } => "path_response",
            Frame::PathNewCid { .. } => "path_new_connection_id",
            Frame::PathProbe { .. } => "path_probe",
            Frame::Coded(_) => "coded",
            Frame::FecSource { .. } => "fec_source",
            Frame::FecAck { .. } => "fec_ack",
            Frame::HandshakeDone => "handshake_done",
            Frame::Crypto { .. } => "crypto",
            Frame::NewToken { .. } => "new_token",
            Frame::RetireCid { .. } => "retire_connection_id",
            Frame::PeerChallenge { .. } => "path_challenge_v1",
            Frame::Stream(_) => "stream",
            Frame::ResetStream { .. } => "reset_stream",
            Frame::StopSending { .. } => "stop_sending",
            Frame::StreamFrame { .. } => "stream_flow_control",
            Frame::StreamLimit { .. } => "stream_limit",
        }
    }

    /// Whether the frame exists only with multipath (RFC 10069's frames; an ACK, id or
    /// retirement naming a path other than 0).
    pub fn needs_multipath(&self) -> bool {
        match self {
            Frame::Ack(a) => a.path != PathId(0),
            Frame::PathNewCid { path, .. } | Frame::RetireCid { path, .. } => *path != PathId(0),
            Frame::PathStatus { .. }
            | Frame::PathAbandon { .. }
            | Frame::MaxPathId { .. }
            | Frame::PathsBlocked { .. }
            | Frame::PathCidsBlocked { .. } => true,
            _ => false,
        }
    }

    /// Whether the frame is one of Braid's extensions (codepoints `0x62_72xx`), sent only
    /// to a peer that announced `braid_frames` (the streaming code's three, only to one
    /// that announced the code as well).
    pub fn is_braid_extension(&self) -> bool {
        match self {
            Frame::Ack(a) => !a.timestamps.is_empty(),
            Frame::Data(_)
            | Frame::Abandon { .. }
            | Frame::ReadRate { .. }
            | Frame::RateFeedback(_)
            | Frame::Playout(_)
            | Frame::PathJoin { .. }
            | Frame::PathChallenge { .. }
            | Frame::PathProbe { .. }
            | Frame::Coded(_)
            | Frame::FecSource { .. }
            | Frame::FecAck { .. } => true,
            _ => false,
        }
    }

    /// Whether the frame asks the receiver for an acknowledgement (everything but ACK,
    /// FEC_ACK, which travels with ACKs, and PLAYOUT, which is never retransmitted: a
    /// newer report replaces a lost one within the feedback interval).
    pub fn is_ack_eliciting(&self) -> bool {
        !matches!(self, Frame::Ack(_) | Frame::FecAck { .. } | Frame::Playout(_))
    }

    /// Appends the frame's encoding to `buf`. Values are expected in range (varints up to
    /// 2^62 − 1, at most [`MAX_CLOSE_REASON`] reason bytes); larger values are clamped.
    pub fn encode(&self, buf: &mut Vec<u8>) {
        self.encode_for(buf, true)
    }

    /// [`Frame::encode`] for a connection on which multipath is negotiated (`multipath`)
    /// or not: without it, an ACK of path 0 (without timestamps) goes as QUIC v1's ACK
    /// (0x02), an id for path 0 as NEW_CONNECTION_ID (0x18) and its retirement as
    /// RETIRE_CONNECTION_ID (0x19), the layouts without the path id (RFC 10069 defines
    /// its frames as v1's with one). [`Frame::encoded_len`] is never less than the
    /// length either way.
    pub fn encode_for(&self, buf: &mut Vec<u8>, multipath: bool) {
        if !multipath {
            match self {
                Frame::Ack(a) if a.path == PathId(0) && a.timestamps.is_empty() => {
                    put_varint(buf, T_ACK);
                    return encode_ack_body(a, buf);
                }
                Frame::PathNewCid { path: PathId(0), seq, retire_prior_to, cid, reset_token } => {
                    put_varint(buf, T_NEW_CONNECTION_ID);
                    return encode_new_cid_body(*seq, *retire_prior_to, cid, reset_token, buf);
                }
                Frame::RetireCid { path: PathId(0), seq } => {
                    put_varint(buf, T_RETIRE_CONNECTION_ID);
                    return put_varint(buf, *seq);
                }
                _ => {}
            }
        }
        match self {
            Frame::Ping => put_varint(buf, T_PING),
            Frame::Ack(a) => {
                put_varint(buf, a.frame_type());
                put_varint(buf, u64::from(a.path.0));
                encode_ack_body(a, buf);
            }
            Frame::HandshakeDone => put_varint(buf, T_HANDSHAKE_DONE),
            Frame::Crypto { offset, data } => {
                put_varint(buf, T_CRYPTO);
                put_varint(buf, *offset);
                put_varint(buf, data.len() as u64);
                buf.extend_from_slice(data);
            }
            Frame::NewToken { token } => {
                put_varint(buf, T_NEW_TOKEN);
                put_varint(buf, token.len() as u64);
                buf.extend_from_slice(token);
            }
            Frame::RetireCid { path, seq } => {
                put_varint(buf, T_PATH_RETIRE_CID);
                put_varint(buf, u64::from(path.0));
                put_varint(buf, *seq);
            }
            Frame::PeerChallenge { token } => {
                put_varint(buf, T_V1_PATH_CHALLENGE);
                buf.extend_from_slice(&token.to_be_bytes());
            }
            Frame::Stream(d) => StreamData::encode_parts(buf, d.id, d.offset, d.fin, &d.data),
            Frame::ResetStream { id, code, final_size } => {
                put_varint(buf, T_RESET_STREAM);
                put_varint(buf, *id);
                put_varint(buf, *code);
                put_varint(buf, *final_size);
            }
            Frame::StopSending { id, code } => {
                put_varint(buf, T_STOP_SENDING);
                put_varint(buf, *id);
                put_varint(buf, *code);
            }
            Frame::StreamFrame { kind, id, value } => {
                put_varint(buf, *kind);
                put_varint(buf, *id);
                put_varint(buf, *value);
            }
            Frame::StreamLimit { kind, value } => {
                put_varint(buf, *kind);
                put_varint(buf, *value);
            }
            Frame::Data(d) => DataFrame::encode_parts(
                buf,
                d.message_id,
                d.message_start,
                d.message_len,
                d.offset,
                d.fin,
                &d.data,
            ),
            Frame::Abandon { offset, next_message } => {
                put_varint(buf, T_ABANDON);
                put_varint(buf, *offset);
                put_varint(buf, *next_message);
            }
            Frame::PathStatus { path, status: PathStatus::Closed, .. } => {
                Frame::PathAbandon { path: *path, error: APPLICATION_ABANDON_PATH }.encode(buf)
            }
            Frame::PathStatus { path, seq, status } => {
                let ty = if *status == PathStatus::Backup {
                    T_PATH_STATUS_BACKUP
                } else {
                    T_PATH_STATUS_AVAILABLE
                };
                put_varint(buf, ty);
                put_varint(buf, u64::from(path.0));
                put_varint(buf, *seq);
            }
            Frame::PathAbandon { path, error } => {
                put_varint(buf, T_PATH_ABANDON);
                put_varint(buf, u64::from(path.0));
                put_varint(buf, *error);
            }
            Frame::MaxPathId { max } => {
                put_varint(buf, T_MAX_PATH_ID);
                put_varint(buf, u64::from(max.0));
            }
            Frame::PathsBlocked { max } => {
                put_varint(buf, T_PATHS_BLOCKED);
                put_varint(buf, u64::from(max.0));
            }
            Frame::PathCidsBlocked { path, next_seq } => {
                put_varint(buf, T_PATH_CIDS_BLOCKED);
                put_varint(buf, u64::from(path.0));
                put_varint(buf, *next_seq);
            }
            Frame::ReadRate { bps } => {
                put_varint(buf, T_READ_RATE);
                put_varint(buf, *bps);
            }
            Frame::Playout(p) => {
                put_varint(buf, T_PLAYOUT);
                put_varint(buf, p.buffer_ms.min(MAX_PLAYOUT_MS));
                put_varint(buf, p.next_deadline_ms.map_or(0, |d| d.min(MAX_PLAYOUT_MS) + 1));
                let mut flags = 0;
                if p.stalled {
                    flags |= PLAYOUT_STALLED;
                }
                if p.started {
                    flags |= PLAYOUT_STARTED;
                }
                buf.push(flags);
            }
            Frame::MaxData { max } => {
                put_varint(buf, T_MAX_DATA);
                put_varint(buf, *max);
            }
            Frame::Close { code, reason, application } => {
                put_varint(buf, if *application { T_APPLICATION_CLOSE } else { T_TRANSPORT_CLOSE });
                put_varint(buf, *code);
                if !application {
                    // The frame type that caused the error: 0, unknown (§19.19).
                    put_varint(buf, 0);
                }
                let r = &reason[..reason.len().min(MAX_CLOSE_REASON)];
                put_varint(buf, r.len() as u64);
                buf.extend_from_slice(r);
            }
            Frame::RateFeedback(f) => {
                put_varint(buf, T_RATE_FEEDBACK);
                put_varint(buf, u64::from(f.path.0));
                put_varint(buf, f.x_recv);
                put_varint(buf, f.loss_ppb);
                put_varint(buf, f.t_delay_us);
            }
            Frame::PathJoin { token, role } => {
                put_varint(buf, T_PATH_JOIN);
                buf.extend_from_slice(&token.to_be_bytes());
                buf.push(role_code(*role));
            }
            Frame::PathChallenge { echo, token } => {
                put_varint(buf, T_PATH_CHALLENGE);
                buf.extend_from_slice(&echo.to_be_bytes());
                buf.extend_from_slice(&token.to_be_bytes());
            }
            Frame::PathResponse { token } => {
                put_varint(buf, T_PATH_RESPONSE);
                buf.extend_from_slice(&token.to_be_bytes());
            }
            Frame::PathNewCid { path, seq, retire_prior_to, cid, reset_token } => {
                put_varint(buf, T_PATH_NEW_CID);
                put_varint(buf, u64::from(path.0));
                encode_new_cid_body(*seq, *retire_prior_to, cid, reset_token, buf);
            }
            Frame::PathProbe { path } => {
                put_varint(buf, T_PATH_PROBE);
                put_varint(buf, u64::from(path.0));
            }
            Frame::Coded(c) => {
                put_varint(buf, T_CODED);
                put_varint(buf, c.first);
                put_varint(buf, u64::from(c.count));
                buf.extend_from_slice(&c.seed.to_be_bytes());
                let p = &c.payload[..c.payload.len().min(MAX_CODED_LEN)];
                put_varint(buf, p.len() as u64);
                buf.extend_from_slice(p);
            }
            Frame::FecSource { id } => {
                put_varint(buf, T_FEC_SOURCE);
                put_varint(buf, *id);
            }
            Frame::FecAck { ranges } => {
                put_varint(buf, T_FEC_ACK);
                let ranges = &ranges[..ranges.len().min(MAX_FEC_ACK_RANGES)];
                put_varint(buf, ranges.len() as u64);
                for &(lo, hi) in ranges {
                    put_varint(buf, lo);
                    put_varint(buf, hi.saturating_sub(lo));
                }
            }
        }
    }

    /// Encoded size in bytes.
    pub fn encoded_len(&self) -> usize {
        match self {
            Frame::Data(d) => DataFrame::encoded_len(
                d.message_id,
                d.message_start,
                d.message_len,
                d.offset.saturating_sub(d.message_start),
                d.data.len(),
            ),
            Frame::Ack(a) => {
                // As `encode` writes it, without writing it.
                let largest = a.largest();
                let mut n = varint_len(a.frame_type())
                    + varint_len(u64::from(a.path.0))
                    + varint_len(largest)
                    + varint_len(a.delay_us)
                    + varint_len(a.ranges.len().saturating_sub(1) as u64);
                let mut prev_smallest = 0;
                for (i, &(lo, hi)) in a.ranges.iter().enumerate() {
                    if i > 0 {
                        n += varint_len(prev_smallest - hi - 2);
                    }
                    n += varint_len(hi - lo);
                    prev_smallest = lo;
                }
                if !a.timestamps.is_empty() {
                    n += varint_len(a.timestamps.len() as u64);
                }
                for &(pn, t) in &a.timestamps {
                    n += varint_len(largest.saturating_sub(pn)) + varint_len(t);
                }
                n
            }
            other => {
                let mut v = Vec::new();
                other.encode(&mut v);
                v.len()
            }
        }
    }

    /// Reads one frame. Never panics; every returned frame is valid.
    pub fn decode(r: &mut Reader<'_>) -> Result<Frame, WireError> {
        Frame::decode_in(r, None)
    }

    /// As [`Frame::decode`], where `r` reads `payload`: a DATA frame's bytes are then a
    /// view of `payload` rather than a copy, when they are at least a quarter of it (so
    /// whoever keeps the bytes keeps at most four times their size alive).
    pub fn decode_shared(r: &mut Reader<'_>, payload: &Bytes) -> Result<Frame, WireError> {
        Frame::decode_in(r, Some(payload))
    }

    fn decode_in(r: &mut Reader<'_>, shared: Option<&Bytes>) -> Result<Frame, WireError> {
        let ty = r.varint()?;
        Ok(match ty {
            T_PING => Frame::Ping,
            T_ACK => Frame::Ack(decode_ack(r, AckKind::Plain, false)?),
            T_ACK_ECN => Frame::Ack(decode_ack(r, AckKind::Ecn, false)?),
            T_PATH_ACK => Frame::Ack(decode_ack(r, AckKind::Plain, true)?),
            T_PATH_ACK_ECN => Frame::Ack(decode_ack(r, AckKind::Ecn, true)?),
            T_PATH_ACK_TIMESTAMPS => Frame::Ack(decode_ack(r, AckKind::Timestamps, true)?),
            T_HANDSHAKE_DONE => Frame::HandshakeDone,
            T_CRYPTO => {
                let offset = r.varint()?;
                let len = r.varint()?;
                if offset.checked_add(len).is_none_or(|e| e > VARINT_MAX) {
                    return Err(WireError::Invalid("crypto offset"));
                }
                let data = r.bytes(usize::try_from(len).map_err(|_| WireError::Truncated)?)?;
                Frame::Crypto { offset, data: Bytes::copy_from_slice(data) }
            }
            T_NEW_TOKEN => {
                // §19.7: an empty token is a FRAME_ENCODING_ERROR.
                let len = r.varint()?;
                if len == 0 {
                    return Err(WireError::Invalid("empty token"));
                }
                let token = r.bytes(usize::try_from(len).map_err(|_| WireError::Truncated)?)?;
                Frame::NewToken { token: Bytes::copy_from_slice(token) }
            }
            T_RETIRE_CONNECTION_ID => Frame::RetireCid { path: PathId(0), seq: r.varint()? },
            T_PATH_RETIRE_CID => {
                Frame::RetireCid { path: PathId(r.varint_u32("path")?), seq: r.varint()? }
            }
            T_V1_PATH_CHALLENGE => Frame::PeerChallenge { token: r.u64_fixed()? },
            T_STREAM..=T_STREAM_LAST
            | T_RESET_STREAM
            | T_STOP_SENDING
            | T_MAX_STREAM_DATA
            | T_STREAM_DATA_BLOCKED => decode_stream_frame(r, ty, shared)?,
            T_MAX_STREAMS_BIDI
            | T_MAX_STREAMS_UNI
            | T_STREAMS_BLOCKED_BIDI
            | T_STREAMS_BLOCKED_UNI => {
                let value = r.varint()?;
                if value > MAX_STREAM_COUNT {
                    return Err(WireError::Invalid("stream count"));
                }
                Frame::StreamLimit { kind: ty, value }
            }
            T_DATA_BLOCKED => Frame::StreamLimit { kind: ty, value: r.varint()? },
            T_DATA | T_DATA_FIN => {
                let message_id = r.varint()?;
                let message_start = r.varint()?;
                let message_len = r.varint()?;
                let rel = r.varint()?;
                let len = r.varint()?;
                let msg_end = message_start.checked_add(message_len).filter(|&e| e <= VARINT_MAX);
                let msg_end = msg_end.ok_or(WireError::Invalid("message length"))?;
                let rel_end = rel.checked_add(len).ok_or(WireError::Invalid("data length"))?;
                if rel_end > message_len {
                    return Err(WireError::Invalid("data length"));
                }
                let _ = msg_end;
                let len = usize::try_from(len).map_err(|_| WireError::Truncated)?;
                let at = r.position();
                let bytes = r.bytes(len)?;
                let data = match shared {
                    Some(p)
                        if std::ptr::eq(p.as_ref(), r.input())
                            && len.saturating_mul(4) >= p.len() =>
                    {
                        p.slice(at..at + len)
                    }
                    _ => Bytes::copy_from_slice(bytes),
                };
                Frame::Data(DataFrame {
                    message_id,
                    message_start,
                    message_len,
                    offset: message_start + rel,
                    fin: ty == T_DATA_FIN,
                    data,
                })
            }
            T_ABANDON => Frame::Abandon { offset: r.varint()?, next_message: r.varint()? },
            T_PATH_STATUS_BACKUP | T_PATH_STATUS_AVAILABLE => {
                let path = PathId(r.varint_u32("path")?);
                let seq = r.varint()?;
                let status = if ty == T_PATH_STATUS_BACKUP {
                    PathStatus::Backup
                } else {
                    PathStatus::Active
                };
                Frame::PathStatus { path, seq, status }
            }
            T_PATH_ABANDON => {
                Frame::PathAbandon { path: PathId(r.varint_u32("path")?), error: r.varint()? }
            }
            T_MAX_PATH_ID => Frame::MaxPathId { max: PathId(r.varint_u32("path")?) },
            T_PATHS_BLOCKED => Frame::PathsBlocked { max: PathId(r.varint_u32("path")?) },
            T_PATH_CIDS_BLOCKED => Frame::PathCidsBlocked {
                path: PathId(r.varint_u32("path")?),
                next_seq: r.varint()?,
            },
            T_READ_RATE => Frame::ReadRate { bps: r.varint()? },
            T_PLAYOUT => {
                let buffer_ms = r.varint()?;
                if buffer_ms > MAX_PLAYOUT_MS {
                    return Err(WireError::Invalid("playout buffer"));
                }
                let next_deadline_ms = match r.varint()? {
                    0 => None,
                    d if d - 1 <= MAX_PLAYOUT_MS => Some(d - 1),
                    _ => return Err(WireError::Invalid("playout deadline")),
                };
                let flags = r.u8()?;
                if flags & !(PLAYOUT_STALLED | PLAYOUT_STARTED) != 0 {
                    return Err(WireError::Invalid("playout flags"));
                }
                let stalled = flags & PLAYOUT_STALLED != 0;
                let started = flags & PLAYOUT_STARTED != 0;
                if stalled && !started {
                    return Err(WireError::Invalid("playout flags"));
                }
                Frame::Playout(PlayoutFeedback { buffer_ms, next_deadline_ms, stalled, started })
            }
            T_MAX_DATA => Frame::MaxData { max: r.varint()? },
            T_TRANSPORT_CLOSE | T_APPLICATION_CLOSE => {
                let code = r.varint()?;
                let application = ty == T_APPLICATION_CLOSE;
                if !application {
                    // The offending frame's type: informational, not kept.
                    r.varint()?;
                }
                let len = r.varint()?;
                if len > MAX_CLOSE_REASON as u64 {
                    return Err(WireError::Invalid("reason length"));
                }
                let reason = Bytes::copy_from_slice(r.bytes(len as usize)?);
                Frame::Close { code, reason, application }
            }
            T_RATE_FEEDBACK => {
                let path = PathId(r.varint_u32("path")?);
                let x_recv = r.varint()?;
                let loss_ppb = r.varint()?;
                if loss_ppb > LOSS_RATE_SCALE as u64 {
                    return Err(WireError::Invalid("loss event rate"));
                }
                let t_delay_us = r.varint()?;
                Frame::RateFeedback(RateFeedbackFrame { path, x_recv, loss_ppb, t_delay_us })
            }
            T_PATH_JOIN => {
                let token = r.u64_fixed()?;
                Frame::PathJoin { token, role: role_from(r.u8()?)? }
            }
            T_PATH_CHALLENGE => {
                Frame::PathChallenge { echo: r.u64_fixed()?, token: r.u64_fixed()? }
            }
            T_PATH_RESPONSE => Frame::PathResponse { token: r.u64_fixed()? },
            T_PATH_PROBE => Frame::PathProbe { path: PathId(r.varint_u32("path")?) },
            T_PATH_NEW_CID | T_NEW_CONNECTION_ID => {
                let path =
                    if ty == T_PATH_NEW_CID { PathId(r.varint_u32("path")?) } else { PathId(0) };
                let seq = r.varint()?;
                // RFC 9000 §19.15: Retire Prior To above the sequence number is malformed.
                let retire_prior_to = r.varint()?;
                if retire_prior_to > seq {
                    return Err(WireError::Invalid("retire prior to"));
                }
                // RFC 9000 §19.15: 1 to 20 bytes (Braid's own are 8; a peer's may differ).
                let len = usize::from(r.u8()?);
                if !(1..=MAX_CID_LEN).contains(&len) {
                    return Err(WireError::Invalid("connection id length"));
                }
                let cid = LongCid::from_slice(r.bytes(len)?).ok_or(WireError::Truncated)?;
                Frame::PathNewCid {
                    path,
                    seq,
                    retire_prior_to,
                    cid,
                    reset_token: r
                        .bytes(crate::proto::reset::TOKEN_LEN)?
                        .try_into()
                        .map_err(|_| WireError::Truncated)?,
                }
            }
            T_CODED => {
                let first = r.varint()?;
                let count = r.varint()?;
                if count == 0 || count > u64::from(crate::fec::MAX_WINDOW) {
                    return Err(WireError::Invalid("coded count"));
                }
                if first + count > VARINT_MAX {
                    return Err(WireError::Invalid("coded window"));
                }
                let seed = r.bytes(2)?;
                let seed = u16::from_be_bytes([seed[0], seed[1]]);
                let len = r.varint()?;
                if len > MAX_CODED_LEN as u64 {
                    return Err(WireError::Invalid("coded length"));
                }
                let payload = Bytes::copy_from_slice(r.bytes(len as usize)?);
                Frame::Coded(crate::fec::Repair { first, count: count as u32, seed, payload })
            }
            T_FEC_SOURCE => Frame::FecSource { id: r.varint()? },
            T_FEC_ACK => {
                let count = r.varint()?;
                if count == 0 || count > MAX_FEC_ACK_RANGES as u64 {
                    return Err(WireError::Invalid("fec ack count"));
                }
                let mut ranges: Vec<(u64, u64)> = Vec::new();
                for _ in 0..count {
                    let lo = r.varint()?;
                    let len = r.varint()?;
                    let hi = lo.checked_add(len).filter(|&h| h <= VARINT_MAX);
                    let hi = hi.ok_or(WireError::Invalid("fec ack range"))?;
                    if ranges.last().is_some_and(|&(_, prev)| lo <= prev) {
                        return Err(WireError::Invalid("fec ack order"));
                    }
                    ranges.push((lo, hi));
                }
                Frame::FecAck { ranges }
            }
            other => return Err(WireError::UnknownFrame(other)),
        })
    }
}

/// An ACK's fields after its type (and path id): RFC 9000 §19.3's, then Braid's receive
/// timestamps if it carries any.
fn encode_ack_body(a: &AckFrame, buf: &mut Vec<u8>) {
    let largest = a.largest();
    put_varint(buf, largest);
    put_varint(buf, a.delay_us);
    put_varint(buf, a.ranges.len().saturating_sub(1) as u64);
    let mut prev_smallest = 0;
    for (i, &(lo, hi)) in a.ranges.iter().enumerate() {
        if i == 0 {
            put_varint(buf, hi - lo);
        } else {
            // RFC 9000 §19.3.1: gap = previous smallest − this largest − 2.
            put_varint(buf, prev_smallest - hi - 2);
            put_varint(buf, hi - lo);
        }
        prev_smallest = lo;
    }
    if !a.timestamps.is_empty() {
        put_varint(buf, a.timestamps.len() as u64);
        for &(pn, t) in &a.timestamps {
            put_varint(buf, largest.saturating_sub(pn));
            put_varint(buf, t);
        }
    }
}

/// NEW_CONNECTION_ID's fields after its type (and path id), RFC 9000 §19.15.
fn encode_new_cid_body(
    seq: u64,
    retire_prior_to: u64,
    cid: &LongCid,
    reset_token: &[u8],
    buf: &mut Vec<u8>,
) {
    put_varint(buf, seq);
    put_varint(buf, retire_prior_to);
    buf.push(cid.as_slice().len() as u8);
    buf.extend_from_slice(cid.as_slice());
    buf.extend_from_slice(reset_token);
}

/// Most streams MAX_STREAMS and STREAMS_BLOCKED may name (RFC 9000 §19.11, §19.14).
const MAX_STREAM_COUNT: u64 = 1 << 60;

/// Reads a v1 stream frame of type `ty` after its type (a STREAM frame's bytes shared with
/// `shared` as a DATA frame's are).
fn decode_stream_frame(
    r: &mut Reader<'_>,
    ty: u64,
    shared: Option<&Bytes>,
) -> Result<Frame, WireError> {
    let id = r.varint()?;
    Ok(match ty {
        T_STREAM..=T_STREAM_LAST => {
            let offset = if ty & STREAM_OFF != 0 { r.varint()? } else { 0 };
            let len = if ty & STREAM_LEN != 0 { r.varint()? } else { r.remaining() as u64 };
            // §19.8: offset + length at most 2^62 − 1.
            if offset.checked_add(len).is_none_or(|e| e > VARINT_MAX) {
                return Err(WireError::Invalid("stream offset"));
            }
            let len = usize::try_from(len).map_err(|_| WireError::Truncated)?;
            let at = r.position();
            let bytes = r.bytes(len)?;
            let data = match shared {
                Some(p)
                    if std::ptr::eq(p.as_ref(), r.input()) && len.saturating_mul(4) >= p.len() =>
                {
                    p.slice(at..at + len)
                }
                _ => Bytes::copy_from_slice(bytes),
            };
            Frame::Stream(StreamData { id, offset, fin: ty & STREAM_FIN != 0, data })
        }
        T_RESET_STREAM => Frame::ResetStream { id, code: r.varint()?, final_size: r.varint()? },
        T_STOP_SENDING => Frame::StopSending { id, code: r.varint()? },
        _ => Frame::StreamFrame { kind: ty, id, value: r.varint()? },
    })
}

/// Most ranges an ACK frame may carry (a sender keeps 32); more is malformed.
pub const MAX_ACK_FRAME_RANGES: u64 = 256;
/// Most receive timestamps an ACK frame may carry (a sender puts 1); more is malformed.
pub const MAX_ACK_FRAME_TIMESTAMPS: u64 = 64;

/// Which of the three ACK layouts is read: they share RFC 10069's PATH_ACK fields.
#[derive(Clone, Copy, PartialEq, Eq)]
enum AckKind {
    /// PATH_ACK.
    Plain,
    /// PATH_ACK_ECN: three ECN counts follow (read and not used: Braid does not mark ECN).
    Ecn,
    /// Braid's PATH_ACK_TIMESTAMPS: receive timestamps follow.
    Timestamps,
}

/// Reads an ACK of `kind` after its type: RFC 10069's PATH_ACK (`with_path`) or v1's ACK,
/// which is path 0's.
fn decode_ack(r: &mut Reader<'_>, kind: AckKind, with_path: bool) -> Result<AckFrame, WireError> {
    let path = if with_path { PathId(r.varint_u32("path")?) } else { PathId(0) };
    let largest = r.varint()?;
    let delay_us = r.varint()?;
    let count = r.varint()?;
    if count >= MAX_ACK_FRAME_RANGES {
        return Err(WireError::Invalid("ack range count"));
    }
    let first = r.varint()?;
    let mut lo = largest.checked_sub(first).ok_or(WireError::Invalid("ack range"))?;
    // No pre-allocation from the untrusted count: each range costs at least two input
    // bytes, so the vector is bounded by the datagram size.
    let mut ranges = AckRanges::new();
    ranges.push((lo, largest));
    for _ in 0..count {
        let gap = r.varint()?;
        let len = r.varint()?;
        let hi = lo
            .checked_sub(gap)
            .and_then(|v| v.checked_sub(2))
            .ok_or(WireError::Invalid("ack gap"))?;
        lo = hi.checked_sub(len).ok_or(WireError::Invalid("ack range"))?;
        ranges.push((lo, hi));
    }
    let mut timestamps = AckTimestamps::new();
    if kind == AckKind::Ecn {
        for _ in 0..3 {
            r.varint()?;
        }
    }
    if kind != AckKind::Timestamps {
        return Ok(AckFrame { path, ranges, delay_us, timestamps });
    }
    let ts_count = r.varint()?;
    // A timestamped ACK carries at least one (the encoder writes PATH_ACK without).
    if ts_count == 0 || ts_count > MAX_ACK_FRAME_TIMESTAMPS {
        return Err(WireError::Invalid("ack timestamp count"));
    }
    for _ in 0..ts_count {
        let delta = r.varint()?;
        let t = r.varint()?;
        let pn = largest.checked_sub(delta).ok_or(WireError::Invalid("timestamp packet"))?;
        timestamps.push((pn, t));
    }
    Ok(AckFrame { path, ranges, delay_us, timestamps })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::collection::vec;
    use proptest::prelude::*;

    const V: u64 = VARINT_MAX;

    pub(crate) fn ack_strategy() -> impl Strategy<Value = AckFrame> {
        (
            0u32..1000,
            0u64..(1 << 40),
            vec((0u64..1000, 0u64..1000), 0..20),
            0u64..1000,
            0u64..V,
            vec((0u64..2000, 0u64..V), 0..5),
        )
            .prop_map(|(path, largest, gaps, first, delay_us, ts)| {
                let mut ranges = AckRanges::new();
                let mut lo = largest.saturating_sub(first);
                ranges.push((lo, largest));
                for (gap, len) in gaps {
                    let Some(hi) = lo.checked_sub(gap + 2) else {
                        break;
                    };
                    let Some(l) = hi.checked_sub(len) else { break };
                    ranges.push((l, hi));
                    lo = l;
                }
                let timestamps =
                    ts.into_iter().map(|(d, t)| (largest.saturating_sub(d), t)).collect();
                AckFrame { path: PathId(path), ranges, delay_us, timestamps }
            })
    }

    fn role() -> impl Strategy<Value = PathRole> {
        prop_oneof![
            Just(PathRole::Wifi),
            Just(PathRole::Lte),
            Just(PathRole::ThreeG),
            Just(PathRole::Wired)
        ]
    }

    pub(crate) fn frame_strategy() -> impl Strategy<Value = Frame> {
        // A closed status travels as PATH_ABANDON (tested on its own below).
        let status = prop_oneof![Just(PathStatus::Active), Just(PathStatus::Backup)];
        prop_oneof![
            Just(Frame::Ping),
            ack_strategy().prop_map(Frame::Ack),
            (0..V, 0..V / 2, 0..V / 4, any::<bool>(), vec(any::<u8>(), 0..64), 0..V / 4).prop_map(
                |(message_id, message_start, extra, fin, data, rel)| {
                    let rel = rel.min(extra);
                    let message_len = extra + data.len() as u64;
                    Frame::Data(DataFrame {
                        message_id,
                        message_start,
                        message_len,
                        offset: message_start + rel,
                        fin,
                        data: Bytes::from(data),
                    })
                }
            ),
            (0..V, 0..V).prop_map(|(offset, next_message)| Frame::Abandon { offset, next_message }),
            (any::<u32>(), 0..V, status).prop_map(|(p, seq, status)| Frame::PathStatus {
                path: PathId(p),
                seq,
                status
            }),
            (any::<u32>(), 0..V)
                .prop_map(|(p, error)| Frame::PathAbandon { path: PathId(p), error }),
            any::<u32>().prop_map(|p| Frame::MaxPathId { max: PathId(p) }),
            any::<u32>().prop_map(|p| Frame::PathsBlocked { max: PathId(p) }),
            (any::<u32>(), 0..V)
                .prop_map(|(p, next_seq)| Frame::PathCidsBlocked { path: PathId(p), next_seq }),
            (0..V).prop_map(|bps| Frame::ReadRate { bps }),
            (0..=MAX_PLAYOUT_MS, proptest::option::of(0..=MAX_PLAYOUT_MS), 0u8..3).prop_map(
                |(buffer_ms, next_deadline_ms, st)| Frame::Playout(PlayoutFeedback {
                    buffer_ms,
                    next_deadline_ms,
                    stalled: st == 2,
                    started: st >= 1,
                })
            ),
            (0..V).prop_map(|max| Frame::MaxData { max }),
            (any::<u32>(), 0..V, 0..=1_000_000_000u64, 0..V).prop_map(
                |(p, x_recv, loss_ppb, t_delay_us)| Frame::RateFeedback(RateFeedbackFrame {
                    path: PathId(p),
                    x_recv,
                    loss_ppb,
                    t_delay_us
                })
            ),
            (0..V, vec(any::<u8>(), 0..MAX_CLOSE_REASON), any::<bool>()).prop_map(
                |(code, r, application)| Frame::Close { code, reason: Bytes::from(r), application }
            ),
            (any::<u64>(), role()).prop_map(|(token, role)| Frame::PathJoin { token, role }),
            (any::<u64>(), any::<u64>())
                .prop_map(|(echo, token)| Frame::PathChallenge { echo, token }),
            any::<u64>().prop_map(|token| Frame::PathResponse { token }),
            (any::<u32>(), 0..V, 0..V, vec(any::<u8>(), 1..=20), any::<[u8; 16]>()).prop_map(
                |(p, a, b, cid, reset_token)| Frame::PathNewCid {
                    path: PathId(p),
                    seq: a.max(b),
                    retire_prior_to: a.min(b),
                    cid: LongCid::from_slice(&cid).unwrap_or(LongCid::from_u64(0)),
                    reset_token
                }
            ),
            any::<u32>().prop_map(|p| Frame::PathProbe { path: PathId(p) }),
            (0..V / 2, 1u32..=crate::fec::MAX_WINDOW, any::<u16>(), vec(any::<u8>(), 0..300))
                .prop_map(|(first, count, seed, p)| Frame::Coded(crate::fec::Repair {
                    first,
                    count,
                    seed,
                    payload: Bytes::from(p)
                })),
            (0..V).prop_map(|id| Frame::FecSource { id }),
            vec((0u64..1000, 0u64..1000), 1..MAX_FEC_ACK_RANGES).prop_map(|parts| {
                let mut ranges = Vec::new();
                let mut next = 0u64;
                for (gap, len) in parts {
                    let lo = next + gap;
                    ranges.push((lo, lo + len));
                    next = lo + len + 1;
                }
                Frame::FecAck { ranges }
            }),
            Just(Frame::HandshakeDone),
            vec(any::<u8>(), 1..64).prop_map(|t| Frame::NewToken { token: Bytes::from(t) }),
            (any::<u32>(), 0..V).prop_map(|(p, seq)| Frame::RetireCid { path: PathId(p), seq }),
            any::<u64>().prop_map(|token| Frame::PeerChallenge { token }),
            (prop_oneof![Just(0x11u64), Just(0x15)], 0..V, 0..V)
                .prop_map(|(kind, id, value)| Frame::StreamFrame { kind, id, value }),
            (0..V, 0..V / 2, any::<bool>(), vec(any::<u8>(), 0..100)).prop_map(
                |(id, offset, fin, d)| Frame::Stream(StreamData {
                    id,
                    offset,
                    fin,
                    data: Bytes::from(d)
                })
            ),
            (0..V, 0..V, 0..V).prop_map(|(id, code, final_size)| Frame::ResetStream {
                id,
                code,
                final_size
            }),
            (0..V, 0..V).prop_map(|(id, code)| Frame::StopSending { id, code }),
            (prop_oneof![Just(0x12u64), Just(0x13), Just(0x16), Just(0x17)], 0..=MAX_STREAM_COUNT)
                .prop_map(|(kind, value)| Frame::StreamLimit { kind, value }),
            (0..V).prop_map(|value| Frame::StreamLimit { kind: 0x14, value }),
            (0..V / 2, vec(any::<u8>(), 0..100))
                .prop_map(|(offset, d)| Frame::Crypto { offset, data: Bytes::from(d) }),
        ]
    }

    #[test]
    fn without_multipath_path_0_goes_on_v1s_frames_and_v1s_frames_are_read() {
        let v1 = |f: &Frame| {
            let mut b = Vec::new();
            f.encode_for(&mut b, false);
            b
        };
        let dec = |b: &[u8]| Frame::decode(&mut Reader::new(b));
        // ACK (0x02): largest 7, delay 9, no more range, first range 2.
        let ack = AckFrame {
            path: PathId(0),
            ranges: [(5, 7)].into_iter().collect(),
            delay_us: 9,
            timestamps: AckTimestamps::new(),
        };
        assert_eq!(v1(&Frame::Ack(ack.clone())), [0x02, 7, 9, 0, 2]);
        assert_eq!(dec(&[0x02, 7, 9, 0, 2]), Ok(Frame::Ack(ack.clone())));
        // ACK_ECN (0x03): three counts follow, read and dropped.
        assert_eq!(dec(&[0x03, 7, 9, 0, 2, 1, 2, 3]), Ok(Frame::Ack(ack)));
        // NEW_CONNECTION_ID (0x18): sequence 1, retire prior to 0, length 8, id, token.
        let id = Frame::PathNewCid {
            path: PathId(0),
            seq: 1,
            retire_prior_to: 0,
            cid: LongCid::from_u64(0x0102),
            reset_token: [7; 16],
        };
        let mut want = vec![0x18, 1, 0, 8, 0, 0, 0, 0, 0, 0, 1, 2];
        want.extend_from_slice(&[7; 16]);
        assert_eq!(v1(&id), want);
        assert_eq!(dec(&want), Ok(id));
        // Another stack's ids may have 1 to 20 bytes (RFC 9000 §19.15); 0 or 21 is malformed.
        for len in [1u8, 4, 16, 20] {
            let mut other = vec![0x18, 2, 1, len];
            other.extend((0..len).map(|b| b + 1));
            other.extend_from_slice(&[7; 16]);
            let cid = LongCid::from_slice(&other[4..4 + usize::from(len)]).expect("an id");
            let f = Frame::PathNewCid {
                path: PathId(0),
                seq: 2,
                retire_prior_to: 1,
                cid,
                reset_token: [7; 16],
            };
            assert_eq!(dec(&other), Ok(f.clone()), "{len} bytes");
            assert_eq!(v1(&f), other, "{len} bytes");
        }
        for len in [0u8, 21] {
            let mut bad = vec![0x18, 2, 1, len];
            bad.extend(std::iter::repeat_n(1, usize::from(len)));
            bad.extend_from_slice(&[7; 16]);
            assert!(dec(&bad).is_err(), "{len} bytes");
        }
        assert_eq!(v1(&Frame::RetireCid { path: PathId(0), seq: 3 }), [0x19, 3]);
        assert_eq!(dec(&[0x19, 3]), Ok(Frame::RetireCid { path: PathId(0), seq: 3 }));
        // Other paths keep RFC 10069's frames (only reachable with multipath).
        let other = Frame::RetireCid { path: PathId(2), seq: 3 };
        assert_eq!(v1(&other), [0x7e, 0x79, 2, 3]);
        assert_eq!(dec(&[0x1e]), Ok(Frame::HandshakeDone));
        let mut challenge = vec![0x1a];
        challenge.extend_from_slice(&5u64.to_be_bytes());
        assert_eq!(dec(&challenge), Ok(Frame::PeerChallenge { token: 5 }));
        assert_eq!(
            dec(&[0x06, 4, 2, 0xaa, 0xbb]),
            Ok(Frame::Crypto { offset: 4, data: Bytes::from_static(&[0xaa, 0xbb]) })
        );
        // Stream frames in each of STREAM's layouts.
        let stream = |id, offset, fin, d: &'static [u8]| {
            Ok(Frame::Stream(StreamData { id, offset, fin, data: Bytes::from_static(d) }))
        };
        assert_eq!(dec(&[0x0f, 4, 1, 2, 0xaa, 0xbb]), stream(4, 1, true, &[0xaa, 0xbb]));
        assert_eq!(dec(&[0x08, 9, 1, 2, 3]), stream(9, 0, false, &[1, 2, 3]), "to the end");
        assert_eq!(dec(&[0x0b, 2, 1, 7]), stream(2, 0, true, &[7]), "LEN and FIN");
        assert_eq!(dec(&[0x04, 1, 0, 5]), Ok(Frame::ResetStream { id: 1, code: 0, final_size: 5 }));
        assert_eq!(dec(&[0x05, 1, 3]), Ok(Frame::StopSending { id: 1, code: 3 }));
        assert_eq!(dec(&[0x11, 1, 3]), Ok(Frame::StreamFrame { kind: 0x11, id: 1, value: 3 }));
        assert_eq!(dec(&[0x12, 9]), Ok(Frame::StreamLimit { kind: 0x12, value: 9 }));
        assert_eq!(
            dec(&[0x07, 2, 1, 2]),
            Ok(Frame::NewToken { token: Bytes::from_static(&[1, 2]) })
        );
    }

    #[test]
    fn malformed_v1_frames_are_refused() {
        let dec = |b: &[u8]| Frame::decode(&mut Reader::new(b));
        assert!(dec(&[0x07, 0]).is_err(), "an empty NEW_TOKEN (RFC 9000 19.7)");
        // MAX_STREAMS above 2^60 (19.11): 2^60 + 1 as an 8-byte varint.
        let mut many = vec![0x12];
        put_varint(&mut many, (1 << 60) + 1);
        assert!(dec(&many).is_err());
        // A STREAM frame ending beyond 2^62 - 1 (19.8).
        let mut far = vec![0x0e, 0];
        put_varint(&mut far, VARINT_MAX);
        put_varint(&mut far, 1);
        far.push(0);
        assert!(dec(&far).is_err());
        assert!(dec(&[0x0a, 0, 5, 1]).is_err(), "STREAM shorter than its length");
        assert!(dec(&[0x06, 0, 5, 1]).is_err(), "CRYPTO shorter than its length");
        assert!(dec(&[0x1a, 1, 2]).is_err(), "a PATH_CHALLENGE of 2 bytes");
    }

    proptest! {
        #[test]
        fn every_frame_round_trips(f in frame_strategy()) {
            let mut buf = Vec::new();
            f.encode(&mut buf);
            prop_assert_eq!(buf.len(), f.encoded_len());
            let mut r = Reader::new(&buf);
            prop_assert_eq!(Frame::decode(&mut r), Ok(f));
            prop_assert!(r.is_empty());
        }

        #[test]
        fn every_truncation_of_a_frame_is_an_error(f in frame_strategy()) {
            let mut buf = Vec::new();
            f.encode(&mut buf);
            for cut in 0..buf.len() {
                let mut r = Reader::new(&buf[..cut]);
                prop_assert!(Frame::decode(&mut r).is_err());
            }
        }

        #[test]
        fn random_bytes_never_panic_the_frame_decoder(bytes in vec(any::<u8>(), 0..256)) {
            let mut r = Reader::new(&bytes);
            while !r.is_empty() {
                if Frame::decode(&mut r).is_err() { break; }
            }
        }
    }

    #[test]
    fn data_beyond_its_message_is_rejected() {
        let f = Frame::Data(DataFrame {
            message_id: 1,
            message_start: 10,
            message_len: 4,
            offset: 10,
            fin: false,
            data: Bytes::from_static(b"abcd"),
        });
        let mut buf = Vec::new();
        f.encode(&mut buf);
        // Patch the message length (byte 6: four type bytes, id, start, len) down to 3.
        buf[6] = 3;
        assert_eq!(Frame::decode(&mut Reader::new(&buf)), Err(WireError::Invalid("data length")));
    }

    #[test]
    fn rate_feedback_with_a_loss_rate_above_one_is_rejected() {
        let mut buf = Vec::new();
        for v in [T_RATE_FEEDBACK, 0, 0, 1_000_000_001, 0] {
            put_varint(&mut buf, v);
        }
        assert_eq!(
            Frame::decode(&mut Reader::new(&buf)),
            Err(WireError::Invalid("loss event rate"))
        );
    }

    #[test]
    fn rate_feedback_converts_to_and_from_the_controller_report() {
        let fb = crate::cc::tfrc::RateFeedback {
            x_recv: 44_000.4,
            p: 0.0123456789,
            t_delay: std::time::Duration::from_micros(1234),
        };
        let f = RateFeedbackFrame::from_feedback(PathId(2), &fb);
        assert_eq!(f.path, PathId(2));
        assert_eq!(f.x_recv, 44_000);
        assert_eq!(f.loss_ppb, 12_345_679);
        assert_eq!(f.t_delay_us, 1234);
        let back = f.to_feedback();
        assert!((back.p - 0.012345679).abs() < 1e-12);
        let wild = crate::cc::tfrc::RateFeedback {
            x_recv: f64::NAN,
            p: 7.0,
            t_delay: std::time::Duration::ZERO,
        };
        let f = RateFeedbackFrame::from_feedback(PathId(0), &wild);
        assert_eq!((f.x_recv, f.loss_ppb), (0, 1_000_000_000));
    }

    #[test]
    fn coded_frames_with_absurd_counts_windows_or_lengths_are_rejected() {
        let enc = |first: u64, count: u64, len: u64, body: usize| {
            let mut b = Vec::new();
            put_varint(&mut b, T_CODED);
            put_varint(&mut b, first);
            put_varint(&mut b, count);
            b.extend_from_slice(&[0, 7]);
            put_varint(&mut b, len);
            b.extend(std::iter::repeat_n(0u8, body));
            Frame::decode(&mut Reader::new(&b))
        };
        assert_eq!(enc(0, 0, 1, 1), Err(WireError::Invalid("coded count")));
        assert_eq!(enc(0, 4096, 1, 1), Err(WireError::Invalid("coded count")));
        assert_eq!(enc(VARINT_MAX, 1, 1, 1), Err(WireError::Invalid("coded window")));
        assert_eq!(enc(0, 1, 70_000, 10), Err(WireError::Invalid("coded length")));
        assert_eq!(enc(0, 1, 100, 10), Err(WireError::Truncated));
        assert!(enc(5, 4, 3, 3).is_ok());
        let mut b = Vec::new();
        for v in [T_FEC_ACK, 2, 10, 0, 10, 0] {
            put_varint(&mut b, v);
        }
        assert_eq!(Frame::decode(&mut Reader::new(&b)), Err(WireError::Invalid("fec ack order")));
        let mut b = Vec::new();
        for v in [T_FEC_ACK, 1000] {
            put_varint(&mut b, v);
        }
        assert_eq!(Frame::decode(&mut Reader::new(&b)), Err(WireError::Invalid("fec ack count")));
    }

    #[test]
    fn ack_with_gap_below_zero_is_rejected() {
        // PATH_ACK: path 0, largest 1, delay 0, 1 extra range, first 0, gap 5, len 0
        let buf = [0x3e, 0, 1, 0, 1, 0, 5, 0];
        assert_eq!(Frame::decode(&mut Reader::new(&buf)), Err(WireError::Invalid("ack gap")));
    }

    /// The frames QUIC v1 and RFC 10069 define are written byte for byte as they say.
    #[test]
    fn standard_frames_have_the_standard_layouts() {
        let enc = |f: Frame| {
            let mut b = Vec::new();
            f.encode(&mut b);
            b
        };
        // PATH_ACK of packets 5..=7 and 2 on path 1, ACK Delay 9: type 0x3e, path, largest,
        // delay, one more range, first range 2, gap 5 − 2 − 2 = 1, range 0.
        let ack = AckFrame {
            path: PathId(1),
            ranges: [(5, 7), (2, 2)].into_iter().collect(),
            delay_us: 9,
            timestamps: AckTimestamps::new(),
        };
        assert_eq!(enc(Frame::Ack(ack.clone())), [0x3e, 1, 7, 9, 1, 2, 1, 0]);
        // PATH_ACK_ECN decodes to the same acknowledgement, its counts read and dropped.
        let ecn = [0x3f, 1, 7, 9, 1, 2, 1, 0, 4, 5, 6];
        assert_eq!(Frame::decode(&mut Reader::new(&ecn)), Ok(Frame::Ack(ack)));
        // PATH_STATUS_BACKUP 0x3e76 and _AVAILABLE 0x3e77: two-byte varint types.
        let backup = Frame::PathStatus { path: PathId(1), seq: 3, status: PathStatus::Backup };
        assert_eq!(enc(backup), [0x7e, 0x76, 1, 3]);
        let active = Frame::PathStatus { path: PathId(1), seq: 4, status: PathStatus::Active };
        assert_eq!(enc(active), [0x7e, 0x77, 1, 4]);
        // A closed status is PATH_ABANDON 0x3e75 with APPLICATION_ABANDON_PATH.
        let closed = Frame::PathStatus { path: PathId(2), seq: 5, status: PathStatus::Closed };
        assert_eq!(enc(closed), [0x7e, 0x75, 2, 0x3e]);
        // CONNECTION_CLOSE: transport (frame type 0) and application.
        let close = |application| Frame::Close {
            code: 0x0a,
            reason: Bytes::from_static(b"x"),
            application,
        };
        assert_eq!(enc(close(false)), [0x1c, 0x0a, 0, 1, b'x']);
        assert_eq!(enc(close(true)), [0x1d, 0x0a, 1, b'x']);
        assert_eq!(enc(Frame::MaxData { max: 7 }), [0x10, 7]);
        assert_eq!(enc(Frame::PathResponse { token: 0x0102 }), [0x1b, 0, 0, 0, 0, 0, 0, 1, 2]);
        // PATH_NEW_CONNECTION_ID: path, sequence, retire prior to, length, id, token.
        let cid = Frame::PathNewCid {
            path: PathId(1),
            seq: 0,
            retire_prior_to: 0,
            cid: LongCid::from_u64(9),
            reset_token: [7; 16],
        };
        let mut want = vec![0x7e, 0x78, 1, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 9];
        want.extend([7; 16]);
        assert_eq!(enc(cid), want);
        assert_eq!(enc(Frame::MaxPathId { max: PathId(9) }), [0x7e, 0x7a, 9]);
        assert_eq!(enc(Frame::PathsBlocked { max: PathId(7) }), [0x7e, 0x7b, 7]);
        let cids_blocked = Frame::PathCidsBlocked { path: PathId(2), next_seq: 1 };
        assert_eq!(enc(cids_blocked), [0x7e, 0x7c, 2, 1]);
    }

    #[test]
    fn new_connection_ids_of_no_or_too_long_length_or_retiring_ahead_are_refused() {
        let frame = |retire: u64, len: u8| {
            let mut b = Vec::new();
            put_varint(&mut b, T_PATH_NEW_CID);
            b.extend([1, 2]);
            put_varint(&mut b, retire);
            b.push(len);
            b.extend(std::iter::repeat_n(0u8, usize::from(len) + 16));
            Frame::decode(&mut Reader::new(&b))
        };
        assert!(frame(2, 8).is_ok());
        assert_eq!(frame(3, 8), Err(WireError::Invalid("retire prior to")));
        assert!(frame(0, 4).is_ok() && frame(0, 20).is_ok(), "1 to 20 bytes (RFC 9000 §19.15)");
        assert_eq!(frame(0, 0), Err(WireError::Invalid("connection id length")));
        assert_eq!(frame(0, 21), Err(WireError::Invalid("connection id length")));
    }

    #[test]
    fn a_timestamped_ack_without_timestamps_is_refused() {
        let mut b = Vec::new();
        put_varint(&mut b, T_PATH_ACK_TIMESTAMPS);
        b.extend([0, 1, 0, 0, 0, 0]);
        assert_eq!(
            Frame::decode(&mut Reader::new(&b)),
            Err(WireError::Invalid("ack timestamp count"))
        );
    }

    #[test]
    fn acks_with_too_many_ranges_or_timestamps_are_rejected() {
        let largest = 1_000_000;
        let ack = |ranges: u64, stamps: u64| AckFrame {
            path: PathId(0),
            ranges: (0..ranges).map(|k| (largest - 3 * k, largest - 3 * k)).collect(),
            delay_us: 0,
            timestamps: (0..stamps).map(|k| (largest - k, k)).collect(),
        };
        let decode = |a: AckFrame| {
            let mut buf = Vec::new();
            Frame::Ack(a).encode(&mut buf);
            Frame::decode(&mut Reader::new(&buf))
        };
        let most = ack(MAX_ACK_FRAME_RANGES, MAX_ACK_FRAME_TIMESTAMPS);
        assert_eq!(decode(most.clone()), Ok(Frame::Ack(most)));
        assert_eq!(
            decode(ack(MAX_ACK_FRAME_RANGES + 1, 1)),
            Err(WireError::Invalid("ack range count"))
        );
        assert_eq!(
            decode(ack(1, MAX_ACK_FRAME_TIMESTAMPS + 1)),
            Err(WireError::Invalid("ack timestamp count"))
        );
        // 10 000 ranges fit in one 64 kB datagram; they are refused before any is read.
        assert!(decode(ack(10_000, 10_000)).is_err());
    }

    #[test]
    fn playout_feedback_round_trips() {
        let cases = [
            PlayoutFeedback::default(),
            PlayoutFeedback {
                buffer_ms: 1234,
                next_deadline_ms: Some(1234),
                stalled: false,
                started: true,
            },
            PlayoutFeedback { buffer_ms: 0, next_deadline_ms: None, stalled: true, started: true },
            PlayoutFeedback {
                buffer_ms: MAX_PLAYOUT_MS,
                next_deadline_ms: Some(0),
                stalled: false,
                started: true,
            },
            PlayoutFeedback {
                buffer_ms: 7,
                next_deadline_ms: Some(MAX_PLAYOUT_MS),
                stalled: false,
                started: false,
            },
        ];
        for fb in cases {
            let f = Frame::Playout(fb);
            let mut buf = Vec::new();
            f.encode(&mut buf);
            assert_eq!(buf.len(), f.encoded_len());
            assert_eq!(Frame::decode(&mut Reader::new(&buf)), Ok(f), "{fb:?}");
        }
    }

    /// A PLAYOUT frame does not ask for an ACK: it is never retransmitted (the next report
    /// replaces it). When it made the client's ACK packets ack-eliciting, the server had to
    /// acknowledge about 2 800 more of them per minute on the hard QoE pair, and the reports
    /// alone cost 0.59 s of stall time (`mptcp-qe-qoe-no-copies` against `mptcp-qe`, 50
    /// seeds; BENCHMARKS.md "QoE-driven re-injection").
    #[test]
    fn playout_feedback_elicits_no_ack() {
        assert!(!Frame::Playout(PlayoutFeedback::default()).is_ack_eliciting());
        assert!(Frame::ReadRate { bps: 1 }.is_ack_eliciting());
        assert!(Frame::Ping.is_ack_eliciting());
    }

    #[test]
    fn hostile_playout_frames_are_refused() {
        let frame = |buffer: u64, deadline: u64, flags: Option<u8>| {
            let mut b = Vec::new();
            put_varint(&mut b, T_PLAYOUT);
            put_varint(&mut b, buffer);
            put_varint(&mut b, deadline);
            b.extend(flags);
            Frame::decode(&mut Reader::new(&b))
        };
        assert_eq!(
            frame(MAX_PLAYOUT_MS + 1, 0, Some(0)),
            Err(WireError::Invalid("playout buffer"))
        );
        assert_eq!(
            frame(0, MAX_PLAYOUT_MS + 2, Some(0)),
            Err(WireError::Invalid("playout deadline"))
        );
        assert_eq!(frame(0, VARINT_MAX, Some(0)), Err(WireError::Invalid("playout deadline")));
        assert_eq!(frame(0, 0, Some(4)), Err(WireError::Invalid("playout flags")));
        assert_eq!(frame(0, 0, Some(PLAYOUT_STALLED)), Err(WireError::Invalid("playout flags")));
        assert_eq!(frame(0, 0, None), Err(WireError::Truncated));
        // Values above the bound are clamped when encoding, so what is sent always decodes.
        let big = Frame::Playout(PlayoutFeedback {
            buffer_ms: u64::MAX,
            next_deadline_ms: Some(u64::MAX),
            stalled: true,
            started: true,
        });
        let mut buf = Vec::new();
        big.encode(&mut buf);
        let back = Frame::decode(&mut Reader::new(&buf));
        assert_eq!(
            back,
            Ok(Frame::Playout(PlayoutFeedback {
                buffer_ms: MAX_PLAYOUT_MS,
                next_deadline_ms: Some(MAX_PLAYOUT_MS),
                stalled: true,
                started: true,
            }))
        );
    }
}
