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

/// A client path's socket: bound to `local` (and to interface `iface`), connected to
/// `remote`, with its batched-receive state; and the local address it got.
pub(super) fn open_path_socket(
    local: SocketAddr,
    iface: Option<&str>,
    remote: SocketAddr,
) -> Result<(tokio::net::UdpSocket, quinn_udp::UdpSocketState, SocketAddr), DriverError> {
    let std_sock = bind_socket(local, iface)?;
    let route_err = |e: io::Error| DriverError::Route { local, remote, message: e.to_string() };
    std_sock.connect(remote).map_err(route_err)?;
    let bound = std_sock.local_addr().map_err(route_err)?;
    let bind_err = |e: io::Error| DriverError::Bind { addr: local, message: e.to_string() };
    let udp = quinn_udp::UdpSocketState::new((&std_sock).into()).map_err(bind_err)?;
    let sock = tokio::net::UdpSocket::from_std(std_sock).map_err(bind_err)?;
    Ok((sock, udp, bound))
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
