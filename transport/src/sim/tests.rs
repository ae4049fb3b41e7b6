use std::path::Path;

use super::*;
use crate::profile;

fn scenario(text: &str) -> Scenario {
    Scenario::parse(text, "test.toml", Path::new(".")).unwrap()
}

fn run_named(text: &str, profile_name: &str, path: Option<&str>) -> SimResult {
    let s = scenario(text);
    let p = profile::lookup(profile_name).unwrap();
    let opts = RunOptions { path: path.map(str::to_string), ..RunOptions::default() };
    run_detailed(&s, &p, &opts).unwrap()
}

const TWO_PATHS: &str = r#"
name = "two-paths"
duration_s = 5
[[path]]
name = "slow"
role = "wifi"
down = { rate = "2mbit", delay_ms = 20 }
up = { rate = "2mbit", delay_ms = 20 }
[[path]]
name = "fast"
role = "lte"
down = { rate = "8mbit", delay_ms = 20 }
up = { rate = "8mbit", delay_ms = 20 }
"#;

#[test]
fn smoke_mptcp_two_paths() {
    let r = run_named(TWO_PATHS, "mptcp", None);
    eprintln!("{}", r.report.summary_table());
    eprintln!("{:?} events {} unroutable {}", r.check, r.events, r.unroutable);
    for l in &r.links {
        eprintln!("{} {:?}", l.name, l.counters);
    }
}

const SHARED: &str = r#"
name = "shared-bottleneck"
duration_s = 30
[[link]]
name = "bottleneck"
rate = "10mbit"
delay_ms = 20
[[link]]
name = "ret"
delay_ms = 20
[[path]]
name = "a"
down = { via = ["bottleneck"] }
up = { via = ["ret"] }
[[path]]
name = "b"
down = { via = ["bottleneck"] }
up = { via = ["ret"] }
[[cross]]
link = "bottleneck"
kind = "reno"
"#;

#[test]
fn smoke_fairness() {
    for (p, seed) in [("mptcp", 1), ("mptcp", 2), ("mptcp", 3), ("mptcp", 4), ("mptcp-uncoupled", 2), ("mptcp-uncoupled", 3), ("tcp", 2), ("tcp", 3), ("tcp", 4)] {
        let t0 = std::time::Instant::now();
        let r = run_detailed(&scenario(SHARED), &profile::lookup(p).unwrap(), &RunOptions { seed: Some(seed), ..Default::default() }).unwrap();
        eprintln!("{p}: goodput {:.2} cross {:.2} ratio {:.2}  wall {:?}", r.report.goodput_bps / 1e6, r.cross[0].throughput_bps / 1e6, r.report.goodput_bps / r.cross[0].throughput_bps, t0.elapsed());
    }
}
