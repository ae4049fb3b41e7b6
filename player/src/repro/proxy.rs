//! `braid repro proxy`: the proxy paper's wireless table (w*, x*, y; end to end vs with the
//! proxy; TCP vs TFRC) in the simulator.
//!
//! As in the paper, the schedules come from **throughput curves**: a bulk TCP (or TFRC)
//! flow is simulated over the scenario and the bytes it received per 10 ms slot are the
//! capacity `c_t` of ALGORITHMS.md §7; `media::schedule` then gives the minimum start-up
//! delay w*, client buffer x* and proxy buffer y for the 64 kbit/s H.263 clip.
//! - end to end (`assets/scenarios/proxy-wireless-e2e.toml`): the flow crosses the shared
//!   backbone and the dedicated 64 kbit/s bearer; [`end_to_end`] on its curve;
//! - with the proxy (`assets/scenarios/proxy-wireless-proxy.toml`): the flow ends at the
//!   `[[node]]` (the paper treats the proxy's receiving side like a wired client), and the
//!   bearer after it is a dedicated constant rate; [`with_proxy`] on (curve, bearer rate).
//!
//! For TFRC the paper deducts 5 % from the curve for one retransmission and adds one RTT
//! to the start-up delay. Braid's `tfrc` is reliable and the curve counts the new payload
//! bytes the client received, so the retransmissions are already paid in it: we add the
//! RTT (the sender's smoothed RTT at the end; in-order delivery waits about one RTT for a
//! retransmission) but do not deduct the 5 % a second time.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use braid_media::schedule::{
    Capacity, DEFAULT_SLOT_US, PlayoutCurve, Schedule, end_to_end, with_proxy,
};
use braid_media::{Clip, OpenOptions};
use braid_transport::netem::Rate;
use braid_transport::profile;
use braid_transport::scenario::{Scenario, StreamSource, WorkloadKind};
use braid_transport::sim::{self, RunOptions};

use super::{Repro, ReproRow};

/// The paper's Table 2 (wired client: w* only) and Table 3 (wireless client): (row,
/// w* s, x* bytes, y bytes).
const PAPER: [(&str, f64, Option<f64>, Option<f64>); 6] = [
    ("tcp-wired", 4.1, None, None),
    ("tfrc-wired", 2.1, None, None),
    ("tcp", 16.5, Some(81_030.0), None),
    ("tfrc", 12.5, Some(63_833.0), None),
    ("tcp-proxy", 4.1, Some(26_924.0), Some(26_924.0)),
    ("tfrc-proxy", 2.2, Some(26_924.0), Some(32_602.0)),
];

/// Which case a row measures.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Case {
    /// The wired client: the flow ends where the proxy's receiving side sits (the
    /// backbone and a 64 kbit/s / 2 ms access link), end-to-end schedule.
    Wired,
    /// Server to wireless client through the bearer, end-to-end schedule.
    EndToEnd,
    /// With the proxy: the flow ends at the node, the bearer after it is a constant rate.
    Proxy,
}

fn scenario_file(name: &str) -> PathBuf {
    let local = Path::new("assets/scenarios").join(name);
    if local.exists() {
        return local;
    }
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../assets/scenarios").join(name)
}

/// Bytes per slot the main flow received on its first path (10 ms series).
fn capacity_curve(result: &sim::SimResult, scale: f64) -> Capacity {
    let dt = result.series.interval_s;
    let mut acc = 0.0f64;
    let mut given = 0u64;
    let mut bytes = Vec::with_capacity(result.series.rows.len());
    for row in &result.series.rows {
        acc += row.throughput_bps.first().copied().unwrap_or(0.0) * dt / 8.0 * scale;
        let total = acc.floor() as u64;
        bytes.push(total.saturating_sub(given));
        given = total;
    }
    Capacity { bytes }
}

/// The scenario with a bulk workload (what the throughput curves are measured with).
fn bulk(scenario: &Scenario) -> Scenario {
    let mut s = scenario.clone();
    s.workload.kind = WorkloadKind::Bulk { bytes: None };
    s
}

struct Measured {
    schedule: Schedule,
    loss: f64,
}

fn measure(
    scenario: &Scenario,
    profile_name: &str,
    seed: u64,
    d: &PlayoutCurve,
    case: Case,
    protect: bool,
) -> anyhow::Result<Measured> {
    let proxied = case != Case::EndToEnd;
    let p = profile::lookup(profile_name)?;
    let mut sc = bulk(scenario);
    let mut wireless = None;
    if proxied {
        let Some(node) = sc.nodes.first().cloned() else { bail!("{}: no [[node]]", sc.name) };
        let Some(path) = sc.paths.first_mut() else { bail!("{}: no path", sc.name) };
        let Some(pos) = path.down.iter().position(|&l| l == node.after) else {
            bail!("{}: the node is not on the first path", sc.name)
        };
        let Some(&after) = path.down.get(pos + 1) else {
            bail!("{}: nothing after the node", sc.name)
        };
        let rate = match sc.links.get(after).map(|l| &l.config.rate) {
            Some(Rate::Fixed(bps)) => *bps as f64,
            _ => bail!("{}: the link after the node needs a fixed rate", sc.name),
        };
        wireless = Some(Capacity::constant(rate, DEFAULT_SLOT_US, 1));
        // The leg ends at the node: its data crosses the links up to the node, and its
        // ACKs return from the node, so they skip the delay of the links after it (the
        // up chain models the whole client → server return path).
        let removed: std::time::Duration = path.down[pos + 1..]
            .iter()
            .filter_map(|&l| sc.links.get(l))
            .map(|l| l.config.delay)
            .sum();
        path.down.truncate(pos + 1);
        let mut left = removed;
        for &l in &path.up {
            let Some(link) = sc.links.get_mut(l) else { continue };
            let cut = link.config.delay.min(left);
            link.config.delay -= cut;
            left -= cut;
        }
        sc.nodes.clear();
    }
    let opts = RunOptions {
        seed: Some(seed),
        protect,
        series_interval: std::time::Duration::from_micros(DEFAULT_SLOT_US as u64),
        ..RunOptions::default()
    };
    let r = sim::run_detailed(&sc, &p, &opts)
        .with_context(|| format!("{} {profile_name} seed {seed}", sc.name))?;
    let tfrc = profile_name == "tfrc";
    let cap = capacity_curve(&r, 1.0);
    let mut s = match (case, wireless) {
        (Case::Proxy, Some(w)) => with_proxy(d, &cap, &w)?,
        _ => end_to_end(d, &cap)?,
    };
    if tfrc {
        s.startup_delay_s += r.report.paths.first().map_or(0.0, |p| p.rtt_ms / 1000.0);
    }
    let backbone = r.links.first().map(|l| &l.counters);
    let loss = backbone
        .map_or(0.0, |c| (c.dropped_queue + c.dropped_loss) as f64 / c.enqueued.max(1) as f64);
    Ok(Measured { schedule: s, loss })
}

fn mean_sd(v: &[f64]) -> (f64, f64) {
    let n = v.len().max(1) as f64;
    let m = v.iter().sum::<f64>() / n;
    (m, (v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / n).sqrt())
}

/// Runs the reproduction with `seeds` seeds; writes repro.json into `out` when given.
pub fn run(
    seeds: u32,
    out: Option<&Path>,
    batch: crate::session::parallel::Batch,
) -> anyhow::Result<()> {
    let (repro, loss) = reproduce(seeds.max(1), batch)?;
    print!("{}", repro.table());
    println!(
        "backbone loss (queue + random), mean over runs: {:.1} % (the paper: 5 %)",
        loss * 100.0
    );
    println!(
        "rules: throughput curves of bulk flows (10 ms slots) into the paper's schedules (late schedule end to end; early/late with the proxy, the bearer a constant rate after the node); tfrc: +1 RTT, no 5 % deduction (reliable: its curve already pays the retransmissions); the proxy leg's ACKs return from the node (RTT ~154 ms); wired = the flow ending at the node, end-to-end schedule"
    );
    if let Some(dir) = out {
        repro.write(dir)?;
    }
    Ok(())
}

/// The rows, and the mean backbone loss rate seen.
pub fn reproduce(
    seeds: u32,
    batch: crate::session::parallel::Batch,
) -> anyhow::Result<(Repro, f64)> {
    let e2e = Scenario::load(&scenario_file("proxy-wireless-e2e.toml"))?;
    let px = Scenario::load(&scenario_file("proxy-wireless-proxy.toml"))?;
    let clip_path = match &e2e.workload.kind {
        WorkloadKind::Stream(st) => match &st.source {
            StreamSource::Clip(p) => p.clone(),
            StreamSource::Cbr { .. } => bail!("{}: needs a clip", e2e.name),
        },
        WorkloadKind::Bulk { .. } => bail!("{}: needs a clip stream", e2e.name),
    };
    let clip = Clip::open(&clip_path, &OpenOptions::default())
        .with_context(|| format!("opening {}", clip_path.display()))?;
    let units: Vec<(i64, u64)> =
        clip.units.iter().map(|u| (u.dts_us, u.data.len() as u64)).collect();
    let d =
        PlayoutCurve::from_units(&units, (1e6 / clip.info.fps).round() as i64, DEFAULT_SLOT_US)?;
    let seed_list: Vec<u64> = (0..u64::from(seeds)).map(|i| e2e.seed + i).collect();
    let mut rows = Vec::new();
    let mut losses = Vec::new();
    let mut base_w = std::collections::BTreeMap::new();
    let split =
        |name: &'static str| match (name.strip_suffix("-proxy"), name.strip_suffix("-wired")) {
            (Some(p), _) => (p, Case::Proxy),
            (_, Some(p)) => (p, Case::Wired),
            _ => (name, Case::EndToEnd),
        };
    let list: Vec<(&'static str, u64)> =
        PAPER.iter().flat_map(|r| seed_list.iter().map(move |&s| (r.0, s))).collect();
    let mut measured = crate::session::parallel::map(batch.jobs, &list, |&(name, seed)| {
        let (profile_name, case) = split(name);
        let scenario = if case == Case::EndToEnd { &e2e } else { &px };
        measure(scenario, profile_name, seed, &d, case, batch.protect)
    })?
    .into_iter();
    for (name, paper_w, paper_x, paper_y) in PAPER {
        let (profile_name, case) = split(name);
        let proxied = case == Case::Proxy;
        let (mut w, mut x, mut y) = (Vec::new(), Vec::new(), Vec::new());
        for m in measured.by_ref().take(seed_list.len()) {
            w.push(m.schedule.startup_delay_s);
            x.push(m.schedule.client_buffer_bytes as f64);
            y.push(m.schedule.proxy_buffer_bytes.unwrap_or(0) as f64);
            losses.push(m.loss);
        }
        let (wm, wsd) = mean_sd(&w);
        let (xm, xsd) = mean_sd(&x);
        let (ratio_to, ours_ratio, paper_ratio) = if proxied {
            let base = base_w.get(profile_name).copied().unwrap_or(0.0);
            let paper_base = PAPER.iter().find(|r| r.0 == profile_name).map_or(1.0, |r| r.1);
            (
                Some(profile_name.to_string()),
                (base > 0.0).then(|| wm / base),
                Some(paper_w / paper_base),
            )
        } else {
            if case == Case::EndToEnd {
                base_w.insert(profile_name, wm);
            }
            (None, None, None)
        };
        rows.push(ReproRow {
            metric: "startup_delay_s".into(),
            profile: name.into(),
            ours: wm,
            ours_sd: wsd,
            paper: Some(paper_w),
            ratio_to,
            ours_ratio,
            paper_ratio,
        });
        rows.push(ReproRow {
            metric: "client_buffer_bytes".into(),
            profile: name.into(),
            ours: xm,
            ours_sd: xsd,
            paper: paper_x,
            ratio_to: None,
            ours_ratio: None,
            paper_ratio: None,
        });
        if proxied {
            let (ym, ysd) = mean_sd(&y);
            rows.push(ReproRow {
                metric: "proxy_buffer_bytes".into(),
                profile: name.into(),
                ours: ym,
                ours_sd: ysd,
                paper: paper_y,
                ratio_to: None,
                ours_ratio: None,
                paper_ratio: None,
            });
        }
    }
    let (loss, _) = mean_sd(&losses);
    Ok((Repro { name: "proxy".to_string(), seeds: seed_list, rows }, loss))
}
