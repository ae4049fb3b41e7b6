//! Loss detection under delay jitter: RACK (RFC 8985, the default) against RFC 9002's
//! packet and time thresholds (docs/ALGORITHMS.md, "Loss detection: RACK").
//!
//! ```text
//! cargo run -p braid-sim --example rack_ablation -- [SECONDS] [SEEDS]
//! ```
//!
//! Two paths: `a` 8 Mbit/s with 30 ms one way, `b` 12 Mbit/s with 45 ms one way and
//! normal jitter σ = 90 ms on its data direction, FIFO (order kept: a datagram never
//! leaves before the one ahead of it) and, for comparison, reordering (each datagram
//! keeps its own delay sample). Workloads: a 12 Mbit/s CBR stream in 1200-byte messages
//! and a bulk transfer. Profiles `mptcp`, `edpf` and `sedpf`, each with
//! [`LossDetection::Rack`] and [`LossDetection::Rfc9002`]; seeds 1..=SEEDS (default 2),
//! SECONDS long (default 20). Prints one Markdown row per profile, jitter and mode with
//! the spurious losses (packets declared lost and acknowledged later, both endpoints),
//! the packets declared lost, the payload re-sent, the mean in-order delay of the stream
//! and the goodput of the bulk transfer, each the mean over the seeds.
//!
//! Deterministic: the same arguments print the same table.

use std::path::Path;

use braid_netem::scenario::Scenario;
use braid_sim::{self as sim, RunOptions};
use braid_transport::profile;
use braid_transport::proto::LossDetection;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// The scenario: `bulk` or a 12 Mbit/s stream; `reorder`: independent jitter samples.
fn scenario(secs: f64, reorder: bool, bulk: bool) -> String {
    let work = if bulk {
        "[workload]\nkind = \"bulk\"\n".to_string()
    } else {
        "[workload]\nkind = \"stream\"\ncbr = { rate = \"12mbit\", packet_bytes = 1200 }\n"
            .to_string()
    };
    format!(
        r#"name = "rack-ablation"
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
down = {{ rate = "12mbit", delay_ms = 45, jitter_ms = 90, jitter_reorder = {reorder} }}
up = {{ rate = "12mbit", delay_ms = 45 }}
{work}"#
    )
}

/// Means over the seeds of one profile, jitter and mode.
#[derive(Default)]
struct Row {
    spurious: f64,
    lost: f64,
    resent_kb: f64,
    delay_ms: f64,
    goodput_mbit: f64,
}

fn main() -> Res<()> {
    let a: Vec<String> = std::env::args().skip(1).collect();
    let secs: f64 = a.first().map(|x| x.parse()).transpose()?.unwrap_or(20.0);
    let seeds: u64 = a.get(1).map(|x| x.parse()).transpose()?.unwrap_or(2);
    println!(
        "σ = 90 ms on path b, {secs} s, seeds 1–{seeds}; spurious/lost/re-sent: stream + bulk"
    );
    println!(
        "| jitter | profile | loss detection | spurious losses (stream) | spurious losses (bulk) \
         | lost (stream) | re-sent kB (stream) | mean in-order delay ms (stream) | goodput Mbit/s (bulk) |"
    );
    println!("|---|---|---|---:|---:|---:|---:|---:|---:|");
    for reorder in [false, true] {
        let jitter = if reorder { "reordering" } else { "order kept" };
        let stream = Scenario::parse(&scenario(secs, reorder, false), "s.toml", Path::new("."))?;
        let bulk = Scenario::parse(&scenario(secs, reorder, true), "b.toml", Path::new("."))?;
        for name in ["mptcp", "edpf", "sedpf"] {
            for mode in [LossDetection::Rack, LossDetection::Rfc9002] {
                let p = profile::lookup(name)?.with_loss_detection(mode);
                let (mut row, mut bulk_spurious) = (Row::default(), 0.0);
                for seed in 1..=seeds {
                    let opts = RunOptions { seed: Some(seed), ..RunOptions::default() };
                    let s = sim::run_detailed(&stream, &p, &opts)?;
                    row.spurious += s.spurious_losses as f64;
                    row.lost += s.report.lost_packets as f64;
                    row.resent_kb += s.report.retransmitted_bytes as f64 / 1000.0;
                    row.delay_ms += s.report.delay_ms.mean;
                    let b = sim::run_detailed(&bulk, &p, &opts)?;
                    bulk_spurious += b.spurious_losses as f64;
                    row.goodput_mbit += b.report.goodput_bps / 1e6;
                }
                let n = seeds.max(1) as f64;
                println!(
                    "| {jitter} | {name} | {mode:?} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.3} |",
                    row.spurious / n,
                    bulk_spurious / n,
                    row.lost / n,
                    row.resent_kb / n,
                    row.delay_ms / n,
                    row.goodput_mbit / n
                );
            }
        }
    }
    Ok(())
}
