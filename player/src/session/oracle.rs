//! The oracle policy's session: w* from a probe run, then reruns to a fixed point
//! ([`braid_media::oracle`] states what the result guarantees).

use std::sync::Arc;
use std::time::Duration;

use braid_media::oracle::{self, Arrival};
use braid_media::playout::PlayoutPolicy;
use braid_media::schedule::DEFAULT_SLOT_US;
use braid_netem::scenario::Scenario;
use braid_sim::{self as sim, RunOptions};
use braid_transport::profile::Profile;

use super::stream::{ClientConfig, SimStream, TraceSink};
use super::{MediaSetup, Outcome};

/// Reruns allowed after the probe before the oracle gives up on a fixed point.
pub const MAX_RUNS: u32 = 6;

/// The client's settings for one session.
pub struct Stream<'a> {
    /// The clip.
    pub media: &'a MediaSetup,
    /// Client buffer capacity, media seconds.
    pub buffer_s: f64,
    /// Client buffer capacity, bytes.
    pub buffer_bytes: u64,
    /// Repeat the clip for this long.
    pub loop_for: Option<Duration>,
}

/// Plays `scenario` with the oracle policy: probe with a player that never starts, then
/// run at the probe's w* and rerun at each run's own w* until it no longer grows
/// (at most [`MAX_RUNS`] runs). Returns the last run.
pub fn run(
    scenario: &Scenario,
    profile: &Profile,
    opts: &RunOptions,
    stream: &Stream<'_>,
) -> anyhow::Result<Outcome> {
    let first = probe_startup_us(scenario, profile, opts, stream)?;
    let search = oracle::fixed_point(first, MAX_RUNS, |w| {
        let (outcome, arrivals) = session(scenario, profile, opts, stream, w, true)?;
        Ok::<_, anyhow::Error>((outcome, own_startup_us(scenario, stream, &arrivals)))
    })?;
    tracing::debug!(
        first_us = first,
        startup_us = search.startup_us,
        runs = search.runs,
        converged = search.converged,
        "oracle start-up delay"
    );
    if !search.converged {
        tracing::warn!(
            runs = search.runs,
            startup_us = search.startup_us,
            "the oracle's start-up delay did not reach a fixed point: the run may stall"
        );
    }
    Ok(search.run)
}

/// w* of a probe run, with a player that never starts (so reading is limited only by
/// the transport): the start the fixed-point search begins with.
pub fn probe_startup_us(
    scenario: &Scenario,
    profile: &Profile,
    opts: &RunOptions,
    stream: &Stream<'_>,
) -> anyhow::Result<i64> {
    let (_, probe) = session(scenario, profile, opts, stream, i64::MAX / 4, false)?;
    Ok(own_startup_us(scenario, stream, &probe))
}

/// One simulated session with an oracle starting `startup_us` after the first packet,
/// and its arrival log.
fn session(
    scenario: &Scenario,
    profile: &Profile,
    opts: &RunOptions,
    stream: &Stream<'_>,
    startup_us: i64,
    traced: bool,
) -> anyhow::Result<(Outcome, Vec<Arrival>)> {
    let media = stream.media;
    let sink = TraceSink::default();
    let mut wl = SimStream::new(
        Arc::clone(&media.clip),
        media.name.clone(),
        Arc::clone(&media.reference),
        profile.media,
        stream.loop_for,
        ClientConfig {
            policy: PlayoutPolicy::Oracle { startup_us },
            buffer_s: stream.buffer_s,
            buffer_bytes: stream.buffer_bytes,
            // The arrival log below reads the client's whole history.
            keep_history: true,
        },
    )
    .ending_at(braid_transport::Instant::from_duration(scenario.duration));
    if traced {
        wl = wl.with_trace(std::rc::Rc::clone(&sink));
    }
    let log = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
    let recorder = ArrivalRecorder { inner: wl, out: std::rc::Rc::clone(&log) };
    let result = sim::run_with_workload(scenario, profile, opts, Box::new(recorder))?;
    let arrivals = log
        .borrow()
        .iter()
        .map(|&(frame, t, _)| Arrival { frame, at_us: t.as_micros() as i64 })
        .collect();
    let trace = sink.borrow_mut().take();
    Ok((Outcome { result, trace }, arrivals))
}

/// w* of a run from its own arrivals: frame `g` of the looped clip is consumed
/// `pts_g − pts_0 + Δ` after the clock starts.
fn own_startup_us(scenario: &Scenario, stream: &Stream<'_>, arrivals: &[Arrival]) -> i64 {
    let clip = &stream.media.clip;
    let n = clip.units.len().max(1) as u64;
    let fi = if clip.info.fps > 0.0 { (1e6 / clip.info.fps).round() as i64 } else { 40_000 };
    let clip_us = (clip.info.duration_s * 1e6).round() as i64;
    let pts0 = clip.units.first().map_or(0, |u| u.pts_us);
    let due = |g: u64| {
        let pts = clip.units.get((g % n) as usize).map_or(0, |u| u.pts_us);
        pts - pts0 + clip_us * (g / n) as i64 + fi
    };
    // As many frames as the sender sends (see `MediaSender::new`).
    let frames = match stream.loop_for {
        Some(d) => ((d.as_micros() / fi.max(1) as u128) as u64).max(n),
        None => n,
    };
    let end_us = scenario.duration.as_micros() as i64;
    oracle::startup_from_arrivals(arrivals, due, frames, end_us, DEFAULT_SLOT_US)
}

/// Copies the client's arrival log out of a simulation.
struct ArrivalRecorder {
    inner: SimStream,
    out: std::rc::Rc<std::cell::RefCell<Vec<(u64, braid_transport::Instant, u64)>>>,
}

impl sim::Workload for ArrivalRecorder {
    fn on_server(
        &mut self,
        now: braid_transport::Instant,
        conn: &mut braid_transport::proto::Connection,
    ) {
        self.inner.on_server(now, conn);
    }
    fn on_client(
        &mut self,
        now: braid_transport::Instant,
        conn: &mut braid_transport::proto::Connection,
    ) {
        self.inner.on_client(now, conn);
        if let Some(c) = self.inner.client() {
            let mut out = self.out.borrow_mut();
            let have = out.len();
            out.extend_from_slice(c.arrivals().get(have..).unwrap_or(&[]));
        }
    }
    fn poll_timeout(&self) -> Option<braid_transport::Instant> {
        self.inner.poll_timeout()
    }
    fn is_done(&self) -> bool {
        self.inner.is_done()
    }
    fn stats(&self) -> sim::WorkloadStats {
        self.inner.stats()
    }
    fn stream_report(&self) -> Option<braid_sim::StreamReport> {
        self.inner.stream_report()
    }
    fn on_stopped(&mut self, now: braid_transport::Instant) -> bool {
        self.inner.on_stopped(now)
    }
}
