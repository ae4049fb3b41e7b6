//! Compare mode: the summary strip that ranks the panes, and the "Export report" button
//! (the ranking and the export are [`crate::session::compare`]'s).
//!
//! A pane whose session ended is scored from its session report; one still playing from its
//! latest live statistics, and its exported run is a snapshot built from them, marked
//! `"complete": false`.

use std::path::PathBuf;

use eframe::egui;
use egui::{Color32, RichText};

use super::{AppCommand, Pane};
use crate::session::compare::{self as session_compare, PaneRun};
pub use crate::session::compare::{LiveComparison, Score, rank};

/// What compare mode knows besides the panes.
#[derive(Clone, Debug, PartialEq)]
pub struct CompareState {
    /// The comparison shown and where its export goes.
    pub comparison: LiveComparison,
    /// The files the last export wrote, or why it failed.
    pub export_status: Option<Result<Vec<PathBuf>, String>>,
}

impl CompareState {
    /// Compare mode for `comparison`, nothing exported yet.
    pub fn new(comparison: LiveComparison) -> CompareState {
        CompareState { comparison, export_status: None }
    }
}

/// What the export and the ranking see of a pane.
fn run_of(pane: &Pane) -> PaneRun<'_> {
    PaneRun {
        title: &pane.title,
        report: pane.report.get(),
        history: pane.history(),
        latest: &pane.stats,
    }
}

/// A pane's score: its report once the session ended, else its live statistics.
pub fn score(pane: &Pane) -> Score {
    run_of(pane).score()
}

/// Each pane's place in the ranking (0 = best), in pane order.
pub fn rank_positions(panes: &[Pane]) -> Vec<usize> {
    let scores: Vec<Score> = panes.iter().map(score).collect();
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
    let scores: Vec<Score> = panes.iter().map(score).collect();
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

/// Writes the comparison of `panes` (see [`session_compare::export`]); returns the files
/// written.
pub fn export(state: &CompareState, panes: &[Pane]) -> anyhow::Result<Vec<PathBuf>> {
    let runs: Vec<PaneRun<'_>> = panes.iter().map(run_of).collect();
    session_compare::export(&state.comparison, &runs)
}

/// The window size for `panes` panes side by side (2 to 4), points.
pub fn window_size(panes: usize) -> [f32; 2] {
    match panes {
        0..=2 => [1200.0, 860.0],
        3 => [1500.0, 860.0],
        _ => [1200.0, 980.0],
    }
}
