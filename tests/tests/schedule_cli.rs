//! `braid schedule` on cases with known answers.

use braid_tests::{TempDir, assert_clean_error, run_braid, shared};

const H263: &str = "assets/clips/h263-qcif-15fps-64k.3gp";

fn schedule_json(args: &[&str]) -> serde_json::Value {
    let mut all = vec!["schedule"];
    all.extend_from_slice(args);
    all.push("--json");
    let out = run_braid(&all);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn clip_rate() -> (f64, f64) {
    let out = run_braid(&["probe", H263, "--json"]);
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    (j["bitrate_bps"].as_f64().unwrap(), j["duration_s"].as_f64().unwrap())
}

#[test]
fn half_the_clip_rate_needs_about_the_clip_duration() {
    let (rate, duration) = clip_rate();
    // At rate r/2 everything arrives at 2T; the last frame is consumed at w + T: w ≈ T
    // (exactly T for a CBR clip, see media::schedule; this clip is only roughly CBR).
    let j = schedule_json(&[H263, "--rate", &format!("{}", (rate / 2.0).round())]);
    let w = j["startup_delay_s"].as_f64().unwrap();
    assert!((w - duration).abs() < 0.06 * duration, "w* = {w}, T = {duration}");
    // About half the clip waits in the client at that moment.
    let x = j["client_buffer_bytes"].as_f64().unwrap();
    let clip_bytes = rate * duration / 8.0;
    assert!((x / clip_bytes - 0.5).abs() < 0.05, "x* = {x} of {clip_bytes}");
    assert!(j.get("proxy_buffer_bytes").is_none());
}

#[test]
fn ten_times_the_clip_rate_starts_almost_at_once() {
    let (rate, _) = clip_rate();
    let j = schedule_json(&[H263, "--rate", &format!("{}", (rate * 10.0).round())]);
    assert!(j["startup_delay_s"].as_f64().unwrap() <= 0.1, "{j}");
}

#[test]
fn doubling_the_rate_shortfall_doubles_the_delay() {
    let (rate, duration) = clip_rate();
    // r/2 → w ≈ T; r/3 → w ≈ 2T.
    let w2 =
        schedule_json(&[H263, "--rate", &format!("{}", (rate / 2.0).round())])["startup_delay_s"]
            .as_f64()
            .unwrap();
    let w3 =
        schedule_json(&[H263, "--rate", &format!("{}", (rate / 3.0).round())])["startup_delay_s"]
            .as_f64()
            .unwrap();
    assert!((w3 / w2 - 2.0).abs() < 0.1, "{w2} {w3} (T = {duration})");
}

#[test]
fn a_proxy_reports_its_buffer_and_a_slow_last_hop_dominates() {
    let (rate, duration) = clip_rate();
    let j = schedule_json(&[
        H263,
        "--rate",
        "2mbit",
        "--proxy-rate",
        &format!("{}", (rate / 2.0).round()),
    ]);
    let w = j["startup_delay_s"].as_f64().unwrap();
    assert!((w - duration).abs() < 0.06 * duration, "{j}");
    assert!(j["proxy_buffer_bytes"].as_u64().unwrap() > 0);
}

#[test]
fn traces_are_read_in_mahimahi_format() {
    let Some(trace) = shared("traces/TMobile-LTE-short.down") else { return };
    let j = schedule_json(&[H263, "--rate-trace", trace.to_str().unwrap()]);
    assert!(j["startup_delay_s"].as_f64().unwrap() < 1.0, "{j}");
    // A trace of 1 opportunity per 100 ms = 120 kbit/s: enough for 64 kbit/s.
    let dir = TempDir::new("sched-trace");
    let slow = dir.join("slow.trace");
    std::fs::write(&slow, (1..=100).map(|i| format!("{}\n", i * 100)).collect::<String>()).unwrap();
    let j = schedule_json(&[H263, "--rate-trace", slow.to_str().unwrap()]);
    assert!(j["startup_delay_s"].as_f64().unwrap() < 3.0, "{j}");
}

#[test]
fn bad_schedule_input_is_a_clean_error() {
    let line = assert_clean_error(&run_braid(&["schedule", H263, "--rate", "fast"]));
    assert!(line.contains("not a rate"), "{line}");
    assert_clean_error(&run_braid(&["schedule", H263, "--rate", "0"]));
    assert_clean_error(&run_braid(&["schedule", H263]));
    let dir = TempDir::new("sched-bad");
    let bad = dir.join("bad.trace");
    std::fs::write(&bad, "1\n2\nbanana\n").unwrap();
    let line =
        assert_clean_error(&run_braid(&["schedule", H263, "--rate-trace", bad.to_str().unwrap()]));
    assert!(line.contains("line 3"), "{line}");
}
