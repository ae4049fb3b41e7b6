use std::path::Path;

use super::*;
use braid_transport::profile;

fn scenario(text: &str) -> Scenario {
    Scenario::parse(text, "test.toml", Path::new(".")).unwrap()
}

fn run_named(text: &str, profile_name: &str, path: Option<&str>) -> SimResult {
    let s = scenario(text);
    let p = profile::lookup(profile_name).unwrap();
    let opts = RunOptions { path: path.map(str::to_string), ..RunOptions::default() };
    run_detailed(&s, &p, &opts).unwrap()
}

const BASE: &str = r#"
name = "unit"
duration_s = 3
"#;

#[test]
fn a_named_link_shared_by_two_paths_is_one_bottleneck() {
    let text = format!(
        r#"{BASE}
[[link]]
name = "shared"
rate = "4mbit"
delay_ms = 10
[[path]]
name = "a"
down = {{ via = ["shared"] }}
up = {{ delay_ms = 10 }}
[[path]]
name = "b"
down = {{ via = ["shared"] }}
up = {{ delay_ms = 10 }}
"#
    );
    let r = run_named(&text, "mptcp", None);
    assert!(r.report.goodput_bps < 4e6, "{}", r.report.goodput_bps);
    assert!(r.report.goodput_bps > 3e6, "{}", r.report.goodput_bps);
    assert_eq!(r.links.len(), 3);
}

#[test]
fn chained_links_add_their_delays() {
    let text = format!(
        r#"{BASE}
[[link]]
name = "first"
rate = "10mbit"
delay_ms = 15
[[link]]
name = "second"
rate = "10mbit"
delay_ms = 25
[[path]]
name = "a"
down = {{ via = ["first", "second"] }}
up = {{ delay_ms = 40 }}
[workload]
bytes = 20000
"#
    );
    let r = run_named(&text, "tcp", None);
    assert_eq!(r.report.bytes_delivered, 20_000);
    let rtt = r.report.paths[0].rtt_ms;
    assert!((80.0..95.0).contains(&rtt), "rtt {rtt}");
    assert!(r.links.iter().take(2).all(|l| l.counters.delivered > 10));
}

#[test]
fn clip_streams_need_the_media_session() {
    let text = format!(
        "{BASE}[[path]]\nname = \"a\"\ndown = {{}}\nup = {{}}\n[workload]\nkind = \"stream\"\nclip = \"x.mp4\"\n"
    );
    let s = scenario(&text);
    let e = run(&s, &profile::lookup("mptcp").unwrap(), &RunOptions::default()).unwrap_err();
    assert!(matches!(e, SimError::Unsupported(_)));
}

/// Sends ten 1000-byte messages, one every 100 ms, and reads them.
struct Ticker {
    next: Instant,
    sent: u64,
    stats: WorkloadStats,
    sent_at: Vec<Instant>,
}

impl Workload for Ticker {
    fn on_server(&mut self, now: Instant, conn: &mut braid_transport::proto::Connection) {
        while self.sent < 10 && now >= self.next {
            conn.send_message(
                now,
                bytes::Bytes::from(vec![7u8; 1000]),
                braid_transport::proto::Reliability::Reliable,
            )
            .unwrap();
            self.sent_at.push(now);
            self.sent += 1;
            self.next += std::time::Duration::from_millis(100);
        }
    }
    fn on_client(&mut self, now: Instant, conn: &mut braid_transport::proto::Connection) {
        while let Some(braid_transport::proto::Delivery::Message { id, data }) =
            conn.read_message(now)
        {
            self.stats.bytes_delivered += data.len() as u64;
            self.stats.messages += 1;
            self.stats.delays_us.push((now - self.sent_at[id as usize]).as_micros() as u64);
        }
    }
    fn poll_timeout(&self) -> Option<Instant> {
        (self.sent < 10).then_some(self.next)
    }
    fn stats(&self) -> WorkloadStats {
        self.stats.clone()
    }
}

#[test]
fn a_custom_workload_is_woken_at_its_own_times() {
    let text = format!(
        "{BASE}[[path]]\nname = \"a\"\ndown = {{ rate = \"10mbit\", delay_ms = 30 }}\nup = {{ delay_ms = 30 }}\n"
    );
    let s = scenario(&text);
    let w = Ticker {
        next: Instant::from_micros(500_000),
        sent: 0,
        stats: WorkloadStats::default(),
        sent_at: Vec::new(),
    };
    let r = run_with_workload(
        &s,
        &profile::lookup("tcp").unwrap(),
        &RunOptions::default(),
        Box::new(w),
    )
    .unwrap();
    assert_eq!(r.report.bytes_delivered, 10_000);
    // One-way delay 30 ms plus ~1 ms of serialization; no queueing.
    assert!((30.0..40.0).contains(&r.report.delay_ms.p50), "{:?}", r.report.delay_ms);
}

#[test]
fn a_mahimahi_trace_path_delivers_about_the_trace_rate() {
    let dir = std::env::var_os("BRAID_TRACE_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/traces"));
    if !dir.join("TMobile-LTE-short.down").exists() {
        braid_tests::skip(&format!("no traces in {}", dir.display()));
        return;
    }
    let text = String::from(
        "name = \"trace\"\nduration_s = 4\n[[path]]\nname = \"lte\"\nrole = \"lte\"\ndown = { trace = \"TMobile-LTE-short.down\", delay_ms = 20 }\nup = { trace = \"TMobile-LTE-short.up\", delay_ms = 20 }\n",
    );
    let s = Scenario::parse(&text, "trace.toml", &dir).unwrap();
    let r = run(&s, &profile::lookup("tcp").unwrap(), &RunOptions::default()).unwrap();
    // The first seconds of this trace run well above 1 Mbit/s.
    assert!(r.goodput_bps > 1e6, "{}", r.summary_table());
}

const STREAM_PATH: &str = r#"
name = "stream"
duration_s = 4
[[path]]
name = "a"
down = { rate = "4mbit", delay_ms = 25 }
up = { rate = "4mbit", delay_ms = 25 }
"#;

#[test]
fn a_cbr_stream_below_capacity_arrives_at_its_rate_with_one_way_delay() {
    let text = format!(
        "{STREAM_PATH}[workload]\nkind = \"stream\"\ncbr = {{ rate = \"1mbit\", packet_bytes = 1000 }}\n"
    );
    let r = run_named(&text, "tcp", None);
    let g = r.report.goodput_bps;
    assert!((0.9e6..1.01e6).contains(&g), "goodput {g}");
    assert!(r.check.is_clean());
    // 25 ms one way + ~2 ms serialization; the first messages wait for the handshake.
    assert!((25.0..35.0).contains(&r.report.delay_ms.p50), "{:?}", r.report.delay_ms);
}

#[test]
fn a_pattern_reader_limits_what_the_client_reads() {
    let text = format!(
        "{STREAM_PATH}[workload]\nkind = \"stream\"\ncbr = {{ rate = \"3mbit\" }}\nreader = {{ pattern = {{ rates = [\"500kbit\", \"1500kbit\"], period = 200 }} }}\n"
    );
    let r = run_named(&text, "tcp", None);
    let g = r.report.goodput_bps;
    // Mean of 0.5 and 1.5 Mbit/s, minus the start-up.
    assert!((0.85e6..1.05e6).contains(&g), "goodput {g}");
    assert!(r.check.is_clean());
}

#[test]
fn tfrc_cross_traffic_runs_when_the_profile_exists() {
    if profile::lookup("tfrc").is_err() {
        return;
    }
    let text = format!(
        "{BASE}[[link]]\nname = \"b\"\nrate = \"4mbit\"\ndelay_ms = 20\n[[path]]\nname = \"a\"\ndown = {{ via = [\"b\"] }}\nup = {{ delay_ms = 20 }}\n[[cross]]\nlink = \"b\"\nkind = \"tfrc\"\n"
    );
    let r = run_named(&text, "tcp", None);
    assert!(r.cross[0].bytes_delivered > 0, "{:?}", r.cross);
    assert!(r.report.bytes_delivered > 0);
}

/// A 1 Mbit/s CBR stream over one 4 Mbit/s path that is down from 6 s to 6.8 s (longer
/// for the stream: the retransmission timer backs off meanwhile), with the given
/// `[workload]` playout keys.
fn cbr_outage(keys: &str) -> SimResult {
    let text = format!(
        r#"name = "cbr-outage"
duration_s = 16
[[path]]
name = "a"
down = {{ rate = "4mbit", delay_ms = 20 }}
up = {{ rate = "4mbit", delay_ms = 20 }}
[[event]]
at_s = 6
path = "a"
action = "down"
[[event]]
at_s = 6.8
path = "a"
action = "up"
[workload]
kind = "stream"
cbr = {{ rate = "1mbit", packet_bytes = 1000 }}
{keys}
"#
    );
    run_named(&text, "tcp", None)
}

#[test]
fn a_cbr_streams_playout_keys_change_its_stalls() {
    let stream = |keys: &str| cbr_outage(keys).report.stream.expect("a stream report");
    // fixed: 2.5 s of media buffered before the start carries through the outage.
    let fixed = stream(r#"playout = "fixed""#);
    assert_eq!(fixed.playout_policy, "fixed");
    assert_eq!(fixed.stalls, 0, "{fixed:?}");
    assert!(fixed.startup_delay_s > 2.5, "{fixed:?}");
    // media3 starts on 1 s: sooner, and the outage drains it.
    let media3 = stream(r#"playout = "media3""#);
    assert_eq!(media3.playout_policy, "media3");
    assert!(media3.startup_delay_s < fixed.startup_delay_s - 1.0, "{media3:?}");
    assert!(media3.stalls >= 1, "{media3:?}");
    // fixed with a 1-s client buffer: the reader stops at 1 s, playback starts on a full
    // buffer, and the outage drains it too.
    let small = stream("playout = \"fixed\"\nbuffer_s = 1");
    assert!(small.startup_delay_s < fixed.startup_delay_s - 1.0, "{small:?}");
    assert!(small.stalls >= 1, "{small:?}");
    let bytes = stream("playout = \"fixed\"\nbuffer_bytes = 125000");
    assert!(bytes.stalls >= 1, "{bytes:?}");
    // adaptive: a fast path gives a short start.
    let adaptive = stream("");
    assert_eq!(adaptive.playout_policy, "adaptive");
    assert!(adaptive.startup_delay_s < fixed.startup_delay_s, "{adaptive:?}");
}

#[test]
fn a_cbr_stream_with_the_oracle_policy_is_refused() {
    let text = format!(
        "{BASE}[[path]]\nname = \"a\"\ndown = {{}}\nup = {{}}\n[workload]\nkind = \"stream\"\ncbr = {{ rate = \"1mbit\" }}\nplayout = \"oracle\"\n"
    );
    let s = scenario(&text);
    let e = run(&s, &profile::lookup("tcp").unwrap(), &RunOptions::default()).unwrap_err();
    assert!(matches!(e, SimError::Unsupported(_)), "{e}");
}
