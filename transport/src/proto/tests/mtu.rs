//! Path MTU discovery (RFC 8899, RFC 9000 §14.3): what the search finds and what the
//! data then uses, on links with and without an MTU, and a path whose MTU shrinks.

use std::time::Duration;

use super::harness::*;

/// Both ends search up to 1 452 bytes.
fn probing() -> crate::proto::Config {
    let mut c = config();
    c.mtu_discovery_max = Some(1452);
    c
}

fn pair(mtu: Option<usize>) -> Pair {
    let mut link = Link::new(10, 20, 0.0);
    link.mtu = mtu;
    let mut p = Pair::new(probing(), probing(), vec![link], 3);
    p.keep_trace = true;
    p.connect();
    p
}

/// A link that carries 1 400 bytes: the search settles within 16 bytes below it (the
/// probes above it lost), and the transfer then sends datagrams of that size.
#[test]
fn the_search_settles_below_a_links_mtu_and_data_uses_it() {
    let mut p = pair(Some(1400));
    bulk(&mut p, 5_000_000, 1000, Duration::from_secs(30), |_| {});
    let s = p.server().stats();
    let path = &s.paths[0];
    assert!(path.mtu <= 1400 && path.mtu > 1400 - 16, "mtu {}", path.mtu);
    assert!(path.mtu_probes.1 >= 3, "probes above 1 400 were lost: {:?}", path.mtu_probes);
    // The last half of the transfer went in datagrams of the size found; only a few
    // probes went above it.
    let half = p.trace.len() / 2;
    let sizes: Vec<usize> =
        p.trace[half..].iter().filter(|(_, up, _)| !*up).map(|(_, _, d)| d.len()).collect();
    // (A full packet ends a few bytes short of the size: frames do not split to fit.)
    let mtu = path.mtu as usize;
    let at = sizes.iter().filter(|&&n| n <= mtu && n + 16 > mtu).count();
    let above = sizes.iter().filter(|&&n| n > mtu).count();
    assert!(at > sizes.len() / 2, "{at} of {} at {}", sizes.len(), path.mtu);
    assert!(above <= 2 * 3, "{above} above");
}

/// Without an MTU on the link the path reaches the ceiling, and the same transfer takes
/// about 1 200 / 1 452 of the datagrams it takes without the search.
#[test]
fn without_a_limit_the_path_reaches_the_ceiling_and_sends_fewer_datagrams() {
    let mut p = pair(None);
    bulk(&mut p, 2_000_000, 1000, Duration::from_secs(30), |_| {});
    let probed = p.server().stats().paths[0].clone();
    assert_eq!(probed.mtu, 1452);
    let mut q = Pair::new(config(), config(), vec![Link::new(10, 20, 0.0)], 3);
    q.connect();
    bulk(&mut q, 2_000_000, 1000, Duration::from_secs(30), |_| {});
    let fixed = q.server().stats().paths[0].clone();
    assert_eq!(fixed.mtu, 1200);
    let ratio = probed.packets_sent as f64 / fixed.packets_sent as f64;
    assert!(ratio < 0.9, "{} against {} packets", probed.packets_sent, fixed.packets_sent);
}

/// A 5 MB transfer on `p`'s link during which the link's MTU drops to 1 300 bytes once the
/// search reached 1 452 (a route change).
fn transfer_through_a_shrinking_mtu(p: &mut Pair) {
    let mut found = false;
    bulk(p, 5_000_000, 1000, Duration::from_secs(60), |p| {
        if !found && p.server().stats().paths[0].mtu == 1452 {
            found = true;
            p.links[0].mtu = Some(1300);
        }
    });
    assert!(found, "the search reached 1 452 bytes first");
}

/// The link's MTU drops to 1 300 bytes mid-transfer (a route change): the path stops
/// answering, falls back to the 1 200-byte base, and the transfer completes with every
/// byte; no datagram above 1 300 bytes is acknowledged afterwards.
#[test]
fn a_path_whose_mtu_shrinks_falls_back_and_the_transfer_completes() {
    let mut p = pair(None);
    transfer_through_a_shrinking_mtu(&mut p);
    let path = p.server().stats().paths[0].clone();
    assert!(path.mtu <= 1300, "mtu {}", path.mtu);
    assert!(path.failures >= 1, "the black hole was noticed");
}

/// Records the datagram sizes the connection reports to its controller (a [`TestReno`]
/// underneath).
#[derive(Clone, Debug, Default)]
struct SizeLog(std::sync::Arc<std::sync::Mutex<Vec<usize>>>);

struct SizeLogCc {
    inner: Box<dyn crate::cc::Controller>,
    log: SizeLog,
}

impl crate::cc::ControllerFactory for SizeLog {
    fn build(&self) -> Box<dyn crate::cc::Controller> {
        Box::new(SizeLogCc { inner: TestReno.build(), log: self.clone() })
    }
}

impl crate::cc::Controller for SizeLogCc {
    fn on_path_added(&mut self, now: crate::time::Instant, path: crate::path::PathId, mss: usize) {
        self.inner.on_path_added(now, path, mss);
    }
    fn on_path_removed(&mut self, path: crate::path::PathId) {
        self.inner.on_path_removed(path);
    }
    fn on_datagram_size(&mut self, path: crate::path::PathId, mss: usize) {
        self.log.0.lock().expect("lock").push(mss);
        self.inner.on_datagram_size(path, mss);
    }
    fn on_sent(&mut self, now: crate::time::Instant, path: crate::path::PathId, b: usize, f: u64) {
        self.inner.on_sent(now, path, b, f);
    }
    fn on_ack(
        &mut self,
        now: crate::time::Instant,
        path: crate::path::PathId,
        sent: crate::time::Instant,
        bytes: usize,
        rtt: &crate::cc::RttSample,
    ) {
        self.inner.on_ack(now, path, sent, bytes, rtt);
    }
    fn on_congestion_event(
        &mut self,
        now: crate::time::Instant,
        path: crate::path::PathId,
        sent: crate::time::Instant,
        persistent: bool,
    ) {
        self.inner.on_congestion_event(now, path, sent, persistent);
    }
    fn window(&self, path: crate::path::PathId) -> u64 {
        self.inner.window(path)
    }
    fn name(&self) -> &'static str {
        "size-log"
    }
}

/// RFC 9002 counts windows in the current maximum datagram size (§7.2): the sender's
/// controller is told each size the search settles on, up to 1 452 bytes, and the base
/// size again when the link's MTU shrinks under it (before, it kept the 1 200 bytes the
/// path started with, so windows grew 17 % slower per round trip than the datagrams).
#[test]
fn the_controller_follows_the_datagram_size() {
    let log = SizeLog::default();
    let mut server = probing();
    server.controller = std::sync::Arc::new(log.clone());
    let mut p = Pair::new(probing(), server, vec![Link::new(10, 20, 0.0)], 3);
    p.connect();
    transfer_through_a_shrinking_mtu(&mut p);
    let sizes = log.0.lock().expect("lock").clone();
    let top = sizes.iter().position(|&s| s == 1452).expect("1 452 reported");
    assert!(sizes[top..].contains(&1200), "the fall back was not reported: {sizes:?}");
    assert!(sizes.windows(2).all(|w| w[0] != w[1]), "only changes: {sizes:?}");
}
