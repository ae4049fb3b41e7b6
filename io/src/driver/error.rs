//! Why a connection ended or could not start, as the application sees it.

use std::net::SocketAddr;
use std::time::Duration;

use braid_transport::proto::CloseReason;

/// What went wrong with a connection or a socket.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DriverError {
    /// rustls refused the TLS configuration, or the OS random source failed.
    #[error("TLS: {0}")]
    Tls(String),
    /// The TLS handshake failed (for example: the server's certificate is not the pinned
    /// one).
    #[error("TLS handshake failed: {0}")]
    Handshake(String),
    /// `connect` was given no path.
    #[error("no path to connect on")]
    NoPaths,
    /// A socket could not be created or bound.
    #[error("cannot bind a UDP socket to {addr}: {message}")]
    Bind {
        /// The local address.
        addr: SocketAddr,
        /// The OS error.
        message: String,
    },
    /// `SO_BINDTODEVICE` failed (unknown interface, missing privilege, not Linux).
    #[error("cannot bind a socket to interface `{iface}`: {message}")]
    BindDevice {
        /// The interface name.
        iface: String,
        /// The OS error.
        message: String,
    },
    /// Connecting the socket to the remote failed (e.g. no route).
    #[error("cannot reach {remote} from {local}: {message}")]
    Route {
        /// The local address.
        local: SocketAddr,
        /// The remote address.
        remote: SocketAddr,
        /// The OS error.
        message: String,
    },
    /// No handshake answer in time.
    #[error("no answer from {remote} within {} s (is a braid server running there?)", secs(*.after))]
    HandshakeTimeout {
        /// The server address.
        remote: SocketAddr,
        /// How long the client waited.
        after: Duration,
    },
    /// The server's host answered "port unreachable" to the handshake.
    #[error("{remote} refused the connection (nothing listens on that port)")]
    Refused {
        /// The server address.
        remote: SocketAddr,
    },
    /// "Port unreachable" answers and nothing arrived on any path for a while.
    #[error("the peer is gone: its port is unreachable and nothing arrived for {:.1} s", .after.as_secs_f64())]
    PeerUnreachable {
        /// How long nothing arrived.
        after: Duration,
    },
    /// Nothing was received for the idle timeout.
    #[error("connection timed out: nothing received on any path for {} s", secs(*.after))]
    IdleTimeout {
        /// The idle timeout.
        after: Duration,
    },
    /// The peer closed the connection.
    #[error("the peer closed the connection (code {code}{})", if reason.is_empty() { String::new() } else { format!(": {reason}") })]
    PeerClosed {
        /// Its code.
        code: u64,
        /// Its reason.
        reason: String,
    },
    /// This side caught the peer breaking the protocol and closed the connection.
    #[error("the peer broke the protocol (closed with code {code}: {reason})")]
    ProtocolError {
        /// The code sent.
        code: u64,
        /// What the peer did.
        reason: String,
    },
    /// The peer sent a stateless reset: it holds no state for the connection (restarted,
    /// or it dropped the connection).
    #[error("the peer reset the connection: it holds no state for it (restarted, or dropped it)")]
    StatelessReset,
    /// This side closed the connection.
    #[error("the connection was closed")]
    LocallyClosed,
    /// Every path's socket failed.
    #[error("every path failed; last error: {last}")]
    AllPathsFailed {
        /// The last socket error.
        last: String,
    },
    /// An active migration was refused (a server's connection, the handshake not
    /// confirmed, the peer forbids it, or it issued no spare connection id yet).
    #[error("cannot migrate: {0}")]
    Migrate(String),
    /// The driver task stopped unexpectedly.
    #[error("the connection's task stopped")]
    TaskGone,
}

impl DriverError {
    /// The error for a connection that closed for `reason`, its idle timeout being
    /// `idle_timeout`.
    pub(super) fn closed(reason: CloseReason, idle_timeout: Duration) -> DriverError {
        match reason {
            CloseReason::Local => DriverError::LocallyClosed,
            CloseReason::Peer { code, reason } => DriverError::PeerClosed { code, reason },
            CloseReason::IdleTimeout => DriverError::IdleTimeout { after: idle_timeout },
            CloseReason::StatelessReset => DriverError::StatelessReset,
            CloseReason::Handshake { error } => DriverError::Handshake(error),
            CloseReason::ProtocolError { code, reason } => {
                DriverError::ProtocolError { code, reason }
            }
        }
    }
}

fn secs(d: Duration) -> String {
    let s = d.as_secs_f64();
    if (s - s.round()).abs() < 1e-9 { format!("{}", s.round() as u64) } else { format!("{s:.1}") }
}
