//! The minimum-RTT scheduler, the default of the Linux out-of-tree MPTCP
//! (`mptcp_sched.c`, "default") \[source: ALGORITHMS.md §2\]: among the paths that may send
//! now, the one with the lowest smoothed RTT.
//!
//! Backup paths carry data only when **no** active path is usable at all. An active path
//! that is usable but whose window is full does not count as unusable: the scheduler then
//! returns nothing and the connection waits for ACKs, rather than spilling onto a backup.
//!
//! The helpers [`can_send_now`] and [`serving_status`] state these rules once; the round
//! robin and redundant schedulers use them too.

use super::{PathView, Scheduler, SchedulerFactory};
use crate::path::{PathId, PathStatus};
use crate::time::Instant;

/// Whether `path` may carry a packet of `bytes` bytes at `now`: it is usable, not closed,
/// has window room ([`PathView::has_room`]), and its pacing timer (if any) has expired.
pub fn can_send_now(path: &PathView, now: Instant, bytes: usize) -> bool {
    path.usable
        && path.status != PathStatus::Closed
        && path.has_room(bytes)
        && path.next_send_time.is_none_or(|t| t <= now)
}

/// The status whose paths may carry data: [`PathStatus::Active`] while any active path is
/// usable (whether or not it has room), else [`PathStatus::Backup`].
pub fn serving_status(paths: &[PathView]) -> PathStatus {
    if paths.iter().any(|p| p.usable && p.status == PathStatus::Active) {
        PathStatus::Active
    } else {
        PathStatus::Backup
    }
}

/// The paths of the serving status that may send `bytes` at `now`, in slice order.
pub fn eligible<'a>(
    paths: &'a [PathView],
    now: Instant,
    bytes: usize,
) -> impl Iterator<Item = &'a PathView> + 'a {
    let status = serving_status(paths);
    paths.iter().filter(move |p| p.status == status && can_send_now(p, now, bytes))
}

/// Configuration of [`MinRtt`]; its own [`SchedulerFactory`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MinRttConfig {}

impl SchedulerFactory for MinRttConfig {
    fn build(&self) -> Box<dyn Scheduler> {
        Box::new(MinRtt::default())
    }
}

/// Lowest smoothed RTT first (ties: lowest [`PathId`]).
#[derive(Clone, Debug, Default)]
pub struct MinRtt {}

impl Scheduler for MinRtt {
    fn select(&mut self, now: Instant, paths: &[PathView], bytes: usize, out: &mut Vec<PathId>) {
        if let Some(best) = eligible(paths, now, bytes).min_by_key(|p| (p.srtt, p.id)) {
            out.push(best.id);
        }
    }

    fn name(&self) -> &'static str {
        "minrtt"
    }
}

/// Test helpers shared by the scheduler tests.
#[cfg(test)]
pub(crate) mod testkit {
    use std::time::Duration;

    use crate::path::{PathId, PathRole, PathStatus};
    use crate::sched::PathView;

    /// An active, usable path with the given smoothed RTT, a 12 000-byte window and nothing
    /// in flight.
    pub(crate) fn view(id: u32, srtt_ms: u64) -> PathView {
        PathView {
            id: PathId(id),
            role: PathRole::Wired,
            status: PathStatus::Active,
            usable: true,
            srtt: Duration::from_millis(srtt_ms),
            rttvar: Duration::from_millis(srtt_ms / 2),
            cwnd: 12_000,
            in_flight: 0,
            pacing_rate: None,
            next_send_time: None,
            owd: None,
            owd_var_us2: 0.0,
        }
    }

    pub(crate) fn full(mut v: PathView) -> PathView {
        v.in_flight = v.cwnd;
        v
    }

    pub(crate) fn backup(mut v: PathView) -> PathView {
        v.status = PathStatus::Backup;
        v
    }

    pub(crate) fn unusable(mut v: PathView) -> PathView {
        v.usable = false;
        v
    }
}

#[cfg(test)]
mod tests {
    use super::testkit::*;
    use super::*;

    const NOW: Instant = Instant::from_micros(1_000_000);

    fn pick(paths: &[PathView], bytes: usize) -> Vec<PathId> {
        let mut s = MinRttConfig::default().build();
        let mut out = Vec::new();
        s.select(NOW, paths, bytes, &mut out);
        out
    }

    #[test]
    fn picks_the_lowest_srtt() {
        assert_eq!(pick(&[view(0, 80), view(1, 20), view(2, 50)], 1200), vec![PathId(1)]);
    }

    #[test]
    fn ties_go_to_the_lowest_path_id() {
        assert_eq!(pick(&[view(3, 20), view(1, 20), view(2, 20)], 1200), vec![PathId(1)]);
    }

    #[test]
    fn skips_paths_without_window_room() {
        assert_eq!(pick(&[view(0, 80), full(view(1, 20))], 1200), vec![PathId(0)]);
        // Room for a small packet but not a large one.
        let mut almost = view(1, 20);
        almost.in_flight = almost.cwnd - 500;
        assert_eq!(pick(&[view(0, 80), almost.clone()], 400), vec![PathId(1)]);
        assert_eq!(pick(&[view(0, 80), almost], 1200), vec![PathId(0)]);
    }

    #[test]
    fn skips_unusable_paths() {
        assert_eq!(pick(&[view(0, 80), unusable(view(1, 20))], 1200), vec![PathId(0)]);
    }

    #[test]
    fn returns_nothing_when_no_path_has_room() {
        assert_eq!(pick(&[full(view(0, 80)), full(view(1, 20))], 1200), vec![]);
        assert_eq!(pick(&[], 1200), vec![]);
    }

    #[test]
    fn backup_is_ignored_while_an_active_path_has_room() {
        assert_eq!(pick(&[view(0, 80), backup(view(1, 5))], 1200), vec![PathId(0)]);
    }

    #[test]
    fn backup_is_not_used_while_an_active_path_is_usable_but_full() {
        assert_eq!(pick(&[full(view(0, 80)), backup(view(1, 5))], 1200), vec![]);
    }

    #[test]
    fn backup_is_used_when_no_active_path_is_usable() {
        let paths = [unusable(view(0, 10)), backup(view(1, 90)), backup(view(2, 40))];
        assert_eq!(pick(&paths, 1200), vec![PathId(2)]);
        // …and a full backup yields nothing.
        let paths = [unusable(view(0, 10)), full(backup(view(1, 90)))];
        assert_eq!(pick(&paths, 1200), vec![]);
    }

    #[test]
    fn closed_paths_are_never_chosen() {
        let mut closed = view(1, 5);
        closed.status = PathStatus::Closed;
        assert_eq!(pick(&[view(0, 80), closed.clone()], 1200), vec![PathId(0)]);
        assert_eq!(pick(&[unusable(view(0, 80)), closed], 1200), vec![]);
    }

    #[test]
    fn a_path_still_held_by_pacing_waits() {
        let mut paced = view(1, 5);
        paced.next_send_time = Some(NOW + std::time::Duration::from_millis(1));
        assert_eq!(pick(&[view(0, 80), paced.clone()], 1200), vec![PathId(0)]);
        paced.next_send_time = Some(NOW);
        assert_eq!(pick(&[view(0, 80), paced], 1200), vec![PathId(1)]);
    }

    #[test]
    fn appends_to_the_output_without_clearing_it() {
        let mut s = MinRtt::default();
        let mut out = vec![PathId(9)];
        s.select(NOW, &[view(0, 10)], 1200, &mut out);
        assert_eq!(out, vec![PathId(9), PathId(0)]);
        assert_eq!(s.name(), "minrtt");
    }
}
