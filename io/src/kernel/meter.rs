//! What both kernel ends measure beside the byte stream.
//!
//! - [`SenderSampler`] / [`SenderReport`]: the sending end reads its subflows
//!   (`MPTCP_TCPINFO`) every few milliseconds and sends the receiver a control frame every
//!   [`REPORT_INTERVAL`]: per subflow the smoothed RTT, retransmissions, bytes, window and
//!   what the subflow could carry ([`SenderSubflow::capacity_bps`], the largest fresh
//!   delivery-rate sample of the interval).
//! - [`KernelMeter`]: the receiving end's radios (each path's radio driven by its
//!   subflows' bytes), their all-paths shadow, and for `kernel-mptcp-qe` aeSUM, sampled
//!   every [`SAMPLE_INTERVAL`] with the application's read rate.
//!
//! aeSUM's WiFi sample on a kernel connection ([`Forecast`]): the paper samples the bytes
//! that arrived over WiFi. On Braid's own transport (minRTT: LTE only takes what WiFi's
//! window cannot) those bytes reach the read rate whenever WiFi could carry the stream.
//! The kernel's default scheduler instead sends each chunk on the subflow whose queue
//! drains first, so a read-limited stream is split between the subflows and WiFi's
//! arrivals stay below the read rate however fast WiFi is: Partial mode is never reached
//! (measured, BENCHMARKS.md). [`Forecast::Capacity`] samples what WiFi could carry
//! instead: the larger of its arrivals and the sender's delivery-rate sample on the WiFi
//! subflow, counted only when that subflow delivered something in the interval (a cut or
//! stalled WiFi reports nothing, so its sample falls to its arrivals).

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use braid_transport::PathRole;
use braid_transport::energy::{PowerModels, Radio};
use braid_transport::policy::{
    AeSum, AeSumConfig, EnergySnapshot, PathMode, RadioSnapshot, SwitchReason, shadow_energy_j,
};
use braid_transport::time::Instant;
use serde::{Deserialize, Serialize};

use super::info::Subflow;

/// How often the sender reports its subflows.
pub const REPORT_INTERVAL: Duration = Duration::from_millis(100);
/// How often the receiver samples its subflows (aeSUM's interval).
pub const SAMPLE_INTERVAL: Duration = Duration::from_millis(100);
/// How often the receiver reads its subflows' bytes for the radios: under the radio
/// model's active gap (20 ms for WiFi), so a path that carries a steady stream keeps its
/// radio active as per-packet accounting would.
pub const RADIO_INTERVAL: Duration = Duration::from_millis(10);
/// A side-channel report ([`super::side`]) older than this is not used for aeSUM's
/// sample (three report intervals: a cut WiFi, which stops them, is noticed within it).
pub const REPORT_FRESH: Duration = Duration::from_millis(300);

/// One subflow as its sender sees it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SenderSubflow {
    /// The sender's address.
    pub local: String,
    /// The receiver's address (the receiver finds its path by it).
    pub remote: String,
    /// Smoothed RTT, µs.
    pub rtt_us: u32,
    /// Minimum RTT, µs.
    pub min_rtt_us: u32,
    /// Segments retransmitted so far.
    pub total_retrans: u32,
    /// Bytes sent, retransmissions included.
    pub bytes_sent: u64,
    /// Bytes retransmitted.
    pub bytes_retrans: u64,
    /// Bytes acknowledged.
    pub bytes_acked: u64,
    /// Congestion window, bytes.
    pub cwnd_bytes: u64,
    /// What the subflow could carry, bit/s: the largest delivery-rate sample taken in the
    /// report's interval while it delivered data; when it delivered nothing, the last
    /// such figure if it had nothing to deliver (idle: nothing unacknowledged at any look)
    /// and 0 if data waited (stalled, e.g. cut).
    pub capacity_bps: f64,
}

/// A control frame from the sender: its subflows now.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SenderReport {
    /// Always 1 (tells a report from other control frames).
    pub braid_sender_report: u32,
    /// The report's number (0, 1, 2, … from the sender).
    pub seq: u64,
    /// Application bytes the sender queued so far.
    pub bytes_queued: u64,
    /// Its subflows.
    pub subflows: Vec<SenderSubflow>,
}

impl SenderReport {
    /// The report in a control frame's body, if it is one (anything else: `None`).
    pub fn parse(body: &[u8]) -> Option<SenderReport> {
        let r: SenderReport = serde_json::from_slice(body).ok()?;
        (r.braid_sender_report == 1).then_some(r)
    }

    /// The control frame's body.
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// The subflow whose receiver address is `remote`.
    pub fn subflow_to(&self, remote: &SocketAddr) -> Option<&SenderSubflow> {
        let text = remote.to_string();
        self.subflows.iter().find(|s| s.remote == text)
    }
}

/// The sender's per-interval view of its subflows.
#[derive(Debug, Default)]
pub struct SenderSampler {
    /// Per subflow (by remote address).
    seen: BTreeMap<String, Seen>,
    seq: u64,
}

#[derive(Debug, Default)]
struct Seen {
    /// `tcpi_delivered` at the last look.
    delivered: u32,
    /// The interval's largest delivery-rate sample taken while `delivered` grew, bytes/s.
    best: u64,
    /// Whether data waited unacknowledged at some look in the interval.
    waited: bool,
    /// The last interval's figure that came from samples, bytes/s.
    last: u64,
}

impl SenderSampler {
    /// A sampler that has seen nothing.
    pub fn new() -> SenderSampler {
        SenderSampler::default()
    }

    /// Looks at the subflows now (call every few milliseconds).
    pub fn sample(&mut self, subflows: &[Subflow]) {
        for s in subflows {
            let key = s.remote.map(|a| a.to_string()).unwrap_or_default();
            let e =
                self.seen.entry(key).or_insert(Seen { delivered: s.delivered, ..Seen::default() });
            if s.delivered != e.delivered {
                e.delivered = s.delivered;
                e.best = e.best.max(s.delivery_rate);
            } else if s.unacked > 0 {
                e.waited = true;
            }
        }
    }

    fn figure(e: &mut Seen) -> u64 {
        let f = if e.best > 0 {
            e.last = e.best;
            e.best
        } else if e.waited {
            0
        } else {
            e.last
        };
        e.best = 0;
        e.waited = false;
        f
    }

    /// The report of `subflows` (read now) for the interval since the last report;
    /// starts the next interval.
    pub fn report(&mut self, subflows: &[Subflow], bytes_queued: u64) -> SenderReport {
        self.sample(subflows);
        let addr = |a: Option<SocketAddr>| a.map(|a| a.to_string()).unwrap_or_default();
        let seq = self.seq;
        self.seq += 1;
        SenderReport {
            braid_sender_report: 1,
            seq,
            bytes_queued,
            subflows: subflows
                .iter()
                .map(|s| {
                    let key = addr(s.remote);
                    let best = self.seen.get_mut(&key).map_or(0, Self::figure);
                    SenderSubflow {
                        local: addr(s.local),
                        remote: key,
                        rtt_us: s.rtt_us,
                        min_rtt_us: s.min_rtt_us,
                        total_retrans: s.total_retrans,
                        bytes_sent: s.bytes_sent,
                        bytes_retrans: s.bytes_retrans,
                        bytes_acked: s.bytes_acked,
                        cwnd_bytes: u64::from(s.snd_cwnd) * u64::from(s.snd_mss),
                        capacity_bps: best as f64 * 8.0,
                    }
                })
                .collect(),
        }
    }
}

/// What aeSUM samples on a kernel connection (see the module docs).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub enum Forecast {
    /// The bytes that arrived over WiFi (the paper's sample).
    Observed,
    /// The larger of those and what the sender saw WiFi deliver at.
    #[default]
    Capacity,
}

impl Forecast {
    /// By name (`observed`, `capacity`).
    pub fn parse(name: &str) -> Option<Forecast> {
        match name {
            "observed" => Some(Forecast::Observed),
            "capacity" => Some(Forecast::Capacity),
            _ => None,
        }
    }
}

/// One client path of a kernel connection: its name, its source address (the subflows
/// from it are this path's) and its role.
#[derive(Clone, Debug, PartialEq)]
pub struct KernelPath {
    /// Name in the report.
    pub name: String,
    /// Source address (`None`: any).
    pub local: Option<IpAddr>,
    /// Its radio.
    pub role: PathRole,
    /// Configured capacity of the server → client direction, bit/s.
    pub capacity_bps: Option<f64>,
}

/// The path of `paths` that subflow `local` belongs to (the only path when there is one).
pub fn path_of(paths: &[KernelPath], local: Option<SocketAddr>) -> Option<usize> {
    let ip = local.map(|a| a.ip());
    paths.iter().position(|p| ip.is_some() && p.local == ip).or(if paths.len() == 1 {
        Some(0)
    } else {
        None
    })
}

struct Qe {
    aesum: AeSum,
    forecast: Forecast,
    /// The modes put in force (their endpoint changes succeeded), with when each began.
    timeline: Vec<(Instant, PathMode)>,
    /// Partial time of the modes before the last one in `timeline`.
    partial_before: Duration,
    /// What aeSUM compared at the latest switch put in force.
    last_reason: Option<SwitchReason>,
    /// What aeSUM compared at the switch waiting for [`KernelMeter::switched`].
    pending: Option<SwitchReason>,
    /// Switches that could not be put in force.
    failed: u64,
}

impl Qe {
    /// The mode in force and when it began.
    fn current(&self) -> (Instant, PathMode) {
        self.timeline.last().copied().unwrap_or((Instant::ZERO, PathMode::Full))
    }
}

/// The receiving end's radios and mode switch on a kernel connection.
pub struct KernelMeter {
    roles: Vec<PathRole>,
    radios: Vec<Option<Radio>>,
    shadow: Vec<Option<Radio>>,
    qe: Option<Qe>,
    /// Cumulative (received, acknowledged) bytes per subflow (by local address) at the
    /// last sample.
    last: BTreeMap<String, (u64, u64)>,
}

impl KernelMeter {
    /// Radios for `paths` (parameters from `power`); aeSUM with `aesum` when given.
    pub fn new(
        paths: &[KernelPath],
        power: &PowerModels,
        aesum: Option<(AeSumConfig, Forecast)>,
        now: Instant,
    ) -> KernelMeter {
        let radios: Vec<Option<Radio>> =
            paths.iter().map(|p| power.params(p.role).map(|r| Radio::new(r, now))).collect();
        KernelMeter {
            roles: paths.iter().map(|p| p.role).collect(),
            shadow: radios.clone(),
            radios,
            qe: aesum.map(|(cfg, forecast)| Qe {
                aesum: AeSum::new(cfg, now),
                forecast,
                timeline: vec![(now, PathMode::Full)],
                partial_before: Duration::ZERO,
                last_reason: None,
                pending: None,
                failed: 0,
            }),
            last: BTreeMap::new(),
        }
    }

    /// Bytes each path received and had acknowledged since the last call, from the
    /// subflows read now; the radios see them at `now`.
    pub fn on_subflows(
        &mut self,
        now: Instant,
        paths: &[KernelPath],
        subflows: &[Subflow],
    ) -> (Vec<u64>, Vec<u64>) {
        let n = self.roles.len();
        let (mut down, mut up) = (vec![0u64; n], vec![0u64; n]);
        let mut next = BTreeMap::new();
        for s in subflows {
            let key = s.local.map(|a| a.to_string()).unwrap_or_default();
            let (rx0, tx0) = self.last.get(&key).copied().unwrap_or((0, 0));
            if let Some(p) = path_of(paths, s.local).filter(|&p| p < n) {
                down[p] += s.bytes_received.saturating_sub(rx0);
                up[p] += s.bytes_acked.saturating_sub(tx0);
            }
            next.insert(key, (s.bytes_received, s.bytes_acked));
        }
        self.last = next;
        self.drive(now, &down, &up);
        (down, up)
    }

    /// The same from cumulative byte counts per path, in path order (received, sent):
    /// for a stack that counts per path itself (noq).
    pub fn on_path_totals(&mut self, now: Instant, received: &[u64], sent: &[u64]) {
        let n = self.roles.len();
        let (mut down, mut up) = (vec![0u64; n], vec![0u64; n]);
        for i in 0..n {
            let key = format!("path {i}");
            let (rx0, tx0) = self.last.get(&key).copied().unwrap_or((0, 0));
            let (rx, tx) =
                (received.get(i).copied().unwrap_or(rx0), sent.get(i).copied().unwrap_or(tx0));
            down[i] = rx.saturating_sub(rx0);
            up[i] = tx.saturating_sub(tx0);
            self.last.insert(key, (rx.max(rx0), tx.max(tx0)));
        }
        self.drive(now, &down, &up);
    }

    /// The radios see `down` and `up` bytes per path at `now`.
    fn drive(&mut self, now: Instant, down: &[u64], up: &[u64]) {
        for (i, r) in self.radios.iter_mut().enumerate() {
            if let Some(r) = r {
                r.on_traffic(now, up[i], down[i]);
            }
        }
        // The shadow keeps every radio up while any path carries traffic.
        let any = down.iter().chain(up).any(|&b| b > 0);
        for (i, r) in self.shadow.iter_mut().enumerate() {
            let Some(r) = r else { continue };
            if down[i] > 0 || up[i] > 0 {
                r.on_traffic(now, up[i], down[i]);
            } else if any {
                r.keep_up(now);
            }
        }
    }

    /// aeSUM's sample at `now`: `wifi_arrived` bytes came over WiFi since the last one,
    /// `wifi_capacity_bps` is the sender's fresh figure for WiFi (if any), the application
    /// read at `read_rate_bps`. Returns the mode aeSUM just switched to when it is not the
    /// mode in force: the caller changes the endpoints and tells the outcome with
    /// [`KernelMeter::switched`]; until then the mode in force stays.
    pub fn on_sample(
        &mut self,
        now: Instant,
        secs: f64,
        wifi_arrived: u64,
        wifi_capacity_bps: Option<f64>,
        read_rate_bps: f64,
    ) -> Option<PathMode> {
        let qe = self.qe.as_mut()?;
        let could = match qe.forecast {
            Forecast::Observed => 0,
            Forecast::Capacity => {
                wifi_capacity_bps.map_or(0, |c| (c.max(0.0) * secs.max(0.0) / 8.0) as u64)
            }
        };
        qe.aesum.on_wifi_bytes(wifi_arrived.max(could));
        let m = qe.aesum.on_tick(now, read_rate_bps)?;
        // Two switches within one sample (there and back) leave the mode as it was; so
        // does aeSUM coming back to the mode in force after a switch that failed.
        if qe.current().1 == m {
            qe.pending = None;
            return None;
        }
        qe.pending = Some(SwitchReason {
            at: now,
            mode: m,
            forecast_bps: qe.aesum.forecast_bps(),
            read_rate_bps,
            cause: (m == PathMode::Full).then(|| qe.aesum.full_cause()),
        });
        Some(m)
    }

    /// The outcome of the switch to `mode` that [`KernelMeter::on_sample`] asked for at
    /// `now`: put in force (`done`), the mode is `mode` from `now`; not (its endpoint
    /// change failed), the mode stays as it was, no Partial time accrues for it, and it
    /// counts in [`EnergySnapshot::failed_mode_switches`]. aeSUM is not told: its next
    /// switch to the mode it wants is tried again.
    pub fn switched(&mut self, now: Instant, mode: PathMode, done: bool) {
        let Some(qe) = self.qe.as_mut() else { return };
        let pending = qe.pending.take();
        if !done {
            qe.failed += 1;
            return;
        }
        let (since, was) = qe.current();
        if was == mode {
            return;
        }
        if was == PathMode::Partial {
            qe.partial_before += now.saturating_duration_since(since);
        }
        qe.timeline.push((now, mode));
        qe.last_reason = pending.filter(|r| r.mode == mode);
    }

    /// The mode in force now (`None` without aeSUM).
    pub fn mode(&self) -> Option<PathMode> {
        self.qe.as_ref().map(|q| q.current().1)
    }

    /// The radios' energy and the mode figures up to `now`.
    pub fn snapshot(&mut self, now: Instant) -> EnergySnapshot {
        let radios = self
            .radios
            .iter_mut()
            .zip(&self.roles)
            .map(|(r, &role)| r.as_mut().map(|r| RadioSnapshot::take(role, r, now)))
            .collect();
        let shadow_all_paths_j = shadow_energy_j(&mut self.shadow, now);
        let qe = self.qe.as_ref();
        EnergySnapshot {
            radios,
            shadow_all_paths_j,
            mode: qe.map(|q| q.current().1),
            timeline: qe.map_or_else(Vec::new, |q| {
                q.timeline.iter().map(|&(t, m)| (t.since_epoch(), m)).collect()
            }),
            time_in_partial: qe.map_or(Duration::ZERO, |q| match q.current() {
                (since, PathMode::Partial) => {
                    q.partial_before + now.saturating_duration_since(since)
                }
                (_, PathMode::Full) => q.partial_before,
            }),
            forecast_bps: qe.map(|q| q.aesum.forecast_bps()),
            last_switch: qe.and_then(|q| q.last_reason),
            failed_mode_switches: qe.map_or(0, |q| q.failed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sub(remote: &str, delivered: u32, rate: u64) -> Subflow {
        Subflow {
            remote: Some(remote.parse().unwrap()),
            local: Some("10.77.0.2:5201".parse().unwrap()),
            delivered,
            delivery_rate: rate,
            snd_cwnd: 10,
            snd_mss: 1448,
            ..Subflow::default()
        }
    }

    #[test]
    fn the_sender_reports_the_largest_rate_seen_while_delivering_and_nothing_when_stalled() {
        let mut s = SenderSampler::new();
        s.sample(&[sub("10.77.0.1:40000", 5, 100_000)]);
        s.sample(&[sub("10.77.0.1:40000", 9, 1_000_000)]);
        // A stale sample (nothing delivered since) does not count.
        s.sample(&[sub("10.77.0.1:40000", 9, 9_000_000)]);
        let r = s.report(&[sub("10.77.0.1:40000", 12, 500_000)], 7);
        assert_eq!(r.subflows[0].capacity_bps, 8e6);
        assert_eq!(r.subflows[0].cwnd_bytes, 14_480);
        assert_eq!(r.bytes_queued, 7);
        // The next interval delivered nothing and had nothing to deliver: the last figure
        // holds.
        let r = s.report(&[sub("10.77.0.1:40000", 12, 500_000)], 7);
        assert_eq!(r.subflows[0].capacity_bps, 8e6);
        // Data waited and nothing was delivered (a cut): 0, however high the last sample.
        let stalled = Subflow { unacked: 4, ..sub("10.77.0.1:40000", 12, 500_000) };
        s.sample(std::slice::from_ref(&stalled));
        let r = s.report(&[stalled], 7);
        assert_eq!(r.subflows[0].capacity_bps, 0.0);
        let back = SenderReport::parse(&r.to_bytes()).unwrap();
        assert_eq!(back, r);
        assert!(back.subflow_to(&"10.77.0.1:40000".parse().unwrap()).is_some());
        assert!(SenderReport::parse(b"{\"stop\":true}").is_none());
        assert!(SenderReport::parse(b"\xff\x00junk").is_none());
    }

    fn paths() -> Vec<KernelPath> {
        ["10.77.0.1", "10.77.1.1"]
            .iter()
            .zip([PathRole::Wifi, PathRole::Lte])
            .map(|(ip, role)| KernelPath {
                name: role.as_str().into(),
                local: Some(ip.parse().unwrap()),
                role,
                capacity_bps: None,
            })
            .collect()
    }

    fn t(ms: u64) -> Instant {
        Instant::from_micros(ms * 1000)
    }

    /// A read-limited 2 Mbit/s stream split 70/30 by the scheduler over an 8 Mbit/s WiFi:
    /// the paper's sample never reaches the read rate, the capacity sample does; once
    /// WiFi delivers nothing (cut) the capacity sample goes and the mode returns to Full.
    fn run(forecast: Forecast) -> Vec<PathMode> {
        let mut m = KernelMeter::new(
            &paths(),
            &PowerModels::default(),
            Some((AeSumConfig::paper(), forecast)),
            t(0),
        );
        let mut modes = Vec::new();
        for k in 1..=60u64 {
            let cut = k > 40;
            let (arrived, capacity) = if cut { (0, Some(0.0)) } else { (17_500, Some(8e6)) };
            if let Some(mode) = m.on_sample(t(k * 100), 0.1, arrived, capacity, 2e6) {
                m.switched(t(k * 100), mode, true);
            }
            modes.push(m.mode().unwrap());
        }
        modes
    }

    #[test]
    fn the_capacity_sample_reaches_partial_and_a_cut_returns_to_full() {
        let observed = run(Forecast::Observed);
        assert!(observed.iter().all(|&m| m == PathMode::Full));
        let capacity = run(Forecast::Capacity);
        assert_eq!(capacity[20], PathMode::Partial);
        assert_eq!(*capacity.last().unwrap(), PathMode::Full);
    }

    #[test]
    fn each_path_counts_its_own_subflows_bytes() {
        let p = paths();
        let mut m = KernelMeter::new(&p, &PowerModels::default(), None, t(0));
        let s = |ip: &str, rx: u64| Subflow {
            local: Some(format!("{ip}:40000").parse().unwrap()),
            bytes_received: rx,
            ..Subflow::default()
        };
        let (down, _) = m.on_subflows(t(100), &p, &[s("10.77.0.1", 1000), s("10.77.1.1", 50)]);
        assert_eq!(down, vec![1000, 50]);
        let (down, _) = m.on_subflows(t(200), &p, &[s("10.77.0.1", 1500), s("10.77.1.1", 50)]);
        assert_eq!(down, vec![500, 0]);
        let e = m.snapshot(t(300));
        assert!(e.radios.iter().all(Option::is_some));
        assert!(e.shadow_all_paths_j >= e.total_j());
    }
}
