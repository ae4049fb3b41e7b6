//! `braid probe` and `braid psnr` end to end, against ffmpeg's own numbers, and every bad
//! input the media side must reject cleanly.

use braid_tests::{TempDir, assert_clean_error, ffmpeg, repo, run_braid, shared};

const H264: &str = "assets/clips/h264-cif-25fps-2m.mp4";
const H263: &str = "assets/clips/h263-qcif-15fps-64k.3gp";

fn json(out: &std::process::Output) -> serde_json::Value {
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("valid JSON on stdout")
}

#[test]
fn probe_reports_the_bundled_clips() {
    let j = json(&run_braid(&["probe", H264, "--json"]));
    assert_eq!(j["codec"], "h264");
    assert_eq!((j["width"].as_u64(), j["height"].as_u64()), (Some(352), Some(288)));
    assert_eq!(j["fps"], 25.0);
    assert_eq!(j["frames"], 250);
    assert_eq!(j["duration_s"], 10.0);
    let rate = j["bitrate_bps"].as_f64().unwrap();
    assert!((1.6e6..2.4e6).contains(&rate), "{rate}");

    let j = json(&run_braid(&["probe", H263, "--json"]));
    assert_eq!(j["codec"], "h263");
    assert_eq!((j["width"].as_u64(), j["height"].as_u64()), (Some(176), Some(144)));
    assert_eq!(j["frames"], 450);
    let rate = j["bitrate_bps"].as_f64().unwrap();
    assert!((50e3..80e3).contains(&rate), "{rate}");
}

/// ffmpeg's closing `PSNR y:… average:…` numbers for a pair.
fn ffmpeg_psnr(distorted: &str, reference: &str) -> [f64; 6] {
    let out = ffmpeg(&[
        "-threads", "1", "-i", distorted, "-i", reference, "-lavfi", "psnr", "-f", "null", "-",
    ]);
    let text = String::from_utf8_lossy(&out.stderr);
    parse_psnr_line(&text)
}

fn parse_psnr_line(text: &str) -> [f64; 6] {
    let line = text
        .lines()
        .find(|l| l.contains("PSNR y:"))
        .unwrap_or_else(|| panic!("no PSNR line in {text}"));
    let mut v = [0.0; 6];
    for (i, key) in ["y:", "u:", "v:", "average:", "min:", "max:"].iter().enumerate() {
        let rest = &line[line.find(&format!(" {key}")).unwrap() + key.len() + 1..];
        let num = rest.split_whitespace().next().unwrap();
        v[i] = if num == "inf" { f64::INFINITY } else { num.parse().unwrap() };
    }
    v
}

fn assert_agrees_with_ffmpeg(distorted: &str, reference: &str, dir: &TempDir) {
    let theirs = ffmpeg_psnr(distorted, reference);
    let stats = dir.join("stats.log");
    let out = run_braid(&["psnr", distorted, reference, "--stats", stats.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        text.trim_end().lines().last().unwrap().starts_with("PSNR y:"),
        "text must end with ffmpeg's line: {text}"
    );
    let ours = parse_psnr_line(&text);
    for (a, b) in ours.iter().zip(&theirs) {
        let same = (a.is_infinite() && a == b) || (a - b).abs() < 0.01;
        assert!(same, "braid {ours:?} vs ffmpeg {theirs:?}");
    }
    let j = json(&run_braid(&["psnr", distorted, reference, "--json"]));
    assert!((j["psnr_avg_db"].as_f64().unwrap() - theirs[3]).abs() < 0.01);
    assert!((j["psnr_y_db"].as_f64().unwrap() - theirs[0]).abs() < 0.01);
    let per_frame = j["per_frame"].as_array().unwrap();
    assert_eq!(per_frame.len() as u64, j["frames"].as_u64().unwrap());
    assert_eq!(per_frame[0]["n"], 1);
    // The stats file has ffmpeg's per-frame format.
    let stats = std::fs::read_to_string(stats).unwrap();
    assert_eq!(stats.lines().count(), per_frame.len());
    assert!(stats.starts_with("n:1 mse_avg:"), "{stats}");
}

#[test]
fn psnr_agrees_with_ffmpeg_on_low_bitrate_reencodes() {
    let dir = TempDir::new("psnr-pairs");
    let low264 = dir.join("low.mp4");
    ffmpeg(&[
        "-i",
        H264,
        "-c:v",
        "libx264",
        "-threads",
        "1",
        "-b:v",
        "200k",
        low264.to_str().unwrap(),
    ]);
    assert_agrees_with_ffmpeg(low264.to_str().unwrap(), H264, &dir);

    let low263 = dir.join("low.3gp");
    ffmpeg(&["-i", H263, "-c:v", "h263", "-threads", "1", "-b:v", "24k", low263.to_str().unwrap()]);
    assert_agrees_with_ffmpeg(low263.to_str().unwrap(), H263, &dir);

    if let Some(carphone) = shared("media/carphone_pristine.mp4") {
        let low = dir.join("carphone-low.mp4");
        ffmpeg(&[
            "-i",
            carphone.to_str().unwrap(),
            "-an",
            "-c:v",
            "libx264",
            "-threads",
            "1",
            "-b:v",
            "100k",
            low.to_str().unwrap(),
        ]);
        assert_agrees_with_ffmpeg(low.to_str().unwrap(), carphone.to_str().unwrap(), &dir);
    }
}

#[test]
fn psnr_of_a_clip_against_itself_is_infinite_and_100_in_json() {
    let out = run_braid(&["psnr", H263, H263]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("average:inf"), "{text}");
    let j = json(&run_braid(&["psnr", H263, H263, "--json"]));
    assert_eq!(j["psnr_avg_db"], 100.0);
    assert_eq!(j["psnr_min_db"], 100.0);
}

#[test]
fn missing_file_is_a_clean_error() {
    let line = assert_clean_error(&run_braid(&["probe", "no/such/clip.mp4"]));
    assert!(line.contains("no/such/clip.mp4"), "{line}");
    let line = assert_clean_error(&run_braid(&["psnr", H264, "no/such/ref.mp4"]));
    assert!(line.contains("no/such/ref.mp4"), "{line}");
}

#[test]
fn a_file_that_is_not_video_is_a_clean_error() {
    let dir = TempDir::new("not-video");
    let text = dir.join("notes.mp4");
    std::fs::write(&text, "this is not a video at all\n".repeat(100)).unwrap();
    let line = assert_clean_error(&run_braid(&["probe", text.to_str().unwrap()]));
    assert!(line.contains("notes.mp4"), "{line}");
    let noise = dir.join("noise.bin");
    let bytes: Vec<u8> =
        (0..50_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    std::fs::write(&noise, bytes).unwrap();
    assert_clean_error(&run_braid(&["probe", noise.to_str().unwrap()]));
    assert_clean_error(&run_braid(&["psnr", noise.to_str().unwrap(), H264]));
    // Audio only: a media file without video.
    let audio = dir.join("tone.wav");
    ffmpeg(&["-f", "lavfi", "-i", "sine=duration=1", audio.to_str().unwrap()]);
    let line = assert_clean_error(&run_braid(&["probe", audio.to_str().unwrap()]));
    assert!(line.contains("no video stream"), "{line}");
}

#[test]
fn unsupported_codec_is_named() {
    let dir = TempDir::new("codec");
    let mpeg4 = dir.join("clip.mp4");
    ffmpeg(&[
        "-f",
        "lavfi",
        "-i",
        "testsrc2=size=176x144:rate=10",
        "-t",
        "1",
        "-c:v",
        "mpeg4",
        mpeg4.to_str().unwrap(),
    ]);
    let line = assert_clean_error(&run_braid(&["probe", mpeg4.to_str().unwrap()]));
    assert!(line.contains("unsupported codec `mpeg4`"), "{line}");
}

#[test]
fn truncated_files_fail_cleanly_or_report_the_damage() {
    let dir = TempDir::new("truncated");
    let full = std::fs::read(repo(H264)).unwrap();
    // Cut inside the header: nothing to read.
    let head = dir.join("head.mp4");
    std::fs::write(&head, &full[..200]).unwrap();
    assert_clean_error(&run_braid(&["probe", head.to_str().unwrap()]));
    assert_clean_error(&run_braid(&["psnr", head.to_str().unwrap(), H264]));
    // Cut in the middle of the media data: what is there is read, and the damage reported.
    let half = dir.join("half.mp4");
    std::fs::write(&half, &full[..full.len() / 2]).unwrap();
    let out = run_braid(&["probe", half.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("truncated"), "{text}");
    // And its PSNR against the full clip holds the last frame for the missing ones.
    let out = run_braid(&["psnr", half.to_str().unwrap(), H264]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("frames short"), "{text}");
}

#[test]
fn corrupt_raw_stream_decodes_what_it_can_and_says_how_many_failed() {
    let dir = TempDir::new("corrupt");
    let raw = dir.join("clip.h264");
    ffmpeg(&[
        "-i",
        H264,
        "-c:v",
        "copy",
        "-bsf:v",
        "h264_mp4toannexb",
        "-f",
        "h264",
        raw.to_str().unwrap(),
    ]);
    let mut bytes = std::fs::read(&raw).unwrap();
    let n = bytes.len();
    for b in &mut bytes[n / 2..n / 2 + 40_000] {
        *b = b.wrapping_mul(17).wrapping_add(3);
    }
    let bad = dir.join("bad.h264");
    std::fs::write(&bad, &bytes).unwrap();
    let out = run_braid(&["psnr", bad.to_str().unwrap(), H264, "--fps", "25"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("PSNR y:"), "{text}");
    let j = json(&run_braid(&["psnr", bad.to_str().unwrap(), H264, "--fps", "25", "--json"]));
    let avg = j["psnr_avg_db"].as_f64().unwrap();
    assert!(avg < 60.0, "corruption must show in the PSNR: {avg}");
}

#[test]
fn bad_arguments_are_clean_errors() {
    let out = run_braid(&["probe"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).starts_with("error: "));
    let line = assert_clean_error(&run_braid(&["demo", "--duration", "-1"]));
    assert!(line.contains("--duration"), "{line}");
}
