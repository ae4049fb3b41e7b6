//! Output: [`Connection::poll_transmit`] writes one datagram per call. It tries, in order:
//! CLOSE (after close, and nothing else), a handshake packet (the only kind before the
//! handshake completed), path validation, an RTO probe or
//! keep-alive PING, a redundant copy, due ACKs, and finally a packet on the path the
//! scheduler picks, filled with the ACKs routed there, control frames, then DATA.
//! A [`Builder`] is one packet being assembled; `finish` seals it with the 1-RTT keys
//! (nonce from the path id and packet number) and records it as sent.

use std::net::SocketAddr;

use super::Connection;
use super::State;
use crate::path::{PathId, PathStatus};
use crate::proto::crypto::{self, Level, TAG_LEN};
use crate::proto::frame::Frame;
use crate::proto::recovery::{SentFrames, SentPacket};
use crate::proto::send::Chunk;
use crate::sched::PathView;
use crate::time::Instant;

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

/// A packet being built: header written, frames appended while they fit.
pub(super) struct Builder {
    pub(super) path: PathId,
    header_len: usize,
    pn_offset: usize,
    pub(super) pn: u64,
    pub(super) limit: usize,
    /// What the packet carries, for loss recovery.
    pub(super) frames: SentFrames,
    pub(super) ack_eliciting: bool,
    pub(super) data_bytes: u64,
    pub(super) retransmitted: u64,
    /// The DATA chunks, for redundant copies.
    pub(super) chunks: smallvec::SmallVec<[Chunk; 2]>,
    /// Multipath is negotiated: ACKs and ids go as RFC 10069's frames, else as v1's
    /// ([`Frame::encode_for`]).
    multipath: bool,
}

impl Builder {
    /// Nothing but the header was written.
    pub(super) fn is_empty(&self, buf: &[u8]) -> bool {
        buf.len() <= self.header_len
    }

    /// `len` more bytes fit in the datagram.
    pub(super) fn fits(&self, buf: &[u8], len: usize) -> bool {
        buf.len() + len <= self.limit
    }

    /// Appends `f` if it fits; says whether it did.
    pub(super) fn push(&mut self, buf: &mut Vec<u8>, f: &Frame) -> bool {
        let len = f.encoded_len();
        if !self.fits(buf, len) {
            return false;
        }
        f.encode_for(buf, self.multipath);
        self.ack_eliciting |= f.is_ack_eliciting();
        true
    }
}

/// Skipped packet numbers remembered per path: an ACK naming one of them closes the
/// connection. A peer acknowledging blindly ahead covers the newest first.
pub(super) const SKIPPED_KEPT: usize = 8;

/// Packets sent between two skipped packet numbers: uniform in [64, 1 088), about one in
/// 576 (0.17 %), each costing the receiver one more ACK range for a while. RFC 9000 §21.4
/// leaves the rate open; a skip an attacker can predict is one it can avoid, so the gap is
/// random (from a generator of its own, so the connection's other draws stay the same).
pub(super) fn skip_gap(rng: &mut rand_chacha::ChaCha8Rng) -> u64 {
    use rand::Rng as _;
    64 + rng.next_u64() % 1024
}

impl Connection {
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
        if self.state != State::Established {
            return None;
        }
        if let Some(t) = self.poll_validation(now, buf) {
            return Some(t);
        }
        let mut views = std::mem::take(&mut self.scratch_views);
        self.views_into(now, &mut views);
        let t = self.poll_established(now, buf, &views);
        self.scratch_views = views;
        if t.is_none() {
            self.note_pacing_wakes(now);
        }
        t
    }

    /// The datagrams of an established connection, given the paths' views.
    fn poll_established(
        &mut self,
        now: Instant,
        buf: &mut Vec<u8>,
        views: &[PathView],
    ) -> Option<Transmit> {
        if let Some(t) = self.poll_probe(now, buf, views) {
            return Some(t);
        }
        if let Some(t) = self.poll_redundant(now, buf, views) {
            return Some(t);
        }
        if let Some(t) = self.poll_reinject(now, buf, views) {
            return Some(t);
        }
        if let Some(t) = self.poll_coded(now, buf, views, false) {
            return Some(t);
        }
        if let Some(t) = self.poll_resend(now, buf, views) {
            return Some(t);
        }
        if let Some(t) = self.poll_due_acks(now, buf, views) {
            return Some(t);
        }
        if let Some(t) = self.poll_mtu_probe(now, buf, views) {
            return Some(t);
        }
        self.poll_data(now, buf, views).or_else(|| self.poll_coded(now, buf, views, true))
    }

    /// Starts a packet on `pid` with the path's next packet number (skipping one now and
    /// then, [`skip_gap`]).
    ///
    /// None on a path other than 0 before the peer issued an id for it: the receiver
    /// learns a packet's path from its id alone, and the handshake's id means path 0.
    pub(super) fn start(&mut self, pid: PathId, buf: &mut Vec<u8>) -> Option<Builder> {
        if pid != PathId(0) && !self.has_peer_cid(pid) {
            return None;
        }
        let p = self.paths.get_mut(&pid)?;
        if p.next_pn == p.skip_at {
            if p.skipped.len() == SKIPPED_KEPT {
                p.skipped.pop_front();
            }
            p.skipped.push_back(p.next_pn);
            p.next_pn += 1;
            p.skip_at = p.next_pn + skip_gap(&mut self.skip_rng);
        }
        let pn = p.next_pn;
        p.next_pn += 1;
        let pn_len = crypto::pn_len(pn, p.loss.largest_acked());
        let datagram = p.mtud.current();
        buf.clear();
        let dcid = self.dcid_for_send(pid);
        let pn_offset = crypto::write_header(buf, Level::OneRtt, dcid.as_slice(), pn_len);
        Some(Builder {
            path: pid,
            header_len: buf.len(),
            pn_offset,
            pn,
            limit: datagram.saturating_sub(TAG_LEN),
            frames: SentFrames::default(),
            ack_eliciting: false,
            data_bytes: 0,
            retransmitted: 0,
            chunks: smallvec::SmallVec::new(),
            multipath: self.multipath,
        })
    }

    /// A path MTU probe, if one is due on a usable, validated path (`mtud`): a PING
    /// padded to the size under test, not tracked in flight (its loss is no congestion
    /// signal, RFC 9000 §14.4).
    fn poll_mtu_probe(
        &mut self,
        now: Instant,
        buf: &mut Vec<u8>,
        views: &[PathView],
    ) -> Option<Transmit> {
        let max_ack_delay = self.config.max_ack_delay;
        let (pid, size) = views.iter().filter(|v| v.usable).find_map(|v| {
            let p = self.paths.get_mut(&v.id)?;
            if !p.validated || p.failed || p.potentially_failed || p.removed {
                return None;
            }
            let pto = p.rtt.pto(max_ack_delay);
            p.mtud.probe_due(now, pto).map(|size| (v.id, size))
        })?;
        let mut b = self.start(pid, buf)?;
        b.push(buf, &Frame::Ping);
        // PADDING up to the probe's size, the tag included.
        buf.resize(size.saturating_sub(TAG_LEN).max(buf.len()), 0);
        let pn = b.pn;
        let t = self.finish(now, b, buf, false)?;
        if let Some(p) = self.paths.get_mut(&pid) {
            p.mtud.on_probe_sent(pn, now);
        }
        Some(t)
    }

    /// Takes back the packet number of a packet that ended up empty.
    pub(super) fn unstart(&mut self, b: &Builder) {
        if let Some(p) = self.paths.get_mut(&b.path)
            && p.next_pn == b.pn + 1
        {
            p.next_pn = b.pn;
        }
    }

    /// Seals the packet and records it as sent: `tracked` ack-eliciting packets count as
    /// in flight (loss detection, the controller, pacing if they carry data); every packet
    /// counts in the statistics.
    pub(super) fn finish(
        &mut self,
        now: Instant,
        b: Builder,
        buf: &mut Vec<u8>,
        tracked: bool,
    ) -> Option<Transmit> {
        let frames = if self.trace.is_some() {
            crate::proto::packet::decode_frames(buf.get(b.header_len..).unwrap_or(&[]))
                .map(|f| f.iter().map(Frame::type_name).collect())
                .unwrap_or_default()
        } else {
            Vec::new()
        };
        let (seal, _) = self.tls.one_rtt()?;
        let phase = self.tls.key_phase();
        crypto::seal(seal, Level::OneRtt, b.path, b.pn, b.pn_offset, buf, phase).ok()?;
        let limits = self.aead_limits();
        if self.tls.on_one_rtt_sealed(
            b.path,
            b.pn,
            self.config.key_update_packets,
            limits.confidentiality,
        ) {
            self.close_on_error(
                crate::proto::AEAD_LIMIT_REACHED,
                "confidentiality limit reached: the peer never took up a key update",
            );
        }
        let pacing = self.controller.pacing_rate(b.path);
        let in_flight = tracked && b.ack_eliciting;
        if in_flight && self.paths.contains_key(&b.path) {
            self.on_eliciting_sent(now);
        }
        let p = self.paths.get_mut(&b.path)?;
        let size = buf.len();
        if in_flight {
            let paced = b.data_bytes > 0;
            let delivery = p.delivery.on_sent(now, p.loss.in_flight());
            p.loss.on_sent(
                b.pn,
                SentPacket { time_sent: now, size, in_flight: true, frames: b.frames, delivery },
            );
            let after = p.loss.in_flight();
            self.controller.on_sent(now, b.path, size, after);
            // Only packets with data are paced (control and handshake packets bypass it).
            if let Some(rate) = pacing.filter(|&r| r > 0 && paced) {
                p.pace(now, size as u64, rate);
            }
        }
        p.counters.on_sent(size as u64, b.data_bytes);
        if let Some(m) = p.migration.as_mut() {
            m.sent += size as u64;
        }
        self.stats_retransmitted += b.retransmitted;
        let t = Transmit { path: b.path, local: p.local, remote: p.remote, len: size };
        self.emit(|_| crate::trace::TraceEvent::PacketSent {
            path: b.path,
            kind: crate::trace::PacketKind::OneRtt,
            pn: b.pn,
            size,
            frames,
        });
        Some(t)
    }

    /// Adds the pending control frames that fit, in this order: HANDSHAKE_DONE, NEW_TOKEN, a
    /// PATH_RESPONSE to the peer's PATH_CHALLENGE on this path, MAX_DATA, MAX_STREAMS and
    /// RESET_STREAM (messages on v1 streams), PATH_NEW_CONNECTION_ID, MAX_PATH_ID, PATHS_BLOCKED, ABANDON,
    /// PATH_STATUS, PATH_PROBE, RATE_FEEDBACK, READ_RATE, PLAYOUT.
    pub(super) fn add_control(&mut self, b: &mut Builder, buf: &mut Vec<u8>) {
        if self.handshake_done_pending && b.push(buf, &Frame::HandshakeDone) {
            self.handshake_done_pending = false;
            b.frames.handshake_done = true;
        }
        if self.new_token_pending
            && let Some(token) = self.new_token.clone()
            && b.push(buf, &Frame::NewToken { token })
        {
            self.new_token_pending = false;
            b.frames.new_token = true;
        }
        if let Some(p) = self.paths.get_mut(&b.path)
            && let Some(token) = p.peer_challenge
            && b.push(buf, &Frame::PathResponse { token })
        {
            p.peer_challenge = None;
        }
        self.add_max_data(b, buf);
        self.add_stream_control(b, buf);
        self.add_new_cids(b, buf);
        if self.multipath {
            self.add_path_limits(b, buf);
        }
        if self.braid_frames {
            self.add_abandon(b, buf);
        }
        if self.multipath {
            self.add_path_status(b, buf);
        }
        if self.braid_frames {
            self.add_probe_requests(b, buf);
            self.add_rate_feedback(b, buf);
            self.add_read_rate(b, buf);
            self.add_playout(b, buf);
        }
    }

    /// Nothing to send: every path whose window has room is application-limited for
    /// delivery-rate estimation (draft-cheng-iccrg-delivery-rate-estimation-02 §3.4).
    fn mark_app_limited(&mut self) {
        for p in self.paths.values_mut() {
            let in_flight = p.loss.in_flight();
            if in_flight < self.controller.window(p.id) {
                p.delivery.mark_app_limited(in_flight);
            }
        }
    }

    /// Whether a control frame waits.
    pub(super) fn has_control(&self) -> bool {
        self.handshake_done_pending
            || self.new_token_pending
            || self.max_data_pending
            || self.has_stream_control()
            || self.paths.values().any(|p| p.peer_challenge.is_some())
            || self.cids.has_pending()
            || (self.multipath
                && (self.has_path_limits() || self.paths.values().any(|p| p.status_pending)))
            || (self.braid_frames
                && (self.send.wants_abandon()
                    || self.read_rate_pending
                    || self.playout_urgent()
                    || self
                        .paths
                        .values()
                        .any(|p| p.feedback.pending() || self.wants_probe_request(p))))
    }

    /// A packet on the path the scheduler picks (data allowed by its window and pacing),
    /// or, for control frames alone, on the lowest-RTT usable path (an active one before
    /// any backup). The scheduler's other
    /// picks get redundant copies of the data.
    fn poll_data(
        &mut self,
        now: Instant,
        buf: &mut Vec<u8>,
        views: &[PathView],
    ) -> Option<Transmit> {
        let control = self.has_control();
        // Messages travel in Braid's DATA frame: only to a peer that reads it.
        let data = self.state == State::Established && self.send.has_data();
        if self.state == State::Established && !data {
            self.mark_app_limited();
        }
        if !control && !data {
            return None;
        }
        let mut chosen = std::mem::take(&mut self.scratch_paths);
        chosen.clear();
        if data {
            self.scheduler.on_send_state(crate::sched::SendState {
                unsent_bytes: self.send.unsent_bytes(),
                window_bytes: self.send.window_bytes(),
            });
            self.scheduler.select(now, views, self.config.max_datagram_size, &mut chosen);
            chosen.retain(|id| views.iter().any(|v| v.id == *id && v.usable));
            chosen.dedup();
            if !chosen.is_empty() {
                self.emit(|c| crate::trace::TraceEvent::Scheduler {
                    scheduler: c.scheduler.name(),
                    chosen: chosen.clone(),
                    expected_s: c.scheduler.estimates().to_vec(),
                });
            }
        }
        let paced = chosen
            .first()
            .and_then(|id| views.iter().find(|v| v.id == *id))
            .is_some_and(|v| v.next_send_time.is_some());
        let with_data = !chosen.is_empty() && !paced;
        let pid = if with_data {
            chosen.first().copied()
        } else if control {
            // Control frames are small: they go even when no window has room. A backup
            // path carries them only when no active path is usable: a backup's radio
            // stays asleep (the reason it is a backup), whatever its last RTT says.
            views
                .iter()
                .filter(|v| v.usable)
                .min_by_key(|v| (v.status == PathStatus::Backup, v.srtt, v.id))
                .map(|v| v.id)
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
            let start = self.fec_reserve(&mut b, buf);
            let ahead = self.scheduler.ahead_bytes();
            self.add_data(&mut b, buf, ahead);
            self.fec_mark_source(&mut b, buf, start);
            if b.data_bytes > 0 {
                self.scheduler.on_sent(now, pid, b.data_bytes);
            }
            if !b.chunks.is_empty() {
                for &other in chosen.iter().skip(1) {
                    self.redundant.push(other, b.chunks.to_vec());
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
