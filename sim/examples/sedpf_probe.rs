//! One run of `braid repro sedpf`'s paths, and the lower bound that load puts on the
//! in-order delay there (BENCHMARKS.md, "Low-delay multipath").
//!
//! ```text
//! cargo run -p braid-transport --example sedpf_probe -- run PROFILE SIGMA_MS RATE_MBIT SETTING SECONDS SEED [LOSS]
//! cargo run -p braid-transport --example sedpf_probe -- bound
//! ```
//!
//! `run`: part (a)'s two 10 Mbit/s paths with 50 ms one-way delay, normal jitter σ (and
//! random loss `LOSS`) on path `b`'s data direction; a CBR stream of `RATE_MBIT` Mbit/s in
//! 1200-byte messages, or a bulk transfer when the rate is 0. `SETTING`: `paper` (every
//! window fixed to 10 Mbit/s × 100 ms, `jitter_reorder = true`), `user` (the profile's own
//! controller, FIFO jitter), or a scenario file run as given (`fixed:FILE`: with windows
//! fixed to part (c)'s 12 Mbit/s × 30 ms and 12 Mbit/s × 80 ms). Prints the mean, p50 and
//! p95 in-order delay, goodput, re-sent and coded bytes.
//!
//! `bound`: a Monte Carlo of path `b` at σ = 100 ms carrying a share of a 12 Mbit/s stream,
//! every one of its packets sent the moment it is due, evenly spread, and path `a` adding
//! nothing but its 50 ms: the mean in-order delay no scheduler can go below, under
//! independent (reordering) and FIFO jitter.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use braid_netem::scenario::Scenario;
use braid_sim::{self as sim, RunOptions};
use braid_transport::cc::FixedBdpConfig;
use braid_transport::profile;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

fn two_paths(sigma: u32, rate: u32, reorder: bool, secs: f64, loss: f64) -> String {
    let work = if rate == 0 {
        "[workload]\nkind = \"bulk\"\n".to_string()
    } else {
        format!(
            "[workload]\nkind = \"stream\"\ncbr = {{ rate = \"{rate}mbit\", packet_bytes = 1200 }}\n"
        )
    };
    format!(
        r#"name = "probe"
duration_s = {secs}
seed = 1
[[path]]
name = "a"
role = "wifi"
down = {{ rate = "10000000", delay_ms = 50 }}
up = {{ rate = "10000000", delay_ms = 50 }}
[[path]]
name = "b"
role = "lte"
down = {{ rate = "10000000", delay_ms = 50, jitter_ms = {sigma}, jitter_reorder = {reorder}, loss = {loss} }}
up = {{ rate = "10000000", delay_ms = 50 }}
{work}"#
    )
}

fn run(a: &[String]) -> Res<()> {
    let arg = |i: usize| a.get(i).ok_or("missing argument (see the module docs)");
    let name = arg(0)?.clone();
    let sigma: u32 = arg(1)?.parse()?;
    let rate: u32 = arg(2)?.parse()?;
    let setting = arg(3)?.clone();
    let secs: f64 = arg(4)?.parse()?;
    let seed: u64 = arg(5)?.parse()?;
    let loss: f64 = a.get(6).map(|x| x.parse()).transpose()?.unwrap_or(0.0);
    let mut p = profile::lookup(&name)?;
    let text = match setting.as_str() {
        "paper" | "user" => two_paths(sigma, rate, setting == "paper", secs, loss),
        file => std::fs::read_to_string(file.strip_prefix("fixed:").unwrap_or(file))?,
    };
    if setting == "paper" {
        let rtt = Duration::from_millis(100);
        p.controller =
            Arc::new(FixedBdpConfig::from_paths(&[(10_000_000, rtt), (10_000_000, rtt)]));
    } else if setting.starts_with("fixed:") {
        p.controller = Arc::new(FixedBdpConfig::from_paths(&[
            (12_000_000, Duration::from_millis(30)),
            (12_000_000, Duration::from_millis(80)),
        ]));
    }
    let sc = Scenario::parse(&text, "probe.toml", Path::new("."))?;
    let r = sim::run(&sc, &p, &RunOptions { seed: Some(seed), ..RunOptions::default() })?;
    println!(
        "{name} sigma {sigma} rate {rate} {setting} seed {seed}: delay mean {:.1} p50 {:.1} \
         p95 {:.1} ms, goodput {:.3} Mbit/s, re-sent {} kB, coded {} kB, lost {}",
        r.delay_ms.mean,
        r.delay_ms.p50,
        r.delay_ms.p95,
        r.goodput_bps / 1e6,
        r.retransmitted_bytes / 1000,
        r.redundant_bytes / 1000,
        r.lost_packets
    );
    Ok(())
}

/// Mean in-order delay, ms, of the bound's stream with `share` of its messages on path b.
fn bound(fifo: bool, share: f64, n: usize, rng: &mut ChaCha8Rng) -> f64 {
    let dt = 1200.0 * 8.0 / 12e6;
    let every = 1.0 / share;
    let (mut next_b, mut last_b, mut released) = (0.0f64, 0.0f64, 0.0f64);
    let mut sum = 0.0;
    for i in 0..n {
        let t = i as f64 * dt;
        let own = if i as f64 >= next_b {
            next_b += every;
            let z = braid_netem::dist::standard_normal(rng);
            let mut at = t + (0.050 + 0.100 * z).max(0.0);
            if fifo {
                at = at.max(last_b);
                last_b = at;
            }
            at
        } else {
            t + 0.050
        };
        released = released.max(own);
        if i >= n / 10 {
            sum += released - t;
        }
    }
    sum / (n - n / 10) as f64 * 1e3
}

fn main() -> Res<()> {
    let a: Vec<String> = std::env::args().skip(1).collect();
    match a.first().map(String::as_str) {
        Some("run") => run(&a[1..]),
        Some("bound") => {
            let mut rng = ChaCha8Rng::seed_from_u64(7);
            for share in [2.7 / 12.0, 0.2, 0.15] {
                let r = bound(false, share, 200_000, &mut rng);
                let f = bound(true, share, 200_000, &mut rng);
                println!(
                    "path b share {share:.3}: in-order delay at least {r:.0} ms (independent \
                     jitter), {f:.0} ms (FIFO jitter)"
                );
            }
            Ok(())
        }
        _ => Err(
            "usage: sedpf_probe run PROFILE SIGMA_MS RATE_MBIT SETTING SECONDS SEED [LOSS] | bound"
                .into(),
        ),
    }
}
