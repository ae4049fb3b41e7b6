//! Streaming end to end in real time on loopback: the in-process demo over relay-emulated
//! paths, and `braid serve` / `braid play` as separate processes. The cases run one after
//! another in one test: they are real time and the machine has two cores.

use std::process::{Child, Stdio};
use std::time::Duration;

use braid_tests::{TempDir, assert_clean_error, braid, repo, run_braid};

struct Guard(Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn scenario(dir: &TempDir, name: &str, clip: &str, duration_s: u32, loss: f64, buffer_s: f64) -> String {
    let path = dir.join(&format!("{name}.toml"));
    let clip = repo(clip);
    std::fs::write(
        &path,
        format!(
            r#"name = "{name}"
duration_s = {duration_s}
[[path]]
name = "wifi"
role = "wifi"
down = {{ rate = "4mbit", delay_ms = 10, loss = {loss} }}
up = {{ rate = "3mbit", delay_ms = 10 }}
[[path]]
name = "lte"
role = "lte"
down = {{ rate = "4mbit", delay_ms = 40, loss = {loss} }}
up = {{ rate = "3mbit", delay_ms = 40 }}
[workload]
kind = "stream"
clip = "{}"
loop = false
buffer_s = {buffer_s}
"#,
            clip.display(),
        ),
    )
    .unwrap();
    path.to_str().unwrap().to_string()
}

fn demo(scenario: &str, profile: &str, report: &std::path::Path) -> serde_json::Value {
    let out = run_braid(&["demo", "--headless", "--scenario", scenario, "--profile", profile, "--report", report.to_str().unwrap()]);
    assert!(out.status.success(), "{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    serde_json::from_str(&std::fs::read_to_string(report).unwrap()).unwrap()
}

#[test]
fn streams_play_to_the_end_intact_and_loss_shows_with_deadlines() {
    let dir = TempDir::new("stream-e2e");

    // H.264, reliable, two paths: every frame, identical pictures.
    let s = scenario(&dir, "h264", "assets/clips/h264-cif-25fps-2m.mp4", 14, 0.0, 30.0);
    let r = demo(&s, "mptcp", &dir.join("h264.json"));
    let st = &r["stream"];
    assert_eq!(st["frames_total"], 250, "{r}");
    assert_eq!(st["frames_lost"], 0, "{r}");
    assert_eq!(st["psnr_avg_db"], 100.0, "{r}");
    assert!(r["paths"].as_array().unwrap().iter().all(|p| p["throughput_bps"].as_f64().unwrap() > 0.0), "both paths carry data: {r}");

    // H.263 (30 s), reliable.
    let s = scenario(&dir, "h263", "assets/clips/h263-qcif-15fps-64k.3gp", 34, 0.0, 30.0);
    let r = demo(&s, "mptcp", &dir.join("h263.json"));
    assert_eq!(r["stream"]["frames_total"], 450, "{r}");
    assert_eq!(r["stream"]["frames_lost"], 0, "{r}");
    assert_eq!(r["stream"]["psnr_avg_db"], 100.0, "{r}");

    // Loss with deadlines (mptcp-rt) and a one-second buffer: late frames are abandoned
    // and the picture suffers (the same scenario in the simulator loses ~60 of 250).
    let s = scenario(&dir, "lossy", "assets/clips/h264-cif-25fps-2m.mp4", 14, 0.05, 1.0);
    let r = demo(&s, "mptcp-rt", &dir.join("lossy.json"));
    let st = &r["stream"];
    assert!(st["frames_lost"].as_u64().unwrap() > 0, "{r}");
    assert!(st["psnr_avg_db"].as_f64().unwrap() < 100.0, "{r}");

    // braid serve / braid play as separate processes.
    let port = 47_000 + (std::process::id() % 1000) as u16;
    let addr = format!("127.0.0.1:{port}");
    let server = braid()
        .args(["serve", repo("assets/clips/h263-qcif-15fps-64k.3gp").to_str().unwrap(), "--listen", &addr])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _server = Guard(server);
    std::thread::sleep(Duration::from_millis(500));
    let report = dir.join("play.json");
    let out = run_braid(&[
        "play",
        &addr,
        "--headless",
        "--duration",
        "5",
        "--reference",
        repo("assets/clips/h263-qcif-15fps-64k.3gp").to_str().unwrap(),
        "--report",
        report.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let st = &r["stream"];
    assert!(st["frames_total"].as_u64().unwrap() >= 50, "{r}");
    assert_eq!(st["frames_lost"], 0, "{r}");
    assert_eq!(st["psnr_avg_db"], 100.0, "{r}");
}

#[test]
fn play_without_a_server_fails_cleanly() {
    let line = assert_clean_error(&run_braid(&["play", "127.0.0.1:9", "--headless", "--duration", "3"]));
    assert!(line.contains("127.0.0.1:9"), "{line}");
}
