//! UI logic, driven through egui_kittest (no display needed).

use std::sync::mpsc;

use eframe::egui;
use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;

use super::*;
use crate::session::live::{LiveStats, PaneUpdate, PathLive, VideoImage};

fn app_with(paths: usize) -> (PlayerApp, mpsc::Sender<PaneUpdate>, mpsc::Receiver<NetCommand>) {
    let (tx, rx) = mpsc::channel();
    let (ctx_tx, ctx_rx) = mpsc::channel();
    let controlled = (0..paths)
        .map(|i| ControlledPath { name: ["wifi", "lte"][i % 2].to_string(), cut: false, rate_mbps: 8.0, delay_ms: 10.0, loss_pct: 0.0 })
        .collect();
    (PlayerApp::new(vec![Pane::new("mptcp", rx)], controlled, Some(ctx_tx)), tx, ctx_rx)
}

fn stats() -> LiveStats {
    LiveStats {
        t_s: 1.0,
        psnr_now_db: Some(100.0),
        psnr_avg_db: Some(41.25),
        mos: Some(5),
        stalls: 2,
        stall_time_s: 3.5,
        buffer_s: 4.2,
        energy_j: 12.5,
        power_mw: 1500.0,
        mode: Some("Partial".into()),
        paths: vec![PathLive { name: "wifi".into(), bps: 2e6 }, PathLive { name: "lte".into(), bps: 1e6 }],
        ..LiveStats::default()
    }
}

#[test]
fn overlay_shows_measured_psnr_stalls_buffer_energy_and_mode() {
    let lines = overlay_lines(&stats(), false).join("\n");
    assert!(lines.contains("PSNR ∞ dB (avg 41.2) MOS 5"), "{lines}");
    assert!(lines.contains("stalls 2 (3.5 s)  buffer 4.2 s"), "{lines}");
    assert!(lines.contains("energy 12.5 J, 1500 mW"), "{lines}");
    assert!(lines.contains("mode Partial"), "{lines}");
}

#[test]
fn without_a_reference_the_overlay_labels_the_eq13_estimate() {
    let s = LiveStats { eq13_db: Some(27.0), ..LiveStats::default() };
    let lines = overlay_lines(&s, true).join("\n");
    assert!(lines.contains("PSNR estimate (eq. 13) 27.0 dB"), "{lines}");
    assert!(!lines.contains("MOS"), "an estimate must not pose as a measurement: {lines}");
}

#[test]
fn frames_become_a_texture_and_the_overlay_toggles() {
    let (app, tx, _cmds) = app_with(0);
    tx.send(PaneUpdate::Frame(VideoImage { width: 4, height: 2, rgba: vec![200; 32] })).unwrap();
    tx.send(PaneUpdate::Stats(stats())).unwrap();
    let mut h = Harness::builder().with_size(egui::vec2(1000.0, 700.0)).build_ui_state(|ui, app: &mut PlayerApp| app.ui(ui), app);
    h.step();
    assert_eq!(h.state().panes[0].frames, 1);
    assert_eq!(h.state().panes[0].stats.stalls, 2);
    assert!(h.state().overlay);
    h.get_by_label("Hide overlay (O)").click();
    h.step();
    h.step();
    assert!(!h.state().overlay);
    h.get_by_label("Show overlay (O)").click();
    h.step();
    h.step();
    assert!(h.state().overlay);
}

#[test]
fn cut_and_restore_send_network_commands() {
    let (app, _tx, cmds) = app_with(2);
    let mut h = Harness::builder().with_size(egui::vec2(1000.0, 700.0)).build_ui_state(|ui, app: &mut PlayerApp| app.ui(ui), app);
    h.step();
    h.get_by_label("Cut wifi").click();
    h.step();
    h.step();
    assert_eq!(cmds.try_recv(), Ok(NetCommand::Cut(0)));
    assert!(h.state().paths[0].cut);
    h.get_by_label("Restore wifi").click();
    h.step();
    h.step();
    assert_eq!(cmds.try_recv(), Ok(NetCommand::Restore(0)));
}

#[test]
fn a_phone_sized_window_collapses_the_details() {
    let (app, _tx, _cmds) = app_with(2);
    let mut h = Harness::builder().with_size(egui::vec2(400.0, 800.0)).build_ui_state(|ui, app: &mut PlayerApp| app.ui(ui), app);
    h.step();
    h.get_by_label("Hide details").click();
    h.step();
    h.step();
    assert!(!h.state().panel_open);
    assert!(h.query_by_label("Cut wifi").is_none(), "controls hidden in the collapsed portrait layout");
    h.get_by_label("Details").click();
    h.step();
    h.step();
    assert!(h.state().panel_open);
}

#[test]
fn errors_are_shown_in_the_pane() {
    let (app, tx, _cmds) = app_with(0);
    tx.send(PaneUpdate::Error("no server at 127.0.0.1:9".into())).unwrap();
    let mut h = Harness::builder().with_size(egui::vec2(800.0, 600.0)).build_ui_state(|ui, app: &mut PlayerApp| app.ui(ui), app);
    h.step();
    assert_eq!(h.state().panes[0].error.as_deref(), Some("no server at 127.0.0.1:9"));
}

#[test]
fn fit_keeps_the_aspect_ratio() {
    let r = fit(egui::Rect::from_min_size(egui::pos2(0.0, 0.0), egui::vec2(1000.0, 300.0)), 352.0 / 288.0);
    assert!((r.width() / r.height() - 352.0 / 288.0).abs() < 1e-3);
    assert!((r.height() - 300.0).abs() < 1e-3);
}
