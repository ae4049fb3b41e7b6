//! A Markov-modulated generator of cellular-like mahimahi traces.
//!
//! # Model
//! A continuous-time Markov chain over a few link states (e.g. good / fair / poor /
//! outage), each with a mean rate, a mean dwell time and a within-state variability:
//!
//! 1. **State process.** The chain stays in state `i` for an exponentially distributed
//!    time of mean [`MarkovState::dwell_s`], then jumps to state `j` with probability
//!    `jumps[i][j]` (the embedded jump chain; no self-jumps). The first state is drawn
//!    from the chain's time-stationary distribution (`π_i·dwell_i`, normalised, where `π`
//!    is the stationary distribution of the jump chain), so a trace does not always begin
//!    in the same state.
//! 2. **Within-state variability.** Time is cut into [`MarkovModel::slot_ms`] slots
//!    (100 ms). In each slot the state's mean rate is multiplied by a log-normal factor
//!    `exp(σ·X − σ²/2)` of mean 1, with `σ² = ln(1 + cv²)` so that the factor's
//!    coefficient of variation is the state's [`MarkovState::cv`], and `X` an AR(1)
//!    standard-normal process, `X' = ρ·X + √(1−ρ²)·Z`, correlated from slot to slot by
//!    [`MarkovModel::rho`]. This is a discrete stand-in for the doubly-stochastic Poisson
//!    model of Sprout (Winstein, Sivaraman, Balakrishnan, "Stochastic Forecasts Achieve High
//!    Throughput and Low Delay over Cellular Networks", NSDI 2013), whose link rate wanders
//!    as a random walk; here it reverts to the state's mean instead.
//! 3. **Delivery opportunities.** In every millisecond the number of 1500-byte delivery
//!    opportunities is Poisson with mean `rate · 1 ms / (1500 · 8 bit)`. Each opportunity
//!    is one line of the mahimahi trace: its millisecond timestamp, repeated when several
//!    fall in the same millisecond.
//!
//! The trace covers `(0, duration]` ms. Its last line is always the timestamp `duration`
//! (one opportunity is added there when the draw gave none), so the trace's loop period,
//! its last timestamp, is exactly the requested duration.
//!
//! Every draw comes from a [`ChaCha8Rng`] seeded by the caller, a fixed number of draws per
//! millisecond, slot and state change: the same model, duration and seed always give the
//! same trace.
//!
//! # Parameter sets
//! [`MarkovModel::lte`], [`MarkovModel::lte_driving`] and [`MarkovModel::evdo`] were fitted
//! to the per-second statistics of three Saturator traces from the mahimahi project
//! (Verizon-LTE-short, ATT-LTE-driving and Verizon-EVDO-driving; the same NSDI 2013 paper):
//! the 1-s throughput samples are classed relative to the trace's median rate `m` as
//! good (≥ 1.5·m), fair (≥ 0.75·m), poor (≥ 0.25·m) and outage (< 0.25·m); each state's
//! rate is the mean of its class, its dwell time the mean run length of the class, its
//! `cv` the coefficient of variation of the 100-ms throughput within the class with the
//! Poisson part taken out (`√(cv_measured² − 1/mean_count)`), and the jump probabilities
//! the class-to-class transition frequencies, rounded; for the two LTE fits they are
//! reduced to jumps between neighbouring classes, which carry over 90 % of the observed
//! transitions. [`MarkovModel::umts`] has no trace to be fitted to: it keeps the structure of
//! the LTE fit with rates scaled to a 3G HSPA bearer (peak rates of 3.6–7.2 Mbit/s for
//! HSDPA categories 6–8, a few Mbit/s when the cell is shared), longer poor spells and
//! outages of about a second (handovers, tunnels). Its numbers are assumptions, not a fit.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::dist;
use super::trace::{OPPORTUNITY_BYTES, Trace, TraceError};

/// One state of the chain.
#[derive(Clone, Debug, PartialEq)]
pub struct MarkovState {
    /// A label (e.g. `good`), for documentation and messages.
    pub name: String,
    /// Mean delivery rate in this state, bits per second.
    pub rate_bps: f64,
    /// Mean time spent in the state per visit, seconds (exponentially distributed).
    pub dwell_s: f64,
    /// Coefficient of variation of the rate from slot to slot within the state (0 = the
    /// state's rate, with only the Poisson variation of the opportunities).
    pub cv: f64,
}

/// A Markov-modulated trace model (see the module documentation).
#[derive(Clone, Debug, PartialEq)]
pub struct MarkovModel {
    /// The states.
    pub states: Vec<MarkovState>,
    /// `jumps[i][j]`: probability that the chain goes to `j` when it leaves `i`. Rows sum
    /// to 1, the diagonal is 0.
    pub jumps: Vec<Vec<f64>>,
    /// Length of a within-state variability slot, milliseconds.
    pub slot_ms: u64,
    /// Correlation of the variability from one slot to the next, in `[0, 1)`.
    pub rho: f64,
}

/// A model that cannot generate a trace.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MarkovError {
    /// No states.
    #[error("a Markov trace model needs at least one state")]
    NoStates,
    /// `jumps` is not a square matrix of the states' size.
    #[error("the jump matrix must be {states}×{states}")]
    Shape {
        /// Number of states.
        states: usize,
    },
    /// A row of the jump matrix is not a probability distribution over the other states.
    #[error("row {row} (state `{state}`) of the jump matrix: {reason}")]
    BadRow {
        /// Row index.
        row: usize,
        /// The state's name.
        state: String,
        /// What is wrong.
        reason: &'static str,
    },
    /// A state's parameters are out of range.
    #[error("state `{state}`: {reason}")]
    BadState {
        /// The state's name.
        state: String,
        /// What is wrong.
        reason: &'static str,
    },
    /// `slot_ms` is 0, `rho` outside `[0, 1)`, or the duration 0.
    #[error("{0}")]
    BadSetting(&'static str),
    /// The generated timestamps do not form a trace (cannot happen for a valid model).
    #[error(transparent)]
    Trace(#[from] TraceError),
}

/// Largest mean number of opportunities per millisecond (360 Mbit/s): keeps the Poisson
/// inversion away from underflow.
const MAX_PER_MS: f64 = 30.0;

fn state(name: &str, rate_bps: f64, dwell_s: f64, cv: f64) -> MarkovState {
    MarkovState { name: name.to_string(), rate_bps, dwell_s, cv }
}

/// The birth–death jump structure the fitted traces show: good ↔ fair ↔ poor ↔ outage,
/// `up` the probability of moving to the better neighbour from fair and poor, and an
/// outage returning to fair with probability `skip` (otherwise to poor).
fn neighbour_jumps(up: f64, skip: f64) -> Vec<Vec<f64>> {
    vec![
        vec![0.0, 1.0, 0.0, 0.0],
        vec![up, 0.0, 1.0 - up, 0.0],
        vec![0.0, up, 0.0, 1.0 - up],
        vec![0.0, skip, 1.0 - skip, 0.0],
    ]
}

impl MarkovModel {
    /// A stationary LTE link (fit to Verizon-LTE-short: mean ≈ 5 Mbit/s, median 4.3).
    pub fn lte() -> MarkovModel {
        MarkovModel {
            states: vec![
                state("good", 9.1e6, 3.4, 0.33),
                state("fair", 4.6e6, 2.8, 0.35),
                state("poor", 2.1e6, 2.7, 0.50),
                state("outage", 0.7e6, 1.2, 0.60),
            ],
            jumps: neighbour_jumps(0.55, 0.15),
            slot_ms: 100,
            rho: 0.5,
        }
    }

    /// LTE while driving (fit to ATT-LTE-driving: mean ≈ 5.2 Mbit/s, median 5.4, 10 % of
    /// the seconds below a quarter of the median).
    pub fn lte_driving() -> MarkovModel {
        MarkovModel {
            states: vec![
                state("good", 9.6e6, 4.3, 0.19),
                state("fair", 6.4e6, 6.9, 0.23),
                state("poor", 2.65e6, 4.4, 0.36),
                state("outage", 0.57e6, 2.9, 1.26),
            ],
            jumps: neighbour_jumps(0.48, 0.19),
            slot_ms: 100,
            rho: 0.5,
        }
    }

    /// A 3G HSPA bearer, mean ≈ 2.6 Mbit/s (assumed parameters, see the module docs).
    pub fn umts() -> MarkovModel {
        MarkovModel {
            states: vec![
                state("good", 4.2e6, 3.0, 0.30),
                state("fair", 2.6e6, 4.0, 0.35),
                state("poor", 1.2e6, 3.0, 0.50),
                state("outage", 0.1e6, 1.0, 1.0),
            ],
            jumps: neighbour_jumps(0.5, 0.2),
            slot_ms: 100,
            rho: 0.5,
        }
    }

    /// EV-DO while driving (fit to Verizon-EVDO-driving: mean ≈ 0.52 Mbit/s, median 0.41,
    /// 16 % of the seconds in outage).
    pub fn evdo() -> MarkovModel {
        MarkovModel {
            states: vec![
                state("good", 1.06e6, 3.7, 0.61),
                state("fair", 0.44e6, 2.1, 0.57),
                state("poor", 0.20e6, 2.3, 0.73),
                state("outage", 0.04e6, 4.0, 1.39),
            ],
            jumps: vec![
                vec![0.0, 0.86, 0.12, 0.02],
                vec![0.54, 0.0, 0.42, 0.04],
                vec![0.07, 0.62, 0.0, 0.31],
                vec![0.10, 0.17, 0.73, 0.0],
            ],
            slot_ms: 100,
            rho: 0.5,
        }
    }

    /// Checks the parameters.
    pub fn validate(&self) -> Result<(), MarkovError> {
        let n = self.states.len();
        if n == 0 {
            return Err(MarkovError::NoStates);
        }
        if self.jumps.len() != n || self.jumps.iter().any(|r| r.len() != n) {
            return Err(MarkovError::Shape { states: n });
        }
        for (i, s) in self.states.iter().enumerate() {
            let bad = |reason| MarkovError::BadState { state: s.name.clone(), reason };
            if !(s.rate_bps.is_finite() && s.rate_bps >= 0.0) {
                return Err(bad("rate_bps must be finite and ≥ 0"));
            }
            if !(s.dwell_s.is_finite() && s.dwell_s > 0.0) {
                return Err(bad("dwell_s must be finite and > 0"));
            }
            if !(s.cv.is_finite() && s.cv >= 0.0) {
                return Err(bad("cv must be finite and ≥ 0"));
            }
            let row = &self.jumps[i];
            let bad_row = |reason| MarkovError::BadRow { row: i, state: s.name.clone(), reason };
            if row.iter().any(|p| !(p.is_finite() && *p >= 0.0)) {
                return Err(bad_row("probabilities must be finite and ≥ 0"));
            }
            if n > 1 {
                if row[i] != 0.0 {
                    return Err(bad_row("the diagonal must be 0 (no self-jumps)"));
                }
                if (row.iter().sum::<f64>() - 1.0).abs() > 1e-9 {
                    return Err(bad_row("probabilities must sum to 1"));
                }
            }
        }
        if self.slot_ms == 0 {
            return Err(MarkovError::BadSetting("slot_ms must be ≥ 1"));
        }
        if !(0.0..1.0).contains(&self.rho) {
            return Err(MarkovError::BadSetting("rho must be in [0, 1)"));
        }
        Ok(())
    }

    /// The fraction of time spent in each state in the long run.
    pub fn stationary(&self) -> Result<Vec<f64>, MarkovError> {
        self.validate()?;
        let n = self.states.len();
        if n == 1 {
            return Ok(vec![1.0]);
        }
        // Stationary distribution of the jump chain by power iteration on the lazy chain
        // (½·I + ½·P is aperiodic with the same stationary distribution).
        let mut pi = vec![1.0 / n as f64; n];
        for _ in 0..10_000 {
            let mut next = vec![0.0; n];
            for (i, p) in pi.iter().enumerate() {
                next[i] += 0.5 * p;
                for (j, q) in self.jumps[i].iter().enumerate() {
                    next[j] += 0.5 * p * q;
                }
            }
            pi = next;
        }
        let w: Vec<f64> = pi.iter().zip(&self.states).map(|(p, s)| p * s.dwell_s).collect();
        let total: f64 = w.iter().sum();
        Ok(w.iter().map(|x| x / total).collect())
    }

    /// The long-run mean rate, bits per second.
    pub fn mean_rate_bps(&self) -> Result<f64, MarkovError> {
        Ok(self.stationary()?.iter().zip(&self.states).map(|(p, s)| p * s.rate_bps).sum())
    }

    /// Millisecond timestamps of the delivery opportunities over `(0, duration_ms]`, one
    /// per 1500-byte opportunity, sorted (mahimahi's format).
    pub fn generate_ms(&self, duration_ms: u64, seed: u64) -> Result<Vec<u64>, MarkovError> {
        let stationary = self.stationary()?;
        if duration_ms == 0 {
            return Err(MarkovError::BadSetting("the duration must be ≥ 1 ms"));
        }
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let pick = |rng: &mut ChaCha8Rng, probs: &[f64]| {
            let u = dist::uniform(rng);
            let mut acc = 0.0;
            for (j, p) in probs.iter().enumerate() {
                acc += p;
                if u < acc {
                    return j;
                }
            }
            probs.iter().rposition(|p| *p > 0.0).unwrap_or(0)
        };
        let mut s = pick(&mut rng, &stationary);
        let dwell_ms = |rng: &mut ChaCha8Rng, s: usize| {
            dist::exponential(rng, self.states[s].dwell_s * 1000.0).max(1.0)
        };
        // The state's change times are kept in fractional ms; each ms uses the state in
        // force at its start.
        let mut leave_at = dwell_ms(&mut rng, s);
        let mut x = dist::standard_normal(&mut rng);
        let mut factor = 1.0;
        let bits_per_opportunity = (OPPORTUNITY_BYTES * 8) as f64;
        let mut out = Vec::new();
        for ms in 0..duration_ms {
            while ms as f64 >= leave_at {
                if self.states.len() > 1 {
                    s = pick(&mut rng, &self.jumps[s]);
                }
                leave_at += dwell_ms(&mut rng, s);
            }
            if ms % self.slot_ms == 0 {
                x = self.rho * x
                    + (1.0 - self.rho * self.rho).sqrt() * dist::standard_normal(&mut rng);
                let cv = self.states[s].cv;
                let sigma2 = (1.0 + cv * cv).ln();
                factor = (sigma2.sqrt() * x - sigma2 / 2.0).exp();
            }
            let lambda = (self.states[s].rate_bps * factor / 1000.0 / bits_per_opportunity)
                .clamp(0.0, MAX_PER_MS);
            let count = poisson(&mut rng, lambda);
            // The opportunity at the end of millisecond `ms` carries the timestamp ms + 1.
            out.extend(std::iter::repeat_n(ms + 1, count as usize));
        }
        if out.last() != Some(&duration_ms) {
            out.push(duration_ms);
        }
        Ok(out)
    }

    /// The trace itself (see [`MarkovModel::generate_ms`]).
    pub fn generate(&self, duration_ms: u64, seed: u64) -> Result<Trace, MarkovError> {
        Ok(Trace::from_millis(self.generate_ms(duration_ms, seed)?)?)
    }
}

/// A Poisson sample of mean `lambda` (≤ [`MAX_PER_MS`]) by inversion: one uniform draw.
fn poisson(rng: &mut ChaCha8Rng, lambda: f64) -> u32 {
    let u = dist::uniform(rng);
    if lambda <= 0.0 {
        return 0;
    }
    let mut k = 0u32;
    let mut p = (-lambda).exp();
    let mut cdf = p;
    while u >= cdf && k < 1000 {
        k += 1;
        p *= lambda / f64::from(k);
        cdf += p;
        if p < 1e-300 && cdf >= 1.0 - 1e-12 {
            break;
        }
    }
    k
}

/// Writes timestamps in mahimahi's text format, one per line.
pub fn to_mahimahi(ts_ms: &[u64]) -> String {
    let mut s = String::with_capacity(ts_ms.len() * 6);
    for t in ts_ms {
        s.push_str(&t.to_string());
        s.push('\n');
    }
    s
}

/// The traces bundled in `assets/traces/`: file name, model, duration (ms) and seed.
/// `BRAID_REGENERATE_TRACES=1 cargo test -p braid-transport bundled_traces` rewrites them;
/// without the variable that test checks the committed files are exactly what the
/// generator gives.
pub fn bundled() -> Vec<(&'static str, MarkovModel, u64, u64)> {
    vec![
        ("markov-lte-1.down", MarkovModel::lte(), 40_000, 1),
        ("markov-lte-2.down", MarkovModel::lte(), 40_000, 2),
        ("markov-lte-driving-1.down", MarkovModel::lte_driving(), 40_000, 1),
        ("markov-umts-1.down", MarkovModel::umts(), 40_000, 1),
        ("markov-umts-2.down", MarkovModel::umts(), 40_000, 2),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_trace_other_seed_other_trace() {
        let m = MarkovModel::lte();
        let a = m.generate_ms(5_000, 7).unwrap();
        assert_eq!(a, m.generate_ms(5_000, 7).unwrap());
        assert_ne!(a, m.generate_ms(5_000, 8).unwrap());
    }

    #[test]
    fn the_period_is_the_duration_and_timestamps_are_sorted() {
        for (_, m, _, _) in bundled() {
            let ts = m.generate_ms(3_000, 3).unwrap();
            assert_eq!(ts.last(), Some(&3_000));
            assert!(ts.windows(2).all(|w| w[0] <= w[1]));
            assert!(ts[0] >= 1);
            let t = m.generate(3_000, 3).unwrap();
            assert_eq!(t.period_ms(), 3_000);
        }
    }

    #[test]
    fn long_run_rate_matches_the_stationary_mean() {
        for m in [
            MarkovModel::lte(),
            MarkovModel::lte_driving(),
            MarkovModel::umts(),
            MarkovModel::evdo(),
        ] {
            let want = m.mean_rate_bps().unwrap();
            let got = m.generate(2_000_000, 11).unwrap().mean_rate_bps();
            assert!((got / want - 1.0).abs() < 0.08, "mean {got} vs stationary {want}");
        }
    }

    #[test]
    fn a_single_state_without_variability_is_a_poisson_link_of_its_rate() {
        let m = MarkovModel {
            states: vec![state("only", 1.2e6, 1.0, 0.0)],
            jumps: vec![vec![0.0]],
            slot_ms: 100,
            rho: 0.0,
        };
        // 1.2 Mbit/s = 0.1 opportunity per ms.
        let ts = m.generate_ms(100_000, 1).unwrap();
        let n = ts.len() as f64;
        assert!((n - 10_000.0).abs() < 400.0, "{n}");
    }

    #[test]
    fn the_fitted_lte_model_has_its_trace_statistics() {
        let m = MarkovModel::lte();
        let pi = m.stationary().unwrap();
        // Verizon-LTE-short: 29 / 39 / 27 / 5 % of the seconds in the four classes.
        for (p, want) in pi.iter().zip([0.29, 0.39, 0.27, 0.05]) {
            assert!((p - want).abs() < 0.07, "{pi:?}");
        }
        let mean = m.mean_rate_bps().unwrap();
        assert!((4.5e6..5.5e6).contains(&mean), "{mean}");
    }

    #[test]
    fn invalid_models_are_rejected() {
        let mut m = MarkovModel::lte();
        m.jumps[1][2] = 0.9;
        assert!(matches!(m.validate(), Err(MarkovError::BadRow { row: 1, .. })));
        let mut m = MarkovModel::lte();
        m.states[0].dwell_s = 0.0;
        assert!(matches!(m.validate(), Err(MarkovError::BadState { .. })));
        let mut m = MarkovModel::lte();
        m.rho = 1.0;
        assert!(m.validate().is_err());
        assert!(MarkovModel::lte().generate_ms(0, 1).is_err());
        let m = MarkovModel { states: vec![], jumps: vec![], slot_ms: 100, rho: 0.0 };
        assert_eq!(m.validate(), Err(MarkovError::NoStates));
    }
    /// `assets/traces/` holds exactly what [`bundled`] generates. With
    /// `BRAID_REGENERATE_TRACES=1` the files are written instead.
    #[test]
    fn bundled_traces_are_what_the_generator_gives() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../assets/traces");
        let regenerate = std::env::var("BRAID_REGENERATE_TRACES").is_ok_and(|v| v == "1");
        for (name, model, duration_ms, seed) in bundled() {
            let text = to_mahimahi(&model.generate_ms(duration_ms, seed).unwrap());
            let path = dir.join(name);
            if regenerate {
                std::fs::create_dir_all(&dir).unwrap();
                std::fs::write(&path, &text).unwrap();
                continue;
            }
            let committed = std::fs::read_to_string(&path).unwrap_or_else(|e| {
                panic!("{}: {e} (BRAID_REGENERATE_TRACES=1 writes it)", path.display())
            });
            assert!(
                committed == text,
                "{} differs from what the generator gives (BRAID_REGENERATE_TRACES=1 rewrites it)",
                path.display()
            );
            let trace = Trace::parse(&committed).unwrap();
            assert_eq!(trace.period_ms(), duration_ms);
        }
    }
}
