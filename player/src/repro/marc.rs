//! `braid repro marc`: the MARC slides' user-perceived-quality experiment and their
//! TCP-friendliness claim, in the simulator.
//!
//! 1. `assets/scenarios/marc-44kBps-tcp-onoff.toml` (a 44 KB/s constant-rate stream, one
//!    long-lived TCP-like flow and one Pareto ON/OFF flow at a 1.5 Mbit/s / 50 ms
//!    bottleneck) with `tcp`, `tfrc` and `marc`: rebuffering events, stall time and lost
//!    frames per profile. The slides plot the distribution of rebuffering events and find
//!    MARC fewest, then TFRC, then TCP; they give no numbers, so `paper` is null and the
//!    ordering is checked and printed.
//! 2. TCP-friendliness: a stream asking for more than its fair share (1.6 Mbit/s) against
//!    two long-lived TCP-like flows at a 2 Mbit/s / 20 ms bottleneck: its goodput over the
//!    TCP-like flows' mean throughput (`friendliness.share_ratio`; the slides: MARC and
//!    TFRC stay at or below the fair share, i.e. a ratio ≤ 1).

use std::path::Path;

use anyhow::Context as _;
use braid_transport::profile;
use braid_transport::scenario::Scenario;
use braid_transport::sim::RunOptions;

use super::{Repro, ReproRow};
use crate::session::compare::statistics;

/// The 44 KB/s scenario, embedded so the command runs from any directory.
const SCENARIO_44: &str = include_str!("../../../assets/scenarios/marc-44kBps-tcp-onoff.toml");

/// The friendliness setup: 2 Mbit/s / 20 ms, two long-lived TCP-like flows, a 1.6 Mbit/s
/// stream (fair share: a third of the link).
const FRIENDLINESS: &str = r#"
name = "marc-friendliness"
duration_s = 60
seed = 1
[[link]]
name = "bottleneck"
rate = "2mbit"
delay_ms = 20
[[path]]
name = "wired"
role = "wired"
down = { via = ["bottleneck"] }
up = { rate = "10mbit", delay_ms = 20 }
[[cross]]
link = "bottleneck"
kind = "reno"
count = 2
[workload]
kind = "stream"
cbr = { rate = "1600kbit", packet_bytes = 1000 }
"#;

const PROFILES: [&str; 3] = ["tcp", "tfrc", "marc"];

fn mean_sd(v: &[f64]) -> (f64, f64) {
    let n = v.len().max(1) as f64;
    let m = v.iter().sum::<f64>() / n;
    let var = v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / n;
    (m, var.sqrt())
}

/// Runs the reproduction with `seeds` seeds (each run shortened to `duration` when
/// given); writes repro.json into `out` when given.
pub fn run(
    seeds: u32,
    out: Option<&Path>,
    duration: Option<std::time::Duration>,
    batch: crate::session::parallel::Batch,
) -> anyhow::Result<()> {
    let repro = reproduce(seeds.max(1), duration, batch)?;
    print!("{}", repro.table());
    let stalls = |p: &str| {
        repro
            .rows
            .iter()
            .find(|r| r.metric == "stream.stalls" && r.profile == p)
            .map_or(f64::NAN, |r| r.ours)
    };
    let (tcp, tfrc, marc) = (stalls("tcp"), stalls("tfrc"), stalls("marc"));
    println!(
        "slides: rebuffering events fewest with MARC, then TFRC, then TCP; ours (mean per run): marc {marc:.2}, tfrc {tfrc:.2}, tcp {tcp:.2} -> {}",
        if marc == tfrc && tfrc == tcp {
            "no difference at this number of seeds"
        } else if marc <= tfrc && tfrc <= tcp {
            "same order"
        } else {
            "different order"
        }
    );
    if let Some(dir) = out {
        repro.write(dir)?;
    }
    Ok(())
}

/// The rows (see the module docs).
pub fn reproduce(
    seeds: u32,
    duration: Option<std::time::Duration>,
    batch: crate::session::parallel::Batch,
) -> anyhow::Result<Repro> {
    let mut scenario = Scenario::parse(SCENARIO_44, "marc-44kBps-tcp-onoff.toml", Path::new("."))?;
    let mut fr = Scenario::parse(FRIENDLINESS, "marc-friendliness.toml", Path::new("."))?;
    if let Some(d) = duration {
        scenario.duration = scenario.duration.min(d);
        fr.duration = fr.duration.min(d);
    }
    let seed_list: Vec<u64> = (0..u64::from(seeds)).map(|i| scenario.seed + i).collect();
    let mut rows = Vec::new();
    let mut base: Option<std::collections::BTreeMap<String, f64>> = None;
    let list: Vec<(&str, u64)> =
        PROFILES.iter().flat_map(|&n| seed_list.iter().map(move |&s| (n, s))).collect();
    let mut reports = crate::session::parallel::map(batch.jobs, &list, |&(name, seed)| {
        let p = profile::lookup(name)?;
        let opts = RunOptions { seed: Some(seed), protect: batch.protect, ..RunOptions::default() };
        let r = crate::session::simulate(&scenario, &p, &opts)
            .with_context(|| format!("{name} seed {seed}"))?;
        Ok(r.report)
    })?
    .into_iter();
    for name in PROFILES {
        let runs: Vec<_> = reports.by_ref().take(seed_list.len()).collect();
        let (mean, sd) = statistics(&runs);
        for metric in [
            "stream.stalls",
            "stream.stall_time_s",
            "stream.frames_lost",
            "stream.startup_delay_s",
            "goodput_bps",
        ] {
            let ours = mean.get(metric).copied().unwrap_or(0.0);
            let ours_ratio =
                base.as_ref().and_then(|b| b.get(metric)).filter(|&&b| b > 0.0).map(|b| ours / b);
            rows.push(ReproRow {
                metric: metric.to_string(),
                profile: name.to_string(),
                ours,
                ours_sd: sd.get(metric).copied().unwrap_or(0.0),
                paper: None,
                ratio_to: Some("tcp".to_string()),
                ours_ratio: if name == "tcp" {
                    Some(1.0).filter(|_| ours > 0.0)
                } else {
                    ours_ratio
                },
                paper_ratio: None,
            });
        }
        if base.is_none() {
            base = Some(mean);
        }
    }

    let friendly = ["tfrc", "marc"];
    let list: Vec<(&str, u64)> =
        friendly.iter().flat_map(|&n| seed_list.iter().map(move |&s| (n, s))).collect();
    let mut shares = crate::session::parallel::map(batch.jobs, &list, |&(name, seed)| {
        let p = profile::lookup(name)?;
        let opts = RunOptions { seed: Some(seed), protect: batch.protect, ..RunOptions::default() };
        let r = braid_transport::sim::run_detailed(&fr, &p, &opts)
            .with_context(|| format!("{name} seed {seed}"))?;
        let reno = r.cross.first().map_or(0.0, |c| c.throughput_bps / f64::from(c.flows.max(1)));
        Ok((reno > 0.0).then(|| r.report.goodput_bps / reno))
    })?
    .into_iter();
    for name in friendly {
        let ratios: Vec<f64> = shares.by_ref().take(seed_list.len()).flatten().collect();
        let (m, sd) = mean_sd(&ratios);
        rows.push(ReproRow {
            metric: "friendliness.share_ratio".to_string(),
            profile: name.to_string(),
            ours: m,
            ours_sd: sd,
            paper: Some(1.0),
            ratio_to: None,
            ours_ratio: None,
            paper_ratio: None,
        });
    }
    Ok(Repro { name: "marc".to_string(), seeds: seed_list, rows })
}
