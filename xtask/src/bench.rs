//! `cargo xtask bench [decode] [play]`: the measurements recorded in BENCHMARKS.md
//! (`cargo xtask bench cc …` and `cargo xtask bench transport …` only when named).
//!
//! Every figure is reported as a ratio against a baseline measured in the same run, since
//! the machines are shared and noisy.

mod cc;
mod json;
mod transport;

use std::process::Command;

use crate::root;
use crate::run as run_cmd;

/// Runs the named benchmarks (all when none is named).
pub fn run_benches(args: &[String]) -> Result<(), String> {
    if args.first().is_some_and(|a| a == "cc") {
        // Needs a trace file: only when named.
        return cc::run(args);
    }
    if args.first().is_some_and(|a| a == "transport") {
        // Minutes of loopback runs and a build of quinn's perf: only when named.
        return transport::run(args);
    }
    let all = args.is_empty();
    if all || args.iter().any(|a| a == "decode") {
        decode()?;
    }
    if all || args.iter().any(|a| a == "play") {
        // `--braid BIN` measures that build instead of building the release one.
        let given = args.iter().position(|a| a == "--braid").and_then(|i| args.get(i + 1));
        play(given.map(std::path::PathBuf::from))?;
    }
    Ok(())
}

const CLIP: &str = "assets/clips/h264-cif-25fps-2m.mp4";

/// Decode throughput, CIF H.264, one core: GStreamer path and ffmpeg-next path against
/// `ffmpeg -benchmark -threads 1`.
fn decode() -> Result<(), String> {
    release_build(&["-p", "braid-media", "--example", "decode_bench"])?;
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
            .args([
                "-hide_banner",
                "-benchmark",
                "-threads",
                "1",
                "-stream_loop",
                "4",
                "-i",
                CLIP,
                "-f",
                "null",
                "-",
            ])
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
            let fps = field(&text, "fps=").ok_or_else(|| {
                format!("decode_bench failed: {}", String::from_utf8_lossy(&out.stderr))
            })?;
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

/// `cargo build --release -q ARGS…` in the repository.
fn release_build(args: &[&str]) -> Result<(), String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    run_cmd(Command::new(cargo).current_dir(root()).args(["build", "--release", "-q"]).args(args))
}

/// Builds the release `braid` and returns its path.
pub fn release_braid() -> Result<std::path::PathBuf, String> {
    release_build(&["-p", "braid-player", "--bin", "braid"])?;
    Ok(root().join("target/release/braid"))
}

fn field(text: &str, key: &str) -> Option<f64> {
    let at = text.rfind(key)? + key.len();
    let num: String = text[at..].chars().take_while(|c| c.is_ascii_digit() || *c == '.').collect();
    num.parse().ok()
}

/// `/usr/bin/time -f "%e %U %S"` around `cmd`: (wall, user + system CPU) seconds, and
/// the command's stdout.
fn timed(cmd: &mut Command) -> Result<(f64, f64, String), String> {
    let shown = format!("{cmd:?}");
    let mut t = Command::new("/usr/bin/time");
    t.arg("-f").arg("@@ %e %U %S").arg(cmd.get_program()).args(cmd.get_args()).current_dir(root());
    let out = t.output().map_err(|e| format!("running {shown} under /usr/bin/time: {e}"))?;
    let err = String::from_utf8_lossy(&out.stderr);
    let line = err
        .lines()
        .rev()
        .find(|l| l.starts_with("@@ "))
        .ok_or_else(|| format!("{shown} failed: {err}"))?;
    let v: Vec<f64> = line[3..].split_whitespace().filter_map(|x| x.parse().ok()).collect();
    if v.len() != 3 || !out.status.success() {
        return Err(format!("{shown} failed: {err}"));
    }
    Ok((v[0], v[1] + v[2], String::from_utf8_lossy(&out.stdout).into_owned()))
}

/// `braid play` against a local `braid serve` (release, or `braid` given): launch to first
/// frame, and the client's CPU while it plays the CIF clip in real time. Baselines from the
/// same run: the ffmpeg CLI decoding the first frame of the local file (launch to first
/// frame), and `gst-launch-1.0` playing the file in real time (CPU).
fn play(given: Option<std::path::PathBuf>) -> Result<(), String> {
    let braid = match given {
        Some(b) => b,
        None => release_braid()?,
    };
    let (mut server, addr, pin) = start_server(&braid)?;
    let pinned = |secs: &str| {
        let mut c = Command::new(&braid);
        c.args(["play", &addr, "--server-cert-sha256", &pin, "--headless", "--duration", secs]);
        c
    };
    let result = (|| {
        // Launch to first frame, five runs each, interleaved; medians.
        let mut braid_ms = Vec::new();
        let mut ffmpeg_ms = Vec::new();
        for _ in 0..5 {
            let (_, _, out) = timed(&mut pinned("2"))?;
            let ms = out
                .lines()
                .find(|l| l.contains("launch to first frame"))
                .and_then(|l| l.split_whitespace().rev().nth(1))
                .and_then(|v| v.parse::<f64>().ok())
                .ok_or_else(|| {
                    format!("no launch-to-first-frame line in braid play's output:\n{out}")
                })?;
            braid_ms.push(ms);
            let (wall, _, _) = timed(Command::new("ffmpeg").args([
                "-hide_banner",
                "-loglevel",
                "error",
                "-i",
                CLIP,
                "-frames:v",
                "1",
                "-f",
                "null",
                "-",
            ]))?;
            ffmpeg_ms.push(wall * 1000.0);
        }
        let median = |v: &mut Vec<f64>| {
            let mut s = v.clone();
            s.sort_by(f64::total_cmp);
            s[s.len() / 2]
        };
        let (b, f) = (median(&mut braid_ms), median(&mut ffmpeg_ms));
        println!("launch to first frame, {CLIP}, median of 5");
        println!("{:<58} {:>9} {:>7}", "", "ms", "ratio");
        println!(
            "{:<58} {:>9.0} {:>7.2}",
            "ffmpeg -i CLIP -frames:v 1 -f null - (baseline, wall)", f, 1.0
        );
        println!("{:<58} {:>9.0} {:>7.2}", "braid play (local braid serve, loopback)", b, b / f);
        // CPU while playing the 10 s clip in real time: three interleaved rounds, medians.
        let (mut gst, mut ours) = (Vec::new(), Vec::new());
        for _ in 0..3 {
            let (gw, gcpu, _) = timed(Command::new("gst-launch-1.0").args([
                "-q",
                "filesrc",
                &format!("location={CLIP}"),
                "!",
                "qtdemux",
                "!",
                "h264parse",
                "!",
                "avdec_h264",
                "!",
                "videoconvert",
                "!",
                "fakesink",
                "sync=true",
            ]))?;
            gst.push(gcpu / gw * 100.0);
            let (bw, bcpu, _) = timed(&mut pinned("10"))?;
            ours.push(bcpu / bw * 100.0);
        }
        let (g, b) = (median(&mut gst), median(&mut ours));
        println!("CPU while playing {CLIP} in real time (user + system s / wall s, median of 3)");
        println!("{:<58} {:>9} {:>7}", "", "CPU", "ratio");
        println!(
            "{:<58} {:>8.1}% {:>7.2}",
            "gst-launch-1.0 … avdec_h264 ! fakesink sync=true (baseline)", g, 1.0
        );
        println!("{:<58} {:>8.1}% {:>7.2}", "braid play --headless (client only)", b, b / g);
        println!("  rounds: gst-launch {gst:.1?} %, braid play {ours:.1?} %");
        Ok(())
    })();
    let _ = server.kill();
    let _ = server.wait();
    result
}

/// Starts `braid serve` of the CIF clip on an ephemeral loopback port; returns it, the
/// address it printed and its certificate's fingerprint.
fn start_server(braid: &std::path::Path) -> Result<(std::process::Child, String, String), String> {
    use std::io::BufRead as _;
    let mut server = Command::new(braid)
        .current_dir(root())
        .args(["serve", CLIP, "--listen", "127.0.0.1:0"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| format!("starting braid serve: {e}"))?;
    let err = server.stderr.take().ok_or("braid serve: no stderr")?;
    let out = server.stdout.take().ok_or("braid serve: no stdout")?;
    let mut pin = None;
    let mut err_lines = std::io::BufReader::new(err).lines();
    for line in err_lines.by_ref() {
        let Ok(line) = line else { break };
        if let Some(hex) = line.strip_prefix("certificate sha256 ") {
            pin = Some(hex.trim().to_string());
            break;
        }
    }
    let mut addr = None;
    let mut out_lines = std::io::BufReader::new(out).lines();
    for line in out_lines.by_ref() {
        let Ok(line) = line else { break };
        // "serving FILE (…) on ADDR with profile P"
        if let Some(rest) = line.split(" on ").nth(1) {
            addr = rest.split_whitespace().next().map(str::to_string);
            break;
        }
    }
    // Keep draining its output so it never blocks on a full pipe.
    std::thread::spawn(move || for _ in out_lines {});
    std::thread::spawn(move || for _ in err_lines {});
    match (addr, pin) {
        (Some(a), Some(p)) => Ok((server, a, p)),
        _ => {
            let _ = server.kill();
            let _ = server.wait();
            Err("braid serve did not print its address and certificate".into())
        }
    }
}
