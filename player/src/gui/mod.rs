//! The player window (eframe/egui): one or more video panes, each with a live overlay,
//! plots below on one time axis, and network controls for live demos.
//!
//! Structure (egui demo / rerun style): [`PlayerApp`] holds plain-data state; sessions run
//! on their own threads and send [`PaneUpdate`]s over channels, calling
//! `request_repaint`; the UI turns button presses into [`NetCommand`]s instead of touching
//! a session directly. Nothing here blocks on the network; what runs is handed in (see
//! [`host`]).

pub mod compare;
pub mod host;

use std::path::PathBuf;
use std::sync::mpsc::{Receiver, Sender};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use braid_sim::SessionReport;
use eframe::egui;
use egui::{Color32, FontId, RichText, TextureHandle, TextureOptions};
use egui_plot::{Line, Plot, PlotPoints};

pub use crate::session::live::{ControlledPath, NetCommand};
use crate::session::live::{LiveStats, PaneUpdate, PathChange, VideoImage};

/// Keep this many stat samples per pane for the plots.
const HISTORY: usize = 6000;
/// Height of one row of a plot's legend (above the plot), logical pixels.
const LEGEND_ROW_PX: f32 = 18.0;
/// Legend entries per row above a plot in the landscape layout.
const LEGEND_PER_ROW: usize = 3;
/// Line colours of the plots, by the line's place in its plot (the legend above the plot
/// names them in the same colours): distinct on the dark theme.
const PLOT_COLOURS: [Color32; 8] = [
    Color32::from_rgb(86, 156, 240),
    Color32::from_rgb(232, 96, 86),
    Color32::from_rgb(110, 200, 110),
    Color32::from_rgb(236, 186, 60),
    Color32::from_rgb(200, 110, 220),
    Color32::from_rgb(80, 210, 210),
    Color32::from_rgb(240, 150, 60),
    Color32::from_rgb(200, 200, 200),
];
/// Below this width the layout switches to the phone-sized portrait arrangement.
pub const PORTRAIT_WIDTH: f32 = 600.0;

/// One video pane: a session's pictures and statistics.
pub struct Pane {
    /// Heading (profile name).
    pub title: String,
    rx: Receiver<PaneUpdate>,
    texture: Option<TextureHandle>,
    aspect: f32,
    /// The latest statistics.
    pub stats: LiveStats,
    history: Vec<LiveStats>,
    /// The latest caption.
    pub caption: Option<String>,
    /// An error from the session, shown in the pane.
    pub error: Option<String>,
    /// Whether the session ended.
    pub ended: bool,
    /// Pictures received.
    pub frames: u64,
    /// The session's report, once it ended (filled by whoever runs the session).
    pub report: Arc<OnceLock<SessionReport>>,
    /// The session restarted its emulated network since the app last looked.
    network_reset: bool,
    /// What scripted events set on the network since the app last looked.
    path_changes: Vec<PathChange>,
}

impl Pane {
    /// A pane fed by `rx`.
    pub fn new(title: impl Into<String>, rx: Receiver<PaneUpdate>) -> Pane {
        Pane {
            title: title.into(),
            rx,
            texture: None,
            aspect: 352.0 / 288.0,
            stats: LiveStats::default(),
            history: Vec::new(),
            caption: None,
            error: None,
            ended: false,
            frames: 0,
            report: Arc::default(),
            network_reset: false,
            path_changes: Vec::new(),
        }
    }

    /// The statistics received so far, oldest first (the plots' data).
    pub fn history(&self) -> &[LiveStats] {
        &self.history
    }

    /// Applies everything the session sent since the last frame. Of the pictures that
    /// came meanwhile only the newest is converted and uploaded: it is the one painted.
    pub fn poll(&mut self, ctx: &egui::Context) {
        let mut newest = None;
        while let Ok(u) = self.rx.try_recv() {
            match u {
                PaneUpdate::Frame(img) => {
                    self.frames += 1;
                    newest = Some(img);
                }
                PaneUpdate::Stats(s) => {
                    self.history.push(s.clone());
                    if self.history.len() > HISTORY {
                        self.history.drain(..HISTORY / 10);
                    }
                    self.stats = s;
                }
                PaneUpdate::Caption(c) => self.caption = Some(c),
                PaneUpdate::Error(e) => self.error = Some(e),
                PaneUpdate::Ended => self.ended = true,
                PaneUpdate::NetworkReset => self.network_reset = true,
                PaneUpdate::PathChanged(c) => self.path_changes.push(c),
            }
        }
        if let Some(img) = newest {
            self.show(ctx, &img);
        }
    }

    /// Uploads `img` as the pane's picture.
    fn show(&mut self, ctx: &egui::Context, img: &VideoImage) {
        let size = [img.width as usize, img.height as usize];
        let rgba = img.rgba();
        if rgba.len() != size[0] * size[1] * 4 {
            return;
        }
        let image = egui::ColorImage::from_rgba_unmultiplied(size, &rgba);
        match &mut self.texture {
            Some(t) => t.set(image, TextureOptions::LINEAR),
            None => {
                self.texture = Some(ctx.load_texture(
                    format!("video-{}", self.title),
                    image,
                    TextureOptions::LINEAR,
                ))
            }
        }
        self.aspect = img.width as f32 / img.height.max(1) as f32;
    }
}

/// Something typed into the window's "Open" field, started: the panes that now play it
/// and the emulated paths the network controls act on (none for a remote address).
pub struct Opened {
    /// The new panes (they replace the old ones).
    pub panes: Vec<Pane>,
    /// Controls for the new sessions' emulated paths.
    pub paths: Vec<ControlledPath>,
    /// What the status line says ("playing …").
    pub description: String,
}

/// Starts what the user typed into the "Open" field: a local file or a `host:port`.
pub trait Open {
    /// Starts playing `target`, stopping what played before; an error leaves the old panes.
    fn open(&mut self, target: &str) -> anyhow::Result<Opened>;
}

/// What the UI asks for while it draws; applied once the frame is laid out.
#[derive(Clone, Debug, PartialEq)]
pub enum AppCommand {
    /// Open a file or an address.
    Open(String),
    /// Write the comparison report.
    Export,
}

/// A line in the top bar: what happened last, or what went wrong.
#[derive(Clone, Debug, PartialEq)]
pub enum Status {
    /// Something worked.
    Info(String),
    /// Something failed; the message names the problem.
    Error(String),
}

/// Paint counting for benchmarks: with `BRAID_UI_STATS=FILE` the window rewrites FILE
/// every second with the frames painted so far, the seconds since the first one and where
/// each pane's picture is drawn.
struct UiStats {
    file: PathBuf,
    start: Instant,
    frames: u64,
    last_write: Instant,
}

/// The application state.
pub struct PlayerApp {
    /// Video panes (1 to 4).
    pub panes: Vec<Pane>,
    /// Whether overlays are drawn (toggle with `O`).
    pub overlay: bool,
    /// Whether the plots/controls panel is open (portrait layout).
    pub panel_open: bool,
    /// Emulated paths the controls act on (empty: no controls).
    pub paths: Vec<ControlledPath>,
    /// Their settings when the network was (re)started, restored on a booth-loop cycle.
    initial_paths: Vec<ControlledPath>,
    commands: Option<Sender<NetCommand>>,
    /// The last command sent (shown in the status line).
    pub last_command: Option<NetCommand>,
    /// The text of the "Open" field.
    pub open_text: String,
    opener: Option<Box<dyn Open>>,
    /// The status line.
    pub status: Option<Status>,
    /// Compare mode: the summary strip and the export.
    pub compare: Option<compare::CompareState>,
    /// Where each pane's picture was drawn in the last frame (points).
    pub video_rects: Vec<egui::Rect>,
    ui_stats: Option<UiStats>,
}

impl PlayerApp {
    /// An app showing `panes`, with network controls for `paths` sending to `commands`.
    pub fn new(
        panes: Vec<Pane>,
        paths: Vec<ControlledPath>,
        commands: Option<Sender<NetCommand>>,
    ) -> PlayerApp {
        PlayerApp {
            panes,
            overlay: true,
            panel_open: true,
            initial_paths: paths.clone(),
            paths,
            commands,
            last_command: None,
            open_text: String::new(),
            opener: None,
            status: None,
            compare: None,
            video_rects: Vec::new(),
            ui_stats: None,
        }
    }

    /// Adds the "Open" field, started by `opener`.
    pub fn with_opener(mut self, opener: Box<dyn Open>) -> PlayerApp {
        self.opener = Some(opener);
        self
    }

    /// Compare mode: a summary strip ranking the panes and an "Export report" button.
    pub fn with_compare(mut self, state: compare::CompareState) -> PlayerApp {
        self.compare = Some(state);
        self
    }

    /// Counts painted frames into `file` (see `BRAID_UI_STATS`).
    pub fn with_ui_stats(mut self, file: Option<PathBuf>) -> PlayerApp {
        let now = Instant::now();
        self.ui_stats = file.map(|file| UiStats { file, start: now, frames: 0, last_write: now });
        self
    }

    fn send(&mut self, cmd: NetCommand) {
        if let Some(tx) = &self.commands {
            let _ = tx.send(cmd.clone());
        }
        self.last_command = Some(cmd);
    }

    /// Carries out what the UI asked for.
    pub fn apply(&mut self, cmd: AppCommand) {
        match cmd {
            AppCommand::Open(target) => {
                let Some(opener) = self.opener.as_mut() else { return };
                match opener.open(&target) {
                    Ok(o) => {
                        self.panes = o.panes;
                        self.initial_paths = o.paths.clone();
                        self.paths = o.paths;
                        self.status = Some(Status::Info(o.description));
                    }
                    Err(e) => self.status = Some(Status::Error(format!("{e:#}"))),
                }
            }
            AppCommand::Export => {
                if let Some(c) = self.compare.as_mut() {
                    c.export_status =
                        Some(compare::export(c, &self.panes).map_err(|e| format!("{e:#}")));
                }
            }
        }
    }

    /// The whole UI (also what tests drive).
    pub fn ui(&mut self, ui: &mut egui::Ui) {
        let ctx = ui.ctx().clone();
        for p in &mut self.panes {
            p.poll(&ctx);
        }
        if self.panes.iter_mut().any(|p| std::mem::take(&mut p.network_reset)) {
            self.paths = self.initial_paths.clone();
            self.last_command = None;
        }
        // The controls show what the scenario's events set (every pane of a comparison
        // sees the same events: applying each is idempotent).
        let changes: Vec<PathChange> =
            self.panes.iter_mut().flat_map(|p| std::mem::take(&mut p.path_changes)).collect();
        for c in changes {
            if let Some(p) = self.paths.get_mut(c.path) {
                c.apply(p);
            }
        }
        if ctx.input(|i| i.key_pressed(egui::Key::O)) && !ctx.egui_wants_keyboard_input() {
            self.overlay = !self.overlay;
        }
        let portrait = ui.available_width() < PORTRAIT_WIDTH;
        let mut app_cmds = Vec::new();
        egui::Panel::top("braid-top").show(ui, |ui| {
            ui.horizontal_wrapped(|ui| {
                ui.heading("Braid");
                ui.separator();
                let label = if self.overlay { "Hide overlay (O)" } else { "Show overlay (O)" };
                if ui.add(egui::Button::new(label).min_size(egui::vec2(44.0, 32.0))).clicked() {
                    self.overlay = !self.overlay;
                }
                if portrait {
                    let label = if self.panel_open { "Hide details" } else { "Details" };
                    if ui.add(egui::Button::new(label).min_size(egui::vec2(44.0, 32.0))).clicked() {
                        self.panel_open = !self.panel_open;
                    }
                }
                if self.opener.is_some() {
                    ui.separator();
                    self.open_ui(ui, portrait, &mut app_cmds);
                }
            });
            if let Some(c) = self.panes.iter().find_map(|p| p.caption.clone()) {
                ui.label(RichText::new(c).strong().size(if portrait { 16.0 } else { 20.0 }));
            }
            match &self.status {
                Some(Status::Info(s)) => {
                    ui.label(s);
                }
                Some(Status::Error(e)) => {
                    ui.label(
                        RichText::new(format!("error: {e}"))
                            .color(Color32::from_rgb(255, 90, 90))
                            .strong(),
                    );
                }
                None => {}
            }
        });
        if let Some(state) = &self.compare {
            egui::Panel::top("braid-compare").show(ui, |ui| {
                compare::summary_strip_ui(ui, state, &self.panes, portrait, &mut app_cmds);
            });
        }
        if !portrait || self.panel_open {
            // Landscape: the controls and one row of plots fit without scrolling.
            let rows = self.paths.len() as f32;
            // The throughput plot has the most lines (a pane's paths, every pane): its
            // legend rows above the plots.
            let lines = self.panes.iter().map(|p| p.stats.paths.len().max(1)).sum::<usize>();
            let legend_rows = lines.div_ceil(LEGEND_PER_ROW).max(1) as f32;
            let height = if portrait {
                ui.available_height() * 0.45
            } else {
                (if rows > 0.0 { rows * 42.0 + 30.0 } else { 0.0 })
                    + 195.0
                    + (legend_rows - 1.0) * LEGEND_ROW_PX
            };
            egui::Panel::bottom("braid-bottom").resizable(true).default_size(height).show(
                ui,
                |ui| {
                    egui::ScrollArea::vertical().show(ui, |ui| {
                        if !self.paths.is_empty() {
                            self.controls_ui(ui, portrait);
                            ui.separator();
                        }
                        self.plots_ui(ui, portrait);
                    });
                },
            );
        }
        egui::CentralPanel::default_margins().show(ui, |ui| {
            let n = self.panes.len().max(1);
            let (cols, rows) = if portrait || n == 1 {
                (1, n)
            } else if n <= 3 {
                (n, 1)
            } else {
                (2, n.div_ceil(2))
            };
            let avail = ui.available_size();
            let cell = egui::vec2(avail.x / cols as f32, avail.y / rows as f32);
            let origin = ui.available_rect_before_wrap().min;
            let overlay = self.overlay;
            let ranks = self.compare.as_ref().map(|_| compare::rank_positions(&self.panes));
            self.video_rects.clear();
            for (i, pane) in self.panes.iter().enumerate() {
                let (c, r) = (i % cols, i / cols);
                let rect = egui::Rect::from_min_size(
                    origin + egui::vec2(c as f32 * cell.x, r as f32 * cell.y),
                    cell,
                )
                .shrink(4.0);
                let rank = ranks.as_ref().and_then(|r| r.get(i).copied());
                self.video_rects.push(pane_ui(ui, rect, pane, overlay, portrait || n > 2, rank));
            }
            ui.allocate_rect(ui.available_rect_before_wrap(), egui::Sense::hover());
        });
        for c in app_cmds {
            self.apply(c);
        }
    }

    fn open_ui(&mut self, ui: &mut egui::Ui, portrait: bool, cmds: &mut Vec<AppCommand>) {
        let width = if portrait { 180.0 } else { 260.0 };
        let field = ui.add(
            egui::TextEdit::singleline(&mut self.open_text)
                .hint_text("file or host:port")
                .desired_width(width)
                .min_size(egui::vec2(width, 32.0)),
        );
        let entered = field.lost_focus() && ui.input(|i| i.key_pressed(egui::Key::Enter));
        if ui.add(egui::Button::new("Open").min_size(egui::vec2(64.0, 32.0))).clicked() || entered {
            cmds.push(AppCommand::Open(self.open_text.trim().to_string()));
        }
    }

    /// Counts one painted frame and rewrites the stats file at most once a second.
    fn count_frame(&mut self) {
        let Some(st) = self.ui_stats.as_mut() else { return };
        st.frames += 1;
        let now = Instant::now();
        if now.duration_since(st.last_write).as_secs_f64() < 1.0 {
            return;
        }
        st.last_write = now;
        let rects: Vec<[f32; 4]> =
            self.video_rects.iter().map(|r| [r.min.x, r.min.y, r.width(), r.height()]).collect();
        let json = serde_json::json!({
            "frames": st.frames,
            "elapsed_s": now.duration_since(st.start).as_secs_f64(),
            "panes": self.panes.len(),
            "video_frames": self.panes.iter().map(|p| p.frames).collect::<Vec<_>>(),
            // Each pane's transport driver: how late its timers fired (ms).
            "timer_late_ms": self
                .panes
                .iter()
                .map(|p| {
                    p.stats.timer_lateness.map(|l| {
                        serde_json::json!({
                            "wakes": l.wakes,
                            "p50": l.p50.as_secs_f64() * 1e3,
                            "p99": l.p99.as_secs_f64() * 1e3,
                            "max": l.max.as_secs_f64() * 1e3,
                        })
                    })
                })
                .collect::<Vec<_>>(),
            "video_rects": rects,
        });
        // Write then rename, so a reader never sees half a file.
        let tmp = st.file.with_extension("tmp");
        if std::fs::write(&tmp, json.to_string()).is_ok() {
            let _ = std::fs::rename(&tmp, &st.file);
        }
    }

    fn controls_ui(&mut self, ui: &mut egui::Ui, portrait: bool) {
        ui.label(RichText::new("Network").strong());
        let mut cmds = Vec::new();
        for (i, p) in self.paths.iter_mut().enumerate() {
            let mut row = |ui: &mut egui::Ui, cmds: &mut Vec<NetCommand>| {
                ui.label(RichText::new(&p.name).strong().size(16.0));
                let (label, cmd) = if p.cut {
                    (format!("Restore {}", p.name), NetCommand::Restore(i))
                } else {
                    (format!("Cut {}", p.name), NetCommand::Cut(i))
                };
                if ui.add(egui::Button::new(label).min_size(egui::vec2(88.0, 36.0))).clicked() {
                    p.cut = !p.cut;
                    cmds.push(cmd);
                }
                if ui
                    .add(
                        egui::Slider::new(&mut p.rate_mbps, 0.1..=50.0)
                            .logarithmic(true)
                            .text("Mbit/s"),
                    )
                    .drag_stopped()
                {
                    cmds.push(NetCommand::SetRate(i, (p.rate_mbps * 1e6) as u64));
                }
                if ui.add(egui::Slider::new(&mut p.delay_ms, 0.0..=500.0).text("ms")).drag_stopped()
                {
                    cmds.push(NetCommand::SetDelayMs(i, p.delay_ms as u64));
                }
                if ui
                    .add(egui::Slider::new(&mut p.loss_pct, 0.0..=20.0).text("% loss"))
                    .drag_stopped()
                {
                    cmds.push(NetCommand::SetLoss(i, p.loss_pct / 100.0));
                }
            };
            if portrait {
                ui.vertical(|ui| row(ui, &mut cmds));
            } else {
                ui.horizontal(|ui| row(ui, &mut cmds));
            }
        }
        for c in cmds {
            self.send(c);
        }
    }

    /// The four plots on one time axis: side by side in a landscape window (all visible
    /// at the default size), two by two in a portrait one. Every plot starts its y axis
    /// at 0 and labels its values.
    fn plots_ui(&self, ui: &mut egui::Ui, portrait: bool) {
        let link = egui::Id::unique("braid-time-axis");
        let h = if portrait { 90.0 } else { 120.0 };
        let series = |f: &dyn Fn(&LiveStats) -> Option<f64>, pane: &Pane| -> Vec<[f64; 2]> {
            pane.history.iter().filter_map(|s| f(s).map(|v| [s.t_s, v])).collect()
        };
        let plot =
            |ui: &mut egui::Ui, id: &str, title: &str, lines: Vec<(String, Vec<[f64; 2]>)>| {
                ui.label(title);
                // The legend goes above the plot, not inside it, so it covers no line
                // however many panes and paths there are.
                ui.horizontal_wrapped(|ui| {
                    ui.spacing_mut().item_spacing.x = 10.0;
                    for (k, (name, _)) in lines.iter().enumerate() {
                        let c = PLOT_COLOURS[k % PLOT_COLOURS.len()];
                        ui.label(RichText::new(format!("\u{2014} {name}")).color(c).small());
                    }
                });
                let top = lines
                    .iter()
                    .flat_map(|(_, pts)| pts.iter().map(|p| p[1]))
                    .filter(|v| v.is_finite())
                    .fold(0.0_f64, f64::max);
                Plot::new(id)
                    .height(h)
                    .link_axis(link, [true, false])
                    .show_axes([true, true])
                    .include_y(0.0)
                    // A little head-room, so the highest line is not drawn on the frame.
                    .include_y(top * 1.08)
                    .y_axis_min_width(34.0)
                    .y_axis_formatter(|m, _| format!("{:.1}", m.value))
                    .x_grid_spacer(egui_plot::uniform_grid_spacer(|g| {
                        let s = nice_step((g.bounds.1 - g.bounds.0) / 3.0);
                        [s / 5.0, s, s * 5.0]
                    }))
                    .y_grid_spacer(egui_plot::uniform_grid_spacer(|g| {
                        let s = nice_step((g.bounds.1 - g.bounds.0) / 3.0);
                        [s / 5.0, s, s * 5.0]
                    }))
                    .allow_scroll(false)
                    .show(ui, |pui| {
                        for (k, (name, pts)) in lines.into_iter().enumerate() {
                            let c = PLOT_COLOURS[k % PLOT_COLOURS.len()];
                            pui.line(Line::new(name, PlotPoints::from(pts)).color(c).width(1.5));
                        }
                    });
            };
        let mut thr = Vec::new();
        let mut buf = Vec::new();
        let mut psnr = Vec::new();
        let mut energy = Vec::new();
        for pane in &self.panes {
            let names: Vec<String> = pane.stats.paths.iter().map(|p| p.name.clone()).collect();
            for (k, name) in names.iter().enumerate() {
                let pts = series(&|s: &LiveStats| s.paths.get(k).map(|p| p.bps / 1e6), pane);
                thr.push((format!("{} {name}", pane.title), pts));
            }
            buf.push((pane.title.clone(), series(&|s: &LiveStats| Some(s.buffer_s), pane)));
            psnr.push((
                pane.title.clone(),
                series(&|s: &LiveStats| s.psnr_now_db.or(s.eq13_db), pane),
            ));
            energy.push((pane.title.clone(), series(&|s: &LiveStats| Some(s.energy_j), pane)));
        }
        let plots = [
            ("plot-thr", "throughput per path (Mbit/s)", thr),
            ("plot-buf", "buffer (media s)", buf),
            ("plot-psnr", "PSNR (dB)", psnr),
            ("plot-energy", "radio energy (J)", energy),
        ];
        let per_row = if portrait { 2 } else { 4 };
        let mut plots = plots.into_iter();
        for _ in 0..4usize.div_ceil(per_row) {
            ui.columns(per_row, |cols| {
                for col in cols.iter_mut() {
                    if let Some((id, title, lines)) = plots.next() {
                        plot(col, id, title, lines);
                    }
                }
            });
        }
    }
}

/// Draws one pane: the picture at its aspect ratio, and the overlay on top of it.
fn pane_ui(
    ui: &mut egui::Ui,
    rect: egui::Rect,
    pane: &Pane,
    overlay: bool,
    compact: bool,
    rank: Option<usize>,
) -> egui::Rect {
    let painter = ui.painter_at(rect);
    painter.rect_filled(rect, 0.0, Color32::BLACK);
    let title_h = 24.0;
    let area = egui::Rect::from_min_max(rect.min + egui::vec2(0.0, title_h), rect.max);
    let title = match rank {
        Some(r) => format!("#{} {}", r + 1, pane.title),
        None => pane.title.clone(),
    };
    painter.text(
        rect.min + egui::vec2(6.0, 4.0),
        egui::Align2::LEFT_TOP,
        title,
        FontId::proportional(18.0),
        Color32::WHITE,
    );
    let video = fit(area, pane.aspect);
    if let Some(t) = &pane.texture {
        painter.image(
            t.id(),
            video,
            egui::Rect::from_min_max(egui::pos2(0.0, 0.0), egui::pos2(1.0, 1.0)),
            Color32::WHITE,
        );
    } else {
        painter.text(
            video.center(),
            egui::Align2::CENTER_CENTER,
            "waiting for video…",
            FontId::proportional(20.0),
            Color32::GRAY,
        );
    }
    if let Some(e) = &pane.error {
        painter.text(
            video.center(),
            egui::Align2::CENTER_CENTER,
            format!("error: {e}"),
            FontId::proportional(18.0),
            Color32::from_rgb(255, 90, 90),
        );
    }
    if overlay {
        overlay_ui(&painter, video, &pane.stats, compact);
    }
    video
}

/// The largest rectangle of `aspect` centred in `area`.
pub fn fit(area: egui::Rect, aspect: f32) -> egui::Rect {
    let (w, h) = (area.width(), area.height());
    let size = if w / h.max(1.0) > aspect {
        egui::vec2(h * aspect, h)
    } else {
        egui::vec2(w, w / aspect.max(0.01))
    };
    egui::Rect::from_center_size(area.center(), size)
}

/// The overlay's lines for `s` (also used by tests).
pub fn overlay_lines(s: &LiveStats, compact: bool) -> Vec<String> {
    let mut lines = Vec::new();
    match (s.psnr_now_db, s.psnr_avg_db) {
        (Some(now), avg) => {
            let f = |x: f64| if x >= 100.0 { "∞".to_string() } else { format!("{x:.1}") };
            lines.push(format!(
                "PSNR {} dB (avg {}) MOS {}",
                f(now),
                avg.map_or("-".into(), f),
                s.mos.map_or("-".into(), |m| m.to_string())
            ));
        }
        (None, _) => {
            if let Some(e) = s.eq13_db {
                lines.push(format!("PSNR estimate (eq. 13) {e:.1} dB"));
            }
        }
    }
    lines
        .push(format!("stalls {} ({:.1} s)  buffer {:.1} s", s.stalls, s.stall_time_s, s.buffer_s));
    if !compact {
        lines.push(format!(
            "start-up {}  frames {} shown / {} lost",
            s.startup_s.map_or("-".to_string(), |t| format!("{t:.2} s")),
            s.frames_shown,
            s.frames_lost
        ));
    }
    if s.energy_j > 0.0 || !s.radios.is_empty() {
        let per: Vec<String> =
            s.radios.iter().map(|r| format!("{} {:.1} J", r.name, r.energy_j)).collect();
        lines.push(format!(
            "energy {:.1} J, {:.0} mW  {}",
            s.energy_j,
            s.power_mw,
            if compact { String::new() } else { per.join("  ") }
        ));
    }
    if let Some(base) = s.baseline_energy_j.filter(|j| *j > 0.0) {
        // Measured: a real all-paths session beside this one.
        let saved = (1.0 - s.energy_j / base) * 100.0;
        lines.push(if compact {
            format!("mptcp beside {base:.1} J ({saved:+.0} % saved)")
        } else {
            format!("mptcp beside, measured: {base:.1} J ({saved:.0} % saved)")
        });
    }
    if let Some(shadow) = s.shadow_energy_j.filter(|j| *j > 0.0) {
        let saved = (1.0 - s.energy_j / shadow) * 100.0;
        // The shadow is a model; beside a measured baseline it is only shown in full.
        if s.baseline_energy_j.is_none() {
            lines.push(if compact {
                format!("all radios up (model) {shadow:.1} J ({saved:+.0} % saved)")
            } else {
                format!(
                    "all radios kept up (model), same traffic: {shadow:.1} J ({saved:.0} % saved)"
                )
            });
        } else if !compact {
            lines.push(format!("all radios kept up (model): {shadow:.1} J"));
        }
    }
    if let Some(m) = &s.mode {
        lines.push(format!("mode {m}"));
    }
    lines
}

/// Where an overlay box of `size` goes on `video`: its bottom left corner, 8 points in.
pub fn overlay_rect(video: egui::Rect, size: egui::Vec2) -> egui::Rect {
    egui::Rect::from_min_size(
        egui::pos2(video.min.x + 8.0, (video.max.y - 8.0 - size.y).max(video.min.y)),
        size,
    )
}

fn overlay_ui(painter: &egui::Painter, video: egui::Rect, s: &LiveStats, compact: bool) {
    let lines = overlay_lines(s, compact);
    let size = if compact { 14.0 } else { 18.0 };
    let line_h = size * 1.3;
    let bars_h = if s.paths.is_empty() { 0.0 } else { s.paths.len() as f32 * line_h };
    let h = lines.len() as f32 * line_h + bars_h + 10.0;
    // At the bottom left, never more than half the height and 60 % of the width: the
    // picture stays visible and the clip's own timecode (burned in at its top left) too.
    let box_size = egui::vec2((video.width() * 0.6).max(160.0), h.min(video.height() * 0.5));
    let box_rect = overlay_rect(video, box_size);
    painter.rect_filled(box_rect, 6.0, Color32::from_black_alpha(170));
    let mut y = box_rect.min.y + 5.0;
    for l in &lines {
        painter.text(
            egui::pos2(box_rect.min.x + 8.0, y),
            egui::Align2::LEFT_TOP,
            l,
            FontId::proportional(size),
            Color32::WHITE,
        );
        y += line_h;
    }
    let max_bps = s.paths.iter().map(|p| p.bps).fold(1.0, f64::max);
    for p in &s.paths {
        let w = (box_rect.width() - 90.0).max(10.0) * (p.bps / max_bps) as f32;
        painter.text(
            egui::pos2(box_rect.min.x + 8.0, y),
            egui::Align2::LEFT_TOP,
            &p.name,
            FontId::proportional(size * 0.9),
            Color32::WHITE,
        );
        let bar = egui::Rect::from_min_size(
            egui::pos2(box_rect.min.x + 60.0, y + 3.0),
            egui::vec2(w, size * 0.8),
        );
        painter.rect_filled(bar, 2.0, Color32::from_rgb(80, 200, 120));
        y += line_h;
    }
}

impl eframe::App for PlayerApp {
    fn ui(&mut self, ui: &mut egui::Ui, _frame: &mut eframe::Frame) {
        PlayerApp::ui(self, ui);
        self.count_frame();
        // Keep polling the sessions' channels.
        ui.ctx().request_repaint_after(std::time::Duration::from_millis(30));
    }
}

/// Whether a window can be opened (a display is set).
pub fn display_available() -> bool {
    std::env::var_os("DISPLAY").is_some_and(|d| !d.is_empty())
        || std::env::var_os("WAYLAND_DISPLAY").is_some_and(|d| !d.is_empty())
}

/// The window size from `BRAID_WINDOW_SIZE=WxH` (e.g. `400x800` for the phone layout), or
/// `default`.
pub fn window_size(default: [f32; 2]) -> anyhow::Result<[f32; 2]> {
    match std::env::var("BRAID_WINDOW_SIZE") {
        Ok(v) if !v.trim().is_empty() => parse_size(&v)
            .ok_or_else(|| anyhow::anyhow!("BRAID_WINDOW_SIZE must look like 400x800, got {v:?}")),
        _ => Ok(default),
    }
}

/// `"400x800"` → `[400, 800]` (each side 100 to 10000 points).
pub fn parse_size(s: &str) -> Option<[f32; 2]> {
    let (w, h) = s.trim().split_once(['x', 'X'])?;
    let (w, h): (u32, u32) = (w.trim().parse().ok()?, h.trim().parse().ok()?);
    let ok = |v: u32| (100..=10_000).contains(&v);
    (ok(w) && ok(h)).then_some([w as f32, h as f32])
}

/// Opens the window and runs until it is closed; `on_start` gets the egui context (so
/// session threads can request repaints). `BRAID_WINDOW_SIZE=WxH` overrides `size`;
/// `BRAID_UI_STATS=FILE` counts painted frames into FILE.
pub fn run_window_with(
    title: &str,
    app: PlayerApp,
    size: [f32; 2],
    on_start: impl FnOnce(&egui::Context) + 'static,
) -> anyhow::Result<()> {
    let size = window_size(size)?;
    let app = app.with_ui_stats(
        std::env::var_os("BRAID_UI_STATS").filter(|v| !v.is_empty()).map(PathBuf::from),
    );
    let options = eframe::NativeOptions {
        viewport: egui::ViewportBuilder::default().with_inner_size(size).with_title(title),
        renderer: eframe::Renderer::Glow,
        ..Default::default()
    };
    eframe::run_native(
        title,
        options,
        Box::new(move |cc| {
            on_start(&cc.egui_ctx);
            Ok(Box::new(app))
        }),
    )
    .map_err(|e| anyhow::anyhow!("opening the window: {e}"))
}

/// The 1-2-5 step (1, 2, 5, 10, 20 …) nearest above `raw`: a plot's axes labelled about
/// three times over their range, whatever the range (a few Mbit/s, a hundred J, a minute).
fn nice_step(raw: f64) -> f64 {
    if !raw.is_finite() || raw <= 0.0 {
        return 1.0;
    }
    let decade = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * decade)
        .find(|&s| s >= raw)
        .unwrap_or(10.0 * decade)
}

#[cfg(test)]
mod tests;
