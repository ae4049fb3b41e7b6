//! `braid demo`'s session: the bundled clip (or the scenario's own) served in-process over
//! a scenario's emulated paths (by default the embedded `assets/scenarios/demo.toml`).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use braid_media::decode::ffmpeg_decode_clip;
use braid_netem::scenario::{Scenario, StreamSource, WorkloadKind};
use braid_transport::energy::PowerModels;
use braid_transport::profile::{self, Profile};

use super::inprocess::InProcess;
use super::realtime;
use crate::assets::{DEMO_CLIP, DEMO_CLIP_NAME, DEMO_SCENARIO, TempAsset};

/// The embedded demo scenario.
pub fn embedded_scenario() -> anyhow::Result<Scenario> {
    Scenario::parse(DEMO_SCENARIO, "demo.toml (embedded)", Path::new("."))
        .context("the embedded demo scenario")
}

/// The profile the demo shows unless told otherwise: the best multipath profile there is.
pub fn best_profile() -> anyhow::Result<Profile> {
    ["mptcp-qe", "mptcp"]
        .iter()
        .find_map(|n| profile::lookup(n).ok())
        .ok_or_else(|| anyhow::anyhow!("no multipath profile is registered"))
}

/// A prepared demo.
pub struct Demo {
    /// The session.
    pub session: InProcess,
    /// One line saying what plays over what.
    pub description: String,
    /// The bundled clip's file, kept while the demo runs.
    _clip_file: TempAsset,
}

impl Demo {
    /// The demo over `scenario_file` (default: the embedded scenario) with `profile`
    /// (default: [`best_profile`]), for `limit` (default: the scenario's duration), on
    /// repeat with `booth_loop`. The clip is the scenario's own when it names one that
    /// exists, else the bundled one.
    pub fn prepare(
        scenario_file: Option<&Path>,
        profile: Option<&str>,
        limit: Option<Duration>,
        booth_loop: bool,
    ) -> anyhow::Result<Demo> {
        let tmp = TempAsset::write(DEMO_CLIP, "demo.mp4")?;
        let scenario = match scenario_file {
            Some(p) => Scenario::load(p)?,
            None => embedded_scenario()?,
        };
        let (clip_path, clip_name, loop_clip, buffer_s, ahead_s) = match &scenario.workload.kind {
            WorkloadKind::Stream(st) => {
                let from_scenario = match &st.source {
                    StreamSource::Clip(p) if scenario_file.is_some() && p.is_file() => {
                        Some(p.clone())
                    }
                    _ => None,
                };
                match from_scenario {
                    Some(p) => (
                        p.clone(),
                        p.display().to_string(),
                        st.loop_clip,
                        st.buffer_s,
                        st.transport_buffer_s,
                    ),
                    None => (
                        tmp.path().to_path_buf(),
                        DEMO_CLIP_NAME.to_string(),
                        st.loop_clip,
                        st.buffer_s,
                        st.transport_buffer_s,
                    ),
                }
            }
            _ => (tmp.path().to_path_buf(), DEMO_CLIP_NAME.to_string(), true, None, None),
        };
        let profile = match profile {
            Some(p) => profile::lookup(p)?,
            None => best_profile()?,
        };
        let clip = realtime::load_clip(&clip_path)?;
        let (reference, _) = ffmpeg_decode_clip(&clip).context("decoding the reference")?;
        let duration = limit.unwrap_or(scenario.duration);
        let description = format!(
            "braid demo: {clip_name} ({} {}x{}, {:.0} kbit/s) over scenario \"{}\" ({} paths, emulated in real time), profile {}, {:.0} s",
            clip.info.codec,
            clip.info.width,
            clip.info.height,
            clip.info.bitrate_bps / 1000.0,
            scenario.name,
            scenario.paths.len(),
            profile.name,
            duration.as_secs_f64()
        );
        let transport_buffer_bytes = super::stream_buffer_bytes(&clip, ahead_s);
        let session = InProcess {
            scenario,
            profile,
            noq: false,
            clip,
            reference: Arc::new(reference),
            clip_name,
            loop_for: loop_clip
                .then_some(duration + Duration::from_secs(5) + super::ahead_of_playback(ahead_s)),
            buffer_s: buffer_s.unwrap_or(30.0),
            transport_buffer_bytes,
            duration,
            booth_loop,
            keep_history: false,
            power: PowerModels::default(),
        };
        Ok(Demo { session, description, _clip_file: tmp })
    }

    /// The demo with its download-ahead set to `s` seconds of media (`--max-buffer`),
    /// replacing the scenario's: the receive window, and how much longer a looping clip
    /// runs. Nothing changes without it.
    pub fn with_max_buffer(mut self, s: Option<f64>) -> Demo {
        let Some(s) = s else { return self };
        let old = match &self.session.scenario.workload.kind {
            WorkloadKind::Stream(st) => st.transport_buffer_s,
            _ => None,
        };
        // A clip stream keeps it for the files opened over the scenario in the window;
        // any other workload plays the bundled clip, which takes it below.
        let _ = self.session.scenario.set_max_buffer_s(s);
        let clip = &self.session.clip;
        self.session.transport_buffer_bytes = super::stream_buffer_bytes(clip, Some(s));
        if let Some(l) = self.session.loop_for {
            self.session.loop_for = Some(
                l.saturating_sub(super::ahead_of_playback(old)) + super::ahead_of_playback(Some(s)),
            );
        }
        self
    }
}
