//! The sender's reports on a side channel: UDP datagrams from the server to a socket the
//! client opened on its WiFi address.
//!
//! In-band reports ([`super::meter::SenderReport`] control frames) queue behind the
//! stream: a player reads no faster than it plays, so the kernel's buffers ahead of it
//! hold seconds of media, and a report read now describes the WiFi subflow of seconds
//! ago (measured on the bed: up to 3 s late; after a WiFi cut, reports sent before the
//! cut are re-injected over LTE and arrive later still). aeSUM needs the WiFi figure of
//! the last interval, so the client also asks for each report as a datagram: it binds a
//! UDP socket on its WiFi address and sends, in-band, where to and a random 128-bit token
//! ([`ReportReceiver::request`]); the server sends every report there, token first, if
//! that address is one the connection's subflows come from ([`ReportSender::for_peer`]:
//! a client cannot aim the reports at a third party). A
//! datagram without the token, or not a newer report, is dropped. The datagrams cross
//! WiFi itself, so a cut WiFi stops them and aeSUM falls back to WiFi's arrivals. Behind
//! a NAT that drops them, the client simply has no side reports (the same fallback).

use std::net::{IpAddr, SocketAddr, UdpSocket};

use serde::{Deserialize, Serialize};

use super::meter::SenderReport;

/// The longest report datagram accepted.
const MAX_DATAGRAM: usize = 16 * 1024;

/// The client's request, sent in-band as a control frame.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
struct ReportTo {
    braid_report_to: String,
    token: String,
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The client's end: a UDP socket that reports arrive on.
#[derive(Debug)]
pub struct ReportReceiver {
    sock: UdpSocket,
    token: [u8; 16],
    last_seq: Option<u64>,
    /// Datagrams dropped (no token, not a report, or older than one already taken).
    pub dropped: u64,
}

impl ReportReceiver {
    /// A receiver on `ip` (an ephemeral port), with a fresh random token.
    pub fn bind(ip: IpAddr) -> std::io::Result<ReportReceiver> {
        let sock = UdpSocket::bind(SocketAddr::new(ip, 0))?;
        sock.set_nonblocking(true)?;
        let mut token = [0u8; 16];
        getrandom::fill(&mut token).map_err(|e| std::io::Error::other(e.to_string()))?;
        Ok(ReportReceiver { sock, token, last_seq: None, dropped: 0 })
    }

    /// The control frame asking the server to send its reports here.
    pub fn request(&self) -> Vec<u8> {
        let to = self.sock.local_addr().map(|a| a.to_string()).unwrap_or_default();
        serde_json::to_vec(&ReportTo { braid_report_to: to, token: hex(&self.token) })
            .unwrap_or_default()
    }

    /// The newest report among the datagrams waiting, if any is newer than the last one
    /// taken.
    pub fn poll(&mut self) -> Option<SenderReport> {
        let mut buf = [0u8; MAX_DATAGRAM];
        let mut newest = None;
        while let Ok((n, _)) = self.sock.recv_from(&mut buf) {
            let Some(body) = buf.get(..n).and_then(|d| d.strip_prefix(&self.token[..])) else {
                self.dropped += 1;
                continue;
            };
            match SenderReport::parse(body) {
                Some(r) if self.last_seq.is_none_or(|s| r.seq > s) => {
                    self.last_seq = Some(r.seq);
                    newest = Some(r);
                }
                _ => self.dropped += 1,
            }
        }
        newest
    }
}

/// The server's end: where the client asked for the reports.
#[derive(Debug)]
pub struct ReportSender {
    sock: UdpSocket,
    to: SocketAddr,
    token: [u8; 16],
}

impl ReportSender {
    /// The sender a client's request asks for (`None`: not such a request, or no
    /// socket).
    pub fn from_request(body: &[u8]) -> Option<ReportSender> {
        let r: ReportTo = serde_json::from_slice(body).ok()?;
        let to: SocketAddr = r.braid_report_to.parse().ok()?;
        if r.token.len() != 32 {
            return None;
        }
        let mut token = [0u8; 16];
        for (i, t) in token.iter_mut().enumerate() {
            *t = u8::from_str_radix(r.token.get(2 * i..2 * i + 2)?, 16).ok()?;
        }
        let any: SocketAddr = match to {
            SocketAddr::V4(_) => "0.0.0.0:0".parse().ok()?,
            SocketAddr::V6(_) => "[::]:0".parse().ok()?,
        };
        let sock = UdpSocket::bind(any).ok()?;
        sock.set_nonblocking(true).ok()?;
        Some(ReportSender { sock, to, token })
    }

    /// Where the reports go.
    pub fn to(&self) -> SocketAddr {
        self.to
    }

    /// The sender a client's request asks for, if it names one of the addresses the
    /// connection's subflows come from (`peers`): a client may not point the reports at
    /// anyone else.
    pub fn for_peer(body: &[u8], peers: &[SocketAddr]) -> Option<ReportSender> {
        ReportSender::from_request(body).filter(|s| peers.iter().any(|p| p.ip() == s.to.ip()))
    }

    /// Sends `report` (a full socket buffer drops it).
    pub fn send(&self, report: &SenderReport) {
        let mut d = self.token.to_vec();
        d.extend_from_slice(&report.to_bytes());
        if d.len() <= MAX_DATAGRAM {
            let _ = self.sock.send_to(&d, self.to);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_travel_with_the_token_and_only_newer_ones_count() {
        let mut rx = ReportReceiver::bind("127.0.0.1".parse().unwrap()).unwrap();
        let tx = ReportSender::from_request(&rx.request()).unwrap();
        let report = |seq| SenderReport { braid_sender_report: 1, seq, ..SenderReport::default() };
        tx.send(&report(2));
        tx.send(&report(1));
        // A forger without the token.
        let other = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut forged = vec![0u8; 16];
        forged.extend_from_slice(&report(9).to_bytes());
        other.send_to(&forged, rx.sock.local_addr().unwrap()).unwrap();
        other.send_to(b"junk", rx.sock.local_addr().unwrap()).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert_eq!(rx.poll().map(|r| r.seq), Some(2));
        assert_eq!(rx.dropped, 3);
        assert!(rx.poll().is_none());
        assert!(
            ReportSender::from_request(b"{\"braid_report_to\":\"x\",\"token\":\"00\"}").is_none()
        );
        assert!(ReportSender::from_request(b"\xff").is_none());
    }
}
