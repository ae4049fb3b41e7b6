//! Datagram packetization-layer path MTU discovery, per path (RFC 8899 §5 \[source\], as
//! RFC 9000 §14.3 applies it to QUIC).
//!
//! Every path starts at the base size, [`super::Config::max_datagram_size`] (1 200 bytes:
//! QUIC's minimum, which every path must carry). With
//! [`super::Config::mtu_discovery_max`] set, a validated path then sends probes: a PING
//! padded with PADDING to the size under test, at most one in flight. The first probe
//! tries the largest size; after that the search halves the interval between the largest
//! size acknowledged and the smallest that failed, until it is narrower than
//! [`SEARCH_DONE`]. A probe counts as lost when no ACK named it within a probe timeout
//! (the path's PTO, as for any packet); [`MAX_PROBES`] lost probes of one size mark it as failed (RFC 8899 §5.1.2's
//! MAX_PROBES). Probes are not tracked in flight: their loss is no sign of congestion and
//! must not shrink the window (RFC 9000 §14.4), and there is at most one per path.
//!
//! A path that stops answering (its retransmission timer finds it potentially failed)
//! while above the base size may have a smaller MTU than was found (a black hole, RFC
//! 8899 §4.3): it drops back to the base size, the size it used counts as failed, and the
//! search starts again after [`RESEARCH_AFTER`].

use std::time::Duration;

use crate::time::Instant;

/// Lost probes of one size after which that size fails (RFC 8899 §5.1.2: MAX_PROBES, 3).
pub(crate) const MAX_PROBES: u32 = 3;

/// The search ends when the largest size that passed and the smallest that failed are
/// closer than this (bytes).
pub(crate) const SEARCH_DONE: usize = 16;

/// After a black hole, the search starts again this long after (RFC 8899 §5.1.1's
/// PMTU_RAISE_TIMER is 600 s; a mobile path changes networks far more often).
pub(crate) const RESEARCH_AFTER: Duration = Duration::from_secs(60);

/// One path's search.
#[derive(Debug, Clone)]
pub(crate) struct Mtud {
    /// Smallest datagram every path carries.
    base: usize,
    /// The size in use: the largest one acknowledged.
    current: usize,
    /// The smallest size known not to pass, or one past the largest to try.
    ceiling: usize,
    /// The largest size was tried (the search then halves).
    tried_top: bool,
    /// The size under test, until it is acknowledged or fails.
    testing: Option<usize>,
    /// The probe in flight: (packet number, sent at).
    in_flight: Option<(u64, Instant)>,
    /// Lost probes of the size under test.
    lost: u32,
    /// No probe before this time.
    not_before: Instant,
    /// Probes acknowledged, for the statistics.
    pub(crate) probes_acked: u64,
    /// Probes lost, for the statistics.
    pub(crate) probes_lost: u64,
}

impl Mtud {
    /// A path at `base` bytes that searches up to `max` (none: it stays at `base`).
    pub(crate) fn new(base: usize, max: Option<usize>) -> Mtud {
        let ceiling = max.map_or(base + 1, |m| m.max(base) + 1);
        Mtud {
            base,
            current: base,
            ceiling,
            tried_top: false,
            testing: None,
            in_flight: None,
            lost: 0,
            not_before: Instant::ZERO,
            probes_acked: 0,
            probes_lost: 0,
        }
    }

    /// The datagram size the path sends now.
    pub(crate) fn current(&self) -> usize {
        self.current
    }

    /// The size to try: the one under test, else the largest first, then halfway between
    /// the size in use and the smallest that failed; none once those are close.
    fn next_size(&mut self) -> Option<usize> {
        if let Some(s) = self.testing {
            return Some(s);
        }
        if self.ceiling <= self.current + SEARCH_DONE {
            return None;
        }
        let s = if self.tried_top {
            self.current + (self.ceiling - self.current) / 2
        } else {
            self.tried_top = true;
            self.ceiling - 1
        };
        self.testing = Some(s);
        Some(s)
    }

    /// The size of the probe to send now, if one is due. `pto` is the path's probe
    /// timeout: a probe unanswered for that long is lost.
    pub(crate) fn probe_due(&mut self, now: Instant, pto: Duration) -> Option<usize> {
        if let Some((_, at)) = self.in_flight {
            if now < at + pto {
                return None;
            }
            self.in_flight = None;
            self.probes_lost += 1;
            self.lost += 1;
            if self.lost >= MAX_PROBES {
                if let Some(s) = self.testing.take() {
                    self.ceiling = s;
                }
                self.lost = 0;
            }
        }
        if now < self.not_before {
            return None;
        }
        self.next_size()
    }

    /// The probe went out as packet `pn`.
    pub(crate) fn on_probe_sent(&mut self, pn: u64, now: Instant) {
        self.in_flight = Some((pn, now));
    }

    /// An ACK arrived on the path; `acked` says whether it names a packet number. The new
    /// datagram size if the acknowledged probe raised it.
    pub(crate) fn on_ack(&mut self, acked: impl Fn(u64) -> bool) -> Option<usize> {
        let before = self.current;
        if let Some((pn, _)) = self.in_flight
            && acked(pn)
        {
            self.in_flight = None;
            self.probes_acked += 1;
            self.lost = 0;
            if let Some(s) = self.testing.take() {
                self.current = self.current.max(s);
            }
        }
        (self.current != before).then_some(self.current)
    }

    /// The path stopped answering: above the base size, that may be a smaller MTU than
    /// the one found (a black hole). Back to the base size; the search resumes later,
    /// below the size that was in use. The new datagram size if it fell.
    pub(crate) fn on_black_hole(&mut self, now: Instant) -> Option<usize> {
        if self.current > self.base {
            self.ceiling = self.current;
            self.current = self.base;
            self.tried_top = true;
            self.testing = None;
            self.in_flight = None;
            self.lost = 0;
            self.not_before = now + RESEARCH_AFTER;
            return Some(self.base);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PTO: Duration = Duration::from_millis(100);

    /// Runs a search against a path that carries `mtu` bytes; the size found.
    fn search(mtu: usize) -> (usize, u64) {
        let mut m = Mtud::new(1200, Some(1452));
        let mut now = Instant::ZERO;
        let mut pn = 0;
        for _ in 0..100 {
            now += PTO;
            if let Some(size) = m.probe_due(now, PTO) {
                m.on_probe_sent(pn, now);
                if size <= mtu {
                    m.on_ack(|p| p == pn);
                }
                pn += 1;
            }
        }
        (m.current(), pn)
    }

    #[test]
    fn the_search_finds_the_path_mtu_within_its_precision() {
        assert_eq!(search(1500).0, 1452, "the largest size passes at once");
        for mtu in [1280, 1350, 1400, 1451] {
            let (found, probes) = search(mtu);
            assert!(found <= mtu && found + SEARCH_DONE > mtu, "mtu {mtu}: {found}");
            assert!(probes < 40, "mtu {mtu}: {probes} probes");
        }
        assert_eq!(search(1000).0, 1200, "never below the base");
    }

    #[test]
    fn without_a_maximum_nothing_is_probed() {
        let mut m = Mtud::new(1200, None);
        assert_eq!(m.probe_due(Instant::ZERO + PTO * 100, PTO), None);
        assert_eq!(m.current(), 1200);
    }

    #[test]
    fn a_black_hole_returns_to_the_base_and_searches_below_the_old_size_later() {
        let mut m = Mtud::new(1200, Some(1452));
        let t0 = Instant::ZERO;
        assert_eq!(m.probe_due(t0, PTO), Some(1452));
        m.on_probe_sent(0, t0);
        assert_eq!(m.on_ack(|p| p == 1), None, "not the probe's ACK");
        assert_eq!(m.on_ack(|p| p == 0), Some(1452), "the new size");
        assert_eq!(m.current(), 1452);
        assert_eq!(m.on_black_hole(t0), Some(1200));
        assert_eq!(m.current(), 1200);
        assert_eq!(m.on_black_hole(t0), None, "already at the base");
        assert_eq!(m.probe_due(t0 + PTO, PTO), None, "not at once");
        let later = t0 + RESEARCH_AFTER;
        let size = m.probe_due(later, PTO).expect("a probe after the pause");
        assert!(size < 1452 && size > 1200, "{size}");
    }

    #[test]
    fn one_lost_probe_is_tried_again_before_the_size_fails() {
        let mut m = Mtud::new(1200, Some(1452));
        let mut now = Instant::ZERO;
        for k in 0..MAX_PROBES {
            assert_eq!(m.probe_due(now, PTO), Some(1452), "attempt {k}");
            m.on_probe_sent(u64::from(k), now);
            now += PTO;
        }
        // The third loss fails 1452; the next probe is lower.
        let next = m.probe_due(now, PTO).expect("a lower probe");
        assert!(next < 1452, "{next}");
        assert_eq!(m.probes_lost, 3);
    }
}
