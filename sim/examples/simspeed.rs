//! Simulator speed: simulated seconds per wall-clock second for a two-path 10 Mbit/s
//! scenario (120 s by default) with 0, 3, 9 and 27 Reno cross-traffic flows split over the
//! two paths' bottlenecks, run with the `mptcp` profile. `--rate MBIT` sets both paths'
//! rate (default 10); `--protect` runs the real AEAD instead of the simulator's null cipher.
//!
//! ```text
//! cargo run --release -p braid-transport --example simspeed [-- [--rate MBIT] [--protect] DURATION_S [FLOWS...]]
//! ```

use std::path::Path;
use std::time::Instant;

use braid_netem::scenario::Scenario;
use braid_sim::{self as sim, RunOptions};
use braid_transport::profile;

fn scenario_text(duration_s: u64, flows: u32, mbit: u32) -> String {
    let mut s = format!(
        r#"name = "simspeed-{flows}"
duration_s = {duration_s}
seed = 1

[[path]]
name = "wifi"
role = "wifi"
down = {{ rate = "{mbit}mbit", delay_ms = 10 }}
up = {{ rate = "{mbit}mbit", delay_ms = 10 }}

[[path]]
name = "lte"
role = "lte"
down = {{ rate = "{mbit}mbit", delay_ms = 30 }}
up = {{ rate = "{mbit}mbit", delay_ms = 30 }}
"#
    );
    let (a, b) = (flows.div_ceil(2), flows / 2);
    for (path, n) in [("wifi", a), ("lte", b)] {
        if n > 0 {
            s.push_str(&format!("\n[[cross]]\npath = \"{path}\"\nkind = \"reno\"\ncount = {n}\n"));
        }
    }
    s
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut mbit = 10;
    let mut protect = false;
    let mut rest = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--protect" => protect = true,
            "--rate" => mbit = args.next().ok_or("--rate needs a value")?.parse()?,
            _ => rest.push(a),
        }
    }
    let mut args = rest.into_iter();
    let duration_s: u64 = args.next().map(|a| a.parse()).transpose()?.unwrap_or(120);
    let mut counts: Vec<u32> = args.map(|a| a.parse()).collect::<Result<_, _>>()?;
    if counts.is_empty() {
        counts = vec![0, 3, 9, 27];
    }
    let mptcp = profile::lookup("mptcp")?;
    println!(
        "{:>6} {:>8} {:>8} {:>12} {:>12} {:>12} {:>12}",
        "flows", "sim s", "wall s", "sim s/wall s", "events", "events/s", "goodput Mb/s"
    );
    for flows in counts {
        let s = Scenario::parse(
            &scenario_text(duration_s, flows, mbit),
            "simspeed.toml",
            Path::new("."),
        )?;
        #[allow(clippy::disallowed_methods, reason = "measures the simulator's speed in wall time")]
        let t0 = Instant::now();
        let r = sim::run_detailed(&s, &mptcp, &RunOptions { protect, ..RunOptions::default() })?;
        let wall = t0.elapsed().as_secs_f64();
        println!(
            "{:>6} {:>8} {:>8.2} {:>12.1} {:>12} {:>12.0} {:>12.2}",
            flows,
            duration_s,
            wall,
            duration_s as f64 / wall,
            r.events,
            r.events as f64 / wall,
            r.report.goodput_bps / 1e6
        );
    }
    Ok(())
}
