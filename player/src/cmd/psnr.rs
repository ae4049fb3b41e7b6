//! `braid psnr DISTORTED REFERENCE [--json] [--stats FILE]`: either may be a clip or a
//! `.y4m` of decoded pictures.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use braid_media::decode::ffmpeg_decode_clip;
use braid_media::quality::{Frame, FreezeComparator, cap_psnr};
use braid_media::{Clip, OpenOptions};

/// Arguments of `braid psnr`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The video to judge.
    distorted: PathBuf,
    /// The original it is compared with, frame by frame.
    reference: PathBuf,
    /// Frame rate for raw elementary streams.
    #[arg(long)]
    fps: Option<f64>,
    /// Print JSON on stdout.
    #[arg(long)]
    json: bool,
    /// Write per-frame statistics in ffmpeg's psnr stats-file format.
    #[arg(long, value_name = "FILE")]
    stats: Option<PathBuf>,
}

#[derive(serde::Serialize)]
struct PerFrame {
    n: usize,
    mse_avg: f64,
    mse_y: f64,
    mse_u: f64,
    mse_v: f64,
    psnr_avg_db: f64,
    psnr_y_db: f64,
    psnr_u_db: f64,
    psnr_v_db: f64,
}

#[derive(serde::Serialize)]
struct PsnrJson {
    frames: usize,
    psnr_y_db: f64,
    psnr_u_db: f64,
    psnr_v_db: f64,
    psnr_avg_db: f64,
    psnr_min_db: f64,
    psnr_max_db: f64,
    per_frame: Vec<PerFrame>,
}

/// The pictures of `path`: decoded when it is a clip, read as they are from a `.y4m`
/// (e.g. `braid play --save-frames`).
fn decode(path: &Path, fps: Option<f64>) -> anyhow::Result<(Vec<Frame>, usize)> {
    if braid_media::yuv4mpeg::is_y4m(path) {
        let (frames, _) = braid_media::yuv4mpeg::read_y4m(path)
            .with_context(|| format!("reading {}", path.display()))?;
        return Ok((frames, 0));
    }
    let clip = Clip::open(path, &OpenOptions { fps })
        .with_context(|| format!("opening {}", path.display()))?;
    let (frames, failed) =
        ffmpeg_decode_clip(&clip).with_context(|| format!("decoding {}", path.display()))?;
    if frames.is_empty() {
        bail!("{}: no frame could be decoded", path.display());
    }
    Ok((frames, failed))
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    let (dist, dist_failed) = decode(&args.distorted, args.fps)?;
    let (refs, _) = decode(&args.reference, args.fps)?;
    // Frame n of the distorted video is compared with frame n of the reference. When the
    // distorted video is shorter its last frame stays on screen (EvalVid's freeze).
    let mut cmp = FreezeComparator::default();
    let mut dist_iter = dist.into_iter();
    for r in &refs {
        cmp.push(r, dist_iter.next()).context("comparing frames")?;
    }
    let s = &cmp.stats;
    if let Some(path) = &args.stats {
        std::fs::write(path, s.stats_file())
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if args.json {
        let per_frame = s
            .frames
            .iter()
            .enumerate()
            .map(|(i, e)| PerFrame {
                n: i + 1,
                mse_avg: e.mse_avg,
                mse_y: e.mse[0],
                mse_u: e.mse[1],
                mse_v: e.mse[2],
                psnr_avg_db: cap_psnr(e.psnr_avg()),
                psnr_y_db: cap_psnr(e.psnr(0)),
                psnr_u_db: cap_psnr(e.psnr(1)),
                psnr_v_db: cap_psnr(e.psnr(2)),
            })
            .collect();
        let j = PsnrJson {
            frames: s.frames.len(),
            psnr_y_db: cap_psnr(s.psnr_plane(0)),
            psnr_u_db: cap_psnr(s.psnr_plane(1)),
            psnr_v_db: cap_psnr(s.psnr_plane(2)),
            psnr_avg_db: cap_psnr(s.psnr_avg()),
            psnr_min_db: cap_psnr(s.psnr_min()),
            psnr_max_db: cap_psnr(s.psnr_max()),
            per_frame,
        };
        println!("{}", serde_json::to_string(&j)?);
    } else {
        println!("frames compared: {}", s.frames.len());
        if cmp.frozen > 0 {
            println!("distorted is {} frames short: its last frame was held", cmp.frozen);
        }
        if dist_failed > 0 {
            println!("distorted: {dist_failed} access units did not decode");
        }
        println!("{}", s.summary_line());
    }
    Ok(())
}
