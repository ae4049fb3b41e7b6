//! `braid perf` over a kernel socket: the same bulk stream, report and verification as
//! the built-in transport's ([`crate::perf`]), the per-path figures from the kernel's
//! subflows.
//!
//! A path's bytes are those of the subflows whose local address is the path's (TCP
//! payload, so TLS records and framing included); the sum is what the client read and
//! verified. At the end the client sends a stop message and the server answers with its
//! subflows' counters (smoothed RTT, retransmitted segments), matched to the client's
//! subflows by address.

use std::net::{IpAddr, SocketAddr, TcpListener};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use braid_transport::PathRole;
use braid_transport::bulk::{BulkVerifier, Verdict};
use braid_transport::energy::{PowerModels, Radio};
use braid_transport::policy::{AeSum, AeSumConfig, PathMode};
use braid_transport::proto::{ClientCrypto, ServerCrypto};
use serde::{Deserialize, Serialize};

use super::info::{self, Subflow};
use super::stream::MessageStream;
use super::{KernelError, KernelProfile, socket};
use crate::perf::{
    ClientOptions, ClientRun, End, EndPath, Event, HostPort, Interval, IntervalStream, IntervalSum,
    MESSAGE_BYTES, ModeChange, PerfError, PerfReport, Start, StartPath, Totals,
};

/// Plaintext queued ahead of the socket by the sender.
const SEND_AHEAD: usize = 512 * 1024;

/// Why a kernel perf run failed.
#[derive(Debug, thiserror::Error)]
pub enum KernelPerfError {
    /// The socket or TLS failed.
    #[error(transparent)]
    Kernel(#[from] KernelError),
    /// The stream's content was wrong.
    #[error(transparent)]
    Perf(Box<PerfError>),
}

impl From<PerfError> for KernelPerfError {
    fn from(e: PerfError) -> KernelPerfError {
        KernelPerfError::Perf(Box::new(e))
    }
}

/// One subflow's counters as the server reports them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
struct ServerSubflow {
    local: String,
    remote: String,
    rtt_us: u32,
    total_retrans: u32,
    bytes_sent: u64,
    bytes_retrans: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
struct KernelCounters {
    braid_perf_report: u32,
    bytes_queued: u64,
    subflows: Vec<ServerSubflow>,
}

fn addr_string(a: Option<SocketAddr>) -> String {
    a.map(|a| a.to_string()).unwrap_or_default()
}

/// Serves bulk runs on `listener` until `stop` is set (or, with `one_off`, after one
/// client). Prints nothing; `on_accept` hears of each client.
pub fn run_server(
    listener: TcpListener,
    cc: &str,
    crypto: ServerCrypto,
    one_off: bool,
    stop: Arc<AtomicBool>,
    on_accept: impl Fn(SocketAddr) + Send + Sync + 'static,
) -> Result<(), KernelError> {
    listener.set_nonblocking(true).map_err(|e| KernelError::io("set_nonblocking", e))?;
    let on_accept = Arc::new(on_accept);
    let mut workers = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((s, peer)) => {
                socket::accepted(&s, cc)?;
                on_accept(peer);
                let crypto = crypto.clone();
                let stop = Arc::clone(&stop);
                let w = std::thread::spawn(move || {
                    if let Err(e) = serve_one(s, &crypto, &stop) {
                        eprintln!("client {peer}: {e}");
                    }
                });
                if one_off {
                    let _ = w.join();
                    return Ok(());
                }
                workers.push(w);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => return Err(KernelError::io("accepting", e)),
        }
    }
    Ok(())
}

fn serve_one(
    sock: std::net::TcpStream,
    crypto: &ServerCrypto,
    stop: &AtomicBool,
) -> Result<(), KernelError> {
    let mut ms = MessageStream::server(sock, crypto)?;
    let source = braid_transport::bulk::BulkSource::new(MESSAGE_BYTES, None);
    let mut id = 0u64;
    let mut queued = 0u64;
    let deadline = |d: u64| Instant::now() + Duration::from_secs(d);
    let mut give_up = deadline(3600);
    let mut stopping = false;
    loop {
        if stop.load(Ordering::Relaxed) || Instant::now() > give_up {
            return Ok(());
        }
        while !stopping && ms.pending_out() < SEND_AHEAD {
            let Some(m) = source.message(id) else { break };
            ms.queue(&m);
            queued += m.len() as u64;
            id += 1;
        }
        ms.poll(Duration::from_millis(5))?;
        if !stopping && ms.try_recv()?.is_some() {
            stopping = true;
            let subflows = info::subflows(ms.socket()).unwrap_or_default();
            let counters = KernelCounters {
                braid_perf_report: 1,
                bytes_queued: queued,
                subflows: subflows
                    .iter()
                    .map(|s| ServerSubflow {
                        local: addr_string(s.local),
                        remote: addr_string(s.remote),
                        rtt_us: s.rtt_us,
                        total_retrans: s.total_retrans,
                        bytes_sent: s.bytes_sent,
                        bytes_retrans: s.bytes_retrans,
                    })
                    .collect(),
            };
            let mut body = serde_json::to_vec(&counters).unwrap_or_default();
            if body.len() == MESSAGE_BYTES {
                body.push(b' ');
            }
            ms.queue(&body);
            give_up = deadline(10);
        }
        if ms.at_eof() {
            return Ok(());
        }
    }
}

/// One client path of a kernel run: its name, its source address (the subflows from it
/// are this path's) and its role.
#[derive(Clone, Debug, PartialEq)]
pub struct KernelPath {
    /// Name in the report.
    pub name: String,
    /// Source address (port 0: any).
    pub local: Option<IpAddr>,
    /// Its radio.
    pub role: PathRole,
    /// Configured capacity of the server → client direction, bit/s.
    pub capacity_bps: Option<f64>,
}

fn path_of(paths: &[KernelPath], s: &Subflow) -> Option<usize> {
    let ip = s.local?.ip();
    paths.iter().position(|p| p.local == Some(ip)).or(if paths.len() == 1 { Some(0) } else { None })
}

/// How the application at the client end reads.
#[derive(Clone, Debug, Default)]
pub struct Reader {
    /// Read at most this many bits per second (a player consuming a stream); `None`: as
    /// fast as data arrives.
    pub rate_bps: Option<f64>,
    /// The radio parameters per role (each path's radio is driven by its subflows' bytes).
    pub power: PowerModels,
}

/// The MPTCP-QE switch on a kernel connection: aeSUM (the same code as the built-in
/// `mptcp-qe`'s) samples the WiFi subflows' arrivals and the application's read rate
/// every 100 ms; in Partial mode every costly path's MPTCP endpoint is a backup (the
/// kernel sends MP_PRIO on its subflows), in Full mode none is.
struct QeSwitch {
    aesum: AeSum,
    timeline: Vec<ModeChange>,
}

/// Flags the endpoints of `paths`' costly radios as backups (or not), in this namespace.
fn set_costly_backup(paths: &[KernelPath], backup: bool) {
    for p in paths.iter().filter(|p| p.role != PathRole::Wifi) {
        if let Some(IpAddr::V4(ip)) = p.local
            && let Err(e) = crate::bed::set_endpoint_backup_here(ip, backup)
        {
            eprintln!("note: {e}");
        }
    }
}

/// Receives a bulk run from `remote` with `profile` and controller `cc`; the first
/// subflow leaves from the first path's address (the kernel's path manager opens the
/// others, from the endpoints configured on this host).
#[allow(clippy::too_many_arguments)]
pub fn run_client(
    remote: SocketAddr,
    paths: &[KernelPath],
    profile: KernelProfile,
    cc: &str,
    crypto: &ClientCrypto,
    options: ClientOptions,
    reader: &Reader,
    on_event: &mut dyn FnMut(Event<'_>),
) -> Result<ClientRun, KernelPerfError> {
    let local = paths.first().and_then(|p| p.local).map(|ip| SocketAddr::new(ip, 0));
    let sock = socket::connect(profile, remote, local, cc, Duration::from_secs(5))?;
    let local_addr = sock.local_addr().map_err(|e| KernelError::io("local address", e))?;
    let mut ms = MessageStream::client(sock, crypto, remote.ip())?;
    let time = options.time.unwrap_or(Duration::from_secs(10));
    let start = Start {
        connecting_to: HostPort { host: remote.ip().to_string(), port: remote.port() },
        scenario: None,
        profile: profile.name().to_string(),
        time_s: time.as_secs_f64(),
        message_bytes: MESSAGE_BYTES,
        connection_id: format!("{:016x}", u64::from(local_addr.port())),
        paths: paths
            .iter()
            .map(|p| StartPath {
                name: p.name.clone(),
                local: p.local.map(|ip| ip.to_string()).unwrap_or_else(|| local_addr.to_string()),
                remote: remote.to_string(),
                role: p.role.as_str().to_string(),
                iface: String::new(),
            })
            .collect(),
    };
    on_event(Event::Started(&start));
    let source = braid_transport::bulk::BulkSource::new(MESSAGE_BYTES, None);
    let mut verifier = BulkVerifier::new(source, true);
    let t0 = Instant::now();
    let mut next_id = 0u64;
    let mut verified = 0u64;
    let mut intervals = Vec::new();
    let n = paths.len().max(1);
    let mut path_total = vec![0u64; n];
    let mut last_sub: Vec<(Option<SocketAddr>, u64)> = Vec::new();
    let mut interval_start = t0;
    let mut interval_bytes = 0u64;
    let mut last_rtt = vec![0u32; n];
    let end_at = t0 + time;
    let mut take_interval = |now: Instant,
                             ms: &MessageStream,
                             interval_start: &mut Instant,
                             interval_bytes: &mut u64,
                             intervals: &mut Vec<Interval>,
                             on_event: &mut dyn FnMut(Event<'_>)| {
        let subs = info::subflows(ms.socket()).unwrap_or_default();
        let mut per_path = vec![0u64; n];
        for s in &subs {
            let prev = last_sub
                .iter()
                .find(|(a, _)| *a == s.local && s.local.is_some())
                .map_or(0, |(_, b)| *b);
            if let Some(p) = path_of(paths, s) {
                per_path[p] += s.bytes_received.saturating_sub(prev);
                last_rtt[p] = s.rtt_us;
            }
        }
        last_sub = subs.iter().map(|s| (s.local, s.bytes_received)).collect();
        let secs = (now - *interval_start).as_secs_f64().max(1e-9);
        let (a, b) = ((*interval_start - t0).as_secs_f64(), (now - t0).as_secs_f64());
        let streams = per_path
            .iter()
            .enumerate()
            .map(|(i, &bytes)| {
                path_total[i] += bytes;
                IntervalStream {
                    socket: i,
                    name: paths.get(i).map_or_else(|| format!("path{i}"), |p| p.name.clone()),
                    start: a,
                    end: b,
                    seconds: secs,
                    bytes,
                    bits_per_second: bytes as f64 * 8.0 / secs,
                }
            })
            .collect();
        let sum = IntervalSum {
            start: a,
            end: b,
            seconds: secs,
            bytes: *interval_bytes,
            bits_per_second: *interval_bytes as f64 * 8.0 / secs,
        };
        intervals.push(Interval { streams, sum });
        if let Some(i) = intervals.last() {
            on_event(Event::Interval(i));
        }
        *interval_start = now;
        *interval_bytes = 0;
    };
    let verify = |id: u64,
                  data: &[u8],
                  verifier: &mut BulkVerifier|
     -> Result<(), KernelPerfError> {
        match verifier.on_message(id, data) {
            Verdict::Intact => Ok(()),
            Verdict::OutOfOrder { expected } => Err(PerfError::OutOfOrder { id, expected }.into()),
            Verdict::Corrupt => Err(PerfError::Corrupt { id, len: data.len() }.into()),
            Verdict::Gap => Err(PerfError::Lost { id }.into()),
        }
    };
    let tick = Duration::from_millis(100);
    let mut next_tick = t0 + tick;
    let mut tick_last: Vec<(Option<SocketAddr>, u64, u64)> = Vec::new();
    let mut tick_read = 0u64;
    let at = |i: Instant| braid_transport::Instant::from_duration(i - t0);
    let mut radios: Vec<Option<Radio>> =
        paths.iter().map(|p| reader.power.params(p.role).map(|r| Radio::new(r, at(t0)))).collect();
    let mut qe = (profile == KernelProfile::MptcpQe).then(|| {
        set_costly_backup(paths, false);
        QeSwitch {
            aesum: AeSum::new(AeSumConfig::default(), at(t0)),
            timeline: vec![ModeChange { t_s: 0.0, mode: "Full".into() }],
        }
    });
    while Instant::now() < end_at {
        ms.poll(Duration::from_millis(5))?;
        loop {
            if let Some(r) = reader.rate_bps {
                let allowed = r / 8.0 * (t0.elapsed().as_secs_f64());
                if verified as f64 >= allowed {
                    break;
                }
            }
            let Some(m) = ms.try_recv()? else { break };
            verify(next_id, &m, &mut verifier)?;
            next_id += 1;
            verified += m.len() as u64;
            interval_bytes += m.len() as u64;
            tick_read += m.len() as u64;
        }
        if ms.at_eof() {
            return Err(KernelError::Closed.into());
        }
        let now = Instant::now();
        if now >= next_tick {
            let secs = (now - (next_tick - tick)).as_secs_f64().max(1e-3);
            next_tick = now + tick;
            let subs = info::subflows(ms.socket()).unwrap_or_default();
            let mut down = vec![0u64; n];
            let mut up = vec![0u64; n];
            for s in &subs {
                let (rx0, tx0) = tick_last
                    .iter()
                    .find(|(a, _, _)| *a == s.local && s.local.is_some())
                    .map_or((0, 0), |(_, r, t)| (*r, *t));
                if let Some(p) = path_of(paths, s) {
                    down[p] += s.bytes_received.saturating_sub(rx0);
                    up[p] += s.bytes_acked.saturating_sub(tx0);
                }
            }
            tick_last = subs.iter().map(|s| (s.local, s.bytes_received, s.bytes_acked)).collect();
            for (i, r) in radios.iter_mut().enumerate() {
                if let Some(r) = r {
                    r.on_traffic(at(now), up[i], down[i]);
                }
            }
            if let Some(q) = qe.as_mut() {
                let wifi: u64 = paths
                    .iter()
                    .enumerate()
                    .filter(|(_, p)| p.role == PathRole::Wifi)
                    .map(|(i, _)| down[i])
                    .sum();
                q.aesum.on_wifi_bytes(wifi);
                let read_bps = tick_read as f64 * 8.0 / secs;
                if let Some(m) = q.aesum.on_tick(at(now), read_bps) {
                    set_costly_backup(paths, m == PathMode::Partial);
                    q.timeline
                        .push(ModeChange { t_s: (now - t0).as_secs_f64(), mode: format!("{m:?}") });
                }
            }
            tick_read = 0;
        }
        if now - interval_start >= options.interval {
            take_interval(
                now,
                &ms,
                &mut interval_start,
                &mut interval_bytes,
                &mut intervals,
                on_event,
            );
        }
    }
    let now = Instant::now();
    if now - interval_start > Duration::from_millis(50) {
        take_interval(now, &ms, &mut interval_start, &mut interval_bytes, &mut intervals, on_event);
    }
    let seconds = (now - t0).as_secs_f64();
    let client_subs = info::subflows(ms.socket()).unwrap_or_default();
    // Stop, then read (and still verify) what was queued ahead of the counters.
    ms.queue(b"{\"stop\":true}");
    let mut counters = None;
    let give_up = Instant::now() + Duration::from_secs(3);
    while counters.is_none() && Instant::now() < give_up && !ms.at_eof() {
        ms.poll(Duration::from_millis(5))?;
        while let Some(m) = ms.try_recv()? {
            if m.len() == MESSAGE_BYTES {
                verify(next_id, &m, &mut verifier)?;
                next_id += 1;
            } else {
                counters = serde_json::from_slice::<KernelCounters>(&m).ok();
                break;
            }
        }
    }
    ms.close(Duration::from_millis(500));
    if qe.is_some() {
        set_costly_backup(paths, false);
    }
    let end_t = at(Instant::now());
    let energies: Vec<Option<f64>> = radios
        .iter_mut()
        .map(|r| {
            r.as_mut().map(|r| {
                r.advance(end_t);
                r.energy_j()
            })
        })
        .collect();
    let end_paths = (0..n)
        .map(|i| {
            let p = paths.get(i);
            let mine: Vec<&Subflow> =
                client_subs.iter().filter(|s| path_of(paths, s) == Some(i)).collect();
            let theirs: Vec<&ServerSubflow> = counters
                .iter()
                .flat_map(|c| &c.subflows)
                .filter(|ss| mine.iter().any(|m| addr_string(m.local) == ss.remote))
                .collect();
            let rtt_us = theirs.iter().map(|s| s.rtt_us).max().unwrap_or(last_rtt[i]);
            EndPath {
                name: p.map_or_else(|| format!("path{i}"), |p| p.name.clone()),
                bytes: path_total[i],
                bits_per_second: path_total[i] as f64 * 8.0 / seconds.max(1e-9),
                rtt_ms: f64::from(rtt_us) / 1e3,
                retransmits: theirs.iter().map(|s| u64::from(s.total_retrans)).sum(),
                capacity_bps: p.and_then(|p| p.capacity_bps).unwrap_or(0.0),
                error: String::new(),
                energy_j: energies.get(i).copied().flatten(),
            }
        })
        .collect();
    let received = Totals {
        bytes: verified,
        seconds,
        bits_per_second: verified as f64 * 8.0 / seconds.max(1e-9),
    };
    let capacity: Option<f64> = paths.iter().map(|p| p.capacity_bps).sum();
    let report = PerfReport {
        start,
        intervals,
        end: End {
            sum_sent: received.clone(),
            sum_received: received.clone(),
            paths: end_paths,
            verified: true,
            sender_counters: counters.is_some(),
            capacity_bps: capacity,
            share_of_capacity: capacity.filter(|c| *c > 0.0).map(|c| received.bits_per_second / c),
            energy_j: energies.iter().any(Option::is_some).then(|| energies.iter().flatten().sum()),
            mode_timeline: qe.map(|q| q.timeline).unwrap_or_default(),
        },
    };
    Ok(ClientRun {
        report,
        connection_id: u64::from(local_addr.port()),
        local: vec![local_addr],
        messages: next_id,
    })
}
