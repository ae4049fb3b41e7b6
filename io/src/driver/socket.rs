//! UDP sockets: binding (optionally to an interface) and what a socket error means.

use std::io;
use std::net::SocketAddr;

use super::DriverError;

/// Socket buffer sizes asked for (the OS may cap them).
const SOCKET_BUFFER_BYTES: usize = 4 << 20;
/// Largest datagram read.
pub(super) const RECV_BUFFER: usize = 65_536;

/// A non-blocking UDP socket bound to `local` and, when given, to interface `iface`.
pub(super) fn bind_socket(
    local: SocketAddr,
    iface: Option<&str>,
) -> Result<std::net::UdpSocket, DriverError> {
    use socket2::{Domain, Protocol, Socket, Type};
    let bind_err = |e: io::Error| DriverError::Bind { addr: local, message: e.to_string() };
    let s = Socket::new(Domain::for_address(local), Type::DGRAM, Some(Protocol::UDP))
        .map_err(bind_err)?;
    if let Some(name) = iface {
        bind_device(&s, name)?;
    }
    // Larger buffers absorb bursts; the OS caps them at its maximum.
    let _ = s.set_recv_buffer_size(SOCKET_BUFFER_BYTES);
    let _ = s.set_send_buffer_size(SOCKET_BUFFER_BYTES);
    s.set_nonblocking(true).map_err(bind_err)?;
    s.bind(&local.into()).map_err(bind_err)?;
    Ok(s.into())
}

#[cfg(any(target_os = "linux", target_os = "android", target_os = "fuchsia"))]
fn bind_device(s: &socket2::Socket, name: &str) -> Result<(), DriverError> {
    s.bind_device(Some(name.as_bytes()))
        .map_err(|e| DriverError::BindDevice { iface: name.to_string(), message: e.to_string() })
}

#[cfg(not(any(target_os = "linux", target_os = "android", target_os = "fuchsia")))]
fn bind_device(_s: &socket2::Socket, name: &str) -> Result<(), DriverError> {
    Err(DriverError::BindDevice {
        iface: name.to_string(),
        message: "only supported on Linux".into(),
    })
}

/// What an error on a client path's socket means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SocketFault {
    /// "Port unreachable" for an earlier datagram: the peer's process may be gone.
    Refused,
    /// Nothing is wrong with the socket (it would block, or was interrupted).
    Transient,
    /// The socket itself is broken (interface or address gone, permission, …).
    Broken,
}

impl SocketFault {
    /// The meaning of `error`.
    pub(super) fn of(error: &io::Error) -> SocketFault {
        match error.kind() {
            io::ErrorKind::ConnectionRefused => SocketFault::Refused,
            io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => SocketFault::Transient,
            _ => SocketFault::Broken,
        }
    }
}
