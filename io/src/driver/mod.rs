//! The UDP driver: runs a sans-IO [`proto::Connection`] on real sockets (tokio).
//!
//! It is thin on purpose: every protocol decision is the connection's, every energy and
//! path-mode decision the shared [`braid_transport::policy::PolicyRunner`]'s. The driver
//! only
//!
//! - opens one UDP socket per path (client), bound to a local address and, on Linux,
//!   optionally to an interface (`SO_BINDTODEVICE`), or one shared socket for a server
//!   [`Endpoint`] that routes datagrams to connections by connection id
//!   ([`proto::peek_connection_id`]);
//! - owns each connection in one task that waits on socket readiness, the connection's
//!   timer ([`proto::Connection::poll_timeout`]), the client's path policy and the
//!   application's commands, and after every input drains
//!   [`proto::Connection::poll_transmit`] to the right socket;
//! - maps tokio's clock onto [`Instant`](braid_transport::time::Instant) (microseconds
//!   since the connection's task began);
//! - turns socket trouble into connection-level facts: a path whose socket fails (its
//!   interface or address disappeared) is removed and the connection continues on the
//!   others; "port unreachable" answers while nothing was received on any path for
//!   [`UNREACHABLE_AFTER`] close the connection (the peer process is gone);
//! - on a client, feeds the policy runner what the sockets really sent and received (the
//!   radio models behind [`ConnectionHandle::energy`]) and runs the profile's mode switch
//!   beside the connection ([`ConnectOptions::path_policy`]).
//!
//! The application API is small and async: [`connect`], [`listen`] / [`Endpoint::accept`],
//! [`ConnectionHandle::send_message`] (waits for flow-control credit),
//! [`ConnectionHandle::read_message`] (waits for the next in-order message or gap),
//! [`ConnectionHandle::stats`], [`ConnectionHandle::close`].
//!
//! Reads are pulled: the task calls [`proto::Connection::read_message`] only when the small
//! delivery queue toward the application has room, so the connection's read-rate meter and
//! flow-control window follow what the application really consumes.
//!
//! Modules by job: `socket` (binding, socket errors), `clock`, `client` (connect),
//! `server` (listen, routing by connection id), `task` (the per-connection loop),
//! `handle` (the application's side), `energy` (the client's policy runner), `error`.

use std::time::Duration;

#[cfg(doc)]
use braid_transport::proto;

mod client;
mod clock;
mod energy;
mod error;
mod handle;
mod paths;
mod server;
mod socket;
mod task;
#[cfg(test)]
mod tests;
mod udp;

pub use bytes::Bytes;
pub use client::{ClientConnection, connect, connect_with};
pub use energy::{EnergySnapshot, RadioSnapshot};
pub use error::DriverError;
pub use handle::{ConnectionHandle, TimerLateness};
pub use paths::{ConnectOptions, PathInfo, PathSpec, unspecified_for};

use braid_transport::trace::{TraceSink, Vantage};

/// Makes the trace sink of a connection: its side and connection id.
pub type TraceFactory = dyn Fn(Vantage, u64) -> Option<Box<dyn TraceSink>> + Send + Sync;

static TRACE_FACTORY: std::sync::OnceLock<std::sync::Arc<TraceFactory>> =
    std::sync::OnceLock::new();

/// Traces every connection the drivers of this process create from now on (client and
/// server sides), with sinks from `factory`; a process sets it once (`braid --qlog`).
/// Returns false if one was set already.
pub fn set_trace_factory(factory: std::sync::Arc<TraceFactory>) -> bool {
    TRACE_FACTORY.set(factory).is_ok()
}

/// Whether connections are traced ([`set_trace_factory`] was called).
pub fn tracing_enabled() -> bool {
    TRACE_FACTORY.get().is_some()
}

/// The trace sink for a new connection, when tracing is on.
pub(crate) fn trace_sink(vantage: Vantage, cid: u64) -> Option<Box<dyn TraceSink>> {
    TRACE_FACTORY.get().and_then(|f| f(vantage, cid))
}
pub use server::{
    Endpoint, EndpointStats, HALF_OPEN_TIMEOUT, MAX_HALF_OPEN, MAX_HALF_OPEN_PER_ADDRESS,
    RETRY_HALF_OPEN, RetryPolicy, listen, listen_with,
};

/// With "port unreachable" answers and nothing received on any path for this long, the
/// peer is considered gone.
pub const UNREACHABLE_AFTER: Duration = Duration::from_secs(1);

/// Default for [`ConnectOptions::handshake_timeout`].
pub const DEFAULT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(3);
