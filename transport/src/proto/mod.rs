//! Wire format and the multipath [`Connection`].
//!
//! # Layers
//!
//! - [`wire`]: RFC 9000 varints and a bounds-checked reader.
//! - [`frame`], [`packet`]: typed frames and packets. `decode` never panics and only
//!   produces well-formed values; `decode(encode(x)) == x` is property tested and fuzzed
//!   (`transport/fuzz`).
//! - [`recovery`]: per-path RTT (RFC 6298), one-way delay, loss detection (RFC 9002
//!   packet and time thresholds) and the retransmission timeout.
//! - [`send`]: the outgoing message stream: retransmission queue, partial reliability
//!   ([`Reliability::Deadline`]), ABANDON bookkeeping.
//! - [`assembly`]: bounded in-order reassembly, gaps, and the flow-control window.
//! - [`mapping`]: messages on QUIC v1 unidirectional streams, toward a peer without Braid's
//!   frames (one stream per message, RESET_STREAM for an abandoned one).
//! - [`rate`]: the application read-rate meter.
//! - [`connection`]: the sans-IO state machine tying it together; its documentation states
//!   the call contract and lists its modules, one per job.
//!
//! # Protocol in brief
//!
//! Every packet is a protected header (connection id, path id for 1-RTT packets, packet
//! number) followed by AEAD-protected frames (see [`crypto`] for the layouts and
//! [`frame`] for the frames). The client picks the connection id (from its seed) and
//! both directions use it, so a driver routes with [`peek_connection_id`] alone.
//!
//! - **Handshake**: TLS 1.3 through rustls's QUIC interface (`connection/handshake.rs`):
//!   Initial and Handshake packets carry the TLS bytes; the transport parameters (receive
//!   window, path-0 radio) travel in the TLS extension. Every later packet is protected
//!   with the 1-RTT keys; a packet that fails authentication is dropped and counted.
//! - **Paths**: the client opens more with PATH_JOIN on the new addresses; the server
//!   answers with one PATH_CHALLENGE there and sends nothing else to that address until
//!   the client's PATH_RESPONSE arrives. Either side closes a path or marks it backup with
//!   PATH_STATUS. Each path has its own packet-number space, RTT, loss state and pacing.
//! - **Messages**: each direction is one byte stream cut into messages; a DATA frame names
//!   its message (id, start, length), so any fragment describes its message. The receiver
//!   delivers strictly in id order. A sender that gives up on messages (deadline passed or
//!   retransmission budget spent) sends ABANDON(offset, next id): everything below is
//!   acknowledged or abandoned, and the receiver turns missing messages into
//!   [`Delivery::Gap`]s. Toward another QUIC stack the same messages travel on v1
//!   unidirectional streams instead ([`mapping`]).
//! - **Flow control**: MAX_DATA carries `read offset + receive buffer`, so the window is
//!   the free buffer space and a slow reader slows the sender.
//! - **Feedback**: ACKs (per path, ranges, delay, receive timestamp of the largest) go on
//!   the path chosen by [`AckPathPolicy`] (default: the path the data came on); READ_RATE
//!   carries the application read rate every [`Config::read_rate_interval`] while reading.
//!   With [`Config::rate_feedback`] (rate-based controllers: TFRC, MARC) the data receiver
//!   keeps RFC 5348's loss-event history per path and sends RATE_FEEDBACK (X_recv, p,
//!   t_delay) at the first data packet, then once per RTT while data arrives, and at once
//!   when p rises; the sender hands it to [`crate::cc::Controller::on_rate_feedback`] and
//!   re-paces the path at the new rate. Only packets carrying data are paced.
//!
//! Not provided: address migration of an existing path, and stream-level
//! `fin` (the DATA frame has the bit; nothing sets it yet).

pub mod assembly;
pub mod connection;
pub mod crypto;
pub mod frame;
pub mod mapping;
pub mod packet;
pub mod ranges;
pub mod rate;
pub mod recovery;
pub mod reset;
pub mod retry;
pub mod send;
pub mod version;
pub mod wire;

pub use assembly::Delivery;
pub use connection::{
    ACTIVE_CID_LIMIT, AcceptError, AckPathPolicy, AeadLimits, CIDS_AHEAD, CidEvent, CloseReason,
    Config, Connection, ConnectionStats, CopyRule, DropCounters, Event, FecConfig, FecStats,
    MAX_CIDS, MigrateError, PathError, PathStats, ReinjectConfig, ReinjectStats, SamePathAcks,
    SendError, Transmit,
};
pub use crypto::{ClientCrypto, ServerCrypto, is_initial, peek_connection_id};
pub use frame::PlayoutFeedback;
pub use recovery::LossDetection;
pub use send::Reliability;

/// RFC 9000 §20.1's STREAM_LIMIT_ERROR: a frame names a stream of the peer's above the
/// limit this side announced, or a bidirectional one (Braid announces none).
pub const STREAM_LIMIT_ERROR: u64 = 0x04;

/// RFC 9000 §20.1's STREAM_STATE_ERROR: a frame names a stream of this side's that was
/// never opened.
pub const STREAM_STATE_ERROR: u64 = 0x05;

/// RFC 9000 §20.1's FLOW_CONTROL_ERROR: the peer sent more than the credit it was given.
pub const FLOW_CONTROL_ERROR: u64 = 0x03;

/// RFC 9000 §20.1's FINAL_SIZE_ERROR: a stream's final size changed, or data went past it.
pub const FINAL_SIZE_ERROR: u64 = 0x06;

/// RFC 9000 §20.1's FRAME_ENCODING_ERROR: an authenticated packet holds a frame of unknown
/// type or a malformed one (§12.4).
pub const FRAME_ENCODING_ERROR: u64 = 0x07;

/// RFC 9000 §20.1's CONNECTION_ID_LIMIT_ERROR: the peer gave more connection ids than the
/// `active_connection_id_limit` this side announced (§5.1.1).
pub const CONNECTION_ID_LIMIT_ERROR: u64 = 0x09;

/// RFC 9000 §20.1's PROTOCOL_VIOLATION: the code of the CONNECTION_CLOSE this side sends
/// when the peer breaks the protocol ([`CloseReason::ProtocolError`]).
pub const PROTOCOL_VIOLATION: u64 = 0x0a;

/// RFC 9000 §20.1's APPLICATION_ERROR: what an application's close says in Initial and
/// Handshake packets, where its own code and reason must not travel (§10.2.3).
pub const APPLICATION_ERROR: u64 = 0x0c;

/// RFC 9000 §20.1's AEAD_LIMIT_REACHED: sent when a key reaches its confidentiality limit
/// without an update, or forged packets reach the integrity limit (RFC 9001 §6.6).
pub const AEAD_LIMIT_REACHED: u64 = 0x0f;

#[cfg(test)]
mod tests;
