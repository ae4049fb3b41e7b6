//! Packet schedulers: which path(s) carry the next packet.
//!
//! The connection asks [`Scheduler::select`] every time it has a packet ready, handing it a
//! snapshot of every path. Each config struct is its own factory ([`SchedulerFactory`]).

use std::time::Duration;

use crate::path::{PathId, PathRole, PathStatus};
use crate::time::Instant;

/// A snapshot of one path as the scheduler sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct PathView {
    /// The path.
    pub id: PathId,
    /// Its access network.
    pub role: PathRole,
    /// Active or backup (closed paths are not shown to the scheduler).
    pub status: PathStatus,
    /// False while the path is unvalidated, failed (RTO-dead) or down.
    pub usable: bool,
    /// Smoothed RTT (the initial RTT until a sample exists).
    pub srtt: Duration,
    /// RTT variance (RFC 6298 RTTVAR).
    pub rttvar: Duration,
    /// The controller's window for the path, bytes.
    pub cwnd: u64,
    /// Bytes in flight on the path.
    pub in_flight: u64,
    /// The controller's pacing rate, bytes/s, if rate based.
    pub pacing_rate: Option<u64>,
    /// When pacing next allows a send on this path (`None`: now).
    pub next_send_time: Option<Instant>,
}

impl PathView {
    /// Whether `bytes` more fit under the path's window.
    pub fn has_room(&self, bytes: usize) -> bool {
        self.in_flight.saturating_add(bytes as u64) <= self.cwnd
    }
}

/// Chooses path(s) for the next packet.
pub trait Scheduler: Send {
    /// Push onto `out` the path(s) that should carry the next packet of `bytes` bytes, or
    /// nothing when no path may send now (the connection then waits for ACKs or a timer).
    /// Only paths with `usable && has_room(bytes)` may be chosen. Redundant schedulers push
    /// several paths; the others push at most one.
    fn select(&mut self, now: Instant, paths: &[PathView], bytes: usize, out: &mut Vec<PathId>);
    /// The receiver reported its application read rate (READ_RATE), bits/s.
    fn on_peer_read_rate(&mut self, _now: Instant, _read_rate_bps: f64) {}
    /// A packet the scheduler picked `path` for went out on it carrying `data_bytes` bytes
    /// of stream data (not called for redundant copies or packets without data).
    fn on_sent(&mut self, _now: Instant, _path: PathId, _data_bytes: u64) {}
    /// The algorithm's name for reports.
    fn name(&self) -> &'static str;
}

/// Builds a [`Scheduler`] for one connection. Implemented by each scheduler's config.
pub trait SchedulerFactory: Send + Sync + std::fmt::Debug {
    /// A fresh scheduler.
    fn build(&self) -> Box<dyn Scheduler>;
}

pub mod minrtt;
pub mod redundant;
pub mod roundrobin;

pub use minrtt::{MinRtt, MinRttConfig};
pub use redundant::{Redundant, RedundantConfig};
pub use roundrobin::{RoundRobin, RoundRobinConfig};

pub mod offload;
pub use offload::{Offload, OffloadConfig};
