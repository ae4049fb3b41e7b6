//! Wire format and the multipath [`Connection`].
//!
//! - [`wire`]: varints and a bounds-checked reader.
//! - [`frame`], [`packet`]: typed frames and packets (`decode` never panics).
//! - [`recovery`]: RTT (RFC 6298), one-way delay, loss detection, RTO.
//! - [`assembly`]: bounded in-order reassembly and the flow-control window.
//! - [`send`]: the outgoing message stream with partial reliability.
//! - [`rate`]: the application read-rate meter.
//! - [`connection`]: the sans-IO state machine tying it together.

pub mod assembly;
pub mod connection;
pub mod frame;
pub mod packet;
pub mod ranges;
pub mod rate;
pub mod recovery;
pub mod send;
pub mod wire;

pub use assembly::Delivery;
pub use connection::{
    AcceptError, AckPathPolicy, CloseReason, Config, Connection, ConnectionStats, DropCounters, Event, PathError,
    PathStats, SamePathAcks, SendError, Transmit,
};
pub use packet::peek_connection_id;
pub use send::Reliability;

#[cfg(test)]
mod tests;
