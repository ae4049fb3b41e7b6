//! `braid demo [--headless] [--duration S] [--scenario FILE] [--profile P] [--report FILE]
//! [--battery J] [--no-baseline]`:
//! the embedded default. An in-process server streams the bundled H.264 clip over the
//! scenario's paths, emulated in real time by the UDP relay (`assets/scenarios/demo.toml`
//! by default: a WiFi-like path that degrades and an LTE-like one); the client plays it
//! with its live statistics in a window, or with a progress line and a summary when there
//! is no display.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;

use crate::choice::{StackKind, TransportSpec};
use crate::gui::host::{self, OneSession};
use braid_transport::policy::PathPolicy;

use crate::session::beside;
use crate::session::demo::Demo;
use crate::session::live::controlled_paths;
use crate::session::open::{PaneSession, one_session_window};
use crate::session::report::ReportLabel;
use crate::session::terminal::{self, Results};

/// Arguments of `braid demo`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// No window even when a display is available.
    #[arg(long)]
    headless: bool,
    /// Stop after this many seconds (default: the scenario's duration).
    #[arg(long, value_name = "S", allow_negative_numbers = true)]
    duration: Option<f64>,
    /// Scenario to emulate (default: the embedded demo scenario).
    #[arg(long, value_name = "FILE")]
    scenario: Option<PathBuf>,
    /// Transport profile (default: the best available multipath profile), `PROFILE` or
    /// `PROFILE+CC` (`braid profiles`).
    #[arg(long)]
    profile: Option<TransportSpec>,
    /// Write the session report (JSON) here.
    #[arg(long, value_name = "FILE")]
    report: Option<PathBuf>,
    /// The viewer's battery capacity, J: the report's `energy.battery_residual_j` is what
    /// the session's radio energy leaves of it (without it the report has no residual
    /// battery unless the scenario gives `battery_j`; the flag replaces it).
    #[arg(long = "battery", value_name = "J", value_parser = crate::session::config::battery_j)]
    battery: Option<f64>,
    /// The download-ahead: the transport's receive window holds this many seconds of the
    /// stream's media, so the server may send that far ahead of what the player reads
    /// (replaces the scenario's `max_buffer_s`; without either, about one second).
    #[arg(long = "max-buffer", value_name = "S", value_parser = crate::session::config::max_buffer_s)]
    max_buffer: Option<f64>,
    /// Run no all-paths `mptcp` session beside an energy-aware profile's (by default one
    /// runs on its own copy of the emulated network, and the saving shown is measured
    /// against it; without it only the shadow model's figure is shown).
    #[arg(long = "no-baseline")]
    no_baseline: bool,
    /// Booth loop: replay the scenario (its scripted events and captions) on repeat until
    /// the window is closed or the command is interrupted.
    #[arg(long = "loop")]
    booth_loop: bool,
    /// Write the pictures the viewer saw, one per frame slot (a lost frame repeats the
    /// picture left on screen), as YUV4MPEG2 (`.y4m`); `braid psnr` judges it.
    #[arg(long, value_name = "FILE")]
    save_frames: Option<PathBuf>,
    /// Radio power model for a role, replacing the built-in one: `ROLE=FILE` (ROLE: wifi,
    /// lte or 3g; FILE: TOML as in assets/power); repeat for several roles.
    #[arg(long = "power", value_name = "ROLE=FILE")]
    power: Vec<String>,
    #[command(flatten)]
    traces: crate::traces::TraceArgs,
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    if let Some(p) = args.profile.as_ref().filter(|p| p.kind() == StackKind::Kernel) {
        let name = p.to_string();
        anyhow::bail!("{}", crate::cmd::kernel::needs_bed(&name, "the demo's UDP relay emulator"));
    }
    let profile_name = args.profile.as_ref().map(TransportSpec::to_string);
    args.traces.prepare(false)?;
    let limit = match args.duration {
        Some(s) if !(s.is_finite() && s > 0.0) => {
            anyhow::bail!("--duration must be a positive number of seconds, got {s}")
        }
        Some(s) => Some(Duration::from_secs_f64(s)),
        None => None,
    };
    let power = crate::session::config::power_models(&args.power)?;
    let mut demo =
        Demo::prepare(args.scenario.as_deref(), profile_name.as_deref(), limit, args.booth_loop)?
            .with_max_buffer(args.max_buffer);
    demo.session.power = power.clone();
    if let Some(j) = args.battery {
        demo.session.scenario.workload.battery_j = Some(j);
    }
    println!("{}", demo.description);
    let mut session = demo.session.clone();
    // Writing what was displayed needs every frame until the end.
    session.keep_history = args.save_frames.is_some();
    let (scenario, profile, duration) =
        (session.scenario.clone(), session.profile.clone(), session.duration);
    // A measured baseline beside an energy-aware profile (one that switches paths).
    let baseline = (!args.no_baseline && profile.path_policy != PathPolicy::None)
        .then(|| beside::baseline_of(&session))
        .transpose()?;
    if baseline.is_some() {
        println!(
            "measured baseline: {} beside it on its own copy of the network (--no-baseline: none)",
            beside::BASELINE_PROFILE
        );
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let outcome = if !args.headless && crate::gui::display_available() {
        let (cmd_tx, cmd_rx) = std::sync::mpsc::channel();
        let title = "Braid demo";
        let (opener, report) =
            one_session_window(Some(scenario.clone()), &profile, title, &power, args.battery);
        let window = OneSession {
            title: title.to_string(),
            paths: controlled_paths(&scenario),
            commands: Some(cmd_tx),
            opener,
            report,
        };
        let pane = PaneSession::new(profile.name.to_string(), move |tx, wake| {
            beside::run(session, baseline, tx, wake, Some(cmd_rx))
        });
        host::run_windowed(rt, window, pane)?
    } else {
        let run = terminal::with_progress(Some(duration), |tx| {
            beside::run(session, baseline, tx, Arc::new(|| {}), None)
        });
        Some(rt.block_on(run)?)
    };
    let results = Results {
        save_frames: args.save_frames.as_deref(),
        report: args.report.as_deref(),
        label: ReportLabel::for_scenario(&scenario),
        profile: &profile.name,
    };
    terminal::finish(outcome.as_ref(), &results)
}
