//! Everything that runs: media over the transport in the simulator ([`simulate`]) or in
//! real time ([`realtime`]), in one process over emulated paths ([`inprocess`], [`demo`])
//! or from a server elsewhere ([`remote`]); comparisons ([`compare`]); and what those
//! share: configurations ([`config`]), paths ([`paths`]), session reports ([`report`]),
//! the terminal's progress and summary ([`terminal`]) and what a window is handed to run
//! ([`open`], [`live`]).
//!
//! Nothing here knows the command line or the window.

pub mod bed;
pub mod beside;
pub mod compare;
pub mod config;
pub mod demo;
pub mod inprocess;
pub mod live;
pub mod open;
pub mod oracle;
pub mod parallel;
pub mod paths;
pub mod perf_view;
pub mod plot;
pub mod present;
pub mod proxy;
pub mod realtime;
pub mod remote;
pub mod report;
pub mod shown;
pub mod stream;
pub mod sweep;
pub mod terminal;
pub mod transport;

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context as _, bail};
use braid_media::decode::ffmpeg_decode_clip;
use braid_media::playout::PlayoutPolicy;
use braid_media::{Clip, OpenOptions};
use braid_netem::scenario::{self, Reader, Scenario, StreamSource, WorkloadKind};
use braid_sim::{self as sim, RunOptions, SimResult};
use braid_transport::profile::Profile;

use self::stream::{ClientConfig, ClientTrace, SimStream, TraceSink};

/// A simulated session: the simulator's result and, for clip streams, the client's trace.
pub struct Outcome {
    /// Report, time series, diagnostics.
    pub result: SimResult,
    /// Buffer level and PSNR over time (clip streams only).
    pub trace: Option<ClientTrace>,
}

/// Runs a scenario in the simulator with the workload it asks for.
pub fn simulate(
    scenario: &Scenario,
    profile: &Profile,
    opts: &RunOptions,
) -> anyhow::Result<SimResult> {
    Ok(simulate_traced(scenario, profile, opts)?.result)
}

/// As [`simulate`], keeping the client's trace.
pub fn simulate_traced(
    scenario: &Scenario,
    profile: &Profile,
    opts: &RunOptions,
) -> anyhow::Result<Outcome> {
    let plain = |r: SimResult| Outcome { result: r, trace: None };
    let WorkloadKind::Stream(st) = &scenario.workload.kind else {
        return Ok(plain(sim::run_detailed(scenario, profile, opts)?));
    };
    let StreamSource::Clip(clip_path) = &st.source else {
        return Ok(plain(sim::run_detailed(scenario, profile, opts)?));
    };
    if !matches!(st.reader, Reader::Player) {
        bail!("a clip stream is read by the player; reader patterns need a `cbr` source");
    }
    let media = MediaSetup::load(clip_path)?;
    let buffer_s = st.buffer_s.unwrap_or(30.0);
    let buffer_bytes = st.buffer_bytes.unwrap_or(8_000_000);
    // A looping clip never runs dry before the session ends, however far ahead the
    // transport's buffer lets the server get.
    let loop_for =
        st.loop_clip.then_some(scenario.duration + ahead_of_playback(st.transport_buffer_s));
    // The transport's receive buffer holds about one second of media unless the scenario
    // says otherwise: the player's own buffer (buffer_s / buffer_bytes), filled only when
    // it has room, decides how far ahead the server gets beyond it, so the read rate the
    // transport measures is the player's.
    let opts = &RunOptions {
        recv_buffer_bytes: Some(stream_buffer_bytes(&media.clip, st.transport_buffer_s)),
        ..opts.clone()
    };
    let run = |policy: PlayoutPolicy| -> anyhow::Result<Outcome> {
        let sink = TraceSink::default();
        let wl = SimStream::new(
            Arc::clone(&media.clip),
            media.name.clone(),
            Arc::clone(&media.reference),
            profile.media,
            loop_for,
            ClientConfig { policy, buffer_s, buffer_bytes, keep_history: true },
        )
        .with_trace(std::rc::Rc::clone(&sink))
        .ending_at(braid_transport::Instant::from_duration(scenario.duration));
        let result = sim::run_with_workload(scenario, profile, opts, Box::new(wl))?;
        let trace = sink.borrow_mut().take();
        Ok(Outcome { result, trace })
    };
    match st.playout {
        scenario::Playout::Fixed => run(PlayoutPolicy::fixed()),
        scenario::Playout::Media3 => run(PlayoutPolicy::media3()),
        scenario::Playout::Adaptive => run(PlayoutPolicy::adaptive()),
        scenario::Playout::Oracle => {
            // With hindsight: w* from a probe run's arrival curve, then reruns until the
            // start no longer grows (see `oracle`).
            let stream = oracle::Stream { media: &media, buffer_s, buffer_bytes, loop_for };
            oracle::run(scenario, profile, opts, &stream)
        }
    }
}

/// The transport receive buffer for streaming `clip`: one second of its media, within
/// [64 KB, 1 MB].
pub fn transport_buffer_bytes(clip: &Clip) -> u64 {
    ((clip.info.bitrate_bps / 8.0) as u64).clamp(64 * 1024, 1024 * 1024)
}

/// The largest transport receive buffer a scenario's `transport_buffer_s` can ask for.
const MAX_STREAM_BUFFER_BYTES: u64 = 256 * 1024 * 1024;

/// The transport receive buffer for streaming `clip` with a scenario's
/// `transport_buffer_s`: that many seconds of its media, within [64 KB, 256 MB]; without
/// it, [`transport_buffer_bytes`].
pub fn stream_buffer_bytes(clip: &Clip, transport_buffer_s: Option<f64>) -> u64 {
    match transport_buffer_s {
        Some(s) if s.is_finite() && s > 0.0 => {
            ((clip.info.bitrate_bps / 8.0 * s) as u64).clamp(64 * 1024, MAX_STREAM_BUFFER_BYTES)
        }
        _ => transport_buffer_bytes(clip),
    }
}

/// How much further than the session's end a looping clip must reach: as far as the
/// scenario's `transport_buffer_s` lets the server run ahead of playback (zero without it).
pub fn ahead_of_playback(transport_buffer_s: Option<f64>) -> std::time::Duration {
    transport_buffer_s
        .filter(|s| s.is_finite() && *s > 0.0)
        .map_or(std::time::Duration::ZERO, std::time::Duration::from_secs_f64)
}

/// A clip with its reference decode.
pub struct MediaSetup {
    /// The clip.
    pub clip: Arc<Clip>,
    /// Its name in reports.
    pub name: String,
    /// Reference frames (FFmpeg decode of the whole clip).
    pub reference: Arc<Vec<braid_media::quality::Frame>>,
}

impl MediaSetup {
    /// Opens and decodes `path`.
    pub fn load(path: &Path) -> anyhow::Result<MediaSetup> {
        let clip = Clip::open(path, &OpenOptions::default())
            .with_context(|| format!("opening {}", path.display()))?;
        let (reference, _) =
            ffmpeg_decode_clip(&clip).with_context(|| format!("decoding {}", path.display()))?;
        Ok(MediaSetup {
            name: normalize(path),
            clip: Arc::new(clip),
            reference: Arc::new(reference),
        })
    }
}

/// `a/b/../c` → `a/c`, lexically (for names in reports).
fn normalize(path: &Path) -> String {
    use std::path::Component;
    let mut out: Vec<Component<'_>> = Vec::new();
    for c in path.components() {
        match c {
            Component::ParentDir if matches!(out.last(), Some(Component::Normal(_))) => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out.iter().collect::<std::path::PathBuf>().display().to_string()
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod bounded_tests;
