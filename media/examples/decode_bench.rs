//! Decode throughput of the two decoding paths: `decode_bench CLIP (gst|ffmpeg) [PASSES]`.
//!
//! Prints frames per second of the fastest pass (wall time of decode only; the clip is
//! demuxed once up front). Run it pinned to one core (`taskset -c 0`) to compare with
//! `ffmpeg -benchmark -threads 1`; `cargo xtask bench` does both.

use std::time::Instant;

use braid_media::decode::{OutputFormat, ffmpeg_decode_clip, gst_decode_clip};
use braid_media::{Clip, OpenOptions};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let (Some(path), Some(which)) = (args.get(1), args.get(2)) else {
        return Err("usage: decode_bench CLIP (gst|ffmpeg) [PASSES]".into());
    };
    let passes: usize = args.get(3).map(|s| s.parse()).transpose()?.unwrap_or(5);
    let clip = Clip::open(path, &OpenOptions::default())?;
    let mut best = f64::INFINITY;
    let mut frames = 0;
    for _ in 0..passes {
        let t = Instant::now();
        frames = match which.as_str() {
            "gst" => gst_decode_clip(&clip, OutputFormat::I420)?.0.len(),
            "ffmpeg" => ffmpeg_decode_clip(&clip)?.0.len(),
            other => return Err(format!("unknown decoder path {other}").into()),
        };
        best = best.min(t.elapsed().as_secs_f64());
    }
    println!("{which} frames={frames} seconds={best:.4} fps={:.1}", frames as f64 / best);
    Ok(())
}
