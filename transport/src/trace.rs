//! Event traces: typed events a connection (and the parts around it) emit, and a qlog
//! writer for them.
//!
//! A [`crate::proto::Connection`] with a sink ([`crate::proto::Connection::set_trace`])
//! hands every [`TraceEvent`] to it together with the connection's `now` (virtual time in
//! the simulator), so the same scenario and seed give the same events. Without a sink an
//! emit point costs one branch: the event is not even built.
//!
//! [`QlogWriter`] serializes events as qlog in its JSON-SEQ form (RFC 7464: every record
//! starts with the record separator 0x1E and ends with a line feed), as
//! draft-ietf-quic-qlog-main-schema specifies it for streaming: one header record
//! (`"qlog_format": "JSON-SEQ"`, `"qlog_version": "0.3"`, the trace's vantage point and
//! relative time), then one record per event `{"time": MS, "name": "CATEGORY:EVENT",
//! "data": {…}}` with `time` in milliseconds since the connection's first instant. Packet
//! events use the QUIC event names where they mean the same thing (so qvis shows them),
//! and carry the multipath path id in `data.path_id`; Braid's own events use the `braid`
//! category.

use std::io::Write;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::Duration;

use serde_json::{Value, json};

use crate::path::{PathId, PathRole, PathStatus};
use crate::time::Instant;

/// The protection level of a traced packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PacketKind {
    /// Initial packet (handshake, keys from the connection id).
    Initial,
    /// Handshake packet.
    Handshake,
    /// 1-RTT (short header) packet.
    OneRtt,
}

impl PacketKind {
    fn qlog(self) -> &'static str {
        match self {
            PacketKind::Initial => "initial",
            PacketKind::Handshake => "handshake",
            PacketKind::OneRtt => "1RTT",
        }
    }
}

/// What happened to a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathEvent {
    /// The path's state was created.
    New,
    /// Path validation succeeded.
    Validated,
    /// Its status changed (locally or by the peer's PATH_STATUS).
    Status(PathStatus),
    /// The retransmission timer found it failed (after repeated timeouts).
    Failed,
    /// Its probe timeout or retransmission timer found it potentially failed: schedulers
    /// skip it and its data in flight is re-injected on the other paths.
    PotentiallyFailed,
    /// A potentially failed path answered again.
    Answered,
    /// A failed path delivered again.
    Recovered,
    /// The path was closed and its state abandoned.
    Abandoned,
}

/// One traced event.
#[derive(Debug, Clone, PartialEq)]
pub enum TraceEvent {
    /// A datagram left (one packet per datagram).
    PacketSent {
        /// Path.
        path: PathId,
        /// Level.
        kind: PacketKind,
        /// Packet number (in the path's space for 1-RTT packets).
        pn: u64,
        /// Datagram size, bytes.
        size: usize,
        /// Frame type names, in order.
        frames: Vec<&'static str>,
    },
    /// A datagram was accepted (authenticated, not a duplicate).
    PacketReceived {
        /// Path.
        path: PathId,
        /// Level.
        kind: PacketKind,
        /// Packet number.
        pn: u64,
        /// Datagram size, bytes.
        size: usize,
        /// Frame type names, in order.
        frames: Vec<&'static str>,
    },
    /// A sent packet was declared lost.
    PacketLost {
        /// Path.
        path: PathId,
        /// Packet number.
        pn: u64,
        /// Datagram size, bytes.
        size: usize,
    },
    /// A received datagram was dropped.
    PacketDropped {
        /// The path its header names, when it parsed.
        path: Option<PathId>,
        /// Datagram size, bytes.
        size: usize,
        /// Why (the drop counter it went to).
        trigger: &'static str,
    },
    /// A path's congestion state after an ACK or a loss.
    Metrics {
        /// Path.
        path: PathId,
        /// Congestion window, bytes.
        cwnd: u64,
        /// Smoothed RTT.
        srtt: Duration,
        /// Pacing rate, bytes/s, when the controller paces.
        pacing_rate: Option<u64>,
        /// Bytes in flight.
        bytes_in_flight: u64,
    },
    /// A rate-feedback report reached the sender's rate controller (TFRC, MARC).
    RateControl {
        /// Path.
        path: PathId,
        /// The report's X_recv, bytes/s.
        x_recv: f64,
        /// The report's loss event rate p.
        p: f64,
        /// The controller's state after the report.
        state: crate::cc::RateControlState,
    },
    /// A path event.
    Path {
        /// Path.
        path: PathId,
        /// What happened.
        event: PathEvent,
        /// The path's radio role.
        role: PathRole,
    },
    /// The scheduler picked paths for a packet with data.
    Scheduler {
        /// The scheduler's name.
        scheduler: &'static str,
        /// The chosen paths, first = the packet's.
        chosen: Vec<PathId>,
        /// What the scheduler compared: expected delivery (EDPF: arrival, S-EDPF: in-order
        /// delivery) of the packet on each path, seconds from now; empty for schedulers
        /// that compare nothing of the kind.
        expected_s: Vec<(PathId, f64)>,
    },
    /// A CODED packet went out.
    FecCodedSent {
        /// Path.
        path: PathId,
        /// First source symbol of its window.
        first: u64,
        /// Symbols in the window.
        count: u64,
    },
    /// Source packets were rebuilt from coded ones.
    FecRecovered {
        /// How many at this step.
        count: u64,
    },
    /// The mode switch decided (aeSUM).
    ModeSwitch {
        /// The forecast rate the decision used, bits/s.
        forecast_bps: f64,
        /// The measured application read rate, bits/s.
        read_rate_bps: f64,
        /// The mode after the decision (`full` or `partial`).
        mode: &'static str,
    },
    /// A playout event of the media client.
    Playout {
        /// `start`, `stall`, `resume` or `frame_lost`.
        event: &'static str,
        /// The frame concerned, when one is.
        frame: Option<u64>,
        /// Buffered media, seconds.
        buffer_s: Option<f64>,
    },
}

/// Receives a connection's events.
pub trait TraceSink: Send {
    /// `ev` happened at `now`.
    fn event(&mut self, now: Instant, ev: &TraceEvent);
}

/// Which end wrote a trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Vantage {
    /// The client.
    Client,
    /// The server.
    Server,
}

/// Writes events as qlog JSON-SEQ records to `W` (see the [module docs](self)).
///
/// Write errors stop the writer (later events are dropped and counted); the trace stays
/// a sequence of complete records up to the failure.
pub struct QlogWriter<W: Write + Send> {
    out: W,
    epoch: Option<Instant>,
    failed: u64,
    line: Vec<u8>,
}

impl<W: Write + Send> QlogWriter<W> {
    /// A writer that has written the header record: `title` names the trace (scenario,
    /// profile, seed…), `vantage` the side.
    pub fn new(mut out: W, title: &str, vantage: Vantage) -> std::io::Result<QlogWriter<W>> {
        let side = match vantage {
            Vantage::Client => "client",
            Vantage::Server => "server",
        };
        let header = json!({
            "qlog_version": "0.3",
            "qlog_format": "JSON-SEQ",
            "title": title,
            "trace": {
                "vantage_point": { "type": side },
                "common_fields": { "time_format": "relative", "reference_time": 0.0 },
            },
        });
        let mut line = vec![0x1e];
        serde_json::to_writer(&mut line, &header).map_err(std::io::Error::other)?;
        line.push(b'\n');
        out.write_all(&line)?;
        Ok(QlogWriter { out, epoch: None, failed: 0, line: Vec::new() })
    }

    /// Events that could not be written.
    pub fn failed(&self) -> u64 {
        self.failed
    }

    /// Flushes the underlying writer.
    pub fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

impl<W: Write + Send> TraceSink for QlogWriter<W> {
    fn event(&mut self, now: Instant, ev: &TraceEvent) {
        if self.failed > 0 {
            self.failed += 1;
            return;
        }
        let epoch = *self.epoch.get_or_insert(now);
        let us = now.as_micros().saturating_sub(epoch.as_micros());
        let (name, data) = record(ev);
        self.line.clear();
        self.line.push(0x1e);
        // Milliseconds with microsecond precision, from integers (exact and stable).
        let time = format!("{}.{:03}", us / 1000, us % 1000);
        self.line.extend_from_slice(b"{\"time\":");
        self.line.extend_from_slice(time.as_bytes());
        self.line.extend_from_slice(b",\"name\":\"");
        self.line.extend_from_slice(name.as_bytes());
        self.line.extend_from_slice(b"\",\"data\":");
        if serde_json::to_writer(&mut self.line, &data).is_err() {
            self.failed += 1;
            return;
        }
        self.line.extend_from_slice(b"}\n");
        if self.out.write_all(&self.line).is_err() {
            self.failed += 1;
        }
    }
}

impl<W: Write + Send> Drop for QlogWriter<W> {
    fn drop(&mut self) {
        let _ = self.out.flush();
    }
}

/// The direction of an emulated path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Server → client.
    Down,
    /// Client → server.
    Up,
}

impl Direction {
    /// `down` or `up` (capture files are `PATH-down.pcap` and `PATH-up.pcap`).
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Down => "down",
            Direction::Up => "up",
        }
    }
}

/// Receives the datagrams of one emulated path and direction as they enter its link.
pub trait CaptureSink: Send {
    /// A datagram of `data.len()` bytes from `from` to `to` entered the link at `now`.
    fn datagram(&mut self, now: Instant, from: SocketAddrV4, to: SocketAddrV4, data: &[u8]);
}

/// The synthetic addresses of a capture: scenario path `path` (0-based) has the client at
/// `10.0.PATH.2:5000` and the server at `10.0.PATH.1:4433`, as in the simulator.
pub fn capture_addrs(path: usize) -> (SocketAddrV4, SocketAddrV4) {
    let p = (path & 0xff) as u8;
    (
        SocketAddrV4::new(Ipv4Addr::new(10, 0, p, 2), CLIENT_PORT),
        SocketAddrV4::new(Ipv4Addr::new(10, 0, p, 1), SERVER_PORT),
    )
}

/// The UDP port of the server side in captures (the Wireshark dissector registers it).
pub const SERVER_PORT: u16 = 4433;
/// The UDP port of the client side in captures.
pub const CLIENT_PORT: u16 = 5000;

/// Writes a classic pcap file (LINKTYPE_IPV4, microsecond timestamps): every datagram
/// wrapped in a synthetic IPv4 header (TTL 64, no options, checksum computed) and a UDP
/// header (checksum 0, which IPv4 allows). Write errors stop the writer.
pub struct PcapWriter<W: Write + Send> {
    out: W,
    /// Timestamp of the epoch instant, µs since the Unix epoch (0 for virtual time).
    base_us: u64,
    ip_id: u16,
    failed: bool,
    rec: Vec<u8>,
}

/// LINKTYPE_IPV4: raw IPv4 packets.
const LINKTYPE_IPV4: u32 = 228;
/// Largest captured datagram.
const SNAPLEN: u32 = 65_535;

impl<W: Write + Send> PcapWriter<W> {
    /// A writer whose file header is written; timestamps are `base_us` + the instant (µs).
    pub fn new(mut out: W, base_us: u64) -> std::io::Result<PcapWriter<W>> {
        let mut h = Vec::with_capacity(24);
        h.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
        h.extend_from_slice(&2u16.to_le_bytes());
        h.extend_from_slice(&4u16.to_le_bytes());
        h.extend_from_slice(&0i32.to_le_bytes());
        h.extend_from_slice(&0u32.to_le_bytes());
        h.extend_from_slice(&SNAPLEN.to_le_bytes());
        h.extend_from_slice(&LINKTYPE_IPV4.to_le_bytes());
        out.write_all(&h)?;
        Ok(PcapWriter { out, base_us, ip_id: 0, failed: false, rec: Vec::new() })
    }

    /// Flushes the underlying writer.
    pub fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

impl<W: Write + Send> CaptureSink for PcapWriter<W> {
    fn datagram(&mut self, now: Instant, from: SocketAddrV4, to: SocketAddrV4, data: &[u8]) {
        if self.failed {
            return;
        }
        let total = 20 + 8 + data.len();
        let Ok(total16) = u16::try_from(total) else { return };
        let ts = self.base_us + now.as_micros();
        let r = &mut self.rec;
        r.clear();
        r.extend_from_slice(&((ts / 1_000_000) as u32).to_le_bytes());
        r.extend_from_slice(&((ts % 1_000_000) as u32).to_le_bytes());
        r.extend_from_slice(&(total as u32).to_le_bytes());
        r.extend_from_slice(&(total as u32).to_le_bytes());
        let ip_start = r.len();
        r.extend_from_slice(&[0x45, 0]);
        r.extend_from_slice(&total16.to_be_bytes());
        r.extend_from_slice(&self.ip_id.to_be_bytes());
        self.ip_id = self.ip_id.wrapping_add(1);
        r.extend_from_slice(&[0x40, 0, 64, 17, 0, 0]); // DF, TTL 64, UDP, checksum below
        r.extend_from_slice(&from.ip().octets());
        r.extend_from_slice(&to.ip().octets());
        let sum = ipv4_checksum(&r[ip_start..ip_start + 20]);
        r[ip_start + 10..ip_start + 12].copy_from_slice(&sum.to_be_bytes());
        r.extend_from_slice(&from.port().to_be_bytes());
        r.extend_from_slice(&to.port().to_be_bytes());
        r.extend_from_slice(&((8 + data.len()) as u16).to_be_bytes());
        r.extend_from_slice(&[0, 0]);
        r.extend_from_slice(data);
        if self.out.write_all(r).is_err() {
            self.failed = true;
        }
    }
}

impl<W: Write + Send> Drop for PcapWriter<W> {
    fn drop(&mut self) {
        let _ = self.out.flush();
    }
}

/// The Internet checksum of an IPv4 header (RFC 791, RFC 1071).
fn ipv4_checksum(h: &[u8]) -> u16 {
    let mut sum: u32 =
        h.chunks(2).map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]))).sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

fn ms(d: Duration) -> f64 {
    d.as_micros() as f64 / 1000.0
}

fn status_name(s: PathStatus) -> &'static str {
    match s {
        PathStatus::Active => "active",
        PathStatus::Backup => "backup",
        PathStatus::Closed => "closed",
    }
}

/// The event's qlog name and data.
fn record(ev: &TraceEvent) -> (&'static str, Value) {
    let frames = |f: &[&'static str]| -> Value {
        f.iter().map(|t| json!({ "frame_type": t })).collect::<Vec<_>>().into()
    };
    match ev {
        TraceEvent::PacketSent { path, kind, pn, size, frames: f } => (
            "transport:packet_sent",
            json!({
                "header": { "packet_type": kind.qlog(), "packet_number": pn },
                "raw": { "length": size },
                "path_id": path.0,
                "frames": frames(f),
            }),
        ),
        TraceEvent::PacketReceived { path, kind, pn, size, frames: f } => (
            "transport:packet_received",
            json!({
                "header": { "packet_type": kind.qlog(), "packet_number": pn },
                "raw": { "length": size },
                "path_id": path.0,
                "frames": frames(f),
            }),
        ),
        TraceEvent::PacketLost { path, pn, size } => (
            "recovery:packet_lost",
            json!({
                "header": { "packet_type": "1RTT", "packet_number": pn },
                "raw": { "length": size },
                "path_id": path.0,
            }),
        ),
        TraceEvent::PacketDropped { path, size, trigger } => (
            "transport:packet_dropped",
            json!({ "raw": { "length": size }, "path_id": path.map(|p| p.0), "trigger": trigger }),
        ),
        TraceEvent::Metrics { path, cwnd, srtt, pacing_rate, bytes_in_flight } => (
            "recovery:metrics_updated",
            json!({
                "path_id": path.0,
                "congestion_window": cwnd,
                "smoothed_rtt": ms(*srtt),
                "pacing_rate": pacing_rate.map(|r| r * 8),
                "bytes_in_flight": bytes_in_flight,
            }),
        ),
        TraceEvent::RateControl { path, x_recv, p, state } => (
            "braid:rate_control",
            json!({
                "path_id": path.0,
                "x_recv": x_recv.round(),
                "p": p,
                "allowed": state.allowed.round(),
                "tfrc": state.tfrc.round(),
                "tokens": state.tokens.map(f64::round),
                "w_send": state.w_send.map(f64::round),
            }),
        ),
        TraceEvent::Path { path, event, role } => {
            let (state, status) = match event {
                PathEvent::New => ("new", None),
                PathEvent::Validated => ("validated", None),
                PathEvent::Status(s) => ("status", Some(status_name(*s))),
                PathEvent::Failed => ("failed", None),
                PathEvent::PotentiallyFailed => ("potentially_failed", None),
                PathEvent::Answered => ("answered", None),
                PathEvent::Recovered => ("recovered", None),
                PathEvent::Abandoned => ("abandoned", None),
            };
            (
                "braid:path_updated",
                json!({ "path_id": path.0, "state": state, "status": status, "role": role.as_str() }),
            )
        }
        TraceEvent::Scheduler { scheduler, chosen, expected_s } => (
            "braid:scheduler_decision",
            json!({
                "scheduler": scheduler,
                "chosen": chosen.iter().map(|p| p.0).collect::<Vec<_>>(),
                "expected_delivery_ms": expected_s
                    .iter()
                    .map(|(p, s)| json!({ "path_id": p.0, "ms": (s * 1e6).round() / 1e3 }))
                    .collect::<Vec<_>>(),
            }),
        ),
        TraceEvent::FecCodedSent { path, first, count } => (
            "braid:fec_coded_sent",
            json!({ "path_id": path.0, "window_first": first, "window_count": count }),
        ),
        TraceEvent::FecRecovered { count } => ("braid:fec_recovered", json!({ "count": count })),
        TraceEvent::ModeSwitch { forecast_bps, read_rate_bps, mode } => (
            "braid:mode_switch",
            json!({
                "forecast_bps": forecast_bps.round(),
                "read_rate_bps": read_rate_bps.round(),
                "mode": mode,
            }),
        ),
        TraceEvent::Playout { event, frame, buffer_s } => (
            "braid:playout",
            json!({
                "event": event,
                "frame": frame,
                "buffer_s": buffer_s.map(|b| (b * 1e3).round() / 1e3),
            }),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pcap_records_wrap_datagrams_in_ipv4_and_udp() {
        let mut buf = Vec::new();
        {
            let mut w = PcapWriter::new(&mut buf, 0).expect("header");
            let (c, s) = capture_addrs(1);
            w.datagram(Instant::from_micros(1_500_000), s, c, &[0x40, 1, 2, 3]);
        }
        assert_eq!(buf.len(), 24 + 16 + 20 + 8 + 4);
        assert_eq!(&buf[20..24], &228u32.to_le_bytes());
        assert_eq!(&buf[24..28], &1u32.to_le_bytes());
        assert_eq!(&buf[28..32], &500_000u32.to_le_bytes());
        let ip = &buf[40..60];
        assert_eq!(ipv4_checksum(ip), 0, "a header with its checksum sums to zero");
        assert_eq!(&ip[12..16], &[10, 0, 1, 1]);
        assert_eq!(&buf[60..62], &4433u16.to_be_bytes());
        assert_eq!(&buf[64..66], &12u16.to_be_bytes());
    }

    #[test]
    fn records_are_json_seq_with_a_header() {
        let mut buf = Vec::new();
        {
            let mut w = QlogWriter::new(&mut buf, "t", Vantage::Client).expect("header");
            w.event(
                Instant::from_micros(5),
                &TraceEvent::PacketSent {
                    path: PathId(1),
                    kind: PacketKind::OneRtt,
                    pn: 7,
                    size: 1200,
                    frames: vec!["ack", "data"],
                },
            );
            w.event(
                Instant::from_micros(2_005),
                &TraceEvent::PacketLost { path: PathId(1), pn: 7, size: 1200 },
            );
        }
        let text = String::from_utf8(buf).expect("utf-8");
        let records: Vec<&str> = text.split('\u{1e}').skip(1).collect();
        assert_eq!(records.len(), 3);
        let header: Value = serde_json::from_str(records[0]).expect("json");
        assert_eq!(header["qlog_format"], "JSON-SEQ");
        assert_eq!(header["qlog_version"], "0.3");
        assert_eq!(header["trace"]["vantage_point"]["type"], "client");
        let sent: Value = serde_json::from_str(records[1]).expect("json");
        assert_eq!(sent["time"], 0.0);
        assert_eq!(sent["data"]["path_id"], 1);
        assert_eq!(sent["data"]["frames"][1]["frame_type"], "data");
        let lost: Value = serde_json::from_str(records[2]).expect("json");
        assert_eq!(lost["time"], 2.0);
        assert_eq!(lost["name"], "recovery:packet_lost");
        assert!(records.iter().all(|r| r.ends_with('\n')));
    }

    #[test]
    fn a_rate_control_record_carries_tfrc_s_rate_and_marc_s_tokens() {
        let state = crate::cc::RateControlState {
            allowed: 50_000.4,
            tfrc: 30_000.0,
            tokens: Some(1_234.6),
            w_send: Some(44_000.0),
        };
        let (name, data) =
            record(&TraceEvent::RateControl { path: PathId(0), x_recv: 43_999.7, p: 0.01, state });
        assert_eq!(name, "braid:rate_control");
        assert_eq!(data["allowed"], 50_000.0);
        assert_eq!(data["tfrc"], 30_000.0);
        assert_eq!(data["tokens"], 1_235.0);
        assert_eq!(data["w_send"], 44_000.0);
        assert_eq!(data["x_recv"], 44_000.0);
        assert_eq!(data["p"], 0.01);
        let tfrc = crate::cc::RateControlState { tokens: None, w_send: None, ..state };
        let (_, data) =
            record(&TraceEvent::RateControl { path: PathId(0), x_recv: 0.0, p: 0.0, state: tfrc });
        assert!(data["tokens"].is_null() && data["w_send"].is_null(), "{data}");
    }
}
