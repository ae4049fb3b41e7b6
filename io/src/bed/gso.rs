//! TCP segmentation offload on the bed's cables (`IFF_VNET_HDR`, `TUNSETOFFLOAD`): the
//! sending stack hands a TUN end TCP super-packets of up to 64 KB (one `read` for dozens
//! of segments), which [`split`] cuts into the wire-size packets the link model queues,
//! delays and drops one by one; at the far end [`coalesce`] joins the consecutive
//! segments of one TCP flow that leave the link together into one super-packet again
//! (one `write`, one pass of the receiving stack, as a NIC's GRO would hand it up).
//!
//! Every packet read or written starts with a `struct virtio_net_hdr` (linux/virtio_net.h,
//! 10 bytes). Checksums: with `TUN_F_CSUM` the stack leaves TCP/UDP checksums partial
//! (`NEEDS_CSUM`); what the emulator writes is marked `NEEDS_CSUM` too (a partial
//! checksum is taken as verified on local delivery; TUN ignores `DATA_VALID`). IPv4
//! header checksums are always recomputed.

/// `sizeof(struct virtio_net_hdr)`.
pub const VNET_HDR_LEN: usize = 10;
/// `VIRTIO_NET_HDR_F_NEEDS_CSUM`.
const F_NEEDS_CSUM: u8 = 1;
/// `VIRTIO_NET_HDR_GSO_TCPV4`.
const GSO_TCPV4: u8 = 1;
/// `VIRTIO_NET_HDR_GSO_ECN`.
const GSO_ECN: u8 = 0x80;
/// Largest IPv4 packet.
const MAX_IP: usize = 65_535;

/// The header of a packet written as it is (no GSO; its checksums complete).
pub const PLAIN: [u8; VNET_HDR_LEN] = [0; VNET_HDR_LEN];

/// The virtio header for writing IP packet `p` whole: a TCP or UDP checksum is marked
/// partial (`NEEDS_CSUM`: the stack handed it over partial, and the receiving end takes a
/// partial checksum as verified, as it does from a NIC), anything else goes as it is.
pub fn plain_header(p: &[u8]) -> [u8; VNET_HDR_LEN] {
    let Some(&v_ihl) = p.first() else { return PLAIN };
    let ihl = usize::from(v_ihl & 0x0f) * 4;
    let offset = match p.get(9) {
        Some(6) if v_ihl >> 4 == 4 && p.len() >= ihl + 20 => 16u16,
        Some(17) if v_ihl >> 4 == 4 && p.len() >= ihl + 8 => 6,
        _ => return PLAIN,
    };
    let (start, off) = ((ihl as u16).to_le_bytes(), offset.to_le_bytes());
    [F_NEEDS_CSUM, 0, 0, 0, 0, 0, start[0], start[1], off[0], off[1]]
}

fn u16_at(b: &[u8], i: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(i)?, *b.get(i + 1)?]))
}

fn put_u16(b: &mut [u8], i: usize, v: u16) {
    if let Some(s) = b.get_mut(i..i + 2) {
        s.copy_from_slice(&v.to_be_bytes());
    }
}

fn ipv4_checksum(h: &mut [u8]) {
    put_u16(h, 10, 0);
    let mut sum = 0u32;
    for c in h.chunks(2) {
        sum += u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    put_u16(h, 10, !(sum as u16));
}

/// An IPv4 TCP packet's header lengths (IP, TCP), if it is one.
fn tcp4(p: &[u8]) -> Option<(usize, usize)> {
    let v_ihl = *p.first()?;
    if v_ihl >> 4 != 4 || *p.get(9)? != 6 {
        return None;
    }
    let ihl = usize::from(v_ihl & 0x0f) * 4;
    let doff = usize::from(*p.get(ihl + 12)? >> 4) * 4;
    (ihl >= 20 && doff >= 20 && p.len() >= ihl + doff).then_some((ihl, doff))
}

/// Cuts a packet read from a TUN end with offloads (virtio header first) into wire-size
/// IP packets, appended to `out`; returns how many. A packet that is not a TCPv4
/// super-packet passes whole; a malformed one is dropped (0).
pub fn split(read: &[u8], out: &mut Vec<Vec<u8>>) -> usize {
    let Some(pkt) = read.get(VNET_HDR_LEN..) else { return 0 };
    let gso_type = read[1] & !GSO_ECN;
    let gso_size = usize::from(u16::from_le_bytes([read[4], read[5]]));
    if gso_type == 0 || pkt.is_empty() {
        if pkt.is_empty() {
            return 0;
        }
        out.push(pkt.to_vec());
        return 1;
    }
    let Some((ihl, doff)) = tcp4(pkt).filter(|_| gso_type == GSO_TCPV4 && gso_size > 0) else {
        return 0;
    };
    let hdrs = ihl + doff;
    let payload = &pkt[hdrs..];
    let (Some(id), Some(seq)) = (u16_at(pkt, 4), pkt.get(ihl + 4..ihl + 8)) else { return 0 };
    let seq = u32::from_be_bytes([seq[0], seq[1], seq[2], seq[3]]);
    let flags = pkt[ihl + 13];
    let n = payload.len().div_ceil(gso_size).max(1);
    for (i, chunk) in payload.chunks(gso_size).enumerate() {
        let mut s = Vec::with_capacity(hdrs + chunk.len());
        s.extend_from_slice(&pkt[..hdrs]);
        s.extend_from_slice(chunk);
        put_u16(&mut s, 2, (hdrs + chunk.len()) as u16);
        put_u16(&mut s, 4, id.wrapping_add(i as u16));
        let sq = seq.wrapping_add((i * gso_size) as u32);
        s[ihl + 4..ihl + 8].copy_from_slice(&sq.to_be_bytes());
        let mut f = flags;
        if i + 1 < n {
            f &= !0x09; // FIN and PSH on the last segment only
        }
        if i > 0 {
            f &= !0x80; // CWR on the first only
        }
        s[ihl + 13] = f;
        ipv4_checksum(&mut s[..ihl]);
        out.push(s);
    }
    n
}

/// Whether TCPv4 segment `b` continues `a` (the same flow, headers and options; `a`'s
/// payload is `mss` bytes and `b` starts where it ends; plain ACKs, `b` may push).
fn continues(a: &[u8], b: &[u8], mss: usize) -> bool {
    let (Some((ihl, doff)), Some((ihl2, doff2))) = (tcp4(a), tcp4(b)) else { return false };
    if ihl != ihl2 || doff != doff2 || a.len() != ihl + doff + mss || b.len() <= ihl + doff {
        return false;
    }
    // Addresses, ports, ack, window, options equal; seq follows; only ACK (+PSH on b).
    let same = |r: std::ops::Range<usize>| a.get(r.clone()) == b.get(r);
    let seq = |p: &[u8]| u32::from_be_bytes([p[ihl + 4], p[ihl + 5], p[ihl + 6], p[ihl + 7]]);
    a[ihl + 13] == 0x10
        && (b[ihl + 13] == 0x10 || b[ihl + 13] == 0x18)
        && b.len() - ihl - doff <= mss
        && same(12..20)
        && same(ihl..ihl + 4)
        && same(ihl + 8..ihl + 12)
        && same(ihl + 14..ihl + 16)
        && same(ihl + 20..ihl + doff)
        && seq(b) == seq(a).wrapping_add(mss as u32)
}

struct Run {
    /// Virtio header room, then the first segment's headers and every payload so far.
    bytes: Vec<u8>,
    /// Payload bytes of each full segment.
    mss: usize,
    /// IP + TCP header bytes.
    hdrs: usize,
    segments: usize,
    /// The run's last segment as it arrived.
    last: Vec<u8>,
}

impl Run {
    fn finish(mut self) -> Vec<u8> {
        if self.segments == 1 {
            let h = plain_header(&self.bytes[VNET_HDR_LEN..]);
            self.bytes[..VNET_HDR_LEN].copy_from_slice(&h);
            return self.bytes;
        }
        let ip = &mut self.bytes[VNET_HDR_LEN..];
        let ihl = usize::from(ip[0] & 0x0f) * 4;
        let len = ip.len() as u16;
        put_u16(ip, 2, len);
        ipv4_checksum(&mut ip[..ihl]);
        let (hdrs, mss, start) = (
            (self.hdrs as u16).to_le_bytes(),
            (self.mss as u16).to_le_bytes(),
            (ihl as u16).to_le_bytes(),
        );
        let h =
            [F_NEEDS_CSUM, GSO_TCPV4, hdrs[0], hdrs[1], mss[0], mss[1], start[0], start[1], 16, 0];
        self.bytes[..VNET_HDR_LEN].copy_from_slice(&h);
        self.bytes
    }
}

/// Joins runs of consecutive segments of one TCP flow among `pkts` (in order) into
/// super-packets; returns what to write, each with its virtio header first.
pub fn coalesce(pkts: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = Vec::with_capacity(pkts.len());
    let mut run: Option<Run> = None;
    for p in pkts {
        if let Some(r) = run.as_mut() {
            if r.last.len() == r.hdrs + r.mss
                && continues(&r.last, &p, r.mss)
                && r.bytes.len() - VNET_HDR_LEN + p.len() - r.hdrs <= MAX_IP
            {
                let ihl = usize::from(p[0] & 0x0f) * 4;
                r.bytes[VNET_HDR_LEN + ihl + 13] = p[ihl + 13];
                r.bytes.extend_from_slice(&p[r.hdrs..]);
                r.segments += 1;
                r.last = p;
                continue;
            }
            if let Some(r) = run.take() {
                out.push(r.finish());
            }
        }
        match tcp4(&p) {
            Some((ihl, doff)) if p.len() > ihl + doff => {
                let mut bytes = vec![0u8; VNET_HDR_LEN];
                bytes.extend_from_slice(&p);
                let (hdrs, mss) = (ihl + doff, p.len() - ihl - doff);
                run = Some(Run { bytes, mss, hdrs, segments: 1, last: p });
            }
            _ => {
                let mut s = plain_header(&p).to_vec();
                s.extend_from_slice(&p);
                out.push(s);
            }
        }
    }
    if let Some(r) = run.take() {
        out.push(r.finish());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An IPv4/TCP packet: 20-byte IP header, 32-byte TCP header (12 bytes of options),
    /// `payload` bytes of `seq`'s value.
    fn segment(seq: u32, payload: usize, flags: u8) -> Vec<u8> {
        let mut p = vec![0u8; 52];
        p[0] = 0x45;
        p[8] = 64;
        p[9] = 6;
        p[12..16].copy_from_slice(&[10, 77, 0, 2]);
        p[16..20].copy_from_slice(&[10, 77, 0, 1]);
        p[20..22].copy_from_slice(&5201u16.to_be_bytes());
        p[22..24].copy_from_slice(&40000u16.to_be_bytes());
        p[24..28].copy_from_slice(&seq.to_be_bytes());
        p[32] = 8 << 4;
        p[33] = flags;
        p[40..52].copy_from_slice(&[1, 1, 8, 10, 0, 0, 0, 7, 0, 0, 0, 9]);
        p.extend((0..payload).map(|i| (seq as usize + i) as u8));
        let len = p.len() as u16;
        put_u16(&mut p, 2, len);
        ipv4_checksum(&mut p[..20]);
        p
    }

    fn super_packet(seq: u32, payload: usize, mss: u16) -> Vec<u8> {
        let mut r = vec![F_NEEDS_CSUM, GSO_TCPV4, 52, 0];
        r.extend_from_slice(&mss.to_le_bytes());
        r.extend_from_slice(&[20, 0, 16, 0]);
        r.extend(segment(seq, payload, 0x18));
        r
    }

    #[test]
    fn a_super_packet_splits_into_segments_that_coalesce_back() {
        let mut out = Vec::new();
        assert_eq!(split(&super_packet(1000, 4000, 1448), &mut out), 3);
        let want: Vec<Vec<u8>> =
            vec![segment(1000, 1448, 0x10), segment(2448, 1448, 0x10), segment(3896, 1104, 0x18)];
        for (got, want) in out.iter().zip(&want) {
            // IP ids differ (one per segment); the rest is the segment as sent.
            assert_eq!(got[..4], want[..4]);
            assert_eq!(got[6..10], want[6..10]);
            assert_eq!(got[12..], want[12..]);
        }
        let joined = coalesce(out);
        assert_eq!(joined.len(), 1);
        let j = &joined[0];
        assert_eq!(j[1], GSO_TCPV4);
        assert_eq!(u16::from_le_bytes([j[4], j[5]]), 1448);
        let ip = &j[VNET_HDR_LEN..];
        assert_eq!(ip.len(), 52 + 4000);
        assert_eq!(u16_at(ip, 2), Some(4052));
        assert_eq!(ip[33], 0x18, "the last segment's PSH");
        assert_eq!(&ip[52..], &segment(1000, 4000, 0x18)[52..]);
    }

    #[test]
    fn gaps_other_flows_and_other_packets_stay_apart() {
        let a = segment(0, 1448, 0x10);
        let gap = segment(2896, 1448, 0x10);
        let mut other = segment(1448, 1448, 0x10);
        other[20] ^= 1; // another source port
        let udp = {
            let mut u = a.clone();
            u[9] = 17;
            u
        };
        let out = coalesce(vec![a.clone(), gap, other, udp, vec![0u8; 3]]);
        assert_eq!(out.len(), 5);
        assert!(out.iter().all(|p| p[1] == 0), "no GSO");
        assert_eq!(out[0][0], F_NEEDS_CSUM);
        assert_eq!(out[3][8], 6, "UDP's checksum offset");
        assert_eq!(out[4][..VNET_HDR_LEN], PLAIN);
        // Plain reads pass whole; junk and a bad super-packet are dropped.
        let mut v = Vec::new();
        let mut plain = PLAIN.to_vec();
        plain.extend_from_slice(&a);
        assert_eq!(split(&plain, &mut v), 1);
        assert_eq!(split(&[1, 2, 3], &mut v), 0);
        let mut bad = super_packet(0, 3000, 1448);
        bad[VNET_HDR_LEN + 9] = 17;
        assert_eq!(split(&bad, &mut v), 0);
        assert_eq!(v.len(), 1);
    }
}
