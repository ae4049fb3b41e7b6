//! Regenerates the bundled clips from ffmpeg's synthetic lavfi sources.
//!
//! Deterministic: single-threaded encoders and bit-exact flags, so the same ffmpeg build
//! produces byte-identical files. The clips are committed; this only documents and
//! reproduces how they were made.

use std::process::Command;

struct Clip {
    path: &'static str,
    args: &'static [&'static str],
}

const CLIPS: &[Clip] = &[
    // H.264, CIF, 25 fps, ~2 Mbit/s, 10 s. Temporal noise keeps the encoder busy enough to
    // reach the target rate on a synthetic pattern.
    Clip {
        path: "assets/clips/h264-cif-25fps-2m.mp4",
        args: &[
            "-f",
            "lavfi",
            "-i",
            "testsrc2=size=352x288:rate=25,noise=alls=12:allf=t",
            "-t",
            "10",
            "-an",
            "-c:v",
            "libx264",
            "-threads",
            "1",
            "-profile:v",
            "baseline",
            "-preset",
            "veryfast",
            "-b:v",
            "2M",
            "-maxrate",
            "2M",
            "-bufsize",
            "2M",
            "-g",
            "50",
            "-pix_fmt",
            "yuv420p",
            "-movflags",
            "+faststart",
        ],
    },
    // H.263 baseline, QCIF (the encoder accepts only the standard sizes), 15 fps,
    // ~64 kbit/s, 30 s. FFmpeg's mp4 muxer refuses H.263, so the container is 3GP.
    Clip {
        path: "assets/clips/h263-qcif-15fps-64k.3gp",
        args: &[
            "-f",
            "lavfi",
            "-i",
            "testsrc2=size=176x144:rate=15",
            "-t",
            "30",
            "-an",
            "-c:v",
            "h263",
            "-threads",
            "1",
            "-b:v",
            "64k",
            "-maxrate",
            "64k",
            "-bufsize",
            "128k",
            "-g",
            "30",
            "-pix_fmt",
            "yuv420p",
        ],
    },
];

/// Writes every bundled clip.
pub fn generate() -> Result<(), String> {
    if !crate::setup::which("ffmpeg") {
        return Err("ffmpeg is not installed (Debian package `ffmpeg`)".into());
    }
    let root = crate::root();
    for clip in CLIPS {
        let out = root.join(clip.path);
        if let Some(dir) = out.parent() {
            std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        }
        crate::run(
            Command::new("ffmpeg")
                .args(["-v", "error", "-y"])
                .args(clip.args)
                .args(["-fflags", "+bitexact", "-flags:v", "+bitexact"])
                .arg(&out),
        )?;
        let size = std::fs::metadata(&out).map(|m| m.len()).unwrap_or(0);
        println!("wrote {} ({size} bytes)", clip.path);
    }
    Ok(())
}
