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
    bufs: [Vec<u8>; RECV_SLOTS],
    meta: [quinn_udp::RecvMeta; RECV_SLOTS],
}

impl RecvBuffers {
    /// Buffers for a batch of datagrams (GRO batches included).
    pub(super) fn new() -> RecvBuffers {
        RecvBuffers {
            bufs: std::array::from_fn(|_| vec![0u8; RECV_BUFFER]),
            meta: [quinn_udp::RecvMeta::default(); RECV_SLOTS],
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
            // No allocation per read: one slice per buffer, on the stack.
            let mut slices = raw.each_mut().map(|b| IoSliceMut::new(b.as_mut_slice()));
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

    /// Sends one datagram now, or not at all when the send buffer is full (a Retry: the
    /// client sends its Initial again if it is lost).
    pub(super) fn try_send_one(
        &self,
        data: &[u8],
        remote: SocketAddr,
        local: SocketAddr,
    ) -> io::Result<()> {
        let transmit = self.transmit(data, remote, local, None);
        self.sock.try_io(Interest::WRITABLE, || self.state.try_send((&self.sock).into(), &transmit))
    }

    /// `data` to `remote`, from `local`'s IP when the socket is bound to a wildcard
    /// address; with `segment`, several datagrams of that size (UDP GSO).
    fn transmit<'a>(
        &self,
        data: &'a [u8],
        remote: SocketAddr,
        local: SocketAddr,
        segment: Option<usize>,
    ) -> quinn_udp::Transmit<'a> {
        let src_ip = (self.bound.ip().is_unspecified() && !local.ip().is_unspecified())
            .then_some(local.ip());
        quinn_udp::Transmit {
            destination: remote,
            ecn: None,
            contents: data,
            segment_size: segment.filter(|&s| s < data.len()),
            src_ip,
        }
    }

    /// How many datagrams one [`ServerSocket::send`] may carry (1 without GSO).
    pub(super) fn max_segments(&self) -> usize {
        self.state.max_gso_segments()
    }

    /// Sends `data` to `remote` from `local` (its IP, when the socket is bound to a
    /// wildcard address); waits while the send buffer is full. With `segment`, `data` is
    /// several datagrams of that size (the last may be shorter) handed to the kernel in
    /// one call (UDP GSO).
    pub(super) async fn send(
        &self,
        data: &[u8],
        remote: SocketAddr,
        local: SocketAddr,
        segment: Option<usize>,
    ) -> io::Result<()> {
        let transmit = self.transmit(data, remote, local, segment);
        self.sock
            .async_io(Interest::WRITABLE, || self.state.try_send((&self.sock).into(), &transmit))
            .await
    }
}

/// Largest GSO batch in bytes (a UDP datagram's payload limit, less headers).
const GSO_MAX_BYTES: usize = 65_000;

/// Consecutive datagrams to one peer, of one size (the last may be shorter), gathered for
/// one GSO send.
#[derive(Default)]
pub(super) struct GsoBatch {
    bytes: Vec<u8>,
    segment: usize,
    count: usize,
    dest: Option<(SocketAddr, SocketAddr)>,
    /// A shorter datagram ended the batch.
    closed: bool,
}

impl GsoBatch {
    /// Whether a datagram of `len` bytes from `local` to `remote` may join the batch.
    pub(super) fn fits(
        &self,
        remote: SocketAddr,
        local: SocketAddr,
        len: usize,
        max_segments: usize,
    ) -> bool {
        match self.dest {
            None => true,
            Some(d) => {
                d == (remote, local)
                    && !self.closed
                    && len <= self.segment
                    && self.count < max_segments
                    && self.bytes.len() + len <= GSO_MAX_BYTES
            }
        }
    }

    /// Adds a datagram (call [`GsoBatch::fits`] first).
    pub(super) fn push(&mut self, remote: SocketAddr, local: SocketAddr, data: &[u8]) {
        if self.count == 0 {
            self.segment = data.len();
            self.dest = Some((remote, local));
        } else if data.len() < self.segment {
            self.closed = true;
        }
        self.bytes.extend_from_slice(data);
        self.count += 1;
    }

    /// Sends the batch, if any, and empties it. An error loses the datagrams, which the
    /// connection's recovery handles like a loss.
    pub(super) async fn send(&mut self, sock: &ServerSocket) {
        if let Some((remote, local)) = self.dest.take() {
            let segment = (self.count > 1).then_some(self.segment);
            let _ = sock.send(&self.bytes, remote, local, segment).await;
        }
        self.bytes.clear();
        self.count = 0;
        self.closed = false;
    }
}

/// Destinations with a GSO batch open at once; a datagram for one more sends one of them.
const OPEN_BATCHES: usize = 8;

/// The server connection's datagrams gathered into one GSO batch per destination (peer
/// and local address), so a scheduler that spreads consecutive datagrams over paths (round
/// robin, redundant copies) still sends each path's datagrams a batch per system call
/// instead of one by one.
#[derive(Default)]
pub(super) struct GsoBatches {
    /// The batches; a sent one (no destination) keeps its buffer for the next
    /// destination.
    open: Vec<GsoBatch>,
}

impl GsoBatches {
    /// Adds a datagram from `local` to `remote`. The batch for that destination is sent
    /// first when the datagram cannot join it; with [`OPEN_BATCHES`] destinations open,
    /// a new destination sends the first batch in line and takes the last place.
    pub(super) async fn push(
        &mut self,
        sock: &ServerSocket,
        remote: SocketAddr,
        local: SocketAddr,
        data: &[u8],
    ) {
        let dest = Some((remote, local));
        let idx = match self.open.iter().position(|b| b.dest == dest) {
            Some(i) => {
                if !self.open[i].fits(remote, local, data.len(), sock.max_segments()) {
                    self.open[i].send(sock).await;
                }
                i
            }
            None => match self.open.iter().position(|b| b.dest.is_none()) {
                Some(i) => i,
                None if self.open.len() < OPEN_BATCHES => {
                    self.open.push(GsoBatch::default());
                    self.open.len() - 1
                }
                None => {
                    let mut oldest = self.open.remove(0);
                    oldest.send(sock).await;
                    self.open.push(oldest);
                    self.open.len() - 1
                }
            },
        };
        self.open[idx].push(remote, local, data);
    }

    /// Sends every open batch.
    pub(super) async fn send_all(&mut self, sock: &ServerSocket) {
        for b in &mut self.open {
            b.send(sock).await;
        }
    }

    /// (destination, datagrams) of the open batches.
    #[cfg(test)]
    fn counts(&self) -> Vec<((SocketAddr, SocketAddr), usize)> {
        self.open.iter().filter_map(|b| b.dest.map(|d| (d, b.count))).collect()
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
        server.send(b"back", got[0].remote, got[0].local, None).await.unwrap();
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

    /// A GSO batch leaves as separate datagrams of its segment size, the last one
    /// shorter, and a datagram for another peer or of another size starts a new batch.
    #[tokio::test]
    async fn gso_batches_arrive_as_separate_datagrams() {
        let server = bound("127.0.0.1:0");
        let local = server.local_addr();
        let peer = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let other = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let (p, o) = (peer.local_addr().unwrap(), other.local_addr().unwrap());
        let max = server.max_segments().max(1);
        let mut batch = GsoBatch::default();
        let mut sent = Vec::new();
        for (k, (to, len)) in
            [(p, 1200), (p, 1200), (p, 1200), (p, 700), (p, 1200), (o, 1200), (o, 90)]
                .into_iter()
                .enumerate()
        {
            if !batch.fits(to, local, len, max) {
                batch.send(&server).await;
            }
            let data = vec![k as u8; len];
            batch.push(to, local, &data);
            sent.push((to, data));
        }
        batch.send(&server).await;
        for (sock, addr) in [(&peer, p), (&other, o)] {
            let want: Vec<&Vec<u8>> =
                sent.iter().filter(|(to, _)| *to == addr).map(|(_, d)| d).collect();
            for w in want {
                let mut buf = [0u8; 2048];
                let n = sock.recv(&mut buf).await.unwrap();
                assert_eq!(&buf[..n], &w[..], "datagrams arrive whole and in order");
            }
        }
        if max > 1 {
            // 1200, 1200, 1200, 700 went in one batch: a full one refuses more.
            let mut b = GsoBatch::default();
            b.push(p, local, &[0; 1200]);
            b.push(p, local, &[0; 700]);
            assert!(!b.fits(p, local, 700, max), "a short datagram ends a batch");
            let mut c = GsoBatch::default();
            c.push(p, local, &[0; 1000]);
            assert!(c.fits(p, local, 1000, max));
            assert!(!c.fits(p, local, 1001, max), "no segment larger than the first");
            assert!(!c.fits(o, local, 1000, max), "one peer per batch");
        }
    }

    /// Datagrams alternating between two peers gather in one batch per peer; each peer
    /// receives its own datagrams whole and in order; past [`OPEN_BATCHES`] destinations the
    /// first batch in line leaves to make room.
    #[tokio::test]
    async fn batches_per_destination_keep_each_peers_order() {
        let server = bound("127.0.0.1:0");
        let local = server.local_addr();
        let a = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let b = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let (pa, pb) = (a.local_addr().unwrap(), b.local_addr().unwrap());
        let mut batches = GsoBatches::default();
        let mut sent: Vec<(SocketAddr, Vec<u8>)> = Vec::new();
        for k in 0..10u8 {
            let to = if k.is_multiple_of(2) { pa } else { pb };
            let data = vec![k; 1200];
            batches.push(&server, to, local, &data).await;
            sent.push((to, data));
        }
        if server.max_segments() > 1 {
            assert_eq!(batches.counts(), vec![((pa, local), 5), ((pb, local), 5)]);
        }
        batches.send_all(&server).await;
        assert!(batches.counts().is_empty(), "all sent");
        for (sock, addr) in [(&a, pa), (&b, pb)] {
            for (_, want) in sent.iter().filter(|(to, _)| *to == addr) {
                let mut buf = [0u8; 2048];
                let n = sock.recv(&mut buf).await.unwrap();
                assert_eq!(&buf[..n], &want[..], "each peer's datagrams whole and in order");
            }
        }
        // More destinations than batches: the first in line is sent to make room.
        let socks: Vec<std::net::UdpSocket> =
            (0..=OPEN_BATCHES).map(|_| std::net::UdpSocket::bind("127.0.0.1:0").unwrap()).collect();
        let peers: Vec<SocketAddr> = socks.iter().map(|s| s.local_addr().unwrap()).collect();
        let mut many = GsoBatches::default();
        for (k, &p) in peers.iter().enumerate() {
            many.push(&server, p, local, &[k as u8; 100]).await;
        }
        let open: Vec<SocketAddr> = many.counts().iter().map(|((r, _), _)| *r).collect();
        assert_eq!(open, peers[1..].to_vec(), "the first left, the new one took the last place");
        socks[0].set_read_timeout(Some(std::time::Duration::from_secs(2))).unwrap();
        let mut buf = [0u8; 256];
        let n = socks[0].recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], &[0u8; 100][..], "the first batch was sent, whole");
    }
}
