//! `--qlog`, `--pcap`, the Wireshark dissector and `braid trace` end to end on simulated
//! runs: traces are byte-identical across runs, every record is JSON after its separator,
//! packet events name their path, tshark with assets/wireshark/braid.lua finds every
//! datagram the report says went down a path, and bad directories fail before the run.

use std::path::Path;
use std::process::Command;

use braid_tests::{TempDir, assert_clean_error, have, repo, run_braid, skip};

const SCENARIO: &str = "sim/tests/scenarios/lossy-path.toml";

fn sim(dir: &TempDir, tag: &str, extra: &[&str]) -> serde_json::Value {
    let report = dir.join(&format!("{tag}.json"));
    let scenario = repo(SCENARIO);
    let mut args = vec![
        "sim",
        "--scenario",
        scenario.to_str().unwrap_or_default(),
        "--profile",
        "mptcp",
        "--report",
        report.to_str().unwrap_or_default(),
    ];
    args.extend_from_slice(extra);
    let out = run_braid(&args);
    assert!(out.status.success(), "braid sim failed: {}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(&report).expect("report written");
    serde_json::from_str(&text).expect("report is JSON")
}

fn read(p: &Path) -> Vec<u8> {
    std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The records of a JSON-SEQ file, each checked to end with a line feed and parse.
fn records(bytes: &[u8]) -> Vec<serde_json::Value> {
    assert_eq!(bytes.first(), Some(&0x1e), "a JSON-SEQ file starts with a record separator");
    bytes[1..]
        .split(|&b| b == 0x1e)
        .map(|r| {
            assert_eq!(r.last(), Some(&b'\n'), "every record ends with a line feed");
            serde_json::from_slice(r).unwrap_or_else(|e| {
                panic!("record is not JSON ({e}): {}", String::from_utf8_lossy(r))
            })
        })
        .collect()
}

#[test]
fn a_simulated_run_twice_writes_identical_qlog_whose_records_parse_and_name_their_path() {
    let dir = TempDir::new("qlog");
    let (a, b) = (dir.join("a"), dir.join("b"));
    sim(&dir, "a", &["--qlog", a.to_str().unwrap_or_default()]);
    sim(&dir, "b", &["--qlog", b.to_str().unwrap_or_default()]);
    for side in ["client", "server"] {
        let name = format!("mptcp-seed1-{side}.qlog");
        let (x, y) = (read(&a.join(&name)), read(&b.join(&name)));
        assert!(x.len() > 10_000, "{name}: only {} bytes", x.len());
        assert!(x == y, "{name}: the two runs' traces differ");
        let recs = records(&x);
        let header = &recs[0];
        assert_eq!(header["qlog_format"], "JSON-SEQ");
        assert_eq!(header["qlog_version"], "0.3");
        assert_eq!(header["trace"]["vantage_point"]["type"], side);
        let mut paths = std::collections::BTreeSet::new();
        let mut names = std::collections::BTreeSet::new();
        for r in &recs[1..] {
            let n = r["name"].as_str().expect("event name");
            names.insert(n.to_string());
            assert!(r["time"].is_number(), "{n}: no time");
            if n.starts_with("transport:packet_") && n != "transport:packet_dropped" {
                let p = r["data"]["path_id"].as_u64();
                assert!(p.is_some(), "{n} without a path id: {r}");
                paths.extend(p);
            }
        }
        assert_eq!(paths.len(), 2, "{side}: packets on both paths, got {paths:?}");
        for n in [
            "transport:packet_sent",
            "transport:packet_received",
            "recovery:metrics_updated",
            "braid:path_updated",
        ] {
            assert!(names.contains(n), "{side}: no {n} event in {names:?}");
        }
        if side == "server" {
            assert!(names.contains("recovery:packet_lost"), "2 % loss but no loss event");
            assert!(names.contains("braid:scheduler_decision"), "no scheduler decision");
        }
    }
}

#[test]
fn tshark_with_the_dissector_counts_every_datagram_the_report_sent_down_a_path() {
    if !have("tshark") {
        skip("tshark is not installed (Debian package tshark)");
        return;
    }
    let dir = TempDir::new("pcap");
    let pcap = dir.join("pcap");
    let report = sim(&dir, "r", &["--pcap", pcap.to_str().unwrap_or_default()]);
    let lua = repo("assets/wireshark/braid.lua");
    for (i, path) in ["slow", "fast"].into_iter().enumerate() {
        let expected = report["paths"][i]["packets_down"].as_u64().expect("packets_down");
        assert!(expected > 100, "{path}: only {expected} packets");
        for (dir_name, want) in
            [("down", expected), ("up", report["paths"][i]["packets_up"].as_u64().unwrap_or(0))]
        {
            let cap = pcap.join(format!("{path}-{dir_name}.pcap"));
            assert!(cap.is_file(), "{} missing", cap.display());
            let out = Command::new("tshark")
                .arg("-X")
                .arg(format!("lua_script:{}", lua.display()))
                .arg("-r")
                .arg(&cap)
                .args(["-Y", "braid", "-T", "fields", "-e", "braid.cid"])
                .output()
                .expect("tshark runs");
            assert!(
                out.status.success(),
                "tshark failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let lines = String::from_utf8_lossy(&out.stdout).lines().count() as u64;
            assert_eq!(lines, want, "{path}-{dir_name}: Braid packets tshark found");
        }
    }
}

#[test]
fn braid_trace_summarizes_a_qlog_and_draws_its_timeline() {
    let dir = TempDir::new("trace");
    let q = dir.join("q");
    sim(&dir, "r", &["--qlog", q.to_str().unwrap_or_default()]);
    let file = q.join("mptcp-seed1-server.qlog");
    let png = dir.join("t.png");
    let out = run_braid(&[
        "trace",
        file.to_str().unwrap_or_default(),
        "--png",
        png.to_str().unwrap_or_default(),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("server side"), "{text}");
    assert!(text.lines().filter(|l| l.trim_start().starts_with(['0', '1'])).count() >= 2, "{text}");
    let img = read(&png);
    assert!(img.starts_with(b"\x89PNG"), "not a PNG");

    // Cut short in the middle of a record: what is complete is read, and the cut named.
    let whole = read(&file);
    let cut = dir.join("cut.qlog");
    std::fs::write(&cut, &whole[..whole.len() / 2]).expect("write");
    let out = run_braid(&["trace", cut.to_str().unwrap_or_default()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("stopped at byte"));
}

#[test]
fn a_qlog_or_pcap_directory_that_is_a_file_fails_before_the_run() {
    let dir = TempDir::new("trace-bad");
    let file = dir.join("plain");
    std::fs::write(&file, b"x").expect("write");
    let scenario = repo(SCENARIO);
    for flag in ["--qlog", "--pcap"] {
        let out = run_braid(&[
            "sim",
            "--scenario",
            scenario.to_str().unwrap_or_default(),
            "--profile",
            "mptcp",
            flag,
            file.to_str().unwrap_or_default(),
        ]);
        let err = assert_clean_error(&out);
        assert!(err.contains(flag) && err.contains("not a directory"), "{err}");
        assert!(out.stdout.is_empty(), "the run started: {}", String::from_utf8_lossy(&out.stdout));
    }
}
