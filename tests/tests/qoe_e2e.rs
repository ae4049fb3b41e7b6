//! QoE-driven re-injection in real time: `braid demo --headless` plays the CIF clip through
//! the relay emulator (real sockets, real delays and drops), with `mptcp` and with
//! `mptcp-qoe`, in turns.
//!
//! - On a lossy WiFi-like path and a slow, lossy 3G-like path (`qoe-startup-3g`),
//!   `mptcp-qoe` stalls for less than half of `mptcp`'s stall time and starts no later.
//! - On a lossy WiFi-like path beside an LTE-like one (`qoe-startup-lte`, seeds 2–8),
//!   `mptcp-qoe` starts earlier than `mptcp`, as in the simulator (BENCHMARKS.md
//!   "QoE-driven re-injection"). The relay draws its losses from the scenario's seed. On
//!   seed 1 it drops the server's first two handshake packets (the handshake ends after two
//!   probe timeouts, at about 1.07 s) and no data packet before the WiFi-like path's window
//!   has grown past what the start needs, so both profiles start on the first windows
//!   alone, level; that is why earlier runs of seed 1 only showed "no later". Other seeds
//!   lose data in the first round trips, where CUBIC with the halving on slow-start exit
//!   (`mptcp-qoe`) recovers sooner than LIA (`mptcp`).
//!
//! Real time on a shared machine is noisy: a session starved of CPU starts late for reasons
//! that are not the transport's. The tests therefore play several sessions of each profile,
//! alternating so that both see the same load, compare medians (or per-seed pairs), and
//! print every run, the margins and the load average. They run one at a time.

use std::sync::Mutex;
use std::time::Duration;

use braid_tests::{TempDir, repo, run_braid_within};
use serde_json::Value;

/// One real-time test at a time: two would share the CPU and skew each other's timing.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Seconds of media per session.
const SECONDS: u32 = 8;

/// Sessions per profile (`BRAID_QOE_E2E_RUNS` overrides it; odd, so the median is a run).
const RUNS: usize = 5;

/// A copy of the scenario asset `name` in `dir`, with each `(from, to)` of `edits` made
/// (each must match) and the clip path made absolute; returns its path.
fn scenario_copy(dir: &TempDir, name: &str, edits: &[(&str, String)], out: &str) -> String {
    let asset = repo(&format!("assets/scenarios/{name}"));
    let mut text =
        std::fs::read_to_string(&asset).unwrap_or_else(|e| panic!("{}: {e}", asset.display()));
    for (from, to) in edits {
        assert!(text.contains(from), "{name} has no `{from}`");
        text = text.replace(from, to);
    }
    let clips = repo("assets/clips");
    let text = text.replace("../clips", clips.to_str().unwrap_or_default());
    let path = dir.join(out);
    std::fs::write(&path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    path.to_str().unwrap_or_default().to_string()
}

/// `assets/scenarios/qoe-startup-3g.toml` (WiFi-like 6 Mbit/s, 20 ms, 5 % loss toward
/// the client; 3G-like 1.5 Mbit/s, 120 ms, 1 % loss), [`SECONDS`] long. The stream
/// (2 Mbit/s) needs both paths.
fn scenario(dir: &TempDir) -> String {
    let duration = ("duration_s = 5", format!("duration_s = {SECONDS}"));
    scenario_copy(dir, "qoe-startup-3g.toml", &[duration], "qoe-e2e.toml")
}

/// One real-time session's report.
fn session(dir: &TempDir, scenario: &str, profile: &str, run: usize) -> Value {
    let report = dir.join(&format!("{profile}-{run}.json"));
    let r = report.to_str().unwrap_or_default();
    let args = [
        "demo",
        "--headless",
        "--no-baseline",
        "--scenario",
        scenario,
        "--profile",
        profile,
        "--report",
        r,
    ];
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
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
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

/// Seeds of `qoe-startup-lte` for the start-up test (seed 1 loses two handshake packets;
/// see the module's documentation).
const STARTUP_SEEDS: std::ops::RangeInclusive<u64> = 2..=8;

/// `assets/scenarios/qoe-startup-lte.toml` (WiFi-like 8 Mbit/s, 10 ms, 10 % loss toward the
/// client; LTE-like 3 Mbit/s, 40 ms), 3 s long, with `seed`.
fn startup_scenario(dir: &TempDir, seed: u64) -> String {
    let edits =
        [("duration_s = 5", "duration_s = 3".to_string()), ("seed = 1", format!("seed = {seed}"))];
    scenario_copy(dir, "qoe-startup-lte.toml", &edits, &format!("qoe-startup-{seed}.toml"))
}

#[test]
fn mptcp_qoe_starts_earlier_than_mptcp_on_a_lossy_wifi_path_in_real_time() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = TempDir::new("qoe-e2e-startup");
    let load_before = load_average();
    let (mut mptcp, mut qoe, mut earlier) = (Vec::new(), Vec::new(), 0usize);
    for seed in STARTUP_SEEDS {
        let sc = startup_scenario(&dir, seed);
        let order = if seed % 2 == 0 { ["mptcp", "mptcp-qoe"] } else { ["mptcp-qoe", "mptcp"] };
        let mut got = [0.0; 2];
        for p in order {
            let s = startup_s(&session(&dir, &sc, p, seed as usize));
            got[usize::from(p == "mptcp-qoe")] = s;
        }
        let [m, q] = got;
        println!("seed {seed}: start-up mptcp {m:.3} s, mptcp-qoe {q:.3} s ({:+.3} s)", q - m);
        earlier += usize::from(q < m);
        mptcp.push(m);
        qoe.push(q);
    }
    let (m, q) = (median(&mptcp), median(&qoe));
    let n = mptcp.len();
    println!(
        "median start-up: mptcp {m:.3} s, mptcp-qoe {q:.3} s; mptcp-qoe earlier on {earlier} of {n} seeds; load average {load_before} before, {} after",
        load_average()
    );
    assert!(q.is_finite(), "mptcp-qoe did not start in most runs: {qoe:?}");
    // The comparison is paired by seed: the seeds' start-ups differ far more (0.2–0.7 s)
    // than the profiles do on one seed, so the two profiles' medians over the seeds can
    // land on different seeds and compare those rather than the profiles (a clean-clone
    // run: earlier on 5 of 7 seeds, mean difference −0.044 s, yet median 0.454 against
    // 0.418 s; its per-seed differences: median −0.019 s, mean −0.044 s). Earlier runs
    // (debug build): earlier on 6, 5 and 7 of 7 seeds, the profiles' medians 0.380 against
    // 0.586, 0.470 against 0.630 and 0.485 against 0.556 s.
    let diffs: Vec<f64> = qoe.iter().zip(&mptcp).map(|(q, m)| q - m).collect();
    let (median_diff, mean_diff) = (median(&diffs), diffs.iter().sum::<f64>() / n as f64);
    assert!(
        median_diff < 0.0 && mean_diff < 0.0,
        "mptcp-qoe is not earlier than mptcp: per-seed difference median {median_diff:+.3} s, mean {mean_diff:+.3} s, earlier on {earlier} of {n} seeds: {qoe:?} vs {mptcp:?}"
    );
}
