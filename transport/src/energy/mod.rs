//! Radio energy: a power state machine per radio, driven by the path's real traffic.
//!
//! Model: Huang et al., "A Close Examination of Performance and Power Characteristics of 4G
//! LTE Networks", MobiSys 2012 (ALGORITHMS.md §5). Each radio goes
//! `idle → promotion → active → tail → idle`; energy integrates the state powers over time,
//! plus the throughput-dependent part of the active power:
//!
//! ```text
//! P_active = α_up · t_up + α_down · t_down + β      (mW; t in Mbit/s)
//! ```
//! Since `α·t` integrated over a transfer is `α · Mbit transferred` (mJ), the data term is
//! charged per packet and `β` per unit of active time.
//!
//! Timeline after each packet (an [approx] modelling choice, documented in the TOML files):
//! the radio stays active while packets are less than `active_gap_ms` apart; after the last
//! packet + `active_gap_ms` it runs through the tail stages (LTE: one DRX tail; 3G: DCH then
//! FACH) and goes idle. A packet during the tail returns it to active without promotion; a
//! packet while idle starts a promotion, and its data flows when the promotion ends.
//!
//! The built-in parameters ([`RadioParams::builtin`]) are those of
//! `assets/power/{wifi,lte,3g}.toml`; users load their own phone's into [`PowerModels`]
//! (`--power ROLE=FILE`; the file format is `braid_netem::power`'s).

use std::time::Duration;

use crate::path::PathRole;
use crate::time::Instant;

/// A malformed power-model file.
#[derive(Debug, thiserror::Error)]
pub enum EnergyError {
    /// The TOML did not parse or a key is wrong.
    #[error("power model: {0}")]
    Parse(String),
    /// A value is out of range.
    #[error("power model: {0}")]
    Invalid(String),
    /// The file is for another radio than the role it was given for.
    #[error("power model for {role}: the file is for radio `{radio}`")]
    OtherRadio {
        /// The role it was given for.
        role: PathRole,
        /// The file's `radio`.
        radio: String,
    },
    /// Wired paths have no radio.
    #[error("power model for wired: a wired path has no radio (roles: wifi, lte, 3g)")]
    Wired,
}

/// One timed power stage (promotion, or one tail stage).
#[derive(Clone, Debug, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Stage {
    /// Power while in the stage, mW.
    pub power_mw: f64,
    /// How long the stage lasts, ms.
    pub time_ms: f64,
}

/// Parameters of one radio.
#[derive(Clone, Debug, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RadioParams {
    /// The radio's name (wifi, lte, 3g).
    pub radio: String,
    /// α_up, mW per Mbit/s of uplink throughput.
    pub alpha_up_mw_per_mbps: f64,
    /// α_down, mW per Mbit/s of downlink throughput.
    pub alpha_down_mw_per_mbps: f64,
    /// β, the active state's base power, mW.
    pub beta_mw: f64,
    /// Power when idle, mW (0: count energy above the idle baseline).
    #[serde(default)]
    pub idle_mw: f64,
    /// Packets closer than this keep the radio active, ms.
    pub active_gap_ms: f64,
    /// Idle → active promotion.
    pub promotion: Stage,
    /// Tail stages after activity, in order.
    pub tail: Vec<Stage>,
}

impl RadioParams {
    /// Checks that every power, time and coefficient is a finite, non-negative number.
    pub fn validate(&self) -> Result<(), EnergyError> {
        let finite_non_neg = |name: &str, v: f64| {
            if v.is_finite() && v >= 0.0 {
                Ok(())
            } else {
                Err(EnergyError::Invalid(format!("{name} must be a non-negative number, got {v}")))
            }
        };
        finite_non_neg("alpha_up_mw_per_mbps", self.alpha_up_mw_per_mbps)?;
        finite_non_neg("alpha_down_mw_per_mbps", self.alpha_down_mw_per_mbps)?;
        finite_non_neg("beta_mw", self.beta_mw)?;
        finite_non_neg("idle_mw", self.idle_mw)?;
        finite_non_neg("active_gap_ms", self.active_gap_ms)?;
        for s in std::iter::once(&self.promotion).chain(&self.tail) {
            finite_non_neg("power_mw", s.power_mw)?;
            finite_non_neg("time_ms", s.time_ms)?;
        }
        Ok(())
    }

    /// The built-in parameters for a path role (`None` for wired paths: no radio).
    ///
    /// The same figures as `assets/power/{wifi,lte,3g}.toml`, which carry their sources
    /// (Huang et al., MobiSys 2012) and labels; `braid-netem`'s tests check that the files
    /// parse to exactly these values.
    pub fn builtin(role: PathRole) -> Option<RadioParams> {
        let stage = |power_mw, time_ms| Stage { power_mw, time_ms };
        let p = match role {
            PathRole::Wifi => RadioParams {
                radio: "wifi".into(),
                alpha_up_mw_per_mbps: 283.17,
                alpha_down_mw_per_mbps: 137.01,
                beta_mw: 132.86,
                idle_mw: 0.0,
                active_gap_ms: 20.0,
                promotion: stage(124.4, 79.1),
                tail: vec![stage(119.3, 238.1)],
            },
            PathRole::Lte => RadioParams {
                radio: "lte".into(),
                alpha_up_mw_per_mbps: 438.39,
                alpha_down_mw_per_mbps: 51.97,
                beta_mw: 1288.04,
                idle_mw: 0.0,
                active_gap_ms: 100.0,
                promotion: stage(1210.7, 260.1),
                tail: vec![stage(1060.0, 11576.0)],
            },
            PathRole::ThreeG => RadioParams {
                radio: "3g".into(),
                alpha_up_mw_per_mbps: 868.98,
                alpha_down_mw_per_mbps: 122.12,
                beta_mw: 817.88,
                idle_mw: 0.0,
                active_gap_ms: 100.0,
                promotion: stage(659.4, 582.1),
                // DCH, then FACH.
                tail: vec![stage(803.9, 8088.0), stage(601.3, 824.0)],
            },
            PathRole::Wired => return None,
        };
        Some(p)
    }
}

/// The radio parameters of each role: the built-in ones unless replaced (`--power
/// ROLE=FILE`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PowerModels {
    replaced: std::collections::BTreeMap<PathRole, RadioParams>,
}

impl PowerModels {
    /// Replaces the parameters of `role` by `params`, whose `radio` must name that role.
    pub fn set(&mut self, role: PathRole, params: RadioParams) -> Result<(), EnergyError> {
        if role == PathRole::Wired {
            return Err(EnergyError::Wired);
        }
        if params.radio != role.as_str() {
            return Err(EnergyError::OtherRadio { role, radio: params.radio });
        }
        self.replaced.insert(role, params);
        Ok(())
    }

    /// The parameters of `role` (`None` for wired paths: no radio).
    pub fn params(&self, role: PathRole) -> Option<RadioParams> {
        match self.replaced.get(&role) {
            Some(p) => Some(p.clone()),
            None => RadioParams::builtin(role),
        }
    }

    /// Whether no role's parameters were replaced.
    pub fn is_builtin(&self) -> bool {
        self.replaced.is_empty()
    }
}

/// Energy so far, split by where it went (millijoules).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct EnergyBreakdown {
    /// Promotions.
    pub promotion_mj: f64,
    /// β during active time.
    pub active_mj: f64,
    /// Throughput-dependent α terms.
    pub data_mj: f64,
    /// Tail stages.
    pub tail_mj: f64,
    /// Idle baseline.
    pub idle_mj: f64,
}

impl EnergyBreakdown {
    /// Total, joules.
    pub fn total_j(&self) -> f64 {
        (self.promotion_mj + self.active_mj + self.data_mj + self.tail_mj + self.idle_mj) / 1000.0
    }
}

/// What the radio is doing.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum RadioState {
    /// Idle (or never used).
    Idle,
    /// Promoting to the connected state.
    Promotion,
    /// Transferring.
    Active,
    /// In tail stage `n` (0-based).
    Tail(usize),
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Seg {
    Promotion,
    Active,
    Tail(usize),
    Idle,
}

/// The power state machine of one radio.
#[derive(Clone, Debug)]
pub struct Radio {
    params: RadioParams,
    /// Energy integrated up to `integrated_to`.
    energy: EnergyBreakdown,
    integrated_to: Instant,
    promo_end: Option<Instant>,
    /// The last moment data flowed (a packet, or the end of the promotion it waited for).
    last: Option<Instant>,
    active_time: Duration,
    bits: u64,
    promotions: u32,
}

fn ms(v: f64) -> Duration {
    Duration::from_secs_f64(v.max(0.0) / 1000.0)
}

impl Radio {
    /// A radio, idle at `now`.
    pub fn new(params: RadioParams, now: Instant) -> Radio {
        Radio {
            params,
            energy: EnergyBreakdown::default(),
            integrated_to: now,
            promo_end: None,
            last: None,
            active_time: Duration::ZERO,
            bits: 0,
            promotions: 0,
        }
    }

    /// Its parameters.
    pub fn params(&self) -> &RadioParams {
        &self.params
    }

    /// The state at `t` given the current anchors.
    fn segment_at(&self, t: Instant) -> (Seg, Option<Instant>) {
        if let Some(pe) = self.promo_end
            && t < pe
        {
            return (Seg::Promotion, Some(pe));
        }
        let Some(last) = self.last else { return (Seg::Idle, None) };
        let mut end = last + ms(self.params.active_gap_ms);
        if t < end {
            return (Seg::Active, Some(end));
        }
        for (i, s) in self.params.tail.iter().enumerate() {
            end += ms(s.time_ms);
            if t < end {
                return (Seg::Tail(i), Some(end));
            }
        }
        (Seg::Idle, None)
    }

    /// The state at `now` (call [`Radio::advance`] first for an up-to-date answer).
    pub fn state(&self, now: Instant) -> RadioState {
        match self.segment_at(now).0 {
            Seg::Promotion => RadioState::Promotion,
            Seg::Active => RadioState::Active,
            Seg::Tail(i) => RadioState::Tail(i),
            Seg::Idle => RadioState::Idle,
        }
    }

    /// Integrates energy up to `now`.
    pub fn advance(&mut self, now: Instant) {
        let mut t = self.integrated_to;
        while t < now {
            let (seg, end) = self.segment_at(t);
            let until = end.map_or(now, |e| e.min(now));
            let secs = (until - t).as_secs_f64();
            match seg {
                Seg::Promotion => self.energy.promotion_mj += self.params.promotion.power_mw * secs,
                Seg::Active => {
                    self.energy.active_mj += self.params.beta_mw * secs;
                    self.active_time += until - t;
                }
                Seg::Tail(i) => {
                    self.energy.tail_mj +=
                        self.params.tail.get(i).map_or(0.0, |s| s.power_mw) * secs;
                }
                Seg::Idle => self.energy.idle_mj += self.params.idle_mw * secs,
            }
            if until <= t {
                break;
            }
            t = until;
        }
        self.integrated_to = self.integrated_to.max(now);
    }

    /// The path sent `up_bytes` and received `down_bytes` at `now` (data and ACKs alike).
    pub fn on_traffic(&mut self, now: Instant, up_bytes: u64, down_bytes: u64) {
        if up_bytes == 0 && down_bytes == 0 {
            return;
        }
        self.wake(now);
        let mbit_up = up_bytes as f64 * 8.0 / 1e6;
        let mbit_down = down_bytes as f64 * 8.0 / 1e6;
        self.energy.data_mj += self.params.alpha_up_mw_per_mbps * mbit_up
            + self.params.alpha_down_mw_per_mbps * mbit_down;
        self.bits += (up_bytes + down_bytes) * 8;
    }

    /// Keeps the radio up at `now` as a packet would, without charging data: what a radio
    /// spends when the connection keeps it connected (promotion when idle, then active
    /// power and the tail), as an all-paths scheduler does with a path whose share of the
    /// traffic another path carried.
    pub fn keep_up(&mut self, now: Instant) {
        self.wake(now);
    }

    fn wake(&mut self, now: Instant) {
        self.advance(now);
        match self.segment_at(now).0 {
            Seg::Idle => {
                let end = now + ms(self.params.promotion.time_ms);
                self.promo_end = Some(end);
                self.last = Some(end);
                self.promotions += 1;
            }
            Seg::Promotion => {
                // Data waits for the promotion to finish.
            }
            Seg::Active | Seg::Tail(_) => {
                self.last = Some(self.last.map_or(now, |l| l.max(now)));
            }
        }
    }

    /// Energy so far (as of the last [`Radio::advance`] or traffic).
    pub fn energy(&self) -> EnergyBreakdown {
        self.energy
    }

    /// Total energy so far, joules.
    pub fn energy_j(&self) -> f64 {
        self.energy.total_j()
    }

    /// Time spent in the active state.
    pub fn active_time(&self) -> Duration {
        self.active_time
    }

    /// Number of idle → active promotions.
    pub fn promotions(&self) -> u32 {
        self.promotions
    }

    /// The state power at `now`, mW (without the throughput term).
    pub fn state_power_mw(&self, now: Instant) -> f64 {
        match self.segment_at(now).0 {
            Seg::Promotion => self.params.promotion.power_mw,
            Seg::Active => self.params.beta_mw,
            Seg::Tail(i) => self.params.tail.get(i).map_or(0.0, |s| s.power_mw),
            Seg::Idle => self.params.idle_mw,
        }
    }

    /// Whether the radio is awake (promoting, active or in its tail) at `now`: sending on it
    /// then costs no promotion.
    pub fn is_awake(&self, now: Instant) -> bool {
        !matches!(self.segment_at(now).0, Seg::Idle)
    }

    /// The extra energy (mJ) that sending `bytes` up at `now` would cost: the data term,
    /// plus a promotion and a full tail when the radio is idle. Used to pick the cheapest
    /// path for ACKs.
    pub fn marginal_cost_mj(&self, now: Instant, bytes: u64) -> f64 {
        let data = self.params.alpha_up_mw_per_mbps * bytes as f64 * 8.0 / 1e6;
        if self.is_awake(now) {
            data
        } else {
            let p = &self.params.promotion;
            let tail: f64 = self.params.tail.iter().map(|s| s.power_mw * s.time_ms / 1000.0).sum();
            data + p.power_mw * p.time_ms / 1000.0
                + self.params.beta_mw * self.params.active_gap_ms / 1000.0
                + tail
        }
    }
}

/// Battery accounting for a device with several radios.
#[derive(Clone, Debug, PartialEq)]
pub struct Battery {
    /// Capacity, joules.
    pub capacity_j: f64,
}

impl Battery {
    /// What is left after `used_j`, never below zero.
    pub fn residual_j(&self, used_j: f64) -> f64 {
        (self.capacity_j - used_j).max(0.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(ms: u64) -> Instant {
        Instant::from_micros(ms * 1000)
    }

    fn lte() -> RadioParams {
        RadioParams::builtin(PathRole::Lte).unwrap()
    }

    #[test]
    fn builtin_parameters_are_valid_per_role() {
        for role in [PathRole::Wifi, PathRole::Lte, PathRole::ThreeG] {
            let p = RadioParams::builtin(role).unwrap();
            assert_eq!(p.radio, role.as_str());
            p.validate().unwrap();
        }
        assert_eq!(RadioParams::builtin(PathRole::ThreeG).unwrap().tail.len(), 2);
        assert!(RadioParams::builtin(PathRole::Wired).is_none());
        assert_eq!(lte().alpha_up_mw_per_mbps, 438.39);
    }

    #[test]
    fn negative_or_non_finite_parameters_are_invalid() {
        let mut p = lte();
        p.beta_mw = -5.0;
        assert!(p.validate().is_err());
        let mut p = lte();
        p.tail[0].time_ms = f64::NAN;
        assert!(p.validate().is_err());
    }

    #[test]
    fn one_burst_costs_promotion_active_data_and_a_full_tail() {
        let p = lte();
        let mut r = Radio::new(p.clone(), t(0));
        // One packet of 1 Mbit (125 000 bytes) down at t = 1 s.
        r.on_traffic(t(1000), 0, 125_000);
        r.advance(t(60_000));
        let e = r.energy();
        let promo = 1210.7 * 0.2601;
        let active = 1288.04 * 0.100;
        let data = 51.97 * 1.0;
        let tail = 1060.0 * 11.576;
        assert!((e.promotion_mj - promo).abs() < 1e-6, "{e:?}");
        assert!((e.active_mj - active).abs() < 1e-6, "{e:?}");
        assert!((e.data_mj - data).abs() < 1e-9, "{e:?}");
        assert!((e.tail_mj - tail).abs() < 1e-6, "{e:?}");
        assert!((r.energy_j() - (promo + active + data + tail) / 1000.0).abs() < 1e-9);
        assert_eq!(r.state(t(60_000)), RadioState::Idle);
        assert_eq!(r.promotions(), 1);
    }

    #[test]
    fn two_bursts_within_one_tail_pay_one_promotion_and_the_tail_once_more() {
        let mut r = Radio::new(lte(), t(0));
        r.on_traffic(t(0), 1000, 0);
        // 5 s later, inside the 11.576 s tail.
        r.on_traffic(t(5000), 1000, 0);
        r.advance(t(100_000));
        let e = r.energy();
        assert_eq!(r.promotions(), 1);
        // First burst: promotion to 260.1 ms, active to 360.1 ms, tail until 5 s (cut short).
        // Second: active 100 ms, then the full tail.
        let tail_first = (5.0 - 0.3601) * 1060.0;
        let tail_second = 11.576 * 1060.0;
        assert!((e.tail_mj - (tail_first + tail_second)).abs() < 1e-6, "{e:?}");
        assert!((e.active_mj - 2.0 * 0.1 * 1288.04).abs() < 1e-6, "{e:?}");
        assert!((e.promotion_mj - 1210.7 * 0.2601).abs() < 1e-6);
        assert!((r.active_time().as_secs_f64() - 0.2).abs() < 1e-6);
    }

    #[test]
    fn a_burst_after_the_tail_pays_a_second_promotion() {
        let mut r = Radio::new(lte(), t(0));
        r.on_traffic(t(0), 100, 0);
        r.on_traffic(t(30_000), 100, 0);
        r.advance(t(60_000));
        assert_eq!(r.promotions(), 2);
        assert!((r.energy().tail_mj - 2.0 * 11.576 * 1060.0).abs() < 1e-6);
    }

    #[test]
    fn continuous_traffic_stays_active_and_energy_is_monotonic() {
        let mut r = Radio::new(RadioParams::builtin(PathRole::Wifi).unwrap(), t(0));
        let mut last = 0.0;
        for k in 0..1000 {
            r.on_traffic(t(k * 10), 0, 1500);
            r.advance(t(k * 10 + 5));
            assert!(r.energy_j() >= last);
            last = r.energy_j();
        }
        // 10 s of traffic every 10 ms: active almost the whole time.
        assert!(r.active_time().as_secs_f64() > 9.9);
        assert_eq!(r.promotions(), 1);
    }

    #[test]
    fn replaced_power_models_must_be_for_their_role() {
        let mut m = PowerModels::default();
        assert!(m.is_builtin());
        assert_eq!(m.params(PathRole::Lte), RadioParams::builtin(PathRole::Lte));
        let mut lte = RadioParams::builtin(PathRole::Lte).unwrap();
        lte.beta_mw *= 2.0;
        m.set(PathRole::Lte, lte.clone()).unwrap();
        assert_eq!(m.params(PathRole::Lte), Some(lte.clone()));
        assert_eq!(m.params(PathRole::Wifi), RadioParams::builtin(PathRole::Wifi));
        let e = m.set(PathRole::Wifi, lte.clone()).unwrap_err().to_string();
        assert_eq!(e, "power model for wifi: the file is for radio `lte`");
        assert!(m.set(PathRole::Wired, lte).is_err());
        assert_eq!(m.params(PathRole::Wired), None);
    }

    #[test]
    fn an_idle_radio_costs_more_to_wake_than_an_awake_one() {
        let mut r = Radio::new(lte(), t(0));
        let idle_cost = r.marginal_cost_mj(t(0), 100);
        r.on_traffic(t(0), 100, 0);
        let awake_cost = r.marginal_cost_mj(t(1000), 100);
        assert!(idle_cost > 1000.0 * awake_cost);
        assert!(Battery { capacity_j: 300.0 }.residual_j(400.0) == 0.0);
    }
}
