//! The kernel profiles (`kernel-tcp`, `kernel-mptcp`, `kernel-mptcp-qe`) in `braid perf`,
//! and every profile's perf run across the TUN bed (`perf client --scenario FILE --bed`).

use std::io::Read as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::Ordering;

use anyhow::{Context as _, bail};
use braid_io::bed::{Bed, BedNames};
use braid_io::kernel::perf::{self as kperf, KernelPath};
use braid_io::kernel::{self, KernelProfile};
use braid_io::perf::{ClientOptions, ClientRun, Event, PerfReport};
use braid_netem::scenario::Scenario;
use braid_transport::profile;

use crate::choice::{TransportChoice, TransportSpec};
use crate::session::bed::BedProfile;

use crate::cmd::bed::{client_path_args, end_child, in_ns, start_server, stop_flag, wait_or_stop};

/// The one error line a kernel profile gets where only the simulator or the UDP relay
/// would run it.
pub fn needs_bed(name: &str, what: &str) -> String {
    format!(
        "profile {name} runs on real kernel sockets, which {what} cannot carry; run it across the TUN bed with --bed (root)"
    )
}

/// The controllers a kernel socket may be given with `--cc` / `PROFILE+CC`.
pub const KERNEL_CCS: [&str; 3] = ["cubic", "reno", "bbr"];

/// The socket controller for a kernel profile: `cc` when it is one the kernel runs per
/// socket, [`kernel::DEFAULT_CC`] when none is given.
pub fn kernel_cc(cc: Option<&str>) -> anyhow::Result<String> {
    match cc {
        None => Ok(kernel::DEFAULT_CC.to_string()),
        Some(c) if KERNEL_CCS.contains(&c) => Ok(c.to_string()),
        Some(c) => bail!(
            "--cc {c}: the kernel profiles run the kernel's own controllers ({}); {c} is one of Braid's",
            KERNEL_CCS.join(", ")
        ),
    }
}

/// Refuses the trace flags a kernel profile cannot honour (qlog traces Braid's own
/// transport; pcap captures emulated UDP paths).
pub fn refuse_traces(profile: &str, traces: &crate::traces::TraceArgs) -> anyhow::Result<()> {
    if traces.qlog.is_some() {
        bail!("--qlog traces the built-in transport; {profile} runs on kernel sockets");
    }
    if traces.pcap.is_some() {
        bail!(
            "--pcap captures the built-in transport's emulated paths; {profile} runs on kernel sockets"
        );
    }
    Ok(())
}

/// In a comparison, `--cc` with `noq-multipath` (`profile`) among the rows: noq runs its
/// own controller, so the other rows name theirs with `PROFILE+CC`.
pub fn refuse_cc_beside_noq(profile: &str, cc: Option<&str>) -> anyhow::Result<()> {
    if cc.is_some() {
        bail!(
            "--cc: profile {profile} runs noq's own congestion controller; name the others' \
             controllers per profile (PROFILE+CC) instead"
        );
    }
    Ok(())
}

/// The flags `noq-multipath` cannot take in `serve` and `play`: its controller (`--cc`)
/// and traces are noq's own.
pub fn refuse_for_noq(cc: Option<&str>, traces: &crate::traces::TraceArgs) -> anyhow::Result<()> {
    let name = braid_io::noq_perf::NAME;
    if cc.is_some() {
        bail!("--cc: {name} runs noq's own congestion controller");
    }
    if traces.qlog.is_some() || traces.keylog.is_some() || traces.pcap.is_some() {
        bail!("--qlog, --pcap and --keylog trace Braid's transport; {name} runs noq");
    }
    Ok(())
}

/// The kernel paths of `--path` texts (the same syntax as the built-in transport's; one
/// path for `kernel-tcp`).
pub fn kernel_paths(
    path_texts: &[String],
    addr: SocketAddr,
    profile: KernelProfile,
) -> anyhow::Result<Vec<KernelPath>> {
    let mut named =
        crate::session::paths::client_paths(path_texts, addr, &profile::lookup("mptcp")?)?;
    if !profile.multipath() {
        named.truncate(1);
    }
    Ok(named
        .iter()
        .map(|p| KernelPath {
            name: p.name.clone(),
            local: (!p.spec.local.ip().is_unspecified()).then(|| p.spec.local.ip()),
            role: p.spec.role,
            capacity_bps: None,
        })
        .collect())
}

/// `braid perf server` with a kernel profile.
pub fn perf_server(
    listen: SocketAddr,
    profile: KernelProfile,
    cc: &str,
    one_off: bool,
    tls: &crate::cmd::tls::ServerTls,
) -> anyhow::Result<()> {
    let identity = tls.identity()?;
    let listener = kernel::socket::listen(profile, listen, cc)?;
    let local = listener.local_addr().context("listening address")?;
    println!("Server listening on {local} (profile {}, congestion control {cc})", profile.name(),);
    let stop = stop_flag();
    kperf::run_server(listener, cc, identity.crypto, one_off, stop, |peer| {
        println!("Accepted connection from {peer}");
    })?;
    Ok(())
}

/// `braid perf client ADDR` with a kernel profile.
#[allow(clippy::too_many_arguments)]
pub fn perf_client(
    addr: SocketAddr,
    path_texts: &[String],
    profile: KernelProfile,
    cc: &str,
    options: ClientOptions,
    reader: kperf::Reader,
    json: bool,
    tls: &crate::cmd::tls::ClientTls,
) -> anyhow::Result<ClientRun> {
    let paths = kernel_paths(path_texts, addr, profile)?;
    let crypto = tls.crypto()?;
    let mut on_event = move |e: Event<'_>| {
        if !json {
            crate::session::perf_view::print_event(e);
        }
    };
    let run =
        kperf::run_client(addr, &paths, profile, cc, &crypto, options, &reader, &mut on_event)?;
    Ok(run)
}

/// Flags of a bed run handed on to the server and client processes in the bed.
#[derive(Debug, Clone, Default)]
pub struct BedRunOptions {
    /// `--cc`: both ends' controller (the server's is the sender's).
    pub cc: Option<String>,
    /// `--qlog DIR`: each end writes its own trace there.
    pub qlog: Option<PathBuf>,
    /// `--keylog FILE`: both ends append their secrets.
    pub keylog: Option<PathBuf>,
    /// `--threads N` for the client.
    pub threads: Option<usize>,
    /// `--read-rate RATE` for a kernel profile's client.
    pub read_rate: Option<String>,
    /// `--qe-forecast` for `kernel-mptcp-qe`'s client.
    pub qe_forecast: Option<String>,
}

impl BedRunOptions {
    /// The flags for `braid perf server` (`client == false`) or `braid perf client`.
    fn args(&self, client: bool) -> anyhow::Result<Vec<String>> {
        let mut v = Vec::new();
        if let Some(cc) = &self.cc {
            v.extend(["--cc".to_string(), cc.clone()]);
        }
        for (flag, path) in [("--qlog", &self.qlog), ("--keylog", &self.keylog)] {
            if let Some(p) = path {
                let abs =
                    std::path::absolute(p).with_context(|| format!("{flag} {}", p.display()))?;
                v.extend([flag.to_string(), abs.display().to_string()]);
            }
        }
        if client && let Some(n) = self.threads {
            v.extend(["--threads".to_string(), n.to_string()]);
        }
        if client && let Some(r) = &self.read_rate {
            v.extend(["--read-rate".to_string(), r.clone()]);
        }
        if client && let Some(f) = &self.qe_forecast {
            v.extend(["--qe-forecast".to_string(), f.clone()]);
        }
        Ok(v)
    }
}

/// `braid perf client --scenario FILE --bed`: a bed from the scenario, `braid perf
/// server` in its server namespace and `braid perf client -J` in its client namespace,
/// one path per scenario path; the report names the scenario's paths.
pub fn perf_bed(
    file: &Path,
    profile_name: &str,
    time: Option<f64>,
    interval: f64,
    options: &BedRunOptions,
) -> anyhow::Result<ClientRun> {
    let scenario = Scenario::load(file)?;
    if KernelProfile::parse(profile_name).is_none() && profile_name != braid_io::noq_perf::NAME {
        profile::lookup(profile_name)?;
    }
    let stop = stop_flag();
    let bed = Bed::up(&scenario, BedNames::for_process(), scenario.seed)?;
    let time = time.unwrap_or(scenario.duration.as_secs_f64());
    let result = perf_in_bed(&bed, &scenario, profile_name, time, interval, options, &stop);
    bed.down();
    if stop.load(Ordering::SeqCst) {
        bail!("interrupted; the bed was removed");
    }
    result
}

/// One perf run of `profile_name` across `bed` (built from `scenario`).
pub fn perf_in_bed(
    bed: &Bed,
    scenario: &Scenario,
    profile_name: &str,
    time: f64,
    interval: f64,
    options: &BedRunOptions,
    stop: &std::sync::atomic::AtomicBool,
) -> anyhow::Result<ClientRun> {
    let port = "5201";
    let listen = format!("0.0.0.0:{port}");
    let mut server_args: Vec<String> =
        ["perf", "server", "--listen", &listen, "-1", "--profile", profile_name]
            .map(String::from)
            .into();
    server_args.extend(options.args(false)?);
    let mut server = start_server(bed, &server_args)?;
    let exe = std::env::current_exe().context("finding this program")?;
    let mut client = in_ns(&bed.names().client_ns(), &exe)
        .args(["perf", "client", &format!("{}:{port}", bed.server_addr())])
        .args(client_path_args(bed))
        .args(["--profile", profile_name, "--time", &time.to_string()])
        .args(["--interval", &interval.to_string(), "-J", "--server-cert-sha256"])
        .arg(&server.fingerprint)
        .args(options.args(true)?)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("starting the client in the bed")?;
    let mut out = client.stdout.take().context("client stdout")?;
    let mut err = client.stderr.take().context("client stderr")?;
    let out_t = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let err_t = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let status = wait_or_stop(&mut client, stop);
    end_child(&mut server.child);
    let (out, err) = (out_t.join().unwrap_or_default(), err_t.join().unwrap_or_default());
    let Some(status) = status else { bail!("interrupted") };
    // The client's warnings (e.g. kernel-mptcp-qe's endpoints could not be changed).
    for line in err.lines().filter(|l| l.starts_with("warning: ")) {
        eprintln!("{line}");
    }
    if !status.success() {
        let line = err.lines().find(|l| l.starts_with("error:")).unwrap_or("no error message");
        bail!("the perf client in the bed failed: {}", line.trim_start_matches("error: "));
    }
    let mut report: PerfReport =
        serde_json::from_str(&out).context("reading the perf client's report")?;
    report.start.scenario = Some(scenario.name.clone());
    for (i, p) in report.start.paths.iter_mut().enumerate() {
        if let Some(b) = bed.paths().get(i) {
            p.name = b.name.clone();
        }
    }
    for iv in &mut report.intervals {
        for s in &mut iv.streams {
            if let Some(b) = bed.paths().get(s.socket) {
                s.name = b.name.clone();
            }
        }
    }
    for (i, p) in report.end.paths.iter_mut().enumerate() {
        if let Some(b) = bed.paths().get(i) {
            p.name = b.name.clone();
            p.capacity_bps = b.down_bps.unwrap_or(0.0);
        }
    }
    let used = report.end.paths.len();
    let capacity: Option<f64> = bed.paths().iter().take(used).map(|p| p.down_bps).sum();
    report.end.capacity_bps = capacity;
    report.end.share_of_capacity =
        capacity.filter(|c| *c > 0.0).map(|c| report.end.sum_received.bits_per_second / c);
    let messages = report.end.sum_received.bytes / braid_io::perf::MESSAGE_BYTES as u64;
    let connection_id = u64::from_str_radix(&report.start.connection_id, 16).unwrap_or(0);
    Ok(ClientRun { report, connection_id, local: Vec::new(), messages })
}

/// The session report of a bulk perf run across the bed: goodput, per-path throughput and
/// RTT, retransmitted segments (as lost packets).
fn report_of(
    label: &crate::session::report::ReportLabel,
    profile: &str,
    bed: &Bed,
    run: &ClientRun,
) -> braid_sim::SessionReport {
    use crate::session::report::{PathFigures, SessionFigures, build};
    let end = &run.report.end;
    let figures = SessionFigures {
        duration_s: end.sum_received.seconds,
        bytes_delivered: end.sum_received.bytes,
        lost_packets: end.paths.iter().map(|p| p.retransmits).sum(),
        // Without the sender's counters (noq-multipath) there is no loss figure.
        loss_unmeasured: !end.sender_counters,
        paths: end
            .paths
            .iter()
            .enumerate()
            .map(|(i, p)| PathFigures {
                name: p.name.clone(),
                role: bed
                    .paths()
                    .get(i)
                    .map_or("wired", |b| crate::cmd::bed::role_name(b.role))
                    .to_string(),
                bytes_received: p.bytes,
                rtt_ms: p.rtt_ms,
                time_active_s: if p.bytes > 0 { end.sum_received.seconds } else { 0.0 },
                ..PathFigures::default()
            })
            .collect(),
        ..SessionFigures::default()
    };
    build(label, profile, figures)
}

/// `braid compare --scenario FILE --profiles … --bed`: every profile, built-in, kernel or
/// `noq-multipath`, runs the scenario's workload across a bed of its own
/// built from the scenario (the same links and seed for each), one after the other: a bulk
/// transfer between `braid perf` processes, or a stream played in this process
/// ([`crate::session::bed`]).
/// `battery_j` (`--battery`) replaces the scenario's battery, `max_buffer_s`
/// (`--max-buffer`) its download-ahead.
#[allow(clippy::too_many_arguments)]
pub fn compare_bed(
    file: &Path,
    profiles: &[TransportSpec],
    cc: Option<&str>,
    seeds: u32,
    out: Option<&Path>,
    power: &braid_transport::energy::PowerModels,
    battery_j: Option<f64>,
    max_buffer_s: Option<f64>,
) -> anyhow::Result<()> {
    use crate::session::compare::{self, Comparison, ProfileSummary};
    let mut scenario = Scenario::load(file)?;
    if battery_j.is_some() {
        scenario.workload.battery_j = battery_j;
    }
    if let Some(s) = max_buffer_s {
        scenario.set_max_buffer_s(s).map_err(|e| anyhow::anyhow!("--max-buffer: {e}"))?;
    }
    let streaming =
        !matches!(scenario.workload.kind, braid_netem::scenario::WorkloadKind::Bulk { .. });
    // `PROFILE+CC`, or `--cc` for every profile without its own (a kernel profile takes
    // the kernel's controllers only; `noq-multipath` runs noq's own).
    let mut runs_of = Vec::new();
    for spec in profiles {
        let p = spec.to_string();
        if spec.is_noq() {
            refuse_cc_beside_noq(&p, cc)?;
            runs_of.push((p, braid_io::noq_perf::NAME.to_string(), None, BedProfile::Noq));
            continue;
        }
        match spec.resolve(cc)? {
            TransportChoice::Kernel { profile: k, cc } => {
                let kcc = kernel_cc(cc.as_deref()).with_context(|| format!("profile {p}"))?;
                runs_of.push((p, k.name().to_string(), cc, BedProfile::Kernel(k, kcc)));
            }
            TransportChoice::Braid(profile) => {
                let base = p.split_once('+').map_or(p.as_str(), |(b, _)| b).to_string();
                let cc = profile.name.split_once('+').map(|(_, c)| c.to_string());
                runs_of.push((p, base, cc, BedProfile::BuiltIn(profile)));
            }
        }
    }
    if !streaming && !power.is_builtin() {
        bail!(
            "--power applies to stream workloads across the bed (bulk perf runs use the built-in radios)"
        );
    }
    let media = if streaming {
        let mut m = crate::session::compare::RealtimeMedia::load(&scenario)?;
        m.power = power.clone();
        Some(m)
    } else {
        None
    };
    if let Some(dir) = out {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let stop = stop_flag();
    println!(
        "braid compare (bed): scenario \"{}\" ({} paths, TUN bed), profiles {}, {:.0} s",
        scenario.name,
        scenario.paths.len(),
        runs_of.iter().map(|r| r.0.as_str()).collect::<Vec<_>>().join(", "),
        scenario.duration.as_secs_f64()
    );
    let seed_list: Vec<u64> = (0..u64::from(seeds)).map(|i| scenario.seed + i).collect();
    let mut summaries = Vec::new();
    for (p, name, cc, which) in &runs_of {
        let options = BedRunOptions { cc: cc.clone(), ..BedRunOptions::default() };
        let mut runs = Vec::new();
        for &seed in &seed_list {
            let mut label = crate::session::report::ReportLabel::for_scenario(&scenario);
            label.seed = seed;
            let bed = Bed::up(&scenario, BedNames::for_process(), seed)?;
            let run = match &media {
                Some(media) => {
                    crate::session::bed::stream(&bed, media, which, scenario.duration, &stop)
                        .and_then(|o| o.finished())
                        .map(|o| {
                            let mut r = crate::session::report::of_outcome(&label, p, &o);
                            // noq's loss counters stay at its sender, the server.
                            r.loss_unmeasured = matches!(which, BedProfile::Noq);
                            r
                        })
                }
                None => perf_in_bed(
                    &bed,
                    &scenario,
                    name,
                    scenario.duration.as_secs_f64(),
                    1.0,
                    &options,
                    &stop,
                )
                .map(|run| report_of(&label, p, &bed, &run)),
            };
            bed.down();
            if stop.load(Ordering::SeqCst) {
                bail!("interrupted; the bed was removed");
            }
            runs.push(run.with_context(|| format!("profile {p}, seed {seed}"))?);
        }
        let (mean, sd) = compare::statistics(&runs);
        summaries.push(ProfileSummary { profile: p.clone(), mean, sd, runs });
    }
    let c = Comparison { scenario: scenario.name.clone(), seeds: seed_list, profiles: summaries };
    print!("{}", compare::table(&c));
    if let Some(dir) = out {
        compare::write_json(&dir.join("compare.json"), &c, true)?;
    }
    Ok(())
}

/// A rate as scenario files write it (`3mbit`), bit/s.
pub fn parse_rate(text: &str) -> anyhow::Result<f64> {
    match braid_netem::scenario::parse_rate(text) {
        Some(r) if r > 0 => Ok(r as f64),
        _ => bail!("--read-rate: `{text}` is not a rate (e.g. 3mbit, 500kbit)"),
    }
}
