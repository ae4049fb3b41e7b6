//! A scenario's emulated network, shared by the real-time emulators (the UDP relay and the
//! TUN bed's cables): its links, each path's chain of links per direction, and the timed
//! events. A packet enters its path's first link and leaves after the last one.

use braid_netem::scenario::Scenario;
use braid_netem::{Link, LinkConfig};
use braid_transport::time::Instant;

/// A packet crossing a path.
#[derive(Debug)]
pub(crate) struct Packet {
    /// Its bytes (a UDP payload for the relay, an IP datagram for the bed).
    pub(crate) bytes: Vec<u8>,
    /// The path it crosses.
    pub(crate) path: usize,
    /// Client to server.
    pub(crate) up: bool,
    /// The link of its chain it is on.
    hop: usize,
}

/// The links of a scenario and the paths' chains over them.
pub(crate) struct Network {
    scenario: Scenario,
    links: Vec<Link<Packet>>,
    next_event: usize,
}

impl Network {
    /// The scenario's links, each configured by `config` from its scenario configuration,
    /// seeded from `seed` (link `i` gets its own stream).
    pub(crate) fn new(
        scenario: &Scenario,
        seed: u64,
        config: impl Fn(&LinkConfig) -> LinkConfig,
    ) -> Network {
        let links = scenario
            .links
            .iter()
            .enumerate()
            .map(|(i, l)| {
                Link::new(
                    config(&l.config),
                    seed.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(i as u64),
                )
            })
            .collect();
        Network { scenario: scenario.clone(), links, next_event: 0 }
    }

    /// The scenario it emulates.
    pub(crate) fn scenario(&self) -> &Scenario {
        &self.scenario
    }

    /// The links, in the scenario's order.
    pub(crate) fn links(&self) -> &[Link<Packet>] {
        &self.links
    }

    /// Link `i`, to apply a live command to.
    pub(crate) fn link_mut(&mut self, i: usize) -> Option<&mut Link<Packet>> {
        self.links.get_mut(i)
    }

    fn chain(&self, path: usize, up: bool) -> Option<&[usize]> {
        let p = self.scenario.paths.get(path)?;
        Some(if up { &p.up } else { &p.down })
    }

    /// Enters `bytes` on `path` in a direction at `now`; a path with no links in that
    /// direction hands the packet straight back (to emit at once). A full or down link
    /// drops it (the link counts that).
    pub(crate) fn send(
        &mut self,
        now: Instant,
        path: usize,
        up: bool,
        bytes: Vec<u8>,
    ) -> Option<Packet> {
        let pkt = Packet { bytes, path, up, hop: 0 };
        let first = self.chain(path, up).and_then(|c| c.first().copied());
        match first.and_then(|l| self.links.get_mut(l)) {
            Some(link) => {
                let len = pkt.bytes.len();
                let _ = link.enqueue(now, len, pkt);
                None
            }
            None => Some(pkt),
        }
    }

    /// The next packet that has crossed the last link of its chain by `now`; packets due
    /// at an intermediate link move on to the next one.
    pub(crate) fn poll_delivery(&mut self, now: Instant) -> Option<Packet> {
        loop {
            let mut moved = false;
            for li in 0..self.links.len() {
                while let Some(mut pkt) = self.links[li].poll_delivery(now) {
                    moved = true;
                    pkt.hop += 1;
                    let next = self.chain(pkt.path, pkt.up).map(|c| c.get(pkt.hop).copied());
                    match next {
                        Some(Some(n)) if n < self.links.len() => {
                            let len = pkt.bytes.len();
                            let _ = self.links[n].enqueue(now, len, pkt);
                        }
                        Some(None) => return Some(pkt),
                        // A path or link the scenario does not have: nowhere to go.
                        _ => {}
                    }
                }
            }
            if !moved {
                return None;
            }
        }
    }

    /// Applies the scenario's timed events that are due by `now`.
    pub(crate) fn apply_due_events(&mut self, now: Instant) {
        while let Some(ev) = self.scenario.events.get(self.next_event) {
            if Instant::from_duration(ev.at) > now {
                break;
            }
            for l in self.scenario.event_links(ev) {
                if let Some(link) = self.links.get_mut(l) {
                    ev.action.apply(link, now);
                }
            }
            self.next_event += 1;
        }
    }

    /// When something is next due: a link's delivery or a timed event.
    pub(crate) fn next_wake(&self) -> Option<Instant> {
        let link = self.links.iter().filter_map(|l| l.next_event_time()).min();
        let event = self.scenario.events.get(self.next_event).map(|e| Instant::from_duration(e.at));
        match (link, event) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The links path `path` crosses in either direction, each once.
    pub(crate) fn path_links(&self, path: usize) -> Vec<usize> {
        let Some(p) = self.scenario.paths.get(path) else { return Vec::new() };
        let mut v: Vec<usize> = p.down.iter().chain(&p.up).copied().collect();
        v.sort_unstable();
        v.dedup();
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const TWO_HOPS: &str = r#"
name = "hops"
duration_s = 1
[[link]]
name = "a"
rate = "10mbit"
delay_ms = 10
[[link]]
name = "b"
rate = "10mbit"
delay_ms = 5
[[path]]
name = "p"
down = { via = ["a", "b"] }
up = { delay_ms = 1 }
"#;

    /// A packet crosses every link of its chain, one direction's chain at a time.
    #[test]
    fn packets_cross_their_chain_hop_by_hop() {
        let s = Scenario::parse(TWO_HOPS, "hops.toml", std::path::Path::new(".")).unwrap();
        let mut net = Network::new(&s, 1, LinkConfig::clone);
        let at = |ms| Instant::from_duration(Duration::from_millis(ms));
        assert!(net.send(at(0), 0, false, vec![7; 100]).is_none());
        assert!(net.send(at(0), 0, true, vec![1; 10]).is_none());
        let up = net.poll_delivery(at(2)).expect("the up link's 1 ms");
        assert_eq!((up.bytes.len(), up.up), (10, true));
        assert!(net.poll_delivery(at(14)).is_none(), "10 + 5 ms of delay down");
        let got = net.poll_delivery(at(20)).expect("crossed both links");
        assert_eq!((got.bytes.len(), got.path, got.up), (100, 0, false));
        assert!(net.poll_delivery(at(40)).is_none());
        assert_eq!(net.path_links(0), [0, 1, 2]);
        assert_eq!(net.next_wake(), None, "nothing in flight, no events");
    }
}
