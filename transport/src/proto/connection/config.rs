//! Connection-wide settings ([`Config`]) and the policy that routes ACKs to a path
//! ([`AckPathPolicy`], default [`SamePathAcks`]).

use std::sync::Arc;
use std::time::Duration;

use crate::cc::ControllerFactory;
use crate::path::PathId;
use crate::proto::recovery::LossDetection;
use crate::sched::{PathView, SchedulerFactory};
use crate::time::Instant;

/// Chooses which path carries the ACK for packets received on a path.
///
/// The default ([`SamePathAcks`]) answers on the path the data came on. An energy-aware
/// policy can send every ACK on the cheapest radio instead.
pub trait AckPathPolicy: Send + Sync + std::fmt::Debug {
    /// The path for an ACK of packets received on `received_on`, chosen among `paths`
    /// (the paths this side may send on; `usable` is false for failed ones). `None`
    /// means: no path now, keep the ACK pending.
    ///
    /// Called from [`super::Connection::poll_transmit`]: to pick the path for due ACKs,
    /// and for every path with a pending ACK whenever a packet is built, so it may be
    /// asked the same question several times per call.
    fn ack_path(&self, received_on: PathId, paths: &[PathView]) -> Option<PathId>;
}

/// ACKs travel on the path the data came on, or on the lowest-RTT usable path when that
/// one cannot carry them.
#[derive(Debug, Clone, Copy, Default)]
pub struct SamePathAcks;

impl AckPathPolicy for SamePathAcks {
    fn ack_path(&self, received_on: PathId, paths: &[PathView]) -> Option<PathId> {
        if paths.iter().any(|p| p.id == received_on && p.usable) {
            return Some(received_on);
        }
        paths.iter().filter(|p| p.usable).min_by_key(|p| (p.srtt, p.id)).map(|p| p.id)
    }
}

/// Connection-wide settings. [`Config::new`] fills the defaults.
#[derive(Debug, Clone)]
pub struct Config {
    /// Congestion controller (one instance for all paths).
    pub controller: Arc<dyn ControllerFactory>,
    /// Packet scheduler.
    pub scheduler: Arc<dyn SchedulerFactory>,
    /// Bytes per datagram including the braid header: what every path sends at first,
    /// and always without [`Config::mtu_discovery_max`]. Default 1200.
    pub max_datagram_size: usize,
    /// Largest datagram path MTU discovery probes each path for (RFC 8899, RFC 9000
    /// §14.3), or `None`: paths stay at `max_datagram_size`. Ignored with the streaming
    /// code (its symbols are `max_datagram_size` long). Default `None`; real-time
    /// connections use [`crate::profile::MTU_DISCOVERY_MAX`].
    pub mtu_discovery_max: Option<usize>,
    /// Receive buffer for the incoming message stream; the flow-control window is its free
    /// space. Default 4 MiB. A single message must fit in the peer's buffer.
    pub recv_buffer_bytes: u64,
    /// Most bytes this side keeps queued or unacknowledged in its send stream, whatever
    /// window the peer advertises (its MAX_DATA and hello are clamped by this). Default
    /// 8 MiB: twice the default receive buffer, so an honest peer's window is never cut.
    pub send_buffer_bytes: u64,
    /// This side's idle timeout, announced to the peer as RFC 9000's `max_idle_timeout`:
    /// the connection closes silently when nothing was received for the smaller of the two
    /// sides' values (at least three PTOs, §10.1). Zero: none from this side. Default 10 s.
    pub idle_timeout: Duration,
    /// RTT assumed before the first sample. Default 333 ms (RFC 9002 §6.2.2 \[source\]).
    pub initial_rtt: Duration,
    /// RTO floor. Default 200 ms.
    pub min_rto: Duration,
    /// RTO ceiling after backoff. Default 60 s (RFC 6298 §2.5 \[source\]).
    pub max_rto: Duration,
    /// Longest an ACK waits for a second packet. Default 25 ms (RFC 9000 max_ack_delay \[source\]).
    pub max_ack_delay: Duration,
    /// ACK immediately after this many ack-eliciting packets. Default 2 (RFC 9000 §13.2.2 \[source\]).
    pub ack_eliciting_threshold: u32,
    /// Receive timestamps per ACK frame: the largest packet's and, up to this many in all,
    /// those of the other packets received since the path's last ACK (newest first).
    /// Default 1. The EDPF and S-EDPF profiles take 8: their path model needs the one-way
    /// delay of every packet, and under reordering the largest packet of an ACK is one
    /// that overtook the others, a biased sample.
    pub ack_timestamps: usize,
    /// Consecutive RTOs after which a path is marked failed. Default 3.
    pub path_failure_rtos: u32,
    /// Probe interval ceiling for a failed path. Default 1 s.
    pub failed_probe_interval: Duration,
    /// How often the measured read rate is reported to the peer. Default 250 ms.
    pub read_rate_interval: Duration,
    /// Most paths (including unvalidated ones). Default 8.
    pub max_paths: usize,
    /// Server: a joining path not validated this long after its last PATH_JOIN is dropped, so
    /// unanswered joins do not hold [`Config::max_paths`] slots. Default 3 s (RFC 9000
    /// §8.2.4 abandons a validation after three PTOs \[source\]).
    pub path_validation_timeout: Duration,
    /// Which path carries ACKs. Default [`SamePathAcks`].
    pub ack_path: Arc<dyn AckPathPolicy>,
    /// Send a PING when nothing ack-eliciting was sent for this long, so a connection
    /// whose application pauses does not hit the idle timeout. Default `None` (off).
    pub keep_alive: Option<Duration>,
    /// Measure TFRC receiver statistics per path (RFC 5348 §5 \[source\]) and report them
    /// to the data sender with RATE_FEEDBACK at least once per RTT while data arrives.
    /// Default: whether the controller is rate based (answers
    /// [`crate::cc::Controller::pacing_rate`]); both ends of a connection normally run the
    /// same profile, so the receiver of a TFRC/MARC sender reports.
    pub rate_feedback: bool,
    /// The streaming code (CODED packets every τ data packets, recovery at the receiver).
    /// Default `None` (off).
    pub fec: Option<super::FecConfig>,
    /// QoE-driven re-injection ([`super::ReinjectConfig`]): the client reports its playout
    /// state with PLAYOUT frames and the data sender re-injects when playout is at risk.
    /// Default `None` (off: no PLAYOUT frames, no re-injection).
    pub reinject: Option<super::ReinjectConfig>,
    /// This side's controller paces by the peer's RATE_FEEDBACK: the hello says so
    /// (the `wants_rate_feedback` transport parameter), and the peer then reports whatever its own profile. Default:
    /// whether the controller is rate based.
    pub wants_rate_feedback: bool,
    /// 1-RTT packets sealed under one key before a key update (RFC 9001 §6). Default 2^20,
    /// well below AES-GCM's confidentiality limit of 2^23 packets (RFC 9001 §6.6 \[source\]).
    pub key_update_packets: u64,
    /// The AEAD limits (RFC 9001 §6.6) this side enforces; `None`: the negotiated
    /// cipher's, as rustls gives them (AES-GCM: 2^23 packets sealed per key, 2^52 forged
    /// packets; ChaCha20-Poly1305: 2^62 and 2^36). Tests set small ones.
    pub aead_limits: Option<AeadLimits>,
    /// How each path detects lost packets. Default [`LossDetection::Rack`] (RFC 8985, a
    /// reordering window per path); [`LossDetection::Rfc9002`] keeps RFC 9002's packet and
    /// time thresholds.
    pub loss_detection: LossDetection,
    /// Announce and use Braid's extension frames (the `braid_frames` transport parameter):
    /// messages, READ_RATE, PLAYOUT, path joins, ACK receive timestamps. They go only to a
    /// peer that announced them too; with any other QUIC stack the connection speaks QUIC
    /// v1 (and RFC 10069 if both announce `initial_max_path_id`) alone. Default on; off
    /// makes this side such a peer, for tests.
    pub braid_frames: bool,
    /// Toward a peer without Braid's frames, carry messages as requests and responses on
    /// bidirectional streams ([`crate::proto::mapping::Mapping::Requests`]: the client's
    /// message `n` opens stream `4n`, the server's message `n` answers on it), as HTTP/0.9
    /// over QUIC (`hq-interop`) does. Default off: one unidirectional stream per message.
    pub request_streams: bool,
}

impl Config {
    /// The `initial_max_path_id` this side announces (RFC 10069): path ids 0 to
    /// [`Config::max_paths`] − 1.
    pub fn initial_max_path_id(&self) -> u32 {
        u32::try_from(self.max_paths.saturating_sub(1)).unwrap_or(u32::MAX)
    }

    /// Defaults with the given controller and scheduler.
    pub fn new(
        controller: Arc<dyn ControllerFactory>,
        scheduler: Arc<dyn SchedulerFactory>,
    ) -> Config {
        let controller_probe = controller.clone();
        Config {
            controller,
            scheduler,
            max_datagram_size: 1200,
            mtu_discovery_max: None,
            recv_buffer_bytes: 4 * 1024 * 1024,
            send_buffer_bytes: 8 * 1024 * 1024,
            idle_timeout: Duration::from_secs(10),
            initial_rtt: Duration::from_millis(333),
            min_rto: Duration::from_millis(200),
            max_rto: Duration::from_secs(60),
            max_ack_delay: Duration::from_millis(25),
            ack_eliciting_threshold: 2,
            ack_timestamps: 1,
            path_failure_rtos: 3,
            failed_probe_interval: Duration::from_secs(1),
            read_rate_interval: Duration::from_millis(250),
            max_paths: 8,
            path_validation_timeout: Duration::from_secs(3),
            ack_path: Arc::new(SamePathAcks),
            keep_alive: None,
            rate_feedback: is_rate_based(controller_probe.as_ref()),
            fec: None,
            reinject: None,
            wants_rate_feedback: is_rate_based(controller_probe.as_ref()),
            key_update_packets: 1 << 20,
            aead_limits: None,
            loss_detection: LossDetection::default(),
            braid_frames: true,
            request_streams: false,
        }
    }
}

/// Whether controllers from `factory` are rate based: a fresh one asked about a fresh path
/// paces, and by the receiver's feedback (BBR paces from its own model and does not).
fn is_rate_based(factory: &dyn ControllerFactory) -> bool {
    let mut c = factory.build();
    c.on_path_added(Instant::ZERO, PathId(0), 1200);
    c.pacing_rate(PathId(0)).is_some() && c.uses_rate_feedback()
}

/// RFC 9001 §6.6's limits on one connection's packet protection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AeadLimits {
    /// Packets sealed under one key: a key update comes at half of it at the latest, and a
    /// connection that cannot update by then closes with AEAD_LIMIT_REACHED.
    pub confidentiality: u64,
    /// Packets that failed authentication, all keys together: at this many the
    /// connection closes with AEAD_LIMIT_REACHED and opens nothing more.
    pub integrity: u64,
}
