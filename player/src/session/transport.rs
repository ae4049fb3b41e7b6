//! The player-facing transport: what a media session asks of a connection, whether it
//! runs on Braid's own transport ([`ConnectionHandle`]), on a kernel socket
//! ([`KernelConnection`], profiles `kernel-tcp`, `kernel-mptcp`, `kernel-mptcp-qe`) or on
//! n0's noq ([`NoqMediaConnection`], `noq-multipath`).

use std::future::Future;

use braid_io::driver::{ConnectionHandle, EnergySnapshot, PathInfo, TimerLateness};
use braid_io::kernel::conn::KernelConnection;
use braid_io::noq_media::NoqMediaConnection;
use braid_transport::proto::{ConnectionStats, Delivery, PlayoutFeedback, Reliability};
use braid_transport::time::Instant;
use braid_transport::trace::TraceEvent;
use bytes::Bytes;

/// A running connection as the media session uses it.
pub trait MediaConnection: Send + Sync + 'static {
    /// Why the connection failed or ended.
    type Error: std::error::Error + Send + Sync + 'static;

    /// Now on the connection's clock.
    fn now(&self) -> Instant;

    /// Queues one message; returns its id (0, 1, 2, … in call order).
    fn send_message(
        &self,
        data: Bytes,
        reliability: Reliability,
    ) -> impl Future<Output = Result<u64, Self::Error>> + Send;

    /// The next in-order message or gap; waits for it.
    fn read_message(&self) -> impl Future<Output = Result<Delivery, Self::Error>> + Send;

    /// A message or gap that already arrived, without waiting.
    fn try_read_message(&self) -> Option<Delivery>;

    /// How late the connection task's timers fired (`None`: no timers measured).
    fn timer_lateness(&self) -> Option<TimerLateness>;

    /// Current statistics.
    fn stats(&self) -> impl Future<Output = Option<ConnectionStats>> + Send;

    /// The client's radio energy and path mode.
    fn energy(&self) -> impl Future<Output = Option<EnergySnapshot>> + Send;

    /// The client's paths, in the order they were given.
    fn paths(&self) -> Vec<PathInfo>;

    /// Records an application event in the connection's trace (if it has one).
    fn trace_event(&self, ev: TraceEvent);

    /// Tells the sender the player's position (deadline profiles).
    fn set_playout_feedback(&self, feedback: PlayoutFeedback);

    /// Closes the connection.
    fn close(&self, code: u64, reason: &[u8]) -> impl Future<Output = ()> + Send;
}

impl MediaConnection for ConnectionHandle {
    type Error = braid_io::driver::DriverError;

    fn now(&self) -> Instant {
        ConnectionHandle::now(self)
    }

    fn send_message(
        &self,
        data: Bytes,
        reliability: Reliability,
    ) -> impl Future<Output = Result<u64, Self::Error>> + Send {
        ConnectionHandle::send_message(self, data, reliability)
    }

    fn read_message(&self) -> impl Future<Output = Result<Delivery, Self::Error>> + Send {
        ConnectionHandle::read_message(self)
    }

    fn try_read_message(&self) -> Option<Delivery> {
        ConnectionHandle::try_read_message(self)
    }

    fn timer_lateness(&self) -> Option<TimerLateness> {
        ConnectionHandle::timer_lateness(self)
    }

    fn stats(&self) -> impl Future<Output = Option<ConnectionStats>> + Send {
        ConnectionHandle::stats(self)
    }

    fn energy(&self) -> impl Future<Output = Option<EnergySnapshot>> + Send {
        ConnectionHandle::energy(self)
    }

    fn paths(&self) -> Vec<PathInfo> {
        ConnectionHandle::paths(self)
    }

    fn trace_event(&self, ev: TraceEvent) {
        ConnectionHandle::trace_event(self, ev);
    }

    fn set_playout_feedback(&self, feedback: PlayoutFeedback) {
        ConnectionHandle::set_playout_feedback(self, feedback);
    }

    fn close(&self, code: u64, reason: &[u8]) -> impl Future<Output = ()> + Send {
        ConnectionHandle::close(self, code, reason)
    }
}

/// A kernel byte stream delivers every message reliably and in order: deadlines and
/// playout feedback have no meaning there, and it keeps no trace.
impl MediaConnection for KernelConnection {
    type Error = braid_io::kernel::KernelError;

    fn now(&self) -> Instant {
        KernelConnection::now(self)
    }

    fn send_message(
        &self,
        data: Bytes,
        _reliability: Reliability,
    ) -> impl Future<Output = Result<u64, Self::Error>> + Send {
        KernelConnection::send_message(self, data)
    }

    fn read_message(&self) -> impl Future<Output = Result<Delivery, Self::Error>> + Send {
        KernelConnection::read_message(self)
    }

    fn try_read_message(&self) -> Option<Delivery> {
        KernelConnection::try_read_message(self)
    }

    /// The kernel runs the connection's timers; none are measured here.
    fn timer_lateness(&self) -> Option<TimerLateness> {
        None
    }

    async fn stats(&self) -> Option<ConnectionStats> {
        KernelConnection::stats(self)
    }

    async fn energy(&self) -> Option<EnergySnapshot> {
        KernelConnection::energy(self)
    }

    fn paths(&self) -> Vec<PathInfo> {
        KernelConnection::paths(self)
    }

    fn trace_event(&self, _ev: TraceEvent) {}

    fn set_playout_feedback(&self, _feedback: PlayoutFeedback) {}

    async fn close(&self, _code: u64, _reason: &[u8]) {
        KernelConnection::close(self).await;
    }
}

/// noq's stream is reliable and ordered (one QUIC stream, [`braid_io::noq_media`]):
/// deadlines and playout feedback have no meaning there, and it keeps no trace.
impl MediaConnection for NoqMediaConnection {
    type Error = braid_io::noq_media::NoqMediaError;

    fn now(&self) -> Instant {
        NoqMediaConnection::now(self)
    }

    fn send_message(
        &self,
        data: Bytes,
        _reliability: Reliability,
    ) -> impl Future<Output = Result<u64, Self::Error>> + Send {
        NoqMediaConnection::send_message(self, data)
    }

    fn read_message(&self) -> impl Future<Output = Result<Delivery, Self::Error>> + Send {
        NoqMediaConnection::read_message(self)
    }

    fn try_read_message(&self) -> Option<Delivery> {
        NoqMediaConnection::try_read_message(self)
    }

    /// noq runs the connection's timers; none are measured here.
    fn timer_lateness(&self) -> Option<TimerLateness> {
        None
    }

    async fn stats(&self) -> Option<ConnectionStats> {
        NoqMediaConnection::stats(self)
    }

    async fn energy(&self) -> Option<EnergySnapshot> {
        NoqMediaConnection::energy(self)
    }

    fn paths(&self) -> Vec<PathInfo> {
        NoqMediaConnection::paths(self)
    }

    fn trace_event(&self, _ev: TraceEvent) {}

    fn set_playout_feedback(&self, _feedback: PlayoutFeedback) {}

    async fn close(&self, code: u64, reason: &[u8]) {
        NoqMediaConnection::close(self, u32::try_from(code).unwrap_or(u32::MAX), reason).await;
    }
}
