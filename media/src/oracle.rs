//! The oracle policy's start-up delay: w* with hindsight, from a run's own arrivals.
//!
//! [`PlayoutPolicy::Oracle`](crate::playout::PlayoutPolicy::Oracle) starts playback a fixed
//! time after the first packet. The smallest such time with which no frame of a run is
//! late is [`startup_from_arrivals`] of that run's arrival log. A first run cannot know it,
//! so the oracle is computed from a run with a player that never starts; but the arrival
//! curve of a session may depend on when playback starts (flow control, the timing of the
//! client's reads and acknowledgements), so the w* of the first run is not always the w*
//! of a run started at it. [`fixed_point`] therefore reruns with the new start until a
//! run's own w* is no larger than the start it was run with.
//!
//! # What the oracle guarantees
//! When [`fixed_point`] reports [`OracleSearch::converged`], the returned run started at
//! `startup_us` and every frame of **that run** was there (arrived, or resolved as
//! abandoned) when due, and every frame that never arrived was due only after the run
//! ended: the run has no stall. The start-up delay is the smallest that makes its own run
//! stall-free among those the iteration visited (w₀ from the probe run, then increasing);
//! it equals the true minimum whenever the arrival curve does not depend on the start
//! (then the first rerun already converges), and is otherwise an upper bound on it (a
//! smaller start with a different arrival curve might also have worked: the search does
//! not go back down). When the iteration does not converge within its bound, the last
//! run is returned with `converged = false` and may stall.

/// A frame's fate in a run's arrival log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Arrival {
    /// Frame index (presentation order, counting across loops of a clip).
    pub frame: u64,
    /// When its last byte was handed to the client, µs since the client's first packet.
    pub at_us: i64,
}

/// The smallest start-up delay (time from the first packet to starting the media clock,
/// µs, rounded up to a multiple of `slot_us`) with which no frame of a run is late.
///
/// - `arrivals`: the frames that arrived, in any order;
/// - `due_us(g)`: media time at which frame `g` is consumed, from the clock's start
///   (`pts_g − pts_0 + Δ`, the timing convention of [`crate::playout`]);
/// - `frames`: how many frames the stream has;
/// - `end_us`: when the run ends. A frame still missing then must come due after the end.
///
/// Frames are consumed in index order, so frame `g` is there once it and every earlier
/// frame are. A frame missing from the log below the last arrived one was abandoned (the
/// transport delivers in order): it is counted as resolved when the next arrived frame
/// came, which is no earlier than its gap was delivered.
pub fn startup_from_arrivals(
    arrivals: &[Arrival],
    due_us: impl Fn(u64) -> i64,
    frames: u64,
    end_us: i64,
    slot_us: i64,
) -> i64 {
    let mut log: Vec<(u64, i64)> = arrivals.iter().map(|a| (a.frame, a.at_us)).collect();
    log.sort_unstable();
    let mut w = 0i64;
    let mut here_at = 0i64; // when every frame up to the current one was there
    let mut expect = 0u64; // next frame index not yet accounted for
    for &(g, t) in &log {
        if g < expect {
            continue; // a duplicate
        }
        here_at = here_at.max(t);
        // Frames expect..g were abandoned, resolved at the latest when frame g came.
        for k in expect..=g {
            w = w.max(here_at - due_us(k));
        }
        expect = g + 1;
    }
    if expect < frames {
        // The next frame never came: it must fall due after the run ended.
        w = w.max(end_us + 1 - due_us(expect));
    }
    let slot = slot_us.max(1);
    (w.max(0) + slot - 1) / slot * slot
}

/// The result of [`fixed_point`].
#[derive(Clone, Debug, PartialEq)]
pub struct OracleSearch<T> {
    /// The last run made, started at `startup_us`.
    pub run: T,
    /// Its start-up delay, µs.
    pub startup_us: i64,
    /// Runs made (not counting the probe that gave the first start).
    pub runs: u32,
    /// Whether the last run's own w* was no larger than its start (then it did not stall).
    pub converged: bool,
}

/// Runs `run(w)` from `w = first_us` (the w* of a probe run) and, while a run's own w*
/// (the second value `run` returns) exceeds the start it was run with, reruns at that w*,
/// at most `max_runs` times (at least once). The start never decreases.
pub fn fixed_point<T, E>(
    first_us: i64,
    max_runs: u32,
    mut run: impl FnMut(i64) -> Result<(T, i64), E>,
) -> Result<OracleSearch<T>, E> {
    let mut w = first_us.max(0);
    let mut runs = 0;
    loop {
        let (out, own) = run(w)?;
        runs += 1;
        if own <= w || runs >= max_runs.max(1) {
            return Ok(OracleSearch { run: out, startup_us: w, runs, converged: own <= w });
        }
        w = own;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DT: i64 = 40_000;

    fn log(times: &[(u64, i64)]) -> Vec<Arrival> {
        times.iter().map(|&(frame, at_us)| Arrival { frame, at_us }).collect()
    }

    #[test]
    fn the_latest_frame_relative_to_its_due_time_sets_the_delay() {
        // Frame k is due k·40 ms + 40 ms after the clock starts.
        let due = |g: u64| g as i64 * DT + DT;
        // Frame 2 is the latest: 300 ms − 120 ms = 180 ms.
        let a = log(&[(0, 100_000), (1, 150_000), (2, 300_000), (3, 310_000)]);
        assert_eq!(startup_from_arrivals(&a, due, 4, 10_000_000, 10_000), 180_000);
        // Rounded up to a slot.
        let a = log(&[(0, 100_001)]);
        assert_eq!(startup_from_arrivals(&a, due, 1, 10_000_000, 10_000), 70_000);
    }

    #[test]
    fn a_frame_that_never_arrived_must_fall_due_after_the_end() {
        let due = |g: u64| g as i64 * DT + DT;
        // Frames 0..3 came early; frame 3 never came before the end at 1 s.
        let a = log(&[(0, 10_000), (1, 20_000), (2, 30_000)]);
        let w = startup_from_arrivals(&a, due, 10, 1_000_000, 10_000);
        assert!(w + due(3) > 1_000_000, "{w}");
        assert!(w - 10_000 + due(3) <= 1_000_000, "{w} is not the smallest");
        // When every frame came, the end does not matter.
        assert_eq!(startup_from_arrivals(&a, due, 3, 1_000_000, 10_000), 0);
    }

    #[test]
    fn an_abandoned_frame_counts_as_resolved_when_the_next_one_came() {
        let due = |g: u64| g as i64 * DT + DT;
        // Frame 1 was abandoned; its gap came no later than frame 2 at 500 ms, which
        // frame 1 (due 80 ms after the start) must not be due before.
        let a = log(&[(0, 10_000), (2, 500_000)]);
        assert_eq!(startup_from_arrivals(&a, due, 3, 10_000_000, 10_000), 420_000);
    }

    #[test]
    fn the_fixed_point_reruns_until_a_run_certifies_its_own_start() {
        // A run started at w sees its own w* = max(w, 300) when w < 250, else w.
        let mut seen = Vec::new();
        let r = fixed_point(100, 8, |w| {
            seen.push(w);
            Ok::<_, ()>((w * 10, if w < 250 { 300 } else { w }))
        })
        .unwrap();
        assert_eq!(seen, vec![100, 300]);
        assert_eq!(r, OracleSearch { run: 3000, startup_us: 300, runs: 2, converged: true });
    }

    #[test]
    fn the_fixed_point_stops_at_its_bound_and_says_so() {
        let r = fixed_point(0, 3, |w| Ok::<_, ()>((w, w + 10))).unwrap();
        assert_eq!(r.runs, 3);
        assert_eq!(r.startup_us, 20);
        assert!(!r.converged);
        let e = fixed_point(0, 3, |_| Err::<((), i64), _>("failed"));
        assert_eq!(e, Err("failed"));
    }
}
