//! Closing and liveness: [`Connection::close`] (a CLOSE frame on every validated path,
//! then nothing), the peer's CLOSE, the idle timeout ([`super::Config::idle_timeout`]
//! since the last received packet), and the keep-alive PING
//! ([`super::Config::keep_alive`]) that keeps a paused connection from reaching it.

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
        if self.is_closed() {
            return;
        }
        let reason = Bytes::copy_from_slice(&reason[..reason.len().min(MAX_CLOSE_REASON)]);
        self.close_frame = Some((code, reason));
        self.close_pending = self.paths.values().filter(|p| p.sendable()).map(|p| p.id).collect();
        self.enter_closed(CloseReason::Local);
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
        let pid = self.close_pending.pop()?;
        let (code, reason) = self.close_frame.clone()?;
        let mut b = self.start(pid, buf)?;
        b.push(buf, &Frame::Close { code, reason });
        let now = self.now;
        self.finish(now, b, buf, false)
    }

    /// When the connection closes for idleness unless a packet arrives first.
    pub(super) fn idle_deadline(&self) -> Instant {
        self.last_activity + self.config.idle_timeout
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
