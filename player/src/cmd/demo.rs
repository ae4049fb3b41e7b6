//! `braid demo [--headless] [--duration S] [--scenario FILE] [--profile P] [--report FILE]`:
//! the embedded default. An in-process server streams the bundled H.264 clip over the
//! scenario's paths, emulated in real time by the UDP relay (`assets/scenarios/demo.toml`
//! by default: a WiFi-like path that degrades and an LTE-like one); the client plays it
//! with its live statistics in a window, or with a progress line and a summary when there
//! is no display.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, Sender};
use std::time::Duration;

use anyhow::Context as _;
use braid_io::driver::{self, PathSpec};
use braid_io::relay::{self, RelayCommand};
use braid_media::decode::ffmpeg_decode_clip;
use braid_media::playout::PlayoutPolicy;
use braid_transport::profile::{self, PathUse, Profile};
use braid_transport::scenario::{Scenario, StreamSource, WorkloadKind};

use crate::assets::{DEMO_CLIP, DEMO_CLIP_NAME, DEMO_SCENARIO, TempAsset};
use crate::gui::host::{OpenSpec, PaneSession, ReportInfo, WindowSpec, run_windowed_many};
use crate::gui::{ControlledPath, NetCommand};
use crate::session::live::PaneUpdate;
use crate::session::realtime::{self, PlayOptions, PlayOutcome};
use crate::session::stream::ClientConfig;

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
    /// Transport profile (default: the best available multipath profile).
    #[arg(long)]
    profile: Option<String>,
    /// Write the session report (JSON) here.
    #[arg(long, value_name = "FILE")]
    report: Option<PathBuf>,
    /// Booth loop: replay the scenario (its scripted events and captions) on repeat until
    /// the window is closed or the command is interrupted.
    #[arg(long = "loop")]
    booth_loop: bool,
    /// Write the pictures the viewer saw, one per frame slot (a lost frame repeats the
    /// picture left on screen), as YUV4MPEG2 (`.y4m`); `braid psnr` judges it.
    #[arg(long, value_name = "FILE")]
    save_frames: Option<PathBuf>,
}

/// The profile the demo shows unless told otherwise.
fn best_profile() -> anyhow::Result<Profile> {
    ["mptcp-qe", "mptcp"]
        .iter()
        .find_map(|n| profile::lookup(n).ok())
        .ok_or_else(|| anyhow::anyhow!("no multipath profile is registered"))
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    let limit = match args.duration {
        Some(s) if !(s.is_finite() && s > 0.0) => {
            anyhow::bail!("--duration must be a positive number of seconds, got {s}")
        }
        Some(s) => Some(Duration::from_secs_f64(s)),
        None => None,
    };
    let tmp = TempAsset::write(DEMO_CLIP, "demo.mp4")?;
    let scenario = match &args.scenario {
        Some(p) => Scenario::load(p)?,
        None => Scenario::parse(DEMO_SCENARIO, "demo.toml (embedded)", Path::new("."))
            .context("the embedded demo scenario")?,
    };
    // The clip: the scenario's own when it names one that exists, else the bundled one.
    let (clip_path, clip_name, loop_clip, buffer_s) = match &scenario.workload.kind {
        WorkloadKind::Stream(st) => {
            let from_scenario = match &st.source {
                StreamSource::Clip(p) if args.scenario.is_some() && p.is_file() => Some(p.clone()),
                _ => None,
            };
            match from_scenario {
                Some(p) => (p.clone(), p.display().to_string(), st.loop_clip, st.buffer_s),
                None => (
                    tmp.path().to_path_buf(),
                    DEMO_CLIP_NAME.to_string(),
                    st.loop_clip,
                    st.buffer_s,
                ),
            }
        }
        _ => (tmp.path().to_path_buf(), DEMO_CLIP_NAME.to_string(), true, None),
    };
    let profile = match &args.profile {
        Some(p) => profile::lookup(p)?,
        None => best_profile()?,
    };
    let clip = realtime::load_clip(&clip_path)?;
    let (reference, _) = ffmpeg_decode_clip(&clip).context("decoding the reference")?;
    let duration = limit.unwrap_or(scenario.duration);
    println!(
        "braid demo: {clip_name} ({} {}x{}, {:.0} kbit/s) over scenario \"{}\" ({} paths, emulated in real time), profile {}, {:.0} s",
        clip.info.codec,
        clip.info.width,
        clip.info.height,
        clip.info.bitrate_bps / 1000.0,
        scenario.name,
        scenario.paths.len(),
        profile.name,
        duration.as_secs_f64()
    );
    let setup = DemoSetup {
        scenario: scenario.clone(),
        profile: profile.clone(),
        clip,
        reference: Arc::new(reference),
        clip_name,
        loop_for: loop_clip.then_some(duration + Duration::from_secs(5)),
        buffer_s: buffer_s.unwrap_or(30.0),
        duration,
        booth_loop: args.booth_loop,
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let outcome = if !args.headless && crate::gui::display_available() {
        let paths = crate::gui::host::controlled_paths(&scenario);
        let (cmd_tx, cmd_rx) = std::sync::mpsc::channel();
        run_windowed(
            rt,
            "Braid demo",
            profile.clone(),
            paths,
            Some(cmd_tx),
            Some(scenario.clone()),
            move |tx, wake| setup.run(tx, wake, Some(cmd_rx)),
        )?
    } else {
        let (tx, rx) = std::sync::mpsc::channel();
        let progress = terminal_progress(rx, Some(duration));
        let result = rt.block_on(setup.run(tx, Arc::new(|| {}), None));
        let _ = progress.join();
        Some(result?)
    };
    match outcome {
        Some(o) => {
            print_summary(&o);
            if let Some(path) = &args.save_frames {
                let n = o.client.write_displayed(path).with_context(|| {
                    format!("writing the displayed frames to {}", path.display())
                })?;
                println!("  displayed frames       {n} written to {}", path.display());
            }
            if let Some(path) = &args.report {
                write_report(path, &scenario.name, profile.name, scenario.workload.battery_j, &o)?;
            }
        }
        None => println!("window closed before the session ended"),
    }
    Ok(())
}

/// Everything the in-process demo needs: one pane's server, emulated paths and client.
/// Compare mode and the window's "Open" field build one per pane.
#[derive(Clone)]
pub(crate) struct DemoSetup {
    /// The emulated conditions (its seed seeds the relay and the connection).
    pub(crate) scenario: Scenario,
    /// The transport profile of both ends.
    pub(crate) profile: Profile,
    /// The clip the server streams.
    pub(crate) clip: Arc<braid_media::Clip>,
    /// Its decoded frames, for measured PSNR.
    pub(crate) reference: Arc<Vec<braid_media::quality::Frame>>,
    /// The clip's name in reports.
    pub(crate) clip_name: String,
    /// Loop the clip for this long.
    pub(crate) loop_for: Option<Duration>,
    /// Client buffer, media seconds.
    pub(crate) buffer_s: f64,
    /// Session length (one cycle of the booth loop).
    pub(crate) duration: Duration,
    /// Replay the whole session, events and captions included, until stopped.
    pub(crate) booth_loop: bool,
}

/// Aborts a spawned task when dropped (so an aborted session leaves no server behind).
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The relay the window's controls act on (replaced each booth-loop cycle).
type RelaySlot = Arc<std::sync::Mutex<Option<Arc<relay::RelayHandle>>>>;

impl DemoSetup {
    /// Server, relay and client in this process; returns what the client played. With
    /// `booth_loop` it starts again after each session — a fresh relay replays the
    /// scenario's events from the start — and only returns on an error.
    pub(crate) async fn run(
        self,
        tx: Sender<PaneUpdate>,
        wake: Arc<dyn Fn() + Send + Sync>,
        commands: Option<Receiver<NetCommand>>,
    ) -> anyhow::Result<PlayOutcome> {
        let slot: RelaySlot = Arc::default();
        // Network controls from the window.
        if let Some(rx) = commands {
            let slot = Arc::clone(&slot);
            std::thread::Builder::new()
                .name("braid-controls".into())
                .spawn(move || {
                    while let Ok(c) = rx.recv() {
                        let relay = slot.lock().ok().and_then(|g| g.clone());
                        let Some(relay) = relay else { continue };
                        relay.command(match c {
                            NetCommand::Cut(p) => RelayCommand::PathDown(p),
                            NetCommand::Restore(p) => RelayCommand::PathUp(p),
                            NetCommand::SetRate(p, r) => RelayCommand::SetRate(p, r),
                            NetCommand::SetDelayMs(p, d) => {
                                RelayCommand::SetDelay(p, Duration::from_millis(d))
                            }
                            NetCommand::SetLoss(p, l) => RelayCommand::SetLoss(p, l),
                        });
                    }
                })
                .context("starting the controls thread")?;
        }
        if !self.booth_loop {
            return self.run_once(tx, wake, &slot).await;
        }
        let mut offset_s = 0.0;
        for cycle in 1u64.. {
            // Each cycle's updates go to the same pane: time keeps counting across cycles,
            // captions say which cycle this is, and a cycle's end does not end the pane.
            // The relay restarts from the scenario: the window's controls follow.
            if cycle > 1 && tx.send(PaneUpdate::NetworkReset).is_ok() {
                wake();
            }
            let (inner_tx, inner_rx) = std::sync::mpsc::channel::<PaneUpdate>();
            let outer = tx.clone();
            std::thread::Builder::new()
                .name("braid-loop".into())
                .spawn(move || {
                    for u in inner_rx {
                        let u = match u {
                            PaneUpdate::Stats(mut s) => {
                                s.t_s += offset_s;
                                PaneUpdate::Stats(s)
                            }
                            PaneUpdate::Caption(c) => {
                                PaneUpdate::Caption(format!("{c}  · loop {cycle}"))
                            }
                            PaneUpdate::Ended => continue,
                            other => other,
                        };
                        if outer.send(u).is_err() {
                            return;
                        }
                    }
                })
                .context("starting the loop thread")?;
            let outcome = self.clone().run_once(inner_tx, Arc::clone(&wake), &slot).await?;
            offset_s += outcome.elapsed.as_secs_f64();
        }
        unreachable!("the booth loop only ends with an error")
    }

    /// One session.
    async fn run_once(
        self,
        tx: Sender<PaneUpdate>,
        wake: Arc<dyn Fn() + Send + Sync>,
        slot: &RelaySlot,
    ) -> anyhow::Result<PlayOutcome> {
        let loopback = IpAddr::V4(Ipv4Addr::LOCALHOST);
        let server_cfg = crate::cmd::perf::config_for(&self.profile, false);
        let ep =
            driver::listen_seeded(SocketAddr::new(loopback, 0), server_cfg, self.scenario.seed)
                .await
                .context("starting the server")?;
        let relay = Arc::new(
            relay::start(&self.scenario, ep.local_addr(), loopback, None, self.scenario.seed)
                .await?,
        );
        if let Ok(mut g) = slot.lock() {
            *g = Some(Arc::clone(&relay));
        }
        let (clip, media, loop_for) = (Arc::clone(&self.clip), self.profile.media, self.loop_for);
        // The server's own error only matters when the client failed too (at the end of a
        // session the client closing is what stops it).
        let mut server = AbortOnDrop(tokio::spawn(async move {
            match ep.accept().await {
                Some(conn) => realtime::serve(Arc::new(conn), clip, media, loop_for).await,
                None => Ok(()),
            }
        }));
        // Captions of the scenario's events, on time.
        let _captions = {
            let tx = tx.clone();
            let wake = Arc::clone(&wake);
            let events: Vec<(Duration, String)> = self
                .scenario
                .events
                .iter()
                .filter_map(|e| e.caption.clone().map(|c| (e.at, c)))
                .collect();
            AbortOnDrop(tokio::spawn(async move {
                let start = tokio::time::Instant::now();
                for (at, c) in events {
                    tokio::time::sleep_until(start + at).await;
                    if tx.send(PaneUpdate::Caption(c)).is_err() {
                        return;
                    }
                    wake();
                }
            }))
        };
        let mut paths: Vec<(String, PathSpec)> = relay
            .paths()
            .iter()
            .zip(&self.scenario.paths)
            .map(|(rp, sp)| (sp.name.clone(), PathSpec::to(rp.listen, sp.role)))
            .collect();
        if self.profile.paths == PathUse::Single {
            paths.truncate(1);
        }
        let names = paths.iter().map(|p| p.0.clone()).collect();
        // As in the simulator: the transport holds about a second of media, the player's
        // buffer decides how far ahead the server gets (and deadlines stay meaningful).
        let recv = crate::session::transport_buffer_bytes(&self.clip);
        let client_cfg = Arc::new(crate::cmd::perf::config_with(&self.profile, true, Some(recv)));
        // The profile's receiver-side path policy (aeSUM for mptcp-qe) runs beside the client.
        let options = driver::ConnectOptions::with_path_policy(self.profile.path_policy);
        let conn = driver::connect_with(
            client_cfg,
            paths.into_iter().map(|p| p.1).collect(),
            self.scenario.seed ^ 0xc11e,
            options,
        )
        .await
        .context("connecting through the emulated paths")?;
        let opts = PlayOptions {
            client: ClientConfig {
                policy: PlayoutPolicy::adaptive(),
                buffer_s: self.buffer_s,
                ..ClientConfig::default()
            },
            limit: Some(self.duration),
            reference: Some(self.reference),
            clip_name: self.clip_name,
            display: Some(tx),
            wake,
            path_names: names,
        };
        let result = match realtime::play(Arc::new(conn), opts).await {
            Err(e) if server.0.is_finished() => match (&mut server.0).await {
                Ok(Err(se)) => Err(e.context(format!("server: {se:#}"))),
                _ => Err(e),
            },
            r => r,
        };
        if let Ok(mut g) = slot.lock() {
            *g = None;
        }
        result
    }
}

/// Runs `start`'s session on `rt` while a window shows it; returns its outcome, or `None`
/// when the window was closed first. The window's "Open" field plays other files over
/// `scenario` (default: the embedded demo scenario), or a `host:port`, with `profile`
/// (also the pane's title).
pub fn run_windowed<F, Fut>(
    rt: tokio::runtime::Runtime,
    title: &str,
    profile: Profile,
    paths: Vec<ControlledPath>,
    commands: Option<Sender<NetCommand>>,
    scenario: Option<Scenario>,
    start: F,
) -> anyhow::Result<Option<PlayOutcome>>
where
    F: FnOnce(Sender<PaneUpdate>, Arc<dyn Fn() + Send + Sync>) -> Fut + 'static,
    Fut: std::future::Future<Output = anyhow::Result<PlayOutcome>> + Send + 'static,
{
    let pane_title = profile.name.to_string();
    let scenario = scenario
        .or_else(|| Scenario::parse(DEMO_SCENARIO, "demo.toml (embedded)", Path::new(".")).ok());
    let report = match &scenario {
        Some(s) => {
            ReportInfo { scenario: s.name.clone(), seed: s.seed, battery_j: s.workload.battery_j }
        }
        None => ReportInfo { scenario: title.to_string(), seed: 0, battery_j: None },
    };
    let open = scenario.map(|scenario| OpenSpec { scenario, profiles: vec![profile] });
    let spec = WindowSpec {
        title: title.to_string(),
        size: [1000.0, 800.0],
        paths,
        commands: commands.into_iter().collect(),
        open,
        compare: None,
        report,
    };
    let session = PaneSession {
        title: pane_title,
        start: Box::new(move |tx, wake| Box::pin(start(tx, wake))),
    };
    let outcomes = run_windowed_many(rt, spec, vec![session])?;
    match outcomes.into_iter().next().flatten() {
        Some(r) => Ok(Some(r?)),
        None => Ok(None),
    }
}

/// Shows the session's live statistics as a progress line until it ends.
pub fn terminal_progress(
    rx: Receiver<PaneUpdate>,
    total: Option<Duration>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let bar = match total {
            Some(t) => indicatif::ProgressBar::new(t.as_millis() as u64),
            None => indicatif::ProgressBar::new_spinner(),
        };
        bar.set_style(
            indicatif::ProgressStyle::with_template("{bar:25} {elapsed} {msg}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        while let Ok(u) = rx.recv() {
            match u {
                PaneUpdate::Stats(s) => {
                    bar.set_position((s.t_s * 1000.0) as u64);
                    let quality = match (s.psnr_now_db, s.eq13_db) {
                        (Some(p), _) => format!(
                            "PSNR {}",
                            if p >= 100.0 { "∞".into() } else { format!("{p:.1}") }
                        ),
                        (None, Some(e)) => format!("PSNR est. {e:.1}"),
                        _ => String::new(),
                    };
                    let rates: Vec<String> =
                        s.paths.iter().map(|p| format!("{} {:.1}", p.name, p.bps / 1e6)).collect();
                    bar.set_message(format!(
                        "frames {} lost {}  stalls {}  buffer {:.1} s  {quality}  Mbit/s: {}",
                        s.frames_shown,
                        s.frames_lost,
                        s.stalls,
                        s.buffer_s,
                        rates.join(" ")
                    ));
                }
                PaneUpdate::Caption(c) => say(&bar, format!("  {c}")),
                PaneUpdate::Error(e) => say(&bar, format!("  error: {e}")),
                PaneUpdate::Ended | PaneUpdate::Frame(_) | PaneUpdate::NetworkReset => {}
            }
        }
        bar.finish_and_clear();
    })
}

/// A line above the progress bar, or plainly when there is no terminal to draw it on.
fn say(bar: &indicatif::ProgressBar, line: String) {
    if bar.is_hidden() {
        println!("{line}");
    } else {
        bar.println(line);
    }
}

/// The end-of-session summary.
pub fn print_summary(o: &PlayOutcome) {
    let s = &o.stream;
    println!("summary ({:.1} s):", o.elapsed.as_secs_f64());
    if let Some(at) = o.first_frame_at {
        println!(
            "  launch to first frame  {:.0} ms",
            at.saturating_duration_since(crate::launched()).as_secs_f64() * 1000.0
        );
    }
    if let Some(t) = o.first_frame {
        println!("  first packet to frame  {:.0} ms", t.as_secs_f64() * 1000.0);
    }
    println!("  start-up delay         {:.2} s", s.startup_delay_s);
    println!("  stalls                 {} ({:.2} s)", s.stalls, s.stall_time_s);
    println!("  frames                 {} due, {} lost", s.frames_total, s.frames_lost);
    if s.mos > 0 {
        println!(
            "  PSNR                   {:.2} dB (sd {:.2}), MOS {}",
            s.psnr_avg_db, s.psnr_sd_db, s.mos
        );
    }
    println!("  PSNR estimate (eq. 13) {:.1} dB", s.psnr_eq13_db);
    println!("  read rate              {:.0} kbit/s", s.read_rate_bps / 1000.0);
    if let Some(st) = &o.stats {
        for p in &st.paths {
            println!(
                "  path {:<6} {:<5} {:>9.0} kbit/s  rtt {:>6.1} ms  lost {}",
                p.id.to_string(),
                p.role.to_string(),
                p.data_bytes_received as f64 * 8.0 / o.elapsed.as_secs_f64().max(1e-9) / 1000.0,
                p.srtt.as_secs_f64() * 1000.0,
                p.packets_lost
            );
        }
    }
    if let Some(e) = o.energy.as_ref().filter(|e| e.radios.iter().any(Option::is_some)) {
        let per: Vec<String> =
            e.radios.iter().flatten().map(|r| format!("{} {:.1} J", r.role, r.energy_j)).collect();
        println!("  radio energy           {:.1} J ({})", e.total_j(), per.join(", "));
    }
    if let Some(e) = o.energy.as_ref().filter(|e| e.mode.is_some()) {
        let timeline: Vec<String> =
            e.timeline.iter().map(|(t, m)| format!("{m:?} at {:.1} s", t.as_secs_f64())).collect();
        println!(
            "  path mode              {} ({:.1} s in Partial)",
            timeline.join(" → "),
            e.time_in_partial.as_secs_f64()
        );
    }
}

/// Writes the session report of a real-time session (see
/// [`crate::gui::host::session_report`]); `battery_j`: the capacity for the
/// residual-battery figure (default: the simulator's).
pub fn write_report(
    path: &Path,
    scenario: &str,
    profile: &str,
    battery_j: Option<f64>,
    o: &PlayOutcome,
) -> anyhow::Result<()> {
    let info = crate::gui::host::ReportInfo { scenario: scenario.to_string(), seed: 0, battery_j };
    let report = crate::gui::host::session_report(&info, profile, o);
    std::fs::write(path, report.to_json() + "\n")
        .with_context(|| format!("writing {}", path.display()))
}
