//! Local playback: a clip decoded and shown in real time, with PSNR against FFmpeg's
//! reference decode — no network. Runs on its own thread and reports to a display.

use std::sync::mpsc::Sender;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use braid_media::decode::{FfmpegDecoder, GstDecoder, OutputFormat, Picture};
use braid_media::quality::{FreezeComparator, cap_psnr, mos_from_psnr};
use braid_media::{Clip, OpenOptions};

use super::live::{LiveStats, PaneUpdate, VideoImage};

/// Plays `path` through GStreamer in real time, sending pictures and stats to `tx`, for
/// at most `limit`. `wake` is called after each update (e.g. to repaint a window).
pub fn play(path: &std::path::Path, limit: Option<Duration>, tx: &Sender<PaneUpdate>, wake: &dyn Fn()) -> anyhow::Result<()> {
    let clip = Clip::open(path, &OpenOptions::default()).context("opening the clip")?;
    let mut player = GstDecoder::new(&clip.info, OutputFormat::I420, true).context("starting the playback pipeline")?;
    let mut reference = FfmpegDecoder::new(clip.info.codec)?;
    let mut refs = Vec::new();
    let mut cmp = FreezeComparator::default();
    let start = Instant::now();
    let mut fed = 0;
    let mut shown = 0u64;
    let send = |u: PaneUpdate| {
        let ok = tx.send(u).is_ok();
        wake();
        ok
    };
    loop {
        let elapsed = start.elapsed();
        if limit.is_some_and(|l| elapsed >= l) {
            break;
        }
        while fed < clip.units.len() && clip.units[fed].dts_us <= elapsed.as_micros() as i64 + 500_000 {
            player.push(&clip.units[fed])?;
            reference.decode(&clip.units[fed], &mut refs)?;
            fed += 1;
            if fed == clip.units.len() {
                reference.finish(&mut refs)?;
                player.end_of_stream();
            }
        }
        match player.pull(Duration::from_millis(20))? {
            Some(Picture::I420(f)) => {
                let idx = shown as usize;
                let mut stats = LiveStats {
                    t_s: start.elapsed().as_secs_f64(),
                    startup_s: None,
                    frames_shown: shown + 1,
                    ..LiveStats::default()
                };
                if let Some(r) = refs.get(idx) {
                    if let Ok(e) = cmp.push(r, Some(f.clone())) {
                        stats.psnr_now_db = Some(cap_psnr(e.psnr_avg()));
                        let avg = cmp.stats.psnr_avg();
                        stats.psnr_avg_db = Some(cap_psnr(avg));
                        stats.mos = Some(mos_from_psnr(avg));
                    }
                }
                shown += 1;
                let img = VideoImage { width: f.width, height: f.height, rgba: f.to_rgba() };
                if !send(PaneUpdate::Frame(img)) || !send(PaneUpdate::Stats(stats)) {
                    return Ok(());
                }
            }
            Some(_) => {}
            None if player.is_eos() => break,
            None => {}
        }
    }
    send(PaneUpdate::Ended);
    Ok(())
}
