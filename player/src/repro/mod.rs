//! `braid repro NAME`: the published results Braid builds on, reproduced in the simulator,
//! with the paper's figures beside ours (`DIR/repro.json`, docs/REFERENCE.md).

pub mod marc;
pub mod mptcp_qe;
pub mod proxy;
pub mod sedpf;

use std::path::Path;

use anyhow::Context as _;

/// One row of repro.json: a metric of one profile, ours beside the paper's.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct ReproRow {
    /// The metric, as a flattened session-report key (e.g. `energy.total_j`).
    pub metric: String,
    /// The profile.
    pub profile: String,
    /// Our mean over the seeds.
    pub ours: f64,
    /// Our standard deviation over the seeds (divisor n, the seeds taken as the whole
    /// population).
    pub ours_sd: f64,
    /// The paper's absolute value, where it gives one.
    pub paper: Option<f64>,
    /// The baseline profile the ratios are taken against.
    pub ratio_to: Option<String>,
    /// Our value over the baseline's.
    pub ours_ratio: Option<f64>,
    /// The paper's ratio, where it gives one.
    pub paper_ratio: Option<f64>,
}

/// The whole reproduction (repro.json).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Repro {
    /// `mptcp-qe`, `proxy`, `marc` or `sedpf`.
    pub name: String,
    /// Seeds used.
    pub seeds: Vec<u64>,
    /// The rows.
    pub rows: Vec<ReproRow>,
}

impl Repro {
    /// Writes `DIR/repro.json`.
    pub fn write(&self, dir: &Path) -> anyhow::Result<()> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let path = dir.join("repro.json");
        std::fs::write(&path, serde_json::to_string_pretty(self)? + "\n")
            .with_context(|| format!("writing {}", path.display()))
    }

    /// A text table: metric, profile, ours ± sd, paper, ratios.
    pub fn table(&self) -> String {
        use std::fmt::Write as _;
        let mut s = String::new();
        let _ = writeln!(s, "repro {}  seeds {:?}", self.name, self.seeds);
        let _ = writeln!(
            s,
            "ours = the mean over the seeds; ± sd = the standard deviation over the seeds (divisor n); ours/base = ours over the mean of the profile in ratio_to (repro.json)"
        );
        let _ = writeln!(
            s,
            "{:<28} {:<20} {:>14} {:>10} {:>12} {:>10} {:>10}",
            "metric", "profile", "ours", "± sd", "paper", "ours/base", "paper/base"
        );
        let opt = |v: Option<f64>| v.map_or_else(|| "-".to_string(), |x| format!("{x:.4}"));
        for r in &self.rows {
            let _ = writeln!(
                s,
                "{:<28} {:<20} {:>14.4} {:>10.4} {:>12} {:>10} {:>10}",
                r.metric,
                r.profile,
                r.ours,
                r.ours_sd,
                opt(r.paper),
                opt(r.ours_ratio),
                opt(r.paper_ratio)
            );
        }
        s
    }
}
