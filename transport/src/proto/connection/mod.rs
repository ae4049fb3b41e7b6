//! The multipath connection state machine (sans-IO).
//!
//! A [`Connection`] is one end of a Braid connection and a pure state machine in the
//! quinn-proto style: it never touches sockets, clocks or global randomness. The driver
//! (the simulator, or the UDP driver) hands it datagrams, the current time and the
//! application's commands, and sends out the datagrams it produces. Same inputs (including
//! the seed) give the same outputs.
//!
//! # Contract
//!
//! **Construction.** [`Connection::connect`] (client: starts the handshake on path 0) and
//! [`Connection::accept`] (server: from the client's first datagram, which a driver
//! recognises with [`super::peek_connection_id`] and routes to no existing connection).
//!
//! **Getters** (no side effects): [`Connection::connection_id`],
//! [`Connection::is_established`], [`Connection::is_closed`],
//! [`Connection::send_capacity`], [`Connection::recv_buffered`],
//! [`Connection::read_rate_bps`], [`Connection::peer_read_rate_bps`],
//! [`Connection::paths`], [`Connection::stats`].
//!
//! **Inputs** (`handle_*`, each taking `now`):
//! - [`Connection::handle_datagram`]: a datagram arrived at `local` from `remote`;
//! - [`Connection::handle_timeout`]: the instant [`Connection::poll_timeout`] returned was
//!   reached;
//! - [`Connection::on_transmit_failure`]: the link reported a sent datagram undelivered.
//!
//! **Application commands** (each taking `now`): [`Connection::send_message`],
//! [`Connection::add_path`], [`Connection::remove_path`],
//! [`Connection::set_path_status`], [`Connection::close`].
//!
//! **Outputs** (`poll_*` and reads):
//! - [`Connection::poll_transmit`]: the next datagram into the caller's buffer, with its
//!   path and addresses; call until `None`;
//! - [`Connection::poll_timeout`]: the instant at which to call
//!   [`Connection::handle_timeout`] (`None` once closed);
//! - [`Connection::poll_event`]: the next [`Event`];
//! - [`Connection::read_message`] (takes `now`): the next in-order message or gap. Reads
//!   are pulled, never pushed: what the application takes is what the read-rate meter
//!   measures and what frees flow-control credit for the peer.
//!
//! **Call order.** After every input or command the driver
//! 1. calls [`Connection::poll_transmit`] until it returns `None`, sending each datagram
//!    from [`Transmit::local`] to [`Transmit::remote`];
//! 2. drains [`Connection::poll_event`] (commands issued on an event are inputs too: start
//!    again at 1);
//! 3. reads [`Connection::poll_timeout`] last (sending moves the loss and pacing timers)
//!    and arms one timer for that instant, replacing the previous one; when it fires,
//!    calls [`Connection::handle_timeout`] and starts again at 1.
//!
//! Reading ([`Connection::read_message`]) may happen at any time; it can queue a MAX_DATA
//! and start the READ_RATE timer, so it counts as a command. `now` must never go
//! backwards (an earlier `now` is treated as the latest one seen).
//!
//! **Callbacks** into the strategies, and when the connection makes them:
//! - [`crate::cc::ControllerFactory::build`], [`crate::sched::SchedulerFactory::build`]:
//!   once, at construction.
//! - [`crate::cc::Controller::on_path_added`]: when a path's state is created (path 0 at
//!   construction, [`Connection::add_path`] on the client, the first PATH_JOIN packet of a
//!   new path on the server).
//! - [`crate::cc::Controller::on_path_removed`]: when a path closes (locally or by the
//!   peer's PATH_STATUS), after its packets in flight were re-queued.
//! - [`crate::cc::Controller::on_sent`]: in [`Connection::poll_transmit`], for every
//!   ack-eliciting packet tracked for loss (not CLOSE, PATH_CHALLENGE or ACK-only packets).
//! - [`crate::cc::Controller::on_ack`]: in [`Connection::handle_datagram`], for each
//!   newly acknowledged in-flight packet of an ACK frame, after the path's RTT update.
//! - [`crate::cc::Controller::on_congestion_event`]: when packets are declared lost (at an
//!   ACK, at the loss timer, or at the RTO with `persistent`), once per loss event; not for
//!   the packets of a path that closes.
//! - [`crate::cc::Controller::on_rate_feedback`]: when a RATE_FEEDBACK frame arrives.
//! - [`crate::cc::Controller::on_read_rate`] and
//!   [`crate::sched::Scheduler::on_peer_read_rate`]: when a READ_RATE frame arrives.
//! - [`crate::cc::Controller::window`] and [`crate::cc::Controller::pacing_rate`]: queried
//!   whenever the connection needs them (path views, pacing, statistics).
//! - [`crate::sched::Scheduler::select`]: in [`Connection::poll_transmit`], when data
//!   waits and nothing earlier in the send order went out.
//! - [`crate::sched::Scheduler::on_sent`]: in [`Connection::poll_transmit`], when the
//!   packet built for the scheduler's first pick carries stream data, with its data bytes.
//! - [`AckPathPolicy::ack_path`]: in [`Connection::poll_transmit`], for each path with a
//!   pending ACK while a packet is being built.
//!
//! Each [`Event`] variant says when it is queued.
//!
//! # Modules
//!
//! Each job has its file; `impl Connection` is split across them.
//!
//! | File | Job |
//! |---|---|
//! | `mod.rs` | the [`Connection`] struct, its construction and state getters, this contract |
//! | `config.rs` | [`Config`], [`AckPathPolicy`], [`SamePathAcks`] |
//! | `events.rs` | [`Event`], [`CloseReason`], [`Connection::poll_event`] |
//! | `handshake.rs` | connect, accept, the hello out and in, [`AcceptError`] |
//! | `close.rs` | close, CLOSE out and in, the idle timeout and keep-alive |
//! | `paths.rs` | per-path state, opening and closing paths, PATH_STATUS, path views, [`PathError`] |
//! | `validation.rs` | path validation: PATH_JOIN, PATH_CHALLENGE, PATH_RESPONSE |
//! | `demux.rs` | [`Connection::handle_datagram`]: input checks and frame dispatch |
//! | `acks.rs` | received packet numbers, when ACKs are due, ACK frames and their route |
//! | `loss.rs` | received ACKs, loss detection, RTO and probes, path failure and recovery |
//! | `rate_feedback.rs` | TFRC receiver statistics and RATE_FEEDBACK out and in |
//! | `pacing.rs` | the next send time of a path at the controller's rate |
//! | `flow.rs` | flow control (MAX_DATA) and the read rate (meter, READ_RATE) |
//! | `messages.rs` | send and read messages, DATA and ABANDON frames, [`SendError`] |
//! | `redundant.rs` | the queue of redundant copies for a scheduler's extra paths |
//! | `reinject.rs` | playout feedback (PLAYOUT) and QoE-driven re-injection |
//! | `fec.rs` | the streaming code: source symbols, CODED packets, recovery, FEC_ACK |
//! | `packetize.rs` | [`Connection::poll_transmit`]: the send order, packet assembly, [`Transmit`] |
//! | `timers.rs` | [`Connection::handle_timeout`] and [`Connection::poll_timeout`] |
//! | `stats.rs` | [`ConnectionStats`], [`PathStats`], [`DropCounters`] |

use crate::proto::wire::LongCid;
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::assembly::Assembler;
use super::rate::ReadRateMeter;
use super::send::SendStream;
use crate::cc::Controller;
use crate::path::PathId;
use crate::sched::Scheduler;
use crate::time::Instant;
use crate::trace::{PathEvent, TraceEvent, TraceSink};

mod acks;
mod arrival;
mod cids;
mod close;
mod config;
mod counters;
mod demux;
mod events;
mod fec;
mod flow;
mod handshake;
mod loss;
mod messages;
mod mtud;
mod pacing;
mod packetize;
mod paths;
mod rate_feedback;
mod redundant;
mod reinject;
mod stats;
mod streams;
mod timers;
mod validation;

pub use cids::{ACTIVE_CID_LIMIT, CIDS_AHEAD, CidEvent, MAX_CIDS, MigrateError};
pub use config::{AckPathPolicy, AeadLimits, Config, SamePathAcks};
pub use events::{CloseReason, Event};
pub use fec::{FecConfig, FecStats};
pub use handshake::AcceptError;
pub use messages::SendError;
pub use packetize::Transmit;
pub use paths::PathError;
pub use reinject::{
    CopyRule, Gate, GateInput, ReinjectConfig, ReinjectStats, buffer_now, gate, may_use,
};
pub use stats::{ConnectionStats, DropCounters, PathStats};

use paths::Path;
use redundant::RedundantQueue;

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

/// One end of a multipath Braid connection.
///
/// A pure state machine: the [module documentation](self) states its contract (which
/// calls are getters, inputs, commands and outputs, and the order a driver makes them in).
pub struct Connection {
    config: Arc<Config>,
    side: Side,
    state: State,
    /// This side's handshake id: the destination id of the long-header packets it
    /// receives, and of path 0's 1-RTT packets until the peer uses the id issued for it.
    cid: u64,
    /// The peer's handshake id, where this side sends long-header packets (and path 0's
    /// 1-RTT packets until the peer issued one for it): for a server the client's source
    /// id; for a client the source id of the server's first Initial or of its Retry (RFC
    /// 9000 §7.2), its own id until then.
    peer_cid: LongCid,
    /// The source id the peer's long headers carry: for a server the client's id, for a
    /// client the source id of the server's first Initial that opened (`None` before);
    /// a long header from another source id is dropped (RFC 9000 §7.2).
    peer_scid: Option<LongCid>,
    /// The destination id the client's Initial packets went to before it learned the
    /// server's (its own id; after a Retry, the Retry's source id): the Initial keys derive
    /// from it (RFC 9001 §5.2), and a server answers to it in long headers.
    initial_dcid: LongCid,
    /// The destination id of the client's very first Initial
    /// (`original_destination_connection_id`, RFC 9000 §7.3): the id qlog groups both
    /// sides' traces under.
    original_dcid: crate::proto::wire::LongCid,
    rng: ChaCha8Rng,
    /// Draws the gaps between skipped packet numbers (`packetize::skip_gap`).
    skip_rng: ChaCha8Rng,
    /// Draws the connection ids this side issues (`cids`).
    cid_rng: ChaCha8Rng,
    /// The connection ids of the paths, both directions.
    cids: cids::Cids,
    /// Derives the reset tokens of the ids this side issues: a server's endpoint key
    /// ([`crate::proto::ServerCrypto::reset`]), else one drawn from the seed.
    reset_key: crate::proto::reset::ResetKey,
    /// The latest `now` any call passed in.
    now: Instant,
    controller: Box<dyn Controller>,
    scheduler: Box<dyn Scheduler>,
    // Paths (`paths`).
    paths: BTreeMap<PathId, Path>,
    next_path_id: u32,
    // Message streams (`messages`, `flow`).
    send: SendStream,
    recv: Assembler,
    /// Toward a peer without Braid's frames messages travel on v1 streams
    /// (`streams`): the front stage of the receive side.
    stream_recv: crate::proto::mapping::StreamRecv,
    /// A MAX_STREAMS waits to be sent.
    max_streams_pending: bool,
    // TLS, handshake and packet keys (`handshake`).
    tls: handshake::Tls,
    // Flow control and read rate (`flow`).
    max_data_pending: bool,
    read_meter: ReadRateMeter,
    read_rate_pending: bool,
    next_read_rate_report: Option<Instant>,
    peer_read_rate: Option<f64>,
    // Idle timeout, keep-alive and close (`close`).
    last_activity: Instant,
    idle_timeout: Duration,
    /// The peer's `ack_delay_exponent` (RFC 9000 §18.2): its ACK Delay fields count
    /// 2^this µs.
    pub(crate) peer_ack_delay_exponent: u8,
    /// The largest path id this side accepts (RFC 10069): its `initial_max_path_id`,
    /// [`Config::max_paths`] − 1, raised by one with MAX_PATH_ID for each path closed.
    pub(crate) local_max_path_id: u32,
    /// The largest path id the peer accepts (its `initial_max_path_id`, then its
    /// MAX_PATH_ID frames); `None` until its transport parameters arrived, 0 if they had
    /// none (no multipath).
    pub(crate) remote_max_path_id: Option<u32>,
    /// Both sides announced `initial_max_path_id` (RFC 10069): 1-RTT packets carry
    /// PATH_ACK and PATH_NEW_CONNECTION_ID; without it, QUIC v1's ACK and
    /// NEW_CONNECTION_ID on path 0 alone. Braid always announces it, so this says what the
    /// peer did.
    pub(crate) multipath: bool,
    /// Both sides announced `braid_frames`: Braid's extension frames may be sent.
    pub(crate) braid_frames: bool,
    /// A HANDSHAKE_DONE waits to be sent (a server, once the handshake completed).
    handshake_done_pending: bool,
    /// Server: the NEW_TOKEN token for this client ([`Connection::set_new_token`]).
    /// Client: the newest token the server sent, until taken
    /// ([`Connection::take_new_token`]).
    new_token: Option<bytes::Bytes>,
    /// Server: the NEW_TOKEN frame waits to be sent (once the handshake completed; again
    /// when lost).
    new_token_pending: bool,
    /// A MAX_PATH_ID waits to be sent.
    max_path_id_pending: bool,
    /// A PATHS_BLOCKED waits to be sent.
    paths_blocked_pending: bool,
    eliciting_sent_since_activity: bool,
    last_eliciting_sent: Instant,
    ping_pending: bool,
    close_pending: Vec<PathId>,
    close_frame: Option<(u64, Bytes)>,
    /// The close is the application's ([`Connection::close`]): CONNECTION_CLOSE of type
    /// 0x1d in 1-RTT packets, APPLICATION_ERROR in handshake packets.
    close_by_application: bool,
    redundant: RedundantQueue,
    /// Playout feedback and QoE-driven re-injection (`reinject`).
    qoe: reinject::QoeState,
    events: VecDeque<Event>,
    // Counters (`stats`).
    stats_delivered_bytes: u64,
    stats_delivered_messages: u64,
    stats_gaps: u64,
    /// First arrivals of messages not read yet, delays of those read (`arrival`).
    arrivals: arrival::ArrivalLog,
    stats_retransmitted: u64,
    stats_lost: u64,
    /// Packets declared lost and then acknowledged, all paths.
    stats_spurious: u64,
    rate_feedback_capped: u64,
    /// Packets that failed authentication, every key together (RFC 9001 §6.6).
    auth_failures: u64,
    /// Path failures whose data is being handed to the other paths (`loss`), one per
    /// failed path at most.
    failover: Vec<loss::Failover>,
    /// The longest hand-over so far.
    failover_max: Option<Duration>,
    dropped: DropCounters,
    unvalidated_expired: u64,
    /// Paths whose state left the table (`paths`): their ids are never given fresh packet
    /// numbers again.
    forgotten: paths::Forgotten,
    /// Peer address changes taken and failed (`validation`).
    migrations: (u64, u64),
    /// Active migrations of this side (`cids::migrate`).
    migrated: u64,
    /// The peer's `disable_active_migration` (RFC 9000 §18.2).
    peer_disables_migration: bool,
    /// The peer's hello asked for RATE_FEEDBACK.
    peer_wants_feedback: bool,
    /// The scheduler's picks, kept to reuse the allocation.
    scratch_paths: Vec<PathId>,
    /// The streaming code, when the configuration enables it (`fec`).
    fec: Option<Box<fec::FecState>>,
    /// A received datagram being opened in place, kept to reuse the allocation.
    scratch_datagram: Vec<u8>,
    /// A received 1-RTT datagram being opened: its frames are views of it while they are
    /// handled, and the reassembly copies what it keeps, so the next datagram reuses the
    /// allocation (see [`bytes::BytesMut::reserve`]).
    rx_datagram: bytes::BytesMut,
    /// Where traced events go ([`Connection::set_trace`]); `None`: tracing off.
    trace: Option<Box<dyn TraceSink>>,
    /// The frames of the datagram being handled (kept for its capacity).
    scratch_frames: Vec<crate::proto::frame::Frame>,
    /// The paths' views of the current `poll_transmit` (kept for its capacity).
    scratch_views: Vec<crate::sched::PathView>,
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

/// Mixed into the connection's seed for the skipped-packet-number generator.
const SKIP_SEED: u64 = 0x736b_6970_5f70_6e73;
/// Mixed into the connection's seed for a client's reset key.
const RESET_SEED: u64 = 0x7273_745f_6b65_7973;

impl Connection {
    /// A connection without paths; [`Connection::connect`] and [`Connection::accept`]
    /// finish it.
    fn new(
        config: Arc<Config>,
        side: Side,
        now: Instant,
        seed: u64,
        tls: impl FnOnce(u64) -> handshake::Tls,
    ) -> Connection {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let cid = rng.next_u64();
        debug_assert_eq!(cid, handshake_cid(seed));
        let controller = config.controller.build();
        let scheduler = config.scheduler.build();
        let recv = Assembler::new(config.recv_buffer_bytes);
        Connection {
            side,
            state: State::Handshaking,
            cid,
            peer_cid: LongCid::from_u64(cid),
            peer_scid: None,
            initial_dcid: LongCid::from_u64(cid),
            original_dcid: crate::proto::wire::LongCid::from_u64(cid),
            rng,
            skip_rng: ChaCha8Rng::seed_from_u64(seed ^ SKIP_SEED),
            cid_rng: ChaCha8Rng::seed_from_u64(seed ^ cids::CID_SEED),
            cids: cids::Cids::default(),
            reset_key: {
                let mut secret = [0u8; 32];
                ChaCha8Rng::seed_from_u64(seed ^ RESET_SEED).fill_bytes(&mut secret);
                crate::proto::reset::ResetKey::new(&secret)
            },
            now,
            controller,
            scheduler,
            paths: BTreeMap::new(),
            next_path_id: 0,
            send: {
                let mut s = SendStream::new(0);
                s.set_send_buffer(config.send_buffer_bytes);
                s
            },
            recv,
            stream_recv: crate::proto::mapping::StreamRecv::new(
                crate::proto::mapping::Mapping::new(config.request_streams),
                side == Side::Server,
                config.recv_buffer_bytes,
            ),
            max_streams_pending: false,
            tls: tls(cid),
            max_data_pending: false,
            read_meter: ReadRateMeter::new(),
            read_rate_pending: false,
            next_read_rate_report: None,
            peer_read_rate: None,
            last_activity: now,
            idle_timeout: config.idle_timeout,
            peer_ack_delay_exponent: crate::proto::crypto::DEFAULT_ACK_DELAY_EXPONENT,
            local_max_path_id: config.initial_max_path_id(),
            remote_max_path_id: None,
            multipath: false,
            braid_frames: false,
            handshake_done_pending: false,
            new_token: None,
            new_token_pending: false,
            max_path_id_pending: false,
            paths_blocked_pending: false,
            eliciting_sent_since_activity: false,
            last_eliciting_sent: now,
            ping_pending: false,
            close_pending: Vec::new(),
            close_frame: None,
            close_by_application: false,
            redundant: RedundantQueue::default(),
            qoe: reinject::QoeState::default(),
            events: VecDeque::new(),
            stats_delivered_bytes: 0,
            stats_delivered_messages: 0,
            stats_gaps: 0,
            arrivals: arrival::ArrivalLog::default(),
            stats_retransmitted: 0,
            stats_lost: 0,
            stats_spurious: 0,
            rate_feedback_capped: 0,
            auth_failures: 0,
            failover: Vec::new(),
            failover_max: None,
            dropped: DropCounters::default(),
            unvalidated_expired: 0,
            forgotten: paths::Forgotten::default(),
            migrations: (0, 0),
            migrated: 0,
            peer_disables_migration: false,
            peer_wants_feedback: false,
            scratch_paths: Vec::new(),
            fec: config.fec.map(|f| Box::new(fec::FecState::new(f, config.max_datagram_size))),
            scratch_datagram: Vec::new(),
            rx_datagram: bytes::BytesMut::new(),
            trace: None,
            scratch_frames: Vec::new(),
            scratch_views: Vec::new(),
            config,
        }
    }

    /// This side's handshake id, the destination id of the packets it receives during the
    /// handshake (each side draws its own; after a Retry the server's is the Retry's source
    /// id); it stays valid for the connection's life. Each path and
    /// direction then uses an id its receiver issued ([`Connection::poll_cid_event`]).
    pub fn connection_id(&self) -> u64 {
        self.cid
    }

    /// The destination id of the client's first Initial (RFC 9000 §7.3's original
    /// destination id): the same on both sides, so it names one connection in both ends'
    /// traces.
    pub fn original_connection_id(&self) -> u64 {
        self.original_dcid.route_key()
    }

    /// Whether the handshake completed and the connection is not closed.
    pub fn is_established(&self) -> bool {
        self.state == State::Established
    }

    /// Whether the connection closed (locally, by the peer, or idle).
    pub fn is_closed(&self) -> bool {
        self.state == State::Closed
    }

    /// Sends this connection's events (packets, metrics, paths, scheduler decisions, FEC)
    /// to `sink` from now on, each with the `now` of the call that caused it; `None` turns
    /// tracing off. Tracing changes nothing the connection does.
    pub fn set_trace(&mut self, sink: Option<Box<dyn TraceSink>>) {
        self.scheduler.set_explain(sink.is_some());
        self.trace = sink;
        // The paths that exist already (path 0 from construction) are new to the trace.
        let ids: Vec<PathId> = self.paths.keys().copied().collect();
        for id in ids {
            self.emit_path(id, PathEvent::New);
        }
    }

    /// Whether a trace sink is set (so callers can skip building events).
    pub fn is_traced(&self) -> bool {
        self.trace.is_some()
    }

    /// Adds an application event (the mode switch, playout) to this connection's trace at
    /// `now`; nothing without a sink.
    pub fn trace_event(&mut self, now: Instant, ev: &TraceEvent) {
        if let Some(t) = self.trace.as_mut() {
            t.event(now.max(self.now), ev);
        }
    }

    /// Emits `ev()` at the latest `now` when tracing (the event is built only then).
    #[inline]
    fn emit(&mut self, ev: impl FnOnce(&Connection) -> TraceEvent) {
        if self.trace.is_some() {
            let ev = ev(self);
            let now = self.now;
            if let Some(t) = self.trace.as_mut() {
                t.event(now, &ev);
            }
        }
    }

    /// Emits a path event for `pid` (its role looked up).
    fn emit_path(&mut self, pid: PathId, event: PathEvent) {
        self.emit(|c| TraceEvent::Path {
            path: pid,
            event,
            role: c.paths.get(&pid).map_or(crate::path::PathRole::Wired, |p| p.role),
        });
    }

    /// Emits the congestion metrics of `pid`.
    fn emit_metrics(&mut self, pid: PathId) {
        self.emit(|c| {
            let p = c.paths.get(&pid);
            TraceEvent::Metrics {
                path: pid,
                cwnd: c.controller.window(pid),
                srtt: p.map_or(Duration::ZERO, |p| p.rtt.smoothed()),
                pacing_rate: c.controller.pacing_rate(pid),
                bytes_in_flight: p.map_or(0, |p| p.loss.in_flight()),
            }
        });
    }
}

/// The connection id a client seeded with `seed` starts its handshake with (the first draw
/// of the connection's generator).
pub(super) fn handshake_cid(seed: u64) -> u64 {
    ChaCha8Rng::seed_from_u64(seed).next_u64()
}
