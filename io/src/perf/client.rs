//! The perf client: receives and verifies the bulk stream, measures it per path and
//! interval, and asks the sender for its counters at the end.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use braid_netem::scenario::Scenario;
use braid_transport::bulk::BulkVerifier;
use braid_transport::profile::{PathUse, Profile};
use braid_transport::proto::{ClientCrypto, Config, ConnectionStats, Delivery, Reliability};
use tokio::time::Instant;

use super::report::{
    End, EndPath, HostPort, Interval, IntervalSum, PerfReport, Start, StartPath, Totals,
};
use super::server::{Served, send_bulk};
use super::{
    END_EXCHANGE, END_EXCHANGE_MAX, MESSAGE_BYTES, PerfError, ServerCounters, Stop,
    control_message, first_sent, source,
};
use crate::driver::{self, ConnectionHandle, PathSpec};
use crate::relay;

/// Run length when neither the caller nor a scenario gives one.
const DEFAULT_TIME: Duration = Duration::from_secs(10);
/// A last, partial interval is reported when it is longer than this.
const MIN_LAST_INTERVAL: Duration = Duration::from_millis(50);

/// One client path as the report names it.
#[derive(Clone, Debug, PartialEq)]
pub struct PerfPath {
    /// Its name in the report.
    pub name: String,
    /// The socket to open.
    pub spec: PathSpec,
    /// Configured capacity of the server → client direction, bit/s (when known).
    pub capacity_bps: Option<f64>,
}

/// How long a client runs and how often it reports.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ClientOptions {
    /// Run length (default: 10 s; a scenario run: the scenario's duration).
    pub time: Option<Duration>,
    /// Interval between interval reports.
    pub interval: Duration,
}

/// What a client reports while it runs.
#[derive(Clone, Copy, Debug)]
pub enum Event<'a> {
    /// Connected; the run starts.
    Started(&'a Start),
    /// An interval ended.
    Interval(&'a Interval),
}

/// A finished client run.
#[derive(Clone, Debug, PartialEq)]
pub struct ClientRun {
    /// The report (`-J`).
    pub report: PerfReport,
    /// The connection's id.
    pub connection_id: u64,
    /// The client's sockets' local addresses at the end, in path order.
    pub local: Vec<SocketAddr>,
    /// Data messages verified.
    pub messages: u64,
}

/// Sender-side counters per path, by path id.
#[derive(Default, Clone)]
struct SenderView {
    /// Payload bytes the sender sent for the first time.
    bytes_sent: Option<u64>,
    /// (path id, smoothed RTT ms, packets lost).
    paths: Vec<(u32, f64, u64)>,
}

impl SenderView {
    fn from_stats(stats: Option<&ConnectionStats>) -> SenderView {
        SenderView {
            bytes_sent: stats.map(first_sent),
            paths: stats
                .map(|s| {
                    s.paths
                        .iter()
                        .map(|p| (p.id.0, p.srtt.as_secs_f64() * 1e3, p.packets_lost))
                        .collect()
                })
                .unwrap_or_default(),
        }
    }
}

/// The start of the report that the client knows before it connects.
struct Head {
    connecting_to: HostPort,
    scenario: Option<String>,
    profile: String,
}

/// What the client measured.
struct Run {
    start: Start,
    seconds: f64,
    /// Bytes verified.
    bytes: u64,
    messages: u64,
    intervals: Vec<Interval>,
    /// Payload bytes received per path over the whole run.
    path_bytes: Vec<u64>,
    client_rtt_ms: Vec<f64>,
    connection_id: u64,
    local: Vec<SocketAddr>,
    path_errors: Vec<Option<String>>,
}

/// Receives from the perf server at `addr` over `paths` (one-path profiles use the first)
/// with the client configuration `config`, authenticating the server as `crypto` says,
/// for `options.time` (default 10 s).
#[allow(clippy::too_many_arguments)]
pub async fn run_client(
    addr: SocketAddr,
    mut paths: Vec<PerfPath>,
    profile: &Profile,
    config: Arc<Config>,
    crypto: ClientCrypto,
    options: ClientOptions,
    on_event: &mut (dyn FnMut(Event<'_>) + Send),
) -> Result<ClientRun, PerfError> {
    if profile.paths == PathUse::Single {
        paths.truncate(1);
    }
    let time = options.time.unwrap_or(DEFAULT_TIME);
    let conn = connect(config, crypto, &paths).await?;
    let head = Head {
        connecting_to: HostPort { host: addr.ip().to_string(), port: addr.port() },
        scenario: None,
        profile: profile.name.to_string(),
    };
    let result = receive(&conn, &paths, time, options.interval, head, on_event).await;
    let sender = match &result {
        Ok(_) => end_exchange(&conn).await,
        Err(_) => None,
    };
    conn.close(0, b"done").await;
    Ok(finish(&paths, result?, sender.unwrap_or_default(), None))
}

/// Runs a server (configuration `server_config`), the relay emulator for `scenario`'s
/// paths and a client (`client_config`) in this process, for `options.time` (default: the
/// scenario's duration). One-path profiles use the scenario's first path.
pub async fn run_scenario(
    scenario: &Scenario,
    profile: &Profile,
    server_config: Arc<Config>,
    client_config: Arc<Config>,
    options: ClientOptions,
    on_event: &mut (dyn FnMut(Event<'_>) + Send),
) -> Result<ClientRun, PerfError> {
    let loopback = IpAddr::V4(Ipv4Addr::LOCALHOST);
    // In process: a fresh self-signed identity, pinned by the client.
    let identity = crate::tls::self_signed()
        .map_err(|e| PerfError::InProcessServer(driver::DriverError::Tls(e.to_string())))?;
    let ep = driver::listen(SocketAddr::new(loopback, 0), server_config, identity.crypto.clone())
        .await
        .map_err(PerfError::InProcessServer)?;
    let relay = relay::start(scenario, ep.local_addr(), loopback, None, scenario.seed).await?;
    let mut paths = scenario_paths(scenario, &relay, loopback);
    if profile.paths == PathUse::Single {
        paths.truncate(1);
    }
    let time = options.time.unwrap_or(scenario.duration);
    let (conn, server) = {
        let client = connect(client_config, identity.pinned_client(), &paths);
        let accept = async { ep.accept().await.map(Arc::new) };
        let (c, s) = tokio::join!(client, accept);
        (c?, s.ok_or(PerfError::InProcessServerStopped)?)
    };
    let served = Arc::new(Served::default());
    let sender = tokio::spawn(send_bulk(Arc::clone(&server), Arc::clone(&served)));
    let head = Head {
        connecting_to: HostPort { host: loopback.to_string(), port: ep.local_addr().port() },
        scenario: Some(scenario.name.clone()),
        profile: profile.name.to_string(),
    };
    let result = receive(&conn, &paths, time, options.interval, head, on_event).await;
    served.stop();
    let stats = server.stats().await;
    sender.abort();
    conn.close(0, b"done").await;
    server.close(0, b"done").await;
    relay.stop().await;
    let run = result?;
    let view = SenderView::from_stats(stats.as_ref());
    let capacity: Option<f64> = paths.iter().map(|p| p.capacity_bps).sum();
    Ok(finish(&paths, run, view, capacity))
}

/// The client paths of a scenario run: one per scenario path, from `local` (port 0) to its
/// relay's front port, with the capacity of its server → client links.
pub(crate) fn scenario_paths(
    scenario: &Scenario,
    relay: &relay::RelayHandle,
    local: IpAddr,
) -> Vec<PerfPath> {
    scenario
        .paths
        .iter()
        .zip(relay.paths())
        .map(|(def, rp)| PerfPath {
            name: def.name.clone(),
            spec: PathSpec {
                local: SocketAddr::new(local, 0),
                iface: None,
                remote: rp.listen,
                role: def.role,
            },
            capacity_bps: def
                .down
                .iter()
                .filter_map(|&l| scenario.links.get(l).and_then(|l| l.config.rate.nominal_bps()))
                .reduce(f64::min),
        })
        .collect()
}

async fn connect(
    config: Arc<Config>,
    crypto: ClientCrypto,
    paths: &[PerfPath],
) -> Result<ConnectionHandle, PerfError> {
    let specs: Vec<PathSpec> = paths.iter().map(|p| p.spec.clone()).collect();
    let remote = specs.first().map(|s| s.remote);
    driver::connect(config, crypto, specs)
        .await
        .map_err(|source| PerfError::Connect { remote, source })
}

/// Payload bytes received per path (by path id), `n` paths.
fn path_bytes(stats: &ConnectionStats, n: usize) -> Vec<u64> {
    let mut v = vec![0u64; n];
    for p in &stats.paths {
        if let Some(slot) = v.get_mut(p.id.0 as usize) {
            *slot = p.data_bytes_received;
        }
    }
    v
}

/// The interval `from`–`to` (instants; `t0` the run's start): bytes per path since `last`,
/// which becomes `now_bytes`.
fn interval(
    t0: Instant,
    from: Instant,
    to: Instant,
    now_bytes: &[u64],
    last: &mut Vec<u64>,
    paths: &[PerfPath],
) -> Interval {
    let s0 = from.duration_since(t0).as_secs_f64();
    let s1 = to.duration_since(t0).as_secs_f64();
    let bytes: Vec<u64> = (0..paths.len())
        .map(|i| {
            let now = now_bytes.get(i).copied().unwrap_or(0);
            now.saturating_sub(last.get(i).copied().unwrap_or(0))
        })
        .collect();
    let sum = IntervalSum::new(s0, s1, bytes.iter().sum());
    let streams =
        paths.iter().zip(&bytes).enumerate().map(|(i, (p, &b))| sum.stream(i, p.name.clone(), b));
    let streams = streams.collect();
    *last = now_bytes.to_vec();
    Interval { streams, sum }
}

/// Reads and verifies the stream for `time`, reporting each `every`.
async fn receive(
    conn: &ConnectionHandle,
    paths: &[PerfPath],
    time: Duration,
    every: Duration,
    head: Head,
    on_event: &mut (dyn FnMut(Event<'_>) + Send),
) -> Result<Run, PerfError> {
    let mut verifier = BulkVerifier::new(source(), true);
    let n = paths.len();
    let infos = conn.paths();
    let start = Start {
        connecting_to: head.connecting_to,
        scenario: head.scenario,
        profile: head.profile,
        time_s: time.as_secs_f64(),
        message_bytes: MESSAGE_BYTES,
        connection_id: format!("{:016x}", conn.connection_id()),
        paths: paths
            .iter()
            .zip(&infos)
            .map(|(p, i)| StartPath {
                name: p.name.clone(),
                local: i.local.to_string(),
                remote: i.remote.to_string(),
                role: p.spec.role.as_str().to_string(),
                iface: p.spec.iface.clone().unwrap_or_default(),
            })
            .collect(),
    };
    on_event(Event::Started(&start));
    let t0 = Instant::now();
    let end_at = t0 + time;
    let mut next_tick = t0 + every;
    let mut last_tick = t0;
    let mut last_bytes = vec![0u64; n];
    let mut intervals = Vec::new();
    let mut verified = 0u64;
    let mut messages = 0u64;
    // Two timer entries for the whole run (not two per message read).
    let end = tokio::time::sleep_until(end_at);
    let tick = tokio::time::sleep_until(next_tick);
    tokio::pin!(end, tick);
    loop {
        tokio::select! {
            biased;
            _ = &mut end => break,
            _ = &mut tick => {
                let now = Instant::now();
                if let Some(s) = conn.stats().await {
                    let i = interval(t0, last_tick, now, &path_bytes(&s, n), &mut last_bytes, paths);
                    on_event(Event::Interval(&i));
                    intervals.push(i);
                }
                last_tick = now;
                next_tick += every;
                tick.as_mut().reset(next_tick);
            }
            m = conn.read_message() => match m {
                Ok(Delivery::Message { id, data }) => {
                    super::verify(&mut verifier, id, &data)?;
                    verified += data.len() as u64;
                    messages += 1;
                }
                Ok(Delivery::Gap { id }) => return Err(PerfError::Lost { id }),
                Err(source) => {
                    return Err(PerfError::ConnectionLost {
                        remote: conn.remote(),
                        after_s: t0.elapsed().as_secs_f64(),
                        verified_bytes: verified,
                        source,
                    });
                }
            }
        }
    }
    let seconds = t0.elapsed().as_secs_f64();
    let stats = conn.stats().await;
    let final_bytes =
        stats.as_ref().map(|s| path_bytes(s, n)).unwrap_or_else(|| last_bytes.clone());
    let now = Instant::now();
    if now.duration_since(last_tick) > MIN_LAST_INTERVAL {
        let i = interval(t0, last_tick, now, &final_bytes, &mut last_bytes, paths);
        on_event(Event::Interval(&i));
        intervals.push(i);
    }
    let mut client_rtt_ms = vec![0.0; n];
    if let Some(s) = &stats {
        for p in &s.paths {
            if let Some(slot) = client_rtt_ms.get_mut(p.id.0 as usize) {
                *slot = p.srtt.as_secs_f64() * 1e3;
            }
        }
    }
    let infos = conn.paths();
    Ok(Run {
        start,
        seconds,
        bytes: verified,
        messages,
        intervals,
        path_bytes: final_bytes,
        client_rtt_ms,
        connection_id: conn.connection_id(),
        local: infos.iter().map(|i| i.local).collect(),
        path_errors: infos.iter().map(|i| i.error.clone()).collect(),
    })
}

/// Asks the server for its counters. Data still queued ahead of them is read (not
/// counted, not checked) as it drains; gives up when nothing arrived for
/// [`END_EXCHANGE`], or after [`END_EXCHANGE_MAX`].
async fn end_exchange(conn: &ConnectionHandle) -> Option<SenderView> {
    conn.send_message(control_message(&Stop { stop: true }), Reliability::Reliable).await.ok()?;
    let last = Instant::now() + END_EXCHANGE_MAX;
    loop {
        let deadline = (Instant::now() + END_EXCHANGE).min(last);
        let m = tokio::time::timeout_at(deadline, conn.read_message()).await.ok()?.ok()?;
        if let Delivery::Message { data, .. } = m {
            if data.len() == MESSAGE_BYTES {
                continue;
            }
            let c: ServerCounters = serde_json::from_slice(&data).ok()?;
            return Some(SenderView {
                bytes_sent: c.bytes_sent,
                paths: c.paths.iter().map(|p| (p.id, p.srtt_ms, p.packets_lost)).collect(),
            });
        }
    }
}

/// The report of `run`, with the sender's counters where it gave them.
fn finish(
    paths: &[PerfPath],
    run: Run,
    sender: SenderView,
    capacity_bps: Option<f64>,
) -> ClientRun {
    let secs = run.seconds.max(1e-9);
    let goodput = run.bytes as f64 * 8.0 / secs;
    let sent_bytes = sender.bytes_sent.unwrap_or(run.bytes);
    let rows = paths
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let bytes = run.path_bytes.get(i).copied().unwrap_or(0);
            let s = sender.paths.iter().find(|(id, _, _)| *id as usize == i);
            EndPath {
                name: p.name.clone(),
                bytes,
                bits_per_second: bytes as f64 * 8.0 / secs,
                rtt_ms: s.map_or_else(|| run.client_rtt_ms.get(i).copied().unwrap_or(0.0), |s| s.1),
                retransmits: s.map_or(0, |s| s.2),
                capacity_bps: p.capacity_bps.unwrap_or(0.0),
                error: run.path_errors.get(i).cloned().flatten().unwrap_or_default(),
                energy_j: None,
            }
        })
        .collect();
    let end = End {
        sum_received: Totals { bytes: run.bytes, seconds: run.seconds, bits_per_second: goodput },
        sum_sent: Totals {
            bytes: sent_bytes,
            seconds: run.seconds,
            bits_per_second: sent_bytes as f64 * 8.0 / secs,
        },
        paths: rows,
        verified: true,
        sender_counters: !sender.paths.is_empty(),
        capacity_bps,
        share_of_capacity: capacity_bps.map(|c| if c > 0.0 { goodput / c } else { 0.0 }),
        energy_j: None,
        mode_timeline: Vec::new(),
        failed_mode_switches: None,
    };
    ClientRun {
        report: PerfReport { start: run.start, intervals: run.intervals, end },
        connection_id: run.connection_id,
        local: run.local,
        messages: run.messages,
    }
}
