//! `braid perf`: iperf3-like throughput runs over the built-in transport.
//!
//! - `braid perf server --listen ADDR [--profile P]` serves until interrupted.
//! - `braid perf client ADDR [--path LOCAL[@IFACE] …] [--profile P] [--time S] [-J]`
//!   connects over one socket per `--path` (default: one path from any local address).
//! - `braid perf client --scenario FILE [--profile P] [--time S] [-J]` runs a server, the
//!   UDP relay emulator for the scenario's paths and the client in this one process; client
//!   path i sends to relay path i (default time: the scenario's duration).
//!
//! The transfer is bulk, server → client (the direction a scenario's `down` links shape),
//! in messages of [`DATA_LEN`] bytes whose content is a byte counter modulo 251 over the
//! whole stream; the client checks every byte and every message id and fails on the first
//! difference or gap. The client prints one line per path and a sum line every second, then
//! a summary; `-J` prints only the JSON object of INTERFACES.md on stdout.
//!
//! At the end the client asks the server for its per-path counters (RTT, retransmissions)
//! with a stop message; in scenario mode they are read from the in-process server directly.
//! The sender's congestion control and scheduler are the server's: in `ADDR` mode the
//! server's `--profile`, in scenario mode `--profile`.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use anyhow::{Context as _, anyhow, bail};
use braid_io::driver::{self, Bytes, ConnectionHandle, Endpoint, PathSpec};
use braid_io::relay;
use braid_transport::PathRole;
use braid_transport::profile::{self, PathUse, Profile};
use braid_transport::proto::{Config, ConnectionStats, Delivery, Reliability};
use braid_transport::scenario::Scenario;
use serde_json::{Value, json};
use tokio::time::Instant as TokioInstant;

/// Bytes per data message.
pub const DATA_LEN: usize = 16 * 1024;
/// Period of the byte-counter pattern (prime, so that a message at the wrong offset differs).
const PATTERN_PERIOD: usize = 251;
/// How long the client waits for the server's counters after the run.
const END_EXCHANGE: Duration = Duration::from_secs(2);

/// Arguments of `braid perf`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    mode: Mode,
}

#[derive(Debug, clap::Subcommand)]
enum Mode {
    /// Serve bulk transfers until interrupted.
    Server(ServerArgs),
    /// Receive a bulk transfer and report throughput per path.
    Client(ClientArgs),
}

#[derive(Debug, clap::Args)]
struct ServerArgs {
    /// Address to listen on.
    #[arg(long, default_value = "0.0.0.0:5201")]
    listen: SocketAddr,
    /// Transport profile of the sender (congestion control and scheduler).
    #[arg(long, default_value = "mptcp")]
    profile: String,
    /// Serve one client, then exit.
    #[arg(short = '1', long = "one-off")]
    one_off: bool,
    /// Runtime worker threads (default 1).
    #[arg(long, value_name = "N")]
    threads: Option<usize>,
}

#[derive(Debug, clap::Args)]
struct ClientArgs {
    /// Server address (or use --scenario).
    #[arg(required_unless_present = "scenario", conflicts_with = "scenario")]
    addr: Option<SocketAddr>,
    /// One path per flag: local address (IP or IP:PORT) and optionally @INTERFACE
    /// (SO_BINDTODEVICE, Linux). Default: one path from any local address.
    #[arg(long = "path", value_name = "LOCAL[@IFACE]", conflicts_with = "scenario")]
    paths: Vec<String>,
    /// Run server, emulated paths and client in this process, from a scenario file.
    #[arg(long, value_name = "FILE")]
    scenario: Option<PathBuf>,
    /// Transport profile.
    #[arg(long, default_value = "mptcp")]
    profile: String,
    /// Seconds to run (default 10; with --scenario, the scenario's duration).
    #[arg(short = 't', long = "time", value_name = "S", allow_negative_numbers = true)]
    time: Option<f64>,
    /// Print only the JSON report on stdout.
    #[arg(short = 'J', long = "json")]
    json: bool,
    /// Runtime worker threads (default 1; 2 with --scenario).
    #[arg(long, value_name = "N")]
    threads: Option<usize>,
    /// Seconds between interval reports.
    #[arg(
        short = 'i',
        long = "interval",
        value_name = "S",
        default_value_t = 1.0,
        allow_negative_numbers = true
    )]
    interval: f64,
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    // One thread by default: a lone server or client is one connection task (plus the
    // server's socket reader), and cross-thread wake-ups cost more CPU than they overlap.
    // The scenario mode runs server, relays and client: two threads.
    let threads = match &args.mode {
        Mode::Server(a) => a.threads.unwrap_or(1),
        Mode::Client(a) => a.threads.unwrap_or(if a.scenario.is_some() { 2 } else { 1 }),
    };
    if !(1..=64).contains(&threads) {
        bail!("--threads must be between 1 and 64, got {threads}");
    }
    let mut builder = if threads == 1 {
        tokio::runtime::Builder::new_current_thread()
    } else {
        let mut b = tokio::runtime::Builder::new_multi_thread();
        b.worker_threads(threads);
        b
    };
    let rt = builder.enable_all().build().context("starting the async runtime")?;
    match args.mode {
        Mode::Server(a) => rt.block_on(server_main(a)),
        Mode::Client(a) => rt.block_on(client_main(a)),
    }
}

fn lookup_profile(name: &str) -> anyhow::Result<Profile> {
    Ok(profile::lookup(name)?)
}

pub(crate) fn config_for(p: &Profile, client: bool) -> Arc<Config> {
    Arc::new(config_with(p, client, None))
}

/// As [`config_for`], with the receive buffer (and so the flow-control window) set.
pub(crate) fn config_with(p: &Profile, client: bool, recv_buffer_bytes: Option<u64>) -> Config {
    let side = if client { profile::Side::Client } else { profile::Side::Server };
    let mut params = profile::ConfigParams::new(side, profile::Clock::Real);
    params.recv_buffer_bytes = recv_buffer_bytes;
    p.connection_config(params)
}

/// The byte-counter pattern, long enough to slice any message from.
fn pattern() -> Bytes {
    Bytes::from(
        (0..DATA_LEN + PATTERN_PERIOD).map(|i| (i % PATTERN_PERIOD) as u8).collect::<Vec<u8>>(),
    )
}

fn data_message(pattern: &Bytes, id: u64) -> Bytes {
    let off = ((id % PATTERN_PERIOD as u64) as usize * DATA_LEN) % PATTERN_PERIOD;
    pattern.slice(off..off + DATA_LEN)
}

/// A control message: JSON, never exactly [`DATA_LEN`] bytes long.
fn control_message(v: &Value) -> Bytes {
    let mut s = v.to_string().into_bytes();
    if s.len() == DATA_LEN {
        s.push(b' ');
    }
    Bytes::from(s)
}

// ----- server -----

/// Counters of one served connection.
#[derive(Default)]
struct Served {
    messages: AtomicU64,
    stopped: AtomicBool,
}

async fn server_main(a: ServerArgs) -> anyhow::Result<()> {
    let profile = lookup_profile(&a.profile)?;
    let config = config_for(&profile, false);
    let ep = driver::listen(a.listen, config)
        .await
        .with_context(|| format!("listening on {}", a.listen))?;
    println!("Server listening on {} (profile {})", ep.local_addr(), profile.name);
    let ep = Arc::new(ep);
    loop {
        let conn = tokio::select! {
            c = ep.accept() => c,
            _ = tokio::signal::ctrl_c() => break,
        };
        let Some(conn) = conn else { break };
        println!("Accepted connection {:016x} from {}", conn.connection_id(), conn.remote());
        let task = tokio::spawn(serve(Arc::new(conn)));
        if a.one_off {
            let report = tokio::select! {
                r = task => r.ok(),
                _ = tokio::signal::ctrl_c() => None,
            };
            if let Some(r) = report {
                println!("{r}");
            }
            break;
        }
        tokio::spawn(async move {
            if let Ok(r) = task.await {
                println!("{r}");
            }
        });
    }
    let s = ep.stats();
    if s.dropped_unknown > 0 {
        println!("Dropped {} datagrams that belonged to no connection", s.dropped_unknown);
    }
    Ok(())
}

/// Sends the bulk stream on `conn` until the client stops or leaves; returns a summary line.
async fn serve(conn: Arc<ConnectionHandle>) -> String {
    let served = Arc::new(Served::default());
    let started = TokioInstant::now();
    let sender = tokio::spawn(send_bulk(Arc::clone(&conn), Arc::clone(&served)));
    // Read control messages from the client.
    let end = loop {
        match conn.read_message().await {
            Ok(Delivery::Message { .. }) => {
                served.stopped.store(true, Ordering::SeqCst);
                // Counters for the client, after the data already queued.
                let stats = conn.stats().await;
                let v = server_report(&served, stats.as_ref());
                let _ = conn.send_message(control_message(&v), Reliability::Reliable).await;
            }
            Ok(Delivery::Gap { .. }) => {}
            Err(e) => break e,
        }
    };
    sender.abort();
    let secs = started.elapsed().as_secs_f64();
    let bytes = served.messages.load(Ordering::SeqCst) * DATA_LEN as u64;
    let stats = conn.stats().await;
    let lost: u64 = stats.as_ref().map_or(0, |s| s.lost_packets);
    format!(
        "Connection {:016x}: queued {} in {:.2} s ({}), {} packets lost; ended: {}",
        conn.connection_id(),
        fmt_bytes(bytes),
        secs,
        fmt_rate(bytes as f64 * 8.0 / secs.max(1e-9)),
        lost,
        end
    )
}

async fn send_bulk(conn: Arc<ConnectionHandle>, served: Arc<Served>) {
    let pattern = pattern();
    let mut id = 0u64;
    while !served.stopped.load(Ordering::SeqCst) {
        if conn.send_message(data_message(&pattern, id), Reliability::Reliable).await.is_err() {
            return;
        }
        id += 1;
        served.messages.store(id, Ordering::SeqCst);
    }
}

fn server_report(served: &Served, stats: Option<&ConnectionStats>) -> Value {
    let paths: Vec<Value> = stats
        .map(|s| {
            s.paths
                .iter()
                .map(|p| {
                    json!({
                        "id": p.id.0,
                        "data_bytes_sent": p.data_bytes_sent,
                        "packets_lost": p.packets_lost,
                        "srtt_ms": p.srtt.as_secs_f64() * 1e3,
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    json!({
        "braid_perf_report": 1,
        "bytes_queued": served.messages.load(Ordering::SeqCst) * DATA_LEN as u64,
        "bytes_sent": stats.map_or(0, first_sent),
        "retransmitted_bytes": stats.map_or(0, |s| s.retransmitted_bytes),
        "paths": paths,
    })
}

/// Payload bytes sent for the first time (all paths): what the sender put on the network.
fn first_sent(s: &ConnectionStats) -> u64 {
    let all: u64 = s.paths.iter().map(|p| p.data_bytes_sent).sum();
    all.saturating_sub(s.retransmitted_bytes)
}

// ----- client -----

/// One client path as the report names it.
pub(crate) struct NamedPath {
    pub(crate) name: String,
    pub(crate) spec: PathSpec,
    /// Configured capacity of the server → client direction (scenario mode).
    capacity_bps: Option<f64>,
}

/// Sender-side counters per path, by path id.
#[derive(Default, Clone)]
struct SenderView {
    /// Payload bytes the sender sent for the first time.
    bytes_sent: Option<u64>,
    paths: Vec<(u32, f64, u64)>, // (id, srtt_ms, packets_lost)
}

pub(crate) fn parse_path(text: &str, remote: SocketAddr, i: usize) -> anyhow::Result<NamedPath> {
    let (local, iface) = match text.split_once('@') {
        Some((l, i)) if !i.is_empty() => (l, Some(i.to_string())),
        Some(_) => bail!("--path {text}: empty interface name after @"),
        None => (text, None),
    };
    let local: SocketAddr = if local.is_empty() {
        driver::unspecified_for(remote)
    } else if let Ok(sa) = local.parse::<SocketAddr>() {
        sa
    } else if let Ok(ip) = local.parse::<IpAddr>() {
        SocketAddr::new(ip, 0)
    } else {
        bail!(
            "--path {text}: `{local}` is not an IP address (expected LOCAL[@IFACE], e.g. 192.168.1.5@wlan0)"
        )
    };
    if local.is_ipv4() != remote.is_ipv4() {
        bail!(
            "--path {text}: the local address and the server {remote} are of different IP families"
        );
    }
    let name = iface.clone().unwrap_or_else(|| format!("path{i}"));
    Ok(NamedPath {
        name,
        spec: PathSpec { local, iface, remote, role: PathRole::Wired },
        capacity_bps: None,
    })
}

async fn client_main(a: ClientArgs) -> anyhow::Result<()> {
    if !(a.interval.is_finite() && a.interval >= 0.1) {
        bail!("--interval must be at least 0.1 s, got {}", a.interval);
    }
    if let Some(t) = a.time
        && !(t.is_finite() && t > 0.0)
    {
        bail!("--time must be a positive number of seconds, got {t}");
    }
    let profile = lookup_profile(&a.profile)?;
    match &a.scenario {
        Some(file) => {
            let scenario = Scenario::load(file)?;
            run_scenario(&a, &profile, scenario).await
        }
        None => {
            let Some(addr) = a.addr else { bail!("give a server address or --scenario FILE") };
            let mut paths = Vec::new();
            if a.paths.is_empty() {
                paths.push(NamedPath {
                    name: "path0".into(),
                    spec: PathSpec::to(addr, PathRole::Wired),
                    capacity_bps: None,
                });
            }
            for (i, p) in a.paths.iter().enumerate() {
                paths.push(parse_path(p, addr, i)?);
            }
            if profile.paths == PathUse::Single {
                paths.truncate(1);
            }
            let time = Duration::from_secs_f64(a.time.unwrap_or(10.0));
            let seed = std::process::id() as u64 ^ 0x5eed_0000;
            let conn = connect(&profile, &paths, seed).await?;
            let start = json!({
                "connecting_to": {"host": addr.ip().to_string(), "port": addr.port()},
                "profile": profile.name,
            });
            let result = receive(&a, &conn, &paths, time, start).await;
            let sender = match &result {
                Ok(_) => end_exchange(&conn).await,
                Err(_) => None,
            };
            conn.close(0, b"done").await;
            let run = result?;
            report(&a, &paths, &run, sender.unwrap_or_default(), None)
        }
    }
}

async fn connect(
    profile: &Profile,
    paths: &[NamedPath],
    seed: u64,
) -> anyhow::Result<ConnectionHandle> {
    let config = config_for(profile, true);
    let specs: Vec<PathSpec> = paths.iter().map(|p| p.spec.clone()).collect();
    let remote = specs.first().map(|s| s.remote);
    driver::connect(config, specs, seed).await.with_context(|| match remote {
        Some(r) => format!("connecting to {r}"),
        None => "connecting".to_string(),
    })
}

/// Scenario mode: server, relays and client in this process.
async fn run_scenario(a: &ClientArgs, profile: &Profile, scenario: Scenario) -> anyhow::Result<()> {
    let loopback = IpAddr::V4(Ipv4Addr::LOCALHOST);
    let config = config_for(profile, false);
    let ep: Endpoint =
        driver::listen_seeded(SocketAddr::new(loopback, 0), config, scenario.seed ^ 0x5e)
            .await
            .context("starting the in-process server")?;
    let relay = relay::start(&scenario, ep.local_addr(), loopback, None, scenario.seed).await?;
    let mut paths: Vec<NamedPath> = scenario
        .paths
        .iter()
        .zip(relay.paths())
        .map(|(def, rp)| NamedPath {
            name: def.name.clone(),
            spec: PathSpec {
                local: SocketAddr::new(loopback, 0),
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
        .collect();
    if profile.paths == PathUse::Single {
        paths.truncate(1);
    }
    let time = match a.time {
        Some(t) => Duration::from_secs_f64(t),
        None => scenario.duration,
    };
    let (conn, server) = {
        let client = connect(profile, &paths, scenario.seed);
        let accept = async {
            let c = ep.accept().await.ok_or_else(|| anyhow!("the in-process server stopped"))?;
            anyhow::Ok(Arc::new(c))
        };
        let (c, s) = tokio::join!(client, accept);
        (c?, s?)
    };
    let served = Arc::new(Served::default());
    let sender = tokio::spawn(send_bulk(Arc::clone(&server), Arc::clone(&served)));
    let start = json!({
        "scenario": scenario.name,
        "profile": profile.name,
        "connecting_to": {"host": loopback.to_string(), "port": ep.local_addr().port()},
    });
    let result = receive(a, &conn, &paths, time, start).await;
    served.stopped.store(true, Ordering::SeqCst);
    let stats = server.stats().await;
    sender.abort();
    conn.close(0, b"done").await;
    server.close(0, b"done").await;
    relay.stop().await;
    let run = result?;
    let view = SenderView {
        bytes_sent: stats.as_ref().map(first_sent),
        paths: stats
            .map(|s| {
                s.paths
                    .iter()
                    .map(|p| (p.id.0, p.srtt.as_secs_f64() * 1e3, p.packets_lost))
                    .collect()
            })
            .unwrap_or_default(),
    };
    let capacity: Option<f64> = paths.iter().map(|p| p.capacity_bps).sum();
    report(a, &paths, &run, view, capacity)
}

/// What the client measured.
struct Run {
    start: Value,
    seconds: f64,
    bytes: u64,
    intervals: Vec<Value>,
    /// Payload bytes received per path over the whole run.
    path_bytes: Vec<u64>,
    client_rtt_ms: Vec<f64>,
    connection_id: u64,
    local: Vec<SocketAddr>,
    path_errors: Vec<Option<String>>,
}

fn path_bytes(stats: &ConnectionStats, n: usize) -> Vec<u64> {
    let mut v = vec![0u64; n];
    for p in &stats.paths {
        if let Some(slot) = v.get_mut(p.id.0 as usize) {
            *slot = p.data_bytes_received;
        }
    }
    v
}

/// Reads and verifies the stream for `time`, printing interval lines.
async fn receive(
    a: &ClientArgs,
    conn: &ConnectionHandle,
    paths: &[NamedPath],
    time: Duration,
    mut start: Value,
) -> anyhow::Result<Run> {
    let pattern = pattern();
    let n = paths.len();
    let infos = conn.paths();
    if let Some(obj) = start.as_object_mut() {
        obj.insert("time_s".into(), json!(time.as_secs_f64()));
        obj.insert("message_bytes".into(), json!(DATA_LEN));
        obj.insert("connection_id".into(), json!(format!("{:016x}", conn.connection_id())));
        obj.insert(
            "paths".into(),
            json!(
                paths
                    .iter()
                    .zip(&infos)
                    .map(|(p, i)| json!({
                        "name": p.name,
                        "local": i.local.to_string(),
                        "remote": i.remote.to_string(),
                        "role": p.spec.role.as_str(),
                        "iface": p.spec.iface.clone().unwrap_or_default(),
                    }))
                    .collect::<Vec<_>>()
            ),
        );
    }
    if !a.json {
        let target = start["connecting_to"]["host"].as_str().unwrap_or("").to_string();
        let port = start["connecting_to"]["port"].as_u64().unwrap_or(0);
        match start.get("scenario").and_then(Value::as_str) {
            Some(s) => println!(
                "Scenario {s}: in-process server on {target}:{port}, {n} emulated path(s), profile {}",
                start["profile"].as_str().unwrap_or("")
            ),
            None => println!(
                "Connected to {target}:{port}, {n} path(s), profile {}",
                start["profile"].as_str().unwrap_or("")
            ),
        }
        for (i, (p, info)) in paths.iter().zip(&infos).enumerate() {
            println!(
                "[{i:>3}] {:<8} local {} -> {} ({})",
                p.name, info.local, info.remote, p.spec.role
            );
        }
        println!("[ ID] Path     Interval           Transfer     Bitrate");
    }
    let t0 = TokioInstant::now();
    let end_at = t0 + time;
    let interval = Duration::from_secs_f64(a.interval);
    let mut next_tick = t0 + interval;
    let mut last_tick = t0;
    let mut last_bytes = vec![0u64; n];
    let mut intervals = Vec::new();
    let mut verified = 0u64;
    let mut next_id = 0u64;
    let mut emit = |from: TokioInstant,
                    to: TokioInstant,
                    now_bytes: &[u64],
                    last: &mut Vec<u64>| {
        let s0 = from.duration_since(t0).as_secs_f64();
        let s1 = to.duration_since(t0).as_secs_f64();
        let secs = (s1 - s0).max(1e-9);
        let mut streams = Vec::new();
        let mut sum = 0u64;
        for (i, p) in paths.iter().enumerate() {
            let b = now_bytes
                .get(i)
                .copied()
                .unwrap_or(0)
                .saturating_sub(last.get(i).copied().unwrap_or(0));
            sum += b;
            let bps = b as f64 * 8.0 / secs;
            if !a.json {
                println!(
                    "[{i:>3}] {:<8} {s0:>6.2}-{s1:<6.2} sec  {:>11}  {:>15}",
                    p.name,
                    fmt_bytes(b),
                    fmt_rate(bps)
                );
            }
            streams
                .push(json!({"socket": i, "name": p.name, "start": s0, "end": s1, "seconds": secs,
                                "bytes": b, "bits_per_second": bps}));
        }
        let bps = sum as f64 * 8.0 / secs;
        if !a.json {
            println!(
                "[SUM] {:<8} {s0:>6.2}-{s1:<6.2} sec  {:>11}  {:>15}",
                "",
                fmt_bytes(sum),
                fmt_rate(bps)
            );
        }
        *last = now_bytes.to_vec();
        intervals.push(json!({"streams": streams,
                              "sum": {"start": s0, "end": s1, "seconds": secs, "bytes": sum, "bits_per_second": bps}}));
    };
    loop {
        tokio::select! {
            biased;
            _ = tokio::time::sleep_until(end_at) => break,
            _ = tokio::time::sleep_until(next_tick) => {
                let now = TokioInstant::now();
                if let Some(s) = conn.stats().await {
                    emit(last_tick, now, &path_bytes(&s, n), &mut last_bytes);
                }
                last_tick = now;
                next_tick += interval;
            }
            m = conn.read_message() => match m {
                Ok(Delivery::Message { id, data }) => {
                    if id != next_id {
                        bail!("message {id} arrived where {next_id} was expected");
                    }
                    if data.len() != DATA_LEN || data != data_message(&pattern, id) {
                        bail!("message {id} is corrupt ({} bytes, content differs from what was sent)", data.len());
                    }
                    verified += data.len() as u64;
                    next_id += 1;
                }
                Ok(Delivery::Gap { id }) => bail!("message {id} was lost (abandoned by the sender)"),
                Err(e) => {
                    let at = t0.elapsed().as_secs_f64();
                    return Err(anyhow!(e)).with_context(|| format!(
                        "connection to {} lost after {at:.1} s ({} received intact)",
                        conn.remote(), fmt_bytes(verified)));
                }
            }
        }
    }
    let seconds = t0.elapsed().as_secs_f64();
    let stats = conn.stats().await;
    let final_bytes =
        stats.as_ref().map(|s| path_bytes(s, n)).unwrap_or_else(|| last_bytes.clone());
    let now = TokioInstant::now();
    if now.duration_since(last_tick) > Duration::from_millis(50) {
        emit(last_tick, now, &final_bytes, &mut last_bytes);
    }
    let infos = conn.paths();
    Ok(Run {
        start,
        seconds,
        bytes: verified,
        intervals,
        path_bytes: final_bytes,
        client_rtt_ms: {
            let mut v = vec![0.0; n];
            if let Some(s) = &stats {
                for p in &s.paths {
                    if let Some(slot) = v.get_mut(p.id.0 as usize) {
                        *slot = p.srtt.as_secs_f64() * 1e3;
                    }
                }
            }
            v
        },
        connection_id: conn.connection_id(),
        local: infos.iter().map(|i| i.local).collect(),
        path_errors: infos.iter().map(|i| i.error.clone()).collect(),
    })
}

/// Asks the server for its counters (ADDR mode). Data still queued ahead of them is read
/// (not counted, not checked) as it drains; gives up after [`END_EXCHANGE`].
async fn end_exchange(conn: &ConnectionHandle) -> Option<SenderView> {
    conn.send_message(control_message(&json!({"stop": true})), Reliability::Reliable).await.ok()?;
    let deadline = TokioInstant::now() + END_EXCHANGE;
    loop {
        let m = tokio::time::timeout_at(deadline, conn.read_message()).await.ok()?.ok()?;
        if let Delivery::Message { data, .. } = m {
            if data.len() == DATA_LEN {
                continue;
            }
            let v: Value = serde_json::from_slice(&data).ok()?;
            let paths = v["paths"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .map(|p| {
                            (
                                p["id"].as_u64().unwrap_or(0) as u32,
                                p["srtt_ms"].as_f64().unwrap_or(0.0),
                                p["packets_lost"].as_u64().unwrap_or(0),
                            )
                        })
                        .collect()
                })
                .unwrap_or_default();
            return Some(SenderView { bytes_sent: v["bytes_sent"].as_u64(), paths });
        }
    }
}

fn report(
    a: &ClientArgs,
    paths: &[NamedPath],
    run: &Run,
    sender: SenderView,
    capacity_bps: Option<f64>,
) -> anyhow::Result<()> {
    let secs = run.seconds.max(1e-9);
    let goodput = run.bytes as f64 * 8.0 / secs;
    let sent_bytes = sender.bytes_sent.unwrap_or(run.bytes);
    let mut path_rows = Vec::new();
    for (i, p) in paths.iter().enumerate() {
        let bytes = run.path_bytes.get(i).copied().unwrap_or(0);
        let s = sender.paths.iter().find(|(id, _, _)| *id as usize == i);
        let rtt =
            s.map(|s| s.1).unwrap_or_else(|| run.client_rtt_ms.get(i).copied().unwrap_or(0.0));
        let retr = s.map_or(0, |s| s.2);
        path_rows.push(json!({
            "name": p.name,
            "bytes": bytes,
            "bits_per_second": bytes as f64 * 8.0 / secs,
            "rtt_ms": rtt,
            "retransmits": retr,
            "capacity_bps": p.capacity_bps.unwrap_or(0.0),
            "error": run.path_errors.get(i).cloned().flatten().unwrap_or_default(),
        }));
    }
    let mut end = json!({
        "sum_received": {"bytes": run.bytes, "seconds": run.seconds, "bits_per_second": goodput},
        "sum_sent": {"bytes": sent_bytes, "seconds": run.seconds, "bits_per_second": sent_bytes as f64 * 8.0 / secs},
        "paths": path_rows,
        "verified": true,
        "sender_counters": !sender.paths.is_empty(),
    });
    if let (Some(c), Some(obj)) = (capacity_bps, end.as_object_mut()) {
        obj.insert("capacity_bps".into(), json!(c));
        obj.insert("share_of_capacity".into(), json!(if c > 0.0 { goodput / c } else { 0.0 }));
    }
    if a.json {
        let v = json!({"start": run.start, "intervals": run.intervals, "end": end});
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    println!("- - - - - - - - - - - - - - - - - - - - - - - - - - - - - -");
    println!("[ ID] Path     Interval           Transfer     Bitrate          Retr   RTT");
    for (i, row) in path_rows.iter().enumerate() {
        let b = row["bytes"].as_u64().unwrap_or(0);
        let err = run.path_errors.get(i).cloned().flatten();
        println!(
            "[{i:>3}] {:<8} {:>6.2}-{:<6.2} sec  {:>11}  {:>15}  {:>5}  {:>6.1} ms{}",
            paths.get(i).map_or("", |p| p.name.as_str()),
            0.0,
            run.seconds,
            fmt_bytes(b),
            fmt_rate(b as f64 * 8.0 / secs),
            row["retransmits"].as_u64().unwrap_or(0),
            row["rtt_ms"].as_f64().unwrap_or(0.0),
            err.map(|e| format!("  (failed: {e})")).unwrap_or_default()
        );
    }
    println!(
        "[SUM] {:<8} {:>6.2}-{:<6.2} sec  {:>11}  {:>15}         sender",
        "",
        0.0,
        run.seconds,
        fmt_bytes(sent_bytes),
        fmt_rate(sent_bytes as f64 * 8.0 / secs)
    );
    println!(
        "[SUM] {:<8} {:>6.2}-{:<6.2} sec  {:>11}  {:>15}         receiver",
        "",
        0.0,
        run.seconds,
        fmt_bytes(run.bytes),
        fmt_rate(goodput)
    );
    if let Some(c) = capacity_bps {
        println!(
            "Goodput is {:.1} % of the configured capacity ({})",
            100.0 * goodput / c.max(1.0),
            fmt_rate(c)
        );
    }
    println!(
        "Verified {} in {} messages: every byte intact and in order (connection {:016x}, local {})",
        fmt_bytes(run.bytes),
        run.bytes / DATA_LEN as u64,
        run.connection_id,
        run.local.iter().map(|l| l.to_string()).collect::<Vec<_>>().join(", ")
    );
    Ok(())
}

fn fmt_bytes(b: u64) -> String {
    let b = b as f64;
    if b >= 1024.0 * 1024.0 * 1024.0 {
        format!("{:.2} GBytes", b / (1024.0 * 1024.0 * 1024.0))
    } else if b >= 1024.0 * 1024.0 {
        format!("{:.2} MBytes", b / (1024.0 * 1024.0))
    } else {
        format!("{:.0} KBytes", b / 1024.0)
    }
}

fn fmt_rate(bps: f64) -> String {
    if bps >= 1e9 {
        format!("{:.2} Gbits/sec", bps / 1e9)
    } else if bps >= 1e6 {
        format!("{:.2} Mbits/sec", bps / 1e6)
    } else {
        format!("{:.0} Kbits/sec", bps / 1e3)
    }
}
