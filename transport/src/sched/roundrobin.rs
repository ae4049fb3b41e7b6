//! Round robin, as Linux MPTCP's `mptcp_rr.c` \[source: ALGORITHMS.md §2\]: the paths take
//! turns, in [`PathId`] order, each carrying `packets_per_turn` packets before the next one;
//! a path that cannot send now (unusable, no window room, paced) is skipped. Backup paths
//! take part only when no active path is usable (the same rule as
//! [`MinRtt`](super::minrtt::MinRtt)).

use super::minrtt::eligible;
use super::{PathView, Scheduler, SchedulerFactory};
use crate::path::PathId;
use crate::time::Instant;

/// Configuration of [`RoundRobin`]; its own [`SchedulerFactory`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RoundRobinConfig {
    /// Consecutive packets on one path before moving on (Linux `mptcp_rr` `num_segments`,
    /// default 1 \[recalled\]). 0 counts as 1.
    pub packets_per_turn: u32,
}

impl Default for RoundRobinConfig {
    fn default() -> Self {
        RoundRobinConfig { packets_per_turn: 1 }
    }
}

impl SchedulerFactory for RoundRobinConfig {
    fn build(&self) -> Box<dyn Scheduler> {
        Box::new(RoundRobin::new(self.clone()))
    }
}

/// Round-robin scheduler state: whose turn it is.
#[derive(Clone, Debug)]
pub struct RoundRobin {
    config: RoundRobinConfig,
    /// The path that carried the last packet, and how many it carried in this turn.
    current: Option<(PathId, u32)>,
}

impl RoundRobin {
    /// A scheduler starting with the lowest path.
    pub fn new(config: RoundRobinConfig) -> Self {
        RoundRobin { config, current: None }
    }
}

impl Scheduler for RoundRobin {
    fn select(&mut self, now: Instant, paths: &[PathView], bytes: usize, out: &mut Vec<PathId>) {
        let mut ids: Vec<PathId> = eligible(paths, now, bytes).map(|p| p.id).collect();
        ids.sort_unstable();
        ids.dedup();
        let Some(&first) = ids.first() else { return };
        let per_turn = self.config.packets_per_turn.max(1);
        let chosen = match self.current {
            // The current path's turn goes on while it can send.
            Some((id, n)) if n < per_turn && ids.binary_search(&id).is_ok() => (id, n + 1),
            // Next path after the current one, wrapping around.
            Some((id, _)) => (ids.iter().copied().find(|&p| p > id).unwrap_or(first), 1),
            None => (first, 1),
        };
        self.current = Some(chosen);
        out.push(chosen.0);
    }

    fn name(&self) -> &'static str {
        "roundrobin"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sched::minrtt::testkit::*;

    const NOW: Instant = Instant::from_micros(1_000_000);

    fn picks(s: &mut dyn Scheduler, paths: &[PathView], n: usize) -> Vec<u32> {
        let mut all = Vec::new();
        for _ in 0..n {
            let mut out = Vec::new();
            s.select(NOW, paths, 1200, &mut out);
            assert!(out.len() <= 1);
            all.extend(out.iter().map(|p| p.0));
        }
        all
    }

    #[test]
    fn cycles_through_the_paths_in_id_order() {
        let mut s = RoundRobinConfig::default().build();
        let paths = [view(2, 10), view(0, 50), view(1, 90)];
        assert_eq!(picks(s.as_mut(), &paths, 7), vec![0, 1, 2, 0, 1, 2, 0]);
        assert_eq!(s.name(), "roundrobin");
    }

    #[test]
    fn skips_a_path_without_room_and_returns_to_it_later() {
        let mut s = RoundRobinConfig::default().build();
        let open = [view(0, 10), view(1, 10), view(2, 10)];
        let one_full = [view(0, 10), full(view(1, 10)), view(2, 10)];
        assert_eq!(picks(s.as_mut(), &open, 1), vec![0]);
        assert_eq!(picks(s.as_mut(), &one_full, 3), vec![2, 0, 2]);
        assert_eq!(picks(s.as_mut(), &open, 3), vec![0, 1, 2]);
    }

    #[test]
    fn several_packets_per_turn() {
        let mut s = RoundRobinConfig { packets_per_turn: 3 }.build();
        let paths = [view(0, 10), view(1, 10)];
        assert_eq!(picks(s.as_mut(), &paths, 8), vec![0, 0, 0, 1, 1, 1, 0, 0]);
    }

    #[test]
    fn nothing_when_nothing_has_room() {
        let mut s = RoundRobinConfig::default().build();
        assert_eq!(
            picks(s.as_mut(), &[full(view(0, 10)), full(view(1, 10))], 3),
            Vec::<u32>::new()
        );
    }

    #[test]
    fn backups_take_turns_only_when_no_active_path_is_usable() {
        let mut s = RoundRobinConfig::default().build();
        let with_active = [view(0, 10), backup(view(1, 10)), view(2, 10)];
        assert_eq!(picks(s.as_mut(), &with_active, 4), vec![0, 2, 0, 2]);
        let full_active = [full(view(0, 10)), backup(view(1, 10))];
        assert_eq!(picks(s.as_mut(), &full_active, 2), Vec::<u32>::new());
        let no_active = [unusable(view(0, 10)), backup(view(1, 10)), backup(view(3, 10))];
        // The turn goes on from path 2, the last one served.
        assert_eq!(picks(s.as_mut(), &no_active, 3), vec![3, 1, 3]);
    }

    #[test]
    fn survives_the_current_path_disappearing() {
        let mut s = RoundRobinConfig { packets_per_turn: 2 }.build();
        assert_eq!(picks(s.as_mut(), &[view(0, 10), view(5, 10)], 3), vec![0, 0, 5]);
        assert_eq!(picks(s.as_mut(), &[view(0, 10), view(3, 10)], 3), vec![0, 0, 3]);
    }
}
