//! `--cc NAME` and `PROFILE+CC` (docs/REFERENCE.md): the controller replaces the
//! profile's on every path in simulated runs (and the run stays deterministic), compare
//! keeps the `PROFILE+CC` name in its table and compare.json, and unknown names or
//! impossible combinations are one error line naming both.

use braid_tests::{TempDir, assert_clean_error, run_braid};

/// Two paths with deep queues, a bulk transfer: loss-based and model-based controllers
/// leave different queues and so different RTTs and goodputs.
fn scenario(dir: &TempDir) -> String {
    let path = dir.join("two-paths-bulk.toml");
    std::fs::write(
        &path,
        r#"name = "two-paths-bulk"
duration_s = 8
seed = 5
[[path]]
name = "wifi"
role = "wifi"
down = { rate = "4mbit", delay_ms = 15, queue_bytes = 120000 }
up = { rate = "4mbit", delay_ms = 15 }
[[path]]
name = "lte"
role = "lte"
down = { rate = "6mbit", delay_ms = 35, queue_bytes = 200000 }
up = { rate = "2mbit", delay_ms = 35 }
[workload]
kind = "bulk"
"#,
    )
    .unwrap();
    path.to_str().unwrap().to_string()
}

fn sim(scenario: &str, dir: &TempDir, tag: &str, extra: &[&str]) -> serde_json::Value {
    let report = dir.join(&format!("{tag}.json"));
    let mut args = vec!["sim", "--scenario", scenario, "--report", report.to_str().unwrap()];
    args.extend_from_slice(extra);
    let out = run_braid(&args);
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap()
}

/// The report without its `profile` name, to compare runs.
fn numbers(mut r: serde_json::Value) -> serde_json::Value {
    r.as_object_mut().unwrap().remove("profile");
    r
}

#[test]
fn cc_replaces_the_controller_of_a_simulated_run() {
    let dir = TempDir::new("cc-sim");
    let s = scenario(&dir);
    let plain = sim(&s, &dir, "plain", &["--profile", "mptcp"]);
    let lia = sim(&s, &dir, "lia", &["--profile", "mptcp", "--cc", "lia"]);
    let bbr = sim(&s, &dir, "bbr", &["--profile", "mptcp", "--cc", "bbr"]);
    let bbr2 = sim(&s, &dir, "bbr2", &["--profile", "mptcp+bbr"]);
    let cubic = sim(&s, &dir, "cubic", &["--profile", "mptcp", "--cc", "cubic"]);
    assert_eq!(plain["profile"], "mptcp");
    assert_eq!(lia["profile"], "mptcp+lia");
    assert_eq!(bbr["profile"], "mptcp+bbr");
    assert_eq!(cubic["profile"], "mptcp+cubic");
    // mptcp's own controller is LIA: naming it changes nothing but the name.
    assert_eq!(numbers(plain.clone()), numbers(lia));
    // Another controller gives another run; the same one the same run.
    assert_ne!(numbers(plain.clone()), numbers(bbr.clone()));
    assert_ne!(numbers(plain.clone()), numbers(cubic.clone()));
    assert_ne!(numbers(bbr.clone()), numbers(cubic));
    assert_eq!(bbr, bbr2, "--cc bbr and PROFILE+CC are the same run");
    let again = sim(&s, &dir, "bbr3", &["--profile", "mptcp", "--cc", "bbr"]);
    assert_eq!(bbr, again, "deterministic");
    // BBR keeps the deep queues short: a smaller RTT than LIA on both paths.
    for p in 0..2 {
        let rtt = |r: &serde_json::Value| r["paths"][p]["rtt_ms"].as_f64().unwrap();
        assert!(rtt(&bbr) < rtt(&plain), "path {p}: bbr {} vs lia {}", rtt(&bbr), rtt(&plain));
    }
    // --rtt-csv: the sender's RTT per path, never below the base RTT (30 and 70 ms).
    let csv = dir.join("rtt.csv");
    let out = run_braid(&[
        "sim",
        "--scenario",
        &s,
        "--profile",
        "mptcp+bbr",
        "--rtt-csv",
        csv.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(&csv).unwrap();
    assert!(text.starts_with("t_s,wifi_rtt_ms,lte_rtt_ms\n"), "{text}");
    let rows: Vec<Vec<f64>> =
        text.lines().skip(1).map(|l| l.split(',').map(|x| x.parse().unwrap()).collect()).collect();
    assert!(rows.len() >= 70, "{} rows", rows.len());
    for (col, base) in [(1, 30.0), (2, 70.0)] {
        let v: Vec<f64> = rows.iter().map(|r| r[col]).filter(|&x| x > 0.0).collect();
        assert!(v.len() > 40 && v.iter().all(|&x| x >= base), "column {col}: {v:?}");
    }
    // A one-path profile takes a controller too.
    let tcp = sim(&s, &dir, "tcp", &["--profile", "tcp"]);
    let tcp_cubic = sim(&s, &dir, "tcp-cubic", &["--profile", "tcp", "--cc", "cubic"]);
    assert_eq!(tcp_cubic["profile"], "tcp+cubic");
    assert_ne!(numbers(tcp), numbers(tcp_cubic));
}

#[test]
fn compare_keeps_profile_plus_cc_names() {
    let dir = TempDir::new("cc-compare");
    let s = scenario(&dir);
    let out_dir = dir.join("out");
    let out = run_braid(&[
        "compare",
        "--scenario",
        &s,
        "--profiles",
        "mptcp,mptcp+bbr,tcp+cubic",
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("mptcp+bbr") && table.contains("tcp+cubic"), "{table}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("compare.json")).unwrap())
            .unwrap();
    let names: Vec<&str> = json["profiles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["profile"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["mptcp", "mptcp+bbr", "tcp+cubic"]);
    // The compare row is the same run as `braid sim --cc`.
    let bbr = sim(&s, &dir, "bbr", &["--profile", "mptcp", "--cc", "bbr"]);
    assert_eq!(json["profiles"][1]["runs"][0]["goodput_bps"], bbr["goodput_bps"]);
    // --cc applies to the profiles without their own +CC.
    let out =
        run_braid(&["compare", "--scenario", &s, "--profiles", "mptcp,tcp+reno", "--cc", "cubic"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("mptcp+cubic") && table.contains("tcp+reno"), "{table}");
}

#[test]
fn unknown_or_impossible_controllers_are_one_error_line_naming_both() {
    let dir = TempDir::new("cc-errors");
    let s = scenario(&dir);
    let clip = dir.join("none.mp4");
    let clip = clip.to_str().unwrap();
    let cases: Vec<(Vec<&str>, &str, &str)> = vec![
        (vec!["sim", "--scenario", &s, "--profile", "mptcp", "--cc", "vegas"], "vegas", "mptcp"),
        (vec!["sim", "--scenario", &s, "--profile", "tfrc", "--cc", "bbr"], "bbr", "tfrc"),
        (vec!["sim", "--scenario", &s, "--profile", "tcp", "--cc", "lia"], "lia", "tcp"),
        (vec!["compare", "--scenario", &s, "--profiles", "mptcp,tfrc+bbr"], "bbr", "tfrc"),
        (vec!["compare", "--scenario", &s, "--profiles", "mp-marc+cubic"], "cubic", "mp-marc"),
        (vec!["compare", "--scenario", &s, "--profiles", "mptcp+vegas"], "vegas", "mptcp"),
        (vec!["serve", clip, "--listen", "127.0.0.1:0", "--cc", "vegas"], "vegas", "mptcp"),
        (vec!["play", "127.0.0.1:9", "--profile", "marc", "--cc", "reno"], "reno", "marc"),
        (vec!["perf", "server", "--listen", "127.0.0.1:0", "--cc", "vegas"], "vegas", "mptcp"),
        (vec!["perf", "client", "127.0.0.1:9", "--profile", "tfrc", "--cc", "bbr"], "bbr", "tfrc"),
    ];
    for (args, cc, profile) in cases {
        let line = assert_clean_error(&run_braid(&args));
        assert!(
            line.contains(&format!("`{cc}`")) && line.contains(&format!("`{profile}`")),
            "{args:?}: {line}"
        );
    }
}

#[test]
fn perf_scenario_mode_runs_with_the_chosen_controller() {
    // Real time, in-process: server, emulated paths and client with BBR as the sender.
    let dir = TempDir::new("cc-perf");
    let s = scenario(&dir);
    let out = run_braid(&[
        "perf",
        "client",
        "--scenario",
        &s,
        "--profile",
        "tcp",
        "--cc",
        "bbr",
        "-t",
        "2",
        "-J",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let bps = json["end"]["sum_received"]["bits_per_second"].as_f64().unwrap();
    // One 4 Mbit/s path: BBR fills most of it within two seconds.
    assert!(bps > 1.5e6 && bps < 4.2e6, "{bps}");
}
