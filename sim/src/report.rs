//! The session report (docs/REFERENCE.md, "Session report"; key names are fixed) and the
//! per-path time series written as CSV.

use serde::{Deserialize, Serialize};

/// One session's results: `--report FILE` writes this as one JSON object.
///
/// Keys are fixed by docs/REFERENCE.md; fields may be added, never removed. `stream` and
/// `energy` are omitted when absent. Numbers are always finite.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SessionReport {
    /// Scenario name.
    pub scenario: String,
    /// Profile name.
    pub profile: String,
    /// The seed the run used.
    pub seed: u64,
    /// Session length, s.
    pub duration_s: f64,
    /// Bytes delivered to the application ×8 / duration.
    pub goodput_bps: f64,
    /// Message payload bytes handed to the application.
    pub bytes_delivered: u64,
    /// Payload bytes sent again after losses (both endpoints).
    pub retransmitted_bytes: u64,
    /// Packets the transport declared lost (both endpoints).
    pub lost_packets: u64,
    /// The transport's loss counters could not be read (a `noq-multipath` run keeps them at
    /// its sender): `lost_packets` and `retransmitted_bytes` are 0 for want of a figure,
    /// not measured. Omitted when false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub loss_unmeasured: bool,
    /// Bytes sent more than once on purpose (both endpoints): the streaming code's CODED
    /// frames. Real-time reports (the client's) count the CODED bytes the client received.
    #[serde(default)]
    pub redundant_bytes: u64,
    /// In-order delivery delay per message (sent → handed to the application).
    pub delay_ms: DelayPercentiles,
    /// One entry per scenario path, in scenario order.
    pub paths: Vec<PathReport>,
    /// Stream results (stream workloads only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<StreamReport>,
    /// Energy results (once the energy model runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy: Option<EnergyReport>,
    /// The longest failover of the data sender, s: from a failed path's last
    /// acknowledgement to the acknowledgement, on another path, of the first data sent
    /// after the failure was detected. Absent when no path failed while data flowed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failover_time_s: Option<f64>,
    /// Datagrams dropped because they failed packet authentication (forged, corrupted,
    /// or keyed for another connection; never acted on), both endpoints where known.
    /// Omitted when zero.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unauthenticated_datagrams: u64,
    /// The most a `[[node]]` on the session's path held at once, bytes (relayed, not yet
    /// released downstream). Present only when the session crossed a node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy_buffer_bytes: Option<u64>,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// Percentiles, mean and standard deviation of the in-order delivery delay, ms (nearest
/// rank; population standard deviation; all 0 with no messages), and whether they are an
/// estimate.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DelayPercentiles {
    /// Median.
    pub p50: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Mean.
    #[serde(default)]
    pub mean: f64,
    /// Standard deviation.
    #[serde(default)]
    pub sd: f64,
    /// The figures are the receiver's estimate, not measured from each message's send:
    /// a real-time client whose server's send times are unknown to it (`braid play`).
    /// Serialized only when true; the simulator and in-process sessions measure.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub estimated: bool,
}

impl DelayPercentiles {
    /// Nearest-rank percentiles of `samples` (µs), in ms.
    pub fn from_micros(samples: &[u64]) -> DelayPercentiles {
        if samples.is_empty() {
            return DelayPercentiles::default();
        }
        let mut s = samples.to_vec();
        s.sort_unstable();
        let pick = |q: f64| {
            let rank = ((q * s.len() as f64).ceil() as usize).clamp(1, s.len());
            s.get(rank - 1).copied().unwrap_or(0) as f64 / 1000.0
        };
        let n = s.len() as f64;
        let mean = s.iter().map(|&x| x as f64).sum::<f64>() / n;
        let var = s.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / n;
        DelayPercentiles {
            p50: pick(0.50),
            p95: pick(0.95),
            p99: pick(0.99),
            mean: mean / 1000.0,
            sd: var.sqrt() / 1000.0,
            estimated: false,
        }
    }

    /// The same figures, labelled as the receiver's estimate.
    pub fn estimated(self) -> DelayPercentiles {
        DelayPercentiles { estimated: true, ..self }
    }
}

/// One path's figures.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PathReport {
    /// Scenario path name.
    pub name: String,
    /// Its role (`wifi`, `lte`, `3g`, `wired`).
    pub role: String,
    /// New payload bytes received by the client on this path ×8 / duration.
    pub throughput_bps: f64,
    /// The sender's smoothed RTT at the end, ms (0 when the path was not used).
    pub rtt_ms: f64,
    /// Radio energy, J (0 until the energy model exists).
    pub energy_j: f64,
    /// Time the path carried traffic, s (100 ms bins with data received).
    pub time_active_s: f64,
    /// Times the data sender found the path potentially failed (its retransmission timer
    /// fired with nothing acknowledged since).
    #[serde(default)]
    pub failures: u64,
    /// Datagrams the main flow's server sent on the path (what entered its down link;
    /// simulator only, as a capture of `PATH-down.pcap` counts them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub packets_down: Option<u64>,
    /// Datagrams the main flow's client sent on the path (simulator only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub packets_up: Option<u64>,
}

/// Stream results (filled by a stream workload).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StreamReport {
    /// The clip played.
    pub clip: String,
    /// Playout policy name.
    pub playout_policy: String,
    /// From the client's first packet to the first frame displayed, s.
    pub startup_delay_s: f64,
    /// Rebuffering events after playback started.
    pub stalls: u64,
    /// Their total duration, s.
    pub stall_time_s: f64,
    /// Frames in the stream.
    pub frames_total: u64,
    /// Frames abandoned or undecodable.
    pub frames_lost: u64,
    /// Mean PSNR, dB (infinite capped at 100).
    pub psnr_avg_db: f64,
    /// PSNR standard deviation, dB.
    pub psnr_sd_db: f64,
    /// Mean opinion score, 1–5.
    pub mos: u32,
    /// PSNR estimate from the paper's equation 13, dB.
    pub psnr_eq13_db: f64,
    /// Measured application read rate, bit/s.
    pub read_rate_bps: f64,
    /// When each stall began, s from the client's start (its first packet; in real time
    /// the connection's start), the first [`MAX_STALL_STARTS`] of them. Absent when none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stall_starts_s: Vec<f64>,
}

/// Stall start times a [`StreamReport`] lists, at most.
pub const MAX_STALL_STARTS: usize = 1024;

/// Energy results (filled by the energy model).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EnergyReport {
    /// Total radio energy, J.
    pub total_j: f64,
    /// Mean power, mW.
    pub avg_power_mw: f64,
    /// Delivered bits per joule.
    pub efficiency_bits_per_j: f64,
    /// Battery left, J: what the battery capacity given (`--battery`, or the scenario's
    /// `battery_j`) leaves. Absent when no capacity was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub battery_residual_j: Option<f64>,
    /// Path-mode changes.
    pub mode_switches: u64,
    /// Time with only some radios on, s.
    pub time_in_partial_s: f64,
    /// What the same traffic would have cost with every radio kept up, as all-paths
    /// `mptcp` keeps them (the shadow radios of `braid_transport::policy::runner`), J. A
    /// model, not a run: this run's datagrams, each charged to its own path's radio while
    /// every other radio is kept up (docs/REFERENCE.md states its measured bias).
    #[serde(default)]
    pub shadow_all_paths_j: f64,
    /// What an all-paths `mptcp` session run beside this one, on its own copy of the same
    /// emulated network and for as long, spent on its radios, J: a measured comparison
    /// (`braid demo`). Absent where none ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_mptcp_j: Option<f64>,
    /// The radio energy attributed to redundancy (re-injected copies and CODED packets):
    /// per path, its energy times the share of its datagram bytes sent as redundancy, J.
    /// Omitted when zero.
    #[serde(default, skip_serializing_if = "is_zero_f64")]
    pub redundancy_j: f64,
    /// `kernel-mptcp-qe`: mode switches that could not be put in force (an MPTCP
    /// endpoint's backup flag could not be changed), so did not happen: not in
    /// `mode_switches`, no Partial time. Omitted when zero.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub failed_mode_switches: u64,
}

fn is_zero_f64(v: &f64) -> bool {
    *v == 0.0
}

fn is_zero_u64(v: &u64) -> bool {
    *v == 0
}

impl SessionReport {
    /// The report as pretty JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|_| String::from("{}"))
    }

    /// A fixed-width text summary (what `braid sim` prints).
    pub fn summary_table(&self) -> String {
        use std::fmt::Write;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "scenario {}  profile {}  seed {}  duration {:.1} s",
            self.scenario, self.profile, self.seed, self.duration_s
        );
        let _ = writeln!(
            s,
            "goodput {:.3} Mbit/s  delivered {} B  retransmitted {} B  lost {} pkts",
            self.goodput_bps / 1e6,
            self.bytes_delivered,
            self.retransmitted_bytes,
            self.lost_packets
        );
        let _ = writeln!(
            s,
            "delay p50 {:.1} ms  p95 {:.1} ms  p99 {:.1} ms  mean {:.1} ms  sd {:.1} ms",
            self.delay_ms.p50,
            self.delay_ms.p95,
            self.delay_ms.p99,
            self.delay_ms.mean,
            self.delay_ms.sd
        );
        let _ = writeln!(
            s,
            "{:<12} {:<6} {:>12} {:>9} {:>9} {:>9}",
            "path", "role", "Mbit/s", "rtt ms", "energy J", "active s"
        );
        for p in &self.paths {
            let _ = writeln!(
                s,
                "{:<12} {:<6} {:>12.3} {:>9.1} {:>9.1} {:>9.1}",
                p.name,
                p.role,
                p.throughput_bps / 1e6,
                p.rtt_ms,
                p.energy_j,
                p.time_active_s
            );
        }
        s
    }
}

/// Per-path client-side throughput per interval.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TimeSeries {
    /// Bin width, s.
    pub interval_s: f64,
    /// Path names (columns).
    pub paths: Vec<String>,
    /// One row per bin.
    pub rows: Vec<SeriesRow>,
}

/// One bin of a [`TimeSeries`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SeriesRow {
    /// End of the bin, s.
    pub t_s: f64,
    /// Throughput per path over the bin, bit/s (new payload bytes received by the client).
    pub throughput_bps: Vec<f64>,
    /// Application goodput over the bin, bit/s.
    pub goodput_bps: f64,
    /// The sender's latest RTT sample per path at the end of the bin, ms (0: none yet, or
    /// the path sent nothing in the bin). Not in the CSV of [`TimeSeries::to_csv`] nor in
    /// JSON: [`TimeSeries::rtt_csv`] writes it.
    #[serde(skip)]
    pub rtt_ms: Vec<f64>,
}

impl TimeSeries {
    /// CSV: `t_s,<path>_bps,…,goodput_bps`.
    pub fn to_csv(&self) -> String {
        use std::fmt::Write;
        let mut s = String::from("t_s");
        for p in &self.paths {
            let _ = write!(s, ",{p}_bps");
        }
        s.push_str(",goodput_bps\n");
        for r in &self.rows {
            let _ = write!(s, "{:.3}", r.t_s);
            for v in &r.throughput_bps {
                let _ = write!(s, ",{v:.0}");
            }
            let _ = writeln!(s, ",{:.0}", r.goodput_bps);
        }
        s
    }
}

impl TimeSeries {
    /// CSV: `t_s,<path>_rtt_ms,…`, the sender's latest RTT sample per path per bin.
    pub fn rtt_csv(&self) -> String {
        use std::fmt::Write;
        let mut s = String::from("t_s");
        for p in &self.paths {
            let _ = write!(s, ",{p}_rtt_ms");
        }
        s.push('\n');
        for r in &self.rows {
            let _ = write!(s, "{:.3}", r.t_s);
            for v in &r.rtt_ms {
                let _ = write!(s, ",{v:.1}");
            }
            s.push('\n');
        }
        s
    }
}

/// Replaces NaN/∞ with 0 so JSON never carries them.
pub(crate) fn finite(x: f64) -> f64 {
    if x.is_finite() { x } else { 0.0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_use_nearest_rank() {
        let s: Vec<u64> = (1..=100).map(|i| i * 1000).collect();
        let p = DelayPercentiles::from_micros(&s);
        assert_eq!((p.p50, p.p95, p.p99), (50.0, 95.0, 99.0));
        assert_eq!(DelayPercentiles::from_micros(&[]), DelayPercentiles::default());
    }

    #[test]
    fn json_has_exactly_the_interface_keys_and_omits_absent_objects() {
        let r = SessionReport {
            scenario: "s".into(),
            profile: "mptcp".into(),
            seed: 1,
            duration_s: 1.0,
            goodput_bps: 1.0,
            bytes_delivered: 1,
            retransmitted_bytes: 0,
            lost_packets: 0,
            redundant_bytes: 0,
            delay_ms: DelayPercentiles::default(),
            paths: vec![PathReport {
                name: "a".into(),
                role: "wifi".into(),
                throughput_bps: 0.0,
                rtt_ms: 0.0,
                energy_j: 0.0,
                time_active_s: 0.0,
                failures: 0,
                packets_down: None,
                packets_up: None,
            }],
            stream: None,
            energy: None,
            failover_time_s: None,
            unauthenticated_datagrams: 0,
            loss_unmeasured: false,
            proxy_buffer_bytes: None,
        };
        let v: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
        let mut keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            [
                "bytes_delivered",
                "delay_ms",
                "duration_s",
                "goodput_bps",
                "lost_packets",
                "paths",
                "profile",
                "redundant_bytes",
                "retransmitted_bytes",
                "scenario",
                "seed"
            ]
        );
        let mut pk: Vec<&str> =
            v["paths"][0].as_object().unwrap().keys().map(String::as_str).collect();
        pk.sort_unstable();
        assert_eq!(
            pk,
            ["energy_j", "failures", "name", "role", "rtt_ms", "throughput_bps", "time_active_s"]
        );
        let mut dk: Vec<&str> =
            v["delay_ms"].as_object().unwrap().keys().map(String::as_str).collect();
        dk.sort_unstable();
        assert_eq!(dk, ["mean", "p50", "p95", "p99", "sd"]);
    }

    #[test]
    fn the_residual_battery_is_absent_without_a_battery() {
        let e = EnergyReport { total_j: 4.0, ..EnergyReport::default() };
        let v = serde_json::to_value(&e).unwrap();
        assert!(v.get("battery_residual_j").is_none(), "{v}");
        let e = EnergyReport { battery_residual_j: Some(96.0), ..e };
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(v["battery_residual_j"], 96.0);
        // Reports with and without the key read back as written.
        let back: EnergyReport = serde_json::from_value(v).unwrap();
        assert_eq!(back, e);
        let old: EnergyReport = serde_json::from_str(
            r#"{"total_j": 4.0, "avg_power_mw": 1.0, "efficiency_bits_per_j": 2.0,
                "mode_switches": 0, "time_in_partial_s": 0.0}"#,
        )
        .unwrap();
        assert_eq!(old.battery_residual_j, None);
    }

    #[test]
    fn an_estimated_delay_says_so_and_a_measured_one_is_unchanged() {
        let measured = DelayPercentiles::from_micros(&[10_000, 20_000]);
        assert!(!measured.estimated);
        let v = serde_json::to_value(measured).unwrap();
        assert!(v.get("estimated").is_none(), "{v}");
        let estimated = measured.estimated();
        let v = serde_json::to_value(estimated).unwrap();
        assert_eq!(v["estimated"], true);
        assert_eq!(v["p50"], 10.0);
        let back: DelayPercentiles = serde_json::from_value(v).unwrap();
        assert_eq!(back, estimated);
    }

    #[test]
    fn delay_mean_and_sd_are_measured_beside_the_percentiles() {
        let d = DelayPercentiles::from_micros(&[10_000, 20_000, 30_000, 40_000]);
        assert_eq!((d.p50, d.mean), (20.0, 25.0));
        assert!((d.sd - 125f64.sqrt()).abs() < 1e-9, "{d:?}");
        assert_eq!(DelayPercentiles::from_micros(&[]), DelayPercentiles::default());
        // Reports written before the fields existed still parse.
        let old: DelayPercentiles =
            serde_json::from_str(r#"{"p50": 1.0, "p95": 2.0, "p99": 3.0}"#).unwrap();
        assert_eq!((old.mean, old.sd), (0.0, 0.0));
    }
}
