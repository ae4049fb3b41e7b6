//! `braid bed up|down|run --scenario FILE [-- COMMAND…]`: the TUN network-namespace bed
//! ([`braid_io::bed`]) by itself, and the runs that cross it (`perf client --bed`,
//! `compare --bed`).
//!
//! - `up` builds the bed in a background process of its own (the emulator must keep
//!   running) and returns once it is ready; `down` stops that process, which removes
//!   everything the bed made. Both name the bed after the scenario file (the same file,
//!   the same bed) unless `--name SUFFIX` is given.
//! - `run` builds a bed of its own (named after this process), runs COMMAND in the client
//!   namespace with `BRAID_BED_SERVER` (the server's address), `BRAID_BED_CLIENT_NS` and
//!   `BRAID_BED_SERVER_NS` set, and removes the bed when COMMAND ends, on SIGINT or
//!   SIGTERM, and on failure.

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use braid_io::bed::{self, Bed, BedNames};
use braid_netem::scenario::Scenario;

/// Arguments of `braid bed`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    mode: Mode,
}

#[derive(Debug, clap::Subcommand)]
enum Mode {
    /// Build the bed and leave it running (in a background process).
    Up(BedArgs),
    /// Remove a bed made by `up`.
    Down(BedArgs),
    /// Build a bed, run COMMAND in its client namespace, remove the bed.
    Run(RunArgs),
    /// (internal) hold a bed until SIGTERM; what `up` starts.
    #[command(hide = true)]
    Hold(BedArgs),
}

#[derive(Debug, clap::Args)]
struct BedArgs {
    /// The scenario whose paths become cables.
    #[arg(long, value_name = "FILE")]
    scenario: PathBuf,
    /// The bed's name suffix (1–6 lower-case letters or digits; default: from the
    /// scenario file's path).
    #[arg(long, value_name = "SUFFIX")]
    name: Option<String>,
}

#[derive(Debug, clap::Args)]
struct RunArgs {
    /// The scenario whose paths become cables.
    #[arg(long, value_name = "FILE")]
    scenario: PathBuf,
    /// The command (run in the client namespace).
    #[arg(last = true, required = true, value_name = "COMMAND")]
    command: Vec<String>,
}

/// The bed name of `scenario` when none is given: FNV-1a of its canonical path, 6 hex
/// digits.
fn names_for(args: &BedArgs) -> anyhow::Result<BedNames> {
    if let Some(n) = &args.name {
        return Ok(BedNames::new(n)?);
    }
    let canon = std::fs::canonicalize(&args.scenario)
        .with_context(|| format!("cannot read scenario {}", args.scenario.display()))?;
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in canon.to_string_lossy().bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    Ok(BedNames::new(&format!("{:06x}", h & 0xff_ffff))?)
}

fn pid_file(names: &BedNames) -> PathBuf {
    Path::new("/run").join(format!("{}.pid", names.base))
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    if !bed::is_root() {
        bail!("{}", bed::BedError::NotRoot);
    }
    match args.mode {
        Mode::Up(a) => up(&a),
        Mode::Down(a) => down(&a),
        Mode::Run(a) => run_command(&a),
        Mode::Hold(a) => hold(&a),
    }
}

fn describe(bed: &Bed) -> String {
    let paths: Vec<String> =
        bed.paths().iter().map(|p| format!("{} {}→{}", p.name, p.client_ip, p.server_ip)).collect();
    format!(
        "bed {} up: client namespace {}, server namespace {}, server {}, paths {}",
        bed.names().base,
        bed.names().client_ns(),
        bed.names().server_ns(),
        bed.server_addr(),
        paths.join(", ")
    )
}

fn up(a: &BedArgs) -> anyhow::Result<()> {
    let names = names_for(a)?;
    if names.exists() {
        println!("bed {} is already up", names.base);
        return Ok(());
    }
    Scenario::load(&a.scenario)?;
    let exe = std::env::current_exe().context("finding this program")?;
    let mut cmd = Command::new(exe);
    cmd.args(["bed", "hold", "--name", &names.base[bed::PREFIX.len()..], "--scenario"])
        .arg(&a.scenario)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // Its own session: the shell's job control and signals leave it alone.
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let mut child = cmd.spawn().context("starting the bed process")?;
    let out = child.stdout.take().context("bed process output")?;
    let mut line = String::new();
    BufReader::new(out).read_line(&mut line).context("reading the bed process")?;
    if line.starts_with("bed ") {
        print!("{line}");
        return Ok(());
    }
    let mut err = String::new();
    if let Some(e) = child.stderr.take() {
        let _ = BufReader::new(e).read_line(&mut err);
    }
    let _ = child.wait();
    bail!("{}", err.trim().strip_prefix("error: ").unwrap_or(err.trim()))
}

fn hold(a: &BedArgs) -> anyhow::Result<()> {
    let names = names_for(a)?;
    let scenario = Scenario::load(&a.scenario)?;
    let stop = stop_flag();
    let bed = Bed::up(&scenario, names.clone(), scenario.seed)?;
    std::fs::write(pid_file(&names), std::process::id().to_string())
        .context("writing the pid file")?;
    println!("{}", describe(&bed));
    // `up` stops listening once it has read that line: nothing more goes to its pipes.
    if let Ok(null) = std::fs::OpenOptions::new().write(true).open("/dev/null") {
        use std::os::fd::AsRawFd as _;
        // SAFETY: duplicating a valid descriptor onto stdout and stderr.
        unsafe {
            libc::dup2(null.as_raw_fd(), 1);
            libc::dup2(null.as_raw_fd(), 2);
        }
    }
    while !stop.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(50));
    }
    bed.down();
    let _ = std::fs::remove_file(pid_file(&names));
    Ok(())
}

fn down(a: &BedArgs) -> anyhow::Result<()> {
    let names = names_for(a)?;
    if !names.exists() {
        println!("no bed {} is up", names.base);
        return Ok(());
    }
    let pid =
        std::fs::read_to_string(pid_file(&names)).ok().and_then(|s| s.trim().parse::<i32>().ok());
    if let Some(pid) = pid {
        // SAFETY: a signal to the bed process `up` started (its pid file).
        unsafe {
            libc::kill(pid, libc::SIGTERM);
        }
        let until = Instant::now() + Duration::from_secs(5);
        while names.exists() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    // The holder is gone (or never wrote its pid): remove what is left.
    names.remove();
    let _ = std::fs::remove_file(pid_file(&names));
    println!("bed {} down", names.base);
    Ok(())
}

/// Ends `child` (SIGTERM, then SIGKILL after a second) and reaps it.
pub fn end_child(child: &mut Child) {
    if matches!(child.try_wait(), Ok(Some(_))) {
        return;
    }
    // SAFETY: a signal to our own child, by its pid.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let until = Instant::now() + Duration::from_secs(1);
    while Instant::now() < until {
        if matches!(child.try_wait(), Ok(Some(_))) {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// A command in namespace `ns` (`ip netns exec NS PROGRAM ARGS…`).
pub fn in_ns(ns: &str, program: &Path) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", ns]).arg(program);
    c
}

fn run_command(a: &RunArgs) -> anyhow::Result<()> {
    let scenario = Scenario::load(&a.scenario)?;
    let stop = stop_flag();
    let bed = Bed::up(&scenario, BedNames::for_process(), scenario.seed)?;
    eprintln!("{}", describe(&bed));
    let mut child = in_ns(&bed.names().client_ns(), Path::new(&a.command[0]))
        .args(&a.command[1..])
        .env("BRAID_BED_SERVER", bed.server_addr().to_string())
        .env("BRAID_BED_CLIENT_NS", bed.names().client_ns())
        .env("BRAID_BED_SERVER_NS", bed.names().server_ns())
        .spawn()
        .with_context(|| format!("starting {}", a.command[0]))?;
    let status = wait_or_stop(&mut child, &stop);
    bed.down();
    match status {
        None => bail!("interrupted; the bed was removed"),
        Some(s) if s.success() => Ok(()),
        Some(s) => bail!("{} exited with {s}", a.command[0]),
    }
}

/// Waits for `child` unless `stop` is set first (then ends it and returns `None`).
pub fn wait_or_stop(child: &mut Child, stop: &AtomicBool) -> Option<std::process::ExitStatus> {
    loop {
        if stop.load(Ordering::SeqCst) {
            end_child(child);
            return None;
        }
        match child.try_wait() {
            Ok(Some(s)) => return Some(s),
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(_) => return None,
        }
    }
}

/// A server started in the bed's server namespace: its process and the certificate
/// fingerprint it printed.
pub struct BedServer {
    /// The process.
    pub child: Child,
    /// `certificate sha256 HEX`'s HEX.
    pub fingerprint: String,
}

/// Starts `braid ARGS` in the server namespace and waits until it printed its
/// certificate fingerprint and its first line of output (it listens then).
pub fn start_server(bed: &Bed, args: &[String]) -> anyhow::Result<BedServer> {
    let exe = std::env::current_exe().context("finding this program")?;
    let mut child = in_ns(&bed.names().server_ns(), &exe)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("starting the server in the bed")?;
    let err = child.stderr.take().context("server stderr")?;
    let out = child.stdout.take().context("server stdout")?;
    let mut fingerprint = String::new();
    let mut err_lines = BufReader::new(err).lines();
    for line in err_lines.by_ref() {
        let Ok(line) = line else { break };
        if let Some(hex) = line.strip_prefix("certificate sha256 ") {
            fingerprint = hex.trim().to_string();
            break;
        }
        if line.starts_with("error:") {
            end_child(&mut child);
            bail!("the server in the bed failed: {line}");
        }
    }
    let mut first = String::new();
    let mut out = BufReader::new(out);
    let _ = out.read_line(&mut first);
    // Keep draining its output so it never blocks on a full pipe or writes to a closed one.
    std::thread::spawn(move || for _ in out.lines() {});
    std::thread::spawn(move || for _ in err_lines {});
    if fingerprint.is_empty() {
        end_child(&mut child);
        bail!("the server in the bed did not start");
    }
    Ok(BedServer { child, fingerprint })
}

/// `--path` texts for a client in the bed: one per path, `CLIENT_IP/ROLE`.
pub fn client_path_args(bed: &Bed) -> Vec<String> {
    bed.paths()
        .iter()
        .flat_map(|p| ["--path".to_string(), format!("{}/{}", p.client_ip, role_name(p.role))])
        .collect()
}

pub fn role_name(role: braid_transport::PathRole) -> &'static str {
    use braid_transport::PathRole;
    match role {
        PathRole::Wifi => "wifi",
        PathRole::Lte => "lte",
        PathRole::ThreeG => "3g",
        _ => "wired",
    }
}

/// Termination flag shared by the bed runs of this process.
pub fn stop_flag() -> Arc<AtomicBool> {
    static STOP: std::sync::OnceLock<Arc<AtomicBool>> = std::sync::OnceLock::new();
    Arc::clone(STOP.get_or_init(bed::catch_termination))
}
