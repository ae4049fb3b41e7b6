//! `braid perf` over a kernel socket: the same bulk stream, report and verification as
//! the built-in transport's ([`crate::perf`]), the per-path figures from the kernel's
//! subflows.
//!
//! A path's bytes are those of the subflows whose local address is the path's (TCP
//! payload, so TLS records and framing included); the sum is what the client read and
//! verified. At the end the client sends a stop message and the server answers with its
//! subflows' counters (smoothed RTT, retransmitted segments), matched to the client's
//! subflows by address.

use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use braid_transport::PathRole;
use braid_transport::bulk::BulkVerifier;
use braid_transport::energy::PowerModels;
use braid_transport::policy::PathMode;
use braid_transport::proto::rate::ReadRateMeter;
use braid_transport::proto::{ClientCrypto, ServerCrypto};

use super::conn::{UNSENT_LIMIT, side_channel};
use super::endpoint::CostlyEndpoints;
use super::info::{self, Subflow};
use super::meter::{self, Forecast, KernelMeter, SenderReport, SenderSampler};
pub use super::meter::{KernelPath, path_of};
use super::side::ReportSender;
use super::stream::{Frame, MessageStream};
use super::{KernelError, KernelProfile, socket};
use crate::perf::{
    ClientOptions, ClientRun, End, EndPath, Event, HostPort, Interval, IntervalSum, MESSAGE_BYTES,
    ModeChange, PerfError, PerfReport, Start, StartPath, Totals,
};

/// Plaintext queued ahead of the socket by the sender (the socket itself holds at most
/// [`UNSENT_LIMIT`] unsent bytes beyond what is in flight).
const SEND_AHEAD: usize = 256 * 1024;

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
                socket::limit_unsent(&s, UNSENT_LIMIT);
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

/// Sends the bulk stream with a [`SenderReport`] control frame every
/// [`meter::REPORT_INTERVAL`]; the client's first frame asks it to stop, and a last report
/// follows what was queued.
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
    let mut sampler = SenderSampler::new();
    let mut side: Option<ReportSender> = None;
    let mut next_look = Instant::now();
    let mut next_report = Instant::now() + meter::REPORT_INTERVAL;
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
        ms.poll(Duration::from_millis(2))?;
        let now = Instant::now();
        if now >= next_look {
            next_look = now + Duration::from_millis(5);
            sampler.sample(&info::subflows(ms.socket()).unwrap_or_default());
        }
        if !stopping && now >= next_report {
            next_report = now + meter::REPORT_INTERVAL;
            let r = sampler.report(&info::subflows(ms.socket()).unwrap_or_default(), queued);
            if let Some(s) = &side {
                s.send(&r);
            }
            ms.queue_control(&r.to_bytes());
        }
        let stop_asked = match ms.try_recv()? {
            Some(Frame::Control(c)) => {
                if side.is_none() {
                    let peers: Vec<SocketAddr> = info::subflows(ms.socket())
                        .unwrap_or_default()
                        .iter()
                        .filter_map(|s| s.remote)
                        .collect();
                    side = ReportSender::for_peer(&c, &peers);
                }
                false
            }
            Some(Frame::Message(_)) => true,
            None => false,
        };
        if !stopping && stop_asked {
            stopping = true;
            let r = sampler.report(&info::subflows(ms.socket()).unwrap_or_default(), queued);
            ms.queue_control(&r.to_bytes());
            give_up = deadline(10);
        }
        if ms.at_eof() {
            return Ok(());
        }
    }
}

/// How the application at the client end reads.
#[derive(Clone, Debug, Default)]
pub struct Reader {
    /// Read at most this many bits per second (a player consuming a stream); `None`: as
    /// fast as data arrives.
    pub rate_bps: Option<f64>,
    /// The radio parameters per role (each path's radio is driven by its subflows' bytes).
    pub power: PowerModels,
    /// aeSUM's WiFi sample for `kernel-mptcp-qe`.
    pub forecast: Forecast,
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
    let sock = socket::connect(profile, remote, local, cc, Duration::from_secs(5), None)?;
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
            if let Some(p) = path_of(paths, s.local).filter(|&p| p < n) {
                per_path[p] += s.bytes_received.saturating_sub(prev);
                last_rtt[p] = s.rtt_us;
            }
        }
        last_sub = subs.iter().map(|s| (s.local, s.bytes_received)).collect();
        let sum = IntervalSum::new(
            (*interval_start - t0).as_secs_f64(),
            (now - t0).as_secs_f64(),
            *interval_bytes,
        );
        let streams = per_path
            .iter()
            .enumerate()
            .map(|(i, &bytes)| {
                path_total[i] += bytes;
                let name = paths.get(i).map_or_else(|| format!("path{i}"), |p| p.name.clone());
                sum.stream(i, name, bytes)
            })
            .collect();
        intervals.push(Interval { streams, sum });
        if let Some(i) = intervals.last() {
            on_event(Event::Interval(i));
        }
        *interval_start = now;
        *interval_bytes = 0;
    };
    let verify =
        |id: u64, data: &[u8], verifier: &mut BulkVerifier| -> Result<(), KernelPerfError> {
            Ok(crate::perf::verify(verifier, id, data)?)
        };
    let at = |i: Instant| braid_transport::Instant::from_duration(i - t0);
    let qe = profile.aesum().map(|a| (a, reader.forecast));
    let mut meter = KernelMeter::new(paths, &reader.power, qe, at(t0));
    let mut endpoints = CostlyEndpoints::new(paths, None);
    if meter.mode().is_some() {
        endpoints.clear();
    }
    let mut read_meter = ReadRateMeter::new();
    let mut latest: Option<(Instant, SenderReport)> = None;
    let mut side = meter.mode().and_then(|_| side_channel(paths));
    if let Some(rx) = &side {
        ms.queue_control(&rx.request());
    }
    let mut side_latest: Option<(Instant, SenderReport)> = None;
    let mut timeline = vec![ModeChange { t_s: 0.0, mode: "Full".into() }];
    let mut next_tick = t0 + meter::SAMPLE_INTERVAL;
    let mut last_tick = t0;
    let mut next_radio = t0;
    let mut wifi_arrived = 0u64;
    while Instant::now() < end_at {
        ms.poll(Duration::from_millis(2))?;
        loop {
            if let Some(r) = reader.rate_bps {
                let allowed = r / 8.0 * (t0.elapsed().as_secs_f64());
                if verified as f64 >= allowed {
                    break;
                }
            }
            match ms.try_recv()? {
                Some(Frame::Message(m)) => {
                    verify(next_id, &m, &mut verifier)?;
                    next_id += 1;
                    verified += m.len() as u64;
                    interval_bytes += m.len() as u64;
                    read_meter.record(at(Instant::now()), m.len() as u64);
                }
                Some(Frame::Control(c)) => {
                    if let Some(r) = SenderReport::parse(&c) {
                        latest = Some((Instant::now(), r));
                    }
                }
                None => {
                    // The reader wanted more than had arrived.
                    read_meter.starve(at(Instant::now()));
                    break;
                }
            }
        }
        if ms.at_eof() {
            return Err(KernelError::Closed.into());
        }
        let now = Instant::now();
        if let Some(r) = side.as_mut().and_then(|s| s.poll()) {
            side_latest = Some((now, r));
        }
        if now >= next_radio {
            next_radio = now + meter::RADIO_INTERVAL;
            let subs = info::subflows(ms.socket()).unwrap_or_default();
            let (down, _) = meter.on_subflows(at(now), paths, &subs);
            wifi_arrived += paths
                .iter()
                .zip(&down)
                .filter(|(p, _)| p.role == PathRole::Wifi)
                .map(|(_, b)| *b)
                .sum::<u64>();
        }
        if now >= next_tick {
            let secs = (now - last_tick).as_secs_f64().max(1e-3);
            last_tick = now;
            next_tick = now + meter::SAMPLE_INTERVAL;
            let arrived = std::mem::take(&mut wifi_arrived);
            if meter.mode().is_some() {
                let subs = info::subflows(ms.socket()).unwrap_or_default();
                let wifi = |s: &Subflow| {
                    path_of(paths, s.local)
                        .and_then(|p| paths.get(p))
                        .is_some_and(|p| p.role == PathRole::Wifi)
                };
                let capacity = side_latest
                    .as_ref()
                    .filter(|(t, _)| now - *t <= meter::REPORT_FRESH)
                    .map(|(_, r)| {
                        subs.iter()
                            .filter(|s| wifi(s))
                            .filter_map(|s| s.local.and_then(|a| r.subflow_to(&a)))
                            .map(|s| s.capacity_bps)
                            .sum::<f64>()
                    });
                read_meter.advance(at(now));
                let read_bps = read_meter.rate_bps();
                tracing::debug!(
                    arrived_bps = arrived as f64 * 8.0 / secs,
                    ?capacity,
                    read_bps,
                    "kernel aeSUM sample"
                );
                if let Some(m) = meter.on_sample(at(now), secs, arrived, capacity, read_bps)
                    && endpoints.switch(&mut meter, at(now), m)
                {
                    timeline
                        .push(ModeChange { t_s: (now - t0).as_secs_f64(), mode: format!("{m:?}") });
                }
            }
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
    meter.on_subflows(at(now), paths, &client_subs);
    // Stop, then read (and still verify) what was queued ahead of the last report; the
    // periodic reports stand in if it does not come in time.
    ms.queue(b"{\"stop\":true}");
    let stop_sent = latest.as_ref().map(|l| l.0);
    let give_up = Instant::now() + Duration::from_secs(5);
    let mut last_report = false;
    while !last_report && Instant::now() < give_up && !ms.at_eof() {
        ms.poll(Duration::from_millis(2))?;
        while let Some(f) = ms.try_recv()? {
            match f {
                Frame::Message(m) => {
                    verify(next_id, &m, &mut verifier)?;
                    next_id += 1;
                }
                Frame::Control(c) => {
                    if let Some(r) = SenderReport::parse(&c) {
                        let t = Instant::now();
                        latest = Some((t, r));
                        // Reports queued before the stop arrive first; the last one
                        // follows everything the server had queued.
                        last_report = stop_sent.is_none_or(|s| t > s) && ms.buffered_in() == 0;
                    }
                }
            }
        }
    }
    ms.close(Duration::from_millis(500));
    if meter.mode() == Some(PathMode::Partial) {
        endpoints.clear();
    }
    let energy = meter.snapshot(at(Instant::now()));
    let counters = latest.map(|l| l.1);
    let end_paths = (0..n)
        .map(|i| {
            let p = paths.get(i);
            let mine: Vec<&Subflow> =
                client_subs.iter().filter(|s| path_of(paths, s.local) == Some(i)).collect();
            let theirs: Vec<_> = mine
                .iter()
                .filter_map(|m| {
                    m.local.and_then(|a| counters.as_ref().and_then(|c| c.subflow_to(&a)))
                })
                .collect();
            let rtt_us = theirs.iter().map(|s| s.rtt_us).max().unwrap_or(last_rtt[i]);
            let radio = energy.radios.get(i).cloned().flatten();
            EndPath {
                name: p.map_or_else(|| format!("path{i}"), |p| p.name.clone()),
                bytes: path_total[i],
                bits_per_second: path_total[i] as f64 * 8.0 / seconds.max(1e-9),
                rtt_ms: f64::from(rtt_us) / 1e3,
                retransmits: theirs.iter().map(|s| u64::from(s.total_retrans)).sum(),
                capacity_bps: p.and_then(|p| p.capacity_bps).unwrap_or(0.0),
                error: String::new(),
                energy_j: radio.map(|r| r.energy_j),
            }
        })
        .collect();
    let received = Totals {
        bytes: verified,
        seconds,
        bits_per_second: verified as f64 * 8.0 / seconds.max(1e-9),
    };
    let capacity: Option<f64> = paths.iter().map(|p| p.capacity_bps).sum();
    let any_radio = energy.radios.iter().any(Option::is_some);
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
            energy_j: any_radio.then(|| energy.total_j()),
            failed_mode_switches: meter.mode().map(|_| energy.failed_mode_switches),
            mode_timeline: if meter.mode().is_some() { timeline } else { Vec::new() },
        },
    };
    Ok(ClientRun {
        report,
        connection_id: u64::from(local_addr.port()),
        local: vec![local_addr],
        messages: next_id,
    })
}
