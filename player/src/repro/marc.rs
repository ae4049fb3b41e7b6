//! `braid repro marc`: the MARC slides' user-perceived-quality experiment and their
//! TCP-friendliness claim, in the simulator.
//!
//! 1. `assets/scenarios/marc-44kBps-tcp-onoff.toml` (a 44 KB/s constant-rate stream, one
//!    long-lived TCP-like flow and one Pareto ON/OFF flow at a 1.5 Mbit/s / 50 ms
//!    bottleneck) with `tcp`, `tfrc` and `marc`: rebuffering events, stall time and lost
//!    frames per profile. The slides plot the distribution of rebuffering events and find
//!    MARC fewest, then TFRC, then TCP; they give no numbers, so `paper` is null and the
//!    ordering is checked and printed.
//! 2. TCP-friendliness: a stream asking for more than its fair share (1.6 Mbit/s) against
//!    two long-lived TCP-like flows at a 2 Mbit/s / 20 ms bottleneck: its goodput over the
//!    TCP-like flows' mean throughput (`friendliness.share_ratio`). The slides give no
//!    number: their "MARC is TCP-Friendly" plot draws MARC's and TFRC's sending rates
//!    against the fair share, and the `paper` figure 1.0 (a ratio ≤ 1, at or below the
//!    fair share) is our reading of that claim, marked `interpretation`.
//! 3. Reaction time to persistent congestion (the slides' four plots): a stream of 20 to
//!    80 KB/s with a fair share of 140 KB/s, 15 more TCP-like flows from the 50th second;
//!    how long MARC's allowed rate takes to fall to the stream's rate, against the times the
//!    slides mark, and TFRC's.

use std::path::Path;

use anyhow::Context as _;
use braid_netem::scenario::Scenario;
use braid_sim::RunOptions;
use braid_transport::profile;

use super::{Headline, Provenance, Repro, ReproRow};
use crate::session::compare::statistics;

/// The 44 KB/s scenario, embedded so the command runs from any directory.
const SCENARIO_44: &str = include_str!("../../../assets/scenarios/marc-44kBps-tcp-onoff.toml");

/// The friendliness setup: 2 Mbit/s / 20 ms, two long-lived TCP-like flows, a 1.6 Mbit/s
/// stream (fair share: a third of the link).
const FRIENDLINESS: &str = r#"
name = "marc-friendliness"
duration_s = 60
seed = 1
[[link]]
name = "bottleneck"
rate = "2mbit"
delay_ms = 20
[[path]]
name = "wired"
role = "wired"
down = { via = ["bottleneck"] }
up = { rate = "10mbit", delay_ms = 20 }
[[cross]]
link = "bottleneck"
kind = "reno"
count = 2
[workload]
kind = "stream"
cbr = { rate = "1600kbit", packet_bytes = 1000 }
"#;

/// The slides' "Reaction Time to Persistent Congestion" plots: RTT 80 ms, a fair share of
/// 140 KB/s before congestion at the 50th second, streams of 20, 40, 60 and 80 KB/s, and
/// MARC's self-clocked rate marked where it reaches the stream's rate (x = 52.44, 51.81,
/// 51.33 and 50.90 s, read from the plots; which of 51.81 and 52.44 belongs to 20 and which
/// to 40 KB/s the text extraction leaves open; we take the order in which a slower stream,
/// holding more tokens, holds longer). TFRC's rate "falls at once": no time is marked.
const REACTION_SLIDES: [(f64, f64); 4] = [(20.0, 2.44), (40.0, 1.81), (60.0, 1.33), (80.0, 0.90)];

/// When the persistent congestion starts, s.
const CONGESTION_AT_S: f64 = 50.0;
/// How long each reaction run lasts, s (skipped when `--duration` is shorter).
const REACTION_DURATION_S: f64 = 56.0;

/// The reaction setup for a stream of `kbps` KB/s: a 280 KB/s (2.24 Mbit/s) bottleneck
/// with 40 ms each way (RTT 80 ms) shared with one long-lived TCP-like flow (a fair share of
/// 140 KB/s), and from the 50th second on, 15 more (persistent congestion: a share of
/// 17.5 KB/s, below every stream's rate), until 56 s.
fn reaction_scenario(kbps: f64) -> String {
    format!(
        r#"
name = "marc-reaction-{kbps}kBps"
duration_s = {REACTION_DURATION_S}
seed = 1
[[link]]
name = "bottleneck"
rate = "2240kbit"
delay_ms = 40
[[path]]
name = "wired"
role = "wired"
down = {{ via = ["bottleneck"] }}
up = {{ rate = "10mbit", delay_ms = 40 }}
[[cross]]
link = "bottleneck"
kind = "reno"
count = 1
[[cross]]
link = "bottleneck"
kind = "reno"
count = 15
start_s = {CONGESTION_AT_S}
[workload]
kind = "stream"
cbr = {{ rate = "{bits}kbit", packet_bytes = 1000 }}
"#,
        bits = kbps * 8.0
    )
}

/// The sender's rate-control records of one run: (time s, allowed rate B/s).
#[derive(Clone, Default)]
struct RateLog(std::sync::Arc<std::sync::Mutex<Vec<(f64, f64)>>>);

impl braid_transport::trace::TraceSink for RateLog {
    fn event(
        &mut self,
        now: braid_transport::time::Instant,
        ev: &braid_transport::trace::TraceEvent,
    ) {
        if let braid_transport::trace::TraceEvent::RateControl { state, .. } = ev {
            let mut v = self.0.lock().unwrap_or_else(|e| e.into_inner());
            v.push((now.as_secs_f64(), state.allowed));
        }
    }
}

impl braid_sim::TraceFactory for RateLog {
    fn connection(
        &self,
        _profile: &str,
        _seed: u64,
        vantage: braid_transport::trace::Vantage,
    ) -> Option<Box<dyn braid_transport::trace::TraceSink>> {
        // The stream's sender is the server.
        (vantage == braid_transport::trace::Vantage::Server)
            .then(|| Box::new(self.clone()) as Box<dyn braid_transport::trace::TraceSink>)
    }

    fn capture(
        &self,
        _: &str,
        _: u64,
        _: &str,
        _: braid_transport::trace::Direction,
    ) -> Option<Box<dyn braid_transport::trace::CaptureSink>> {
        None
    }
}

/// From a run's rate records: the allowed rate last reported before the congestion (B/s)
/// and the time after it at which the allowed rate first fell to `rate` (B/s) or below
/// (`None`: never within the run).
fn reaction_of(records: &[(f64, f64)], rate: f64) -> (Option<f64>, Option<f64>) {
    let before = records.iter().rev().find(|(t, _)| *t < CONGESTION_AT_S).map(|r| r.1);
    let crossed = records
        .iter()
        .find(|(t, w)| *t >= CONGESTION_AT_S && *w <= rate)
        .map(|(t, _)| t - CONGESTION_AT_S);
    (before, crossed)
}

/// Our reading of the slides' "MARC is TCP-Friendly": at most the fair share (a share
/// ratio ≤ 1). Not a number from the slides.
const FAIR_SHARE_RATIO: f64 = 1.0;

/// The headline figures, each with a verdict: the slides' rebuffering order (fewest with
/// MARC, then TFRC, then TCP; an order without numbers) and TCP-friendliness (at most the
/// fair share, our reading).
const HEADLINES: [Headline; 4] = [
    Headline::order("stream.stalls", "marc", "tfrc"),
    Headline::order("stream.stalls", "tfrc", "tcp"),
    Headline::at_most("friendliness.share_ratio", "tfrc"),
    Headline::at_most("friendliness.share_ratio", "marc"),
];

/// The rebuffering profiles: the slides' three, then the like-for-like pairs (equal
/// reliability: `marc-reliable` against `tfrc`, `tfrc-deadline` against `marc`) and the
/// hold-rule ablation (`marc-sent-anchor`, the rule anchored at the rate sent).
const PROFILES: [&str; 6] =
    ["tcp", "tfrc", "marc", "marc-reliable", "tfrc-deadline", "marc-sent-anchor"];

/// Paired stall differences printed with their intervals: the slides' order, then the
/// like-for-like comparisons and the hold rule's ablation.
const PAIRS: [(&str, &str); 5] = [
    ("marc", "tfrc"),
    ("tfrc", "tcp"),
    ("marc-reliable", "tfrc"),
    ("marc", "tfrc-deadline"),
    ("marc", "marc-sent-anchor"),
];

fn mean_sd(v: &[f64]) -> (f64, f64) {
    let n = v.len().max(1) as f64;
    let m = v.iter().sum::<f64>() / n;
    let var = v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / n;
    (m, var.sqrt())
}

/// Runs the reproduction with `seeds` seeds (each run shortened to `duration` when
/// given); writes repro.json into `out` when given.
pub fn run(
    seeds: u32,
    out: Option<&Path>,
    duration: Option<std::time::Duration>,
    batch: crate::session::parallel::Batch,
) -> anyhow::Result<()> {
    let (repro, per_seed) = reproduce_with_stalls(seeds.max(1), duration, batch)?;
    print!("{}", repro.table());
    for line in order_intervals(&per_seed) {
        println!("{line}");
    }
    let stalls = |p: &str| {
        repro
            .rows
            .iter()
            .find(|r| r.metric == "stream.stalls" && r.profile == p)
            .map_or(f64::NAN, |r| r.ours)
    };
    let (tcp, tfrc, marc) = (stalls("tcp"), stalls("tfrc"), stalls("marc"));
    println!(
        "slides: rebuffering events fewest with MARC, then TFRC, then TCP; ours (mean per run): marc {marc:.2}, tfrc {tfrc:.2}, tcp {tcp:.2} -> {}",
        slides_verdict(&per_seed)
    );
    let ours = |metric: &str, p: &str| {
        repro.rows.iter().find(|r| r.metric == metric && r.profile == p).map(|r| r.ours)
    };
    for (kbps, slides) in REACTION_SLIDES {
        let metric = format!("reaction.s.{kbps:.0}");
        if let (Some(m), Some(t)) = (ours(&metric, "marc"), ours(&metric, "tfrc")) {
            println!(
                "slides: MARC's rate reaches a {kbps:.0} KB/s stream {slides:.2} s after the congestion (read from the plot), TFRC's at once; ours (mean per run): marc {m:.2} s, tfrc {t:.2} s"
            );
        }
    }
    if let Some(dir) = out {
        repro.write(dir)?;
        let path = dir.join("stalls-per-seed.csv");
        std::fs::write(&path, per_seed_csv(&repro.seeds, &per_seed))
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// Each rebuffering profile's stall events per seed: `seed,PROFILE,…`, one row per seed
/// (written next to repro.json as stalls-per-seed.csv, to pick the seeds to trace).
fn per_seed_csv(seeds: &[u64], per_seed: &[(&'static str, Vec<f64>)]) -> String {
    let mut s = String::from("seed");
    for (name, _) in per_seed {
        s.push(',');
        s.push_str(name);
    }
    s.push('\n');
    for (i, seed) in seeds.iter().enumerate() {
        s.push_str(&seed.to_string());
        for (_, v) in per_seed {
            s.push(',');
            s.push_str(&v.get(i).map_or(String::new(), |x| format!("{x}")));
        }
        s.push('\n');
    }
    s
}

/// Two-sided 95 % Student t quantile for `df` degrees of freedom (1.96 beyond 30).
fn t975(df: usize) -> f64 {
    const T: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042,
    ];
    df.checked_sub(1).and_then(|i| T.get(i)).copied().unwrap_or(1.96)
}

/// Mean and 95 % half-width (Student t over the sample SD) of `v`; half-width NaN for
/// fewer than two values.
fn mean_ci95(v: &[f64]) -> (f64, f64) {
    let (m, sd) = mean_sample_sd(v);
    let n = v.len();
    if n < 2 {
        return (m, f64::NAN);
    }
    (m, t975(n - 1) * sd / (n as f64).sqrt())
}

/// What [`order_intervals`] computes, printed above its lines.
const INTERVAL_METHOD: &str = "intervals: mean over the seeds +/- the half-width of a two-sided 95 % Student-t interval \
(sample SD, n - 1 degrees of freedom; 1.96 beyond 30); paired = the per-seed difference of two profiles \
(same seed); sd = the paired differences' sample SD; seeds differing = seeds whose \
stall counts differ; seeds needed = (1.96 x sd / mean)^2, the seeds at which this mean and sd would \
give an interval excluding 0";

/// Mean and sample SD (n − 1) of `v`; SD NaN for fewer than two values.
fn mean_sample_sd(v: &[f64]) -> (f64, f64) {
    let n = v.len();
    if n == 0 {
        return (f64::NAN, f64::NAN);
    }
    let m = v.iter().sum::<f64>() / n as f64;
    if n < 2 {
        return (m, f64::NAN);
    }
    (m, (v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt())
}

/// Seeds at which a paired mean difference `m` with sample SD `sd` would give a 95 %
/// interval excluding 0 (normal approximation: (1.96 · sd / m)², rounded up); `None` for
/// a zero mean or an SD that is not finite.
fn seeds_needed(m: f64, sd: f64) -> Option<u64> {
    (m != 0.0 && sd.is_finite()).then(|| (1.96 * sd / m.abs()).powi(2).ceil() as u64)
}

/// The paired per-seed differences `a − b`, when both profiles ran.
fn paired(per_seed: &[(&'static str, Vec<f64>)], a: &str, b: &str) -> Option<Vec<f64>> {
    let get = |p: &str| per_seed.iter().find(|(n, _)| *n == p).map(|(_, v)| v.as_slice());
    let (x, y) = (get(a)?, get(b)?);
    Some(x.iter().zip(y).map(|(x, y)| x - y).collect())
}

/// The slides' order (marc < tfrc < tcp) against ours: shown only when both paired steps'
/// 95 % intervals lie below 0; otherwise what the means say.
fn slides_verdict(per_seed: &[(&'static str, Vec<f64>)]) -> &'static str {
    let step = |a: &str, b: &str| paired(per_seed, a, b).map(|d| mean_ci95(&d));
    let (Some(s1), Some(s2)) = (step("marc", "tfrc"), step("tfrc", "tcp")) else {
        return "not measured";
    };
    if s1.0 + s1.1 < 0.0 && s2.0 + s2.1 < 0.0 {
        "same order, shown at 95 % (both paired intervals below 0)"
    } else if s1.0 == 0.0 && s2.0 == 0.0 {
        "no difference in the means at this number of seeds"
    } else if s1.0 <= 0.0 && s2.0 <= 0.0 {
        "same order of the means, not shown at 95 % (a paired interval contains 0)"
    } else {
        "different order of the means"
    }
}

/// The rebuffering order with 95 % intervals: how the intervals are computed, each
/// profile's mean stalls per run and its stall events, then the paired per-seed
/// differences (same seed, same cross traffic), each with whether its interval excludes
/// zero, its SD, how many seeds differ and how many seeds its mean and SD would need.
fn order_intervals(per_seed: &[(&'static str, Vec<f64>)]) -> Vec<String> {
    let mut out = vec![INTERVAL_METHOD.to_string()];
    for (name, v) in per_seed {
        let (m, h) = mean_ci95(v);
        let events = v.iter().sum::<f64>();
        out.push(if h.is_finite() {
            format!(
                "stalls per run, {name}: {m:.3} +/- {h:.3} (95 %, {} seeds; {events:.0} stall events)",
                v.len()
            )
        } else {
            format!("stalls per run, {name}: {m:.3} (one seed: no interval)")
        });
    }
    for (a, b) in PAIRS {
        let Some(d) = paired(per_seed, a, b) else { continue };
        let (m, h) = mean_ci95(&d);
        let verdict = if !h.is_finite() {
            "too few seeds for an interval"
        } else if m + h < 0.0 {
            "fewer, interval excludes 0"
        } else if m - h > 0.0 {
            "more, interval excludes 0"
        } else {
            "no difference shown (interval contains 0)"
        };
        out.push(if h.is_finite() {
            let (_, sd) = mean_sample_sd(&d);
            let differing = d.iter().filter(|&&x| x != 0.0).count();
            let needed = seeds_needed(m, sd).map_or_else(|| "-".to_string(), |n| n.to_string());
            format!(
                "paired stalls {a} - {b}: {m:.3} +/- {h:.3} (95 %, {} seeds): {a} {verdict}; sd {sd:.3}, seeds differing {differing}, seeds needed {needed}",
                d.len()
            )
        } else {
            format!("paired stalls {a} - {b}: {m:.3}: {verdict}")
        });
    }
    out
}

/// The rows (see the module docs), with each rebuffering profile's stalls per seed (in
/// seed order).
#[allow(clippy::type_complexity)]
pub fn reproduce_with_stalls(
    seeds: u32,
    duration: Option<std::time::Duration>,
    batch: crate::session::parallel::Batch,
) -> anyhow::Result<(Repro, Vec<(&'static str, Vec<f64>)>)> {
    let mut scenario = Scenario::parse(SCENARIO_44, "marc-44kBps-tcp-onoff.toml", Path::new("."))?;
    let mut fr = Scenario::parse(FRIENDLINESS, "marc-friendliness.toml", Path::new("."))?;
    if let Some(d) = duration {
        scenario.duration = scenario.duration.min(d);
        fr.duration = fr.duration.min(d);
    }
    let seed_list: Vec<u64> = (0..u64::from(seeds)).map(|i| scenario.seed + i).collect();
    let mut rows = Vec::new();
    let mut base: Option<std::collections::BTreeMap<String, f64>> = None;
    let list: Vec<(&str, u64)> =
        PROFILES.iter().flat_map(|&n| seed_list.iter().map(move |&s| (n, s))).collect();
    let mut reports = crate::session::parallel::map(batch.jobs, &list, |&(name, seed)| {
        let p = profile::lookup(name)?;
        let opts = RunOptions { seed: Some(seed), protect: batch.protect, ..RunOptions::default() };
        let r = crate::session::simulate(&scenario, &p, &opts)
            .with_context(|| format!("{name} seed {seed}"))?;
        Ok(r.report)
    })?
    .into_iter();
    let mut per_seed = Vec::new();
    for name in PROFILES {
        let runs: Vec<_> = reports.by_ref().take(seed_list.len()).collect();
        per_seed.push((
            name,
            runs.iter().map(|r| r.stream.as_ref().map_or(0.0, |s| s.stalls as f64)).collect(),
        ));
        let (mean, sd) = statistics(&runs);
        for metric in [
            "stream.stalls",
            "stream.stall_time_s",
            "stream.frames_lost",
            "stream.startup_delay_s",
            "goodput_bps",
        ] {
            let ours = mean.get(metric).copied().unwrap_or(0.0);
            let ours_ratio =
                base.as_ref().and_then(|b| b.get(metric)).filter(|&&b| b > 0.0).map(|b| ours / b);
            rows.push(ReproRow {
                metric: metric.to_string(),
                profile: name.to_string(),
                ours,
                ours_sd: sd.get(metric).copied().unwrap_or(0.0),
                paper: None,
                ratio_to: Some("tcp".to_string()),
                ours_ratio: if name == "tcp" {
                    Some(1.0).filter(|_| ours > 0.0)
                } else {
                    ours_ratio
                },
                paper_ratio: None,
                provenance: None,
            });
        }
        if base.is_none() {
            base = Some(mean);
        }
    }

    let friendly = ["tfrc", "marc"];
    let list: Vec<(&str, u64)> =
        friendly.iter().flat_map(|&n| seed_list.iter().map(move |&s| (n, s))).collect();
    let mut shares = crate::session::parallel::map(batch.jobs, &list, |&(name, seed)| {
        let p = profile::lookup(name)?;
        let opts = RunOptions { seed: Some(seed), protect: batch.protect, ..RunOptions::default() };
        let r = braid_sim::run_detailed(&fr, &p, &opts)
            .with_context(|| format!("{name} seed {seed}"))?;
        let reno = r.cross.first().map_or(0.0, |c| c.throughput_bps / f64::from(c.flows.max(1)));
        Ok((reno > 0.0).then(|| r.report.goodput_bps / reno))
    })?
    .into_iter();
    for name in friendly {
        let ratios: Vec<f64> = shares.by_ref().take(seed_list.len()).flatten().collect();
        let (m, sd) = mean_sd(&ratios);
        rows.push(ReproRow {
            metric: "friendliness.share_ratio".to_string(),
            profile: name.to_string(),
            ours: m,
            ours_sd: sd,
            paper: Some(FAIR_SHARE_RATIO),
            ratio_to: None,
            ours_ratio: None,
            paper_ratio: None,
            provenance: Some(Provenance::Interpretation),
        });
    }
    // The reaction runs need their 56 s (the congestion starts at the 50th).
    if duration.is_none_or(|d| d.as_secs_f64() >= REACTION_DURATION_S) {
        rows.extend(reaction_rows(&seed_list, batch)?);
    }
    let mut repro = Repro::new("marc", seed_list, rows);
    repro.judge(&HEADLINES);
    Ok((repro, per_seed))
}

/// The reaction-time experiment (see [`REACTION_SLIDES`]) for `marc` and `tfrc`, per
/// stream rate: `reaction.allowed_before_kBps.R` (the allowed rate last reported before the
/// congestion) and `reaction.s.R` (seconds from the congestion until the allowed rate first
/// fell to the stream's rate; a run where it never did counts as the rest of the run).
fn reaction_rows(
    seed_list: &[u64],
    batch: crate::session::parallel::Batch,
) -> anyhow::Result<Vec<ReproRow>> {
    let profiles = ["marc", "tfrc"];
    let mut list = Vec::new();
    for p in profiles {
        for (kbps, _) in REACTION_SLIDES {
            for &seed in seed_list {
                list.push((p, kbps, seed));
            }
        }
    }
    let runs = crate::session::parallel::map(batch.jobs, &list, |&(name, kbps, seed)| {
        let text = reaction_scenario(kbps);
        let scenario = Scenario::parse(&text, "marc-reaction.toml", Path::new("."))?;
        let p = profile::lookup(name)?;
        let log = RateLog::default();
        let opts = RunOptions {
            seed: Some(seed),
            protect: batch.protect,
            trace: braid_sim::TraceHooks(Some(std::sync::Arc::new(log.clone()))),
            ..RunOptions::default()
        };
        crate::session::simulate(&scenario, &p, &opts)
            .with_context(|| format!("{name} at {kbps} KB/s, seed {seed}"))?;
        let records = log.0.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let (before, crossed) = reaction_of(&records, kbps * 1000.0);
        let rest = scenario.duration.as_secs_f64() - CONGESTION_AT_S;
        Ok((before.unwrap_or(f64::NAN) / 1000.0, crossed.unwrap_or(rest)))
    })?;
    let mut rows = Vec::new();
    let mut it = runs.into_iter();
    for name in profiles {
        for (kbps, slides) in REACTION_SLIDES {
            let got: Vec<(f64, f64)> = it.by_ref().take(seed_list.len()).collect();
            // A run with no report before the congestion has no figure for it.
            let befores: Vec<f64> = got.iter().map(|g| g.0).filter(|v| v.is_finite()).collect();
            let (before, before_sd) = mean_sd(&befores);
            let (secs, secs_sd) = mean_sd(&got.iter().map(|g| g.1).collect::<Vec<_>>());
            let marc = name == "marc";
            rows.extend((!befores.is_empty()).then(|| ReproRow {
                metric: format!("reaction.allowed_before_kBps.{kbps:.0}"),
                profile: name.to_string(),
                ours: before,
                ours_sd: before_sd,
                paper: Some(140.0),
                ratio_to: None,
                ours_ratio: None,
                paper_ratio: None,
                provenance: Some(Provenance::Stated),
            }));
            rows.push(ReproRow {
                metric: format!("reaction.s.{kbps:.0}"),
                profile: name.to_string(),
                ours: secs,
                ours_sd: secs_sd,
                paper: marc.then_some(slides),
                ratio_to: None,
                ours_ratio: None,
                paper_ratio: None,
                provenance: marc.then_some(Provenance::ReadFromPlot),
            });
        }
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paired_intervals_say_whether_the_order_is_shown() {
        // marc one stall fewer than tfrc on every seed but one: the interval excludes 0.
        let per_seed = vec![
            ("tcp", vec![2.0, 1.0, 2.0, 3.0]),
            ("tfrc", vec![1.0, 1.0, 2.0, 1.0]),
            ("marc", vec![0.0, 0.0, 1.0, 0.0]),
        ];
        let lines = order_intervals(&per_seed);
        assert!(
            lines.iter().any(|l| l.contains("marc - tfrc: -1.000") && l.contains("excludes 0")),
            "{lines:?}"
        );
        // tfrc - tcp: -1, 0, 0, -2: mean -0.75, t(3) = 3.182, sd 0.957 → ±1.52: contains 0.
        assert!(
            lines.iter().any(|l| l.contains("tfrc - tcp") && l.contains("contains 0")),
            "{lines:?}"
        );
        let (m, h) = mean_ci95(&[1.0, 3.0]);
        assert_eq!(m, 2.0);
        assert!((h - 12.706 * 1.0).abs() < 1e-9, "{h}");
        assert!(mean_ci95(&[1.0]).1.is_nan());
    }

    #[test]
    fn the_reaction_is_the_first_report_after_the_congestion_at_or_below_the_rate() {
        let records = [(49.9, 140_000.0), (50.1, 90_000.0), (50.3, 45_000.0), (50.5, 38_000.0)];
        assert_eq!(reaction_of(&records, 40_000.0), (Some(140_000.0), Some(0.5)));
        // A dip before the congestion does not count; never reaching the rate is `None`.
        let dip = [(49.0, 10_000.0), (50.2, 60_000.0)];
        assert_eq!(reaction_of(&dip, 40_000.0), (Some(10_000.0), None));
        assert_eq!(reaction_of(&[], 40_000.0), (None, None));
        // Each scenario parses, with the stream at its rate.
        for (kbps, _) in REACTION_SLIDES {
            let text = reaction_scenario(kbps);
            Scenario::parse(&text, "r.toml", Path::new(".")).expect("a valid scenario");
        }
    }

    #[test]
    fn the_per_seed_file_has_a_row_per_seed_and_a_column_per_profile() {
        let per_seed = vec![("tcp", vec![2.0, 0.0]), ("marc", vec![1.0, 0.0])];
        assert_eq!(per_seed_csv(&[1, 2], &per_seed), "seed,tcp,marc\n1,2,1\n2,0,0\n");
    }

    #[test]
    fn the_lines_state_the_method_the_events_and_the_seeds_a_difference_needs() {
        let per_seed = vec![
            ("tcp", vec![2.0, 1.0, 2.0, 3.0]),
            ("tfrc", vec![1.0, 1.0, 2.0, 1.0]),
            ("marc", vec![0.0, 0.0, 1.0, 0.0]),
        ];
        let lines = order_intervals(&per_seed);
        assert!(lines[0].starts_with("intervals: ") && lines[0].contains("Student-t"), "{lines:?}");
        assert!(lines.iter().any(|l| l.contains("tcp: 2.000") && l.contains("8 stall events")));
        // tfrc - tcp: -1, 0, 0, -2: mean -0.75, sample sd 0.957, two seeds differ;
        // (1.96 · 0.957 / 0.75)² = 6.25 → 7 seeds.
        let l = lines.iter().find(|l| l.contains("tfrc - tcp")).unwrap();
        assert!(l.contains("sd 0.957") && l.contains("seeds differing 2"), "{l}");
        assert!(l.contains("seeds needed 7"), "{l}");
        assert_eq!(seeds_needed(0.0, 1.0), None);
        assert_eq!(seeds_needed(-0.5, 0.5), Some(4));
        // marc - tfrc excludes 0, tfrc - tcp does not: the means' order, not shown.
        assert!(slides_verdict(&per_seed).starts_with("same order of the means, not shown"));
        let shown = vec![
            ("tcp", vec![2.0, 2.0, 3.0, 2.0]),
            ("tfrc", vec![1.0, 1.0, 2.0, 1.0]),
            ("marc", vec![0.0, 0.0, 1.0, 0.0]),
        ];
        assert!(slides_verdict(&shown).starts_with("same order, shown"));
        let reversed =
            vec![("tcp", vec![0.0, 0.0]), ("tfrc", vec![1.0, 0.0]), ("marc", vec![0.0, 0.0])];
        assert_eq!(slides_verdict(&reversed), "different order of the means");
    }
}
