//! The handshake. The client ([`Connection::connect`]) sends its hello on path 0 (its
//! connection id, receive window and path-0 radio) and is established by the server hello;
//! the server is built from the client hello ([`Connection::accept`]), established at once,
//! and answers with its own hello. A hello is re-sent when lost: the client's until it is
//! established, the server's until it is acknowledged.

use std::net::SocketAddr;
use std::sync::Arc;

use super::config::Config;
use super::events::Event;
use super::packetize::Transmit;
use super::{Connection, Side, State};
use crate::path::{PathId, PathRole};
use crate::proto::frame::{Frame, HelloRole};
use crate::proto::packet::Packet;
use crate::proto::wire::WireError;
use crate::time::Instant;

/// Why [`Connection::accept`] refused a datagram.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AcceptError {
    /// The datagram does not parse.
    #[error("malformed datagram: {0}")]
    Malformed(#[from] WireError),
    /// It parses but is not a client hello on path 0.
    #[error("not a client hello")]
    NotHandshake,
}

impl Connection {
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

    /// A HANDSHAKE frame arrived: the server hello with this connection's id establishes
    /// the client (the server ignores repeated client hellos).
    pub(super) fn on_hello(&mut self, role: HelloRole, connection_id: u64, max_data: u64) {
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

    /// The pending hello on path 0, with any ACKs routed there.
    pub(super) fn poll_handshake(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<Transmit> {
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
        if self.config.wants_rate_feedback {
            b.push(buf, &Frame::FeedbackWanted);
        }
        b.frames.handshake = true;
        let views = self.views(now);
        self.add_acks(now, &mut b, buf, false, &views);
        self.finish(now, b, buf, true)
    }
}
