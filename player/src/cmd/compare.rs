//! `braid compare --scenario FILE --profiles A,B,… [--seeds N] [--realtime] [--gui]
//! [--out DIR]`: every profile on identical conditions and seeds; a text table, and with
//! `--out` the file `DIR/compare.json` plus one CSV time series per run. The simulator runs
//! them unless `--realtime` or `--gui` asks for real sessions (see [`super::compare_gui`]).

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{Context as _, bail};
use braid_transport::profile::{self, Profile};
use braid_transport::scenario::Scenario;
use braid_transport::sim::{RunOptions, SessionReport};
use serde_json::{Map, Value};

/// Arguments of `braid compare`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The scenario file (TOML).
    #[arg(long)]
    scenario: PathBuf,
    /// Comma-separated profiles.
    #[arg(long, value_delimiter = ',', required = true)]
    profiles: Vec<String>,
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
    /// each over its own in-process server and emulated paths.
    #[arg(long)]
    realtime: bool,
    /// One window with a pane per profile (2 to 4), ranked, with an export button
    /// (implies --realtime; needs a display).
    #[arg(long)]
    gui: bool,
}

/// One profile's runs and their statistics.
#[derive(Debug, serde::Serialize)]
pub struct ProfileSummary {
    /// The profile.
    pub profile: String,
    /// Mean of every numeric field, flattened with dots.
    pub mean: BTreeMap<String, f64>,
    /// Standard deviation of the same.
    pub sd: BTreeMap<String, f64>,
    /// The session reports, one per seed.
    pub runs: Vec<SessionReport>,
}

/// The whole comparison (`compare.json`).
#[derive(Debug, serde::Serialize)]
pub struct Comparison {
    /// Scenario name.
    pub scenario: String,
    /// Seeds used.
    pub seeds: Vec<u64>,
    /// One entry per profile, in the order given.
    pub profiles: Vec<ProfileSummary>,
}

/// Flattens the numeric fields of a JSON value: `{"a": {"b": 1}}` → `a.b = 1`; arrays of
/// objects with a `name` use it (`paths.wifi.throughput_bps`).
pub fn flatten(prefix: &str, v: &Value, out: &mut BTreeMap<String, f64>) {
    match v {
        Value::Number(n) => {
            if let Some(x) = n.as_f64() {
                out.insert(prefix.to_string(), x);
            }
        }
        Value::Object(m) => {
            for (k, v) in m {
                let key = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
                flatten(&key, v, out);
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                let label = item
                    .get("name")
                    .and_then(Value::as_str)
                    .map_or_else(|| i.to_string(), str::to_string);
                flatten(&format!("{prefix}.{label}"), item, out);
            }
        }
        _ => {}
    }
}

/// Mean and population standard deviation per key over the runs.
pub fn statistics(runs: &[SessionReport]) -> (BTreeMap<String, f64>, BTreeMap<String, f64>) {
    let mut values: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for r in runs {
        let mut flat = BTreeMap::new();
        flatten("", &serde_json::to_value(r).unwrap_or(Value::Object(Map::new())), &mut flat);
        flat.remove("seed");
        for (k, v) in flat {
            values.entry(k).or_default().push(v);
        }
    }
    let mut mean = BTreeMap::new();
    let mut sd = BTreeMap::new();
    for (k, v) in values {
        let n = v.len() as f64;
        let m = v.iter().sum::<f64>() / n;
        let var = v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / n;
        mean.insert(k.clone(), m);
        sd.insert(k, var.sqrt());
    }
    (mean, sd)
}

/// Runs every profile on every seed in the simulator.
pub fn compare(
    scenario: &Scenario,
    profiles: &[Profile],
    seeds: u32,
    path: Option<String>,
    out: Option<&PathBuf>,
) -> anyhow::Result<Comparison> {
    let seeds: Vec<u64> = (0..u64::from(seeds)).map(|i| scenario.seed + i).collect();
    let bar = indicatif::ProgressBar::new((seeds.len() * profiles.len()) as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} runs  {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let mut summaries = Vec::new();
    for p in profiles {
        let mut runs = Vec::new();
        for &seed in &seeds {
            bar.set_message(format!("{} seed {seed}", p.name));
            let opts = RunOptions { seed: Some(seed), path: path.clone(), ..RunOptions::default() };
            let outcome = crate::session::simulate_traced(scenario, p, &opts)
                .with_context(|| format!("profile {} seed {seed}", p.name))?;
            let result = outcome.result;
            if let Some(dir) = out {
                let csv = dir.join(format!("{}-seed{seed}.csv", p.name));
                std::fs::write(&csv, result.series.to_csv())
                    .with_context(|| format!("writing {}", csv.display()))?;
                if crate::report::font_available() {
                    let png = dir.join(format!("{}-seed{seed}.png", p.name));
                    let title = format!("{} / {} / seed {seed}", scenario.name, p.name);
                    crate::report::plot_run(&png, &title, &result.series, outcome.trace.as_ref())?;
                }
            }
            runs.push(result.report);
            bar.inc(1);
        }
        let (mean, sd) = statistics(&runs);
        summaries.push(ProfileSummary { profile: p.name.to_string(), mean, sd, runs });
    }
    bar.finish_and_clear();
    Ok(Comparison { scenario: scenario.name.clone(), seeds, profiles: summaries })
}

/// The text table users read.
pub fn table(c: &Comparison) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let _ = writeln!(s, "scenario {}  seeds {:?}", c.scenario, c.seeds);
    let _ = writeln!(
        s,
        "{:<18} {:>9} {:>9} {:>7} {:>9} {:>9} {:>7} {:>5} {:>9} {:>11}",
        "profile",
        "Mbit/s",
        "p95 ms",
        "stalls",
        "start s",
        "PSNR dB",
        "SD",
        "MOS",
        "energy J",
        "Mbit/J"
    );
    for p in &c.profiles {
        let g = |k: &str| p.mean.get(k).copied();
        let f = |v: Option<f64>, scale: f64, prec: usize| {
            v.map_or_else(|| "-".to_string(), |x| format!("{:.*}", prec, x * scale))
        };
        let _ = writeln!(
            s,
            "{:<18} {:>9} {:>9} {:>7} {:>9} {:>9} {:>7} {:>5} {:>9} {:>11}",
            p.profile,
            f(g("goodput_bps"), 1e-6, 3),
            f(g("delay_ms.p95"), 1.0, 1),
            f(g("stream.stalls"), 1.0, 2),
            f(g("stream.startup_delay_s"), 1.0, 2),
            f(g("stream.psnr_avg_db"), 1.0, 2),
            f(g("stream.psnr_sd_db"), 1.0, 2),
            f(g("stream.mos"), 1.0, 1),
            f(g("energy.total_j"), 1.0, 2),
            f(g("energy.efficiency_bits_per_j"), 1e-6, 3),
        );
    }
    s
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    if args.seeds == 0 {
        bail!("--seeds must be at least 1");
    }
    let scenario = Scenario::load(&args.scenario)?;
    let profiles =
        args.profiles.iter().map(|p| profile::lookup(p.trim())).collect::<Result<Vec<_>, _>>()?;
    if args.gui || args.realtime {
        if args.path.is_some() {
            bail!(
                "--path applies to the simulator; real-time one-path profiles use the scenario's first path"
            );
        }
        return super::compare_gui::run(super::compare_gui::RealtimeArgs {
            scenario,
            profiles,
            seeds: args.seeds,
            out: args.out,
            gui: args.gui,
        });
    }
    if let Some(dir) = &args.out {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let c = compare(&scenario, &profiles, args.seeds, args.path.clone(), args.out.as_ref())?;
    print!("{}", table(&c));
    if let Some(dir) = &args.out {
        let path = dir.join("compare.json");
        std::fs::write(&path, serde_json::to_string_pretty(&c)? + "\n")
            .with_context(|| format!("writing {}", path.display()))?;
        if crate::report::font_available() {
            let points: Vec<(String, f64, f64)> = c
                .profiles
                .iter()
                .map(|p| {
                    let g = |k: &str| p.mean.get(k).copied().unwrap_or(0.0);
                    (p.profile.clone(), g("goodput_bps") / 1e6, g("delay_ms.p95"))
                })
                .collect();
            crate::report::plot_scatter(&dir.join("scatter.png"), &c.scenario, &points)?;
        } else {
            eprintln!("note: PNG plots skipped: no TrueType font (install fonts-dejavu-core)");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flatten_uses_dots_and_path_names() {
        let v: Value = serde_json::json!({"goodput_bps": 1.5, "stream": {"stalls": 2}, "paths": [{"name": "wifi", "rtt_ms": 3.0}], "scenario": "x"});
        let mut out = BTreeMap::new();
        flatten("", &v, &mut out);
        assert_eq!(out.get("goodput_bps"), Some(&1.5));
        assert_eq!(out.get("stream.stalls"), Some(&2.0));
        assert_eq!(out.get("paths.wifi.rtt_ms"), Some(&3.0));
        assert!(!out.contains_key("scenario"));
    }
}
