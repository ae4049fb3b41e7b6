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
        ("sim/tests/scenarios/mixed-cross.toml", "mptcp"),
        ("sim/tests/scenarios/lossy-path.toml", "mptcp-qe"),
    ] {
        let a = sim_outputs(&dir, "a", scenario, profile);
        let b = sim_outputs(&dir, "b", scenario, profile);
        assert!(!a.0.is_empty() && !a.1.is_empty(), "{scenario}: empty output");
        assert!(a.0 == b.0, "{scenario} {profile}: the two session reports differ");
        assert!(a.1 == b.1, "{scenario} {profile}: the two time series differ");
    }
}

/// Every file of `dir`, by name, with its bytes.
fn files(dir: &std::path::Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(Result::ok)
        .map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let bytes = std::fs::read(e.path()).unwrap_or_default();
            (name, bytes)
        })
        .collect();
    v.sort();
    v
}

#[test]
fn a_comparison_writes_the_same_files_for_any_number_of_jobs() {
    let dir = TempDir::new("compare-jobs");
    let mut outputs = Vec::new();
    for jobs in ["1", "2"] {
        let out_dir = dir.join(&format!("jobs{jobs}"));
        let out = run_braid(&[
            "compare",
            "--scenario",
            "sim/tests/scenarios/lossy-path.toml",
            "--profiles",
            "mptcp,tcp,edpf",
            "--seeds",
            "2",
            "--jobs",
            jobs,
            "--out",
            out_dir.to_str().unwrap_or_default(),
        ]);
        assert!(
            out.status.success(),
            "braid compare --jobs {jobs} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        outputs.push((out.stdout, files(&out_dir)));
    }
    let (table1, files1) = &outputs[0];
    let (table2, files2) = &outputs[1];
    assert_eq!(table1, table2, "the tables differ between --jobs 1 and --jobs 2");
    let names = |f: &[(String, Vec<u8>)]| f.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
    assert_eq!(names(files1), names(files2), "different files written");
    assert!(names(files1).iter().any(|n| n == "compare.json"), "no compare.json");
    assert_eq!(names(files1).iter().filter(|n| n.ends_with(".csv")).count(), 6, "one CSV per run");
    for ((name, a), (_, b)) in files1.iter().zip(files2) {
        assert!(!a.is_empty(), "{name} is empty");
        assert!(a == b, "{name} differs between --jobs 1 and --jobs 2");
    }
}

#[test]
fn the_null_cipher_gives_the_results_of_the_real_one() {
    // The simulator's default null cipher keeps packet sizes and code paths, so the report
    // and series of `--protect` (AES-128-GCM) are the same bytes.
    let dir = TempDir::new("protect");
    let run = |tag: &str, protect: bool| {
        let report = dir.join(&format!("{tag}.json"));
        let csv = dir.join(&format!("{tag}.csv"));
        let mut args = vec![
            "sim",
            "--scenario",
            "sim/tests/scenarios/lossy-path.toml",
            "--profile",
            "mptcp",
            "--report",
            report.to_str().unwrap_or_default(),
            "--csv",
            csv.to_str().unwrap_or_default(),
        ];
        if protect {
            args.push("--protect");
        }
        let out = run_braid(&args);
        assert!(out.status.success(), "braid sim failed: {}", String::from_utf8_lossy(&out.stderr));
        (std::fs::read(&report).unwrap_or_default(), std::fs::read(&csv).unwrap_or_default())
    };
    let null = run("null", false);
    let aead = run("aead", true);
    assert!(!null.0.is_empty() && !null.1.is_empty());
    assert!(null.0 == aead.0, "the session reports differ between the null cipher and --protect");
    assert!(null.1 == aead.1, "the time series differ between the null cipher and --protect");
}
