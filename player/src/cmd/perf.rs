//! `braid perf`: iperf3-like throughput runs over the built-in transport
//! ([`braid_io::perf`]).
//!
//! - `braid perf server --listen ADDR [--profile P]` serves until interrupted.
//! - `braid perf client ADDR [--path LOCAL[@IFACE][/ROLE] …] [--profile P] [--time S] [-J]`
//!   connects over one socket per `--path` (default: one path from any local address).
//! - `braid perf client --scenario FILE [--profile P] [--time S] [-J]` runs a server, the
//!   UDP relay emulator for the scenario's paths and the client in this one process; client
//!   path i sends to relay path i (default time: the scenario's duration).
//!
//! The client prints one line per path and a sum line every interval, then a summary;
//! `-J` prints only the JSON object of docs/REFERENCE.md on stdout. The sender's congestion
//! control and scheduler are the server's: in `ADDR` mode the server's `--profile`, in
//! scenario mode `--profile`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, bail};
use braid_io::perf::{self, ClientOptions, Event, PerfPath, ServerEvent, fmt_bytes, fmt_rate};
use braid_netem::scenario::Scenario;
use braid_transport::profile::Side;

use crate::choice::TransportSpec;
use crate::session::config::real_time;
use crate::session::paths::client_paths;
use crate::session::perf_view::{print_event, print_summary};

/// Arguments of `braid perf`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    mode: Mode,
    #[command(flatten)]
    traces: crate::traces::TraceArgs,
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
    /// Transport profile of the sender (congestion control and scheduler), `PROFILE` or
    /// `PROFILE+CC` (`braid profiles`).
    #[arg(long, default_value = "mptcp")]
    profile: TransportSpec,
    /// Congestion controller of the sender on every path, replacing the profile's: reno,
    /// lia, olia, cubic, bbr, tfrc, marc or fixed-bdp.
    #[arg(long, value_name = "NAME")]
    cc: Option<String>,
    /// Serve one client, then exit.
    #[arg(short = '1', long = "one-off")]
    one_off: bool,
    /// Runtime worker threads (default 1). A connection's protocol work is one task, on one
    /// thread at a time: more threads serve several clients in parallel, while one
    /// connection only pays for cross-thread wake-ups.
    #[arg(long, value_name = "N")]
    threads: Option<usize>,
    #[command(flatten)]
    tls: crate::cmd::tls::ServerTls,
}

#[derive(Debug, clap::Args)]
struct ClientArgs {
    /// Server address (or use --scenario).
    #[arg(required_unless_present = "scenario", conflicts_with = "scenario")]
    addr: Option<SocketAddr>,
    /// One path per flag: local address (IP or IP:PORT), optionally @INTERFACE
    /// (SO_BINDTODEVICE, Linux) and /ROLE (wifi, lte, 3g or wired: the radio the path's
    /// announcement names, which the server's scheduler goes by; default wired). Default:
    /// one path from any local address.
    #[arg(long = "path", value_name = "LOCAL[@IFACE][/ROLE]", conflicts_with = "scenario")]
    paths: Vec<String>,
    /// Run server, emulated paths and client in this process, from a scenario file.
    #[arg(long, value_name = "FILE")]
    scenario: Option<PathBuf>,
    /// Transport profile, `PROFILE` or `PROFILE+CC` (`braid profiles`).
    #[arg(long, default_value = "mptcp")]
    profile: TransportSpec,
    /// Congestion controller on every path, replacing the profile's (reno, lia, olia,
    /// cubic, bbr, tfrc, marc or fixed-bdp): with --scenario the sender's; with ADDR this
    /// end's (the sender's is the server's `--cc`).
    #[arg(long, value_name = "NAME")]
    cc: Option<String>,
    /// Seconds to run (default 10; with --scenario, the scenario's duration).
    #[arg(short = 't', long = "time", value_name = "S", allow_negative_numbers = true)]
    time: Option<f64>,
    /// Print only the JSON report on stdout.
    #[arg(short = 'J', long = "json")]
    json: bool,
    /// With --scenario: run server and client in the TUN network-namespace bed built from
    /// the scenario (root), any profile, built-in or kernel.
    #[arg(long, requires = "scenario")]
    bed: bool,
    /// Kernel profiles: the application reads at most this rate (as in scenario files,
    /// e.g. `3mbit`), as a player consuming a stream does; default: as fast as data
    /// arrives.
    #[arg(long, value_name = "RATE")]
    read_rate: Option<String>,
    /// kernel-mptcp-qe: what aeSUM samples for WiFi, `capacity` (default: the larger of
    /// WiFi's arrivals and the sender's delivery rate on it) or `observed` (the arrivals
    /// only, as the paper; an ablation).
    #[arg(long, value_name = "observed|capacity", hide = true)]
    qe_forecast: Option<String>,
    /// Runtime worker threads (default 1; 2 with --scenario, which runs server, relays and
    /// client in this process). The connection's protocol work is one task, on one thread at
    /// a time: more threads do not speed one connection up.
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
    /// Offer only this TLS 1.3 cipher suite: aes256-gcm, aes128-gcm (quinn's perf tool's
    /// choice, for a like-for-like comparison) or chacha20; default: all three, AES-256-GCM
    /// first.
    #[arg(long, value_name = "NAME", conflicts_with = "scenario", value_parser = parse_cipher)]
    cipher: Option<braid_io::tls::Suites>,
    #[command(flatten)]
    tls: crate::cmd::tls::ClientTls,
}

/// `--cipher NAME`.
fn parse_cipher(s: &str) -> Result<braid_io::tls::Suites, String> {
    use braid_io::tls::Suites;
    match s {
        "aes256-gcm" => Ok(Suites::Aes256Gcm),
        "aes128-gcm" => Ok(Suites::Aes128Gcm),
        "chacha20" => Ok(Suites::Chacha20),
        _ => Err(format!("unknown cipher {s:?}: aes256-gcm, aes128-gcm or chacha20")),
    }
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    args.traces.prepare(false)?;
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
    if let Some(done) = noq_hook(&args.mode, &args.traces) {
        return done;
    }
    if let Some(done) = kernel_hook(&args.mode, &args.traces) {
        return done;
    }
    let rt = builder.enable_all().build().context("starting the async runtime")?;
    // On a multi-thread runtime the command runs on a worker, not on this thread: its
    // reads and writes wake the connection's task (and are woken by it) once per message,
    // and a wake-up from a worker to a task on that worker stays on the worker.
    type Command = std::pin::Pin<Box<dyn Future<Output = anyhow::Result<()>> + Send>>;
    let on_worker = |f: Command| -> anyhow::Result<()> {
        rt.block_on(async { tokio::spawn(f).await.context("the command's task failed")? })
    };
    match (args.mode, threads) {
        (Mode::Server(a), 1) => rt.block_on(server(a)),
        (Mode::Client(a), 1) => rt.block_on(client(a)),
        (Mode::Server(a), _) => on_worker(Box::pin(server(a))),
        (Mode::Client(a), _) => on_worker(Box::pin(client(a))),
    }
}

/// A client's `--interval` (at least 0.1 s) and `--time` (positive), checked.
fn check_timing(interval: f64, time: Option<f64>) -> anyhow::Result<()> {
    if !(interval.is_finite() && interval >= 0.1) {
        bail!("--interval must be at least 0.1 s, got {interval}");
    }
    if let Some(t) = time
        && !(t.is_finite() && t > 0.0)
    {
        bail!("--time must be a positive number of seconds, got {t}");
    }
    Ok(())
}

/// A client's run options from its `--interval` and `--time` (checked first).
fn client_options(a: &ClientArgs) -> anyhow::Result<ClientOptions> {
    check_timing(a.interval, a.time)?;
    Ok(ClientOptions {
        time: a.time.map(Duration::from_secs_f64),
        interval: Duration::from_secs_f64(a.interval),
    })
}

/// What a client does with each event of its run: prints it, unless the report goes out
/// as JSON at the end.
fn event_printer(json: bool) -> impl FnMut(Event<'_>) {
    move |e: Event<'_>| {
        if !json {
            print_event(e);
        }
    }
}

/// `noq-multipath` runs: n0's noq multipath QUIC at both ends, on real sockets
/// ([`braid_io::noq_perf`]); `None` for any other profile.
fn noq_hook(mode: &Mode, traces: &crate::traces::TraceArgs) -> Option<anyhow::Result<()>> {
    use braid_io::noq_perf::{self, NAME};
    let (profile, cc, threads) = match mode {
        Mode::Server(a) => (&a.profile, &a.cc, a.threads),
        Mode::Client(a) => (&a.profile, &a.cc, a.threads),
    };
    if !profile.is_noq() {
        return None;
    }
    let run = || -> anyhow::Result<()> {
        if cc.is_some() {
            bail!("--cc: {NAME} runs noq's own congestion controller");
        }
        if traces.qlog.is_some() || traces.pcap.is_some() || traces.keylog.is_some() {
            bail!("--qlog, --pcap and --keylog trace Braid's transport; {NAME} runs noq");
        }
        let rt = match threads.unwrap_or(1) {
            0 => bail!("--threads must be at least 1"),
            1 => tokio::runtime::Builder::new_current_thread(),
            n => {
                let mut b = tokio::runtime::Builder::new_multi_thread();
                b.worker_threads(n);
                b
            }
        }
        .enable_all()
        .build()
        .context("starting the async runtime")?;
        match mode {
            Mode::Server(a) => {
                let identity = a.tls.identity()?;
                rt.block_on(async {
                    let serve = noq_perf::run_server(
                        a.listen,
                        &identity.crypto,
                        a.one_off,
                        |at| println!("Server listening on {at} (profile {NAME})"),
                        |peer| println!("Accepted connection from {peer}"),
                    );
                    tokio::select! {
                        r = serve => r.context("the noq server"),
                        _ = tokio::signal::ctrl_c() => Ok(()),
                    }
                })
            }
            Mode::Client(a) => {
                if a.read_rate.is_some() || a.qe_forecast.is_some() {
                    bail!("--read-rate and --qe-forecast apply to the kernel profiles");
                }
                let options = client_options(a)?;
                let mut on_event = event_printer(a.json);
                let run = match (&a.scenario, a.addr) {
                    (Some(file), _) if a.bed => {
                        // A server and a client process of this profile across the bed.
                        let options = crate::cmd::kernel::BedRunOptions {
                            threads: a.threads,
                            ..Default::default()
                        };
                        crate::cmd::kernel::perf_bed(file, NAME, a.time, a.interval, &options)?
                    }
                    (Some(file), _) => {
                        let scenario = Scenario::load(file)?;
                        rt.block_on(noq_perf::run_scenario(&scenario, options, &mut on_event))
                            .with_context(|| format!("{NAME} run of {}", file.display()))?
                    }
                    (None, Some(addr)) => {
                        // Every --path is a path (noq-multipath uses them all).
                        let all = braid_transport::profile::lookup("mptcp")?;
                        let paths: Vec<PerfPath> = client_paths(&a.paths, addr, &all)?
                            .into_iter()
                            .map(|p| PerfPath { name: p.name, spec: p.spec, capacity_bps: None })
                            .collect();
                        let crypto = a.tls.crypto_offering(a.cipher.unwrap_or_default())?;
                        rt.block_on(noq_perf::run_client(&paths, &crypto, options, &mut on_event))
                            .with_context(|| format!("{NAME} run from {addr}"))?
                    }
                    (None, None) => bail!("give a server address or --scenario FILE"),
                };
                if a.json {
                    println!("{}", run.report.to_json_pretty()?);
                } else {
                    print_summary(&run);
                }
                Ok(())
            }
        }
    };
    Some(run())
}

/// Kernel profiles and `--bed` runs ([`crate::cmd::kernel`]); `None`: the built-in
/// transport in this process.
fn kernel_hook(mode: &Mode, traces: &crate::traces::TraceArgs) -> Option<anyhow::Result<()>> {
    use crate::cmd::kernel;
    use braid_io::kernel::KernelProfile;
    // Kernel sockets run the kernel's controllers (cubic by default) and have no qlog
    // events.
    let kernel_refuses = |profile: &TransportSpec, cc: Option<&String>| -> anyhow::Result<String> {
        if traces.qlog.is_some() {
            bail!("--qlog traces the built-in transport; {profile} runs on kernel sockets");
        }
        kernel::kernel_cc(profile.cc_with(cc.map(String::as_str)).as_deref())
    };
    match mode {
        Mode::Server(a) => {
            let k = a.profile.kernel()?;
            Some(
                kernel_refuses(&a.profile, a.cc.as_ref())
                    .and_then(|cc| kernel::perf_server(a.listen, k, &cc, a.one_off, &a.tls)),
            )
        }
        Mode::Client(a) => {
            let check = || check_timing(a.interval, a.time);
            let k = a.profile.kernel();
            if a.read_rate.is_some() && k.is_none() {
                return Some(Err(anyhow::anyhow!(
                    "--read-rate applies to the kernel profiles (the built-in perf reader reads as fast as data arrives)"
                )));
            }
            let read_rate = match a.read_rate.as_deref().map(kernel::parse_rate).transpose() {
                Ok(r) => r,
                Err(e) => return Some(Err(e)),
            };
            let forecast = match a.qe_forecast.as_deref() {
                None => braid_io::kernel::meter::Forecast::default(),
                Some(f) => match braid_io::kernel::meter::Forecast::parse(f) {
                    Some(f) if k.and_then(KernelProfile::aesum).is_some() => f,
                    Some(_) => {
                        return Some(Err(anyhow::anyhow!(
                            "--qe-forecast applies to kernel-mptcp-qe only"
                        )));
                    }
                    None => {
                        return Some(Err(anyhow::anyhow!(
                            "--qe-forecast: `{f}` is neither observed nor capacity"
                        )));
                    }
                },
            };
            let kernel_cc = match k {
                Some(_) => match kernel_refuses(&a.profile, a.cc.as_ref()) {
                    Ok(cc) => cc,
                    Err(e) => return Some(Err(e)),
                },
                None => String::new(),
            };
            let run = match (&a.scenario, a.bed, k) {
                (Some(file), true, _) => check().and_then(|()| {
                    if traces.pcap.is_some() {
                        bail!(
                            "--pcap captures the UDP relay emulator's paths; across the bed capture on its devices instead (tcpdump in the bed's namespaces)"
                        );
                    }
                    let options = kernel::BedRunOptions {
                        cc: a.profile.cc_with(a.cc.as_deref()),
                        qlog: traces.qlog.clone(),
                        keylog: traces.keylog.clone(),
                        threads: a.threads,
                        read_rate: a.read_rate.clone(),
                        qe_forecast: a.qe_forecast.clone(),
                    };
                    kernel::perf_bed(file, a.profile.base_name(), a.time, a.interval, &options)
                }),
                (Some(_), false, Some(_)) => {
                    Err(anyhow::anyhow!(kernel::needs_bed(
                        &a.profile.to_string(),
                        "the UDP relay emulator"
                    )))
                }
                (None, _, Some(k)) => check().and_then(|()| {
                    let addr = a.addr.context("give a server address or --scenario FILE")?;
                    let options = client_options(a)?;
                    let reader = braid_io::kernel::perf::Reader {
                        rate_bps: read_rate,
                        forecast,
                        ..Default::default()
                    };
                    kernel::perf_client(addr, &a.paths, k, &kernel_cc, options, reader, a.json, &a.tls)
                }),
                _ => return None,
            };
            Some(run.and_then(|run| {
                if a.json {
                    println!("{}", run.report.to_json_pretty()?);
                } else {
                    if a.bed {
                        for i in &run.report.intervals {
                            print_event(Event::Interval(i));
                        }
                    }
                    print_summary(&run);
                }
                Ok(())
            }))
        }
    }
}

async fn server(a: ServerArgs) -> anyhow::Result<()> {
    let profile = a.profile.braid_profile(a.cc.as_deref(), "this server")?;
    let name = profile.name.clone();
    let events = Arc::new(move |e: ServerEvent| match e {
        ServerEvent::Listening(addr) => {
            println!("Server listening on {addr} (profile {name})");
        }
        ServerEvent::Accepted { connection_id, remote } => {
            println!("Accepted connection {connection_id:016x} from {remote}");
        }
        ServerEvent::Served(s) => println!(
            "Connection {:016x}: queued {} in {:.2} s ({}), {} packets lost; ended: {}",
            s.connection_id,
            fmt_bytes(s.bytes_queued),
            s.seconds,
            fmt_rate(s.bytes_queued as f64 * 8.0 / s.seconds.max(1e-9)),
            s.lost_packets,
            s.ended
        ),
    });
    let shutdown = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let config = real_time(&profile, Side::Server, None);
    let identity = a.tls.identity()?;
    let stats =
        perf::run_server(a.listen, config, identity.crypto, a.one_off, shutdown, events).await?;
    if stats.dropped_unknown > 0 {
        println!("Dropped {} datagrams that belonged to no connection", stats.dropped_unknown);
    }
    Ok(())
}

async fn client(a: ClientArgs) -> anyhow::Result<()> {
    let options = client_options(&a)?;
    let profile = a.profile.braid_profile(a.cc.as_deref(), "this client")?;
    let mut on_event = event_printer(a.json);
    let run = match &a.scenario {
        Some(file) => {
            let scenario = Scenario::load(file)?;
            let server = real_time(&profile, Side::Server, None);
            let client = real_time(&profile, Side::Client, None);
            perf::run_scenario(&scenario, &profile, server, client, options, &mut on_event).await?
        }
        None => {
            let Some(addr) = a.addr else { bail!("give a server address or --scenario FILE") };
            let paths = client_paths(&a.paths, addr, &profile)?
                .into_iter()
                .map(|p| PerfPath { name: p.name, spec: p.spec, capacity_bps: None })
                .collect();
            let config = real_time(&profile, Side::Client, None);
            let crypto = a.tls.crypto_offering(a.cipher.unwrap_or_default())?;
            perf::run_client(addr, paths, &profile, config, crypto, options, &mut on_event).await?
        }
    };
    if a.json {
        println!("{}", run.report.to_json_pretty()?);
    } else {
        print_summary(&run);
    }
    Ok(())
}
