//! `braid repro NAME`: the published results Braid builds on, re-run in the simulator,
//! with the paper's figures beside ours, where each paper figure came from, and a verdict
//! per headline figure (`DIR/repro.json`, docs/REFERENCE.md).

pub mod marc;
pub mod mptcp_qe;
pub mod proxy;
pub mod sedpf;

use std::path::Path;

use anyhow::Context as _;

/// Where a paper figure in a row comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Provenance {
    /// Written in the paper's text or one of its tables.
    Stated,
    /// Read off a plot in the paper.
    ReadFromPlot,
    /// A published value remembered from a figure the text extraction lost; not re-checked.
    Recalled,
    /// The paper gives no number: ours is how we read its claim.
    Interpretation,
}

impl Provenance {
    /// The name repro.json uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Provenance::Stated => "stated",
            Provenance::ReadFromPlot => "read_from_plot",
            Provenance::Recalled => "recalled",
            Provenance::Interpretation => "interpretation",
        }
    }
}

/// The legend printed under every table with a `source` column.
pub const PROVENANCE_LEGEND: &str = "source = where the paper's figure comes from: stated = written in the paper's text or a table; \
recalled = remembered from a published figure the text extraction lost, not re-checked; \
read_from_plot = read off a plot in the paper; interpretation = the paper gives no number, the figure is how we read its claim";

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
    /// Where the paper's figure (`paper`, `paper_ratio`) comes from: present exactly when
    /// one of them is.
    pub provenance: Option<Provenance>,
}

/// How a headline figure is compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Claim {
    /// A ratio to a baseline: our change from 1 against the paper's.
    Change,
    /// An upper bound: ours at most the paper's figure.
    AtMost,
    /// An order without a number: ours below the baseline's (a ratio below 1).
    Order,
}

/// The outcome of one headline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum Outcome {
    /// Within ±20 % of the paper's figure.
    #[serde(rename = "reproduced")]
    Reproduced,
    /// The right direction, the magnitude off by more than 20 %.
    #[serde(rename = "partly reproduced")]
    PartlyReproduced,
    /// The wrong direction, or no effect.
    #[serde(rename = "not reproduced")]
    NotReproduced,
}

impl Outcome {
    /// The name repro.json uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Reproduced => "reproduced",
            Outcome::PartlyReproduced => "partly reproduced",
            Outcome::NotReproduced => "not reproduced",
        }
    }
}

/// How far from the paper's figure a result still counts as reproduced (±20 %).
pub const TOLERANCE: f64 = 0.2;
/// A change under this share of the paper's counts as no effect.
pub const NO_EFFECT: f64 = 0.1;

/// The rule the verdict lines follow, printed above them.
pub const VERDICT_RULE: &str = "verdicts: a ratio headline compares our change from 1 with the paper's (ours/base - 1 against paper/base - 1); \
gap = our change over the paper's - 1, below -100 % when ours goes the other way (an at-most headline: ours over the bound - 1); \
reproduced = gap within +/-20 % (at most: ours no more than 20 % above the bound; an order: ours below 1); \
partly reproduced = the same direction, more than 20 % off; \
not reproduced = the opposite direction, or under a tenth of the paper's change (no effect)";

/// A headline figure of a reproduction: which rows it is computed from.
#[derive(Clone, Copy, Debug)]
pub struct Headline {
    /// The rows' metric.
    pub metric: &'static str,
    /// The profile whose result the headline is.
    pub profile: &'static str,
    /// The baseline profile (for [`Claim::Change`] and [`Claim::Order`]).
    pub base: Option<&'static str>,
    /// How it is compared.
    pub claim: Claim,
}

impl Headline {
    /// A ratio headline: `profile` over `base`, our change against the paper's.
    pub const fn change(metric: &'static str, profile: &'static str, base: &'static str) -> Self {
        Headline { metric, profile, base: Some(base), claim: Claim::Change }
    }

    /// An upper bound on `profile`'s value.
    pub const fn at_most(metric: &'static str, profile: &'static str) -> Self {
        Headline { metric, profile, base: None, claim: Claim::AtMost }
    }

    /// An order: `profile` below `base`.
    pub const fn order(metric: &'static str, profile: &'static str, base: &'static str) -> Self {
        Headline { metric, profile, base: Some(base), claim: Claim::Order }
    }

    /// Its name in repro.json: `METRIC PROFILE/BASE` or `METRIC PROFILE`.
    pub fn name(&self) -> String {
        match self.base {
            Some(b) => format!("{} {}/{b}", self.metric, self.profile),
            None => format!("{} {}", self.metric, self.profile),
        }
    }
}

/// The verdict on one headline figure (repro.json: `verdicts[]`).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Verdict {
    /// The headline: `METRIC PROFILE/BASE` (a ratio or an order) or `METRIC PROFILE`.
    pub headline: String,
    /// `reproduced`, `partly reproduced` or `not reproduced`.
    pub verdict: Outcome,
    /// How ours and the paper's are compared: `change`, `at_most` or `order`.
    pub claim: Claim,
    /// Our ratio to the baseline (`change`, `order`) or our value (`at_most`); null when
    /// it cannot be computed (a zero baseline).
    pub ours: Option<f64>,
    /// The paper's ratio (`change`) or bound (`at_most`); null for an order.
    pub paper: Option<f64>,
    /// Our change over the paper's − 1 (`change`), ours over the bound − 1 (`at_most`);
    /// null for an order or when either side is missing.
    pub gap: Option<f64>,
    /// Where the paper's figure comes from (the weaker of the two rows' for a ratio
    /// computed from two rows); null for an order.
    pub provenance: Option<Provenance>,
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
    /// One verdict per headline figure, computed from the rows.
    pub verdicts: Vec<Verdict>,
}

/// The row of `metric` for `profile`, preferring the one whose ratio is taken against
/// `base`.
fn find_row<'a>(
    rows: &'a [ReproRow],
    metric: &str,
    profile: &str,
    base: Option<&str>,
) -> Option<&'a ReproRow> {
    let mut it = rows.iter().filter(|r| r.metric == metric && r.profile == profile);
    let first = it.clone().next();
    base.and_then(|b| it.find(|r| r.ratio_to.as_deref() == Some(b))).or(first)
}

/// The verdict on `h`, from `rows`.
pub fn judge(rows: &[ReproRow], h: &Headline) -> Verdict {
    let row = find_row(rows, h.metric, h.profile, h.base);
    let base_row = h.base.and_then(|b| find_row(rows, h.metric, b, None));
    // Our ratio: the row's own when it is against this base, else from the two rows.
    let ours_ratio = || -> Option<f64> {
        let r = row?;
        if r.ratio_to.as_deref() == h.base && r.ours_ratio.is_some() {
            return r.ours_ratio;
        }
        let b = base_row?.ours;
        (b != 0.0).then(|| r.ours / b).filter(|x| x.is_finite())
    };
    let (ours, paper, gap, provenance, verdict) = match h.claim {
        Claim::Change => {
            let ours = ours_ratio();
            let own = row.filter(|r| r.ratio_to.as_deref() == h.base).and_then(|r| {
                r.paper_ratio.map(|p| (p, r.provenance.unwrap_or(Provenance::Interpretation)))
            });
            let paper = own.or_else(|| {
                let (r, b) = (row?, base_row?);
                let (p, bp) = (r.paper?, b.paper?);
                let weaker = r.provenance.max(b.provenance)?;
                (bp != 0.0).then_some((p / bp, weaker))
            });
            let share = match (ours, paper) {
                (Some(o), Some((p, _))) if p != 1.0 => Some((o - 1.0) / (p - 1.0)),
                _ => None,
            };
            let verdict = match share {
                Some(s) if (s - 1.0).abs() <= TOLERANCE => Outcome::Reproduced,
                Some(s) if s >= NO_EFFECT => Outcome::PartlyReproduced,
                _ => Outcome::NotReproduced,
            };
            (ours, paper.map(|p| p.0), share.map(|s| s - 1.0), paper.map(|p| p.1), verdict)
        }
        Claim::AtMost => {
            let ours = row.map(|r| r.ours).filter(|x| x.is_finite());
            let paper = row.and_then(|r| r.paper.zip(r.provenance));
            let gap = match (ours, paper) {
                (Some(o), Some((p, _))) if p != 0.0 => Some(o / p - 1.0),
                _ => None,
            };
            let verdict = match gap {
                Some(g) if g <= TOLERANCE => Outcome::Reproduced,
                _ => Outcome::NotReproduced,
            };
            (ours, paper.map(|p| p.0), gap, paper.map(|p| p.1), verdict)
        }
        Claim::Order => {
            let ours = ours_ratio();
            let verdict = match ours {
                Some(o) if o < 1.0 => Outcome::Reproduced,
                _ => Outcome::NotReproduced,
            };
            (ours, None, None, None, verdict)
        }
    };
    Verdict { headline: h.name(), verdict, claim: h.claim, ours, paper, gap, provenance }
}

/// The verdicts on `headlines` whose rows are present (a part not run has none).
pub fn judge_all(rows: &[ReproRow], headlines: &[Headline]) -> Vec<Verdict> {
    headlines
        .iter()
        .filter(|h| rows.iter().any(|r| r.metric == h.metric && r.profile == h.profile))
        .map(|h| judge(rows, h))
        .collect()
}

/// The verdict lines: the rule, then one line per verdict (empty without verdicts).
pub fn verdict_lines(verdicts: &[Verdict]) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    if verdicts.is_empty() {
        return s;
    }
    let _ = writeln!(s, "{VERDICT_RULE}");
    let num = |v: Option<f64>| v.map_or_else(|| "-".to_string(), |x| format!("{x:.4}"));
    let pct =
        |v: Option<f64>| v.map_or_else(|| "-".to_string(), |x| format!("{:+.1} %", x * 100.0));
    let source = |p: Option<Provenance>| p.map_or("-", Provenance::as_str);
    for v in verdicts {
        let no_ratio = if v.ours.is_none() && v.claim != Claim::AtMost {
            " (no ratio: a zero or missing baseline)"
        } else {
            ""
        };
        let detail = match v.claim {
            Claim::Change => format!(
                "ours {}{no_ratio} ({}), paper {} ({}, {}); gap {}",
                num(v.ours),
                pct(v.ours.map(|o| o - 1.0)),
                num(v.paper),
                pct(v.paper.map(|p| p - 1.0)),
                source(v.provenance),
                pct(v.gap)
            ),
            Claim::AtMost => format!(
                "ours {}, paper at most {} ({}); gap {}",
                num(v.ours),
                num(v.paper),
                source(v.provenance),
                pct(v.gap)
            ),
            Claim::Order => {
                format!("ours {}{no_ratio}, paper below 1 (an order without a number)", num(v.ours))
            }
        };
        let _ = writeln!(s, "verdict {}: {}: {detail}", v.headline, v.verdict.as_str());
    }
    s
}

impl Repro {
    /// A reproduction without verdicts yet.
    pub fn new(name: impl Into<String>, seeds: Vec<u64>, rows: Vec<ReproRow>) -> Self {
        Repro { name: name.into(), seeds, rows, verdicts: Vec::new() }
    }

    /// Fills `verdicts` from the rows.
    pub fn judge(&mut self, headlines: &[Headline]) {
        self.verdicts = judge_all(&self.rows, headlines);
    }

    /// Every row with a paper figure says where it comes from, and no other row does.
    pub fn check(&self) -> anyhow::Result<()> {
        for r in &self.rows {
            let has_figure = r.paper.is_some() || r.paper_ratio.is_some();
            if has_figure != r.provenance.is_some() {
                anyhow::bail!(
                    "repro {}: row {} / {}: provenance {:?} with paper {:?}, paper_ratio {:?}",
                    self.name,
                    r.metric,
                    r.profile,
                    r.provenance,
                    r.paper,
                    r.paper_ratio
                );
            }
        }
        Ok(())
    }

    /// Writes `DIR/repro.json`.
    pub fn write(&self, dir: &Path) -> anyhow::Result<()> {
        self.check()?;
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let path = dir.join("repro.json");
        std::fs::write(&path, serde_json::to_string_pretty(self)? + "\n")
            .with_context(|| format!("writing {}", path.display()))
    }

    /// A text table: metric, profile, ours ± sd, paper, ratios, the paper figure's source;
    /// then the verdict lines.
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
            "{:<28} {:<20} {:>14} {:>10} {:>12} {:>10} {:>10}  source",
            "metric", "profile", "ours", "± sd", "paper", "ours/base", "paper/base"
        );
        let opt = |v: Option<f64>| v.map_or_else(|| "-".to_string(), |x| format!("{x:.4}"));
        for r in &self.rows {
            let _ = writeln!(
                s,
                "{:<28} {:<20} {:>14.4} {:>10.4} {:>12} {:>10} {:>10}  {}",
                r.metric,
                r.profile,
                r.ours,
                r.ours_sd,
                opt(r.paper),
                opt(r.ours_ratio),
                opt(r.paper_ratio),
                r.provenance.map_or("-", Provenance::as_str)
            );
        }
        if self.rows.iter().any(|r| r.provenance.is_some()) {
            let _ = writeln!(s, "{PROVENANCE_LEGEND}");
        }
        s.push_str(&verdict_lines(&self.verdicts));
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(metric: &str, profile: &str, ours: f64, paper: Option<f64>) -> ReproRow {
        ReproRow {
            metric: metric.into(),
            profile: profile.into(),
            ours,
            ours_sd: 0.0,
            paper,
            ratio_to: None,
            ours_ratio: None,
            paper_ratio: None,
            provenance: paper.map(|_| Provenance::Stated),
        }
    }

    fn ratio_row(ours_ratio: f64, paper_ratio: f64) -> ReproRow {
        ReproRow {
            ratio_to: Some("b".into()),
            ours_ratio: Some(ours_ratio),
            paper_ratio: Some(paper_ratio),
            provenance: Some(Provenance::Stated),
            ..row("m", "a", 1.0, None)
        }
    }

    #[test]
    fn a_ratio_is_judged_on_its_change_from_one() {
        let h = Headline::change("m", "a", "b");
        // Paper -20 %: ours -18 % is within 20 % of it, -10 % is half of it, -1 % is under
        // a tenth (no effect), +5 % the wrong way.
        let cases = [
            (0.82, Outcome::Reproduced),
            (0.90, Outcome::PartlyReproduced),
            (0.60, Outcome::PartlyReproduced),
            (0.99, Outcome::NotReproduced),
            (1.05, Outcome::NotReproduced),
        ];
        for (ours, want) in cases {
            let v = judge(&[ratio_row(ours, 0.8)], &h);
            assert_eq!(v.verdict, want, "{ours}: {v:?}");
            assert_eq!(v.headline, "m a/b");
            assert_eq!(v.provenance, Some(Provenance::Stated));
        }
        let v = judge(&[ratio_row(0.9, 0.8)], &h);
        assert!((v.gap.unwrap() + 0.5).abs() < 1e-9, "{v:?}");
        // A 0.6 % saving against the paper's 5.71 %: within 20 % as ratios (0.994 against
        // 0.943), but a tenth of the change.
        let v = judge(&[ratio_row(0.994, 0.9429)], &h);
        assert_eq!(v.verdict, Outcome::PartlyReproduced, "{v:?}");
    }

    #[test]
    fn a_ratio_without_its_own_row_comes_from_the_two_rows() {
        let mut rows = vec![row("m", "b", 10.0, Some(20.0)), row("m", "a", 5.0, Some(5.0))];
        rows[1].provenance = Some(Provenance::Recalled);
        let v = judge(&rows, &Headline::change("m", "a", "b"));
        assert_eq!(v.ours, Some(0.5));
        assert_eq!(v.paper, Some(0.25));
        assert_eq!(v.provenance, Some(Provenance::Recalled), "the weaker source");
        assert_eq!(v.verdict, Outcome::PartlyReproduced);
        // A zero baseline: no ratio, not reproduced.
        let rows = vec![row("m", "b", 0.0, Some(20.0)), row("m", "a", 5.0, Some(5.0))];
        let v = judge(&rows, &Headline::change("m", "a", "b"));
        assert_eq!((v.ours, v.verdict), (None, Outcome::NotReproduced));
    }

    #[test]
    fn bounds_and_orders() {
        let mut r = row("share", "a", 0.7, Some(1.0));
        r.provenance = Some(Provenance::Interpretation);
        let v = judge(std::slice::from_ref(&r), &Headline::at_most("share", "a"));
        assert_eq!(v.verdict, Outcome::Reproduced);
        assert_eq!(v.provenance, Some(Provenance::Interpretation));
        assert!((v.gap.unwrap() + 0.3).abs() < 1e-9);
        r.ours = 1.3;
        let v = judge(&[r], &Headline::at_most("share", "a"));
        assert_eq!(v.verdict, Outcome::NotReproduced);
        let rows = vec![row("s", "b", 2.0, None), row("s", "a", 1.0, None)];
        let v = judge(&rows, &Headline::order("s", "a", "b"));
        assert_eq!(
            (v.ours, v.verdict, v.paper, v.gap),
            (Some(0.5), Outcome::Reproduced, None, None)
        );
        let rows = vec![row("s", "b", 0.0, None), row("s", "a", 0.0, None)];
        let v = judge(&rows, &Headline::order("s", "a", "b"));
        assert_eq!(v.verdict, Outcome::NotReproduced, "no effect");
    }

    #[test]
    fn provenance_goes_with_a_paper_figure_and_serializes_as_a_string() {
        let mut repro = Repro::new("t", vec![1], vec![row("m", "a", 1.0, Some(2.0))]);
        assert!(repro.check().is_ok());
        repro.rows.push(row("m", "b", 1.0, None));
        assert!(repro.check().is_ok());
        repro.rows[1].provenance = Some(Provenance::Recalled);
        assert!(repro.check().is_err());
        repro.rows[1].provenance = None;
        repro.rows[0].provenance = None;
        assert!(repro.check().is_err());
        let j = serde_json::to_value(ratio_row(0.9, 0.8)).unwrap();
        assert_eq!(j["provenance"], "stated");
        assert_eq!(serde_json::to_value(Provenance::ReadFromPlot).unwrap(), "read_from_plot");
        let v = judge(&[ratio_row(1.1, 0.8)], &Headline::change("m", "a", "b"));
        let j = serde_json::to_value(&v).unwrap();
        assert_eq!(j["verdict"], "not reproduced");
        assert_eq!(j["claim"], "change");
        // Only headlines whose rows ran are judged.
        assert!(
            judge_all(&[row("x", "a", 1.0, None)], &[Headline::change("m", "a", "b")]).is_empty()
        );
    }
}
