//! Braid's real-time drivers: the only crate that touches sockets, threads and the clock.
//!
//! They are thin: every decision is made by the sans-IO cores of [`braid_transport`] that
//! they drive.
//!
//! - [`relay`]: the UDP relay emulator (a scenario's links in real time).
//! - [`driver`]: the UDP driver (a connection on real sockets, one per path).
//! - [`kernel`]: kernel TCP and MPTCP behind the same message interface.
//! - [`bed`]: the TUN network-namespace test bed (Linux, root).
#![warn(missing_docs)]

pub mod bed;
pub mod driver;
mod emulated;
pub mod hq;
pub mod kernel;
pub mod noq_media;
pub mod noq_perf;
pub mod perf;
pub mod relay;
pub mod tls;
