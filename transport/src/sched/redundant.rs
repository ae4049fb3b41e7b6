//! Redundant scheduling, as Linux MPTCP's `mptcp_redundant.c` \[source: ALGORITHMS.md §2\]:
//! every packet goes on every path that can send it now, trading capacity for the delay
//! and loss of the best path at each moment. Backup paths take part only when no active
//! path is usable (the same rule as [`MinRtt`](super::minrtt::MinRtt)); a path without
//! window room is skipped for this packet.
//!
//! The paths are pushed fastest first (lowest smoothed RTT, ties by [`PathId`]), so a
//! connection that treats the first entry as the primary copy gets the fastest path.

use super::minrtt::eligible;
use super::{PathView, Scheduler, SchedulerFactory};
use crate::path::PathId;
use crate::time::Instant;

/// Configuration of [`Redundant`]; its own [`SchedulerFactory`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RedundantConfig {}

impl SchedulerFactory for RedundantConfig {
    fn build(&self) -> Box<dyn Scheduler> {
        Box::new(Redundant::default())
    }
}

/// Sends each packet on every path that may send now.
#[derive(Clone, Debug, Default)]
pub struct Redundant {}

impl Scheduler for Redundant {
    fn select(&mut self, now: Instant, paths: &[PathView], bytes: usize, out: &mut Vec<PathId>) {
        let mut chosen: Vec<&PathView> = eligible(paths, now, bytes).collect();
        chosen.sort_by_key(|p| (p.srtt, p.id));
        chosen.dedup_by_key(|p| p.id);
        out.extend(chosen.iter().map(|p| p.id));
    }

    fn name(&self) -> &'static str {
        "redundant"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sched::minrtt::testkit::*;

    const NOW: Instant = Instant::from_micros(1_000_000);

    fn pick(paths: &[PathView]) -> Vec<u32> {
        let mut s = RedundantConfig::default().build();
        let mut out = Vec::new();
        s.select(NOW, paths, 1200, &mut out);
        out.iter().map(|p| p.0).collect()
    }

    #[test]
    fn returns_every_path_that_can_send_fastest_first() {
        assert_eq!(pick(&[view(0, 80), view(1, 20), view(2, 50)]), vec![1, 2, 0]);
    }

    #[test]
    fn leaves_out_paths_without_room_or_unusable() {
        assert_eq!(pick(&[view(0, 80), full(view(1, 20)), unusable(view(2, 5))]), vec![0]);
        assert_eq!(pick(&[full(view(0, 80))]), Vec::<u32>::new());
    }

    #[test]
    fn backups_only_when_no_active_path_is_usable() {
        assert_eq!(pick(&[view(0, 80), backup(view(1, 20))]), vec![0]);
        assert_eq!(pick(&[full(view(0, 80)), backup(view(1, 20))]), Vec::<u32>::new());
        assert_eq!(
            pick(&[unusable(view(0, 80)), backup(view(1, 20)), backup(view(2, 10))]),
            vec![2, 1]
        );
    }

    #[test]
    fn is_stable_across_calls() {
        let mut s = Redundant::default();
        let paths = [view(0, 30), view(1, 30)];
        for _ in 0..3 {
            let mut out = Vec::new();
            s.select(NOW, &paths, 1200, &mut out);
            assert_eq!(out, vec![PathId(0), PathId(1)]);
        }
        assert_eq!(s.name(), "redundant");
    }
}
