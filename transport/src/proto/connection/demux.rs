//! Input: [`Connection::handle_datagram`] checks a datagram (its header parses and
//! carries this connection's id; handshake packets go to `handshake`; a 1-RTT packet
//! authenticates under the 1-RTT keys, belongs to a known path at its addresses or is a
//! server-side PATH_JOIN, and is not a duplicate), records its packet number for the
//! ACKs, and hands each frame to the module that owns it (`on_frame`). Nothing of a
//! packet that fails authentication is used.

use std::net::SocketAddr;

use super::Connection;
use super::acks::acks_at_once;
use super::validation::validation_only;
use super::{Side, State};
use crate::path::PathId;
use crate::proto::crypto::{self, Level, PlainHeader};
use crate::proto::frame::Frame;
use crate::proto::packet::decode_frames_shared;
use crate::proto::{FRAME_ENCODING_ERROR, PROTOCOL_VIOLATION};
use crate::time::Instant;

impl Connection {
    /// Processes one received datagram that arrived at `local` from `remote`. Bad input
    /// (garbage, another connection, failed authentication, an unknown or unvalidated
    /// address, out-of-window data, duplicates) is dropped and counted in
    /// [`super::ConnectionStats::dropped`]. A datagram this side could not use that ends
    /// in the peer's stateless reset token closes the connection
    /// ([`super::CloseReason::StatelessReset`]).
    pub fn handle_datagram(
        &mut self,
        now: Instant,
        local: SocketAddr,
        remote: SocketAddr,
        data: &[u8],
    ) {
        let before = self.dropped;
        self.receive(now, local, remote, data);
        if self.trace.is_some() {
            self.trace_drop(before, data);
        }
        // RFC 9000 §10.3.1: only a datagram that could not be processed is checked.
        if self.dropped.unusable() > before.unusable() && self.cids.is_reset(data) {
            self.enter_closed(super::CloseReason::StatelessReset);
        }
    }

    /// Traces why `data` was dropped, if it was (`before`: the counters before it).
    fn trace_drop(&mut self, before: super::DropCounters, data: &[u8]) {
        let after = self.dropped;
        let trigger = [
            (after.malformed, before.malformed, "malformed"),
            (after.unknown_connection, before.unknown_connection, "unknown_connection_id"),
            (after.unvalidated_address, before.unvalidated_address, "unvalidated_address"),
            (after.closed_path, before.closed_path, "path_closed"),
            (after.out_of_window, before.out_of_window, "out_of_window"),
            (after.duplicate, before.duplicate, "duplicate"),
            (after.packet_number, before.packet_number, "packet_number"),
            (after.unauthenticated, before.unauthenticated, "decryption_failure"),
            (after.no_keys, before.no_keys, "key_unavailable"),
        ]
        .into_iter()
        .find(|(a, b, _)| a > b)
        .map(|(_, _, t)| t);
        if let Some(trigger) = trigger {
            let path = PlainHeader::parse(data).ok().map(|h| self.path_of(&h).unwrap_or(h.path));
            self.emit(|_| crate::trace::TraceEvent::PacketDropped {
                path,
                size: data.len(),
                trigger,
            });
        }
    }

    fn receive(&mut self, now: Instant, local: SocketAddr, remote: SocketAddr, data: &[u8]) {
        self.now = self.now.max(now);
        let now = self.now;
        if self.is_closed() {
            return;
        }
        if let Some(retry) = crate::proto::retry::parse(data) {
            self.on_retry(remote, &retry);
            return;
        }
        if self.side == Side::Client
            && let Some(n) = crate::proto::version::offered(data)
        {
            self.on_version_negotiation(remote, &n);
            return;
        }
        // A datagram may hold several packets (RFC 9000 §12.2): a long-header one ends where
        // its Length says, a short-header one runs to the end. Each after the first must
        // carry the first's destination id; one that does not is dropped, and the rest with
        // it.
        let mut rest = data;
        let mut first_cid = None;
        loop {
            let hdr = match PlainHeader::parse(rest) {
                Ok(h) => h,
                Err(_) => {
                    self.dropped.malformed += 1;
                    return;
                }
            };
            if first_cid.is_some_and(|c| c != hdr.connection_id) {
                self.dropped.unknown_connection += 1;
                return;
            }
            first_cid = Some(hdr.connection_id);
            let (packet, next) = rest.split_at(hdr.end);
            self.receive_packet(now, local, remote, hdr, packet);
            rest = next;
            if rest.is_empty() || self.is_closed() {
                return;
            }
        }
    }

    /// One packet of a datagram (`data`: its bytes only), its header read.
    fn receive_packet(
        &mut self,
        now: Instant,
        local: SocketAddr,
        remote: SocketAddr,
        hdr: PlainHeader,
        data: &[u8],
    ) {
        let Some(path) = self.path_of(&hdr) else {
            self.dropped.unknown_connection += 1;
            return;
        };
        let hdr = hdr.on_path(path);
        if hdr.level != Level::OneRtt {
            // A long header names its sender's id: the peer's handshake id, once this side
            // knows it (RFC 9000 §7.2: a client discards a packet from the server with
            // another source id than its first Initial's).
            if self.peer_scid.is_some() && hdr.source_id != self.peer_scid {
                self.dropped.unknown_connection += 1;
                return;
            }
            let mut scratch = std::mem::take(&mut self.scratch_datagram);
            scratch.clear();
            scratch.extend_from_slice(data);
            match self.paths.get(&PathId(0)) {
                Some(p) if p.local == local && p.remote == remote => {
                    self.on_handshake_packet(now, &hdr, &mut scratch)
                }
                _ => self.dropped.unvalidated_address += 1,
            }
            self.scratch_datagram = scratch;
            return;
        }
        let mut frames = std::mem::take(&mut self.scratch_frames);
        let pn = self.open_one_rtt(&hdr, data, &mut frames);
        let Some(pn) = pn else {
            return;
        };
        let pid = hdr.path;
        let validation_only = validation_only(&frames);
        // Server: a validated path's packet from another peer address may be a NAT
        // rebinding or a migration (RFC 9000 §9); anything else from elsewhere is dropped.
        let mut moved = false;
        match self.paths.get(&pid) {
            Some(p) => {
                // A closed path's packets are taken for a while, from its own addresses
                // only (RFC 10069: the peer may have sent them before the PATH_ABANDON).
                let may_move = self.side == Side::Server && p.validated && !p.removed;
                if p.removed && !p.lingering(now) {
                    self.dropped.closed_path += 1;
                    return;
                }
                if p.local != local || (p.remote != remote && !may_move) {
                    self.dropped.unvalidated_address += 1;
                    return;
                }
                moved = p.remote != remote;
            }
            None => {
                if !self.admit_join(pid, local, remote, &frames, validation_only) {
                    self.dropped.unvalidated_address += 1;
                    return;
                }
            }
        }
        let Some(path) = self.paths.get_mut(&pid) else {
            return;
        };
        if self.side == Side::Server && !path.validated && !validation_only {
            self.dropped.unvalidated_address += 1;
            return;
        }
        let eliciting = frames.iter().any(Frame::is_ack_eliciting);
        let has_data = frames.iter().any(|f| matches!(f, Frame::Data(_)));
        if path.outside_pn_window(pn) {
            self.dropped.packet_number += 1;
            return;
        }
        if path.is_duplicate(pn) {
            self.dropped.duplicate += 1;
            if eliciting {
                // The peer may have missed the ACK: answer at once.
                path.ack_now();
            }
            return;
        }
        // Only the highest-numbered packet so far, with a frame that is not a probe, moves
        // the path (RFC 9000 §9.3); an older one from the old address is just reordered.
        let newest = path.largest_received.is_none_or(|(l, _)| pn > l);
        let probing = frames
            .iter()
            .all(|f| matches!(f, Frame::PathChallenge { .. } | Frame::PathResponse { .. }));
        let migrate = moved && newest && !probing;
        if !moved && let Some(m) = path.migration.as_mut() {
            m.received += data.len() as u64;
        }
        path.record_received(pn, now);
        path.counters.on_received(data.len() as u64);
        self.emit(|_| crate::trace::TraceEvent::PacketReceived {
            path: pid,
            kind: crate::trace::PacketKind::OneRtt,
            pn,
            size: data.len(),
            frames: frames.iter().map(Frame::type_name).collect(),
        });
        if migrate {
            self.on_peer_address_change(pid, remote, data.len() as u64);
        }
        if !self.paths.contains_key(&pid) {
            return;
        }
        self.on_activity_received(now);
        let Some(path) = self.paths.get_mut(&pid) else {
            return;
        };
        let rtt = path.rtt.smoothed();
        path.feedback.on_packet(now, rtt, pn, data.len(), has_data);

        let fec_source = self.fec_source_symbol(&frames);
        let mut immediate = false;
        for frame in frames.drain(..) {
            if self.is_closed() {
                break;
            }
            immediate |= acks_at_once(&frame);
            self.on_frame(now, pid, frame);
        }
        frames.clear();
        self.scratch_frames = frames;
        if let Some(path) = self.paths.get_mut(&pid) {
            if eliciting {
                path.on_eliciting_received(now, immediate, &self.config);
            }
            // A packet from the peer on a path still failed or potentially failed after its
            // frames (no ACK in it revived the path): the link may be back, so probe it now
            // rather than at the next backed-off RTO, at most one probe in flight per
            // smoothed RTT. (Before `path_failure_rtos` timeouts the backed-off RTO is not
            // capped by the failed-probe interval: after two, 2.7 s in a real-time run.)
            // The peer reached this side on a path this side had timed out: an outage of
            // the paths together (a tunnel, a handover) may be over for the others as
            // well, so they are probed now too, under the same limit, rather than at their
            // backed-off RTOs (the peer may not send on them: it times them out as well).
            if path.failed || path.potentially_failed {
                for p in self.paths.values_mut() {
                    if !p.removed && (p.failed || p.potentially_failed) {
                        p.probe_soon(now);
                    }
                }
            }
        }
        self.fec_after_datagram(pid, fec_source);
        self.check_window_update();
    }

    /// The path a packet with this header belongs to, from its destination id (RFC 10069
    /// §2): this side's handshake id is path 0 (long headers always, and 1-RTT packets before
    /// the peer used the id this side issued for path 0); any other is the path this side
    /// issued it for. `None` for an id this side does not answer to.
    pub(super) fn path_of(&self, hdr: &PlainHeader) -> Option<PathId> {
        // A server also answers to the id the client's Initial packets went to, in long
        // headers: the client sends there until the server's first Initial reaches it.
        let initial = self.side == Side::Server
            && hdr.level != Level::OneRtt
            && hdr.dcid == self.initial_dcid;
        if hdr.connection_id == self.cid || initial {
            return Some(PathId(0));
        }
        match hdr.level {
            Level::OneRtt => self.cids.path_of(hdr.connection_id),
            _ => None,
        }
    }

    /// Whether `frame` may arrive on this connection, or the error it closes with: once
    /// established, an RFC 10069 frame (or a path id other than 0) without multipath is a
    /// PROTOCOL_VIOLATION, and one of Braid's extension frames when this side did not
    /// announce them is a frame of unknown type (RFC 9000 §19.21: FRAME_ENCODING_ERROR);
    /// HANDSHAKE_DONE at a server is a PROTOCOL_VIOLATION (§19.20), and a frame about a
    /// stream, none being open, is a stream error (§4.6, §19.4–§19.13).
    fn frame_refused(&self, frame: &Frame) -> Option<(u64, &'static str)> {
        if self.state == State::Established {
            if !self.multipath && frame.needs_multipath() {
                return Some((PROTOCOL_VIOLATION, "a multipath frame, multipath not negotiated"));
            }
            if !self.config.braid_frames && frame.is_braid_extension() {
                return Some((FRAME_ENCODING_ERROR, "an extension frame not negotiated"));
            }
        }
        match frame {
            Frame::HandshakeDone if self.side == Side::Server => {
                Some((PROTOCOL_VIOLATION, "HANDSHAKE_DONE sent by a client"))
            }
            // §19.7: a server MUST treat a NEW_TOKEN as a PROTOCOL_VIOLATION.
            Frame::NewToken { .. } if self.side == Side::Server => {
                Some((PROTOCOL_VIOLATION, "NEW_TOKEN sent by a client"))
            }
            // Messages travel one way per connection: in DATA frames when both sides speak
            // Braid's frames, on v1 streams otherwise.
            Frame::Stream(_)
            | Frame::ResetStream { .. }
            | Frame::StopSending { .. }
            | Frame::StreamFrame { .. }
                if self.braid_frames =>
            {
                Some((PROTOCOL_VIOLATION, "a stream frame, Braid's message frames negotiated"))
            }
            _ => None,
        }
    }

    /// Hands one frame of a packet received on `pid` to the module that owns it.
    fn on_frame(&mut self, now: Instant, pid: PathId, frame: Frame) {
        if let Some((code, why)) = self.frame_refused(&frame) {
            self.close_on_error(code, why);
            return;
        }
        match frame {
            Frame::HandshakeDone => self.confirm_at_client(),
            Frame::Crypto { offset, data } => self.on_one_rtt_crypto(now, offset, &data),
            Frame::NewToken { token } => self.on_new_token(token),
            Frame::StreamLimit { kind, value } => self.on_stream_limit(kind, value),
            Frame::StreamFrame { kind, id, value } => self.on_stream_flow_frame(kind, id, value),
            Frame::Stream(f) => self.on_stream_frame(pid, &f),
            Frame::ResetStream { id, final_size, .. } => self.on_reset_stream(pid, id, final_size),
            Frame::StopSending { id, .. } => self.on_stop_sending(id),
            Frame::RetireCid { path, seq } => self.on_retire_cid(path, seq),
            Frame::PeerChallenge { token } => self.on_peer_challenge(pid, token),
            Frame::Ping => {}
            Frame::Ack(ack) => self.on_ack(now, ack, pid),
            Frame::Data(d) => self.on_data_frame(pid, &d),
            Frame::Abandon { offset, next_message } => self.on_abandon_frame(offset, next_message),
            Frame::PathStatus { path, seq, status } => self.on_path_status(path, seq, status),
            Frame::PathAbandon { path, .. } => self.on_path_abandon(path),
            Frame::MaxPathId { max } => self.on_max_path_id(max),
            Frame::PathsBlocked { max } => self.on_paths_blocked(max),
            Frame::PathCidsBlocked { path, .. } => {
                // Braid issues one id per path up front: nothing more to give.
                self.check_peer_path_id(path, "PATH_CIDS_BLOCKED");
            }
            Frame::PathNewCid { path, seq, retire_prior_to, cid, reset_token } => {
                self.on_path_new_cid(path, seq, retire_prior_to, cid, reset_token)
            }
            Frame::PathProbe { path } => {
                // The peer timed `path` out: a PING on it (its ACK, or, after a NAT
                // rebinding, its new source address) tells the peer the path still works.
                if let Some(p) = self.paths.get_mut(&path)
                    && p.validated
                    && !p.removed
                {
                    p.probe_soon(now);
                }
            }
            Frame::ReadRate { bps } => self.on_read_rate(now, bps),
            Frame::Playout(f) => self.on_playout(now, f),
            Frame::RateFeedback(f) => self.on_rate_feedback(now, &f),
            Frame::MaxData { max } => self.on_max_data(max),
            Frame::Close { code, reason, .. } => self.on_close_frame(code, &reason),
            Frame::PathJoin { token, .. } => self.on_path_join(pid, token),
            Frame::PathChallenge { echo, token } => self.on_path_challenge(pid, echo, token),
            Frame::PathResponse { token } => self.on_path_response(pid, token),
            Frame::Coded(r) => self.on_coded(&r),
            Frame::FecSource { .. } => {}
            Frame::FecAck { ranges } => self.on_fec_ack(&ranges),
        }
    }

    /// Authenticates and decrypts a 1-RTT packet (its packet number expanded against the
    /// path's largest) and decodes its frames; a failure is counted and yields nothing.
    ///
    /// The datagram is opened in a buffer its DATA frames then share (no second copy of
    /// their bytes; see [`Frame::decode_shared`]) and the connection reuses.
    fn open_one_rtt(
        &mut self,
        hdr: &PlainHeader,
        data: &[u8],
        frames: &mut Vec<Frame>,
    ) -> Option<u64> {
        let Some((_, open)) = self.tls.one_rtt().filter(|_| self.is_established()) else {
            self.dropped.no_keys += 1;
            return None;
        };
        let largest = self.paths.get(&hdr.path).and_then(|p| p.largest_received).map(|(l, _)| l);
        // No allocation per datagram: the buffer comes back unshared once the previous
        // datagram's frames are dropped (nothing keeps a view of it), and the extend's
        // `reserve` then reuses it.
        self.rx_datagram.extend_from_slice(data);
        let mut datagram = self.rx_datagram.split();
        let Ok((pn, phase)) = crypto::unprotect(open.header.as_ref(), hdr, largest, &mut datagram)
        else {
            self.dropped.unauthenticated += 1;
            return None;
        };
        let Some(range) = self.tls.open_one_rtt(hdr, pn, phase, &mut datagram) else {
            self.on_auth_failure();
            return None;
        };
        if crypto::reserved_bits_set(hdr, &datagram) {
            self.close_on_error(crate::proto::PROTOCOL_VIOLATION, "reserved header bits set");
            return None;
        }
        let payload = datagram.freeze().slice(range);
        if payload.is_empty() {
            // RFC 9000 §12.4: a packet containing no frames is a PROTOCOL_VIOLATION (one of
            // PADDING frames alone is a packet, which decodes to no other frame).
            self.dropped.malformed += 1;
            self.close_on_error(crate::proto::PROTOCOL_VIOLATION, "a packet without frames");
            return None;
        }
        match decode_frames_shared(&payload, frames) {
            Ok(()) => Some(pn),
            Err(e) => {
                // The packet authenticated, so the peer wrote it: a frame of unknown type
                // or a malformed one is a connection error (RFC 9000 §12.4, §19.21).
                self.dropped.malformed += 1;
                frames.clear();
                self.close_on_error(FRAME_ENCODING_ERROR, &format!("undecodable frame: {e}"));
                None
            }
        }
    }
}

#[cfg(any(test, feature = "hostile"))]
impl Connection {
    /// Takes `path`'s next packet number for a packet a test forges in this side's name,
    /// so that this side never sends another packet with it and the peer's ACK of it
    /// acknowledges a packet "sent".
    pub(crate) fn take_packet_number(&mut self, path: PathId) -> u64 {
        self.paths.get_mut(&path).map_or(0, |p| {
            p.next_pn += 1;
            p.next_pn - 1
        })
    }

    /// A 1-RTT packet with `frames` as this side would seal it (tests forge the peer's
    /// input with it). Empty before the handshake completed.
    #[cfg(test)]
    pub(crate) fn seal_frames(&self, cid: u64, path: PathId, pn: u64, frames: &[Frame]) -> Vec<u8> {
        self.seal_frames_with(cid, path, pn, frames, 0)
    }

    /// As [`Connection::seal_frames`], with `bits` or-ed into the first byte before
    /// protection (a test sets reserved bits with it).
    #[cfg(test)]
    pub(crate) fn seal_frames_with(
        &self,
        cid: u64,
        path: PathId,
        pn: u64,
        frames: &[Frame],
        bits: u8,
    ) -> Vec<u8> {
        let mut payload = Vec::new();
        crate::proto::packet::encode_frames(frames, &mut payload);
        self.seal_payload_with(cid, path, pn, &payload, bits)
    }

    /// As [`Connection::seal_frames_with`], with the plaintext payload as it is (tests
    /// seal PADDING alone, or nothing, with it).
    #[cfg(test)]
    pub(crate) fn seal_payload_with(
        &self,
        cid: u64,
        path: PathId,
        pn: u64,
        payload: &[u8],
        bits: u8,
    ) -> Vec<u8> {
        self.seal_to(&cid.to_be_bytes(), path, pn, payload, bits)
    }

    /// [`Connection::seal_payload_with`] to a destination id of any length.
    fn seal_to(&self, dcid: &[u8], path: PathId, pn: u64, payload: &[u8], bits: u8) -> Vec<u8> {
        let mut buf = Vec::new();
        let Some((seal, _)) = self.tls.one_rtt() else { return buf };
        let at = crypto::write_header(&mut buf, Level::OneRtt, dcid, 4);
        buf[0] |= bits;
        buf.extend_from_slice(payload);
        crypto::seal(seal, Level::OneRtt, path, pn, at, &mut buf, self.tls.key_phase())
            .expect("sealing works");
        buf
    }
}

#[cfg(feature = "hostile")]
impl Connection {
    /// For attack tests only (cargo feature `hostile`, never in the product): a 1-RTT
    /// packet on `path` carrying `frames` as they are, in this side's name, with the id
    /// the peer issued for the path and a packet number this side then never uses. `None`
    /// before the handshake completed or for a path this side does not have.
    pub fn forge_packet(&mut self, path: PathId, frames: &[Frame]) -> Option<Vec<u8>> {
        if !self.paths.contains_key(&path) {
            return None;
        }
        let pn = self.take_packet_number(path);
        let cid = self.dcid_for_send(path);
        let mut payload = Vec::new();
        crate::proto::packet::encode_frames(frames, &mut payload);
        let pkt = self.seal_to(cid.as_slice(), path, pn, &payload, 0);
        (!pkt.is_empty()).then_some(pkt)
    }
}

#[cfg(test)]
impl Connection {
    /// The packet numbers `path` skipped lately and the next it will use.
    pub(crate) fn skipped_packet_numbers(&self, path: PathId) -> (Vec<u64>, u64) {
        self.paths
            .get(&path)
            .map(|p| (p.skipped.iter().copied().collect(), p.next_pn))
            .unwrap_or_default()
    }

    /// Whether a control frame waits to be sent.
    #[cfg(test)]
    pub(crate) fn control_pending(&self) -> bool {
        self.has_control()
    }

    /// Whether packets received on `path` wait for an ACK.
    #[cfg(test)]
    pub(crate) fn ack_pending_on(&self, path: PathId) -> bool {
        self.paths.get(&path).is_some_and(|p| p.ack_pending())
    }

    /// The id this side issued for `path`, if it did.
    pub(crate) fn issued_cid(&self, path: PathId) -> Option<u64> {
        self.cids.issued_cid(path)
    }

    /// Every id this side issued for `path` and has not seen retired.
    #[cfg(test)]
    pub(crate) fn issued_cids(&self, path: PathId) -> Vec<u64> {
        self.cids.issued_cids(path)
    }

    /// The path an id this side issued routes to.
    #[cfg(test)]
    pub(crate) fn routes(&self, cid: u64) -> Option<PathId> {
        self.cids.path_of(cid)
    }

    /// The id packets on `path` carry now (the peer's).
    #[cfg(test)]
    pub(crate) fn sending_cid(&self, path: PathId) -> Option<u64> {
        self.cids.peer_cid(path).map(|c| c.route_key())
    }

    /// The path, packet number and key phase of a 1-RTT datagram the peer sealed: what
    /// its AEAD nonce and key were made of.
    #[cfg(test)]
    pub(crate) fn open_nonce(&self, datagram: &[u8]) -> Option<(PathId, u64, bool)> {
        let (_, open) = self.tls.one_rtt()?;
        let hdr = PlainHeader::parse(datagram).ok()?;
        let hdr = hdr.on_path(self.path_of(&hdr)?);
        let mut d = datagram.to_vec();
        let largest = self.paths.get(&hdr.path).and_then(|p| p.largest_received).map(|(l, _)| l);
        let (pn, phase) = crypto::unprotect(open.header.as_ref(), &hdr, largest, &mut d).ok()?;
        Some((hdr.path, pn, phase))
    }

    /// The length of a peer-sealed 1-RTT datagram's packet number field (1–4 bytes).
    pub(crate) fn open_pn_len(&self, datagram: &[u8]) -> Option<usize> {
        let (_, open) = self.tls.one_rtt()?;
        let hdr = PlainHeader::parse(datagram).ok()?;
        let hdr = hdr.on_path(self.path_of(&hdr)?);
        let mut d = datagram.to_vec();
        crypto::unprotect(open.header.as_ref(), &hdr, None, &mut d).ok()?;
        Some(usize::from(d[0] & 0x03) + 1)
    }

    /// The frames of a 1-RTT datagram this side received (the peer sealed it).
    pub(crate) fn open_frames(&self, datagram: &[u8]) -> Option<Vec<Frame>> {
        let (_, open) = self.tls.one_rtt()?;
        let hdr = PlainHeader::parse(datagram).ok()?;
        let hdr = hdr.on_path(self.path_of(&hdr)?);
        let mut d = datagram.to_vec();
        let largest = self.paths.get(&hdr.path).and_then(|p| p.largest_received).map(|(l, _)| l);
        let (pn, _) = crypto::unprotect(open.header.as_ref(), &hdr, largest, &mut d).ok()?;
        let range = crypto::decrypt(open.packet.as_ref(), &hdr, pn, &mut d).ok()?;
        crate::proto::packet::decode_frames(&d[range]).ok()
    }
}
