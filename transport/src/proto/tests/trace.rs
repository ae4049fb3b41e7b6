//! Tracing: every packet and path event recorded, and nothing sent changed by it.

use std::sync::Arc;
use std::time::Duration;

use super::harness::*;
use crate::path::{PathId, PathRole};
use crate::proto::Event;
use crate::time::Instant;

/// Collects traced events (a shared vector, so the test can read it while the connection
/// holds the sink).
struct Collect(Arc<std::sync::Mutex<Vec<(Instant, crate::trace::TraceEvent)>>>);

impl crate::trace::TraceSink for Collect {
    fn event(&mut self, now: Instant, ev: &crate::trace::TraceEvent) {
        self.0.lock().expect("lock").push((now, ev.clone()));
    }
}

#[test]
fn tracing_records_every_packet_per_path_and_changes_nothing_sent() {
    use crate::trace::TraceEvent;
    let run = |traced: bool| {
        let mut p = Pair::default_pair(vec![Link::new(20, 10, 0.02), Link::new(30, 10, 0.02)]);
        p.keep_trace = true;
        let events = Arc::new(std::sync::Mutex::new(Vec::new()));
        if traced {
            p.client.set_trace(Some(Box::new(Collect(Arc::clone(&events)))));
        }
        p.connect();
        p.add_path(1, PathRole::Lte);
        bulk(&mut p, 300_000, 10_000, Duration::from_secs(60), |_| {});
        let stats = p.client.stats();
        let events = events.lock().expect("lock").clone();
        (p.trace, stats, events)
    };
    let (plain, _, none) = run(false);
    let (traced, stats, events) = run(true);
    assert!(none.is_empty());
    assert!(plain == traced, "tracing changed what was sent");
    for ps in &stats.paths {
        let sent = events
            .iter()
            .filter(|(_, e)| matches!(e, TraceEvent::PacketSent { path, .. } if *path == ps.id))
            .count() as u64;
        assert_eq!(sent, ps.packets_sent, "path {}", ps.id);
        let received = events
            .iter()
            .filter(|(_, e)| matches!(e, TraceEvent::PacketReceived { path, .. } if *path == ps.id))
            .count();
        assert!(received > 10, "path {}: {received} received", ps.id);
    }
    let new_paths = events
        .iter()
        .filter(|(_, e)| matches!(e, TraceEvent::Path { event: crate::trace::PathEvent::New, .. }))
        .count();
    assert_eq!(new_paths, 2);
    assert!(events.windows(2).all(|w| w[0].0 <= w[1].0), "times go backwards");
}

/// A cut path is traced when the sender finds it potentially failed (the moment its data
/// is re-injected, which failover measurements start from) and when it answers again.
#[test]
fn a_cut_path_is_traced_potentially_failed_then_answered() {
    use crate::trace::{PathEvent, TraceEvent};
    let mut p = Pair::default_pair(vec![Link::new(20, 10, 0.0), Link::new(20, 10, 0.0)]);
    p.connect();
    p.add_path(1, PathRole::Lte);
    let events = Arc::new(std::sync::Mutex::new(Vec::new()));
    p.server().set_trace(Some(Box::new(Collect(Arc::clone(&events)))));
    let mut sent = 0u64;
    p.run_until(Duration::from_secs(1), |p| {
        keep_busy(p, &mut sent);
        false
    });
    let cut = p.now;
    p.links[1].up = false;
    assert!(p.run_until(Duration::from_secs(20), |p| {
        keep_busy(p, &mut sent);
        p.server_events.contains(&Event::PathFailed(PathId(1)))
    }));
    let back = p.now;
    p.links[1].up = true;
    assert!(p.run_until(Duration::from_secs(10), |p| {
        keep_busy(p, &mut sent);
        p.server_events.contains(&Event::PathRecovered(PathId(1)))
    }));
    let events = events.lock().expect("lock").clone();
    let when = |what: PathEvent| {
        events
            .iter()
            .filter(|(_, e)| matches!(e, TraceEvent::Path { path, event, .. } if *path == PathId(1) && *event == what))
            .map(|(t, _)| *t)
            .collect::<Vec<_>>()
    };
    let (suspect, answered, failed) =
        (when(PathEvent::PotentiallyFailed), when(PathEvent::Answered), when(PathEvent::Failed));
    let first = *suspect.first().expect("the cut path was found potentially failed");
    assert!(first > cut, "found before the cut");
    assert!(failed.first().is_some_and(|&f| first <= f), "potentially failed before failed");
    assert!(answered.iter().any(|&a| a > back), "it answered after the link returned");
    assert!(p.server().stats().paths[1].failures >= 1);
}

/// RFC 10069's path closure: the client abandons path 1 with PATH_ABANDON, and the server,
/// which had not abandoned it, answers with its own PATH_ABANDON, so both ends stop using
/// the path's ids; neither side abandons it more than its losses require.
#[test]
fn an_abandoned_path_is_abandoned_back_by_the_peer() {
    use crate::trace::TraceEvent;
    let events = Arc::new(std::sync::Mutex::new(Vec::new()));
    transfer_closing_path_one(|p| {
        p.client.set_trace(Some(Box::new(Collect(Arc::clone(&events)))));
    });
    let events = events.lock().expect("lock").clone();
    let count = |sent: bool| {
        events
            .iter()
            .filter(|(_, e)| match e {
                TraceEvent::PacketSent { frames, .. } if sent => frames.contains(&"path_abandon"),
                TraceEvent::PacketReceived { frames, .. } if !sent => {
                    frames.contains(&"path_abandon")
                }
                _ => false,
            })
            .count()
    };
    // No loss on the links: one each way.
    assert_eq!((count(true), count(false)), (1, 1));
}
