//! The idle timeout (RFC 9000 §10.1) against a mobile path's silence: a single-path stream
//! over a cellular-like trace that delivers nothing for 6 s plays to its end, because the
//! timeout is the negotiated `max_idle_timeout`, 30 s unless a side announces less. A
//! client that announces 5 s (the scenario key `idle_timeout_s`, as the transport's fixed
//! value was before) still ends at the gap with one error line: the test can fail.

use braid_tests::{TempDir, repo, run_braid_within};
use serde_json::Value;
use std::time::Duration;

/// 3 Mbit/s (one 1500-byte opportunity every 4 ms) for 30 s, nothing from 10 s to 16 s.
fn gap_trace() -> String {
    (1..=30_000u32)
        .step_by(4)
        .filter(|t| !(10_000..16_000).contains(t))
        .map(|t| format!("{t}\n"))
        .collect()
}

fn scenario(dir: &TempDir, idle: &str) -> String {
    std::fs::write(dir.join("gap.down"), gap_trace()).unwrap();
    let clip = repo("assets/clips/h264-cif-25fps-2m.mp4");
    let text = format!(
        "name = \"gap\"\nduration_s = 30\n{idle}\n[[path]]\nname = \"lte\"\nrole = \"lte\"\n\
         down = {{ trace = \"gap.down\", delay_ms = 30 }}\nup = {{ rate = \"2mbit\", delay_ms = 30 }}\n\
         [workload]\nkind = \"stream\"\nclip = {clip:?}\nloop = true\nplayout = \"adaptive\"\n"
    );
    let path = dir.join("gap.toml");
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_owned()
}

#[test]
fn a_single_path_stream_plays_through_a_six_second_gap_in_its_trace() {
    let dir = TempDir::new("idle-gap");
    let s = scenario(&dir, "");
    let report = dir.join("gap.json");
    let args =
        ["sim", "--scenario", &s, "--profile", "mptcp", "--report", report.to_str().unwrap()];
    let out = run_braid_within(&args, Duration::from_secs(300)).expect("braid sim hung");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r: Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    assert_eq!(r["duration_s"].as_f64(), Some(30.0), "the run ends at the scenario's end");
    let st = &r["stream"];
    let f = |k: &str| st[k].as_f64().unwrap_or(f64::NAN);
    // The gap is felt (one stall about its length), then the stream goes on at 25 fps for
    // the rest of the 30 s, every frame whole.
    assert_eq!(f("stalls"), 1.0, "{st}");
    assert!(f("stall_time_s") > 3.0 && f("stall_time_s") < 9.0, "{st}");
    let played_s = 30.0 - f("startup_delay_s") - f("stall_time_s");
    assert!(f("frames_total") >= 25.0 * played_s - 25.0, "{played_s} s played: {st}");
    assert_eq!(f("frames_lost"), 0.0, "{st}");
}

#[test]
fn a_client_announcing_five_seconds_still_ends_at_the_gap_with_one_error_line() {
    let dir = TempDir::new("idle-gap-5");
    let s = scenario(&dir, "idle_timeout_s = 5");
    let args = ["sim", "--scenario", &s, "--profile", "mptcp"];
    let out = run_braid_within(&args, Duration::from_secs(300)).expect("braid sim hung");
    let line = braid_tests::assert_clean_error(&out);
    assert!(line.contains("nothing received on any path for 5 s"), "{line}");
    let at: f64 = line
        .split("stopped at ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|x| x.parse().ok())
        .unwrap_or(f64::NAN);
    assert!(at > 14.0 && at < 17.0, "{line}");
}
