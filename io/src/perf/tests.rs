use std::path::Path;
use std::sync::{Arc, Mutex};

use braid_netem::scenario::Scenario;
use braid_transport::PathRole;
use braid_transport::profile::{self, ConfigParams, Side};
use serde_json::Value;

use super::*;
use crate::driver::PathSpec;

fn config(side: Side) -> Arc<braid_transport::proto::Config> {
    let p = profile::lookup("mptcp").unwrap();
    Arc::new(p.connection_config(ConfigParams::new(side, profile::Clock::Real)))
}

fn keys(v: &Value) -> Vec<&str> {
    v.as_object().unwrap().keys().map(String::as_str).collect()
}

fn sample() -> PerfReport {
    let totals = Totals { bytes: 10, seconds: 1.5, bits_per_second: 53.3 };
    PerfReport {
        start: Start {
            connecting_to: HostPort { host: "127.0.0.1".into(), port: 5201 },
            scenario: None,
            profile: "mptcp".into(),
            time_s: 10.0,
            message_bytes: MESSAGE_BYTES,
            connection_id: "00000000000000ab".into(),
            paths: vec![StartPath {
                name: "path0".into(),
                local: "127.0.0.1:4000".into(),
                remote: "127.0.0.1:5201".into(),
                role: "wired".into(),
                iface: String::new(),
            }],
        },
        intervals: vec![Interval {
            streams: vec![IntervalStream {
                socket: 0,
                name: "path0".into(),
                start: 0.0,
                end: 1.0,
                seconds: 1.0,
                bytes: 10,
                bits_per_second: 80.0,
            }],
            sum: IntervalSum {
                start: 0.0,
                end: 1.0,
                seconds: 1.0,
                bytes: 10,
                bits_per_second: 80.0,
            },
        }],
        end: End {
            sum_received: totals.clone(),
            sum_sent: totals,
            paths: vec![EndPath {
                name: "path0".into(),
                bytes: 10,
                bits_per_second: 53.3,
                rtt_ms: 1.0,
                retransmits: 0,
                capacity_bps: 0.0,
                error: String::new(),
                energy_j: None,
            }],
            verified: true,
            sender_counters: true,
            capacity_bps: None,
            share_of_capacity: None,
            energy_j: None,
            mode_timeline: Vec::new(),
            failed_mode_switches: None,
        },
    }
}

#[test]
fn the_json_report_has_the_fixed_keys_in_alphabetical_order() {
    let text = sample().to_json_pretty().unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(keys(&v), ["end", "intervals", "start"]);
    assert_eq!(
        keys(&v["start"]),
        ["connecting_to", "connection_id", "message_bytes", "paths", "profile", "time_s"]
    );
    assert_eq!(keys(&v["start"]["paths"][0]), ["iface", "local", "name", "remote", "role"]);
    assert_eq!(
        keys(&v["intervals"][0]["streams"][0]),
        ["bits_per_second", "bytes", "end", "name", "seconds", "socket", "start"]
    );
    assert_eq!(
        keys(&v["intervals"][0]["sum"]),
        ["bits_per_second", "bytes", "end", "seconds", "start"]
    );
    assert_eq!(
        keys(&v["end"]),
        ["paths", "sender_counters", "sum_received", "sum_sent", "verified"]
    );
    assert_eq!(keys(&v["end"]["sum_received"]), ["bits_per_second", "bytes", "seconds"]);
    assert_eq!(
        keys(&v["end"]["paths"][0]),
        ["bits_per_second", "bytes", "capacity_bps", "error", "name", "retransmits", "rtt_ms"]
    );
    // Counts are integers, times and rates floats.
    assert!(v["end"]["sum_received"]["bytes"].is_u64());
    assert!(v["intervals"][0]["sum"]["start"].is_f64());
    assert!(text.contains("\"start\": 0.0"), "{text}");
    // A scenario run adds the scenario and the capacity.
    let mut r = sample();
    r.start.scenario = Some("two".into());
    r.end.capacity_bps = Some(1e6);
    r.end.share_of_capacity = Some(0.5);
    let v = serde_json::to_value(&r).unwrap();
    assert_eq!(v["start"]["scenario"], "two");
    assert_eq!(v["end"]["share_of_capacity"], 0.5);
    let back: PerfReport = serde_json::from_value(v).unwrap();
    assert_eq!(back, r);
}

#[test]
fn server_counters_round_trip_and_missing_fields_default() {
    let c = ServerCounters {
        braid_perf_report: 1,
        bytes_queued: 3 * MESSAGE_BYTES as u64,
        bytes_sent: Some(40_000),
        retransmitted_bytes: 12,
        paths: vec![ServerPath { id: 1, data_bytes_sent: 9, packets_lost: 2, srtt_ms: 20.5 }],
    };
    let m = control_message(&c);
    assert_ne!(m.len(), MESSAGE_BYTES);
    assert_eq!(serde_json::from_slice::<ServerCounters>(&m).unwrap(), c);
    let sparse: ServerCounters = serde_json::from_str(r#"{"paths": [{"id": 2}]}"#).unwrap();
    assert_eq!(sparse.bytes_sent, None);
    assert_eq!(sparse.paths[0].id, 2);
    assert_eq!(&control_message(&Stop { stop: true })[..], br#"{"stop":true}"#);
}

#[test]
fn iperf_units() {
    assert_eq!(fmt_bytes(467_000), "456 KBytes");
    assert_eq!(fmt_bytes(2_980_000), "2.84 MBytes");
    assert_eq!(fmt_bytes(3 << 30), "3.00 GBytes");
    assert_eq!(fmt_rate(431_000.0), "431 Kbits/sec");
    assert_eq!(fmt_rate(7.62e6), "7.62 Mbits/sec");
    assert_eq!(fmt_rate(1.2e9), "1.20 Gbits/sec");
}

#[test]
fn errors_read_as_one_line() {
    let e = PerfError::ConnectionLost {
        remote: "127.0.0.1:5201".parse().unwrap(),
        after_s: 2.04,
        verified_bytes: 2 << 20,
        source: DriverError::LocallyClosed,
    };
    assert_eq!(
        e.to_string(),
        "connection to 127.0.0.1:5201 lost after 2.0 s (2.00 MBytes received intact)"
    );
    let e = PerfError::Connect { remote: None, source: DriverError::NoPaths };
    assert_eq!(e.to_string(), "connecting");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_verifies_a_served_stream_and_gets_the_senders_counters() {
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let seen: Arc<Mutex<Vec<ServerEvent>>> = Arc::default();
    let (addr_tx, addr_rx) = tokio::sync::oneshot::channel();
    let addr_tx = Mutex::new(Some(addr_tx));
    let events = {
        let seen = Arc::clone(&seen);
        Arc::new(move |e: ServerEvent| {
            if let ServerEvent::Listening(a) = e
                && let Some(t) = addr_tx.lock().unwrap().take()
            {
                let _ = t.send(a);
            }
            seen.lock().unwrap().push(e);
        })
    };
    let identity = crate::tls::self_signed().unwrap();
    let server = tokio::spawn(run_server(
        "127.0.0.1:0".parse().unwrap(),
        config(Side::Server),
        identity.crypto.clone(),
        true,
        async move {
            let _ = rx.await;
        },
        events,
    ));
    let addr = addr_rx.await.unwrap();
    // Through a rate-limited emulated path, so that the test leaves CPU to the others
    // (fast enough that what is queued drains within the end exchange).
    let one_path = Scenario::parse(
        r#"
        name = "one"
        duration_s = 1
        [[path]]
        name = "a"
        role = "wired"
        down = { rate = "40mbit", delay_ms = 2 }
        up = { rate = "40mbit", delay_ms = 2 }
        "#,
        "one.toml",
        Path::new("."),
    )
    .unwrap();
    let relay =
        crate::relay::start(&one_path, addr, "127.0.0.1".parse().unwrap(), None, 1).await.unwrap();
    let paths = vec![PerfPath {
        name: "path0".into(),
        spec: PathSpec::to(relay.paths()[0].listen, PathRole::Wired),
        capacity_bps: None,
    }];
    let options = ClientOptions {
        time: Some(Duration::from_millis(1200)),
        interval: Duration::from_millis(500),
    };
    let mut started = 0;
    let mut intervals = 0;
    let run = run_client(
        addr,
        paths,
        &profile::lookup("mptcp").unwrap(),
        config(Side::Client),
        identity.pinned_client(),
        options,
        &mut |e| match e {
            Event::Started(_) => started += 1,
            Event::Interval(_) => intervals += 1,
        },
    )
    .await
    .unwrap();
    assert_eq!(started, 1);
    assert!(intervals >= 2, "{intervals} intervals");
    assert_eq!(run.report.intervals.len(), intervals);
    let end = &run.report.end;
    assert!(end.verified && end.sender_counters, "{end:?}");
    assert!(run.messages > 0);
    assert_eq!(end.sum_received.bytes, run.messages * MESSAGE_BYTES as u64);
    assert!(end.sum_sent.bytes >= end.sum_received.bytes);
    assert_eq!(run.report.start.connection_id, format!("{:016x}", run.connection_id));
    // One-off: the server ends with its client.
    let stats = tokio::time::timeout(Duration::from_secs(10), server).await.unwrap().unwrap();
    relay.stop().await;
    assert!(stats.is_ok());
    let _ = tx.send(());
    let seen = seen.lock().unwrap();
    assert!(matches!(seen.first(), Some(ServerEvent::Listening(_))));
    assert!(
        seen.iter().any(|e| matches!(e, ServerEvent::Served(s) if s.connection_id == run.connection_id && s.bytes_queued > 0)),
        "{seen:?}"
    );
}

/// Two paths of 4 and 2 Mbit/s.
fn scenario() -> Scenario {
    Scenario::parse(
        r#"
        name = "two"
        duration_s = 1
        [[path]]
        name = "a"
        role = "wifi"
        down = { rate = "4mbit", delay_ms = 5 }
        up = { rate = "4mbit", delay_ms = 5 }
        [[path]]
        name = "b"
        role = "lte"
        down = { rate = "2mbit", delay_ms = 10 }
        up = { rate = "2mbit", delay_ms = 10 }
        "#,
        "two.toml",
        Path::new("."),
    )
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scenario_run_reports_per_path_capacity() {
    let run = run_scenario(
        &scenario(),
        &profile::lookup("mptcp").unwrap(),
        config(Side::Server),
        config(Side::Client),
        ClientOptions { time: None, interval: Duration::from_secs(1) },
        &mut |_| {},
    )
    .await
    .unwrap();
    let r = &run.report;
    assert_eq!(r.start.scenario.as_deref(), Some("two"));
    assert_eq!(r.start.paths.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(), ["a", "b"]);
    assert_eq!(r.end.capacity_bps, Some(6e6));
    assert_eq!(r.end.paths[1].capacity_bps, 2e6);
    assert!(r.end.sender_counters && r.end.sum_received.bytes > 0, "{:?}", r.end);
}
