//! Comparisons: every profile on identical conditions and seeds, in the simulator or in
//! real time; their statistics (`compare.json`), the text table, and the ranking and
//! export of a real-time comparison shown in a window.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc::Sender;
use std::time::Duration;

use anyhow::{Context as _, bail};
use braid_media::decode::ffmpeg_decode_clip;
use braid_netem::scenario::{Scenario, StreamSource, WorkloadKind};
use braid_sim::{RunOptions, SessionReport};
use braid_transport::energy::PowerModels;
use braid_transport::profile::Profile;
use serde_json::{Map, Value};

pub use super::inprocess::Contender;
use super::inprocess::InProcess;
use super::live::{LiveStats, NetCommand, PaneUpdate};
use super::open::PaneSession;
use super::realtime::{self, PlayOutcome};
use super::report::{self, ReportLabel};

/// One profile's runs and their statistics.
#[derive(Debug, serde::Serialize)]
pub struct ProfileSummary {
    /// The profile.
    pub profile: String,
    /// Mean of every numeric field, flattened with dots.
    pub mean: BTreeMap<String, f64>,
    /// Standard deviation of the same.
    pub sd: BTreeMap<String, f64>,
    /// The session reports, one per seed.
    pub runs: Vec<SessionReport>,
}

/// The whole comparison (`compare.json`).
#[derive(Debug, serde::Serialize)]
pub struct Comparison {
    /// Scenario name.
    pub scenario: String,
    /// Seeds used.
    pub seeds: Vec<u64>,
    /// One entry per profile, in the order given.
    pub profiles: Vec<ProfileSummary>,
}

/// Flattens the numeric fields of a JSON value: `{"a": {"b": 1}}` → `a.b = 1`; arrays of
/// objects with a `name` use it (`paths.wifi.throughput_bps`).
pub fn flatten(prefix: &str, v: &Value, out: &mut BTreeMap<String, f64>) {
    match v {
        Value::Number(n) => {
            if let Some(x) = n.as_f64() {
                out.insert(prefix.to_string(), x);
            }
        }
        Value::Object(m) => {
            for (k, v) in m {
                let key = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
                flatten(&key, v, out);
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                let label = item
                    .get("name")
                    .and_then(Value::as_str)
                    .map_or_else(|| i.to_string(), str::to_string);
                flatten(&format!("{prefix}.{label}"), item, out);
            }
        }
        _ => {}
    }
}

/// Mean and population standard deviation per key over the runs.
pub fn statistics(runs: &[SessionReport]) -> (BTreeMap<String, f64>, BTreeMap<String, f64>) {
    let mut values: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for r in runs {
        let mut flat = BTreeMap::new();
        flatten("", &serde_json::to_value(r).unwrap_or(Value::Object(Map::new())), &mut flat);
        flat.remove("seed");
        for (k, v) in flat {
            values.entry(k).or_default().push(v);
        }
    }
    let mut mean = BTreeMap::new();
    let mut sd = BTreeMap::new();
    for (k, v) in values {
        let n = v.len() as f64;
        let m = v.iter().sum::<f64>() / n;
        let var = v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / n;
        mean.insert(k.clone(), m);
        sd.insert(k, var.sqrt());
    }
    (mean, sd)
}

/// Runs every profile on every seed in the simulator; with `out`, writes each run's CSV
/// time series (and PNG plots when a font is installed) there.
// One argument per independent knob of `braid compare`; a struct would only rename them.
#[allow(clippy::too_many_arguments)]
pub fn simulate(
    scenario: &Scenario,
    profiles: &[Profile],
    seeds: u32,
    path: Option<String>,
    out: Option<&PathBuf>,
    power: &PowerModels,
    trace: &braid_sim::TraceHooks,
    batch: super::parallel::Batch,
) -> anyhow::Result<Comparison> {
    let runs = simulate_runs(scenario, profiles, seeds, path, out, power, trace, batch, |_| true)?;
    let names: Vec<String> = profiles.iter().map(|p| p.name.to_string()).collect();
    Ok(summarize(&scenario.name, seed_list(scenario, seeds), &names, runs.into_iter().map(|r| r.1)))
}

/// The seeds `braid compare --seeds N` runs: the scenario's seed and the `N − 1` after it.
pub fn seed_list(scenario: &Scenario, seeds: u32) -> Vec<u64> {
    (0..u64::from(seeds)).map(|i| scenario.seed + i).collect()
}

/// Runs the (profile, seed) runs whose index `keep` accepts, index = profile × seeds +
/// seed's position (the order of the table), `batch.jobs` at a time; with `out`, writes
/// each run's CSV (and PNG) there. Returns (index, report) in index order, so the output
/// is the same for any `jobs` and for any split of the indices.
#[allow(clippy::too_many_arguments)]
pub fn simulate_runs(
    scenario: &Scenario,
    profiles: &[Profile],
    seeds: u32,
    path: Option<String>,
    out: Option<&PathBuf>,
    power: &PowerModels,
    trace: &braid_sim::TraceHooks,
    batch: super::parallel::Batch,
    keep: impl Fn(usize) -> bool,
) -> anyhow::Result<Vec<(usize, SessionReport)>> {
    let seeds = seed_list(scenario, seeds);
    let runs: Vec<(usize, usize, u64)> = (0..profiles.len())
        .flat_map(|i| seeds.iter().map(move |&s| (i, s)))
        .enumerate()
        .filter(|(index, _)| keep(*index))
        .map(|(index, (i, s))| (index, i, s))
        .collect();
    let bar = indicatif::ProgressBar::new(runs.len() as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} runs  {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    // Every (profile, seed) is an independent run: run them `jobs` at a time, results in
    // (profile, seed) order.
    let reports = super::parallel::map(batch.jobs, &runs, |&(index, i, seed)| {
        let p = &profiles[i];
        let opts = RunOptions {
            seed: Some(seed),
            path: path.clone(),
            power: power.clone(),
            trace: trace.clone(),
            protect: batch.protect,
            ..RunOptions::default()
        };
        let outcome = super::simulate_traced(scenario, p, &opts)
            .with_context(|| format!("profile {} seed {seed}", p.name))?;
        let result = outcome.result;
        if let Some(dir) = out {
            let csv = dir.join(format!("{}-seed{seed}.csv", p.name));
            std::fs::write(&csv, result.series.to_csv())
                .with_context(|| format!("writing {}", csv.display()))?;
            if crate::session::plot::font_available() {
                let png = dir.join(format!("{}-seed{seed}.png", p.name));
                let title = format!("{} / {} / seed {seed}", scenario.name, p.name);
                crate::session::plot::plot_run(
                    &png,
                    &title,
                    &result.series,
                    outcome.trace.as_ref(),
                )?;
            }
        }
        if let Some(stop) = &result.stopped {
            return Err(anyhow::anyhow!("{stop}"))
                .with_context(|| format!("profile {} seed {seed}", p.name));
        }
        bar.set_message(format!("{} seed {seed}", p.name));
        bar.inc(1);
        Ok((index, result.report))
    });
    bar.finish_and_clear();
    reports
}

/// The comparison of `profiles` over `seeds` from its reports, in (profile, seed) order.
pub fn summarize(
    scenario: &str,
    seeds: Vec<u64>,
    profiles: &[String],
    reports: impl IntoIterator<Item = SessionReport>,
) -> Comparison {
    let mut reports = reports.into_iter();
    let mut summaries = Vec::new();
    for p in profiles {
        let runs: Vec<_> = reports.by_ref().take(seeds.len()).collect();
        let (mean, sd) = statistics(&runs);
        summaries.push(ProfileSummary { profile: p.clone(), mean, sd, runs });
    }
    Comparison { scenario: scenario.to_string(), seeds, profiles: summaries }
}

/// What a simulated comparison writes besides the runs' CSVs and PNGs: `compare.json`
/// and the throughput-vs-delay scatter (`braid merge` writes the same).
pub fn write_outputs(dir: &Path, c: &Comparison) -> anyhow::Result<()> {
    {
        write_json(&dir.join("compare.json"), c, false)?;
        if crate::session::plot::font_available() {
            let points: Vec<(String, f64, f64)> = c
                .profiles
                .iter()
                .map(|p| {
                    let g = |k: &str| p.mean.get(k).copied().unwrap_or(0.0);
                    (p.profile.clone(), g("goodput_bps") / 1e6, g("delay_ms.p95"))
                })
                .collect();
            crate::session::plot::plot_scatter(&dir.join("scatter.png"), &c.scenario, &points)?;
        } else {
            eprintln!("note: PNG plots skipped: no TrueType font (install fonts-dejavu-core)");
        }
    }
    Ok(())
}

/// The text table users read.
pub fn table(c: &Comparison) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let _ = writeln!(s, "scenario {}  seeds {:?}", c.scenario, c.seeds);
    let _ = writeln!(
        s,
        "{:<18} {:>9} {:>9} {:>7} {:>9} {:>9} {:>7} {:>5} {:>9} {:>11}",
        "profile",
        "Mbit/s",
        "p95 ms",
        "stalls",
        "start s",
        "PSNR dB",
        "SD",
        "MOS",
        "energy J",
        "Mbit/J"
    );
    for p in &c.profiles {
        let g = |k: &str| p.mean.get(k).copied();
        let f = |v: Option<f64>, scale: f64, prec: usize| {
            v.map_or_else(|| "-".to_string(), |x| format!("{:.*}", prec, x * scale))
        };
        let _ = writeln!(
            s,
            "{:<18} {:>9} {:>9} {:>7} {:>9} {:>9} {:>7} {:>5} {:>9} {:>11}",
            p.profile,
            f(g("goodput_bps"), 1e-6, 3),
            f(g("delay_ms.p95"), 1.0, 1),
            f(g("stream.stalls"), 1.0, 2),
            f(g("stream.startup_delay_s"), 1.0, 2),
            f(g("stream.psnr_avg_db"), 1.0, 2),
            f(g("stream.psnr_sd_db"), 1.0, 2),
            f(g("stream.mos"), 1.0, 1),
            f(g("energy.total_j"), 1.0, 2),
            f(g("energy.efficiency_bits_per_j"), 1e-6, 3),
        );
    }
    s
}

/// The clip a real-time comparison streams, with its reference decode.
pub struct RealtimeMedia {
    clip: Arc<braid_media::Clip>,
    /// The clip's name in reports.
    pub name: String,
    reference: Arc<Vec<braid_media::quality::Frame>>,
    loop_clip: bool,
    buffer_s: f64,
    transport_buffer_s: Option<f64>,
    idle_timeout: Option<Duration>,
    /// The clients' radio parameters per role.
    pub power: PowerModels,
}

impl RealtimeMedia {
    /// The clip `scenario`'s stream workload names, decoded.
    pub fn load(scenario: &Scenario) -> anyhow::Result<RealtimeMedia> {
        let WorkloadKind::Stream(st) = &scenario.workload.kind else {
            bail!(
                "a real-time comparison plays a clip: scenario \"{}\" has no stream workload",
                scenario.name
            );
        };
        let StreamSource::Clip(path) = &st.source else {
            bail!(
                "a real-time comparison plays a clip: scenario \"{}\" streams synthetic CBR media",
                scenario.name
            );
        };
        if !path.is_file() {
            bail!("the scenario's clip {} does not exist", path.display());
        }
        let clip = realtime::load_clip(path)?;
        let (reference, _) =
            ffmpeg_decode_clip(&clip).with_context(|| format!("decoding {}", path.display()))?;
        Ok(RealtimeMedia {
            clip,
            name: path.display().to_string(),
            reference: Arc::new(reference),
            loop_clip: st.loop_clip,
            buffer_s: st.buffer_s.unwrap_or(30.0),
            transport_buffer_s: st.transport_buffer_s,
            idle_timeout: scenario.idle_timeout,
            power: PowerModels::default(),
        })
    }

    /// The download-ahead the scenario gives (`max_buffer_s`), seconds of media.
    pub fn max_buffer_s(&self) -> Option<f64> {
        self.transport_buffer_s
    }

    /// The idle timeout the scenario's client announces (`idle_timeout_s`).
    pub fn idle_timeout(&self) -> Option<Duration> {
        self.idle_timeout
    }

    /// The clip.
    pub fn clip(&self) -> Arc<braid_media::Clip> {
        Arc::clone(&self.clip)
    }

    /// Its decoded frames.
    pub fn reference(&self) -> Arc<Vec<braid_media::quality::Frame>> {
        Arc::clone(&self.reference)
    }

    /// How long the server repeats the clip in a session of `duration` (`None`: once): the
    /// session, 5 s, and the download-ahead, so the server still has media to send ahead
    /// at the session's end, as in every front end.
    pub fn loop_for(&self, duration: Duration) -> Option<Duration> {
        self.loop_clip.then_some(
            duration + Duration::from_secs(5) + super::ahead_of_playback(self.transport_buffer_s),
        )
    }

    /// The client's buffer, media seconds.
    pub fn buffer_s(&self) -> f64 {
        self.buffer_s
    }

    /// One contender's in-process session over `scenario` (with its seed).
    pub fn session(&self, scenario: &Scenario, contender: &Contender) -> InProcess {
        InProcess {
            scenario: scenario.clone(),
            profile: contender.profile(),
            noq: contender.is_noq(),
            clip: Arc::clone(&self.clip),
            reference: Arc::clone(&self.reference),
            clip_name: self.name.clone(),
            loop_for: self.loop_for(scenario.duration),
            buffer_s: self.buffer_s,
            transport_buffer_bytes: super::stream_buffer_bytes(&self.clip, self.transport_buffer_s),
            duration: scenario.duration,
            booth_loop: false,
            keep_history: false,
            power: self.power.clone(),
        }
    }

    /// One pane session per profile over `scenario`, all set up before any starts; then
    /// they start at once. Also one command sender per session, for the network controls.
    pub fn pane_sessions(
        &self,
        scenario: &Scenario,
        profiles: &[Contender],
    ) -> (Vec<PaneSession>, Vec<Sender<NetCommand>>) {
        let gate = Arc::new(tokio::sync::Barrier::new(profiles.len()));
        let mut sessions = Vec::new();
        let mut commands = Vec::new();
        for contender in profiles {
            let (cmd_tx, cmd_rx) = std::sync::mpsc::channel();
            commands.push(cmd_tx);
            let session = self.session(scenario, contender);
            let gate = Arc::clone(&gate);
            sessions.push(PaneSession::new(contender.name(), move |tx, wake| async move {
                gate.wait().await;
                session.run(tx, wake, Some(cmd_rx)).await
            }));
        }
        (sessions, commands)
    }
}

/// The default export directory: `braid-compare-<scenario>` in the current directory.
pub fn default_out_dir(scenario: &str) -> PathBuf {
    let name: String = scenario
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' })
        .collect();
    PathBuf::from(format!("braid-compare-{name}"))
}

/// A file-name-safe version of a pane title or path name (`pane` when empty).
fn file_stem(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' })
        .collect();
    if s.is_empty() { "pane".into() } else { s }
}

/// The comparison of the sessions a window ran (one run per profile, `scenario`'s seed)
/// from their outcomes (`None`: the window was closed first), and how many had not ended.
/// `None` when none ended; an error when one failed.
pub fn from_window(
    scenario: &Scenario,
    profiles: &[Contender],
    outcomes: Vec<Option<anyhow::Result<PlayOutcome>>>,
) -> anyhow::Result<(Option<Comparison>, usize)> {
    let label = ReportLabel::for_scenario(scenario);
    let mut summaries = Vec::new();
    let mut unfinished = 0;
    for (profile, o) in profiles.iter().zip(outcomes) {
        match o {
            Some(Ok(o)) => {
                let name = profile.name();
                let o = o.finished().with_context(|| format!("profile {name}"))?;
                let runs = vec![report::of_outcome(&label, &name, &o)];
                let (mean, sd) = statistics(&runs);
                summaries.push(ProfileSummary { profile: name, mean, sd, runs });
            }
            Some(Err(e)) => return Err(e.context(format!("profile {}", profile.name()))),
            None => unfinished += 1,
        }
    }
    let comparison = (!summaries.is_empty()).then(|| Comparison {
        scenario: scenario.name.clone(),
        seeds: vec![scenario.seed],
        profiles: summaries,
    });
    Ok((comparison, unfinished))
}

/// Runs every profile on every seed in real time: per seed, the profiles' sessions at
/// once, each over its own in-process server and emulated paths. With `out`, each run's
/// live statistics go to `out/<profile>-seed<N>.csv` ([`history_csv`]).
pub fn realtime(
    rt: &tokio::runtime::Runtime,
    scenario: &Scenario,
    profiles: &[Contender],
    seeds: u32,
    media: &RealtimeMedia,
    out: Option<&Path>,
) -> anyhow::Result<Comparison> {
    let seeds: Vec<u64> = (0..u64::from(seeds)).map(|i| scenario.seed + i).collect();
    let mut runs: Vec<Vec<SessionReport>> = vec![Vec::new(); profiles.len()];
    for &seed in &seeds {
        let scenario = Scenario { seed, ..scenario.clone() };
        println!(
            "seed {seed}: {} sessions at once, {:.0} s",
            profiles.len(),
            scenario.duration.as_secs_f64()
        );
        let gate = Arc::new(tokio::sync::Barrier::new(profiles.len()));
        let mut tasks = Vec::new();
        for profile in profiles {
            let (tx, rx) = std::sync::mpsc::channel();
            // Keep the live statistics for the CSV; pictures are dropped.
            let collect = std::thread::spawn(move || {
                rx.into_iter()
                    .filter_map(|u| match u {
                        PaneUpdate::Stats(s) => Some(s),
                        _ => None,
                    })
                    .collect::<Vec<LiveStats>>()
            });
            let session = media.session(&scenario, profile);
            let gate = Arc::clone(&gate);
            let task = rt.spawn(async move {
                gate.wait().await;
                session.run(tx, Arc::new(|| {}), None).await
            });
            tasks.push((profile, task, collect));
        }
        let label = ReportLabel::for_scenario(&scenario);
        for (k, (profile, task, collect)) in tasks.into_iter().enumerate() {
            let outcome = rt
                .block_on(task)
                .map_err(|e| anyhow::anyhow!("the session task failed: {e}"))?
                .and_then(PlayOutcome::finished)
                .with_context(|| format!("profile {} seed {seed}", profile.name()))?;
            let history = collect.join().unwrap_or_default();
            if let Some(dir) = out {
                let csv = dir.join(format!("{}-seed{seed}.csv", profile.name()));
                std::fs::write(&csv, history_csv(&history))
                    .with_context(|| format!("writing {}", csv.display()))?;
            }
            if let Some(r) = runs.get_mut(k) {
                r.push(report::of_outcome(&label, &profile.name(), &outcome));
            }
        }
    }
    let profiles = profiles
        .iter()
        .zip(runs)
        .map(|(p, runs)| {
            let (mean, sd) = statistics(&runs);
            ProfileSummary { profile: p.name(), mean, sd, runs }
        })
        .collect();
    Ok(Comparison { scenario: scenario.name.clone(), seeds, profiles })
}

/// Writes `c` to `path` as `compare.json`. A real-time comparison's carries
/// `"realtime": true` (and, like the window's export, has its keys sorted).
pub fn write_json(path: &Path, c: &Comparison, realtime: bool) -> anyhow::Result<()> {
    let text = if realtime {
        let mut json = serde_json::to_value(c).context("serialising the comparison")?;
        if let Some(obj) = json.as_object_mut() {
            obj.insert("realtime".into(), Value::Bool(true));
        }
        serde_json::to_string_pretty(&json)?
    } else {
        serde_json::to_string_pretty(c)?
    };
    std::fs::write(path, text + "\n").with_context(|| format!("writing {}", path.display()))
}

/// What the ranking of a real-time comparison looks at, per pane.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Score {
    /// Rebuffering events.
    pub stalls: u64,
    /// Their total duration, s.
    pub stall_time_s: f64,
    /// Frames lost.
    pub frames_lost: u64,
    /// Measured average PSNR, dB (none without a reference).
    pub psnr_db: Option<f64>,
    /// Radio energy, J (none until the energy model reports it).
    pub energy_j: Option<f64>,
}

impl Score {
    /// From live statistics.
    pub fn from_live(s: &LiveStats) -> Score {
        Score {
            stalls: u64::from(s.stalls),
            stall_time_s: s.stall_time_s,
            frames_lost: s.frames_lost,
            psnr_db: s.psnr_avg_db,
            energy_j: (s.energy_j > 0.0).then_some(s.energy_j),
        }
    }

    /// From a finished session's report.
    pub fn from_report(r: &SessionReport) -> Score {
        let st = r.stream.clone().unwrap_or_default();
        Score {
            stalls: st.stalls,
            stall_time_s: st.stall_time_s,
            frames_lost: st.frames_lost,
            psnr_db: (st.mos > 0).then_some(st.psnr_avg_db),
            energy_j: r.energy.as_ref().map(|e| e.total_j).filter(|&j| j > 0.0),
        }
    }
}

/// `a` against `b`, better first: fewer stalls, less stall time, fewer lost frames, higher
/// PSNR, then less energy. A missing PSNR or energy ranks after a present one. A total
/// order (NaN sorts as `f64::total_cmp` puts it).
pub fn compare_scores(a: &Score, b: &Score) -> Ordering {
    let some_first = |x: Option<f64>, y: Option<f64>, higher_better: bool| match (x, y) {
        (Some(x), Some(y)) if higher_better => y.total_cmp(&x),
        (Some(x), Some(y)) => x.total_cmp(&y),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => Ordering::Equal,
    };
    a.stalls
        .cmp(&b.stalls)
        .then(a.stall_time_s.total_cmp(&b.stall_time_s))
        .then(a.frames_lost.cmp(&b.frames_lost))
        .then(some_first(a.psnr_db, b.psnr_db, true))
        .then(some_first(a.energy_j, b.energy_j, false))
}

/// Indices, best first (ties keep the given order).
pub fn rank(scores: &[Score]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..scores.len()).collect();
    order.sort_by(|&a, &b| compare_scores(&scores[a], &scores[b]));
    order
}

/// What a real-time comparison in a window is about, and where its export goes.
#[derive(Clone, Debug, PartialEq)]
pub struct LiveComparison {
    /// Scenario name (for the report).
    pub scenario: String,
    /// The seed every pane's emulator and connection used.
    pub seed: u64,
    /// The clip played (for the report).
    pub clip: String,
    /// The scenario's paths: (name, role), in path order.
    pub paths: Vec<(String, String)>,
    /// The scenario's battery capacity, J (for the residual battery).
    pub battery_j: Option<f64>,
    /// Where the export writes.
    pub out_dir: PathBuf,
}

impl LiveComparison {
    /// `scenario` playing `clip`, exported to `out_dir`.
    pub fn new(scenario: &Scenario, clip: &str, out_dir: PathBuf) -> LiveComparison {
        LiveComparison {
            scenario: scenario.name.clone(),
            seed: scenario.seed,
            clip: clip.to_string(),
            paths: scenario.paths.iter().map(|p| (p.name.clone(), p.role.to_string())).collect(),
            battery_j: scenario.workload.battery_j,
            out_dir,
        }
    }

    fn label(&self) -> ReportLabel {
        ReportLabel { scenario: self.scenario.clone(), seed: self.seed, battery_j: self.battery_j }
    }
}

/// One pane of a real-time comparison, as far as it got.
#[derive(Clone, Copy, Debug)]
pub struct PaneRun<'a> {
    /// Its title (the profile).
    pub title: &'a str,
    /// Its session's report, once it ended.
    pub report: Option<&'a SessionReport>,
    /// Its statistics so far, oldest first.
    pub history: &'a [LiveStats],
    /// The latest.
    pub latest: &'a LiveStats,
}

impl PaneRun<'_> {
    /// Its score: from its report once the session ended, else from its live statistics.
    pub fn score(&self) -> Score {
        match self.report {
            Some(r) => Score::from_report(r),
            None => Score::from_live(self.latest),
        }
    }
}

/// Writes the comparison to `c.out_dir`: `compare.json` (as `braid compare --out`, one
/// run per profile, plus `"realtime": true`, the `"ranking"`, each profile's `"rank"` and
/// `"complete"`; a pane still playing is a [`report::snapshot`]), `summary.csv` (one row
/// per pane, best first) and `<profile>-live.csv` (each pane's statistics over time).
/// Returns the files written.
pub fn export(c: &LiveComparison, panes: &[PaneRun<'_>]) -> anyhow::Result<Vec<PathBuf>> {
    let dir = &c.out_dir;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let scores: Vec<Score> = panes.iter().map(PaneRun::score).collect();
    let order = rank(&scores);
    let mut place = vec![0usize; panes.len()];
    for (p, &i) in order.iter().enumerate() {
        place[i] = p;
    }
    let label = c.label();
    let mut summaries = Vec::new();
    let mut complete = Vec::new();
    for pane in panes {
        let (report, done) = match pane.report {
            Some(r) => (r.clone(), true),
            None => (
                report::snapshot(&label, pane.title, &c.clip, &c.paths, pane.history, pane.latest),
                false,
            ),
        };
        let runs = vec![report];
        let (mean, sd) = statistics(&runs);
        summaries.push(ProfileSummary { profile: pane.title.to_string(), mean, sd, runs });
        complete.push(done);
    }
    let comparison =
        Comparison { scenario: c.scenario.clone(), seeds: vec![c.seed], profiles: summaries };
    let mut json = serde_json::to_value(&comparison).context("serialising the comparison")?;
    if let Some(obj) = json.as_object_mut() {
        obj.insert("realtime".into(), Value::Bool(true));
        obj.insert(
            "ranking".into(),
            order.iter().map(|&i| Value::String(panes[i].title.to_string())).collect(),
        );
    }
    if let Some(profiles) = json.get_mut("profiles").and_then(|p| p.as_array_mut()) {
        for (i, p) in profiles.iter_mut().enumerate() {
            if let Some(obj) = p.as_object_mut() {
                obj.insert("rank".into(), serde_json::json!(place[i] + 1));
                obj.insert("complete".into(), serde_json::json!(complete[i]));
            }
        }
    }
    let mut written = Vec::new();
    let path = dir.join("compare.json");
    write(
        &path,
        serde_json::to_string_pretty(&json).context("serialising the comparison")? + "\n",
    )?;
    written.push(path);

    let mut csv = String::from(
        "rank,profile,complete,stalls,stall_time_s,frames_lost,psnr_avg_db,energy_j,goodput_bps,startup_delay_s\n",
    );
    for (p, &i) in order.iter().enumerate() {
        let m = &comparison.profiles[i].mean;
        let g = |k: &str| m.get(k).copied().unwrap_or(0.0);
        let s = &scores[i];
        csv.push_str(&format!(
            "{},{},{},{},{:.3},{},{},{},{:.0},{:.3}\n",
            p + 1,
            panes[i].title,
            complete[i],
            s.stalls,
            s.stall_time_s,
            s.frames_lost,
            s.psnr_db.map_or(String::new(), |v| format!("{v:.3}")),
            s.energy_j.map_or(String::new(), |v| format!("{v:.3}")),
            g("goodput_bps"),
            g("stream.startup_delay_s"),
        ));
    }
    let path = dir.join("summary.csv");
    write(&path, csv)?;
    written.push(path);

    let mut used = BTreeSet::new();
    for (i, pane) in panes.iter().enumerate() {
        let mut stem = file_stem(pane.title);
        if !used.insert(stem.clone()) {
            stem = format!("{stem}-{}", i + 1);
            used.insert(stem.clone());
        }
        let path = dir.join(format!("{stem}-live.csv"));
        write(&path, history_csv(pane.history))?;
        written.push(path);
    }
    Ok(written)
}

/// Statistics over time as CSV:
/// `t_s,buffer_s,psnr_db,stalls,stall_time_s,frames_shown,frames_lost,energy_j,<path>_bps…`
/// (path columns from the latest sample).
pub fn history_csv(history: &[LiveStats]) -> String {
    let names: Vec<String> = history
        .last()
        .map(|s| s.paths.iter().map(|p| p.name.clone()).collect())
        .unwrap_or_default();
    let mut s =
        String::from("t_s,buffer_s,psnr_db,stalls,stall_time_s,frames_shown,frames_lost,energy_j");
    for n in &names {
        s.push_str(&format!(",{}_bps", file_stem(n)));
    }
    s.push('\n');
    for st in history {
        s.push_str(&format!(
            "{:.3},{:.3},{},{},{:.3},{},{},{:.3}",
            st.t_s,
            st.buffer_s,
            st.psnr_now_db.map_or(String::new(), |v| format!("{v:.3}")),
            st.stalls,
            st.stall_time_s,
            st.frames_shown,
            st.frames_lost,
            st.energy_j
        ));
        for k in 0..names.len() {
            s.push_str(&format!(",{:.0}", st.paths.get(k).map_or(0.0, |p| p.bps)));
        }
        s.push('\n');
    }
    s
}

fn write(path: &Path, text: String) -> anyhow::Result<()> {
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_export_directory_is_named_after_the_scenario() {
        assert_eq!(default_out_dir("wifi lte/1"), PathBuf::from("braid-compare-wifi_lte_1"));
    }

    #[test]
    fn flatten_uses_dots_and_path_names() {
        let v: Value = serde_json::json!({"goodput_bps": 1.5, "stream": {"stalls": 2}, "paths": [{"name": "wifi", "rtt_ms": 3.0}], "scenario": "x"});
        let mut out = BTreeMap::new();
        flatten("", &v, &mut out);
        assert_eq!(out.get("goodput_bps"), Some(&1.5));
        assert_eq!(out.get("stream.stalls"), Some(&2.0));
        assert_eq!(out.get("paths.wifi.rtt_ms"), Some(&3.0));
        assert!(!out.contains_key("scenario"));
    }
}
