//! TFRC and MARC in the simulator: link utilisation and TCP-friendliness.

use std::path::Path;

use super::*;
use braid_transport::profile;

fn run(text: &str, profile_name: &str, seed: u64) -> SimResult {
    let s = Scenario::parse(text, "test.toml", Path::new(".")).unwrap();
    let p = profile::lookup(profile_name).unwrap();
    let opts = RunOptions { seed: Some(seed), ..RunOptions::default() };
    run_detailed(&s, &p, &opts).unwrap()
}

#[test]
fn tfrc_on_a_clean_2mbit_path_approaches_the_link_rate() {
    let text = r#"
name = "clean"
duration_s = 20
[[path]]
name = "a"
down = { rate = "2mbit", delay_ms = 20 }
up = { rate = "2mbit", delay_ms = 20 }
[workload]
kind = "bulk"
"#;
    let r = run(text, "tfrc", 1);
    // Payload goodput over the whole run, slow start included; the link's 2 Mbit/s also
    // carries the headers (about 4 % at 1200-byte datagrams).
    assert!(r.report.goodput_bps > 1.6e6, "{}", r.report.goodput_bps);
    assert!(r.report.goodput_bps < 2.0e6, "{}", r.report.goodput_bps);
}

/// A stream asking for `rate` at a 2 Mbit/s bottleneck shared with 2 long-lived
/// TCP-like flows: its goodput over their mean throughput.
fn share_against_reno(profile_name: &str, seed: u64) -> (f64, f64) {
    let text = r#"
name = "friendly"
duration_s = 40
[[link]]
name = "bottleneck"
rate = "2mbit"
delay_ms = 20
[[path]]
name = "a"
down = { via = ["bottleneck"] }
up = { rate = "10mbit", delay_ms = 20 }
[[cross]]
link = "bottleneck"
kind = "reno"
count = 2
[workload]
kind = "stream"
cbr = { rate = "1600kbit", packet_bytes = 1000 }
"#;
    let r = run(text, profile_name, seed);
    let reno = r.cross.first().map_or(0.0, |c| c.throughput_bps / f64::from(c.flows.max(1)));
    (r.report.goodput_bps, reno)
}

#[test]
fn marc_and_tfrc_above_their_fair_share_stay_tcp_friendly() {
    for name in ["tfrc", "marc"] {
        let (mut ours, mut theirs) = (0.0, 0.0);
        for seed in 1..=2 {
            let (o, t) = share_against_reno(name, seed);
            ours += o;
            theirs += t;
        }
        let ratio = ours / theirs.max(1.0);
        eprintln!("{name}: goodput {ours:.0} bit/s, reno mean {theirs:.0} bit/s, ratio {ratio:.3}");
        // The stream wants 1.6 Mbit/s, far above a third of 2 Mbit/s.
        assert!(ratio <= 1.2, "{name}: {ours} vs reno {theirs}: ratio {ratio}");
        assert!(ratio > 0.3, "{name} starves: {ours} vs reno {theirs}: ratio {ratio}");
    }
}

#[test]
fn tfrc_cross_traffic_runs() {
    let text = r#"
name = "tfrc-cross"
duration_s = 10
[[link]]
name = "bottleneck"
rate = "2mbit"
delay_ms = 20
[[path]]
name = "a"
down = { via = ["bottleneck"] }
up = { rate = "10mbit", delay_ms = 20 }
[[cross]]
link = "bottleneck"
kind = "tfrc"
count = 2
[workload]
kind = "bulk"
"#;
    let r = run(text, "tcp", 1);
    let c = r.cross.first().unwrap();
    assert_eq!((c.kind.as_str(), c.flows), ("tfrc", 2));
    assert!(c.throughput_bps > 200_000.0, "{}", c.throughput_bps);
    assert!(r.report.goodput_bps > 200_000.0, "{}", r.report.goodput_bps);
}

#[test]
fn the_cbr_stream_reports_playout_and_a_starved_stream_stalls() {
    let text = |rate: &str| {
        format!(
            r#"
name = "starved"
duration_s = 30
[[path]]
name = "a"
down = {{ rate = "{rate}", delay_ms = 20 }}
up = {{ rate = "10mbit", delay_ms = 20 }}
[workload]
kind = "stream"
cbr = {{ rate = "400kbit", packet_bytes = 1000 }}
playout = "fixed"
"#
        )
    };
    let ok = run(&text("2mbit"), "tfrc", 1).report.stream.unwrap();
    assert_eq!(ok.stalls, 0, "{ok:?}");
    assert!(ok.startup_delay_s > 2.0 && ok.startup_delay_s < 4.0, "{ok:?}");
    let starved = run(&text("300kbit"), "tfrc", 1).report.stream.unwrap();
    assert!(starved.stalls >= 1 && starved.stall_time_s > 1.0, "{starved:?}");
}

/// Prints the server's view over time (diagnostics; run with --ignored --nocapture).
#[test]
#[ignore = "diagnostic output only"]
fn trace_tfrc_on_the_marc_scenario() {
    struct Trace(CbrStream, Instant);
    impl Workload for Trace {
        fn on_server(&mut self, now: Instant, conn: &mut braid_transport::proto::Connection) {
            self.0.on_server(now, conn);
            if now >= self.1 {
                self.1 = now + std::time::Duration::from_millis(200);
                let s = conn.stats();
                let p = &s.paths[0];
                eprintln!(
                    "{:>7.3} cwnd {:>7} srtt {:>5.0}ms inflight {:>6} sent {:>8} lost {:>4} cap {}",
                    now.as_secs_f64(),
                    p.cwnd,
                    p.srtt.as_secs_f64() * 1e3,
                    p.in_flight,
                    p.data_bytes_sent,
                    p.packets_lost,
                    conn.send_capacity()
                );
            }
        }
        fn on_client(&mut self, now: Instant, conn: &mut braid_transport::proto::Connection) {
            self.0.on_client(now, conn);
        }
        fn poll_timeout(&self) -> Option<Instant> {
            self.0.poll_timeout()
        }
        fn stats(&self) -> WorkloadStats {
            self.0.stats()
        }
        fn stream_report(&self) -> Option<super::report::StreamReport> {
            self.0.stream_report()
        }
    }
    let name = "tfrc";
    let s = Scenario::load(Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../assets/scenarios/marc-44kBps-tcp-onoff.toml"
    )))
    .unwrap();
    let p = profile::lookup(name).unwrap();
    let wl = CbrStream::new(352_000, 1000, ReadPattern::All)
        .with_media(p.media)
        .ending_at(Instant::from_duration(s.duration));
    let r = run_with_workload(&s, &p, &RunOptions::default(), Box::new(Trace(wl, Instant::ZERO)))
        .unwrap();
    eprintln!("{:?}", r.report.stream);
}
