//! Flags whose effect the README claims: `--power ROLE=FILE` replaces a radio's power model
//! in `braid sim` and `braid compare` (and is checked the same way by `braid play` and
//! `braid demo`), `--path …/ROLE` names a path's radio. Mistakes are one error line.

use braid_tests::{TempDir, assert_clean_error, repo, run_braid};

/// Two paths, a short CBR stream: both radios carry data.
fn scenario(dir: &TempDir) -> String {
    let path = dir.join("two-radios.toml");
    std::fs::write(
        &path,
        r#"name = "two-radios"
duration_s = 10
seed = 3
[[path]]
name = "wifi"
role = "wifi"
down = { rate = "2mbit", delay_ms = 10 }
up = { rate = "2mbit", delay_ms = 10 }
[[path]]
name = "lte"
role = "lte"
down = { rate = "10mbit", delay_ms = 40 }
up = { rate = "10mbit", delay_ms = 40 }
[workload]
kind = "stream"
cbr = { rate = "3mbit", packet_bytes = 1040 }
"#,
    )
    .unwrap();
    path.to_str().unwrap().to_string()
}

/// The bundled LTE model with its active power β tripled.
fn hungry_lte(dir: &TempDir) -> String {
    let text = std::fs::read_to_string(repo("assets/power/lte.toml")).unwrap();
    let beta_line = text.lines().find(|l| l.starts_with("beta_mw")).unwrap();
    let beta: f64 = beta_line
        .split('=')
        .nth(1)
        .and_then(|v| v.split('#').next())
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let text = text.replace(beta_line, &format!("beta_mw = {}", 3.0 * beta));
    let path = dir.join("lte-hungry.toml");
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_string()
}

fn sim_energy(scenario: &str, report: &std::path::Path, extra: &[&str]) -> serde_json::Value {
    let mut args = vec![
        "sim",
        "--scenario",
        scenario,
        "--profile",
        "mptcp",
        "--report",
        report.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let out = run_braid(&args);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_str(&std::fs::read_to_string(report).unwrap()).unwrap()
}

fn path_energy(r: &serde_json::Value, name: &str) -> f64 {
    r["paths"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .and_then(|p| p["energy_j"].as_f64())
        .unwrap_or_else(|| panic!("no path {name}: {r}"))
}

#[test]
fn power_files_change_the_energy_of_their_radio_only() {
    let dir = TempDir::new("cli-power");
    let s = scenario(&dir);
    let lte = hungry_lte(&dir);
    let base = sim_energy(&s, &dir.join("base.json"), &[]);
    let same = sim_energy(
        &s,
        &dir.join("same.json"),
        &["--power", &format!("lte={}", repo("assets/power/lte.toml").display())],
    );
    let hungry = sim_energy(&s, &dir.join("hungry.json"), &["--power", &format!("lte={lte}")]);
    // The bundled file is the built-in model: nothing changes.
    assert_eq!(path_energy(&same, "lte"), path_energy(&base, "lte"));
    // A hungrier LTE radio: more LTE energy on the same traffic, WiFi's unchanged.
    assert!(path_energy(&base, "lte") > 0.0, "{base}");
    assert!(
        path_energy(&hungry, "lte") > 1.5 * path_energy(&base, "lte"),
        "{} vs {}",
        path_energy(&hungry, "lte"),
        path_energy(&base, "lte")
    );
    assert_eq!(path_energy(&hungry, "wifi"), path_energy(&base, "wifi"));
    assert_eq!(hungry["paths"][0]["throughput_bps"], base["paths"][0]["throughput_bps"]);

    // braid compare (simulated) takes the same flag.
    let out = run_braid(&[
        "compare",
        "--scenario",
        &s,
        "--profiles",
        "mptcp",
        "--out",
        dir.join("cmp").to_str().unwrap(),
        "--power",
        &format!("lte={lte}"),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let c: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("cmp").join("compare.json")).unwrap(),
    )
    .unwrap();
    let total = |r: &serde_json::Value| r["energy"]["total_j"].as_f64().unwrap();
    let text = c.to_string();
    let want = format!("{:.3}", total(&hungry));
    assert!(
        c["profiles"][0]["mean"]["energy.total_j"]
            .as_f64()
            .is_some_and(|e| (e - total(&hungry)).abs() < 1e-6),
        "compare's energy should be the hungry model's {want}: {text}"
    );
}

#[test]
fn a_wrong_power_flag_is_one_error_line_on_every_command() {
    let dir = TempDir::new("cli-power-errors");
    let s = scenario(&dir);
    let lte = hungry_lte(&dir);
    let wifi = repo("assets/power/wifi.toml").display().to_string();
    let cases = [
        (format!("5g={lte}"), "unknown path role `5g`"),
        (format!("lte={wifi}"), "the file is for radio `wifi`"),
        ("lte=/nonexistent/lte.toml".to_string(), "reading /nonexistent/lte.toml"),
        (lte.clone(), "expected ROLE=FILE"),
    ];
    for (flag, want) in &cases {
        let commands: [Vec<&str>; 4] = [
            vec!["sim", "--scenario", &s, "--profile", "mptcp"],
            vec!["compare", "--scenario", &s, "--profiles", "mptcp"],
            vec!["play", "127.0.0.1:9", "--headless", "--duration", "1"],
            vec!["demo", "--headless", "--duration", "1"],
        ];
        for mut args in commands {
            args.extend_from_slice(&["--power", flag]);
            let line = assert_clean_error(&run_braid(&args));
            assert!(line.contains(want), "{args:?}: {line}");
        }
    }
}

#[test]
fn an_unknown_path_role_is_one_error_line() {
    let line = assert_clean_error(&run_braid(&[
        "play",
        "127.0.0.1:9",
        "--server-cert-sha256",
        "0000000000000000000000000000000000000000000000000000000000000000",
        "--path",
        "127.0.0.1/5g",
        "--headless",
        "--duration",
        "1",
    ]));
    assert!(line.contains("--path 127.0.0.1/5g: unknown path role `5g`"), "{line}");
}

/// Every flag docs/REFERENCE.md's command table lists exists on its command (`braid CMD --help`
/// names it).
#[test]
fn every_flag_in_the_reference_command_table_exists() {
    let readme = std::fs::read_to_string(repo("docs/REFERENCE.md")).unwrap();
    let mut checked = 0;
    for row in readme.lines().filter(|l| l.starts_with("| `braid ")) {
        let first = row.split(" | ").next().unwrap_or_default();
        for synopsis in first.split('`').filter(|s| s.starts_with("braid ")) {
            let words: Vec<&str> = synopsis
                .split_whitespace()
                .skip(1)
                .take_while(|w| w.chars().all(|c| c.is_ascii_lowercase() || c == '-'))
                .filter(|w| !w.starts_with('-'))
                .collect();
            let mut args = words.clone();
            args.push("--help");
            let out = run_braid(&args);
            assert!(
                out.status.success(),
                "braid {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let help = String::from_utf8_lossy(&out.stdout).to_string();
            let flags = synopsis
                .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
                .filter(|t| t.starts_with('-') && t.len() > 1);
            for flag in flags {
                assert!(
                    help.split(|c: char| c.is_whitespace() || c == ',' || c == '=')
                        .any(|t| t == flag),
                    "docs/REFERENCE.md lists `{flag}` for `braid {}`, which has no such flag:\n{help}",
                    words.join(" ")
                );
                checked += 1;
            }
        }
    }
    assert!(checked > 50, "only {checked} flags found in docs/REFERENCE.md's table");
}
