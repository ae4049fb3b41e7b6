//! Per-path state ([`Path`]) and the path commands: opening a path
//! ([`Connection::add_path`]), its status and closing ([`Connection::set_path_status`],
//! PATH_STATUS out and in), retiring a closed path, and the paths as the scheduler and the
//! ACK policy see them ([`PathView`]).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use rand::Rng;

use super::counters::PathCounters;
use super::events::{Event, MAX_QUEUED_EVENTS};
use super::packetize::Builder;
use super::rate_feedback::FeedbackRx;
use super::{Connection, Side, State};
use crate::cc::DeliveryRate;
use crate::path::{PathId, PathRole, PathStatus};
use crate::proto::frame::Frame;
use crate::proto::ranges::RangeSet;
use crate::proto::recovery::{LossDetection, LossState, OwdEstimator, RttEstimator};
use crate::sched::PathView;
use crate::time::Instant;

/// Why [`Connection::add_path`] failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    /// Only the client opens paths.
    #[error("only the client opens paths")]
    NotClient,
    /// [`super::Config::max_paths`] reached.
    #[error("too many paths")]
    TooMany,
    /// A live path already uses these addresses.
    #[error("a path with these addresses exists")]
    Duplicate,
    /// The connection is closed.
    #[error("connection closed")]
    Closed,
    /// The peer's maximum path id is reached (RFC 10069); PATHS_BLOCKED tells it so, and
    /// its MAX_PATH_ID, once a path closes, allows another.
    #[error("the peer allows no further path id now (PATHS_BLOCKED sent)")]
    Blocked,
    /// The peer announced no multipath (`initial_max_path_id`).
    #[error("the peer does not speak multipath")]
    Unsupported,
}

/// One path: its addresses and status, and the per-path state of every job (each group
/// names the module that owns it).
#[derive(Debug, Clone)]
pub(super) struct Path {
    pub(super) id: PathId,
    pub(super) local: SocketAddr,
    pub(super) remote: SocketAddr,
    pub(super) role: PathRole,
    pub(super) local_status: PathStatus,
    pub(super) local_status_seq: u64,
    pub(super) status_pending: bool,
    pub(super) peer_status: PathStatus,
    pub(super) peer_status_seq: u64,
    /// This side may send ordinary packets on the path.
    pub(super) validated: bool,
    /// When the path was added; on the server, while unvalidated, when its last PATH_JOIN
    /// arrived (an unvalidated server path expires [`super::Config::path_validation_timeout`]
    /// later).
    pub(super) created_at: Instant,
    pub(super) removed: bool,
    /// A closed path's packets are still taken and acknowledged (on another path) until
    /// then: three of its PTOs after it closed (RFC 10069, path closure), so data the peer
    /// sent before it learned of the closure is not dropped on arrival. Nothing is sent on
    /// the path meanwhile.
    pub(super) linger_until: Option<Instant>,
    /// Marked failed after [`super::Config::path_failure_rtos`] RTOs in a row.
    pub(super) failed: bool,
    /// Its retransmission timer fired with nothing acknowledged since (Linux MPTCP's
    /// "potentially failed" subflow): schedulers, ACKs and control frames avoid it while
    /// another path is healthy, and what it had in flight was handed to the others.
    pub(super) potentially_failed: bool,
    /// Times the path was found potentially failed.
    pub(super) failures: u64,
    /// The probe-timeout anchor for which a tail probe was sent (only a backup path was
    /// live): the next timeout from the same anchor finds the path potentially failed.
    pub(super) tail_probe_for: Option<Instant>,
    /// The first packet number sent after the path was last found potentially failed: an
    /// ACK carried by another path answers for it only from this packet on.
    pub(super) answer_floor: u64,
    // Path validation (`validation`; client: join/response; server: challenge).
    pub(super) join_token: u64,
    pub(super) join_pending: bool,
    pub(super) challenge_token: u64,
    pub(super) challenge_pending: bool,
    pub(super) response_pending: bool,
    /// A QUIC v1 PATH_CHALLENGE from the peer waits for its PATH_RESPONSE on this path
    /// (RFC 9000 §8.2.2; not re-sent when lost, §13.3).
    pub(super) peer_challenge: Option<u64>,
    /// The peer's address changed and the new one is being validated (`validation`).
    pub(super) migration: Option<super::validation::Migration>,
    // Sending (`packetize`, `loss`).
    pub(super) next_pn: u64,
    /// The next packet number this path skips (RFC 9000 §21.4, the defence against
    /// optimistic ACKs): never sent, so an ACK that names it was not earned (`packetize`).
    pub(super) skip_at: u64,
    /// The latest skipped packet numbers, oldest first, at most
    /// [`super::packetize::SKIPPED_KEPT`].
    pub(super) skipped: std::collections::VecDeque<u64>,
    pub(super) loss: LossState,
    pub(super) rtt: RttEstimator,
    pub(super) owd: OwdEstimator,
    pub(super) probe_pending: bool,
    /// A PATH_PROBE for this path waits: this side timed it out and asks the peer to send
    /// on it (`loss`).
    pub(super) probe_request_pending: bool,
    /// Delivery-rate estimation for model-based controllers (`loss`, `packetize`).
    pub(super) delivery: DeliveryRate,
    // Pacing (`pacing`).
    pub(super) next_send_time: Option<Instant>,
    /// When and how large the last paced packet was (to re-pace when the rate changes).
    pub(super) last_paced: Option<(Instant, u64)>,
    /// When the connection last ran out of things to send, data waited for this path's
    /// pacing deadline, so the driver was asked to wake then: a late wake-up is made up
    /// for (`pacing`).
    pub(super) pacing_wake: bool,
    /// TFRC receiver side (`rate_feedback`, when this side reports).
    pub(super) feedback: FeedbackRx,
    /// TFRC sender side: bytes sent by the last two RATE_FEEDBACK arrivals, to bound the
    /// receive rate a report may claim (`rate_feedback`).
    pub(super) sent_marks: super::rate_feedback::SentMarks,
    // Receiving and ACKs (`acks`).
    pub(super) received: RangeSet,
    pub(super) recv_floor: u64,
    pub(super) largest_received: Option<(u64, Instant)>,
    /// Packets received since the last ACK went out, (number, arrival), oldest first, at
    /// most [`super::acks::MAX_RECENT`].
    pub(super) recent_rx: Vec<(u64, Instant)>,
    pub(super) unacked_eliciting: u32,
    pub(super) ack_deadline: Option<Instant>,
    pub(super) ack_immediate: bool,
    /// The path whose packet carried this path's latest ACK (weSACK's ACK repeat
    /// re-arms the ACKs a failed datagram carried, not every path's).
    pub(super) ack_carried_on: Option<PathId>,
    /// What it sent, received and lost (`stats`).
    pub(super) counters: PathCounters,
    /// Path MTU discovery: the datagram size it sends (`mtud`, `packetize`).
    pub(super) mtud: super::mtud::Mtud,
}

impl Path {
    fn new(
        id: PathId,
        local: SocketAddr,
        remote: SocketAddr,
        role: PathRole,
        initial_rtt: Duration,
        loss_detection: LossDetection,
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
            created_at: Instant::ZERO,
            removed: false,
            linger_until: None,
            failed: false,
            potentially_failed: false,
            failures: 0,
            tail_probe_for: None,
            answer_floor: 0,
            join_token: 0,
            join_pending: false,
            migration: None,
            challenge_token: 0,
            challenge_pending: false,
            response_pending: false,
            peer_challenge: None,
            sent_marks: super::rate_feedback::SentMarks::default(),
            next_pn: 0,
            skip_at: u64::MAX,
            skipped: std::collections::VecDeque::new(),
            loss: LossState::new(loss_detection),
            rtt: RttEstimator::new(initial_rtt),
            owd: OwdEstimator::default(),
            probe_pending: false,
            probe_request_pending: false,
            delivery: DeliveryRate::new(Instant::ZERO),
            next_send_time: None,
            last_paced: None,
            pacing_wake: false,
            feedback: FeedbackRx::default(),
            received: RangeSet::new(),
            recv_floor: 0,
            largest_received: None,
            recent_rx: Vec::new(),
            unacked_eliciting: 0,
            ack_deadline: None,
            ack_immediate: false,
            ack_carried_on: None,
            counters: PathCounters::default(),
            mtud: super::mtud::Mtud::new(1200, None),
        }
    }

    /// The effective status: closed if either side closed it, backup if either side
    /// marked it so, else active.
    pub(super) fn status(&self) -> PathStatus {
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

    /// A closed path whose packets are still taken ([`Path::linger_until`]).
    pub(super) fn lingering(&self, now: Instant) -> bool {
        self.removed && self.linger_until.is_some_and(|t| now < t)
    }

    /// Ordinary packets may go out on it.
    pub(super) fn sendable(&self) -> bool {
        self.validated
            && self.status() != PathStatus::Closed
            && self.migration.as_ref().is_none_or(super::validation::Migration::may_send)
    }

    /// Queues a probe on the path unless one is pending or a packet went out on it within
    /// the last smoothed RTT.
    pub(super) fn probe_soon(&mut self, now: Instant) {
        let recent = self
            .loss
            .newest_in_flight_sent()
            .is_some_and(|t| now.saturating_duration_since(t) < self.rtt.smoothed());
        if !recent {
            self.probe_pending = true;
        }
    }

    /// Sendable and not failed: it may carry data.
    pub(super) fn usable(&self) -> bool {
        self.sendable() && !self.failed
    }

    /// Usable and not potentially failed.
    pub(super) fn healthy(&self) -> bool {
        self.usable() && !self.potentially_failed
    }
}

/// How many forgotten paths are remembered one by one; below the oldest one let go, no
/// path id is admitted again.
pub(super) const FORGOTTEN_PATHS: usize = 64;

/// What is kept of the paths whose state left the table (an unvalidated join that expired,
/// a closed path evicted to bound the table). A packet's AEAD nonce is its path id and
/// packet number (RFC 10069 \[source\]), so a path id admitted again must never start its
/// packet numbers over: that would seal two plaintexts under one nonce. Closed ids are
/// never admitted again (RFC 10069: path ids are not reused); an expired join's id may
/// join again (the client keeps re-sending its join) and goes on from its last packet
/// number. Bounded: past [`FORGOTTEN_PATHS`] entries the lowest is let go and every id up
/// to it is refused from then on.
#[derive(Debug, Default)]
pub(super) struct Forgotten {
    /// Id → (next packet number, closed).
    paths: BTreeMap<PathId, (u64, bool)>,
    /// Ids below this one are never admitted again.
    refused_below: u32,
}

impl Forgotten {
    fn record(&mut self, id: PathId, next_pn: u64, closed: bool) {
        self.paths.insert(id, (next_pn, closed));
        while self.paths.len() > FORGOTTEN_PATHS {
            if let Some((old, _)) = self.paths.pop_first() {
                self.refused_below = self.refused_below.max(old.0.saturating_add(1));
            }
        }
    }

    /// Whether `id` may be admitted (again).
    pub(super) fn admits(&self, id: PathId) -> bool {
        id.0 >= self.refused_below && self.paths.get(&id).is_none_or(|&(_, closed)| !closed)
    }

    /// The first packet number of a path admitted as `id` (0 for a new id), taking it out
    /// of the record.
    fn resume(&mut self, id: PathId) -> u64 {
        self.paths.remove(&id).map_or(0, |(next_pn, _)| next_pn)
    }
}

impl Connection {
    /// Removes a path's state from the table, remembering what a later path with its id
    /// must not repeat ([`Forgotten`]); a `closed` path's id is never admitted again.
    pub(super) fn forget_path(&mut self, id: PathId, closed: bool) {
        if let Some(p) = self.paths.remove(&id) {
            self.forgotten.record(id, p.next_pn, closed);
        }
    }

    /// Ids of the paths that are not closed, in order.
    pub fn paths(&self) -> Vec<PathId> {
        self.paths.values().filter(|p| p.status() != PathStatus::Closed).map(|p| p.id).collect()
    }

    /// Adds a path's state and tells the controller about it.
    pub(super) fn insert_path(
        &mut self,
        id: PathId,
        local: SocketAddr,
        remote: SocketAddr,
        role: PathRole,
    ) {
        // Closed paths stay for their statistics, but only so many: a peer that keeps
        // joining and closing paths must not grow the map without bound.
        while self.paths.len() >= 4 * self.config.max_paths.max(1) {
            let Some(old) = self.paths.values().find(|p| p.removed).map(|p| p.id) else {
                break;
            };
            self.forget_path(old, true);
        }
        let mut p =
            Path::new(id, local, remote, role, self.config.initial_rtt, self.config.loss_detection);
        p.created_at = self.now;
        let probe_to = self.config.mtu_discovery_max.filter(|_| self.config.fec.is_none());
        p.mtud = super::mtud::Mtud::new(self.config.max_datagram_size, probe_to);
        p.next_pn = self.forgotten.resume(id);
        p.skip_at = p.next_pn + super::packetize::skip_gap(&mut self.skip_rng);
        if self.sends_rate_feedback() {
            p.feedback.enable(self.config.max_datagram_size);
        }
        self.controller.on_path_added(self.now, id, self.config.max_datagram_size);
        self.paths.insert(id, p);
        self.emit_path(id, crate::trace::PathEvent::New);
        self.issue_cids();
    }

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
        if self.state == State::Established && !self.multipath {
            return Err(PathError::Unsupported);
        }
        if self.remote_max_path_id.is_some_and(|m| self.next_path_id > m) {
            self.paths_blocked_pending = true;
            return Err(PathError::Blocked);
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
        self.emit_path(path, crate::trace::PathEvent::Status(status));
        if status == PathStatus::Closed {
            self.retire_path(path);
        }
    }

    /// A path closed (by either side): it stops sending, its in-flight data is re-queued
    /// for the other paths, the controller forgets it and its redundant copies are dropped.
    pub(super) fn retire_path(&mut self, path: PathId) {
        let Some(p) = self.paths.get_mut(&path) else {
            return;
        };
        if p.removed {
            return;
        }
        // A closed path (not one forgotten unvalidated, whose id may join again) frees its
        // place under the maximum path id: the peer may open one more (RFC 10069).
        let closed = p.local_status == PathStatus::Closed || p.peer_status == PathStatus::Closed;
        p.removed = true;
        // Only a path that carried packets has late ones to take.
        if closed && p.validated {
            p.linger_until = Some(self.now + 3 * p.rtt.pto(self.config.max_ack_delay));
        }
        p.join_pending = false;
        p.challenge_pending = false;
        p.response_pending = false;
        p.peer_challenge = None;
        p.probe_pending = false;
        let lost = p.loss.drain();
        self.on_lost(path, lost, None);
        self.controller.on_path_removed(path);
        self.redundant.drop_path(path);
        self.emit_path(path, crate::trace::PathEvent::Abandoned);
        if closed {
            self.raise_max_path_id();
        }
    }

    /// Accepts one more path id and tells the peer with MAX_PATH_ID.
    fn raise_max_path_id(&mut self) {
        self.local_max_path_id = self.local_max_path_id.saturating_add(1);
        self.max_path_id_pending = true;
        self.issue_cids();
    }

    /// MAX_PATH_ID arrived: the peer accepts path ids up to `max` (one not above what is
    /// known changes nothing, as RFC 10069 says).
    pub(super) fn on_max_path_id(&mut self, max: PathId) {
        if self.remote_max_path_id.is_some_and(|m| max.0 > m) {
            self.remote_max_path_id = Some(max.0);
            if self.next_path_id <= max.0 {
                self.paths_blocked_pending = false;
            }
            self.issue_cids();
        }
    }

    /// A frame names `path` or a maximum path id: above this side's maximum it breaks
    /// RFC 10069, and the connection closes with PROTOCOL_VIOLATION. Whether it may be used.
    pub(super) fn check_peer_path_id(&mut self, path: PathId, frame: &str) -> bool {
        if path.0 <= self.local_max_path_id {
            return true;
        }
        let reason = format!(
            "{frame} names path id {} above the maximum {}",
            path.0, self.local_max_path_id
        );
        self.close_on_error(crate::proto::PROTOCOL_VIOLATION, &reason);
        false
    }

    /// PATHS_BLOCKED arrived: the peer is stopped at `max`. If it is this side's maximum
    /// and fewer than [`super::Config::max_paths`] paths are open here (ids the peer spent
    /// on joins that never arrived, or paths forgotten unvalidated), one more id is allowed.
    pub(super) fn on_paths_blocked(&mut self, max: PathId) {
        if !self.check_peer_path_id(max, "PATHS_BLOCKED") {
            return;
        }
        let open = self.paths.values().filter(|p| !p.removed).count();
        if max.0 == self.local_max_path_id && open < self.config.max_paths {
            self.raise_max_path_id();
        }
    }

    /// Adds MAX_PATH_ID and PATHS_BLOCKED when they wait (re-sent when lost, with the
    /// values then current).
    pub(super) fn add_path_limits(&mut self, b: &mut Builder, buf: &mut Vec<u8>) {
        if self.max_path_id_pending
            && b.push(buf, &Frame::MaxPathId { max: PathId(self.local_max_path_id) })
        {
            self.max_path_id_pending = false;
            b.frames.max_path_id = true;
        }
        if self.paths_blocked_pending
            && let Some(m) = self.remote_max_path_id
            && b.push(buf, &Frame::PathsBlocked { max: PathId(m) })
        {
            self.paths_blocked_pending = false;
            b.frames.paths_blocked = true;
        }
    }

    /// Whether MAX_PATH_ID or PATHS_BLOCKED waits.
    pub(super) fn has_path_limits(&self) -> bool {
        self.max_path_id_pending || self.paths_blocked_pending
    }

    /// A packet with MAX_PATH_ID or PATHS_BLOCKED was lost: each goes again if it still
    /// applies.
    pub(super) fn on_path_limits_lost(&mut self, max_path_id: bool, paths_blocked: bool) {
        self.max_path_id_pending |= max_path_id;
        if paths_blocked && self.remote_max_path_id.is_some_and(|m| self.next_path_id > m) {
            self.paths_blocked_pending = true;
        }
    }

    /// A PATH_STATUS_AVAILABLE or PATH_STATUS_BACKUP arrived: the newest announcement per
    /// path wins (a closed path arrives as PATH_ABANDON, [`Connection::on_path_abandon`]).
    pub(super) fn on_path_status(&mut self, path: PathId, seq: u64, status: PathStatus) {
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
        }
    }

    /// A PATH_ABANDON arrived (RFC 10069, path closure): the path is retired whatever
    /// announcements came before, and this side abandons it in turn unless it already has,
    /// so that both ends stop using its id.
    pub(super) fn on_path_abandon(&mut self, path: PathId) {
        let Some(p) = self.paths.get_mut(&path) else {
            return;
        };
        if p.removed {
            return;
        }
        p.peer_status = PathStatus::Closed;
        // Bounded even if the application never polls events.
        if self.events.len() < MAX_QUEUED_EVENTS {
            self.events.push_back(Event::PeerPathStatus { path, status: PathStatus::Closed });
        }
        // Not removed, so not closed here yet: closing it sends the answering PATH_ABANDON
        // and retires the path.
        self.set_path_status(self.now, path, PathStatus::Closed);
    }

    /// Whether a PATH_PROBE for `p` waits and can travel: another path is healthy (with
    /// none, the path's own probes are all there is).
    pub(super) fn wants_probe_request(&self, p: &Path) -> bool {
        p.probe_request_pending
            && !p.removed
            && self.paths.values().any(|o| o.id != p.id && !o.removed && o.healthy())
    }

    /// Adds the pending PATH_PROBE requests that fit, on packets of other paths (sent
    /// once per timeout of the path: a lost one is replaced by the next timeout's).
    pub(super) fn add_probe_requests(&mut self, b: &mut Builder, buf: &mut Vec<u8>) {
        let ids: smallvec::SmallVec<[PathId; 4]> = self
            .paths
            .values()
            .filter(|p| p.id != b.path && self.wants_probe_request(p))
            .map(|p| p.id)
            .collect();
        for id in ids {
            if !b.push(buf, &Frame::PathProbe { path: id }) {
                return;
            }
            if let Some(p) = self.paths.get_mut(&id) {
                p.probe_request_pending = false;
            }
        }
    }

    /// Adds the pending PATH_STATUS announcements that fit (re-sent when lost).
    pub(super) fn add_path_status(&mut self, b: &mut Builder, buf: &mut Vec<u8>) {
        // Only the paths with an announcement pending (most packets have none).
        let ids: smallvec::SmallVec<[PathId; 8]> =
            self.paths.values().filter(|p| p.status_pending).map(|p| p.id).collect();
        for id in ids {
            let Some(p) = self.paths.get(&id) else {
                continue;
            };
            if !p.status_pending {
                continue;
            }
            let f = match p.local_status {
                PathStatus::Closed => Frame::PathAbandon {
                    path: id,
                    error: crate::proto::frame::APPLICATION_ABANDON_PATH,
                },
                status => Frame::PathStatus { path: id, seq: p.local_status_seq, status },
            };
            if b.push(buf, &f) {
                if let Some(p) = self.paths.get_mut(&id) {
                    p.status_pending = false;
                }
                b.frames.path_status.push(id);
            }
        }
    }

    /// The path's smoothed RTT, or the time its oldest packet in flight has waited once
    /// that is longer than any answer should take (srtt + 4·rttvar + max_ack_delay, the
    /// RFC 9002 probe timeout without its floor): an estimate with no recent samples
    /// cannot look faster than the silence it is in.
    fn silence_aware_srtt(&self, p: &Path, now: Instant) -> Duration {
        let srtt = p.rtt.smoothed();
        let waited = p.loss.unacked_for(now);
        let expected = srtt + 4 * p.rtt.var() + self.config.max_ack_delay;
        if waited > expected { waited } else { srtt }
    }

    /// The sendable paths as the scheduler and the ACK policy see them, into `views`
    /// (cleared first).
    ///
    /// A potentially failed path is not usable while another path is healthy (with none
    /// healthy it stays usable, so that a connection whose every path hiccups keeps
    /// trying). A path that went silent shows the silence as its RTT
    /// ([`Connection::silence_aware_srtt`]) and the excess over its smoothed RTT on top of
    /// its one-way delay, so minRTT-style and delivery-time choices leave it within about
    /// one of its RTTs, before its retransmission timer fires.
    pub(super) fn views_into(&self, now: Instant, views: &mut Vec<PathView>) {
        views.clear();
        let any_healthy = self.paths.values().any(|p| p.healthy());
        views.extend(self.paths.values().filter(|p| p.sendable()).map(|p| {
            let srtt = self.silence_aware_srtt(p, now);
            // The one-way delay grows by the same silence: a scheduler that models paths
            // by their one-way delay (EDPF, S-EDPF) must not keep a silent path looking
            // fast either. The excess is added rather than the silence itself replacing
            // the mean, since the measured mean carries the clocks' offset.
            let silence = srtt.saturating_sub(p.rtt.smoothed());
            PathView {
                id: p.id,
                role: p.role,
                status: p.status(),
                usable: p.usable() && (!p.potentially_failed || !any_healthy),
                srtt,
                rttvar: p.rtt.var(),
                cwnd: self.controller.window(p.id),
                in_flight: p.loss.in_flight(),
                pacing_rate: self.controller.pacing_rate(p.id),
                next_send_time: p.pacing_wait(now),
                owd: p.owd.sampled_mean().map(|d| d + silence),
                owd_var_us2: p.owd.var_us2(),
            }
        }));
    }
}
