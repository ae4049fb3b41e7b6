//! `--battery J`: the residual battery of a report is taken from the viewer's battery
//! (the flag, else the scenario's `battery_j`), and a report without either has no
//! `energy.battery_residual_j`. A simulated report's in-order delay is measured, not
//! estimated: `delay_ms.estimated` is absent.

use braid_tests::{TempDir, assert_clean_error, run_braid};
use serde_json::Value;

/// Two radio paths and a short CBR stream, with `battery` as the scenario's `battery_j`
/// when given.
fn scenario(dir: &TempDir, name: &str, battery: Option<&str>) -> String {
    let path = dir.join(&format!("{name}.toml"));
    let battery = battery.map_or(String::new(), |j| format!("battery_j = {j}\n"));
    std::fs::write(
        &path,
        format!(
            r#"name = "{name}"
duration_s = 5
seed = 2
[[path]]
name = "wifi"
role = "wifi"
down = {{ rate = "2mbit", delay_ms = 10 }}
up = {{ rate = "2mbit", delay_ms = 10 }}
[[path]]
name = "lte"
role = "lte"
down = {{ rate = "8mbit", delay_ms = 30 }}
up = {{ rate = "8mbit", delay_ms = 30 }}
[workload]
kind = "stream"
cbr = {{ rate = "2mbit", packet_bytes = 1040 }}
{battery}"#
        ),
    )
    .unwrap();
    path.to_str().unwrap().to_string()
}

/// `braid compare` (simulated, one profile, one seed) with `extra` flags: its
/// `compare.json`.
fn compare(dir: &TempDir, scenario: &str, out: &str, extra: &[&str]) -> Value {
    let out_dir = dir.join(out);
    let mut args = vec![
        "compare",
        "--scenario",
        scenario,
        "--profiles",
        "mptcp",
        "--jobs",
        "1",
        "--out",
        out_dir.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let run = run_braid(&args);
    assert!(run.status.success(), "{args:?}: {}", String::from_utf8_lossy(&run.stderr));
    serde_json::from_str(&std::fs::read_to_string(out_dir.join("compare.json")).unwrap()).unwrap()
}

/// The energy object of the comparison's only run.
fn energy(c: &Value) -> &Value {
    let e = &c["profiles"][0]["runs"][0]["energy"];
    assert!(e.is_object(), "no energy in {c}");
    e
}

#[test]
fn compare_takes_the_residual_battery_from_battery_and_leaves_it_out_without_one() {
    let dir = TempDir::new("battery-compare");
    let plain = scenario(&dir, "no-battery", None);

    // No flag, no scenario key: no residual battery, in the report or the means.
    let without = compare(&dir, &plain, "without", &[]);
    let e = energy(&without);
    let total = e["total_j"].as_f64().unwrap();
    assert!(total > 0.0, "{e}");
    assert!(e.get("battery_residual_j").is_none(), "{e}");
    assert!(without["profiles"][0]["mean"].get("energy.battery_residual_j").is_none());
    // A simulated run measures its in-order delay: nothing says "estimated".
    assert!(without["profiles"][0]["runs"][0]["delay_ms"].get("estimated").is_none());

    // `--battery 100`: what the run's radio energy leaves of 100 J.
    let with = compare(&dir, &plain, "with", &["--battery", "100"]);
    let e = energy(&with);
    let residual = e["battery_residual_j"].as_f64().unwrap_or_else(|| panic!("{e}"));
    assert!((0.0..=100.0).contains(&residual), "{e}");
    assert!((residual - (100.0 - total)).abs() < 1e-9, "{residual} vs 100 − {total}");
    assert_eq!(with["profiles"][0]["mean"]["energy.battery_residual_j"], residual);
    // The battery is a figure of the report only: the run is the same.
    assert_eq!(e["total_j"], energy(&without)["total_j"]);

    // The scenario's `battery_j` still gives the battery; the flag replaces it.
    let keyed = scenario(&dir, "battery-300", Some("300"));
    let e = compare(&dir, &keyed, "keyed", &[]);
    let residual = energy(&e)["battery_residual_j"].as_f64().unwrap();
    assert!((residual - (300.0 - total)).abs() < 1e-9, "{residual} vs 300 − {total}");
    let e = compare(&dir, &keyed, "replaced", &["--battery", "100"]);
    let residual = energy(&e)["battery_residual_j"].as_f64().unwrap();
    assert!((residual - (100.0 - total)).abs() < 1e-9, "{residual} vs 100 − {total}");
}

#[test]
fn a_battery_that_is_not_a_positive_number_is_one_error_line() {
    let dir = TempDir::new("battery-errors");
    let s = scenario(&dir, "errors", None);
    for bad in ["0", "-5", "lots"] {
        let commands: [Vec<&str>; 3] = [
            vec!["compare", "--scenario", &s, "--profiles", "mptcp"],
            vec!["play", "127.0.0.1:9", "--headless", "--duration", "1"],
            vec!["demo", "--headless", "--duration", "1"],
        ];
        // `--battery=-5`: a separate `-5` would read as a flag.
        let flag = format!("--battery={bad}");
        for mut args in commands {
            args.push(&flag);
            let line = assert_clean_error(&run_braid(&args));
            assert!(line.contains("--battery") && line.contains("above 0"), "{args:?}: {line}");
        }
    }
}
