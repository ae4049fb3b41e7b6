//! Input: [`Connection::handle_datagram`] checks a datagram (it parses, carries this
//! connection's id, belongs to a known path at its addresses or is a server-side
//! PATH_JOIN, is not a duplicate), records its packet number for the ACKs, and hands each
//! frame to the module that owns it (`on_frame`).

use std::net::SocketAddr;

use super::Connection;
use super::Side;
use super::acks::acks_at_once;
use super::validation::validation_only;
use crate::path::PathId;
use crate::proto::frame::Frame;
use crate::proto::packet::Packet;
use crate::time::Instant;

impl Connection {
    /// Processes one received datagram that arrived at `local` from `remote`. Bad input
    /// (garbage, another connection, an unknown or unvalidated address, out-of-window data,
    /// duplicates) is dropped and counted in [`super::ConnectionStats::dropped`].
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
        let validation_only = validation_only(&pkt.frames);
        match self.paths.get(&pid) {
            Some(p) => {
                if p.local != local || p.remote != remote || p.removed {
                    self.dropped.unvalidated_address += 1;
                    return;
                }
            }
            None => {
                if !self.admit_join(pid, local, remote, &pkt.frames, validation_only) {
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
        let pn = pkt.header.number;
        let eliciting = pkt.frames.iter().any(Frame::is_ack_eliciting);
        let has_data = pkt.frames.iter().any(|f| matches!(f, Frame::Data(_)));
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
        path.record_received(pn, now);
        path.bytes_received += data.len() as u64;
        self.last_activity = now;
        path.on_tfrc_packet(now, pn, data.len(), has_data);

        let fec_source = self.fec_source_symbol(&pkt.frames);
        let mut immediate = false;
        for frame in pkt.frames {
            if self.is_closed() {
                break;
            }
            immediate |= acks_at_once(&frame);
            self.on_frame(now, pid, frame);
        }
        if let Some(path) = self.paths.get_mut(&pid)
            && eliciting
        {
            path.on_eliciting_received(now, immediate, &self.config);
        }
        self.fec_after_datagram(pid, fec_source);
        self.check_window_update();
    }

    /// Hands one frame of a packet received on `pid` to the module that owns it.
    fn on_frame(&mut self, now: Instant, pid: PathId, frame: Frame) {
        match frame {
            Frame::Ping => {}
            Frame::FeedbackWanted => self.on_feedback_wanted(),
            Frame::Ack(ack) => self.on_ack(now, ack),
            Frame::Data(d) => self.on_data_frame(pid, &d),
            Frame::Abandon { offset, next_message } => self.on_abandon_frame(offset, next_message),
            Frame::PathStatus { path, seq, status } => self.on_path_status(path, seq, status),
            Frame::ReadRate { bps } => self.on_read_rate(now, bps),
            Frame::RateFeedback(f) => self.on_rate_feedback(now, &f),
            Frame::MaxData { max } => self.on_max_data(max),
            Frame::Close { code, reason } => self.on_close_frame(code, &reason),
            Frame::Handshake { role, connection_id, max_data, .. } => {
                self.on_hello(role, connection_id, max_data)
            }
            Frame::PathJoin { token, .. } => self.on_path_join(pid, token),
            Frame::PathChallenge { echo, token } => self.on_path_challenge(pid, echo, token),
            Frame::PathResponse { token } => self.on_path_response(pid, token),
            Frame::Coded(r) => self.on_coded(&r),
            Frame::FecSource { .. } => {}
            Frame::FecAck { ranges } => self.on_fec_ack(&ranges),
        }
    }
}
