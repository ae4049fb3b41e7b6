//! `braid`: the Braid video player and its tools.
//!
//! Every command reports failure as one `error: …` line on stderr and a non-zero exit.

mod assets;
mod choice;
mod cmd;
mod gui;
mod repro;
mod session;
mod traces;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// A video player with a pluggable multipath transport.
#[derive(Debug, Parser)]
#[command(name = "braid", version, about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Describe a video file: codec, size, frame rate, frames, duration, bit rate.
    Probe(cmd::probe::Args),
    /// PSNR of a distorted video against its reference, as ffmpeg's psnr filter reports it.
    Psnr(cmd::psnr::Args),
    /// Minimum start-up delay and buffers for a clip under a rate or a trace.
    Schedule(cmd::schedule::Args),
    /// Run a scenario in the deterministic simulator.
    Sim(cmd::sim::Args),
    /// Run several profiles on identical conditions and seeds; table, JSON and CSV.
    Compare(cmd::compare::Args),
    /// Combine the outputs of `braid compare --shard K/N` into the unsharded comparison.
    Merge(cmd::merge::Args),
    /// List the transports (Braid profiles and kernel ones) with their parts.
    Profiles(cmd::profiles::Args),
    /// Relay a stream between two transport connections, re-scheduling it (split proxy).
    Proxy(cmd::proxy::Args),
    /// Reproduce a published result beside the paper's figures.
    Repro(cmd::repro::Args),
    /// Run a scenario's paths as UDP relays (real-time network emulation).
    Netem(cmd::netem::Args),
    /// The TUN network-namespace test bed: up, down, or run a command across it (root).
    Bed(cmd::bed::Args),
    /// iperf3-like throughput test over the built-in transport.
    Perf(cmd::perf::Args),
    /// Stream a clip to every client that connects.
    Serve(cmd::serve::Args),
    /// Play a stream from `braid serve`.
    Play(cmd::play::Args),
    /// Play the embedded default clip (headless when there is no display).
    Demo(cmd::demo::Args),
    /// Summarize a qlog trace per path and draw its timeline.
    Trace(cmd::trace::Args),
    /// The QUIC interop runner's endpoints: serve or fetch files with hq-interop.
    Interop(cmd::interop::Args),
}

/// When the process started (for launch-to-first-frame figures).
static LAUNCHED: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();

/// When the process started.
pub fn launched() -> std::time::Instant {
    *LAUNCHED.get_or_init(std::time::Instant::now)
}

fn main() -> ExitCode {
    launched();
    // A panic is a bug; still, the user gets one error line and no backtrace.
    std::panic::set_hook(Box::new(|info| {
        let msg = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown".into());
        let at =
            info.location().map(|l| format!(" at {}:{}", l.file(), l.line())).unwrap_or_default();
        eprintln!("error: internal error: {msg}{at}");
    }));
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => {
            // --help and --version
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            // clap's message is several lines (usage, hints); keep the first, which names
            // the problem, so every failure is one `error: …` line.
            let text = e.render().to_string();
            let head = text.split("\n\n").next().unwrap_or("invalid arguments");
            let head = head.split_whitespace().collect::<Vec<_>>().join(" ");
            let head = head.strip_prefix("error: ").unwrap_or(&head);
            eprintln!("error: {head} (see `braid --help`)");
            return ExitCode::from(2);
        }
    };
    let result = match cli.command {
        Command::Probe(a) => cmd::probe::run(a),
        Command::Psnr(a) => cmd::psnr::run(a),
        Command::Schedule(a) => cmd::schedule::run(a),
        Command::Sim(a) => cmd::sim::run(a),
        Command::Compare(a) => cmd::compare::run(a),
        Command::Merge(a) => cmd::merge::run(a),
        Command::Profiles(a) => cmd::profiles::run(a),
        Command::Proxy(a) => cmd::proxy::run(a),
        Command::Repro(a) => cmd::repro::run(a),
        Command::Netem(a) => cmd::netem::run(a),
        Command::Perf(a) => cmd::perf::run(a),
        Command::Bed(a) => cmd::bed::run(a),
        Command::Serve(a) => cmd::serve::run(a),
        Command::Play(a) => cmd::play::run(a),
        Command::Demo(a) => cmd::demo::run(a),
        Command::Trace(a) => cmd::trace::run(a),
        Command::Interop(a) => cmd::interop::run(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", one_line(&e));
            ExitCode::FAILURE
        }
    }
}

/// The error and its causes on one line, skipping a cause whose text the message before it
/// already includes (many error types print their source themselves).
fn one_line(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if out.contains(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out.replace('\n', " ")
}
