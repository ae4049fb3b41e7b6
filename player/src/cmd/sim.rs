//! `braid sim --scenario FILE --profile P [--cc NAME] [--seed N] [--path NAME] [--report FILE]`: runs a
//! scenario in the deterministic simulator and prints a summary; `--report` writes the
//! session report (JSON), `--csv` the per-path throughput time series.

use std::path::PathBuf;

use anyhow::Context as _;
use braid_netem::scenario::Scenario;
use braid_sim::RunOptions;

use crate::choice::{TransportChoice, TransportSpec};

/// Arguments of `braid sim`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The scenario file (TOML).
    #[arg(long)]
    scenario: PathBuf,
    /// The transport profile, `PROFILE` or `PROFILE+CC` (`braid profiles` lists them).
    #[arg(long)]
    profile: TransportSpec,
    /// Congestion controller on every path, replacing the profile's: reno, lia, olia,
    /// cubic, bbr, tfrc, marc or fixed-bdp.
    #[arg(long, value_name = "NAME")]
    cc: Option<String>,
    /// Seed (default: the scenario's).
    #[arg(long)]
    seed: Option<u64>,
    /// The path a one-path profile uses (default: the scenario's first).
    #[arg(long, value_name = "NAME")]
    path: Option<String>,
    /// Write the session report (JSON) here.
    #[arg(long, value_name = "FILE")]
    report: Option<PathBuf>,
    /// Write the per-path throughput time series (CSV) here.
    #[arg(long, value_name = "FILE")]
    csv: Option<PathBuf>,
    /// Write the sender's latest RTT sample per path per interval (CSV, ms) here.
    #[arg(long, value_name = "FILE")]
    rtt_csv: Option<PathBuf>,
    /// Radio power model for a role, replacing the built-in one: `ROLE=FILE` (ROLE: wifi,
    /// lte or 3g; FILE: TOML as in assets/power); repeat for several roles.
    #[arg(long = "power", value_name = "ROLE=FILE")]
    power: Vec<String>,
    #[command(flatten)]
    traces: crate::traces::TraceArgs,
    /// Protect simulated packets with the real AEAD (AES-128-GCM) instead of the null
    /// cipher (same sizes and results, no cipher work).
    #[arg(long)]
    protect: bool,
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    let scenario = Scenario::load(&args.scenario)?;
    let TransportChoice::Braid(profile) = args.profile.resolve(args.cc.as_deref())? else {
        let name = args.profile.to_string();
        anyhow::bail!("{}", crate::cmd::kernel::needs_bed(&name, "the simulator"));
    };
    let traces = args.traces.prepare(false)?;
    let opts = RunOptions {
        trace: traces.hooks(),
        seed: args.seed,
        path: args.path.clone(),
        power: crate::session::config::power_models(&args.power)?,
        protect: args.protect,
        ..RunOptions::default()
    };
    let result = crate::session::simulate(&scenario, &profile, &opts)?;
    print!("{}", result.report.summary_table());
    if let Some(path) = &args.report {
        crate::session::report::write(path, &result.report)?;
    }
    if let Some(path) = &args.csv {
        std::fs::write(path, result.series.to_csv())
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(path) = &args.rtt_csv {
        std::fs::write(path, result.series.rtt_csv())
            .with_context(|| format!("writing {}", path.display()))?;
    }
    // What played is written above; a session that lost its connection still fails.
    match &result.stopped {
        Some(stop) => Err(anyhow::anyhow!("{stop}")),
        None => Ok(()),
    }
}
