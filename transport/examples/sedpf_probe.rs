use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use braid_transport::{profile, scenario::Scenario, sim::{self, RunOptions}};
use braid_transport::cc::FixedBdpConfig;
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let sigma: u32 = args[1].parse().unwrap();
    let reorder: bool = args[2].parse().unwrap();
    let fixed: bool = args[3].parse().unwrap();
    let dur: u32 = args[4].parse().unwrap();
    let bulk = args.get(5).is_some_and(|a| a == "bulk");
    let wl = if bulk { "[workload]\nkind = \"bulk\"\n".to_string() } else { "[workload]\nkind = \"stream\"\ncbr = { rate = \"12mbit\", packet_bytes = 1200 }\n".to_string() };
    let text = format!(r#"name = "p"
duration_s = {dur}
[[path]]
name = "a"
down = {{ rate = "10mbit", delay_ms = 50 }}
up = {{ rate = "10mbit", delay_ms = 50 }}
[[path]]
name = "b"
down = {{ rate = "10mbit", delay_ms = 50, jitter_ms = {sigma}, jitter_reorder = {reorder} }}
up = {{ rate = "10mbit", delay_ms = 50 }}
{wl}"#);
    let s = Scenario::parse(&text, "p.toml", Path::new(".")).unwrap();
    for name in ["mptcp", "edpf", "blest", "ecf", "sedpf"] {
        let mut p = profile::lookup(name).unwrap();
        if fixed { p.controller = Arc::new(FixedBdpConfig::from_paths(&[(10_000_000, Duration::from_millis(100)); 2])); }
        let t = std::time::Instant::now();
        let r = sim::run_detailed(&s, &p, &RunOptions::default()).unwrap();
        let rep = r.report;
        println!("{name:<6} goodput {:6.2}  mean {:7.1} sd {:7.1} p95 {:7.1}  a {:5.2} b {:5.2}  retx {} ({:.1}s)", rep.goodput_bps/1e6, rep.delay_ms.mean, rep.delay_ms.sd, rep.delay_ms.p95, rep.paths[0].throughput_bps/1e6, rep.paths[1].throughput_bps/1e6, rep.retransmitted_bytes, t.elapsed().as_secs_f64());
    }
}
