//! The playout policies on cellular traces: `braid sim` streams the bundled 2 Mbit/s H.264
//! clip, looped over 40 s, over one path whose down link follows a trace, once per policy
//! (`fixed`, `media3`, `adaptive`, `oracle`), and prints one row per trace and policy.
//!
//! On every trace, everything plays, the oracle never stalls and `adaptive` never starts
//! later than `fixed`. On the generated traces (`assets/traces/`) the goals below are
//! checked against an exact list of known misses; the mahimahi traces in the shared test
//! data are evaluated the same way when present (the slow EV-DO trace, a quarter of the
//! 2 Mbit/s clip's rate, with the 64 kbit/s H.263 clip) and their misses are printed.
//!
//! Goals for `adaptive`, per trace: start-up delay at most 1.2× the oracle's and at most
//! half of `fixed`'s; no more stalls and no more stall time than either fixed policy. A
//! start earlier than the oracle's means a stall (the oracle's is the smallest stall-free
//! start), so where the oracle's start is above half of `fixed`'s and neither fixed policy
//! stalls, "half of `fixed`'s" and "no stall" cannot both be met; there the former is
//! dropped and the stall goals decide. The table BENCHMARKS.md shows comes from
//! `cargo test -p braid-tests --test playout_eval -- --nocapture --test-threads=1`.

use std::path::{Path, PathBuf};

use braid_tests::{TempDir, repo, run_braid, shared};

const POLICIES: [&str; 4] = ["fixed", "media3", "adaptive", "oracle"];
const H264: &str = "assets/clips/h264-cif-25fps-2m.mp4";
const H263: &str = "assets/clips/h263-qcif-15fps-64k.3gp";

/// One trace to evaluate.
struct Case {
    name: String,
    trace: PathBuf,
    clip: &'static str,
}

/// One row of the table.
#[derive(Clone, Debug)]
struct Row {
    startup_delay_s: f64,
    stalls: u64,
    stall_time_s: f64,
    frames_lost: u64,
    frames_total: u64,
}

fn scenario_text(case: &Case, policy: &str) -> String {
    format!(
        r#"name = "{name}"
duration_s = 40
[[path]]
name = "cell"
role = "lte"
down = {{ trace = "{trace}", delay_ms = 20 }}
up = {{ rate = "10mbit", delay_ms = 20 }}
[workload]
kind = "stream"
clip = "{clip}"
loop = true
playout = "{policy}"
"#,
        name = case.name,
        trace = case.trace.display(),
        clip = repo(case.clip).display(),
    )
}

fn run(dir: &Path, case: &Case, policy: &str) -> Row {
    let scenario = dir.join(format!("{}-{policy}.toml", case.name));
    let report = dir.join(format!("{}-{policy}.json", case.name));
    std::fs::write(&scenario, scenario_text(case, policy)).unwrap();
    let out = run_braid(&[
        "sim",
        "--scenario",
        scenario.to_str().unwrap(),
        "--profile",
        "tcp",
        "--report",
        report.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "braid sim {} {policy}: {}",
        case.name,
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let s = &json["stream"];
    assert_eq!(s["playout_policy"], policy, "{}", case.name);
    Row {
        startup_delay_s: s["startup_delay_s"].as_f64().unwrap(),
        stalls: s["stalls"].as_u64().unwrap(),
        stall_time_s: s["stall_time_s"].as_f64().unwrap(),
        frames_lost: s["frames_lost"].as_u64().unwrap(),
        frames_total: s["frames_total"].as_u64().unwrap(),
    }
}

/// Every case under every policy, on as many threads as there are cores; the scenario
/// files go to a directory of their own, `label` (the tests run in parallel).
fn evaluate(label: &str, cases: &[Case]) -> Vec<[Row; 4]> {
    let dir = TempDir::new(&format!("playout-eval-{label}"));
    let jobs: Vec<(usize, usize)> =
        (0..cases.len()).flat_map(|c| (0..POLICIES.len()).map(move |p| (c, p))).collect();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results = std::sync::Mutex::new(vec![None; jobs.len()]);
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(jobs.len());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(&(c, p)) = jobs.get(i) else { break };
                    let row = run(&dir.join(""), &cases[c], POLICIES[p]);
                    results.lock().unwrap()[i] = Some(row);
                }
            });
        }
    });
    let results = results.into_inner().unwrap();
    (0..cases.len())
        .map(|c| std::array::from_fn(|p| results[c * POLICIES.len() + p].clone().expect("a run")))
        .collect()
}

fn print_table(cases: &[Case], rows: &[[Row; 4]]) {
    println!(
        "| trace | policy | startup_delay_s | stalls | stall_time_s | frames_lost | frames_total |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|");
    for (case, rows) in cases.iter().zip(rows) {
        for (policy, r) in POLICIES.iter().zip(rows) {
            println!(
                "| {} | {policy} | {:.3} | {} | {:.3} | {} | {} |",
                case.name,
                r.startup_delay_s,
                r.stalls,
                r.stall_time_s,
                r.frames_lost,
                r.frames_total
            );
        }
    }
}

/// The goals of `adaptive` on one trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Goal {
    /// Start-up delay ≤ 1.2 × the oracle's.
    StartVsOracle,
    /// Start-up delay ≤ 0.5 × `fixed`'s (where compatible with the stall goals).
    StartVsFixed,
    /// Stalls ≤ `fixed`'s.
    StallsVsFixed,
    /// Stalls ≤ `media3`'s.
    StallsVsMedia3,
    /// Stall time ≤ `fixed`'s.
    StallTimeVsFixed,
    /// Stall time ≤ `media3`'s.
    StallTimeVsMedia3,
}

/// The goals `adaptive` misses on one trace, each with the measured gap.
fn missed_goals(rows: &[Row; 4]) -> Vec<(Goal, String)> {
    let [fixed, media3, adaptive, oracle] = rows;
    let mut missed = Vec::new();
    let eps = 1e-9;
    if adaptive.startup_delay_s > 1.2 * oracle.startup_delay_s + eps {
        missed.push((
            Goal::StartVsOracle,
            format!(
                "start-up {:.3} s > 1.2 × oracle's {:.3} s = {:.3} s",
                adaptive.startup_delay_s,
                oracle.startup_delay_s,
                1.2 * oracle.startup_delay_s
            ),
        ));
    }
    let no_stall_required = fixed.stalls.min(media3.stalls) == 0;
    let half_fixed_feasible =
        !(no_stall_required && oracle.startup_delay_s > 0.5 * fixed.startup_delay_s + eps);
    if half_fixed_feasible && adaptive.startup_delay_s > 0.5 * fixed.startup_delay_s + eps {
        missed.push((
            Goal::StartVsFixed,
            format!(
                "start-up {:.3} s > 0.5 × fixed's {:.3} s = {:.3} s",
                adaptive.startup_delay_s,
                fixed.startup_delay_s,
                0.5 * fixed.startup_delay_s
            ),
        ));
    }
    for (name, other, stalls, time) in [
        ("fixed", fixed, Goal::StallsVsFixed, Goal::StallTimeVsFixed),
        ("media3", media3, Goal::StallsVsMedia3, Goal::StallTimeVsMedia3),
    ] {
        if adaptive.stalls > other.stalls {
            missed
                .push((stalls, format!("{} stalls > {name}'s {}", adaptive.stalls, other.stalls)));
        }
        if adaptive.stall_time_s > other.stall_time_s + eps {
            missed.push((
                time,
                format!(
                    "stall time {:.3} s > {name}'s {:.3} s",
                    adaptive.stall_time_s, other.stall_time_s
                ),
            ));
        }
    }
    missed
}

/// The goals `adaptive` is known to miss on the generated traces, with the cause (the
/// measured gaps are in BENCHMARKS.md, "Playout policies"). The test fails on a miss not
/// listed here and on a listed one that no longer happens, so the list stays exact.
const KNOWN_MISSES: &[(&str, Goal, &str)] = &[
    (
        "markov-lte-1",
        Goal::StartVsOracle,
        "the first second delivers below the clip's rate (slow start into a fair state); \
         the start rule assumes half the forecast and buffers about a second",
    ),
    ("markov-lte-1", Goal::StartVsFixed, "as above"),
    (
        "markov-lte-2",
        Goal::StartVsFixed,
        "a 1.8 Mbit/s trace under a 2.08 Mbit/s clip: adaptive's threshold (1.4 s of \
         media, sized at half the forecast) takes 2.1 s to fill and fixed's 2.5 s takes \
         3.9 s: below the clip's rate, filling 1.4 s takes more than half as long",
    ),
    (
        "markov-lte-2",
        Goal::StallsVsFixed,
        "the same under-rate trace: adaptive stalls at 12.2 s and resumes at 17.8 s with \
         fixed's 5 s, just as the trace's 0.7-1.0 Mbit/s spell (18-25 s) begins, and runs \
         dry again at 30.8 s; fixed stalls inside that spell and resumes after it, and its \
         second stall falls beyond the 40-s run (59.8 s)",
    ),
    ("markov-lte-2", Goal::StallTimeVsFixed, "as above"),
    ("markov-lte-2", Goal::StallTimeVsMedia3, "as above"),
    (
        "markov-lte-driving-1",
        Goal::StartVsOracle,
        "the second frame comes 100 ms after the first: the forecast (3.4 Mbit/s) halved \
         is below the clip's rate, so it waits for more frames",
    ),
    (
        "markov-umts-1",
        Goal::StallTimeVsMedia3,
        "a 9-s poor spell: the resume rule waits for fixed's 5 s of media (the forecast says \
         the deficit persists), but the rate recovers sooner; media3's 2 s resume is just \
         enough",
    ),
    (
        "markov-umts-1",
        Goal::StallTimeVsFixed,
        "the same 5 s resume threshold as fixed's, but adaptive started 1 s sooner, so its \
         stall falls at another point of the poor spell",
    ),
    (
        "markov-umts-2",
        Goal::StartVsOracle,
        "the first 1.5 s deliver one frame: the forecast deficit reaches the 2.5 s start \
         cap, as fixed's threshold",
    ),
];

fn generated() -> Vec<Case> {
    ["markov-lte-1", "markov-lte-2", "markov-lte-driving-1", "markov-umts-1", "markov-umts-2"]
        .iter()
        .map(|name| Case {
            name: name.to_string(),
            trace: repo(&format!("assets/traces/{name}.down")),
            clip: H264,
        })
        .collect()
}

/// What every run must satisfy: everything plays, the oracle never stalls, and `adaptive`
/// never starts later than `fixed` (its start threshold is capped at `fixed`'s).
fn check_invariants(case: &Case, rows: &[Row; 4]) {
    for (policy, r) in POLICIES.iter().zip(rows) {
        assert!(r.frames_total > 0, "{} {policy}: nothing played: {r:?}", case.name);
    }
    assert_eq!(rows[3].stalls, 0, "{}: the oracle stalled: {:?}", case.name, rows[3]);
    assert!(
        rows[2].startup_delay_s <= rows[0].startup_delay_s + 1e-9,
        "{}: adaptive started after fixed: {:?} vs {:?}",
        case.name,
        rows[2],
        rows[0]
    );
}

#[test]
fn adaptive_goals_on_the_generated_traces_and_the_oracle_never_stalls() {
    let cases = generated();
    let rows = evaluate("generated", &cases);
    print_table(&cases, &rows);
    let mut failures = Vec::new();
    for (case, rows) in cases.iter().zip(&rows) {
        check_invariants(case, rows);
        let missed = missed_goals(rows);
        for (goal, gap) in &missed {
            let known = KNOWN_MISSES.iter().any(|&(t, g, _)| t == case.name && g == *goal);
            println!(
                "{}: adaptive misses {goal:?}: {gap}{}",
                case.name,
                if known { " (known)" } else { "" }
            );
            if !known {
                failures.push(format!("{}: adaptive misses {goal:?}: {gap}", case.name));
            }
        }
        for &(_, goal, _) in KNOWN_MISSES.iter().filter(|&&(t, _, _)| t == case.name) {
            if !missed.iter().any(|(g, _)| *g == goal) {
                failures.push(format!("{}: {goal:?} is met now: update KNOWN_MISSES", case.name));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_policies_on_the_mahimahi_traces() {
    let mut cases = Vec::new();
    for (name, clip) in [
        ("ATT-LTE-driving", H264),
        ("TMobile-LTE-short", H264),
        ("Verizon-LTE-short", H264),
        ("Verizon-EVDO-driving", H263),
    ] {
        let Some(trace) = shared(&format!("traces/{name}.down")) else { return };
        cases.push(Case { name: name.to_string(), trace, clip });
    }
    let rows = evaluate("mahimahi", &cases);
    print_table(&cases, &rows);
    for (case, rows) in cases.iter().zip(&rows) {
        check_invariants(case, rows);
        for (goal, gap) in missed_goals(rows) {
            println!("{}: adaptive misses {goal:?}: {gap}", case.name);
        }
    }
}

/// The same evaluation over every `*.down` trace in the directory `BRAID_PLAYOUT_TRACES`
/// (e.g. traces of other seeds written by `cargo run -p braid-transport --example
/// markov_traces`): prints the table, each trace's misses, the totals per policy and how
/// many traces meet every goal. Run with `--ignored`; it asserts only the invariants.
#[test]
#[ignore = "needs BRAID_PLAYOUT_TRACES=DIR"]
fn the_policies_on_the_traces_of_a_directory() {
    let Some(dir) = std::env::var_os("BRAID_PLAYOUT_TRACES") else {
        panic!("set BRAID_PLAYOUT_TRACES to a directory of mahimahi traces");
    };
    let mut traces: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("reading BRAID_PLAYOUT_TRACES")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "down"))
        .collect();
    traces.sort();
    let cases: Vec<Case> = traces
        .into_iter()
        .map(|trace| Case {
            name: trace.file_stem().unwrap_or_default().to_string_lossy().into_owned(),
            trace,
            clip: H264,
        })
        .collect();
    let rows = evaluate("directory", &cases);
    print_table(&cases, &rows);
    let mut all_met = 0;
    for (case, rows) in cases.iter().zip(&rows) {
        check_invariants(case, rows);
        let missed = missed_goals(rows);
        all_met += usize::from(missed.is_empty());
        for (goal, gap) in missed {
            println!("{}: adaptive misses {goal:?}: {gap}", case.name);
        }
    }
    println!("| policy | total startup_delay_s | total stalls | total stall_time_s |");
    println!("|---|---:|---:|---:|");
    for (p, policy) in POLICIES.iter().enumerate() {
        let start: f64 = rows.iter().map(|r| r[p].startup_delay_s).sum();
        let stalls: u64 = rows.iter().map(|r| r[p].stalls).sum();
        let stall_time: f64 = rows.iter().map(|r| r[p].stall_time_s).sum();
        println!("| {policy} | {start:.2} | {stalls} | {stall_time:.2} |");
    }
    println!("adaptive meets every goal on {all_met} of {} traces", cases.len());
}
