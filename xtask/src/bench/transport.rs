//! `cargo xtask bench transport [--rounds N] [--secs S] [--quinn-perf BIN] [--braid BIN]`: the loopback
//! table of BENCHMARKS.md ("Transport on real sockets"): kernel TCP (iperf3), quinn's perf
//! tool and `braid perf` (one path, two paths, two runtime threads) in interleaved rounds,
//! goodput and CPU seconds per GB of both ends, as ratios to kernel TCP and to quinn measured
//! in the same run.
//!
//! quinn's perf is the baseline named in the project's anchors: give its binary with
//! `--quinn-perf`, or the bench builds it from `../shared/anchors/quinn` (copied to the
//! system temporary directory first, as its README asks); without either its rows are
//! left out and the bench says so. `--braid BIN` measures that build of `braid` instead of
//! building the tree's release binary (to compare two builds).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::json::{quinn_intervals, sum_received};
use crate::{root, run as run_cmd};

/// One measured run: payload bytes the receiver got, its seconds, CPU seconds of both ends.
#[derive(Debug, Clone, Copy)]
struct Sample {
    bytes: f64,
    secs: f64,
    cpu: f64,
}

impl Sample {
    fn gbit_s(&self) -> f64 {
        self.bytes * 8.0 / self.secs.max(1e-9) / 1e9
    }

    fn cpu_per_gb(&self) -> f64 {
        self.cpu / (self.bytes / 1e9).max(1e-12)
    }
}

/// Runs the bench.
pub fn run(args: &[String]) -> Result<(), String> {
    let mut rounds = 3usize;
    let mut secs = 8u32;
    let mut quinn: Option<PathBuf> = None;
    let mut braid: Option<PathBuf> = None;
    let mut it = args.iter().skip(1);
    while let Some(a) = it.next() {
        let mut value = |name: &str| it.next().cloned().ok_or(format!("{name} needs a value"));
        match a.as_str() {
            "--rounds" => {
                rounds = value("--rounds")?.parse().map_err(|e| format!("--rounds: {e}"))?
            }
            "--secs" => secs = value("--secs")?.parse().map_err(|e| format!("--secs: {e}"))?,
            "--quinn-perf" => quinn = Some(PathBuf::from(value("--quinn-perf")?)),
            "--braid" => braid = Some(PathBuf::from(value("--braid")?)),
            other => return Err(format!("bench transport: unknown argument {other}")),
        }
    }
    if rounds == 0 || secs == 0 {
        return Err("--rounds and --secs must be at least 1".into());
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let braid = match braid {
        Some(b) => b,
        None => super::release_braid()?,
    };
    let quinn = match quinn {
        Some(q) => Some(q),
        None => build_quinn(&cargo)?,
    };
    let mut names: Vec<&str> = vec!["kernel TCP, iperf3 (baseline)"];
    if quinn.is_some() {
        names.push("quinn perf (TLS, AES-128-GCM)");
    }
    names.extend([
        "braid, 1 path",
        "braid, 2 paths",
        "braid, 1 path, --threads 2 both ends",
        "braid, 1 path, --cipher aes128-gcm (quinn's suite)",
    ]);
    let mut samples: Vec<Vec<Sample>> = vec![Vec::new(); names.len()];
    for round in 0..rounds {
        eprintln!("round {} of {rounds}", round + 1);
        let mut k = 0;
        samples[k].push(iperf3(secs, 5621 + round as u16)?);
        k += 1;
        if let Some(q) = &quinn {
            samples[k].push(quinn_perf(q, secs, 5721 + round as u16)?);
            k += 1;
        }
        for (variant, port) in [(0, 5821), (1, 5921), (2, 6021), (3, 6121)] {
            samples[k].push(braid_perf(&braid, secs, port + round as u16, variant)?);
            k += 1;
        }
    }
    let median = |v: &[Sample], f: fn(&Sample) -> f64| {
        let mut x: Vec<f64> = v.iter().map(f).collect();
        x.sort_by(f64::total_cmp);
        x[x.len() / 2]
    };
    let base_rate = median(&samples[0], Sample::gbit_s);
    let base_cpu = median(&samples[0], Sample::cpu_per_gb);
    let quinn_cpu = quinn.as_ref().map(|_| median(&samples[1], Sample::cpu_per_gb));
    println!(
        "loopback, one download, {secs} s, {rounds} interleaved rounds, medians (release builds; CPU = user + system of both ends)"
    );
    println!(
        "| run | goodput Gbit/s | × kernel TCP | CPU s per GB | × kernel TCP | × quinn |\n|---|---:|---:|---:|---:|---:|"
    );
    for (name, v) in names.iter().zip(&samples) {
        let (rate, cpu) = (median(v, Sample::gbit_s), median(v, Sample::cpu_per_gb));
        let vs_quinn = quinn_cpu.map_or("—".to_string(), |q| format!("{:.2}", cpu / q));
        println!(
            "| {name} | {rate:.3} | {:.3} | {cpu:.2} | {:.1} | {vs_quinn} |",
            rate / base_rate,
            cpu / base_cpu
        );
    }
    if quinn.is_none() {
        println!(
            "(quinn's perf not found: give --quinn-perf BIN, or have ../shared/anchors/quinn)"
        );
    }
    Ok(())
}

/// Builds quinn's perf from the anchors, copied to the temporary directory; `None` when
/// the anchors are not there.
fn build_quinn(cargo: &str) -> Result<Option<PathBuf>, String> {
    let src = root().join("../shared/anchors/quinn");
    if !src.join("Cargo.toml").is_file() {
        return Ok(None);
    }
    let dir = std::env::temp_dir().join("braid-bench-quinn");
    if !dir.join("Cargo.toml").is_file() {
        run_cmd(Command::new("cp").arg("-r").arg(&src).arg(&dir))?;
    }
    run_cmd(Command::new(cargo).current_dir(&dir).args([
        "build",
        "--release",
        "-q",
        "-p",
        "perf",
    ]))?;
    Ok(Some(dir.join("target/release/quinn-perf")))
}

/// `cmd` under `/usr/bin/time`, its user + system seconds written to `cpu_file`.
fn spawn_timed(cmd: &mut Command, cpu_file: &Path) -> Result<Child, String> {
    let shown = format!("{cmd:?}");
    Command::new("/usr/bin/time")
        .arg("-o")
        .arg(cpu_file)
        .arg("-f")
        .arg("%U %S")
        .arg(cmd.get_program())
        .args(cmd.get_args())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("starting {shown}: {e}"))
}

fn cpu_of(file: &Path) -> Result<f64, String> {
    let text = std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
    let line = text.lines().rev().find(|l| l.split_whitespace().count() == 2).unwrap_or("");
    let v: Vec<f64> = line.split_whitespace().filter_map(|x| x.parse().ok()).collect();
    if v.len() != 2 {
        return Err(format!("no CPU times in {}: {text}", file.display()));
    }
    Ok(v[0] + v[1])
}

fn scratch(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("braid-bench-{}-{name}", std::process::id()))
}

fn finish(child: Child, what: &str) -> Result<String, String> {
    let out = child.wait_with_output().map_err(|e| format!("{what}: {e}"))?;
    if !out.status.success() {
        return Err(format!("{what} failed: {}", String::from_utf8_lossy(&out.stderr)));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Kernel TCP: `iperf3 -s -1` and `iperf3 -c … -R -J` (the server sends).
fn iperf3(secs: u32, port: u16) -> Result<Sample, String> {
    let (sf, cf) = (scratch("iperf-s"), scratch("iperf-c"));
    let p = port.to_string();
    let server = spawn_timed(Command::new("iperf3").args(["-s", "-1", "-p", &p]), &sf)?;
    std::thread::sleep(Duration::from_millis(500));
    let t = secs.to_string();
    let client = spawn_timed(
        Command::new("iperf3").args(["-c", "127.0.0.1", "-p", &p, "-t", &t, "-R", "-J"]),
        &cf,
    )?;
    let json = finish(client, "iperf3 client")?;
    finish(server, "iperf3 server")?;
    let (bytes, secs) = sum_received(&json).map_err(|e| format!("iperf3 -J output: {e}"))?;
    let cpu = cpu_of(&sf)? + cpu_of(&cf)?;
    Ok(Sample { bytes, secs, cpu })
}

/// quinn's perf: one download stream; its server runs until SIGTERM.
fn quinn_perf(bin: &Path, secs: u32, port: u16) -> Result<Sample, String> {
    let (sf, cf, json) = (scratch("quinn-s"), scratch("quinn-c"), scratch("quinn.json"));
    let listen = format!("127.0.0.1:{port}");
    let server = spawn_timed(Command::new(bin).args(["server", "--listen", &listen]), &sf)?;
    std::thread::sleep(Duration::from_millis(500));
    let t = secs.to_string();
    let client = spawn_timed(
        Command::new(bin)
            .args(["client", &format!("localhost:{port}"), "--ip", "127.0.0.1"])
            .args(["--bi-requests", "1", "--uni-requests", "0", "--upload-size", "0"])
            .args(["--download-size", "1T", "--duration", &t, "--interval", "1", "--json"])
            .arg(&json),
        &cf,
    )?;
    let client_result = finish(client, "quinn-perf client");
    // SIGTERM to quinn-perf itself (the child of `time`), so that `time` writes its usage.
    let time_pid = server.id();
    let children = std::fs::read_to_string(format!("/proc/{time_pid}/task/{time_pid}/children"))
        .unwrap_or_default();
    for pid in children.split_whitespace() {
        let _ = Command::new("kill").args(["-TERM", pid]).status();
    }
    let _ = server.wait_with_output();
    client_result?;
    let text = std::fs::read_to_string(&json).map_err(|e| format!("{}: {e}", json.display()))?;
    // Bytes: the intervals' sums (1 s each, `--interval 1`); the client streams about
    // 0.2 s past its last interval.
    let (bytes, n) = quinn_intervals(&text)
        .map_err(|e| format!("quinn-perf --json output {}: {e}", json.display()))?;
    let intervals = n as f64;
    let _ = std::fs::remove_file(&json);
    let cpu = cpu_of(&sf)? + cpu_of(&cf)?;
    Ok(Sample { bytes: bytes * (intervals + 0.2) / intervals, secs: intervals + 0.2, cpu })
}

/// `braid perf`: variant 0 one path, 1 two paths over loopback, 2 two runtime threads, 3
/// one path offering only AES-128-GCM (as quinn's perf does; by default Braid's endpoints
/// agree on AES-256-GCM).
fn braid_perf(bin: &Path, secs: u32, port: u16, variant: u8) -> Result<Sample, String> {
    use std::io::BufRead as _;
    let (sf, cf) = (scratch("braid-s"), scratch("braid-c"));
    let listen = format!("127.0.0.1:{port}");
    let mut s = Command::new(bin);
    s.args(["perf", "server", "--listen", &listen, "--one-off"]);
    if variant == 2 {
        s.args(["--threads", "2"]);
    }
    let mut server = spawn_timed(&mut s, &sf)?;
    let err = server.stderr.take().ok_or("braid server: no stderr")?;
    let mut fingerprint = String::new();
    let mut lines = std::io::BufReader::new(err).lines();
    for line in lines.by_ref() {
        let line = line.map_err(|e| format!("braid server: {e}"))?;
        if let Some(hex) = line.strip_prefix("certificate sha256 ") {
            fingerprint = hex.trim().to_string();
            break;
        }
    }
    // Keep reading its error output so that it never writes to a closed pipe.
    std::thread::spawn(move || lines.for_each(drop));
    if fingerprint.is_empty() {
        return Err("braid server printed no certificate fingerprint".into());
    }
    let t = secs.to_string();
    let mut c = Command::new(bin);
    c.args(["perf", "client", &listen, "--time", &t, "-J", "--server-cert-sha256", &fingerprint]);
    match variant {
        1 => {
            c.args(["--path", "127.0.0.1", "--path", "127.0.0.1"]);
        }
        2 => {
            c.args(["--threads", "2"]);
        }
        3 => {
            c.args(["--cipher", "aes128-gcm"]);
        }
        _ => {}
    }
    let json = finish(spawn_timed(&mut c, &cf)?, "braid perf client")?;
    finish(server, "braid perf server")?;
    let (bytes, secs) = sum_received(&json).map_err(|e| format!("braid perf -J output: {e}"))?;
    let cpu = cpu_of(&sf)? + cpu_of(&cf)?;
    Ok(Sample { bytes, secs, cpu })
}
