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
    /// Mean one-way delay of the path's packets (EWMA of receive timestamp − send
    /// timestamp; it carries any clock offset between the ends), once sampled.
    pub owd: Option<Duration>,
    /// Variance of the one-way delay, µs².
    pub owd_var_us2: f64,
}

impl PathView {
    /// Whether `bytes` more fit under the path's window.
    pub fn has_room(&self, bytes: usize) -> bool {
        self.in_flight.saturating_add(bytes as u64) <= self.cwnd
    }
}

/// What the send stream holds when a packet is scheduled.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct SendState {
    /// New bytes queued and never sent (the packet being scheduled among them).
    pub unsent_bytes: u64,
    /// The peer's flow-control window left from the oldest unreleased byte (MPTCP's meta
    /// send window), bytes.
    pub window_bytes: u64,
}

/// Chooses path(s) for the next packet.
pub trait Scheduler: Send {
    /// Push onto `out` the path(s) that should carry the next packet of `bytes` bytes, or
    /// nothing when no path may send now (the connection then waits for ACKs or a timer).
    /// Only paths with `usable && has_room(bytes)` may be chosen. Redundant schedulers push
    /// several paths; the others push at most one.
    fn select(&mut self, now: Instant, paths: &[PathView], bytes: usize, out: &mut Vec<PathId>);
    /// Called just before [`Scheduler::select`] with the state of the send stream.
    /// Schedulers that weigh waiting for a faster path against the backlog (ECF, BLEST,
    /// EDPF, S-EDPF) keep it.
    fn on_send_state(&mut self, _state: SendState) {}
    /// After [`Scheduler::select`] chose a path: how many of the unsent new bytes the
    /// packet should skip, because the scheduler assigned them to other paths that will
    /// send them later (EDPF and S-EDPF keep a virtual queue per path). 0 (the default):
    /// the next bytes in order.
    fn ahead_bytes(&self) -> u64 {
        0
    }
    /// The receiver reported its application read rate (READ_RATE), bits/s.
    fn on_peer_read_rate(&mut self, _now: Instant, _read_rate_bps: f64) {}
    /// A packet the scheduler picked `path` for went out on it carrying `data_bytes` bytes
    /// of stream data (not called for redundant copies or packets without data).
    fn on_sent(&mut self, _now: Instant, _path: PathId, _data_bytes: u64) {}
    /// The algorithm's name for reports.
    fn name(&self) -> &'static str;
    /// Tracing asks the scheduler to keep what [`Scheduler::select`] compared
    /// ([`Scheduler::estimates`]); off by default, so untraced runs keep nothing.
    fn set_explain(&mut self, _on: bool) {}
    /// After [`Scheduler::select`], with explaining on: the expected delivery time of the
    /// packet on each path it compared, seconds from now (EDPF: arrival; S-EDPF: in-order
    /// delivery). Empty for schedulers that compare no such times.
    fn estimates(&self) -> &[(PathId, f64)] {
        &[]
    }
}

/// Builds a [`Scheduler`] for one connection. Implemented by each scheduler's config.
pub trait SchedulerFactory: Send + Sync + std::fmt::Debug {
    /// A fresh scheduler.
    fn build(&self) -> Box<dyn Scheduler>;
    /// Whether its path model wants every packet's one-way delay (ACK receive timestamps
    /// on every ACK: EDPF and S-EDPF).
    fn wants_one_way_delays(&self) -> bool {
        false
    }
}

pub mod minrtt;
pub mod redundant;
pub mod roundrobin;

pub use minrtt::{MinRtt, MinRttConfig};
pub use redundant::{Redundant, RedundantConfig};
pub use roundrobin::{RoundRobin, RoundRobinConfig};

pub mod offload;
pub use offload::{Offload, OffloadConfig, OffloadRule};

pub mod blest;
pub mod clark;
pub mod ecf;
pub mod edpf;
pub use blest::{Blest, BlestConfig};
pub use ecf::{Ecf, EcfConfig};
pub use edpf::{Edpf, EdpfConfig, Sedpf, SedpfConfig};
