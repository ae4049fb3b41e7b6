//! `braid schedule FILE (--rate RATE | --rate-trace TRACE) [--proxy-rate RATE] [--json]`:
//! the minimum start-up delay w*, client buffer x* and (with a proxy) proxy buffer y for a
//! clip under a capacity curve (ALGORITHMS.md §7).

use std::path::PathBuf;

use anyhow::{Context as _, bail};
use braid_media::schedule::{Capacity, PlayoutCurve, Schedule, end_to_end, with_proxy};
use braid_media::{Clip, OpenOptions};
use braid_netem::scenario::parse_rate;
use braid_netem::{OPPORTUNITY_BYTES, Trace};

/// Arguments of `braid schedule`.
#[derive(Debug, clap::Args)]
#[command(group = clap::ArgGroup::new("capacity").required(true).args(["rate", "rate_trace"]))]
pub struct Args {
    /// The clip.
    file: PathBuf,
    /// Constant capacity from the server, e.g. `64kbit`, `2mbit` (bits per second).
    #[arg(long, value_name = "RATE")]
    rate: Option<String>,
    /// Capacity from the server as a mahimahi trace (1500 bytes per line's millisecond; loops).
    #[arg(long, value_name = "TRACE")]
    rate_trace: Option<PathBuf>,
    /// A proxy sits after that capacity and forwards to the client at this rate (adds y).
    #[arg(long, value_name = "RATE")]
    proxy_rate: Option<String>,
    /// Slot length in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 10)]
    slot_ms: u32,
    /// Frame rate for raw elementary streams.
    #[arg(long)]
    fps: Option<f64>,
    /// Print JSON on stdout.
    #[arg(long)]
    json: bool,
}

#[derive(serde::Serialize)]
struct ScheduleJson {
    startup_delay_s: f64,
    client_buffer_bytes: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    proxy_buffer_bytes: Option<u64>,
}

fn rate(text: &str, flag: &str) -> anyhow::Result<f64> {
    match parse_rate(text) {
        Some(r) if r > 0 => Ok(r as f64),
        Some(_) => bail!("{flag} must be above zero"),
        None => bail!("{flag}: `{text}` is not a rate (examples: 64kbit, 2mbit, 1gbit, 500000)"),
    }
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    if args.slot_ms == 0 {
        bail!("--slot-ms must be at least 1");
    }
    let slot_us = i64::from(args.slot_ms) * 1000;
    let clip = Clip::open(&args.file, &OpenOptions { fps: args.fps })
        .with_context(|| format!("opening {}", args.file.display()))?;
    let units: Vec<(i64, u64)> =
        clip.units.iter().map(|u| (u.dts_us, u.data.len() as u64)).collect();
    let interval_us = (1e6 / clip.info.fps).round() as i64;
    let d = PlayoutCurve::from_units(&units, interval_us, slot_us)?;
    let capacity = match (&args.rate, &args.rate_trace) {
        (Some(r), _) => Capacity::constant(rate(r, "--rate")?, slot_us, 1),
        (None, Some(path)) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            let trace = Trace::parse(&text).with_context(|| format!("{}", path.display()))?;
            Capacity::from_events(
                trace.timestamps_ms().iter().map(|&t| (t as i64 * 1000, OPPORTUNITY_BYTES)),
                trace.period_ms() as i64 * 1000,
                slot_us,
            )
        }
        (None, None) => bail!("give --rate or --rate-trace"),
    };
    let s: Schedule = match &args.proxy_rate {
        Some(p) => {
            let wireless = Capacity::constant(rate(p, "--proxy-rate")?, slot_us, 1);
            with_proxy(&d, &capacity, &wireless)?
        }
        None => end_to_end(&d, &capacity)?,
    };
    if args.json {
        let j = ScheduleJson {
            startup_delay_s: s.startup_delay_s,
            client_buffer_bytes: s.client_buffer_bytes,
            proxy_buffer_bytes: s.proxy_buffer_bytes,
        };
        println!("{}", serde_json::to_string(&j)?);
    } else {
        println!(
            "clip: {} ({} frames, {:.1} s, {:.1} kbit/s)",
            args.file.display(),
            clip.info.frames,
            clip.info.duration_s,
            clip.info.bitrate_bps / 1000.0
        );
        println!(
            "capacity: mean {:.1} kbit/s, slot {} ms",
            capacity.mean_bps(slot_us) / 1000.0,
            args.slot_ms
        );
        println!("minimum start-up delay w*: {:.2} s", s.startup_delay_s);
        println!("minimum client buffer x*:  {} bytes", s.client_buffer_bytes);
        if let Some(y) = s.proxy_buffer_bytes {
            println!("proxy buffer y:            {y} bytes");
        }
    }
    Ok(())
}
