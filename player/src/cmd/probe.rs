//! `braid probe FILE [--json]`.

use std::path::PathBuf;

use anyhow::Context as _;
use braid_media::{Clip, OpenOptions};

/// Arguments of `braid probe`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The video file (.mp4, .3gp, .mov, raw .h264 / .h263).
    file: PathBuf,
    /// Frame rate for raw elementary streams, which carry none.
    #[arg(long)]
    fps: Option<f64>,
    /// Print JSON on stdout.
    #[arg(long)]
    json: bool,
}

#[derive(serde::Serialize)]
struct ProbeJson<'a> {
    codec: &'a str,
    width: u32,
    height: u32,
    fps: f64,
    frames: usize,
    duration_s: f64,
    bitrate_bps: f64,
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    let clip = Clip::open(&args.file, &OpenOptions { fps: args.fps })
        .with_context(|| format!("probing {}", args.file.display()))?;
    let i = &clip.info;
    if args.json {
        let j = ProbeJson {
            codec: i.codec.name(),
            width: i.width,
            height: i.height,
            fps: i.fps,
            frames: i.frames,
            duration_s: i.duration_s,
            bitrate_bps: i.bitrate_bps,
        };
        println!("{}", serde_json::to_string(&j)?);
    } else {
        println!("file:      {}", args.file.display());
        println!("codec:     {}", i.codec);
        println!("size:      {}x{}", i.width, i.height);
        println!("fps:       {:.3}", i.fps);
        println!("frames:    {}", i.frames);
        println!("duration:  {:.3} s", i.duration_s);
        println!("bitrate:   {:.1} kbit/s", i.bitrate_bps / 1000.0);
        let keys = clip.units.iter().filter(|u| u.keyframe).count();
        println!("keyframes: {keys}");
        if clip.corrupt_packets > 0 || clip.truncated {
            println!(
                "damage:    {} corrupt packets skipped{}",
                clip.corrupt_packets,
                if clip.truncated { ", file truncated" } else { "" }
            );
        }
    }
    Ok(())
}
