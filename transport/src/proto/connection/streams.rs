//! Messages on QUIC v1 streams, toward a peer that did not announce Braid's
//! frames ([`crate::proto::mapping`] has the mapping): STREAM frames instead of DATA,
//! RESET_STREAM instead of ABANDON, MAX_STREAMS both ways, STOP_SENDING honoured.

use super::Connection;
use super::packetize::Builder;
use crate::path::PathId;
use crate::proto::frame::{Frame, StreamData};
use crate::proto::mapping::{Mapping, Ready, StreamError};
use crate::proto::send::Chunk;

/// MAX_STREAM_DATA's and STREAM_DATA_BLOCKED's types (RFC 9000 §19.10, §19.13).
const T_MAX_STREAM_DATA: u64 = 0x11;
const T_STREAM_DATA_BLOCKED: u64 = 0x15;

impl Connection {
    /// Whether messages travel on v1 streams: the peer did not announce Braid's frames.
    pub(super) fn on_streams(&self) -> bool {
        !self.braid_frames
    }

    fn is_client(&self) -> bool {
        self.side == super::Side::Client
    }

    /// The stream message `n` of this side travels on.
    pub(super) fn stream_of(&self, n: u64) -> u64 {
        self.stream_recv.mapping().stream_id(n, self.is_client())
    }

    /// The frame that carries chunk `c`: Braid's DATA, or a STREAM frame on the message's
    /// own stream.
    pub(super) fn chunk_frame(&self, c: &Chunk) -> Frame {
        if !self.on_streams() {
            return super::messages::data_frame(c);
        }
        let offset = c.offset - c.message_start;
        Frame::Stream(StreamData {
            id: self.stream_of(c.message_id),
            offset,
            fin: offset + c.data.len() as u64 == c.message_len,
            data: c.data.clone(),
        })
    }

    /// The limit this side advertised for the peer's messages (what its stream frames
    /// are checked against).
    fn advertised_max_data(&self) -> u64 {
        self.recv.advertised().max(self.recv.max_data())
    }

    fn stream_error(&mut self, e: StreamError) {
        self.close_on_error(e.0, e.1);
    }

    /// A STREAM frame arrived on `pid`.
    pub(super) fn on_stream_frame(&mut self, pid: PathId, f: &StreamData) {
        let max = self.advertised_max_data();
        match self.stream_recv.on_stream(f, max, self.send.next_id_hint()) {
            Err(e) => self.stream_error(e),
            Ok(new) => {
                if let Some(p) = self.paths.get_mut(&pid) {
                    p.counters.on_data_received(new);
                }
                self.on_peer_opened();
                self.feed_assembler(pid);
            }
        }
    }

    /// A RESET_STREAM frame arrived on `pid`.
    pub(super) fn on_reset_stream(&mut self, pid: PathId, id: u64, final_size: u64) {
        let max = self.advertised_max_data();
        match self.stream_recv.on_reset(id, final_size, max, self.send.next_id_hint()) {
            Err(e) => self.stream_error(e),
            Ok(()) => {
                self.on_peer_opened();
                self.feed_assembler(pid);
            }
        }
    }

    /// With requests, a server answers on the streams the client opened: one more
    /// answer may go for each.
    fn on_peer_opened(&mut self) {
        if !self.is_client() && self.stream_recv.mapping() == Mapping::Requests {
            self.send.set_max_messages(self.stream_recv.peer_opened());
        }
    }

    /// Hands the messages the front stage completed to the message stream.
    fn feed_assembler(&mut self, pid: PathId) {
        while let Some(r) = self.stream_recv.pop() {
            match r {
                Ready::Message(d) => {
                    self.store_data(pid, &d);
                }
                Ready::Reset { offset, next_message } => {
                    self.on_abandon_frame(offset, next_message)
                }
            }
        }
    }

    /// STOP_SENDING for stream `id`: the message it carries is abandoned (RFC 9000 §3.5:
    /// a RESET_STREAM answers it), unless the peer already has all of it.
    pub(super) fn on_stop_sending(&mut self, id: u64) {
        match self.stream_recv.own_stream(id, self.send.next_id_hint()) {
            Err(e) => self.stream_error(e),
            Ok(Some(n)) => self.send.stop(n),
            Ok(None) => {}
        }
    }

    /// MAX_STREAM_DATA (about one of this side's streams: it raises its message's limit)
    /// or STREAM_DATA_BLOCKED (about one of the peer's: checked, nothing to do, as this
    /// side grants each stream its whole receive buffer).
    pub(super) fn on_stream_flow_frame(&mut self, kind: u64, id: u64, value: u64) {
        let r = match kind {
            T_MAX_STREAM_DATA => {
                self.stream_recv.own_stream(id, self.send.next_id_hint()).map(|n| {
                    if let Some(n) = n {
                        self.send.raise_message_limit(n, value);
                    }
                })
            }
            T_STREAM_DATA_BLOCKED => {
                self.stream_recv.peer_stream(id, self.send.next_id_hint()).map(|_| ())
            }
            _ => Ok(()),
        };
        if let Err(e) = r {
            self.stream_error(e);
        }
    }

    /// MAX_STREAMS, DATA_BLOCKED or STREAMS_BLOCKED: MAX_STREAMS for the kind of stream
    /// this side opens for its messages raises the messages that may be sent.
    pub(super) fn on_stream_limit(&mut self, kind: u64, value: u64) {
        if self.stream_recv.mapping().max_streams_type(!self.is_client()) == Some(kind) {
            self.send.set_max_messages(value);
        }
    }

    /// After the application read: a MAX_STREAMS if enough streams were consumed.
    pub(super) fn check_stream_grant(&mut self) {
        let grants = self.stream_recv.mapping().max_streams_type(self.is_client());
        if self.on_streams()
            && grants.is_some()
            && self.stream_recv.grant(self.recv.next_id()).is_some()
        {
            self.max_streams_pending = true;
        }
    }

    /// Adds the pending RESET_STREAMs and MAX_STREAMS that fit.
    pub(super) fn add_stream_control(&mut self, b: &mut Builder, buf: &mut Vec<u8>) {
        if !self.on_streams() {
            return;
        }
        let grants = self.stream_recv.mapping().max_streams_type(self.is_client());
        if let (true, Some(kind)) = (self.max_streams_pending, grants) {
            let f = Frame::StreamLimit { kind, value: self.stream_recv.granted() };
            if b.push(buf, &f) {
                self.max_streams_pending = false;
                b.frames.max_streams = true;
            }
        }
        while let Some((n, len)) = self.send.next_reset() {
            let f = Frame::ResetStream {
                id: self.stream_of(n),
                code: crate::proto::mapping::ABANDONED,
                final_size: len,
            };
            if !b.push(buf, &f) {
                self.send.reset_lost(n, len);
                break;
            }
            b.frames.resets.push((n, len));
        }
    }

    /// Whether a RESET_STREAM or MAX_STREAMS waits.
    pub(super) fn has_stream_control(&self) -> bool {
        self.on_streams() && (self.max_streams_pending || self.send.wants_reset())
    }
}
