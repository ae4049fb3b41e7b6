//! Congestion and rate control.
//!
//! One [`Controller`] instance serves **all paths of a connection**, so that coupled
//! algorithms (LIA, OLIA) can see every subflow; uncoupled ones (Reno) simply keep
//! independent per-path state. Each config struct is its own factory
//! ([`ControllerFactory`]), so a profile is just a bundle of configs.
//!
//! Call order (by the connection): [`Controller::on_path_added`] once per path, then for
//! every packet [`Controller::on_sent`], later either [`Controller::on_ack`] or (once per
//! loss event) [`Controller::on_congestion_event`]. The connection sends on a path only
//! while `bytes_in_flight + size <= window(path)` and, when [`Controller::pacing_rate`]
//! returns a rate, no faster than that. After the `on_ack` calls of one ACK frame it gives
//! the ACK's delivery-rate sample to [`Controller::on_delivery_sample`] ([`delivery`]).
//!
//! [`registry`] maps the controller names of `--cc` and `PROFILE+CC` to factories.

use std::time::Duration;

use crate::path::PathId;
use crate::time::Instant;

/// What the connection knows about a path's round-trip time when an ACK arrives.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct RttSample {
    /// The latest RTT sample.
    pub latest: Duration,
    /// The smoothed RTT (RFC 6298 SRTT).
    pub smoothed: Duration,
    /// The smallest RTT seen on the path.
    pub min: Duration,
}

/// A congestion controller for every path of one connection.
pub trait Controller: Send {
    /// A path joined. `mss` is the largest datagram payload it carries.
    fn on_path_added(&mut self, now: Instant, path: PathId, mss: usize);
    /// A path left; forget its state.
    fn on_path_removed(&mut self, path: PathId);
    /// The path's datagram size changed to `mss` bytes (path MTU discovery found a larger
    /// one, or a black hole sent it back to the base size). RFC 9002 counts windows in the
    /// current maximum datagram size (§7.2, kMaxDatagramSize), so window growth and the
    /// minimum window follow it. Controllers that keep no per-packet size ignore it.
    fn on_datagram_size(&mut self, _path: PathId, _mss: usize) {}
    /// `bytes` were sent on `path` (`in_flight` = bytes in flight on it after the send).
    fn on_sent(&mut self, now: Instant, path: PathId, bytes: usize, in_flight: u64);
    /// `bytes` sent at `sent` were newly acknowledged on `path`.
    fn on_ack(&mut self, now: Instant, path: PathId, sent: Instant, bytes: usize, rtt: &RttSample);
    /// A loss event on `path` for a packet sent at `sent` (one call per event: the
    /// connection folds losses of packets sent before the previous reduction into it).
    /// `persistent` is an RTO-style collapse.
    fn on_congestion_event(&mut self, now: Instant, path: PathId, sent: Instant, persistent: bool);
    /// A rate-feedback report (TFRC's X_recv, p, t_delay) for `path` arrived from the
    /// receiver. Window-based controllers ignore it.
    fn on_rate_feedback(&mut self, _now: Instant, _path: PathId, _feedback: &tfrc::RateFeedback) {}
    /// The receiver reported its application read rate (READ_RATE), bits/s.
    fn on_read_rate(&mut self, _now: Instant, _read_rate_bps: f64) {}
    /// The delivery-rate sample of one ACK on `path` ([`delivery`]), given after the
    /// [`Controller::on_ack`] calls for the packets it acknowledged. Only model-based
    /// controllers (BBR) use it.
    fn on_delivery_sample(&mut self, _now: Instant, _path: PathId, _sample: &DeliverySample) {}
    /// Bytes allowed in flight on `path` now.
    fn window(&self, path: PathId) -> u64;
    /// For rate-based controllers: the sending rate on `path` in bytes per second.
    fn pacing_rate(&self, _path: PathId) -> Option<u64> {
        None
    }
    /// Whether a controller that answers [`Controller::pacing_rate`] paces by the
    /// receiver's RATE_FEEDBACK (TFRC-style equation-based control), so the connection
    /// should ask for it. Default `true`; a controller that paces from its own model of the
    /// path (BBR) says `false`. Not consulted for controllers without a pacing rate.
    fn uses_rate_feedback(&self) -> bool {
        true
    }
    /// The algorithm's name for reports.
    fn name(&self) -> &'static str;
    /// For equation-based rate controllers (TFRC, MARC): the state after the last
    /// feedback report on `path`, for traces. Default `None`.
    fn rate_control_state(&self, _path: PathId) -> Option<RateControlState> {
        None
    }
}

/// A rate controller's state after a feedback report (traced as `braid:rate_control`).
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct RateControlState {
    /// The rate the controller allows (its pacing rate), bytes/s.
    pub allowed: f64,
    /// The rate TFRC's equation and receive limit allow, bytes/s (equal to `allowed`
    /// for TFRC; MARC's hold may allow more).
    pub tfrc: f64,
    /// MARC's token account C, bytes (`None` for TFRC).
    pub tokens: Option<f64>,
    /// MARC's W_send of the interval just ended, bytes/s (`None` for TFRC).
    pub w_send: Option<f64>,
}

/// How a controller limits sending.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A window per path, each path on its own (reno, cubic, fixed-bdp).
    Window,
    /// A window per path, coupled across the paths of a connection (lia, olia).
    Coupled,
    /// Paced at an equation-based rate from the receiver's feedback (tfrc, marc).
    RateFeedback,
    /// Paced and windowed from its own model of each path (bbr).
    Model,
}

/// Builds a [`Controller`] for one connection. Implemented by each controller's config.
pub trait ControllerFactory: Send + Sync + std::fmt::Debug {
    /// A fresh controller with no paths.
    fn build(&self) -> Box<dyn Controller>;
    /// How the controllers it builds limit sending: what a profile may be combined with
    /// ([`crate::profile::Profile::with_controller`]). Window controllers by default.
    fn kind(&self) -> Kind {
        Kind::Window
    }
}

pub mod bbr;
pub mod cubic;
pub mod delivery;
pub mod lia;
pub mod marc;
pub mod olia;
pub mod registry;
pub mod reno;
pub mod tfrc;
pub mod window;

pub use bbr::{Bbr, BbrConfig};
pub use cubic::{Cubic, CubicConfig};
pub use delivery::{DeliveryRate, DeliverySample, DeliveryStamp};
pub use lia::{Lia, LiaConfig};
pub use marc::{Marc, MarcConfig};
pub use olia::{Olia, OliaConfig};
pub use reno::{Reno, RenoConfig};
pub use tfrc::{Tfrc, TfrcConfig};
pub use window::{PathWindow, WindowConfig};

pub mod abcwnd;
pub use abcwnd::{AbCwnd, AbCwndConfig};

pub mod fixed_bdp;
pub use fixed_bdp::{FixedBdp, FixedBdpConfig};
