//! The server endpoint's shared socket, through `quinn-udp`: each datagram arrives with
//! the local address it was sent to (`IP_PKTINFO`), and each answer leaves from the
//! address its path uses.
//!
//! A server bound to a wildcard address on a host with several addresses would otherwise
//! answer from whatever source address the kernel's route lookup picks. A client path's
//! socket is connected to the address it sent to, so an answer from another source never
//! reaches it: the path opens, is never validated and never carries a byte. (The TUN bed
//! shows it: the server is `10.77.0.2` on every cable, but the kernel's route to the LTE
//! cable's client prefers that cable's own address `10.77.1.2`.)
//!
//! Received batches may be coalesced by GRO; they are split here at their stride.

use std::io::{self, IoSliceMut};
use std::net::SocketAddr;

use tokio::io::Interest;
use tokio::net::UdpSocket;

use super::socket::RECV_BUFFER;

/// Receive buffers read per system call (`recvmmsg`).
const RECV_SLOTS: usize = 8;

/// One datagram read from the socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Datagram {
    /// Where it came from.
    pub(super) remote: SocketAddr,
    /// The local address it was sent to (the bound address when the OS does not say).
    pub(super) local: SocketAddr,
    /// Which receive buffer holds it, and where.
    pub(super) slot: usize,
    pub(super) start: usize,
    pub(super) len: usize,
}

/// A UDP socket with per-datagram local addresses.
pub(super) struct ServerSocket {
    sock: UdpSocket,
    state: quinn_udp::UdpSocketState,
    bound: SocketAddr,
}

/// Receive buffers of one [`ServerSocket::recv`] call.
pub(super) struct RecvBuffers {
    bufs: Vec<Vec<u8>>,
    meta: Vec<quinn_udp::RecvMeta>,
}

impl RecvBuffers {
    /// Buffers for a batch of datagrams (GRO batches included).
    pub(super) fn new() -> RecvBuffers {
        RecvBuffers {
            bufs: (0..RECV_SLOTS).map(|_| vec![0u8; RECV_BUFFER]).collect(),
            meta: vec![quinn_udp::RecvMeta::default(); RECV_SLOTS],
        }
    }

    /// The bytes of `d`.
    pub(super) fn get(&self, d: &Datagram) -> &[u8] {
        self.bufs.get(d.slot).and_then(|b| b.get(d.start..d.start + d.len)).unwrap_or(&[])
    }
}

impl ServerSocket {
    /// Wraps a bound, non-blocking socket.
    pub(super) fn new(std_sock: std::net::UdpSocket) -> io::Result<ServerSocket> {
        let state = quinn_udp::UdpSocketState::new((&std_sock).into())?;
        let sock = UdpSocket::from_std(std_sock)?;
        let bound = sock.local_addr()?;
        Ok(ServerSocket { sock, state, bound })
    }

    /// The bound address.
    pub(super) fn local_addr(&self) -> SocketAddr {
        self.bound
    }

    /// Waits for datagrams; appends one [`Datagram`] per datagram (GRO batches split)
    /// to `out`, whose bytes are in `bufs`.
    pub(super) async fn recv(
        &self,
        bufs: &mut RecvBuffers,
        out: &mut Vec<Datagram>,
    ) -> io::Result<()> {
        out.clear();
        let RecvBuffers { bufs: raw, meta } = bufs;
        let n = loop {
            self.sock.readable().await?;
            let mut slices: Vec<IoSliceMut<'_>> =
                raw.iter_mut().map(|b| IoSliceMut::new(b.as_mut_slice())).collect();
            match self.sock.try_io(Interest::READABLE, || {
                self.state.recv((&self.sock).into(), &mut slices, meta)
            }) {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Err(e),
            }
        };
        for (slot, m) in meta.iter().enumerate().take(n) {
            let local = m.dst_ip.map_or(self.bound, |ip| SocketAddr::new(ip, self.bound.port()));
            let stride = if m.stride == 0 { m.len } else { m.stride };
            let mut start = 0;
            while start < m.len && stride > 0 {
                let len = stride.min(m.len - start);
                out.push(Datagram { remote: m.addr, local, slot, start, len });
                start += len;
            }
        }
        Ok(())
    }

    /// Sends `data` to `remote` from `local` (its IP, when the socket is bound to a
    /// wildcard address); waits while the send buffer is full.
    pub(super) async fn send(
        &self,
        data: &[u8],
        remote: SocketAddr,
        local: SocketAddr,
    ) -> io::Result<()> {
        let src_ip = (self.bound.ip().is_unspecified() && !local.ip().is_unspecified())
            .then_some(local.ip());
        let transmit = quinn_udp::Transmit {
            destination: remote,
            ecn: None,
            contents: data,
            segment_size: None,
            src_ip,
        };
        self.sock
            .async_io(Interest::WRITABLE, || self.state.try_send((&self.sock).into(), &transmit))
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bound(addr: &str) -> ServerSocket {
        let s = std::net::UdpSocket::bind(addr).unwrap();
        s.set_nonblocking(true).unwrap();
        ServerSocket::new(s).unwrap()
    }

    /// A wildcard-bound socket learns the address each datagram was sent to, and answers
    /// from it.
    #[tokio::test]
    async fn wildcard_socket_reports_and_answers_from_the_destination() {
        let server = bound("0.0.0.0:0");
        let port = server.local_addr().port();
        let client = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
        // 127.0.0.2 is on the loopback interface too (the whole 127/8 is).
        let to: SocketAddr = format!("127.0.0.2:{port}").parse().unwrap();
        client.send_to(b"hello", to).await.unwrap();
        let mut bufs = RecvBuffers::new();
        let mut got = Vec::new();
        server.recv(&mut bufs, &mut got).await.unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(bufs.get(&got[0]), b"hello");
        assert_eq!(got[0].local, to, "the datagram's destination, not the wildcard");
        assert_eq!(got[0].remote, client.local_addr().unwrap());
        server.send(b"back", got[0].remote, got[0].local).await.unwrap();
        let mut buf = [0u8; 16];
        let (n, from) = client.recv_from(&mut buf).await.unwrap();
        assert_eq!(&buf[..n], b"back");
        assert_eq!(from, to, "the answer leaves from the address the client sent to");
    }

    /// A batch of datagrams from several peers is read and split correctly.
    #[tokio::test]
    async fn batches_keep_each_datagram_whole() {
        let server = bound("127.0.0.1:0");
        let addr = server.local_addr();
        let a = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        for k in 0..20u8 {
            let s = if k.is_multiple_of(2) { &a } else { &b };
            s.send_to(&vec![k; 100 + k as usize], addr).unwrap();
        }
        let mut bufs = RecvBuffers::new();
        let mut got = Vec::new();
        let mut seen = Vec::new();
        while seen.len() < 20 {
            server.recv(&mut bufs, &mut got).await.unwrap();
            for d in &got {
                let bytes = bufs.get(d);
                let k = bytes[0];
                assert_eq!(bytes.len(), 100 + k as usize);
                assert!(bytes.iter().all(|&x| x == k));
                let from = if k.is_multiple_of(2) { &a } else { &b };
                assert_eq!(d.remote, from.local_addr().unwrap());
                assert_eq!(d.local, addr);
                seen.push(k);
            }
        }
        seen.sort_unstable();
        assert_eq!(seen, (0..20).collect::<Vec<u8>>());
    }
}
