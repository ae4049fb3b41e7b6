//! What a running session and whoever displays it (the window or the terminal) exchange
//! over channels, off the UI thread: decoded pictures and live statistics one way, changes
//! to the emulated network the other way.

use std::sync::Arc;

use braid_netem::scenario::{Action, Direction, EventDef, Scenario, Target};

/// Asks the display to repaint (callable from any thread).
pub type Wake = Arc<dyn Fn() + Send + Sync>;

/// A decoded picture for display, planar 4:2:0 as the decoder gave it: a window converts
/// the picture it paints ([`VideoImage::rgba`]), and a display that paints nothing (the
/// terminal) converts nothing.
#[derive(Clone, Debug, PartialEq)]
pub struct VideoImage {
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// The picture.
    pub i420: braid_media::quality::Frame,
}

impl VideoImage {
    /// A decoded 4:2:0 picture.
    pub fn from_frame(f: braid_media::quality::Frame) -> VideoImage {
        VideoImage { width: f.width, height: f.height, i420: f }
    }

    /// Packed RGBA, `width·height·4` bytes.
    pub fn rgba(&self) -> Vec<u8> {
        self.i420.to_rgba()
    }
}

/// One radio's energy so far.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RadioLive {
    /// Path name.
    pub name: String,
    /// Joules so far.
    pub energy_j: f64,
    /// Power now, mW.
    pub power_mw: f64,
}

/// One path's throughput now.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PathLive {
    /// Path name.
    pub name: String,
    /// Bits per second over the last second.
    pub bps: f64,
}

/// A snapshot of the session's statistics.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LiveStats {
    /// Seconds since the session started.
    pub t_s: f64,
    /// PSNR of the picture on screen against the reference, when a reference is known.
    pub psnr_now_db: Option<f64>,
    /// Average PSNR so far (PSNR of the mean MSE), when a reference is known.
    pub psnr_avg_db: Option<f64>,
    /// The MPTCP-QE paper's eq. 13 estimate, when there is no reference.
    pub eq13_db: Option<f64>,
    /// MOS from the measured PSNR.
    pub mos: Option<u8>,
    /// Rebuffering events.
    pub stalls: u32,
    /// Their total duration, s.
    pub stall_time_s: f64,
    /// Start-up delay, once playback started.
    pub startup_s: Option<f64>,
    /// Media buffered, s.
    pub buffer_s: f64,
    /// Frames shown and lost so far.
    pub frames_shown: u64,
    /// Frames lost (abandoned or undecodable).
    pub frames_lost: u64,
    /// Total radio energy so far, J.
    pub energy_j: f64,
    /// Total radio power now, mW.
    pub power_mw: f64,
    /// What the same traffic would have cost so far with every radio kept up (all-paths
    /// `mptcp`; the transport's shadow radios), J; `None` without radios.
    pub shadow_energy_j: Option<f64>,
    /// What an all-paths `mptcp` session run beside this one, on its own copy of the same
    /// emulated network, has spent so far, J: a measured baseline (`braid demo`); `None`
    /// where none runs.
    pub baseline_energy_j: Option<f64>,
    /// Per radio.
    pub radios: Vec<RadioLive>,
    /// Path mode (Full / Partial), for energy-aware profiles.
    pub mode: Option<String>,
    /// Per path throughput.
    pub paths: Vec<PathLive>,
    /// How late the transport driver's timers fired so far (`None`: not known).
    pub timer_lateness: Option<braid_io::driver::TimerLateness>,
}

/// What a session sends to its display.
#[derive(Clone, Debug, PartialEq)]
pub enum PaneUpdate {
    /// A new picture.
    Frame(VideoImage),
    /// New statistics.
    Stats(LiveStats),
    /// A caption ("WiFi degrades — watch LTE take over").
    Caption(String),
    /// The session failed.
    Error(String),
    /// The session ended.
    Ended,
    /// The emulated network was started afresh from the scenario (a new cycle of the booth
    /// loop): network controls return to their initial settings.
    NetworkReset,
    /// A scripted event changed a path: its controls show the new settings.
    PathChanged(PathChange),
}

/// What a scripted event set on one path's controls (`None`: unchanged).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PathChange {
    /// The path (index into the controls).
    pub path: usize,
    /// Cut (`Some(true)`) or restored.
    pub cut: Option<bool>,
    /// Rate, Mbit/s.
    pub rate_mbps: Option<f64>,
    /// One-way delay, ms.
    pub delay_ms: Option<f64>,
    /// Loss, percent.
    pub loss_pct: Option<f64>,
}

impl PathChange {
    /// Applies the change to `p`.
    pub fn apply(&self, p: &mut ControlledPath) {
        if let Some(c) = self.cut {
            p.cut = c;
        }
        if let Some(r) = self.rate_mbps {
            p.rate_mbps = r;
        }
        if let Some(d) = self.delay_ms {
            p.delay_ms = d;
        }
        if let Some(l) = self.loss_pct {
            p.loss_pct = l;
        }
    }
}

/// What `ev` sets on the controls of `scenario`'s paths, which show each path's first down
/// link ([`controlled_paths`]): a path event that changes the down direction (or cuts or
/// restores the path), or a link event on a path's first down link.
pub fn event_changes(scenario: &Scenario, ev: &EventDef) -> Vec<PathChange> {
    let paths: Vec<usize> = match ev.target {
        Target::Path(p) if ev.direction != Direction::Up => vec![p],
        Target::Path(_) => Vec::new(),
        Target::Link(l) => (0..scenario.paths.len())
            .filter(|&p| scenario.paths[p].down.first() == Some(&l))
            .collect(),
    };
    paths
        .into_iter()
        .map(|path| {
            let mut c = PathChange { path, ..PathChange::default() };
            match &ev.action {
                Action::Down => c.cut = Some(true),
                Action::Up => c.cut = Some(false),
                Action::Set { rate_bps, delay, loss } => {
                    c.rate_mbps = rate_bps.map(|r| r as f64 / 1e6);
                    c.delay_ms = delay.map(|d| d.as_secs_f64() * 1000.0);
                    c.loss_pct = loss.map(|l| l * 100.0);
                }
            }
            c
        })
        .collect()
}

/// A change to the emulated network requested from the window.
#[derive(Clone, Debug, PartialEq)]
pub enum NetCommand {
    /// Cut path `n` (both directions).
    Cut(usize),
    /// Restore path `n`.
    Restore(usize),
    /// Set path `n`'s rate, bit/s.
    SetRate(usize, u64),
    /// Set path `n`'s one-way delay, ms.
    SetDelayMs(usize, u64),
    /// Set path `n`'s loss probability.
    SetLoss(usize, f64),
}

/// One emulated path the network controls act on, with their settings.
#[derive(Clone, Debug, PartialEq)]
pub struct ControlledPath {
    /// Name.
    pub name: String,
    /// Whether it is cut.
    pub cut: bool,
    /// Rate slider, Mbit/s.
    pub rate_mbps: f64,
    /// Delay slider, ms.
    pub delay_ms: f64,
    /// Loss slider, percent.
    pub loss_pct: f64,
}

/// The network controls for `scenario`'s paths, at their nominal settings (a path's first
/// down link; 10 Mbit/s when its rate is not fixed).
pub fn controlled_paths(scenario: &Scenario) -> Vec<ControlledPath> {
    scenario
        .paths
        .iter()
        .map(|p| {
            let link = p.down.first().and_then(|&l| scenario.links.get(l));
            ControlledPath {
                name: p.name.clone(),
                cut: false,
                rate_mbps: link.and_then(|l| l.config.rate.nominal_bps()).unwrap_or(10e6) / 1e6,
                delay_ms: link.map_or(0.0, |l| l.config.delay.as_secs_f64() * 1000.0),
                loss_pct: 0.0,
            }
        })
        .collect()
}
