//! Connection ids per path and direction, chosen by their receiver (RFC 9000 §5.1, RFC
//! 10069 §2 and its PATH_NEW_CONNECTION_ID frame): once the handshake completed, each side
//! issues one random id for every path it knows of and for the next [`CIDS_AHEAD`] path
//! ids, and mirrors every path id the peer issued one for (so the opener of a path finds the
//! other side's id for it waiting). A packet on path N carries the id the receiver issued
//! for N, so an observer of two paths, or of both directions of one, sees no id in common
//! and cannot link a phone's WiFi and LTE flows by it. The handshake's id (the client's
//! choice, from which the Initial keys follow) stays valid on path 0 and as a fallback, and
//! is what path 0 uses until the peer's id for it arrived.
//!
//! Bounded state: at most [`MAX_CIDS`] ids issued and as many of the peer's kept; past
//! that, the ids of the lowest closed or forgotten paths are retired first, and a peer
//! frame that still does not fit is ignored and counted. Ids are not rotated within a path
//! (no RETIRE_CONNECTION_ID): a path's flow keeps its id for its life.
//!
//! Each issued id carries its stateless reset token ([`crate::proto::reset`]); a datagram
//! this side cannot use that ends in the token of an id it has sent with ends the
//! connection ([`super::CloseReason::StatelessReset`]).

use std::collections::{BTreeMap, VecDeque};

use rand::Rng;

use super::Connection;
use super::packetize::Builder;
use super::{Side, State};
use crate::path::PathId;
use crate::proto::frame::Frame;
use crate::proto::reset::{self, TOKEN_LEN};

/// Path ids past the highest known one that each side issues an id for in advance, so a
/// path opened next finds the peer's id already there.
pub const CIDS_AHEAD: u32 = 4;

/// Most ids issued by one side, and most of the peer's ids kept.
pub const MAX_CIDS: usize = 32;

/// Mixed into the connection's seed for the connection id generator (its own, so the
/// connection's other draws stay the same).
pub(super) const CID_SEED: u64 = 0x6369_645f_7061_7468;

/// The sequence number of the one id this side issues for `path` (RFC 10069): on
/// path 0 the handshake's id is number 0, so the issued one is 1; elsewhere it is the first.
fn seq_of(path: PathId) -> u64 {
    u64::from(path == PathId(0))
}

/// What a driver that routes datagrams by connection id must learn of a connection: an id
/// it issued (route it to this connection as well) or retired (stop routing it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CidEvent {
    /// The connection issued this id; its packets may carry it from now on.
    Issued(u64),
    /// The connection retired this id.
    Retired(u64),
}

/// One id this side issued.
#[derive(Debug, Clone, Copy)]
struct Issued {
    cid: u64,
    /// Its stateless reset token.
    token: [u8; TOKEN_LEN],
    /// Its PATH_NEW_CONNECTION_ID waits to be sent (again, after a loss).
    pending: bool,
}

/// An id the peer issued.
#[derive(Debug, Clone, Copy)]
struct PeerCid {
    cid: u64,
    /// The peer's reset token for it.
    token: [u8; TOKEN_LEN],
    /// A packet was sent with it (only then is its token checked).
    used: bool,
}

/// The ids of a connection's paths, both directions.
#[derive(Debug, Default)]
pub(super) struct Cids {
    /// Ids this side issued, by path.
    issued: BTreeMap<PathId, Issued>,
    /// The same ids, for the receive check.
    by_cid: BTreeMap<u64, PathId>,
    /// Ids the peer issued, by path: packets on the path carry them.
    peer: BTreeMap<PathId, PeerCid>,
    /// Client: the reset token of the server's handshake id, from its
    /// `stateless_reset_token` transport parameter (the client has sent with that id).
    pub(super) handshake_token: Option<[u8; TOKEN_LEN]>,
    /// For a server's router (a client keeps none), bounded by the issues and retirements
    /// themselves.
    events: VecDeque<CidEvent>,
    /// Peer frames ignored (no room, or a second id for a path).
    pub(super) refused: u64,
}

impl Cids {
    /// The path this side issued `cid` for.
    pub(super) fn path_of(&self, cid: u64) -> Option<PathId> {
        self.by_cid.get(&cid).copied()
    }

    /// The id this side issued for `path`.
    #[cfg(test)]
    pub(super) fn issued_cid(&self, path: PathId) -> Option<u64> {
        self.issued.get(&path).map(|i| i.cid)
    }

    /// The id to send with on `path`, if the peer issued one.
    pub(super) fn peer_cid(&self, path: PathId) -> Option<u64> {
        self.peer.get(&path).map(|p| p.cid)
    }

    /// Whether `datagram` is a stateless reset from the peer: it ends in the token of an
    /// id this side has sent with (RFC 9000 §10.3.1: never one of an id not used yet).
    /// Every such token is compared, each in constant time.
    pub(super) fn is_reset(&self, datagram: &[u8]) -> bool {
        if datagram.len() < reset::MIN_RESET_LEN {
            return false;
        }
        let issued = self.peer.values().filter(|p| p.used).map(|p| &p.token);
        issued
            .chain(&self.handshake_token)
            .fold(false, |hit, token| reset::ends_with_token(datagram, token) | hit)
    }

    /// Whether a PATH_NEW_CONNECTION_ID waits to be sent.
    pub(super) fn has_pending(&self) -> bool {
        self.issued.values().any(|i| i.pending)
    }
}

impl Connection {
    /// The id to send with on `path`: the one the peer issued for it (marked used, so
    /// its reset token counts from now on), or the peer's handshake id.
    pub(super) fn dcid_for_send(&mut self, path: PathId) -> u64 {
        match self.cids.peer.get_mut(&path) {
            Some(p) => {
                p.used = true;
                p.cid
            }
            None => self.peer_cid,
        }
    }

    /// Whether the peer issued an id for `path` (a client opens a path only then).
    pub(super) fn has_peer_cid(&self, path: PathId) -> bool {
        self.cids.peer_cid(path).is_some()
    }

    /// Whether a path is gone or closed, so its ids may be retired.
    fn path_done(&self, id: PathId) -> bool {
        match self.paths.get(&id) {
            Some(p) => p.removed,
            None => !self.forgotten.admits(id),
        }
    }

    /// Issues the ids this side owes the peer (see the module doc); a no-op before the
    /// handshake completed.
    pub(super) fn issue_cids(&mut self) {
        if self.state != State::Established {
            return;
        }
        // RFC 10069: ids only for path ids both sides accept.
        let limit = self.local_max_path_id.min(self.remote_max_path_id.unwrap_or(0));
        let highest = self.paths.keys().next_back().map_or(0, |p| p.0);
        let mut wanted: Vec<PathId> =
            self.paths.values().filter(|p| !p.removed).map(|p| p.id).collect();
        wanted.extend((1..=CIDS_AHEAD).filter_map(|k| highest.checked_add(k)).map(PathId));
        wanted.extend(self.cids.peer.keys().copied());
        wanted.sort_unstable();
        wanted.dedup();
        for id in wanted {
            if id.0 > limit || self.cids.issued.contains_key(&id) || !self.forgotten.admits(id) {
                continue;
            }
            if self.cids.issued.len() >= MAX_CIDS && !self.retire_one_issued() {
                return;
            }
            let cid = loop {
                let c = self.cid_rng.next_u64();
                if c != self.cid && !self.cids.by_cid.contains_key(&c) {
                    break c;
                }
            };
            let token = self.reset_key.token(cid);
            self.cids.issued.insert(id, Issued { cid, token, pending: true });
            self.cids.by_cid.insert(cid, id);
            self.cid_event(CidEvent::Issued(cid));
        }
    }

    /// Retires the issued id of the lowest path that is done; false if none is.
    fn retire_one_issued(&mut self) -> bool {
        let Some(id) = self.cids.issued.keys().copied().find(|&id| self.path_done(id)) else {
            return false;
        };
        if let Some(i) = self.cids.issued.remove(&id) {
            self.cids.by_cid.remove(&i.cid);
            self.cid_event(CidEvent::Retired(i.cid));
        }
        true
    }

    /// A PATH_NEW_CONNECTION_ID arrived: the first id for a path is kept (room made by
    /// dropping the ids of done paths), then this side mirrors the path id.
    pub(super) fn on_path_new_cid(&mut self, path: PathId, cid: u64, token: [u8; TOKEN_LEN]) {
        if !self.check_peer_path_id(path, "PATH_NEW_CONNECTION_ID") {
            return;
        }
        if let Some(known) = self.cids.peer.get(&path) {
            if known.cid != cid || known.token != token {
                self.cids.refused += 1;
            }
            return;
        }
        if !self.forgotten.admits(path) {
            self.cids.refused += 1;
            return;
        }
        if self.cids.peer.len() >= MAX_CIDS {
            let done = self.cids.peer.keys().copied().find(|&id| self.path_done(id));
            match done {
                Some(id) => {
                    self.cids.peer.remove(&id);
                }
                None => {
                    self.cids.refused += 1;
                    return;
                }
            }
        }
        self.cids.peer.insert(path, PeerCid { cid, token, used: false });
        self.issue_cids();
    }

    /// Adds the pending PATH_NEW_CONNECTION_ID frames that fit (re-sent when lost).
    pub(super) fn add_new_cids(&mut self, b: &mut Builder, buf: &mut Vec<u8>) {
        if !self.cids.has_pending() {
            return;
        }
        for (&path, i) in self.cids.issued.iter_mut().filter(|(_, i)| i.pending) {
            let f = Frame::PathNewCid { path, seq: seq_of(path), cid: i.cid, reset_token: i.token };
            if !b.push(buf, &f) {
                return;
            }
            i.pending = false;
            b.frames.new_cids.push(path);
        }
    }

    /// Adds this side's id for `path` (in a PATH_JOIN packet: the server answers the join
    /// with it, whatever became of the earlier frame).
    pub(super) fn add_own_cid(&mut self, path: PathId, b: &mut Builder, buf: &mut Vec<u8>) {
        if let Some(i) = self.cids.issued.get_mut(&path)
            && b.push(
                buf,
                &Frame::PathNewCid { path, seq: seq_of(path), cid: i.cid, reset_token: i.token },
            )
        {
            i.pending = false;
            b.frames.new_cids.push(path);
        }
    }

    /// RETIRE_CONNECTION_ID or PATH_RETIRE_CONNECTION_ID arrived: the peer stops using the
    /// id this side issued for `path` under `seq`. One never issued closes the connection
    /// (RFC 9000 §19.16: PROTOCOL_VIOLATION). Braid issues one id per path and direction
    /// and does not replace a retired one (the peer keeps sending with its other ids, or
    /// the handshake's on path 0): counted (`cids_refused`).
    pub(super) fn on_retire_cid(&mut self, path: PathId, seq: u64) {
        if !self.check_peer_path_id(path, "RETIRE_CONNECTION_ID") {
            return;
        }
        let issued = self.cids.issued.contains_key(&path) || path == PathId(0);
        if !issued || seq > seq_of(path) {
            self.close_on_error(
                crate::proto::PROTOCOL_VIOLATION,
                "RETIRE_CONNECTION_ID names an id never issued",
            );
            return;
        }
        self.cids.refused += 1;
    }

    /// A packet with PATH_NEW_CONNECTION_ID frames for these paths was lost.
    pub(super) fn on_new_cids_lost(&mut self, paths: &[PathId]) {
        for path in paths {
            if let Some(i) = self.cids.issued.get_mut(path) {
                i.pending = true;
            }
        }
    }

    /// Queues an event for the router: only a server's, since a client's datagrams arrive
    /// on its own sockets (nothing polls a client's events, so none are kept).
    fn cid_event(&mut self, e: CidEvent) {
        if self.side == Side::Server {
            self.cids.events.push_back(e);
        }
    }

    /// The next change to the ids this connection answers to, for a driver that routes
    /// datagrams by connection id (the handshake's id, [`Connection::connection_id`],
    /// stays valid for the connection's life).
    pub fn poll_cid_event(&mut self) -> Option<CidEvent> {
        self.cids.events.pop_front()
    }
}
