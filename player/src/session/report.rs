//! Session reports (docs/REFERENCE.md, "Session report"): every report the player assembles is
//! built by [`build`] from a session's [`SessionFigures`], and every `--report FILE` is
//! written by [`write`].
//!
//! The simulator measures its own figures and returns its report whole
//! ([`braid_sim::SimResult::report`]); a real-time session's come from its
//! [`PlayOutcome`] ([`of_outcome`]), and a pane still playing has an estimate from its
//! live statistics ([`snapshot`]).

use std::path::Path;

use anyhow::Context as _;
use braid_netem::scenario::Scenario;
use braid_sim::{DelayPercentiles, EnergyReport, PathReport, SessionReport, StreamReport};
use braid_transport::energy::Battery;

use super::live::LiveStats;
use super::realtime::PlayOutcome;

/// What a report is labelled with.
#[derive(Clone, Debug, PartialEq)]
pub struct ReportLabel {
    /// Scenario name.
    pub scenario: String,
    /// Seed.
    pub seed: u64,
    /// The viewer's battery capacity, J (`--battery`, or the scenario's `battery_j`): the
    /// report's residual battery is what it leaves. `None`: no residual battery.
    pub battery_j: Option<f64>,
}

impl ReportLabel {
    /// A session that ran over `scenario`'s paths with its seed and battery.
    pub fn for_scenario(scenario: &Scenario) -> ReportLabel {
        ReportLabel {
            scenario: scenario.name.clone(),
            seed: scenario.seed,
            battery_j: scenario.workload.battery_j,
        }
    }

    /// A session with no scenario behind it (`braid play`, an address opened in the
    /// window): named `name`, seed 0, no battery.
    pub fn named(name: &str) -> ReportLabel {
        ReportLabel { scenario: name.to_string(), seed: 0, battery_j: None }
    }
}

/// What a session measured, before the figures derived from it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SessionFigures {
    /// Session length, s.
    pub duration_s: f64,
    /// Message payload bytes handed to the application.
    pub bytes_delivered: u64,
    /// Payload bytes sent again after losses.
    pub retransmitted_bytes: u64,
    /// Packets declared lost.
    pub lost_packets: u64,
    /// Bytes sent more than once on purpose (the streaming code's CODED frames).
    pub redundant_bytes: u64,
    /// Datagrams that failed packet authentication.
    pub unauthenticated_datagrams: u64,
    /// The loss counters could not be read (see `SessionReport::loss_unmeasured`).
    pub loss_unmeasured: bool,
    /// In-order delivery delay.
    pub delay_ms: DelayPercentiles,
    /// Per path, in path order.
    pub paths: Vec<PathFigures>,
    /// Stream results.
    pub stream: Option<StreamReport>,
    /// Radio energy, when a radio model ran.
    pub energy: Option<EnergyFigures>,
    /// The sender's longest failover, s, when known.
    pub failover_time_s: Option<f64>,
}

/// One path's measurements.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PathFigures {
    /// Name.
    pub name: String,
    /// Role.
    pub role: String,
    /// New payload bytes the client received on it.
    pub bytes_received: u64,
    /// Smoothed RTT at the end, ms.
    pub rtt_ms: f64,
    /// Its radio's energy, J.
    pub energy_j: f64,
    /// Time it carried traffic, s.
    pub time_active_s: f64,
    /// Times this side found the path potentially failed.
    pub failures: u64,
}

/// Radio energy and path modes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EnergyFigures {
    /// Energy of every radio, J.
    pub total_j: f64,
    /// Path-mode changes.
    pub mode_switches: u64,
    /// Time with only some radios on, s.
    pub time_in_partial_s: f64,
    /// The same traffic with every radio kept up (all-paths `mptcp`), J.
    pub shadow_all_paths_j: f64,
    /// Mode switches that could not be put in force (`kernel-mptcp-qe`).
    pub failed_mode_switches: u64,
    /// A measured all-paths `mptcp` session beside this one, J (`braid demo`).
    pub baseline_mptcp_j: Option<f64>,
}

/// NaN and infinities as 0 (JSON never carries them).
fn finite(x: f64) -> f64 {
    if x.is_finite() { x } else { 0.0 }
}

/// The session report of `profile`'s session labelled `label` that measured `f`: rates
/// are bytes·8 over the duration (at least 1 ns), power is energy over the duration,
/// efficiency delivered bits per joule, the residual battery what the label's capacity
/// leaves (absent without one).
pub fn build(label: &ReportLabel, profile: &str, f: SessionFigures) -> SessionReport {
    let secs = f.duration_s.max(1e-9);
    let bits = f.bytes_delivered as f64 * 8.0;
    let battery = label.battery_j.map(|capacity_j| Battery { capacity_j });
    SessionReport {
        scenario: label.scenario.clone(),
        profile: profile.to_string(),
        seed: label.seed,
        duration_s: finite(f.duration_s),
        goodput_bps: finite(bits / secs),
        bytes_delivered: f.bytes_delivered,
        retransmitted_bytes: f.retransmitted_bytes,
        lost_packets: f.lost_packets,
        redundant_bytes: f.redundant_bytes,
        unauthenticated_datagrams: f.unauthenticated_datagrams,
        loss_unmeasured: f.loss_unmeasured,
        proxy_buffer_bytes: None,
        delay_ms: f.delay_ms,
        paths: f
            .paths
            .into_iter()
            .map(|p| PathReport {
                name: p.name,
                role: p.role,
                throughput_bps: finite(p.bytes_received as f64 * 8.0 / secs),
                rtt_ms: finite(p.rtt_ms),
                energy_j: finite(p.energy_j),
                time_active_s: finite(p.time_active_s),
                failures: p.failures,
                packets_down: None,
                packets_up: None,
            })
            .collect(),
        stream: f.stream,
        failover_time_s: f.failover_time_s,
        energy: f.energy.map(|e| EnergyReport {
            total_j: finite(e.total_j),
            avg_power_mw: finite(e.total_j * 1000.0 / secs),
            efficiency_bits_per_j: if e.total_j > 0.0 { finite(bits / e.total_j) } else { 0.0 },
            battery_residual_j: battery.map(|b| finite(b.residual_j(e.total_j))),
            mode_switches: e.mode_switches,
            time_in_partial_s: finite(e.time_in_partial_s),
            shadow_all_paths_j: finite(e.shadow_all_paths_j),
            baseline_mptcp_j: e.baseline_mptcp_j.map(finite),
            redundancy_j: 0.0,
            failed_mode_switches: e.failed_mode_switches,
        }),
    }
}

/// A finished real-time session's report. In-order delay is measured from each message's
/// send when the server ran in the same process (demo, compare --realtime:
/// [`super::realtime::SendLog`]); with a remote server (play), whose send times are
/// unknown here, it is the transport's estimate
/// ([`braid_transport::proto::ConnectionStats::in_order_delay_us`]: first arrival less
/// half the path's minimum RTT, to the read), labelled `estimated`. Energy comes from the
/// client's radio model.
pub fn of_outcome(label: &ReportLabel, profile: &str, o: &PlayOutcome) -> SessionReport {
    let radio = |i: Option<usize>| {
        o.energy.as_ref().and_then(|e| i.and_then(|i| e.radios.get(i).cloned().flatten()))
    };
    let mut f = SessionFigures {
        duration_s: o.elapsed.as_secs_f64().max(1e-9),
        delay_ms: in_order_delay(
            &o.delays_us,
            o.stats.as_ref().map_or(&[], |st| st.in_order_delay_us.as_slice()),
        ),
        stream: Some(o.stream.clone()),
        failover_time_s: o.failover_time.map(|d| d.as_secs_f64()),
        energy: o.energy.as_ref().filter(|e| e.radios.iter().any(Option::is_some)).map(|e| {
            EnergyFigures {
                total_j: e.total_j(),
                mode_switches: e.switches() as u64,
                time_in_partial_s: e.time_in_partial.as_secs_f64(),
                shadow_all_paths_j: e.shadow_all_paths_j,
                failed_mode_switches: e.failed_mode_switches,
                baseline_mptcp_j: o.baseline_energy_j,
            }
        }),
        ..SessionFigures::default()
    };
    if let Some(st) = &o.stats {
        f.bytes_delivered = st.bytes_delivered;
        f.retransmitted_bytes = st.retransmitted_bytes;
        // The client's view: what it sent and the CODED bytes the server sent it.
        f.redundant_bytes = st.redundant_bytes + st.fec.map_or(0, |x| x.coded_bytes_received);
        f.lost_packets = st.lost_packets;
        f.unauthenticated_datagrams = st.dropped.unauthenticated;
        f.paths = st
            .paths
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let known = o.paths.get(i);
                let radio = radio(known.map_or(Some(i), |k| k.index));
                PathFigures {
                    name: known.map_or_else(|| p.id.to_string(), |k| k.name.clone()),
                    role: p.role.to_string(),
                    bytes_received: p.data_bytes_received,
                    rtt_ms: p.srtt.as_secs_f64() * 1000.0,
                    energy_j: radio.as_ref().map_or(0.0, |r| r.energy_j),
                    time_active_s: radio.as_ref().map_or(0.0, |r| r.active.as_secs_f64()),
                    failures: p.failures,
                }
            })
            .collect();
    }
    build(label, profile, f)
}

/// The in-order delay of a real-time session: measured from each message's send
/// (`measured_us`) when there are such samples, else the receiver's estimate
/// (`estimate_us`), labelled as one.
fn in_order_delay(measured_us: &[u64], estimate_us: &[u64]) -> DelayPercentiles {
    if measured_us.is_empty() && !estimate_us.is_empty() {
        DelayPercentiles::from_micros(estimate_us).estimated()
    } else {
        DelayPercentiles::from_micros(measured_us)
    }
}

/// The report of a session still playing, from what its display received: `history`
/// (oldest first) and `latest`. Bytes are estimated from the per-path throughput samples
/// (whole bytes), stream and energy figures come from the latest statistics; what live
/// statistics do not carry (in-order delay, RTT, PSNR deviation, mode switches) is 0.
/// `paths` names the scenario's paths (name, role) in path order; `clip` the clip played.
pub fn snapshot(
    label: &ReportLabel,
    profile: &str,
    clip: &str,
    paths: &[(String, String)],
    history: &[LiveStats],
    latest: &LiveStats,
) -> SessionReport {
    let s = latest;
    let mut per_path: Vec<f64> = vec![0.0; s.paths.len().max(paths.len())];
    let mut prev_t = 0.0;
    for st in history {
        let dt = (st.t_s - prev_t).max(0.0);
        prev_t = st.t_s;
        for (k, p) in st.paths.iter().enumerate() {
            if let Some(b) = per_path.get_mut(k) {
                *b += p.bps * dt / 8.0;
            }
        }
    }
    let delivered = per_path.iter().sum::<f64>() as u64;
    let secs = s.t_s.max(1e-9);
    let figures = SessionFigures {
        duration_s: s.t_s,
        bytes_delivered: delivered,
        paths: per_path
            .iter()
            .enumerate()
            .map(|(k, bytes)| {
                let (name, role) =
                    paths.get(k).cloned().unwrap_or_else(|| (format!("path{k}"), String::new()));
                let energy_j = s.radios.iter().find(|r| r.name == name).map_or(0.0, |r| r.energy_j);
                PathFigures {
                    name,
                    role,
                    bytes_received: *bytes as u64,
                    energy_j,
                    ..PathFigures::default()
                }
            })
            .collect(),
        stream: Some(StreamReport {
            clip: clip.to_string(),
            playout_policy: "adaptive".into(),
            startup_delay_s: s.startup_s.unwrap_or(0.0),
            stalls: u64::from(s.stalls),
            stall_time_s: s.stall_time_s,
            frames_total: s.frames_shown + s.frames_lost,
            frames_lost: s.frames_lost,
            psnr_avg_db: s.psnr_avg_db.unwrap_or(0.0),
            psnr_sd_db: 0.0,
            mos: s.mos.map_or(0, u32::from),
            psnr_eq13_db: s.eq13_db.unwrap_or(0.0),
            read_rate_bps: finite(delivered as f64 * 8.0 / secs),
            stall_starts_s: Vec::new(),
        }),
        energy: (s.energy_j > 0.0)
            .then(|| EnergyFigures { total_j: s.energy_j, ..EnergyFigures::default() }),
        ..SessionFigures::default()
    };
    build(label, profile, figures)
}

/// Writes `report` to `path` (`--report FILE`): pretty JSON and a newline.
pub fn write(path: &Path, report: &SessionReport) -> anyhow::Result<()> {
    std::fs::write(path, report.to_json() + "\n")
        .with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::live::{PathLive, RadioLive};

    fn label() -> ReportLabel {
        ReportLabel { scenario: "demo".into(), seed: 1, battery_j: Some(100.0) }
    }

    #[test]
    fn derived_figures_come_from_the_measured_ones() {
        let f = SessionFigures {
            duration_s: 2.0,
            bytes_delivered: 1_000_000,
            paths: vec![PathFigures {
                name: "wifi".into(),
                role: "wifi".into(),
                bytes_received: 250_000,
                rtt_ms: f64::NAN,
                ..PathFigures::default()
            }],
            energy: Some(EnergyFigures {
                total_j: 4.0,
                mode_switches: 2,
                time_in_partial_s: 0.5,
                shadow_all_paths_j: 6.0,
                failed_mode_switches: 3,
                baseline_mptcp_j: None,
            }),
            ..SessionFigures::default()
        };
        let r = build(&label(), "mptcp", f);
        assert_eq!((r.scenario.as_str(), r.profile.as_str(), r.seed), ("demo", "mptcp", 1));
        assert_eq!(r.goodput_bps, 4e6);
        assert_eq!(r.paths[0].throughput_bps, 1e6);
        assert_eq!(r.paths[0].rtt_ms, 0.0, "no NaN in a report");
        let e = r.energy.unwrap();
        assert_eq!((e.avg_power_mw, e.efficiency_bits_per_j), (2000.0, 2e6));
        assert_eq!(e.battery_residual_j, Some(96.0));
        assert_eq!(e.mode_switches, 2);
        assert_eq!(e.failed_mode_switches, 3);
        let json = serde_json::to_value(&e).unwrap();
        assert_eq!(json["failed_mode_switches"], 3);
        let none = serde_json::to_value(EnergyReport::default()).unwrap();
        assert!(none.get("failed_mode_switches").is_none(), "omitted when zero: {none}");
        // A zero-length session divides by 1 ns, and no energy means no efficiency.
        let r = build(
            &label(),
            "tcp",
            SessionFigures { energy: Some(EnergyFigures::default()), ..SessionFigures::default() },
        );
        assert_eq!(r.duration_s, 0.0);
        assert_eq!(r.energy.unwrap().efficiency_bits_per_j, 0.0);
    }

    fn spent(joules: f64) -> SessionFigures {
        SessionFigures {
            duration_s: 1.0,
            energy: Some(EnergyFigures { total_j: joules, ..EnergyFigures::default() }),
            ..SessionFigures::default()
        }
    }

    #[test]
    fn without_a_battery_the_report_has_no_residual_battery() {
        let none = ReportLabel::named("play");
        assert_eq!(none.battery_j, None);
        let r = build(&none, "mptcp", spent(4.0));
        assert_eq!(r.energy.as_ref().unwrap().battery_residual_j, None);
        let v: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
        assert!(v["energy"].get("battery_residual_j").is_none(), "{}", v["energy"]);
        assert_eq!(v["energy"]["total_j"], 4.0);
    }

    #[test]
    fn a_given_battery_is_what_the_residual_is_taken_from() {
        // `--battery 100` (the label's capacity) leaves 100 − the energy spent, never
        // below zero.
        let battery = ReportLabel { battery_j: Some(100.0), ..ReportLabel::named("play") };
        let e = build(&battery, "mptcp", spent(30.0)).energy.unwrap();
        assert_eq!(e.battery_residual_j, Some(70.0));
        let e = build(&battery, "mptcp", spent(130.0)).energy.unwrap();
        assert_eq!(e.battery_residual_j, Some(0.0));
        let v: serde_json::Value =
            serde_json::from_str(&build(&battery, "mptcp", spent(30.0)).to_json()).unwrap();
        assert_eq!(v["energy"]["battery_residual_j"], 70.0);
    }

    #[test]
    fn the_receivers_delay_estimate_is_labelled_as_one() {
        let sent = [10_000, 20_000, 30_000];
        let estimate = [5_000, 6_000];
        // Measured from the sends when they are known: not an estimate.
        let d = in_order_delay(&sent, &estimate);
        assert_eq!((d.p50, d.estimated), (20.0, false));
        // A remote server's send times are unknown: the transport's estimate, labelled.
        let d = in_order_delay(&[], &estimate);
        assert_eq!((d.p50, d.estimated), (5.0, true));
        let v = serde_json::to_value(d).unwrap();
        assert_eq!(v["estimated"], true);
        // Nothing either way: zeros, not labelled.
        assert_eq!(in_order_delay(&[], &[]), DelayPercentiles::default());
    }

    #[test]
    fn a_snapshot_integrates_the_throughput_samples() {
        let at = |t_s: f64| LiveStats {
            t_s,
            stalls: 1,
            frames_shown: 40,
            frames_lost: 2,
            energy_j: 3.0,
            radios: vec![RadioLive { name: "wifi".into(), energy_j: 3.0, power_mw: 1.0 }],
            paths: vec![PathLive { name: "wifi".into(), bps: 1e6 }],
            ..LiveStats::default()
        };
        let history = [at(1.0), at(2.0)];
        let paths = [("wifi".to_string(), "wifi".to_string()), ("lte".into(), "lte".into())];
        let r = snapshot(&label(), "mptcp", "clip.mp4", &paths, &history, &history[1]);
        assert_eq!(r.bytes_delivered, 250_000);
        assert_eq!(r.goodput_bps, 1e6);
        assert_eq!(r.paths.len(), 2);
        assert_eq!((r.paths[0].throughput_bps, r.paths[0].energy_j), (1e6, 3.0));
        assert_eq!(r.paths[1].name, "lte");
        let st = r.stream.unwrap();
        assert_eq!((st.frames_total, st.stalls, st.read_rate_bps), (42, 1, 1e6));
        assert_eq!(r.energy.unwrap().total_j, 3.0);
    }
}
