//! MARC: Media-Aware Rate Control (Wang, Banerjee, Jamin) on top of TFRC.
//!
//! A stream that has been sending below its fair share earns tokens; when congestion starts
//! it may reduce its rate more slowly while it has tokens. Once per feedback interval I
//! (ALGORITHMS.md §1; token formula from the MARC slides [source], reduction rule and
//! clamp [approx]):
//!
//! ```text
//! C = β·C' + (T − W_send)·I        β = 0.9, C ≥ 0
//! if T < W':  C > 0 → W = max(T, (1 − δ)·W')   δ = 0.1
//!             C ≤ 0 → W = T
//! else        W = T
//! ```
//! T is the rate TFRC allows; W' MARC's own previous allowed rate (its "self-clocked
//! rate"), so a hold starts from where the rate stood — the fair share when the stream
//! was well-behaved — and decays by δ per feedback interval while tokens last, as the
//! slides' reaction-time plots show; W_send the rate actually sent in the last interval,
//! limited by the media rate and by the receiver's application read rate (reported with
//! READ_RATE and passed in through [`Controller::on_read_rate`]). Between feedback
//! intervals a lower T (an RTT sample, the no-feedback timer) does not cut a hold short;
//! a higher T is taken at once. [`HoldAnchor::Sent`] is the earlier rule, anchored at
//! W_send (an ablation, `marc-sent-anchor`). With the tokens forced to zero MARC is
//! exactly TFRC.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::cc::tfrc::{RateFeedback, TfrcConfig, TfrcSender};
use crate::cc::{Controller, ControllerFactory, RateControlState, RttSample};
use crate::path::PathId;
use crate::time::Instant;

/// Settings of MARC.
#[derive(Clone, Debug, PartialEq)]
pub struct MarcConfig {
    /// The underlying TFRC.
    pub tfrc: TfrcConfig,
    /// Token decay per interval, β (0.9) [source: MARC slides].
    pub beta: f64,
    /// Largest reduction per interval while tokens last, δ (0.1) [approx].
    pub delta: f64,
    /// Keep the token account at zero (MARC then equals TFRC; for tests and ablations).
    pub zero_tokens: bool,
    /// What a hold reduces from.
    pub anchor: HoldAnchor,
}

/// The rate a MARC hold reduces by δ from, once per feedback interval.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HoldAnchor {
    /// MARC's own previous allowed rate (the self-clocked rate of the slides).
    #[default]
    Allowed,
    /// The rate sent in the last interval (≤ the media rate): the earlier rule, kept as
    /// an ablation.
    Sent,
}

impl Default for MarcConfig {
    fn default() -> Self {
        MarcConfig {
            tfrc: TfrcConfig::default(),
            beta: 0.9,
            delta: 0.1,
            zero_tokens: false,
            anchor: HoldAnchor::Allowed,
        }
    }
}

/// One path's MARC state.
#[derive(Clone, Debug)]
pub struct MarcPath {
    tfrc: TfrcSender,
    /// Token account C, bytes.
    tokens: f64,
    /// Bytes sent since the interval began.
    sent: u64,
    interval_start: Instant,
    /// The rate MARC allows, bytes/s.
    rate: f64,
    /// W_send of the last interval, bytes/s (for traces).
    last_w_send: f64,
}

impl MarcPath {
    /// The token account, bytes.
    pub fn tokens(&self) -> f64 {
        self.tokens
    }
    /// The rate MARC allows, bytes/s.
    pub fn rate(&self) -> f64 {
        self.rate
    }
    /// The rate TFRC alone would allow, bytes/s.
    pub fn tfrc_rate(&self) -> f64 {
        self.tfrc.rate()
    }
}

/// MARC as a [`Controller`] for every path of a connection.
#[derive(Debug)]
pub struct Marc {
    cfg: MarcConfig,
    paths: BTreeMap<PathId, MarcPath>,
    read_rate: Option<f64>,
}

impl Marc {
    /// TFRC's rate changed between feedback intervals: a rise is taken at once; a fall
    /// ends a hold only under the sent-rate anchor or without tokens.
    fn on_tfrc_change(cfg: &MarcConfig, p: &mut MarcPath) {
        let t = p.tfrc.rate();
        let holding = cfg.anchor == HoldAnchor::Allowed && p.tokens > 0.0 && t < p.rate;
        if !holding {
            p.rate = t;
        }
    }

    /// A path's state.
    pub fn path(&self, path: PathId) -> Option<&MarcPath> {
        self.paths.get(&path)
    }

    /// Applies one feedback interval's token update and reduction rule.
    fn on_interval(cfg: &MarcConfig, p: &mut MarcPath, now: Instant, read_rate: Option<f64>) {
        let i = now.saturating_duration_since(p.interval_start).as_secs_f64();
        if i <= 0.0 {
            return;
        }
        let mut w_send = p.sent as f64 / i;
        if let Some(r) = read_rate {
            w_send = w_send.min(r);
        }
        let t = p.tfrc.rate();
        if cfg.zero_tokens {
            p.tokens = 0.0;
        } else {
            p.tokens = (cfg.beta * p.tokens + (t - w_send) * i).max(0.0);
        }
        let anchor = match cfg.anchor {
            HoldAnchor::Allowed => p.rate,
            HoldAnchor::Sent => w_send,
        };
        p.rate = if t < anchor && p.tokens > 0.0 { t.max((1.0 - cfg.delta) * anchor) } else { t };
        p.last_w_send = w_send;
        p.sent = 0;
        p.interval_start = now;
    }
}

impl ControllerFactory for MarcConfig {
    fn build(&self) -> Box<dyn Controller> {
        Box::new(Marc { cfg: self.clone(), paths: BTreeMap::new(), read_rate: None })
    }
    fn kind(&self) -> super::Kind {
        super::Kind::RateFeedback
    }
}

impl Controller for Marc {
    fn on_path_added(&mut self, now: Instant, path: PathId, mss: usize) {
        let tcfg = TfrcConfig { segment_size: mss, ..self.cfg.tfrc.clone() };
        let tfrc = TfrcSender::new(&tcfg, now);
        let rate = tfrc.rate();
        self.paths.insert(
            path,
            MarcPath { tfrc, tokens: 0.0, sent: 0, interval_start: now, rate, last_w_send: 0.0 },
        );
    }

    fn on_path_removed(&mut self, path: PathId) {
        self.paths.remove(&path);
    }

    fn on_sent(&mut self, now: Instant, path: PathId, bytes: usize, _in_flight: u64) {
        if let Some(p) = self.paths.get_mut(&path) {
            p.sent += bytes as u64;
            p.tfrc.on_sent(bytes);
            let before = p.tfrc.rate();
            p.tfrc.on_timeout(now);
            if p.tfrc.rate() != before {
                Marc::on_tfrc_change(&self.cfg, p);
            }
        }
    }

    fn on_ack(
        &mut self,
        now: Instant,
        path: PathId,
        _sent: Instant,
        _bytes: usize,
        rtt: &RttSample,
    ) {
        if let Some(p) = self.paths.get_mut(&path) {
            let before = p.tfrc.rate();
            p.tfrc.on_rtt_sample(now, rtt.latest);
            p.tfrc.on_timeout(now);
            if p.tfrc.rate() != before {
                Marc::on_tfrc_change(&self.cfg, p);
            }
        }
    }

    fn on_congestion_event(
        &mut self,
        _now: Instant,
        _path: PathId,
        _sent: Instant,
        _persistent: bool,
    ) {
    }

    fn on_rate_feedback(&mut self, now: Instant, path: PathId, fb: &RateFeedback) {
        let read_rate = self.read_rate;
        if let Some(p) = self.paths.get_mut(&path) {
            p.tfrc.on_feedback(now, fb);
            Marc::on_interval(&self.cfg, p, now, read_rate);
        }
    }

    fn on_read_rate(&mut self, _now: Instant, read_rate_bps: f64) {
        if read_rate_bps.is_finite() && read_rate_bps > 0.0 {
            self.read_rate = Some(read_rate_bps / 8.0);
        }
    }

    fn window(&self, path: PathId) -> u64 {
        self.paths.get(&path).map_or(0, |p| {
            let r = p.tfrc.rtt().unwrap_or(Duration::from_secs(1)).as_secs_f64();
            (2.0 * p.rate * r).max(4.0 * self.cfg.tfrc.segment_size as f64) as u64
        })
    }

    fn pacing_rate(&self, path: PathId) -> Option<u64> {
        self.paths.get(&path).map(|p| p.rate.max(1.0) as u64)
    }

    fn name(&self) -> &'static str {
        "marc"
    }

    fn rate_control_state(&self, path: PathId) -> Option<RateControlState> {
        self.paths.get(&path).map(|p| RateControlState {
            allowed: p.rate,
            tfrc: p.tfrc.rate(),
            tokens: Some(p.tokens),
            w_send: Some(p.last_w_send),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::tfrc::TfrcConfig;

    fn t(ms: u64) -> Instant {
        Instant::from_micros(ms * 1000)
    }

    fn rtt(ms: u64) -> RttSample {
        let d = Duration::from_millis(ms);
        RttSample { latest: d, smoothed: d, min: d }
    }

    /// Drives a controller with a fixed script: sends at `send_bps` (bytes/s) and gets
    /// feedback every 100 ms with the given loss rates. Returns the pacing rates.
    fn script(c: &mut dyn Controller, send_bps: f64, losses: &[f64]) -> Vec<u64> {
        let path = PathId(0);
        c.on_path_added(t(0), path, 1000);
        c.on_ack(t(50), path, t(0), 1000, &rtt(50));
        let mut out = Vec::new();
        for (k, &p) in losses.iter().enumerate() {
            let now = t(100 * (k as u64 + 1));
            c.on_sent(now, path, (send_bps * 0.1) as usize, 0);
            c.on_rate_feedback(
                now,
                path,
                &RateFeedback { x_recv: send_bps, p, t_delay: Duration::ZERO },
            );
            out.push(c.pacing_rate(path).unwrap());
        }
        out
    }

    #[test]
    fn without_tokens_marc_is_exactly_tfrc() {
        let losses: Vec<f64> = (0..60)
            .map(|k| {
                if k < 20 {
                    0.0
                } else if k < 40 {
                    0.02
                } else {
                    0.005
                }
            })
            .collect();
        let mut tfrc = TfrcConfig { segment_size: 1000, ..TfrcConfig::default() }.build();
        let mut marc = MarcConfig {
            tfrc: TfrcConfig { segment_size: 1000, ..TfrcConfig::default() },
            zero_tokens: true,
            ..MarcConfig::default()
        }
        .build();
        assert_eq!(
            script(tfrc.as_mut(), 50_000.0, &losses),
            script(marc.as_mut(), 50_000.0, &losses)
        );
    }

    #[test]
    fn a_stream_below_its_share_earns_tokens_and_reduces_slowly() {
        let mut m = Marc {
            cfg: MarcConfig {
                tfrc: TfrcConfig { segment_size: 1000, ..TfrcConfig::default() },
                ..MarcConfig::default()
            },
            paths: BTreeMap::new(),
            read_rate: None,
        };
        let path = PathId(0);
        m.on_path_added(t(0), path, 1000);
        m.on_ack(t(50), path, t(0), 1000, &rtt(50));
        // Light loss: TFRC allows far more than the 44 kB/s the stream sends → tokens grow.
        for k in 1..=50u64 {
            m.on_sent(t(100 * k), path, 4400, 0);
            m.on_rate_feedback(
                t(100 * k),
                path,
                &RateFeedback { x_recv: 44_000.0, p: 0.0005, t_delay: Duration::ZERO },
            );
        }
        let tokens = m.path(path).unwrap().tokens();
        assert!(tokens > 0.0, "tokens {tokens}");
        // Heavy congestion: TFRC drops far below 44 kB/s; MARC falls by at most δ per
        // interval from its own allowed rate.
        let before = m.path(path).unwrap().rate();
        assert!(before > 44_000.0, "the allowed rate stands above the media rate: {before}");
        m.on_sent(t(5100), path, 4400, 0);
        m.on_rate_feedback(
            t(5100),
            path,
            &RateFeedback { x_recv: 44_000.0, p: 0.2, t_delay: Duration::ZERO },
        );
        let p = m.path(path).unwrap();
        let held = 0.9 * before;
        assert!(p.tfrc_rate() < 44_000.0 * 0.5, "TFRC collapses: {}", p.tfrc_rate());
        assert!((p.rate() - held).abs() < 1.0, "MARC holds 90 % of its rate: {}", p.rate());
        // Then it decays by δ per interval from there while the tokens last, down to TFRC.
        let mut last = p.rate();
        let mut steps = 0;
        for k in 52..=120u64 {
            m.on_sent(t(100 * k), path, (last * 0.1) as usize, 0);
            m.on_rate_feedback(
                t(100 * k),
                path,
                &RateFeedback { x_recv: 44_000.0, p: 0.2, t_delay: Duration::ZERO },
            );
            let p = m.path(path).unwrap();
            assert!(p.rate() >= p.tfrc_rate() - 1e-6 && p.rate() <= last + 1e-6);
            if p.rate() > p.tfrc_rate() + 1.0 {
                assert!((p.rate() - 0.9 * last).abs() < 1.0, "step {k}: {} after {last}", p.rate());
                steps += 1;
            }
            last = p.rate();
        }
        assert!(steps >= 3, "a slow decay over several intervals: {steps}");
        assert!((last - m.path(path).unwrap().tfrc_rate()).abs() < 1.0, "ends at TFRC");
    }

    #[test]
    fn the_sent_anchor_ablation_holds_at_the_media_rate() {
        let mut m = Marc {
            cfg: MarcConfig {
                tfrc: TfrcConfig { segment_size: 1000, ..TfrcConfig::default() },
                anchor: HoldAnchor::Sent,
                ..MarcConfig::default()
            },
            paths: BTreeMap::new(),
            read_rate: None,
        };
        let path = PathId(0);
        m.on_path_added(t(0), path, 1000);
        m.on_ack(t(50), path, t(0), 1000, &rtt(50));
        for k in 1..=50u64 {
            m.on_sent(t(100 * k), path, 4400, 0);
            m.on_rate_feedback(
                t(100 * k),
                path,
                &RateFeedback { x_recv: 44_000.0, p: 0.0005, t_delay: Duration::ZERO },
            );
        }
        m.on_sent(t(5100), path, 4400, 0);
        m.on_rate_feedback(
            t(5100),
            path,
            &RateFeedback { x_recv: 44_000.0, p: 0.2, t_delay: Duration::ZERO },
        );
        let p = m.path(path).unwrap();
        assert!((p.rate() - 0.9 * 44_000.0).abs() < 1.0, "held at 90 % of W_send: {}", p.rate());
    }

    #[test]
    fn the_read_rate_limits_the_measured_sending_rate() {
        let mut m = MarcConfig::default().build();
        let path = PathId(0);
        m.on_path_added(t(0), path, 1000);
        m.on_read_rate(t(0), 80_000.0); // 10 kB/s
        m.on_ack(t(50), path, t(0), 1000, &rtt(50));
        m.on_sent(t(100), path, 100_000, 0);
        m.on_rate_feedback(
            t(100),
            path,
            &RateFeedback { x_recv: 10_000.0, p: 0.0, t_delay: Duration::ZERO },
        );
        assert!(m.pacing_rate(path).unwrap() > 0);
    }
}
