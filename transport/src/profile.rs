//! Named transport profiles: the presets users compare (`braid sim --profile mptcp`).
//!
//! A [`Profile`] bundles a congestion controller, a scheduler, which paths to use and how
//! media messages are delivered. The names are fixed by docs/REFERENCE.md ("Profiles"). All
//! profiles live in one table, [`REGISTRY`]; adding one is one entry there.
//!
//! | name | controller | scheduler | paths | media |
//! |---|---|---|---|---|
//! | `tcp` | reno | minrtt | single | reliable |
//! | `mptcp` | lia | minrtt | all | reliable |
//! | `mptcp-olia` | olia | minrtt | all | reliable |
//! | `mptcp-uncoupled` | reno (per path) | minrtt | all | reliable |
//! | `roundrobin` | lia | roundrobin | all | reliable |
//! | `redundant` | lia | redundant | all | reliable |
//! | `mptcp-rt` | lia | minrtt | all | deadline, retransmit until late |
//! | `tfrc` | tfrc (RFC 5348) | minrtt | single | reliable |
//! | `marc` | marc (TFRC + tokens) | minrtt | single | deadline, at most one retransmission |
//! | `mp-tfrc` | tfrc per path | minrtt | all | reliable |
//! | `mp-marc` | marc per path | minrtt | all | deadline, at most one retransmission |
//! | `handover` | lia | minrtt | all (non-WiFi as backup until WiFi fails) | reliable |
//! | `emtcp` | lia | offload (window-full rule) | all | reliable |
//! | `emtcp-allowance` | lia | offload (allowance rule) | all | reliable |
//! | `mptcp-qe` | abcwnd | offload | all + aeSUM mode switch (Full after a 1-s shortfall, Partial after 5 agreeing samples) + weSACK | reliable |
//! | `mptcp-qe-paper-rule` | as `mptcp-qe`, aeSUM switching on every sample as the paper states it (ablation) | | | |
//! | `mptcp-qe-no-aesum` / `-no-abcwnd` / `-no-wesack` | as `mptcp-qe` with that part off | | | |
//! | `mptcp-qe-band` | as `mptcp-qe`, aeSUM's earlier band: Full after 5 agreeing samples below 0.75 × the read rate (ablation) | | | |
//! | `edpf` | lia | edpf (earliest expected arrival) | all | reliable |
//! | `sedpf` | lia | sedpf (earliest expected in-order delivery) | all | reliable |
//! | `blest` | lia | blest | all | reliable |
//! | `ecf` | lia | ecf | all | reliable |
//! | `mptcp-qoe` | cubic (per path, uncoupled; Reno's halving on a loss ending slow start over a queue) | minrtt | all + QoE-driven re-injection (no copies before playback starts) | reliable |
//! | `mptcp-qoe-dup` | as `mptcp-qoe` | minrtt | as `mptcp-qoe`, every unacknowledged byte copied before playback starts (ablation) | reliable |
//! | `mptcp-qoe-no-copies` | as `mptcp-qoe` | minrtt | as `mptcp-qoe` without copies (ablation) | reliable |
//! | `mptcp-qe-qoe` | abcwnd | offload | as `mptcp-qe` + QoE-driven re-injection | reliable |
//! | `mptcp-qe-qoe-no-copies` | abcwnd | offload | as `mptcp-qe-qoe` without copies (ablation) | reliable |
//! | `sedpf-fec2` / `-fec4` / `-fec8` | lia | sedpf | all + the streaming code at τ = 2, 4, 8 | reliable |
//! | `marc-reliable` | marc | minrtt | single | reliable (like-for-like with `tfrc`) |
//! | `tfrc-deadline` | tfrc | minrtt | single | deadline, at most one retransmission (like-for-like with `marc`) |
//! | `marc-sent-anchor` | marc, hold anchored at the rate sent (ablation) | minrtt | single | deadline, at most one retransmission |
//! | `sedpf-fec4-qoe` | lia | sedpf | as `sedpf-fec4` + QoE-driven re-injection (coded) | reliable |
//!
//! The `-qoe` profiles run [`crate::proto::ReinjectConfig`] with its defaults on both ends:
//! the client reports its playout state, the server re-injects (docs/ALGORITHMS.md
//! "QoE-driven re-injection").
//!
//! `redundant` uses LIA so that it differs from `mptcp` only in the scheduler, and so that
//! its copies, which cross every path, stay fair to other flows at a shared bottleneck.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::cc::{ControllerFactory, LiaConfig, OliaConfig, RenoConfig};
use crate::policy::{AeSumRule, PathPolicy};
use crate::proto::{Config, LossDetection};
use crate::sched::{MinRttConfig, RedundantConfig, RoundRobinConfig, SchedulerFactory};

/// Which of the scenario's paths a profile uses.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum PathUse {
    /// One path: the scenario's first, unless the user names one (`--path`).
    Single,
    /// Every path of the scenario.
    All,
}

/// How media messages are delivered.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum MediaReliability {
    /// Retransmitted until acknowledged.
    Reliable,
    /// Each message has a playout deadline and is abandoned once it cannot arrive before
    /// it.
    Deadline {
        /// Retransmissions allowed per packet; `None`: as many as fit before the deadline.
        max_retransmissions: Option<u32>,
    },
}

/// A named bundle of transport strategies. Fields may be added (path policy, FEC, …), so
/// the struct is `#[non_exhaustive]`: obtain profiles from [`lookup`] or [`all`].
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Profile {
    /// The registry's name, or `PROFILE+CC` for a profile given another controller.
    pub name: Cow<'static, str>,
    /// One line for `--help` and reports.
    pub description: &'static str,
    /// The congestion controller.
    pub controller: Arc<dyn ControllerFactory>,
    /// The packet scheduler.
    pub scheduler: Arc<dyn SchedulerFactory>,
    /// Which paths it uses.
    pub paths: PathUse,
    /// How media messages are delivered.
    pub media: MediaReliability,
    /// The energy-aware path policy run beside the connection (mode switch, ACK path).
    pub path_policy: PathPolicy,
    /// The streaming code's τ (one CODED packet every τ data packets), `None`: off.
    pub fec: Option<u32>,
    /// QoE-driven re-injection (playout feedback from the client), `None`: off.
    pub reinject: Option<crate::proto::ReinjectConfig>,
    /// How paths detect lost packets (default [`LossDetection::Rack`], every profile).
    pub loss_detection: LossDetection,
}

/// Which end of a connection a configuration is for.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Side {
    /// The end that connects and receives the stream (the player).
    Client,
    /// The end that accepts and sends the stream.
    Server,
}

/// The clock a connection runs against. It is the only thing that may make a profile's
/// configuration differ between `braid sim` and the real-time front ends.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Clock {
    /// Virtual time in the simulator.
    Virtual,
    /// Real time on sockets (with or without the relay emulator).
    Real,
}

/// What a front end may choose when it turns a profile into a connection configuration
/// ([`Profile::connection_config`]).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct ConfigParams {
    /// Which end.
    pub side: Side,
    /// Virtual or real time.
    pub clock: Clock,
    /// The receive buffer (and so the flow-control window); `None`: the transport's default.
    /// Values below [`MIN_RECV_BUFFER_BYTES`] are raised to it.
    pub recv_buffer_bytes: Option<u64>,
    /// The idle timeout this side announces; `None`: [`IDLE_TIMEOUT`]. The connection uses
    /// the smaller of both sides' (RFC 9000 §10.1), so the client's choice holds against a
    /// server left at the default.
    pub idle_timeout: Option<Duration>,
}

impl ConfigParams {
    /// `side` on `clock` with the default receive buffer and idle timeout.
    pub const fn new(side: Side, clock: Clock) -> ConfigParams {
        ConfigParams { side, clock, recv_buffer_bytes: None, idle_timeout: None }
    }

    /// This with the receive buffer set.
    pub const fn recv_buffer(self, bytes: u64) -> ConfigParams {
        ConfigParams { recv_buffer_bytes: Some(bytes), ..self }
    }
}

/// Smallest receive buffer a front end may ask for: one largest message of `braid perf`.
pub const MIN_RECV_BUFFER_BYTES: u64 = 16 * 1024;

/// Close a connection when nothing was received on any path for this long (both clocks),
/// unless the peer announces a shorter one: RFC 9000 §10.1's `max_idle_timeout`, 30 s as
/// the QUIC issue asks and Chromium and quinn default to. Mobile paths go silent for
/// several seconds (a 5.75-s gap in the mahimahi Verizon EVDO driving trace) and a stream
/// must survive that.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// A real-time client sends a PING after this long without sending anything
/// ack-eliciting. A real peer may have gone away without a word (its process killed, its
/// address gone) and only traffic in both directions shows that it has not; in the
/// simulator every endpoint lives as long as the run, so the pings would only add packets,
/// except where a simulated `[[node]]` leaves an endpoint waiting on a stalled upstream leg
/// (those send a keep-alive every half idle timeout, `sim::engine`).
pub const REAL_TIME_KEEP_ALIVE: Duration = Duration::from_millis(250);

/// The largest datagram a real-time connection's path MTU discovery probes for: an
/// Ethernet MTU of 1 500 bytes less IPv6's 40-byte and UDP's 8-byte headers, quinn's
/// default ceiling too. The simulator's links model no MTU (any probe would pass), so
/// simulated paths stay at the 1 200-byte base, as the pinned tables and the papers'
/// setups were measured.
pub const MTU_DISCOVERY_MAX: usize = 1452;

/// Receive timestamps per ACK frame a client of an EDPF or S-EDPF profile sends
/// ([`Config::ack_timestamps`]).
pub const EDPF_ACK_TIMESTAMPS: usize = 8;

impl Profile {
    /// This profile with the streaming code on: one CODED packet every `tau` (at least 1)
    /// data packets, coded packets on the lossiest path (ALGORITHMS.md, Coding). The name
    /// stays; a profile registered with the code on says so in its own name.
    pub fn with_fec(mut self, tau: u32) -> Profile {
        self.fec = Some(tau.max(1));
        self
    }

    /// This profile with losses detected by `mode` (an ablation of the default RACK
    /// against RFC 9002's thresholds). The name stays.
    pub fn with_loss_detection(mut self, mode: LossDetection) -> Profile {
        self.loss_detection = mode;
        self
    }

    /// The connection configuration this profile runs with. This is the one mapping from a
    /// profile to a [`Config`]: the simulator, serve, play, perf, proxy, demo and compare
    /// all call it, so what is compared in the simulator is what is played.
    ///
    /// The controller and scheduler come from the profile, the ACK path from its path
    /// policy (weSACK), and TFRC feedback from its controller. Only
    /// [`ConfigParams::clock`] may differ between virtual and real time, and it changes two
    /// things: a real-time client sends keep-alives ([`REAL_TIME_KEEP_ALIVE`]), and
    /// real-time paths search their MTU up to [`MTU_DISCOVERY_MAX`] (simulated links have
    /// none to find).
    pub fn connection_config(&self, params: ConfigParams) -> Config {
        let mut c = Config::new(Arc::clone(&self.controller), Arc::clone(&self.scheduler));
        if let Some(bytes) = params.recv_buffer_bytes {
            c.recv_buffer_bytes = bytes.max(MIN_RECV_BUFFER_BYTES);
        }
        c.idle_timeout = params.idle_timeout.unwrap_or(IDLE_TIMEOUT);
        if let Some(acks) = self.path_policy.ack_path() {
            c.ack_path = acks;
        }
        if params.clock == Clock::Real && params.side == Side::Client {
            c.keep_alive = Some(REAL_TIME_KEEP_ALIVE);
        }
        if params.clock == Clock::Real {
            c.mtu_discovery_max = Some(MTU_DISCOVERY_MAX);
        }
        c.fec = self.fec.map(crate::proto::FecConfig::new);
        if self.scheduler.wants_one_way_delays() {
            // Their path model wants every packet's one-way delay (ALGORITHMS.md).
            c.ack_timestamps = EDPF_ACK_TIMESTAMPS;
        }
        c.reinject = self.reinject;
        c.loss_detection = self.loss_detection;
        c
    }
}

/// One row of the registry: everything needed to build a [`Profile`]. `#[non_exhaustive]`
/// like [`Profile`]: later fields get defaults in the registry's row constructor.
#[derive(Copy, Clone, Debug)]
#[non_exhaustive]
pub struct ProfileEntry {
    /// The fixed name.
    pub name: &'static str,
    /// One line for `--help` and reports.
    pub description: &'static str,
    /// Builds the controller factory.
    pub controller: fn() -> Arc<dyn ControllerFactory>,
    /// Builds the scheduler factory.
    pub scheduler: fn() -> Arc<dyn SchedulerFactory>,
    /// Which paths it uses.
    pub paths: PathUse,
    /// How media messages are delivered.
    pub media: MediaReliability,
    /// The energy-aware path policy (default [`PathPolicy::None`]).
    pub path_policy: PathPolicy,
    /// The streaming code's τ (default `None`: off).
    pub fec: Option<u32>,
    /// QoE-driven re-injection and its settings (default off).
    pub qoe: Option<crate::proto::ReinjectConfig>,
}

impl ProfileEntry {
    /// This entry with `policy` as its path policy.
    pub const fn policy(self, policy: PathPolicy) -> ProfileEntry {
        ProfileEntry { path_policy: policy, ..self }
    }

    /// This entry with the streaming code on: one CODED packet every `tau` data packets.
    pub const fn fec(self, tau: u32) -> ProfileEntry {
        ProfileEntry { fec: Some(tau), ..self }
    }

    /// This entry with QoE-driven re-injection on (default settings).
    pub const fn qoe(self) -> ProfileEntry {
        self.qoe_with(crate::proto::ReinjectConfig::DEFAULT)
    }

    /// This entry with QoE-driven re-injection on with `cfg`.
    pub const fn qoe_with(self, cfg: crate::proto::ReinjectConfig) -> ProfileEntry {
        ProfileEntry { qoe: Some(cfg), ..self }
    }

    /// A fresh [`Profile`] from this entry.
    pub fn build(&self) -> Profile {
        Profile {
            name: Cow::Borrowed(self.name),
            description: self.description,
            controller: (self.controller)(),
            scheduler: (self.scheduler)(),
            paths: self.paths,
            media: self.media,
            path_policy: self.path_policy,
            fec: self.fec,
            reinject: self.qoe,
            loss_detection: LossDetection::default(),
        }
    }
}

fn reno() -> Arc<dyn ControllerFactory> {
    Arc::new(RenoConfig::default())
}
fn lia() -> Arc<dyn ControllerFactory> {
    Arc::new(LiaConfig::default())
}
fn olia() -> Arc<dyn ControllerFactory> {
    Arc::new(OliaConfig::default())
}
fn tfrc() -> Arc<dyn ControllerFactory> {
    Arc::new(crate::cc::TfrcConfig::default())
}
fn marc() -> Arc<dyn ControllerFactory> {
    Arc::new(crate::cc::MarcConfig::default())
}
/// MARC with the hold anchored at the rate sent (`marc-sent-anchor`, an ablation).
fn marc_sent_anchor() -> Arc<dyn ControllerFactory> {
    Arc::new(crate::cc::MarcConfig {
        anchor: crate::cc::marc::HoldAnchor::Sent,
        ..crate::cc::MarcConfig::default()
    })
}
fn minrtt() -> Arc<dyn SchedulerFactory> {
    Arc::new(MinRttConfig::default())
}
fn roundrobin() -> Arc<dyn SchedulerFactory> {
    Arc::new(RoundRobinConfig::default())
}
fn redundant() -> Arc<dyn SchedulerFactory> {
    Arc::new(RedundantConfig::default())
}
fn offload() -> Arc<dyn SchedulerFactory> {
    Arc::new(crate::sched::OffloadConfig::default())
}

/// The offload scheduler's allowance rule (`emtcp-allowance`, an ablation).
fn offload_allowance() -> Arc<dyn SchedulerFactory> {
    Arc::new(crate::sched::OffloadConfig::allowance(1.0, 0.1))
}
fn edpf() -> Arc<dyn SchedulerFactory> {
    Arc::new(crate::sched::EdpfConfig::default())
}
fn sedpf() -> Arc<dyn SchedulerFactory> {
    Arc::new(crate::sched::SedpfConfig::default())
}
fn blest() -> Arc<dyn SchedulerFactory> {
    Arc::new(crate::sched::BlestConfig::default())
}
fn ecf() -> Arc<dyn SchedulerFactory> {
    Arc::new(crate::sched::EcfConfig::default())
}
/// CUBIC with Reno's halving on the loss that ends slow start (the `mptcp-qoe` profiles;
/// `mptcp+cubic` is the same profile with plain RFC 9438 CUBIC: the ablation).
fn cubic_ss_half() -> Arc<dyn ControllerFactory> {
    Arc::new(crate::cc::CubicConfig {
        slow_start_exit_beta: Some(crate::cc::cubic::SLOW_START_EXIT_BETA),
        ..crate::cc::CubicConfig::default()
    })
}
fn abcwnd() -> Arc<dyn ControllerFactory> {
    Arc::new(crate::cc::AbCwndConfig::default())
}

use MediaReliability::{Deadline, Reliable};
use PathUse::{All, Single};

/// A registry row (keeps [`REGISTRY`] to one line per profile).
const fn entry(
    name: &'static str,
    controller: fn() -> Arc<dyn ControllerFactory>,
    scheduler: fn() -> Arc<dyn SchedulerFactory>,
    paths: PathUse,
    media: MediaReliability,
    description: &'static str,
) -> ProfileEntry {
    ProfileEntry {
        name,
        description,
        controller,
        scheduler,
        paths,
        media,
        path_policy: PathPolicy::None,
        fec: None,
        qoe: None,
    }
}

/// `mptcp-qoe-dup`: proactive first-frame copies.
const QOE_DUP: crate::proto::ReinjectConfig = crate::proto::ReinjectConfig {
    first_frame_copies: crate::proto::CopyRule::All,
    ..crate::proto::ReinjectConfig::DEFAULT
};
/// `mptcp-qoe-no-copies`: the gate's inputs flow, nothing is copied.
const QOE_NO_COPIES: crate::proto::ReinjectConfig = crate::proto::ReinjectConfig {
    budget_fraction: 0.0,
    first_frame_budget_bytes: 0,
    ..crate::proto::ReinjectConfig::DEFAULT
};

/// Every profile, in the order they are listed to users.
#[rustfmt::skip]
pub const REGISTRY: &[ProfileEntry] = &[
    entry("tcp",             reno, minrtt,     Single, Reliable, "one path, NewReno, reliable (TCP-like)"),
    entry("mptcp",           lia,  minrtt,     All,    Reliable, "all paths, minRTT scheduler, LIA coupled congestion control (RFC 6356), reliable"),
    entry("mptcp-olia",      olia, minrtt,     All,    Reliable, "all paths, minRTT scheduler, OLIA coupled congestion control, reliable"),
    entry("mptcp-uncoupled", reno, minrtt,     All,    Reliable, "all paths, minRTT scheduler, independent NewReno per path (RFC 6356 fairness baseline), reliable"),
    entry("roundrobin",      lia,  roundrobin, All,    Reliable, "all paths in turn, LIA, reliable"),
    entry("redundant",       lia,  redundant,  All,    Reliable, "every packet on every path, LIA, reliable"),
    entry("mptcp-rt",        lia,  minrtt,     All,    Deadline { max_retransmissions: None }, "as mptcp, but media messages are abandoned once they cannot arrive before their playout time"),
    entry("tfrc",            tfrc, minrtt,     Single, Reliable, "one path, TFRC equation-based rate control (RFC 5348), paced, reliable"),
    entry("marc",            marc, minrtt,     Single, Deadline { max_retransmissions: Some(1) }, "one path, MARC (TFRC with a token account for well-behaved streams), media abandoned after one lost retransmission or when late"),
    entry("marc-reliable",   marc, minrtt,     Single, Reliable, "marc with reliable delivery (as tfrc): the like-for-like comparison with tfrc"),
    entry("tfrc-deadline",   tfrc, minrtt,     Single, Deadline { max_retransmissions: Some(1) }, "tfrc with marc's delivery (abandoned after one lost retransmission or when late): the like-for-like comparison with marc"),
    entry("marc-sent-anchor", marc_sent_anchor, minrtt, Single, Deadline { max_retransmissions: Some(1) }, "marc with the hold anchored at the rate sent instead of MARC's own allowed rate (ablation)"),
    entry("mp-tfrc",         tfrc, minrtt,     All,    Reliable, "all paths, TFRC per path, minRTT scheduler over the paced paths, reliable"),
    entry("mp-marc",         marc, minrtt,     All,    Deadline { max_retransmissions: Some(1) }, "all paths, MARC per path, minRTT scheduler, at most one retransmission per media message"),
    entry("handover",        lia,  minrtt,     All,    Reliable, "WiFi only while it is usable, the other paths as backups (switch when WiFi fails), reliable").policy(PathPolicy::Handover),
    entry("emtcp",           lia,  offload,    All,    Reliable, "eMTCP: WiFi first, LTE only when WiFi's window is full (offload scheduler's window-full rule), LIA, reliable").policy(PathPolicy::Emtcp),
    entry("emtcp-allowance", lia,  offload_allowance, All, Reliable, "emtcp with the read-rate allowance (shortfall x 2 + 0.1 x read rate per second) and the backed-up bypass instead of the window-full rule (ablation)").policy(PathPolicy::Emtcp),
    entry("mptcp-qe",        abcwnd, offload,  All,    Reliable, "MPTCP-QE: eMTCP offload + aeSUM read-rate mode switch (Full once WiFi left the stream 1 s of media behind, Partial after 5 agreeing 100 ms samples at >= 0.9 x the read rate) + abCWND restart + weSACK ACK path, reliable").policy(PathPolicy::MptcpQe { aesum: true, wesack: true, rule: AeSumRule::Shortfall }),
    entry("mptcp-qe-paper-rule", abcwnd, offload, All, Reliable, "mptcp-qe with aeSUM's rule as the paper states it: every 100 ms sample switches, Partial when the WiFi forecast >= the read rate, no hold (ablation)").policy(PathPolicy::MptcpQe { aesum: true, wesack: true, rule: AeSumRule::Paper }),
    entry("mptcp-qe-no-aesum", abcwnd, offload, All,   Reliable, "mptcp-qe without the aeSUM mode switch (ablation)").policy(PathPolicy::MptcpQe { aesum: false, wesack: true, rule: AeSumRule::Shortfall }),
    entry("mptcp-qe-no-abcwnd", lia, offload,   All,   Reliable, "mptcp-qe with plain LIA instead of abCWND (ablation)").policy(PathPolicy::MptcpQe { aesum: true, wesack: true, rule: AeSumRule::Shortfall }),
    entry("mptcp-qe-no-wesack", abcwnd, offload, All,  Reliable, "mptcp-qe with ACKs on the path the data came on (ablation)").policy(PathPolicy::MptcpQe { aesum: true, wesack: false, rule: AeSumRule::Shortfall }),
    entry("mptcp-qe-band",   abcwnd, offload,  All,    Reliable, "mptcp-qe with aeSUM's earlier band: Full after 5 agreeing 100 ms samples below 0.75 x the read rate, Partial after 5 at >= 0.9 x (ablation)").policy(PathPolicy::MptcpQe { aesum: true, wesack: true, rule: AeSumRule::SampleBand }),
    entry("edpf",            lia,  edpf,       All,    Reliable, "all paths, EDPF (earliest expected arrival from one-way delay and delivery rate), LIA, reliable"),
    entry("sedpf",           lia,  sedpf,      All,    Reliable, "all paths, S-EDPF (earliest expected in-order delivery, Clark's max of Gaussians), LIA, reliable"),
    entry("sedpf-fec2",      lia,  sedpf,      All,    Reliable, "S-EDPF scheduler with the streaming code (tau = 2: a coded packet after 2 data packets when capacity is spare, at twice the measured loss rate while data waits; on the lossiest path), LIA, reliable").fec(2),
    entry("sedpf-fec4",      lia,  sedpf,      All,    Reliable, "S-EDPF scheduler with the streaming code (tau = 4: a coded packet after 4 data packets when capacity is spare, at twice the measured loss rate while data waits; on the lossiest path), LIA, reliable").fec(4),
    entry("sedpf-fec8",      lia,  sedpf,      All,    Reliable, "S-EDPF scheduler with the streaming code (tau = 8: a coded packet after 8 data packets when capacity is spare, at twice the measured loss rate while data waits; on the lossiest path), LIA, reliable").fec(8),
    entry("blest",           lia,  blest,      All,    Reliable, "all paths, BLEST (skip the slow path when it could block the fast one), LIA, reliable"),
    entry("ecf",             lia,  ecf,        All,    Reliable, "all paths, ECF (wait for the fast path when that completes sooner), LIA, reliable"),
    entry("mptcp-qoe",       cubic_ss_half, minrtt,    All,    Reliable, "XLINK-style: minRTT, uncoupled CUBIC per path (halved on a loss ending slow start over a queue), QoE-driven re-injection from the client's playout feedback (no copies before playback starts), reliable").qoe(),
    entry("mptcp-qoe-dup",   cubic_ss_half, minrtt,    All,    Reliable, "mptcp-qoe duplicating every unacknowledged byte on the other paths before playback starts (XLINK's first-frame acceleration, within the 150 kB budget) (ablation)").qoe_with(QOE_DUP),
    entry("mptcp-qoe-no-copies", cubic_ss_half, minrtt, All,   Reliable, "mptcp-qoe with the playout feedback but no copies (ablation)").qoe_with(QOE_NO_COPIES),
    entry("mptcp-qe-qoe",    abcwnd, offload,  All,    Reliable, "mptcp-qe + QoE-driven re-injection (LTE woken for it only below the low buffer threshold), reliable").policy(PathPolicy::MptcpQe { aesum: true, wesack: true, rule: AeSumRule::Shortfall }).qoe(),
    entry("mptcp-qe-qoe-no-copies", abcwnd, offload, All, Reliable, "mptcp-qe-qoe with the playout feedback but no copies (ablation)").policy(PathPolicy::MptcpQe { aesum: true, wesack: true, rule: AeSumRule::Shortfall }).qoe_with(QOE_NO_COPIES),
    entry("sedpf-fec4-qoe",  lia,  sedpf,      All,    Reliable, "sedpf-fec4 + QoE-driven re-injection as extra coded packets (none before playback starts), reliable").fec(4).qoe(),
];

/// A profile name that is not in the registry.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown profile `{name}` (known: {})", KnownNames)]
pub struct UnknownProfile {
    /// The name asked for.
    pub name: String,
}

struct KnownNames;

impl fmt::Display for KnownNames {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&names().join(", "))
    }
}

/// A profile and controller that cannot be resolved or combined (`--cc`, `PROFILE+CC`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProfileError {
    /// The profile name is not registered.
    #[error(transparent)]
    UnknownProfile(#[from] UnknownProfile),
    /// The controller name is not one of [`crate::cc::registry::CONTROLLERS`].
    #[error("unknown controller `{cc}` for profile `{profile}` (known: {known})")]
    UnknownController {
        /// The profile it was asked for.
        profile: String,
        /// The name asked for.
        cc: String,
        /// The known names.
        known: String,
    },
    /// The profile exists but cannot run where it was asked for.
    #[error("profile `{profile}` {reason}")]
    NotHere {
        /// The profile.
        profile: String,
        /// Where it runs instead.
        reason: &'static str,
    },
    /// The controller cannot run this profile.
    #[error("controller `{cc}` cannot run profile `{profile}`: {reason}")]
    Incompatible {
        /// The profile.
        profile: String,
        /// The controller.
        cc: String,
        /// Why.
        reason: &'static str,
    },
}

impl Profile {
    /// This profile with controller `cc` ([`crate::cc::registry`]) on every path, named
    /// `PROFILE+CC`. Everything else (scheduler, paths, media, path policy, code) stays.
    ///
    /// Refused combinations (one error naming both):
    /// - a window or model controller (reno, lia, olia, cubic, bbr, fixed-bdp) on a
    ///   rate-based profile (`tfrc`, `marc`, `mp-tfrc`, `mp-marc`): those profiles are
    ///   their equation-based controller, paced by the receiver's feedback; the same
    ///   delivery with a window is `tcp+CC` / `mptcp+CC`;
    /// - a coupled controller (lia, olia) on a one-path profile: coupling needs subflows
    ///   to couple (on one path LIA is Reno); use `reno` there, or an all-paths profile.
    pub fn with_controller(mut self, cc: &str) -> Result<Profile, ProfileError> {
        use crate::cc::registry::{self, Kind};
        let Some(entry) = registry::lookup(cc) else {
            return Err(ProfileError::UnknownController {
                profile: self.name.to_string(),
                cc: cc.to_string(),
                known: registry::names(),
            });
        };
        let own = self.controller.kind();
        let refuse = |reason| ProfileError::Incompatible {
            profile: self.name.to_string(),
            cc: cc.to_string(),
            reason,
        };
        if own == Kind::RateFeedback && entry.kind != Kind::RateFeedback {
            return Err(refuse(
                "the profile is rate based (paced by the receiver's TFRC feedback); a window \
                 or model controller needs a window profile such as `tcp` or `mptcp`",
            ));
        }
        if entry.kind == Kind::Coupled && self.paths == PathUse::Single {
            return Err(refuse(
                "a coupled controller needs several paths and the profile uses one; use \
                 `reno` or an all-paths profile",
            ));
        }
        self.controller = (entry.factory)();
        self.name = Cow::Owned(format!("{}+{cc}", self.name));
        Ok(self)
    }
}

/// The profile `spec` names, `PROFILE` or `PROFILE+CC`, with `cc` (the `--cc` flag), when
/// given, as its controller. `--cc` and a `+CC` in the name may not both be given, unless
/// they agree.
pub fn resolve(spec: &str, cc: Option<&str>) -> Result<Profile, ProfileError> {
    let (base, own_cc) = match spec.split_once('+') {
        Some((b, c)) => (b, Some(c)),
        None => (spec, None),
    };
    let profile = lookup(base)?;
    match (own_cc, cc) {
        (Some(a), Some(b)) if a != b => Err(ProfileError::Incompatible {
            profile: spec.to_string(),
            cc: b.to_string(),
            reason: "the profile names its own controller; give one of `--cc` and `+CC`",
        }),
        (Some(c), _) | (None, Some(c)) => profile.with_controller(c),
        (None, None) => Ok(profile),
    }
}

/// The profile called `name`.
pub fn lookup(name: &str) -> Result<Profile, UnknownProfile> {
    REGISTRY
        .iter()
        .find(|e| e.name == name)
        .map(ProfileEntry::build)
        .ok_or_else(|| UnknownProfile { name: name.to_string() })
}

/// The names of all profiles, in registry order.
pub fn names() -> Vec<&'static str> {
    REGISTRY.iter().map(|e| e.name).collect()
}

/// Every profile, in registry order.
pub fn all() -> Vec<Profile> {
    REGISTRY.iter().map(ProfileEntry::build).collect()
}

impl std::str::FromStr for Profile {
    type Err = UnknownProfile;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        lookup(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_fixed_name_is_registered() {
        for name in [
            "tcp",
            "mptcp",
            "mptcp-olia",
            "roundrobin",
            "redundant",
            "mptcp-rt",
            "mptcp-uncoupled",
            "edpf",
            "sedpf",
            "sedpf-fec2",
            "sedpf-fec4",
            "sedpf-fec8",
            "blest",
            "ecf",
            "mptcp-qoe",
            "mptcp-qe-qoe",
            "sedpf-fec4-qoe",
        ] {
            assert!(lookup(name).is_ok(), "{name}");
        }
    }

    #[test]
    fn qoe_profiles_bundle_reinjection() {
        let qe = PathPolicy::MptcpQe { aesum: true, wesack: true, rule: AeSumRule::Shortfall };
        let cases = [
            ("mptcp-qoe", "cubic", "minrtt", PathPolicy::None, None),
            ("mptcp-qe-qoe", "abcwnd", "offload", qe, None),
            ("sedpf-fec4-qoe", "lia", "sedpf", PathPolicy::None, Some(4)),
        ];
        for (name, cc, sched, policy, fec) in cases {
            let p = lookup(name).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(p.controller.build().name(), cc, "{name}");
            assert_eq!(p.scheduler.build().name(), sched, "{name}");
            assert_eq!((p.path_policy, p.fec), (policy, fec), "{name}");
            assert_eq!(p.reinject, Some(crate::proto::ReinjectConfig::default()), "{name}");
            let c = p.connection_config(ConfigParams::new(Side::Client, Clock::Virtual));
            assert!(c.reinject.is_some(), "{name}");
        }
        assert_eq!(lookup("mptcp").map(|p| p.reinject), Ok(None));
        let dup = lookup("mptcp-qoe-dup").ok().and_then(|p| p.reinject);
        assert_eq!(dup.map(|r| r.first_frame_copies), Some(crate::proto::CopyRule::All));
        for name in ["mptcp-qoe-no-copies", "mptcp-qe-qoe-no-copies"] {
            let none = lookup(name).ok().and_then(|p| p.reinject);
            let budgets = none.map(|r| (r.budget_fraction, r.first_frame_budget_bytes));
            assert_eq!(budgets, Some((0.0, 0)), "{name}");
        }
        let qe_none = lookup("mptcp-qe-qoe-no-copies").map(|p| p.path_policy);
        assert_eq!(qe_none, Ok(qe));
    }

    #[test]
    fn names_are_unique() {
        let mut n = names();
        n.sort_unstable();
        let len = n.len();
        n.dedup();
        assert_eq!(n.len(), len);
    }

    #[test]
    fn profiles_bundle_the_documented_strategies() {
        let cases = [
            ("tcp", "reno", "minrtt", PathUse::Single, MediaReliability::Reliable),
            ("mptcp", "lia", "minrtt", PathUse::All, MediaReliability::Reliable),
            ("mptcp-olia", "olia", "minrtt", PathUse::All, MediaReliability::Reliable),
            ("mptcp-uncoupled", "reno", "minrtt", PathUse::All, MediaReliability::Reliable),
            ("roundrobin", "lia", "roundrobin", PathUse::All, MediaReliability::Reliable),
            ("redundant", "lia", "redundant", PathUse::All, MediaReliability::Reliable),
            ("edpf", "lia", "edpf", PathUse::All, MediaReliability::Reliable),
            ("sedpf", "lia", "sedpf", PathUse::All, MediaReliability::Reliable),
            ("blest", "lia", "blest", PathUse::All, MediaReliability::Reliable),
            ("ecf", "lia", "ecf", PathUse::All, MediaReliability::Reliable),
            (
                "mptcp-rt",
                "lia",
                "minrtt",
                PathUse::All,
                MediaReliability::Deadline { max_retransmissions: None },
            ),
        ];
        for (name, cc, sched, paths, media) in cases {
            let p = lookup(name).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(p.name, name);
            assert_eq!(p.controller.build().name(), cc, "{name}");
            assert_eq!(p.scheduler.build().name(), sched, "{name}");
            assert_eq!(p.paths, paths, "{name}");
            assert_eq!(p.media, media, "{name}");
            assert!(!p.description.is_empty());
        }
    }

    #[test]
    fn unknown_profile_error_lists_the_known_names() {
        let err = lookup("tcp-vegas").err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.starts_with("unknown profile `tcp-vegas` (known: tcp, mptcp, "), "{err}");
        assert!(err.contains("mptcp-rt"), "{err}");
        assert_eq!("mptcp".parse::<Profile>().map(|p| p.name), Ok("mptcp".into()));
    }

    #[test]
    fn all_lists_every_entry_in_order() {
        let all: Vec<String> = all().iter().map(|p| p.name.to_string()).collect();
        assert_eq!(all, names());
    }

    #[test]
    fn energy_profiles_bundle_their_policies() {
        let qe = |aesum, wesack| PathPolicy::MptcpQe { aesum, wesack, rule: AeSumRule::Shortfall };
        let cases = [
            ("handover", "lia", "minrtt", PathPolicy::Handover),
            ("emtcp", "lia", "offload", PathPolicy::Emtcp),
            ("mptcp-qe", "abcwnd", "offload", qe(true, true)),
            ("mptcp-qe-no-aesum", "abcwnd", "offload", qe(false, true)),
            ("mptcp-qe-no-abcwnd", "lia", "offload", qe(true, true)),
            ("mptcp-qe-no-wesack", "abcwnd", "offload", qe(true, false)),
            (
                "mptcp-qe-band",
                "abcwnd",
                "offload",
                PathPolicy::MptcpQe { aesum: true, wesack: true, rule: AeSumRule::SampleBand },
            ),
            (
                "mptcp-qe-paper-rule",
                "abcwnd",
                "offload",
                PathPolicy::MptcpQe { aesum: true, wesack: true, rule: AeSumRule::Paper },
            ),
            ("mptcp", "lia", "minrtt", PathPolicy::None),
        ];
        for (name, cc, sched, policy) in cases {
            let p = lookup(name).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(p.controller.build().name(), cc, "{name}");
            assert_eq!(p.scheduler.build().name(), sched, "{name}");
            assert_eq!(p.path_policy, policy, "{name}");
            assert_eq!(p.paths, PathUse::All, "{name}");
        }
    }

    #[test]
    fn controller_override_replaces_the_controller_and_names_the_pair() {
        for cc in ["reno", "lia", "olia", "cubic", "bbr", "tfrc", "marc", "fixed-bdp"] {
            let p = resolve(&format!("mptcp+{cc}"), None).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(p.controller.build().name(), cc);
            assert_eq!(p.name, format!("mptcp+{cc}"));
            assert_eq!(p.scheduler.build().name(), "minrtt");
            let q = resolve("mptcp", Some(cc)).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(q.name, p.name);
        }
        let qe = resolve("mptcp-qe+bbr", None).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            qe.path_policy,
            PathPolicy::MptcpQe { aesum: true, wesack: true, rule: AeSumRule::Shortfall }
        );
        let name = |spec, cc| resolve(spec, cc).map(|p| p.name.to_string());
        assert_eq!(name("tcp", None), Ok("tcp".to_string()));
        assert_eq!(name("tcp+cubic", Some("cubic")), Ok("tcp+cubic".to_string()));
        assert_eq!(name("tfrc+marc", None), Ok("tfrc+marc".to_string()));
    }

    #[test]
    fn impossible_combinations_name_both() {
        let err = |spec: &str, cc: Option<&str>| {
            resolve(spec, cc).err().map(|e| e.to_string()).unwrap_or_default()
        };
        let e = err("tfrc+bbr", None);
        assert!(e.starts_with("controller `bbr` cannot run profile `tfrc`: "), "{e}");
        let e = err("mp-marc", Some("cubic"));
        assert!(e.starts_with("controller `cubic` cannot run profile `mp-marc`: "), "{e}");
        let e = err("tcp+lia", None);
        assert!(e.starts_with("controller `lia` cannot run profile `tcp`: "), "{e}");
        let e = err("mptcp+vegas", None);
        assert!(
            e.starts_with("unknown controller `vegas` for profile `mptcp` (known: reno,"),
            "{e}"
        );
        let e = err("nope+bbr", None);
        assert!(e.starts_with("unknown profile `nope`"), "{e}");
        let e = err("mptcp+bbr", Some("cubic"));
        assert!(e.contains("`cubic`") && e.contains("`mptcp+bbr`"), "{e}");
    }

    #[test]
    fn rate_based_profiles_bundle_tfrc_and_marc() {
        let one = MediaReliability::Deadline { max_retransmissions: Some(1) };
        let cases = [
            ("tfrc", "tfrc", PathUse::Single, MediaReliability::Reliable),
            ("marc", "marc", PathUse::Single, one),
            ("mp-tfrc", "tfrc", PathUse::All, MediaReliability::Reliable),
            ("mp-marc", "marc", PathUse::All, one),
            ("marc-reliable", "marc", PathUse::Single, MediaReliability::Reliable),
            ("tfrc-deadline", "tfrc", PathUse::Single, one),
            ("marc-sent-anchor", "marc", PathUse::Single, one),
        ];
        for (name, cc, paths, media) in cases {
            let p = lookup(name).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(p.controller.build().name(), cc, "{name}");
            assert_eq!(p.scheduler.build().name(), "minrtt", "{name}");
            assert_eq!((p.paths, p.media), (paths, media), "{name}");
        }
    }
}
