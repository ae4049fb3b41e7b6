//! Why the low-delay schedulers' in-order delay on jittery paths is bimodal across seeds:
//! the schedulers against their congestion controllers (docs/ALGORITHMS.md, "EDPF and
//! S-EDPF", the window-limited mode).
//!
//! ```text
//! cargo run --release -p braid-sim --example jitter_modes -- [SECONDS] [SEEDS] [RATE]
//! ```
//!
//! Two paths: `a` 8 Mbit/s with 30 ms one way, `b` 12 Mbit/s with 45 ms one way and
//! normal jitter σ = 90 ms on its data direction, FIFO (order kept). Workload: a CBR stream
//! of RATE (default `14mbit`) in 1200-byte messages, SECONDS long (default 30). Profiles
//! `mptcp`, `edpf` and `sedpf`, each under LIA (their own controller), Reno, OLIA and
//! CUBIC; seeds 1..=SEEDS (default 12). Prints one Markdown row per profile and controller:
//! the mean in-order delay per seed, their mean and median, the mean goodput, and how
//! many seeds ended window-limited (goodput under 0.97× the stream's rate: the backlog,
//! and with it the delay, grew for the rest of the run).
//!
//! Deterministic: the same arguments print the same table.

use std::path::Path;

use braid_netem::scenario::Scenario;
use braid_sim::{self as sim, RunOptions};
use braid_transport::profile;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

fn scenario(secs: f64, rate: &str) -> String {
    format!(
        r#"name = "jitter-modes"
duration_s = {secs}
seed = 1
[[path]]
name = "a"
role = "wifi"
down = {{ rate = "8mbit", delay_ms = 30 }}
up = {{ rate = "8mbit", delay_ms = 30 }}
[[path]]
name = "b"
role = "lte"
down = {{ rate = "12mbit", delay_ms = 45, jitter_ms = 90 }}
up = {{ rate = "12mbit", delay_ms = 45 }}
[workload]
kind = "stream"
cbr = {{ rate = "{rate}", packet_bytes = 1200 }}
"#
    )
}

/// The stream's rate in bit/s from `NNmbit` / `NNkbit`.
fn rate_bps(rate: &str) -> Res<f64> {
    let (n, unit) = rate.split_at(rate.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(0));
    let n: f64 = n.parse()?;
    Ok(match unit {
        "mbit" => n * 1e6,
        "kbit" => n * 1e3,
        _ => return Err(format!("rate {rate}: use NNmbit or NNkbit").into()),
    })
}

fn main() -> Res<()> {
    let a: Vec<String> = std::env::args().skip(1).collect();
    let secs: f64 = a.first().map(|x| x.parse()).transpose()?.unwrap_or(30.0);
    let seeds: u64 = a.get(1).map(|x| x.parse()).transpose()?.unwrap_or(12);
    let rate = a.get(2).cloned().unwrap_or_else(|| "14mbit".into());
    let want = rate_bps(&rate)?;
    let sc = Scenario::parse(&scenario(secs, &rate), "j.toml", Path::new("."))?;
    println!("{rate} CBR, σ = 90 ms FIFO jitter on path b, {secs} s, seeds 1–{seeds}");
    println!(
        "| profile | controller | mean in-order delay per seed, ms | mean ms | median ms \
         | goodput Mbit/s | window-limited seeds |"
    );
    println!("|---|---|---|---:|---:|---:|---:|");
    for cc in ["lia", "reno", "olia", "cubic"] {
        for name in ["mptcp", "edpf", "sedpf"] {
            let p = profile::resolve(name, Some(cc))?;
            let (mut delays, mut goodput, mut limited) = (Vec::new(), 0.0, 0);
            for seed in 1..=seeds {
                let opts = RunOptions { seed: Some(seed), ..RunOptions::default() };
                let r = sim::run_detailed(&sc, &p, &opts)?.report;
                delays.push(r.delay_ms.mean);
                goodput += r.goodput_bps;
                if r.goodput_bps < 0.97 * want {
                    limited += 1;
                }
            }
            let n = delays.len().max(1) as f64;
            let mean = delays.iter().sum::<f64>() / n;
            let mut sorted = delays.clone();
            sorted.sort_by(f64::total_cmp);
            let median = match sorted.len() {
                0 => 0.0,
                k if k % 2 == 1 => sorted[k / 2],
                k => (sorted[k / 2 - 1] + sorted[k / 2]) / 2.0,
            };
            let per: Vec<String> = delays.iter().map(|d| format!("{d:.0}")).collect();
            println!(
                "| {name} | {cc} | {} | {mean:.0} | {median:.0} | {:.2} | {limited} |",
                per.join(" "),
                goodput / n / 1e6
            );
        }
    }
    Ok(())
}
