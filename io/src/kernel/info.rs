//! Per-subflow statistics of a kernel socket.
//!
//! For MPTCP: `MPTCP_TCPINFO` (one `struct tcp_info` per subflow) and
//! `MPTCP_SUBFLOW_ADDRS` (each subflow's addresses) at level `SOL_MPTCP` = 284; both
//! answers start with a `struct mptcp_subflow_data` header the caller fills in with its
//! own sizes (linux/mptcp.h; the kernel answers EINVAL otherwise). For TCP: `TCP_INFO`.
//! `struct tcp_info` is read by the offsets of linux/tcp.h, so an older kernel's shorter
//! struct just leaves the later fields 0.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::AsRawFd;

/// `SOL_MPTCP`.
pub const SOL_MPTCP: i32 = 284;
/// `MPTCP_INFO`.
pub const MPTCP_INFO: i32 = 1;
/// `MPTCP_TCPINFO`.
pub const MPTCP_TCPINFO: i32 = 2;
/// `MPTCP_SUBFLOW_ADDRS`.
pub const MPTCP_SUBFLOW_ADDRS: i32 = 3;

/// Bytes asked for per `struct tcp_info` (more than the kernel's; it copies what it has).
const TCP_INFO_LEN: usize = 256;
/// `struct mptcp_subflow_addrs`: two `__kernel_sockaddr_storage`.
const ADDRS_LEN: usize = 256;
/// `struct mptcp_subflow_data`.
const HEADER_LEN: usize = 16;
/// At most this many subflows are read.
const MAX_SUBFLOWS: usize = 16;

/// One subflow (or the one TCP connection).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Subflow {
    /// Local address (unspecified when unknown).
    pub local: Option<SocketAddr>,
    /// Remote address.
    pub remote: Option<SocketAddr>,
    /// Smoothed RTT, µs (`tcpi_rtt`).
    pub rtt_us: u32,
    /// Minimum RTT, µs.
    pub min_rtt_us: u32,
    /// Segments retransmitted over the subflow's life (`tcpi_total_retrans`).
    pub total_retrans: u32,
    /// Bytes acknowledged by the peer (`tcpi_bytes_acked`).
    pub bytes_acked: u64,
    /// Bytes received (`tcpi_bytes_received`).
    pub bytes_received: u64,
    /// Bytes sent, retransmissions included (`tcpi_bytes_sent`).
    pub bytes_sent: u64,
    /// Bytes retransmitted (`tcpi_bytes_retrans`).
    pub bytes_retrans: u64,
    /// Congestion window, segments.
    pub snd_cwnd: u32,
    /// Sender's maximum segment size, bytes (`tcpi_snd_mss`).
    pub snd_mss: u32,
    /// The latest delivery-rate sample, bytes/s (`tcpi_delivery_rate`; RFC-draft
    /// "delivery rate estimation", the rate BBR models).
    pub delivery_rate: u64,
    /// Whether that sample was taken while the sender had too little to send
    /// (`tcpi_delivery_rate_app_limited`): then it is a lower bound.
    pub app_limited: bool,
    /// Segments delivered to the peer (`tcpi_delivered`).
    pub delivered: u32,
    /// Segments sent and not yet acknowledged (`tcpi_unacked`).
    pub unacked: u32,
    /// The receiver's RTT estimate, µs (`tcpi_rcv_rtt`).
    pub rcv_rtt_us: u32,
}

fn u32_at(b: &[u8], off: usize) -> u32 {
    b.get(off..off + 4).map_or(0, |s| u32::from_ne_bytes([s[0], s[1], s[2], s[3]]))
}

fn u64_at(b: &[u8], off: usize) -> u64 {
    b.get(off..off + 8).map_or(0, |s| {
        let mut a = [0u8; 8];
        a.copy_from_slice(s);
        u64::from_ne_bytes(a)
    })
}

/// Reads the fields of a `struct tcp_info` (the first `len` bytes are valid).
fn parse_tcp_info(b: &[u8]) -> Subflow {
    Subflow {
        rtt_us: u32_at(b, 68),
        snd_mss: u32_at(b, 16),
        rcv_rtt_us: u32_at(b, 92),
        delivery_rate: u64_at(b, 160),
        app_limited: b.get(7).is_some_and(|f| f & 1 != 0),
        delivered: u32_at(b, 192),
        unacked: u32_at(b, 24),
        total_retrans: u32_at(b, 100),
        snd_cwnd: u32_at(b, 80),
        bytes_acked: u64_at(b, 120),
        bytes_received: u64_at(b, 128),
        min_rtt_us: u32_at(b, 148),
        bytes_sent: u64_at(b, 200),
        bytes_retrans: u64_at(b, 208),
        ..Subflow::default()
    }
}

/// A `sockaddr_storage` as the kernel wrote it.
fn parse_sockaddr(b: &[u8]) -> Option<SocketAddr> {
    let family = u16::from_ne_bytes([*b.first()?, *b.get(1)?]);
    let port = u16::from_be_bytes([*b.get(2)?, *b.get(3)?]);
    match i32::from(family) {
        libc::AF_INET => {
            let ip = Ipv4Addr::new(*b.get(4)?, *b.get(5)?, *b.get(6)?, *b.get(7)?);
            Some(SocketAddr::new(IpAddr::V4(ip), port))
        }
        libc::AF_INET6 => {
            let mut o = [0u8; 16];
            o.copy_from_slice(b.get(8..24)?);
            Some(SocketAddr::new(IpAddr::V6(Ipv6Addr::from(o)), port))
        }
        _ => None,
    }
}

fn getsockopt(fd: i32, level: i32, name: i32, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: `buf` is valid for `len` bytes; the kernel writes at most `len` bytes and
    // sets `len` to what it wrote.
    let rc = unsafe { libc::getsockopt(fd, level, name, buf.as_mut_ptr().cast(), &mut len) };
    if rc < 0 { Err(std::io::Error::last_os_error()) } else { Ok(len as usize) }
}

/// One `mptcp_subflow_data`-headed answer: the elements, each `elem` bytes long.
fn subflow_array(fd: i32, name: i32, elem: usize) -> std::io::Result<Vec<Vec<u8>>> {
    let mut buf = vec![0u8; HEADER_LEN + elem * MAX_SUBFLOWS];
    buf[0..4].copy_from_slice(&(HEADER_LEN as u32).to_ne_bytes());
    buf[12..16].copy_from_slice(&(elem as u32).to_ne_bytes());
    let len = getsockopt(fd, SOL_MPTCP, name, &mut buf)?;
    let num = u32_at(&buf, 4) as usize;
    let size_user = (u32_at(&buf, 12) as usize).min(elem);
    let size_data = (u32_at(&buf, 0) as usize).max(HEADER_LEN);
    let mut out = Vec::new();
    for i in 0..num.min(MAX_SUBFLOWS) {
        let start = size_data + i * size_user;
        let Some(e) = buf.get(start..(start + size_user).min(len)) else { break };
        out.push(e.to_vec());
    }
    Ok(out)
}

/// The subflows of an MPTCP socket (in the kernel's order), or the one connection of a
/// TCP socket (also when an MPTCP socket fell back to TCP).
pub fn subflows(sock: &(impl AsRawFd + std::os::fd::AsFd)) -> std::io::Result<Vec<Subflow>> {
    let fd = sock.as_raw_fd();
    if let Ok(infos) = subflow_array(fd, MPTCP_TCPINFO, TCP_INFO_LEN) {
        let addrs = subflow_array(fd, MPTCP_SUBFLOW_ADDRS, ADDRS_LEN).unwrap_or_default();
        let mut out: Vec<Subflow> = infos.iter().map(|b| parse_tcp_info(b)).collect();
        if addrs.len() == out.len() {
            for (s, a) in out.iter_mut().zip(&addrs) {
                s.local = parse_sockaddr(a);
                s.remote = a.get(128..).and_then(parse_sockaddr);
            }
        }
        if !out.is_empty() {
            return Ok(out);
        }
    }
    let mut buf = vec![0u8; TCP_INFO_LEN];
    getsockopt(fd, libc::IPPROTO_TCP, libc::TCP_INFO, &mut buf)?;
    let mut s = parse_tcp_info(&buf);
    let sref = socket2::SockRef::from(sock);
    s.local = sref.local_addr().ok().and_then(|a| a.as_socket());
    s.remote = sref.peer_addr().ok().and_then(|a| a.as_socket());
    Ok(vec![s])
}

/// Connection-level MPTCP counters (`MPTCP_INFO`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MptcpInfo {
    /// Subflows now.
    pub subflows: u8,
    /// Data-level retransmissions.
    pub retransmits: u32,
    /// Data-level bytes retransmitted.
    pub bytes_retrans: u64,
    /// Data-level bytes sent.
    pub bytes_sent: u64,
    /// Data-level bytes received.
    pub bytes_received: u64,
}

/// `MPTCP_INFO` of `sock`, `None` for a plain TCP socket.
pub fn mptcp_info(sock: &(impl AsRawFd + std::os::fd::AsFd)) -> Option<MptcpInfo> {
    let mut b = vec![0u8; 256];
    let len = getsockopt(sock.as_raw_fd(), SOL_MPTCP, MPTCP_INFO, &mut b).ok()?;
    b.truncate(len);
    // struct mptcp_info: u8 ×6, u32 flags @8, token @12, u64 write_seq @16, snd_una @24,
    // rcv_nxt @32, u8 ×3 @40, u32 retransmits @44, u64 bytes_retrans @48, bytes_sent @56,
    // bytes_received @64.
    Some(MptcpInfo {
        subflows: *b.first()?,
        retransmits: u32_at(&b, 44),
        bytes_retrans: u64_at(&b, 48),
        bytes_sent: u64_at(&b, 56),
        bytes_received: u64_at(&b, 64),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sockaddrs_parse_and_junk_does_not() {
        let mut b = vec![0u8; 128];
        b[0..2].copy_from_slice(&(libc::AF_INET as u16).to_ne_bytes());
        b[2..4].copy_from_slice(&5201u16.to_be_bytes());
        b[4..8].copy_from_slice(&[10, 1, 2, 3]);
        assert_eq!(parse_sockaddr(&b), Some("10.1.2.3:5201".parse().unwrap()));
        assert_eq!(parse_sockaddr(&[0u8; 3]), None);
        assert_eq!(parse_sockaddr(&[0xffu8; 128]), None);
        // A short tcp_info leaves the later fields 0.
        let s = parse_tcp_info(&[1u8; 72]);
        assert_ne!(s.rtt_us, 0);
        assert_eq!(s.bytes_received, 0);
    }

    #[test]
    fn a_loopback_tcp_connection_has_one_subflow_with_its_addresses() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let subs = subflows(&c).unwrap();
        assert_eq!(subs.len(), 1);
        assert_eq!(subs[0].remote, Some(l.local_addr().unwrap()));
        assert!(mptcp_info(&c).is_none());
    }
}
