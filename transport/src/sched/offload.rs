//! eMTCP's offload scheduler (MPTCP-QE paper §3.1, the eMTCP steps it quotes;
//! ALGORITHMS.md §4): data goes on the cheapest radio (WiFi) whenever its congestion
//! window has room; a costlier radio (LTE) takes a packet only when WiFi's window is full
//! ("if the WiFi subflow undergoes congestion … the receiver offloads the queued data …
//! to the LTE subflow"), and only when LTE's own window has room. That is the default
//! rule, [`OffloadRule::WindowFull`].
//!
//! [`OffloadRule::Allowance`] \[approx, not in the paper; profile `emtcp-allowance`\] is
//! an earlier variant kept as an ablation: the sender knows the read rate from READ_RATE
//! ([`Scheduler::on_peer_read_rate`]) and meters the stream bytes it put on each radio
//! over the last second ([`Scheduler::on_sent`]); a costly path may take a packet only
//! when the cheap paths have no room and the costly paths together carried less than
//!
//! ```text
//! allowance = (1 + growth) · max(0, AR − rate_cheap) + floor · AR
//! ```
//!
//! over the last second, and a cheap path with a standing queue (data in flight and a
//! smoothed RTT past twice its lowest plus 20 ms) counts as *backed up*: a costly path
//! with window room then takes the packet without the allowance. Before the first
//! READ_RATE costly paths are used freely (as minRTT would).
//!
//! Backup paths are honoured as in [`super::minrtt`]: they carry data only when no active
//! path is usable. So in MPTCP-QE's Partial mode (LTE announced as backup) LTE carries
//! nothing while WiFi works. Among paths of one radio kind the lowest smoothed RTT wins;
//! with a single radio kind the scheduler is minRTT.

use std::collections::BTreeMap;
use std::time::Duration;

use super::minrtt::eligible;
use super::{PathView, Scheduler, SchedulerFactory};
use crate::path::PathId;
use crate::path::role_cost;
use crate::time::Instant;

/// When a costly path may take a packet (see the [module docs](self)).
#[derive(Clone, Debug, PartialEq)]
pub enum OffloadRule {
    /// eMTCP's rule: only when every cheap path's window is full.
    WindowFull,
    /// The read-rate allowance and the backed-up bypass \[approx\].
    Allowance {
        /// Multiplicative headroom on the shortfall (1: the costly path may double what
        /// it carried within a second when the shortfall persists).
        growth: f64,
        /// Additive headroom, as a fraction of the read rate (0.1).
        floor: f64,
    },
}

/// Configuration of [`Offload`]; its own [`SchedulerFactory`].
#[derive(Clone, Debug, PartialEq)]
pub struct OffloadConfig {
    /// The offload rule (default [`OffloadRule::WindowFull`]).
    pub rule: OffloadRule,
}

impl Default for OffloadConfig {
    fn default() -> Self {
        OffloadConfig { rule: OffloadRule::WindowFull }
    }
}

impl OffloadConfig {
    /// The allowance rule with `growth` and `floor` ([`OffloadRule::Allowance`]).
    pub fn allowance(growth: f64, floor: f64) -> OffloadConfig {
        OffloadConfig { rule: OffloadRule::Allowance { growth, floor } }
    }
}

impl SchedulerFactory for OffloadConfig {
    fn build(&self) -> Box<dyn Scheduler> {
        Box::new(Offload::new(self.clone()))
    }
}

const BUCKETS: usize = 10;
const BUCKET_US: u64 = 100_000;

/// Bytes per 100 ms over the last second.
#[derive(Clone, Debug, Default)]
struct Meter {
    buckets: [u64; BUCKETS],
    head: u64,
}

impl Meter {
    fn advance(&mut self, now: Instant) {
        let idx = now.as_micros() / BUCKET_US;
        if idx <= self.head {
            return;
        }
        let steps = (idx - self.head).min(BUCKETS as u64);
        for k in 1..=steps {
            if let Some(b) = self.buckets.get_mut(((self.head + k) % BUCKETS as u64) as usize) {
                *b = 0;
            }
        }
        self.head = idx;
    }

    fn add(&mut self, now: Instant, bytes: u64) {
        self.advance(now);
        if let Some(b) = self.buckets.get_mut((self.head % BUCKETS as u64) as usize) {
            *b += bytes;
        }
    }

    fn rate_bps(&mut self, now: Instant) -> f64 {
        self.advance(now);
        let bytes: u64 = self.buckets.iter().sum();
        // The window covers the nine full buckets before the current one and the part of
        // the current one that has elapsed.
        let span_us = (BUCKETS as u64 - 1) * BUCKET_US + now.as_micros() % BUCKET_US;
        bytes as f64 * 8.0 / Duration::from_micros(span_us.max(1)).as_secs_f64()
    }
}

/// The eMTCP offload scheduler. See the [module docs](self).
#[derive(Clone, Debug)]
pub struct Offload {
    config: OffloadConfig,
    read_rate_bps: Option<f64>,
    meters: BTreeMap<PathId, Meter>,
    /// The lowest smoothed RTT seen per path.
    min_srtt: BTreeMap<PathId, Duration>,
}

/// Queueing delay past which a cheap path counts as backed up: `srtt > 2·min + SLACK`.
const BACKED_UP_SLACK: Duration = Duration::from_millis(20);

impl Offload {
    /// A scheduler that has heard no read rate yet.
    pub fn new(config: OffloadConfig) -> Offload {
        Offload { config, read_rate_bps: None, meters: BTreeMap::new(), min_srtt: BTreeMap::new() }
    }

    /// What the costly paths may carry now, bits/s (`None`: no limit yet).
    /// Always `None` under [`OffloadRule::WindowFull`].
    pub fn costly_allowance_bps(&self, cheap_rate_bps: f64) -> Option<f64> {
        let OffloadRule::Allowance { growth, floor } = self.config.rule else { return None };
        let ar = self.read_rate_bps?;
        let shortfall = (ar - cheap_rate_bps).max(0.0);
        Some((1.0 + growth) * shortfall + floor * ar)
    }

    /// Whether the costly paths carried less than their allowance over the last second.
    fn costly_allowed(&mut self, now: Instant, paths: &[PathView], cheapest: u8) -> bool {
        let cheap_ids: Vec<PathId> =
            paths.iter().filter(|p| role_cost(p.role) == cheapest).map(|p| p.id).collect();
        let costly_ids: Vec<PathId> =
            paths.iter().filter(|p| role_cost(p.role) != cheapest).map(|p| p.id).collect();
        let cheap_rate = self.rate_of(now, cheap_ids.into_iter());
        let costly_rate = self.rate_of(now, costly_ids.into_iter());
        self.costly_allowance_bps(cheap_rate).is_none_or(|a| costly_rate < a)
    }

    fn rate_of(&mut self, now: Instant, ids: impl Iterator<Item = PathId>) -> f64 {
        let mut sum = 0.0;
        for id in ids {
            if let Some(m) = self.meters.get_mut(&id) {
                sum += m.rate_bps(now);
            }
        }
        sum
    }
}

impl Scheduler for Offload {
    fn select(&mut self, now: Instant, paths: &[PathView], bytes: usize, out: &mut Vec<PathId>) {
        let serving = super::minrtt::serving_status(paths);
        let Some(cheapest) = paths
            .iter()
            .filter(|p| p.usable && p.status == serving)
            .map(|p| role_cost(p.role))
            .min()
        else {
            return;
        };
        for p in paths.iter().filter(|p| !p.srtt.is_zero()) {
            let m = self.min_srtt.entry(p.id).or_insert(p.srtt);
            *m = (*m).min(p.srtt);
        }
        let min_srtt = &self.min_srtt;
        let bypass = matches!(self.config.rule, OffloadRule::Allowance { .. });
        // An idle path has no queue, whatever its last RTT samples said.
        let backed_up = |p: &PathView| {
            bypass
                && p.in_flight > 0
                && min_srtt.get(&p.id).is_some_and(|&m| p.srtt > m * 2 + BACKED_UP_SLACK)
        };
        // The cheap path takes the packet when it has window room and is not backed up.
        let pick = eligible(paths, now, bytes)
            .filter(|p| role_cost(p.role) == cheapest && !backed_up(p))
            .min_by_key(|p| (p.srtt, p.id))
            .map(|p| p.id);
        let pick = match pick {
            Some(id) => Some(id),
            None => {
                let costly = eligible(paths, now, bytes)
                    .filter(|p| role_cost(p.role) != cheapest)
                    .min_by_key(|p| (role_cost(p.role), p.srtt, p.id))
                    .map(|p| p.id);
                // A cheap path with window room that is only backed up: it already carries
                // all it can deliver, so what flow control lets through beyond that is the
                // shortfall, whatever the (supply-limited) read rate says. Else a costly
                // path takes the packet within its allowance, and a backed-up cheap path
                // takes what the costly ones may not.
                let cheap = eligible(paths, now, bytes)
                    .filter(|p| role_cost(p.role) == cheapest)
                    .min_by_key(|p| (p.srtt, p.id))
                    .map(|p| p.id);
                match (costly, cheap) {
                    (Some(id), Some(_)) => Some(id),
                    (Some(id), None) if self.costly_allowed(now, paths, cheapest) => Some(id),
                    (_, cheap) => cheap,
                }
            }
        };
        if let Some(id) = pick {
            out.push(id);
        }
    }

    fn on_sent(&mut self, now: Instant, path: PathId, data_bytes: u64) {
        self.meters.entry(path).or_default().add(now, data_bytes);
    }

    fn on_peer_read_rate(&mut self, _now: Instant, read_rate_bps: f64) {
        if read_rate_bps.is_finite() && read_rate_bps >= 0.0 {
            self.read_rate_bps = Some(read_rate_bps);
        }
    }

    fn name(&self) -> &'static str {
        "offload"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::path::{PathRole, PathStatus};

    fn view(id: u32, role: PathRole, srtt_ms: u64, room: bool) -> PathView {
        PathView {
            id: PathId(id),
            role,
            status: PathStatus::Active,
            usable: true,
            srtt: Duration::from_millis(srtt_ms),
            rttvar: Duration::ZERO,
            cwnd: 12_000,
            in_flight: if room { 0 } else { 12_000 },
            pacing_rate: None,
            next_send_time: None,
            owd: None,
            owd_var_us2: 0.0,
        }
    }

    fn ms(v: u64) -> Instant {
        Instant::from_micros(v * 1000)
    }

    /// The scheduler's pick, sent at once as a full 1200-byte packet.
    fn pick(s: &mut Offload, now: Instant, paths: &[PathView]) -> Option<PathId> {
        let mut out = Vec::new();
        s.select(now, paths, 1200, &mut out);
        let id = out.first().copied()?;
        s.on_sent(now, id, 1200);
        Some(id)
    }

    #[test]
    fn the_allowance_is_metered_in_bytes_sent_not_in_selections() {
        let mut s = Offload::new(OffloadConfig::allowance(0.0, 0.0));
        // 1 Mbit/s read, WiFi full and carrying nothing: LTE may carry 1 Mbit/s, i.e.
        // about 112 kB over the 0.9 s the meter's window spans at 900 ms.
        s.on_peer_read_rate(ms(0), 1e6);
        let paths = [view(0, PathRole::Wifi, 20, false), view(1, PathRole::Lte, 100, true)];
        let now = ms(900);
        let mut out = Vec::new();
        // Selections whose packets never went out (paced, or nothing to put in) cost
        // nothing.
        for _ in 0..500 {
            out.clear();
            s.select(now, &paths, 1200, &mut out);
            assert_eq!(out, [PathId(1)]);
        }
        // Small packets count as what they carried: 1000 packets of 100 bytes are 100 kB.
        for _ in 0..1000 {
            out.clear();
            s.select(now, &paths, 1200, &mut out);
            assert_eq!(out, [PathId(1)]);
            s.on_sent(now, PathId(1), 100);
        }
        // 15 kB more exceed the allowance.
        s.on_sent(now, PathId(1), 15_000);
        out.clear();
        s.select(now, &paths, 1200, &mut out);
        assert!(out.is_empty(), "{out:?}");
    }

    #[test]
    fn wifi_is_used_whenever_it_has_room_even_if_lte_is_faster() {
        let mut s = Offload::new(OffloadConfig::default());
        let paths = [view(0, PathRole::Lte, 10, true), view(1, PathRole::Wifi, 50, true)];
        assert_eq!(pick(&mut s, ms(0), &paths), Some(PathId(1)));
    }

    #[test]
    fn a_backed_up_wifi_path_counts_as_full_until_it_drains() {
        let mut s = Offload::new(OffloadConfig::allowance(1.0, 0.1));
        s.on_peer_read_rate(ms(0), 1e6);
        let with = |wifi_srtt: u64, wifi_in_flight: u64| {
            let mut wifi = view(0, PathRole::Wifi, wifi_srtt, true);
            wifi.in_flight = wifi_in_flight;
            wifi.cwnd = 1_000_000;
            [wifi, view(1, PathRole::Lte, 60, true)]
        };
        // 20 ms seen: WiFi is the cheap path while its RTT stays near that.
        assert_eq!(pick(&mut s, ms(0), &with(20, 1200)), Some(PathId(0)));
        assert_eq!(pick(&mut s, ms(1), &with(55, 1200)), Some(PathId(0)));
        // Its queue grew (RTT past 2·20 + 20 ms) although its window has room: LTE takes
        // the packet.
        assert_eq!(pick(&mut s, ms(2), &with(400, 50_000)), Some(PathId(1)));
        // Nothing in flight: the queue has drained, whatever the stale RTT says.
        assert_eq!(pick(&mut s, ms(3), &with(400, 0)), Some(PathId(0)));
    }

    #[test]
    fn lte_carries_only_the_shortfall_between_read_rate_and_wifi() {
        let mut s = Offload::new(OffloadConfig::allowance(0.0, 0.0));
        s.on_peer_read_rate(ms(0), 2e6);
        let wifi_room = [view(0, PathRole::Wifi, 20, true), view(1, PathRole::Lte, 100, true)];
        let wifi_full = [view(0, PathRole::Wifi, 20, false), view(1, PathRole::Lte, 100, true)];
        // WiFi has room for one packet every 6 ms (1.6 Mbit/s). During the first second
        // only those chances are offered; during the second every other millisecond finds
        // WiFi full, and LTE may then take the 0.4 Mbit/s shortfall, no more.
        let (mut wifi, mut lte) = (0u64, 0u64);
        for k in 0..2000 {
            let room = k % 6 == 0;
            if !room && k < 1000 {
                continue;
            }
            let paths = if room { &wifi_room } else { &wifi_full };
            match pick(&mut s, ms(k), paths) {
                Some(PathId(0)) => wifi += 1200,
                Some(PathId(1)) => lte += 1200,
                _ => {}
            }
        }
        let lte_bps = lte as f64 * 8.0;
        let wifi_bps = wifi as f64 * 8.0 / 2.0;
        assert!((wifi_bps - 1.6e6).abs() < 0.05e6, "wifi {wifi_bps}");
        assert!(lte_bps > 0.3e6 && lte_bps <= 0.48e6, "lte {lte_bps}");
    }

    #[test]
    fn the_papers_rule_offloads_to_lte_only_when_wifi_is_full() {
        let mut s = Offload::new(OffloadConfig::default());
        s.on_peer_read_rate(ms(0), 2e6);
        let mut wifi = view(0, PathRole::Wifi, 400, true);
        wifi.in_flight = 50_000;
        wifi.cwnd = 1_000_000;
        let lte = view(1, PathRole::Lte, 100, true);
        assert_eq!(
            pick(&mut s, ms(0), &[view(0, PathRole::Wifi, 20, true), lte.clone()]),
            Some(PathId(0))
        );
        // A standing queue (RTT 20 → 400 ms) is no reason to wake LTE: WiFi's window has
        // room.
        assert_eq!(pick(&mut s, ms(1), &[wifi, lte]), Some(PathId(0)));
        // WiFi full: LTE takes every packet its window allows, no allowance.
        let full = [view(0, PathRole::Wifi, 20, false), view(1, PathRole::Lte, 100, true)];
        for k in 2..500 {
            assert_eq!(pick(&mut s, ms(k), &full), Some(PathId(1)));
        }
        // Both full: nothing.
        let both = [view(0, PathRole::Wifi, 20, false), view(1, PathRole::Lte, 100, false)];
        assert_eq!(pick(&mut s, ms(600), &both), None);
    }

    #[test]
    fn without_a_read_rate_lte_takes_the_overflow() {
        let mut s = Offload::new(OffloadConfig::default());
        let paths = [view(0, PathRole::Wifi, 20, false), view(1, PathRole::Lte, 100, true)];
        assert_eq!(pick(&mut s, ms(0), &paths), Some(PathId(1)));
    }

    #[test]
    fn a_backup_lte_path_carries_nothing_while_wifi_is_usable() {
        let mut s = Offload::new(OffloadConfig::default());
        let mut lte = view(1, PathRole::Lte, 100, true);
        lte.status = PathStatus::Backup;
        let paths = [view(0, PathRole::Wifi, 20, false), lte.clone()];
        assert_eq!(pick(&mut s, ms(0), &paths), None);
        let mut wifi = view(0, PathRole::Wifi, 20, true);
        wifi.usable = false;
        assert_eq!(pick(&mut s, ms(0), &[wifi, lte]), Some(PathId(1)));
    }
}
