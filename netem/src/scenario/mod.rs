//! Scenario files (TOML), as specified in docs/REFERENCE.md.
//!
//! A scenario describes links (named ones are shareable and chainable), paths with roles
//! (each a `down` = server→client and an `up` = client→server chain of links), optional
//! proxy nodes, timed events, cross traffic and the workload. [`Scenario::load`] reads and
//! validates a file (trace files are read relative to it); [`Scenario::parse`] does the same
//! from text. Every error names the file, line and column, and the key:
//! `scenario.toml:12:7: path "wifi": unknown role "wlan"`. Unknown keys are rejected.
//!
//! Links are flattened into one table ([`Scenario::links`]): the named `[[link]]`s first, in
//! file order, then each path's inline links (named `PATH.down` / `PATH.up`). Paths refer to
//! links by index, so a named link crossed by several paths is one link.
//!
//! Extensions beyond docs/REFERENCE.md (all optional): a link may have
//! `schedule = [{ at_s, rate }, …]` instead of `rate`/`trace`, and no rate at all (unlimited);
//! `gilbert = { p, r, h, k }`: `p` good→bad and `r` bad→good transition probabilities per
//! datagram, `h` the loss probability in the bad state (default 1, Gilbert's original
//! model), optional `k` the loss probability in the good state (default 0); an event
//! on a path may say `direction = "down" | "up" | "both"` (default both); `[[cross]]` takes
//! `packet_bytes` for cbr/onoff (default 1200); a workload may say `pattern = { … }` beside
//! `reader = "pattern"`; an event may carry `caption = "…"`, which demos show while it is
//! in effect; a `clip` stream may say `max_buffer_s = S` (0 < S ≤ 600; `transport_buffer_s`
//! is its older name and means the same): the download-ahead, i.e. the transport's receive
//! buffer holds S seconds of the clip's media instead of about one, so the server may
//! download that far ahead of what the player reads (a looping clip then repeats long
//! enough never to run dry before the session ends). `--max-buffer S` on play, demo and
//! compare sets the same.
//!
//! Jitter: `jitter_ms` adds a `delay_dist` sample to each datagram's delay (normal: σ =
//! `jitter_ms`, truncated at 0). By default a link keeps FIFO order — a datagram is never
//! delivered before the one ahead of it — so at high packet rates and large σ each delay
//! becomes the running maximum of the samples, strongly correlated from packet to packet
//! (what one queue, e.g. a radio link's, does). With `jitter_reorder = true` every datagram
//! keeps its own independent sample and later datagrams may overtake earlier ones, as
//! tc/netem's `delay D J` does (the emulation of the S-EDPF paper's controlled
//! experiments).
//!
//! An event's `set` changes the links it targets from then on: `rate` replaces a fixed
//! rate, trace or schedule with the new fixed rate; `delay_ms` keeps the jitter; `loss`
//! replaces the loss process with Bernoulli loss. A link without `rate`, `trace` or
//! `schedule` has unlimited rate.

mod raw;
mod validate;

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::LinkConfig;
use braid_transport::path::PathRole;

/// A validated scenario.
#[derive(Clone, Debug, PartialEq)]
pub struct Scenario {
    /// `name`.
    pub name: String,
    /// `duration_s`.
    pub duration: Duration,
    /// `seed` (default 1).
    pub seed: u64,
    /// `idle_timeout_s`: the idle timeout the client announces (RFC 9000 §10.1's
    /// `max_idle_timeout`; 0 for none); `None`: the transport's default (30 s).
    pub idle_timeout: Option<Duration>,
    /// Every link: named ones first, then inline ones.
    pub links: Vec<LinkDef>,
    /// `[[path]]`s in file order.
    pub paths: Vec<PathDef>,
    /// `[[node]]`s (parsed and validated; not simulated yet).
    pub nodes: Vec<NodeDef>,
    /// `[[event]]`s sorted by time (stable: file order among equal times).
    pub events: Vec<EventDef>,
    /// `[[cross]]` traffic.
    pub cross: Vec<CrossDef>,
    /// `[workload]` (default: bulk, unlimited).
    pub workload: WorkloadDef,
}

/// One link of the scenario.
#[derive(Clone, Debug, PartialEq)]
pub struct LinkDef {
    /// The `[[link]]` name, or `PATH.down` / `PATH.up` for inline links.
    pub name: String,
    /// True for a path's inline link.
    pub inline: bool,
    /// The link model.
    pub config: LinkConfig,
}

/// One `[[path]]`.
#[derive(Clone, Debug, PartialEq)]
pub struct PathDef {
    /// `name`.
    pub name: String,
    /// `role` (default wired).
    pub role: PathRole,
    /// Server→client chain: indices into [`Scenario::links`], crossed in order.
    pub down: Vec<usize>,
    /// Client→server chain.
    pub up: Vec<usize>,
}

/// One `[[node]]` (a proxy between two links of a chain).
#[derive(Clone, Debug, PartialEq)]
pub struct NodeDef {
    /// `name`.
    pub name: String,
    /// `after`: index into [`Scenario::links`].
    pub after: usize,
    /// `upstream_profile`.
    pub upstream_profile: Option<String>,
    /// `downstream_profile`.
    pub downstream_profile: Option<String>,
    /// `buffer_bytes`: the most the node holds (relayed, not yet released downstream);
    /// `None` = [`NodeDef::DEFAULT_BUFFER_BYTES`].
    pub buffer_bytes: Option<u64>,
}

impl NodeDef {
    /// The node's buffer when the scenario gives none (the player's default client buffer).
    pub const DEFAULT_BUFFER_BYTES: u64 = 8_000_000;
}

/// What an event applies to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// A path (index into [`Scenario::paths`]).
    Path(usize),
    /// A link (index into [`Scenario::links`]).
    Link(usize),
}

/// Which directions of a path an event changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Direction {
    /// Both chains.
    #[default]
    Both,
    /// The server→client chain.
    Down,
    /// The client→server chain.
    Up,
}

/// A timed change.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// The link(s) fail: everything queued is dropped.
    Down,
    /// The link(s) recover.
    Up,
    /// Change rate, delay and/or loss.
    Set {
        /// New rate, bit/s.
        rate_bps: Option<u64>,
        /// New base delay.
        delay: Option<Duration>,
        /// New Bernoulli loss probability.
        loss: Option<f64>,
    },
}

impl Action {
    /// Applies this action to `link` at `now` (the simulator and the real-time relay both
    /// use it, so an event means the same thing in both).
    pub fn apply<T>(&self, link: &mut crate::Link<T>, now: braid_transport::time::Instant) {
        use crate::{Loss, Rate};
        match self {
            Action::Down => link.set_down(now),
            Action::Up => link.set_up(now),
            Action::Set { rate_bps, delay, loss } => {
                if let Some(r) = rate_bps {
                    link.set_rate(now, Rate::Fixed(*r));
                }
                if let Some(d) = delay {
                    let jitter = link.config().jitter;
                    link.set_delay(now, *d, jitter);
                }
                if let Some(p) = loss {
                    link.set_loss(now, if *p > 0.0 { Loss::Bernoulli(*p) } else { Loss::None });
                }
            }
        }
    }
}

/// One `[[event]]`.
#[derive(Clone, Debug, PartialEq)]
pub struct EventDef {
    /// `at_s`.
    pub at: Duration,
    /// `path` or `link`.
    pub target: Target,
    /// `direction` (paths only).
    pub direction: Direction,
    /// `action`.
    pub action: Action,
    /// What a demo caption says while the event is in effect (`caption = "…"`).
    pub caption: Option<String>,
}

impl Scenario {
    /// Sets a clip stream's download-ahead to `s` seconds of its media (`max_buffer_s`,
    /// `--max-buffer`). An error for a workload that is not a clip stream, or for `s`
    /// outside (0, 600].
    pub fn set_max_buffer_s(&mut self, s: f64) -> Result<(), String> {
        if !(s.is_finite() && s > 0.0 && s <= 600.0) {
            return Err(format!("the download-ahead must be above 0 and at most 600 s, got {s}"));
        }
        match &mut self.workload.kind {
            WorkloadKind::Stream(st) if matches!(st.source, StreamSource::Clip(_)) => {
                st.transport_buffer_s = Some(s);
                Ok(())
            }
            _ => Err(format!(
                "scenario {}: a download-ahead applies to a clip stream, not to this workload",
                self.name
            )),
        }
    }

    /// The links an event changes: every link of the chosen chains of a path (a named link
    /// shared with other paths changes for them too), or the one link.
    pub fn event_links(&self, ev: &EventDef) -> Vec<usize> {
        match ev.target {
            Target::Link(l) => vec![l],
            Target::Path(p) => {
                let Some(path) = self.paths.get(p) else { return Vec::new() };
                let mut out = Vec::new();
                if ev.direction != Direction::Up {
                    out.extend(&path.down);
                }
                if ev.direction != Direction::Down {
                    out.extend(&path.up);
                }
                out.sort_unstable();
                out.dedup();
                out
            }
        }
    }

    /// The index of the path called `name`.
    pub fn path_index(&self, name: &str) -> Option<usize> {
        self.paths.iter().position(|p| p.name == name)
    }
}

/// Where cross traffic runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CrossTarget {
    /// Through this link only (index into [`Scenario::links`]).
    Link(usize),
    /// Through this path's down chain (and its up chain for acknowledgements).
    Path(usize),
}

/// The kind of cross traffic.
#[derive(Clone, Debug, PartialEq)]
pub enum CrossKind {
    /// Long-lived Reno bulk flows (the transport's `tcp` profile).
    Reno,
    /// TFRC flows (needs a `tfrc` profile).
    Tfrc,
    /// Constant bit rate.
    Cbr {
        /// Rate, bit/s.
        rate_bps: u64,
        /// Datagram size.
        packet_bytes: u32,
    },
    /// Pareto ON/OFF: at `rate_bps` while ON.
    OnOff {
        /// Peak rate, bit/s.
        rate_bps: u64,
        /// Datagram size.
        packet_bytes: u32,
        /// Mean ON time, s.
        on_s: f64,
        /// Mean OFF time, s.
        off_s: f64,
        /// Pareto shape (> 1).
        shape: f64,
    },
    /// A flash crowd of short Reno flows arriving uniformly over `[start, stop]`.
    Flash {
        /// Number of flows.
        flows: u32,
        /// Bytes each flow transfers.
        flow_bytes: u64,
    },
}

/// One `[[cross]]`.
#[derive(Clone, Debug, PartialEq)]
pub struct CrossDef {
    /// `link` or `path`.
    pub target: CrossTarget,
    /// `kind` and its parameters.
    pub kind: CrossKind,
    /// `count` (default 1): identical sources.
    pub count: u32,
    /// `start_s` (default 0).
    pub start: Duration,
    /// `stop_s` (default the duration).
    pub stop: Duration,
}

/// `[workload]`.
#[derive(Clone, Debug, PartialEq)]
pub struct WorkloadDef {
    /// What is transferred.
    pub kind: WorkloadKind,
    /// `battery_j`: battery capacity for the residual-battery figure.
    pub battery_j: Option<f64>,
}

impl Default for WorkloadDef {
    fn default() -> Self {
        WorkloadDef { kind: WorkloadKind::Bulk { bytes: None }, battery_j: None }
    }
}

/// The workload kind.
#[derive(Clone, Debug, PartialEq)]
pub enum WorkloadKind {
    /// The server sends as fast as the transport allows; the client reads everything.
    Bulk {
        /// Total bytes (`None`: unlimited for the duration).
        bytes: Option<u64>,
    },
    /// A media stream.
    Stream(StreamDef),
}

/// A stream workload's keys.
#[derive(Clone, Debug, PartialEq)]
pub struct StreamDef {
    /// `clip` or `cbr`.
    pub source: StreamSource,
    /// `loop` (default false).
    pub loop_clip: bool,
    /// `playout` (default adaptive).
    pub playout: Playout,
    /// `buffer_s`.
    pub buffer_s: Option<f64>,
    /// `buffer_bytes`.
    pub buffer_bytes: Option<u64>,
    /// `max_buffer_s` (or its older name `transport_buffer_s`): the download-ahead, the
    /// transport's receive buffer in seconds of the clip's media,
    /// i.e. how far the server may run ahead of what the player has read (`None`: about
    /// one second). The player reads only while its own buffer (`buffer_s`,
    /// `buffer_bytes`) has room, so beyond that it reads at the rate it plays; a larger
    /// transport buffer lets the network download ahead of that rate.
    pub transport_buffer_s: Option<f64>,
    /// `reader` (default player).
    pub reader: Reader,
}

/// Where a stream's media comes from.
#[derive(Clone, Debug, PartialEq)]
pub enum StreamSource {
    /// A clip file (resolved against the scenario file's directory).
    Clip(PathBuf),
    /// Synthetic constant-rate media.
    Cbr {
        /// Rate, bit/s.
        rate_bps: u64,
        /// Bytes per media packet.
        packet_bytes: u32,
    },
}

/// Playout buffer policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Playout {
    /// ExoPlayer 2.x's fixed thresholds (2.5 s of media to start, 5 s to resume).
    Fixed,
    /// Media3's fixed thresholds (DefaultLoadControl: 1 s to start, 2 s to resume).
    Media3,
    /// Forecast-driven thresholds.
    #[default]
    Adaptive,
    /// With hindsight.
    Oracle,
}

/// How the client reads.
#[derive(Clone, Debug, PartialEq, Default)]
pub enum Reader {
    /// The real player reads when its buffer has room.
    #[default]
    Player,
    /// A scripted read-rate pattern, cycling through `rates_bps`.
    Pattern {
        /// Read rates, bit/s.
        rates_bps: Vec<u64>,
        /// How long each rate lasts.
        period: PatternPeriod,
    },
}

/// The length of one step of a read pattern.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub enum PatternPeriod {
    /// The first path's base RTT.
    #[default]
    Rtt,
    /// Milliseconds.
    Millis(f64),
}

/// A scenario that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// The scenario file could not be read.
    #[error("{file}: {source}")]
    Io {
        /// The file.
        file: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// Bad syntax, an unknown or missing key, a bad value or a dangling reference.
    #[error("{file}:{line}:{column}: {message}")]
    Invalid {
        /// The file (as given).
        file: String,
        /// 1-based line.
        line: usize,
        /// 1-based column (characters).
        column: usize,
        /// The key at fault, dotted (`path.role`), or empty for syntax errors.
        key: String,
        /// What is wrong, with the item it is in (`path "wifi": unknown role "wlan"`).
        message: String,
    },
}

impl ScenarioError {
    /// The key at fault (empty for I/O and syntax errors).
    pub fn key(&self) -> &str {
        match self {
            ScenarioError::Invalid { key, .. } => key,
            ScenarioError::Io { .. } => "",
        }
    }

    /// (line, column) of the error, if it has a position.
    pub fn position(&self) -> Option<(usize, usize)> {
        match self {
            ScenarioError::Invalid { line, column, .. } => Some((*line, *column)),
            ScenarioError::Io { .. } => None,
        }
    }
}

impl Scenario {
    /// Reads and validates a scenario file; relative paths inside resolve against its
    /// directory.
    pub fn load(path: &Path) -> Result<Scenario, ScenarioError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|source| ScenarioError::Io { file: file.clone(), source })?;
        let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
        Scenario::parse(&text, &file, &base)
    }

    /// Validates scenario text. `file` labels error messages; `base_dir` resolves relative
    /// file paths (trace files are read here).
    pub fn parse(text: &str, file: &str, base_dir: &Path) -> Result<Scenario, ScenarioError> {
        validate::parse(text, file, base_dir)
    }
}

/// Parses a rate: `"64kbit"`, `"2mbit"`, `"1.5gbit"`, `"9600bit"` (decimal SI, bits per
/// second, case-insensitive) or a plain number string of bit/s.
pub fn parse_rate(text: &str) -> Option<u64> {
    let t = text.trim().to_ascii_lowercase();
    let (num, mult) = if let Some(n) = t.strip_suffix("gbit") {
        (n, 1e9)
    } else if let Some(n) = t.strip_suffix("mbit") {
        (n, 1e6)
    } else if let Some(n) = t.strip_suffix("kbit") {
        (n, 1e3)
    } else if let Some(n) = t.strip_suffix("bit") {
        (n, 1.0)
    } else {
        (t.as_str(), 1.0)
    };
    let v: f64 = num.trim().parse().ok()?;
    let bps = v * mult;
    (0.0..1e15).contains(&bps).then(|| bps.round() as u64)
}

#[cfg(test)]
mod tests;
