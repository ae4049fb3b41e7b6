//! The streaming code in real time: `braid serve` and `braid play` as separate processes,
//! each path through its own relay of `braid netem`, 10 % loss on the WiFi path. S-EDPF
//! with one coded packet every four (`sedpf-fec4`) plays the CIF clip with PSNR ≥ 35 dB
//! and loses fewer frames than `mptcp-rt` through the same relays.

use std::process::Stdio;
use std::time::Duration;

use braid_tests::{Guard, TempDir, braid, repo, run_braid_within};
use serde_json::Value;

/// The emulated paths: WiFi 8 Mbit/s, 10 ms, 10 % loss toward the client; LTE 3 Mbit/s,
/// 40 ms, no loss.
const PATHS: &str = r#"name = "wifi-loss-10"
duration_s = 60
seed = 7

[[path]]
name = "wifi"
role = "wifi"
down = { rate = "8mbit", delay_ms = 10, jitter_ms = 2, loss = 0.10 }
up = { rate = "8mbit", delay_ms = 10 }

[[path]]
name = "lte"
role = "lte"
down = { rate = "3mbit", delay_ms = 40, jitter_ms = 5 }
up = { rate = "2mbit", delay_ms = 40 }
"#;

/// One profile's session: a server with `profile`, a relay per path in front of it, and a
/// client with `profile` sending each path to its relay. Returns the session report.
fn session(dir: &TempDir, scenario: &str, profile: &str, base: u16) -> Value {
    let clip = repo("assets/clips/h264-cif-25fps-2m.mp4");
    let server = format!("127.0.0.1:{base}");
    let (s, pin) = braid_tests::spawn_serving(
        braid()
            .args(["serve", clip.to_str().unwrap(), "--listen", &server, "--profile", profile])
            .stdout(Stdio::null()),
    );
    let _s = Guard(s);
    assert_eq!(pin.len(), 64, "serve prints its certificate fingerprint");
    let relay = base + 1;
    let _r = Guard(
        braid()
            .args(["netem", "--scenario", scenario, "--server", &server])
            .args(["--base-port", &relay.to_string(), "--duration", "0"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    std::thread::sleep(Duration::from_millis(800));
    let report = dir.join(&format!("{profile}.json"));
    let wifi = format!("127.0.0.1/wifi=127.0.0.1:{relay}");
    let lte = format!("127.0.0.1/lte=127.0.0.1:{}", relay + 1);
    let args = [
        "play",
        &server,
        "--server-cert-sha256",
        &pin,
        "--headless",
        "--profile",
        profile,
        "--playout",
        "media3",
        "--path",
        &wifi,
        "--path",
        &lte,
        "--reference",
        clip.to_str().unwrap(),
        "--report",
        report.to_str().unwrap(),
    ];
    // The clip is 10 s; a minute means the session hangs.
    let out = run_braid_within(&args, Duration::from_secs(60))
        .unwrap_or_else(|| panic!("{profile}: the session did not end within 60 s"));
    assert!(out.status.success(), "{profile}: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap()
}

#[test]
fn sedpf_fec4_plays_through_ten_percent_wifi_loss_and_loses_fewer_frames_than_mptcp_rt() {
    let dir = TempDir::new("fec-e2e");
    let scenario = dir.join("wifi-loss-10.toml");
    std::fs::write(&scenario, PATHS).unwrap();
    let scenario = scenario.to_str().unwrap();
    let base = 44_000 + (std::process::id() % 500) as u16 * 8;
    let fec = session(&dir, scenario, "sedpf-fec4", base);
    let rt = session(&dir, scenario, "mptcp-rt", base + 4);
    let row = |r: &Value| {
        let st = &r["stream"];
        format!(
            "frames {} lost {} stalls {} psnr {} dB, redundant {} B",
            st["frames_total"],
            st["frames_lost"],
            st["stalls"],
            st["psnr_avg_db"],
            r["redundant_bytes"]
        )
    };
    println!("sedpf-fec4: {}\nmptcp-rt:   {}", row(&fec), row(&rt));
    // The remote server's send times are unknown to `play`: the in-order delay is the
    // transport's estimate (first arrival less half the path's minimum RTT, to the read).
    // It is at least the WiFi path's 10 ms one-way delay and far below the clip's length,
    // and the report labels it as an estimate.
    for (name, r) in [("sedpf-fec4", &fec), ("mptcp-rt", &rt)] {
        let d = &r["delay_ms"];
        assert_eq!(d["estimated"], true, "{name}: {d}");
        let (mean, p50, p95) = (d["mean"].as_f64(), d["p50"].as_f64(), d["p95"].as_f64());
        println!("{name}: delay_ms {d}");
        assert!(mean.is_some_and(|m| (9.0..2000.0).contains(&m)), "{name}: {d}");
        assert!(p50.is_some_and(|p| p >= 9.0) && p95 >= p50, "{name}: {d}");
        assert!(d["sd"].as_f64().is_some_and(|s| s >= 0.0), "{name}: {d}");
    }
    let st = &fec["stream"];
    assert_eq!(st["frames_total"], 250, "sedpf-fec4 played the clip to its end: {fec}");
    let psnr = st["psnr_avg_db"].as_f64().unwrap_or(0.0);
    assert!(psnr >= 35.0, "sedpf-fec4 PSNR {psnr} dB < 35 dB: {fec}");
    assert!(
        fec["redundant_bytes"].as_u64().unwrap_or(0) > 0,
        "the coded packets count as redundant bytes: {fec}"
    );
    let lost = |r: &Value| r["stream"]["frames_lost"].as_u64().unwrap_or(u64::MAX);
    // Fewer than mptcp-rt whenever mptcp-rt lost any; when the deadline profile happened
    // to lose none (its re-injection on the probe timeout can repair 10 % loss in time),
    // nothing can lose fewer, and sedpf-fec4 must lose none either.
    assert!(
        lost(&fec) < lost(&rt) || (lost(&rt) == 0 && lost(&fec) == 0),
        "sedpf-fec4 lost {} frames, mptcp-rt {}\n{fec}\n{rt}",
        lost(&fec),
        lost(&rt)
    );
}
