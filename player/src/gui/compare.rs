//! Compare mode: the summary strip that ranks the panes, and the export of the comparison
//! (`compare.json` in the shape `braid compare --out` writes, plus CSVs).
//!
//! A pane whose session ended is scored from its session report; one still playing from its
//! latest live statistics, and its exported run is a snapshot built from them, marked
//! `"complete": false`.

use std::cmp::Ordering;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use braid_transport::energy::Battery;
use braid_transport::sim::{
    DEFAULT_BATTERY_J, DelayPercentiles, EnergyReport, PathReport, SessionReport, StreamReport,
};
use eframe::egui;
use egui::{Color32, RichText};

use super::{AppCommand, Pane};
use crate::cmd::compare::{Comparison, ProfileSummary, statistics};
use crate::session::live::LiveStats;

/// What compare mode knows besides the panes.
#[derive(Clone, Debug, PartialEq)]
pub struct CompareState {
    /// Scenario name (for the report).
    pub scenario: String,
    /// The seed every pane's emulator and connection used.
    pub seed: u64,
    /// The clip played (for the report).
    pub clip: String,
    /// The scenario's paths: (name, role), in path order.
    pub paths: Vec<(String, String)>,
    /// The scenario's battery capacity, J (for the residual battery).
    pub battery_j: Option<f64>,
    /// Where "Export report" writes.
    pub out_dir: PathBuf,
    /// The files the last export wrote, or why it failed.
    pub export_status: Option<Result<Vec<PathBuf>, String>>,
}

/// What the ranking looks at, per pane.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Score {
    /// Rebuffering events.
    pub stalls: u64,
    /// Their total duration, s.
    pub stall_time_s: f64,
    /// Frames lost.
    pub frames_lost: u64,
    /// Measured average PSNR, dB (none without a reference).
    pub psnr_db: Option<f64>,
    /// Radio energy, J (none until the energy model reports it).
    pub energy_j: Option<f64>,
}

impl Score {
    /// From live statistics.
    pub fn from_live(s: &LiveStats) -> Score {
        Score {
            stalls: u64::from(s.stalls),
            stall_time_s: s.stall_time_s,
            frames_lost: s.frames_lost,
            psnr_db: s.psnr_avg_db,
            energy_j: (s.energy_j > 0.0).then_some(s.energy_j),
        }
    }

    /// From a finished session's report.
    pub fn from_report(r: &SessionReport) -> Score {
        let st = r.stream.clone().unwrap_or_default();
        Score {
            stalls: st.stalls,
            stall_time_s: st.stall_time_s,
            frames_lost: st.frames_lost,
            psnr_db: (st.mos > 0).then_some(st.psnr_avg_db),
            energy_j: r.energy.as_ref().map(|e| e.total_j).filter(|&j| j > 0.0),
        }
    }

    /// A pane's score: its report once the session ended, else its live statistics.
    pub fn of(pane: &Pane) -> Score {
        match pane.report.get() {
            Some(r) => Score::from_report(r),
            None => Score::from_live(&pane.stats),
        }
    }
}

/// `a` against `b`, better first: fewer stalls, less stall time, fewer lost frames, higher
/// PSNR, then less energy. A missing PSNR or energy ranks after a present one. A total
/// order (NaN sorts as `f64::total_cmp` puts it).
pub fn compare_scores(a: &Score, b: &Score) -> Ordering {
    let some_first = |x: Option<f64>, y: Option<f64>, higher_better: bool| match (x, y) {
        (Some(x), Some(y)) if higher_better => y.total_cmp(&x),
        (Some(x), Some(y)) => x.total_cmp(&y),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => Ordering::Equal,
    };
    a.stalls
        .cmp(&b.stalls)
        .then(a.stall_time_s.total_cmp(&b.stall_time_s))
        .then(a.frames_lost.cmp(&b.frames_lost))
        .then(some_first(a.psnr_db, b.psnr_db, true))
        .then(some_first(a.energy_j, b.energy_j, false))
}

/// Pane indices, best first (ties keep the given order).
pub fn rank(scores: &[Score]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..scores.len()).collect();
    order.sort_by(|&a, &b| compare_scores(&scores[a], &scores[b]));
    order
}

/// Each pane's place in the ranking (0 = best), in pane order.
pub fn rank_positions(panes: &[Pane]) -> Vec<usize> {
    let scores: Vec<Score> = panes.iter().map(Score::of).collect();
    let mut pos = vec![0; panes.len()];
    for (place, i) in rank(&scores).into_iter().enumerate() {
        pos[i] = place;
    }
    pos
}

/// One ranked entry as the strip shows it.
pub fn strip_entry(place: usize, title: &str, s: &Score) -> String {
    let mut t = format!(
        "{}. {title}: {} stall{}",
        place + 1,
        s.stalls,
        if s.stalls == 1 { "" } else { "s" }
    );
    if s.stalls > 0 {
        t.push_str(&format!(" ({:.1} s)", s.stall_time_s));
    }
    t.push_str(&format!(", {} lost", s.frames_lost));
    if let Some(p) = s.psnr_db {
        t.push_str(&if p >= 100.0 { ", PSNR ∞".to_string() } else { format!(", {p:.1} dB") });
    }
    if let Some(e) = s.energy_j {
        t.push_str(&format!(", {e:.1} J"));
    }
    t
}

/// The summary strip: the ranking, the "Export report" button and what the export did.
pub fn summary_strip_ui(
    ui: &mut egui::Ui,
    state: &CompareState,
    panes: &[Pane],
    portrait: bool,
    cmds: &mut Vec<AppCommand>,
) {
    let scores: Vec<Score> = panes.iter().map(Score::of).collect();
    let order = rank(&scores);
    let size = if portrait { 15.0 } else { 18.0 };
    let mut body = |ui: &mut egui::Ui| {
        ui.label(RichText::new("Ranking").strong().size(size));
        for (place, &i) in order.iter().enumerate() {
            let text = strip_entry(place, &panes[i].title, &scores[i]);
            let color = if place == 0 {
                Color32::from_rgb(120, 220, 140)
            } else {
                ui.visuals().text_color()
            };
            ui.label(RichText::new(text).size(size).color(color));
            if !portrait {
                ui.separator();
            }
        }
        if ui
            .add(
                egui::Button::new(RichText::new("Export report").size(size))
                    .min_size(egui::vec2(120.0, 36.0)),
            )
            .clicked()
        {
            cmds.push(AppCommand::Export);
        }
    };
    if portrait {
        ui.vertical(|ui| body(ui));
    } else {
        ui.horizontal_wrapped(|ui| body(ui));
    }
    ui.label(
        RichText::new("ranked by stalls, then stall time, lost frames, PSNR and energy").small(),
    );
    match &state.export_status {
        Some(Ok(files)) => {
            let names: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
            ui.label(format!("wrote {}", names.join(", ")));
        }
        Some(Err(e)) => {
            ui.label(
                RichText::new(format!("export failed: {e}"))
                    .color(Color32::from_rgb(255, 90, 90))
                    .strong(),
            );
        }
        None => {}
    }
}

/// A report from what a still-running pane has shown so far: bytes from the per-path
/// throughput samples, stream and energy figures from the latest statistics; what the live
/// statistics do not carry (in-order delay, RTT, PSNR deviation, mode switches) is 0.
pub fn live_report(state: &CompareState, pane: &Pane) -> SessionReport {
    let h = pane.history();
    let s = &pane.stats;
    let mut per_path: Vec<f64> = vec![0.0; s.paths.len().max(state.paths.len())];
    let mut prev_t = 0.0;
    for st in h {
        let dt = (st.t_s - prev_t).max(0.0);
        prev_t = st.t_s;
        for (k, p) in st.paths.iter().enumerate() {
            if let Some(b) = per_path.get_mut(k) {
                *b += p.bps * dt / 8.0;
            }
        }
    }
    let secs = s.t_s.max(1e-9);
    let delivered: f64 = per_path.iter().sum();
    let paths = per_path
        .iter()
        .enumerate()
        .map(|(k, bytes)| {
            let (name, role) =
                state.paths.get(k).cloned().unwrap_or_else(|| (format!("path{k}"), String::new()));
            let energy_j = s.radios.iter().find(|r| r.name == name).map_or(0.0, |r| r.energy_j);
            PathReport {
                name,
                role,
                throughput_bps: bytes * 8.0 / secs,
                rtt_ms: 0.0,
                energy_j,
                time_active_s: 0.0,
            }
        })
        .collect();
    SessionReport {
        scenario: state.scenario.clone(),
        profile: pane.title.clone(),
        seed: state.seed,
        duration_s: s.t_s,
        goodput_bps: delivered * 8.0 / secs,
        bytes_delivered: delivered as u64,
        retransmitted_bytes: 0,
        lost_packets: 0,
        delay_ms: DelayPercentiles::default(),
        paths,
        stream: Some(StreamReport {
            clip: state.clip.clone(),
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
            read_rate_bps: delivered * 8.0 / secs,
        }),
        energy: (s.energy_j > 0.0).then(|| EnergyReport {
            total_j: s.energy_j,
            avg_power_mw: s.energy_j * 1000.0 / secs,
            efficiency_bits_per_j: delivered * 8.0 / s.energy_j,
            battery_residual_j: Battery {
                capacity_j: state.battery_j.unwrap_or(DEFAULT_BATTERY_J),
            }
            .residual_j(s.energy_j),
            mode_switches: 0,
            time_in_partial_s: 0.0,
        }),
    }
}

/// A file-name-safe version of a pane title.
fn file_stem(title: &str) -> String {
    let s: String = title
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' })
        .collect();
    if s.is_empty() { "pane".into() } else { s }
}

/// Writes the comparison to `state.out_dir`: `compare.json` (as `braid compare --out`,
/// one run per profile, plus `"realtime": true`, each profile's `"rank"` and `"complete"`),
/// `summary.csv` (one row per pane, best first) and `<profile>-live.csv` (each pane's
/// statistics over time). Returns the files written.
pub fn export(state: &CompareState, panes: &[Pane]) -> anyhow::Result<Vec<PathBuf>> {
    let dir = &state.out_dir;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let scores: Vec<Score> = panes.iter().map(Score::of).collect();
    let order = rank(&scores);
    let mut place = vec![0usize; panes.len()];
    for (p, &i) in order.iter().enumerate() {
        place[i] = p;
    }
    let mut summaries = Vec::new();
    let mut complete = Vec::new();
    for pane in panes {
        let (report, done) = match pane.report.get() {
            Some(r) => (r.clone(), true),
            None => (live_report(state, pane), false),
        };
        let runs = vec![report];
        let (mean, sd) = statistics(&runs);
        summaries.push(ProfileSummary { profile: pane.title.clone(), mean, sd, runs });
        complete.push(done);
    }
    let comparison = Comparison {
        scenario: state.scenario.clone(),
        seeds: vec![state.seed],
        profiles: summaries,
    };
    let mut json = serde_json::to_value(&comparison).context("serialising the comparison")?;
    if let Some(obj) = json.as_object_mut() {
        obj.insert("realtime".into(), serde_json::Value::Bool(true));
        obj.insert(
            "ranking".into(),
            order.iter().map(|&i| serde_json::Value::String(panes[i].title.clone())).collect(),
        );
    }
    if let Some(profiles) = json.get_mut("profiles").and_then(|p| p.as_array_mut()) {
        for (i, p) in profiles.iter_mut().enumerate() {
            if let Some(obj) = p.as_object_mut() {
                obj.insert("rank".into(), serde_json::json!(place[i] + 1));
                obj.insert("complete".into(), serde_json::json!(complete[i]));
            }
        }
    }
    let mut written = Vec::new();
    let path = dir.join("compare.json");
    write(
        &path,
        serde_json::to_string_pretty(&json).context("serialising the comparison")? + "\n",
    )?;
    written.push(path);

    let mut csv = String::from(
        "rank,profile,complete,stalls,stall_time_s,frames_lost,psnr_avg_db,energy_j,goodput_bps,startup_delay_s\n",
    );
    for (p, &i) in order.iter().enumerate() {
        let m = &comparison.profiles[i].mean;
        let g = |k: &str| m.get(k).copied().unwrap_or(0.0);
        let s = &scores[i];
        csv.push_str(&format!(
            "{},{},{},{},{:.3},{},{},{},{:.0},{:.3}\n",
            p + 1,
            panes[i].title,
            complete[i],
            s.stalls,
            s.stall_time_s,
            s.frames_lost,
            s.psnr_db.map_or(String::new(), |v| format!("{v:.3}")),
            s.energy_j.map_or(String::new(), |v| format!("{v:.3}")),
            g("goodput_bps"),
            g("stream.startup_delay_s"),
        ));
    }
    let path = dir.join("summary.csv");
    write(&path, csv)?;
    written.push(path);

    let mut used = BTreeSet::new();
    for (i, pane) in panes.iter().enumerate() {
        let mut stem = file_stem(&pane.title);
        if !used.insert(stem.clone()) {
            stem = format!("{stem}-{}", i + 1);
            used.insert(stem.clone());
        }
        let path = dir.join(format!("{stem}-live.csv"));
        write(&path, live_csv(pane))?;
        written.push(path);
    }
    Ok(written)
}

/// One pane's statistics over time: `t_s,buffer_s,psnr_db,stalls,stall_time_s,frames_shown,frames_lost,energy_j,<path>_bps…`.
pub fn live_csv(pane: &Pane) -> String {
    history_csv(pane.history())
}

/// Statistics over time as CSV (see [`live_csv`]); path columns from the latest sample.
pub fn history_csv(history: &[LiveStats]) -> String {
    let names: Vec<String> = history
        .last()
        .map(|s| s.paths.iter().map(|p| p.name.clone()).collect())
        .unwrap_or_default();
    let mut s =
        String::from("t_s,buffer_s,psnr_db,stalls,stall_time_s,frames_shown,frames_lost,energy_j");
    for n in &names {
        s.push_str(&format!(",{}_bps", file_stem(n)));
    }
    s.push('\n');
    for st in history {
        s.push_str(&format!(
            "{:.3},{:.3},{},{},{:.3},{},{},{:.3}",
            st.t_s,
            st.buffer_s,
            st.psnr_now_db.map_or(String::new(), |v| format!("{v:.3}")),
            st.stalls,
            st.stall_time_s,
            st.frames_shown,
            st.frames_lost,
            st.energy_j
        ));
        for k in 0..names.len() {
            s.push_str(&format!(",{:.0}", st.paths.get(k).map_or(0.0, |p| p.bps)));
        }
        s.push('\n');
    }
    s
}

fn write(path: &Path, text: String) -> anyhow::Result<()> {
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}
