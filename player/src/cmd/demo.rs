//! `braid demo`: plays the embedded default clip.
//!
//! For now the demo plays the bundled H.264 clip locally, in real time, through the
//! GStreamer playback pipeline into a headless sink, and checks every displayed picture
//! against FFmpeg's reference decode of the same access units.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use braid_media::decode::{FfmpegDecoder, GstDecoder, OutputFormat, Picture};
use braid_media::quality::{FreezeComparator, mos_from_psnr};
use braid_media::{Clip, OpenOptions};

use crate::assets::{DEMO_CLIP, DEMO_CLIP_NAME, TempAsset};

/// Arguments of `braid demo`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Run without a window (the only mode until the GUI exists).
    #[arg(long)]
    headless: bool,
    /// Stop after this many seconds of playback.
    #[arg(long, value_name = "S", allow_negative_numbers = true)]
    duration: Option<f64>,
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    let limit = match args.duration {
        Some(s) if !(s.is_finite() && s > 0.0) => anyhow::bail!("--duration must be a positive number of seconds, got {s}"),
        Some(s) => Some(Duration::from_secs_f64(s)),
        None => None,
    };
    let tmp = TempAsset::write(DEMO_CLIP, "demo.mp4")?;
    if !args.headless && crate::gui::display_available() {
        return window(tmp, limit);
    }
    let clip = Clip::open(tmp.path(), &OpenOptions::default()).context("opening the embedded clip")?;
    let i = &clip.info;
    println!(
        "braid demo: {DEMO_CLIP_NAME} — {} {}x{} {:.0} fps, {} frames, {:.1} s, {:.0} kbit/s",
        i.codec,
        i.width,
        i.height,
        i.fps,
        i.frames,
        i.duration_s,
        i.bitrate_bps / 1000.0
    );
    println!("playing in real time through GStreamer (appsrc → h264parse → avdec_h264 → videoconvert → appsink), headless");

    let mut player = GstDecoder::new(i, OutputFormat::I420, true).context("starting the playback pipeline")?;
    let mut reference = FfmpegDecoder::new(i.codec)?;
    let mut ref_frames = Vec::new();
    let mut shown = Vec::new();
    let start = Instant::now();
    let mut first_frame: Option<Duration> = None;
    let mut next_report = Duration::from_secs(1);
    let mut fed = 0;
    // Feed a little ahead of the clock, as a network client would.
    'play: loop {
        let elapsed = start.elapsed();
        if limit.is_some_and(|l| elapsed >= l) {
            break;
        }
        while fed < clip.units.len() && clip.units[fed].dts_us <= elapsed.as_micros() as i64 + 500_000 {
            player.push(&clip.units[fed])?;
            reference.decode(&clip.units[fed], &mut ref_frames)?;
            fed += 1;
            if fed == clip.units.len() {
                reference.finish(&mut ref_frames)?;
                shown.extend(player.finish()?.into_iter().map(to_frame));
                break 'play;
            }
        }
        if let Some(p) = player.pull(Duration::from_millis(20))? {
            first_frame.get_or_insert_with(|| start.elapsed());
            shown.push(to_frame(p));
        }
        if start.elapsed() >= next_report {
            println!("  t={:>4.1}s  frames displayed {:>4}", start.elapsed().as_secs_f64(), shown.len());
            next_report += Duration::from_secs(1);
        }
    }
    let wall = start.elapsed();
    let shown: Vec<_> = shown.into_iter().flatten().collect();
    let mut cmp = FreezeComparator::default();
    for (r, s) in ref_frames.iter().zip(shown.iter().cloned().map(Some)) {
        cmp.push(r, s)?;
    }
    let psnr = cmp.stats.psnr_avg();
    println!("summary:");
    println!("  frames displayed        {} of {}", shown.len(), clip.units.len());
    println!("  wall time               {:.2} s ({:.1} fps)", wall.as_secs_f64(), shown.len() as f64 / wall.as_secs_f64().max(1e-9));
    if let Some(t) = first_frame {
        println!("  launch to first frame   {:.0} ms", t.as_secs_f64() * 1000.0);
    }
    if fed == clip.units.len() {
        println!("  undecodable units       {}", clip.units.len().saturating_sub(shown.len()));
    }
    println!(
        "  PSNR vs reference decode {} dB (MOS {})",
        if psnr.is_finite() { format!("{psnr:.2}") } else { "inf".into() },
        mos_from_psnr(psnr)
    );
    Ok(())
}

fn to_frame(p: Picture) -> Option<braid_media::quality::Frame> {
    match p {
        Picture::I420(f) => Some(f),
        Picture::Rgba { .. } => None,
    }
}

/// The demo in a window: the clip plays in a pane with its overlay and plots.
fn window(tmp: TempAsset, limit: Option<Duration>) -> anyhow::Result<()> {
    let (tx, rx) = std::sync::mpsc::channel();
    let pane = crate::gui::Pane::new("local playback", rx);
    let app = crate::gui::PlayerApp::new(vec![pane], Vec::new(), None);
    let ctx_slot: std::sync::Arc<std::sync::OnceLock<eframe::egui::Context>> = Default::default();
    let slot = std::sync::Arc::clone(&ctx_slot);
    let worker = std::thread::Builder::new()
        .name("braid-playback".into())
        .spawn(move || {
            let wake = || {
                if let Some(c) = slot.get() {
                    c.request_repaint();
                }
            };
            if let Err(e) = crate::session::local::play(tmp.path(), limit, &tx, &wake) {
                let _ = tx.send(crate::session::live::PaneUpdate::Error(format!("{e:#}")));
            }
        })
        .map_err(|e| anyhow::anyhow!("starting the playback thread: {e}"))?;
    let result = crate::gui::run_window_with("Braid demo", app, [1000.0, 760.0], move |ctx| {
        let _ = ctx_slot.set(ctx.clone());
    });
    drop(worker);
    result
}
