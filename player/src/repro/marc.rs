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
    let mut repro = Repro::new("marc", seed_list, rows);
    repro.judge(&HEADLINES);
    Ok((repro, per_seed))
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
