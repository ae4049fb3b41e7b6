//! Same scenario and seed, same bytes out: `braid sim` run twice, in separate processes,
//! writes byte-identical session reports and time series.

use braid_tests::{TempDir, run_braid};

fn sim_outputs(dir: &TempDir, tag: &str, scenario: &str, profile: &str) -> (Vec<u8>, Vec<u8>) {
    let report = dir.join(&format!("{tag}.json"));
    let csv = dir.join(&format!("{tag}.csv"));
    let out = run_braid(&[
        "sim",
        "--scenario",
        scenario,
        "--profile",
        profile,
        "--report",
        report.to_str().unwrap_or_default(),
        "--csv",
        csv.to_str().unwrap_or_default(),
    ]);
    assert!(out.status.success(), "braid sim failed: {}", String::from_utf8_lossy(&out.stderr));
    let read =
        |p: &std::path::Path| std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    (read(&report), read(&csv))
}

#[test]
fn a_scenario_run_twice_in_separate_processes_writes_identical_bytes() {
    let dir = TempDir::new("determinism");
    for (scenario, profile) in [
        ("transport/tests/scenarios/mixed-cross.toml", "mptcp"),
        ("transport/tests/scenarios/lossy-path.toml", "mptcp-qe"),
    ] {
        let a = sim_outputs(&dir, "a", scenario, profile);
        let b = sim_outputs(&dir, "b", scenario, profile);
        assert!(!a.0.is_empty() && !a.1.is_empty(), "{scenario}: empty output");
        assert!(a.0 == b.0, "{scenario} {profile}: the two session reports differ");
        assert!(a.1 == b.1, "{scenario} {profile}: the two time series differ");
    }
}
