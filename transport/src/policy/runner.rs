//! The energy-aware policy beside one receiving connection, as every driver runs it (the
//! simulator for its session's client, the UDP driver for a client connection).
//!
//! A [`PolicyRunner`] owns
//!
//! - one [`Radio`] per local path (none for wired paths), driven by the datagrams the
//!   path really sent and received, each counted with its IP and UDP headers
//!   ([`IP_UDP_OVERHEAD`]): [`PolicyRunner::on_sent`], [`PolicyRunner::on_received`];
//! - the profile's receiver-side [`ModeSwitch`] ([`PathPolicy::mode_switch_with`]), fed
//!   the connection's measured read rate and announcing each mode with PATH_STATUS:
//!   [`PolicyRunner::poll`], due again at [`PolicyRunner::poll_timeout`];
//! - weSACK's ACK repeat ([`PathPolicy::repeats_acks`]): when a datagram could not be
//!   transmitted, the connection acknowledges again at once
//!   ([`PolicyRunner::on_transmit_failure`]).
//!
//! [`PolicyRunner::snapshot`] gives the radios' energy and the mode timeline, for the
//! session report and the live overlay alike.
//!
//! Beside the radios runs a **shadow** set with the same parameters: each shadow radio
//! is charged the same datagrams on its own path, and every datagram on any path also
//! keeps every other shadow radio up ([`Radio::keep_up`]: promotion, active power,
//! tail, no data charge). That is what the same traffic costs when all radios stay
//! connected, as all-paths `mptcp` keeps them; the energy-aware policies' saving is the
//! gap between the two ([`EnergySnapshot::shadow_all_paths_j`]).
//!
//! A driver indexes the radios by its own path order (the simulator by scenario path,
//! the UDP driver by client path); the runner needs nothing else from it.

use std::time::Duration;

use super::{AeSumConfig, ModeSwitch, PathMode, PathPolicy, SwitchReason};
use crate::energy::{PowerModels, Radio, RadioParams};
use crate::path::IP_UDP_OVERHEAD;
use crate::path::{PathId, PathRole};
use crate::proto::Connection;
use crate::time::Instant;

/// One local path's radio, from the energy model (ALGORITHMS.md §5) driven by the
/// datagrams the path really sent and received.
#[derive(Debug, Clone, PartialEq)]
pub struct RadioSnapshot {
    /// The path's role (which radio parameters apply).
    pub role: PathRole,
    /// Energy so far, joules.
    pub energy_j: f64,
    /// Power now (the radio state's power), mW.
    pub power_mw: f64,
    /// Whether the radio is awake (promoting, active or in its tail).
    pub awake: bool,
    /// Time spent in the active state.
    pub active: Duration,
}

impl RadioSnapshot {
    /// `radio` of a `role` path brought up to `now` and read.
    pub fn take(role: PathRole, radio: &mut Radio, now: Instant) -> RadioSnapshot {
        radio.advance(now);
        RadioSnapshot {
            role,
            energy_j: radio.energy_j(),
            power_mw: radio.state_power_mw(now),
            awake: radio.is_awake(now),
            active: radio.active_time(),
        }
    }
}

/// The energy of the shadow radios (every radio kept up on the same traffic) at `now`.
pub fn shadow_energy_j(shadow: &mut [Option<Radio>], now: Instant) -> f64 {
    shadow
        .iter_mut()
        .flatten()
        .map(|r| {
            r.advance(now);
            r.energy_j()
        })
        .sum()
}

/// The receiver's energy and path mode.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EnergySnapshot {
    /// Per local path, in the driver's path order; `None` for roles without a radio model
    /// (wired).
    pub radios: Vec<Option<RadioSnapshot>>,
    /// The path mode now, when the policy runs a mode switch.
    pub mode: Option<PathMode>,
    /// Every mode with the time (since the clock's zero: the connection's or the run's
    /// start) when it began, oldest first.
    pub timeline: Vec<(Duration, PathMode)>,
    /// Time spent in Partial mode.
    pub time_in_partial: Duration,
    /// aeSUM's latest forecast of the cheap path's rate, bits/s.
    pub forecast_bps: Option<f64>,
    /// What the radios would have spent on the same traffic had every radio stayed up, as
    /// an all-paths scheduler (`mptcp`) keeps them, joules: the shadow radios (see
    /// [`PolicyRunner`]).
    pub shadow_all_paths_j: f64,
    /// What aeSUM compared at its latest switch.
    pub last_switch: Option<SwitchReason>,
    /// Mode switches that were decided but could not be put in force, so did not happen
    /// (`kernel-mptcp-qe`: an `ip mptcp endpoint change` failed; the mode, the timeline
    /// and [`time_in_partial`](Self::time_in_partial) stayed as they were). Always 0 for
    /// Braid's own transport, whose PATH_STATUS announcement cannot fail at the receiver.
    pub failed_mode_switches: u64,
}

impl EnergySnapshot {
    /// Energy of every radio, joules.
    pub fn total_j(&self) -> f64 {
        self.radios.iter().flatten().map(|r| r.energy_j).sum()
    }

    /// Power of every radio now, mW.
    pub fn power_mw(&self) -> f64 {
        self.radios.iter().flatten().map(|r| r.power_mw).sum()
    }

    /// Mode changes so far.
    pub fn switches(&self) -> usize {
        self.timeline.len().saturating_sub(1)
    }
}

/// The radios, mode switch and ACK repeat of one receiving connection. Drive it with the
/// connection's traffic and call [`PolicyRunner::poll`] after the connection took input
/// and by [`PolicyRunner::poll_timeout`]; then let the connection transmit (a mode change
/// queues PATH_STATUS frames).
#[derive(Debug, Clone)]
pub struct PolicyRunner {
    radios: Vec<(PathRole, Option<Radio>)>,
    /// The shadow radios, by path (see the module docs).
    shadow: Vec<Option<Radio>>,
    mode_switch: Option<ModeSwitch>,
    repeats_acks: bool,
    /// The instant of the latest ACK repeats and how many were asked for then.
    repeats_at: (Instant, u32),
    /// The connection was seen closed: nothing more to poll.
    closed: bool,
}

/// ACK repeats asked for at one instant, at most. A link that fails every datagram (one
/// that is down) would otherwise fail each repeat and have it repeated again without end;
/// in virtual time, time would stop.
const ACK_REPEATS_PER_INSTANT: u32 = 3;

impl PolicyRunner {
    /// The policy `policy` (aeSUM with settings `aesum` when it runs it) for a connection
    /// whose local paths have `roles`, in the driver's path order; created at `now`.
    pub fn new(
        policy: PathPolicy,
        aesum: &AeSumConfig,
        roles: &[PathRole],
        now: Instant,
    ) -> PolicyRunner {
        let radios: Vec<(PathRole, Option<Radio>)> = roles
            .iter()
            .map(|&role| (role, RadioParams::builtin(role).map(|p| Radio::new(p, now))))
            .collect();
        PolicyRunner {
            shadow: radios.iter().map(|(_, r)| r.clone()).collect(),
            radios,
            mode_switch: policy.mode_switch_with(aesum, now),
            repeats_acks: policy.repeats_acks(),
            repeats_at: (now, 0),
            closed: false,
        }
    }

    /// The same runner with the radios' parameters from `power` (created at `now`).
    pub fn with_power(mut self, power: &PowerModels, now: Instant) -> PolicyRunner {
        for (role, radio) in &mut self.radios {
            *radio = power.params(*role).map(|p| Radio::new(p, now));
        }
        self.shadow = self.radios.iter().map(|(_, r)| r.clone()).collect();
        self
    }

    /// The shadow radios see `up`/`down` bytes on `path` and every other radio kept up.
    fn shadow_traffic(&mut self, now: Instant, path: usize, up: u64, down: u64) {
        for (i, r) in self.shadow.iter_mut().enumerate() {
            let Some(r) = r.as_mut() else { continue };
            if i == path {
                r.on_traffic(now, up, down);
            } else {
                r.keep_up(now);
            }
        }
    }

    fn radio(&mut self, path: usize) -> Option<&mut Radio> {
        self.radios.get_mut(path).and_then(|(_, r)| r.as_mut())
    }

    /// Local path `path` sent a datagram of `len` bytes (UDP payload) at `now`.
    pub fn on_sent(&mut self, now: Instant, path: usize, len: usize) {
        let bytes = len as u64 + u64::from(IP_UDP_OVERHEAD);
        if let Some(r) = self.radio(path) {
            r.on_traffic(now, bytes, 0);
        }
        self.shadow_traffic(now, path, bytes, 0);
    }

    /// Local path `path` received a datagram of `len` bytes (UDP payload) at `now`.
    pub fn on_received(&mut self, now: Instant, path: usize, len: usize) {
        let bytes = len as u64 + u64::from(IP_UDP_OVERHEAD);
        if let Some(r) = self.radio(path) {
            r.on_traffic(now, 0, bytes);
        }
        self.shadow_traffic(now, path, 0, bytes);
    }

    /// Runs the mode switch: samples the connection (the cheap path's arrivals, the
    /// measured read rate) and announces the costly paths' status when the mode changed.
    /// Cheap to call often: it does nothing before [`PolicyRunner::poll_timeout`].
    pub fn poll(&mut self, now: Instant, conn: &mut Connection) {
        if conn.is_closed() {
            self.closed = true;
            return;
        }
        if let Some(ms) = self.mode_switch.as_mut() {
            ms.poll(now, conn);
        }
    }

    /// When [`PolicyRunner::poll`] next has work to do; `None` without a mode switch or
    /// once the connection closed.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.closed {
            return None;
        }
        self.mode_switch.as_ref().map(ModeSwitch::next_poll)
    }

    /// A datagram sent on connection path `path` at `now` was not transmitted (lost on the
    /// air, the link down, a send error). With weSACK the connection acknowledges again at
    /// once ([`Connection::on_transmit_failure`]), at most three times at one instant (a
    /// link that is down fails every repeat); returns whether it was told to, so that the
    /// driver lets it transmit.
    pub fn on_transmit_failure(
        &mut self,
        now: Instant,
        path: PathId,
        conn: &mut Connection,
    ) -> bool {
        if !self.repeats_acks {
            return false;
        }
        if self.repeats_at.0 != now {
            self.repeats_at = (now, 0);
        }
        if self.repeats_at.1 >= ACK_REPEATS_PER_INSTANT {
            return false;
        }
        self.repeats_at.1 += 1;
        conn.on_transmit_failure(now, path);
        true
    }

    /// The path mode now, when the policy runs a mode switch.
    pub fn mode(&self) -> Option<PathMode> {
        self.mode_switch.as_ref().map(ModeSwitch::mode)
    }

    /// The mode switch, when the policy runs one.
    pub fn mode_switch(&self) -> Option<&ModeSwitch> {
        self.mode_switch.as_ref()
    }

    /// The radios' energy up to `now` and the mode figures.
    pub fn snapshot(&mut self, now: Instant) -> EnergySnapshot {
        let radios = self
            .radios
            .iter_mut()
            .map(|(role, r)| r.as_mut().map(|r| RadioSnapshot::take(*role, r, now)))
            .collect();
        let shadow_all_paths_j = shadow_energy_j(&mut self.shadow, now);
        let ms = self.mode_switch.as_ref();
        EnergySnapshot {
            radios,
            shadow_all_paths_j,
            mode: ms.map(ModeSwitch::mode),
            timeline: ms.map_or_else(Vec::new, |m| {
                m.timeline().iter().map(|&(t, mode)| (t.since_epoch(), mode)).collect()
            }),
            time_in_partial: ms.map_or(Duration::ZERO, |m| m.time_in_partial(now)),
            forecast_bps: ms.and_then(ModeSwitch::forecast_bps),
            last_switch: ms.and_then(ModeSwitch::last_reason),
            failed_mode_switches: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;
    use std::sync::Arc;

    use super::*;
    use crate::cc::RenoConfig;
    use crate::policy::AeSumRule;
    use crate::proto::Config;
    use crate::sched::MinRttConfig;

    fn connection() -> Connection {
        let cfg = Config::new(Arc::new(RenoConfig::default()), Arc::new(MinRttConfig::default()));
        let (local, remote): (SocketAddr, SocketAddr) =
            ("10.0.0.2:5000".parse().unwrap(), "10.0.0.1:4433".parse().unwrap());
        let (crypto, _) = crate::proto::crypto::deterministic::pair(1);
        Connection::connect(Arc::new(cfg), &crypto, t(0), 1, local, remote, PathRole::Wifi).unwrap()
    }

    fn t(ms: u64) -> Instant {
        Instant::from_micros(ms * 1000)
    }

    #[test]
    fn radios_follow_the_roles_and_count_the_headers() {
        let roles = [PathRole::Wifi, PathRole::Wired, PathRole::Lte];
        let mut r = PolicyRunner::new(PathPolicy::None, &AeSumConfig::default(), &roles, t(0));
        r.on_sent(t(0), 0, 1000);
        r.on_received(t(5), 2, 1000);
        r.on_sent(t(5), 1, 1000); // wired: no radio
        r.on_sent(t(5), 7, 1000); // no such path
        let s = r.snapshot(t(60_000));
        assert_eq!(s.radios.len(), 3);
        assert!(s.radios[1].is_none());
        let wifi = s.radios[0].as_ref().map(|x| (x.role, x.energy_j)).unwrap_or_default();
        assert_eq!(wifi.0, PathRole::Wifi);
        // The same datagrams straight on the radio models, headers included.
        let mut w = Radio::new(RadioParams::builtin(PathRole::Wifi).unwrap(), t(0));
        w.on_traffic(t(0), 1000 + u64::from(IP_UDP_OVERHEAD), 0);
        w.advance(t(60_000));
        assert_eq!(wifi.1, w.energy_j());
        let mut l = Radio::new(RadioParams::builtin(PathRole::Lte).unwrap(), t(0));
        l.on_traffic(t(5), 0, 1000 + u64::from(IP_UDP_OVERHEAD));
        l.advance(t(60_000));
        assert_eq!(s.radios[2].as_ref().map(|x| x.energy_j), Some(l.energy_j()));
        assert!((s.total_j() - w.energy_j() - l.energy_j()).abs() < 1e-12);
        assert_eq!((s.mode, s.switches(), r.poll_timeout()), (None, 0, None));
    }

    #[test]
    fn the_shadow_keeps_every_radio_up_for_the_same_traffic() {
        let roles = [PathRole::Wifi, PathRole::Lte];
        let mut r = PolicyRunner::new(PathPolicy::None, &AeSumConfig::default(), &roles, t(0));
        // Twenty seconds of WiFi traffic, every 10 ms; LTE carries nothing.
        for k in 0..2000 {
            r.on_received(t(k * 10), 0, 1200);
        }
        let s = r.snapshot(t(40_000));
        let wifi = s.radios[0].as_ref().map_or(0.0, |x| x.energy_j);
        let lte = s.radios[1].as_ref().map_or(-1.0, |x| x.energy_j);
        assert_eq!(lte, 0.0, "LTE idle throughout");
        // The shadow charges WiFi the same, and LTE a promotion, 20 s up and its tail.
        let mut l = Radio::new(RadioParams::builtin(PathRole::Lte).unwrap(), t(0));
        for k in 0..2000 {
            l.keep_up(t(k * 10));
        }
        l.advance(t(40_000));
        assert!(l.energy_j() > 20.0 * l.params().beta_mw / 1000.0, "{}", l.energy_j());
        assert!((s.shadow_all_paths_j - wifi - l.energy_j()).abs() < 1e-9, "{s:?}");
        // With traffic on both paths all along, the shadow is what the radios spent.
        let mut both = PolicyRunner::new(PathPolicy::None, &AeSumConfig::default(), &roles, t(0));
        for k in 0..2000 {
            both.on_received(t(k * 10), 0, 1200);
            both.on_received(t(k * 10), 1, 1200);
        }
        let s = both.snapshot(t(40_000));
        assert!((s.shadow_all_paths_j - s.total_j()).abs() < 1e-9, "{s:?}");
    }

    #[test]
    fn the_policy_picks_the_mode_switch_and_the_ack_repeat() {
        let roles = [PathRole::Wifi, PathRole::Lte];
        let cfg = AeSumConfig::default();
        let qe = PolicyRunner::new(
            PathPolicy::MptcpQe { aesum: true, wesack: true, rule: AeSumRule::Paper },
            &cfg,
            &roles,
            t(0),
        );
        assert_eq!(qe.mode(), Some(PathMode::Full));
        assert_eq!(qe.poll_timeout(), Some(t(0)));
        assert!(qe.repeats_acks);
        let ho = PolicyRunner::new(PathPolicy::Handover, &cfg, &roles, t(0));
        assert_eq!(ho.mode(), Some(PathMode::Partial));
        assert!(!ho.repeats_acks);
        let none = PolicyRunner::new(
            PathPolicy::MptcpQe { aesum: false, wesack: true, rule: AeSumRule::Paper },
            &cfg,
            &roles,
            t(0),
        );
        assert!(none.mode_switch().is_none() && none.repeats_acks);
        let mut ho = ho;
        assert_eq!(ho.snapshot(t(1000)).timeline, vec![(Duration::ZERO, PathMode::Partial)]);
        assert_eq!(ho.snapshot(t(1000)).time_in_partial, Duration::from_secs(1));
    }

    #[test]
    fn polls_every_100_ms_until_the_connection_closes() {
        let qe = PathPolicy::MptcpQe { aesum: true, wesack: true, rule: AeSumRule::Paper };
        let mut r = PolicyRunner::new(qe, &AeSumConfig::default(), &[PathRole::Wifi], t(0));
        let mut conn = connection();
        r.poll(t(0), &mut conn);
        assert_eq!(r.poll_timeout(), Some(t(100)));
        r.poll(t(50), &mut conn);
        assert_eq!(r.poll_timeout(), Some(t(100)));
        r.poll(t(250), &mut conn);
        assert_eq!(r.poll_timeout(), Some(t(300)));
        conn.close(t(260), 0, b"");
        r.poll(t(300), &mut conn);
        assert_eq!(r.poll_timeout(), None);
    }

    #[test]
    fn acks_are_repeated_a_bounded_number_of_times_per_instant() {
        let roles = [PathRole::Wifi];
        let cfg = AeSumConfig::default();
        let mut conn = connection();
        let qe = PathPolicy::MptcpQe { aesum: true, wesack: true, rule: AeSumRule::Paper };
        let mut r = PolicyRunner::new(qe, &cfg, &roles, t(0));
        let at = |r: &mut PolicyRunner, conn: &mut Connection, ms| {
            (0..10).filter(|_| r.on_transmit_failure(t(ms), PathId(0), conn)).count()
        };
        assert_eq!(at(&mut r, &mut conn, 1) as u32, ACK_REPEATS_PER_INSTANT);
        assert_eq!(at(&mut r, &mut conn, 2) as u32, ACK_REPEATS_PER_INSTANT);
        let no_wesack = PathPolicy::MptcpQe { aesum: true, wesack: false, rule: AeSumRule::Paper };
        let mut r = PolicyRunner::new(no_wesack, &cfg, &roles, t(0));
        assert_eq!(at(&mut r, &mut conn, 3), 0);
    }
}
