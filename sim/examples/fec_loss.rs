//! The streaming code against loss: two 10 Mbit/s paths with 50 ms one-way delay, random
//! loss on one path's data direction, a CBR stream (8 Mbit/s by default) of 1000-byte messages for
//! 30 s. `mptcp` without the code (lossless and lossy) against `mptcp` with the code at
//! τ = 2, 4, 8 (`Profile::with_fec`); in-order delay percentiles, goodput, retransmitted
//! and coded bytes, mean over the seeds.
//!
//! ```text
//! cargo run --release -p braid-transport --example fec_loss [-- WIFI_LOSS SEEDS RATE_MBIT LTE_LOSS]
//! ```

use std::path::Path;

use braid_netem::scenario::Scenario;
use braid_sim::{self as sim, RunOptions};
use braid_transport::profile;

fn scenario_text(loss: f64, lte_loss: f64, rate_mbit: u32) -> String {
    format!(
        r#"name = "fec-loss"
duration_s = 30
seed = 1

[[path]]
name = "wifi"
role = "wifi"
down = {{ rate = "10mbit", delay_ms = 50, loss = {loss} }}
up = {{ rate = "10mbit", delay_ms = 50 }}

[[path]]
name = "lte"
role = "lte"
down = {{ rate = "10mbit", delay_ms = 50, loss = {lte_loss} }}
up = {{ rate = "10mbit", delay_ms = 50 }}

[workload]
kind = "stream"
cbr = {{ rate = "{rate_mbit}mbit", packet_bytes = 1000 }}
"#
    )
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let loss: f64 = args.next().map(|a| a.parse()).transpose()?.unwrap_or(0.1);
    let seeds: u64 = args.next().map(|a| a.parse()).transpose()?.unwrap_or(3);
    let rate: u32 = args.next().map(|a| a.parse()).transpose()?.unwrap_or(8);
    let lte_loss: f64 = args.next().map(|a| a.parse()).transpose()?.unwrap_or(0.0);
    let lossless =
        Scenario::parse(&scenario_text(0.0, 0.0, rate), "fec-loss.toml", Path::new("."))?;
    let lossy =
        Scenario::parse(&scenario_text(loss, lte_loss, rate), "fec-loss.toml", Path::new("."))?;
    let mptcp = profile::lookup("mptcp")?;
    let runs = [
        ("mptcp, no loss", &lossless, None),
        ("mptcp", &lossy, None),
        ("mptcp + code τ=2", &lossy, Some(2)),
        ("mptcp + code τ=4", &lossy, Some(4)),
        ("mptcp + code τ=8", &lossy, Some(8)),
    ];
    println!(
        "loss {:.0} % on wifi, {:.0} % on lte, {rate} Mbit/s CBR, {seeds} seeds\n{:<18} {:>8} {:>8} {:>8} {:>10} {:>12} {:>12}",
        loss * 100.0,
        lte_loss * 100.0,
        "run",
        "p50 ms",
        "p95 ms",
        "p99 ms",
        "Mbit/s",
        "retx kB",
        "coded kB"
    );
    for (label, sc, tau) in runs {
        let p = match tau {
            Some(t) => mptcp.clone().with_fec(t),
            None => mptcp.clone(),
        };
        let mut acc = [0.0f64; 6];
        for seed in 1..=seeds {
            let opts = RunOptions { seed: Some(seed), ..RunOptions::default() };
            let r = sim::run(sc, &p, &opts)?;
            let v = [
                r.delay_ms.p50,
                r.delay_ms.p95,
                r.delay_ms.p99,
                r.goodput_bps / 1e6,
                r.retransmitted_bytes as f64 / 1e3,
                r.redundant_bytes as f64 / 1e3,
            ];
            for (a, x) in acc.iter_mut().zip(v) {
                *a += x / seeds as f64;
            }
        }
        println!(
            "{:<18} {:>8.1} {:>8.1} {:>8.1} {:>10.3} {:>12.0} {:>12.0}",
            label, acc[0], acc[1], acc[2], acc[3], acc[4], acc[5]
        );
    }
    Ok(())
}
