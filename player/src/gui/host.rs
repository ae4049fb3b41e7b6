//! Runs the sessions a window is handed: one per pane, each on the async runtime,
//! reporting to its pane over a channel. The host fans the window's network commands out
//! to every session's emulator (so panes keep identical conditions), keeps each finished
//! session's report for the compare export, and starts what the window's "Open" field is
//! given through the [`Opener`] it was handed.

use std::sync::mpsc::{Sender, channel};
use std::sync::{Arc, Mutex, OnceLock};

use eframe::egui;
use tokio::task::JoinHandle;

use super::compare::CompareState;
use super::{ControlledPath, NetCommand, Open, Opened, Pane, PlayerApp};
use crate::session::live::PaneUpdate;
use crate::session::open::{Opener, PaneSession, Wake};
use crate::session::realtime::PlayOutcome;
use crate::session::report::{self, ReportLabel};

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
    /// What the "Open" field starts (no field without it).
    pub opener: Option<Box<dyn Opener>>,
    /// Compare mode.
    pub compare: Option<CompareState>,
    /// Labels of finished sessions' reports.
    pub report: ReportLabel,
}

/// The running sessions.
struct Host {
    rt: tokio::runtime::Handle,
    wake: Wake,
    tasks: Mutex<Vec<JoinHandle<anyhow::Result<PlayOutcome>>>>,
    sinks: Arc<Mutex<Vec<Sender<NetCommand>>>>,
    report: Mutex<ReportLabel>,
}

impl Host {
    /// Stops what played and starts `sessions`, their emulators listening to `sinks`.
    fn start(&self, sessions: Vec<PaneSession>, sinks: Vec<Sender<NetCommand>>) -> Vec<Pane> {
        let old = std::mem::take(&mut *lock(&self.tasks));
        for t in old {
            t.abort();
        }
        *lock(&self.sinks) = sinks;
        let label = lock(&self.report).clone();
        let mut panes = Vec::new();
        for s in sessions {
            let (tx, rx) = channel();
            let pane = Pane::new(s.title.clone(), rx);
            let slot = Arc::clone(&pane.report);
            let errors = tx.clone();
            let wake = Arc::clone(&self.wake);
            let fut = (s.start)(tx, Arc::clone(&wake));
            let (title, label) = (s.title, label.clone());
            let task = self.rt.spawn(async move {
                let r = fut.await;
                match &r {
                    Ok(o) => {
                        let _ = slot.set(report::of_outcome(&label, &title, o));
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

/// Starts what the "Open" field names through the host: the opener says what to run.
struct HostOpener {
    host: Arc<Host>,
    opener: Box<dyn Opener>,
}

impl Open for HostOpener {
    fn open(&mut self, text: &str) -> anyhow::Result<Opened> {
        let set = self.opener.open(text)?;
        *lock(&self.host.report) = set.label;
        let panes = self.host.start(set.sessions, set.commands);
        Ok(Opened { panes, paths: set.paths, description: set.description })
    }
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
    if let Some(opener) = spec.opener {
        app = app.with_opener(Box::new(HostOpener { host: Arc::clone(&host), opener }));
    }
    if let Some(c) = spec.compare {
        app = app.with_compare(c);
    }
    (app, host)
}

/// An app with an "Open" field served by `opener` over `rt` and no session yet (tests
/// drive it).
#[cfg(test)]
pub fn app_with_opener(rt: tokio::runtime::Handle, opener: Box<dyn Opener>) -> PlayerApp {
    let spec = WindowSpec {
        title: "Braid".into(),
        size: [1000.0, 800.0],
        paths: Vec::new(),
        commands: Vec::new(),
        opener: Some(opener),
        compare: None,
        report: ReportLabel::named("test"),
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
    super::run_window_with(&title, app, size, move |ctx| {
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

/// What a window showing one session has besides it.
pub struct OneSession {
    /// Window title.
    pub title: String,
    /// The emulated paths the controls act on (none: no controls).
    pub paths: Vec<ControlledPath>,
    /// Where the controls' commands go.
    pub commands: Option<Sender<NetCommand>>,
    /// What the "Open" field starts (no field without it).
    pub opener: Option<Box<dyn Opener>>,
    /// Labels of finished sessions' reports.
    pub report: ReportLabel,
}

/// Runs `session` on `rt` while a 1000×800 window shows it; returns its outcome, or
/// `None` when the window was closed first.
pub fn run_windowed(
    rt: tokio::runtime::Runtime,
    window: OneSession,
    session: PaneSession,
) -> anyhow::Result<Option<PlayOutcome>> {
    let spec = WindowSpec {
        title: window.title,
        size: [1000.0, 800.0],
        paths: window.paths,
        commands: window.commands.into_iter().collect(),
        opener: window.opener,
        compare: None,
        report: window.report,
    };
    let outcomes = run_windowed_many(rt, spec, vec![session])?;
    match outcomes.into_iter().next().flatten() {
        Some(r) => Ok(Some(r?)),
        None => Ok(None),
    }
}
