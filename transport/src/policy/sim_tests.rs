//! The mode switch and the energy profiles in the simulator, on short variants of the
//! MPTCP-QE paper's scenario (seconds of simulated time).

use std::path::Path;

use crate::profile;
use crate::scenario::Scenario;
use crate::sim::{RunOptions, SimResult, run_detailed};

/// WiFi 2 Mbit/s (10 ms), LTE 20 Mbit/s (100 ms), a CBR stream read per `reader`, plus
/// `extra` TOML (events, cross traffic).
fn scenario(duration_s: u32, cbr: &str, reader: &str, extra: &str) -> Scenario {
    let text = format!(
        r#"name = "mptcp-qe-short"
duration_s = {duration_s}
seed = 1

[[path]]
name = "wifi"
role = "wifi"
down = {{ rate = "2mbit", delay_ms = 10 }}
up = {{ rate = "2mbit", delay_ms = 10 }}

[[path]]
name = "lte"
role = "lte"
down = {{ rate = "20mbit", delay_ms = 100 }}
up = {{ rate = "20mbit", delay_ms = 100 }}
{extra}
[workload]
kind = "stream"
cbr = {{ rate = "{cbr}", packet_bytes = 1040 }}
reader = {reader}
battery_j = 300
"#
    );
    match Scenario::parse(&text, "short.toml", Path::new(".")) {
        Ok(s) => s,
        Err(e) => panic!("{e}"),
    }
}

const PATTERN_13: &str = r#"{ pattern = { rates = ["1mbit", "3mbit"], period = "rtt" } }"#;

fn run(s: &Scenario, profile: &str) -> SimResult {
    let p = profile::lookup(profile).unwrap_or_else(|e| panic!("{e}"));
    run_detailed(s, &p, &RunOptions::default()).unwrap_or_else(|e| panic!("{profile}: {e}"))
}

/// LTE throughput (bits/s) averaged over the series bins ending in `(from_s, to_s]`.
fn lte_bps(r: &SimResult, from_s: f64, to_s: f64) -> f64 {
    let rows: Vec<f64> = r
        .series
        .rows
        .iter()
        .filter(|row| row.t_s > from_s && row.t_s <= to_s)
        .map(|row| row.throughput_bps.get(1).copied().unwrap_or(0.0))
        .collect();
    rows.iter().sum::<f64>() / rows.len().max(1) as f64
}

#[test]
fn mode_switch_goes_partial_full_and_back_with_the_wifi_rate() {
    // 1.2 Mbit/s stream: WiFi (2 Mbit/s) covers it until WiFi drops to 0.5 Mbit/s at 15 s;
    // WiFi is restored at 18 s.
    let events = r#"
[[event]]
at_s = 15
path = "wifi"
action = "set"
rate = "500kbit"

[[event]]
at_s = 18
path = "wifi"
action = "set"
rate = "2mbit"
"#;
    let s = scenario(32, "1200kbit", PATTERN_13, events);
    let r = run(&s, "mptcp-qe");
    let e = r.report.energy.clone().unwrap_or_default();
    // Full at start (LTE kept for its tail time), Partial by ~12 s, Full after the cut,
    // Partial again once WiFi is back and the minimum Full time has passed.
    assert_eq!(e.mode_switches, 3, "{e:?}");
    // Partial ≈ [11.6, 15.3] and ≈ [27, 32].
    assert!(e.time_in_partial_s > 6.0 && e.time_in_partial_s < 10.0, "{e:?}");
    // LTE idle while Partial, busy while WiFi is cut.
    assert!(lte_bps(&r, 13.0, 15.0) < 1.0, "{}", lte_bps(&r, 13.0, 15.0));
    assert!(lte_bps(&r, 16.0, 18.0) > 300e3, "{}", lte_bps(&r, 16.0, 18.0));
    assert!(lte_bps(&r, 29.0, 32.0) < 1.0, "{}", lte_bps(&r, 29.0, 32.0));
    // The reader was served throughout: goodput close to the stream rate.
    assert!(r.report.goodput_bps > 1.1e6, "{}", r.report.goodput_bps);
}

#[test]
#[ignore = "exploration: prints the paper scenario's figures per profile (slow)"]
fn print_paper_scenario() {
    let text = include_str!("../../../assets/scenarios/mptcp-qe-paper.toml");
    let s = Scenario::parse(text, "paper.toml", Path::new(".")).unwrap_or_else(|e| panic!("{e}"));
    for p in [
        "mptcp",
        "emtcp",
        "mptcp-qe",
        "mptcp-qe-no-aesum",
        "mptcp-qe-no-abcwnd",
        "mptcp-qe-no-wesack",
        "handover",
    ] {
        #[allow(
            clippy::disallowed_methods,
            reason = "wall time of an exploration run, printed only"
        )]
        let t0 = std::time::Instant::now();
        let r = run(&s, p);
        let e = r.report.energy.clone().unwrap_or_default();
        let paths: Vec<String> = r
            .report
            .paths
            .iter()
            .map(|x| {
                format!(
                    "{} {:.0}kbps {:.1}J act{:.1}s",
                    x.name,
                    x.throughput_bps / 1e3,
                    x.energy_j,
                    x.time_active_s
                )
            })
            .collect();
        println!(
            "{p:20} goodput {:.0} kbps energy {:.1} J sw {} partial {:.1}s | {} | {:?}",
            r.report.goodput_bps / 1e3,
            e.total_j,
            e.mode_switches,
            e.time_in_partial_s,
            paths.join(" / "),
            t0.elapsed()
        );
    }
}

#[test]
fn mptcp_qe_spends_less_energy_than_mptcp_when_wifi_nearly_suffices() {
    // The paper's stream and reader without cross traffic: WiFi carries nearly all of
    // the 2 Mbit/s. MPTCP keeps spilling onto LTE, so LTE never sleeps; MPTCP-QE goes
    // Partial after its minimum Full time and LTE sleeps once its tail is over.
    let s = scenario(40, "2mbit", PATTERN_13, "");
    let energy = |p: &str| run(&s, p).report.energy.map_or(0.0, |e| e.total_j);
    let (mptcp, qe, no_aesum) = (energy("mptcp"), energy("mptcp-qe"), energy("mptcp-qe-no-aesum"));
    assert!(qe < 0.85 * mptcp, "mptcp-qe {qe:.1} J vs mptcp {mptcp:.1} J");
    // Without aeSUM the offload scheduler still trickles the shortfall onto LTE.
    assert!(no_aesum > qe * 1.1, "no-aesum {no_aesum:.1} J vs mptcp-qe {qe:.1} J");
}

#[test]
fn handover_keeps_lte_idle_until_wifi_fails() {
    let events = r#"
[[event]]
at_s = 10
path = "wifi"
action = "down"
"#;
    let s = scenario(20, "1mbit", r#""player""#, events);
    let r = run(&s, "handover");
    let e = r.report.energy.clone().unwrap_or_default();
    assert!(lte_bps(&r, 2.0, 10.0) < 1.0, "{}", lte_bps(&r, 2.0, 10.0));
    assert!(lte_bps(&r, 15.0, 20.0) > 0.8e6, "{}", lte_bps(&r, 15.0, 20.0));
    assert_eq!(e.mode_switches, 1, "{e:?}");
}

#[test]
fn mptcp_qe_runs_on_when_the_wifi_link_goes_down() {
    // Down, every ACK weSACK puts on WiFi fails at its first link; the repeats it asks
    // for fail at the same instant too, and must not keep virtual time from advancing.
    let events = r#"
[[event]]
at_s = 6
path = "wifi"
action = "down"

[[event]]
at_s = 12
path = "wifi"
action = "up"
"#;
    let s = scenario(20, "1mbit", r#""player""#, events);
    let r = run(&s, "mptcp-qe");
    let e = r.report.energy.clone().unwrap_or_default();
    assert_eq!(r.series.rows.last().map(|row| row.t_s), Some(20.0));
    assert!(e.mode_switches >= 1, "{e:?}");
    // LTE carries the stream while WiFi is down; the reader is served throughout.
    assert!(lte_bps(&r, 8.0, 12.0) > 0.2e6, "{}", lte_bps(&r, 8.0, 12.0));
    assert!(r.report.goodput_bps > 0.8e6, "{}", r.report.goodput_bps);
}

#[test]
fn the_mode_switch_keeps_its_own_clock_whatever_the_series_interval() {
    // The policy is polled every 100 ms whether or not a series bin ends then: with 1 s
    // bins the session runs exactly as with the default 100 ms ones.
    let events = r#"
[[event]]
at_s = 15
path = "wifi"
action = "set"
rate = "500kbit"
"#;
    let s = scenario(20, "1200kbit", PATTERN_13, events);
    let p = profile::lookup("mptcp-qe").unwrap_or_else(|e| panic!("{e}"));
    let coarse =
        RunOptions { series_interval: std::time::Duration::from_secs(1), ..RunOptions::default() };
    let a = run_detailed(&s, &p, &RunOptions::default()).unwrap_or_else(|e| panic!("{e}"));
    let b = run_detailed(&s, &p, &coarse).unwrap_or_else(|e| panic!("{e}"));
    assert!(a.report.energy.as_ref().is_some_and(|e| e.mode_switches >= 2), "{:?}", a.report);
    assert_eq!(a.report, b.report);
}
