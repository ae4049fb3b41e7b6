//! Connection ids per path and direction, chosen by their receiver (RFC 9000 §5.1, RFC
//! 10069 §2 and its PATH_NEW_CONNECTION_ID frame): once the handshake completed, each side
//! issues random ids for every path it knows of and for the next [`CIDS_AHEAD`] path ids,
//! and mirrors every path id the peer issued one for (so the opener of a path finds the
//! other side's id for it waiting). A packet on path N carries an id the receiver issued
//! for N, so an observer of two paths, or of both directions of one, sees no id in common
//! and cannot link a phone's WiFi and LTE flows by it. The handshake's id (the client's
//! choice, from which the Initial keys follow) is number 0 of path 0 and is what path 0
//! uses until the peer's id for it arrived.
//!
//! How many: on path 0, as many as the peer's `active_connection_id_limit` allows, up to
//! [`ACTIVE_CID_LIMIT`] (the handshake's counted), so a peer can migrate it (RFC 9000
//! §9.5: a new local address needs an id not used before); one on every other path (a
//! multipath client opens a new path rather than move one). Every id the peer retires is
//! replaced, so ids rotate:
//! this side's client, migrating ([`Connection::migrate`]), moves to an id it never sent
//! with and retires the ones it used; its server, when the peer moved, does the same if
//! it holds a spare. The peer's ids are kept up to the limit this side announces
//! ([`ACTIVE_CID_LIMIT`] per path; more is a CONNECTION_ID_LIMIT_ERROR), and a Retire
//! Prior To is honoured: the ids below it are retired (RETIRE_CONNECTION_ID, re-sent
//! when lost) and not sent with again.
//!
//! Bounded state: at most [`MAX_CIDS`] ids issued and as many of the peer's paths kept;
//! past that, the ids of the lowest closed or forgotten paths are retired first, and a
//! peer frame that still does not fit is ignored and counted. Owed retirements are
//! bounded too ([`MAX_RETIRE_PENDING`]; a peer that makes this side owe more closes with
//! CONNECTION_ID_LIMIT_ERROR).
//!
//! Each issued id carries its stateless reset token ([`crate::proto::reset`]); a datagram
//! this side cannot use that ends in the token of an id it has sent with ends the
//! connection ([`super::CloseReason::StatelessReset`]).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::net::SocketAddr;

use rand::Rng;

use super::Connection;
use super::packetize::Builder;
use super::{Side, State};
use crate::path::PathId;
use crate::proto::frame::Frame;
use crate::proto::reset::{self, TOKEN_LEN};
use crate::proto::wire::LongCid;
use crate::time::Instant;

/// Path ids past the highest known one that each side issues an id for in advance, so a
/// path opened next finds the peer's id already there.
pub const CIDS_AHEAD: u32 = 4;

/// Most ids issued by one side, and most paths whose peer ids are kept.
pub const MAX_CIDS: usize = 32;

/// The `active_connection_id_limit` this side announces (RFC 9000 §18.2; per path with
/// multipath, RFC 10069): the peer's ids it keeps for one path, the handshake's included.
pub const ACTIVE_CID_LIMIT: u64 = 4;

/// Most RETIRE_CONNECTION_ID frames owed at once.
pub const MAX_RETIRE_PENDING: usize = 2 * MAX_CIDS;

/// Mixed into the connection's seed for the connection id generator (its own, so the
/// connection's other draws stay the same).
pub(super) const CID_SEED: u64 = 0x6369_645f_7061_7468;

/// What a driver that routes datagrams by connection id must learn of a connection: an id
/// it issued (route it to this connection as well) or retired (stop routing it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CidEvent {
    /// The connection issued this id; its packets may carry it from now on.
    Issued(u64),
    /// The connection retired this id.
    Retired(u64),
}

/// Why [`Connection::migrate`] refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum MigrateError {
    /// Only a client migrates (a server's address is what the client connected to).
    #[error("only a client migrates")]
    NotClient,
    /// RFC 9000 §9: not before the handshake is confirmed.
    #[error("the handshake is not confirmed yet")]
    NotConfirmed,
    /// The peer's `disable_active_migration` (RFC 9000 §18.2) forbids it on path 0.
    #[error("the peer disabled active migration")]
    Disabled,
    /// No such open path.
    #[error("no such path")]
    UnknownPath,
    /// RFC 9000 §9.5: a new local address needs an id not used before, and the peer has
    /// issued none yet (it will replace the ones retired).
    #[error("no unused connection id from the peer")]
    NoSpareId,
}

/// One id this side issued.
#[derive(Debug, Clone, Copy)]
struct Issued {
    seq: u64,
    cid: u64,
    /// Its stateless reset token.
    token: [u8; TOKEN_LEN],
    /// Its PATH_NEW_CONNECTION_ID waits to be sent (again, after a loss).
    pending: bool,
}

/// The ids this side issued for one path.
#[derive(Debug, Clone)]
struct IssuedPath {
    /// Live ids, by sequence number.
    ids: Vec<Issued>,
    /// The next sequence number (path 0's handshake id is number 0).
    next_seq: u64,
    /// Path 0: the peer retired the handshake id.
    handshake_retired: bool,
}

impl IssuedPath {
    fn new(path: PathId) -> IssuedPath {
        IssuedPath {
            ids: Vec::new(),
            next_seq: u64::from(path == PathId(0)),
            handshake_retired: false,
        }
    }
}

/// An id the peer issued.
#[derive(Debug, Clone, Copy)]
struct PeerCid {
    seq: u64,
    /// The id: the peer's choice, 1 to 20 bytes.
    cid: LongCid,
    /// The peer's reset token for it.
    token: [u8; TOKEN_LEN],
    /// A packet was sent with it (only then is its token checked).
    used: bool,
}

/// The peer's ids for one path.
#[derive(Debug, Clone, Default)]
struct PeerPath {
    /// Live ids, by sequence number.
    ids: Vec<PeerCid>,
    /// The sequence number of the id packets on the path carry (`None`: the lowest, or
    /// on path 0 the handshake's id until one arrived).
    current: Option<u64>,
    /// The highest Retire Prior To received.
    retire_prior_to: u64,
    /// Path 0: the peer's handshake id is retired here.
    handshake_retired: bool,
}

impl PeerPath {
    /// The sequence number of the id packets on the path carry: the current one, else the
    /// lowest the peer issued.
    fn current_seq(&self) -> Option<u64> {
        self.current.or_else(|| self.ids.first().map(|c| c.seq))
    }
}

/// The ids of a connection's paths, both directions.
#[derive(Debug, Default)]
pub(super) struct Cids {
    /// Ids this side issued, by path.
    issued: BTreeMap<PathId, IssuedPath>,
    /// The same ids, for the receive check.
    by_cid: BTreeMap<u64, PathId>,
    /// Ids the peer issued, by path: packets on the path carry them.
    peer: BTreeMap<PathId, PeerPath>,
    /// RETIRE_CONNECTION_ID frames owed the peer, as (path, sequence number).
    retire: BTreeSet<(PathId, u64)>,
    /// How many of `issued` are `pending` (asked before every packet, so counted rather
    /// than searched).
    pending_new: usize,
    /// The peer's `active_connection_id_limit` (0 until its parameters arrived: 2 then).
    pub(super) peer_limit: u64,
    /// Client: the reset token of the server's handshake id, from its
    /// `stateless_reset_token` transport parameter (the client has sent with that id).
    pub(super) handshake_token: Option<[u8; TOKEN_LEN]>,
    /// For a server's router (a client keeps none), bounded by the issues and retirements
    /// themselves.
    events: VecDeque<CidEvent>,
    /// Peer frames ignored (no room, or an id repeated with other values).
    pub(super) refused: u64,
    /// RETIRE_CONNECTION_ID frames sent (first transmissions).
    pub(super) retired_sent: u64,
}

impl Cids {
    /// The path this side issued `cid` for.
    pub(super) fn path_of(&self, cid: u64) -> Option<PathId> {
        self.by_cid.get(&cid).copied()
    }

    /// The first id this side issued for `path`.
    #[cfg(test)]
    pub(super) fn issued_cid(&self, path: PathId) -> Option<u64> {
        self.issued.get(&path).and_then(|p| p.ids.first()).map(|i| i.cid)
    }

    /// The ids this side issued for `path`.
    #[cfg(test)]
    pub(super) fn issued_cids(&self, path: PathId) -> Vec<u64> {
        self.issued.get(&path).map(|p| p.ids.iter().map(|i| i.cid).collect()).unwrap_or_default()
    }

    /// The id packets on `path` carry, if the peer issued one for it.
    pub(super) fn peer_cid(&self, path: PathId) -> Option<LongCid> {
        let pp = self.peer.get(&path)?;
        let seq = pp.current_seq()?;
        pp.ids.iter().find(|c| c.seq == seq).map(|c| c.cid)
    }

    /// Whether `datagram` is a stateless reset from the peer: it ends in the token of an
    /// id this side has sent with (RFC 9000 §10.3.1: never one of an id not used yet).
    /// Every such token is compared, each in constant time.
    pub(super) fn is_reset(&self, datagram: &[u8]) -> bool {
        if datagram.len() < reset::MIN_RESET_LEN {
            return false;
        }
        let issued = self.peer.values().flat_map(|p| &p.ids).filter(|p| p.used).map(|p| &p.token);
        issued
            .chain(&self.handshake_token)
            .fold(false, |hit, token| reset::ends_with_token(datagram, token) | hit)
    }

    /// Whether a PATH_NEW_CONNECTION_ID or a RETIRE_CONNECTION_ID waits to be sent.
    pub(super) fn has_pending(&self) -> bool {
        debug_assert_eq!(
            self.pending_new,
            self.issued.values().flat_map(|p| &p.ids).filter(|i| i.pending).count(),
            "the count of pending ids"
        );
        !self.retire.is_empty() || self.pending_new > 0
    }

    /// The peer's limit (RFC 9000 §18.2: 2 when absent).
    fn peer_limit(&self) -> u64 {
        self.peer_limit.max(2)
    }
}

impl Connection {
    /// The id to send with on `path`: the current one the peer issued for it (marked
    /// used, so its reset token counts from now on), or the peer's handshake id.
    pub(super) fn dcid_for_send(&mut self, path: PathId) -> LongCid {
        let Some(pp) = self.cids.peer.get_mut(&path) else {
            return self.peer_cid;
        };
        let Some(seq) = pp.current_seq() else {
            return self.peer_cid;
        };
        pp.current = Some(seq);
        match pp.ids.iter_mut().find(|c| c.seq == seq) {
            Some(c) => {
                c.used = true;
                c.cid
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

    /// How many ids this side keeps issued for `path` (see the module doc), the
    /// handshake's not counted.
    fn issued_wanted(&self, path: PathId) -> u64 {
        let total = if path == PathId(0) { ACTIVE_CID_LIMIT } else { 1 };
        let handshake_live =
            path == PathId(0) && self.cids.issued.get(&path).is_none_or(|p| !p.handshake_retired);
        total.min(self.cids.peer_limit()).saturating_sub(u64::from(handshake_live))
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
            if id.0 > limit || !self.forgotten.admits(id) || self.path_done(id) {
                continue;
            }
            let want = self.issued_wanted(id);
            while self.cids.issued.get(&id).map_or(0, |p| p.ids.len() as u64) < want {
                if self.cids.by_cid.len() >= MAX_CIDS && !self.retire_one_issued() {
                    return;
                }
                let cid = loop {
                    let c = self.cid_rng.next_u64();
                    if c != self.cid && !self.cids.by_cid.contains_key(&c) {
                        break c;
                    }
                };
                let token = self.reset_key.token(cid);
                let ip = self.cids.issued.entry(id).or_insert_with(|| IssuedPath::new(id));
                ip.ids.push(Issued { seq: ip.next_seq, cid, token, pending: true });
                ip.next_seq += 1;
                self.cids.pending_new += 1;
                self.cids.by_cid.insert(cid, id);
                self.cid_event(CidEvent::Issued(cid));
            }
        }
    }

    /// Retires the issued ids of the lowest path that is done; false if none is.
    fn retire_one_issued(&mut self) -> bool {
        let done = self
            .cids
            .issued
            .iter()
            .find(|(id, p)| !p.ids.is_empty() && self.path_done(**id))
            .map(|(id, _)| *id);
        let Some(id) = done else {
            return false;
        };
        if let Some(p) = self.cids.issued.get_mut(&id) {
            for i in std::mem::take(&mut p.ids) {
                self.cids.pending_new -= usize::from(i.pending);
                self.cids.by_cid.remove(&i.cid);
                if self.side == Side::Server {
                    self.cids.events.push_back(CidEvent::Retired(i.cid));
                }
            }
        }
        true
    }

    /// A NEW_CONNECTION_ID or PATH_NEW_CONNECTION_ID arrived: the id is kept (room made
    /// by dropping the ids of done paths), ids below its Retire Prior To are retired, and
    /// this side mirrors the path id.
    pub(super) fn on_path_new_cid(
        &mut self,
        path: PathId,
        seq: u64,
        retire_prior_to: u64,
        cid: LongCid,
        token: [u8; TOKEN_LEN],
    ) {
        if !self.check_peer_path_id(path, "PATH_NEW_CONNECTION_ID") {
            return;
        }
        if !self.forgotten.admits(path) {
            self.cids.refused += 1;
            return;
        }
        if !self.cids.peer.contains_key(&path) && self.cids.peer.len() >= MAX_CIDS {
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
        let cids = &mut self.cids;
        let pp = cids.peer.entry(path).or_default();
        if let Some(known) = pp.ids.iter().find(|c| c.seq == seq) {
            // A repeat (its packet was re-sent); one with other values is ignored.
            if known.cid != cid || known.token != token {
                cids.refused += 1;
            }
            return;
        }
        if seq < pp.retire_prior_to {
            // RFC 9000 §19.15: an id already below Retire Prior To is retired at once.
            cids.retire.insert((path, seq));
        } else {
            if retire_prior_to > pp.retire_prior_to {
                pp.retire_prior_to = retire_prior_to;
                pp.ids.retain(|c| {
                    let keep = c.seq >= retire_prior_to;
                    if !keep {
                        cids.retire.insert((path, c.seq));
                    }
                    keep
                });
                if pp.current.is_some_and(|s| s < retire_prior_to) {
                    pp.current = None;
                }
                if path == PathId(0) && !pp.handshake_retired {
                    pp.handshake_retired = true;
                    cids.retire.insert((path, 0));
                }
            }
            let at = pp.ids.partition_point(|c| c.seq < seq);
            pp.ids.insert(at, PeerCid { seq, cid, token, used: false });
            let handshake = u64::from(path == PathId(0) && !pp.handshake_retired);
            if pp.ids.len() as u64 + handshake > ACTIVE_CID_LIMIT {
                self.close_on_error(
                    crate::proto::CONNECTION_ID_LIMIT_ERROR,
                    "more connection ids than active_connection_id_limit",
                );
                return;
            }
        }
        if self.cids.retire.len() > MAX_RETIRE_PENDING {
            self.close_on_error(
                crate::proto::CONNECTION_ID_LIMIT_ERROR,
                "too many connection ids to retire",
            );
            return;
        }
        self.issue_cids();
    }

    /// Moves `path` to an unused id of the peer's and retires the ones sent with on it
    /// (RFC 9000 §9.5: an id is never used from, or to, two addresses). Without a spare,
    /// nothing changes and `false` comes back. A client calls it when it migrates; a
    /// server when the peer moved (§9.5: MUST when the peer moved on purpose, with a new
    /// id; after a NAT rebinding, with the same id, keeping it would be allowed).
    pub(super) fn rotate_peer_cid(&mut self, path: PathId) -> bool {
        let cids = &mut self.cids;
        let Some(pp) = cids.peer.get_mut(&path) else {
            return false;
        };
        let current = pp.current_seq();
        let Some(next) = pp.ids.iter().find(|c| !c.used && Some(c.seq) != current).map(|c| c.seq)
        else {
            return false;
        };
        pp.ids.retain(|c| {
            let keep = !c.used;
            if !keep {
                cids.retire.insert((path, c.seq));
            }
            keep
        });
        if path == PathId(0) && !pp.handshake_retired {
            pp.handshake_retired = true;
            cids.retire.insert((path, 0));
        }
        pp.current = Some(next);
        true
    }

    /// Client: the socket of `path` moved to `local` (a new port or a new interface): an
    /// active migration (RFC 9000 §9.2, §9.5). Packets on the path carry an id of the
    /// peer's never sent with before, the ones used are retired, and a PING goes out from
    /// the new address at once, so the peer validates it and moves the path there. If
    /// the IP address changed (not only the port), the path's controller and RTT estimate
    /// start over (§9.4).
    pub fn migrate(
        &mut self,
        now: Instant,
        path: PathId,
        local: SocketAddr,
    ) -> Result<(), MigrateError> {
        if self.side != Side::Client {
            return Err(MigrateError::NotClient);
        }
        if self.state != State::Established || !self.tls.confirmed() {
            return Err(MigrateError::NotConfirmed);
        }
        // §18.2: the parameter covers the address used during the handshake (path 0).
        if path == PathId(0) && self.peer_disables_migration {
            return Err(MigrateError::Disabled);
        }
        if self.paths.get(&path).is_none_or(|p| p.removed) {
            return Err(MigrateError::UnknownPath);
        }
        if !self.rotate_peer_cid(path) {
            return Err(MigrateError::NoSpareId);
        }
        let mds = self.config.max_datagram_size;
        let initial_rtt = self.config.initial_rtt;
        let Some(p) = self.paths.get_mut(&path) else {
            return Err(MigrateError::UnknownPath);
        };
        let moved_ip = p.local.ip() != local.ip();
        p.local = local;
        p.probe_pending = true;
        if moved_ip {
            p.rtt = crate::proto::recovery::RttEstimator::new(initial_rtt);
            self.controller.on_path_removed(path);
            self.controller.on_path_added(now, path, mds);
        }
        self.migrated += 1;
        Ok(())
    }

    /// Adds the pending PATH_NEW_CONNECTION_ID and RETIRE_CONNECTION_ID frames that fit
    /// (each re-sent when lost).
    pub(super) fn add_new_cids(&mut self, b: &mut Builder, buf: &mut Vec<u8>) {
        if !self.cids.has_pending() {
            return;
        }
        let cids = &mut self.cids;
        for (&path, p) in &mut cids.issued {
            for i in p.ids.iter_mut().filter(|i| i.pending) {
                let f = Frame::PathNewCid {
                    path,
                    seq: i.seq,
                    retire_prior_to: 0,
                    cid: LongCid::from_u64(i.cid),
                    reset_token: i.token,
                };
                if !b.push(buf, &f) {
                    return;
                }
                i.pending = false;
                cids.pending_new -= 1;
                b.frames.new_cids.push((path, i.seq));
            }
        }
        while let Some(&(path, seq)) = cids.retire.first() {
            if !b.push(buf, &Frame::RetireCid { path, seq }) {
                return;
            }
            cids.retire.pop_first();
            cids.retired_sent += 1;
            b.frames.retired_cids.push((path, seq));
        }
    }

    /// Adds this side's id for `path` (in a PATH_JOIN packet: the server answers the join
    /// with it, whatever became of the earlier frame).
    pub(super) fn add_own_cid(&mut self, path: PathId, b: &mut Builder, buf: &mut Vec<u8>) {
        if let Some(i) = self.cids.issued.get_mut(&path).and_then(|p| p.ids.first_mut())
            && b.push(
                buf,
                &Frame::PathNewCid {
                    path,
                    seq: i.seq,
                    retire_prior_to: 0,
                    cid: LongCid::from_u64(i.cid),
                    reset_token: i.token,
                },
            )
        {
            self.cids.pending_new -= usize::from(i.pending);
            i.pending = false;
            b.frames.new_cids.push((path, i.seq));
        }
    }

    /// RETIRE_CONNECTION_ID or PATH_RETIRE_CONNECTION_ID arrived: the peer stops using the
    /// id this side issued for `path` under `seq`; it is no longer routed here (path 0's
    /// handshake id stays: long headers carry it) and a new one replaces it. One never
    /// issued closes the connection (RFC 9000 §19.16: PROTOCOL_VIOLATION); one already
    /// retired, or of a path whose ids are gone, is ignored.
    pub(super) fn on_retire_cid(&mut self, path: PathId, seq: u64) {
        if !self.check_peer_path_id(path, "RETIRE_CONNECTION_ID") {
            return;
        }
        let handshake = path == PathId(0) && seq == 0;
        let done = self.path_done(path);
        let Some(ip) = self.cids.issued.get_mut(&path) else {
            if handshake || done {
                self.cids.refused += 1;
                return;
            }
            self.close_on_error(
                crate::proto::PROTOCOL_VIOLATION,
                "RETIRE_CONNECTION_ID names an id never issued",
            );
            return;
        };
        if seq >= ip.next_seq {
            self.close_on_error(
                crate::proto::PROTOCOL_VIOLATION,
                "RETIRE_CONNECTION_ID names an id never issued",
            );
            return;
        }
        if handshake {
            if ip.handshake_retired {
                return;
            }
            ip.handshake_retired = true;
        } else {
            let Some(at) = ip.ids.iter().position(|i| i.seq == seq) else {
                return;
            };
            let i = ip.ids.remove(at);
            self.cids.pending_new -= usize::from(i.pending);
            self.cids.by_cid.remove(&i.cid);
            self.cid_event(CidEvent::Retired(i.cid));
        }
        self.issue_cids();
    }

    /// A packet with PATH_NEW_CONNECTION_ID frames for these (path, sequence number)
    /// pairs, and RETIRE_CONNECTION_ID frames for those, was lost.
    pub(super) fn on_cid_frames_lost(&mut self, new: &[(PathId, u64)], retired: &[(PathId, u64)]) {
        for (path, seq) in new {
            if let Some(i) = self
                .cids
                .issued
                .get_mut(path)
                .and_then(|p| p.ids.iter_mut().find(|i| i.seq == *seq))
                && !i.pending
            {
                i.pending = true;
                self.cids.pending_new += 1;
            }
        }
        for &(path, seq) in retired {
            if !self.path_done(path) {
                self.cids.retire.insert((path, seq));
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
