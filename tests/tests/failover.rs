//! Path failure and recovery: every multipath profile plays the demo clip to its end
//! through five kinds of cut, in the simulator and in real time through the relay
//! emulator. Reliable profiles lose no frame; a cut shorter than the playout buffer costs
//! no stall, a longer one at most one; the report gives the failover time.

use std::fmt::Write as _;

use std::time::Duration;

use braid_tests::{TempDir, repo, run_braid, run_braid_within};
use serde_json::Value;

/// Every multipath profile of the registry (the one-path ones, `tcp`, `tfrc`, `marc`, are
/// not about failover). `registry_multipath_profiles_are_all_listed` keeps this complete.
const MULTIPATH: &[&str] = &[
    "mptcp",
    "mptcp-olia",
    "mptcp-uncoupled",
    "roundrobin",
    "redundant",
    "mptcp-rt",
    "mp-tfrc",
    "mp-marc",
    "handover",
    "emtcp",
    "emtcp-allowance",
    "mptcp-qe",
    "mptcp-qe-no-aesum",
    "mptcp-qe-no-abcwnd",
    "mptcp-qe-no-wesack",
    "mptcp-qe-paper-rule",
    "mptcp-qe-band",
    "edpf",
    "sedpf",
    "sedpf-fec2",
    "sedpf-fec4",
    "sedpf-fec8",
    "blest",
    "ecf",
    "mptcp-qoe",
    "mptcp-qoe-dup",
    "mptcp-qoe-no-copies",
    "mptcp-qe-qoe",
    "mptcp-qe-qoe-no-copies",
    "sedpf-fec4-qoe",
];
/// Profiles that are another profile under an earlier name: listed by the registry, run
/// as the profile they name. None at present.
const ALIASES: &[&str] = &[];
const SINGLE_PATH: &[&str] =
    &["tcp", "tfrc", "marc", "marc-reliable", "tfrc-deadline", "marc-sent-anchor"];

/// Held by each test that runs sessions: real-time sessions starved of CPU by simulations
/// running beside them stall for reasons that are not the transport's.
static SESSIONS: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    SESSIONS.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A kind of cut: its name, the scenario's duration, its events, the longest time during
/// which no path was up, and whether it is a cut of one path only.
struct Cut {
    name: &'static str,
    duration_s: u32,
    /// (at_s, path, action)
    events: &'static [(f64, &'static str, &'static str)],
    /// The longest stretch with every path down, s.
    all_down_s: f64,
    /// The longest stretch with some path down, s.
    longest_cut_s: f64,
    /// The base round trip of the path that stays up, ms (`None`: none does).
    survivor_rtt_ms: Option<u64>,
}

/// The cuts start at 8 s, once the 4-s buffer is full: in real time a session starts about
/// 0.5–1.5 s after launch (more on a loaded machine) and fills the buffer in 3.5–5.5 s
/// (sedpf-fec4 with its coded packets), so a cut at 5 or 6 s could meet a buffer still
/// filling. Each session runs only as long as the cut and the recovery after it need: 3 s
/// after the last return.
const CUTS: &[Cut] = &[
    Cut {
        name: "wifi-cut-3s",
        duration_s: 14,
        events: &[(8.0, "wifi", "down"), (11.0, "wifi", "up")],
        all_down_s: 0.0,
        longest_cut_s: 3.0,
        survivor_rtt_ms: Some(80),
    },
    Cut {
        name: "wifi-cut-8s",
        duration_s: 19,
        events: &[(8.0, "wifi", "down"), (16.0, "wifi", "up")],
        all_down_s: 0.0,
        longest_cut_s: 8.0,
        survivor_rtt_ms: Some(80),
    },
    Cut {
        name: "wifi-cut-30s",
        duration_s: 41,
        events: &[(8.0, "wifi", "down"), (38.0, "wifi", "up")],
        all_down_s: 0.0,
        longest_cut_s: 30.0,
        survivor_rtt_ms: Some(80),
    },
    Cut {
        name: "lte-cut-8s",
        duration_s: 19,
        events: &[(8.0, "lte", "down"), (16.0, "lte", "up")],
        all_down_s: 0.0,
        longest_cut_s: 8.0,
        survivor_rtt_ms: Some(20),
    },
    Cut {
        name: "wifi-flapping",
        duration_s: 21,
        events: &[
            (8.0, "wifi", "down"),
            (9.0, "wifi", "up"),
            (10.0, "wifi", "down"),
            (11.0, "wifi", "up"),
            (12.0, "wifi", "down"),
            (13.0, "wifi", "up"),
            (14.0, "wifi", "down"),
            (15.0, "wifi", "up"),
            (16.0, "wifi", "down"),
            (17.0, "wifi", "up"),
        ],
        all_down_s: 0.0,
        longest_cut_s: 1.0,
        survivor_rtt_ms: Some(80),
    },
    Cut {
        name: "both-cut-3s",
        duration_s: 17,
        events: &[
            (8.0, "wifi", "down"),
            (8.0, "lte", "down"),
            (11.0, "wifi", "up"),
            (11.0, "lte", "up"),
        ],
        all_down_s: 3.0,
        longest_cut_s: 3.0,
        survivor_rtt_ms: None,
    },
];

/// Known gaps against the goals, with their cause: these runs may stall once where the
/// goal is none. Rate-based controllers halve their rate per no-feedback timeout while
/// every path is down (RFC 5348 §4.4) and then climb back at most doubling per RTT, so
/// after a 3-s outage of both paths they refill the buffer too slowly.
/// Known gaps: one stall allowed, printed as such (BENCHMARKS.md, "Failover"). `mptcp-qe-no-wesack`
/// on the outage of both paths in real time: WiFi delivered under the stream for 1.6 s in
/// Partial mode just before the cut, aeSUM's buffer rule switched to Full 0.3 s before
/// both paths went down, and the player, its buffer already drawn down, stalled 1.35 s
/// into the outage (4.1–4.5 s in three runs; none in the simulator, none with weSACK).
const KNOWN_GAPS: &[(&str, &str)] = &[
    ("both-cut-3s", "mp-tfrc"),
    ("both-cut-3s", "mp-marc"),
    ("both-cut-3s", "mptcp-qe-no-wesack"),
];

/// The playout buffer of the scenarios, media seconds.
const BUFFER_S: f64 = 4.0;

/// The demo's paths (WiFi 8 Mbit/s, LTE 3 Mbit/s: either alone carries the 2 Mbit/s clip)
/// with `cut`'s events.
fn scenario(dir: &TempDir, cut: &Cut) -> String {
    let mut events = String::new();
    for (at, path, action) in cut.events {
        let _ =
            write!(events, "[[event]]\nat_s = {at}\npath = \"{path}\"\naction = \"{action}\"\n\n");
    }
    let text = format!(
        r#"name = "{name}"
duration_s = {duration}
seed = 1

[[path]]
name = "wifi"
role = "wifi"
down = {{ rate = "8mbit", delay_ms = 10, jitter_ms = 2, loss = 0.005 }}
up = {{ rate = "8mbit", delay_ms = 10 }}

[[path]]
name = "lte"
role = "lte"
down = {{ rate = "3mbit", delay_ms = 40, jitter_ms = 5 }}
up = {{ rate = "2mbit", delay_ms = 40 }}

{events}[workload]
kind = "stream"
clip = "{clip}"
loop = true
playout = "adaptive"
buffer_s = {BUFFER_S}
"#,
        name = cut.name,
        duration = cut.duration_s,
        clip = repo("assets/clips/h264-cif-25fps-2m.mp4").display(),
    );
    let path = dir.join(&format!("{}.toml", cut.name));
    std::fs::write(&path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    path.to_str().unwrap_or_default().to_string()
}

fn sim_report(dir: &TempDir, scenario: &str, cut: &Cut, profile: &str) -> Result<Value, String> {
    let report = dir.join(&format!("{}-{profile}.json", cut.name));
    let qlog = dir.join(&format!("qlog-{}-{profile}", cut.name));
    let args = [
        "sim",
        "--scenario",
        scenario,
        "--profile",
        profile,
        "--report",
        report.to_str().unwrap_or_default(),
        "--qlog",
        qlog.to_str().unwrap_or_default(),
    ];
    // A simulated 39-s session takes a few seconds of CPU (up to a minute of wall time
    // on a loaded machine); five minutes means the simulator hangs.
    let Some(out) = run_braid_within(&args, Duration::from_secs(300)) else {
        return Err("the simulation did not finish within 300 s".into());
    };
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
    }
    let text = std::fs::read_to_string(&report).map_err(|e| e.to_string())?;
    let mut r: Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    let cuts = cut_failovers(&qlog, cut).map_err(|e| format!("qlog: {e}"))?;
    let _ = std::fs::remove_dir_all(&qlog);
    r["cut_failovers"] = cuts
        .iter()
        .map(|c| {
            serde_json::json!({
                "at_s": c.at_s, "det_ms": c.det_ms, "ms": c.ms,
                "survivor_srtt_ms": c.survivor_srtt_ms,
            })
        })
        .collect();
    Ok(r)
}

/// One path cut as the issue's goal measures it, from both ends' qlogs: `det_ms`, from the
/// cut to the sender's finding the path potentially failed; `ms`, from the cut to the
/// arrival at the receiver of the first data packet sent on another path at or after that
/// finding (lost data is queued before new data, so this is re-injected data when the cut
/// path had data in flight); `survivor_srtt_ms`, the sender's smoothed RTT of the path
/// that stayed up, at the cut. `None` where the sender found no failure (nothing was in
/// flight on the cut path) or no path stayed up.
#[derive(Debug, Default)]
struct CutFailover {
    at_s: f64,
    det_ms: Option<f64>,
    ms: Option<f64>,
    survivor_srtt_ms: Option<f64>,
}

/// The records of a JSON-SEQ qlog with a `time`, in order.
fn qlog_events(path: &std::path::Path) -> Result<Vec<Value>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut out = Vec::new();
    for rec in text.split('\u{1e}') {
        let rec = rec.trim();
        if rec.is_empty() {
            continue;
        }
        let v: Value = serde_json::from_str(rec).map_err(|e| e.to_string())?;
        if v["time"].is_number() {
            out.push(v);
        }
    }
    Ok(out)
}

/// The failover of every single-path cut of `cut` (both-path cuts have no survivor), from
/// the qlogs `braid sim --qlog` wrote into `dir`.
fn cut_failovers(dir: &std::path::Path, cut: &Cut) -> Result<Vec<CutFailover>, String> {
    let find = |side: &str| -> Result<std::path::PathBuf, String> {
        std::fs::read_dir(dir)
            .map_err(|e| e.to_string())?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .find(|p| p.to_string_lossy().ends_with(&format!("-{side}.qlog")))
            .ok_or_else(|| format!("no {side} qlog in {}", dir.display()))
    };
    let server = qlog_events(&find("server")?)?;
    let client = qlog_events(&find("client")?)?;
    let name = |e: &Value| e["name"].as_str().unwrap_or_default().to_string();
    let time = |e: &Value| e["time"].as_f64().unwrap_or(f64::NAN);
    let mut ids = std::collections::BTreeMap::new();
    for e in server.iter().filter(|e| name(e) == "braid:path_updated") {
        if e["data"]["state"] == "new" {
            ids.insert(
                e["data"]["role"].as_str().unwrap_or_default().to_string(),
                e["data"]["path_id"].as_u64(),
            );
        }
    }
    let mut arrivals = std::collections::HashMap::new();
    for e in client.iter().filter(|e| name(e) == "transport:packet_received") {
        let key = (e["data"]["path_id"].as_u64(), e["data"]["header"]["packet_number"].as_u64());
        arrivals.entry(key).or_insert_with(|| time(e));
    }
    let downs: Vec<(f64, &str)> =
        cut.events.iter().filter(|e| e.2 == "down").map(|e| (e.0 * 1e3, e.1)).collect();
    let mut out = Vec::new();
    for &(at, path) in &downs {
        let mut c = CutFailover { at_s: at / 1e3, ..CutFailover::default() };
        if downs.iter().any(|&(t, p)| t == at && p != path) {
            out.push(c);
            continue;
        }
        let Some(&id) = ids.get(path) else { return Err(format!("no path {path}")) };
        let end = downs
            .iter()
            .filter(|&&(t, p)| p == path && t > at)
            .map(|d| d.0)
            .fold(f64::INFINITY, f64::min);
        c.survivor_srtt_ms = server
            .iter()
            .take_while(|e| time(e) <= at)
            .filter(|e| {
                name(e) == "recovery:metrics_updated" && e["data"]["path_id"].as_u64() != id
            })
            .last()
            .and_then(|e| e["data"]["smoothed_rtt"].as_f64());
        let det = server.iter().find(|e| {
            name(e) == "braid:path_updated"
                && e["data"]["path_id"].as_u64() == id
                && e["data"]["state"] == "potentially_failed"
                && (at..end).contains(&time(e))
        });
        if let Some(det) = det.map(time) {
            c.det_ms = Some(det - at);
            c.ms = server
                .iter()
                .filter(|e| time(e) >= det && name(e) == "transport:packet_sent")
                .filter(|e| e["data"]["path_id"].as_u64() != id)
                .filter(|e| {
                    e["data"]["frames"]
                        .as_array()
                        .is_some_and(|f| f.iter().any(|f| f["frame_type"] == "data"))
                })
                .find_map(|e| {
                    let key = (
                        e["data"]["path_id"].as_u64(),
                        e["data"]["header"]["packet_number"].as_u64(),
                    );
                    arrivals.get(&key).copied()
                })
                .map(|t| t - at);
        }
        out.push(c);
    }
    Ok(out)
}

fn reliable(profile: &str) -> bool {
    !matches!(profile, "mptcp-rt" | "mp-marc")
}

/// Checks one run against the goals; returns the table row and the failures.
fn judge(cut: &Cut, profile: &str, r: &Value, failures: &mut Vec<String>) -> String {
    let st = &r["stream"];
    let frames = st["frames_total"].as_u64().unwrap_or(0);
    let lost = st["frames_lost"].as_u64().unwrap_or(u64::MAX);
    let stalls = st["stalls"].as_u64().unwrap_or(u64::MAX);
    let stall_s = st["stall_time_s"].as_f64().unwrap_or(f64::NAN);
    let failover = r["failover_time_s"].as_f64();
    let expect_frames = u64::from(cut.duration_s) * 25;
    // The session played to its end: frame slots for the whole duration but the launch
    // and start-up (at most 4 s, on a loaded machine) and the time stalled.
    let slack_s = 4.0 + if stall_s.is_finite() { stall_s } else { 0.0 };
    let played_to_end = frames as f64 + 25.0 * slack_s >= expect_frames as f64;
    let gap = KNOWN_GAPS.contains(&(cut.name, profile));
    // Stalls that began before the first cut are not the cut's (the adaptive policy starts
    // with a fraction of a second buffered, and a late message then stalls it): counted
    // apart. Real-time times are on the connection's clock, which starts a little after
    // the scenario's, so they are at most that much early.
    let cut_at = cut.events.iter().map(|e| e.0).fold(f64::INFINITY, f64::min);
    let before_cut = st["stall_starts_s"]
        .as_array()
        .map_or(0, |a| a.iter().filter(|t| t.as_f64().is_some_and(|t| t < cut_at)).count())
        as u64;
    let cut_stalls = stalls.saturating_sub(before_cut);
    let allowed_stalls =
        u64::from(cut.all_down_s > BUFFER_S || cut.longest_cut_s > BUFFER_S || gap);
    let mut bad = Vec::new();
    if !played_to_end {
        bad.push(format!("{frames} of ~{expect_frames} frames"));
    }
    if reliable(profile) && lost > 0 {
        bad.push(format!("{lost} frames lost"));
    }
    if cut_stalls > allowed_stalls {
        bad.push(format!("{cut_stalls} stalls after the cut > {allowed_stalls}"));
    }
    if !bad.is_empty() {
        failures.push(format!("{} {profile}: {}", cut.name, bad.join(", ")));
    }
    // The failover goal, one round trip of the surviving path + 200 ms: reported here and
    // in BENCHMARKS.md, not asserted (a measurement, not a pass/fail property).
    let goal = match (cut.survivor_rtt_ms, failover) {
        (Some(rtt), Some(f)) if f * 1e3 > (rtt + 200) as f64 => {
            format!("  MISS (> {} ms)", rtt + 200)
        }
        _ => String::new(),
    };
    format!(
        "{:<14} {:<20} frames {frames:>4}  lost {lost:>3}  stalls {stalls} ({stall_s:.2} s{})  failover {}{goal}{}  failures {}{}\n",
        cut.name,
        profile,
        if before_cut > 0 { format!(", {before_cut} before the cut") } else { String::new() },
        failover.map_or("-".to_string(), |f| format!("{:.0} ms", f * 1e3)),
        cut_failover(r),
        path_failures(r),
        if gap { "  (known gap)" } else { "" },
    )
}

/// The failover as the issue's goal measures it (simulated runs: [`cut_failovers`]), the
/// longest of the cut's episodes: from the cut to the first data delivered over another
/// path, against the surviving path's smoothed RTT at the cut + 200 ms.
fn cut_failover(r: &Value) -> String {
    let Some(cuts) = r["cut_failovers"].as_array() else { return String::new() };
    let worst = cuts
        .iter()
        .filter_map(|c| {
            Some((c["ms"].as_f64()?, c["det_ms"].as_f64()?, c["survivor_srtt_ms"].as_f64()?))
        })
        .max_by(|a, b| (a.0 - a.2).total_cmp(&(b.0 - b.2)));
    match worst {
        Some((ms, det, srtt)) => format!(
            "  cut to delivery {ms:.0} ms (detected {det:.0}; survivor SRTT {srtt:.0} ms{})",
            if ms > srtt + 200.0 { ", MISS" } else { "" }
        ),
        None if cuts.is_empty() => String::new(),
        None => "  cut to delivery -".to_string(),
    }
}

/// Failures detected per path, `name:count`.
fn path_failures(r: &Value) -> String {
    let paths = r["paths"].as_array().cloned().unwrap_or_default();
    paths
        .iter()
        .map(|p| {
            format!("{}:{}", p["name"].as_str().unwrap_or("?"), p["failures"].as_u64().unwrap_or(0))
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn registry_multipath_profiles_are_all_listed() {
    let out = run_braid(&["sim", "--scenario", "x.toml", "--profile", "no-such-profile"]);
    let text = String::from_utf8_lossy(&out.stderr).to_string();
    // The error lists the registry: `unknown profile `…` (known: a, b, …)`.
    let Some(known) = text.split("known: ").nth(1) else {
        // Parsing the scenario may fail first; ask with a real scenario then.
        let dir = TempDir::new("failover-registry");
        let s = scenario(&dir, &CUTS[0]);
        let out = run_braid(&["sim", "--scenario", &s, "--profile", "no-such-profile"]);
        let text = String::from_utf8_lossy(&out.stderr).to_string();
        let known = text.split("known: ").nth(1).unwrap_or_else(|| panic!("{text}"));
        return check_listed(known);
    };
    check_listed(known)
}

fn check_listed(known: &str) {
    let names: Vec<&str> = known.trim().trim_end_matches(')').split(", ").collect();
    for n in names {
        assert!(
            MULTIPATH.contains(&n)
                || SINGLE_PATH.contains(&n)
                || ALIASES.contains(&n)
                || n.starts_with("kernel-")
                // noq streams between processes (`serve`/`play`) and across the TUN bed,
                // never in this suite's in-process real-time sessions.
                || n.starts_with("noq-multipath"),
            "profile {n} is neither in MULTIPATH nor in SINGLE_PATH of this test"
        );
    }
}

/// Open defects the simulated matrix shows, as (cut, profile, what happens): printed in the
/// table instead of failing the matrix, until fixed. None at present.
const KNOWN_SIM: &[(&str, &str, &str)] = &[];

/// Simulations the simulated matrix runs at once (`BRAID_FAILOVER_SIM_JOBS` overrides it):
/// one per core. A simulation is deterministic whatever the machine's load, so running
/// them side by side changes no result, only the wall time.
fn sim_jobs() -> usize {
    std::env::var("BRAID_FAILOVER_SIM_JOBS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|&n| n > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()))
}

/// `f` over every item of `items`, `jobs` at a time; the results in the order of `items`.
fn parallel_map<T: Sync, R: Send>(items: &[T], jobs: usize, f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: std::sync::Mutex<Vec<Option<R>>> =
        std::sync::Mutex::new((0..items.len()).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..jobs.clamp(1, items.len().max(1)) {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(item) = items.get(i) else { break };
                    let r = f(item);
                    let mut all = results.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                    if let Some(slot) = all.get_mut(i) {
                        *slot = Some(r);
                    }
                }
            });
        }
    });
    let all = results.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner);
    all.into_iter().map(|r| r.unwrap_or_else(|| panic!("a worker died"))).collect()
}

#[test]
fn every_multipath_profile_survives_every_cut_in_the_simulator() {
    let _one = one_at_a_time();
    let dir = TempDir::new("failover-sim");
    let scenarios: Vec<String> = CUTS.iter().map(|c| scenario(&dir, c)).collect();
    // `BRAID_FAILOVER_CUTS=wifi-cut-8s,lte-cut-8s` runs only those cuts.
    let only = std::env::var("BRAID_FAILOVER_CUTS").ok();
    let wanted = |c: usize| {
        only.as_deref()
            .is_none_or(|o| o.split(',').any(|n| CUTS.get(c).is_some_and(|c| c.name == n.trim())))
    };
    let cases: Vec<(usize, &str)> = (0..CUTS.len())
        .filter(|&c| wanted(c))
        .flat_map(|c| MULTIPATH.iter().map(move |&p| (c, p)))
        .collect();
    let started = std::time::Instant::now();
    let jobs = sim_jobs();
    let reports =
        parallel_map(&cases, jobs, |&(c, p)| sim_report(&dir, &scenarios[c], &CUTS[c], p));
    let mut table = String::new();
    let mut failures = Vec::new();
    for (&(c, p), report) in cases.iter().zip(reports) {
        let cut = &CUTS[c];
        let known = KNOWN_SIM.iter().find(|k| k.0 == cut.name && k.1 == p);
        let mut found = Vec::new();
        match report {
            Ok(r) => table += &judge(cut, p, &r, &mut found),
            Err(e) => found.push(format!("{} {p}: {e}", cut.name)),
        }
        match known {
            Some(k) if !found.is_empty() => table += &format!("  known defect: {}\n", k.2),
            _ => failures.extend(found),
        }
    }
    println!(
        "{table}{} simulations, {jobs} at a time: {:.0} s",
        cases.len(),
        started.elapsed().as_secs_f64()
    );
    assert!(failures.is_empty(), "{}\n{table}", failures.join("\n"));
}

/// Real-time sessions run at once (`BRAID_FAILOVER_JOBS` overrides it). One session (the
/// relay emulator, the server and the client with its decoder in one process) takes about
/// a fifth of a core in a debug build, so three fit on two cores with room to spare; the
/// suite's design was measured at one and at three at a time with the same results
/// (BENCHMARKS.md, "Failover in real time: every profile and every cut in the suite").
const REAL_TIME_JOBS: usize = 3;

/// The suite's real-time design: every multipath profile on one cut at least, every cut on
/// two profiles at least, mixing scheduler families on each cut (minRTT, round-robin and
/// redundant, rate-based, energy-aware, EDPF family, coded, QoE re-injection). The 30-s cut
/// is the longest session, so it has two profiles; the rest have four or five. The whole
/// matrix (every profile on every cut) is the ignored test below.
const REAL_TIME_DESIGN: &[(&str, &[&str])] = &[
    (
        "wifi-cut-3s",
        &["mptcp", "mptcp-olia", "handover", "sedpf-fec2", "mptcp-qoe-no-copies", "mptcp-qe-band"],
    ),
    (
        "wifi-cut-8s",
        &["mptcp-rt", "mptcp-qe", "mp-tfrc", "edpf", "blest", "mptcp-qe-qoe-no-copies"],
    ),
    ("wifi-cut-30s", &["mptcp-uncoupled", "mptcp-qoe", "mptcp-qoe-dup"]),
    ("lte-cut-8s", &["roundrobin", "emtcp", "mptcp-qe-no-aesum", "sedpf", "sedpf-fec4-qoe"]),
    ("wifi-flapping", &["redundant", "emtcp-allowance", "mptcp-qe-no-abcwnd", "sedpf-fec8", "ecf"]),
    (
        "both-cut-3s",
        &["mp-marc", "mptcp-qe-no-wesack", "mptcp-qe-paper-rule", "sedpf-fec4", "mptcp-qe-qoe"],
    ),
];

fn real_time_jobs() -> usize {
    std::env::var("BRAID_FAILOVER_JOBS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|&n| n > 0)
        .unwrap_or(REAL_TIME_JOBS)
}

#[test]
fn the_real_time_design_covers_every_profile_and_every_cut() {
    for p in MULTIPATH {
        assert!(
            REAL_TIME_DESIGN.iter().any(|(_, ps)| ps.contains(p)),
            "profile {p} is on no cut of REAL_TIME_DESIGN"
        );
    }
    for c in CUTS {
        let n = REAL_TIME_DESIGN.iter().find(|(name, _)| *name == c.name).map_or(0, |d| d.1.len());
        assert!(n >= 2, "cut {} has {n} profiles in REAL_TIME_DESIGN", c.name);
    }
    for (name, ps) in REAL_TIME_DESIGN {
        assert!(CUTS.iter().any(|c| c.name == *name), "no cut named {name}");
        for p in *ps {
            assert!(MULTIPATH.contains(p), "{p} is not a multipath profile");
        }
    }
}

/// Every multipath profile and every cut in real time through the relay emulator (`braid
/// demo --headless`), as [`REAL_TIME_DESIGN`] pairs them, [`REAL_TIME_JOBS`] sessions at a
/// time.
#[test]
fn streams_survive_cuts_in_real_time() {
    let cases: Vec<(&'static str, &'static str)> =
        REAL_TIME_DESIGN.iter().flat_map(|(c, ps)| ps.iter().map(move |&p| (*c, p))).collect();
    real_time_matrix("failover-rt", &cases, real_time_jobs());
}

/// Every multipath profile through every cut in real time: 156 sessions, about 52 minutes
/// of sessions, [`REAL_TIME_JOBS`] at a time (`cargo build -p braid-player --bin braid &&
/// cargo test -p braid-tests --test failover -- --ignored --nocapture`;
/// `BRAID_FAILOVER_CUTS` names the cuts to run, comma-separated). BENCHMARKS.md's
/// real-time failover table comes from it.
#[test]
#[ignore = "156 real-time sessions, about 18 minutes at three at a time; the suite runs REAL_TIME_DESIGN"]
fn every_multipath_profile_survives_every_cut_in_real_time() {
    // `BRAID_FAILOVER_CUTS=wifi-cut-8s,both-cut-3s` runs only those cuts,
    // `BRAID_FAILOVER_PROFILES=mptcp,handover` only those profiles.
    let only = std::env::var("BRAID_FAILOVER_CUTS").ok();
    let wanted =
        |name: &str| only.as_deref().is_none_or(|o| o.split(',').any(|c| c.trim() == name));
    let only_p = std::env::var("BRAID_FAILOVER_PROFILES").ok();
    let wanted_p =
        |name: &str| only_p.as_deref().is_none_or(|o| o.split(',').any(|c| c.trim() == name));
    let profiles: Vec<&'static str> = MULTIPATH.iter().copied().filter(|p| wanted_p(p)).collect();
    let cases: Vec<(&'static str, &'static str)> = CUTS
        .iter()
        .filter(|c| wanted(c.name))
        .flat_map(|c| profiles.iter().map(move |&p| (c.name, p)))
        .collect();
    real_time_matrix("failover-rt-all", &cases, real_time_jobs());
}

/// One real-time session's outcome: the report, or why there is none.
type Outcome = Result<Value, String>;

/// Plays one (cut, profile) with `braid demo --headless` and reads its report.
fn real_time_session(dir: &TempDir, scenario: &str, cut: &Cut, profile: &str) -> Outcome {
    let report = dir.join(&format!("rt-{}-{profile}.json", cut.name));
    let report_arg = report.to_str().unwrap_or_default();
    // No baseline beside energy-aware profiles: each session runs alone, as the
    // matrix's goals were measured.
    let args = [
        "demo",
        "--headless",
        "--no-baseline",
        "--scenario",
        scenario,
        "--profile",
        profile,
        "--report",
        report_arg,
    ];
    let limit = Duration::from_secs(u64::from(cut.duration_s) + 40);
    match run_braid_within(&args, limit) {
        None => Err(format!("did not finish within {limit:?}")),
        Some(o) if !o.status.success() => {
            Err(String::from_utf8_lossy(&o.stderr).trim().to_string())
        }
        Some(_) => {
            let text = std::fs::read_to_string(&report).map_err(|e| format!("report: {e}"))?;
            serde_json::from_str::<Value>(&text).map_err(|e| format!("report: {e}"))
        }
    }
}

/// Plays each (cut, profile) of `cases`, `jobs` sessions at a time (the longest cuts
/// first, so the last sessions to start are short), judges each against the goals and
/// prints the table in the order of `cases`.
fn real_time_matrix(tag: &str, cases: &[(&'static str, &'static str)], jobs: usize) {
    let _one = one_at_a_time();
    let dir = TempDir::new(tag);
    let scenarios: Vec<String> = CUTS.iter().map(|c| scenario(&dir, c)).collect();
    let mut order: Vec<usize> = (0..cases.len()).collect();
    let duration = |i: usize| {
        let name = cases.get(i).map_or("", |c| c.0);
        CUTS.iter().find(|c| c.name == name).map_or(0, |c| c.duration_s)
    };
    order.sort_by_key(|&i| std::cmp::Reverse(duration(i)));
    let started = std::time::Instant::now();
    let outcomes = parallel_map(&order, jobs, |&i| {
        let Some(&(name, profile)) = cases.get(i) else {
            return Err("no such case".to_string());
        };
        let c = CUTS.iter().position(|c| c.name == name);
        match (c.and_then(|c| CUTS.get(c)), c.and_then(|c| scenarios.get(c))) {
            (Some(cut), Some(sc)) => real_time_session(&dir, sc, cut, profile),
            _ => Err(format!("no cut named {name}")),
        }
    });
    let mut results: Vec<Option<Outcome>> = vec![None; cases.len()];
    for (&i, out) in order.iter().zip(outcomes) {
        if let Some(slot) = results.get_mut(i) {
            *slot = Some(out);
        }
    }
    let mut table = String::new();
    let mut failures = Vec::new();
    for (&(name, profile), r) in cases.iter().zip(results) {
        let Some(cut) = CUTS.iter().find(|c| c.name == name) else { continue };
        match r {
            Some(Ok(r)) => table += &judge(cut, profile, &r, &mut failures),
            Some(Err(e)) => failures.push(format!("{name} {profile}: {e}")),
            None => failures.push(format!("{name} {profile}: not run")),
        }
    }
    println!(
        "{table}{} sessions, {jobs} at a time: {:.0} s",
        cases.len(),
        started.elapsed().as_secs_f64()
    );
    assert!(failures.is_empty(), "{}\n{table}", failures.join("\n"));
}

/// Every path down for longer than the idle timeout (the client announces 5 s with the
/// scenario's `idle_timeout_s`, below the server's default 30 s, and the smaller counts at
/// both ends): the session ends with one error line saying nothing arrived on any path,
/// and the report of what played is still written — in the simulator and in real time
/// alike.
#[test]
fn every_path_down_past_the_idle_timeout_ends_with_one_error_line_and_a_report() {
    let _one = one_at_a_time();
    let dir = TempDir::new("failover-all-down");
    let cut = Cut {
        name: "both-cut-12s",
        duration_s: 20,
        events: &[(4.0, "wifi", "down"), (4.0, "lte", "down"), (16.0, "wifi", "up")],
        all_down_s: 12.0,
        longest_cut_s: 12.0,
        survivor_rtt_ms: None,
    };
    let s = scenario(&dir, &cut);
    let text = std::fs::read_to_string(&s)
        .unwrap()
        .replace("seed = 1\n", "seed = 1\nidle_timeout_s = 5\n");
    std::fs::write(&s, text).unwrap();
    for front in ["sim", "demo"] {
        let report = dir.join(&format!("{front}-all-down.json"));
        let mut args = vec![front];
        if front == "demo" {
            args.push("--headless");
        }
        args.extend(["--scenario", &s, "--profile", "mptcp"]);
        args.extend(["--report", report.to_str().unwrap_or_default()]);
        let limit = Duration::from_secs(u64::from(cut.duration_s) + 40);
        let out = run_braid_within(&args, limit)
            .unwrap_or_else(|| panic!("{front}: did not end within {limit:?}"));
        let stderr = String::from_utf8_lossy(&out.stderr);
        let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
        assert!(!out.status.success(), "{front}: the lost session must fail\n{stderr}");
        assert_eq!(lines.len(), 1, "{front}: one error line, got\n{stderr}");
        assert!(
            lines[0].starts_with("error: ") && lines[0].contains("nothing received on any path"),
            "{front}: {}",
            lines[0]
        );
        let text = std::fs::read_to_string(&report)
            .unwrap_or_else(|e| panic!("{front}: the report was not written: {e}"));
        let r: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{front}: {e}"));
        let shown = r["stream"]["frames_total"].as_u64().unwrap_or(0);
        let duration = r["duration_s"].as_f64().unwrap_or(f64::NAN);
        // What played before the cut is in it (4 s at 25 fps, less start-up), and the
        // session ended at the timeout: cut at 4 s + the buffer + 5 s, not at 20 s.
        assert!(shown >= 50, "{front}: {shown} frames in the report");
        assert!(duration > 8.0 && duration < 16.0, "{front}: the session lasted {duration} s");
    }
}
