//! `braid compare --realtime` and `braid compare --gui`: the profiles play the scenario's
//! clip at the same time, each over its own in-process server and UDP relay built from the
//! same scenario and seed (so every pane sees identical emulated conditions, events on the
//! same schedule), started together.
//!
//! With `--gui` one window shows 2–4 panes side by side, each with its overlay, a summary
//! strip ranking them and an "Export report" button; the window's network controls act on
//! every pane's emulator at once. `--realtime` alone runs the same sessions without a
//! window and writes the table, `compare.json` and CSVs as the simulated comparison does.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, bail};
use braid_media::decode::ffmpeg_decode_clip;
use braid_transport::profile::Profile;
use braid_transport::scenario::{Scenario, StreamSource, WorkloadKind};
use braid_transport::sim::SessionReport;

use super::compare::{Comparison, ProfileSummary, statistics, table};
use super::demo::DemoSetup;
use crate::gui::compare::CompareState;
use crate::gui::host::{self, OpenSpec, PaneSession, ReportInfo, WindowSpec};
use crate::session::live::{LiveStats, PaneUpdate};
use crate::session::realtime;

/// The most panes one window shows.
pub const MAX_PANES: usize = 4;

/// What `braid compare` passes on for a real-time comparison.
pub struct RealtimeArgs {
    /// The scenario.
    pub scenario: Scenario,
    /// The profiles, in the order given.
    pub profiles: Vec<Profile>,
    /// Runs per profile (seeds `seed … seed+N−1`).
    pub seeds: u32,
    /// `--out`.
    pub out: Option<PathBuf>,
    /// `--gui`.
    pub gui: bool,
}

/// The clip a real-time comparison streams, with its reference decode.
struct Media {
    clip: Arc<braid_media::Clip>,
    name: String,
    reference: Arc<Vec<braid_media::quality::Frame>>,
    loop_clip: bool,
    buffer_s: f64,
}

fn load_media(scenario: &Scenario) -> anyhow::Result<Media> {
    let WorkloadKind::Stream(st) = &scenario.workload.kind else {
        bail!(
            "a real-time comparison plays a clip: scenario \"{}\" has no stream workload",
            scenario.name
        );
    };
    let StreamSource::Clip(path) = &st.source else {
        bail!(
            "a real-time comparison plays a clip: scenario \"{}\" streams synthetic CBR media",
            scenario.name
        );
    };
    if !path.is_file() {
        bail!("the scenario's clip {} does not exist", path.display());
    }
    let clip = realtime::load_clip(path)?;
    let (reference, _) =
        ffmpeg_decode_clip(&clip).with_context(|| format!("decoding {}", path.display()))?;
    Ok(Media {
        clip,
        name: path.display().to_string(),
        reference: Arc::new(reference),
        loop_clip: st.loop_clip,
        buffer_s: st.buffer_s.unwrap_or(30.0),
    })
}

/// One pane's in-process session for `profile` over `scenario` (with its seed).
fn setup(scenario: &Scenario, profile: &Profile, media: &Media) -> DemoSetup {
    DemoSetup {
        scenario: scenario.clone(),
        profile: profile.clone(),
        clip: Arc::clone(&media.clip),
        reference: Arc::clone(&media.reference),
        clip_name: media.name.clone(),
        loop_for: media.loop_clip.then_some(scenario.duration + Duration::from_secs(5)),
        buffer_s: media.buffer_s,
        duration: scenario.duration,
        booth_loop: false,
    }
}

/// The default export directory: `braid-compare-<scenario>` in the current directory.
pub fn default_out_dir(scenario: &str) -> PathBuf {
    let name: String = scenario
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' })
        .collect();
    PathBuf::from(format!("braid-compare-{name}"))
}

/// Checks the `--gui` arguments before anything starts.
pub fn check_gui(profiles: usize, seeds: u32, display: bool) -> anyhow::Result<()> {
    if profiles > MAX_PANES {
        bail!(
            "--gui shows at most {MAX_PANES} panes side by side, got {profiles} profiles (drop --gui to compare more)"
        );
    }
    if seeds != 1 {
        bail!(
            "--gui shows one run per profile: use --seeds 1 (or --realtime without --gui for several seeds)"
        );
    }
    if !display {
        bail!(
            "--gui needs a display, and neither DISPLAY nor WAYLAND_DISPLAY is set (use --realtime to run the same comparison without a window)"
        );
    }
    Ok(())
}

/// Runs the real-time comparison.
pub fn run(args: RealtimeArgs) -> anyhow::Result<()> {
    if args.gui {
        check_gui(args.profiles.len(), args.seeds, crate::gui::display_available())?;
    }
    let media = load_media(&args.scenario)?;
    println!(
        "braid compare (real time): {} over scenario \"{}\" ({} paths, emulated), profiles {}, {:.0} s{}",
        media.name,
        args.scenario.name,
        args.scenario.paths.len(),
        args.profiles.iter().map(|p| p.name).collect::<Vec<_>>().join(", "),
        args.scenario.duration.as_secs_f64(),
        if args.gui { ", in a window" } else { "" }
    );
    if args.gui { run_gui(&args, &media) } else { run_headless(&args, &media) }
}

fn run_gui(args: &RealtimeArgs, media: &Media) -> anyhow::Result<()> {
    let scenario = &args.scenario;
    // Everything is set up before the barrier; then every pane starts at once.
    let gate = Arc::new(tokio::sync::Barrier::new(args.profiles.len()));
    let mut sessions = Vec::new();
    let mut commands = Vec::new();
    for profile in &args.profiles {
        let (cmd_tx, cmd_rx) = std::sync::mpsc::channel();
        commands.push(cmd_tx);
        let setup = setup(scenario, profile, media);
        let gate = Arc::clone(&gate);
        sessions.push(PaneSession {
            title: profile.name.to_string(),
            start: Box::new(move |tx, wake| {
                Box::pin(async move {
                    gate.wait().await;
                    setup.run(tx, wake, Some(cmd_rx)).await
                })
            }),
        });
    }
    let out_dir = args.out.clone().unwrap_or_else(|| default_out_dir(&scenario.name));
    let compare = CompareState {
        scenario: scenario.name.clone(),
        seed: scenario.seed,
        clip: media.name.clone(),
        paths: scenario.paths.iter().map(|p| (p.name.clone(), p.role.to_string())).collect(),
        battery_j: scenario.workload.battery_j,
        out_dir,
        export_status: None,
    };
    let n = args.profiles.len();
    let spec = WindowSpec {
        title: format!("Braid compare: {}", scenario.name),
        size: if n <= 2 {
            [1200.0, 860.0]
        } else if n == 3 {
            [1500.0, 860.0]
        } else {
            [1200.0, 980.0]
        },
        paths: host::controlled_paths(scenario),
        commands,
        open: Some(OpenSpec { scenario: scenario.clone(), profiles: args.profiles.clone() }),
        compare: Some(compare),
        report: ReportInfo {
            scenario: scenario.name.clone(),
            seed: scenario.seed,
            battery_j: scenario.workload.battery_j,
        },
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let outcomes = host::run_windowed_many(rt, spec, sessions)?;
    let mut summaries = Vec::new();
    let mut unfinished = 0;
    for (profile, o) in args.profiles.iter().zip(outcomes) {
        match o {
            Some(Ok(o)) => {
                let info = ReportInfo {
                    scenario: scenario.name.clone(),
                    seed: scenario.seed,
                    battery_j: scenario.workload.battery_j,
                };
                let runs = vec![host::session_report(&info, profile.name, &o)];
                let (mean, sd) = statistics(&runs);
                summaries.push(ProfileSummary {
                    profile: profile.name.to_string(),
                    mean,
                    sd,
                    runs,
                });
            }
            Some(Err(e)) => return Err(e.context(format!("profile {}", profile.name))),
            None => unfinished += 1,
        }
    }
    if !summaries.is_empty() {
        print!(
            "{}",
            table(&Comparison {
                scenario: scenario.name.clone(),
                seeds: vec![scenario.seed],
                profiles: summaries
            })
        );
    }
    if unfinished > 0 {
        println!("window closed before {unfinished} of the sessions ended");
    }
    Ok(())
}

fn run_headless(args: &RealtimeArgs, media: &Media) -> anyhow::Result<()> {
    if let Some(dir) = &args.out {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let seeds: Vec<u64> = (0..u64::from(args.seeds)).map(|i| args.scenario.seed + i).collect();
    let mut runs: Vec<Vec<SessionReport>> = vec![Vec::new(); args.profiles.len()];
    for &seed in &seeds {
        let scenario = Scenario { seed, ..args.scenario.clone() };
        println!(
            "seed {seed}: {} sessions at once, {:.0} s",
            args.profiles.len(),
            scenario.duration.as_secs_f64()
        );
        let gate = Arc::new(tokio::sync::Barrier::new(args.profiles.len()));
        let mut tasks = Vec::new();
        for profile in &args.profiles {
            let (tx, rx) = std::sync::mpsc::channel();
            // Keep the live statistics for the CSV; pictures are dropped.
            let collect = std::thread::spawn(move || {
                rx.into_iter()
                    .filter_map(|u| match u {
                        PaneUpdate::Stats(s) => Some(s),
                        _ => None,
                    })
                    .collect::<Vec<LiveStats>>()
            });
            let setup = setup(&scenario, profile, media);
            let gate = Arc::clone(&gate);
            let task = rt.spawn(async move {
                gate.wait().await;
                setup.run(tx, Arc::new(|| {}), None).await
            });
            tasks.push((profile, task, collect));
        }
        for (k, (profile, task, collect)) in tasks.into_iter().enumerate() {
            let outcome = rt
                .block_on(task)
                .map_err(|e| anyhow::anyhow!("the session task failed: {e}"))?
                .with_context(|| format!("profile {} seed {seed}", profile.name))?;
            let history = collect.join().unwrap_or_default();
            if let Some(dir) = &args.out {
                let csv = dir.join(format!("{}-seed{seed}.csv", profile.name));
                std::fs::write(&csv, crate::gui::compare::history_csv(&history))
                    .with_context(|| format!("writing {}", csv.display()))?;
            }
            let info = ReportInfo {
                scenario: scenario.name.clone(),
                seed,
                battery_j: scenario.workload.battery_j,
            };
            runs[k].push(host::session_report(&info, profile.name, &outcome));
        }
    }
    let profiles = args
        .profiles
        .iter()
        .zip(runs)
        .map(|(p, runs)| {
            let (mean, sd) = statistics(&runs);
            ProfileSummary { profile: p.name.to_string(), mean, sd, runs }
        })
        .collect();
    let c = Comparison { scenario: args.scenario.name.clone(), seeds, profiles };
    print!("{}", table(&c));
    if let Some(dir) = &args.out {
        write_json(&dir.join("compare.json"), &c)?;
    }
    Ok(())
}

fn write_json(path: &Path, c: &Comparison) -> anyhow::Result<()> {
    let mut json = serde_json::to_value(c).context("serialising the comparison")?;
    if let Some(obj) = json.as_object_mut() {
        obj.insert("realtime".into(), serde_json::Value::Bool(true));
    }
    std::fs::write(path, serde_json::to_string_pretty(&json)? + "\n")
        .with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gui_arguments_are_checked_with_clear_errors() {
        let e = check_gui(5, 1, true).unwrap_err().to_string();
        assert!(e.contains("at most 4 panes") && e.contains("5 profiles"), "{e}");
        let e = check_gui(3, 1, false).unwrap_err().to_string();
        assert!(e.contains("needs a display") && e.contains("DISPLAY"), "{e}");
        let e = check_gui(3, 2, true).unwrap_err().to_string();
        assert!(e.contains("--seeds 1"), "{e}");
        assert!(check_gui(4, 1, true).is_ok());
    }

    #[test]
    fn the_default_export_directory_is_named_after_the_scenario() {
        assert_eq!(default_out_dir("wifi lte/1"), PathBuf::from("braid-compare-wifi_lte_1"));
    }
}
