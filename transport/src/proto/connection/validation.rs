//! Path validation. The client sends PATH_JOIN on a new path (re-sent while lost); the
//! server admits the path, answers with one PATH_CHALLENGE (the only packet it sends to
//! an unvalidated address) and validates the path when the PATH_RESPONSE arrives; the
//! client validates it when that response is acknowledged (see `loss`).

use std::net::SocketAddr;
use std::time::Duration;

use rand::Rng;

use super::events::Event;
use super::packetize::Transmit;
use super::{Connection, Side, State};
use crate::path::PathId;
use crate::proto::frame::Frame;
use crate::time::Instant;

/// Whether a packet carries only what an unvalidated path may carry to the server.
pub(super) fn validation_only(frames: &[Frame]) -> bool {
    frames.iter().all(|f| {
        matches!(
            f,
            Frame::PathJoin { .. }
                | Frame::PeerChallenge { .. }
                | Frame::PathResponse { .. }
                | Frame::PathNewCid { .. }
                | Frame::Ping
                | Frame::Ack(_)
        )
    })
}

/// Anti-amplification factor toward an address not validated yet (RFC 9000 §8 and §9.3
/// \[source\]).
const AMPLIFICATION_FACTOR: u64 = 3;
/// PATH_CHALLENGEs sent to a new peer address before it is given up (one per probe
/// timeout; RFC 9000 §8.2.4 suggests abandoning validation after three PTOs).
const MIGRATION_CHALLENGES: u32 = 3;
/// A floor for the time a new address has to answer (a path with a tiny RTT estimate still
/// gets time for a real round trip).
const MIGRATION_MIN_WAIT: Duration = Duration::from_millis(100);

/// Server: the peer's address on a validated path changed (NAT rebinding or migration,
/// RFC 9000 §9): packets go to the new address, at most three times what came from it,
/// until a PATH_CHALLENGE sent there is answered.
#[derive(Debug, Clone)]
pub(super) struct Migration {
    /// The last validated address: the path goes back to it if the new one never answers.
    old: SocketAddr,
    /// When the next PATH_CHALLENGE is due.
    next_challenge: Instant,
    challenges: u32,
    /// Bytes received from and sent to the new address while it is not validated.
    pub(super) received: u64,
    pub(super) sent: u64,
}

impl Migration {
    /// Whether ordinary packets may still go to the unvalidated address.
    pub(super) fn may_send(&self) -> bool {
        self.sent < AMPLIFICATION_FACTOR * self.received
    }
}

impl Connection {
    /// Server: a packet that authenticated, with the highest packet number so far on a
    /// validated path and a frame other than a probe, came from `remote`, not the path's
    /// address: the peer moved (RFC 9000 §9.3). Back to the address validated last: taken
    /// at once. Elsewhere: taken, and validated with a PATH_CHALLENGE.
    pub(super) fn on_peer_address_change(&mut self, pid: PathId, remote: SocketAddr, len: u64) {
        let now = self.now;
        let token = self.rng.next_u64().max(1);
        let Some(p) = self.paths.get_mut(&pid) else {
            return;
        };
        let old = match p.migration.take() {
            Some(m) if m.old == remote => {
                // An attacker's copy moved the path for a moment, or the peer came back.
                p.remote = remote;
                return;
            }
            Some(m) => m.old,
            None => p.remote,
        };
        p.remote = remote;
        p.challenge_token = token;
        p.challenge_pending = true;
        let wait = p.rtt.pto(self.config.max_ack_delay).max(MIGRATION_MIN_WAIT);
        p.migration = Some(Migration {
            old,
            next_challenge: now + wait,
            challenges: 1,
            received: len,
            sent: 0,
        });
        self.rotate_peer_cid(pid);
    }

    /// Server: the new address answered: the path stays there. If the IP address changed
    /// (not only the port), the controller and the RTT estimator start over (RFC 9000 §9.4
    /// \[source\]: MUST, unless only the port changed).
    fn on_migration_validated(&mut self, pid: PathId) {
        let now = self.now;
        let mds = self.config.max_datagram_size;
        let initial_rtt = self.config.initial_rtt;
        let Some(p) = self.paths.get_mut(&pid) else {
            return;
        };
        let Some(m) = p.migration.take() else {
            return;
        };
        p.challenge_pending = false;
        self.migrations.0 += 1;
        if m.old.ip() != p.remote.ip() {
            p.rtt = crate::proto::recovery::RttEstimator::new(initial_rtt);
            self.controller.on_path_removed(pid);
            self.controller.on_path_added(now, pid, mds);
        }
    }

    /// Server: re-sends the PATH_CHALLENGE to a new peer address once per probe timeout; after
    /// [`MIGRATION_CHALLENGES`] unanswered, the path goes back to its old address.
    pub(super) fn on_migration_timers(&mut self, now: Instant) {
        let max_ack_delay = self.config.max_ack_delay;
        let mut failed = 0;
        for p in self.paths.values_mut() {
            let Some(m) = p.migration.as_mut() else {
                continue;
            };
            if now < m.next_challenge {
                continue;
            }
            if m.challenges >= MIGRATION_CHALLENGES {
                p.remote = m.old;
                p.migration = None;
                p.challenge_pending = false;
                failed += 1;
                continue;
            }
            m.challenges += 1;
            m.next_challenge = now + p.rtt.pto(max_ack_delay).max(MIGRATION_MIN_WAIT);
            p.challenge_pending = true;
        }
        self.migrations.1 += failed;
    }

    /// The earliest migration timer.
    pub(super) fn migration_deadline(&self) -> Option<Instant> {
        self.paths.values().filter_map(|p| p.migration.as_ref()).map(|m| m.next_challenge).min()
    }

    /// Server: a packet arrived on a path id this side does not know. It opens the path if
    /// it is a PATH_JOIN with nothing but validation frames, from addresses no live path
    /// uses, within [`super::Config::max_paths`]. `false`: drop the packet.
    pub(super) fn admit_join(
        &mut self,
        pid: PathId,
        local: SocketAddr,
        remote: SocketAddr,
        frames: &[Frame],
        validation_only: bool,
    ) -> bool {
        // Braid's PATH_JOIN, or RFC 10069's way: a PATH_CHALLENGE on a new path id (with
        // multipath negotiated).
        let has_join = frames.iter().any(|f| match f {
            Frame::PathJoin { .. } => true,
            Frame::PeerChallenge { .. } => self.multipath,
            _ => false,
        });
        let join_role = frames.iter().find_map(|f| match f {
            Frame::PathJoin { role, .. } => Some(*role),
            _ => None,
        });
        let live = self.paths.values().filter(|p| !p.removed).count();
        let addr_taken =
            self.paths.values().any(|p| !p.removed && p.local == local && p.remote == remote);
        if self.side != Side::Server
            || !has_join
            || !validation_only
            || live >= self.config.max_paths
            || addr_taken
            || !self.forgotten.admits(pid)
        {
            return false;
        }
        self.insert_path(pid, local, remote, join_role.unwrap_or_default());
        true
    }

    /// Server: joining paths not validated within [`super::Config::path_validation_timeout`]
    /// of their last PATH_JOIN are forgotten (they stop counting toward [`super::Config::max_paths`], and their id
    /// may join again).
    pub(super) fn expire_unvalidated(&mut self, now: Instant) {
        if self.side != Side::Server {
            return;
        }
        let timeout = self.config.path_validation_timeout;
        let expired: Vec<PathId> = self
            .paths
            .values()
            // Not the handshake's path: its address is validated by the handshake, which
            // the idle timeout bounds (a slow handshake lost it after 3 s before).
            .filter(|p| p.id != PathId(0))
            .filter(|p| !p.removed && !p.validated && now >= p.created_at + timeout)
            .map(|p| p.id)
            .collect();
        for id in expired {
            // Forgotten (it never carried anything), so its id can join again, going on
            // from its last packet number.
            self.retire_path(id);
            self.forget_path(id, false);
            self.unvalidated_expired += 1;
        }
    }

    /// Server: a PATH_JOIN on an unvalidated path queues a PATH_CHALLENGE (a new token
    /// unless it repeats the join already challenged).
    pub(super) fn on_path_join(&mut self, pid: PathId, token: u64) {
        if self.side == Side::Server
            && let Some(p) = self.paths.get_mut(&pid)
            && !p.validated
            && !p.removed
        {
            if p.challenge_token == 0 || p.join_token != token {
                p.challenge_token = self.rng.next_u64().max(1);
            }
            p.join_token = token;
            p.challenge_pending = true;
            // The client is still trying: the path expires a full timeout after its last
            // join, not after its first (else a challenge sent just before the expiry is
            // answered to a server that forgot the path).
            p.created_at = self.now;
        }
    }

    /// QUIC v1's PATH_CHALLENGE arrived on `pid`: it is answered with a PATH_RESPONSE on the
    /// same path (RFC 9000 §8.2.2); at a server, on a path not validated yet (a path the
    /// peer opened the RFC 10069 way), this side challenges the peer's address in turn.
    pub(super) fn on_peer_challenge(&mut self, pid: PathId, token: u64) {
        let server = self.side == Side::Server;
        let Some(p) = self.paths.get_mut(&pid) else {
            return;
        };
        if p.removed {
            return;
        }
        p.peer_challenge = Some(token);
        if server && !p.validated {
            // As a join without a token (join token 0).
            self.on_path_join(pid, 0);
        }
    }

    /// Client: a PATH_CHALLENGE echoing a joining path's join token queues the
    /// PATH_RESPONSE; on a validated path every challenge is answered (RFC 9000 §8.2.2: the
    /// server validates an address the client's packets came from after a NAT rebinding,
    /// which the client cannot see).
    pub(super) fn on_path_challenge(&mut self, pid: PathId, echo: u64, token: u64) {
        if self.side == Side::Client
            && let Some(p) = self.paths.get_mut(&pid)
            && !p.removed
            && (p.validated || echo == p.join_token)
        {
            if !p.validated {
                p.join_pending = false;
            }
            p.challenge_token = token;
            p.response_pending = true;
        }
    }

    /// Server: the PATH_RESPONSE with the challenge's token validates the path (or the
    /// new address of a path that moved).
    pub(super) fn on_path_response(&mut self, pid: PathId, token: u64) {
        // Client, toward a peer without Braid's frames: the path was opened RFC 10069's
        // way (a PATH_CHALLENGE carrying the join token), and the answer validates it.
        if self.side == Side::Client
            && !self.braid_frames
            && let Some(p) = self.paths.get_mut(&pid)
            && !p.validated
            && !p.removed
            && p.join_token != 0
            && token == p.join_token
        {
            p.validated = true;
            p.join_pending = false;
            self.events.push_back(Event::PathValidated(pid));
            return;
        }
        if self.side == Side::Server
            && let Some(p) = self.paths.get(&pid)
            && p.migration.is_some()
            && token == p.challenge_token
        {
            self.on_migration_validated(pid);
            return;
        }
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

    /// The next pending validation packet (client: PATH_JOIN once established, or
    /// PATH_RESPONSE; server: PATH_CHALLENGE with an ACK of the join), in path order.
    pub(super) fn poll_validation(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<Transmit> {
        let established = self.state == State::Established;
        let ids: Vec<PathId> = self.paths.keys().copied().collect();
        for id in ids {
            let Some(p) = self.paths.get(&id) else {
                continue;
            };
            if p.removed {
                continue;
            }
            // Joins wait until the server showed it completed the handshake (its first
            // 1-RTT packet): before that it could not open them; and until it issued a
            // connection id for the path, so that no id is seen on two paths. The join
            // carries the client's own id for the path, which the challenge comes back with.
            if self.side == Side::Client
                && established
                && p.join_pending
                && self.tls.confirmed()
                && self.has_peer_cid(id)
            {
                let (token, role) = (p.join_token, p.role);
                let mut b = self.start(id, buf)?;
                if self.braid_frames {
                    b.push(buf, &Frame::PathJoin { token, role });
                } else {
                    // RFC 10069's way: a PATH_CHALLENGE on the new path id (padded, as
                    // RFC 9000 §8.2.1 asks, when the datagram limit allows).
                    b.push(buf, &Frame::PeerChallenge { token });
                }
                self.add_own_cid(id, &mut b, buf);
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
                // received PATH_JOIN (or PATH_CHALLENGE), untracked (the client re-sends
                // its join). A peer without Braid's frames gets v1's PATH_CHALLENGE, with
                // the PATH_RESPONSE to its own.
                let (echo, token) = (p.join_token, p.challenge_token);
                let answer = p.peer_challenge;
                let stamps = if self.braid_frames { self.config.ack_timestamps.max(1) } else { 0 };
                let ack = p.ack_frame(now, stamps);
                let mut b = self.start(id, buf)?;
                if self.braid_frames {
                    b.push(buf, &Frame::PathChallenge { echo, token });
                } else {
                    b.push(buf, &Frame::PeerChallenge { token });
                }
                if let Some(token) = answer {
                    b.push(buf, &Frame::PathResponse { token });
                }
                if let Some(a) = ack {
                    b.push(buf, &Frame::Ack(a));
                }
                if let Some(p) = self.paths.get_mut(&id) {
                    p.challenge_pending = false;
                    p.peer_challenge = None;
                    p.ack_sent(id);
                }
                return self.finish(now, b, buf, false);
            }
            if !p.validated && p.peer_challenge.is_some() {
                // A PATH_RESPONSE owed on a path not usable yet (`add_control` answers on
                // usable ones).
                let answer = self.paths.get_mut(&id).and_then(|p| p.peer_challenge.take());
                let mut b = self.start(id, buf)?;
                if let Some(token) = answer {
                    b.push(buf, &Frame::PathResponse { token });
                }
                return self.finish(now, b, buf, false);
            }
        }
        None
    }
}
