//! Both decoders against the bundled clips and, when present, the real clips beside the
//! project (../shared/media): same frame counts, identical pictures.

use std::path::{Path, PathBuf};
use std::process::Command;

use braid_media::decode::{OutputFormat, Picture, ffmpeg_decode_clip, gst_decode_clip};
use braid_media::quality::{FreezeComparator, compare};
use braid_media::{Clip, Codec, OpenOptions};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn shared_media(name: &str) -> Option<PathBuf> {
    let p = root().join("../shared/media").join(name);
    if p.is_file() {
        Some(p)
    } else {
        braid_tests::skip(&format!("{name}: ../shared/media is not present"));
        None
    }
}

/// Decodes `path` through GStreamer and FFmpeg and checks they agree frame for frame.
fn both_decoders_agree(path: &Path, codec: Codec) {
    let clip = Clip::open(path, &OpenOptions::default()).unwrap();
    assert_eq!(clip.info.codec, codec);
    let (ff, ff_failed) = ffmpeg_decode_clip(&clip).unwrap();
    let (gst, gst_failed) = gst_decode_clip(&clip, OutputFormat::I420).unwrap();
    assert_eq!(ff_failed, 0, "{}: ffmpeg lost frames", path.display());
    assert_eq!(gst_failed, 0, "{}: gstreamer lost frames", path.display());
    assert_eq!(ff.len(), clip.info.frames);
    assert_eq!(gst.len(), ff.len(), "{}: frame counts differ", path.display());
    // Both wrap libavcodec: the pictures must be identical, not merely similar.
    let mut cmp = FreezeComparator::default();
    for (g, f) in gst.into_iter().zip(&ff) {
        let Picture::I420(g) = g else { panic!("asked for I420") };
        assert_eq!((g.width, g.height), (clip.info.width, clip.info.height));
        cmp.push(f, Some(g)).unwrap();
    }
    assert!(
        cmp.stats.psnr_avg().is_infinite(),
        "{}: decoders disagree: {}",
        path.display(),
        cmp.stats.summary_line()
    );
}

#[test]
fn bundled_h264_decodes_identically_through_gstreamer_and_ffmpeg() {
    both_decoders_agree(&root().join("assets/clips/h264-cif-25fps-2m.mp4"), Codec::H264);
}

#[test]
fn bundled_h263_decodes_identically_through_gstreamer_and_ffmpeg() {
    both_decoders_agree(&root().join("assets/clips/h263-qcif-15fps-64k.3gp"), Codec::H263);
}

#[test]
fn real_h264_clips_decode_identically() {
    for name in ["carphone_pristine.mp4", "bigbuckbunny.mp4"] {
        if let Some(p) = shared_media(name) {
            both_decoders_agree(&p, Codec::H264);
        }
    }
}

#[test]
fn real_clip_as_h263_and_raw_elementary_streams_decode() {
    let Some(src) = shared_media("carphone_pristine.mp4") else { return };
    let dir = std::env::temp_dir().join(format!("braid-media-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let h263 = dir.join("carphone.3gp");
    let raw263 = dir.join("carphone.h263");
    let raw264 = dir.join("carphone.h264");
    let ff = |args: &[&str]| {
        let ok = Command::new("ffmpeg")
            .args(["-v", "error", "-y"])
            .args(args)
            .status()
            .unwrap()
            .success();
        assert!(ok, "ffmpeg {args:?}");
    };
    let s = src.to_str().unwrap();
    ff(&[
        "-i",
        s,
        "-an",
        "-vf",
        "fps=15",
        "-c:v",
        "h263",
        "-b:v",
        "64k",
        "-threads",
        "1",
        h263.to_str().unwrap(),
    ]);
    ff(&["-i", h263.to_str().unwrap(), "-c:v", "copy", "-f", "h263", raw263.to_str().unwrap()]);
    ff(&[
        "-i",
        s,
        "-c:v",
        "copy",
        "-bsf:v",
        "h264_mp4toannexb",
        "-f",
        "h264",
        raw264.to_str().unwrap(),
    ]);
    both_decoders_agree(&h263, Codec::H263);
    // Raw streams carry no timing: the rate comes from the option.
    for (p, codec) in [(&raw263, Codec::H263), (&raw264, Codec::H264)] {
        let clip = Clip::open(p, &OpenOptions { fps: Some(15.0) }).unwrap();
        assert_eq!(clip.info.codec, codec);
        assert_eq!(clip.info.fps, 15.0);
        assert!((clip.units[1].pts_us - 66_667).abs() <= 1);
        let (frames, failed) = ffmpeg_decode_clip(&clip).unwrap();
        assert_eq!(failed, 0);
        assert!(!frames.is_empty());
    }
    // The raw H.264 stream holds the very same pictures as the mp4 it came from.
    let a = ffmpeg_decode_clip(&Clip::open(&src, &OpenOptions::default()).unwrap()).unwrap().0;
    let b = ffmpeg_decode_clip(&Clip::open(&raw264, &OpenOptions { fps: Some(30.0) }).unwrap())
        .unwrap()
        .0;
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(compare(x, y).unwrap().mse_avg, 0.0);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn playout_vector_is_cumulative_and_in_decode_order() {
    let clip =
        Clip::open(root().join("assets/clips/h263-qcif-15fps-64k.3gp"), &OpenOptions::default())
            .unwrap();
    let d = clip.playout_vector();
    assert_eq!(d.len(), clip.units.len());
    assert_eq!(d.last().unwrap().1, clip.total_bytes());
    assert!(d.windows(2).all(|w| w[0].0 <= w[1].0 && w[0].1 < w[1].1));
    assert!((clip.info.duration_s - 30.0).abs() < 0.1);
}

#[test]
fn corrupt_middle_decodes_what_it_can_and_counts_failures() {
    let clip =
        Clip::open(root().join("assets/clips/h264-cif-25fps-2m.mp4"), &OpenOptions::default())
            .unwrap();
    let mut damaged = clip.clone();
    // Garble the slice data of 20 access units in the middle (keep NAL headers intact).
    for au in &mut damaged.units[100..120] {
        let n = au.data.len();
        for b in &mut au.data[n / 3..] {
            *b = b.wrapping_mul(31).wrapping_add(7);
        }
    }
    // Drop five whole units too, as a lossy network would.
    damaged.units.drain(130..135);
    let (frames, _) = ffmpeg_decode_clip(&damaged).unwrap();
    assert!(frames.len() >= 200, "decoding went on past the damage: {} frames", frames.len());
    let (gst, failed) = gst_decode_clip(&damaged, OutputFormat::I420).unwrap();
    assert!(gst.len() >= 200);
    assert_eq!(failed, damaged.units.len() - gst.len());
}
