//! The receiver's mode switch, run beside a [`Connection`] by its driver (the simulator,
//! the UDP driver) through a [`super::PolicyRunner`]: it needs nothing from the protocol
//! beyond the public API —
//! [`Connection::stats`] for the WiFi arrivals, [`Connection::read_rate_bps`] for the
//! application read rate, and [`Connection::set_path_status`] to announce the mode (each
//! costly path becomes a backup in Partial mode and active again in Full mode; the
//! peer's scheduler then keeps data off backups while WiFi is usable).
//!
//! Two rules:
//! - **aeSUM** ([`ModeSwitch::aesum`], MPTCP-QE): [`AeSum`] on the cheap path's arrivals
//!   and the measured read rate.
//! - **handover** ([`ModeSwitch::handover`]): Partial while the cheap path is usable,
//!   Full once the connection marks it failed (repeated RTOs), it is gone, or nothing at
//!   all arrived on it for [`SILENCE`] (a receiver sends too little to notice a dead path
//!   by its own timeouts).
//!
//! The "cheap" path is the first open path of the cheapest radio kind ([`role_cost`]);
//! every other open path is "costly".

use std::collections::BTreeMap;
use std::time::Duration;

use super::{AeSum, AeSumConfig, PathMode, role_cost};
use crate::path::{PathId, PathStatus};
use crate::proto::Connection;
use crate::time::Instant;

/// How often the switch looks at the connection (also aeSUM's sampling interval).
const POLL_INTERVAL: Duration = Duration::from_millis(100);
/// Handover: the cheap path counts as dead after this long without any datagram.
pub const SILENCE: Duration = Duration::from_secs(1);

#[derive(Clone, Debug)]
enum Rule {
    AeSum(Box<AeSum>),
    Handover,
}

/// Partial/Full mode switch for one receiving connection. Call [`ModeSwitch::poll`]
/// after the connection took input, and at least every 100 ms ([`ModeSwitch::next_poll`]);
/// then let the connection transmit (a mode change queues PATH_STATUS frames).
#[derive(Clone, Debug)]
pub struct ModeSwitch {
    rule: Rule,
    mode: PathMode,
    mode_since: Instant,
    switches: u32,
    partial_before: Duration,
    next_poll: Instant,
    cheap: Option<PathId>,
    cheap_bytes: u64,
    /// The cheap path's received datagram bytes and when they last grew.
    cheap_rx: (u64, Instant),
    applied: BTreeMap<PathId, PathStatus>,
    timeline: Vec<(Instant, PathMode)>,
    /// aeSUM's WiFi forecast and the read rate it compared it with at the latest switch.
    last_reason: Option<SwitchReason>,
}

/// What aeSUM compared when it switched: its forecast of the cheap path's rate and the
/// application read rate, bits/s.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SwitchReason {
    /// When the switch happened.
    pub at: Instant,
    /// The mode switched to.
    pub mode: PathMode,
    /// The cheap path's forecast rate, bits/s.
    pub forecast_bps: f64,
    /// The application's read rate, bits/s.
    pub read_rate_bps: f64,
    /// For a switch to Full: what decided it.
    pub cause: Option<super::FullCause>,
}

impl ModeSwitch {
    fn new(rule: Rule, mode: PathMode, now: Instant) -> ModeSwitch {
        ModeSwitch {
            rule,
            mode,
            mode_since: now,
            switches: 0,
            partial_before: Duration::ZERO,
            next_poll: now,
            cheap: None,
            cheap_bytes: 0,
            cheap_rx: (0, now),
            applied: BTreeMap::new(),
            timeline: vec![(now, mode)],
            last_reason: None,
        }
    }

    /// MPTCP-QE's aeSUM, starting in Full mode at `now`.
    pub fn aesum(cfg: AeSumConfig, now: Instant) -> ModeSwitch {
        ModeSwitch::new(Rule::AeSum(Box::new(AeSum::new(cfg, now))), PathMode::Full, now)
    }

    /// Handover: Partial (costly paths are backups) while the cheap path is usable.
    pub fn handover(now: Instant) -> ModeSwitch {
        ModeSwitch::new(Rule::Handover, PathMode::Partial, now)
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
                self.partial_before + now.saturating_duration_since(self.mode_since)
            }
            PathMode::Full => self.partial_before,
        }
    }

    /// Every mode with the instant it began, oldest first (the first entry is the start).
    pub fn timeline(&self) -> &[(Instant, PathMode)] {
        &self.timeline
    }

    /// aeSUM's latest forecast of the cheap path's rate, bits/s (`None` for handover).
    pub fn forecast_bps(&self) -> Option<f64> {
        match &self.rule {
            Rule::AeSum(a) => Some(a.forecast_bps()),
            Rule::Handover => None,
        }
    }

    /// What aeSUM compared at the latest switch (`None` before one, and for handover).
    pub fn last_reason(&self) -> Option<SwitchReason> {
        self.last_reason
    }

    /// When [`ModeSwitch::poll`] next has work to do.
    pub fn next_poll(&self) -> Instant {
        self.next_poll
    }

    fn set_mode(&mut self, mode: PathMode, at: Instant) {
        if mode == self.mode {
            return;
        }
        if self.mode == PathMode::Partial {
            self.partial_before += at.saturating_duration_since(self.mode_since);
        }
        self.mode = mode;
        self.mode_since = at;
        self.switches += 1;
        self.timeline.push((at, mode));
    }

    /// Samples the connection and, when the mode (or the set of paths) changed, announces
    /// the costly paths' status with [`Connection::set_path_status`]. Cheap to call often:
    /// it does nothing before [`ModeSwitch::next_poll`].
    pub fn poll(&mut self, now: Instant, conn: &mut Connection) {
        if now < self.next_poll || conn.is_closed() {
            return;
        }
        while self.next_poll <= now {
            self.next_poll += POLL_INTERVAL;
        }
        let stats = conn.stats();
        let open = || stats.paths.iter().filter(|p| p.status != PathStatus::Closed);
        let cheap = open().min_by_key(|p| (role_cost(p.role), p.id)).map(|p| p.id);
        let cheap_stats = cheap.and_then(|id| stats.paths.iter().find(|p| p.id == id));
        let received = cheap_stats.map_or(0, |p| p.data_bytes_received);
        if cheap != self.cheap {
            self.cheap = cheap;
            self.cheap_bytes = received;
        }
        let rx = cheap_stats.map_or(0, |p| p.bytes_received);
        if rx != self.cheap_rx.0 {
            self.cheap_rx = (rx, now);
        }
        let arrived = received.saturating_sub(self.cheap_bytes);
        self.cheap_bytes = received;
        match &mut self.rule {
            Rule::AeSum(a) => {
                a.on_wifi_bytes(arrived);
                a.set_player_buffer(conn.local_playout().map(|p| p.buffer_ms as f64 / 1e3));
                let (due, read_rate_bps) = (a.next_tick(), conn.read_rate_bps());
                let changed = a.on_tick(now, read_rate_bps).is_some();
                if conn.is_traced() && a.next_tick() != due {
                    let ev = crate::trace::TraceEvent::ModeSwitch {
                        forecast_bps: a.forecast_bps(),
                        read_rate_bps,
                        mode: match a.mode() {
                            PathMode::Full => "full",
                            PathMode::Partial => "partial",
                        },
                    };
                    conn.trace_event(now, &ev);
                }
                if changed {
                    let m = a.mode();
                    self.last_reason = Some(SwitchReason {
                        at: now,
                        mode: m,
                        forecast_bps: a.forecast_bps(),
                        read_rate_bps,
                        cause: (m == PathMode::Full).then(|| a.full_cause()),
                    });
                    self.set_mode(m, now);
                }
            }
            Rule::Handover => {
                let silent = now.saturating_duration_since(self.cheap_rx.1) > SILENCE;
                let usable = cheap_stats.is_some_and(|p| !p.failed && p.validated) && !silent;
                self.set_mode(if usable { PathMode::Partial } else { PathMode::Full }, now);
            }
        }
        let want = match self.mode {
            PathMode::Partial => PathStatus::Backup,
            PathMode::Full => PathStatus::Active,
        };
        // Only validated paths: the peer ignores a PATH_STATUS for a path it does not know
        // yet, so the announcement waits until the path has joined.
        let costly: Vec<PathId> =
            open().filter(|p| p.validated).map(|p| p.id).filter(|&id| Some(id) != cheap).collect();
        for id in costly {
            let known = self.applied.get(&id).copied();
            // A path starts active: only a change from that needs announcing.
            if known.unwrap_or(PathStatus::Active) != want {
                conn.set_path_status(now, id, want);
            }
            self.applied.insert(id, want);
        }
        if let Some(id) = cheap
            && self.applied.get(&id).copied().unwrap_or(PathStatus::Active) != PathStatus::Active
        {
            // A path that was costly before and is now the cheapest carries data again.
            conn.set_path_status(now, id, PathStatus::Active);
            self.applied.insert(id, PathStatus::Active);
        }
    }
}
