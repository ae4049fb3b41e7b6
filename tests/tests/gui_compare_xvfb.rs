//! Compare mode under a virtual display: `braid compare --gui` with three profiles opens
//! one window whose three video areas each show the clip's picture.
//!
//! The window reports where it draws each picture through `BRAID_UI_STATS`, so the test
//! looks at exactly the video areas, not at the overlay, the strip or the plots.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use braid_tests::{Guard, TempDir, braid, have_xvfb_and_imagemagick, skip, xvfb};

/// Runs ImageMagick's `convert` with `args`, bounded in time, and returns its output.
fn magick(args: &[&str]) -> String {
    let out = Command::new("/usr/bin/convert").args(args).output().expect("running convert");
    assert!(out.status.success(), "convert {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The video rectangles `[x, y, w, h]` the window last reported, once each pane has shown
/// a few pictures.
fn wait_for_pictures(stats: &Path, panes: usize, until: Instant) -> Vec<[f64; 4]> {
    let mut last = String::new();
    while Instant::now() < until {
        if let Ok(text) = std::fs::read_to_string(stats) {
            if let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) {
                let frames: Vec<u64> = v["video_frames"]
                    .as_array()
                    .map(|a| a.iter().filter_map(|f| f.as_u64()).collect())
                    .unwrap_or_default();
                let rects: Vec<[f64; 4]> = v["video_rects"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(|r| {
                                let r: Vec<f64> =
                                    r.as_array()?.iter().filter_map(|x| x.as_f64()).collect();
                                (r.len() == 4).then(|| [r[0], r[1], r[2], r[3]])
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                if frames.len() == panes && rects.len() == panes && frames.iter().all(|&f| f >= 25)
                {
                    return rects;
                }
            }
            last = text;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    panic!("the panes did not all show pictures in time; last UI stats: {last}");
}

#[test]
fn compare_mode_shows_three_pictures_side_by_side() {
    if !have_xvfb_and_imagemagick() {
        skip("Xvfb and ImageMagick are needed (cargo xtask setup installs them)");
        return;
    }
    let (_x, display) = xvfb(180..210, "1600x1000x24").expect("starting Xvfb");
    let dir = TempDir::new("gui-compare");
    let runtime = dir.join("xdg");
    std::fs::create_dir_all(&runtime).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&runtime, std::fs::Permissions::from_mode(0o700)).unwrap();
    }
    let stats = dir.join("ui-stats.json");
    let player = braid()
        .args([
            "compare",
            "--gui",
            "--scenario",
            "assets/scenarios/demo.toml",
            "--profiles",
            "tcp,mptcp,mptcp-qe",
            "--out",
        ])
        .arg(dir.join("out"))
        .env("DISPLAY", &display)
        .env("XDG_RUNTIME_DIR", &runtime)
        .env("BRAID_UI_STATS", &stats)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting braid compare --gui");
    // Killed by PID when the test ends, passed or failed.
    let _player = Guard(player);
    // Decoding the reference and starting three sessions takes a few seconds (longer in a
    // debug build on a small machine).
    let rects = wait_for_pictures(&stats, 3, Instant::now() + Duration::from_secs(60));
    // Side by side, each a real area of the window.
    for w in rects.windows(2) {
        assert!(w[0][0] + w[0][2] <= w[1][0] + 1.0, "panes overlap: {rects:?}");
    }
    let shot = dir.join("compare.png");
    let ok = Command::new("timeout")
        .args(["20", "import", "-display", &display, "-window", "root", shot.to_str().unwrap()])
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "screenshot failed");
    for (i, r) in rects.iter().enumerate() {
        assert!(r[2] > 200.0 && r[3] > 150.0, "pane {i} is too small: {r:?}");
        // The lower right of the picture: the overlay box stays in the upper left.
        let crop = format!(
            "{:.0}x{:.0}+{:.0}+{:.0}",
            r[2] * 0.3,
            r[3] * 0.35,
            r[0] + r[2] * 0.65,
            r[1] + r[3] * 0.58
        );
        let region = dir.join(&format!("pane{i}.png"));
        magick(&[shot.to_str().unwrap(), "-crop", &crop, "+repage", region.to_str().unwrap()]);
        let colors: u64 =
            magick(&[region.to_str().unwrap(), "-format", "%k", "info:"]).parse().unwrap();
        let sd: f64 = magick(&[
            region.to_str().unwrap(),
            "-colorspace",
            "Gray",
            "-format",
            "%[fx:standard_deviation]",
            "info:",
        ])
        .parse()
        .unwrap();
        let mean: f64 = magick(&[
            region.to_str().unwrap(),
            "-colorspace",
            "Gray",
            "-format",
            "%[fx:mean]",
            "info:",
        ])
        .parse()
        .unwrap();
        // The clip is a colour-bar test pattern: many colours, bright, far from uniform.
        assert!(colors > 100, "pane {i}: the video area shows no picture ({colors} colours)");
        assert!(sd > 0.05, "pane {i}: the video area is uniform (sd {sd})");
        assert!(mean > 0.15, "pane {i}: the video area is dark (mean {mean})");
    }
}
