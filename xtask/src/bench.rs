//! `cargo xtask bench [decode]`: the measurements recorded in BENCHMARKS.md.
//!
//! Every figure is reported as a ratio against a baseline measured in the same run, since
//! the machines are shared and noisy.

use std::process::Command;

use crate::root;
use crate::run as run_cmd;

/// Runs the named benchmarks (all when none is named).
pub fn run_benches(args: &[String]) -> Result<(), String> {
    let all = args.is_empty();
    if all || args.iter().any(|a| a == "decode") {
        decode()?;
    }
    Ok(())
}



const CLIP: &str = "assets/clips/h264-cif-25fps-2m.mp4";

/// Decode throughput, CIF H.264, one core: GStreamer path and ffmpeg-next path against
/// `ffmpeg -benchmark -threads 1`.
fn decode() -> Result<(), String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    run_cmd(Command::new(cargo)
        .current_dir(root())
        .args(["build", "--release", "-q", "-p", "braid-media", "--example", "decode_bench"]))?;
    let bin = root().join("target/release/examples/decode_bench");
    let pin = crate::setup::which("taskset");
    let pinned = |prog: &std::path::Path| {
        let mut c = if pin { Command::new("taskset") } else { Command::new(prog) };
        if pin {
            c.arg("-c").arg("0").arg(prog);
        }
        c.current_dir(root());
        c
    };
    // The machine is shared and noisy: interleave the three paths over several rounds and
    // keep each one's best.
    let mut best = [0.0f64; 3];
    for _round in 0..3 {
        // Baseline: the ffmpeg CLI, single-threaded; the clip is looped 5× so process
        // start-up is amortised.
        let out = pinned(std::path::Path::new("ffmpeg"))
            .args(["-hide_banner", "-benchmark", "-threads", "1", "-stream_loop", "4", "-i", CLIP, "-f", "null", "-"])
            .output()
            .map_err(|e| format!("running ffmpeg: {e}"))?;
        let text = String::from_utf8_lossy(&out.stderr).replace('\r', "\n");
        let rtime = field(&text, "rtime=").ok_or("no rtime in ffmpeg -benchmark output")?;
        let frames = text
            .rfind("frame=")
            .map(|i| &text[i + 6..])
            .and_then(|s| s.split_whitespace().next())
            .and_then(|s| s.parse::<f64>().ok())
            .ok_or("no frame count in ffmpeg output")?;
        best[0] = best[0].max(frames / rtime);
        for (slot, which) in [(1, "ffmpeg"), (2, "gst")] {
            let out = pinned(&bin)
                .args([CLIP, which, "5"])
                .output()
                .map_err(|e| format!("running decode_bench: {e}"))?;
            let text = String::from_utf8_lossy(&out.stdout);
            let fps = field(&text, "fps=")
                .ok_or_else(|| format!("decode_bench failed: {}", String::from_utf8_lossy(&out.stderr)))?;
            best[slot] = best[slot].max(fps);
        }
    }
    let names = [
        "ffmpeg -benchmark -threads 1 (baseline)",
        "ffmpeg-next reference decoder",
        "GStreamer pipeline (avdec_h264)",
    ];
    println!("decode throughput, {CLIP}, one core{}", if pin { " (taskset -c 0)" } else { "" });
    println!("{:<42} {:>10} {:>8}", "path", "frames/s", "ratio");
    for (name, fps) in names.iter().zip(best) {
        println!("{name:<42} {fps:>10.1} {:>8.2}", fps / best[0]);
    }
    Ok(())
}

fn field(text: &str, key: &str) -> Option<f64> {
    let at = text.rfind(key)? + key.len();
    let num: String = text[at..].chars().take_while(|c| c.is_ascii_digit() || *c == '.').collect();
    num.parse().ok()
}
