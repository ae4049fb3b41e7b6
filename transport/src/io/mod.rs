//! Real-time drivers: the only part of the crate that touches sockets, threads and the
//! clock. They are thin: every decision is made by the sans-IO cores they drive.
//!
//! - [`relay`]: the UDP relay emulator (a scenario's links in real time).
//! - [`driver`]: the UDP driver (a connection on real sockets, one per path).

pub mod driver;
pub mod relay;
