//! Closing and liveness: [`Connection::close`] (a CLOSE frame on every validated path,
//! then nothing), the peer's CLOSE, the idle timeout (RFC 9000 §10.1: negotiated from
//! both sides' [`super::Config::idle_timeout`], restarted by each received packet and by the
//! first ack-eliciting packet sent after one), and the keep-alive PING
//! ([`super::Config::keep_alive`]) that keeps a paused connection from reaching it.

use std::time::Duration;

use bytes::Bytes;

use super::events::{CloseReason, Event};
use super::packetize::Transmit;
use super::{Connection, State};
use crate::proto::frame::{Frame, MAX_CLOSE_REASON};
use crate::time::Instant;

impl Connection {
    /// Closes the connection: a CLOSE frame goes out on every validated path, then nothing.
    /// [`Event::Closed`] with [`CloseReason::Local`] follows.
    pub fn close(&mut self, now: Instant, code: u64, reason: &[u8]) {
        self.now = self.now.max(now);
        self.send_close(code, reason, CloseReason::Local);
    }

    /// The peer broke the protocol: CONNECTION_CLOSE with `code` and `reason` goes out on
    /// every validated path (RFC 9000 §10.2: no silent close on a fatal error), and
    /// [`Event::Closed`] with [`CloseReason::ProtocolError`] follows.
    pub(super) fn close_on_error(&mut self, code: u64, reason: &str) {
        let why = CloseReason::ProtocolError { code, reason: reason.to_owned() };
        self.send_close(code, reason.as_bytes(), why);
    }

    /// The AEAD limits in force: the configuration's, else the negotiated cipher's.
    pub(super) fn aead_limits(&self) -> crate::proto::AeadLimits {
        self.config.aead_limits.unwrap_or_else(|| self.tls.aead_limits())
    }

    /// A packet failed authentication (any key): at the integrity limit the connection
    /// closes with AEAD_LIMIT_REACHED and opens nothing more (RFC 9001 §6.6).
    pub(super) fn on_auth_failure(&mut self) {
        self.dropped.unauthenticated += 1;
        self.auth_failures += 1;
        if self.auth_failures >= self.aead_limits().integrity {
            self.close_on_error(
                crate::proto::AEAD_LIMIT_REACHED,
                "integrity limit reached: too many packets failed authentication",
            );
        }
    }

    pub(super) fn send_close(&mut self, code: u64, reason: &[u8], why: CloseReason) {
        if self.is_closed() {
            return;
        }
        let reason = Bytes::copy_from_slice(&reason[..reason.len().min(MAX_CLOSE_REASON)]);
        self.close_frame = Some((code, reason));
        self.close_by_application = why == CloseReason::Local;
        if self.state == State::Established {
            self.close_pending =
                self.paths.values().filter(|p| p.sendable()).map(|p| p.id).collect();
        } else {
            self.close_in_handshake_packets();
        }
        self.enter_closed(why);
    }

    /// Enters the closed state once: redundant copies are dropped and
    /// [`Event::Closed`] is queued.
    pub(super) fn enter_closed(&mut self, reason: CloseReason) {
        if self.state == State::Closed {
            return;
        }
        self.state = State::Closed;
        self.redundant.clear();
        self.events.push_back(Event::Closed { reason });
    }

    /// The peer's CLOSE frame arrived.
    pub(super) fn on_close_frame(&mut self, code: u64, reason: &[u8]) {
        let reason = String::from_utf8_lossy(reason).into_owned();
        self.enter_closed(CloseReason::Peer { code, reason });
    }

    /// After [`Connection::close`]: one CLOSE packet per path that was validated then.
    pub(super) fn poll_close(&mut self, buf: &mut Vec<u8>) -> Option<Transmit> {
        if let Some(t) = self.poll_handshake_close(buf) {
            return Some(t);
        }
        let pid = self.close_pending.pop()?;
        let (code, reason) = self.close_frame.clone()?;
        let mut b = self.start(pid, buf)?;
        b.push(buf, &Frame::Close { code, reason, application: self.close_by_application });
        let now = self.now;
        self.finish(now, b, buf, false)
    }

    /// When the connection closes for idleness unless a packet arrives first; `None` when
    /// neither side has an idle timeout.
    ///
    /// RFC 9000 §10.1: the timeout in force is the smaller of the two sides' non-zero
    /// `max_idle_timeout`s (the local one until the peer's transport parameters arrive), and
    /// it is never shorter than three probe timeouts, so a slow path is not taken for a dead
    /// one. With several paths the longest path's PTO counts: the connection lives while any
    /// path may still answer.
    pub(super) fn idle_deadline(&self) -> Option<Instant> {
        if self.idle_timeout.is_zero() {
            return None;
        }
        let mad = self.config.max_ack_delay;
        let pto = self.paths.values().filter(|p| !p.removed).map(|p| p.rtt.pto(mad)).max();
        let floor = pto.unwrap_or_default() * 3;
        Some(self.last_activity + self.idle_timeout.max(floor))
    }

    /// The idle timeout in force after the peer announced `peer_ms` (0: none), RFC 9000
    /// §10.1: the smaller of the two when both are non-zero, else whichever is.
    pub(super) fn negotiate_idle_timeout(&mut self, peer_ms: u64) {
        let peer = Duration::from_millis(peer_ms);
        let local = self.config.idle_timeout;
        self.idle_timeout = match (local.is_zero(), peer.is_zero()) {
            (false, false) => local.min(peer),
            (true, _) => peer,
            (false, true) => local,
        };
    }

    /// The idle timeout in force (see [`Connection::idle_deadline`] for the 3-PTO floor).
    pub fn idle_timeout(&self) -> Duration {
        self.idle_timeout
    }

    /// RFC 9000 §10.1: a packet received and processed restarts the idle timer …
    pub(super) fn on_activity_received(&mut self, now: Instant) {
        self.last_activity = now;
        self.eliciting_sent_since_activity = false;
    }

    /// … and so does the first ack-eliciting packet sent after it, so a sender whose data is
    /// in flight when a silence starts gets the whole timeout from its last send.
    pub(super) fn on_eliciting_sent(&mut self, now: Instant) {
        self.last_eliciting_sent = now;
        if !self.eliciting_sent_since_activity {
            self.eliciting_sent_since_activity = true;
            self.last_activity = self.last_activity.max(now);
        }
    }

    /// When the keep-alive PING is due (none while one is pending or before the handshake
    /// completed).
    pub(super) fn keep_alive_deadline(&self) -> Option<Instant> {
        if self.ping_pending || self.state != State::Established {
            return None;
        }
        self.config.keep_alive.map(|k| self.last_eliciting_sent + k)
    }

    /// The keep-alive timer: once passed, a PING is queued (sent by `poll_probe`).
    pub(super) fn on_keep_alive_timer(&mut self, now: Instant) {
        if self.keep_alive_deadline().is_some_and(|t| t <= now) {
            self.ping_pending = true;
        }
    }
}
