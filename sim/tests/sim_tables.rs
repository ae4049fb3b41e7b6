//! Simulator runs pinned as text tables (insta snapshots), in the manner of smoltcp's
//! `tests/netsim.rs`: any change to the wire format, a controller, a scheduler or the link
//! models that moves a figure shows up here, and the commit that re-pins a table says why.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use braid_netem::scenario::Scenario;
use braid_sim::{self as sim, RunOptions, SimResult};
use braid_transport::profile;

fn scenarios_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/scenarios")
}

fn load(path: &Path) -> Scenario {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let base = path.parent().unwrap_or(Path::new("."));
    Scenario::parse(&text, &path.display().to_string(), base).unwrap_or_else(|e| panic!("{e}"))
}

fn run(s: &Scenario, profile: &str) -> SimResult {
    let p = profile::lookup(profile).unwrap_or_else(|e| panic!("{e}"));
    sim::run_detailed(s, &p, &RunOptions::default()).unwrap_or_else(|e| panic!("{e}"))
}

/// The figures a reader compares, one run per block; floats rounded so that the table
/// reads well (any real change still moves the integers).
fn table(runs: &[(&str, SimResult)]) -> String {
    let mut out = String::new();
    for (profile, r) in runs {
        let rep = &r.report;
        let _ = writeln!(
            out,
            "{profile:<18} goodput {:>10.0} bit/s  delivered {:>9} B  retx {:>8} B  lost {:>5}  delay p50/p95/p99 {:.1}/{:.1}/{:.1} ms  events {}",
            rep.goodput_bps,
            rep.bytes_delivered,
            rep.retransmitted_bytes,
            rep.lost_packets,
            rep.delay_ms.p50,
            rep.delay_ms.p95,
            rep.delay_ms.p99,
            r.events,
        );
        for p in &rep.paths {
            let _ = writeln!(
                out,
                "  path {:<6} {:<5} {:>10.0} bit/s  rtt {:>7.1} ms  energy {:>7.2} J  active {:>6.2} s",
                p.name, p.role, p.throughput_bps, p.rtt_ms, p.energy_j, p.time_active_s
            );
        }
        for c in &r.cross {
            let _ = writeln!(
                out,
                "  cross {:<6} on {:<10} flows {:>3}  {:>10.0} bit/s",
                c.kind, c.target, c.flows, c.throughput_bps
            );
        }
        if let Some(s) = &rep.stream {
            let _ = writeln!(
                out,
                "  stream stalls {} ({:.2} s)  startup {:.3} s  read {:.0} bit/s",
                s.stalls, s.stall_time_s, s.startup_delay_s, s.read_rate_bps
            );
        }
        if let Some(e) = &rep.energy {
            let _ = writeln!(
                out,
                "  energy {:.2} J  {:.0} mW  {:.0} bit/J  switches {}  partial {:.2} s",
                e.total_j,
                e.avg_power_mw,
                e.efficiency_bits_per_j,
                e.mode_switches,
                e.time_in_partial_s
            );
        }
        let _ = writeln!(out, "  check {:?}  unroutable {}", r.check, r.unroutable);
    }
    out
}

#[test]
fn two_paths_table() {
    let s = load(&scenarios_dir().join("two-paths.toml"));
    let runs: Vec<_> = ["tcp", "mptcp", "mptcp-olia", "roundrobin", "redundant"]
        .into_iter()
        .map(|p| (p, run(&s, p)))
        .collect();
    insta::assert_snapshot!(table(&runs));
}

#[test]
fn cross_traffic_table() {
    let s = load(&scenarios_dir().join("mixed-cross.toml"));
    let runs: Vec<_> = ["mptcp", "mptcp-uncoupled"].into_iter().map(|p| (p, run(&s, p))).collect();
    insta::assert_snapshot!(table(&runs));
}

/// A mahimahi trace the test writes itself: delivery opportunities per millisecond
/// following a slow deterministic wave between about 0 and 24 Mbit/s (period 2 s).
fn write_wave_trace(dir: &Path) -> PathBuf {
    let mut text = String::new();
    let mut credit = 0.0f64;
    for ms in 0..2000u32 {
        // Opportunities per ms: 1 + sin, i.e. 0..2 per ms (one = 1500 bytes = 12 Mbit/s).
        credit += 1.0 + (f64::from(ms) * std::f64::consts::TAU / 2000.0).sin();
        while credit >= 1.0 {
            let _ = writeln!(text, "{}", ms + 1);
            credit -= 1.0;
        }
    }
    let path = dir.join("wave.trace");
    std::fs::write(&path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    path
}

#[test]
fn mahimahi_trace_table() {
    let dir = std::env::temp_dir().join(format!("braid-sim-tables-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    write_wave_trace(&dir);
    let text = "name = \"wave\"\nduration_s = 6\nseed = 2\n\
        [[path]]\nname = \"lte\"\nrole = \"lte\"\n\
        down = { trace = \"wave.trace\", delay_ms = 25 }\n\
        up = { rate = \"10mbit\", delay_ms = 25 }\n\
        [[path]]\nname = \"wifi\"\nrole = \"wifi\"\n\
        down = { rate = \"4mbit\", delay_ms = 10 }\n\
        up = { rate = \"4mbit\", delay_ms = 10 }\n";
    let s = Scenario::parse(text, "wave.toml", &dir).unwrap_or_else(|e| panic!("{e}"));
    let runs: Vec<_> = ["tcp", "mptcp"].into_iter().map(|p| (p, run(&s, p))).collect();
    let _ = std::fs::remove_dir_all(&dir);
    insta::assert_snapshot!(table(&runs));
}

#[test]
fn mptcp_qe_paper_scenario_table() {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../assets/scenarios/mptcp-qe-paper.toml");
    let s = load(&path);
    let runs = [("mptcp-qe", run(&s, "mptcp-qe"))];
    insta::assert_snapshot!(table(&runs));
}
