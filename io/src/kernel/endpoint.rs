//! How `kernel-mptcp-qe` puts a path mode in force: in Partial mode the MPTCP endpoint of
//! every costly path is flagged as a backup (`ip mptcp endpoint change ADDR backup`, which
//! makes the kernel send MP_PRIO on the subflows from that address), in Full mode the
//! flag is cleared (`nobackup`).
//!
//! The costly paths are the LTE and 3G ones ([`PathRole::is_costly`]); WiFi and wired
//! paths are never flagged.
//!
//! A switch whose change fails (no permission to change the namespace's endpoints, no
//! endpoint with the path's address, a costly path without a local address) does not
//! happen: the endpoints flagged already are cleared again, the mode stays as it was, no
//! Partial time accrues for it, and the switch counts in the report's
//! `failed_mode_switches` ([`KernelMeter::switched`]). The stream goes on in the mode it
//! was in. The first failure of a connection is printed on stderr as one warning line;
//! later ones are only counted.

use std::net::IpAddr;

use braid_transport::PathRole;
use braid_transport::policy::PathMode;
use braid_transport::time::Instant;

use super::meter::{KernelMeter, KernelPath};
use crate::bed::BedError;

/// Why a costly path's endpoint could not be changed.
#[derive(Debug, thiserror::Error)]
pub enum EndpointError {
    /// The path has no local address, so no endpoint is known to be its.
    #[error("path {path} ({role}) has no local address, so no MPTCP endpoint to flag")]
    NoAddress {
        /// The path's name.
        path: String,
        /// Its role.
        role: PathRole,
    },
    /// `ip mptcp endpoint change` failed.
    #[error("path {path}: {source}")]
    Change {
        /// The path's name.
        path: String,
        /// The command's failure.
        #[source]
        source: BedError,
    },
}

/// Changes one endpoint's backup flag: `(address, backup)`.
type Change = Box<dyn FnMut(IpAddr, bool) -> Result<(), BedError> + Send>;

/// The costly paths' MPTCP endpoints of one client connection.
pub struct CostlyEndpoints {
    /// Name, role and local address of each costly path, in path order.
    costly: Vec<(String, PathRole, Option<IpAddr>)>,
    change: Change,
    warned: bool,
}

impl std::fmt::Debug for CostlyEndpoints {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CostlyEndpoints").field("costly", &self.costly).finish_non_exhaustive()
    }
}

impl CostlyEndpoints {
    /// The endpoints of `paths`' costly paths in network namespace `netns` (`None`: this
    /// process's), changed with `ip mptcp endpoint change`.
    pub fn new(paths: &[KernelPath], netns: Option<String>) -> CostlyEndpoints {
        CostlyEndpoints::with_change(paths, move |addr, backup| match &netns {
            Some(ns) => crate::bed::set_endpoint_backup(ns, addr, backup),
            None => crate::bed::set_endpoint_backup_here(addr, backup),
        })
    }

    /// The same, each endpoint changed by `change(address, backup)` instead.
    pub fn with_change(
        paths: &[KernelPath],
        change: impl FnMut(IpAddr, bool) -> Result<(), BedError> + Send + 'static,
    ) -> CostlyEndpoints {
        CostlyEndpoints {
            costly: paths
                .iter()
                .filter(|p| p.role.is_costly())
                .map(|p| (p.name.clone(), p.role, p.local))
                .collect(),
            change: Box::new(change),
            warned: false,
        }
    }

    /// The local addresses whose endpoints are changed (a costly path without one is
    /// left out: its switch fails).
    pub fn addresses(&self) -> Vec<IpAddr> {
        self.costly.iter().filter_map(|c| c.2).collect()
    }

    fn change_one(&mut self, i: usize, backup: bool) -> Result<(), EndpointError> {
        let Some((name, role, addr)) = self.costly.get(i).cloned() else { return Ok(()) };
        let Some(addr) = addr else {
            return Err(EndpointError::NoAddress { path: name, role });
        };
        (self.change)(addr, backup).map_err(|source| EndpointError::Change { path: name, source })
    }

    /// Flags every costly endpoint as a backup (`backup`) or clears the flag. Flagging
    /// stops at the first failure and clears the ones flagged before it; clearing tries
    /// every endpoint. Either way the first failure is returned.
    pub fn set_backup(&mut self, backup: bool) -> Result<(), EndpointError> {
        let mut first = None;
        for i in 0..self.costly.len() {
            if let Err(e) = self.change_one(i, backup) {
                if backup {
                    for j in 0..i {
                        let _ = self.change_one(j, false);
                    }
                    return Err(e);
                }
                first.get_or_insert(e);
            }
        }
        first.map_or(Ok(()), Err)
    }

    /// Puts `mode`, which [`KernelMeter::on_sample`] asked for at `now`, in force and
    /// tells `meter` whether it is; returns that.
    pub fn switch(&mut self, meter: &mut KernelMeter, now: Instant, mode: PathMode) -> bool {
        let done = match self.set_backup(mode == PathMode::Partial) {
            Ok(()) => true,
            Err(e) => {
                self.warn(&e);
                false
            }
        };
        meter.switched(now, mode, done);
        done
    }

    /// Clears the flags (when the connection starts, and ends in Partial mode); a failure
    /// is warned about, not counted as a switch.
    pub fn clear(&mut self) {
        if let Err(e) = self.set_backup(false) {
            self.warn(&e);
        }
    }

    /// Whether a failure was printed.
    pub fn warned(&self) -> bool {
        self.warned
    }

    fn warn(&mut self, e: &EndpointError) {
        if !self.warned {
            self.warned = true;
            eprintln!(
                "warning: kernel-mptcp-qe cannot change the costly paths' MPTCP endpoints ({e}); \
                 a mode switch that cannot be put in force does not happen and counts in \
                 failed_mode_switches (not printed again)"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use braid_transport::energy::PowerModels;
    use braid_transport::policy::AeSumConfig;

    use super::*;
    use crate::kernel::meter::Forecast;

    fn path(name: &str, ip: Option<&str>, role: PathRole) -> KernelPath {
        KernelPath {
            name: name.into(),
            local: ip.map(|ip| ip.parse().unwrap()),
            role,
            capacity_bps: None,
        }
    }

    type Log = Arc<Mutex<Vec<(IpAddr, bool)>>>;

    /// Endpoints whose changes are logged; those of `failing` fail.
    fn logged(paths: &[KernelPath], failing: Option<&str>) -> (CostlyEndpoints, Log) {
        let log: Log = Arc::default();
        let l = Arc::clone(&log);
        let failing: Option<IpAddr> = failing.map(|f| f.parse().unwrap());
        let e = CostlyEndpoints::with_change(paths, move |addr, backup| {
            l.lock().unwrap().push((addr, backup));
            if Some(addr) == failing {
                return Err(BedError::Command {
                    cmd: format!("ip mptcp endpoint change {addr}"),
                    message: "Error: address not found.".into(),
                });
            }
            Ok(())
        });
        (e, log)
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn wired_and_wifi_paths_are_never_marked_backup() {
        let paths = [
            path("eth", Some("10.0.0.1"), PathRole::Wired),
            path("wlan", Some("10.0.1.1"), PathRole::Wifi),
            path("wwan", Some("10.0.2.1"), PathRole::Lte),
            path("umts", Some("10.0.3.1"), PathRole::ThreeG),
        ];
        let (mut e, log) = logged(&paths, None);
        assert_eq!(e.addresses(), [ip("10.0.2.1"), ip("10.0.3.1")]);
        e.set_backup(true).unwrap();
        e.set_backup(false).unwrap();
        assert_eq!(
            *log.lock().unwrap(),
            [
                (ip("10.0.2.1"), true),
                (ip("10.0.3.1"), true),
                (ip("10.0.2.1"), false),
                (ip("10.0.3.1"), false)
            ]
        );
        // Only WiFi and wired: nothing is ever changed.
        let (mut e, log) = logged(&paths[..2], None);
        e.set_backup(true).unwrap();
        assert!(e.addresses().is_empty() && log.lock().unwrap().is_empty());
    }

    #[test]
    fn a_failed_flag_is_undone_and_a_path_without_address_fails() {
        let paths = [
            path("wwan", Some("10.0.2.1"), PathRole::Lte),
            path("umts", Some("10.0.3.1"), PathRole::ThreeG),
        ];
        let (mut e, log) = logged(&paths, Some("10.0.3.1"));
        let err = e.set_backup(true).unwrap_err();
        assert!(err.to_string().contains("path umts"), "{err}");
        assert_eq!(
            *log.lock().unwrap(),
            [(ip("10.0.2.1"), true), (ip("10.0.3.1"), true), (ip("10.0.2.1"), false)]
        );
        let (mut e, log) = logged(&[path("wwan", None, PathRole::Lte)], None);
        let err = e.set_backup(true).unwrap_err();
        assert!(matches!(err, EndpointError::NoAddress { .. }), "{err}");
        assert!(log.lock().unwrap().is_empty());
    }

    fn t(ms: u64) -> Instant {
        Instant::from_micros(ms * 1000)
    }

    /// WiFi carries 8 Mbit/s for a 2 Mbit/s reader: aeSUM wants Partial mode at once.
    /// With LTE's endpoint unchangeable the mode stays Full, no Partial time accrues, the
    /// failed switch is counted (once per decision of aeSUM, not once per sample) and
    /// warned about once; with a changeable endpoint the same samples go Partial.
    #[test]
    fn a_switch_whose_endpoint_change_fails_does_not_happen() {
        let paths = [
            path("wifi", Some("10.77.1.1"), PathRole::Wifi),
            path("lte", Some("10.77.0.1"), PathRole::Lte),
        ];
        let run = |failing: Option<&str>| {
            let qe = Some((AeSumConfig::paper(), Forecast::Capacity));
            let mut m = KernelMeter::new(&paths, &PowerModels::default(), qe, t(0));
            let (mut e, log) = logged(&paths, failing);
            for k in 1..=30u64 {
                let cut = (20..25).contains(&k);
                let capacity = if cut { 0.0 } else { 8e6 };
                if let Some(mode) = m.on_sample(t(k * 100), 0.1, 0, Some(capacity), 2e6) {
                    e.switch(&mut m, t(k * 100), mode);
                }
            }
            let n = log.lock().unwrap().len();
            (m.snapshot(t(3000)), e.warned(), n)
        };
        let (ok, warned, _) = run(None);
        assert!(!warned);
        assert_eq!(ok.failed_mode_switches, 0);
        assert_eq!(ok.mode, Some(PathMode::Partial));
        assert!(ok.time_in_partial > std::time::Duration::from_secs(2), "{ok:?}");
        assert!(ok.switches() >= 3, "{ok:?}");
        let (failed, warned, attempts) = run(Some("10.77.0.1"));
        assert!(warned);
        assert_eq!(failed.mode, Some(PathMode::Full));
        assert_eq!(failed.time_in_partial, std::time::Duration::ZERO);
        assert_eq!(failed.switches(), 0, "{:?}", failed.timeline);
        assert_eq!(failed.last_switch, None);
        // aeSUM went Partial twice (before and after the WiFi dip): two failed switches,
        // one attempt each.
        assert_eq!(failed.failed_mode_switches, 2, "{failed:?}");
        assert_eq!(attempts, 2);
    }
}
