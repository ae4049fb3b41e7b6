//! `[[node]]`: the split proxy in the simulator.

use std::cell::RefCell;
use std::path::Path;
use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;

use super::*;
use braid_transport::profile;
use braid_transport::proto::{Connection, Delivery, Reliability};

/// Backbone 2 Mbit/s / 40 ms, then a 1 Mbit/s / 100 ms bearer; the node after the backbone.
fn text(loss: f64, node_keys: &str, workload: &str) -> String {
    format!(
        r#"
name = "node"
duration_s = 20
seed = 3
[[link]]
name = "backbone"
rate = "2mbit"
delay_ms = 40
loss = {loss}
[[link]]
name = "bearer"
rate = "1mbit"
delay_ms = 100
[[path]]
name = "p"
role = "wired"
down = {{ via = ["backbone", "bearer"] }}
up = {{ rate = "2mbit", delay_ms = 140 }}
{node_keys}
[workload]
{workload}
"#
    )
}

const NODE: &str = r#"
[[node]]
name = "proxy"
after = "backbone"
buffer_bytes = 100000
"#;

fn scenario(text: &str) -> Scenario {
    Scenario::parse(text, "node.toml", Path::new(".")).unwrap()
}

fn bulk(node: &str, profile_name: &str) -> Result<SimResult, SimError> {
    let s = scenario(&text(0.0, node, "kind = \"bulk\""));
    run_detailed(&s, &profile::lookup(profile_name).unwrap(), &RunOptions::default())
}

#[test]
fn bulk_through_a_node_arrives_intact_and_the_node_holds_what_the_bearer_cannot_take() {
    let r = bulk(NODE, "tcp").unwrap();
    assert!(r.check.is_clean(), "{:?}", r.check);
    assert_eq!(r.unroutable, 0);
    // The bearer (1 Mbit/s) is the bottleneck of the whole chain.
    let goodput = r.report.goodput_bps;
    assert!((700_000.0..1_000_000.0).contains(&goodput), "goodput {goodput}");
    let node = r.node.as_ref().expect("the flow crossed the node");
    assert_eq!(node.name, "proxy");
    // The backbone delivers faster than the bearer drains: the node fills up to its
    // buffer (plus at most one 16 KB message read while below it), never beyond.
    let peak = node.peak_buffer_bytes;
    assert!(peak >= 60_000, "peak {peak}");
    assert!(peak <= 100_000 + Bulk::MESSAGE_BYTES as u64, "peak {peak}");
    assert_eq!(r.report.proxy_buffer_bytes, Some(peak));
    // Arrivals at the node are cumulative, one per series row, and cover what the
    // client read.
    assert_eq!(node.arrived_bytes.len(), r.series.rows.len());
    assert!(node.arrived_bytes.windows(2).all(|w| w[0] <= w[1]));
    assert!(node.arrived_bytes.last().copied().unwrap_or(0) >= r.report.bytes_delivered);
    // Each leg has its own RTT: the upstream one ends at the node (40 ms each way of
    // the 140 ms return), the client's crosses the bearer.
    assert!((80.0..200.0).contains(&node.upstream_rtt_ms), "{}", node.upstream_rtt_ms);
    let client_rtt = r.report.paths[0].rtt_ms;
    assert!(client_rtt >= 200.0, "client leg rtt {client_rtt}");
}

#[test]
fn the_report_names_the_proxy_buffer_only_when_a_node_was_crossed() {
    let with = bulk(NODE, "tcp").unwrap();
    let without = bulk("", "tcp").unwrap();
    assert!(without.report.proxy_buffer_bytes.is_none());
    assert!(without.node.is_none());
    assert!(!without.report.to_json().contains("proxy_buffer_bytes"));
    assert!(with.report.to_json().contains("\"proxy_buffer_bytes\""));
    // Both legs are bearer-limited in the end; the node only changes how the chain's
    // bytes get there, so the totals stay close.
    let (a, b) = (with.report.bytes_delivered as f64, without.report.bytes_delivered as f64);
    assert!(a > 0.9 * b, "with {a} without {b}");
}

#[test]
fn a_node_run_is_deterministic() {
    let a = bulk(NODE, "tfrc").unwrap();
    let b = bulk(NODE, "tfrc").unwrap();
    assert_eq!(a.report, b.report);
    assert_eq!(a.node, b.node);
}

#[test]
fn a_node_refuses_what_it_cannot_run() {
    let pinned = "[[node]]\nname = \"proxy\"\nafter = \"backbone\"\nupstream_profile = \"tfrc\"";
    let e = bulk(pinned, "tcp").unwrap_err();
    assert!(e.to_string().contains("pins its upstream leg"), "{e}");
    // The pinned profile itself runs.
    assert!(bulk(pinned, "tfrc").is_ok());
    let unknown = "[[node]]\nname = \"proxy\"\nafter = \"backbone\"\ndownstream_profile = \"nope\"";
    assert!(matches!(bulk(unknown, "tcp"), Err(SimError::Profile(..))));
    // Two paths and a multipath profile: the node splits one path's connection only.
    let two = text(0.0, NODE, "kind = \"bulk\"").replace(
        "[workload]",
        "[[path]]\nname = \"q\"\ndown = { rate = \"1mbit\" }\nup = { rate = \"1mbit\" }\n[workload]",
    );
    let e =
        run_detailed(&scenario(&two), &profile::lookup("mptcp").unwrap(), &RunOptions::default())
            .unwrap_err();
    assert!(e.to_string().contains("multipath"), "{e}");
    // A one-path profile on the other path does not cross the node.
    let r = run_detailed(
        &scenario(&two),
        &profile::lookup("tcp").unwrap(),
        &RunOptions { path: Some("q".into()), ..RunOptions::default() },
    )
    .unwrap();
    assert!(r.node.is_none());
}

#[test]
fn a_zero_node_buffer_is_refused_by_the_scenario() {
    let t = text(
        0.0,
        "[[node]]\nname = \"x\"\nafter = \"backbone\"\nbuffer_bytes = 0",
        "kind = \"bulk\"",
    );
    let e = Scenario::parse(&t, "node.toml", Path::new(".")).unwrap_err();
    assert!(e.to_string().contains("buffer_bytes"), "{e}");
}

/// Deadline messages with no retransmission, one every 10 ms; the client records what it
/// read, in order.
struct Deadlines {
    next_id: u64,
    next_at: Instant,
    read: Rc<RefCell<Vec<(u64, bool)>>>,
}

impl Workload for Deadlines {
    fn on_server(&mut self, now: Instant, conn: &mut Connection) {
        while self.next_at <= now && self.next_id < 1500 {
            let data = Bytes::from(vec![7u8; 600]);
            let rel = Reliability::Deadline {
                at: now + Duration::from_millis(300),
                max_retransmissions: 0,
            };
            if conn.send_message(now, data, rel).is_err() {
                break;
            }
            self.next_id += 1;
            self.next_at += Duration::from_millis(10);
        }
    }
    fn on_client(&mut self, now: Instant, conn: &mut Connection) {
        while let Some(d) = conn.read_message(now) {
            let mut read = self.read.borrow_mut();
            match d {
                Delivery::Message { id, .. } => read.push((id, true)),
                Delivery::Gap { id } => read.push((id, false)),
            }
        }
    }
    fn poll_timeout(&self) -> Option<Instant> {
        None
    }
    fn stats(&self) -> WorkloadStats {
        WorkloadStats::default()
    }
}

#[test]
fn gaps_upstream_reach_the_client_as_gaps_with_the_same_ids() {
    // 5 % loss on the backbone and no retransmission: the upstream sender abandons
    // messages, and the node must keep the numbering for the client.
    let s = scenario(&text(
        0.05,
        "[[node]]\nname = \"proxy\"\nafter = \"backbone\"\ndownstream_profile = \"tcp\"",
        "kind = \"bulk\"",
    ));
    let read = Rc::new(RefCell::new(Vec::new()));
    let wl = Deadlines { next_id: 0, next_at: Instant::ZERO, read: Rc::clone(&read) };
    let p = profile::lookup("marc").unwrap();
    let r = run_with_workload(&s, &p, &RunOptions::default(), Box::new(wl)).unwrap();
    assert!(r.node.is_some());
    let read = read.borrow();
    assert!(read.len() > 1000, "read {}", read.len());
    for (k, &(id, _)) in read.iter().enumerate() {
        assert_eq!(id, k as u64, "ids must stay contiguous through the node");
    }
    let gaps = read.iter().filter(|r| !r.1).count();
    assert!(gaps > 0, "5 % loss with no retransmission leaves gaps");
}

/// The proxy paper's scenario B without the backbone's random loss: the cross traffic's
/// start-up drops slow the TFRC upstream leg to 14–37 kbit/s, so the first 16-KiB bulk
/// message takes the node more than the 5-s idle timeout. Without the keep-alive of the
/// waiting endpoints the client timed out at 6.2 s with nothing delivered.
#[test]
fn a_client_waiting_on_a_slow_upstream_leg_keeps_its_connection() {
    let text = r#"
name = "proxy-slow-upstream"
duration_s = 15
seed = 1
[[link]]
name = "backbone"
rate = "2048kbit"
delay_ms = 75
[[link]]
name = "ingress"
rate = "78kbit"
delay_ms = 2
[[link]]
name = "bearer"
rate = "78kbit"
delay_ms = 200
[[path]]
name = "wireless"
role = "wired"
down = { via = ["backbone", "ingress", "bearer"] }
up = { rate = "2mbit", delay_ms = 277 }
[[node]]
name = "proxy"
after = "ingress"
downstream_profile = "tcp+fixed-bdp"
[[cross]]
link = "backbone"
kind = "reno"
count = 3
[[cross]]
link = "backbone"
kind = "tfrc"
count = 3
[workload]
kind = "bulk"
"#;
    let r =
        run_detailed(&scenario(text), &profile::lookup("tfrc").unwrap(), &RunOptions::default())
            .expect("the run lasts its duration");
    assert!(r.report.duration_s >= 15.0 - 1e-9, "the run stopped at {} s", r.report.duration_s);
    assert!(r.report.bytes_delivered > 0, "{:?}", r.report.bytes_delivered);
}
