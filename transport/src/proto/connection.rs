//! The multipath connection state machine (sans-IO).

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::assembly::{Accept, Assembler, Delivery};
use super::frame::{AckFrame, DataFrame, Frame, HelloRole, MAX_CLOSE_REASON, RateFeedbackFrame};
use super::packet::{Header, Packet};
use super::ranges::RangeSet;
use super::rate::ReadRateMeter;
use super::recovery::{LossState, OwdEstimator, RttEstimator, SentFrames, SentPacket};
use super::send::{Chunk, Reliability, SendStream};
use super::wire::varint_len;
use crate::cc::tfrc::TfrcReceiver;
use crate::cc::{Controller, ControllerFactory, RttSample};
use crate::path::{PathId, PathRole, PathStatus};
use crate::sched::{PathView, Scheduler, SchedulerFactory};
use crate::time::Instant;

/// Most queued [`Event::PeerPathStatus`] events (the only kind a peer can trigger at will).
const MAX_QUEUED_EVENTS: usize = 1024;

/// Most packet-number ranges a path remembers (and reports in one ACK frame).
const MAX_ACK_RANGES: usize = 32;

/// Chooses which path carries the ACK for packets received on a path.
///
/// The default ([`SamePathAcks`]) answers on the path the data came on. An energy-aware
/// policy can send every ACK on the cheapest radio instead.
pub trait AckPathPolicy: Send + Sync + std::fmt::Debug {
    /// The path for an ACK of packets received on `received_on`, chosen among `paths`
    /// (the paths this side may send on; `usable` is false for failed ones). `None`
    /// means: no path now, keep the ACK pending.
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
    /// Bytes per datagram including the braid header. Default 1200.
    pub max_datagram_size: usize,
    /// Receive buffer for the incoming message stream; the flow-control window is its free
    /// space. Default 4 MiB. A single message must fit in the peer's buffer.
    pub recv_buffer_bytes: u64,
    /// Close silently when nothing was received for this long. Default 10 s.
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
    /// Consecutive RTOs after which a path is marked failed. Default 3.
    pub path_failure_rtos: u32,
    /// Probe interval ceiling for a failed path. Default 1 s.
    pub failed_probe_interval: Duration,
    /// How often the measured read rate is reported to the peer. Default 250 ms.
    pub read_rate_interval: Duration,
    /// Most paths (including unvalidated ones). Default 8.
    pub max_paths: usize,
    /// Which path carries ACKs. Default [`SamePathAcks`].
    pub ack_path: Arc<dyn AckPathPolicy>,
    /// Send a PING when nothing ack-eliciting was sent for this long, so a connection
    /// whose application pauses does not hit the idle timeout. Default `None` (off).
    pub keep_alive: Option<Duration>,
    /// Measure TFRC receiver statistics per path (RFC 5348 §5 \[source\]) and report them
    /// to the data sender with RATE_FEEDBACK at least once per RTT while data arrives.
    /// Default: whether the controller is rate based (answers
    /// [`Controller::pacing_rate`]); both ends of a connection normally run the same
    /// profile, so the receiver of a TFRC/MARC sender reports.
    pub rate_feedback: bool,
}

impl Config {
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
            recv_buffer_bytes: 4 * 1024 * 1024,
            idle_timeout: Duration::from_secs(10),
            initial_rtt: Duration::from_millis(333),
            min_rto: Duration::from_millis(200),
            max_rto: Duration::from_secs(60),
            max_ack_delay: Duration::from_millis(25),
            ack_eliciting_threshold: 2,
            path_failure_rtos: 3,
            failed_probe_interval: Duration::from_secs(1),
            read_rate_interval: Duration::from_millis(250),
            max_paths: 8,
            ack_path: Arc::new(SamePathAcks),
            keep_alive: None,
            rate_feedback: is_rate_based(controller_probe.as_ref()),
        }
    }
}

/// Whether controllers from `factory` are rate based: a fresh one asked about a fresh path.
fn is_rate_based(factory: &dyn ControllerFactory) -> bool {
    let mut c = factory.build();
    c.on_path_added(Instant::ZERO, PathId(0), 1200);
    c.pacing_rate(PathId(0)).is_some()
}

/// An output datagram: the bytes are in the caller's buffer (`buf[..len]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transmit {
    /// The path it belongs to.
    pub path: PathId,
    /// Source address.
    pub local: SocketAddr,
    /// Destination address.
    pub remote: SocketAddr,
    /// Datagram length.
    pub len: usize,
}

/// Why the connection closed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CloseReason {
    /// [`Connection::close`] was called.
    Local,
    /// The peer sent CLOSE.
    Peer {
        /// Its code.
        code: u64,
        /// Its reason (lossy UTF-8).
        reason: String,
    },
    /// Nothing was received for [`Config::idle_timeout`].
    IdleTimeout,
}

/// Something the application should know about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The handshake completed (client: server hello received; server: at accept).
    Connected,
    /// A path other than path 0 may carry data: both sides proved they reach each other on
    /// it (path 0 is covered by [`Event::Connected`]).
    PathValidated(PathId),
    /// The path had repeated RTOs; its data moved to other paths and it is being probed.
    PathFailed(PathId),
    /// A failed path answered a probe and carries data again.
    PathRecovered(PathId),
    /// The peer announced a PATH_STATUS.
    PeerPathStatus {
        /// The path.
        path: PathId,
        /// The announced status.
        status: PathStatus,
    },
    /// The connection closed; nothing more is sent or received.
    Closed {
        /// Why.
        reason: CloseReason,
    },
}

/// Why [`Connection::accept`] refused a datagram.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AcceptError {
    /// The datagram does not parse.
    #[error("malformed datagram: {0}")]
    Malformed(#[from] super::wire::WireError),
    /// It parses but is not a client hello on path 0.
    #[error("not a client hello")]
    NotHandshake,
}

/// Why [`Connection::add_path`] failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    /// Only the client opens paths.
    #[error("only the client opens paths")]
    NotClient,
    /// [`Config::max_paths`] reached.
    #[error("too many paths")]
    TooMany,
    /// A live path already uses these addresses.
    #[error("a path with these addresses exists")]
    Duplicate,
    /// The connection is closed.
    #[error("connection closed")]
    Closed,
}

/// Why [`Connection::send_message`] refused a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SendError {
    /// The message does not fit the peer's flow-control credit now (see
    /// [`Connection::send_capacity`]). A message larger than the peer's whole receive
    /// buffer never fits.
    #[error("blocked by flow control")]
    Blocked,
    /// The connection is closed.
    #[error("connection closed")]
    Closed,
}

/// Datagrams dropped on input, by reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DropCounters {
    /// Did not parse, or contradicted the protocol.
    pub malformed: u64,
    /// Carried another connection id.
    pub unknown_connection: u64,
    /// Came from an address that is not a validated path of this connection.
    pub unvalidated_address: u64,
    /// DATA/ABANDON frames beyond the advertised window or the bookkeeping bounds.
    pub out_of_window: u64,
    /// Packets received before.
    pub duplicate: u64,
}

/// Per-path statistics.
#[derive(Debug, Clone, PartialEq)]
pub struct PathStats {
    /// The path.
    pub id: PathId,
    /// Its access network.
    pub role: PathRole,
    /// Effective status (closed if either side closed it).
    pub status: PathStatus,
    /// Marked failed after repeated RTOs.
    pub failed: bool,
    /// Datagram bytes sent.
    pub bytes_sent: u64,
    /// Datagram bytes received.
    pub bytes_received: u64,
    /// Packets sent.
    pub packets_sent: u64,
    /// Packets declared lost.
    pub packets_lost: u64,
    /// Smoothed RTT.
    pub srtt: Duration,
    /// Smallest RTT sample.
    pub min_rtt: Duration,
    /// Controller window.
    pub cwnd: u64,
    /// Bytes in flight.
    pub in_flight: u64,
    /// One-way delay mean from receive timestamps (includes any clock offset).
    pub owd_mean: Duration,
    /// One-way delay variance, µs².
    pub owd_var_us2: f64,
    /// Message payload bytes sent (first transmissions and retransmissions).
    pub data_bytes_sent: u64,
    /// New message payload bytes received.
    pub data_bytes_received: u64,
    /// Whether the path is validated.
    pub validated: bool,
}

/// Connection statistics.
#[derive(Debug, Clone, PartialEq)]
pub struct ConnectionStats {
    /// One entry per path, ordered by id (closed paths included; only the newest
    /// `3 × max_paths` closed ones are remembered).
    pub paths: Vec<PathStats>,
    /// Message payload bytes handed to the application.
    pub bytes_delivered: u64,
    /// Messages handed to the application.
    pub messages_delivered: u64,
    /// Gaps handed to the application.
    pub messages_abandoned: u64,
    /// Outgoing messages this side abandoned.
    pub messages_abandoned_sent: u64,
    /// Payload bytes sent again after a loss.
    pub retransmitted_bytes: u64,
    /// Packets declared lost, all paths.
    pub lost_packets: u64,
    /// Input drops.
    pub dropped: DropCounters,
}

#[derive(Debug, Clone)]
struct Path {
    id: PathId,
    local: SocketAddr,
    remote: SocketAddr,
    role: PathRole,
    local_status: PathStatus,
    local_status_seq: u64,
    status_pending: bool,
    peer_status: PathStatus,
    peer_status_seq: u64,
    /// This side may send ordinary packets on the path.
    validated: bool,
    removed: bool,
    failed: bool,
    // Path validation (client: join/response; server: challenge).
    join_token: u64,
    join_pending: bool,
    challenge_token: u64,
    challenge_pending: bool,
    response_pending: bool,
    // Sending.
    next_pn: u64,
    loss: LossState,
    rtt: RttEstimator,
    owd: OwdEstimator,
    probe_pending: bool,
    next_send_time: Option<Instant>,
    /// When and how large the last paced packet was (to re-pace when the rate changes).
    last_paced: Option<(Instant, u64)>,
    // TFRC receiver side (when `Config::rate_feedback`).
    tfrc_rx: Option<TfrcReceiver>,
    /// Data arrived since the last RATE_FEEDBACK.
    data_since_feedback: bool,
    feedback_pending: bool,
    next_feedback: Option<Instant>,
    last_feedback_p: f64,
    last_feedback_at: Option<Instant>,
    // Receiving.
    received: RangeSet,
    recv_floor: u64,
    largest_received: Option<(u64, Instant)>,
    unacked_eliciting: u32,
    ack_deadline: Option<Instant>,
    ack_immediate: bool,
    // Counters.
    bytes_sent: u64,
    bytes_received: u64,
    packets_sent: u64,
    packets_lost: u64,
    data_bytes_sent: u64,
    data_bytes_received: u64,
}

impl Path {
    fn new(
        id: PathId,
        local: SocketAddr,
        remote: SocketAddr,
        role: PathRole,
        initial_rtt: Duration,
    ) -> Self {
        Path {
            id,
            local,
            remote,
            role,
            local_status: PathStatus::Active,
            local_status_seq: 0,
            status_pending: false,
            peer_status: PathStatus::Active,
            peer_status_seq: 0,
            validated: false,
            removed: false,
            failed: false,
            join_token: 0,
            join_pending: false,
            challenge_token: 0,
            challenge_pending: false,
            response_pending: false,
            next_pn: 0,
            loss: LossState::default(),
            rtt: RttEstimator::new(initial_rtt),
            owd: OwdEstimator::default(),
            probe_pending: false,
            next_send_time: None,
            last_paced: None,
            tfrc_rx: None,
            data_since_feedback: false,
            feedback_pending: false,
            next_feedback: None,
            last_feedback_p: 0.0,
            last_feedback_at: None,
            received: RangeSet::new(),
            recv_floor: 0,
            largest_received: None,
            unacked_eliciting: 0,
            ack_deadline: None,
            ack_immediate: false,
            bytes_sent: 0,
            bytes_received: 0,
            packets_sent: 0,
            packets_lost: 0,
            data_bytes_sent: 0,
            data_bytes_received: 0,
        }
    }

    fn status(&self) -> PathStatus {
        if self.removed
            || self.local_status == PathStatus::Closed
            || self.peer_status == PathStatus::Closed
        {
            PathStatus::Closed
        } else if self.local_status == PathStatus::Backup || self.peer_status == PathStatus::Backup
        {
            PathStatus::Backup
        } else {
            PathStatus::Active
        }
    }

    /// Ordinary packets may go out on it.
    fn sendable(&self) -> bool {
        self.validated && self.status() != PathStatus::Closed
    }

    fn usable(&self) -> bool {
        self.sendable() && !self.failed
    }

    fn ack_pending(&self) -> bool {
        self.unacked_eliciting > 0
    }

    fn ack_due(&self, now: Instant) -> bool {
        self.ack_pending() && (self.ack_immediate || self.ack_deadline.is_some_and(|d| d <= now))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Client,
    Server,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    Handshaking,
    Established,
    Closed,
}

/// A packet being built: header written, frames appended while they fit.
struct Builder {
    path: PathId,
    header_len: usize,
    pn: u64,
    limit: usize,
    frames: SentFrames,
    ack_eliciting: bool,
    data_bytes: u64,
    retransmitted: u64,
    chunks: Vec<Chunk>,
}

impl Builder {
    fn is_empty(&self, buf: &[u8]) -> bool {
        buf.len() <= self.header_len
    }

    fn fits(&self, buf: &[u8], len: usize) -> bool {
        buf.len() + len <= self.limit
    }

    fn push(&mut self, buf: &mut Vec<u8>, f: &Frame) -> bool {
        let len = f.encoded_len();
        if !self.fits(buf, len) {
            return false;
        }
        f.encode(buf);
        self.ack_eliciting |= f.is_ack_eliciting();
        true
    }
}

/// One end of a multipath Braid connection.
///
/// A pure state machine in the quinn-proto style: it never touches sockets, clocks or
/// global randomness. The driver (the simulator, or the UDP driver) feeds it datagrams and
/// the current time and sends out what it produces.
///
/// # API groups
///
/// - **Construction**: [`Connection::connect`] (client, starts the handshake on path 0),
///   [`Connection::accept`] (server, from the client's first datagram; route by
///   [`super::peek_connection_id`]).
/// - **Getters**: [`Connection::is_established`], [`Connection::is_closed`],
///   [`Connection::send_capacity`], [`Connection::read_rate_bps`],
///   [`Connection::peer_read_rate_bps`], [`Connection::stats`], [`Connection::paths`],
///   [`Connection::connection_id`].
/// - **Inputs** (`handle_*`, with `now`): [`Connection::handle_datagram`],
///   [`Connection::handle_timeout`].
/// - **Application commands**: [`Connection::send_message`], [`Connection::read_message`],
///   [`Connection::add_path`], [`Connection::remove_path`],
///   [`Connection::set_path_status`], [`Connection::close`].
/// - **Outputs** (`poll_*`): [`Connection::poll_transmit`], [`Connection::poll_timeout`],
///   [`Connection::poll_event`].
///
/// # Call order
///
/// After any input or command: call [`Connection::poll_transmit`] until it returns `None`
/// (sending each datagram), drain [`Connection::poll_event`], then read
/// [`Connection::poll_timeout`] and call [`Connection::handle_timeout`] once that instant
/// is reached. `now` must never go backwards. Same inputs (including the seed) give the
/// same outputs.
pub struct Connection {
    config: Arc<Config>,
    side: Side,
    state: State,
    cid: u64,
    rng: ChaCha8Rng,
    now: Instant,
    controller: Box<dyn Controller>,
    scheduler: Box<dyn Scheduler>,
    paths: BTreeMap<PathId, Path>,
    next_path_id: u32,
    send: SendStream,
    recv: Assembler,
    hello_pending: bool,
    hello_acked: bool,
    max_data_pending: bool,
    read_meter: ReadRateMeter,
    read_rate_pending: bool,
    next_read_rate_report: Option<Instant>,
    peer_read_rate: Option<f64>,
    last_activity: Instant,
    last_eliciting_sent: Instant,
    ping_pending: bool,
    close_pending: Vec<PathId>,
    close_frame: Option<(u64, Bytes)>,
    redundant: VecDeque<(PathId, Vec<Chunk>)>,
    events: VecDeque<Event>,
    stats_delivered_bytes: u64,
    stats_delivered_messages: u64,
    stats_gaps: u64,
    stats_retransmitted: u64,
    stats_lost: u64,
    dropped: DropCounters,
    scratch_paths: Vec<PathId>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("side", &self.side)
            .field("state", &self.state)
            .field("cid", &self.cid)
            .field("paths", &self.paths.len())
            .finish_non_exhaustive()
    }
}

impl Connection {
    fn new(config: Arc<Config>, side: Side, now: Instant, seed: u64) -> Connection {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let cid = rng.next_u64();
        let controller = config.controller.build();
        let scheduler = config.scheduler.build();
        let recv = Assembler::new(config.recv_buffer_bytes);
        Connection {
            side,
            state: State::Handshaking,
            cid,
            rng,
            now,
            controller,
            scheduler,
            paths: BTreeMap::new(),
            next_path_id: 0,
            send: SendStream::new(0),
            recv,
            hello_pending: true,
            hello_acked: false,
            max_data_pending: false,
            read_meter: ReadRateMeter::new(),
            read_rate_pending: false,
            next_read_rate_report: None,
            peer_read_rate: None,
            last_activity: now,
            last_eliciting_sent: now,
            ping_pending: false,
            close_pending: Vec::new(),
            close_frame: None,
            redundant: VecDeque::new(),
            events: VecDeque::new(),
            stats_delivered_bytes: 0,
            stats_delivered_messages: 0,
            stats_gaps: 0,
            stats_retransmitted: 0,
            stats_lost: 0,
            dropped: DropCounters::default(),
            scratch_paths: Vec::new(),
            config,
        }
    }

    fn insert_path(&mut self, id: PathId, local: SocketAddr, remote: SocketAddr, role: PathRole) {
        // Closed paths stay for their statistics, but only so many: a peer that keeps
        // joining and closing paths must not grow the map without bound.
        while self.paths.len() >= 4 * self.config.max_paths.max(1) {
            let Some(old) = self.paths.values().find(|p| p.removed).map(|p| p.id) else {
                break;
            };
            self.paths.remove(&old);
        }
        let mut p = Path::new(id, local, remote, role, self.config.initial_rtt);
        if self.config.rate_feedback {
            p.tfrc_rx = Some(TfrcReceiver::new(self.config.max_datagram_size));
        }
        self.controller.on_path_added(self.now, id, self.config.max_datagram_size);
        self.paths.insert(id, p);
    }

    /// Client: starts the handshake on path 0. The connection id comes from `seed`.
    pub fn connect(
        config: Arc<Config>,
        now: Instant,
        seed: u64,
        local: SocketAddr,
        remote: SocketAddr,
        role: PathRole,
    ) -> Connection {
        let mut c = Connection::new(config, Side::Client, now, seed);
        c.insert_path(PathId(0), local, remote, role);
        c.next_path_id = 1;
        if let Some(p) = c.paths.get_mut(&PathId(0)) {
            p.validated = true;
        }
        c
    }

    /// Server: builds a connection from the client's first (handshake) datagram, which is
    /// processed as if passed to [`Connection::handle_datagram`]. Path 0 gets the role the
    /// client announced in its hello (so do later paths, from their PATH_JOIN).
    pub fn accept(
        config: Arc<Config>,
        now: Instant,
        seed: u64,
        local: SocketAddr,
        remote: SocketAddr,
        datagram: &[u8],
    ) -> Result<Connection, AcceptError> {
        let pkt = Packet::decode(datagram)?;
        let hello = pkt.frames.iter().find_map(|f| match f {
            Frame::Handshake { role: HelloRole::Client, connection_id, max_data, path_role } => {
                Some((*connection_id, *max_data, *path_role))
            }
            _ => None,
        });
        let Some((cid, max_data, role)) = hello else {
            return Err(AcceptError::NotHandshake);
        };
        if pkt.header.path != PathId(0) || cid != pkt.header.connection_id {
            return Err(AcceptError::NotHandshake);
        }
        let mut c = Connection::new(config, Side::Server, now, seed);
        c.cid = cid;
        c.insert_path(PathId(0), local, remote, role);
        if let Some(p) = c.paths.get_mut(&PathId(0)) {
            p.validated = true;
        }
        c.send.set_max_data(max_data);
        c.state = State::Established;
        c.events.push_back(Event::Connected);
        c.handle_datagram(now, local, remote, datagram);
        Ok(c)
    }

    // ----- getters -----

    /// The connection id (both directions use it).
    pub fn connection_id(&self) -> u64 {
        self.cid
    }

    /// Whether the handshake completed and the connection is not closed.
    pub fn is_established(&self) -> bool {
        self.state == State::Established
    }

    /// Whether the connection closed (locally, by the peer, or idle).
    pub fn is_closed(&self) -> bool {
        self.state == State::Closed
    }

    /// Bytes the application may queue right now: the peer's receive window minus what is
    /// queued or unacknowledged.
    pub fn send_capacity(&self) -> u64 {
        if self.is_closed() { 0 } else { self.send.capacity() }
    }

    /// The application read rate measured on this side, bits/s: message bytes returned by
    /// [`Connection::read_message`] during the last second (see [`super::rate`]), as of the
    /// last `read_message` or `handle_timeout`.
    pub fn read_rate_bps(&self) -> f64 {
        self.read_meter.rate_bps()
    }

    /// The read rate the peer last reported with READ_RATE, bits/s.
    pub fn peer_read_rate_bps(&self) -> Option<f64> {
        self.peer_read_rate
    }

    /// Ids of the paths that are not closed, in order.
    pub fn paths(&self) -> Vec<PathId> {
        self.paths.values().filter(|p| p.status() != PathStatus::Closed).map(|p| p.id).collect()
    }

    /// Bytes buffered in the receive stream (received, not yet read).
    pub fn recv_buffered(&self) -> u64 {
        self.recv.buffered()
    }

    /// Statistics.
    pub fn stats(&self) -> ConnectionStats {
        ConnectionStats {
            paths: self
                .paths
                .values()
                .map(|p| PathStats {
                    id: p.id,
                    role: p.role,
                    status: p.status(),
                    failed: p.failed,
                    bytes_sent: p.bytes_sent,
                    bytes_received: p.bytes_received,
                    packets_sent: p.packets_sent,
                    packets_lost: p.packets_lost,
                    srtt: p.rtt.smoothed(),
                    min_rtt: p.rtt.min(),
                    cwnd: self.controller.window(p.id),
                    in_flight: p.loss.in_flight(),
                    owd_mean: p.owd.mean(),
                    owd_var_us2: p.owd.var_us2(),
                    data_bytes_sent: p.data_bytes_sent,
                    data_bytes_received: p.data_bytes_received,
                    validated: p.validated,
                })
                .collect(),
            bytes_delivered: self.stats_delivered_bytes,
            messages_delivered: self.stats_delivered_messages,
            messages_abandoned: self.stats_gaps,
            messages_abandoned_sent: self.send.abandoned_count(),
            retransmitted_bytes: self.stats_retransmitted,
            lost_packets: self.stats_lost,
            dropped: self.dropped,
        }
    }

    // ----- application commands -----

    /// Client: opens another path. It joins (PATH_JOIN → PATH_CHALLENGE → PATH_RESPONSE)
    /// once the connection is established; [`Event::PathValidated`] says when it carries data.
    pub fn add_path(
        &mut self,
        now: Instant,
        local: SocketAddr,
        remote: SocketAddr,
        role: PathRole,
    ) -> Result<PathId, PathError> {
        self.now = self.now.max(now);
        if self.is_closed() {
            return Err(PathError::Closed);
        }
        if self.side != Side::Client {
            return Err(PathError::NotClient);
        }
        if self.paths.values().filter(|p| !p.removed).count() >= self.config.max_paths {
            return Err(PathError::TooMany);
        }
        if self.paths.values().any(|p| !p.removed && p.local == local && p.remote == remote) {
            return Err(PathError::Duplicate);
        }
        let id = PathId(self.next_path_id);
        self.next_path_id += 1;
        self.insert_path(id, local, remote, role);
        let token = self.rng.next_u64();
        if let Some(p) = self.paths.get_mut(&id) {
            p.join_token = token;
            p.join_pending = true;
        }
        Ok(id)
    }

    /// Closes a path: announces PATH_STATUS closed to the peer and moves its in-flight data
    /// to the other paths.
    pub fn remove_path(&mut self, now: Instant, path: PathId) {
        self.set_path_status(now, path, PathStatus::Closed);
    }

    /// Sets a path's local status (active / backup / closed) and announces it to the peer
    /// with PATH_STATUS (the MP_PRIO analogue). Backup paths carry data only when no active
    /// path is usable (as the scheduler decides); closed paths carry nothing.
    pub fn set_path_status(&mut self, now: Instant, path: PathId, status: PathStatus) {
        self.now = self.now.max(now);
        let Some(p) = self.paths.get_mut(&path) else {
            return;
        };
        if p.removed || p.local_status == status {
            return;
        }
        p.local_status = status;
        p.local_status_seq += 1;
        p.status_pending = true;
        if status == PathStatus::Closed {
            self.retire_path(path);
        }
    }

    /// The link reported that a datagram this side sent on `path` was not delivered (a
    /// transmit failure, as 802.11's dot11FailedCount or nl80211's tx_failed report it).
    /// What a receiver sends is mostly ACKs, so every path with received packets gets an
    /// immediate ACK queued (weSACK's ACK repeat); its route follows
    /// [`Config::ack_path`].
    pub fn on_transmit_failure(&mut self, now: Instant, path: PathId) {
        self.now = self.now.max(now);
        let _ = path;
        for p in self.paths.values_mut() {
            if !p.removed && p.largest_received.is_some() {
                p.unacked_eliciting = p.unacked_eliciting.max(1);
                p.ack_immediate = true;
            }
        }
    }

    fn retire_path(&mut self, path: PathId) {
        let Some(p) = self.paths.get_mut(&path) else {
            return;
        };
        if p.removed {
            return;
        }
        p.removed = true;
        p.join_pending = false;
        p.challenge_pending = false;
        p.response_pending = false;
        p.probe_pending = false;
        let lost = p.loss.drain();
        self.on_lost(path, lost, None);
        self.controller.on_path_removed(path);
        self.redundant.retain(|(p, _)| *p != path);
    }

    /// Queues one message. Its id is returned (0, 1, 2, …).
    ///
    /// `Err(SendError::Blocked)` when it does not fit the peer's flow-control credit
    /// ([`Connection::send_capacity`]); `Err(SendError::Closed)` after close.
    pub fn send_message(
        &mut self,
        now: Instant,
        data: Bytes,
        reliability: Reliability,
    ) -> Result<u64, SendError> {
        self.now = self.now.max(now);
        if self.is_closed() {
            return Err(SendError::Closed);
        }
        if data.len() as u64 > self.send.capacity() {
            return Err(SendError::Blocked);
        }
        Ok(self.send.push(data, reliability))
    }

    /// The next in-order message or gap, if any. What this returns is what the read-rate
    /// meter measures.
    pub fn read_message(&mut self, now: Instant) -> Option<Delivery> {
        self.now = self.now.max(now);
        self.read_meter.advance(self.now);
        let d = self.recv.poll()?;
        match &d {
            Delivery::Message { data, .. } => {
                self.read_meter.record(self.now, data.len() as u64);
                self.stats_delivered_bytes += data.len() as u64;
                self.stats_delivered_messages += 1;
                if self.next_read_rate_report.is_none() && !self.is_closed() {
                    self.next_read_rate_report = Some(self.now + self.config.read_rate_interval);
                }
            }
            Delivery::Gap { .. } => self.stats_gaps += 1,
        }
        if self.recv.window_update().is_some() {
            self.max_data_pending = true;
        }
        Some(d)
    }

    /// Closes the connection: a CLOSE frame goes out on every validated path, then nothing.
    /// [`Event::Closed`] with [`CloseReason::Local`] follows.
    pub fn close(&mut self, now: Instant, code: u64, reason: &[u8]) {
        self.now = self.now.max(now);
        if self.is_closed() {
            return;
        }
        let reason = Bytes::copy_from_slice(&reason[..reason.len().min(MAX_CLOSE_REASON)]);
        self.close_frame = Some((code, reason));
        self.close_pending = self.paths.values().filter(|p| p.sendable()).map(|p| p.id).collect();
        self.enter_closed(CloseReason::Local);
    }

    fn enter_closed(&mut self, reason: CloseReason) {
        if self.state == State::Closed {
            return;
        }
        self.state = State::Closed;
        self.redundant.clear();
        self.events.push_back(Event::Closed { reason });
    }

    // ----- inputs -----

    /// Processes one received datagram that arrived at `local` from `remote`. Bad input
    /// (garbage, another connection, an unknown or unvalidated address, out-of-window data,
    /// duplicates) is dropped and counted in [`ConnectionStats::dropped`].
    pub fn handle_datagram(
        &mut self,
        now: Instant,
        local: SocketAddr,
        remote: SocketAddr,
        data: &[u8],
    ) {
        self.now = self.now.max(now);
        let now = self.now;
        if self.is_closed() {
            return;
        }
        let pkt = match Packet::decode(data) {
            Ok(p) => p,
            Err(_) => {
                self.dropped.malformed += 1;
                return;
            }
        };
        if pkt.header.connection_id != self.cid {
            self.dropped.unknown_connection += 1;
            return;
        }
        let pid = pkt.header.path;
        let has_join = pkt.frames.iter().any(|f| matches!(f, Frame::PathJoin { .. }));
        // What an unvalidated path may carry to the server.
        let validation_only = pkt.frames.iter().all(|f| {
            matches!(
                f,
                Frame::PathJoin { .. } | Frame::PathResponse { .. } | Frame::Ping | Frame::Ack(_)
            )
        });
        match self.paths.get(&pid) {
            Some(p) => {
                if p.local != local || p.remote != remote || p.removed {
                    self.dropped.unvalidated_address += 1;
                    return;
                }
            }
            None => {
                let join_role = pkt.frames.iter().find_map(|f| match f {
                    Frame::PathJoin { role, .. } => Some(*role),
                    _ => None,
                });
                let live = self.paths.values().filter(|p| !p.removed).count();
                let addr_taken = self
                    .paths
                    .values()
                    .any(|p| !p.removed && p.local == local && p.remote == remote);
                if self.side != Side::Server
                    || !has_join
                    || !validation_only
                    || live >= self.config.max_paths
                    || addr_taken
                {
                    self.dropped.unvalidated_address += 1;
                    return;
                }
                self.insert_path(pid, local, remote, join_role.unwrap_or_default());
            }
        }
        let Some(path) = self.paths.get_mut(&pid) else {
            return;
        };
        if self.side == Side::Server && !path.validated && !validation_only {
            self.dropped.unvalidated_address += 1;
            return;
        }
        let pn = pkt.header.number;
        let eliciting = pkt.frames.iter().any(Frame::is_ack_eliciting);
        let has_data = pkt.frames.iter().any(|f| matches!(f, Frame::Data(_)));
        if pn < path.recv_floor || path.received.contains(pn) {
            self.dropped.duplicate += 1;
            if eliciting {
                path.ack_immediate = true;
                path.unacked_eliciting = path.unacked_eliciting.max(1);
            }
            return;
        }
        path.received.insert(pn..pn + 1);
        while path.received.len() > MAX_ACK_RANGES {
            if let Some(r) = path.received.pop_first() {
                path.recv_floor = r.end;
            }
        }
        if path.largest_received.is_none_or(|(l, _)| pn > l) {
            path.largest_received = Some((pn, now));
        }
        path.bytes_received += data.len() as u64;
        self.last_activity = now;
        Self::on_tfrc_packet(path, now, pn, data.len(), has_data);

        let mut immediate = false;
        for frame in pkt.frames {
            if self.is_closed() {
                break;
            }
            immediate |= matches!(
                frame,
                Frame::Handshake { .. } | Frame::PathJoin { .. } | Frame::PathResponse { .. }
            );
            self.on_frame(now, pid, frame);
        }
        if let Some(path) = self.paths.get_mut(&pid)
            && eliciting
        {
            path.unacked_eliciting += 1;
            if immediate || path.unacked_eliciting >= self.config.ack_eliciting_threshold {
                path.ack_immediate = true;
            } else if path.ack_deadline.is_none() {
                path.ack_deadline = Some(now + self.config.max_ack_delay);
            }
        }
        if self.recv.window_update().is_some() {
            self.max_data_pending = true;
        }
    }

    /// TFRC receiver side (RFC 5348 §6 \[source\]): every packet of the path feeds the
    /// loss history (packet numbers are per path, so any gap is a loss on it); packets with
    /// data schedule a report: the first at once, then one per RTT while data arrives, and
    /// at once when the loss event rate rose (a new loss event, §6.1).
    fn on_tfrc_packet(path: &mut Path, now: Instant, pn: u64, bytes: usize, has_data: bool) {
        let rtt = path.rtt.smoothed();
        let Some(rx) = path.tfrc_rx.as_mut() else {
            return;
        };
        rx.set_rtt(rtt);
        rx.on_packet(now, pn, bytes);
        if !has_data {
            return;
        }
        path.data_since_feedback = true;
        if path.last_feedback_at.is_none() || rx.loss_event_rate() > path.last_feedback_p {
            path.feedback_pending = true;
        } else if path.next_feedback.is_none() && !path.feedback_pending {
            let due = path.last_feedback_at.map_or(now, |t| t + rtt).max(now);
            path.next_feedback = Some(due);
        }
    }

    /// The pacing deadline of `pid` recomputed with the controller's current rate (a rate
    /// that rose after the last packet, e.g. on the first RTT sample or on feedback, must
    /// not leave the path waiting out a gap computed at the old rate).
    fn repace(&mut self, pid: PathId) {
        let rate = self.controller.pacing_rate(pid).filter(|&r| r > 0);
        if let Some(p) = self.paths.get_mut(&pid)
            && let (Some((base, size)), Some(rate)) = (p.last_paced, rate)
        {
            let gap = Duration::from_micros(size.saturating_mul(1_000_000) / rate);
            p.next_send_time = Some(base + gap);
        }
    }

    fn on_frame(&mut self, now: Instant, pid: PathId, frame: Frame) {
        match frame {
            Frame::Ping => {}
            Frame::Ack(ack) => self.on_ack(now, ack),
            Frame::Data(d) => {
                let len = d.data.len() as u64;
                match self.recv.on_data(&d) {
                    Accept::New => {
                        if let Some(p) = self.paths.get_mut(&pid) {
                            p.data_bytes_received += len;
                        }
                    }
                    Accept::Duplicate => {}
                    Accept::OutOfWindow => self.dropped.out_of_window += 1,
                    Accept::Invalid => self.dropped.malformed += 1,
                }
            }
            Frame::Abandon { offset, next_message } => {
                match self.recv.on_abandon(offset, next_message) {
                    Accept::OutOfWindow => self.dropped.out_of_window += 1,
                    Accept::Invalid => self.dropped.malformed += 1,
                    Accept::New | Accept::Duplicate => {}
                }
            }
            Frame::PathStatus { path, seq, status } => {
                if let Some(p) = self.paths.get_mut(&path)
                    && seq > p.peer_status_seq
                    && !p.removed
                {
                    p.peer_status_seq = seq;
                    p.peer_status = status;
                    // Bounded even if the application never polls events.
                    if self.events.len() < MAX_QUEUED_EVENTS {
                        self.events.push_back(Event::PeerPathStatus { path, status });
                    }
                    if status == PathStatus::Closed {
                        self.retire_path(path);
                    }
                }
            }
            Frame::ReadRate { bps } => {
                let bps = bps as f64;
                self.peer_read_rate = Some(bps);
                // Rate control (MARC) and path scheduling (eMTCP offload) steer on it.
                self.controller.on_read_rate(now, bps);
                self.scheduler.on_peer_read_rate(now, bps);
            }
            Frame::RateFeedback(f) => {
                self.controller.on_rate_feedback(now, f.path, &f.to_feedback());
                self.repace(f.path);
            }
            Frame::MaxData { max } => self.send.set_max_data(max),
            Frame::Close { code, reason } => {
                let reason = String::from_utf8_lossy(&reason).into_owned();
                self.enter_closed(CloseReason::Peer { code, reason });
            }
            Frame::Handshake { role, connection_id, max_data, .. } => {
                if self.side == Side::Client
                    && role == HelloRole::Server
                    && connection_id == self.cid
                    && self.state == State::Handshaking
                {
                    self.state = State::Established;
                    self.hello_pending = false;
                    self.send.set_max_data(max_data);
                    self.events.push_back(Event::Connected);
                }
            }
            Frame::PathJoin { token, .. } => {
                if self.side == Side::Server
                    && let Some(p) = self.paths.get_mut(&pid)
                    && !p.validated
                {
                    if p.challenge_token == 0 || p.join_token != token {
                        p.challenge_token = self.rng.next_u64().max(1);
                    }
                    p.join_token = token;
                    p.challenge_pending = true;
                }
            }
            Frame::PathChallenge { echo, token } => {
                if self.side == Side::Client
                    && let Some(p) = self.paths.get_mut(&pid)
                    && !p.validated
                    && echo == p.join_token
                {
                    p.join_pending = false;
                    p.challenge_token = token;
                    p.response_pending = true;
                }
            }
            Frame::PathResponse { token } => {
                if self.side == Side::Server
                    && let Some(p) = self.paths.get_mut(&pid)
                    && !p.validated
                    && p.challenge_token != 0
                    && token == p.challenge_token
                {
                    p.validated = true;
                    p.challenge_pending = false;
                    self.events.push_back(Event::PathValidated(pid));
                }
            }
        }
    }

    fn rtt_sample(p: &Path) -> RttSample {
        RttSample { latest: p.rtt.latest(), smoothed: p.rtt.smoothed(), min: p.rtt.min() }
    }

    fn on_ack(&mut self, now: Instant, ack: AckFrame) {
        let pid = ack.path;
        let max_ack_delay = self.config.max_ack_delay;
        let Some(p) = self.paths.get_mut(&pid) else {
            return;
        };
        if ack.largest() >= p.next_pn {
            self.dropped.malformed += 1;
            return;
        }
        let outcome = p.loss.on_ack(now, &ack);
        if outcome.acked.is_empty() {
            return;
        }
        p.loss.rto_count = 0;
        if p.failed {
            p.failed = false;
            self.events.push_back(Event::PathRecovered(pid));
        }
        if let Some(sample) = outcome.rtt_sample {
            let delay = Duration::from_micros(ack.delay_us).min(max_ack_delay);
            p.rtt.update(sample, delay);
        }
        // One-way delay from the receive timestamps of newly acknowledged packets.
        for &(pn, t) in &ack.timestamps {
            if let Some((_, sp)) = outcome.acked.iter().find(|(a, _)| *a == pn) {
                p.owd.update(t as f64 - sp.time_sent.as_micros() as f64);
            }
        }
        let sample = Self::rtt_sample(p);
        let mut validated_now = false;
        for (_, sp) in &outcome.acked {
            if sp.in_flight {
                self.controller.on_ack(now, pid, sp.time_sent, sp.size, &sample);
            }
            if sp.frames.path_response && !p.validated && self.side == Side::Client && !p.removed {
                p.validated = true;
                p.response_pending = false;
                validated_now = true;
            }
            if sp.frames.handshake {
                self.hello_acked = true;
            }
        }
        if validated_now {
            self.events.push_back(Event::PathValidated(pid));
        }
        for (_, sp) in outcome.acked {
            for (id, r) in sp.frames.data.iter().map(|(id, r)| (*id, r.clone())) {
                self.send.on_acked(id, r);
            }
        }
        self.repace(pid);
        let Some(p) = self.paths.get_mut(&pid) else {
            return;
        };
        let lost = p.loss.detect_lost(now, &p.rtt);
        self.on_lost(pid, lost, Some(false));
    }

    /// Re-queues what lost packets carried. `congestion`: `Some(persistent)` tells the
    /// controller about a loss event, `None` (path removed) does not.
    fn on_lost(&mut self, pid: PathId, lost: Vec<(u64, SentPacket)>, congestion: Option<bool>) {
        if lost.is_empty() {
            return;
        }
        let now = self.now;
        let mut data = Vec::new();
        let mut latest_sent = None;
        for (_, sp) in &lost {
            self.stats_lost += 1;
            latest_sent = latest_sent.max(Some(sp.time_sent));
            data.extend(sp.frames.data.iter().cloned());
            let f = &sp.frames;
            if f.max_data {
                self.max_data_pending = true;
            }
            if f.abandon {
                self.send.on_abandon_lost();
            }
            for ps in &f.path_status {
                if let Some(p) = self.paths.get_mut(ps) {
                    p.status_pending = true;
                }
            }
            if f.handshake
                && ((self.side == Side::Client && self.state == State::Handshaking)
                    || (self.side == Side::Server && !self.hello_acked))
            {
                self.hello_pending = true;
            }
            if let Some(p) = self.paths.get_mut(&pid) {
                if f.path_join && !p.validated && p.challenge_token == 0 && !p.removed {
                    p.join_pending = true;
                }
                if f.path_response && !p.validated && !p.removed {
                    p.response_pending = true;
                }
            }
        }
        if let Some(p) = self.paths.get_mut(&pid) {
            p.packets_lost += lost.len() as u64;
        }
        self.send.on_lost(&data);
        if let (Some(persistent), Some(sent)) = (congestion, latest_sent)
            && let Some(p) = self.paths.get_mut(&pid)
        {
            // One reduction per loss event: losses of packets sent before the last
            // reduction are folded into it (RFC 6582 / RFC 9002 §7.3.2 recovery period).
            let new_event = persistent || p.loss.recovery_start.is_none_or(|r| sent > r);
            if new_event {
                p.loss.recovery_start = Some(now);
                self.controller.on_congestion_event(now, pid, sent, persistent);
            }
        }
    }

    fn rto_deadline(&self, p: &Path) -> Option<Instant> {
        let base = p.rtt.rto(self.config.min_rto);
        let max = if p.failed {
            self.config.failed_probe_interval.max(base)
        } else {
            self.config.max_rto
        };
        p.loss.rto_deadline(base, max)
    }

    /// Fires the timers that are due at `now` (loss, RTO, ACK delay, deadlines, read-rate
    /// report, idle timeout).
    pub fn handle_timeout(&mut self, now: Instant) {
        self.now = self.now.max(now);
        let now = self.now;
        if self.is_closed() {
            return;
        }
        if now >= self.last_activity + self.config.idle_timeout {
            self.enter_closed(CloseReason::IdleTimeout);
            return;
        }
        self.read_meter.advance(now);
        if self.send.expire(now) > 0 {
            self.redundant.clear();
        }
        let ids: Vec<PathId> = self.paths.keys().copied().collect();
        for id in ids {
            let Some(p) = self.paths.get_mut(&id) else {
                continue;
            };
            if p.removed {
                continue;
            }
            if p.ack_deadline.is_some_and(|d| d <= now) {
                p.ack_deadline = None;
                p.ack_immediate = true;
            }
            if p.next_feedback.is_some_and(|d| d <= now) {
                p.next_feedback = None;
                p.feedback_pending |= p.data_since_feedback;
            }
            if p.loss.loss_time().is_some_and(|t| t <= now) {
                let lost = p.loss.detect_lost(now, &p.rtt);
                self.on_lost(id, lost, Some(false));
            }
            let Some(p) = self.paths.get(&id) else {
                continue;
            };
            if self.rto_deadline(p).is_some_and(|t| t <= now) {
                let Some(p) = self.paths.get_mut(&id) else {
                    continue;
                };
                let lost = p.loss.on_rto();
                let rtos = p.loss.rto_count;
                if p.validated {
                    p.probe_pending = true;
                }
                if rtos >= self.config.path_failure_rtos && !p.failed && p.validated {
                    p.failed = true;
                    self.events.push_back(Event::PathFailed(id));
                    self.redundant.retain(|(q, _)| *q != id);
                }
                self.on_lost(id, lost, Some(true));
            }
        }
        if self.keep_alive_deadline().is_some_and(|t| t <= now) {
            self.ping_pending = true;
        }
        if self.next_read_rate_report.is_some_and(|t| t <= now) {
            self.read_rate_pending = true;
            self.next_read_rate_report = if self.read_meter.active() {
                Some(now + self.config.read_rate_interval)
            } else {
                None
            };
        }
    }

    fn keep_alive_deadline(&self) -> Option<Instant> {
        if self.ping_pending || self.state != State::Established {
            return None;
        }
        self.config.keep_alive.map(|k| self.last_eliciting_sent + k)
    }

    /// The next instant [`Connection::handle_timeout`] must be called, if any.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.is_closed() {
            return None;
        }
        let mut t = Some(self.last_activity + self.config.idle_timeout);
        let mut add = |x: Option<Instant>| {
            if let Some(x) = x {
                t = Some(t.map_or(x, |t: Instant| t.min(x)));
            }
        };
        add(self.send.next_deadline());
        add(self.next_read_rate_report);
        add(self.keep_alive_deadline());
        let wants_data = self.send.has_data();
        for p in self.paths.values().filter(|p| !p.removed) {
            if p.ack_pending() && !p.ack_immediate {
                add(p.ack_deadline);
            }
            add(p.loss.loss_time());
            add(self.rto_deadline(p));
            add(p.next_feedback);
            if wants_data {
                add(p.next_send_time.filter(|&n| n > self.now));
            }
        }
        t
    }

    #[cfg(test)]
    pub(crate) fn debug_timers(&self) -> String {
        let mut out = format!(
            "now {:?} idle {:?} deadline {:?} rr {:?} has_data {} ctl {}\n",
            self.now,
            self.last_activity + self.config.idle_timeout,
            self.send.next_deadline(),
            self.next_read_rate_report,
            self.send.has_data(),
            self.has_control()
        );
        for p in self.paths.values() {
            out += &format!(
                "  {} ack_pending {} imm {} ackdl {:?} loss {:?} rto {:?} pace {:?} inflight {} cwnd {} valid {} failed {} removed {}\n",
                p.id,
                p.ack_pending(),
                p.ack_immediate,
                p.ack_deadline,
                p.loss.loss_time(),
                self.rto_deadline(p),
                p.next_send_time,
                p.loss.in_flight(),
                self.controller.window(p.id),
                p.validated,
                p.failed,
                p.removed
            );
        }
        out
    }

    /// The next event, if any.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    // ----- output -----

    fn views(&self, now: Instant) -> Vec<PathView> {
        self.paths
            .values()
            .filter(|p| p.sendable())
            .map(|p| PathView {
                id: p.id,
                role: p.role,
                status: p.status(),
                usable: p.usable(),
                srtt: p.rtt.smoothed(),
                rttvar: p.rtt.var(),
                cwnd: self.controller.window(p.id),
                in_flight: p.loss.in_flight(),
                pacing_rate: self.controller.pacing_rate(p.id),
                next_send_time: p.next_send_time.filter(|&t| t > now),
            })
            .collect()
    }

    fn start(&mut self, pid: PathId, buf: &mut Vec<u8>) -> Option<Builder> {
        let p = self.paths.get_mut(&pid)?;
        let pn = p.next_pn;
        p.next_pn += 1;
        buf.clear();
        Header { connection_id: self.cid, path: pid, number: pn }.encode(buf);
        Some(Builder {
            path: pid,
            header_len: buf.len(),
            pn,
            limit: self.config.max_datagram_size,
            frames: SentFrames::default(),
            ack_eliciting: false,
            data_bytes: 0,
            retransmitted: 0,
            chunks: Vec::new(),
        })
    }

    /// Takes back the packet number of a packet that ended up empty.
    fn unstart(&mut self, b: &Builder) {
        if let Some(p) = self.paths.get_mut(&b.path)
            && p.next_pn == b.pn + 1
        {
            p.next_pn = b.pn;
        }
    }

    fn ack_frame(p: &Path, now: Instant) -> Option<AckFrame> {
        let (largest, at) = p.largest_received?;
        let ranges: Vec<(u64, u64)> =
            p.received.iter_rev().take(MAX_ACK_RANGES).map(|r| (r.start, r.end - 1)).collect();
        if ranges.first().map(|r| r.1) != Some(largest) {
            return None;
        }
        Some(AckFrame {
            path: p.id,
            ranges,
            delay_us: (now - at).as_micros() as u64,
            timestamps: vec![(largest, at.as_micros())],
        })
    }

    /// Adds ACK frames for every path whose ACKs the policy routes to `b.path`
    /// (`only_due`: just the ones that are due).
    fn add_acks(
        &mut self,
        now: Instant,
        b: &mut Builder,
        buf: &mut Vec<u8>,
        only_due: bool,
        views: &[PathView],
    ) {
        let ids: Vec<PathId> = self.paths.keys().copied().collect();
        for id in ids {
            let Some(p) = self.paths.get(&id) else {
                continue;
            };
            if !p.ack_pending() || (only_due && !p.ack_due(now)) {
                continue;
            }
            let route = if p.removed { None } else { self.config.ack_path.ack_path(id, views) };
            if route != Some(b.path) && id != b.path {
                continue;
            }
            let Some(f) = Self::ack_frame(p, now) else {
                continue;
            };
            if b.push(buf, &Frame::Ack(f))
                && let Some(p) = self.paths.get_mut(&id)
            {
                p.unacked_eliciting = 0;
                p.ack_deadline = None;
                p.ack_immediate = false;
            }
        }
    }

    fn add_control(&mut self, b: &mut Builder, buf: &mut Vec<u8>) {
        if self.max_data_pending {
            let f = Frame::MaxData { max: self.recv.advertised().max(self.recv.max_data()) };
            if b.push(buf, &f) {
                self.max_data_pending = false;
                b.frames.max_data = true;
            }
        }
        if let Some((offset, next_message)) = self.send.pending_abandon()
            && b.push(buf, &Frame::Abandon { offset, next_message })
        {
            self.send.abandon_sent(next_message);
            b.frames.abandon = true;
        }
        let ids: Vec<PathId> = self.paths.keys().copied().collect();
        for id in ids {
            let Some(p) = self.paths.get(&id) else {
                continue;
            };
            if !p.status_pending {
                continue;
            }
            let f = Frame::PathStatus { path: id, seq: p.local_status_seq, status: p.local_status };
            if b.push(buf, &f) {
                if let Some(p) = self.paths.get_mut(&id) {
                    p.status_pending = false;
                }
                b.frames.path_status.push(id);
            }
        }
        for id in self.paths.keys().copied().collect::<Vec<_>>() {
            let now = self.now;
            let Some(p) = self.paths.get_mut(&id) else {
                continue;
            };
            if !p.feedback_pending || p.removed {
                continue;
            }
            let Some(rx) = p.tfrc_rx.as_mut() else {
                p.feedback_pending = false;
                continue;
            };
            // Sizes are fixed but for the varints; a report that does not fit waits.
            let probe = RateFeedbackFrame::from_feedback(
                id,
                &crate::cc::tfrc::RateFeedback {
                    x_recv: 1e12,
                    p: 1.0,
                    t_delay: Duration::from_secs(3600),
                },
            );
            if !b.fits(buf, Frame::RateFeedback(probe).encoded_len()) {
                continue;
            }
            let fb = rx.feedback(now);
            let rtt = p.rtt.smoothed();
            b.push(buf, &Frame::RateFeedback(RateFeedbackFrame::from_feedback(id, &fb)));
            p.feedback_pending = false;
            p.data_since_feedback = false;
            p.last_feedback_p = fb.p;
            p.last_feedback_at = Some(now);
            p.next_feedback = Some(now + rtt);
        }
        if self.read_rate_pending {
            let f = Frame::ReadRate { bps: self.read_meter.rate_bps().max(0.0) as u64 };
            if b.push(buf, &f) {
                self.read_rate_pending = false;
                b.frames.read_rate = true;
            }
        }
    }

    fn has_control(&self) -> bool {
        self.max_data_pending
            || self.send.wants_abandon()
            || self.read_rate_pending
            || self.paths.values().any(|p| p.status_pending || p.feedback_pending)
    }

    fn add_data(&mut self, b: &mut Builder, buf: &mut Vec<u8>) {
        if self.state != State::Established {
            return;
        }
        loop {
            let space = b.limit.saturating_sub(buf.len());
            // Upper bound of a DATA frame's overhead: every id and offset is at most the
            // next ones the stream will assign.
            let id_len = varint_len(self.send.next_id_hint());
            let off_len = varint_len(self.send.next_offset_hint());
            let overhead = 1 + id_len + 3 * off_len + varint_len(space as u64);
            if space <= overhead {
                return;
            }
            let Some(chunk) = self.send.next_chunk(space - overhead) else {
                return;
            };
            let f = Frame::Data(DataFrame {
                message_id: chunk.message_id,
                message_start: chunk.message_start,
                message_len: chunk.message_len,
                offset: chunk.offset,
                fin: false,
                data: chunk.data.clone(),
            });
            f.encode(buf);
            b.ack_eliciting = true;
            let n = chunk.data.len() as u64;
            b.data_bytes += n;
            if chunk.retransmission {
                b.retransmitted += n;
            }
            b.frames.data.push((chunk.message_id, chunk.range()));
            b.chunks.push(chunk);
        }
    }

    fn finish(&mut self, now: Instant, b: Builder, buf: &[u8], tracked: bool) -> Option<Transmit> {
        let pacing = self.controller.pacing_rate(b.path);
        let p = self.paths.get_mut(&b.path)?;
        let size = buf.len();
        let in_flight = tracked && b.ack_eliciting;
        if in_flight {
            self.last_eliciting_sent = now;
            let paced = b.data_bytes > 0;
            p.loss.on_sent(
                b.pn,
                SentPacket { time_sent: now, size, in_flight: true, frames: b.frames },
            );
            let after = p.loss.in_flight();
            self.controller.on_sent(now, b.path, size, after);
            // Only packets with data are paced (control and handshake packets bypass it).
            if let Some(rate) = pacing.filter(|&r| r > 0 && paced) {
                let gap = Duration::from_micros((size as u64).saturating_mul(1_000_000) / rate);
                let base = p.next_send_time.map_or(now, |t| t.max(now));
                p.last_paced = Some((base, size as u64));
                p.next_send_time = Some(base + gap);
            }
        }
        p.bytes_sent += size as u64;
        p.packets_sent += 1;
        p.data_bytes_sent += b.data_bytes;
        self.stats_retransmitted += b.retransmitted;
        Some(Transmit { path: b.path, local: p.local, remote: p.remote, len: size })
    }

    /// Writes the next datagram into `buf` (cleared first) and says where it goes; `None`
    /// means nothing to send now. Call repeatedly until `None`.
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<Transmit> {
        self.now = self.now.max(now);
        let now = self.now;
        buf.clear();
        if self.is_closed() {
            return self.poll_close(buf);
        }
        if let Some(t) = self.poll_handshake(now, buf) {
            return Some(t);
        }
        if let Some(t) = self.poll_validation(now, buf) {
            return Some(t);
        }
        let views = self.views(now);
        if let Some(t) = self.poll_probe(now, buf, &views) {
            return Some(t);
        }
        if let Some(t) = self.poll_redundant(now, buf, &views) {
            return Some(t);
        }
        if let Some(t) = self.poll_due_acks(now, buf, &views) {
            return Some(t);
        }
        self.poll_data(now, buf, &views)
    }

    fn poll_close(&mut self, buf: &mut Vec<u8>) -> Option<Transmit> {
        let pid = self.close_pending.pop()?;
        let (code, reason) = self.close_frame.clone()?;
        let mut b = self.start(pid, buf)?;
        b.push(buf, &Frame::Close { code, reason });
        let now = self.now;
        self.finish(now, b, buf, false)
    }

    fn poll_handshake(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<Transmit> {
        if !self.hello_pending {
            return None;
        }
        let role = match self.side {
            Side::Client => HelloRole::Client,
            Side::Server => HelloRole::Server,
        };
        let mut b = self.start(PathId(0), buf)?;
        self.hello_pending = false;
        let path_role = match self.side {
            Side::Client => self.paths.get(&PathId(0)).map_or(PathRole::Wired, |p| p.role),
            Side::Server => PathRole::Wired,
        };
        let f = Frame::Handshake {
            role,
            connection_id: self.cid,
            max_data: self.recv.max_data(),
            path_role,
        };
        b.push(buf, &f);
        b.frames.handshake = true;
        let views = self.views(now);
        self.add_acks(now, &mut b, buf, false, &views);
        self.finish(now, b, buf, true)
    }

    fn poll_validation(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<Transmit> {
        let established = self.state == State::Established;
        let ids: Vec<PathId> = self.paths.keys().copied().collect();
        for id in ids {
            let Some(p) = self.paths.get(&id) else {
                continue;
            };
            if p.removed {
                continue;
            }
            if self.side == Side::Client && established && p.join_pending {
                let (token, role) = (p.join_token, p.role);
                let mut b = self.start(id, buf)?;
                b.push(buf, &Frame::PathJoin { token, role });
                b.frames.path_join = true;
                if let Some(p) = self.paths.get_mut(&id) {
                    p.join_pending = false;
                }
                return self.finish(now, b, buf, true);
            }
            if self.side == Side::Client && p.response_pending {
                let token = p.challenge_token;
                let mut b = self.start(id, buf)?;
                b.push(buf, &Frame::PathResponse { token });
                b.frames.path_response = true;
                if let Some(p) = self.paths.get_mut(&id) {
                    p.response_pending = false;
                }
                return self.finish(now, b, buf, true);
            }
            if self.side == Side::Server && p.challenge_pending {
                // The one kind of packet sent to an unvalidated address: at most one per
                // received PATH_JOIN, untracked (the client re-sends its join).
                let (echo, token) = (p.join_token, p.challenge_token);
                let ack = Self::ack_frame(p, now);
                let mut b = self.start(id, buf)?;
                b.push(buf, &Frame::PathChallenge { echo, token });
                if let Some(a) = ack {
                    b.push(buf, &Frame::Ack(a));
                }
                if let Some(p) = self.paths.get_mut(&id) {
                    p.challenge_pending = false;
                    p.unacked_eliciting = 0;
                    p.ack_deadline = None;
                    p.ack_immediate = false;
                }
                return self.finish(now, b, buf, false);
            }
        }
        None
    }

    fn poll_probe(
        &mut self,
        now: Instant,
        buf: &mut Vec<u8>,
        views: &[PathView],
    ) -> Option<Transmit> {
        let probe = self.paths.values().find(|p| p.probe_pending && p.sendable()).map(|p| p.id);
        let keep_alive = if self.ping_pending {
            views.iter().filter(|v| v.usable).min_by_key(|v| (v.srtt, v.id)).map(|v| v.id)
        } else {
            None
        };
        let id = probe.or(keep_alive)?;
        if probe.is_none() {
            self.ping_pending = false;
        }
        let mut b = self.start(id, buf)?;
        b.push(buf, &Frame::Ping);
        self.add_acks(now, &mut b, buf, false, views);
        if let Some(p) = self.paths.get_mut(&id) {
            p.probe_pending = false;
        }
        self.finish(now, b, buf, true)
    }

    fn poll_redundant(
        &mut self,
        now: Instant,
        buf: &mut Vec<u8>,
        views: &[PathView],
    ) -> Option<Transmit> {
        while let Some((pid, chunks)) = self.redundant.pop_front() {
            if !self.paths.get(&pid).is_some_and(Path::usable) {
                continue;
            }
            let mut b = self.start(pid, buf)?;
            self.add_acks(now, &mut b, buf, false, views);
            for c in chunks {
                if self.send.is_settled(c.message_id, c.range()) {
                    continue;
                }
                let f = Frame::Data(DataFrame {
                    message_id: c.message_id,
                    message_start: c.message_start,
                    message_len: c.message_len,
                    offset: c.offset,
                    fin: false,
                    data: c.data.clone(),
                });
                if b.push(buf, &f) {
                    b.data_bytes += c.data.len() as u64;
                    b.frames.data.push((c.message_id, c.range()));
                }
            }
            if b.is_empty(buf) {
                // Everything was acknowledged meanwhile.
                self.unstart(&b);
                continue;
            }
            return self.finish(now, b, buf, true);
        }
        None
    }

    fn poll_due_acks(
        &mut self,
        now: Instant,
        buf: &mut Vec<u8>,
        views: &[PathView],
    ) -> Option<Transmit> {
        let due: Vec<PathId> =
            self.paths.values().filter(|p| p.ack_due(now)).map(|p| p.id).collect();
        for id in due {
            let route = if self.paths.get(&id).is_some_and(|p| p.removed) {
                None
            } else {
                self.config.ack_path.ack_path(id, views)
            };
            let Some(route) = route.filter(|r| self.paths.get(r).is_some_and(Path::sendable))
            else {
                continue;
            };
            let mut b = self.start(route, buf)?;
            self.add_acks(now, &mut b, buf, true, views);
            // Small control frames ride along; they make the packet ack-eliciting.
            self.add_control(&mut b, buf);
            if b.is_empty(buf) {
                self.unstart(&b);
                buf.clear();
                continue;
            }
            return self.finish(now, b, buf, true);
        }
        None
    }

    fn poll_data(
        &mut self,
        now: Instant,
        buf: &mut Vec<u8>,
        views: &[PathView],
    ) -> Option<Transmit> {
        let control = self.has_control();
        let data = self.state == State::Established && self.send.has_data();
        if !control && !data {
            return None;
        }
        let mut chosen = std::mem::take(&mut self.scratch_paths);
        chosen.clear();
        if data {
            self.scheduler.select(now, views, self.config.max_datagram_size, &mut chosen);
            chosen.retain(|id| views.iter().any(|v| v.id == *id && v.usable));
            chosen.dedup();
        }
        let paced = chosen
            .first()
            .and_then(|id| views.iter().find(|v| v.id == *id))
            .is_some_and(|v| v.next_send_time.is_some());
        let with_data = !chosen.is_empty() && !paced;
        let pid = if with_data {
            chosen.first().copied()
        } else if control {
            // Control frames are small: they go even when no window has room.
            views.iter().filter(|v| v.usable).min_by_key(|v| (v.srtt, v.id)).map(|v| v.id)
        } else {
            None
        };
        let Some(pid) = pid else {
            self.scratch_paths = chosen;
            return None;
        };
        let mut b = self.start(pid, buf)?;
        self.add_acks(now, &mut b, buf, false, views);
        self.add_control(&mut b, buf);
        if with_data {
            self.add_data(&mut b, buf);
            if !b.chunks.is_empty() {
                for &other in chosen.iter().skip(1) {
                    self.redundant.push_back((other, b.chunks.clone()));
                }
            }
        }
        self.scratch_paths = chosen;
        if b.is_empty(buf) {
            // Nothing went in after all (e.g. only abandoned bytes were left).
            self.unstart(&b);
            buf.clear();
            return None;
        }
        self.finish(now, b, buf, true)
    }
}
