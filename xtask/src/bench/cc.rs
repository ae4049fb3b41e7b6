//! `cargo xtask bench cc --trace-down FILE [--trace-up FILE] [--seeds N] [--duration S]`:
//! controllers on a WiFi-like 2 Mbit/s path plus a cellular path replaying a mahimahi
//! trace (BENCHMARKS.md, "Controllers on a WiFi + driving-LTE trace").
//!
//! The scenario is generated here, next to the build output, and names the trace files
//! given on the command line: nothing in the project depends on a trace. Runs are
//! simulated (`braid sim`, deterministic, so the debug binary gives the same numbers as a
//! release one). For each profile+controller and seed it prints goodput as a fraction of
//! the links' capacity (WiFi's rate plus the trace's delivery opportunities over the run,
//! 1 500 bytes each, mahimahi's convention) and the p95 of the sender's latest RTT sample
//! per path (sampled every 100 ms while the path delivers, `braid sim --rtt-csv`) against
//! the path's base RTT (twice its one-way delay).

use std::path::{Path, PathBuf};
use std::process::Command;

use super::json::goodput_bps;
use crate::root;
use crate::run as run_cmd;

const WIFI_BPS: f64 = 2e6;
const WIFI_DELAY_MS: f64 = 20.0;
const LTE_DELAY_MS: f64 = 40.0;

struct Opts {
    down: PathBuf,
    up: Option<PathBuf>,
    seeds: u64,
    duration_s: f64,
}

fn parse(args: &[String]) -> Result<Opts, String> {
    let mut o = Opts { down: PathBuf::new(), up: None, seeds: 3, duration_s: 120.0 };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut val = || it.next().cloned().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "cc" => {}
            "--trace-down" => o.down = PathBuf::from(val()?),
            "--trace-up" => o.up = Some(PathBuf::from(val()?)),
            "--seeds" => o.seeds = val()?.parse().map_err(|e| format!("--seeds: {e}"))?,
            "--duration" => {
                o.duration_s = val()?.parse().map_err(|e| format!("--duration: {e}"))?
            }
            other => return Err(format!("bench cc: unknown argument {other}")),
        }
    }
    if o.down.as_os_str().is_empty() {
        return Err("bench cc needs --trace-down FILE (a mahimahi trace)".into());
    }
    Ok(o)
}

/// Capacity of a mahimahi trace over `[0, duration)`, bit/s (the trace loops).
fn trace_bps(file: &Path, duration_s: f64) -> Result<f64, String> {
    let text =
        std::fs::read_to_string(file).map_err(|e| format!("reading {}: {e}", file.display()))?;
    let ts: Vec<f64> = text.lines().filter_map(|l| l.trim().parse().ok()).collect();
    let period = ts.last().copied().filter(|&p| p > 0.0).ok_or("empty trace")?;
    let end = duration_s * 1000.0;
    let mut n = 0u64;
    let mut base = 0.0;
    while base < end {
        n += ts.iter().filter(|&&t| base + t <= end).count() as u64;
        base += period;
    }
    Ok(n as f64 * 1500.0 * 8.0 / duration_s)
}

fn scenario(o: &Opts, dir: &Path) -> Result<PathBuf, String> {
    let up = match &o.up {
        Some(u) => format!("trace = {:?}", u.display().to_string()),
        None => "rate = \"2mbit\"".to_string(),
    };
    let text = format!(
        "name = \"wifi-lte-trace\"\nduration_s = {d}\nseed = 1\n\
         [[path]]\nname = \"wifi\"\nrole = \"wifi\"\n\
         down = {{ rate = \"2mbit\", delay_ms = {w}, jitter_ms = 2, loss = 0.002 }}\n\
         up = {{ rate = \"2mbit\", delay_ms = {w} }}\n\
         [[path]]\nname = \"lte\"\nrole = \"lte\"\n\
         down = {{ trace = {down:?}, delay_ms = {l} }}\n\
         up = {{ {up}, delay_ms = {l} }}\n\
         [workload]\nkind = \"bulk\"\n",
        d = o.duration_s,
        w = WIFI_DELAY_MS,
        l = LTE_DELAY_MS,
        down = o.down.display().to_string(),
    );
    let file = dir.join("wifi-lte-trace.toml");
    std::fs::write(&file, text).map_err(|e| format!("writing {}: {e}", file.display()))?;
    Ok(file)
}

fn p95(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * 0.95).round() as usize]
}

/// p95 of each path's RTT column (non-zero bins only).
fn rtt_p95(csv: &str) -> Vec<f64> {
    let mut lines = csv.lines();
    let cols = lines.next().map_or(0, |h| h.split(',').count().saturating_sub(1));
    let mut v = vec![Vec::new(); cols];
    for l in lines {
        for (i, x) in l.split(',').skip(1).enumerate() {
            if let (Some(col), Ok(x)) = (v.get_mut(i), x.parse::<f64>())
                && x > 0.0
            {
                col.push(x);
            }
        }
    }
    v.into_iter().map(p95).collect()
}

/// Runs the comparison and prints one row per profile+controller and seed, then means.
pub fn run(args: &[String]) -> Result<(), String> {
    let o = parse(args)?;
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    run_cmd(Command::new(cargo).current_dir(root()).args([
        "build",
        "-p",
        "braid-player",
        "--bin",
        "braid",
    ]))?;
    let braid = root().join("target/debug/braid");
    let dir = root().join("target/bench-cc");
    std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let file = scenario(&o, &dir)?;
    let lte_bps = trace_bps(&o.down, o.duration_s)?;
    let cases: [(&str, &[&str]); 6] = [
        ("mptcp+lia", &[]),
        ("mptcp+cubic", &[]),
        ("mptcp+bbr", &[]),
        ("tcp+reno", &["--path", "lte"]),
        ("tcp+cubic", &["--path", "lte"]),
        ("tcp+bbr", &["--path", "lte"]),
    ];
    println!(
        "capacity: wifi {:.2} Mbit/s (base RTT {} ms), lte trace {:.2} Mbit/s (base RTT {} ms), {} s",
        WIFI_BPS / 1e6,
        2.0 * WIFI_DELAY_MS,
        lte_bps / 1e6,
        2.0 * LTE_DELAY_MS,
        o.duration_s
    );
    println!(
        "{:<12} {:>4} {:>9} {:>9} {:>13} {:>13}",
        "profile", "seed", "Mbit/s", "fraction", "wifi p95 ms", "lte p95 ms"
    );
    for (profile, extra) in cases {
        let capacity = if extra.is_empty() { WIFI_BPS + lte_bps } else { lte_bps };
        let mut sums = [0.0; 4];
        for seed in 1..=o.seeds {
            let report = dir.join(format!("{profile}-{seed}.json"));
            let rtt = dir.join(format!("{profile}-{seed}-rtt.csv"));
            let seed_s = seed.to_string();
            let mut cmd = Command::new(&braid);
            cmd.args(["sim", "--scenario"]).arg(&file).args(["--profile", profile]);
            cmd.args(["--seed", &seed_s]).args(extra);
            cmd.arg("--report").arg(&report).arg("--rtt-csv").arg(&rtt);
            let out = cmd.output().map_err(|e| format!("running braid sim: {e}"))?;
            if !out.status.success() {
                return Err(format!(
                    "braid sim {profile}: {}",
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
            let json = std::fs::read_to_string(&report)
                .map_err(|e| format!("reading {}: {e}", report.display()))?;
            let csv = std::fs::read_to_string(&rtt)
                .map_err(|e| format!("reading {}: {e}", rtt.display()))?;
            let goodput = goodput_bps(&json)
                .map_err(|e| format!("session report {}: {e}", report.display()))?;
            let p = rtt_p95(&csv);
            let wifi = if extra.is_empty() { p.first().copied().unwrap_or(0.0) } else { 0.0 };
            let lte = p.get(1).copied().unwrap_or(0.0);
            let row = [goodput / 1e6, goodput / capacity, wifi, lte];
            for (s, v) in sums.iter_mut().zip(row) {
                *s += v;
            }
            println!(
                "{profile:<12} {seed:>4} {:>9.2} {:>9.3} {:>13.0} {:>13.0}",
                row[0], row[1], row[2], row[3]
            );
        }
        let n = o.seeds.max(1) as f64;
        println!(
            "{profile:<12} mean {:>9.2} {:>9.3} {:>13.0} {:>13.0}",
            sums[0] / n,
            sums[1] / n,
            sums[2] / n,
            sums[3] / n
        );
    }
    Ok(())
}
