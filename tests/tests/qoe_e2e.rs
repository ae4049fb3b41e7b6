//! QoE-driven re-injection in real time: `braid demo --headless` plays the CIF clip through
//! the relay emulator (real sockets, real delays and drops) over a lossy WiFi-like path and
//! a slow, lossy 3G-like path, with `mptcp` and with `mptcp-qoe`, in turns. `mptcp-qoe`
//! stalls for less than half of `mptcp`'s stall time and starts no later.
//!
//! It does not show `mptcp-qoe` starting *earlier*, which the simulator shows on the
//! start-up pairs (BENCHMARKS.md "QoE-driven re-injection", "After the slow-start fix":
//! `qoe-startup-lte` 0.594 against 0.772 s, earlier on 9 of 10 seeds): in real time the
//! handshake of the debug build takes about 0.47 s, the 3G-like path validates about 0.5 s
//! later (its 240-ms round trip twice), and playback starts before that (0.80–0.85 s), so
//! both profiles start on the WiFi-like path alone, in identical slow starts (measured with
//! `--qlog`). On `qoe-startup-lte`, whose second path validates sooner, three real-time runs
//! each started at 1.27–1.31 s (`mptcp`) and 1.27–1.29 s (`mptcp-qoe`): level as well.
//!
//! Real time on a shared machine is noisy: a session starved of CPU starts late for reasons
//! that are not the transport's. The test therefore plays several sessions of each profile,
//! alternating so that both see the same load, and compares the medians; it prints every
//! run, the margins and the load average.

use std::time::Duration;

use braid_tests::{TempDir, repo, run_braid_within};
use serde_json::Value;

/// Seconds of media per session.
const SECONDS: u32 = 8;

/// Sessions per profile (`BRAID_QOE_E2E_RUNS` overrides it; odd, so the median is a run).
const RUNS: usize = 5;

/// `assets/scenarios/qoe-startup-3g.toml` (WiFi-like 6 Mbit/s, 20 ms, 5 % loss toward
/// the client; 3G-like 1.5 Mbit/s, 120 ms, 1 % loss), [`SECONDS`] long. The stream
/// (2 Mbit/s) needs both paths.
fn scenario(dir: &TempDir) -> String {
    let asset = repo("assets/scenarios/qoe-startup-3g.toml");
    let text =
        std::fs::read_to_string(&asset).unwrap_or_else(|e| panic!("{}: {e}", asset.display()));
    let clips = repo("assets/clips");
    let text = text
        .replace("duration_s = 5", &format!("duration_s = {SECONDS}"))
        .replace("../clips", clips.to_str().unwrap_or_default());
    assert!(text.contains(&format!("duration_s = {SECONDS}")), "{text}");
    let path = dir.join("qoe-e2e.toml");
    std::fs::write(&path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    path.to_str().unwrap_or_default().to_string()
}

/// One real-time session's report.
fn session(dir: &TempDir, scenario: &str, profile: &str, run: usize) -> Value {
    let report = dir.join(&format!("{profile}-{run}.json"));
    let r = report.to_str().unwrap_or_default();
    let args = ["demo", "--headless", "--scenario", scenario, "--profile", profile, "--report", r];
    let limit = Duration::from_secs(u64::from(SECONDS) + 60);
    let out = run_braid_within(&args, limit)
        .unwrap_or_else(|| panic!("{profile}: the session did not end within {limit:?}"));
    assert!(out.status.success(), "{profile}: {}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(&report).unwrap_or_else(|e| panic!("{profile}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{profile}: {e}"))
}

/// The start-up delay in seconds; a session that never started counts as infinitely late.
fn startup_s(r: &Value) -> f64 {
    let st = &r["stream"];
    let shown = st["frames_total"].as_u64().unwrap_or(0) > st["frames_lost"].as_u64().unwrap_or(0);
    match st["startup_delay_s"].as_f64() {
        Some(s) if s > 0.0 && shown => s,
        _ => f64::INFINITY,
    }
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::INFINITY)
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map_or_else(|_| "?".into(), |s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
}

#[test]
fn mptcp_qoe_stalls_less_and_starts_no_later_than_mptcp_on_a_lossy_pair_in_real_time() {
    let dir = TempDir::new("qoe-e2e");
    let sc = scenario(&dir);
    let runs = std::env::var("BRAID_QOE_E2E_RUNS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|&n| n > 0)
        .unwrap_or(RUNS);
    let load_before = load_average();
    let (mut mptcp, mut qoe) = (Vec::new(), Vec::new());
    let (mut mptcp_stall, mut qoe_stall) = (Vec::new(), Vec::new());
    for run in 0..runs {
        // Alternate which profile goes first, so neither always meets the same moment.
        let order = if run % 2 == 0 { ["mptcp", "mptcp-qoe"] } else { ["mptcp-qoe", "mptcp"] };
        for p in order {
            let r = session(&dir, &sc, p, run);
            let s = startup_s(&r);
            let st = &r["stream"];
            println!(
                "run {run} {p:10} start-up {s:.3} s  stalls {} ({:.2} s)  frames {}",
                st["stalls"],
                st["stall_time_s"].as_f64().unwrap_or(f64::NAN),
                st["frames_total"]
            );
            let stall = st["stall_time_s"].as_f64().unwrap_or(f64::INFINITY);
            if p == "mptcp" {
                mptcp.push(s);
                mptcp_stall.push(stall);
            } else {
                qoe.push(s);
                qoe_stall.push(stall);
            }
        }
    }
    let (m, q) = (median(&mptcp), median(&qoe));
    let (ms, qs) = (median(&mptcp_stall), median(&qoe_stall));
    println!(
        "median start-up: mptcp {m:.3} s, mptcp-qoe {q:.3} s (margin {:.3} s); median stall time: mptcp {ms:.2} s, mptcp-qoe {qs:.2} s; load average {load_before} before, {} after",
        m - q,
        load_average()
    );
    assert!(q.is_finite(), "mptcp-qoe did not start in most runs: {qoe:?}");
    // No later: within 10 % + one frame interval of mptcp's median (both start on the
    // same path in the same slow start; the rest is scheduling noise).
    assert!(
        q <= m * 1.1 + 0.04,
        "mptcp-qoe median start-up {q:.3} s is later than mptcp's {m:.3} s: {qoe:?} vs {mptcp:?}"
    );
    // Measured 6.0–6.1 s against 0.3–2.5 s of stall time per run at load 24–35.
    assert!(
        qs < 0.5 * ms,
        "mptcp-qoe median stall time {qs:.2} s is not below half of mptcp's {ms:.2} s: {qoe_stall:?} vs {mptcp_stall:?}"
    );
}
