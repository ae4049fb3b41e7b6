//! The sessions behind a window: one per pane, each on the async runtime, reporting to its
//! pane over a channel. The host fans the window's network commands out to every session's
//! emulator (so panes keep identical conditions), keeps each finished session's report for
//! the compare export, and starts what is typed into the "Open" field: a local file (served
//! in-process over the emulated paths, as `braid demo` does) or a `host:port` (as
//! `braid play` connects).

use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::mpsc::{Sender, channel};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use anyhow::{Context as _, bail};
use braid_io::driver::{self, PathSpec};
use braid_media::decode::ffmpeg_decode_clip;
use braid_media::playout::PlayoutPolicy;
use braid_media::quality::Frame;
use braid_transport::energy::Battery;
use braid_transport::path::PathRole;
use braid_transport::profile::Profile;
use braid_transport::scenario::Scenario;
use braid_transport::sim::{
    DEFAULT_BATTERY_J, DelayPercentiles, EnergyReport, PathReport, SessionReport,
};
use eframe::egui;
use tokio::task::JoinHandle;

use super::compare::CompareState;
use super::{ControlledPath, NetCommand, Open, Opened, Pane, PlayerApp};
use crate::cmd::demo::DemoSetup;
use crate::session::live::PaneUpdate;
use crate::session::realtime::{self, PlayOptions, PlayOutcome};
use crate::session::stream::ClientConfig;

/// Asks the window to repaint (callable from any thread).
pub type Wake = Arc<dyn Fn() + Send + Sync>;
/// A running session's future.
pub type SessionFuture = Pin<Box<dyn Future<Output = anyhow::Result<PlayOutcome>> + Send>>;
/// Starts a session reporting to a pane: called once, with the pane's channel and the wake.
pub type SessionStart = Box<dyn FnOnce(Sender<PaneUpdate>, Wake) -> SessionFuture>;

/// A session for one pane.
pub struct PaneSession {
    /// The pane's heading (the profile).
    pub title: String,
    /// How to start it.
    pub start: SessionStart,
}

/// What finished sessions' reports are labelled with.
#[derive(Clone, Debug, PartialEq)]
pub struct ReportInfo {
    /// Scenario name.
    pub scenario: String,
    /// Seed.
    pub seed: u64,
    /// The scenario's battery capacity, J (for the residual battery).
    pub battery_j: Option<f64>,
}

/// How files and addresses typed into the window are played.
#[derive(Clone)]
pub struct OpenSpec {
    /// A file is served in-process over this scenario's paths, emulated in real time.
    pub scenario: Scenario,
    /// One pane per profile.
    pub profiles: Vec<Profile>,
}

/// Everything about the window but its sessions.
pub struct WindowSpec {
    /// Window title.
    pub title: String,
    /// Window size, points (`BRAID_WINDOW_SIZE` overrides it).
    pub size: [f32; 2],
    /// The emulated paths the controls act on.
    pub paths: Vec<ControlledPath>,
    /// Where the controls' commands go: one sender per session with an emulator.
    pub commands: Vec<Sender<NetCommand>>,
    /// With an "Open" field.
    pub open: Option<OpenSpec>,
    /// Compare mode.
    pub compare: Option<CompareState>,
    /// Labels of finished sessions' reports.
    pub report: ReportInfo,
}

/// The running sessions.
struct Host {
    rt: tokio::runtime::Handle,
    wake: Wake,
    tasks: Mutex<Vec<JoinHandle<anyhow::Result<PlayOutcome>>>>,
    sinks: Arc<Mutex<Vec<Sender<NetCommand>>>>,
    report: Mutex<ReportInfo>,
}

impl Host {
    /// Stops what played and starts `sessions`, their emulators listening to `sinks`.
    fn start(&self, sessions: Vec<PaneSession>, sinks: Vec<Sender<NetCommand>>) -> Vec<Pane> {
        let old = std::mem::take(&mut *lock(&self.tasks));
        for t in old {
            t.abort();
        }
        *lock(&self.sinks) = sinks;
        let info = lock(&self.report).clone();
        let mut panes = Vec::new();
        for s in sessions {
            let (tx, rx) = channel();
            let pane = Pane::new(s.title.clone(), rx);
            let slot = Arc::clone(&pane.report);
            let errors = tx.clone();
            let wake = Arc::clone(&self.wake);
            let fut = (s.start)(tx, Arc::clone(&wake));
            let (title, info) = (s.title, info.clone());
            let task = self.rt.spawn(async move {
                let r = fut.await;
                match &r {
                    Ok(o) => {
                        let _ = slot.set(session_report(&info, &title, o));
                    }
                    Err(e) => {
                        let _ = errors.send(PaneUpdate::Error(format!("{e:#}")));
                    }
                }
                wake();
                r
            });
            lock(&self.tasks).push(task);
            panes.push(pane);
        }
        panes
    }
}

/// A poisoned lock only means another thread panicked while holding it; the data (task
/// handles, senders) is still usable.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A finished real-time session as a session report (INTERFACES.md; in-order delay is not
/// measured in real time and is written as 0; energy comes from the client's radio model).
pub fn session_report(info: &ReportInfo, profile: &str, o: &PlayOutcome) -> SessionReport {
    let secs = o.elapsed.as_secs_f64().max(1e-9);
    let (delivered, retransmitted, lost, paths) = match &o.stats {
        Some(st) => (st.bytes_delivered, st.retransmitted_bytes, st.lost_packets, st.paths.clone()),
        None => (0, 0, 0, Vec::new()),
    };
    let radio = |i: usize| o.energy.as_ref().and_then(|e| e.radios.get(i).cloned().flatten());
    let energy = o.energy.as_ref().filter(|e| e.radios.iter().any(Option::is_some)).map(|e| {
        let total_j = e.total_j();
        EnergyReport {
            total_j,
            avg_power_mw: total_j * 1000.0 / secs,
            efficiency_bits_per_j: if total_j > 0.0 {
                delivered as f64 * 8.0 / total_j
            } else {
                0.0
            },
            battery_residual_j: Battery { capacity_j: info.battery_j.unwrap_or(DEFAULT_BATTERY_J) }
                .residual_j(total_j),
            mode_switches: e.switches() as u64,
            time_in_partial_s: e.time_in_partial.as_secs_f64(),
        }
    });
    SessionReport {
        scenario: info.scenario.clone(),
        profile: profile.to_string(),
        seed: info.seed,
        duration_s: secs,
        goodput_bps: delivered as f64 * 8.0 / secs,
        bytes_delivered: delivered,
        retransmitted_bytes: retransmitted,
        lost_packets: lost,
        delay_ms: DelayPercentiles::default(),
        paths: paths
            .iter()
            .enumerate()
            .map(|(i, p)| PathReport {
                name: p.id.to_string(),
                role: p.role.to_string(),
                throughput_bps: p.data_bytes_received as f64 * 8.0 / secs,
                rtt_ms: p.srtt.as_secs_f64() * 1000.0,
                energy_j: radio(i).map_or(0.0, |r| r.energy_j),
                time_active_s: radio(i).map_or(0.0, |r| r.active.as_secs_f64()),
            })
            .collect(),
        stream: Some(o.stream.clone()),
        energy,
    }
}

/// What the "Open" field was given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// A local video file.
    File(PathBuf),
    /// A server, `host:port` (resolved when connecting).
    Address(String),
}

/// Reads what was typed: an existing path is a file; `host:port` is an address; anything
/// else is an error naming the problem.
pub fn parse_target(text: &str) -> anyhow::Result<Target> {
    let t = text.trim();
    if t.is_empty() {
        bail!("type a video file's path or a server's host:port, then Open");
    }
    let path = Path::new(t);
    if path.is_dir() {
        bail!("{t} is a directory, not a video file");
    }
    if path.is_file() {
        return Ok(Target::File(path.to_path_buf()));
    }
    if t.parse::<SocketAddr>().is_ok() {
        return Ok(Target::Address(t.to_string()));
    }
    if let Some((host, port)) = t.rsplit_once(':') {
        let host_ok = !host.is_empty()
            && host.chars().all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-');
        if host_ok && port.parse::<u16>().is_ok_and(|p| p > 0) {
            return Ok(Target::Address(t.to_string()));
        }
    }
    bail!("no such file: {t} (a server is given as host:port)")
}

/// Starts what the "Open" field names, through the host.
struct HostOpener {
    host: Arc<Host>,
    spec: OpenSpec,
}

impl Open for HostOpener {
    fn open(&mut self, text: &str) -> anyhow::Result<Opened> {
        match parse_target(text)? {
            Target::File(path) => self.open_file(&path),
            Target::Address(addr) => Ok(self.open_address(addr)),
        }
    }
}

impl HostOpener {
    fn open_file(&mut self, path: &Path) -> anyhow::Result<Opened> {
        // Demuxing is quick and catches "not a video" here, in the status line; the
        // reference decode (longer) runs on the runtime, once for every pane.
        let clip = realtime::load_clip(path)?;
        let scenario = self.spec.scenario.clone();
        let duration = scenario.duration;
        let reference: Arc<tokio::sync::OnceCell<Arc<Vec<Frame>>>> = Arc::default();
        let mut sessions = Vec::new();
        let mut sinks = Vec::new();
        for profile in &self.spec.profiles {
            let (cmd_tx, cmd_rx) = channel();
            sinks.push(cmd_tx);
            let setup = DemoSetup {
                scenario: scenario.clone(),
                profile: profile.clone(),
                clip: Arc::clone(&clip),
                reference: Arc::default(),
                clip_name: path.display().to_string(),
                loop_for: Some(duration + Duration::from_secs(5)),
                buffer_s: 30.0,
                duration,
                booth_loop: false,
            };
            let (clip, reference) = (Arc::clone(&clip), Arc::clone(&reference));
            sessions.push(PaneSession {
                title: profile.name.to_string(),
                start: Box::new(move |tx, wake| {
                    Box::pin(async move {
                        let frames = reference
                            .get_or_try_init(|| async move {
                                let decoded =
                                    tokio::task::spawn_blocking(move || ffmpeg_decode_clip(&clip))
                                        .await
                                        .context("the reference decoder stopped")?;
                                anyhow::Ok(Arc::new(decoded.context("decoding the reference")?.0))
                            })
                            .await?;
                        DemoSetup { reference: Arc::clone(frames), ..setup }
                            .run(tx, wake, Some(cmd_rx))
                            .await
                    })
                }),
            });
        }
        *lock(&self.host.report) = ReportInfo {
            scenario: scenario.name.clone(),
            seed: scenario.seed,
            battery_j: scenario.workload.battery_j,
        };
        let panes = self.host.start(sessions, sinks);
        Ok(Opened {
            panes,
            paths: controlled_paths(&scenario),
            description: format!(
                "playing {} over scenario \"{}\" (emulated)",
                path.display(),
                scenario.name
            ),
        })
    }

    fn open_address(&mut self, addr: String) -> Opened {
        let mut sessions = Vec::new();
        for profile in &self.spec.profiles {
            let (profile, addr) = (profile.clone(), addr.clone());
            sessions.push(PaneSession {
                title: profile.name.to_string(),
                start: Box::new(move |tx, wake| Box::pin(play_address(addr, profile, tx, wake))),
            });
        }
        *lock(&self.host.report) = ReportInfo { scenario: "play".into(), seed: 0, battery_j: None };
        let panes = self.host.start(sessions, Vec::new());
        Opened { panes, paths: Vec::new(), description: format!("connecting to {addr}") }
    }
}

/// Plays the stream a `braid serve` at `addr` sends (one path, as `braid play ADDR`).
async fn play_address(
    addr: String,
    profile: Profile,
    tx: Sender<PaneUpdate>,
    wake: Wake,
) -> anyhow::Result<PlayOutcome> {
    let remote = tokio::net::lookup_host(addr.as_str())
        .await
        .with_context(|| format!("cannot resolve {addr}"))?
        .next()
        .ok_or_else(|| anyhow::anyhow!("{addr} resolves to no address"))?;
    let config = Arc::new(crate::cmd::perf::config_with(&profile, true, Some(256 * 1024)));
    let seed = u64::from(std::process::id()) ^ 0x0b1a_d000;
    let options = driver::ConnectOptions::with_path_policy(profile.path_policy);
    let conn =
        driver::connect_with(config, vec![PathSpec::to(remote, PathRole::Wired)], seed, options)
            .await
            .with_context(|| format!("no server at {addr}"))?;
    let opts = PlayOptions {
        client: ClientConfig { policy: PlayoutPolicy::adaptive(), ..ClientConfig::default() },
        limit: None,
        reference: None,
        clip_name: format!("stream from {addr}"),
        display: Some(tx),
        wake,
        path_names: vec!["path0".into()],
    };
    realtime::play(Arc::new(conn), opts).await
}

/// The network controls for `scenario`'s paths, at their nominal settings.
pub fn controlled_paths(scenario: &Scenario) -> Vec<ControlledPath> {
    scenario
        .paths
        .iter()
        .map(|p| ControlledPath {
            name: p.name.clone(),
            cut: false,
            rate_mbps: p
                .down
                .first()
                .and_then(|&l| scenario.links.get(l))
                .and_then(|l| l.config.rate.nominal_bps())
                .unwrap_or(10e6)
                / 1e6,
            delay_ms: p
                .down
                .first()
                .and_then(|&l| scenario.links.get(l))
                .map_or(0.0, |l| l.config.delay.as_secs_f64() * 1000.0),
            loss_pct: 0.0,
        })
        .collect()
}

/// The app for `spec` with `sessions` started, and the host running them. For tests and
/// for [`run_windowed_many`].
fn build(
    rt: tokio::runtime::Handle,
    spec: WindowSpec,
    sessions: Vec<PaneSession>,
    wake: Wake,
) -> (PlayerApp, Arc<Host>) {
    let host = Arc::new(Host {
        rt,
        wake,
        tasks: Mutex::default(),
        sinks: Arc::default(),
        report: Mutex::new(spec.report),
    });
    let panes = host.start(sessions, spec.commands);
    // One channel from the controls; every current session's emulator gets each command.
    let (cmd_tx, cmd_rx) = channel::<NetCommand>();
    let sinks = Arc::clone(&host.sinks);
    let _ = std::thread::Builder::new().name("braid-fanout".into()).spawn(move || {
        while let Ok(c) = cmd_rx.recv() {
            for s in lock(&sinks).iter() {
                let _ = s.send(c.clone());
            }
        }
    });
    let mut app = PlayerApp::new(panes, spec.paths, Some(cmd_tx));
    if let Some(open) = spec.open {
        app = app.with_opener(Box::new(HostOpener { host: Arc::clone(&host), spec: open }));
    }
    if let Some(c) = spec.compare {
        app = app.with_compare(c);
    }
    (app, host)
}

/// An app with an "Open" field over `rt` and no session yet (tests drive it).
#[cfg(test)]
pub fn app_with_opener(rt: tokio::runtime::Handle, open: OpenSpec) -> PlayerApp {
    let spec = WindowSpec {
        title: "Braid".into(),
        size: [1000.0, 800.0],
        paths: Vec::new(),
        commands: Vec::new(),
        open: Some(open),
        compare: None,
        report: ReportInfo { scenario: "test".into(), seed: 0, battery_j: None },
    };
    build(rt, spec, Vec::new(), Arc::new(|| {})).0
}

/// Runs `sessions` on `rt`, one pane each, in one window until it is closed. Returns, per
/// session then playing, its outcome, or `None` when the window was closed first.
pub fn run_windowed_many(
    rt: tokio::runtime::Runtime,
    spec: WindowSpec,
    sessions: Vec<PaneSession>,
) -> anyhow::Result<Vec<Option<anyhow::Result<PlayOutcome>>>> {
    let slot: Arc<OnceLock<egui::Context>> = Arc::default();
    let wake: Wake = {
        let slot = Arc::clone(&slot);
        Arc::new(move || {
            if let Some(c) = slot.get() {
                c.request_repaint();
            }
        })
    };
    let (title, size) = (spec.title.clone(), spec.size);
    let (app, host) = build(rt.handle().clone(), spec, sessions, wake);
    crate::gui::run_window_with(&title, app, size, move |ctx| {
        let _ = slot.set(ctx.clone());
    })?;
    let tasks = std::mem::take(&mut *lock(&host.tasks));
    let mut out = Vec::new();
    for t in tasks {
        if t.is_finished() {
            out.push(Some(
                rt.block_on(t)
                    .map_err(|e| anyhow::anyhow!("the session task failed: {e}"))
                    .and_then(|r| r),
            ));
        } else {
            t.abort();
            out.push(None);
        }
    }
    Ok(out)
}
