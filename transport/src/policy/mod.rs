//! Path-mode policies: when a second, costlier radio should carry data.
//!
//! The MPTCP-QE paper's receiver-side **aeSUM** (ALGORITHMS.md §4): every sampling interval
//! the receiver measures what arrived over WiFi, forecasts the next interval with Holt's
//! double exponential smoothing, and compares the forecast with the **application read
//! rate** (what the player actually read). While WiFi alone covers the read rate the
//! connection runs in *Partial* mode (WiFi only, LTE as backup); otherwise in *Full* mode.
//! The decision is announced to the sender with PATH_STATUS, the MP_PRIO analogue.
//!
//! Also here: eMTCP's offload split (how much each path should carry in Full mode), the
//! [`ModeSwitch`] that runs aeSUM (or plain handover) beside a receiving connection, the
//! weSACK ACK-path policy ([`CheapestRadioAcks`]), [`PathPolicy`], the profile's choice
//! among them, and the [`PolicyRunner`] that runs a profile's policy and radio models
//! beside a receiving connection for every driver (the simulator, the UDP driver).

use std::sync::Arc;
use std::time::Duration;

use crate::proto::AckPathPolicy;
use crate::time::Instant;

pub mod mode_switch;
pub mod runner;
pub mod wesack;

pub use crate::path::role_cost;
pub use mode_switch::{ModeSwitch, SwitchReason};
pub use runner::{EnergySnapshot, PolicyRunner, RadioSnapshot, shadow_energy_j};
pub use wesack::CheapestRadioAcks;

/// Which energy-aware path policy a profile runs beside the connection.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub enum PathPolicy {
    /// None: every path is active; the scheduler alone decides.
    #[default]
    None,
    /// WiFi only while it is usable; the costly paths are backups, used when WiFi fails.
    Handover,
    /// eMTCP: offload scheduling only (the scheduler does it); no mode switch.
    Emtcp,
    /// MPTCP-QE: the receiver's aeSUM mode switch and the weSACK ACK path, each of which
    /// can be switched off for ablations (abCWND is the profile's controller).
    MptcpQe {
        /// Run aeSUM (Partial/Full mode switch) on the receiver.
        aesum: bool,
        /// Send ACKs on the cheapest radio (weSACK).
        wesack: bool,
        /// aeSUM's switching rule.
        rule: AeSumRule,
    },
}

/// Which of aeSUM's switching rules a profile runs.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum AeSumRule {
    /// The paper's plain comparison on every sample ([`AeSumConfig::paper`], profile
    /// `mptcp-qe-paper-rule`).
    Paper,
    /// The band with five agreeing samples each way ([`AeSumConfig::sample_band`],
    /// profile `mptcp-qe-band`, an ablation).
    SampleBand,
    /// Partial after five agreeing samples, Full after a shortfall of a second of media
    /// ([`AeSumConfig::band`], profile `mptcp-qe`).
    Shortfall,
}

impl PathPolicy {
    /// The receiver-side mode switch this policy runs, created at `now`; `None` when the
    /// policy has none.
    pub fn mode_switch(&self, now: Instant) -> Option<ModeSwitch> {
        self.mode_switch_with(&self.aesum_config(), now)
    }

    /// aeSUM's settings for this policy: those of its rule, the paper's for policies
    /// that run no aeSUM.
    pub fn aesum_config(&self) -> AeSumConfig {
        match *self {
            PathPolicy::MptcpQe { rule: AeSumRule::Shortfall, .. } => AeSumConfig::band(),
            PathPolicy::MptcpQe { rule: AeSumRule::SampleBand, .. } => AeSumConfig::sample_band(),
            _ => AeSumConfig::paper(),
        }
    }

    /// As [`PathPolicy::mode_switch`], with aeSUM's settings given.
    pub fn mode_switch_with(&self, aesum: &AeSumConfig, now: Instant) -> Option<ModeSwitch> {
        match *self {
            PathPolicy::Handover => Some(ModeSwitch::handover(now)),
            PathPolicy::MptcpQe { aesum: true, .. } => Some(ModeSwitch::aesum(aesum.clone(), now)),
            _ => None,
        }
    }

    /// Whether a receiver repeats its ACK at once when its link reports a transmit
    /// failure (weSACK's ACK-loss detection; see `Connection::on_transmit_failure`).
    pub fn repeats_acks(&self) -> bool {
        matches!(self, PathPolicy::MptcpQe { wesack: true, .. })
    }

    /// The ACK-path policy this policy asks for; `None`: the connection's default.
    pub fn ack_path(&self) -> Option<Arc<dyn AckPathPolicy>> {
        match *self {
            PathPolicy::MptcpQe { wesack: true, .. } => Some(Arc::new(CheapestRadioAcks)),
            _ => None,
        }
    }
}

/// Holt's linear (double exponential) smoothing:
/// `a_t = α·y_t + (1−α)(a_{t−1} + b_{t−1})`, `b_t = β(a_t − a_{t−1}) + (1−β)·b_{t−1}`,
/// forecast `ŷ_{t+1} = a_t + b_t`.
#[derive(Clone, Debug, PartialEq)]
pub struct Holt {
    alpha: f64,
    beta: f64,
    level: Option<f64>,
    trend: f64,
}

impl Holt {
    /// A forecaster with smoothing weights α (level) and β (trend), each in (0, 1].
    pub fn new(alpha: f64, beta: f64) -> Holt {
        Holt { alpha: alpha.clamp(1e-6, 1.0), beta: beta.clamp(0.0, 1.0), level: None, trend: 0.0 }
    }

    /// Adds observation `y` and returns the one-step-ahead forecast.
    pub fn observe(&mut self, y: f64) -> f64 {
        match self.level {
            None => {
                self.level = Some(y);
                self.trend = 0.0;
            }
            Some(a_prev) => {
                let a = self.alpha * y + (1.0 - self.alpha) * (a_prev + self.trend);
                self.trend = self.beta * (a - a_prev) + (1.0 - self.beta) * self.trend;
                self.level = Some(a);
            }
        }
        self.forecast()
    }

    /// The current forecast (0 before any observation, never negative).
    pub fn forecast(&self) -> f64 {
        self.level.map_or(0.0, |a| (a + self.trend).max(0.0))
    }
}

/// Whether the costly path carries data.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum PathMode {
    /// Every path carries data.
    Full,
    /// Only the cheap path (WiFi) carries data; the others are backups.
    Partial,
}

/// Settings of aeSUM.
///
/// The paper (§3.1) samples the bytes that arrived over WiFi, forecasts the next sample
/// with Holt-Winters and runs Partial mode when the forecast ŷ ≥ the application read rate
/// AR, Full mode when ŷ < AR; it names no band, no number of agreeing samples and no
/// minimum time in a mode (the sampling interval's value is lost from the text we have).
/// [`AeSumConfig::paper`] is that rule; [`AeSumConfig::band`] adds a band, agreeing
/// samples and a minimum Full time (profile `mptcp-qe`; the paper's rule alone flaps
/// where WiFi hovers near the read rate, profile `mptcp-qe-paper-rule`).
#[derive(Clone, Debug, PartialEq)]
pub struct AeSumConfig {
    /// Sampling interval [approx: the paper's value is lost; 100 ms].
    pub interval: Duration,
    /// Holt's α [approx].
    pub alpha: f64,
    /// Holt's β [approx].
    pub beta: f64,
    /// Consecutive samples that must agree before switching (1: every sample decides).
    pub hysteresis: u32,
    /// Once the costly radio is on, keep it at least this long (zero: no hold).
    pub min_full: Duration,
    /// Partial mode while `forecast ≥ partial_ratio · read_rate` (the paper: 1).
    pub partial_ratio: f64,
    /// Back to Full mode once `forecast < full_ratio · read_rate` (the paper: 1, the same
    /// threshold both ways). Unused when [`AeSumConfig::shortfall_s`] decides instead.
    pub full_ratio: f64,
    /// Back to Full mode only once the stream has fallen this many seconds of media behind
    /// in Partial mode (`None`: the samples decide, as `full_ratio` and `hysteresis` say).
    /// The shortfall is a CUSUM of what WiFi delivered under `partial_ratio · read_rate`:
    /// `S ← max(0, S + (partial_ratio · AR − y) · interval)` per sample `y` of WiFi's
    /// arrivals, and Full once `S ≥ shortfall_s · AR` [approx, not in the paper]. Where
    /// the player reports its buffer ([`AeSum::set_player_buffer`]) the shortfall is
    /// measured on it instead: Full once the buffer has fallen `shortfall_s` (at most half
    /// its highest level) below its highest level since Partial began.
    pub shortfall_s: Option<f64>,
}

impl AeSumConfig {
    /// The paper's rule: every sample compares the forecast with the read rate itself.
    pub fn paper() -> AeSumConfig {
        AeSumConfig {
            interval: Duration::from_millis(100),
            alpha: 0.5,
            beta: 0.3,
            hysteresis: 1,
            min_full: Duration::ZERO,
            partial_ratio: 1.0,
            full_ratio: 1.0,
            shortfall_s: None,
        }
    }

    /// The shortfall rule (profile `mptcp-qe`) [approx, not in the paper]: Partial once
    /// five samples (0.5 s) agree that `forecast ≥ 0.9 · read_rate`; Full again only once
    /// WiFi has left the stream [`SHORTFALL_S`] seconds of media behind (a CUSUM of its
    /// arrivals under 0.9 · read_rate, [`AeSumConfig::shortfall_s`]). A switch to Full
    /// wakes LTE for at least its promotion and tail (about 12.6 J in the built-in
    /// model), so it waits for evidence measured in what the player stands to lose, not
    /// in a count of samples: a lossy WiFi whose window collapses for half a second
    /// costs the player a fraction of a second and no wake-up; a WiFi that falls to a
    /// quarter of the read rate triggers it within about 1.5 s. The ratio under 1 lets
    /// the switch settle on WiFi when it carries nearly all of the read rate (headers
    /// keep WiFi's payload rate a few percent under its link rate). No minimum Full time:
    /// holding LTE on for its tail keeps it carrying data at its active power
    /// (docs/ALGORITHMS.md).
    pub fn band() -> AeSumConfig {
        AeSumConfig { shortfall_s: Some(SHORTFALL_S), ..AeSumConfig::sample_band() }
    }

    /// The earlier band (an ablation): Full once five samples agree that
    /// `forecast < 0.75 · read_rate`, Partial once five agree that
    /// `forecast ≥ 0.9 · read_rate`.
    pub fn sample_band() -> AeSumConfig {
        AeSumConfig {
            hysteresis: 5,
            min_full: Duration::ZERO,
            partial_ratio: 0.9,
            full_ratio: 0.75,
            ..AeSumConfig::paper()
        }
    }
}

/// How far behind, in seconds of media, WiFi may leave the stream in Partial mode before
/// aeSUM's shortfall rule wakes LTE ([`AeSumConfig::band`]): a quarter of the player's
/// usual 4-s buffer, so that three seconds remain for LTE's promotion (0.26 s) and its
/// slow start [approx; ablation of 0.5, 1 and 2 s in docs/ALGORITHMS.md].
pub const SHORTFALL_S: f64 = 1.0;

impl Default for AeSumConfig {
    /// The paper's rule ([`AeSumConfig::paper`]).
    fn default() -> Self {
        AeSumConfig::paper()
    }
}

/// Why aeSUM last switched to Full mode.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum FullCause {
    /// The samples: WiFi's forecast fell under the read rate (the paper's rule, the sample
    /// band, and the start in Full mode).
    Forecast,
    /// The player's buffer fell from `from_s` to `to_s` seconds of media in Partial mode.
    BufferFell {
        /// Its highest point in Partial mode.
        from_s: f64,
        /// Where it was at the switch.
        to_s: f64,
    },
    /// WiFi's arrivals left the stream this many seconds of media behind (the CUSUM).
    Behind {
        /// Seconds of media at the read rate.
        s: f64,
    },
}

/// The receiver's mode switch.
#[derive(Clone, Debug)]
pub struct AeSum {
    cfg: AeSumConfig,
    holt: Holt,
    mode: PathMode,
    interval_start: Instant,
    wifi_bytes: u64,
    streak: u32,
    /// The CUSUM of WiFi's shortfall in Partial mode, bits ([`AeSumConfig::shortfall_s`]).
    shortfall_bits: f64,
    /// The player's buffer as it last reported it, seconds of media (`None`: unknown).
    player_buffer_s: Option<f64>,
    /// The player's highest buffer since Partial mode began, seconds of media.
    buffer_peak_s: f64,
    /// The player's buffer when Full mode began, seconds of media.
    buffer_at_full_s: f64,
    /// Why the latest switch to Full happened.
    full_cause: FullCause,
    full_since: Option<Instant>,
    switches: u32,
    time_in_partial: Duration,
    mode_since: Instant,
    last_forecast_bps: f64,
}

impl AeSum {
    /// Starts in Full mode at `now` (nothing is known about WiFi yet).
    pub fn new(cfg: AeSumConfig, now: Instant) -> AeSum {
        let holt = Holt::new(cfg.alpha, cfg.beta);
        AeSum {
            cfg,
            holt,
            mode: PathMode::Full,
            interval_start: now,
            wifi_bytes: 0,
            streak: 0,
            shortfall_bits: 0.0,
            player_buffer_s: None,
            buffer_peak_s: 0.0,
            buffer_at_full_s: 0.0,
            full_cause: FullCause::Forecast,
            full_since: Some(now),
            switches: 0,
            time_in_partial: Duration::ZERO,
            mode_since: now,
            last_forecast_bps: 0.0,
        }
    }

    /// The current mode.
    pub fn mode(&self) -> PathMode {
        self.mode
    }

    /// Mode changes so far.
    pub fn switches(&self) -> u32 {
        self.switches
    }

    /// Time spent in Partial mode up to `now`.
    pub fn time_in_partial(&self, now: Instant) -> Duration {
        match self.mode {
            PathMode::Partial => {
                self.time_in_partial + now.saturating_duration_since(self.mode_since)
            }
            PathMode::Full => self.time_in_partial,
        }
    }

    /// The latest WiFi forecast, bits/s.
    pub fn forecast_bps(&self) -> f64 {
        self.last_forecast_bps
    }

    /// Why the latest switch to Full happened.
    pub fn full_cause(&self) -> FullCause {
        self.full_cause
    }

    /// How far WiFi has left the stream behind in Partial mode, bits (0 without the
    /// shortfall rule, and in Full mode).
    pub fn shortfall_bits(&self) -> f64 {
        self.shortfall_bits
    }

    /// The player's buffer, seconds of media ahead of its playout position, as it last
    /// reported it (`None`: unknown, e.g. an application that is not a player). With the
    /// shortfall rule the shortfall is then what the buffer lost in Partial mode: a player
    /// whose buffer is not full reads whatever arrives, so its read rate follows WiFi's
    /// and a shortfall against it never builds up while the buffer drains.
    pub fn set_player_buffer(&mut self, buffer_s: Option<f64>) {
        self.player_buffer_s = buffer_s.filter(|b| b.is_finite() && *b >= 0.0);
    }

    /// `bytes` arrived over WiFi.
    pub fn on_wifi_bytes(&mut self, bytes: u64) {
        self.wifi_bytes += bytes;
    }

    /// When [`AeSum::on_tick`] must next be called.
    pub fn next_tick(&self) -> Instant {
        self.interval_start + self.cfg.interval
    }

    /// Closes every sampling interval that ended by `now`, given the application read rate
    /// (bits/s) measured by the connection. Returns the new mode when it changed.
    pub fn on_tick(&mut self, now: Instant, read_rate_bps: f64) -> Option<PathMode> {
        let mut changed = None;
        // A late call (a real-time driver that woke late) closes several intervals at
        // once with everything that arrived since the last one: each closed interval gets
        // the rate over the whole stretch, and the share of the bytes that belongs to the
        // interval still open stays with it. Called on time (always in the simulator) this
        // is the plain sample: what arrived in the interval over its length.
        let mut rate_bps = 0.0;
        if now >= self.next_tick() {
            let stretch = now.saturating_duration_since(self.interval_start);
            let open = Duration::from_micros(
                (stretch.as_micros() % self.cfg.interval.as_micros().max(1)) as u64,
            );
            let total = self.wifi_bytes as f64;
            let kept = total * open.as_secs_f64() / stretch.as_secs_f64().max(1e-9);
            rate_bps = (total - kept) * 8.0 / (stretch - open).as_secs_f64();
            self.wifi_bytes = kept.round() as u64;
        }
        while now >= self.next_tick() {
            let y = rate_bps;
            self.interval_start += self.cfg.interval;
            let forecast = self.holt.observe(y);
            self.last_forecast_bps = forecast;
            // The player's buffer, where it reports one, says how far WiFi has let the
            // stream fall behind in Partial mode, read rate or not (a player whose WiFi
            // went silent reads nothing, and its buffer drains).
            if let (PathMode::Partial, Some(limit_s), Some(b)) =
                (self.mode, self.cfg.shortfall_s, self.player_buffer_s)
            {
                self.buffer_peak_s = self.buffer_peak_s.max(b);
                let fall = self.buffer_peak_s - b;
                if fall > 0.0 && fall >= limit_s.min(self.buffer_peak_s / 2.0) {
                    self.full_cause = FullCause::BufferFell { from_s: self.buffer_peak_s, to_s: b };
                    self.set_mode(PathMode::Full, self.interval_start);
                    changed = Some(PathMode::Full);
                }
                continue;
            }
            // Nothing read in the meter's window: no rate to compare with (an outage, or
            // before the first read), so no decision either way. A zero read rate would
            // otherwise be "covered" by any forecast, zero included, and turn LTE into a
            // backup in the middle of an outage of every path.
            if read_rate_bps <= 0.0 {
                self.streak = 0;
                continue;
            }
            // Without a buffer: the CUSUM of WiFi's arrivals under the read rate.
            if let (PathMode::Partial, Some(limit_s)) = (self.mode, self.cfg.shortfall_s) {
                let due = self.cfg.partial_ratio * read_rate_bps;
                let interval_s = self.cfg.interval.as_secs_f64();
                self.shortfall_bits = (self.shortfall_bits + (due - y) * interval_s).max(0.0);
                if self.shortfall_bits >= limit_s * read_rate_bps {
                    self.full_cause = FullCause::Behind { s: self.shortfall_bits / read_rate_bps };
                    self.set_mode(PathMode::Full, self.interval_start);
                    changed = Some(PathMode::Full);
                }
                continue;
            }
            let ratio = match self.mode {
                PathMode::Full => self.cfg.partial_ratio,
                PathMode::Partial => self.cfg.full_ratio,
            };
            // A player whose buffer is not full reads whatever arrives, so right after a
            // switch to Full (LTE still promoting) WiFi's arrivals match the read rate;
            // where the player reports its buffer, Partial also waits until the buffer
            // is back where it was when Full began.
            let recovered = self.player_buffer_s.is_none_or(|b| b >= self.buffer_at_full_s);
            let want = if forecast >= ratio * read_rate_bps && recovered {
                PathMode::Partial
            } else {
                PathMode::Full
            };
            if want == self.mode {
                self.streak = 0;
                continue;
            }
            self.streak += 1;
            if self.streak < self.cfg.hysteresis {
                continue;
            }
            let t = self.interval_start;
            if want == PathMode::Partial
                && self
                    .full_since
                    .is_some_and(|s| t.saturating_duration_since(s) < self.cfg.min_full)
            {
                continue;
            }
            if want == PathMode::Full {
                self.full_cause = FullCause::Forecast;
            }
            self.set_mode(want, t);
            changed = Some(want);
        }
        changed
    }

    fn set_mode(&mut self, mode: PathMode, at: Instant) {
        if self.mode == PathMode::Partial {
            self.time_in_partial += at.saturating_duration_since(self.mode_since);
        }
        self.mode = mode;
        self.mode_since = at;
        self.streak = 0;
        self.shortfall_bits = 0.0;
        self.buffer_peak_s = self.player_buffer_s.unwrap_or(0.0);
        if mode == PathMode::Full {
            self.buffer_at_full_s = self.player_buffer_s.unwrap_or(0.0);
        }
        self.switches += 1;
        self.full_since = (mode == PathMode::Full).then_some(at);
    }
}

/// eMTCP's offload split in Full mode [approx]: the cheap path carries
/// `min(read_rate, forecast)`, the costly path only the shortfall. Returns
/// `(cheap_bps, costly_bps)`.
pub fn offload_split(read_rate_bps: f64, cheap_forecast_bps: f64) -> (f64, f64) {
    let r = read_rate_bps.max(0.0);
    let f = cheap_forecast_bps.max(0.0);
    (r.min(f), (r - f).max(0.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(ms: u64) -> Instant {
        Instant::from_micros(ms * 1000)
    }

    #[test]
    fn holt_follows_a_linear_trend_exactly_once_warmed_up() {
        let mut h = Holt::new(0.5, 0.3);
        let mut f = 0.0;
        for k in 0..200 {
            f = h.observe(10.0 + 2.0 * k as f64);
        }
        // Next value of the line is 10 + 2·200.
        assert!((f - 410.0).abs() < 1e-6, "{f}");
        let mut flat = Holt::new(0.5, 0.3);
        for _ in 0..50 {
            flat.observe(7.0);
        }
        assert!((flat.forecast() - 7.0).abs() < 1e-9);
    }

    #[test]
    fn holt_matches_a_hand_computation() {
        let mut h = Holt::new(0.5, 0.3);
        h.observe(10.0); // a = 10, b = 0
        let f = h.observe(20.0); // a = 0.5·20 + 0.5·10 = 15; b = 0.3·5 = 1.5
        assert!((f - 16.5).abs() < 1e-12);
    }

    /// Feeds WiFi arrivals at `wifi_bps` for `secs` seconds in 10 ms steps.
    fn run(
        a: &mut AeSum,
        from_ms: u64,
        secs: u64,
        wifi_bps: f64,
        read_bps: f64,
    ) -> Vec<(u64, PathMode)> {
        let mut changes = Vec::new();
        for k in 0..secs * 100 {
            let now = from_ms + k * 10;
            a.on_wifi_bytes((wifi_bps / 8.0 / 100.0) as u64);
            if let Some(m) = a.on_tick(t(now), read_bps) {
                changes.push((now, m));
            }
        }
        changes
    }

    #[test]
    fn partial_while_wifi_covers_the_read_rate_full_when_it_does_not_and_back() {
        let cfg = AeSumConfig { min_full: Duration::from_secs(2), ..AeSumConfig::sample_band() };
        let mut a = AeSum::new(cfg, t(0));
        // WiFi 2 Mbit/s, reader 1 Mbit/s → Partial (after the minimum Full time).
        let c1 = run(&mut a, 0, 5, 2e6, 1e6);
        assert_eq!(c1.last().map(|c| c.1), Some(PathMode::Partial), "{c1:?}");
        // WiFi drops to 0.5 Mbit/s → Full within a few intervals.
        let c2 = run(&mut a, 5000, 3, 0.5e6, 1e6);
        let (at, m) = c2[0];
        assert_eq!(m, PathMode::Full);
        assert!(at - 5000 <= 800, "switched after {} ms", at - 5000);
        // WiFi back → Partial again, but not before the minimum Full time has passed.
        let c3 = run(&mut a, 8000, 5, 2e6, 1e6);
        let (at, m) = c3[0];
        assert_eq!(m, PathMode::Partial);
        assert!(at >= 5000 + 2000, "{at}");
        assert_eq!(a.switches(), 3);
        assert!(a.time_in_partial(t(13_000)) > Duration::from_secs(4));
    }

    #[test]
    fn a_single_dip_does_not_flip_the_mode() {
        let cfg =
            AeSumConfig { min_full: Duration::ZERO, hysteresis: 3, ..AeSumConfig::sample_band() };
        let mut a = AeSum::new(cfg, t(0));
        run(&mut a, 0, 2, 2e6, 1e6);
        assert_eq!(a.mode(), PathMode::Partial);
        // One 100 ms interval with nothing, then back to normal.
        for k in 0..10 {
            a.on_tick(t(2000 + k * 10), 1e6);
        }
        let c = run(&mut a, 2100, 2, 2e6, 1e6);
        assert!(c.is_empty(), "{c:?}");
    }

    /// WiFi at 4 Mbit/s whose arrivals stop for `gap_ms` every two seconds (a lossy
    /// link's window collapsing), under a 2 Mbit/s reader, for 20 s after 2 s of steady
    /// arrivals; returns the mode changes after the start.
    fn lossy_wifi(cfg: AeSumConfig, gap_ms: u64) -> Vec<(u64, PathMode)> {
        let mut a = AeSum::new(cfg, t(0));
        let mut changes = run(&mut a, 0, 2, 4e6, 2e6);
        assert_eq!(a.mode(), PathMode::Partial, "{changes:?}");
        changes.clear();
        for k in 0..2000u64 {
            let now = 2000 + k * 10;
            if (now % 2000) >= gap_ms {
                a.on_wifi_bytes((4e6 / 8.0 / 100.0) as u64);
            }
            if let Some(m) = a.on_tick(t(now), 2e6) {
                changes.push((now, m));
            }
        }
        changes
    }

    #[test]
    fn the_shortfall_rule_rides_out_a_lossy_wifi_the_sample_band_flips_on() {
        // 0.7 s without arrivals: seven samples under 0.75 × the read rate, so the sample
        // band wakes LTE every two seconds; the stream fell 0.7 × 1.8 Mbit behind, under a
        // second of media, and WiFi's 4 Mbit/s catches it up in between.
        let band = lossy_wifi(AeSumConfig::sample_band(), 700);
        assert!(band.len() >= 10, "{band:?}");
        let shortfall = lossy_wifi(AeSumConfig::band(), 700);
        assert!(shortfall.is_empty(), "{shortfall:?}");
    }

    #[test]
    fn the_shortfall_rule_wakes_lte_once_the_stream_is_a_second_behind() {
        // WiFi falls from 4 to 0.5 Mbit/s under a 2 Mbit/s reader: the stream falls
        // behind 0.9 × 2 − 0.5 = 1.3 Mbit/s, so a second of media (2 Mbit) takes 1.54 s.
        let mut a = AeSum::new(AeSumConfig::band(), t(0));
        run(&mut a, 0, 2, 4e6, 2e6);
        assert_eq!(a.mode(), PathMode::Partial);
        let c = run(&mut a, 2000, 3, 0.5e6, 2e6);
        assert_eq!(c.len(), 1, "{c:?}");
        let (at, m) = c[0];
        assert_eq!(m, PathMode::Full);
        assert!((3500..=3700).contains(&at), "Full at {at} ms, WiFi fell at 2000 ms");
        assert_eq!(a.shortfall_bits(), 0.0, "the shortfall starts again from zero");
        // A WiFi a little under the read rate for long enough is a shortfall too: 5 %
        // under the rule's 0.9 × leaves a second behind after 20 s.
        let mut b = AeSum::new(AeSumConfig::band(), t(0));
        run(&mut b, 0, 2, 4e6, 2e6);
        let c = run(&mut b, 2000, 25, 0.85 * 2e6, 2e6);
        let (at, _) = c[0];
        assert!((21_000..=23_000).contains(&at), "Full at {at} ms");
    }

    /// Feeds a player's buffer that goes from `from_s` to `to_s` (seconds of media) over
    /// `secs` seconds, with WiFi's arrivals at `wifi_bps` and a read rate of `read_bps`,
    /// from `from_ms` on; returns the mode changes.
    fn buffer_run(
        a: &mut AeSum,
        from_ms: u64,
        secs: u64,
        (from_s, to_s): (f64, f64),
        wifi_bps: f64,
        read_bps: f64,
    ) -> Vec<(u64, PathMode)> {
        let mut changes = Vec::new();
        let n = secs * 100;
        for k in 0..n {
            let now = from_ms + k * 10;
            a.set_player_buffer(Some(from_s + (to_s - from_s) * k as f64 / n as f64));
            a.on_wifi_bytes((wifi_bps / 8.0 / 100.0) as u64);
            if let Some(m) = a.on_tick(t(now), read_bps) {
                changes.push((now, m));
            }
        }
        changes
    }

    #[test]
    fn the_shortfall_rule_reads_the_players_buffer_where_it_has_one() {
        let partial = || {
            let mut a = AeSum::new(AeSumConfig::band(), t(0));
            let c = buffer_run(&mut a, 0, 2, (0.0, 4.0), 4e6, 2e6);
            assert_eq!(a.mode(), PathMode::Partial, "{c:?}");
            a
        };
        // WiFi's arrivals tie with the read rate (a player whose buffer is not full reads
        // whatever arrives), but the buffer drains at a third of a second per second:
        // Full once it has lost a second, 3 s later; the arrivals alone never would.
        let mut a = partial();
        let c = buffer_run(&mut a, 2000, 4, (4.0, 2.67), 1.5e6, 1.5e6);
        assert_eq!(c.len(), 1, "{c:?}");
        assert!((4900..=5100).contains(&c[0].0) && c[0].1 == PathMode::Full, "{c:?}");
        // WiFi's arrivals still match what the player reads, but Partial waits until the
        // buffer is back where it was when Full began (3 s).
        assert!(buffer_run(&mut a, 6000, 2, (2.67, 2.9), 1.5e6, 1.5e6).is_empty());
        let c = buffer_run(&mut a, 8000, 2, (2.9, 3.5), 1.5e6, 1.5e6);
        assert_eq!(c.first().map(|c| c.1), Some(PathMode::Partial), "{c:?}");
        // WiFi gone: nothing arrives and nothing is read (the read rate is zero), yet the
        // draining buffer (1 s per second) wakes LTE after a second.
        let mut a = partial();
        let c = buffer_run(&mut a, 2000, 2, (4.0, 2.0), 0.0, 0.0);
        assert_eq!(c.first().map(|c| c.1), Some(PathMode::Full), "{c:?}");
        assert!((2900..=3100).contains(&c[0].0), "{c:?}");
        let FullCause::BufferFell { from_s, to_s } = a.full_cause() else {
            panic!("{:?}", a.full_cause())
        };
        assert!((from_s - 4.0).abs() < 0.1 && (from_s - to_s - 1.0).abs() < 0.1, "{from_s} {to_s}");
        // A dip of half a second that WiFi makes up for wakes nothing.
        let mut a = partial();
        let mut c = buffer_run(&mut a, 2000, 1, (4.0, 3.5), 1e6, 2e6);
        c.extend(buffer_run(&mut a, 3000, 1, (3.5, 4.0), 3e6, 2e6));
        c.extend(buffer_run(&mut a, 4000, 1, (4.0, 3.5), 1e6, 2e6));
        assert!(c.is_empty(), "{c:?}");
        // A short buffer may lose at most half of its highest level: 0.8 s → 0.4 s.
        let mut a = AeSum::new(AeSumConfig::band(), t(0));
        buffer_run(&mut a, 0, 2, (0.0, 0.8), 4e6, 2e6);
        assert_eq!(a.mode(), PathMode::Partial);
        let c = buffer_run(&mut a, 2000, 1, (0.8, 0.3), 0.0, 2e6);
        assert!((2700..=2900).contains(&c[0].0), "{c:?}");
        // Without a buffer (an application that is not a player): the CUSUM decides.
        let mut b = AeSum::new(AeSumConfig::band(), t(0));
        run(&mut b, 0, 2, 4e6, 2e6);
        assert_eq!(run(&mut b, 2000, 2, 0.0, 2e6).first(), Some(&(3200, PathMode::Full)));
        assert!(matches!(b.full_cause(), FullCause::Behind { s } if (s - 1.0).abs() < 0.1));
    }

    #[test]
    fn the_papers_rule_follows_every_sample_with_the_read_rate_as_threshold() {
        let mut a = AeSum::new(AeSumConfig::paper(), t(0));
        // WiFi 2 Mbit/s, reader 1.9 Mbit/s → Partial at the first sample (no hold).
        let c = run(&mut a, 0, 1, 2e6, 1.9e6);
        assert_eq!(c.first(), Some(&(100, PathMode::Partial)), "{c:?}");
        // WiFi just under the read rate → Full within a few samples (the forecast's lag).
        let c = run(&mut a, 1000, 1, 1.8e6, 1.9e6);
        assert_eq!(c.first().map(|c| c.1), Some(PathMode::Full), "{c:?}");
        assert!(c[0].0 - 1000 <= 300, "{c:?}");
        // And back as soon as it covers it again.
        let c = run(&mut a, 2000, 1, 2e6, 1.9e6);
        assert_eq!(c.first().map(|c| c.1), Some(PathMode::Partial), "{c:?}");
        assert!(c[0].0 - 2000 <= 300, "{c:?}");
    }

    #[test]
    fn a_late_call_spreads_what_arrived_over_the_intervals_it_closes() {
        // WiFi steady at 2 Mbit/s, the reader at 1.9: Partial, sampled on time.
        let mut a = AeSum::new(AeSumConfig::paper(), t(0));
        run(&mut a, 0, 2, 2e6, 1.9e6);
        assert_eq!(a.mode(), PathMode::Partial);
        // A driver that wakes 350 ms late sees 350 ms of arrivals at once: three whole
        // intervals close at the same rate, not one at 7 Mbit/s and two at 0 (which would
        // drag the forecast under the read rate and flip the mode).
        a.on_wifi_bytes((2e6 / 8.0 * 0.35) as u64);
        assert_eq!(a.on_tick(t(2350), 1.9e6), None);
        assert!((a.forecast_bps() - 2e6).abs() < 0.05 * 2e6, "{}", a.forecast_bps());
        assert_eq!(a.mode(), PathMode::Partial);
        // The 50 ms of the interval still open stay with it.
        a.on_wifi_bytes((2e6 / 8.0 * 0.05) as u64);
        assert_eq!(a.on_tick(t(2400), 1.9e6), None);
        assert!((a.forecast_bps() - 2e6).abs() < 0.05 * 2e6, "{}", a.forecast_bps());
    }

    #[test]
    fn offload_gives_the_costly_path_only_the_shortfall() {
        assert_eq!(offload_split(3e6, 2e6), (2e6, 1e6));
        assert_eq!(offload_split(1e6, 2e6), (1e6, 0.0));
        assert_eq!(offload_split(-1.0, 2e6), (0.0, 0.0));
    }
}
