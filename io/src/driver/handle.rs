//! The application's side of a running connection: [`ConnectionHandle`], and what it
//! shares with the connection's task.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use braid_transport::proto::{ConnectionStats, Delivery, Reliability};
use braid_transport::time::Instant;

use super::clock::Clock;
use super::paths::PathInfo;
use super::{DriverError, EnergySnapshot};

/// What the application asks of the connection's task.
pub(super) enum Command {
    Stats(oneshot::Sender<ConnectionStats>),
    Energy(oneshot::Sender<Option<EnergySnapshot>>),
    Close {
        code: u64,
        reason: Vec<u8>,
    },
    Trace(braid_transport::trace::TraceEvent),
    Playout(braid_transport::proto::PlayoutFeedback),
    PathStatus(braid_transport::path::PathId, braid_transport::path::PathStatus),
    /// The application waited to read and nothing was queued for it.
    ReaderStarved,
    /// Move client path `idx` to a new socket (an active migration).
    Migrate {
        idx: usize,
        reply: oneshot::Sender<Result<SocketAddr, DriverError>>,
    },
    /// Tests: act as if client path `idx`'s socket failed.
    #[cfg(test)]
    BreakPath(usize),
}

/// What the task leaves for the handle to read, also once it ended.
#[derive(Default)]
pub(super) struct SharedState {
    pub(super) error: Option<DriverError>,
    pub(super) final_stats: Option<ConnectionStats>,
    pub(super) final_energy: Option<EnergySnapshot>,
    pub(super) paths: Vec<PathInfo>,
    pub(super) timers: Option<hdrhistogram::Histogram<u64>>,
    /// The handshake completed.
    pub(super) established: bool,
    /// Client: the newest NEW_TOKEN token the server sent, until taken.
    pub(super) new_token: Option<Vec<u8>>,
}

/// The largest timer lateness the histogram tells apart (larger ones count as this), µs.
const MAX_LATENESS_US: u64 = 60_000_000;

impl SharedState {
    /// The driver woke `late` after a timer's deadline.
    pub(super) fn record_timer(&mut self, late: Duration) {
        if self.timers.is_none() {
            self.timers = hdrhistogram::Histogram::new_with_bounds(1, MAX_LATENESS_US, 2).ok();
        }
        if let Some(h) = self.timers.as_mut() {
            h.saturating_record((late.as_micros() as u64).max(1));
        }
    }
}

/// How late a connection's driver ran after its timers' deadlines (retransmission, ACK,
/// pacing and policy timers): from each deadline to when the task woke for it. A task
/// kept from running (a busy runtime, a starved process) shows here. tokio rounds timers
/// up to its 1 ms tick, so about a millisecond is the floor.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TimerLateness {
    /// Timer wake-ups measured.
    pub wakes: u64,
    /// Median.
    pub p50: Duration,
    /// 99th percentile.
    pub p99: Duration,
    /// Largest.
    pub max: Duration,
}

pub(super) type Shared = Arc<Mutex<SharedState>>;

/// The shared state, also after a panic elsewhere (the data stays usable).
pub(super) fn lock(s: &Shared) -> std::sync::MutexGuard<'_, SharedState> {
    s.lock().unwrap_or_else(|e| e.into_inner())
}

/// A running connection (client or server side). Cheap to share behind an `Arc`; every
/// method takes `&self`.
pub struct ConnectionHandle {
    pub(super) commands: mpsc::UnboundedSender<Command>,
    pub(super) sends: mpsc::Sender<(Bytes, Reliability)>,
    pub(super) next_id: Mutex<u64>,
    pub(super) deliveries: tokio::sync::Mutex<mpsc::Receiver<Delivery>>,
    pub(super) shared: Shared,
    pub(super) task: Mutex<Option<JoinHandle<()>>>,
    pub(super) connection_id: u64,
    pub(super) remote: SocketAddr,
    pub(super) clock: Clock,
}

impl std::fmt::Debug for ConnectionHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectionHandle")
            .field("connection_id", &self.connection_id)
            .field("remote", &self.remote)
            .finish_non_exhaustive()
    }
}

impl ConnectionHandle {
    /// The connection's id as both ends name it: the destination id of the client's first
    /// Initial (each end then answers to ids of its own).
    pub fn connection_id(&self) -> u64 {
        self.connection_id
    }

    /// The peer's address on the first path.
    pub fn remote(&self) -> SocketAddr {
        self.remote
    }

    /// Client: the newest NEW_TOKEN token the server sent on this connection, once (RFC
    /// 9000 §8.1.3): give it to the next connection to the same server
    /// ([`crate::driver::ConnectOptions::token`]) so the server can skip address
    /// validation. `None` when none came yet or it was taken.
    pub fn take_new_token(&self) -> Option<Vec<u8>> {
        lock(&self.shared).new_token.take()
    }

    /// The connection's clock: what it calls `now`. Deadlines given to
    /// [`ConnectionHandle::send_message`] (`Reliability::Deadline { at, .. }`) are on it.
    pub fn now(&self) -> Instant {
        self.clock.now()
    }

    /// Queues one message, waiting while the connection has no flow-control credit for it.
    /// Returns its id (0, 1, 2, … in call order). A message larger than the peer's whole
    /// receive buffer never fits and waits forever: keep messages well below it.
    pub async fn send_message(
        &self,
        data: Bytes,
        reliability: Reliability,
    ) -> Result<u64, DriverError> {
        let permit = match self.sends.reserve().await {
            Ok(p) => p,
            Err(_) => return Err(self.error()),
        };
        let mut next = self.next_id.lock().unwrap_or_else(|e| e.into_inner());
        let id = *next;
        *next += 1;
        permit.send((data, reliability));
        Ok(id)
    }

    /// The next in-order message or gap; waits for it. After the connection closed (and
    /// what it had delivered was read), the reason.
    pub async fn read_message(&self) -> Result<Delivery, DriverError> {
        let mut rx = self.deliveries.lock().await;
        match rx.recv().await {
            Some(d) => Ok(d),
            None => Err(self.error()),
        }
    }

    /// The next in-order message or gap if one is already waiting, without waiting; `None`
    /// when none is (or another reader holds the queue, or the connection ended: then
    /// [`ConnectionHandle::read_message`] gives the reason).
    pub fn try_read_message(&self) -> Option<Delivery> {
        let mut rx = self.deliveries.try_lock().ok()?;
        rx.try_recv().ok()
    }

    /// An application that reads at a rate of its own (not whatever arrives) wanted to
    /// read now and found nothing waiting: until the next message reaches it, that time is
    /// left out of the read rate ([`braid_transport::proto::Connection::reader_starved`]),
    /// so the rate the energy policy and the rate controller see is what it drains while
    /// it has data, not what the network brought. A reader that takes everything as it
    /// arrives (the player while its buffer has room) must not call it: its time with data
    /// is next to nothing, and the rate would mean nothing.
    pub fn reader_starved(&self) {
        let _ = self.commands.send(Command::ReaderStarved);
    }

    /// Current statistics (the last ones once the connection ended).
    pub async fn stats(&self) -> Option<ConnectionStats> {
        let (tx, rx) = oneshot::channel();
        if self.commands.send(Command::Stats(tx)).is_ok()
            && let Ok(s) = rx.await
        {
            return Some(s);
        }
        lock(&self.shared).final_stats.clone()
    }

    /// The client's radio energy and path mode (the last ones once the connection ended);
    /// `None` on the server side.
    pub async fn energy(&self) -> Option<EnergySnapshot> {
        let (tx, rx) = oneshot::channel();
        if self.commands.send(Command::Energy(tx)).is_ok()
            && let Ok(s) = rx.await
        {
            return s;
        }
        lock(&self.shared).final_energy.clone()
    }

    /// Adds an application event (playout) to the connection's trace, at the
    /// connection's `now` when its task handles it; nothing without a trace.
    pub fn trace_event(&self, ev: braid_transport::trace::TraceEvent) {
        let _ = self.commands.send(Command::Trace(ev));
    }

    /// The application's playout state, for the connection to report to the peer
    /// ([`braid_transport::proto::Connection::set_playout_feedback`]; nothing is sent
    /// unless the profile re-injects).
    pub fn set_playout_feedback(&self, feedback: braid_transport::proto::PlayoutFeedback) {
        let _ = self.commands.send(Command::Playout(feedback));
    }

    /// Sets a path's status and announces it to the peer
    /// ([`braid_transport::proto::Connection::set_path_status`]): backup (RFC 10069's
    /// PATH_STATUS_BACKUP: the peer should send on it only when no other path works),
    /// active again, or closed (PATH_ABANDON; its in-flight data moves to the other paths).
    /// A profile's mode switch may set the status again on its own.
    pub fn set_path_status(
        &self,
        path: braid_transport::path::PathId,
        status: braid_transport::path::PathStatus,
    ) {
        let _ = self.commands.send(Command::PathStatus(path, status));
    }

    /// Moves client path `idx` (0: the handshake's) to a new socket on the same local IP
    /// address and interface, with a port the OS chooses: an active migration (RFC 9000
    /// §9.2). The connection sends from there at once with a connection id never used
    /// before, the server validates the new address, and what was in flight to the old
    /// socket is recovered like a loss. Returns the new local address.
    pub async fn migrate(&self, idx: usize) -> Result<SocketAddr, DriverError> {
        let (reply, rx) = oneshot::channel();
        self.commands.send(Command::Migrate { idx, reply }).map_err(|_| DriverError::TaskGone)?;
        rx.await.map_err(|_| DriverError::TaskGone)?
    }

    /// How late the driver woke for its timers so far (`None` before the first timer).
    pub fn timer_lateness(&self) -> Option<TimerLateness> {
        let s = lock(&self.shared);
        let h = s.timers.as_ref().filter(|h| !h.is_empty())?;
        Some(TimerLateness {
            wakes: h.len(),
            p50: Duration::from_micros(h.value_at_quantile(0.5)),
            p99: Duration::from_micros(h.value_at_quantile(0.99)),
            max: Duration::from_micros(h.max()),
        })
    }

    /// The client's paths (empty on the server side).
    pub fn paths(&self) -> Vec<PathInfo> {
        lock(&self.shared).paths.clone()
    }

    /// Whether the connection's task has finished.
    pub fn is_finished(&self) -> bool {
        let g = self.task.lock().unwrap_or_else(|e| e.into_inner());
        g.as_ref().is_none_or(|t| t.is_finished())
    }

    /// Closes the connection (CLOSE goes out on every validated path) and waits, at most
    /// one second, for the task to send it and stop.
    pub async fn close(&self, code: u64, reason: &[u8]) {
        let _ = self.commands.send(Command::Close { code, reason: reason.to_vec() });
        let task = self.take_task();
        if let Some(t) = task {
            // Past the limit the application stopped reading and the task is parked on
            // delivery; it ends when the handle is dropped.
            let _ = tokio::time::timeout(Duration::from_secs(1), t).await;
        }
    }

    /// Hands the handle its connection's task (once the connection is the application's).
    pub(super) fn set_task(&self, task: JoinHandle<()>) {
        *self.task.lock().unwrap_or_else(|e| e.into_inner()) = Some(task);
    }

    /// Takes the connection's task, if it still holds it.
    pub(super) fn take_task(&self) -> Option<JoinHandle<()>> {
        self.task.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    fn error(&self) -> DriverError {
        lock(&self.shared).error.clone().unwrap_or(DriverError::TaskGone)
    }
}

impl Drop for ConnectionHandle {
    fn drop(&mut self) {
        if let Some(t) = self.take_task() {
            // Say goodbye if still running, then let the task finish on its own.
            let _ = self.commands.send(Command::Close { code: 0, reason: Vec::new() });
            drop(t);
        }
    }
}
