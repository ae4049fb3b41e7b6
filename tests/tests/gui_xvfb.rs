//! The window under a virtual display: `braid demo` opens it, and the video area itself
//! shows the clip's picture and changes over time.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use braid_tests::{Guard, TempDir, braid, have_xvfb_and_imagemagick, skip, xvfb};

fn magick(args: &[&str]) -> String {
    let out = Command::new("/usr/bin/convert").args(args).output().expect("running convert");
    assert!(out.status.success(), "convert {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn the_demo_window_shows_the_clip_and_it_moves() {
    if !have_xvfb_and_imagemagick() {
        skip("Xvfb and ImageMagick are needed (cargo xtask setup installs them)");
        return;
    }
    let (_x, display) = xvfb(140..170, "1280x900x24").expect("starting Xvfb");
    let dir = TempDir::new("gui");
    let runtime = dir.join("xdg");
    std::fs::create_dir_all(&runtime).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&runtime, std::fs::Permissions::from_mode(0o700)).unwrap();
    }
    let player = braid()
        .args(["demo", "--duration", "12"])
        .env("DISPLAY", &display)
        .env("XDG_RUNTIME_DIR", &runtime)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting braid demo");
    let _player = Guard(player);
    let shot = |name: &str| {
        let path = dir.join(name);
        let ok = Command::new("import")
            .args(["-display", &display, "-window", "root", path.to_str().unwrap()])
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "screenshot failed");
        path
    };
    std::thread::sleep(Duration::from_secs(4));
    let a = shot("a.png");
    std::thread::sleep(Duration::from_millis(2500));
    let b = shot("b.png");
    // The window opens at the top left at 1000×800: the picture spans about x 230…770,
    // y 100…540, with the overlay box at its bottom left (from y ≈ 335) and the plots
    // below. This region is inside the picture, right of the clip's timecode and above
    // the overlay box.
    let crop = "300x120+450+180";
    let region = |p: &Path| {
        let out = dir.join(&format!("{}-crop.png", p.file_stem().unwrap().to_str().unwrap()));
        magick(&[p.to_str().unwrap(), "-crop", crop, "+repage", out.to_str().unwrap()]);
        out
    };
    let (ra, rb) = (region(&a), region(&b));
    // The clip is a colour-bar test pattern: the region holds many colours and is bright.
    let colors: u64 = magick(&[ra.to_str().unwrap(), "-format", "%k", "info:"]).parse().unwrap();
    assert!(colors > 200, "the video area shows no picture ({colors} colours)");
    let mean: f64 =
        magick(&[ra.to_str().unwrap(), "-colorspace", "Gray", "-format", "%[fx:mean]", "info:"])
            .parse()
            .unwrap();
    assert!(mean > 0.2, "the video area is dark (mean {mean})");
    // … and it moves: the two shots differ in many pixels of that region.
    let out = Command::new("/usr/bin/compare")
        .args(["-metric", "AE", "-fuzz", "5%", ra.to_str().unwrap(), rb.to_str().unwrap(), "null:"])
        .output()
        .expect("running compare");
    let changed: f64 = String::from_utf8_lossy(&out.stderr)
        .split_whitespace()
        .next()
        .unwrap_or("0")
        .parse()
        .unwrap_or(0.0);
    assert!(changed > 500.0, "the picture did not change between screenshots ({changed} pixels)");
}
