//! iperf3-like throughput runs over the built-in transport (`braid perf`).
//!
//! - [`run_server`] serves bulk transfers on an endpoint until told to stop.
//! - [`run_client`] connects to such a server over one socket per path, receives for a
//!   while and reports throughput per path.
//! - [`run_scenario`] runs a server, the UDP relay emulator for a scenario's paths and the
//!   client in this one process; client path i sends to relay path i.
//!
//! The transfer is bulk, server → client (the direction a scenario's `down` links shape),
//! in messages of [`MESSAGE_BYTES`] bytes: the unlimited stream of
//! [`braid_transport::bulk`]. The client checks every byte and every message id and fails
//! on the first difference or gap. It reports each interval as it ends (an [`Event`]) and
//! returns a [`PerfReport`] at the end.
//!
//! At the end the client asks the server for its per-path counters (RTT, retransmissions)
//! with a stop message (any message from the client stops the server's sender); in
//! scenario mode they are read from the in-process server directly. The sender's
//! congestion control and scheduler are the server's configuration.
//!
//! Control messages are JSON and never exactly [`MESSAGE_BYTES`] long, so the client
//! tells the server's counters apart from data still queued ahead of them.

mod client;
mod report;
mod server;

use std::net::SocketAddr;
use std::time::Duration;

use braid_transport::bulk;
use braid_transport::proto::ConnectionStats;
use bytes::Bytes;
use serde::{Deserialize, Serialize};

pub(crate) use client::scenario_paths;
pub use client::{ClientOptions, ClientRun, Event, PerfPath, run_client, run_scenario};
pub use report::{
    End, EndPath, HostPort, Interval, IntervalStream, IntervalSum, ModeChange, PerfReport, Start,
    StartPath, Totals, fmt_bytes, fmt_rate,
};
pub use server::{ServedConnection, ServerEvent, run_server};

use crate::driver::DriverError;
use crate::relay::RelayError;

/// Bytes per data message.
pub const MESSAGE_BYTES: usize = bulk::MESSAGE_BYTES;

/// How long the client waits for the server's counters after the run while nothing
/// arrives. The counters follow everything the server had queued (up to its send
/// buffer, 8 MiB, which takes seconds to drain at a few Mbit/s): while that data keeps
/// arriving they are on their way, so the wait restarts with each message.
pub const END_EXCHANGE: Duration = Duration::from_secs(2);
/// The longest the client waits for the counters in all.
pub const END_EXCHANGE_MAX: Duration = Duration::from_secs(30);

/// Checks message `id` of the bulk stream: `Ok` when it is intact and next in order, else
/// the error that says what was wrong (every perf client, whatever its transport).
// The error ends the run, so its size (PerfError's, as every perf function returns) costs
// nothing on the path that matters.
#[allow(clippy::result_large_err)]
pub fn verify(
    verifier: &mut braid_transport::bulk::BulkVerifier,
    id: u64,
    data: &[u8],
) -> Result<(), PerfError> {
    use braid_transport::bulk::Verdict;
    match verifier.on_message(id, data) {
        Verdict::Intact => Ok(()),
        Verdict::OutOfOrder { expected } => Err(PerfError::OutOfOrder { id, expected }),
        Verdict::Corrupt => Err(PerfError::Corrupt { id, len: data.len() }),
        Verdict::Gap => Err(PerfError::Lost { id }),
    }
}

/// Why a perf run failed.
#[derive(Debug, thiserror::Error)]
pub enum PerfError {
    /// The server could not listen.
    #[error("listening on {addr}")]
    Listen {
        /// The address asked for.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: DriverError,
    },
    /// The in-process server of a scenario run could not start.
    #[error("starting the in-process server")]
    InProcessServer(#[source] DriverError),
    /// The in-process server stopped before the client connected.
    #[error("the in-process server stopped")]
    InProcessServerStopped,
    /// The relay emulator could not start.
    #[error(transparent)]
    Relay(#[from] RelayError),
    /// The client could not connect.
    #[error("connecting{}", remote.map(|r| format!(" to {r}")).unwrap_or_default())]
    Connect {
        /// The server (its first path's remote).
        remote: Option<SocketAddr>,
        /// Why.
        #[source]
        source: DriverError,
    },
    /// A message arrived out of order.
    #[error("message {id} arrived where {expected} was expected")]
    OutOfOrder {
        /// The id read.
        id: u64,
        /// The id expected.
        expected: u64,
    },
    /// A message's bytes differ from what was sent.
    #[error("message {id} is corrupt ({len} bytes, content differs from what was sent)")]
    Corrupt {
        /// Its id.
        id: u64,
        /// Its length.
        len: usize,
    },
    /// The sender abandoned a message.
    #[error("message {id} was lost (abandoned by the sender)")]
    Lost {
        /// Its id.
        id: u64,
    },
    /// The connection ended during the run.
    #[error("connection to {remote} lost after {after_s:.1} s ({} received intact)", fmt_bytes(*.verified_bytes))]
    ConnectionLost {
        /// The server.
        remote: SocketAddr,
        /// Seconds into the run.
        after_s: f64,
        /// Bytes verified until then.
        verified_bytes: u64,
        /// Why.
        #[source]
        source: DriverError,
    },
}

/// The stream the server sends.
fn source() -> bulk::BulkSource {
    bulk::BulkSource::new(MESSAGE_BYTES, None)
}

/// The stop message the client sends at the end.
#[derive(Serialize)]
struct Stop {
    stop: bool,
}

/// The server's counters, its answer to the stop message.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
struct ServerCounters {
    /// Format marker (1).
    braid_perf_report: u32,
    /// Data bytes the server queued.
    bytes_queued: u64,
    /// Payload bytes sent for the first time (all paths).
    bytes_sent: Option<u64>,
    /// Payload bytes sent again.
    retransmitted_bytes: u64,
    /// Per path.
    paths: Vec<ServerPath>,
}

/// One path's counters on the server.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
struct ServerPath {
    id: u32,
    data_bytes_sent: u64,
    packets_lost: u64,
    srtt_ms: f64,
}

impl ServerCounters {
    fn new(bytes_queued: u64, stats: Option<&ConnectionStats>) -> ServerCounters {
        ServerCounters {
            braid_perf_report: 1,
            bytes_queued,
            bytes_sent: Some(stats.map_or(0, first_sent)),
            retransmitted_bytes: stats.map_or(0, |s| s.retransmitted_bytes),
            paths: stats
                .map(|s| {
                    s.paths
                        .iter()
                        .map(|p| ServerPath {
                            id: p.id.0,
                            data_bytes_sent: p.data_bytes_sent,
                            packets_lost: p.packets_lost,
                            srtt_ms: p.srtt.as_secs_f64() * 1e3,
                        })
                        .collect()
                })
                .unwrap_or_default(),
        }
    }
}

/// Payload bytes sent for the first time (all paths): what the sender put on the network.
fn first_sent(s: &ConnectionStats) -> u64 {
    let all: u64 = s.paths.iter().map(|p| p.data_bytes_sent).sum();
    all.saturating_sub(s.retransmitted_bytes)
}

/// A control message: JSON, never exactly [`MESSAGE_BYTES`] long.
fn control_message<T: Serialize>(v: &T) -> Bytes {
    let mut s = serde_json::to_vec(v).unwrap_or_else(|_| b"{}".to_vec());
    if s.len() == MESSAGE_BYTES {
        s.push(b' ');
    }
    Bytes::from(s)
}

#[cfg(test)]
mod tests;
