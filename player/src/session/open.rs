//! Sessions as a window runs them: each [`PaneSession`] starts on the async runtime and
//! reports to its pane over a channel; an [`Opener`] turns what is typed into the window's
//! "Open" field into a [`SessionSet`] — a local file, served in-process over a scenario's
//! emulated paths ([`ScenarioOpener`], as `braid demo` does), or a `host:port` (as
//! `braid play` connects).

use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::mpsc::{Sender, channel};
use std::time::Duration;

use anyhow::{Context as _, bail};
use braid_media::decode::ffmpeg_decode_clip;
use braid_media::quality::Frame;
use braid_netem::scenario::Scenario;
use braid_transport::energy::PowerModels;
use braid_transport::profile::Profile;

use super::inprocess::{Contender, InProcess};
use super::live::{ControlledPath, NetCommand, PaneUpdate, controlled_paths};
use super::realtime::{self, PlayOutcome};
use super::remote;
use super::report::ReportLabel;

pub use super::live::Wake;
/// A running session's future.
pub type SessionFuture = Pin<Box<dyn Future<Output = anyhow::Result<PlayOutcome>> + Send>>;
/// Starts a session reporting to a pane: called once, with the pane's channel and the wake.
pub type SessionStart = Box<dyn FnOnce(Sender<PaneUpdate>, Wake) -> SessionFuture>;

/// A session for one pane.
pub struct PaneSession {
    /// The pane's heading (the profile).
    pub title: String,
    /// How to start it.
    pub start: SessionStart,
}

impl PaneSession {
    /// A pane titled `title` running `start`'s future.
    pub fn new<F, Fut>(title: impl Into<String>, start: F) -> PaneSession
    where
        F: FnOnce(Sender<PaneUpdate>, Wake) -> Fut + 'static,
        Fut: Future<Output = anyhow::Result<PlayOutcome>> + Send + 'static,
    {
        PaneSession {
            title: title.into(),
            start: Box::new(move |tx, wake| Box::pin(start(tx, wake))),
        }
    }
}

/// Sessions that start together, one pane each, and what the window needs besides.
pub struct SessionSet {
    /// The sessions, in pane order.
    pub sessions: Vec<PaneSession>,
    /// Where the network controls' commands go: one sender per session with an emulator.
    pub commands: Vec<Sender<NetCommand>>,
    /// The emulated paths the controls act on (none for a remote server).
    pub paths: Vec<ControlledPath>,
    /// What the sessions' reports are labelled with.
    pub label: ReportLabel,
    /// What the status line says ("playing …").
    pub description: String,
}

/// Starts what the user typed into a window's "Open" field.
pub trait Opener {
    /// The sessions that play `target`; an error names the problem.
    fn open(&mut self, target: &str) -> anyhow::Result<SessionSet>;
}

/// What the "Open" field was given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// A local video file.
    File(PathBuf),
    /// A server, `host:port` (resolved when connecting).
    Address(String),
}

/// Reads what was typed: an existing path is a file; `host:port` (optionally followed by
/// `#SHA256`, the server's certificate fingerprint) is an address; anything else is an
/// error naming the problem.
pub fn parse_target(text: &str) -> anyhow::Result<Target> {
    let full = text.trim();
    let t = full.split_once('#').map_or(full, |(a, _)| a);
    if t.is_empty() {
        bail!("type a video file's path or a server's host:port, then Open");
    }
    let path = Path::new(t);
    if path.is_dir() {
        bail!("{t} is a directory, not a video file");
    }
    if path.is_file() {
        return Ok(Target::File(path.to_path_buf()));
    }
    if t.parse::<SocketAddr>().is_ok() {
        return Ok(Target::Address(full.to_string()));
    }
    if let Some((host, port)) = t.rsplit_once(':') {
        let host_ok = !host.is_empty()
            && host.chars().all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-');
        if host_ok && port.parse::<u16>().is_ok_and(|p| p > 0) {
            return Ok(Target::Address(full.to_string()));
        }
    }
    bail!("no such file: {t} (a server is given as host:port)")
}

/// Plays files over a scenario's emulated paths and addresses directly, one pane per
/// profile.
#[derive(Clone)]
pub struct ScenarioOpener {
    /// A file is served in-process over this scenario's paths, emulated in real time.
    pub scenario: Scenario,
    /// One pane per profile (Braid's or noq).
    pub profiles: Vec<Contender>,
    /// The clients' radio parameters per role.
    pub power: PowerModels,
}

impl ScenarioOpener {
    /// Files over `scenario`, with `profiles`.
    pub fn new(scenario: Scenario, profiles: Vec<Contender>) -> ScenarioOpener {
        ScenarioOpener { scenario, profiles, power: PowerModels::default() }
    }

    /// The same, the clients using the radio parameters `power`.
    pub fn with_power(self, power: PowerModels) -> ScenarioOpener {
        ScenarioOpener { power, ..self }
    }

    fn open_file(&self, path: &Path) -> anyhow::Result<SessionSet> {
        // Demuxing is quick and catches "not a video" here, in the status line; the
        // reference decode (longer) runs on the runtime, once for every pane.
        let clip = realtime::load_clip(path)?;
        let scenario = &self.scenario;
        let duration = scenario.duration;
        // The scenario's transport buffer, if it sets one, holds for any clip played over it.
        let ahead_s = match &scenario.workload.kind {
            braid_netem::scenario::WorkloadKind::Stream(st) => st.transport_buffer_s,
            _ => None,
        };
        let reference: Arc<tokio::sync::OnceCell<Arc<Vec<Frame>>>> = Arc::default();
        let mut sessions = Vec::new();
        let mut commands = Vec::new();
        for contender in &self.profiles {
            let (cmd_tx, cmd_rx) = channel();
            commands.push(cmd_tx);
            let session = InProcess {
                scenario: scenario.clone(),
                profile: contender.profile(),
                noq: contender.is_noq(),
                clip: Arc::clone(&clip),
                reference: Arc::default(),
                clip_name: path.display().to_string(),
                loop_for: Some(
                    duration + Duration::from_secs(5) + super::ahead_of_playback(ahead_s),
                ),
                buffer_s: 30.0,
                transport_buffer_bytes: super::stream_buffer_bytes(&clip, ahead_s),
                duration,
                booth_loop: false,
                keep_history: false,
                power: self.power.clone(),
            };
            let (clip, reference) = (Arc::clone(&clip), Arc::clone(&reference));
            sessions.push(PaneSession::new(contender.name(), move |tx, wake| async move {
                let frames = reference
                    .get_or_try_init(|| async move {
                        let decoded =
                            tokio::task::spawn_blocking(move || ffmpeg_decode_clip(&clip))
                                .await
                                .context("the reference decoder stopped")?;
                        anyhow::Ok(Arc::new(decoded.context("decoding the reference")?.0))
                    })
                    .await?;
                InProcess { reference: Arc::clone(frames), ..session }
                    .run(tx, wake, Some(cmd_rx))
                    .await
            }));
        }
        Ok(SessionSet {
            sessions,
            commands,
            paths: controlled_paths(scenario),
            label: ReportLabel::for_scenario(scenario),
            description: format!(
                "playing {} over scenario \"{}\" (emulated)",
                path.display(),
                scenario.name
            ),
        })
    }

    fn open_address(&self, addr: String) -> SessionSet {
        let sessions = self
            .profiles
            .iter()
            .map(|contender| {
                let (profile, noq, addr) = (contender.profile(), contender.is_noq(), addr.clone());
                PaneSession::new(contender.name(), move |tx, wake| {
                    remote::play_address(addr, profile, noq, tx, wake)
                })
            })
            .collect();
        SessionSet {
            sessions,
            commands: Vec::new(),
            paths: Vec::new(),
            // The viewer's battery is the window's, whatever plays.
            label: ReportLabel {
                battery_j: self.scenario.workload.battery_j,
                ..ReportLabel::named("play")
            },
            description: format!("connecting to {}", addr.split('#').next().unwrap_or(&addr)),
        }
    }
}

impl Opener for ScenarioOpener {
    fn open(&mut self, text: &str) -> anyhow::Result<SessionSet> {
        match parse_target(text)? {
            Target::File(path) => self.open_file(&path),
            Target::Address(addr) => Ok(self.open_address(addr)),
        }
    }
}

/// The "Open" field and report label of a window showing one session of `profile`:
/// files play over `scenario` (default: the embedded demo scenario). Without a scenario
/// there is no "Open" field and reports are labelled `title`. `battery_j` (`--battery`)
/// replaces the scenario's battery for every session of the window.
pub fn one_session_window(
    scenario: Option<Scenario>,
    profile: &Profile,
    title: &str,
    power: &PowerModels,
    battery_j: Option<f64>,
) -> (Option<Box<dyn Opener>>, ReportLabel) {
    let scenario = scenario.or_else(|| super::demo::embedded_scenario().ok());
    match scenario {
        Some(mut s) => {
            if battery_j.is_some() {
                s.workload.battery_j = battery_j;
            }
            let label = ReportLabel::for_scenario(&s);
            let opener = ScenarioOpener::new(s, vec![Contender::Braid(profile.clone())])
                .with_power(power.clone());
            (Some(Box::new(opener)), label)
        }
        None => (None, ReportLabel { battery_j, ..ReportLabel::named(title) }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_are_files_or_host_port() {
        assert_eq!(
            parse_target("127.0.0.1:4000").unwrap(),
            Target::Address("127.0.0.1:4000".into())
        );
        assert_eq!(
            parse_target(" example.org:4000 ").unwrap(),
            Target::Address("example.org:4000".into())
        );
        assert_eq!(parse_target("[::1]:4000").unwrap(), Target::Address("[::1]:4000".into()));
        let pinned = format!("127.0.0.1:4000#{}", "ab".repeat(32));
        assert_eq!(parse_target(&pinned).unwrap(), Target::Address(pinned.clone()));
        let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml");
        assert_eq!(parse_target(manifest).unwrap(), Target::File(manifest.into()));
        assert!(
            parse_target(env!("CARGO_MANIFEST_DIR"))
                .unwrap_err()
                .to_string()
                .contains("is a directory")
        );
        assert!(
            parse_target("clip.mp4").unwrap_err().to_string().contains("no such file: clip.mp4")
        );
        assert!(parse_target("host:0").is_err());
    }
}
