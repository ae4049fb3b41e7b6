//! `braid repro NAME`: a short run per reproduction, checking the table's rows, the
//! provenance of every paper figure, the verdict per headline figure and the shape of
//! `DIR/repro.json` (docs/REFERENCE.md). The figures themselves come from full runs
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
        // A paper figure says where it comes from; a row without one has no provenance.
        let has_figure = !r["paper"].is_null() || !r["paper_ratio"].is_null();
        if has_figure {
            let p = r["provenance"].as_str().unwrap_or_else(|| panic!("no provenance: {r}"));
            assert!(PROVENANCES.contains(&p), "{p}: {r}");
        } else {
            assert!(r["provenance"].is_null(), "provenance without a paper figure: {r}");
        }
    }
    rows
}

/// Where a paper figure comes from (docs/REFERENCE.md).
const PROVENANCES: [&str; 4] = ["stated", "recalled", "read_from_plot", "interpretation"];

/// The verdicts of docs/REFERENCE.md: each with its fields, its verdict among the three and
/// its line in the table; returns them by headline.
fn verdicts_of<'a>(j: &'a Value, stdout: &str) -> Vec<(&'a str, &'a Value)> {
    let verdicts = j["verdicts"].as_array().expect("verdicts");
    let mut out = Vec::new();
    for v in verdicts {
        let headline = v["headline"].as_str().unwrap_or_else(|| panic!("headline: {v}"));
        let verdict = v["verdict"].as_str().unwrap_or_else(|| panic!("verdict: {v}"));
        assert!(
            ["reproduced", "partly reproduced", "not reproduced"].contains(&verdict),
            "{verdict}: {v}"
        );
        assert!(["change", "at_most", "order"].contains(&v["claim"].as_str().unwrap_or("")), "{v}");
        for k in ["ours", "paper", "gap"] {
            assert!(v[k].is_null() || v[k].as_f64().is_some_and(f64::is_finite), "{k}: {v}");
        }
        let p = &v["provenance"];
        assert!(p.is_null() || p.as_str().is_some_and(|p| PROVENANCES.contains(&p)), "{v}");
        assert!(
            stdout.lines().any(|l| l.starts_with(&format!("verdict {headline}: {verdict}: "))),
            "no verdict line for {headline}: {stdout}"
        );
        out.push((headline, v));
    }
    if !out.is_empty() {
        assert!(stdout.contains("verdicts: a ratio headline compares"), "{stdout}");
    }
    out
}

/// The headlines judged, in order.
fn headlines<'a>(verdicts: &[(&'a str, &Value)]) -> Vec<&'a str> {
    verdicts.iter().map(|(h, _)| *h).collect()
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
        "mptcp-qe-paper-rule",
        "emtcp-allowance",
    ] {
        assert!(profiles.contains(p), "{p} missing: {profiles:?}");
        assert!(stdout.contains(p), "{p} not in the table");
    }
    // The paper's energy ratios beside ours: 19.05 % below MPTCP, 5.71 % below eMTCP.
    let e = find(&rows, "energy.total_j", "mptcp-qe", Some("mptcp"));
    assert!((e["paper_ratio"].as_f64().unwrap() - 0.8095).abs() < 1e-9, "{e}");
    assert!(e["ours_ratio"].as_f64().is_some_and(|r| r > 0.0), "{e}");
    let e_mptcp = e;
    let e = find(&rows, "energy.total_j", "mptcp-qe", Some("emtcp"));
    assert!((e["paper_ratio"].as_f64().unwrap() - 0.9429).abs() < 1e-9, "{e}");
    // The paper's PSNR figures.
    let psnr = find(&rows, "psnr_eq13_avg_db", "mptcp", None);
    assert_eq!(psnr["paper"].as_f64(), Some(30.02));
    let whole = find(&rows, "psnr_eq13_db", "mptcp-qe", Some("mptcp"));
    assert_eq!(whole["paper"].as_f64(), Some(25.54));
    assert_eq!(find(&rows, "energy.total_j", "emtcp-allowance", None)["ratio_to"], "emtcp");
    // The table names the rules the profiles run.
    assert!(stdout.contains("rules: mptcp-qe's aeSUM = a band (deviation"), "{stdout}");
    assert!(stdout.contains("mptcp-qe-paper-rule = the paper's"), "{stdout}");
    // Every figure of the paper is in its text.
    assert_eq!(e["provenance"], "stated", "{e}");
    assert_eq!(psnr["provenance"], "stated", "{psnr}");
    assert!(find(&rows, "stream.stalls", "mptcp", None)["provenance"].is_null());
    assert!(stdout.contains("source = where the paper's figure comes from"), "{stdout}");
    let verdicts = verdicts_of(&j, &stdout);
    assert_eq!(
        headlines(&verdicts),
        [
            "energy.total_j mptcp-qe/mptcp",
            "energy.total_j mptcp-qe/emtcp",
            "energy.efficiency_bits_per_j mptcp-qe/mptcp",
            "energy.efficiency_bits_per_j mptcp-qe/emtcp",
            "energy.battery_residual_j mptcp-qe/mptcp",
            "energy.battery_residual_j mptcp-qe/emtcp",
            "goodput_bps mptcp-qe/emtcp",
            "psnr_eq13_db mptcp-qe/mptcp",
            "psnr_eq13_db mptcp-qe/emtcp",
            "read_013.psnr_eq13_sd_db mptcp-qe/mptcp",
            "read_013.psnr_eq13_sd_db mptcp-qe/emtcp",
            "read_013.psnr_eq13_avg_db emtcp/mptcp-qe",
        ]
    );
    for (_, v) in &verdicts[..9] {
        assert_eq!(v["claim"], "change", "{v}");
        assert_eq!(v["provenance"], "stated", "{v}");
    }
    // Fig. 10's claims are orders without numbers.
    for (_, v) in &verdicts[9..] {
        assert_eq!(v["claim"], "order", "{v}");
        assert!(v["paper"].is_null() && v["provenance"].is_null(), "{v}");
    }
    // The <0, 1, 3> run and the background ablation, each against mptcp; what is not run.
    for prefix in ["read_013.", "bg_constant.", "bg_bursts."] {
        let r = find(&rows, &format!("{prefix}energy.total_j"), "mptcp-qe", Some("mptcp"));
        assert!(r["ours_ratio"].as_f64().is_some_and(|x| x > 0.0), "{r}");
        assert!(r["paper"].is_null() && r["provenance"].is_null(), "{r}");
    }
    assert!(stdout.contains("not run: GMCC-Coop"), "{stdout}");
    assert!(stdout.contains("background: the paper's nine TCP phones"), "{stdout}");
    // The energy verdict is computed from the row: the paper's ratio, and ours beside it.
    let (_, energy) = verdicts[0];
    assert_eq!(energy["paper"].as_f64(), Some(1.0 - 0.1905));
    assert_eq!(energy["ours"], e_mptcp["ours_ratio"], "{energy}");
    // The PSNR ratio comes from the paper's two stated values.
    let (_, p) = verdicts[7];
    assert!((p["paper"].as_f64().unwrap() - 25.54 / 30.02).abs() < 1e-9, "{p}");
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
        let r = find(&rows, "friendliness.share_ratio", p, None);
        assert_eq!(r["paper"].as_f64(), Some(1.0));
        // The slides give no number: 1.0 is our reading of "TCP-friendly".
        assert_eq!(r["provenance"], "interpretation", "{r}");
    }
    let verdicts = verdicts_of(&j, &stdout);
    assert_eq!(
        headlines(&verdicts),
        [
            "stream.stalls marc/tfrc",
            "stream.stalls tfrc/tcp",
            "friendliness.share_ratio tfrc",
            "friendliness.share_ratio marc",
        ]
    );
    assert_eq!(verdicts[0].1["claim"], "order");
    assert!(verdicts[0].1["paper"].is_null() && verdicts[0].1["provenance"].is_null());
    assert_eq!(verdicts[2].1["claim"], "at_most");
    assert_eq!(verdicts[2].1["provenance"], "interpretation");
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
    // Tables 1–3 and the 5 % loss are in the paper's text.
    assert_eq!(find(&rows, "startup_delay_s", "tcp-proxy", None)["provenance"], "stated");
    assert_eq!(find(&rows, "backbone_loss", "tcp:16+16-flows", None)["provenance"], "stated");
    let verdicts = verdicts_of(&j, &stdout);
    assert_eq!(
        headlines(&verdicts),
        [
            "startup_delay_s tcp-proxy/tcp",
            "startup_delay_s tfrc-proxy/tfrc",
            "client_buffer_bytes tcp-proxy/tcp",
            "client_buffer_bytes tfrc-proxy/tfrc",
            "startup_delay_s tfrc-wired/tcp-wired",
            "startup_delay_s tfrc/tcp",
        ]
    );
    // Table 3: 4.1 s with the proxy against 16.5 s without.
    let (_, w) = verdicts[0];
    assert!((w["paper"].as_f64().unwrap() - 4.1 / 16.5).abs() < 1e-9, "{w}");
    assert_eq!(w["provenance"], "stated");
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
    // Part (b) has no paper figure, hence no provenance and no headline.
    assert!(rows.iter().all(|r| r["provenance"].is_null()));
    assert!(verdicts_of(&j, &stdout).is_empty());
    assert!(stdout.contains("verdicts: none"), "{stdout}");
}

#[test]
fn repro_sedpf_part_a_marks_the_recalled_figure_and_judges_it() {
    let dir = TempDir::new("repro-sedpf-a");
    let (stdout, j) = repro(
        &["sedpf", "--part", "a", "--seeds", "1", "--duration", "0.3", "--jobs", "2"],
        &dir,
        Duration::from_secs(600),
    );
    let rows = rows_of(&j, "sedpf", 1);
    for (k, p, v) in [("mean", "edpf", 201.0), ("mean", "sedpf", 61.0), ("sd", "sedpf", 33.0)] {
        let r = find(&rows, &format!("a.paper.sigma100ms-12mbit.delay_ms.{k}"), p, None);
        assert_eq!(r["paper"].as_f64(), Some(v), "{r}");
        // Remembered from the published figure, which the text extraction lost.
        assert_eq!(r["provenance"], "recalled", "{r}");
    }
    assert!(
        stdout.lines().any(|l| l.starts_with("sigma100ms-12mbit sedpf") && l.contains("recalled")),
        "{stdout}"
    );
    let verdicts = verdicts_of(&j, &stdout);
    assert_eq!(
        headlines(&verdicts),
        [
            "a.paper.sigma100ms-12mbit.delay_ms.mean sedpf/edpf",
            "a.paper.sigma100ms-12mbit.delay_ms.sd sedpf/edpf",
        ]
    );
    assert!((verdicts[0].1["paper"].as_f64().unwrap() - 61.0 / 201.0).abs() < 1e-9);
    assert_eq!(verdicts[0].1["provenance"], "recalled");
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
