//! The discrete-event simulator: endpoints, links and cross traffic in virtual time.
//!
//! One run is a pure function of (scenario, profile, seed): a single thread, a virtual
//! clock, a binary heap of wake-ups ordered by (time, component kind, index), and one
//! ChaCha8 stream per component derived from the seed. Same inputs ⇒ byte-identical
//! [`SessionReport`].
//!
//! What runs:
//! - **Links**: one [`braid_netem::Link`] per scenario link; a path's `down` chain carries
//!   server→client datagrams, its `up` chain client→server ones. A named link crossed by
//!   several paths or flows is one object, so they share its queue and rate.
//! - **The session**: a client and a server [`braid_transport::proto::Connection`] of the chosen
//!   profile. All-path profiles open every scenario path (path 0 at connect, the others once
//!   connected); one-path profiles use the first path or [`RunOptions::path`]. Addresses
//!   are fabricated (`10.0.<path>.2:5000` client, `10.0.<path>.1:4433` server); no socket
//!   is opened.
//! - **The workload** ([`Workload`]): [`Bulk`] for bulk scenarios, [`CbrStream`] for
//!   stream scenarios with a `cbr` source (reader `player` reads everything, `pattern`
//!   reads at the scripted rates); the media session of the player plugs in through
//!   [`run_with_workload`].
//! - **Cross traffic** through the same link objects: `reno` = a `tcp`-profile connection
//!   pair doing bulk; `tfrc` the same with the `tfrc` profile; `cbr`; `onoff` (Pareto ON
//!   and OFF times with the given means and shape, CBR at `rate` while ON); `flash` (short
//!   `tcp` flows of `flow_bytes` starting uniformly in `[start_s, stop_s]`, each closing when
//!   done). Cross traffic on a `link` crosses only that link and returns over a private
//!   unlimited link with the same delay; cross traffic on a `path` crosses its down chain
//!   and returns over its up chain. CBR and ON/OFF rates count the 28 header bytes, like
//!   link rates.
//! - **Events** at their times: down / up / set on a link, or on every link of a path's
//!   chains (`direction` picks down, up or both).
//!
//! A connection timer at or before the current instant is served 1 µs later, so a timer
//! the connection cannot clear (say, a deadline rounded down to the microsecond) never
//! stops virtual time; more than two million wake-ups at one instant end the run with
//! [`SimError::Stalled`].
//!
//! Report figures: goodput = bytes the client application read ×8 / duration; delay =
//! send_message → read_message per message; per-path throughput = new payload bytes the
//! client received on the path; RTT = the server's smoothed RTT on it at the end;
//! `time_active_s` = 100 ms bins in which the path delivered data.

mod engine;
mod node;
pub mod report;
pub mod workload;

use std::time::Duration;

pub use engine::main_flow_config;
pub use report::{
    DelayPercentiles, EnergyReport, PathReport, SeriesRow, SessionReport, StreamReport, TimeSeries,
};
pub use workload::{
    Bulk, CbrPlayout, CbrPlayoutRule, CbrStream, DeliveryCheck, ReadPattern, Workload,
    WorkloadStats,
};

use braid_netem::LinkCounters;
use braid_netem::scenario::{PatternPeriod, Playout, Reader, Scenario, StreamSource, WorkloadKind};
use braid_transport::profile::Profile;
use braid_transport::time::Instant;
use braid_transport::trace::{CaptureSink, Direction, TraceSink, Vantage};
use std::sync::Arc;

/// Per-run options.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunOptions {
    /// Seed; `None` = the scenario's.
    pub seed: Option<u64>,
    /// The path a one-path profile uses (by name); `None` = the scenario's first.
    pub path: Option<String>,
    /// Time-series bin width; zero = 100 ms.
    pub series_interval: Duration,
    /// The main flow's receive buffer (and so its flow-control window), bytes; `None` =
    /// the transport's default. A media client keeps it small so that its own buffer,
    /// not the transport's, decides how far ahead the server may send.
    pub recv_buffer_bytes: Option<u64>,
    /// The client's radio parameters per role (the built-in ones unless replaced).
    pub power: braid_transport::energy::PowerModels,
    /// qlog traces of the main flow and captures of its paths; none by default.
    pub trace: TraceHooks,
    /// Protect packets with the real AEAD (AES-128-GCM); `false` (the default) uses the
    /// null cipher of [`braid_transport::proto::crypto::null`]: the same handshake, packet sizes and
    /// code paths, hence the same results, without the cipher work.
    pub protect: bool,
}

/// Makes the trace sinks and path captures of a run (one call per sink, when the run
/// starts). Runs differ by profile and seed, so a factory can name its files after them.
pub trait TraceFactory: Send + Sync {
    /// The trace of the main flow's client or server.
    fn connection(&self, profile: &str, seed: u64, vantage: Vantage) -> Option<Box<dyn TraceSink>>;
    /// The capture of scenario path `path` in `direction`, taken where a datagram of the
    /// main flow enters the path's first link (before any loss). Addresses as in
    /// [`braid_transport::trace::capture_addrs`]; virtual timestamps.
    fn capture(
        &self,
        profile: &str,
        seed: u64,
        path: &str,
        direction: Direction,
    ) -> Option<Box<dyn CaptureSink>>;
    /// Where the main flow's TLS secrets go (the client side logs them), if anywhere.
    fn key_log(&self) -> Option<Arc<dyn rustls::KeyLog>> {
        None
    }
}

/// The [`TraceFactory`] of a run, if any. Compares equal to any other (options compare
/// by what they run, and tracing changes nothing the run does).
#[derive(Clone, Default)]
pub struct TraceHooks(pub Option<Arc<dyn TraceFactory>>);

impl std::fmt::Debug for TraceHooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() { "TraceHooks(on)" } else { "TraceHooks(off)" })
    }
}

impl PartialEq for TraceHooks {
    fn eq(&self, _: &TraceHooks) -> bool {
        true
    }
}

/// Why a run could not happen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SimError {
    /// `--path` names no path of the scenario.
    #[error("unknown path \"{0}\"")]
    UnknownPath(String),
    /// A profile that cross traffic needs is missing.
    #[error("cross traffic needs profile \"{0}\": {1}")]
    Profile(String, String),
    /// The scenario asks for something the simulator cannot run by itself.
    #[error("{0}")]
    Unsupported(String),
    /// Components kept waking each other at one instant without time advancing.
    #[error("simulation stalled at {0:?}")]
    Stalled(Instant),
}

/// Everything a run produced.
#[derive(Clone, Debug, PartialEq)]
pub struct SimResult {
    /// The session report.
    pub report: SessionReport,
    /// Packets the transport declared lost and then saw acknowledged (spurious losses,
    /// both endpoints, like [`SessionReport::lost_packets`]).
    pub spurious_losses: u64,
    /// Per-path throughput per interval (for CSV).
    pub series: TimeSeries,
    /// One entry per `[[cross]]`.
    pub cross: Vec<CrossResult>,
    /// Integrity of what the client read.
    pub check: DeliveryCheck,
    /// Every link's counters (scenario links, then private return links).
    pub links: Vec<LinkResult>,
    /// When a bulk transfer of a given size completed, s.
    pub completed_s: Option<f64>,
    /// Wake-ups processed.
    pub events: u64,
    /// Datagrams addressed to nowhere (a bug if not 0).
    pub unroutable: u64,
    /// The main flow's connection closed before its workload was done (every path down
    /// for the idle timeout, or the peer closed): the run, and the report's duration,
    /// end at that moment.
    pub stopped: Option<StreamStop>,
    /// The `[[node]]` the main flow crossed, if any.
    pub node: Option<NodeResult>,
}

/// What a `[[node]]` on the main flow's path saw.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeResult {
    /// The node's name.
    pub name: String,
    /// Message bytes the node had received in order from the upstream leg by the end of
    /// each bin of [`SimResult::series`] (cumulative, one entry per row).
    pub arrived_bytes: Vec<u64>,
    /// The most the node held at once, bytes (the report's `proxy_buffer_bytes`).
    pub peak_buffer_bytes: u64,
    /// The upstream leg's sender's smoothed RTT at the end, ms (0 before any sample).
    pub upstream_rtt_ms: f64,
}

/// Why and when a simulated session's connection closed before its end.
#[derive(Clone, Debug, PartialEq)]
pub struct StreamStop {
    /// Virtual time of the close, s.
    pub at_s: f64,
    /// Why it closed, as one line.
    pub reason: String,
}

impl std::fmt::Display for StreamStop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the stream stopped at {:.1} s: {}", self.at_s, self.reason)
    }
}

/// Cross traffic results.
#[derive(Clone, Debug, PartialEq)]
pub struct CrossResult {
    /// `reno`, `tfrc`, `cbr`, `onoff` or `flash`.
    pub kind: String,
    /// The link or path it crossed.
    pub target: String,
    /// Flows or sources.
    pub flows: u32,
    /// Flows that finished (flash).
    pub completed: u32,
    /// Bytes delivered to the receivers (application bytes for connections, datagram
    /// bytes for cbr/onoff).
    pub bytes_delivered: u64,
    /// `bytes_delivered` ×8 over `[start_s, stop_s]`.
    pub throughput_bps: f64,
}

/// One link's counters at the end.
#[derive(Clone, Debug, PartialEq)]
pub struct LinkResult {
    /// Link name.
    pub name: String,
    /// Its counters.
    pub counters: LinkCounters,
}

/// Runs `scenario` with `profile` and returns the session report.
pub fn run(
    scenario: &Scenario,
    profile: &Profile,
    opts: &RunOptions,
) -> Result<SessionReport, SimError> {
    run_detailed(scenario, profile, opts).map(|r| r.report)
}

/// Runs `scenario` with `profile`; the report plus time series and diagnostics.
///
/// Bulk workloads run [`Bulk`]; stream workloads with a `cbr` source run [`CbrStream`]
/// (its reader per the scenario's `reader`; period `"rtt"` = the first path's base RTT,
/// the sum of its links' delays both ways; its playout rule per `playout`, its client
/// buffer per `buffer_s` / `buffer_bytes`; `oracle` needs a clip). Clip streams need the media session:
/// [`run_with_workload`].
pub fn run_detailed(
    scenario: &Scenario,
    profile: &Profile,
    opts: &RunOptions,
) -> Result<SimResult, SimError> {
    let workload: Box<dyn Workload> = match &scenario.workload.kind {
        WorkloadKind::Bulk { bytes } => Box::new(Bulk::new(*bytes, true)),
        WorkloadKind::Stream(st) => match &st.source {
            StreamSource::Cbr { rate_bps, packet_bytes } => {
                let pattern = match &st.reader {
                    Reader::Player => ReadPattern::All,
                    Reader::Pattern { rates_bps, period } => ReadPattern::Rates {
                        rates_bps: rates_bps.clone(),
                        period: match period {
                            PatternPeriod::Millis(ms) => Duration::from_secs_f64(ms / 1000.0),
                            PatternPeriod::Rtt => base_rtt(scenario),
                        },
                    },
                };
                let rule = match st.playout {
                    Playout::Fixed => CbrPlayoutRule::FIXED,
                    Playout::Media3 => CbrPlayoutRule::MEDIA3,
                    Playout::Adaptive => CbrPlayoutRule::Adaptive,
                    Playout::Oracle => {
                        return Err(SimError::Unsupported(
                            "the oracle playout policy needs a clip stream (a cbr stream \
                             takes fixed, media3 or adaptive)"
                                .into(),
                        ));
                    }
                };
                Box::new(
                    CbrStream::new(*rate_bps, *packet_bytes as usize, pattern)
                        .with_media(profile.media)
                        .with_rule(rule)
                        .with_buffer(st.buffer_s, st.buffer_bytes)
                        .ending_at(Instant::from_duration(scenario.duration)),
                )
            }
            StreamSource::Clip(_) => {
                return Err(SimError::Unsupported(
                    "a clip stream needs the media session (run_with_workload)".into(),
                ));
            }
        },
    };
    run_with_workload(scenario, profile, opts, workload)
}

/// The first path's base RTT: its links' delays, both ways (at least 1 ms).
fn base_rtt(scenario: &Scenario) -> Duration {
    let Some(p) = scenario.paths.first() else { return Duration::from_millis(1) };
    let d: Duration = p
        .down
        .iter()
        .chain(&p.up)
        .filter_map(|&l| scenario.links.get(l))
        .map(|l| l.config.delay)
        .sum();
    d.max(Duration::from_millis(1))
}

/// Runs `scenario` with `profile`, the session driven by `workload`.
pub fn run_with_workload(
    scenario: &Scenario,
    profile: &Profile,
    opts: &RunOptions,
    workload: Box<dyn Workload>,
) -> Result<SimResult, SimError> {
    let seed = opts.seed.unwrap_or(scenario.seed);
    engine::Sim::new(scenario, profile, opts, workload)?.run(&profile.name, seed)
}

#[cfg(test)]
mod node_tests;
#[cfg(test)]
mod policy_tests;
#[cfg(test)]
mod scenario_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tfrc_tests;
