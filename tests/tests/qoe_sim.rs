//! QoE-driven re-injection in the simulator, one check per goal direction, on a shortened
//! copy of the hard comparison pair (`assets/scenarios/qoe-lossy.toml`: a lossy, variable
//! WiFi-like trace beside a slow, lossy 3G-like trace), the CIF clip, one seed. The
//! simulator is deterministic, so each run is the same every time; the full comparison
//! (60 s, 10 seeds) is in BENCHMARKS.md "QoE-driven re-injection".
//!
//! - against `tcp`: less stall time, redundant bytes ≤ 3 % of the delivered bytes;
//! - against `mptcp`: less stall time, start-up no later, redundant bytes ≤ 5 %;
//! - against `mptcp-qe` (`mptcp-qe-qoe`): radio energy within +5 %, stalls no more; stall
//!   time is held to +10 % (the goal, no worse, is missed by about 5 %).
//!
//! And one start-up check over ten seeds of a start-up pair (`qoe-startup-lte`): there
//! `mptcp-qoe` starts earlier than `mptcp`.

use braid_tests::{TempDir, repo, run_braid_within};
use serde_json::Value;
use std::time::Duration;

const SECONDS: u32 = 20;

fn scenario(dir: &TempDir) -> String {
    let text = std::fs::read_to_string(repo("assets/scenarios/qoe-lossy.toml")).unwrap();
    let traces = repo("assets/traces");
    let clips = repo("assets/clips");
    let text = text
        .replace("duration_s = 60", &format!("duration_s = {SECONDS}"))
        .replace("../traces", traces.to_str().unwrap())
        .replace("../clips", clips.to_str().unwrap());
    let path = dir.join("qoe-lossy-short.toml");
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_string()
}

fn sim(dir: &TempDir, scenario: &str, profile: &str) -> Value {
    let report = dir.join(&format!("{profile}.json"));
    let args = ["sim", "--scenario", scenario, "--profile", profile, "--report"];
    let mut args: Vec<&str> = args.to_vec();
    let r = report.to_str().unwrap().to_string();
    args.push(&r);
    let out = run_braid_within(&args, Duration::from_secs(120))
        .unwrap_or_else(|| panic!("{profile}: the simulation did not end within 120 s"));
    assert!(out.status.success(), "{profile}: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap()
}

struct Row {
    stalls: f64,
    stall_s: f64,
    startup_s: f64,
    redundant: f64,
    energy_j: f64,
}

fn row(r: &Value) -> Row {
    let st = &r["stream"];
    let delivered = r["bytes_delivered"].as_f64().unwrap_or(0.0).max(1.0);
    Row {
        stalls: st["stalls"].as_f64().unwrap_or(f64::MAX),
        stall_s: st["stall_time_s"].as_f64().unwrap_or(f64::MAX),
        startup_s: st["startup_delay_s"].as_f64().unwrap_or(f64::MAX),
        redundant: r["redundant_bytes"].as_f64().unwrap_or(f64::MAX) / delivered,
        energy_j: r["energy"]["total_j"].as_f64().unwrap_or(f64::MAX),
    }
}

#[test]
fn qoe_reinjection_meets_each_goal_direction_on_the_lossy_pair() {
    let dir = TempDir::new("qoe-sim");
    let sc = scenario(&dir);
    let profiles = ["tcp", "mptcp", "mptcp-qoe", "mptcp-qe", "mptcp-qe-qoe"];
    let reports: Vec<Value> = std::thread::scope(|s| {
        let handles: Vec<_> = profiles.iter().map(|p| s.spawn(|| sim(&dir, &sc, p))).collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let rows: Vec<Row> = reports.iter().map(row).collect();
    for (p, r) in profiles.iter().zip(&rows) {
        println!(
            "{p:14} stalls {:.0} stall {:.2} s start-up {:.3} s redundant {:.2} % energy {:.1} J",
            r.stalls,
            r.stall_s,
            r.startup_s,
            r.redundant * 100.0,
            r.energy_j
        );
    }
    let [tcp, mptcp, qoe, qe, qe_qoe] = [&rows[0], &rows[1], &rows[2], &rows[3], &rows[4]];
    assert!(qoe.redundant > 0.0, "mptcp-qoe re-injected nothing");
    // Against tcp.
    assert!(qoe.stall_s < tcp.stall_s, "stall time {} s vs tcp {} s", qoe.stall_s, tcp.stall_s);
    assert!(qoe.redundant <= 0.03, "redundant {:.2} % > 3 %", qoe.redundant * 100.0);
    // Against mptcp.
    assert!(qoe.stall_s < mptcp.stall_s, "stall {} s vs mptcp {} s", qoe.stall_s, mptcp.stall_s);
    assert!(
        qoe.startup_s <= mptcp.startup_s + 1e-6,
        "start-up {} vs {}",
        qoe.startup_s,
        mptcp.startup_s
    );
    // Against mptcp-qe.
    // Measured with aeSUM's band: 23.5 J either way.
    assert!(qe_qoe.energy_j <= qe.energy_j * 1.05, "{} J vs {} J", qe_qoe.energy_j, qe.energy_j);
    assert!(qe_qoe.stalls <= qe.stalls, "stalls {} vs {}", qe_qoe.stalls, qe.stalls);
    // The goal is "no worse"; measured −1.7 % here (7.00 against 7.13 s) but +4.7 % over
    // ten 60-s seeds, all of it from the copies since PLAYOUT no longer elicits ACKs
    // (`mptcp-qe-qoe-no-copies` 19.38 against 19.43 s): a missed goal (BENCHMARKS.md
    // "QoE-driven re-injection"), so this checks the gap stays within 10 %.
    assert!(qe_qoe.stall_s <= qe.stall_s * 1.10, "stall {} s vs {} s", qe_qoe.stall_s, qe.stall_s);
}

/// `assets/scenarios/qoe-startup-lte.toml` (a WiFi-like path with 10 % random loss beside
/// a clean LTE-like path), as shipped (5 s).
fn startup_lte(dir: &TempDir) -> String {
    let text = std::fs::read_to_string(repo("assets/scenarios/qoe-startup-lte.toml")).unwrap();
    let clips = repo("assets/clips");
    let text = text.replace("../clips", clips.to_str().unwrap());
    let path = dir.join("qoe-startup-lte.toml");
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_string()
}

fn startup_s(dir: &TempDir, scenario: &str, profile: &str, seed: u64) -> f64 {
    let report = dir.join(&format!("{profile}-{seed}.json"));
    let r = report.to_str().unwrap().to_string();
    let seed = seed.to_string();
    let args =
        ["sim", "--scenario", scenario, "--profile", profile, "--seed", &seed, "--report", &r];
    let out = run_braid_within(&args, Duration::from_secs(120))
        .unwrap_or_else(|| panic!("{profile}: the simulation did not end within 120 s"));
    assert!(out.status.success(), "{profile}: {}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    v["stream"]["startup_delay_s"].as_f64().unwrap_or(f64::INFINITY)
}

/// On a lossy WiFi-like path beside a second path that validates early, `mptcp-qoe` starts
/// earlier than `mptcp`: measured 0.594 against 0.772 s over seeds 1–10, earlier on 9 of
/// them (BENCHMARKS.md "QoE-driven re-injection", "After the slow-start fix"). The check
/// asks for a mean at least 10 % earlier and earlier on 8 seeds of 10.
#[test]
fn mptcp_qoe_starts_earlier_than_mptcp_on_a_lossy_wifi_beside_lte() {
    let dir = TempDir::new("qoe-sim-startup");
    let sc = startup_lte(&dir);
    let seeds: Vec<u64> = (1..=10).collect();
    let (mptcp, qoe): (Vec<f64>, Vec<f64>) = std::thread::scope(|s| {
        let a = s.spawn(|| seeds.iter().map(|&k| startup_s(&dir, &sc, "mptcp", k)).collect());
        let b = s.spawn(|| seeds.iter().map(|&k| startup_s(&dir, &sc, "mptcp-qoe", k)).collect());
        (a.join().unwrap(), b.join().unwrap())
    });
    println!("mptcp     {mptcp:.3?}\nmptcp-qoe {qoe:.3?}");
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let (m, q) = (mean(&mptcp), mean(&qoe));
    assert!(q.is_finite() && q <= 0.9 * m, "mean start-up {q:.3} s against mptcp's {m:.3} s");
    let earlier = mptcp.iter().zip(&qoe).filter(|(m, q)| q < m).count();
    assert!(earlier >= 8, "earlier on {earlier} seeds of 10: {qoe:?} vs {mptcp:?}");
}
