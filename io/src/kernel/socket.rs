//! Opening kernel stream sockets: TCP or MPTCP (`IPPROTO_MPTCP` = 262), the controller
//! set with `TCP_CONGESTION`.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

use socket2::{Domain, Protocol, Socket, Type};

use super::{KernelError, KernelProfile};

/// `IPPROTO_MPTCP` (linux/in.h).
pub const IPPROTO_MPTCP: i32 = 262;

fn new_socket(profile: KernelProfile, addr: &SocketAddr) -> Result<Socket, KernelError> {
    let proto = if profile.multipath() { Protocol::from(IPPROTO_MPTCP) } else { Protocol::TCP };
    Socket::new(Domain::for_address(*addr), Type::STREAM, Some(proto)).map_err(|e| {
        let what = if profile.multipath() {
            "opening an MPTCP socket (is net.mptcp.enabled = 1?)"
        } else {
            "opening a TCP socket"
        };
        KernelError::io(what, e)
    })
}

fn set_cc(sock: &Socket, cc: &str) -> Result<(), KernelError> {
    sock.set_tcp_congestion(cc.as_bytes())
        .map_err(|e| KernelError::io(format!("setting congestion control {cc}"), e))
}

/// Fixes `sock`'s receive buffer at `bytes` (the kernel doubles the value for its
/// bookkeeping). `SO_RCVBUF` is capped at `net.core.rmem_max` (4 MiB on Debian 12's
/// defaults: a 15 MB download-ahead became an 8 MiB buffer, about 15 s of a 2 Mbit/s
/// stream, where Braid's transport and noq hold the whole); past the cap `SO_RCVBUFFORCE`
/// (root, `CAP_NET_ADMIN`) sets it. Returns the buffer the kernel granted, bytes as it
/// reports them (twice the asked size when granted whole).
fn fix_recv_buffer(sock: &Socket, bytes: usize) -> Result<usize, KernelError> {
    sock.set_recv_buffer_size(bytes)
        .map_err(|e| KernelError::io(format!("setting a {bytes}-byte receive buffer"), e))?;
    let granted = sock.recv_buffer_size().unwrap_or(0);
    if granted >= bytes.saturating_mul(2) {
        return Ok(granted);
    }
    let v = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    // SAFETY: `v` is a live c_int and the length passed is its size; the kernel only reads
    // it. A failure (no CAP_NET_ADMIN) leaves the capped buffer, reported below.
    let _ = unsafe {
        libc::setsockopt(
            std::os::fd::AsRawFd::as_raw_fd(sock),
            libc::SOL_SOCKET,
            libc::SO_RCVBUFFORCE,
            std::ptr::from_ref(&v).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    Ok(sock.recv_buffer_size().unwrap_or(granted))
}

/// Connects to `remote` with `profile`'s protocol and controller `cc`, from `local` when
/// given (the first subflow's source address), giving up after `timeout`. With
/// `recv_buffer`, the receive buffer is fixed at that size ([`fix_recv_buffer`], set before
/// the handshake so the window scale fits); where the kernel grants less (no root past
/// `net.core.rmem_max`), stderr has one note naming the sizes and the sysctl.
pub fn connect(
    profile: KernelProfile,
    remote: SocketAddr,
    local: Option<SocketAddr>,
    cc: &str,
    timeout: Duration,
    recv_buffer: Option<usize>,
) -> Result<TcpStream, KernelError> {
    let sock = new_socket(profile, &remote)?;
    set_cc(&sock, cc)?;
    let _ = sock.set_tcp_nodelay(true);
    if let Some(b) = recv_buffer {
        let granted = fix_recv_buffer(&sock, b)?;
        if granted < b.saturating_mul(2) {
            eprintln!(
                "note: the kernel gave a {granted}-byte receive buffer for the {b} bytes asked \
                 (it counts twice what it holds; raise net.core.rmem_max or run as root)"
            );
        }
    }
    if let Some(l) = local {
        sock.bind(&l.into()).map_err(|e| KernelError::io(format!("binding {l}"), e))?;
    }
    sock.connect_timeout(&remote.into(), timeout)
        .map_err(|e| KernelError::io(format!("connecting to {remote}"), e))?;
    Ok(sock.into())
}

/// Listens on `addr` with `profile`'s protocol; accepted connections use controller `cc`
/// (see [`accepted`]).
pub fn listen(
    profile: KernelProfile,
    addr: SocketAddr,
    cc: &str,
) -> Result<TcpListener, KernelError> {
    let sock = new_socket(profile, &addr)?;
    set_cc(&sock, cc)?;
    let _ = sock.set_reuse_address(true);
    sock.bind(&addr.into()).map_err(|e| KernelError::io(format!("binding {addr}"), e))?;
    sock.listen(64).map_err(|e| KernelError::io(format!("listening on {addr}"), e))?;
    Ok(sock.into())
}

/// Prepares an accepted connection: controller `cc`, no Nagle delay.
pub fn accepted(stream: &TcpStream, cc: &str) -> Result<(), KernelError> {
    let sock = socket2::SockRef::from(stream);
    let _ = sock.set_tcp_nodelay(true);
    set_cc(&sock, cc)
}

/// Limits the bytes `stream` holds unsent in the kernel to `bytes` (`TCP_NOTSENT_LOWAT`):
/// the socket reports writable only below it, so the sender's queue stays short and
/// what it writes next (a newer frame, a report) is not stuck behind megabytes. Kernels
/// whose MPTCP lacks the option keep their default.
pub fn limit_unsent(stream: &TcpStream, bytes: u32) {
    let _ = socket2::SockRef::from(stream).set_tcp_notsent_lowat(bytes);
}

/// The controller `stream` runs.
pub fn congestion(stream: &TcpStream) -> Option<String> {
    let sock = socket2::SockRef::from(stream);
    let name = sock.tcp_congestion().ok()?;
    Some(String::from_utf8_lossy(&name).trim_end_matches('\0').to_string())
}
