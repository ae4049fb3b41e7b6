//! `braid compare --scenario FILE --profiles A,B,… [--seeds N] [--realtime] [--gui]
//! [--out DIR] [--battery J]`: every profile on identical conditions and seeds; a text table, and with
//! `--out` the file `DIR/compare.json` plus one CSV time series per run. The simulator runs
//! them unless `--realtime` or `--gui` asks for real sessions: the profiles then play the
//! scenario's clip at the same time, each over its own in-process server and UDP relay
//! built from the same scenario and seed (so every pane sees identical emulated
//! conditions, events on the same schedule), started together.
//!
//! With `--gui` one window shows 2–4 panes side by side, each with its overlay, a summary
//! strip ranking them and an "Export report" button; the window's network controls act on
//! every pane's emulator at once. `--realtime` alone runs the same sessions without a
//! window and writes the table, `compare.json` and CSVs as the simulated comparison does.

use std::path::PathBuf;

use anyhow::{Context as _, bail};
use braid_netem::scenario::Scenario;
use braid_transport::energy::PowerModels;
use braid_transport::profile::Profile;

use crate::choice::{StackKind, TransportChoice, TransportSpec};
use crate::gui::compare::{CompareState, window_size};
use crate::gui::host::{self, WindowSpec};
use crate::session::compare::{self, Contender, LiveComparison, RealtimeMedia, table};
use crate::session::live::controlled_paths;
use crate::session::open::ScenarioOpener;
use crate::session::parallel::Batch;
use crate::session::report::ReportLabel;
use crate::session::sweep::{self, Shard};

/// The most panes one window shows.
pub const MAX_PANES: usize = 4;

/// Arguments of `braid compare`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The scenario file (TOML).
    #[arg(long)]
    scenario: PathBuf,
    /// Comma-separated profiles, each `PROFILE` or `PROFILE+CC` (CC: a controller name,
    /// as for --cc); the row keeps that name.
    #[arg(long, value_delimiter = ',', required = true)]
    profiles: Vec<TransportSpec>,
    /// Congestion controller on every path of every profile without its own `+CC`: reno, lia, olia,
    /// cubic, bbr, tfrc, marc or fixed-bdp.
    #[arg(long, value_name = "NAME")]
    cc: Option<String>,
    /// Runs per profile, seeds `seed … seed+N−1` (seed = the scenario's).
    #[arg(long, default_value_t = 1)]
    seeds: u32,
    /// The path one-path profiles use (default: the scenario's first).
    #[arg(long, value_name = "NAME")]
    path: Option<String>,
    /// Write compare.json and CSV time series here (with --gui: where "Export report"
    /// writes; default braid-compare-<scenario>).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Real time instead of the simulator: the profiles play the scenario's clip at once,
    /// each over its own in-process server and emulated paths (`noq-multipath` too).
    #[arg(long)]
    realtime: bool,
    /// One window with a pane per profile (2 to 4), ranked, with an export button
    /// (implies --realtime; needs a display).
    #[arg(long)]
    gui: bool,
    /// Run every profile, built-in, kernel or `noq-multipath`, across the TUN
    /// network-namespace bed built from the scenario (root), one at a time: bulk workloads
    /// as `braid perf` runs, stream workloads played with in-order delay, stalls and radio
    /// energy.
    #[arg(long, conflicts_with_all = ["realtime", "gui", "path"])]
    bed: bool,
    /// Radio power model for a role, replacing the built-in one: `ROLE=FILE` (ROLE: wifi,
    /// lte or 3g; FILE: TOML as in assets/power); repeat for several roles.
    #[arg(long = "power", value_name = "ROLE=FILE")]
    power: Vec<String>,
    /// The viewer's battery capacity, J, replacing the scenario's `battery_j`: each
    /// report's `energy.battery_residual_j` is what the run's radio energy leaves of it
    /// (with neither, the reports have no residual battery).
    #[arg(long = "battery", value_name = "J", value_parser = crate::session::config::battery_j)]
    battery: Option<f64>,
    /// The download-ahead: the transport's receive window holds this many seconds of the
    /// stream's media, so the server may send that far ahead of what the player reads
    /// (replaces the scenario's `max_buffer_s`; without either, about one second).
    #[arg(long = "max-buffer", value_name = "S", value_parser = crate::session::config::max_buffer_s)]
    max_buffer: Option<f64>,
    #[command(flatten)]
    traces: crate::traces::TraceArgs,
    /// Independent simulated runs (profile × seed) in parallel, N at a time (default: the
    /// number of cores); the output is the same for any N.
    #[arg(long, value_name = "N")]
    jobs: Option<usize>,
    /// Protect simulated packets with the real AEAD (AES-128-GCM) instead of the null
    /// cipher (same sizes and results, no cipher work).
    #[arg(long)]
    protect: bool,
    /// Run only share K of N of the simulated runs (1 ≤ K ≤ N; run i, in table order, is
    /// share K's when i ≡ K−1 mod N) and write them to `--out DIR/shard.json` with their
    /// CSVs and PNGs; `braid merge` combines the N outputs into the unsharded one.
    #[arg(long, value_name = "K/N", conflicts_with_all = ["realtime", "gui", "bed"])]
    shard: Option<Shard>,
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    if args.seeds == 0 {
        bail!("--seeds must be at least 1");
    }
    if args.bed {
        // Real processes and sockets across the bed, one run at a time: no cipher choice,
        // parallel batch or relay captures.
        let unsupported = [
            ("--jobs", args.jobs.is_some()),
            ("--protect", args.protect),
            ("--qlog", args.traces.qlog.is_some()),
            ("--pcap", args.traces.pcap.is_some()),
            ("--keylog", args.traces.keylog.is_some()),
        ];
        if let Some((flag, _)) = unsupported.iter().find(|(_, given)| *given) {
            bail!("{flag} does not apply with --bed (runs across the TUN bed)");
        }
        let power = crate::session::config::power_models(&args.power)?;
        return crate::cmd::kernel::compare_bed(
            &args.scenario,
            &args.profiles,
            args.cc.as_deref(),
            args.seeds,
            args.out.as_deref(),
            &power,
            args.battery,
            args.max_buffer,
        );
    }
    if let Some(k) = args.profiles.iter().find(|p| p.kind() == StackKind::Kernel) {
        let what =
            if args.gui || args.realtime { "the UDP relay emulator" } else { "the simulator" };
        bail!("{}", crate::cmd::kernel::needs_bed(&k.to_string(), what));
    }
    let mut scenario = Scenario::load(&args.scenario)?;
    if let Some(j) = args.battery {
        scenario.workload.battery_j = Some(j);
    }
    if let Some(s) = args.max_buffer {
        scenario.set_max_buffer_s(s).map_err(|e| anyhow::anyhow!("--max-buffer: {e}"))?;
    }
    let power = crate::session::config::power_models(&args.power)?;
    let batch = Batch { jobs: crate::session::parallel::jobs(args.jobs)?, protect: args.protect };
    // Real time also runs noq-multipath, across the same relay (with its own controller).
    let real_time = args.gui || args.realtime;
    let mut contenders = Vec::new();
    for spec in &args.profiles {
        if spec.is_noq() && real_time {
            crate::cmd::kernel::refuse_cc_beside_noq(&spec.to_string(), args.cc.as_deref())?;
            contenders.push(Contender::Noq);
        } else if let TransportChoice::Braid(p) = spec.resolve(args.cc.as_deref())? {
            contenders.push(Contender::Braid(p));
        }
    }
    let traces = args.traces.prepare(true)?;
    if real_time {
        if args.protect {
            bail!("--protect applies to the simulator; real-time sessions are always protected");
        }
        if args.jobs.is_some() {
            bail!("--jobs applies to the simulator; real-time profiles already run side by side");
        }
        if args.path.is_some() {
            bail!(
                "--path applies to the simulator; real-time one-path profiles use the scenario's first path"
            );
        }
        return realtime(&args, &scenario, &contenders, power);
    }
    // The simulator runs Braid's profiles (resolving noq-multipath above refused it).
    let profiles: Vec<Profile> = contenders
        .into_iter()
        .filter_map(|c| match c {
            Contender::Braid(p) => Some(p),
            Contender::Noq => None,
        })
        .collect();
    if let Some(dir) = &args.out {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    if let Some(shard) = args.shard {
        return run_shard(&args, shard, &scenario, &profiles, &power, &traces.hooks(), batch);
    }
    let c = compare::simulate(
        &scenario,
        &profiles,
        args.seeds,
        args.path.clone(),
        args.out.as_ref(),
        &power,
        &traces.hooks(),
        batch,
    )?;
    print!("{}", table(&c));
    if let Some(dir) = &args.out {
        compare::write_outputs(dir, &c)?;
    }
    Ok(())
}

/// `--shard K/N`: this share of the runs, their reports to `DIR/shard.json`.
fn run_shard(
    args: &Args,
    shard: Shard,
    scenario: &Scenario,
    profiles: &[Profile],
    power: &PowerModels,
    hooks: &braid_sim::TraceHooks,
    batch: Batch,
) -> anyhow::Result<()> {
    let Some(dir) = &args.out else {
        bail!("--shard needs --out DIR: the shard's runs are written there for `braid merge`");
    };
    let settings = sweep::ShardSettings {
        scenario_file: args.scenario.clone(),
        cc: args.cc.clone(),
        path: args.path.clone(),
        protect: args.protect,
        power: args.power.clone(),
        seeds: args.seeds,
        battery_j: args.battery,
        max_buffer_s: args.max_buffer,
    };
    sweep::run_shard(&settings, shard, scenario, profiles, power, hooks, batch, dir)
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

/// The real-time comparison, in a window or not.
fn realtime(
    args: &Args,
    scenario: &Scenario,
    profiles: &[Contender],
    power: PowerModels,
) -> anyhow::Result<()> {
    if args.gui {
        check_gui(profiles.len(), args.seeds, crate::gui::display_available())?;
    }
    let mut media = RealtimeMedia::load(scenario)?;
    media.power = power.clone();
    println!(
        "braid compare (real time): {} over scenario \"{}\" ({} paths, emulated), profiles {}, {:.0} s{}",
        media.name,
        scenario.name,
        scenario.paths.len(),
        profiles.iter().map(Contender::name).collect::<Vec<_>>().join(", "),
        scenario.duration.as_secs_f64(),
        if args.gui { ", in a window" } else { "" }
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    if !args.gui {
        if let Some(dir) = &args.out {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        let c =
            compare::realtime(&rt, scenario, profiles, args.seeds, &media, args.out.as_deref())?;
        print!("{}", table(&c));
        if let Some(dir) = &args.out {
            compare::write_json(&dir.join("compare.json"), &c, true)?;
        }
        return Ok(());
    }
    let (sessions, commands) = media.pane_sessions(scenario, profiles);
    let out_dir = args.out.clone().unwrap_or_else(|| compare::default_out_dir(&scenario.name));
    let spec = WindowSpec {
        title: format!("Braid compare: {}", scenario.name),
        size: window_size(profiles.len()),
        paths: controlled_paths(scenario),
        commands,
        opener: Some(Box::new(
            ScenarioOpener::new(scenario.clone(), profiles.to_vec()).with_power(power),
        )),
        compare: Some(CompareState::new(LiveComparison::new(scenario, &media.name, out_dir))),
        report: ReportLabel::for_scenario(scenario),
    };
    let outcomes = host::run_windowed_many(rt, spec, sessions)?;
    let (c, unfinished) = compare::from_window(scenario, profiles, outcomes)?;
    if let Some(c) = c {
        print!("{}", table(&c));
    }
    if unfinished > 0 {
        println!("window closed before {unfinished} of the sessions ended");
    }
    Ok(())
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
}
