//! What a perf client measured: the `-J` report (`{"start", "intervals", "end"}`) and the
//! iperf3-style units its text uses.

use serde::{Deserialize, Serialize};

/// The whole run, as `braid perf client -J` prints it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PerfReport {
    /// What was connected, how.
    pub start: Start,
    /// One entry per interval.
    pub intervals: Vec<Interval>,
    /// Totals.
    pub end: End,
}

impl PerfReport {
    /// The report as pretty JSON, keys in alphabetical order at every level.
    pub fn to_json_pretty(&self) -> Result<String, serde_json::Error> {
        // Through a `Value`, whose maps keep their keys sorted.
        serde_json::to_string_pretty(&serde_json::to_value(self)?)
    }
}

/// The server address of a run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostPort {
    /// IP address.
    pub host: String,
    /// UDP port.
    pub port: u16,
}

/// How the run started.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Start {
    /// The server.
    pub connecting_to: HostPort,
    /// The scenario emulated (scenario mode only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scenario: Option<String>,
    /// The transport profile.
    pub profile: String,
    /// The run's length, s.
    pub time_s: f64,
    /// Bytes per data message.
    pub message_bytes: usize,
    /// The connection id, 16 hex digits.
    pub connection_id: String,
    /// The client's paths, in path order.
    pub paths: Vec<StartPath>,
}

/// One client path at the start.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StartPath {
    /// Its name (scenario path, interface or `pathN`).
    pub name: String,
    /// The socket's local address.
    pub local: String,
    /// Where it sends.
    pub remote: String,
    /// Its role (`wifi`, `lte`, `3g`, `wired`).
    pub role: String,
    /// The interface it is bound to (empty: none).
    pub iface: String,
}

/// One interval's throughput.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    /// Per path.
    pub streams: Vec<IntervalStream>,
    /// All paths.
    pub sum: IntervalSum,
}

/// One path over one interval.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IntervalStream {
    /// The path's index.
    pub socket: usize,
    /// Its name.
    pub name: String,
    /// Interval start, s since the run started.
    pub start: f64,
    /// Interval end, s.
    pub end: f64,
    /// Its length, s.
    pub seconds: f64,
    /// Payload bytes received on the path (first copies).
    pub bytes: u64,
    /// `bytes`·8 / `seconds`.
    pub bits_per_second: f64,
}

/// All paths over one interval.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IntervalSum {
    /// Interval start, s since the run started.
    pub start: f64,
    /// Interval end, s.
    pub end: f64,
    /// Its length, s.
    pub seconds: f64,
    /// Payload bytes received on every path.
    pub bytes: u64,
    /// `bytes`·8 / `seconds`.
    pub bits_per_second: f64,
}

impl IntervalSum {
    /// `bytes` received on every path from `start` to `end` (s since the run started; an
    /// empty interval counts as 1 ns, so the rate stays finite).
    pub fn new(start: f64, end: f64, bytes: u64) -> IntervalSum {
        let seconds = (end - start).max(1e-9);
        IntervalSum { start, end, seconds, bytes, bits_per_second: bytes as f64 * 8.0 / seconds }
    }

    /// The same interval for one path: path `socket`, called `name`, received `bytes`.
    pub fn stream(&self, socket: usize, name: String, bytes: u64) -> IntervalStream {
        let sum = IntervalSum::new(self.start, self.end, bytes);
        IntervalStream {
            socket,
            name,
            start: sum.start,
            end: sum.end,
            seconds: sum.seconds,
            bytes,
            bits_per_second: sum.bits_per_second,
        }
    }
}

/// Bytes over the run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Totals {
    /// Bytes.
    pub bytes: u64,
    /// The run's length, s.
    pub seconds: f64,
    /// `bytes`·8 / `seconds`.
    pub bits_per_second: f64,
}

/// The run's totals.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct End {
    /// What the client read and verified.
    pub sum_received: Totals,
    /// What the sender put on the network for the first time (the received bytes when
    /// the sender's counters are unknown).
    pub sum_sent: Totals,
    /// Per path.
    pub paths: Vec<EndPath>,
    /// Every byte read was checked (a run with a wrong byte fails instead).
    pub verified: bool,
    /// The RTTs and retransmissions are the sender's.
    pub sender_counters: bool,
    /// Configured capacity of every path's server → client direction (scenario mode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity_bps: Option<f64>,
    /// Goodput over that capacity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share_of_capacity: Option<f64>,
    /// The client's radio energy over the run, J (kernel runs: each path's radio model
    /// driven by its subflows' bytes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy_j: Option<f64>,
    /// Path modes over the run (`kernel-mptcp-qe`: aeSUM's, each put in force), oldest
    /// first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mode_timeline: Vec<ModeChange>,
    /// `kernel-mptcp-qe`: mode switches aeSUM decided that could not be put in force (an
    /// endpoint's backup flag could not be changed), so did not happen: they are not in
    /// `mode_timeline` and no Partial time accrued for them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_mode_switches: Option<u64>,
}

/// A path mode and when it began.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModeChange {
    /// Seconds since the run started.
    pub t_s: f64,
    /// `Full` or `Partial`.
    pub mode: String,
}

/// One path over the run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EndPath {
    /// Its name.
    pub name: String,
    /// Payload bytes received on it (first copies).
    pub bytes: u64,
    /// `bytes`·8 / the run's length.
    pub bits_per_second: f64,
    /// Smoothed RTT, ms (the sender's when known, else the client's).
    pub rtt_ms: f64,
    /// Packets the sender declared lost on it.
    pub retransmits: u64,
    /// Configured capacity of its server → client direction, bit/s (0: unknown).
    pub capacity_bps: f64,
    /// Why the path failed (empty: it did not).
    pub error: String,
    /// Its radio's energy, J (kernel runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy_j: Option<f64>,
}

/// Bytes in iperf3's units: `"457 KBytes"`, `"2.84 MBytes"`, `"1.02 GBytes"`.
pub fn fmt_bytes(b: u64) -> String {
    let b = b as f64;
    if b >= 1024.0 * 1024.0 * 1024.0 {
        format!("{:.2} GBytes", b / (1024.0 * 1024.0 * 1024.0))
    } else if b >= 1024.0 * 1024.0 {
        format!("{:.2} MBytes", b / (1024.0 * 1024.0))
    } else {
        format!("{:.0} KBytes", b / 1024.0)
    }
}

/// A rate in iperf3's units: `"431 Kbits/sec"`, `"7.62 Mbits/sec"`, `"1.20 Gbits/sec"`.
pub fn fmt_rate(bps: f64) -> String {
    if bps >= 1e9 {
        format!("{:.2} Gbits/sec", bps / 1e9)
    } else if bps >= 1e6 {
        format!("{:.2} Mbits/sec", bps / 1e6)
    } else {
        format!("{:.0} Kbits/sec", bps / 1e3)
    }
}
