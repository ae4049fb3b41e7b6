//! What the application is told: [`Event`] (drained with [`Connection::poll_event`]) and
//! [`CloseReason`].

use super::Connection;
use crate::path::{PathId, PathStatus};

/// Most queued [`Event::PeerPathStatus`] events (the only kind a peer can trigger at will).
pub(super) const MAX_QUEUED_EVENTS: usize = 1024;

/// Why the connection closed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CloseReason {
    /// [`Connection::close`] was called.
    Local,
    /// The peer sent CLOSE.
    Peer {
        /// Its code.
        code: u64,
        /// Its reason (lossy UTF-8).
        reason: String,
    },
    /// Nothing was received for [`super::Config::idle_timeout`].
    IdleTimeout,
    /// This side caught the peer breaking the protocol and closed the connection, sending
    /// CONNECTION_CLOSE with `code` (RFC 9000 §20.1, e.g. [`crate::proto::PROTOCOL_VIOLATION`]).
    ProtocolError {
        /// The code sent.
        code: u64,
        /// What the peer did.
        reason: String,
    },
    /// The peer sent a stateless reset (RFC 9000 §10.3): it has no state for the
    /// connection (its process restarted, or it dropped the connection). Nothing more is
    /// sent.
    StatelessReset,
    /// The TLS handshake failed (the peer's certificate, its transport parameters, or a
    /// protocol error rustls reported).
    Handshake {
        /// What failed.
        error: String,
    },
}

/// Something the application should know about. Each variant says when it is queued;
/// [`Connection::poll_event`] returns them in that order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The handshake completed (in [`Connection::handle_datagram`]). Client: when the
    /// server's Finished was verified. Server: when the client's Finished arrived.
    Connected,
    /// A path other than path 0 may carry data: both sides proved they reach each other on
    /// it (path 0 is covered by [`Event::Connected`]). Server: queued when the client's
    /// PATH_RESPONSE arrives. Client: queued when the server acknowledges that
    /// PATH_RESPONSE.
    PathValidated(PathId),
    /// The path had repeated RTOs ([`super::Config::path_failure_rtos`] in a row, in
    /// [`Connection::handle_timeout`]); its data moved to other paths and it is being
    /// probed.
    PathFailed(PathId),
    /// A failed path answered a probe and carries data again: queued when an ACK for a
    /// packet sent on it arrives.
    PathRecovered(PathId),
    /// The peer announced a PATH_STATUS: queued when a PATH_STATUS newer than the last one
    /// arrives for a path that is not closed (at most 1024 wait unpolled; more are not
    /// queued).
    PeerPathStatus {
        /// The path.
        path: PathId,
        /// The announced status.
        status: PathStatus,
    },
    /// The connection closed; nothing more is sent or received. Queued once, by
    /// [`Connection::close`], by the arrival of the peer's CLOSE, or by
    /// [`Connection::handle_timeout`] at the idle timeout.
    Closed {
        /// Why.
        reason: CloseReason,
    },
}

impl Connection {
    /// The next event, if any.
    pub fn poll_event(&mut self) -> Option<Event> {
        let ev = self.events.pop_front()?;
        if self.trace.is_some() {
            // Path events are traced as the application learns of them: drivers drain
            // events after every input, so at the same `now`.
            use crate::trace::PathEvent;
            match &ev {
                Event::Connected => self.emit_path(PathId(0), PathEvent::Validated),
                Event::PathValidated(p) => self.emit_path(*p, PathEvent::Validated),
                Event::PathFailed(p) => self.emit_path(*p, PathEvent::Failed),
                Event::PathRecovered(p) => self.emit_path(*p, PathEvent::Recovered),
                Event::PeerPathStatus { path, status } => {
                    self.emit_path(*path, PathEvent::Status(*status))
                }
                Event::Closed { .. } => {}
            }
        }
        Some(ev)
    }
}
