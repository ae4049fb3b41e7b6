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
        .map(|i| ControlledPath {
            name: ["wifi", "lte"][i % 2].to_string(),
            cut: false,
            rate_mbps: 8.0,
            delay_ms: 10.0,
            loss_pct: 0.0,
        })
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
        paths: vec![
            PathLive { name: "wifi".into(), bps: 2e6 },
            PathLive { name: "lte".into(), bps: 1e6 },
        ],
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
    tx.send(PaneUpdate::Frame(VideoImage::from_frame(braid_media::quality::Frame {
        width: 4,
        height: 2,
        pts_us: None,
        planes: [vec![200; 8], vec![128; 2], vec![128; 2]],
    })))
    .unwrap();
    tx.send(PaneUpdate::Stats(stats())).unwrap();
    let mut h = Harness::builder()
        .with_size(egui::vec2(1000.0, 700.0))
        .build_ui_state(|ui, app: &mut PlayerApp| app.ui(ui), app);
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

/// A two-path window in which the user just clicked "Cut wifi" (and the command went out).
fn window_with_wifi_cut()
-> (Harness<'static, PlayerApp>, mpsc::Sender<PaneUpdate>, mpsc::Receiver<NetCommand>) {
    let (app, tx, cmds) = app_with(2);
    let mut h = Harness::builder()
        .with_size(egui::vec2(1000.0, 700.0))
        .build_ui_state(|ui, app: &mut PlayerApp| app.ui(ui), app);
    h.step();
    h.get_by_label("Cut wifi").click();
    h.step();
    h.step();
    assert_eq!(cmds.try_recv(), Ok(NetCommand::Cut(0)));
    assert!(h.state().paths[0].cut);
    (h, tx, cmds)
}

#[test]
fn a_new_booth_loop_cycle_returns_the_controls_to_the_scenario() {
    let (mut h, tx, cmds) = window_with_wifi_cut();
    // The session restarted its relay from the scenario: the wifi path is up again.
    tx.send(PaneUpdate::NetworkReset).unwrap();
    h.step();
    h.step();
    assert!(!h.state().paths[0].cut);
    assert!(h.query_by_label("Cut wifi").is_some());
    assert_eq!(h.state().last_command, None);
    assert!(cmds.try_recv().is_err(), "a reset sends no command: the relay already restarted");
}

#[test]
fn cut_and_restore_send_network_commands() {
    let (mut h, _tx, cmds) = window_with_wifi_cut();
    h.get_by_label("Restore wifi").click();
    h.step();
    h.step();
    assert_eq!(cmds.try_recv(), Ok(NetCommand::Restore(0)));
}

#[test]
fn a_phone_sized_window_collapses_the_details() {
    let (app, _tx, _cmds) = app_with(2);
    let mut h = Harness::builder()
        .with_size(egui::vec2(400.0, 800.0))
        .build_ui_state(|ui, app: &mut PlayerApp| app.ui(ui), app);
    h.step();
    h.get_by_label("Hide details").click();
    h.step();
    h.step();
    assert!(!h.state().panel_open);
    assert!(
        h.query_by_label("Cut wifi").is_none(),
        "controls hidden in the collapsed portrait layout"
    );
    h.get_by_label("Details").click();
    h.step();
    h.step();
    assert!(h.state().panel_open);
}

#[test]
fn errors_are_shown_in_the_pane() {
    let (app, tx, _cmds) = app_with(0);
    tx.send(PaneUpdate::Error("no server at 127.0.0.1:9".into())).unwrap();
    let mut h = Harness::builder()
        .with_size(egui::vec2(800.0, 600.0))
        .build_ui_state(|ui, app: &mut PlayerApp| app.ui(ui), app);
    h.step();
    assert_eq!(h.state().panes[0].error.as_deref(), Some("no server at 127.0.0.1:9"));
}

#[test]
fn fit_keeps_the_aspect_ratio() {
    let r = fit(
        egui::Rect::from_min_size(egui::pos2(0.0, 0.0), egui::vec2(1000.0, 300.0)),
        352.0 / 288.0,
    );
    assert!((r.width() / r.height() - 352.0 / 288.0).abs() < 1e-3);
    assert!((r.height() - 300.0).abs() < 1e-3);
}

fn scored(
    title: &str,
    stalls: u32,
    lost: u64,
    psnr: Option<f64>,
) -> (Pane, mpsc::Sender<PaneUpdate>) {
    let (tx, rx) = mpsc::channel();
    let s = LiveStats {
        t_s: 2.0,
        stalls,
        stall_time_s: f64::from(stalls) * 0.5,
        frames_lost: lost,
        frames_shown: 50,
        psnr_avg_db: psnr,
        mos: psnr.map(|_| 4),
        buffer_s: 1.0,
        paths: vec![PathLive { name: "wifi".into(), bps: 1e6 }],
        ..LiveStats::default()
    };
    tx.send(PaneUpdate::Stats(LiveStats { t_s: 1.0, ..s.clone() })).unwrap();
    tx.send(PaneUpdate::Stats(s)).unwrap();
    (Pane::new(title, rx), tx)
}

fn compare_state(out_dir: std::path::PathBuf) -> compare::CompareState {
    compare::CompareState::new(compare::LiveComparison {
        scenario: "demo".into(),
        seed: 1,
        clip: "clip.mp4".into(),
        paths: vec![("wifi".into(), "wifi".into())],
        battery_j: None,
        out_dir,
    })
}

fn temp_dir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("braid-gui-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

#[test]
fn ranking_orders_by_stalls_then_lost_frames_then_psnr_then_energy() {
    use compare::{Score, rank};
    let s = |stalls, lost, psnr: Option<f64>, energy: Option<f64>| Score {
        stalls,
        stall_time_s: 0.0,
        frames_lost: lost,
        psnr_db: psnr,
        energy_j: energy,
    };
    // Fewer stalls win over everything else.
    assert_eq!(rank(&[s(2, 0, Some(50.0), None), s(1, 9, Some(20.0), None)]), vec![1, 0]);
    // Equal stalls: fewer lost frames.
    assert_eq!(rank(&[s(1, 5, Some(50.0), None), s(1, 2, Some(20.0), None)]), vec![1, 0]);
    // Then higher PSNR; a missing PSNR ranks last.
    assert_eq!(
        rank(&[s(0, 0, None, None), s(0, 0, Some(30.0), None), s(0, 0, Some(35.0), None)]),
        vec![2, 1, 0]
    );
    // Then less energy, when reported.
    assert_eq!(
        rank(&[
            s(0, 0, Some(30.0), Some(9.0)),
            s(0, 0, Some(30.0), Some(4.0)),
            s(0, 0, Some(30.0), None)
        ]),
        vec![1, 0, 2]
    );
    // Ties keep the panes' order; NaN does not break the sort.
    assert_eq!(rank(&[s(0, 0, Some(f64::NAN), None), s(0, 0, Some(f64::NAN), None)]), vec![0, 1]);
    // Stall time breaks a tie in the stall count.
    let mut long = s(1, 0, None, None);
    long.stall_time_s = 3.0;
    let mut short = s(1, 0, None, None);
    short.stall_time_s = 1.0;
    assert_eq!(rank(&[long, short]), vec![1, 0]);
}

#[test]
fn the_summary_strip_ranks_the_panes() {
    let (a, _ta) = scored("tcp", 3, 0, Some(40.0));
    let (b, _tb) = scored("mptcp", 0, 4, Some(38.0));
    let (c, _tc) = scored("mptcp-qe", 0, 0, Some(36.5));
    let app = PlayerApp::new(vec![a, b, c], Vec::new(), None)
        .with_compare(compare_state(temp_dir("strip")));
    let mut h = Harness::builder()
        .with_size(egui::vec2(1500.0, 860.0))
        .build_ui_state(|ui, app: &mut PlayerApp| app.ui(ui), app);
    h.step();
    h.get_by_label("1. mptcp-qe: 0 stalls, 0 lost, 36.5 dB");
    h.get_by_label("2. mptcp: 0 stalls, 4 lost, 38.0 dB");
    h.get_by_label("3. tcp: 3 stalls (1.5 s), 0 lost, 40.0 dB");
    assert_eq!(compare::rank_positions(&h.state().panes), vec![2, 1, 0]);
    // The pictures are drawn side by side.
    let r = &h.state().video_rects;
    assert_eq!(r.len(), 3);
    assert!(r[0].max.x <= r[1].min.x && r[1].max.x <= r[2].min.x, "{r:?}");
}

#[test]
fn export_writes_compare_json_and_csvs_and_says_where() {
    let dir = temp_dir("export");
    let (a, _ta) = scored("tcp", 2, 0, Some(40.0));
    let (b, _tb) = scored("mptcp", 0, 1, Some(39.0));
    let app = PlayerApp::new(vec![a, b], Vec::new(), None).with_compare(compare_state(dir.clone()));
    let mut h = Harness::builder()
        .with_size(egui::vec2(1200.0, 860.0))
        .build_ui_state(|ui, app: &mut PlayerApp| app.ui(ui), app);
    h.step();
    h.get_by_label("Export report").click();
    h.step();
    h.step();
    let json: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("compare.json")).expect("compare.json written"),
    )
    .unwrap();
    assert_eq!(json["scenario"], "demo");
    assert_eq!(json["seeds"], serde_json::json!([1]));
    assert_eq!(json["ranking"], serde_json::json!(["mptcp", "tcp"]));
    let p = &json["profiles"];
    assert_eq!(p[0]["profile"], "tcp");
    assert_eq!(p[0]["rank"], 2);
    assert_eq!(p[0]["complete"], false, "a session still playing is exported as a snapshot");
    assert_eq!(p[0]["mean"]["stream.stalls"], 2.0);
    assert_eq!(p[1]["mean"]["stream.frames_lost"], 1.0);
    assert_eq!(p[1]["runs"][0]["stream"]["psnr_avg_db"], 39.0);
    // 1 Mbit/s on wifi for the one second between the two samples, over two seconds.
    assert_eq!(p[1]["mean"]["goodput_bps"], 1e6);
    let summary = std::fs::read_to_string(dir.join("summary.csv")).unwrap();
    let rows: Vec<&str> = summary.lines().collect();
    assert!(rows[1].starts_with("1,mptcp,false,0,"), "{summary}");
    assert!(rows[2].starts_with("2,tcp,false,2,"), "{summary}");
    let live = std::fs::read_to_string(dir.join("tcp-live.csv")).unwrap();
    assert_eq!(live.lines().count(), 3, "{live}");
    assert!(
        live.starts_with(
            "t_s,buffer_s,psnr_db,stalls,stall_time_s,frames_shown,frames_lost,energy_j,wifi_bps\n"
        ),
        "{live}"
    );
    match &h.state().compare.as_ref().unwrap().export_status {
        Some(Ok(files)) => assert_eq!(files.len(), 4),
        other => panic!("{other:?}"),
    }
    assert!(
        h.query_by_label_contains("compare.json").is_some(),
        "the window names the files written"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_failed_export_is_shown_in_the_window() {
    let blocker = temp_dir("export-blocked");
    std::fs::write(&blocker, b"a file where the directory should be").unwrap();
    let (a, _ta) = scored("tcp", 0, 0, None);
    let app =
        PlayerApp::new(vec![a], Vec::new(), None).with_compare(compare_state(blocker.join("out")));
    let mut h = Harness::builder()
        .with_size(egui::vec2(1200.0, 860.0))
        .build_ui_state(|ui, app: &mut PlayerApp| app.ui(ui), app);
    h.step();
    h.get_by_label("Export report").click();
    h.step();
    h.step();
    assert!(h.query_by_label_contains("export failed: creating").is_some());
    let _ = std::fs::remove_file(&blocker);
}

fn opener_harness() -> (Harness<'static, PlayerApp>, tokio::runtime::Runtime) {
    let rt =
        tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let scenario = braid_netem::scenario::Scenario::parse(
        crate::assets::DEMO_SCENARIO,
        "demo.toml",
        std::path::Path::new("."),
    )
    .unwrap();
    let opener = crate::session::open::ScenarioOpener::new(
        scenario,
        vec![crate::session::compare::Contender::Braid(
            braid_transport::profile::lookup("mptcp").unwrap(),
        )],
    );
    let app = host::app_with_opener(rt.handle().clone(), Box::new(opener));
    let h = Harness::builder()
        .with_size(egui::vec2(1000.0, 700.0))
        .build_ui_state(|ui, app: &mut PlayerApp| app.ui(ui), app);
    (h, rt)
}

fn open(h: &mut Harness<'static, PlayerApp>, text: &str) {
    h.state_mut().open_text = text.to_string();
    h.step();
    h.get_by_label("Open").click();
    h.step();
    h.step();
}

#[test]
fn opening_a_missing_or_bad_file_shows_the_error_in_the_window() {
    let (mut h, _rt) = opener_harness();
    open(&mut h, "/nonexistent/clip.mp4");
    assert!(
        h.query_by_label(
            "error: no such file: /nonexistent/clip.mp4 (a server is given as host:port)"
        )
        .is_some()
    );
    assert!(h.state().panes.is_empty());
    // A file that is not a video.
    let bad = temp_dir("not-a-video").with_extension("mp4");
    std::fs::write(&bad, b"this is not a video").unwrap();
    open(&mut h, bad.to_str().unwrap());
    let shown = h.query_by_label_contains(&format!("error: opening {}", bad.display())).is_some();
    let _ = std::fs::remove_file(&bad);
    assert!(shown, "status: {:?}", h.state().status);
    open(&mut h, "");
    assert!(h.query_by_label_contains("error: type a video file").is_some());
}

#[test]
fn opening_an_address_without_a_server_shows_the_error_in_the_pane() {
    let (mut h, _rt) = opener_harness();
    // Nothing listens on the discard port of this host: the handshake is refused.
    open(&mut h, &format!("127.0.0.1:9#{}", "ab".repeat(32)));
    assert_eq!(h.state().panes.len(), 1);
    assert_eq!(h.state().status, Some(Status::Info("connecting to 127.0.0.1:9".into())));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while h.state().panes[0].error.is_none() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
        h.step();
    }
    let err = h.state().panes[0].error.clone().expect("an error within 20 s");
    assert!(err.starts_with("no server at 127.0.0.1:9"), "{err}");
}

#[test]
fn window_sizes_parse() {
    assert_eq!(parse_size("400x800"), Some([400.0, 800.0]));
    assert_eq!(parse_size(" 1280X720 "), Some([1280.0, 720.0]));
    assert_eq!(parse_size("400"), None);
    assert_eq!(parse_size("0x800"), None);
    assert_eq!(parse_size("axb"), None);
}

#[test]
fn a_finished_session_is_ranked_and_exported_from_its_report() {
    use braid_sim::{DelayPercentiles, SessionReport, StreamReport};
    let dir = temp_dir("export-final");
    // Live statistics say 0 stalls; the final report says 3: the report wins.
    let (a, _ta) = scored("tcp", 0, 0, Some(40.0));
    let report = SessionReport {
        scenario: "demo".into(),
        profile: "tcp".into(),
        seed: 1,
        duration_s: 20.0,
        goodput_bps: 2e6,
        bytes_delivered: 5_000_000,
        retransmitted_bytes: 0,
        lost_packets: 0,
        redundant_bytes: 0,
        unauthenticated_datagrams: 0,
        loss_unmeasured: false,
        proxy_buffer_bytes: None,
        delay_ms: DelayPercentiles::default(),
        paths: Vec::new(),
        stream: Some(StreamReport {
            stalls: 3,
            stall_time_s: 4.0,
            psnr_avg_db: 35.0,
            mos: 4,
            ..StreamReport::default()
        }),
        energy: None,
        failover_time_s: None,
    };
    a.report.set(report).unwrap();
    let (b, _tb) = scored("mptcp", 1, 0, Some(39.0));
    let app = PlayerApp::new(vec![a, b], Vec::new(), None).with_compare(compare_state(dir.clone()));
    let mut h = Harness::builder()
        .with_size(egui::vec2(1200.0, 860.0))
        .build_ui_state(|ui, app: &mut PlayerApp| app.ui(ui), app);
    h.step();
    h.get_by_label("1. mptcp: 1 stall (0.5 s), 0 lost, 39.0 dB");
    h.get_by_label("2. tcp: 3 stalls (4.0 s), 0 lost, 35.0 dB");
    h.get_by_label("Export report").click();
    h.step();
    h.step();
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("compare.json")).unwrap()).unwrap();
    assert_eq!(json["profiles"][0]["complete"], true);
    assert_eq!(json["profiles"][0]["mean"]["stream.stalls"], 3.0);
    assert_eq!(json["profiles"][0]["runs"][0]["bytes_delivered"], 5_000_000);
    assert_eq!(json["profiles"][1]["complete"], false);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn opening_a_clip_plays_it_over_the_emulated_paths() {
    let (mut h, _rt) = opener_harness();
    let clip = concat!(env!("CARGO_MANIFEST_DIR"), "/../assets/clips/h264-cif-25fps-2m.mp4");
    open(&mut h, clip);
    assert!(
        matches!(&h.state().status, Some(Status::Info(s)) if s.starts_with("playing ")),
        "{:?}",
        h.state().status
    );
    assert_eq!(h.state().panes.len(), 1);
    assert_eq!(h.state().paths.len(), 2, "the demo scenario's paths get controls");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while h.state().panes[0].frames < 10
        && h.state().panes[0].error.is_none()
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(std::time::Duration::from_millis(50));
        h.step();
    }
    let pane = &h.state().panes[0];
    assert_eq!(pane.error, None);
    assert!(pane.frames >= 10, "only {} pictures in 30 s", pane.frames);
    assert!(pane.stats.psnr_avg_db.is_some(), "PSNR is measured against the opened clip");
}

#[test]
fn the_sliders_show_what_the_scripted_events_set() {
    let (app, tx, cmds) = app_with(2);
    let mut h = Harness::builder()
        .with_size(egui::vec2(1000.0, 800.0))
        .build_ui_state(|ui, app: &mut PlayerApp| app.ui(ui), app);
    h.step();
    // The demo scenario's WiFi degradation, as the session sends it at its time.
    let scenario = braid_netem::scenario::Scenario::parse(
        crate::assets::DEMO_SCENARIO,
        "demo.toml",
        std::path::Path::new("."),
    )
    .unwrap();
    let degrade = scenario
        .events
        .iter()
        .find(|e| e.caption.as_deref().is_some_and(|c| c.contains("0.5 Mbit/s")))
        .expect("the demo degrades WiFi");
    for c in crate::session::live::event_changes(&scenario, degrade) {
        tx.send(PaneUpdate::PathChanged(c)).unwrap();
    }
    tx.send(PaneUpdate::Caption(degrade.caption.clone().unwrap())).unwrap();
    h.step();
    h.step();
    assert!((h.state().paths[0].rate_mbps - 0.5).abs() < 1e-9, "{:?}", h.state().paths);
    assert_eq!(h.state().paths[1].rate_mbps, 8.0, "LTE unchanged");
    assert!(cmds.try_recv().is_err(), "the relay applied the event itself: no command");
    // A cut and a restore of a path move its button too.
    tx.send(PaneUpdate::PathChanged(crate::session::live::PathChange {
        path: 1,
        cut: Some(true),
        ..Default::default()
    }))
    .unwrap();
    h.step();
    h.step();
    assert!(h.state().paths[1].cut);
    assert!(h.query_by_label("Restore lte").is_some());
}

#[test]
fn the_overlay_leaves_the_clips_timecode_visible() {
    // The bundled clip burns its timecode into the top left ~30 % × 13 % of the picture.
    let video = egui::Rect::from_min_size(egui::pos2(100.0, 50.0), egui::vec2(528.0, 432.0));
    let stamp = egui::Rect::from_min_size(video.min, egui::vec2(0.3 * 528.0, 0.13 * 432.0));
    for lines in 1..=8 {
        let size = egui::vec2(528.0 * 0.6, (lines as f32 * 23.4 + 10.0).min(216.0));
        let r = overlay_rect(video, size);
        assert!(!r.intersects(stamp), "{r:?} covers the timecode {stamp:?}");
        assert!(video.contains_rect(r), "{r:?} outside {video:?}");
    }
}

#[test]
fn the_overlay_compares_the_energy_with_all_paths() {
    let s = LiveStats { energy_j: 30.0, shadow_energy_j: Some(40.0), ..stats() };
    let lines = overlay_lines(&s, false).join("\n");
    assert!(
        lines.contains("all radios kept up (model), same traffic: 40.0 J (25 % saved)"),
        "{lines}"
    );
    // With a measured baseline beside it, the saving is the measured one.
    let s = LiveStats { baseline_energy_j: Some(50.0), ..s };
    let lines = overlay_lines(&s, false).join("\n");
    assert!(lines.contains("mptcp beside, measured: 50.0 J (40 % saved)"), "{lines}");
    assert!(lines.contains("all radios kept up (model): 40.0 J"), "{lines}");
    assert!(!lines.contains("25 % saved"), "{lines}");
}

#[test]
fn every_plot_is_visible_at_the_default_window_size() {
    let (app, tx, _cmds) = app_with(2);
    tx.send(PaneUpdate::Stats(stats())).unwrap();
    let mut h = Harness::builder()
        .with_size(egui::vec2(1000.0, 800.0))
        .build_ui_state(|ui, app: &mut PlayerApp| app.ui(ui), app);
    h.step();
    h.step();
    for title in
        ["throughput per path (Mbit/s)", "buffer (media s)", "PSNR (dB)", "radio energy (J)"]
    {
        let node = h.get_by_label(title);
        let r = node.rect();
        // The label, and the plot's 120 points below it, inside the window.
        assert!(r.max.y + 120.0 <= 800.0 && r.min.y >= 0.0, "{title} at {r:?}: off the window");
    }
    // The legend is a row between the title and the plot, so it covers no line: the
    // throughput plot names the pane's two paths there, and the plot still fits.
    let title = h.get_by_label("throughput per path (Mbit/s)").rect();
    for name in ["\u{2014} mptcp wifi", "\u{2014} mptcp lte"] {
        let r = h.get_by_label(name).rect();
        assert!(r.min.y >= title.max.y, "{name} at {r:?} above the title {title:?}");
        assert!(r.max.y + 120.0 <= 800.0, "{name} at {r:?}: the plot below it leaves the window");
    }
}

#[test]
fn plot_axes_step_one_two_five() {
    assert_eq!(nice_step(1.3), 2.0);
    assert_eq!(nice_step(1.7), 2.0);
    assert_eq!(nice_step(40.0), 50.0);
    assert_eq!(nice_step(0.3), 0.5);
    assert_eq!(nice_step(5.0), 5.0);
    assert_eq!(nice_step(0.0), 1.0);
    assert_eq!(nice_step(f64::NAN), 1.0);
}
