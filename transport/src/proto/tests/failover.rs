//! Path failure and recovery: cut links, probe timeouts, failover, re-injected data.

use std::sync::Arc;
use std::time::Duration;

use super::harness::*;
use crate::path::{PathId, PathRole};
use crate::proto::{AckPathPolicy, Config, Delivery, Event, Reliability};
use crate::sched::PathView;

#[test]
fn path_dead_mid_transfer_fails_and_transfer_completes_on_the_other() {
    let mut p = Pair::default_pair(vec![Link::new(20, 10, 0.0), Link::new(20, 10, 0.0)]);
    p.connect();
    p.add_path(1, PathRole::Lte);
    let start = p.now;
    let mut cut = false;
    bulk(&mut p, 2_000_000, 10_000, Duration::from_secs(60), |p| {
        if !cut && p.now >= start + Duration::from_millis(500) {
            p.links[1].up = false;
            cut = true;
        }
    });
    assert!(cut);
    // The probes on the dead path keep timing out until it is declared failed.
    assert!(p.run_until(Duration::from_secs(10), |p| {
        p.server_events.contains(&Event::PathFailed(PathId(1)))
    }));
    let s = p.server().stats();
    assert!(s.paths[1].failed);
    assert!(s.paths[0].data_bytes_sent > 1_000_000);
}

/// A cut path is found potentially failed by its probe timeout, not its 200-ms RTO floor:
/// the failover (from its last acknowledgement to the acknowledgement on the other path of
/// the data sent after the detection) takes less than the floor plus the other path's RTT.
#[test]
fn a_cut_path_fails_over_within_its_probe_timeout_and_one_rtt_of_the_other() {
    let mut p = Pair::default_pair(vec![Link::new(10, 10, 0.0), Link::new(40, 10, 0.0)]);
    p.connect();
    p.add_path(1, PathRole::Lte);
    let start = p.now;
    let mut cut = false;
    bulk(&mut p, 3_000_000, 10_000, Duration::from_secs(60), |p| {
        if !cut && p.now >= start + Duration::from_millis(800) {
            p.links[0].up = false;
            cut = true;
        }
    });
    assert!(cut);
    let s = p.server().stats();
    let took = s.failover_time.expect("a failover was measured");
    assert_eq!(s.paths[0].failures, 1, "{s:?}");
    // Found by the RTO alone it takes at least the 200-ms floor plus one round trip of the
    // other path (80 ms base, more with its bulk queue); the probe timeout of a 20-ms path
    // fires long before the floor (measured: 273 ms, the re-injected data queued behind the
    // other path's own bulk window).
    assert!(took < Duration::from_millis(280), "failover took {took:?}");
}

/// A stream slow enough for the fast path alone leaves the other path idle; when the fast
/// path is cut, the idle partner still arms its probe timeout, so the failover does not
/// wait for the 200-ms RTO floor (found by the RTO it takes at least the floor plus the
/// other path's 80-ms round trip).
#[test]
fn a_cut_path_with_an_idle_partner_fails_over_before_the_rto_floor() {
    let mut p = Pair::default_pair(vec![Link::new(10, 10, 0.0), Link::new(40, 10, 0.0)]);
    p.connect();
    p.add_path(1, PathRole::Lte);
    let start = p.now;
    let mut next_send = start;
    let mut id = 0u64;
    let mut lte_before_cut = None;
    let measured = p.run_until(Duration::from_secs(5), |p| {
        let now = p.now;
        // 1 000 bytes every 10 ms: 0.8 Mbit/s, well inside the fast path's window.
        while next_send <= now {
            let _ = p.server().send_message(now, message(id, 1000), Reliability::Reliable);
            id += 1;
            next_send += Duration::from_millis(10);
        }
        while p.client.read_message(now).is_some() {}
        if lte_before_cut.is_none() && now >= start + Duration::from_millis(1500) {
            lte_before_cut = Some(p.server().stats().paths[1].data_bytes_sent);
            p.links[0].up = false;
        }
        p.server().stats().failover_time.is_some()
    });
    assert!(measured, "no failover measured");
    assert_eq!(lte_before_cut, Some(0), "the slow path was not idle before the cut");
    let took = p.server().stats().failover_time.unwrap_or_default();
    assert!(took < Duration::from_millis(250), "failover took {took:?}");
}

/// A packet from the peer on a path that is only potentially failed (fewer RTOs than
/// `path_failure_rtos`) probes it at once, as on a failed path, instead of waiting for
/// the next backed-off RTO: the path answers and carries data again soon after its link
/// returns.
#[test]
fn a_potentially_failed_path_is_probed_when_the_peer_sends_on_it() {
    let mut p = Pair::default_pair(vec![Link::new(10, 10, 0.0), Link::new(40, 10, 0.0)]);
    p.connect();
    p.add_path(1, PathRole::Lte);
    let start = p.now;
    let mut sent = 0u64;
    let mut next_report = start;
    let mut reports = 0u64;
    let mut keep_busy = |p: &mut Pair, sent: &mut u64| {
        let now = p.now;
        while p.server().send_capacity() > 100_000 && *sent < 100_000 {
            p.server().send_message(now, message(*sent, 1000), Reliability::Reliable).unwrap();
            *sent += 1;
        }
        while p.client.read_message(now).is_some() {}
        // The client reports every 100 ms, as a player does.
        if now >= next_report {
            let _ = p.client.send_message(now, message(reports, 100), Reliability::Reliable);
            reports += 1;
            next_report = now + Duration::from_millis(100);
        }
    };
    // Both links down for 0.9 s: two backed-off RTOs (0.2 s and 0.4 s), not yet failed
    // (three); the next backed-off RTO would come 0.8 s after the second.
    p.run_until(Duration::from_millis(500), |p| {
        keep_busy(p, &mut sent);
        false
    });
    for l in &mut p.links {
        l.up = false;
    }
    p.run_until(Duration::from_millis(900), |p| {
        keep_busy(p, &mut sent);
        false
    });
    assert!(
        !p.server_events.contains(&Event::PathFailed(PathId(0))),
        "the fast path should only be potentially failed"
    );
    for l in &mut p.links {
        l.up = true;
    }
    let back = p.now;
    let before = p.server().stats().paths[0].data_bytes_sent;
    // The client's reports reach the server; its own probe goes out at once and the path carries data within a few round trips,
    // long before the next backed-off RTO (0.8 s or more after the last).
    let carried = p.run_until(Duration::from_millis(250), |p| {
        keep_busy(p, &mut sent);
        p.server().stats().paths[0].data_bytes_sent > before
    });
    assert!(carried, "the fast path carried nothing {:?} after its link returned", p.now - back);
}

#[test]
fn failed_path_recovers_when_its_link_returns() {
    let mut p = Pair::default_pair(vec![Link::new(20, 10, 0.0), Link::new(20, 10, 0.0)]);
    p.connect();
    p.add_path(1, PathRole::Lte);
    p.links[1].up = false;
    let mut sent = 0u64;
    assert!(p.run_until(Duration::from_secs(20), |p| {
        keep_busy(p, &mut sent);
        p.server_events.contains(&Event::PathFailed(PathId(1)))
    }));
    p.links[1].up = true;
    assert!(p.run_until(Duration::from_secs(10), |p| {
        keep_busy(p, &mut sent);
        p.server_events.contains(&Event::PathRecovered(PathId(1)))
    }));
    let before = p.server().stats().paths[1].data_bytes_sent;
    p.run_until(Duration::from_secs(2), |p| {
        keep_busy(p, &mut sent);
        false
    });
    assert!(
        p.server().stats().paths[1].data_bytes_sent > before,
        "recovered path carries data again"
    );
}

/// Every ACK on the path its packets came on, usable or not.
#[derive(Debug, Clone, Copy)]
struct AcksOnTheirOwnPath;

impl AckPathPolicy for AcksOnTheirOwnPath {
    fn ack_path(&self, received_on: PathId, _paths: &[PathView]) -> Option<PathId> {
        Some(received_on)
    }
}

/// A failed path whose round trip came back longer than its probe interval: each probe is
/// declared lost at the next RTO before its ACK arrives. That late ACK still names a
/// packet newer than any acknowledged before, so the path answers and recovers.
#[test]
fn a_failed_path_recovers_by_an_ack_that_arrives_after_its_probe_timed_out() {
    let mut cc = config();
    cc.ack_path = Arc::new(AcksOnTheirOwnPath);
    let mut p = Pair::new(cc, config(), vec![Link::new(20, 10, 0.0), Link::new(20, 10, 0.0)], 3);
    p.connect();
    p.add_path(1, PathRole::Lte);
    p.links[1].up = false;
    let mut sent = 0u64;
    assert!(p.run_until(Duration::from_secs(20), |p| {
        keep_busy(p, &mut sent);
        p.server_events.contains(&Event::PathFailed(PathId(1)))
    }));
    // Back, with a 1.4-s round trip: longer than the 1-s probe interval of a failed path.
    p.links[1].up = true;
    p.links[1].delay = Duration::from_millis(700);
    p.links[1].max_queue = Duration::from_secs(2);
    assert!(
        p.run_until(Duration::from_secs(6), |p| {
            keep_busy(p, &mut sent);
            p.server_events.contains(&Event::PathRecovered(PathId(1)))
        }),
        "{}",
        p.server().debug_timers()
    );
}

/// Both paths cut for 3 s under a protected stream (S-EDPF-8's code, minRTT here), then
/// back: every path of the sender recovers within one probe interval and a few round
/// trips of the return, and the stream completes in order.
#[test]
fn a_stream_recovers_after_every_path_was_cut_for_three_seconds() {
    let mut p = Pair::new(
        fec_config(8),
        fec_config(8),
        vec![Link::new(10, 20, 0.0), Link::new(40, 10, 0.0)],
        1,
    );
    p.connect();
    p.add_path(1, PathRole::Lte);
    let start = p.now;
    let (cut_at, back_at) = (start + Duration::from_secs(2), start + Duration::from_secs(5));
    let mut recovered_at = [None, None];
    let n = 800u64;
    let mut got = Vec::new();
    for i in 0..n {
        let now = p.now;
        p.server().send_message(now, message(i, 1000), Reliability::Reliable).expect("send");
        p.run_until(Duration::from_millis(10), |p| {
            let now = p.now;
            let up = now < cut_at || now >= back_at;
            p.links[0].up = up;
            p.links[1].up = up;
            while let Some(d) = p.client.read_message(now) {
                got.push(d);
            }
            for (k, slot) in recovered_at.iter_mut().enumerate() {
                if slot.is_none()
                    && p.server_events.contains(&Event::PathRecovered(PathId(k as u32)))
                {
                    *slot = Some(now);
                }
            }
            false
        });
    }
    p.run_until(Duration::from_secs(5), |p| {
        let now = p.now;
        while let Some(d) = p.client.read_message(now) {
            got.push(d);
        }
        false
    });
    assert!(p.server_events.contains(&Event::PathFailed(PathId(0))), "the cut was detected");
    for (k, at) in recovered_at.iter().enumerate() {
        let at = at.unwrap_or_else(|| panic!("path {k} never recovered"));
        // One 1-s probe interval, the 25-ms ACK delay and two round trips of LTE at most.
        assert!(at - back_at < Duration::from_millis(1200), "path {k}: {:?}", at - back_at);
    }
    assert_eq!(got.len() as u64, n, "stream incomplete");
    for (i, d) in got.iter().enumerate() {
        assert_eq!(d, &Delivery::Message { id: i as u64, data: message(i as u64, 1000) });
    }
}

/// Data re-injected when its path was found potentially failed is not queued a second
/// time when the RTO later declares the original packets lost: with a budget of one
/// retransmission, that second count would abandon messages whose copy is still on its
/// way over the slow surviving path (300-ms round trip, longer than the dead path's RTO).
#[test]
fn re_injected_data_is_not_re_sent_again_when_the_dead_path_times_out() {
    let cfg = || Config::new(Arc::new(TestReno), Arc::new(Alternate::default()));
    let mut p = Pair::new(cfg(), cfg(), vec![Link::new(10, 10, 0.0), Link::new(150, 10, 0.0)], 4);
    p.connect();
    p.add_path(1, PathRole::Lte);
    let start = p.now;
    let n = 300u64;
    let mut got = Vec::new();
    for i in 0..n {
        let now = p.now;
        let at = now + Duration::from_secs(100);
        let r = Reliability::Deadline { at, max_retransmissions: 1 };
        p.server().send_message(now, message(i, 1000), r).expect("send");
        p.run_until(Duration::from_millis(10), |p| {
            if p.now >= start + Duration::from_secs(1) {
                p.links[0].up = false;
            }
            let now = p.now;
            while let Some(d) = p.client.read_message(now) {
                got.push(d);
            }
            false
        });
    }
    p.run_until(Duration::from_secs(3), |p| {
        let now = p.now;
        while let Some(d) = p.client.read_message(now) {
            got.push(d);
        }
        false
    });
    let s = p.server().stats();
    assert!(s.paths[0].failures >= 1, "the cut was found: {s:?}");
    // Nothing was given up on, though the dead path's RTO declared the originals lost
    // while their copies were still in flight.
    assert_eq!(s.messages_abandoned_sent, 0, "{s:?}");
    let gaps: Vec<&Delivery> = got.iter().filter(|d| matches!(d, Delivery::Gap { .. })).collect();
    assert!(gaps.is_empty(), "{} messages abandoned: {gaps:?}", gaps.len());
    assert_eq!(got.len() as u64, n);
}
