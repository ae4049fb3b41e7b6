//! `braid repro NAME`: a short run per reproduction, checking the table's rows and the
//! shape of `DIR/repro.json` (docs/REFERENCE.md). The figures themselves come from full runs
//! (BENCHMARKS.md); these runs are shortened where the command allows it.

use std::collections::BTreeSet;
use std::time::Duration;

use braid_tests::{TempDir, assert_clean_error, run_braid, run_braid_within};
use serde_json::Value;

/// Runs `braid repro ARGS --out DIR` and returns (stdout, repro.json).
fn repro(args: &[&str], dir: &TempDir, limit: Duration) -> (String, Value) {
    let out_dir = dir.join("out");
    let out_arg = out_dir.to_string_lossy().to_string();
    let mut all = vec!["repro"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--out", &out_arg]);
    let out = run_braid_within(&all, limit).expect("braid repro finished in time");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(out_dir.join("repro.json")).expect("repro.json written");
    (String::from_utf8_lossy(&out.stdout).into_owned(), serde_json::from_str(&text).unwrap())
}

/// Every row has the fields of docs/REFERENCE.md with the right types; returns the rows.
fn rows_of(j: &Value, name: &str, seeds: usize) -> Vec<Value> {
    assert_eq!(j["name"], name);
    assert_eq!(j["seeds"].as_array().map(Vec::len), Some(seeds), "{}", j["seeds"]);
    let rows = j["rows"].as_array().expect("rows").clone();
    assert!(!rows.is_empty());
    for r in &rows {
        assert!(r["metric"].is_string() && r["profile"].is_string(), "{r}");
        assert!(r["ours"].as_f64().is_some_and(f64::is_finite), "{r}");
        assert!(r["ours_sd"].as_f64().is_some_and(|v| v >= 0.0), "{r}");
        for k in ["paper", "ours_ratio", "paper_ratio"] {
            assert!(r[k].is_null() || r[k].is_f64(), "{k}: {r}");
        }
        assert!(r["ratio_to"].is_null() || r["ratio_to"].is_string(), "{r}");
    }
    rows
}

fn find<'a>(rows: &'a [Value], metric: &str, profile: &str, base: Option<&str>) -> &'a Value {
    rows.iter()
        .find(|r| {
            r["metric"] == metric
                && r["profile"] == profile
                && base.is_none_or(|b| r["ratio_to"] == b)
        })
        .unwrap_or_else(|| panic!("no row {metric} / {profile} / {base:?}"))
}

#[test]
fn repro_mptcp_qe_lists_every_profile_and_the_papers_ratios() {
    let dir = TempDir::new("repro-mptcp-qe");
    let (stdout, j) =
        repro(&["mptcp-qe", "--seeds", "1", "--duration", "4"], &dir, Duration::from_secs(600));
    let rows = rows_of(&j, "mptcp-qe", 1);
    let profiles: BTreeSet<&str> = rows.iter().filter_map(|r| r["profile"].as_str()).collect();
    for p in [
        "mptcp",
        "emtcp",
        "mptcp-qe",
        "mptcp-qe-no-aesum",
        "mptcp-qe-no-abcwnd",
        "mptcp-qe-no-wesack",
        "mptcp-qe-band",
        "emtcp-allowance",
    ] {
        assert!(profiles.contains(p), "{p} missing: {profiles:?}");
        assert!(stdout.contains(p), "{p} not in the table");
    }
    // The paper's energy ratios beside ours: 19.05 % below MPTCP, 5.71 % below eMTCP.
    let e = find(&rows, "energy.total_j", "mptcp-qe", Some("mptcp"));
    assert!((e["paper_ratio"].as_f64().unwrap() - 0.8095).abs() < 1e-9, "{e}");
    assert!(e["ours_ratio"].as_f64().is_some_and(|r| r > 0.0), "{e}");
    let e = find(&rows, "energy.total_j", "mptcp-qe", Some("emtcp"));
    assert!((e["paper_ratio"].as_f64().unwrap() - 0.9429).abs() < 1e-9, "{e}");
    // The paper's PSNR figures.
    let psnr = find(&rows, "psnr_eq13_avg_db", "mptcp", None);
    assert_eq!(psnr["paper"].as_f64(), Some(30.02));
    let whole = find(&rows, "psnr_eq13_db", "mptcp-qe", Some("mptcp"));
    assert_eq!(whole["paper"].as_f64(), Some(25.54));
    assert_eq!(find(&rows, "energy.total_j", "emtcp-allowance", None)["ratio_to"], "emtcp");
    // The table names the rules the profiles run.
    assert!(stdout.contains("rules: mptcp-qe's aeSUM = the paper's"), "{stdout}");
}

#[test]
fn repro_marc_gives_the_rebuffering_rows_and_the_friendliness_ratio() {
    let dir = TempDir::new("repro-marc");
    let (stdout, j) =
        repro(&["marc", "--seeds", "1", "--duration", "20"], &dir, Duration::from_secs(600));
    let rows = rows_of(&j, "marc", 1);
    for p in ["tcp", "tfrc", "marc"] {
        find(&rows, "stream.stalls", p, None);
        find(&rows, "stream.startup_delay_s", p, None);
    }
    for p in ["tfrc", "marc"] {
        assert_eq!(find(&rows, "friendliness.share_ratio", p, None)["paper"].as_f64(), Some(1.0));
    }
    assert!(stdout.contains("slides: rebuffering events"), "{stdout}");
    // The like-for-like profiles and the hold-rule ablation.
    for p in ["marc-reliable", "tfrc-deadline", "marc-sent-anchor"] {
        assert_eq!(find(&rows, "stream.stalls", p, None)["ratio_to"], "tcp");
    }
    // The paired order lines; one seed gives no interval, and the command says so.
    for pair in ["marc - tfrc", "tfrc - tcp", "marc-reliable - tfrc", "marc - tfrc-deadline"] {
        assert!(
            stdout.contains(&format!("paired stalls {pair}")) && stdout.contains("too few seeds"),
            "{stdout}"
        );
    }
}

#[test]
fn repro_proxy_gives_each_case_beside_the_papers_tables() {
    let dir = TempDir::new("repro-proxy");
    let (stdout, j) = repro(&["proxy", "--seeds", "1"], &dir, Duration::from_secs(900));
    let rows = rows_of(&j, "proxy", 1);
    let paper = [
        ("tcp-wired", 4.1),
        ("tfrc-wired", 2.1),
        ("tcp", 16.5),
        ("tfrc", 12.5),
        ("tcp-proxy", 4.1),
        ("tfrc-proxy", 2.2),
    ];
    for (p, w) in paper {
        let r = find(&rows, "startup_delay_s", p, None);
        assert_eq!(r["paper"].as_f64(), Some(w), "{r}");
        assert!(r["ours"].as_f64().is_some_and(|v| v > 0.0), "{r}");
        assert!(stdout.contains(p));
    }
    for p in ["tcp-proxy", "tfrc-proxy"] {
        find(&rows, "proxy_buffer_bytes", p, None);
        // The proxy rows' start-up delay is a ratio to the end-to-end row.
        assert_eq!(
            find(&rows, "startup_delay_s", p, None)["ratio_to"],
            p.trim_end_matches("-proxy")
        );
        // A real session through the simulated node: the node held data.
        let y = find(&rows, "proxy_buffer_bytes", &format!("{p}:stream"), None);
        assert!(y["ours"].as_f64().is_some_and(|v| v > 0.0), "{y}");
        // The ablations of the deviations, each under its own name, never with the
        // paper's figure beside it.
        for v in ["formula", "from-0s", "reno-downstream", "links-64kbit"] {
            let r = find(&rows, "startup_delay_s", &format!("{p}:{v}"), None);
            assert!(r["paper"].is_null(), "{r}");
        }
    }
    // Table 2's buffers and Table 1's fixed-rate rows.
    assert_eq!(
        find(&rows, "client_buffer_bytes", "tcp-wired", None)["paper"].as_f64(),
        Some(43_810.0)
    );
    assert_eq!(
        find(&rows, "mean_rate_kbps", "tcp-wired:fixed", None)["paper"].as_f64(),
        Some(65.6)
    );
    assert_eq!(find(&rows, "startup_delay_s", "tfrc:fixed", None)["paper"].as_f64(), Some(9.0));
    for p in ["tcp", "tfrc"] {
        find(&rows, "backbone_loss", &format!("{p}:16+16-flows"), None);
    }
    assert!(find(&rows, "rtt_added_s", "tfrc-proxy", None)["ours"].as_f64().unwrap() > 0.0);
    assert!(stdout.contains("simulated [[node]]"), "{stdout}");
}

#[test]
fn repro_sedpf_part_b_gives_the_loss_sweep_against_lossless_sedpf() {
    let dir = TempDir::new("repro-sedpf-b");
    let (stdout, j) = repro(
        &["sedpf", "--part", "b", "--seeds", "1", "--duration", "0.3", "--jobs", "2"],
        &dir,
        Duration::from_secs(600),
    );
    let rows = rows_of(&j, "sedpf", 1);
    assert!(rows.iter().all(|r| r["metric"].as_str().is_some_and(|m| m.starts_with("b."))));
    for loss in [0, 1, 5, 10] {
        for p in ["sedpf", "sedpf-fec2", "sedpf-fec4", "sedpf-fec8"] {
            for k in ["delay_ms.mean", "delay_ms.p95", "delay_ms.sd", "goodput_bps"] {
                let r = find(&rows, &format!("b.paper.loss{loss}pct-12mbit.{k}"), p, None);
                assert_eq!(r["ratio_to"], "sedpf", "{r}");
                assert!(r["ours_ratio"].as_f64().is_some_and(|x| x > 0.0), "{r}");
            }
        }
    }
    // The baseline is lossless sedpf itself.
    let base = find(&rows, "b.paper.loss0pct-12mbit.goodput_bps", "sedpf", None);
    assert_eq!(base["ours_ratio"].as_f64(), Some(1.0), "{base}");
    assert!(base["ours"].as_f64().is_some_and(|g| g > 0.0), "{base}");
    assert!(stdout.contains("(b) loss on one path"), "{stdout}");
    assert!(
        stdout.lines().any(|l| l.starts_with("loss10pct-12mbit") && l.contains("sedpf-fec4")),
        "{stdout}"
    );
    assert!(!stdout.contains("(a) jitter"), "{stdout}");
}

#[test]
fn repro_refuses_a_part_it_does_not_have() {
    let e = assert_clean_error(&run_braid(&["repro", "sedpf", "--part", "d"]));
    assert!(e.contains("--part d"), "{e}");
    let e = assert_clean_error(&run_braid(&["repro", "proxy", "--part", "a"]));
    assert!(e.contains("--part"), "{e}");
}

#[test]
fn repro_refuses_a_duration_it_cannot_honour() {
    let out = run_braid(&["repro", "proxy", "--duration", "10"]);
    let e = assert_clean_error(&out);
    assert!(e.contains("--duration"), "{e}");
    let out = run_braid(&["repro", "mptcp-qe", "--duration", "-1"]);
    assert_clean_error(&out);
}
